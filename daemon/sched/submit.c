/* daemon/sched/submit.c — the submission threads: batches the loop formed,
 * recorded and submitted off the loop thread, so the loop goes on reading
 * requests and writing replies while a command buffer is recorded.
 *
 * The loop forms a batch in a free slot (engine.c: jobs taken, staged
 * inputs copied, scratch reserved) and hands the slot to its track's
 * thread, which records it (record.h, or stream.h for a streamed job),
 * submits it on the track's queue and puts it in the track's ring, which
 * the completion thread waits on. One thread per track: a small batch is
 * never recorded behind a large one (a streamed large job's recording
 * takes hundreds of µs). A track's slots go in the order handed over, so
 * its ring stays in submission order. A failed recording or submission
 * goes in the ring too, `unsignaled`: the completion thread sees it at
 * once and the loop answers its jobs device_lost. With --submit-thread
 * off (or once the threads are stopped) the loop does the same itself. */
#include "sched/internal.h"
#include "clock.h"

#include "log.h"
#include "record.h"
#include "stream.h"

#include <assert.h>


/* Record slot si's batch (its next slice, when sliced), submit it on its
 * track's queue and put it in the track's ring; `handed`: it came through
 * the submission thread's queue. */
static void launch(engine *e, uint32_t si, bool handed)
{
	engine_slot *s = &e->slots[si];
	engine_track *tr = &e->track[s->cls];
	/* (a failed scratch reservation may have dropped its streaming) */
	const bool streamed = s->njobs == 1 && s->jobs[0]->streamed;
	record_counts counts;
	const record_target tg = {
		.pool = s->pool, .cb = s->cb, .queries = s->queries, .ts_buf = s->ts_buf,
		.scratch = s->scratch.buf, .dummy = e->dummy, .dummy_piece = e->dummy_piece,
		.first_piece = (uint64_t)si * e->cfg->max_batch_jobs, .jobs = s->jobs, .njobs = s->njobs,
		.slice_from = s->slice_from, .slice_len = s->slice_len,
	};
	/* the streams' objects are shared by both tracks' streamed jobs */
	if (streamed)
		pthread_mutex_lock(&e->stream_mu);
	const VkResult rec = streamed ? stream_record(e, si, &tg, &counts)
				      : record_batch(tr->rec, &tg, &counts);
	e->dispatches += counts.dispatches;
	e->devlocal_copy_bytes += counts.copy_bytes;
	s->nqueries = counts.nqueries;
	s->slice_more = s->slice_len && counts.slice_more;
	s->slice_next = counts.slice_next;
	s->slices += s->slice_len != 0;
	tr->submissions++;
	s->t_recorded_ns = clock_now_ns();
	pthread_mutex_lock(&e->cal_mu);
	sched_calibrate(e, s->t_recorded_ns);
	s->cal_ok = e->cal_ok;
	s->cal_dev = e->cal_dev;
	s->cal_host_ns = e->cal_host_ns;
	pthread_mutex_unlock(&e->cal_mu);
	s->value = ++tr->next_value;
	s->unsignaled = false;
	/* a connection's job after its jobs of the other class: the device
	 * sees their writes through a wait on that track's value (reached
	 * already: the lane waited for them, engine_lane) */
	const VkSemaphore other = e->track[!s->cls].timeline;
	const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
	const bool wait = s->wait_other && s->slices <= 1; /* the first submission (slice) only */
	VkTimelineSemaphoreSubmitInfo tsi = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.waitSemaphoreValueCount = wait ? 1 : 0,
		.pWaitSemaphoreValues = wait ? &s->wait_other : NULL,
		.signalSemaphoreValueCount = 1,
		.pSignalSemaphoreValues = &s->value,
	};
	VkSubmitInfo si_ = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = &tsi,
		.waitSemaphoreCount = wait ? 1 : 0,
		.pWaitSemaphores = wait ? &other : NULL,
		.pWaitDstStageMask = wait ? &wait_stage : NULL,
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
	} else if (atomic_fetch_add(&e->submits, 1) + 1 == e->fault_submit_at) {
		log_warn("fault injection: submission %llu reports device loss",
			 (unsigned long long)e->fault_submit_at);
		r = VK_ERROR_DEVICE_LOST;
	} else {
		/* the device's first queue takes the large track's batches and
		 * every streamed job's kernels (stream.c), from either track's
		 * thread; where both tracks share one queue, all of theirs */
		const bool lock_q = e->shared_queue || streamed || tr->queue == e->dev->queue;
		if (lock_q)
			pthread_mutex_lock(&e->queue_mu);
		r = streamed ? stream_submit(e, si) : vkQueueSubmit(tr->queue, 1, &si_, VK_NULL_HANDLE);
		if (lock_q)
			pthread_mutex_unlock(&e->queue_mu);
	}
	if (streamed)
		pthread_mutex_unlock(&e->stream_mu);
	s->t_submitted_ns = clock_now_ns();
	s->poll_at_ns = s->poll_to_ns = 0;
	if (r != VK_SUCCESS) {
		log_err("%s failed (VkResult %d); %u job(s) fail", what, r, s->njobs);
		/* nothing will signal s->value: give the value back; the ring
		 * hands the slot to the loop as failed (the recovery starts there) */
		s->failed = true;
		tr->next_value--;
		s->unsignaled = true;
	} else if (s->expect_ns) {
		/* a kind seen before, longer than the budget: the loop polls
		 * around its expected end (spin.h) */
		const uint64_t lead = spin_lead(s->expect_ns);
		s->poll_at_ns = s->t_submitted_ns + (s->expect_ns > lead ? s->expect_ns - lead : 0);
		s->poll_to_ns = s->t_submitted_ns + s->expect_ns + lead;
	}
	pthread_mutex_lock(&e->mu);
	assert(tr->ring_count < tr->nslots && tr->nslots <= ENGINE_RING); /* one entry per slot */
	s->seen = false;
	tr->ring[(tr->ring_head + tr->ring_count) % ENGINE_RING] = si;
	tr->ring_count++;
	if (handed)
		e->launching--;
	pthread_cond_signal(&tr->cv);
	pthread_mutex_unlock(&e->mu);
}

