/* daemon/metrics.c — see metrics.h. */
#include "metrics.h"

#include <stdio.h>
#include <string.h>

_Static_assert(METRICS_NLE <= PROTO_HIST_MAX_LE, "the wire holds every bound");
_Static_assert(METRICS_COUNT <= PROTO_MAX_HIST, "the wire holds every histogram");

const uint64_t metrics_le_us[METRICS_NLE] = {
	10,     25,     50,      100,     250,     500,     1000,    2500,    5000,   10000,
	25000,  50000,  100000,  250000,  500000,  1000000, 2500000, 5000000, 10000000,
};

static const char *const names[METRICS_COUNT] = {
	[METRICS_JOB_LATENCY] = "job_latency",
	[METRICS_JOB_QUEUED] = "job_queued",
	[METRICS_BATCH_GPU] = "batch_gpu",
};

void metrics_observe(metrics *m, int which, uint64_t us)
{
	metrics_hist *h = &m->h[which];
	unsigned b = 0;
	while (b < METRICS_NLE && us > metrics_le_us[b])
		b++;
	h->counts[b]++;
	h->sum_us += us;
	h->count++;
}

void metrics_export(const metrics *m, proto_stats *s)
{
	s->n_hist = METRICS_COUNT;
	for (int i = 0; i < METRICS_COUNT; i++) {
		proto_histogram *o = &s->hist[i];
		snprintf(o->name, sizeof(o->name), "%s", names[i]);
		o->n_le = METRICS_NLE;
		memcpy(o->le_us, metrics_le_us, sizeof(metrics_le_us));
		memcpy(o->counts, m->h[i].counts, sizeof(m->h[i].counts));
		o->sum_us = m->h[i].sum_us;
		o->count = m->h[i].count;
	}
}
