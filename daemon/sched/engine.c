/* daemon/sched/engine.c — see engine.h. */
#include "sched/internal.h"
#include "clock.h"

#include "log.h"
#include "placement.h"
#include "record.h"
#include "stream.h"
#include "spin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- spare jobs -------------------------------------------------------------- */

#define ENGINE_SPARE_JOBS 1024

/* A job the engine is done with: its region references dropped, kept
 * for engine_job_new while there are fewer than ENGINE_SPARE_JOBS. */
void sched_job_release(engine *e, job *j)
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

/* ---- finishing jobs --------------------------------------------------------- */

/* Hand job j's outcome to the owner (engine_events.done). */
void sched_answer(engine *e, job *j, proto_code code, const char *msg, uint64_t queued_us,
		   uint64_t gpu_us, uint32_t batch_jobs)
{
	e->ev.done(e->ev.done_ctx, j, code, msg, queued_us, gpu_us, batch_jobs);
}

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

/* What finished job j moved from and to client memory (a device
 * tensor's slots move nothing there). */
static void host_bytes(engine *e, const job *j)
{
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		const region *r = j->reg[t];
		if (!r || r->device_local)
			continue;
		if (job_is_output(j, t))
			e->host_write_bytes += j->bytes[t];
		if (!job_is_output(j, t) || j->req.accumulate)
			e->host_read_bytes += j->bytes[t];
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
		sched_launch(e, (uint32_t)(s - e->slots));
		return;
	}
	gpu_us += s->slice_gpu_us;
	s->t_answer_ns = clock_now_ns();
	if (!s->failed) {
		uint64_t to_gpu_end = 0;
		sched_slot_stages(e, s, st, &st_mask, &to_gpu_end);
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
	for (uint32_t i = 0; i < s->njobs; i++) {
		engine_lane *l = s->jobs[i]->lane;
		/* (a failed submission's value is never signalled: no job of the
		 * lane's other class may wait for it) */
		if (!s->unsignaled && l->done_value[s->cls] < s->value)
			l->done_value[s->cls] = s->value;
		sched_lane_release(s->jobs[i]);
	}
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
			sched_job_stages(s, j, st, st_mask);
		if (!s->failed && (j->devlocal || j->ts_direct) && e->dev->timestamps) {
			const volatile uint64_t *ts = s->ts_map + j->ts_index;
			if (ts[1] >= ts[0]) {
				/* at least 1: a client cannot tell a measured 0 from "not sent" */
				j->kernel_us = (uint64_t)((double)(ts[1] - ts[0]) * e->dev->timestamp_period / 1000.0);
				if (j->kernel_us == 0)
					j->kernel_us = 1;
				j->has_kernel_us = true;
			}
			if (j->devlocal)
				stream_timeline(e, (uint32_t)(s - e->slots), j);
		}
		if (!s->failed) {
			/* staged outputs back into the client's memory, in job order;
			 * a fault there fails this job alone */
			proto_err err;
			int rc = 0;
			for (int t = 0; t < PROTO_T_COUNT && rc == 0; t++) {
				region *r = j->reg[t];
				if (r && r->staged && job_is_output(j, t))
					rc = region_stage_copy(r, j->req.t[t].offset, j->bytes[t], false,
							       proto_tensor_key[t], &err);
			}
			if (rc == 0) {
				e->jobs_done++;
				host_bytes(e, j);
				metrics_observe(&e->metrics, METRICS_JOB_QUEUED,
						(j->t_submit_ns - j->t_queued_ns) / 1000);
				metrics_observe(&e->metrics, METRICS_JOB_LATENCY,
						(clock_now_ns() - j->t_queued_ns) / 1000);
			} else {
				e->jobs_failed++;
			}
			sched_answer(e, j, rc == 0 ? PROTO_OK : err.code, rc == 0 ? NULL : err.message,
				(j->t_submit_ns - j->t_queued_ns) / 1000, gpu_us, s->njobs);
			/* the stages the answer traced (engine_job_trace) */
			if (rc == 0 && (j->stage_mask & (1u << PROTO_STAGE_ANSWER)))
				metrics_stages(&e->metrics, j->stage_ns, j->stage_mask);
		} else {
			e->jobs_failed++;
			sched_answer(e, j, PROTO_DEVICE_LOST, "the GPU failed while running this job's batch",
				(j->t_submit_ns - j->t_queued_ns) / 1000, 0, s->njobs);
		}
		sched_job_release(e, j);
	}
	e->running -= s->njobs;
	s->njobs = 0;
	s->busy = false;
	s->failed = false;
	s->slice_more = false;
	s->slice_len = s->slice_from = s->slice_gpu_us = s->slices = 0;
}

