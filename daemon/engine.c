/* daemon/engine.c — see engine.h. */
#include "engine.h"

#include "log.h"
#include "placement.h"
#include "record.h"
#include "stream.h"
#include "spin.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ENGINE_WAIT_NS 200000000ull /* completion thread re-checks `stop` this often */

uint64_t engine_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t span(uint64_t from, uint64_t to)
{
	return to > from ? to - from : 0;
}

/* ---- trace ------------------------------------------------------------------ */

#define ENGINE_CAL_EVERY_NS 1000000000ull /* recalibrate GPU and host clocks this often */

/* A fresh pair of simultaneous GPU and CLOCK_MONOTONIC readings, at most
 * once a second (the clocks drift apart by parts per million). Loop thread,
 * before a submission. */
static void calibrate(engine *e, uint64_t now)
{
	const device *d = e->dev;
	if (!d->calibrated || (e->cal_ok && now - e->cal_at_ns < ENGINE_CAL_EVERY_NS))
		return;
	const VkCalibratedTimestampInfoEXT ci[2] = {
		{.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
		{.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
		 .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT},
	};
	uint64_t ts[2], dev_max = 0;
	if (d->get_calibrated(d->dev, 2, ci, ts, &dev_max) != VK_SUCCESS)
		return; /* keep the last one, or none */
	e->cal_dev = ts[0];
	e->cal_host_ns = ts[1];
	e->cal_at_ns = now;
	e->cal_ok = true;
}

/* A GPU timestamp of slot s on the host's clock. */
static uint64_t gpu_to_host(const device *d, const engine_slot *s, uint64_t t)
{
	const uint64_t m = d->timestamp_mask, diff = (t - s->cal_dev) & m;
	const double ticks = diff > m / 2 ? -(double)(m - diff) - 1.0 : (double)diff;
	const double ns = (double)s->cal_host_ns + ticks * (double)d->timestamp_period;
	return ns > 0 ? (uint64_t)ns : 0;
}

/* The batch's part of each job's trace, from the end of recording to the
 * start of answering: SUBMIT, then LAUNCH, GPU, COMPLETE where the GPU's
 * timestamps are on the host's clock, GPU and GPU_WAIT where only the GPU's
 * duration is known, GPU_WAIT alone without timestamps. The GPU may begin
 * before vkQueueSubmit returns (a driver that runs the batch inside it, as
 * lavapipe can): SUBMIT then ends when the GPU began. Times are clamped
 * into recorded..seen in order (the calibration is good to a few µs), so
 * the stages add up to seen - recorded. */
static void slot_stages(const engine *e, const engine_slot *s, uint64_t st[PROTO_STAGE_COUNT],
			uint32_t *mask, uint64_t *to_gpu_end)
{
	const device *d = e->dev;
	const uint64_t rec = s->t_recorded_ns;
	const uint64_t sub = s->t_submitted_ns > rec ? s->t_submitted_ns : rec;
	const uint64_t seen = s->t_seen_ns > sub ? s->t_seen_ns : sub;
	const volatile uint64_t *ts = s->ts_map;
	const bool have_ts = d->timestamps && ts && ((ts[1] - ts[0]) & d->timestamp_mask) <=
						       d->timestamp_mask / 2;
	*mask = 1u << PROTO_STAGE_HANDOFF | 1u << PROTO_STAGE_SUBMIT;
	st[PROTO_STAGE_HANDOFF] = span(seen, s->t_answer_ns);
	if (have_ts && s->cal_ok) {
		const uint64_t g0 = gpu_to_host(d, s, ts[0]), g1 = gpu_to_host(d, s, ts[1]);
		const uint64_t e1 = g0 < sub ? (g0 > rec ? g0 : rec) : sub; /* submitted, or the GPU began */
		const uint64_t e2 = g0 < e1 ? e1 : g0 > seen ? seen : g0;
		const uint64_t e3 = g1 < e2 ? e2 : g1 > seen ? seen : g1;
		st[PROTO_STAGE_SUBMIT] = e1 - rec;
		st[PROTO_STAGE_LAUNCH] = e2 - e1;
		st[PROTO_STAGE_GPU] = e3 - e2;
		st[PROTO_STAGE_COMPLETE] = seen - e3;
		*mask |= 1u << PROTO_STAGE_LAUNCH | 1u << PROTO_STAGE_GPU | 1u << PROTO_STAGE_COMPLETE;
		*to_gpu_end = span(sub, e3);
	} else if (have_ts) {
		/* the GPU's time within submitted..seen, or, when longer (it ran
		 * inside vkQueueSubmit), within recorded..seen */
		uint64_t g = (uint64_t)((double)((ts[1] - ts[0]) & d->timestamp_mask) *
					d->timestamp_period);
		if (g > seen - rec)
			g = seen - rec;
		const uint64_t w = g <= seen - sub ? seen - sub - g : 0;
		st[PROTO_STAGE_GPU] = g;
		st[PROTO_STAGE_GPU_WAIT] = w;
		st[PROTO_STAGE_SUBMIT] = seen - rec - g - w;
		*mask |= 1u << PROTO_STAGE_GPU | 1u << PROTO_STAGE_GPU_WAIT;
		*to_gpu_end = g; /* at least; the launch is not known */
	} else {
		st[PROTO_STAGE_SUBMIT] = sub - rec;
		st[PROTO_STAGE_GPU_WAIT] = seen - sub;
		*mask |= 1u << PROTO_STAGE_GPU_WAIT;
		*to_gpu_end = seen - sub; /* at most */
	}
}

/* Job j's stages from its arrival to the start of answering its batch,
 * the batch's part (slot_stages) copied in. */
static void job_stages(const engine_slot *s, job *j, const uint64_t st[PROTO_STAGE_COUNT],
		       uint32_t mask)
{
	memcpy(j->stage_ns, st, sizeof(j->stage_ns));
	j->stage_mask = mask | 1u << PROTO_STAGE_QUEUE | 1u << PROTO_STAGE_RECORD;
	j->stage_ns[PROTO_STAGE_QUEUE] = span(j->t_queued_ns, s->t_take_ns);
	j->stage_ns[PROTO_STAGE_RECORD] = span(s->t_take_ns, s->t_recorded_ns);
	if (j->t_recv_ns) {
		j->stage_ns[PROTO_STAGE_DECODE] = span(j->t_recv_ns, j->t_queued_ns);
		j->stage_mask |= 1u << PROTO_STAGE_DECODE;
	}
	j->t_answer_ns = s->t_answer_ns;
}

void engine_job_trace(job *j, uint64_t t_encoded, proto_trace *out)
{
	j->stage_ns[PROTO_STAGE_ANSWER] = span(j->t_answer_ns, t_encoded);
	j->stage_mask |= 1u << PROTO_STAGE_ANSWER;
	out->present = j->t_recv_ns != 0;
	out->t_recv_ns = j->t_recv_ns;
	out->t_reply_ns = t_encoded; /* the writer puts the send's time here */
	out->n = 0;
	for (int i = PROTO_STAGE_DECODE; i <= PROTO_STAGE_ANSWER; i++) {
		if (!(j->stage_mask & (1u << i)))
			continue;
		proto_stage *p = &out->st[out->n++];
		/* a fixed-size copy, not snprintf or strlen: this runs per job */
		proto_stage_copy_name(p, (proto_stage_id)i);
		p->ns = j->stage_ns[i];
	}
}

/* ---- spare jobs -------------------------------------------------------------- */

#define ENGINE_SPARE_JOBS 1024

/* A job the engine is done with: its region references dropped, kept
 * for engine_job_new while there are fewer than ENGINE_SPARE_JOBS. */
static void job_release(engine *e, job *j)
{
	if (e->nspare >= ENGINE_SPARE_JOBS) {
		job_free(j);
		return;
	}
	job_drop_refs(j);
	j->next_spare = e->spare;
	e->spare = j;
	e->nspare++;
}

job *engine_job_new(engine *e, void *owner, const proto_request *q,
		    const uint64_t bytes[PROTO_T_COUNT], region *const reg[PROTO_T_COUNT],
		    uint64_t t_recv_ns)
{
	job *j = e->spare;
	if (!j)
		return job_new(owner, q, bytes, reg, t_recv_ns);
	e->spare = j->next_spare;
	e->nspare--;
	memset(j, 0, sizeof(*j));
	job_init(j, owner, q, bytes, reg, t_recv_ns);
	return j;
}

static void spare_free(engine *e)
{
	for (job *j; (j = e->spare);) {
		e->spare = j->next_spare;
		free(j);
	}
	e->nspare = 0;
}

/* ---- completion thread, and the loop's polling ---------------------------- */

/* The kind of job j for the expected ends of single-job batches (spin.h):
 * what makes its batch take the time it does (shape, dtype, outputs,
 * accumulate, its kernels and path), hashed (FNV-1a), never 0. */
static uint64_t job_kind(const job *j)
{
	const proto_request *q = &j->req;
	uint64_t outputs = 0;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		outputs |= (uint64_t)q->t[t].present << t;
	const uint64_t v[] = {
		q->batch, q->in, q->out, (uint64_t)q->dtype, outputs, q->accumulate,
		(uint64_t)(int64_t)j->plan.param, (uint64_t)(int64_t)j->plan.input,
		j->plan.slices, j->plan.dx_slices, j->devlocal, j->streamed, j->sums,
	};
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		for (int b = 0; b < 64; b += 8) {
			h ^= (v[i] >> b) & 0xff;
			h *= 1099511628211ull;
		}
	return h ? h : 1;
}

/* Batch s (the oldest not yet seen) is done, or failed with r: mark it
 * seen, for the loop to finish. Under e->mu, by whichever noticed first:
 * the completion thread's blocking wait or the polling loop (by_loop). */
static void mark_seen(engine *e, engine_track *t, engine_slot *s, VkResult r, uint64_t now,
		      bool by_loop)
{
	if (r == VK_SUCCESS && ++e->waits == e->fault_wait_at) {
		log_warn("fault injection: wait %llu reports device loss", (unsigned long long)e->waits);
		r = VK_ERROR_DEVICE_LOST;
	}
	if (r != VK_SUCCESS) {
		log_err("waiting for batch %llu failed (VkResult %d)", (unsigned long long)s->value, r);
		s->failed = true;
	}
	s->seen = true;
	s->t_seen_ns = now;
	t->ring_done++;
	atomic_fetch_add(by_loop ? &e->spin_hits : &e->blocking_waits, 1);
}

/* The oldest slot of track t submitted and not yet seen, or NULL (under mu). */
static engine_slot *track_oldest(engine_track *t)
{
	if (t->ring_done == t->ring_count)
		return NULL;
	return &t->e->slots[t->ring[(t->ring_head + t->ring_done) % ENGINE_RING]];
}

/* A track's completion thread blocks on each of its batches in turn (it
 * never spins: the loop polls while a batch may finish soon, spin.h) and
 * wakes the loop for a batch the loop has not seen done first. */
static void *completion_main(void *arg)
{
	engine_track *t = arg;
	engine *e = t->e;
	pthread_mutex_lock(&e->mu);
	while (!e->stop) {
		engine_slot *s0 = track_oldest(t);
		if (!s0) {
			/* nothing in flight: sleep */
			pthread_cond_wait(&t->cv, &e->mu);
			continue;
		}
		const uint32_t si = (uint32_t)(s0 - e->slots);
		uint64_t value = s0->value;
		/* an expected end (spin.h): wait until the loop should poll, once */
		const uint64_t poll_at = s0->poll_at_ns, poll_to = s0->poll_to_ns;
		s0->poll_at_ns = 0;
		const VkSemaphore sem = t->timeline;
		pthread_mutex_unlock(&e->mu);
		VkSemaphoreWaitInfo wi = {
			.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
			.semaphoreCount = 1,
			.pSemaphores = &sem,
			.pValues = &value,
		};
		uint64_t timeout = ENGINE_WAIT_NS;
		if (poll_at) {
			const uint64_t now0 = engine_now_ns();
			timeout = poll_at > now0 ? poll_at - now0 : 0;
		}
		VkResult r = vkWaitSemaphores(e->dev->dev, &wi, timeout);
		if (r == VK_SUCCESS && e->fault_late_us)
			usleep(e->fault_late_us); /* tests: let the polling loop see it first */
		const uint64_t now = engine_now_ns();
		pthread_mutex_lock(&e->mu);
		/* the loop may have seen it done meanwhile (and even reused the
		 * slot for a later batch: compare the value) */
		engine_slot *s = &e->slots[si];
		if (r == VK_TIMEOUT) {
			if (poll_at && !s->seen && s->value == value && s->busy) {
				/* near its expected end: the loop polls for it */
				t->poll_ask_value = value;
				t->poll_ask_to_ns = poll_to;
				uv_async_send(&e->async);
			}
			continue;
		}
		if (s->seen || s->value != value || !s->busy)
			continue;
		mark_seen(e, t, s, r, now, false);
		uv_async_send(&e->async);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

/* Loop thread: mark every batch of track t whose value its semaphore has
 * reached as seen. Returns whether there was one. */
static bool poll_track(engine *e, engine_track *t)
{
	uint64_t oldest = 0, cur = 0;
	pthread_mutex_lock(&e->mu);
	const engine_slot *s0 = track_oldest(t);
	if (s0)
		oldest = s0->value;
	pthread_mutex_unlock(&e->mu);
	if (!oldest || vkGetSemaphoreCounterValue(e->dev->dev, t->timeline, &cur) != VK_SUCCESS ||
	    cur < oldest)
		return false; /* a failure is the completion thread's to report */
	/* a host wait on what the counter says is done: the synchronization
	 * that makes the batch's writes (outputs, timestamps) visible here
	 * (lavapipe's counter runs ahead of them) */
	VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
				  .semaphoreCount = 1, .pSemaphores = &t->timeline, .pValues = &cur};
	if (vkWaitSemaphores(e->dev->dev, &wi, 0) != VK_SUCCESS)
		return false;
	const uint64_t now = engine_now_ns();
	bool any = false;
	pthread_mutex_lock(&e->mu);
	for (engine_slot *s; (s = track_oldest(t)) && cur >= s->value;) {
		mark_seen(e, t, s, VK_SUCCESS, now, true);
		any = true;
	}
	pthread_mutex_unlock(&e->mu);
	return any;
}

static bool poll_gpu(engine *e)
{
	bool any = false;
	for (int c = 0; c < ENGINE_CLASSES; c++)
		any |= poll_track(e, &e->track[c]);
	return any;
}

static void poll_cb(uv_idle_t *h);

static void poll_start(engine *e, uint64_t now)
{
	if (e->polling || e->stop_polling)
		return;
	e->polling = true;
	e->poll_since_ns = now;
	uv_idle_start(&e->poll, poll_cb);
}

static void poll_stop(engine *e, uint64_t now)
{
	if (!e->polling)
		return;
	e->polling = false;
	atomic_fetch_add(&e->spin_ns, now - e->poll_since_ns);
	uv_idle_stop(&e->poll);
}

void engine_activity(engine *e)
{
	if (!e->spin.after_ns)
		return;
	const uint64_t now = engine_now_ns();
	e->poll_until_ns = now + e->spin.after_ns;
	poll_start(e, now);
}

/* ---- finishing jobs --------------------------------------------------------- */

/* Hand job j's outcome to the owner (engine_events.done). */
static void answer(engine *e, job *j, proto_code code, const char *msg, uint64_t queued_us,
		   uint64_t gpu_us, uint32_t batch_jobs)
{
	e->ev.done(e->ev.done_ctx, j, code, msg, queued_us, gpu_us, batch_jobs);
}

/* Job j, taken into a batch, leaves its lane's in-flight work (engine_lane):
 * its batch finished, or it left the batch unrecorded. Frees a closed lane
 * with nothing left running. */
static void lane_release(job *j)
{
	engine_lane *l = j->lane;
	l->inflight_macs -= job_macs(j);
	l->running--;
	l->running_cls[j->cls]--;
	j->lane = NULL;
	if (l->closed && l->running == 0)
		free(l);
}

static int launch_slot(engine *e, uint32_t si);

/* What batch s's GPU time teaches: the rate of its jobs' kind when it ran
 * one kind (sched/estimate.h), and each job's lane the difference between
 * its estimate and its share of the batch's time (sched/fair.h). */
static void learn_batch(engine *e, const engine_slot *s, uint64_t gpu_ns)
{
	uint64_t est = 0, macs = 0;
	bool one_kind = true;
	for (uint32_t i = 0; i < s->njobs; i++) {
		est += s->jobs[i]->est_ns;
		macs += s->jobs[i]->est_macs;
		one_kind &= s->jobs[i]->est_key == s->jobs[0]->est_key;
	}
	if (s->njobs && one_kind)
		estimate_learn(&e->est, s->jobs[0]->est_key, s->jobs[0]->req.dtype, macs, gpu_ns);
	for (uint32_t i = 0; i < s->njobs && est; i++) {
		job *j = s->jobs[i];
		const double actual = (double)gpu_ns * (double)j->est_ns / (double)est;
		fair_correct(&j->lane->fair[j->cls], (double)j->est_ns, actual);
	}
}

static void finish_slot(engine *e, engine_slot *s)
{
	engine_track *tr = &e->track[s->cls];
	uint64_t gpu_us = 0, st[PROTO_STAGE_COUNT] = {0};
	uint32_t st_mask = 0;
	if (!s->failed && e->dev->timestamps) {
		/* copied by the command buffer itself: vkGetQueryPoolResults
		 * would wait for the whole queue on some drivers (lavapipe) */
		const volatile uint64_t *ts = s->ts_map;
		if (ts[1] >= ts[0])
			gpu_us = (uint64_t)((double)(ts[1] - ts[0]) * e->dev->timestamp_period / 1000.0);
	}
	if (tr->poll_for_to_ns && s->value >= tr->poll_for_value)
		tr->poll_for_to_ns = 0; /* the batch polled for is done */
	if (!s->failed && s->slice_more) {
		/* a slice of a large job is done: the next one goes in, behind
		 * whatever small batches were submitted meanwhile */
		s->slice_gpu_us += gpu_us;
		s->slice_from = s->slice_next;
		if (launch_slot(e, (uint32_t)(s - e->slots)) == 0)
			return;
		return; /* the failed launch finished the slot */
	}
	gpu_us += s->slice_gpu_us;
	s->t_answer_ns = engine_now_ns();
	if (!s->failed) {
		uint64_t to_gpu_end = 0;
		slot_stages(e, s, st, &st_mask, &to_gpu_end);
		spin_note(&e->spin, to_gpu_end); /* what the batch took, as well as is known */
		spin_learn(&e->spin, s->kind, to_gpu_end); /* (kind 0: nothing) */
	}
	if (s->failed && !e->lost) {
		/* no more submissions until the device is recreated (recovery.c);
		 * queued jobs wait for it, batches in flight finish first */
		e->lost = true;
		e->losses++;
		log_err("device lost (loss %llu): %u job(s) of batch %llu answer device_lost; "
			"%u queued job(s) wait for the device to be recreated",
			(unsigned long long)e->losses, s->njobs, (unsigned long long)s->value, e->queued);
	}
	if (!s->failed && e->dev->timestamps && s->njobs) {
		metrics_observe(&e->metrics, METRICS_BATCH_GPU, gpu_us);
		learn_batch(e, s, gpu_us * 1000);
	}
	/* the jobs leave their lanes' in-flight work before any answer (an
	 * answer may close a connection, and so its lane) */
	for (uint32_t i = 0; i < s->njobs; i++)
		lane_release(s->jobs[i]);
	/* regions used by this batch: one decrement each (marked when submitted) */
	for (uint32_t i = 0; i < s->njobs; i++)
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			region *r = s->jobs[i]->reg[t];
			if (r && r->finish_mark != s->seq) {
				r->inflight--;
				r->finish_mark = s->seq;
			}
		}
	for (uint32_t i = 0; i < s->njobs; i++) {
		job *j = s->jobs[i];
		if (!s->failed)
			job_stages(s, j, st, st_mask);
		if (!s->failed && j->devlocal && e->dev->timestamps) {
			const volatile uint64_t *ts = s->ts_map + j->ts_index;
			if (ts[1] >= ts[0]) {
				/* at least 1: a client cannot tell a measured 0 from "not sent" */
				j->kernel_us = (uint64_t)((double)(ts[1] - ts[0]) * e->dev->timestamp_period / 1000.0);
				if (j->kernel_us == 0)
					j->kernel_us = 1;
				j->has_kernel_us = true;
			}
			stream_timeline(e, (uint32_t)(s - e->slots), j);
		}
		if (!s->failed) {
			/* staged outputs back into the client's memory, in job order;
			 * a fault there fails this job alone */
			proto_err err;
			int rc = 0;
			for (int t = 0; t < PROTO_T_COUNT && rc == 0; t++) {
				region *r = j->reg[t];
				if (r && r->staged && job_is_output(t))
					rc = region_stage_copy(r, j->req.t[t].offset, j->bytes[t], false,
							       proto_tensor_key[t], &err);
			}
			if (rc == 0) {
				e->jobs_done++;
				metrics_observe(&e->metrics, METRICS_JOB_QUEUED,
						(j->t_submit_ns - j->t_queued_ns) / 1000);
				metrics_observe(&e->metrics, METRICS_JOB_LATENCY,
						(engine_now_ns() - j->t_queued_ns) / 1000);
			} else {
				e->jobs_failed++;
			}
			answer(e, j, rc == 0 ? PROTO_OK : err.code, rc == 0 ? NULL : err.message,
				(j->t_submit_ns - j->t_queued_ns) / 1000, gpu_us, s->njobs);
			/* the stages the answer traced (engine_job_trace) */
			if (rc == 0 && (j->stage_mask & (1u << PROTO_STAGE_ANSWER)))
				metrics_stages(&e->metrics, j->stage_ns, j->stage_mask);
		} else {
			e->jobs_failed++;
			answer(e, j, PROTO_DEVICE_LOST, "the GPU failed while running this job's batch",
				(j->t_submit_ns - j->t_queued_ns) / 1000, 0, s->njobs);
		}
		job_release(e, j);
	}
	e->running -= s->njobs;
	s->njobs = 0;
	s->busy = false;
	s->failed = false;
	s->slice_more = false;
	s->slice_len = s->slice_from = s->slice_gpu_us = s->slices = 0;
}

/* Finish every batch seen done, in submission order, then submit more. */
static void reap(engine *e)
{
	/* many replies at once: let the owner write them in one go per client */
	if (e->ev.replies)
		e->ev.replies(e->ev.replies_ctx, true);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		for (;;) {
			pthread_mutex_lock(&e->mu);
			if (t->ring_done == 0) {
				pthread_mutex_unlock(&e->mu);
				break;
			}
			uint32_t si = t->ring[t->ring_head];
			t->ring_head = (t->ring_head + 1) % ENGINE_RING;
			t->ring_count--;
			t->ring_done--;
			pthread_mutex_unlock(&e->mu);
			finish_slot(e, &e->slots[si]);
		}
	}
	if (e->ev.replies)
		e->ev.replies(e->ev.replies_ctx, false);
	if (e->lost && !e->down) {
		/* once nothing runs on the lost device, recover it (once) */
		if (e->running == 0 && !e->lost_notified) {
			e->lost_notified = true;
			if (e->ev.lost)
				e->ev.lost(e->ev.lost_ctx);
			else
				e->down = true; /* nobody recovers: answer jobs instead */
		}
		if (!e->down)
			return;
	}
	engine_pump(e);
}

