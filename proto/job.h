/* proto/job.h — validation of one linear_backward or linear_forward request's geometry:
 * dimensions, 64-bit sizes, alignment, bounds and overlap. Pure function of
 * the request, the limits and the sizes of the caller's regions; the daemon
 * calls it before a job is queued and the tests call it directly. */
#ifndef VKG_PROTO_JOB_H
#define VKG_PROTO_JOB_H

#include "msg.h"

/* Looks up a region of the calling connection: 0 and *size, or -1. */
typedef int (*proto_region_size_fn)(void *ctx, uint64_t region, uint64_t *size);

/* Slot t's shape, rows × cols, for req's batch, in and out: x batch×in;
 * dy, y batch×out; w, dw out×in; b, db 1×out. A device tensor named as
 * the operand must have exactly this shape (bad_tensor). One table in
 * job.c says each slot's rows, cols and role: a new slot is one entry. */
void proto_slot_shape(const proto_request *req, int t, uint64_t *rows, uint64_t *cols);
/* Is slot t an output of a request of op `op` (written by the job)? */
bool proto_slot_is_output(proto_op op, int t);

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
 * with err set (bad_request, limit, bad_region, out_of_bounds, overlap).
 * A device-tensor operand (is_tensor) has no region: only its bytes are
 * computed and its dims checked here; the daemon checks the tensor itself
 * (its dtype, shape and owner: daemon/ops/tensor_ops.h), and that no
 * output names the same tensor as another operand. */
int proto_job_check(const proto_request *req, const proto_limits *lim,
		    proto_region_size_fn region_size, void *ctx,
		    uint64_t bytes[PROTO_T_COUNT], proto_err *err);

#endif