/* Finish every batch seen done, in submission order, then submit more.
 * The loop's polling (track.c) reaches it through e->reap. */
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

static void async_cb(uv_async_t *h)
{
	reap(h->data);
	engine_activity(h->data); /* replies went out: the next requests come soon */
	sched_poll_expected(h->data);
}

/* Staged regions: the client's current bytes into the mirrors, in job
 * order, before anything is recorded. A job whose copy faults leaves the
 * batch, answered bad_region, its outputs untouched. */
static void stage_in(engine *e, engine_slot *s)
{
	uint64_t now = clock_now_ns();
	uint32_t kept = 0;
	for (uint32_t i = 0; i < s->njobs; i++) {
		job *j = s->jobs[i];
		j->t_submit_ns = now;
		proto_err err;
		int rc = 0;
		for (int t = 0; t < PROTO_T_COUNT && rc == 0; t++) {
			region *r = j->reg[t];
			/* a device tensor whose memory went with a lost device
			 * (tensor.h): the job cannot run */
			if (r && r->device_local && r->buf == VK_NULL_HANDLE)
				rc = proto_fail(&err, PROTO_DEVICE_LOST,
						"tensor '%s' was lost with the GPU (a device loss and recovery "
						"since it was made): free it and make a new one",
						proto_tensor_key[t]);
			else if (r && r->staged && (!job_is_output(j, t) || j->req.accumulate))
				rc = region_stage_copy(r, j->req.t[t].offset, j->bytes[t], true,
						       proto_tensor_key[t], &err);
		}
		if (rc == 0) {
			s->jobs[kept++] = j;
			continue;
		}
		e->jobs_failed++;
		sched_lane_release(j);
		sched_answer(e, j, err.code, err.message, (now - j->t_queued_ns) / 1000, 0, 0);
		sched_job_release(e, j);
	}
	s->njobs = kept;
}

/* Jobs that cannot run without scratch (a linear_backward's dZ,
 * placement.c: act_no_scratch) leave the batch, answered `limit`, nothing
 * written. */
static void no_scratch_out(engine *e, engine_slot *s)
{
	const uint64_t now = clock_now_ns();
	uint32_t kept = 0;
	for (uint32_t i = 0; i < s->njobs; i++) {
		job *j = s->jobs[i];
		if (!j->act_no_scratch) {
			s->jobs[kept++] = j;
			continue;
		}
		char msg[200];
		snprintf(msg, sizeof(msg),
			 "activation '%s' needs %llu bytes of device scratch for dZ (scratch cap %llu "
			 "bytes per slot); none could be had now",
			 proto_activation_name(j->req.activation), (unsigned long long)j->bytes[PROTO_T_DY],
			 (unsigned long long)e->place.scratch_cap);
		e->jobs_failed++;
		sched_lane_release(j);
		sched_answer(e, j, PROTO_LIMIT, msg, (now - j->t_queued_ns) / 1000, 0, 0);
		sched_job_release(e, j);
	}
	s->njobs = kept;
}

/* Form a batch in free slot si from its class's lanes and launch it. */
static void submit_slot(engine *e, uint32_t si)
{
	engine_slot *s = &e->slots[si];
	s->t_take_ns = clock_now_ns();
	uint64_t need = sched_take_jobs(e, s);
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
	no_scratch_out(e, s);
	if (s->njobs == 0)
		return;
	for (uint32_t i = 0; i < s->njobs; i++) {
		e->devlocal_jobs += s->jobs[i]->devlocal;
		e->splitk_jobs += s->jobs[i]->plan.param == KERN_SPLITK || s->jobs[i]->plan.input == KERN_SPLITK ||
				  s->jobs[i]->plan.param == KERN_SPLITK128 || s->jobs[i]->plan.input == KERN_SPLITK128 ||
				  pipelines_is_cmks(s->jobs[i]->plan.param) || pipelines_is_cmks_dx(s->jobs[i]->plan.param);
	}
	s->slice_len = sched_slice_len(e, s);
	s->slice_from = s->slice_gpu_us = s->slices = 0;
	s->wait_other = 0;
	for (uint32_t i = 0; i < s->njobs; i++) {
		const engine_lane *l = s->jobs[i]->lane;
		if (l->switched && l->done_value[!s->cls] > s->wait_other)
			s->wait_other = l->done_value[!s->cls];
	}
	/* a sliced batch has no expected end: its slices' times vary */
	s->kind = s->njobs == 1 && !s->slice_len ? sched_job_kind(s->jobs[0]) : 0; /* its placement final */
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
	sched_launch(e, si);
}

