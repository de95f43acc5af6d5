/* daemon/metrics.h — latency histograms kept beside the engine's counters
 * and reported by `stats` (proto/README.md, "histograms"):
 *   job_latency  a job's time in the daemon: request arrival to its reply
 *   job_queued   arrival to submission (the reply's queued_us)
 *   batch_gpu    GPU time of each batch (the reply's gpu_us), once per batch
 * Fixed bucket bounds from 10 µs to 10 s, 1-2.5-5 per decade: enough to
 * tell a 50 µs tiny job from a 20 ms large one and from a stall. Updated
 * and read on the loop thread only. */
#ifndef VKG_DAEMON_METRICS_H
#define VKG_DAEMON_METRICS_H

#include <stdint.h>

#include "msg.h"

#define METRICS_NLE 19

typedef struct metrics_hist {
	uint64_t counts[METRICS_NLE + 1]; /* per bucket; the last: above every bound */
	uint64_t sum_us, count;
} metrics_hist;

enum { METRICS_JOB_LATENCY, METRICS_JOB_QUEUED, METRICS_BATCH_GPU, METRICS_COUNT };

typedef struct metrics {
	metrics_hist h[METRICS_COUNT];
} metrics;

/* the bounds, µs, rising */
extern const uint64_t metrics_le_us[METRICS_NLE];

void metrics_observe(metrics *m, int which, uint64_t us);
/* Every histogram into s->hist (s->n_hist set). */
void metrics_export(const metrics *m, proto_stats *s);

#endif