/* The completion thread asked the loop to poll for a batch near its
 * expected end (spin.h): from now until the lead past it, unless that
 * batch is finished already. */
static void poll_expected(engine *e)
{
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		pthread_mutex_lock(&e->mu);
		const uint64_t value = t->poll_ask_value, to = t->poll_ask_to_ns;
		t->poll_ask_value = 0;
		bool pending = false;
		for (uint32_t i = t->ring_done; value && i < t->ring_count; i++)
			pending |= e->slots[t->ring[(t->ring_head + i) % ENGINE_RING]].value == value;
		pthread_mutex_unlock(&e->mu);
		const uint64_t now = engine_now_ns();
		if (!pending || now >= to)
			continue;
		t->poll_for_value = value;
		t->poll_for_to_ns = to;
		poll_start(e, now);
	}
}

static void async_cb(uv_async_t *h)
{
	reap(h->data);
	engine_activity(h->data); /* replies went out: the next requests come soon */
	poll_expected(h->data);
}

/* uv_idle: while it runs the loop polls instead of sleeping (spin.h). Each
 * iteration looks at the GPU; polling stops once the oldest batch in
 * flight is past the spin budget and no socket activity is recent. */
static void poll_cb(uv_idle_t *h)
{
	engine *e = h->data;
	if (poll_gpu(e)) {
		reap(e);
		engine_activity(e); /* replies went out: the next requests come soon */
	}
	const uint64_t now = engine_now_ns();
	bool keep = now < e->poll_until_ns;
	pthread_mutex_lock(&e->mu);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		keep |= now < t->poll_for_to_ns;
		const engine_slot *s = track_oldest(t);
		if (s)
			keep |= now < s->t_submitted_ns + e->spin.budget_ns;
	}
	pthread_mutex_unlock(&e->mu);
	if (!keep)
		poll_stop(e, now);
}

