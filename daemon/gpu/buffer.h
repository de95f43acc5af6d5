/* daemon/gpu/buffer.h — a VkBuffer with memory of its own: created, its
 * memory type chosen by property flags, allocated, bound and (optionally)
 * mapped in one call, and destroyed in one call. Every buffer the daemon
 * makes (regions, scratch, the engine's dummy and timestamp buffers) and
 * the benchmark's are made here. */
#ifndef VKG_DAEMON_BUFFER_H
#define VKG_DAEMON_BUFFER_H

#include <stdbool.h>
#include <stddef.h>

#include "device.h"

/* Host memory bound to the buffer in place (VK_EXT_external_memory_host):
 * the buffer is created importable and its memory imported from ptr. The
 * caller checked ptr's and len's alignment (import_align) and asked the
 * driver which memory types may import ptr (type_bits). */
typedef struct gpu_host_import {
	void *ptr;
	VkDeviceSize len;   /* the allocation's size; the buffer must fit in it */
	uint32_t type_bits; /* VkMemoryHostPointerPropertiesEXT.memoryTypeBits */
} gpu_host_import;

typedef struct gpu_buffer_info {
	const char *what;      /* names the buffer in err ("scratch", "staging") */
	VkDeviceSize size;
	VkBufferUsageFlags usage;
	bool shared;           /* the transfer queue uses it too: device_buffer_sharing */
	/* The memory type: the first that has every `required` flag, trying
	 * in turn required|preferred without any `avoided` flag, then
	 * required|preferred, then required alone. */
	VkMemoryPropertyFlags required, preferred, avoided;
	bool map;              /* map the whole memory into *map */
	const gpu_host_import *import; /* or NULL: memory allocated for it */
} gpu_buffer_info;

/* The memory type in `bits` chosen as gpu_buffer_info says, or -1. */
int gpu_memory_type(const device *d, uint32_t bits, VkMemoryPropertyFlags required,
		    VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoided);

/* Make the buffer *info describes, bound to its memory: VK_SUCCESS with
 * *buf, *mem (and *map when info->map; map may be NULL otherwise) set, or
 * the failing VkResult (VK_ERROR_OUT_OF_DEVICE_MEMORY where no memory type
 * fits) with err naming the step and the buffer, and *buf, *mem
 * VK_NULL_HANDLE: nothing is left to destroy. */
VkResult gpu_buffer_create(const device *d, const gpu_buffer_info *info, VkBuffer *buf,
			   VkDeviceMemory *mem, void **map, char *err, size_t errlen);

/* Destroy the buffer and free its memory (which unmaps it); either may be
 * VK_NULL_HANDLE. Both are VK_NULL_HANDLE afterwards. */
void gpu_buffer_destroy(const device *d, VkBuffer *buf, VkDeviceMemory *mem);

#endif
