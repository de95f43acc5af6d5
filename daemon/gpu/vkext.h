/* daemon/gpu/vkext.h — whether a physical device offers an extension. */
#ifndef VKG_DAEMON_VKEXT_H
#define VKG_DAEMON_VKEXT_H

#include <stdbool.h>

#include "vk_compat.h"

/* Does p list extension `name`? false when the list cannot be read. */
bool vkext_has(VkPhysicalDevice p, const char *name);

#endif