/* Lane l's first queued job, or NULL. */
static job *lane_first(const engine_lane *l)
{
	queue_node *n = queue_first(&l->jobs);
	return n ? queue_data(n, job, node) : NULL;
}

static engine_lane *lane_of(fair_lane *f, uint32_t cls)
{
	return queue_data(f, engine_lane, fair[cls]);
}

/* May lane l's next job join a batch now? A staged region mirrors the
 * client's memory for one batch at a time, so a job using one that is in
 * flight waits; a job of another class than the lane's jobs in flight
 * waits for them (engine_lane); and the lane's in-flight work stays within
 * client_macs unless nothing of it is in flight. */
static bool can_take(const engine *e, const engine_lane *l)
{
	const job *j = lane_first(l);
	if (!j)
		return false;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		if (j->reg[t] && j->reg[t]->staged && j->reg[t]->inflight)
			return false;
	if (l->running_cls[!j->cls])
		return false;
	return l->running == 0 || l->inflight_macs + job_macs(j) <= e->client_macs;
}

/* fair_pick's test: can the lane of f (in class *cls of engine e) give a job? */
typedef struct pick_ctx {
	const engine *e;
	uint32_t cls;
} pick_ctx;

static bool fair_ok(fair_lane *f, void *ctx)
{
	const pick_ctx *p = ctx;
	return can_take(p->e, lane_of(f, p->cls));
}

