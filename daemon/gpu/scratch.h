/* daemon/gpu/scratch.h — a submission slot's device-local scratch buffer.
 *
 * Two things live there while the slot's batch runs: the device-local
 * copies of large jobs' tensors (the device-local path: inputs copied in,
 * kernels run on GPU memory, outputs copied back to the client's memory, all
 * in the batch's command buffer) and split-K's f32 partial sums. The buffer
 * only grows, up to a cap, and is reused batch after batch; it is only
 * touched while its slot is idle, so growing never races the GPU. */
#ifndef VKG_DAEMON_SCRATCH_H
#define VKG_DAEMON_SCRATCH_H

#include <stdint.h>

#include "device.h"

#define SCRATCH_ALIGN 256u /* every piece starts at a multiple of this */

typedef struct scratch {
	VkBuffer buf;
	VkDeviceMemory mem;
	uint64_t size;
} scratch;

/* Make s at least `bytes` big (rounded up to 1 MiB; the contents are not
 * kept). Returns 0, or -1 with s empty and err set (out of device memory). */
int scratch_reserve(scratch *s, const device *d, uint64_t bytes, char *err, size_t errlen);
void scratch_release(scratch *s, const device *d);

/* n rounded up to SCRATCH_ALIGN. */
static inline uint64_t scratch_round(uint64_t n)
{
	return (n + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* The default cap per slot: a quarter of the largest device-local heap
 * divided among the slots, at most 8 GiB. */
uint64_t scratch_default_cap(const device *d, uint32_t slots);

#endif
