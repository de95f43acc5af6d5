/* daemon/record.h — recording one batch into its slot's command buffer. */
#ifndef VKG_DAEMON_RECORD_H
#define VKG_DAEMON_RECORD_H

#include "engine.h"

/* VK_SUCCESS, or what vkBeginCommandBuffer / vkEndCommandBuffer returned
 * (the command buffer is then not to be submitted). */
VkResult record_batch(engine *e, uint32_t si);

#endif