/* Staged regions: the client's current bytes into the mirrors, in job
 * order, before anything is recorded. A job whose copy faults leaves the
 * batch, answered bad_region, its outputs untouched. */
static void stage_in(engine *e, engine_slot *s)
{
	uint64_t now = engine_now_ns();
	uint32_t kept = 0;
	for (uint32_t i = 0; i < s->njobs; i++) {
		job *j = s->jobs[i];
		j->t_submit_ns = now;
		proto_err err;
		int rc = 0;
		for (int t = 0; t < PROTO_T_COUNT && rc == 0; t++) {
			region *r = j->reg[t];
			if (r && r->staged && (!job_is_output(t) || j->req.accumulate))
				rc = region_stage_copy(r, j->req.t[t].offset, j->bytes[t], true,
						       proto_tensor_key[t], &err);
		}
		if (rc == 0) {
			s->jobs[kept++] = j;
			continue;
		}
		e->jobs_failed++;
		lane_release(j);
		answer(e, j, err.code, err.message, (now - j->t_queued_ns) / 1000, 0, 0);
		job_release(e, j);
	}
	s->njobs = kept;
}

static uint64_t take_jobs(engine *e, engine_slot *s);

/* Should slot s's batch go in slices? One large job alone, where both
 * classes share a queue, estimated longer than a slice, on the direct
 * path (device-local copies and streamed jobs are not sliced): then its
 * slices' length in multiply-adds, from its estimate. 0: whole. */
static uint64_t slice_len(const engine *e, const engine_slot *s)
{
	if (!e->shared_queue || s->cls != ENGINE_LARGE || s->njobs != 1)
		return 0;
	const job *j = s->jobs[0];
	if (j->devlocal || j->streamed || j->est_ns <= e->slice_ns || !j->est_macs)
		return 0;
	const double len = (double)j->est_macs * (double)e->slice_ns / (double)j->est_ns;
	return len >= 1 ? (uint64_t)len : 1;
}

