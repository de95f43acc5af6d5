/* daemon/gpu/scratch.c — see scratch.h. */
#include "scratch.h"

#include <stdio.h>

void scratch_release(scratch *s, const device *d)
{
	if (s->buf)
		vkDestroyBuffer(d->dev, s->buf, NULL);
	if (s->mem)
		vkFreeMemory(d->dev, s->mem, NULL);
	s->buf = VK_NULL_HANDLE;
	s->mem = VK_NULL_HANDLE;
	s->size = 0;
}

int scratch_reserve(scratch *s, const device *d, uint64_t bytes, char *err, size_t errlen)
{
	if (bytes <= s->size)
		return 0;
	scratch_release(s, d);
	const uint64_t size = (bytes + (1u << 20) - 1) >> 20 << 20;
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
				  .size = size,
				  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
					   VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
					   VK_BUFFER_USAGE_TRANSFER_DST_BIT};
	device_buffer_sharing(d, &bci); /* the transfer queue copies it too (stream.h) */
	VkResult r = vkCreateBuffer(d->dev, &bci, NULL, &s->buf);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "creating a %llu-byte scratch buffer failed (VkResult %d)",
			 (unsigned long long)size, r);
		s->buf = VK_NULL_HANDLE;
		return -1;
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->dev, s->buf, &req);
	/* GPU memory the host cannot see first (where a discrete GPU is
	 * fastest), then any device-local type, then anything */
	int mt = -1;
	for (uint32_t i = 0; i < d->mem.memoryTypeCount && mt < 0; i++) {
		VkMemoryPropertyFlags f = d->mem.memoryTypes[i].propertyFlags;
		if ((req.memoryTypeBits & (1u << i)) && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
		    !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
			mt = (int)i;
	}
	if (mt < 0)
		mt = device_memory_type(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	if (mt < 0)
		mt = device_memory_type(d, req.memoryTypeBits, 0);
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
				    .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt};
	r = mt < 0 ? VK_ERROR_OUT_OF_DEVICE_MEMORY : vkAllocateMemory(d->dev, &mai, NULL, &s->mem);
	if (r == VK_SUCCESS)
		r = vkBindBufferMemory(d->dev, s->buf, s->mem, 0);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "allocating %llu bytes of device memory for scratch failed (VkResult %d)",
			 (unsigned long long)req.size, r);
		scratch_release(s, d);
		return -1;
	}
	s->size = size;
	return 0;
}

uint64_t scratch_default_cap(const device *d, uint32_t slots)
{
	uint64_t heap = 0;
	for (uint32_t i = 0; i < d->mem.memoryHeapCount; i++)
		if ((d->mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
		    d->mem.memoryHeaps[i].size > heap)
			heap = d->mem.memoryHeaps[i].size;
	uint64_t cap = heap / 4 / (slots ? slots : 1);
	return cap > (8ull << 30) ? 8ull << 30 : cap;
}
