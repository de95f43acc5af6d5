/* daemon/sched/lanes.c — connections' queues and batch formation: which
 * lane's job goes next in each class (fair.h), the order across classes,
 * what a batch may take, when a large job goes in slices. */
#include "sched/internal.h"
#include "clock.h"

#include "placement.h"
#include "stream.h"

#include <assert.h>
#include <stdlib.h>

/* Job j, taken into a batch, leaves its lane's in-flight work (engine_lane):
 * its batch finished, or it left the batch unrecorded. Frees a closed lane
 * with nothing left running. */
void sched_lane_release(job *j)
{
	engine_lane *l = j->lane;
	l->inflight_macs -= job_macs(j);
	l->running--;
	l->running_cls[j->cls]--;
	j->lane = NULL;
	if (l->closed && l->running == 0)
		free(l);
}

/* Lane l's first queued job, or NULL. */
job *sched_lane_first(const engine_lane *l)
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
bool sched_can_take(const engine *e, const engine_lane *l)
{
	const job *j = sched_lane_first(l);
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
	return sched_can_take(p->e, lane_of(f, p->cls));
}

/* Should slot s's batch go in slices? One large job alone, where both
 * classes share a queue, estimated longer than a slice, on the direct
 * path (device-local copies and streamed jobs are not sliced): then its
 * slices' length in multiply-adds, from its estimate. 0: whole. */
uint64_t sched_slice_len(const engine *e, const engine_slot *s)
{
	if (!e->shared_queue || s->cls != ENGINE_LARGE || s->njobs != 1)
		return 0;
	const job *j = s->jobs[0];
	if (j->devlocal || j->streamed || job_is_copy(j) || job_is_optim(j) || j->est_ns <= e->slice_ns || !j->est_macs)
		return 0;
	const double len = (double)j->est_macs * (double)e->slice_ns / (double)j->est_ns;
	return len >= 1 ? (uint64_t)len : 1;
}

/* Lane l is active in the class of its first job, if it has one. */
void sched_lane_activate(engine *e, engine_lane *l)
{
	const job *j = sched_lane_first(l);
	if (j)
		fair_activate(&e->track[j->cls].fair, &l->fair[j->cls]);
}

void sched_lane_deactivate(engine *e, engine_lane *l)
{
	for (int c = 0; c < ENGINE_CLASSES; c++)
		fair_deactivate(&e->track[c].fair, &l->fair[c]);
}

job *sched_lane_pop(engine *e, engine_lane *l)
{
	job *j = sched_lane_first(l);
	assert(j && l->n > 0 && e->queued > 0);
	queue_remove(&j->node);
	l->n--;
	e->queued--;
	return j;
}

/* The lane with queued jobs whose turn is next in any class, or NULL. */
engine_lane *sched_active_first(const engine *e)
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
uint64_t sched_take_jobs(engine *e, engine_slot *s)
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
		job *j = sched_lane_first(l);
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
		l->switched = l->took && l->last_cls != j->cls;
		l->last_cls = j->cls;
		l->took = true;
		fair_charge(&tr->fair, f, (double)j->est_ns);
		s->jobs[s->njobs++] = sched_lane_pop(e, l);
		/* its next job may be of the other class */
		sched_lane_deactivate(e, l);
		sched_lane_activate(e, l);
		if (j->streamed) {
			e->stream_shared_jobs += jb < e->stream_min; /* (stream_wants) */
			break;
		}
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
		sched_lane_activate(e, out[i]);
	return used;
}

/* A free slot of track c, or nslots. */
uint32_t sched_free_slot(const engine *e, uint32_t c)
{
	const engine_track *t = &e->track[c];
	for (uint32_t i = t->first; i < t->first + t->nslots; i++)
		if (!e->slots[i].busy)
			return i;
	return e->nslots;
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

/* Lane l queued a small job at time ns: e->small_seen_* keep the two
 * lanes whose small jobs came last, the most recent first. */
static void small_seen(engine *e, const engine_lane *l, uint64_t ns)
{
	if (e->small_seen_lane[0] != l) {
		e->small_seen_lane[1] = e->small_seen_lane[0];
		e->small_seen_ns[1] = e->small_seen_ns[0];
		e->small_seen_lane[0] = l;
	}
	e->small_seen_ns[0] = ns;
}

bool sched_others_small(const engine *e, const engine_lane *l, uint64_t now)
{
	for (int i = 0; i < 2; i++)
		if (e->small_seen_ns[i] && e->small_seen_lane[i] != l &&
		    now - e->small_seen_ns[i] < CONFIG_STREAM_SHARED_WINDOW_NS)
			return true;
	return false;
}

void engine_enqueue(engine *e, engine_lane *l, job *j)
{
	j->lane = l;
	j->t_queued_ns = clock_now_ns();
	const uint64_t dmin = e->place.devlocal_min[j->req.dtype];
	j->est_key = estimate_key(&j->req, dmin != CONFIG_OFF && job_bytes(j) >= dmin);
	j->est_macs = job_macs(j);
	j->est_ns = estimate_ns(&e->est, j->est_key, j->req.dtype, j->est_macs);
	/* a kind not measured yet is large until its first batch (of its kind
	 * alone, take_jobs) is measured: a prior may be far off */
	j->cls = j->est_ns <= e->small_ns && estimate_known(&e->est, j->est_key) ? ENGINE_SMALL
										    : ENGINE_LARGE;
	if (j->cls == ENGINE_SMALL)
		small_seen(e, l, j->t_queued_ns);
	queue_insert_tail(&l->jobs, &j->node);
	l->n++;
	e->queued++;
	if (l->n == 1)
		sched_lane_activate(e, l);
}

bool sched_class_ready(const engine *e, uint32_t cls)
{
	pick_ctx pc = {.e = e, .cls = cls};
	return e->track[cls].fair.n && fair_pick((fair_class *)&e->track[cls].fair, fair_ok, &pc);
}