/* Form a batch in free slot si from its class's lanes and launch it. */
static void submit_slot(engine *e, uint32_t si)
{
	engine_slot *s = &e->slots[si];
	s->t_take_ns = engine_now_ns();
	uint64_t need = take_jobs(e, s);
	stage_in(e, s);
	if (s->njobs == 0)
		return;
	char err[160];
	if (need && scratch_reserve(&s->scratch, e->dev, need, err, sizeof(err)) != 0) {
		/* no device memory to spare: this batch reads the client's memory
		 * directly and uses no split-K (both are correct, only slower) */
		e->scratch_failures++;
		log_warn("%s; %u job(s) run without scratch", err, s->njobs);
		for (uint32_t i = 0; i < s->njobs; i++)
			placement_drop(s->jobs[i]);
	}
	for (uint32_t i = 0; i < s->njobs; i++) {
		e->devlocal_jobs += s->jobs[i]->devlocal;
		e->splitk_jobs += s->jobs[i]->plan.param == KERN_SPLITK || s->jobs[i]->plan.input == KERN_SPLITK;
	}
	s->slice_len = slice_len(e, s);
	s->slice_from = s->slice_gpu_us = s->slices = 0;
	/* a sliced batch has no expected end: its slices' times vary */
	s->kind = s->njobs == 1 && !s->slice_len ? job_kind(s->jobs[0]) : 0; /* its placement final */
	s->seq = ++e->batch_seq;
	e->running += s->njobs;
	e->batches++;
	e->jobs_in_batches += s->njobs;
	e->track[s->cls].batches++;
	e->track[s->cls].jobs += s->njobs;
	for (uint32_t i = 0; i < s->njobs; i++)
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			region *r = s->jobs[i]->reg[t];
			if (r && r->submit_mark != s->seq) {
				r->inflight++;
				r->submit_mark = s->seq;
			}
		}
	s->busy = true;
	launch_slot(e, si);
}

/* Record slot si's batch (its next slice, when sliced) and submit it on
 * its track's queue. 0, or -1 when it failed (the slot is then finished:
 * its jobs answered). */
static int launch_slot(engine *e, uint32_t si)
{
	engine_slot *s = &e->slots[si];
	engine_track *tr = &e->track[s->cls];
	/* (a failed scratch reservation above may have dropped its streaming) */
	const bool streamed = s->njobs == 1 && s->jobs[0]->streamed;
	record_counts counts;
	const record_target tg = {
		.pool = s->pool, .cb = s->cb, .queries = s->queries, .ts_buf = s->ts_buf,
		.scratch = s->scratch.buf, .dummy = e->dummy, .dummy_piece = e->dummy_piece,
		.first_piece = (uint64_t)si * e->cfg->max_batch_jobs, .jobs = s->jobs, .njobs = s->njobs,
		.slice_from = s->slice_from, .slice_len = s->slice_len,
	};
	const VkResult rec = streamed ? stream_record(e, si, &tg, &counts)
				      : record_batch(e->rec, &tg, &counts);
	e->dispatches += counts.dispatches;
	e->devlocal_copy_bytes += counts.copy_bytes;
	s->nqueries = counts.nqueries;
	s->slice_more = s->slice_len && counts.slice_more;
	s->slice_next = counts.slice_next;
	s->slices += s->slice_len != 0;
	tr->submissions++;
	s->t_recorded_ns = engine_now_ns();
	calibrate(e, s->t_recorded_ns);
	s->cal_ok = e->cal_ok;
	s->cal_dev = e->cal_dev;
	s->cal_host_ns = e->cal_host_ns;
	s->value = ++tr->next_value;
	VkTimelineSemaphoreSubmitInfo tsi = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.signalSemaphoreValueCount = 1,
		.pSignalSemaphoreValues = &s->value,
	};
	VkSubmitInfo si_ = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = &tsi,
		.commandBufferCount = 1,
		.pCommandBuffers = &s->cb,
		.signalSemaphoreCount = 1,
		.pSignalSemaphores = &tr->timeline,
	};
	VkResult r;
	const char *what = "vkQueueSubmit";
	if (rec != VK_SUCCESS) {
		/* out of memory recording: the batch fails as a failed submission does */
		r = rec, what = "recording the batch";
	} else if (++e->submits == e->fault_submit_at) {
		log_warn("fault injection: submission %llu reports device loss",
			 (unsigned long long)e->submits);
		r = VK_ERROR_DEVICE_LOST;
	} else {
		r = streamed ? stream_submit(e, si) : vkQueueSubmit(tr->queue, 1, &si_, VK_NULL_HANDLE);
	}
	s->t_submitted_ns = engine_now_ns();
	if (r != VK_SUCCESS) {
		log_err("%s failed (VkResult %d); %u job(s) fail", what, r, s->njobs);
		s->failed = true;
		/* nothing will signal s->value: give the value back and finish the
		 * slot right here */
		tr->next_value--;
		finish_slot(e, s);
		uv_async_send(&e->async); /* async_cb starts the recovery */
		return -1;
	}
	/* a kind seen before, longer than the budget: the loop polls around
	 * its expected end (spin.h) */
	const uint64_t expect = spin_expect(&e->spin, s->kind);
	e->spin_expected += expect != 0;
	pthread_mutex_lock(&e->mu);
	assert(tr->ring_count < tr->nslots && tr->nslots <= ENGINE_RING); /* one entry per slot */
	s->poll_at_ns = s->poll_to_ns = 0;
	if (expect) {
		const uint64_t lead = spin_lead(expect);
		s->poll_at_ns = s->t_submitted_ns + (expect > lead ? expect - lead : 0);
		s->poll_to_ns = s->t_submitted_ns + expect + lead;
	}
	s->seen = false;
	tr->ring[(tr->ring_head + tr->ring_count) % ENGINE_RING] = si;
	tr->ring_count++;
	pthread_cond_signal(&tr->cv);
	pthread_mutex_unlock(&e->mu);
	if (e->spin.budget_ns)
		poll_start(e, s->t_submitted_ns); /* it may be done within the budget */
	return 0;
}

/* ---- lanes and batch formation ---------------------------------------------- */

/* Lane l is active in the class of its first job, if it has one. */
static void lane_activate(engine *e, engine_lane *l)
{
	const job *j = lane_first(l);
	if (j)
		fair_activate(&e->track[j->cls].fair, &l->fair[j->cls]);
}

static void lane_deactivate(engine *e, engine_lane *l)
{
	for (int c = 0; c < ENGINE_CLASSES; c++)
		fair_deactivate(&e->track[c].fair, &l->fair[c]);
}

static job *lane_pop(engine *e, engine_lane *l)
{
	job *j = lane_first(l);
	assert(j && l->n > 0 && e->queued > 0);
	queue_remove(&j->node);
	l->n--;
	e->queued--;
	return j;
}

/* The lane with queued jobs whose turn is next in any class, or NULL. */
static engine_lane *active_first(const engine *e)
{
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		queue_node *n = queue_first(&e->track[c].fair.active);
		if (n)
			return lane_of(queue_data(n, fair_lane, node), (uint32_t)c);
	}
	return NULL;
}

/* Fill slot s from the lanes of its class, each next job from the lane
 * with the least GPU time charged (sched/fair.h) that can give one, each
 * lane at most batch_per_client jobs, until the batch holds
 * max_batch_jobs jobs, max_batch_bytes of tensors, the slot's scratch cap
 * or, for the large class, a slice's worth of estimated time (the first
 * job always fits). Returns the scratch bytes the batch needs. */
