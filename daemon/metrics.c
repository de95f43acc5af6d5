/* daemon/metrics.c — see metrics.h. */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
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

void metrics_init(metrics *m)
{
	memset(m, 0, sizeof(*m));
}

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

void metrics_stages(metrics *m, const uint64_t ns[PROTO_STAGE_COUNT], uint32_t mask)
{
	for (int s = 0; s < PROTO_STAGE_COUNT; s++) {
		if (!(mask & (1u << s)))
			continue;
		metrics_window *w = &m->stage[s];
		w->ns[w->next] = ns[s];
		w->next = (w->next + 1) % METRICS_WINDOW;
		if (w->n < METRICS_WINDOW)
			w->n++;
		w->total++;
		w->sum_ns += ns[s];
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest rank of sorted v[0..n), in µs. */
static double rank_us(const uint64_t *v, uint32_t n, double q)
{
	uint64_t r = (uint64_t)(q * n + 0.999999);
	if (r < 1)
		r = 1;
	if (r > n)
		r = n;
	return (double)v[r - 1] / 1000.0;
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
	/* a sorted copy of each window: 8 KiB per stage, on a stats request */
	static uint64_t v[METRICS_WINDOW];
	s->n_stages = 0;
	for (int st = 0; st < PROTO_STAGE_COUNT; st++) {
		const uint32_t n = m->stage[st].n;
		memcpy(v, m->stage[st].ns, n * sizeof(v[0]));
		if (n == 0)
			continue;
		qsort(v, n, sizeof(v[0]), cmp_u64);
		proto_stage_stat *o = &s->stages[s->n_stages++];
		snprintf(o->name, sizeof(o->name), "%s", proto_stage_name((proto_stage_id)st));
		o->p50_us = rank_us(v, n, 0.5);
		o->p99_us = rank_us(v, n, 0.99);
		o->count = n;
		o->total = m->stage[st].total;
		o->sum_us = (double)m->stage[st].sum_ns / 1000.0;
		o->has_total = true;
	}
}