/* ---- lanes and batch formation ---------------------------------------------- */

void engine_pump(engine *e)
{
	if (e->down) {
		engine_fail_queued(e, "there is no usable GPU (it was lost and not recreated)");
		return;
	}
	/* small jobs first: their batch goes in ahead of a large one's */
	for (uint32_t c = 0; c < ENGINE_CLASSES && !e->lost; c++) {
		while (!e->lost && sched_class_ready(e, c)) {
			const uint32_t si = sched_free_slot(e, c);
			if (si == e->nslots)
				break;
			submit_slot(e, si);
		}
	}
}

/* Closing a connection's lane answers its queued jobs (engine.h): here,
 * where jobs are answered, so that lanes.c never calls up. */
void engine_lane_close(engine *e, engine_lane *l)
{
	if (!l)
		return;
	sched_lane_deactivate(e, l);
	while (sched_lane_first(l)) {
		job *j = sched_lane_pop(e, l);
		e->jobs_failed++;
		sched_answer(e, j, PROTO_INTERNAL, "the connection closed before the job ran", 0, 0, 0);
		sched_job_release(e, j);
	}
	if (l->running) /* finish_slot frees it after the last one */
		l->closed = true;
	else
		free(l);
}

bool engine_idle(const engine *e)
{
	return e->queued == 0 && e->running == 0;
}

engine *engine_new(void)
{
	return calloc(1, sizeof(engine));
}

void engine_free(engine *e)
{
	free(e);
}

void engine_shut_down(engine *e, const char *why)
{
	e->down = true;
	engine_fail_queued(e, why);
}

bool engine_fault_recreate(engine *e, uint64_t *left)
{
	if (!e->fault_recreate)
		return false;
	*left = --e->fault_recreate;
	return true;
}

void engine_fail_queued(engine *e, const char *why)
{
	/* one job at a time, the lane fixed up before the answer: a reply may
	 * close its connection, which closes (and frees) the lane */
	for (engine_lane *l; (l = sched_active_first(e));) {
		job *j = sched_lane_pop(e, l);
		sched_lane_deactivate(e, l);
		sched_lane_activate(e, l);
		e->jobs_failed++;
		sched_answer(e, j, PROTO_DEVICE_LOST, why, (clock_now_ns() - j->t_queued_ns) / 1000, 0, 0);
		sched_job_release(e, j);
	}
}

/* ---- setup ---------------------------------------------------------------- */

/* Every batch is finished, but that is what the engine saw, not the
 * driver: its queue may still be done with a submission only after its
 * value was signalled (lavapipe's submission thread releases the
 * submission's hold on each semaphore afterwards, under that semaphore's
 * lock), and a track's completion thread may still be in (or about to
 * enter) its wait on the old timeline for a batch the polling loop saw
 * done first. Destroying the semaphores under either left a thread on a
 * freed lock: the device's destruction then waited for it forever, the
 * loop with it, and the job queued behind the lost one was never
 * answered. So: the engine's threads stop (they start again with the new
 * objects, engine_gpu_restore), the device goes idle (on a lost device
 * the wait fails at once, and nothing of it runs any more), and only then
 * do its objects go. */
void engine_gpu_release(engine *e)
{
	sched_submitter_stop(e);
	sched_completion_stop(e);
	if (e->dev && e->dev->dev)
		vkDeviceWaitIdle(e->dev->dev);
	sched_gpu_release(e);
}

