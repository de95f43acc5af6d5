/* daemon/sched/engine_priv.h — the engine's insides: its lanes, slots,
 * tracks and the struct itself. Included by daemon/sched/ alone (through
 * internal.h, stream_priv.h) and by unit tests of the scheduler; every
 * other module has only engine.h's opaque `engine` and its functions. */
#ifndef VKG_DAEMON_SCHED_ENGINE_PRIV_H
#define VKG_DAEMON_SCHED_ENGINE_PRIV_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine.h"
#include "placement.h"
#include "record.h"
#include "region.h"
#include "sched/estimate.h"
#include "sched/fair.h"
#include "scratch.h"
#include "spin.h"
#include "variant.h"

/* Job classes: each has its own track (slots, queue, timeline). */
enum { ENGINE_SMALL, ENGINE_LARGE, ENGINE_CLASSES };

/* One connection's queue, oldest first. Its first job's class says which
 * class's fair share it is active in (fair[cls]); its jobs go in order,
 * and one of another class than the lane's jobs in flight waits until
 * those are done, so a connection's jobs never run on two queues at once
 * (a job that reads what an earlier one wrote sees it; accumulations add
 * up). At most batch_per_client of its jobs join one batch, and its jobs
 * in batches not yet finished add up to at most client_macs multiply-adds,
 * except that its next job always goes once none of its jobs is in
 * flight. */
struct engine_lane {
	queue_node jobs;          /* queued, oldest first (job.node) */
	uint32_t n;
	fair_lane fair[ENGINE_CLASSES];
	uint64_t inflight_macs;   /* of its jobs taken into batches not yet finished */
	uint32_t running;         /* those jobs */
	uint32_t running_cls[ENGINE_CLASSES];
	/* the timeline value of each class's track at which its last finished
	 * job was done, and the class of the job taken last: a job of the other
	 * class waits on that value (a semaphore wait already satisfied, the
	 * dependency the device needs to see its earlier job's writes) */
	uint64_t done_value[ENGINE_CLASSES];
	uint32_t last_cls;
	bool took, switched; /* switched: its job taken last is of another class than the one before */
	bool closed;              /* its connection is gone: freed when running is 0 */
};

typedef struct engine_slot {
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkQueryPool queries; /* the batch's two timestamps, then two per devlocal job */
	uint32_t nqueries;   /* used by the batch recorded last */
	VkBuffer ts_buf;    /* the timestamps, copied there by the GPU */
	VkDeviceMemory ts_mem;
	uint64_t *ts_map;
	job **jobs;
	uint32_t njobs;
	/* the batch's trace, CLOCK_MONOTONIC ns: forming began, recorded,
	 * submitted, its value seen by the completion thread, answering began;
	 * the calibration in force when it was submitted (cal_ok) */
	uint64_t t_take_ns, t_recorded_ns, t_submitted_ns, t_seen_ns, t_answer_ns;
	uint64_t cal_host_ns, cal_dev;
	bool cal_ok;
	/* single-job batch of a kind seen before (spin_expect): the completion
	 * thread wakes the loop to poll at poll_at_ns (0: blocks as usual),
	 * the loop polls until seen or poll_to_ns (under mu) */
	uint64_t poll_at_ns, poll_to_ns;
	uint64_t kind;      /* its one job's job_kind (engine.c); 0 for several jobs */
	uint32_t cls;       /* its track (ENGINE_SMALL, ENGINE_LARGE) */
	uint64_t seq;       /* the batch, counted over all tracks (regions' marks) */
	/* a sliced batch (one large job, shared queue): the slice recorded
	 * last starts at slice_from multiply-adds of slice_len; more follow
	 * while slice_more; the GPU µs of the slices so far */
	uint64_t slice_from, slice_len, slice_gpu_us, slices, slice_next;
	bool slice_more;
	/* the other track's timeline value its first submission waits for
	 * (a lane of the batch ran jobs of the other class last), or 0 */
	uint64_t wait_other;
	uint64_t value;     /* timeline value signalled when done */
	uint64_t expect_ns; /* its expected end past submission (spin_expect), or 0 */
	bool seen;          /* found done (under mu): by the completion thread or the polling loop */
	bool busy;
	bool failed;        /* the wait reported device loss */
	bool unsignaled;    /* its submission failed: nothing signals value (given back);
			     * in the ring all the same, seen at once */
	scratch scratch;    /* device-local: devlocal tensors, split-K partials */
} engine_slot;

/* One class's submission path. Its slots are e->slots[first, first +
 * nslots); its ring holds those submitted, in submission order, shared
 * with its completion thread (under the engine's mu). */
typedef struct engine_track {
	struct engine *e;
	uint32_t cls;
	VkQueue queue;
	VkSemaphore timeline;
	uint64_t next_value;
	uint32_t first, nslots;
	uint32_t ring[ENGINE_RING];
	uint32_t ring_head, ring_count, ring_done;
	pthread_cond_t cv;
	pthread_t thread;
	bool thread_started;
	/* polling for an expected end: the batch (its value) and until when;
	 * asked by the completion thread (poll_ask_*, under mu), taken by
	 * the loop (poll_for_*), cleared once that batch is finished */
	uint64_t poll_ask_value, poll_ask_to_ns, poll_for_value, poll_for_to_ns;
	fair_class fair;          /* lanes whose first job is of this class */
	/* its submission thread (sched/submit.c; --submit-thread): its slots
	 * whose batch the loop formed, oldest first, waiting to be recorded
	 * and submitted (under the engine's mu), and the recorder it records
	 * them with (record.h). A track's thread records and submits its
	 * batches alone; while it does not run (off, or stopped) the loop does. */
	recorder *rec;
	uint32_t launch_q[ENGINE_RING];
	uint32_t launch_head;
	atomic_uint launch_count; /* (read without mu while the thread polls) */
	pthread_cond_t launch_cv;
	pthread_t submitter;
	bool submitter_started, submitter_stop;
	uint64_t batches, jobs;   /* stats */
	atomic_uint_fast64_t submissions; /* a sliced batch submits once a slice */
} engine_track;