static uint64_t take_jobs(engine *e, engine_slot *s)
{
	engine_track *tr = &e->track[s->cls];
	const uint32_t max = e->cfg->max_batch_jobs, cap = e->cfg->batch_per_client;
	uint64_t bytes = 0, used = 0, est = 0;
	bool unknown = false;
	/* lanes that gave cap jobs sit out the rest of this batch */
	engine_lane *out[64];
	uint32_t nout = 0;
	pick_ctx pc = {.e = e, .cls = s->cls};
	for (;;) {
		fair_lane *f = fair_pick(&tr->fair, fair_ok, &pc);
		if (!f)
			break;
		engine_lane *l = lane_of(f, s->cls);
		job *j = lane_first(l);
		uint64_t jb = job_bytes(j);
		/* the rate measured since it was queued */
		j->est_ns = estimate_ns(&e->est, j->est_key, j->req.dtype, j->est_macs);
		if (s->njobs >= max || (s->njobs > 0 && bytes + jb > e->cfg->max_batch_bytes) ||
		    (s->njobs > 0 && s->cls == ENGINE_LARGE && est + j->est_ns > e->slice_ns))
			break;
		/* a kind not yet measured shares its batch with its own kind only,
		 * so the batch's time is its kind's (sched/estimate.h) */
		if (s->njobs > 0 && j->est_key != s->jobs[0]->est_key &&
		    (unknown || !estimate_known(&e->est, j->est_key)))
			break;
		unknown |= !estimate_known(&e->est, j->est_key);
		uint64_t sb = placement_place(&e->place, j, used);
		j->streamed = sb != UINT64_MAX && stream_wants(e, j);
		if (j->streamed)
			sb += stream_place(e, j, used + sb);
		if (sb == UINT64_MAX || (s->njobs > 0 && j->streamed))
			break; /* (a streamed job runs alone) */
		used += sb;
		bytes += jb;
		est += j->est_ns;
		l->inflight_macs += job_macs(j);
		l->running++;
		l->running_cls[j->cls]++;
		fair_charge(&tr->fair, f, (double)j->est_ns);
		s->jobs[s->njobs++] = lane_pop(e, l);
		/* its next job may be of the other class */
		lane_deactivate(e, l);
		lane_activate(e, l);
		if (j->streamed)
			break;
		uint32_t took = 0;
		for (uint32_t i = 0; i < s->njobs; i++)
			took += s->jobs[i]->lane == l;
		if (took >= cap && f->active) {
			if (nout == sizeof(out) / sizeof(out[0]))
				break;
			fair_deactivate(&tr->fair, f);
			out[nout++] = l;
		}
	}
	for (uint32_t i = 0; i < nout; i++)
		lane_activate(e, out[i]);
	return used;
}

/* A free slot of track c, or nslots. */
static uint32_t free_slot(const engine *e, uint32_t c)
{
	const engine_track *t = &e->track[c];
	for (uint32_t i = t->first; i < t->first + t->nslots; i++)
		if (!e->slots[i].busy)
			return i;
	return e->nslots;
}

void engine_pump(engine *e)
{
	if (e->down) {
		engine_fail_queued(e, "there is no usable GPU (it was lost and not recreated)");
		return;
	}
	/* small jobs first: their batch goes in ahead of a large one's */
	for (uint32_t c = 0; c < ENGINE_CLASSES && !e->lost; c++) {
		engine_track *t = &e->track[c];
		pick_ctx pc = {.e = e, .cls = c};
		while (!e->lost && t->fair.n && fair_pick(&t->fair, fair_ok, &pc)) {
			const uint32_t si = free_slot(e, c);
			if (si == e->nslots)
				break;
			submit_slot(e, si);
		}
	}
}

engine_lane *engine_lane_open(engine *e)
{
	(void)e;
	engine_lane *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	queue_init(&l->jobs);
	for (int c = 0; c < ENGINE_CLASSES; c++)
		fair_lane_init(&l->fair[c]);
	return l;
}

void engine_lane_close(engine *e, engine_lane *l)
{
	if (!l)
		return;
	lane_deactivate(e, l);
	while (lane_first(l)) {
		job *j = lane_pop(e, l);
		e->jobs_failed++;
		answer(e, j, PROTO_INTERNAL, "the connection closed before the job ran", 0, 0, 0);
		job_release(e, j);
	}
	if (l->running) /* finish_slot frees it after the last one */
		l->closed = true;
	else
		free(l);
}

void engine_enqueue(engine *e, engine_lane *l, job *j)
{
	j->lane = l;
	j->t_queued_ns = engine_now_ns();
	const uint64_t dmin = e->place.devlocal_min[j->req.dtype];
	j->est_key = estimate_key(&j->req, dmin != CONFIG_OFF && job_bytes(j) >= dmin);
	j->est_macs = job_macs(j);
	j->est_ns = estimate_ns(&e->est, j->est_key, j->req.dtype, j->est_macs);
	/* a kind not measured yet is large until its first batch (of its kind
	 * alone, take_jobs) is measured: a prior may be far off */
	j->cls = j->est_ns <= e->small_ns && estimate_known(&e->est, j->est_key) ? ENGINE_SMALL
										    : ENGINE_LARGE;
	queue_insert_tail(&l->jobs, &j->node);
	l->n++;
	e->queued++;
	if (l->n == 1)
		lane_activate(e, l);
}

bool engine_idle(const engine *e)
{
	return e->queued == 0 && e->running == 0;
}

void engine_fail_queued(engine *e, const char *why)
{
	/* one job at a time, the lane fixed up before the answer: a reply may
	 * close its connection, which closes (and frees) the lane */
	for (engine_lane *l; (l = active_first(e));) {
		job *j = lane_pop(e, l);
		lane_deactivate(e, l);
		lane_activate(e, l);
		e->jobs_failed++;
		answer(e, j, PROTO_DEVICE_LOST, why, (engine_now_ns() - j->t_queued_ns) / 1000, 0, 0);
		job_release(e, j);
	}
}

/* ---- setup ---------------------------------------------------------------- */

/* A host-visible buffer the slot's command buffer copies its two
 * timestamps into. */
static int make_ts_buffer(const device *d, engine_slot *s, uint32_t nq)
{
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
				  .size = nq * sizeof(uint64_t),
				  .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT};
	if (vkCreateBuffer(d->dev, &bci, NULL, &s->ts_buf) != VK_SUCCESS)
		return -1;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->dev, s->ts_buf, &req);
	int mt = device_memory_type(d, req.memoryTypeBits,
				    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
				    .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt};
	void *p = NULL;
	if (mt < 0 || vkAllocateMemory(d->dev, &mai, NULL, &s->ts_mem) != VK_SUCCESS ||
	    vkBindBufferMemory(d->dev, s->ts_buf, s->ts_mem, 0) != VK_SUCCESS ||
	    vkMapMemory(d->dev, s->ts_mem, 0, VK_WHOLE_SIZE, 0, &p) != VK_SUCCESS)
		return -1;
	s->ts_map = p;
	s->ts_map[0] = s->ts_map[1] = 0;
	return 0;
}

/* VKGRAD_FAULT_INJECT: comma-separated submit:N, wait:N (the Nth
 * submission or wait reports VK_ERROR_DEVICE_LOST), recreate:N (the
 * first N device recreations fail; recovery.c), late_wait:MS (the
 * completion thread reports each batch MS ms late, at most 10000, so the
 * polling loop sees it first) and unsealed (region.h). */
