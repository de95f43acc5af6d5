/* proto/job.h — validation of one linear_backward or linear_forward request's geometry:
 * dimensions, 64-bit sizes, alignment, bounds and overlap. Pure function of
 * the request, the limits and the sizes of the caller's regions; the daemon
 * calls it before a job is queued and the tests call it directly. */
#ifndef VKG_PROTO_JOB_H
#define VKG_PROTO_JOB_H

#include "msg.h"

/* Looks up a region of the calling connection: 0 and *size, or -1. */
typedef int (*proto_region_size_fn)(void *ctx, uint64_t region, uint64_t *size);

/* Element count of tensor slot t for the request's dims (no overflow check:
 * call after proto_job_check succeeded). */
uint64_t proto_tensor_elems(const proto_request *req, int t);

/* linear_forward request f as the dX GEMM of a linear_backward one, the
 * kernels' view of it (daemon/kernels/placement.c, dispatch.c): Y = X·Wᵀ is dX' =
 * dY'·W' with in' = out, out' = in, dY' = X, W' = Wᵀ (in × out; the
 * daemon transposes w, or the generic kernel reads it transposed) and dX'
 * = Y; accumulating when f does or has a bias (which the daemon writes
 * into Y first). Only the shape and the slots x, w, y carry over. */
void proto_forward_as_input(const proto_request *f, proto_request *b);

/* Returns 0 and fills bytes[t] for every present tensor, or a negative value
 * with err set (bad_request, limit, bad_region, out_of_bounds, overlap). */
int proto_job_check(const proto_request *req, const proto_limits *lim,
		    proto_region_size_fn region_size, void *ctx,
		    uint64_t bytes[PROTO_T_COUNT], proto_err *err);

#endif
