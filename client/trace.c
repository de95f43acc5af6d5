/* client/trace.c — the timings of this thread's last finished job:
 * vkg_trace_last (the request's stages, the daemon's and this process's)
 * and vkg_stream_last (a streamed job's GPU timeline). transport.c hands
 * each finished entry here before dropping it. */
#include "vkgrad_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static _Thread_local vkg_trace last_trace;
static _Thread_local bool last_trace_set;
static _Thread_local vkg_stream_timeline last_stream;

static void trace_add(vkg_trace *t, const char *name, uint64_t ns)
{
	if (t->n_stages >= VKG_TRACE_MAX_STAGES)
		return;
	vkg_trace_stage *s = &t->stages[t->n_stages++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->ns = ns;
}

/* The finished job's trace for vkg_trace_last: the daemon's stages between
 * its own two times, with this process's ends around them when the clocks
 * agree. */
void vkg__trace_keep(const vkg_entry *e)
{
	vkg_trace *t = &last_trace;
	last_trace_set = e->trace.present;
	if (!e->trace.present)
		return;
	memset(t, 0, sizeof(*t));
	t->t_submit_ns = e->t_submit_ns;
	t->t_seen_ns = e->t_seen_ns;
	t->t_recv_ns = e->trace.t_recv_ns;
	t->t_reply_ns = e->trace.t_reply_ns;
	uint64_t sum = 0;
	for (unsigned i = 0; i < e->trace.n; i++)
		sum += e->trace.st[i].ns;
	const uint64_t encoded = t->t_recv_ns + sum;
	t->complete = t->t_recv_ns >= t->t_submit_ns && t->t_reply_ns >= encoded &&
		      t->t_seen_ns >= t->t_reply_ns;
	if (t->complete)
		trace_add(t, "request", t->t_recv_ns - t->t_submit_ns);
	for (unsigned i = 0; i < e->trace.n; i++)
		trace_add(t, e->trace.st[i].name, e->trace.st[i].ns);
	if (t->t_reply_ns >= encoded)
		trace_add(t, "write", t->t_reply_ns - encoded);
	if (t->complete)
		trace_add(t, "client_wake", t->t_seen_ns - t->t_reply_ns);
}

/* The finished job's stream timeline for vkg_stream_last (n 0: none). */
void vkg__stream_keep(const vkg_entry *e)
{
	vkg_stream_timeline *t = &last_stream;
	t->n = 0;
	for (unsigned i = 0; i < e->stream.n && t->n < VKG_STREAM_MAX_FIELDS; i++) {
		snprintf(t->f[t->n].name, sizeof(t->f[0].name), "%s", e->stream.f[i].name);
		t->f[t->n++].us = e->stream.f[i].us;
	}
}

int vkg_stream_last(vkg_stream_timeline *out)
{
	if (last_stream.n == 0)
		return -ENOENT;
	if (out)
		*out = last_stream;
	return 0;
}

int vkg_trace_last(vkg_trace *out)
{
	if (!last_trace_set)
		return -ENOENT;
	if (out)
		*out = last_trace;
	return 0;
}
