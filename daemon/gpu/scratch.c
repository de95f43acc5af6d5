/* daemon/gpu/scratch.c — see scratch.h. */
#include "scratch.h"

#include "buffer.h"

void scratch_release(scratch *s, const device *d)
{
	gpu_buffer_destroy(d, &s->buf, &s->mem);
	s->size = 0;
}

int scratch_reserve(scratch *s, const device *d, uint64_t bytes, char *err, size_t errlen)
{
	if (bytes <= s->size)
		return 0;
	scratch_release(s, d);
	const uint64_t size = (bytes + (1u << 20) - 1) >> 20 << 20;
	const gpu_buffer_info bi = {
		.what = "scratch",
		.size = size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.shared = true, /* the transfer queue copies it too (stream.h) */
		/* GPU memory the host cannot see first (where a discrete GPU is
		 * fastest), then any device-local type, then anything */
		.preferred = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
		.avoided = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
	};
	if (gpu_buffer_create(d, &bi, &s->buf, &s->mem, NULL, err, errlen) != VK_SUCCESS)
		return -1;
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
