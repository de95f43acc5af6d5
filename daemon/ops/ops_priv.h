/* daemon/ops/ops_priv.h — what ops.c lends the ops' other files
 * (tensor_ops.c): a connection's region by id, and a checked job into its
 * lane. Not for the layers below. */
#ifndef VKG_DAEMON_OPS_PRIV_H
#define VKG_DAEMON_OPS_PRIV_H

#include "conn.h"
#include "msg.h"
#include "region.h"

/* c's registered region `id`, or NULL. */
region *ops_find_region(conn *c, uint64_t id);

/* Queue job q (checked, bytes and regs filled) on c's lane: a reference
 * on c and on each reg[t], c's in-flight count; the engine answers it
 * (ops_job_done). 0, or a negative code with err (max_inflight, out of
 * memory). */
int ops_enqueue(conn *c, const proto_request *q, const uint64_t bytes[PROTO_T_COUNT],
		region *const regs[PROTO_T_COUNT], proto_err *err);

#endif
