/* daemon/variant.h — which kernel computes which part of a job.
 *
 * Selection table (AUTO), by shape; a request's `variant` key forces one
 * family for every part of the job:
 *
 *   part        kernel                     when
 *   dW (+ db)   linear_tiled_gemm          out >= 32, in >= 64, batch*in >= 2^20
 *               linear_parameter_backward  otherwise (narrow layers: the seed's
 *                                          row-parallel kernel)
 *   db only     linear_parameter_backward  always (one pass over dY)
 *   dX          linear_tiled_gemm          batch >= 64, in >= 64, out >= 16,
 *                                          batch*in >= 2^20
 *               linear_input_backward      otherwise
 *
 * Measured on the H200 (GPU µs of a full backward, f32, `vkgrad run
 * --variant`): 256x256x16 generic 30 / tiled 79; 4096x1024x16 generic 854 /
 * tiled 1302 / generic dW + tiled dX 681; 8192x4096x32 generic 13138 / tiled
 * 6010; 2048x1024x1024 generic 11471 / tiled 1703. Small problems favour the
 * simple kernels (the 64x64 tile wastes threads), large ones the tiled. */
#ifndef VKG_DAEMON_VARIANT_H
#define VKG_DAEMON_VARIANT_H

#include "msg.h"

typedef struct variant_plan {
	int param; /* KERN_* computing dW and/or db, or -1 */
	int input; /* KERN_* computing dX, or -1 */
} variant_plan;

variant_plan variant_choose(const proto_request *q);

#endif
