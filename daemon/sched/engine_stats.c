/* daemon/sched/engine_stats.c — what other modules may learn of the
 * engine (engine.h): its counters for `stats`, and the few questions the
 * server, the ops and the recovery ask. */
#include "sched/internal.h"

uint32_t engine_queued(const engine *e)
{
	return e->queued;
}

uint32_t engine_running(const engine *e)
{
	return e->running;
}

bool engine_lost(const engine *e)
{
	return e->lost;
}

metrics *engine_metrics(engine *e)
{
	return &e->metrics;
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
	st->stream_shared_jobs = e->stream_shared_jobs;
	metrics_export(&e->metrics, st);
	st->spin_budget_us = e->spin.budget_ns / 1000;
	st->spin_us = atomic_load(&e->spin_ns) / 1000;
	st->spin_hits = atomic_load(&e->spin_hits);
	st->spin_expected = e->spin_expected;
	st->sched_small_jobs = e->track[ENGINE_SMALL].jobs;
	st->sched_large_jobs = e->track[ENGINE_LARGE].jobs;
	st->sched_slices = e->track[ENGINE_LARGE].submissions;
	st->blocking_waits = atomic_load(&e->blocking_waits);
	st->host_read_bytes = e->host_read_bytes;
	st->host_write_bytes = e->host_write_bytes;
}