static void parse_faults(engine *e)
{
	const char *fi = getenv("VKGRAD_FAULT_INJECT");
	char buf[128];
	if (!fi || strlen(fi) >= sizeof(buf))
		return;
	strcpy(buf, fi);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned long long n;
		if (sscanf(t, "submit:%llu", &n) == 1)
			e->fault_submit_at = n;
		else if (sscanf(t, "wait:%llu", &n) == 1)
			e->fault_wait_at = n;
		else if (sscanf(t, "recreate:%llu", &n) == 1)
			e->fault_recreate = n;
		else if (sscanf(t, "late_wait:%llu", &n) == 1 && n <= 10000)
			e->fault_late_us = (useconds_t)n * 1000;
		else if (strcmp(t, "unsealed") == 0)
			region_fault_unsealed = true;
		else
			log_warn("VKGRAD_FAULT_INJECT: '%s' not understood", t);
	}
}

/* The engine's objects on e->dev: the timeline semaphore, the dummy
 * buffer, each slot's pool, command buffer, query pool and timestamp
 * buffer. The timeline starts at next_value, so values stay increasing
 * across a device recreation and the regions' per-batch marks (timeline
 * values) cannot repeat. Returns 0 or -1; gpu_release cleans up either way. */
static int gpu_create(engine *e)
{
	const device *d = e->dev;
	const config *cfg = e->cfg;
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		VkSemaphoreTypeCreateInfo stci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
						  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
						  .initialValue = t->next_value};
		VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
					     .pNext = &stci};
		if (vkCreateSemaphore(d->dev, &sci, NULL, &t->timeline) != VK_SUCCESS)
			return -1;
		t->queue = c == ENGINE_SMALL ? d->small_queue : d->queue;
	}
	e->shared_queue = d->small_queue == d->queue;
	/* a small device buffer bound in place of outputs a job does not ask for;
	 * the kernels never write it (their flags say so) */
	e->dummy_piece = d->props.limits.minStorageBufferOffsetAlignment;
	if (e->dummy_piece < 16)
		e->dummy_piece = 16;
	VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
				  .size = e->dummy_piece * 3 * (uint64_t)cfg->max_batch_jobs * e->nslots,
				  .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
	if (vkCreateBuffer(d->dev, &bci, NULL, &e->dummy) != VK_SUCCESS)
		return -1;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->dev, e->dummy, &req);
	int mt = device_memory_type(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	if (mt < 0)
		mt = device_memory_type(d, req.memoryTypeBits, 0);
	VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
				    .allocationSize = req.size, .memoryTypeIndex = (uint32_t)mt};
	if (mt < 0 || vkAllocateMemory(d->dev, &mai, NULL, &e->dummy_mem) != VK_SUCCESS ||
	    vkBindBufferMemory(d->dev, e->dummy, e->dummy_mem, 0) != VK_SUCCESS)
		return -1;
	for (uint32_t i = 0; i < e->nslots; i++) {
		engine_slot *s = &e->slots[i];
		VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
						.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
						.queueFamilyIndex = d->queue_family};
		if (vkCreateCommandPool(d->dev, &cpci, NULL, &s->pool) != VK_SUCCESS)
			return -1;
		VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
						    .commandPool = s->pool,
						    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
						    .commandBufferCount = 1};
		if (vkAllocateCommandBuffers(d->dev, &cbai, &s->cb) != VK_SUCCESS)
			return -1;
		/* the batch's two timestamps, two per device-local job */
		uint32_t nq = 2 + 2 * cfg->max_batch_jobs;
		if (stream_queries(e) > nq) /* a streamed batch's steps timed */
			nq = stream_queries(e);
		VkQueryPoolCreateInfo qpci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
					      .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = nq};
		if (d->timestamps && (vkCreateQueryPool(d->dev, &qpci, NULL, &s->queries) != VK_SUCCESS ||
				      make_ts_buffer(d, s, nq) != 0))
			return -1;
	}
	return stream_create(e);
}

/* Destroy what gpu_create made (any part of it). */
static void gpu_release(engine *e)
{
	const device *d = e->dev;
	stream_release(e);
	for (uint32_t i = 0; e->slots && i < e->nslots; i++) {
		engine_slot *s = &e->slots[i];
		if (s->queries)
			vkDestroyQueryPool(d->dev, s->queries, NULL);
		if (s->ts_buf)
			vkDestroyBuffer(d->dev, s->ts_buf, NULL);
		if (s->ts_mem)
			vkFreeMemory(d->dev, s->ts_mem, NULL); /* unmaps */
		if (s->pool)
			vkDestroyCommandPool(d->dev, s->pool, NULL);
		scratch_release(&s->scratch, d);
		s->queries = VK_NULL_HANDLE;
		s->ts_buf = VK_NULL_HANDLE;
		s->ts_mem = VK_NULL_HANDLE;
		s->ts_map = NULL;
		s->pool = VK_NULL_HANDLE;
		s->cb = VK_NULL_HANDLE;
	}
	if (e->dummy)
		vkDestroyBuffer(d->dev, e->dummy, NULL);
	if (e->dummy_mem)
		vkFreeMemory(d->dev, e->dummy_mem, NULL);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		if (e->track[c].timeline)
			vkDestroySemaphore(d->dev, e->track[c].timeline, NULL);
		e->track[c].timeline = VK_NULL_HANDLE;
	}
	e->dummy = VK_NULL_HANDLE;
	e->dummy_mem = VK_NULL_HANDLE;
}

void engine_gpu_release(engine *e)
{
	gpu_release(e);
}

int engine_gpu_restore(engine *e, char *err, size_t errlen)
{
	if (gpu_create(e) != 0) {
		snprintf(err, errlen, "creating the engine's Vulkan objects failed");
		gpu_release(e);
		return -1;
	}
	return 0;
}

void engine_resume(engine *e)
{
	e->lost = false;
	e->lost_notified = false;
	e->down = false;
	engine_pump(e);
}

