/* bench/peak_copy.h — the device's memory bandwidth as `vkgrad bench` counts
 * it: a device-to-device vkCmdCopyBuffer of a buffer much larger than the
 * caches, GB/s = bytes read + bytes written (2 · size) / GPU time, the way
 * the kernels' lines count theirs (bytes of their tensors read and
 * written), so a kernel's gbps / copy_gbps is the fraction of the copy
 * bandwidth it reaches. `bench --peak` prints it as copy_gbps; `bench
 * --kernels` measures it once to report each line's fraction. */
#ifndef VKG_BENCH_PEAK_COPY_H
#define VKG_BENCH_PEAK_COPY_H

#include <stdbool.h>
#include <stdint.h>

#include "peak_vk.h"

/* Bytes copied: 1 GiB on a GPU (several times any L2), 64 MiB on a CPU
 * device (memcpy-bound; lavapipe). */
#define PEAK_COPY_GPU_BYTES (1ull << 30)
#define PEAK_COPY_CPU_BYTES (64ull << 20)

typedef struct peak_copy_result {
	uint64_t bytes;       /* of one copy */
	unsigned reps;        /* timed copies (after one warm-up) */
	double med_us, min_us;
	double gbps, best_gbps; /* 2 · bytes / median, / fastest */
	bool ok;              /* the copy's first bytes read back as written */
} peak_copy_result;

/* Time `reps` copies of `bytes` (0: the default for v's device type) on v.
 * 0, or -1 with err. */
int peak_copy_measure(peak_vk *v, uint64_t bytes, unsigned reps, peak_copy_result *out, char *err,
		      size_t errlen);

#endif
