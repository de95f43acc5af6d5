/* daemon/sched/track.c — a track's completion thread, and the loop's polling
 * of every track (spin.h): batches seen done, handed to the loop. */
#include "sched/internal.h"
#include "clock.h"

#include "log.h"

#include <unistd.h>

#define ENGINE_WAIT_NS 200000000ull /* completion thread re-checks `stop` this often */

/* The kind of job j for the expected ends of single-job batches (spin.h):
 * what makes its batch take the time it does (shape, dtype, outputs,
 * accumulate, its kernels and path), hashed (FNV-1a), never 0. */
uint64_t sched_job_kind(const job *j)
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
engine_slot *sched_track_oldest(engine_track *t)
{
	if (t->ring_done == t->ring_count)
		return NULL;
	return &t->e->slots[t->ring[(t->ring_head + t->ring_done) % ENGINE_RING]];
}

/* A track's completion thread blocks on each of its batches in turn (it
 * never spins: the loop polls while a batch may finish soon, spin.h) and
 * wakes the loop for a batch the loop has not seen done first. */
void *sched_completion_main(void *arg)
{
	engine_track *t = arg;
	engine *e = t->e;
	pthread_mutex_lock(&e->mu);
	while (!e->stop) {
		engine_slot *s0 = sched_track_oldest(t);
		if (!s0) {
			/* nothing in flight: sleep */
			pthread_cond_wait(&t->cv, &e->mu);
			continue;
		}
		if (s0->unsignaled) {
			/* its submission failed (submit.c): nothing to wait for */
			s0->seen = true;
			s0->t_seen_ns = clock_now_ns();
			t->ring_done++;
			uv_async_send(&e->async);
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
			const uint64_t now0 = clock_now_ns();
			timeout = poll_at > now0 ? poll_at - now0 : 0;
		}
		VkResult r = vkWaitSemaphores(e->dev->dev, &wi, timeout);
		if (r == VK_SUCCESS && e->fault_late_us)
			usleep(e->fault_late_us); /* tests: let the polling loop see it first */
		const uint64_t now = clock_now_ns();
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

int sched_completion_start(engine *e)
{
	pthread_mutex_lock(&e->mu);
	e->stop = false;
	pthread_mutex_unlock(&e->mu);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		if (t->thread_started)
			continue;
		if (pthread_create(&t->thread, NULL, sched_completion_main, t) != 0)
			return -1;
		t->thread_started = true;
	}
	return 0;
}

bool sched_completion_stop(engine *e)
{
	bool any = false;
	for (int c = 0; c < ENGINE_CLASSES; c++)
		any |= e->track[c].thread_started;
	if (!any)
		return false;
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
	return true;
}

/* Loop thread: mark every batch of track t whose value its semaphore has
 * reached as seen. Returns whether there was one. */
static bool poll_track(engine *e, engine_track *t)
{
	uint64_t oldest = 0, cur = 0;
	pthread_mutex_lock(&e->mu);
	const engine_slot *s0 = sched_track_oldest(t);
	if (s0 && !s0->unsignaled) /* (a failed submission: the completion thread's) */
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
	const uint64_t now = clock_now_ns();
	bool any = false;
	pthread_mutex_lock(&e->mu);
	for (engine_slot *s; (s = sched_track_oldest(t)) && !s->unsignaled && cur >= s->value;) {
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

void sched_poll_start(engine *e, uint64_t now)
{
	if (e->polling || e->stop_polling)
		return;
	e->polling = true;
	e->poll_since_ns = now;
	uv_idle_start(&e->poll, sched_poll_cb);
}

void sched_poll_stop(engine *e, uint64_t now)
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
	const uint64_t now = clock_now_ns();
	e->poll_until_ns = now + e->spin.after_ns;
	sched_poll_start(e, now);
}

/* The completion thread asked the loop to poll for a batch near its
 * expected end (spin.h): from now until the lead past it, unless that
 * batch is finished already. */
void sched_poll_expected(engine *e)
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
		const uint64_t now = clock_now_ns();
		if (!pending || now >= to)
			continue;
		t->poll_for_value = value;
		t->poll_for_to_ns = to;
		sched_poll_start(e, now);
	}
}

/* uv_idle: while it runs the loop polls instead of sleeping (spin.h). Each
 * iteration looks at the GPU; polling stops once the oldest batch in
 * flight is past the spin budget and no socket activity is recent. */
void sched_poll_cb(uv_idle_t *h)
{
	engine *e = h->data;
	if (poll_gpu(e)) {
		e->reap(e); /* engine.c's: finish them (track.c never calls up) */
		engine_activity(e); /* replies went out: the next requests come soon */
	}
	const uint64_t now = clock_now_ns();
	bool keep = now < e->poll_until_ns;
	pthread_mutex_lock(&e->mu);
	keep |= e->launching != 0; /* handed to the submission thread, not yet in a ring */
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		keep |= now < t->poll_for_to_ns;
		const engine_slot *s = sched_track_oldest(t);
		if (s)
			keep |= now < s->t_submitted_ns + e->spin.budget_ns;
	}
	pthread_mutex_unlock(&e->mu);
	if (!keep)
		sched_poll_stop(e, now);
}
