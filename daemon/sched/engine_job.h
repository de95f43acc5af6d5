/* daemon/sched/engine_job.h — one validated request on its way through the engine: its
 * request, a reference on each region it names, its trace, and where it
 * was placed when it joined a batch (placement.h). Created by its
 * connection (job_new), owned by the engine once enqueued, freed after its
 * answer (job_free). (proto/job.h, beside it, checks a request.) */
#ifndef VKG_DAEMON_ENGINE_JOB_H
#define VKG_DAEMON_ENGINE_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "job.h"
#include "msg.h"
#include "queue.h"
#include "region.h"
#include "plan.h"

typedef struct job job;
struct engine_lane;

struct job {
	queue_node node;        /* on its lane's queue while queued */
	struct engine_lane *lane; /* its connection's lane, queued and running */
	void *owner;            /* the connection; opaque here */
	proto_request req;
	region *reg[PROTO_T_COUNT]; /* one reference per present tensor */
	uint64_t bytes[PROTO_T_COUNT];
	uint64_t t_recv_ns;     /* its request's frame was whole (the owner sets it; 0: unknown) */
	uint64_t t_queued_ns;
	uint64_t t_submit_ns;
	/* its trace (proto_stage_id): ns per stage, stages with their bit in
	 * stage_mask; the engine fills DECODE..HANDOFF before answering,
	 * engine_job_trace() ANSWER */
	uint64_t stage_ns[PROTO_STAGE_COUNT];
	uint32_t stage_mask;
	uint64_t t_answer_ns;   /* answering its batch began */
	/* placement, set when the job joins a batch (placement_place) */
	variant_plan plan;      /* kernels; split-K only with its partials in scratch */
	uint64_t splitk_off;    /* the partials' offset in the slot's scratch */
	uint64_t splitk_dx_off; /* dX's partials' offset, when plan.input is split-K */
	bool wt;                /* linear_forward: Wᵀ transposed into scratch at wt_off (its GEMM's B) */
	uint64_t wt_off;
	/* linear_backward with an activation: dZ = dY ⊙ act'(y or z) in the
	 * slot's scratch at dz_off (activation.h), what its kernels read as
	 * dY; `act_no_scratch` when it got none (the engine answers it) */
	uint64_t dz_off;
	bool act_no_scratch;
	bool devlocal;          /* tensors copied to scratch and back (device-local path) */
	uint64_t soff[PROTO_T_COUNT]; /* each tensor's offset in scratch, when devlocal */
	bool streamed;          /* devlocal, alone in its batch, copies overlapped (stream.h) */
	bool sums;              /* streamed, dW resumed chunk by chunk from f32 sums at sums_off */
	uint64_t sums_off;      /* in the slot's scratch (stream_place) */
	uint32_t ts_index;      /* its two timestamp queries, when devlocal or ts_direct (set by record_batch) */
	bool ts_direct;         /* not devlocal, its dispatches bracketed by timestamps (record_batch) */
	uint64_t kernel_us;     /* GPU time of its kernels alone, when has_kernel_us */
	bool has_kernel_us;
	proto_stream_tl *stream_tl; /* streamed: its GPU timeline (stream_timeline), or NULL */
	/* its class and estimate (sched/estimate.h), set when enqueued */
	uint32_t cls;
	uint64_t est_key, est_macs, est_ns;
	job *next_spare;        /* on its engine's list of spare jobs (engine_job_new) */
	void *group;            /* the request it is one part of (opaque here: daemon/ops/optim_ops.c) */
};

/* A job for request q (checked by proto_job_check, which gave bytes), owned
 * by `owner` (opaque here), received at t_recv_ns (its trace's start): one
 * reference taken on reg[t] for every present tensor t. NULL when out of
 * memory. */
job *job_new(void *owner, const proto_request *q, const uint64_t bytes[PROTO_T_COUNT],
	     region *const reg[PROTO_T_COUNT], uint64_t t_recv_ns);
