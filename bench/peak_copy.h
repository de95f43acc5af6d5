/* bench/peak_copy.c — the device's memory bandwidth as `vkgrad bench`
 * counts it: a device-to-device copy of a buffer much larger than the
 * caches, done two ways, each timed by GPU timestamps around it:
 *
 *   dma     vkCmdCopyBuffer (the driver may run it on a copy engine, slower
 *           than the memory: 850.7 GB/s on an H100 whose kernels copy at
 *           ~2,990 GB/s)
 *   shader  shaders/bench_peak_copy.comp: a compute kernel copying 16-byte
 *           elements, grid-stride, as a kernel of the daemon streams memory
 *
 * GB/s = bytes read + bytes written (2 · size) / GPU time, the way the
 * kernels' lines count theirs (bytes of their tensors read and written);
 * the copy bandwidth (copy_gbps) is the larger of the two ways, the best
 * copy the device does, so a kernel's gbps / copy_gbps is the fraction of
 * the memory's speed it reaches. `bench --peak` prints all three; `bench
 * --kernels` measures them once to report each line's fraction.
 *
 * Each way starts from a destination filled with zeros, and its result is
 * read back at both ends of the buffer (up to 16 MiB each) and compared
 * byte for byte with the pattern the source holds there (bench/peak_ref.h:
 * position-dependent, so data at a wrong offset fails too). */
#ifndef VKG_BENCH_PEAK_COPY_H
#define VKG_BENCH_PEAK_COPY_H

#include <stdbool.h>
#include <stdint.h>

#include "peak_vk.h"

/* Bytes copied: 1 GiB on a GPU (several times any L2), 64 MiB on a CPU
 * device (memcpy-bound; lavapipe). A size is a multiple of 16 (the
 * shader's element), at least 32, at most 16 · (2^32 - 1). */
#define PEAK_COPY_GPU_BYTES (1ull << 30)
#define PEAK_COPY_CPU_BYTES (64ull << 20)
/* the shader's workgroups per SM (VK_NV_shader_sm_builtins' count, else 132; 2 on a CPU) */
#define PEAK_COPY_WGS_PER_SM 16

enum { PEAK_COPY_DMA, PEAK_COPY_SHADER, PEAK_COPY_WAYS };

typedef struct peak_copy_way {
	double med_us, min_us;
	double gbps, best_gbps; /* 2 · bytes / median, / fastest */
	bool ok;                /* both ends read back as the source holds them */
	size_t bad_bytes;       /* bytes of the probes that did not (0 when ok) */
} peak_copy_way;

typedef struct peak_copy_result {
	uint64_t bytes;       /* of one copy */
	unsigned reps;        /* timed copies of each way (after one warm-up) */
	uint32_t groups;      /* the shader's workgroups (of VKG_PEAK_COPY_WG) */
	peak_copy_way way[PEAK_COPY_WAYS];
	int best;             /* the way with the larger gbps (dma on a tie) */
	/* of way[best]: the copy bandwidth, copy_gbps */
	double med_us, min_us, gbps, best_gbps;
	bool ok;              /* both ways' checks passed */
} peak_copy_result;

/* The name of way w: "dma", "shader". */
const char *peak_copy_way_name(int w);

/* Time `reps` copies of `bytes` (0: the default for v's device type) each
 * way on v. 0, or -1 with err (a failed check is not an error: ok false). */
int peak_copy_measure(peak_vk *v, uint64_t bytes, unsigned reps, peak_copy_result *out, char *err,
		      size_t errlen);

#endif