int engine_gpu_restore(engine *e, char *err, size_t errlen)
{
	if (sched_gpu_create(e) != 0) {
		snprintf(err, errlen, "creating the engine's Vulkan objects failed");
		sched_gpu_release(e);
		return -1;
	}
	if (sched_completion_start(e) != 0 || (e->cfg->submit_thread && sched_submitter_start(e) != 0)) {
		snprintf(err, errlen, "starting the engine's threads failed");
		engine_gpu_release(e);
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
	e->reap = reap;
	/* small jobs' slots first, then the large ones': one where both
	 * share a queue (a small batch then waits for one slice at most) */
	const bool cpu = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	for (uint32_t c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		t->e = e;
		t->cls = c;
		t->first = e->nslots;
		/* (twice the slots for small jobs was tried on the H200: smaller
		 * batches, tiny p50 alone 140 µs against 84-97; docs/performance.md) */
		t->nslots = c == ENGINE_LARGE && d->compute_queues < 2 ? 1 : cfg->inflight_batches;
		e->nslots += t->nslots;
		fair_init(&t->fair);
		pthread_cond_init(&t->cv, NULL);
		pthread_cond_init(&t->launch_cv, NULL);
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
	sched_parse_faults(e);
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
	pthread_mutex_init(&e->stream_mu, NULL);
	pthread_mutex_init(&e->queue_mu, NULL);
	pthread_mutex_init(&e->cal_mu, NULL);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		e->track[c].rec = record_new(d, pl, cfg->dispatch_max_macs, cfg->max_batch_jobs);
		if (!e->track[c].rec) {
			why = "out of memory for the batch recorder";
			goto fail;
		}
	}
	if (sched_gpu_create(e) != 0)
		goto fail;
	/* device-local copies on the compute queue in pieces (config.h) */
	const uint64_t piece = cfg->copy_piece_bytes;
	if (piece != CONFIG_AUTO && piece != CONFIG_OFF) {
		for (int c = 0; c < ENGINE_CLASSES; c++)
			record_set_copy_piece(e->track[c].rec, piece);
		log_info("device-local copies on the compute queue: in pieces of at most %llu bytes",
			 (unsigned long long)piece);
	}
	if (uv_async_init(loop, &e->async, async_cb) != 0) {
		why = "uv_async_init failed";
		goto fail;
	}
	e->async.data = e;
	e->async_open = true;
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
	if (sched_completion_start(e) != 0) {
		if (!uv_is_closing((uv_handle_t *)&e->async))
			uv_close((uv_handle_t *)&e->async, NULL);
		goto fail;
	}
	if (cfg->submit_thread && sched_submitter_start(e) != 0) {
		why = "starting the submission threads failed";
		if (!uv_is_closing((uv_handle_t *)&e->async))
			uv_close((uv_handle_t *)&e->async, NULL);
		goto fail;
	}
	log_info("batches are recorded and submitted on %s",
		 cfg->submit_thread ? "a thread of their own per job class" : "the loop thread");
	return 0;
fail:
	snprintf(err, errlen, "%s", why);
	engine_destroy(e);
	return -1;
}

void engine_destroy(engine *e)
{
	if (e->poll_init) {
		sched_poll_stop(e, clock_now_ns());
		e->stop_polling = true; /* the answers below must not start it again */
		uv_close((uv_handle_t *)&e->poll, NULL);
		e->poll_init = false;
	}
	/* every batch handed over submitted (the queues are the loop's again) */
	sched_submitter_stop(e);
	if (e->dev && e->dev->dev)
		vkDeviceWaitIdle(e->dev->dev);
	const bool threads = sched_completion_stop(e);
	if (threads) {
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
	/* (the completion threads may be stopped already: a recovery that
	 * gave up) */
	if (e->async_open) {
		e->async_open = false;
		if (!uv_is_closing((uv_handle_t *)&e->async))
			uv_close((uv_handle_t *)&e->async, NULL);
	}

	/* one job at a time, the lane fixed up before the answer (a reply
	 * may close its connection, and with it the lane) */
	for (engine_lane *l; (l = sched_active_first(e));) {
		job *j = sched_lane_pop(e, l);
		sched_lane_deactivate(e, l);
		sched_lane_activate(e, l);
		e->jobs_failed++;
		sched_answer(e, j, PROTO_INTERNAL, "the daemon is shutting down", 0, 0, 0);
		sched_job_release(e, j);
	}
	sched_gpu_release(e);
	for (uint32_t i = 0; e->slots && i < e->nslots; i++)
		free(e->slots[i].jobs);
	free(e->slots);
	e->slots = NULL;
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		record_free(e->track[c].rec);
		e->track[c].rec = NULL;
	}
	spare_free(e);
}
