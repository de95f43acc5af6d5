/* daemon/ops/ops.h — the requests a connection serves, one function per op
 * (hello, register, unregister, linear_backward, stats, ping), and the
 * replies to jobs the engine finished. Where a frame becomes a job:
 * op_linear_backward() in ops.c.
 *
 * The ops sit above the transport: they answer through conn.h's reply
 * functions, and the transport reaches them only through the handler
 * below, which the server gives each connection it opens. */
#ifndef VKG_DAEMON_OPS_H
#define VKG_DAEMON_OPS_H

#include "conn.h"
#include "engine.h"

/* The handler of every client connection: per-connection state (its
 * regions table, its engine lane) made at open and released at close,
 * and each frame decoded and dispatched to its op. */
extern const conn_handler ops_handler;

/* engine_events.done: replies to the job's connection (ctx unused). */
void ops_job_done(void *ctx, job *j, proto_code code, const char *msg, uint64_t queued_us, uint64_t gpu_us,
		  uint32_t batch_jobs);

#endif