/* Drops its region references and frees it (its stream_tl too). NULL is fine. */
void job_free(job *j);
/* job_new's work on j, all zero: the engine's spare jobs (engine_job_new). */
void job_init(job *j, void *owner, const proto_request *q, const uint64_t bytes[PROTO_T_COUNT],
	      region *const reg[PROTO_T_COUNT], uint64_t t_recv_ns);
/* Drops its region references and frees its stream_tl (job_free without
 * the free of j). */
void job_drop_refs(job *j);

/* A device-tensor op run as a job (daemon/ops/tensor_ops.c): tensor_new's
 * zero fill (slot y: the tensor), tensor_write (x: the client's bytes, y:
 * the tensor), tensor_read (x: the tensor, y: the client's bytes). It
 * records copies, not kernels (record.c), and has no placement. */
static inline bool job_is_copy(const job *j)
{
	const proto_op op = j->req.op;
	return op == PROTO_OP_TENSOR_NEW || op == PROTO_OP_TENSOR_WRITE || op == PROTO_OP_TENSOR_READ;
}

/* One parameter of an optimizer step (daemon/ops/optim_ops.c): x its
 * gradient, w the parameter, dw and dx its buffers (momentum_buf; m, v),
 * all device tensors; req.optim the step's hyperparameters, kept by its
 * group (j->group) until the group's last job is answered. It records
 * optim_step (daemon/kernels/optim_step.c), has no placement, is never
 * sliced nor streamed. */
static inline bool job_is_optim(const job *j)
{
	return j->req.op == PROTO_OP_SGD_STEP || j->req.op == PROTO_OP_ADAM_STEP;
}

/* Is slot t's tensor a device tensor (tensor.h), not one in a region? */
static inline bool job_slot_is_device_tensor(const job *j, int t)
{
	return j->reg[t] && j->reg[t]->device_local;
}

/* Does the job name a device tensor in any slot? */
static inline bool job_has_device_tensor(const job *j)
{
	for (int t = 0; t < PROTO_T_COUNT; t++)
		if (job_slot_is_device_tensor(j, t))
			return true;
	return false;
}

/* Is the job's tensor in slot t a device tensor (absent: as good as one)? */
static inline bool job_on_device(const job *j, int t)
{
	return !j->req.t[t].present || job_slot_is_device_tensor(j, t);
}

/* Is every tensor the job names a device tensor (none in a region)? */
static inline bool job_all_device_tensors(const job *j)
{
	bool any = false;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!job_on_device(j, t))
			return false;
		any = any || j->req.t[t].present;
	}
	return any;
}

/* Tensor bytes of a job, all slots together. */
static inline uint64_t job_bytes(const job *j)
{
	uint64_t b = 0;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		b += j->bytes[t];
	return b;
}

/* The multiply-adds a job costs, estimated: batch·in·out for dW, for dX and
 * for linear_forward's Y each, batch·out for db; a copy job's, its bytes / 8. What fairness in time counts (engine_lane). */
static inline uint64_t job_macs(const job *j)
{
	const proto_request *q = &j->req;
	if (job_is_copy(j)) /* a copy's cost: one "multiply-add" per 8 bytes moved */
		return j->bytes[PROTO_T_Y] / 8 + 1;
	if (job_is_optim(j)) /* elementwise: as a copy of its bytes */
		return job_bytes(j) / 8 + 1;
	const uint64_t bio = q->batch * q->in * q->out;
	return (q->t[PROTO_T_DW].present ? bio : 0) + (q->t[PROTO_T_DX].present ? bio : 0) +
	       (q->t[PROTO_T_DB].present ? q->batch * q->out : 0) + (q->t[PROTO_T_Y].present ? bio : 0);
}

/* Is tensor slot t an output of j (dw, db, dx; linear_forward's y and z;
 * a linear_backward's y and z are inputs)? */
static inline bool job_is_output(const job *j, int t)
{
	return proto_slot_is_output(j->req.op, t);
}

#endif
