/* daemon/sched/stream_timeline.c — a streamed job's GPU timeline (stream.h
 * stream_timeline): its steps' timestamps turned into the reply's
 * stream_us and, at debug level, one log line per step. */
#include "stream.h"
#include "stream_priv.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>

/* MARK_*'s names (stream_priv.h), for the debug log */
static const char *const mark_name[] = {"head", "upload W", "upload chunk", "upload X", "dX chunk",
					"dW block", "dW chunk", "download dX chunk", "download dW block"};

/* ns from `ref` to GPU timestamp t, signed, within the valid bits */
static int64_t tick_ns(const device *d, uint64_t ref, uint64_t t)
{
	const uint64_t m = d->timestamp_mask, diff = (t - ref) & m;
	const double ticks = diff > m / 2 ? -(double)(m - diff) - 1.0 : (double)diff;
	return (int64_t)(ticks * (double)d->timestamp_period);
}

/* What the timeline adds up per role. */
typedef struct tl_sum {
	int64_t busy, first, end; /* ns: time covered by its steps, earliest begin, latest end */
	bool any;
} tl_sum;

/* A step of the role, in its queue's order: busy adds what it covers
 * beyond the steps before it (steps may overlap where no barrier orders
 * them, and each ends no earlier than the one before). */
static void tl_add(tl_sum *s, int64_t b, int64_t e)
{
	const int64_t from = s->any && s->end > b ? s->end : b;
	s->busy += e > from ? e - from : 0;
	s->first = !s->any || b < s->first ? b : s->first;
	s->end = !s->any || e > s->end ? e : s->end;
	s->any = true;
}

static void tl_put(proto_stream_tl *t, const char *name, int64_t ns)
{
	if (t->n >= PROTO_MAX_STREAM_FIELDS)
		return;
	snprintf(t->f[t->n].name, sizeof(t->f[0].name), "%s", name);
	t->f[t->n++].us = ns > 0 ? (uint64_t)((ns + 500) / 1000) : 0;
}

/* One step's line in the debug log. */
static void tl_log(const job *j, const stream_mark *k, int64_t b, int64_t e)
{
	static const char *const role[ROLES] = {"upload", "compute", "download"};
	log_debug("stream job %llu: %-8s %-18s %4u  %9.1f .. %9.1f us (%8.1f us)",
		  (unsigned long long)j->req.id, role[k->role], mark_name[k->what], k->index, (double)b / 1e3,
		  (double)e / 1e3, (double)(e - b) / 1e3);
}

void stream_timeline(engine *e, uint32_t si, job *j)
{
	const stream *st = e->stream;
	if (!st || !st->timed || !j->streamed)
		return;
	const stream_marks *ms = &st->marks[si];
	const volatile uint64_t *ts = e->slots[si].ts_map;
	if (ms->n == 0 || !ts)
		return;
	const uint64_t ref = ts[ms->m[0].q];
	int64_t t0 = 0;
	for (uint32_t i = 0; i < ms->n; i++) {
		const int64_t b = tick_ns(e->dev, ref, ts[ms->m[i].q]), en = tick_ns(e->dev, ref, ts[ms->m[i].q + 1]);
		if (en < b || en - b > 600000000000ll) {
			log_debug("stream job %llu: step %u's timestamps out of order; no timeline",
				  (unsigned long long)j->req.id, i);
			return;
		}
		t0 = i == 0 || b < t0 ? b : t0;
	}
	tl_sum up = {0}, comp = {0}, dw = {0}, down = {0};
	int64_t head = 0, w_up = 0, last_up_end = 0, skew = 0;
	const bool dbg = log_level() >= LOG_LEVEL_DEBUG;
	for (uint32_t i = 0; i < ms->n; i++) {
		const stream_mark *k = &ms->m[i];
		const int64_t b = tick_ns(e->dev, ref, ts[k->q]) - t0, en = tick_ns(e->dev, ref, ts[k->q + 1]) - t0;
		if (dbg)
			tl_log(j, k, b, en);
		switch (k->what) {
		case MARK_HEAD: head = b; break;
		case MARK_UP_W: w_up = en - b; /* fall through */
		case MARK_UP_CHUNK:
		case MARK_UP_X: tl_add(&up, b, en); last_up_end = en; break;
		case MARK_DW:
		case MARK_DW_CHUNK: tl_add(&dw, b, en); /* fall through */
		case MARK_DX:
			tl_add(&comp, b, en);
			/* a kernel step begins after its upload ends: if not, the
			 * queues' clocks disagree by at least that much */
			if (up.any && last_up_end - b > skew)
				skew = last_up_end - b;
			break;
		default: tl_add(&down, b, en); break;
		}
	}
	proto_stream_tl *t = j->stream_tl ? j->stream_tl : calloc(1, sizeof(*t));
	if (!t)
		return;
	j->stream_tl = t;
	t->n = 0;
	tl_put(t, "span_us", (down.any && down.end > comp.end ? down.end : comp.end));
	tl_put(t, "head_us", head);
	if (up.any) { /* (untimed where the transfer family has no timestamps) */
		tl_put(t, "upload_us", up.busy);
		tl_put(t, "w_upload_us", w_up);
		tl_put(t, "upload_end_us", up.end);
	}
	tl_put(t, "first_compute_start_us", comp.first);
	tl_put(t, "compute_us", comp.busy);
	tl_put(t, "compute_idle_us", comp.end - comp.first - comp.busy);
	if (dw.any)
		tl_put(t, "dw_start_us", dw.first);
	tl_put(t, "compute_end_us", comp.end);
	if (down.any) {
		tl_put(t, "download_us", down.busy);
		tl_put(t, "download_end_us", down.end);
		tl_put(t, "tail_us", down.end - comp.end);
	}
	if (up.any)
		tl_put(t, "clock_skew_us", skew);
	if (dbg)
		log_debug("stream job %llu: %u steps; span %.1f us, uploads end %.1f, kernels %.1f .. %.1f "
			  "(busy %.1f), downloads end %.1f, after the last kernel %.1f us",
			  (unsigned long long)j->req.id, ms->n, (double)t->f[0].us, (double)up.end / 1e3,
			  (double)comp.first / 1e3, (double)comp.end / 1e3, (double)comp.busy / 1e3,
			  (double)down.end / 1e3, (double)(down.any ? down.end - comp.end : 0) / 1e3);
}
