/* daemon/variant.h — which kernel computes which part of a job.
 *
 * Selection table (AUTO), by shape; a request's `variant` key forces one
 * family for every part of the job:
 *
 *   part            kernel                     when
 *   dW (+ db)       linear_tiled_gemm          out >= 64 and in >= 64
 *                   linear_parameter_backward  otherwise (narrow layers: the
 *                                              seed's row-parallel kernel)
 *   db only         linear_parameter_backward  always (one pass over dY)
 *   dX              linear_tiled_gemm          batch >= 64, in >= 64, out >= 16
 *                   linear_input_backward      otherwise
 *
 * The thresholds are where a 64×64 output tile stops wasting most of its
 * threads; they are measured choices, see README.md ("Kernels"). */
#ifndef VKG_DAEMON_VARIANT_H
#define VKG_DAEMON_VARIANT_H

#include "msg.h"

typedef struct variant_plan {
	int param; /* KERN_* computing dW and/or db, or -1 */
	int input; /* KERN_* computing dX, or -1 */
} variant_plan;

variant_plan variant_choose(const proto_request *q);

#endif
