/* daemon/metrics.h — latency histograms and stage windows kept beside the
 * engine's counters and reported by `stats` (proto/README.md,
 * "histograms", "stages"):
 *   job_latency  a job's time in the daemon: request arrival to its reply
 *   job_queued   arrival to submission (the reply's queued_us)
 *   batch_gpu    GPU time of each batch (the reply's gpu_us), once per batch
 * Fixed bucket bounds from 10 µs to 10 s, 1-2.5-5 per decade: enough to
 * tell a 50 µs tiny job from a 20 ms large one and from a stall. The
 * histograms are updated and read on the loop thread only.
 *
 * Stage windows: each stage of a job's round trip (proto_stage_id) keeps
 * its last METRICS_WINDOW times, so `stats` reports recent medians, not an
 * average since the start: a few stores per job, and a bounded cost per
 * `stats` (metrics_window). Loop thread too. */
#ifndef VKG_DAEMON_METRICS_H
#define VKG_DAEMON_METRICS_H

#include <stdint.h>

#include "msg.h"

#define METRICS_NLE 19
#define METRICS_WINDOW 1024

typedef struct metrics_hist {
	uint64_t counts[METRICS_NLE + 1]; /* per bucket; the last: above every bound */
	uint64_t sum_us, count;
} metrics_hist;

enum { METRICS_JOB_LATENCY, METRICS_JOB_QUEUED, METRICS_BATCH_GPU, METRICS_COUNT };

/* A window's order statistics are kept up to date as times come and go:
 * each time also counts in one of METRICS_WBUCKETS log-linear buckets
 * (METRICS_WSUB per power of two) and in its power of two's group, so a
 * quantile is found by walking the groups and one group's buckets, then
 * picking the exact value among the window's times in that bucket: the
 * cost of `stats` is bounded, whatever the window holds. */
#define METRICS_WSUB_BITS 5
#define METRICS_WSUB (1u << METRICS_WSUB_BITS)
#define METRICS_WGROUPS (64 - METRICS_WSUB_BITS + 1)
#define METRICS_WBUCKETS (METRICS_WGROUPS * METRICS_WSUB)

typedef struct metrics_window {
	uint64_t ns[METRICS_WINDOW]; /* a ring: the last `n` observations */
	uint32_t next, n;
	uint64_t total;              /* observations ever */
	uint64_t sum_ns;             /* ... and their sum */
	uint16_t bucket[METRICS_WBUCKETS]; /* the ring's times per bucket */
	uint16_t group[METRICS_WGROUPS];   /* ... per power of two */
} metrics_window;

typedef struct metrics {
	metrics_hist h[METRICS_COUNT];
	metrics_window stage[PROTO_STAGE_COUNT];
} metrics;

/* the bounds, µs, rising */
extern const uint64_t metrics_le_us[METRICS_NLE];

void metrics_init(metrics *m);
void metrics_observe(metrics *m, int which, uint64_t us);
/* Stage times of one job: ns[s] for each stage s whose bit is in mask. */
void metrics_stages(metrics *m, const uint64_t ns[PROTO_STAGE_COUNT], uint32_t mask);
/* Every histogram into s->hist (s->n_hist set); the median and p99 of each
 * stage window holding anything into s->stages (s->n_stages set), with the
 * count and sum of all its times since the start (a Prometheus summary). */
void metrics_export(const metrics *m, proto_stats *s);

#endif
