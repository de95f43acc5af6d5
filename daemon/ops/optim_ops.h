/* daemon/ops/optim_ops.h — the optimizer steps on device tensors
 * (proto/README.md "Optimizer steps"; proto/optim.h): sgd_step and
 * adam_step. One request names N parameters (1 .. PROTO_OPTIM_MAX_N), each
 * with its gradient and buffers, all tensors of the connection; every
 * check passes before anything is queued (a refused request changes no
 * tensor). Each parameter becomes one job on the connection's lane
 * (engine_job.h job_is_optim), ordered with its other jobs; the N jobs are
 * one group, answered once when the last of them ends (its first failure,
 * if any). A request counts N jobs towards max_inflight; one that would
 * pass it is refused (`limit`) unless nothing of the connection is in
 * flight, so a step of up to PROTO_OPTIM_MAX_N parameters always runs. */
#ifndef VKG_DAEMON_OPTIM_OPS_H
#define VKG_DAEMON_OPTIM_OPS_H

#include "conn.h"
#include "engine_job.h"
#include "msg.h"

void op_optim_step(conn *c, const proto_request *q);

/* ops_job_done's part for a job of a group (j->group): the group's reply
 * once its last job ended, and the group freed. */
void optim_job_done(conn *c, job *j, proto_code code, const char *msg, uint64_t queued_us,
		    uint64_t gpu_us, uint32_t batch_jobs);

#endif
