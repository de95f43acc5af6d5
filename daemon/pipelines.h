/* daemon/pipelines.h — compute pipelines for the registry's kernels and the
 * persistent VkPipelineCache behind them (one file per device and driver). */
#ifndef VKG_DAEMON_PIPELINES_H
#define VKG_DAEMON_PIPELINES_H

#include <stdbool.h>

#include "device.h"
#include "msg.h"

/* linear_parameter_backward, linear_input_backward (generic),
 * linear_tiled_gemm (tiled), linear_splitk_gemm + linear_splitk_reduce
 * (splitk: the two passes of split-K), linear_coopmat_gemm (coopmat: f16
 * on cooperative matrices, only where device.coopmat) */
enum { KERN_PARAM, KERN_INPUT, KERN_TILED, KERN_SPLITK, KERN_REDUCE, KERN_COOPMAT, KERN_TILED128, KERN_COUNT };

typedef struct pipelines {
	VkPipelineCache cache;
	char cache_path[640]; /* "" when no cache directory is usable */
	VkDescriptorSetLayout dsl[KERN_COUNT];
	VkPipelineLayout layout[KERN_COUNT];
	VkPipeline pipe[KERN_COUNT][PROTO_DTYPE_COUNT]; /* per storage dtype */
	bool dtype_ok[PROTO_DTYPE_COUNT]; /* pipelines exist for this dtype */
	unsigned built;       /* pipelines created */
	unsigned cache_hits;  /* of those, found in the cache (creation feedback) */
	double build_ms;
} pipelines;

/* Load the cache file (a bad or foreign one is logged and ignored), build
 * every pipeline. Returns 0, or -1 with err. */
int pipelines_init(pipelines *p, const device *d, const char *cache_dir, char *err, size_t errlen);
/* Is there a pipeline of kernel `name` (registry name) for dtype t? */
bool pipelines_serves(const pipelines *p, const char *name, proto_dtype t);

/* Save the cache atomically (temp file, fsync, rename); failures are logged. */
void pipelines_save(const pipelines *p, const device *d);
void pipelines_destroy(pipelines *p, const device *d);

#endif
