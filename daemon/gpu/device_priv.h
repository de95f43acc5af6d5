/* daemon/gpu/device_priv.h — what device.c (the instance, the logical
 * device and its capabilities) shares with device_select.c (which physical
 * device). Not for other modules: device.h is the interface. */
#ifndef VKG_DAEMON_DEVICE_PRIV_H
#define VKG_DAEMON_DEVICE_PRIV_H

#include <stdint.h>

#include <vulkan/vulkan.h>

#include "device.h"

/* ---- device_select.c ---- */
/* "discrete", "integrated", "virtual", "cpu" or "other". */
const char *device_type_name(VkPhysicalDeviceType t);
/* The first (up to) 16 queue families of p into q; returns their count. */
uint32_t device_queue_families(VkPhysicalDevice p, VkQueueFamilyProperties q[16]);
/* The device `want` names (an index, a UUID, or text of its name; NULL or
 * empty: the first of the best type), with a compute queue family: into
 * d->phys and d->queue_family, its index into *picked. 0, or -1 with err. */
int device_pick(device *d, const char *want, int *picked, char *err, size_t errlen);

#endif
