/* daemon/ops/tensor_ops.h — the device-tensor ops (proto/README.md,
 * "Device tensors"): tensor_new, tensor_write, tensor_read, tensor_free,
 * the connection's tensor table, and the `{"tensor": T}` operands of
 * linear_backward and linear_forward.
 *
 * Ids are the daemon's (one counter for all connections, never reused),
 * valid only on the connection that made them: another connection's id,
 * like an unknown or freed one, is `bad_tensor`. What takes effect on the
 * GPU runs as a job on the connection's lane (sched/engine_job.h,
 * job_is_copy), so it is ordered with the connection's jobs:
 *   tensor_new    allocates now (the limits are checked here), queues the
 *                 zero fill and replies {tensor} once the fill ran: no job
 *                 can see the memory's earlier contents;
 *   tensor_write  queues the copy client memory → tensor (a job reply);
 *   tensor_read   queues the copy tensor → client memory (a job reply,
 *                 sent once the bytes are in the client's memory);
 *   tensor_free   drops the id at once (later use: bad_tensor); the memory
 *                 goes when the last job naming it ends.
 * After a device loss every tensor is `lost` (tensor.h): an op or job
 * naming one answers device_lost; tensor_free of it answers ok. */
#ifndef VKG_DAEMON_TENSOR_OPS_H
#define VKG_DAEMON_TENSOR_OPS_H

#include "conn.h"
#include "msg.h"
#include "region.h"
#include "tensor.h"

#include "tensor.h"

/* c's tensor `id` (its table's, alive or lost), or NULL: not c's. */
tensor *tensor_ops_find(conn *c, uint64_t id);

void op_tensor_new(conn *c, const proto_request *q);
/* tensor_write and tensor_read */
void op_tensor_copy(conn *c, const proto_request *q);
void op_tensor_free(conn *c, const proto_request *q);

/* c's tensor `id`, named by op `opn`'s key `key`, usable: the tensor, or
 * NULL with err (bad_tensor: not c's — unknown, freed, another
 * connection's; device_lost: its contents went with a lost device). For
 * the ops that name tensors by id (sgd_step, adam_step: their message
 * says which key, e.g. "param[3]"). */
tensor *tensor_ops_lookup(conn *c, uint64_t id, const char *opn, const char *key, proto_err *err);

/* A job's device-tensor operands (q->t[t].is_tensor): each found in c's
 * table, alive, of the job's dtype and of the slot's shape, its region
 * into regs[t]; no output naming the same tensor as another slot. 0, or a
 * negative code with err: bad_tensor, device_lost, overlap. */
int tensor_ops_operands(conn *c, const proto_request *q, region *regs[PROTO_T_COUNT],
			proto_err *err);

/* A tensor_new's fill finished (code): 0 and the reply when it went well;
 * else the tensor leaves c's table (the client never learned its id). */
void tensor_ops_new_done(conn *c, const proto_request *q, proto_code code);

/* c closes: every tensor of its table released. */
void tensor_ops_close(conn *c);

/* Tensors and device bytes c holds (the `clients` op). */
void tensor_ops_usage(const conn *c, uint64_t *tensors, uint64_t *device_bytes);

#endif
