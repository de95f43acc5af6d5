/* daemon/sched/internal.h — what the engine's files share among themselves
 * (engine.c: batches submitted and finished, setup; sched/trace.c,
 * sched/track.c, sched/lanes.c). Not for any other module.
 *
 * The room is layered, the owner on top; a file calls only files below it
 * (tests/build/test_layers.sh checks it):
 *
 *   engine.c        forms and finishes batches, answers every job
 *   lanes.c         queues, batch formation     -> stream_chunk, estimate, fair
 *   submit.c        recording and submission    -> stream, track, trace, spin
 *   setup.c         the Vulkan objects          -> stream
 *   stream.c        a streamed job's steps      -> stream_chunk
 *   track.c         completion threads, polling
 *   stream_chunk.c, stream_timeline.c, trace.c, spin.c, estimate.c, fair.c,
 *   engine_job.c, engine_stats.c    leaves
 *
 * Where a lower file must reach the owner it goes through what the owner
 * gave it: track.c's polling finishes the batches it saw done through
 * e->reap (engine_priv.h), never by calling engine.c. */
#ifndef VKG_DAEMON_SCHED_INTERNAL_H
#define VKG_DAEMON_SCHED_INTERNAL_H

#include "engine_priv.h"

/* ---- engine.c ---- */
/* Hand job j's outcome to the owner (engine_events.done). */
void sched_answer(engine *e, job *j, proto_code code, const char *msg, uint64_t queued_us,
		  uint64_t gpu_us, uint32_t batch_jobs);
/* A job the engine is done with: kept as a spare or freed. */
void sched_job_release(engine *e, job *j);
/* (finishing the batches seen done: e->reap, engine_priv.h) */

/* ---- sched/submit.c ---- */
/* Slot si's batch (its next slice, when sliced), formed: recorded and
 * submitted by the submission thread, or here when none runs; the loop
 * polls from now (spin.h). */
void sched_launch(engine *e, uint32_t si);
/* The submission thread (0 or -1), and its end once every slot handed
 * over is submitted (nothing when it does not run). */
int sched_submitter_start(engine *e);
void sched_submitter_stop(engine *e);

/* ---- sched/setup.c ---- */
/* The engine's Vulkan objects on e->dev (0 or -1; sched_gpu_release
 * cleans up either way), and their release (any part of them). */
int sched_gpu_create(engine *e);
void sched_gpu_release(engine *e);
/* VKGRAD_FAULT_INJECT into e's fault settings. */
void sched_parse_faults(engine *e);

/* ---- sched/trace.c ---- */
uint64_t sched_span(uint64_t from, uint64_t to);
/* A fresh pair of GPU and host clock readings, at most once a second. */
void sched_calibrate(engine *e, uint64_t now);
/* The batch's part of each job's trace, from the end of recording to the
 * start of answering (mask: the stages set; to_gpu_end: submission to
 * the GPU's end, as well as known). */
void sched_slot_stages(const engine *e, const engine_slot *s, uint64_t st[PROTO_STAGE_COUNT],
		       uint32_t *mask, uint64_t *to_gpu_end);
/* Job j's stages from its arrival to its batch's answer, the batch's copied in. */
void sched_job_stages(const engine_slot *s, job *j, const uint64_t st[PROTO_STAGE_COUNT],
		      uint32_t mask);

/* ---- sched/track.c ---- */
/* The kind of a single-job batch for its expected end (spin.h), never 0. */
uint64_t sched_job_kind(const job *j);
/* Track t's oldest slot submitted and not yet seen, or NULL (under mu). */
engine_slot *sched_track_oldest(engine_track *t);
/* A track's completion thread (arg: the engine_track). */
void *sched_completion_main(void *arg);
/* Start the tracks' completion threads not running (0, or -1: the rest
 * not started); stop and join those running, each once out of its wait
 * (at most ENGINE_WAIT_NS): true when there were any. Nothing of the
 * device is used by them afterwards. */
int sched_completion_start(engine *e);
bool sched_completion_stop(engine *e);
/* The loop polls (uv_idle) from now, or stops. */
void sched_poll_start(engine *e, uint64_t now);
void sched_poll_stop(engine *e, uint64_t now);
/* A completion thread asked the loop to poll for an expected end. */
void sched_poll_expected(engine *e);
void sched_poll_cb(uv_idle_t *h);

/* ---- sched/lanes.c ---- */
job *sched_lane_first(const engine_lane *l);
/* Job j leaves its lane's in-flight work; frees a closed lane left empty. */
void sched_lane_release(job *j);
/* Lane l active in the class of its first job / in none. */
void sched_lane_activate(engine *e, engine_lane *l);
void sched_lane_deactivate(engine *e, engine_lane *l);
job *sched_lane_pop(engine *e, engine_lane *l);
/* The lane whose turn is next in any class, or NULL. */
engine_lane *sched_active_first(const engine *e);
/* Does class cls have a lane that can give a job now? */
bool sched_class_ready(const engine *e, uint32_t cls);
/* Fill slot s from its class's lanes; the scratch bytes it needs. */
uint64_t sched_take_jobs(engine *e, engine_slot *s);
/* Slot s's slice length in multiply-adds, or 0: not sliced. */
uint64_t sched_slice_len(const engine *e, const engine_slot *s);
/* A free slot of track cls, or e->nslots. */
uint32_t sched_free_slot(const engine *e, uint32_t cls);

#endif