struct engine {
	const device *dev;
	const pipelines *pl;
	const config *cfg;
	engine_events ev;
	engine_track track[ENGINE_CLASSES];
	bool shared_queue;        /* both tracks submit to one queue: large work is sliced */
	uint64_t small_ns, slice_ns; /* resolved --small-job-us, --slice-us */
	uint64_t batch_seq;
	estimate est;             /* measured rates (sched/estimate.h) */
	VkBuffer dummy;           /* bound where a kernel's output is not asked for */
	VkDeviceMemory dummy_mem;
	VkDeviceSize dummy_piece; /* bytes of dummy per unasked-for output */
	engine_slot *slots;
	uint32_t nslots;
	uint32_t queued, running;
	pthread_mutex_t mu;       /* the tracks' rings, shared with their completion threads,
				   * and their launches, shared with their submission threads */
	bool stop;
	/* slots handed to a submission thread and not yet in their track's
	 * ring (under mu); what the two tracks' submission threads share: the
	 * streams (a streamed job's recording and submission, stream_mu), the
	 * one queue where both tracks submit to it (queue_mu), the GPU clock's
	 * calibration (cal_mu) */
	uint32_t launching;
	pthread_mutex_t stream_mu, queue_mu, cal_mu;
	uv_async_t async;
	/* fault injection for tests (VKGRAD_FAULT_INJECT=submit:N,wait:N,
	 * recreate:N): the Nth submission or wait reports VK_ERROR_DEVICE_LOST;
	 * the first N device recreations fail (recovery.c counts it down) */
	uint64_t fault_submit_at, fault_wait_at, waits;
	atomic_uint_fast64_t submits;
	uint64_t fault_recreate;
	unsigned fault_late_us;  /* late_wait: the completion thread reports batches this late */
	/* device loss. `lost`: a batch failed; nothing is submitted until
	 * engine_resume, queued jobs wait. Once no batch runs, the loop calls
	 * ev.lost (the recovery) once. `down`: no device to wait for; queued
	 * and new jobs are answered device_lost at once. */
	bool lost, lost_notified, down;
	uint64_t losses;
	placement place;           /* device-local path and scratch (placement.h) */
	uint64_t client_macs;      /* a lane's in-flight bound (engine_lane), resolved */
	/* streamed jobs (stream.h), resolved at init: dY bytes per chunk
	 * (CONFIG_OFF: none stream), tensor bytes from which a job streams;
	 * their Vulkan objects (NULL while off) */
	uint64_t stream_chunk, stream_min;
	/* ... and from which a large job streams while another connection's
	 * small jobs are about (CONFIG_OFF: never): stream_wants. The two
	 * connections (lanes; compared, never followed) whose small jobs
	 * were queued last, the most recent first, and when. */
	uint64_t stream_shared_min;
	const engine_lane *small_seen_lane[2];
	uint64_t small_seen_ns[2];
	bool stream_chunk_auto; /* chunks of CONFIG_STREAM_AUTO_CHUNK_ELEMS elements of dY, any dtype */
	stream *stream;
	/* stats */
	uint64_t batches, jobs_done, jobs_failed, jobs_in_batches;
	uint64_t devlocal_jobs, splitk_jobs;
	/* client memory the finished jobs (tensor ops included) read and
	 * wrote: their host traffic (stats host_read_bytes, host_write_bytes) */
	uint64_t host_read_bytes, host_write_bytes;
	/* written where batches are recorded (the submission thread) */
	atomic_uint_fast64_t dispatches, devlocal_copy_bytes, stream_jobs, stream_chunks,
		stream_dw_blocks;
	uint64_t stream_shared_jobs;
	uint64_t scratch_failures; /* batches that ran without scratch (allocation failed) */
	metrics metrics;           /* latency histograms, stage windows (metrics.h) */
	/* finished jobs kept for the next ones (engine_job_new), at most
	 * ENGINE_SPARE_JOBS: no malloc/free per job in steady state */
	job *spare;
	uint32_t nspare;
	/* GPU clock -> CLOCK_MONOTONIC (device->calibrated): a pair of
	 * simultaneous readings, refreshed at a submission once a second */
	uint64_t cal_host_ns, cal_dev, cal_at_ns;
	bool cal_ok;
	/* the loop polls rather than sleeps while a batch may finish soon or
	 * requests come (spin.h): a uv_idle handle, active while polling */
	uv_idle_t poll;
	bool poll_init, polling, stop_polling;
	uint64_t poll_since_ns, poll_until_ns;
	spin spin;
	/* stats: the loop's time polling; batches it saw done while polling,
	 * batches the completion thread's blocking wait reported */
	atomic_uint_fast64_t spin_ns, spin_hits, blocking_waits;
	/* batches given an expected end (spin.h), at submission */
	uint64_t spin_expected;
};

#endif