int engine_init(engine *e, uv_loop_t *loop, const device *d, const pipelines *pl,
		const config *cfg, const engine_events *ev, char *err, size_t errlen)
{
	const char *why = "creating the engine's Vulkan objects failed";
	memset(e, 0, sizeof(*e));
	e->dev = d;
	e->pl = pl;
	e->cfg = cfg;
	e->ev = *ev;
	/* small jobs' slots first, then the large ones': one where both
	 * share a queue (a small batch then waits for one slice at most) */
	const bool cpu = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	for (uint32_t c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		t->e = e;
		t->cls = c;
		t->first = e->nslots;
		t->nslots = c == ENGINE_LARGE && d->compute_queues < 2 ? 1 : cfg->inflight_batches;
		e->nslots += t->nslots;
		fair_init(&t->fair);
		pthread_cond_init(&t->cv, NULL);
	}
	estimate_init(&e->est, cpu);
	e->small_ns = (cfg->small_job_us != CONFIG_AUTO ? cfg->small_job_us
			: cpu ? CONFIG_SMALL_JOB_AUTO_CPU_US : CONFIG_SMALL_JOB_AUTO_GPU_US) * 1000;
	e->slice_ns = (cfg->slice_us != CONFIG_AUTO ? cfg->slice_us
			: cpu ? CONFIG_SLICE_AUTO_CPU_US : CONFIG_SLICE_AUTO_GPU_US) * 1000;
	log_info("job classes: small up to %llu µs of estimated GPU time, on %s (%u slot(s)); "
		 "large on queue 0 (%u slot(s))%s",
		 (unsigned long long)(e->small_ns / 1000),
		 d->compute_queues > 1 ? "queue 1 of the compute family" : "the same queue",
		 e->track[ENGINE_SMALL].nslots, e->track[ENGINE_LARGE].nslots,
		 d->compute_queues > 1 ? "" : ", in slices of about --slice-us");
	metrics_init(&e->metrics);
	parse_faults(e);
	placement_init(&e->place, d, pl, cfg, e->nslots);
	stream_init(e);
	e->client_macs = cfg->client_batch_macs;
	if (e->client_macs == CONFIG_AUTO)
		e->client_macs = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? CONFIG_CLIENT_MACS_AUTO_CPU
										  : CONFIG_CLIENT_MACS_AUTO_GPU;
	log_info("fairness: one client adds at most %llu multiply-adds to a batch and has at most "
		 "that much in flight (its next job always runs once none is)",
		 (unsigned long long)e->client_macs);
	pthread_mutex_init(&e->mu, NULL);
	e->slots = calloc(e->nslots, sizeof(*e->slots));
	if (!e->slots)
		goto fail;
	for (uint32_t i = 0; i < e->nslots; i++) {
		e->slots[i].cls = i < e->track[ENGINE_LARGE].first ? ENGINE_SMALL : ENGINE_LARGE;
		e->slots[i].jobs = calloc(cfg->max_batch_jobs, sizeof(*e->slots[i].jobs));
		if (!e->slots[i].jobs)
			goto fail;
	}
	e->rec = record_new(d, pl, cfg->dispatch_max_macs, cfg->max_batch_jobs);
	if (!e->rec) {
		why = "out of memory for the batch recorder";
		goto fail;
	}
	if (gpu_create(e) != 0)
		goto fail;
	if (uv_async_init(loop, &e->async, async_cb) != 0) {
		why = "uv_async_init failed";
		goto fail;
	}
	e->async.data = e;
	uv_idle_init(loop, &e->poll);
	e->poll.data = e;
	e->poll_init = true;
	uint64_t after = cfg->loop_spin_us;
	if (after == CONFIG_AUTO)
		after = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? CONFIG_LOOP_SPIN_AUTO_CPU
									   : CONFIG_LOOP_SPIN_AUTO_GPU;
	spin_init(&e->spin, (uint64_t)cfg->spin_us * 1000u, after * 1000u);
	log_info("waiting for the GPU: the loop polls up to %u µs past a submission (less "
		 "when batches take longer) and %llu µs after a request, then sleeps",
		 cfg->spin_us, (unsigned long long)after);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		if (pthread_create(&t->thread, NULL, completion_main, t) != 0) {
			if (!uv_is_closing((uv_handle_t *)&e->async))
				uv_close((uv_handle_t *)&e->async, NULL);
			goto fail;
		}
		t->thread_started = true;
	}
	return 0;
fail:
	snprintf(err, errlen, "%s", why);
	engine_destroy(e);
	return -1;
}

void engine_destroy(engine *e)
{
	if (e->poll_init) {
		poll_stop(e, engine_now_ns());
		e->stop_polling = true; /* the answers below must not start it again */
		uv_close((uv_handle_t *)&e->poll, NULL);
		e->poll_init = false;
	}
	if (e->dev && e->dev->dev)
		vkDeviceWaitIdle(e->dev->dev);
	bool threads = false;
	for (int c = 0; c < ENGINE_CLASSES; c++)
		threads |= e->track[c].thread_started;
	if (threads) {
		pthread_mutex_lock(&e->mu);
		e->stop = true;
		for (int c = 0; c < ENGINE_CLASSES; c++)
			pthread_cond_signal(&e->track[c].cv);
		pthread_mutex_unlock(&e->mu);
		for (int c = 0; c < ENGINE_CLASSES; c++)
			if (e->track[c].thread_started) {
				pthread_join(e->track[c].thread, NULL);
				e->track[c].thread_started = false;
			}
		/* the GPU is idle: finish whatever completed but was not yet
		 * handed over (a sliced job's next slices run to the end) */
		for (int c = 0; c < ENGINE_CLASSES; c++) {
			engine_track *t = &e->track[c];
			while (t->ring_count) {
				uint32_t si = t->ring[t->ring_head];
				t->ring_head = (t->ring_head + 1) % ENGINE_RING;
				t->ring_count--;
				if (t->ring_done)
					t->ring_done--;
				vkDeviceWaitIdle(e->dev->dev);
				finish_slot(e, &e->slots[si]);
			}
			t->ring_done = 0;
		}
	}
	if (e->poll_init || threads) {
		if (!uv_is_closing((uv_handle_t *)&e->async))
			uv_close((uv_handle_t *)&e->async, NULL);
	}

	/* one job at a time, the lane fixed up before the answer (a reply
	 * may close its connection, and with it the lane) */
	for (engine_lane *l; (l = active_first(e));) {
		job *j = lane_pop(e, l);
		lane_deactivate(e, l);
		lane_activate(e, l);
		e->jobs_failed++;
		answer(e, j, PROTO_INTERNAL, "the daemon is shutting down", 0, 0, 0);
		job_release(e, j);
	}
	gpu_release(e);
	for (uint32_t i = 0; e->slots && i < e->nslots; i++)
		free(e->slots[i].jobs);
	free(e->slots);
	e->slots = NULL;
	record_free(e->rec);
	e->rec = NULL;
	spare_free(e);
}

void engine_stats(const engine *e, proto_stats *st)
{
	st->jobs_done = e->jobs_done;
	st->jobs_failed = e->jobs_failed;
	st->batches = e->batches;
	st->jobs_per_batch_avg = e->batches ? (double)e->jobs_in_batches / (double)e->batches : 0;
	st->jobs_queued = e->queued;
	st->jobs_running = e->running;
	st->devlocal_min_bytes = e->place.devlocal_min[PROTO_F32] == CONFIG_OFF ? 0 : e->place.devlocal_min[PROTO_F32];
	st->devlocal_min_bytes_16bit = e->place.devlocal_min[PROTO_F16] == CONFIG_OFF ? 0 : e->place.devlocal_min[PROTO_F16];
	st->devlocal_jobs = e->devlocal_jobs;
	st->devlocal_copy_bytes = e->devlocal_copy_bytes;
	st->splitk_jobs = e->splitk_jobs;
	st->dispatches = e->dispatches;
	st->scratch_bytes = 0;
	for (uint32_t i = 0; i < e->nslots; i++)
		st->scratch_bytes += e->slots[i].scratch.size;
	st->scratch_failures = e->scratch_failures;
	st->stream_chunk_bytes = e->stream_chunk == CONFIG_OFF ? 0 : e->stream_chunk;
	st->stream_min_bytes = e->stream_min;
	st->stream_queues = e->dev->xfer_queues;
	st->stream_jobs = e->stream_jobs;
	st->stream_chunks = e->stream_chunks;
	st->stream_dw_blocks = e->stream_dw_blocks;
	metrics_export(&e->metrics, st);
	st->spin_budget_us = e->spin.budget_ns / 1000;
	st->spin_us = atomic_load(&e->spin_ns) / 1000;
	st->spin_hits = atomic_load(&e->spin_hits);
	st->spin_expected = e->spin_expected;
	st->sched_small_jobs = e->track[ENGINE_SMALL].jobs;
	st->sched_large_jobs = e->track[ENGINE_LARGE].jobs;
	st->sched_slices = e->track[ENGINE_LARGE].submissions;
	st->blocking_waits = atomic_load(&e->blocking_waits);
}
