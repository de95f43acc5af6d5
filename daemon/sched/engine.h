/* daemon/sched/engine.h — where jobs become GPU work.
 *
 * The loop thread enqueues validated jobs. Each job gets an estimate of
 * its GPU time (sched/estimate.h, from measured rates) and with it a
 * class: small or large. Each class has its own track: its submission
 * slots, its queue (the compute family's second queue where the device
 * has one), its timeline semaphore and its completion thread, so a small
 * job never waits for a slot or a queue position a large one holds, and
 * nothing on the small queue waits on a large job's semaphore. Within a
 * class, lanes (connections) share by GPU time (sched/fair.h). Whenever a
 * slot of a class is free, engine_pump() records jobs of that class into
 * it, with a barrier only before a job whose regions an earlier job of the
 * batch wrote (or reads what it writes), and submits it signalling the
 * next value of the track's timeline. Where both classes share one queue,
 * large work goes in slices of bounded estimated time (one in flight), so
 * small batches run in between. A completion thread per track waits for
 * those values and wakes the loop (uv_async_t); the loop copies staged
 * outputs back, answers each job through the done callback, drops region
 * references and pumps again. GPU waits therefore never block the loop. */
#ifndef VKG_DAEMON_ENGINE_H
#define VKG_DAEMON_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "device.h"
#include "engine_job.h"
#include "metrics.h"
#include "msg.h"
#include "pipelines.h"

/* submitted slots in submission order: one entry per slot at most */
#define ENGINE_RING CONFIG_MAX_INFLIGHT_BATCHES

typedef struct engine_lane engine_lane;
typedef struct stream stream;

/* What the engine tells its owner, on the loop thread, each callback with
 * its own ctx; given at engine_init. */
typedef void (*engine_done_fn)(void *ctx, job *j, proto_code code, const char *msg,
			       uint64_t queued_us, uint64_t gpu_us, uint32_t batch_jobs);

typedef struct engine_events {
	/* once per job: code PROTO_OK with timings, or a failure. The engine
	 * frees the job and its region references afterwards. */
	engine_done_fn done;
	void *done_ctx;
	/* optional: begin true before answering the jobs of finished batches
	 * and false after, so replies can be written together */
	void (*replies)(void *ctx, bool begin);
	void *replies_ctx;
	/* optional: a device loss, once nothing runs on the lost device any
	 * more (the recovery; it ends with engine_resume, or sets `down`).
	 * NULL: nobody recovers, queued and new jobs are answered device_lost. */
	void (*lost)(void *ctx);
	void *lost_ctx;
} engine_events;

typedef struct engine engine; /* opaque: its fields are daemon/sched/'s (engine_priv.h) */

/* A zeroed engine for engine_init, or NULL (out of memory); engine_free
 * releases it once the loop has run engine_destroy's close callbacks. */
engine *engine_new(void);
void engine_free(engine *e);


int engine_init(engine *e, uv_loop_t *loop, const device *d, const pipelines *pl,
		const config *cfg, const engine_events *ev, char *err, size_t errlen);
/* Stops the completion thread after the GPU is idle and frees everything;
 * every job still queued is answered with `internal` first. The caller
 * closes e->async's handle by running the loop afterwards. */
void engine_destroy(engine *e);

/* job_new, reusing one of e's finished jobs when it has one. The engine
 * frees or keeps every job it was given (engine_enqueue). */
job *engine_job_new(engine *e, void *owner, const proto_request *q,
		    const uint64_t bytes[PROTO_T_COUNT], region *const reg[PROTO_T_COUNT],
		    uint64_t t_recv_ns);

engine_lane *engine_lane_open(engine *e);
/* Answers every job still queued on the lane (`internal`, the connection is
 * gone) and frees it (once its jobs already submitted, which finish
 * normally, are done). */
void engine_lane_close(engine *e, engine_lane *l);
/* Takes ownership of j (and its region references). */
void engine_enqueue(engine *e, engine_lane *l, job *j);
/* A request arrived (or replies went out): the loop keeps polling its
 * sockets for loop_spin_us before it sleeps again (spin.h). */
void engine_activity(engine *e);
/* Record and submit as many batches as free slots allow. */
void engine_pump(engine *e);
bool engine_idle(const engine *e);
/* Answer every queued job with device_lost (`why`). */
void engine_fail_queued(engine *e, const char *why);
/* The engine takes no more work (no usable GPU): every queued job is
 * answered device_lost with `why`. */
void engine_shut_down(engine *e, const char *why);
/* What other modules may ask of the engine: jobs queued and running, and
 * whether the GPU was lost. Only daemon/sched/ touches its fields. */
uint32_t engine_queued(const engine *e);
uint32_t engine_running(const engine *e);
bool engine_lost(const engine *e);
/* Fault injection (--fault-inject recreate=N): true while a device
 * recreation should still fail, counting one down; *left: how many more. */
bool engine_fault_recreate(engine *e, uint64_t *left);
/* The latency histograms and stage windows (metrics.h) that replies feed. */
metrics *engine_metrics(engine *e);

/* Device recovery (recovery.c), on the loop thread, with nothing running:
 * stop the engine's threads, let the device go idle and drop the engine's
 * Vulkan objects before the device goes; make them again on e->dev once it
 * is reopened and start the threads (0, or -1 with err, nothing left
 * made); then resume: clear lost/down and submit what is queued. */
void engine_gpu_release(engine *e);
int engine_gpu_restore(engine *e, char *err, size_t errlen);
void engine_resume(engine *e);


/* j's trace for its reply, with t_encoded (now, as the reply is encoded)
 * ending the ANSWER stage: t_recv_ns and the stages from DECODE to ANSWER
 * (summing to t_encoded - t_recv_ns). Sets j's ANSWER stage. out->present
 * stays false for a job without a known arrival. */
void engine_job_trace(job *j, uint64_t t_encoded, proto_trace *out);

/* The engine's part of stats: jobs and batches, the queue, device-local
 * copies, split-K, dispatches, scratch, the stage metrics, the spin-wait.
 * Loop thread (the counters the completion thread writes are atomic). */
void engine_stats(const engine *e, proto_stats *st);

#endif