void sched_launch(engine *e, uint32_t si)
{
	engine_slot *s = &e->slots[si];
	engine_track *tr = &e->track[s->cls];
	/* a sliced batch has no expected end (kind 0): its slices' times vary */
	s->expect_ns = spin_expect(&e->spin, s->kind);
	e->spin_expected += s->expect_ns != 0;
	if (tr->submitter_started) {
		pthread_mutex_lock(&e->mu);
		assert(tr->launch_count < ENGINE_RING);
		tr->launch_q[(tr->launch_head + tr->launch_count) % ENGINE_RING] = si;
		tr->launch_count++;
		e->launching++;
		pthread_cond_signal(&tr->launch_cv);
		pthread_mutex_unlock(&e->mu);
	} else {
		launch(e, si, false);
	}
	if (e->spin.budget_ns)
		sched_poll_start(e, clock_now_ns()); /* it may be done within the budget */
}

/* A track's submission thread: each slot handed over, in order; it stops
 * once asked and nothing is left to submit. Once its queue is empty it
 * polls for the next slot as long as the loop polls its sockets after a
 * request (--loop-spin-us, spin.h: a wake-up costs more than a small
 * batch's recording), then sleeps. */
static void *submit_main(void *arg)
{
	engine_track *tr = arg;
	engine *e = tr->e;
	bool polled = false;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		if (tr->launch_count == 0) {
			if (tr->submitter_stop)
				break;
			if (!polled && e->spin.after_ns) {
				polled = true;
				pthread_mutex_unlock(&e->mu);
				const uint64_t until = clock_now_ns() + e->spin.after_ns;
				while (atomic_load_explicit(&tr->launch_count, memory_order_relaxed) == 0 &&
				       clock_now_ns() < until)
					;
				pthread_mutex_lock(&e->mu);
				continue;
			}
			pthread_cond_wait(&tr->launch_cv, &e->mu);
			continue;
		}
		polled = false;
		const uint32_t si = tr->launch_q[tr->launch_head];
		tr->launch_head = (tr->launch_head + 1) % ENGINE_RING;
		tr->launch_count--;
		pthread_mutex_unlock(&e->mu);
		launch(e, si, true);
		pthread_mutex_lock(&e->mu);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int sched_submitter_start(engine *e)
{
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *tr = &e->track[c];
		tr->submitter_stop = false;
		tr->launch_head = tr->launch_count = 0;
		if (pthread_create(&tr->submitter, NULL, submit_main, tr) != 0) {
			sched_submitter_stop(e);
			return -1;
		}
		tr->submitter_started = true;
	}
	return 0;
}

void sched_submitter_stop(engine *e)
{
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *tr = &e->track[c];
		if (!tr->submitter_started)
			continue;
		pthread_mutex_lock(&e->mu);
		tr->submitter_stop = true;
		pthread_cond_signal(&tr->launch_cv);
		pthread_mutex_unlock(&e->mu);
		pthread_join(tr->submitter, NULL);
		tr->submitter_started = false;
	}
}
