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

_Static_assert(METRICS_WINDOW <= UINT16_MAX, "a bucket counts the whole window");

/* The bucket of a time: below METRICS_WSUB exact, above it its power of
 * two and the METRICS_WSUB_BITS bits after the leading one. */
static unsigned wbucket(uint64_t v)
{
	if (v < METRICS_WSUB)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= METRICS_WSUB_BITS */
	unsigned sub = (unsigned)(v >> (e - METRICS_WSUB_BITS)) & (METRICS_WSUB - 1);
	return (e - METRICS_WSUB_BITS + 1) * METRICS_WSUB + sub;
}

static void wcount(metrics_window *w, uint64_t v, int d)
{
	unsigned b = wbucket(v);
	w->bucket[b] = (uint16_t)(w->bucket[b] + d);
	w->group[b / METRICS_WSUB] = (uint16_t)(w->group[b / METRICS_WSUB] + d);
}

void metrics_stages(metrics *m, const uint64_t ns[PROTO_STAGE_COUNT], uint32_t mask)
{
	for (int s = 0; s < PROTO_STAGE_COUNT; s++) {
		if (!(mask & (1u << s)))
			continue;
		metrics_window *w = &m->stage[s];
		if (w->n == METRICS_WINDOW)
			wcount(w, w->ns[w->next], -1); /* the oldest leaves */
		w->ns[w->next] = ns[s];
		wcount(w, ns[s], +1);
		w->next = (w->next + 1) % METRICS_WINDOW;
		if (w->n < METRICS_WINDOW)
			w->n++;
		w->total++;
		w->sum_ns += ns[s];
	}
}

/* The k-th smallest (0-based) of v[0..n), reordering v (Wirth's
 * selection: expected linear time). */
static uint64_t select_k(uint64_t *v, uint32_t n, uint32_t k)
{
	int64_t l = 0, m = (int64_t)n - 1;
	while (l < m) {
		const uint64_t x = v[k];
		int64_t i = l, j = m;
		do {
			while (v[i] < x)
				i++;
			while (x < v[j])
				j--;
			if (i <= j) {
				uint64_t t = v[i];
				v[i] = v[j];
				v[j] = t;
				i++;
				j--;
			}
		} while (i <= j);
		if (j < (int64_t)k)
			l = i;
		if ((int64_t)k < i)
			m = j;
	}
	return v[k];
}

/* The times of bucket b: [lo, hi]. */
static void wbounds(unsigned b, uint64_t *lo, uint64_t *hi)
{
	if (b < METRICS_WSUB) {
		*lo = *hi = b;
		return;
	}
	unsigned e = b / METRICS_WSUB + METRICS_WSUB_BITS - 1, sub = b % METRICS_WSUB;
	*lo = (1ull << e) | ((uint64_t)sub << (e - METRICS_WSUB_BITS));
	*hi = *lo + ((1ull << (e - METRICS_WSUB_BITS)) - 1);
}

/* Where nearest rank q of the window lies: its bucket, and how many of
 * the window's times lie in buckets below it (by the counts: at most
 * METRICS_WGROUPS + METRICS_WSUB of them read). */
typedef struct wrank {
	uint32_t rank0;  /* the rank, 0-based */
	uint32_t below;  /* times in lower buckets */
	uint64_t lo, hi; /* its bucket's times */
	uint32_t k;      /* the window's times in it, collected */
} wrank;

static void wrank_find(const metrics_window *w, double q, wrank *o)
{
	uint64_t r = (uint64_t)(q * w->n + 0.999999);
	if (r < 1)
		r = 1;
	if (r > w->n)
		r = w->n;
	uint32_t below = 0, g = 0;
	while (g + 1 < METRICS_WGROUPS && below + w->group[g] < r)
		below += w->group[g++];
	unsigned b = g * METRICS_WSUB;
	while (b + 1 < (g + 1) * METRICS_WSUB && below + w->bucket[b] < r)
		below += w->bucket[b++];
	o->rank0 = (uint32_t)(r - 1);
	o->below = below;
	o->k = 0;
	wbounds(b, &o->lo, &o->hi);
}

/* The exact time of rank o among the o->k times collected in v, in µs. */
static double wrank_us(const wrank *o, uint64_t *v)
{
	if (o->k == 0)
		return 0; /* cannot happen: the counts follow the ring */
	uint32_t want = o->rank0 - o->below;
	if (want >= o->k)
		want = o->k - 1;
	return (double)select_k(v, o->k, want) / 1000.0;
}

/* The window's median and p99 (nearest rank), in µs: both buckets found
 * by the counts, then one pass over the ring collects the times in them
 * and a selection picks each exact value. The same bounded cost however
 * many times came before. */
static void window_ranks(const metrics_window *w, double *p50, double *p99)
{
	static uint64_t v50[METRICS_WINDOW], v99[METRICS_WINDOW];
	wrank a, b;
	wrank_find(w, 0.5, &a);
	wrank_find(w, 0.99, &b);
	for (uint32_t i = 0; i < w->n; i++) {
		const uint64_t x = w->ns[i];
		if (x >= a.lo && x <= a.hi)
			v50[a.k++] = x;
		if (x >= b.lo && x <= b.hi)
			v99[b.k++] = x;
	}
	*p50 = wrank_us(&a, v50);
	*p99 = wrank_us(&b, v99);
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
	s->n_stages = 0;
	for (int st = 0; st < PROTO_STAGE_COUNT; st++) {
		const metrics_window *w = &m->stage[st];
		if (w->n == 0)
			continue;
		proto_stage_stat *o = &s->stages[s->n_stages++];
		snprintf(o->name, sizeof(o->name), "%s", proto_stage_name((proto_stage_id)st));
		window_ranks(w, &o->p50_us, &o->p99_us);
		o->count = w->n;
		o->total = w->total;
		o->sum_us = (double)w->sum_ns / 1000.0;
		o->has_total = true;
	}
}
