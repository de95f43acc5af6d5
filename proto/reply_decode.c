/* proto/reply_decode.c — a reply from its bytes (the client side of msg.h:
 * proto_reply_decode). */
#include "msg.h"

#include "frame.h"
#include "mpcheck.h"
#include "mpobj.h"
#include "opstats.h"
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reply decoding (client side) --------------------------------------- */

static void copy_str(const msgpack_object *v, char *out, size_t cap)
{
	if (v->type != MSGPACK_OBJECT_STR || cap == 0)
		return;
	size_t n = v->via.str.size < cap - 1 ? v->via.str.size : cap - 1;
	memcpy(out, v->via.str.ptr, n);
	out[n] = 0;
}

static uint64_t as_u64(const msgpack_object *v)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return v->via.u64;
	if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32) {
		/* converting a double outside [0, 2^64) is undefined: clamp
		 * (NaN fails the first test and reads as 0) */
		if (!(v->via.f64 > 0))
			return 0;
		if (v->via.f64 >= 18446744073709551616.0)
			return UINT64_MAX;
		return (uint64_t)v->via.f64;
	}
	return 0;
}

static double as_f64(const msgpack_object *v)
{
	if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
		return v->via.f64;
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return (double)v->via.u64;
	return 0;
}

#define FOR_KV(mapobj, kp, vp)                                                               \
	for (uint32_t _i = 0; (mapobj)->type == MSGPACK_OBJECT_MAP &&                        \
			      _i < (mapobj)->via.map.size &&                                 \
			      ((kp) = &(mapobj)->via.map.ptr[_i].key,                        \
			       (vp) = &(mapobj)->via.map.ptr[_i].val, 1);                    \
	     _i++)

static void unpack_hello(const msgpack_object *m, proto_hello *h)
{
	const msgpack_object *k, *v, *k2, *v2;
	FOR_KV(m, k, v) {
		if (mpobj_key_is(k, "version"))
			h->version = as_u64(v);
		else if (mpobj_key_is(k, "server"))
			copy_str(v, h->server, sizeof(h->server));
		else if (mpobj_key_is(k, "device")) {
			FOR_KV(v, k2, v2) {
				if (mpobj_key_is(k2, "name")) copy_str(v2, h->device.name, sizeof(h->device.name));
				else if (mpobj_key_is(k2, "vendor_id")) h->device.vendor_id = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "device_id")) h->device.device_id = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "driver")) copy_str(v2, h->device.driver, sizeof(h->device.driver));
				else if (mpobj_key_is(k2, "api")) copy_str(v2, h->device.api, sizeof(h->device.api));
				else if (mpobj_key_is(k2, "type")) copy_str(v2, h->device.type, sizeof(h->device.type));
			}
		} else if (mpobj_key_is(k, "limits")) {
			FOR_KV(v, k2, v2) {
				if (mpobj_key_is(k2, "max_frame")) h->limits.max_frame = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_regions")) h->limits.max_regions = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_region_bytes")) h->limits.max_region_bytes = as_u64(v2);
				else if (mpobj_key_is(k2, "max_inflight")) h->limits.max_inflight = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_dim")) h->limits.max_dim = as_u64(v2);
				else if (mpobj_key_is(k2, "max_tensor_bytes")) h->limits.max_tensor_bytes = as_u64(v2);
				else if (mpobj_key_is(k2, "max_total_region_bytes")) h->limits.max_total_region_bytes = as_u64(v2);
				else if (mpobj_key_is(k2, "max_region_bytes_per_uid")) h->limits.max_region_bytes_per_uid = as_u64(v2);
				else if (mpobj_key_is(k2, "max_connections")) h->limits.max_connections = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_connections_per_uid")) h->limits.max_connections_per_uid = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_fds_per_message")) h->limits.max_fds_per_message = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_fds_held")) h->limits.max_fds_held = (uint32_t)as_u64(v2);
				else if (mpobj_key_is(k2, "max_outbound_bytes")) h->limits.max_outbound_bytes = as_u64(v2);
				else if (mpobj_key_is(k2, "max_device_bytes")) h->limits.max_device_bytes = as_u64(v2);
				else if (mpobj_key_is(k2, "max_device_bytes_per_uid")) h->limits.max_device_bytes_per_uid = as_u64(v2);
				else if (mpobj_key_is(k2, "max_tensors")) h->limits.max_tensors = (uint32_t)as_u64(v2);
			}
		} else if (mpobj_key_is(k, "kernels") && v->type == MSGPACK_OBJECT_ARRAY) {
			for (uint32_t i = 0; i < v->via.array.size && h->n_kernels < PROTO_MAX_KERNELS; i++) {
				proto_kernel_info *ki = &h->kernels[h->n_kernels++];
				const msgpack_object *e = &v->via.array.ptr[i];
				FOR_KV(e, k2, v2) {
					if (mpobj_key_is(k2, "name")) copy_str(v2, ki->name, sizeof(ki->name));
					else if (mpobj_key_is(k2, "domain")) copy_str(v2, ki->domain, sizeof(ki->domain));
					else if (mpobj_key_is(k2, "variant")) copy_str(v2, ki->variant, sizeof(ki->variant));
					else if (mpobj_key_is(k2, "dtype")) copy_str(v2, ki->dtype, sizeof(ki->dtype));
					else if (mpobj_key_is(k2, "status")) copy_str(v2, ki->status, sizeof(ki->status));
				}
			}
		}
	}
}

/* One histogram; a malformed one (bounds not rising, counts not one more
 * than bounds, too many) is dropped whole. */
static void unpack_histogram(const msgpack_object *name, const msgpack_object *m, proto_stats *s)
{
	if (s->n_hist >= PROTO_MAX_HIST || name->type != MSGPACK_OBJECT_STR)
		return;
	proto_histogram *h = &s->hist[s->n_hist];
	memset(h, 0, sizeof(*h));
	const msgpack_object *k, *v;
	const msgpack_object *le = NULL, *counts = NULL;
	FOR_KV(m, k, v) {
		if (mpobj_key_is(k, "le_us") && v->type == MSGPACK_OBJECT_ARRAY) le = v;
		else if (mpobj_key_is(k, "counts") && v->type == MSGPACK_OBJECT_ARRAY) counts = v;
		else if (mpobj_key_is(k, "sum_us")) h->sum_us = as_u64(v);
		else if (mpobj_key_is(k, "count")) h->count = as_u64(v);
	}
	if (!le || !counts || le->via.array.size > PROTO_HIST_MAX_LE ||
	    counts->via.array.size != le->via.array.size + 1)
		return;
	h->n_le = le->via.array.size;
	for (unsigned b = 0; b < h->n_le; b++) {
		h->le_us[b] = as_u64(&le->via.array.ptr[b]);
		if (b > 0 && h->le_us[b] <= h->le_us[b - 1])
			return;
	}
	for (unsigned b = 0; b <= h->n_le; b++)
		h->counts[b] = as_u64(&counts->via.array.ptr[b]);
	copy_str(name, h->name, sizeof(h->name));
	s->n_hist++;
}

/* One stage of stats' `stages`; a name too long or past the table is dropped. */
static void unpack_stage_stat(const msgpack_object *name, const msgpack_object *m, proto_stats *s)
{
	if (s->n_stages >= PROTO_MAX_STAGES || name->type != MSGPACK_OBJECT_STR ||
	    name->via.str.size == 0 || name->via.str.size >= sizeof(s->stages[0].name) ||
	    m->type != MSGPACK_OBJECT_MAP)
		return;
	proto_stage_stat *st = &s->stages[s->n_stages++];
	memset(st, 0, sizeof(*st));
	copy_str(name, st->name, sizeof(st->name));
	const msgpack_object *k, *v;
	FOR_KV(m, k, v) {
		if (mpobj_key_is(k, "p50_us")) st->p50_us = as_f64(v);
		else if (mpobj_key_is(k, "p99_us")) st->p99_us = as_f64(v);
		else if (mpobj_key_is(k, "count")) st->count = as_u64(v);
		else if (mpobj_key_is(k, "total")) st->total = as_u64(v), st->has_total = true;
		else if (mpobj_key_is(k, "sum_us")) st->sum_us = as_f64(v);
	}
}

/* A reply's stages_ns: name -> ns, in the daemon's order. */
static void unpack_trace_stages(const msgpack_object *m, proto_trace *t)
{
	const msgpack_object *k, *v;
	t->n = 0;
	FOR_KV(m, k, v) {
		if (t->n >= PROTO_MAX_STAGES || k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
		    k->via.str.size >= sizeof(t->st[0].name))
			continue;
		copy_str(k, t->st[t->n].name, sizeof(t->st[0].name));
		t->st[t->n++].ns = as_u64(v);
	}
}

/* A reply's stream_us: name -> µs. */
static void unpack_stream(const msgpack_object *m, proto_stream_tl *t)
{
	const msgpack_object *k, *v;
	t->n = 0;
	FOR_KV(m, k, v) {
		if (t->n >= PROTO_MAX_STREAM_FIELDS || k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
		    k->via.str.size >= sizeof(t->f[0].name))
			continue;
		copy_str(k, t->f[t->n].name, sizeof(t->f[0].name));
		t->f[t->n++].us = as_u64(v);
	}
}

static void unpack_stats_kv(const msgpack_object *k, const msgpack_object *v, proto_stats *s)
{
	if (mpobj_key_is(k, "uptime_s")) s->uptime_s = as_f64(v);
	else if (mpobj_key_is(k, "clients")) s->clients = as_u64(v);
	else if (mpobj_key_is(k, "regions")) s->regions = as_u64(v);
	else if (mpobj_key_is(k, "region_bytes")) s->region_bytes = as_u64(v);
	else if (mpobj_key_is(k, "jobs_done")) s->jobs_done = as_u64(v);
	else if (mpobj_key_is(k, "jobs_failed")) s->jobs_failed = as_u64(v);
	else if (mpobj_key_is(k, "batches")) s->batches = as_u64(v);
	else if (mpobj_key_is(k, "jobs_per_batch_avg")) s->jobs_per_batch_avg = as_f64(v);
	else if (mpobj_key_is(k, "pipelines")) s->pipelines = as_u64(v);
	else if (mpobj_key_is(k, "pipeline_cache_hits")) s->pipeline_cache_hits = as_u64(v);
	else if (mpobj_key_is(k, "jobs_queued")) s->jobs_queued = as_u64(v);
	else if (mpobj_key_is(k, "jobs_running")) s->jobs_running = as_u64(v);
	else if (mpobj_key_is(k, "host_imports")) s->host_imports = as_u64(v);
	else if (mpobj_key_is(k, "staged_regions")) s->staged_regions = as_u64(v);
	else if (mpobj_key_is(k, "validation_errors")) s->validation_errors = as_u64(v);
	else if (mpobj_key_is(k, "devlocal_min_bytes")) s->devlocal_min_bytes = as_u64(v);
	else if (mpobj_key_is(k, "devlocal_min_bytes_16bit")) s->devlocal_min_bytes_16bit = as_u64(v);
	else if (mpobj_key_is(k, "devlocal_jobs")) s->devlocal_jobs = as_u64(v);
	else if (mpobj_key_is(k, "devlocal_copy_bytes")) s->devlocal_copy_bytes = as_u64(v);
	else if (mpobj_key_is(k, "splitk_jobs")) s->splitk_jobs = as_u64(v);
	else if (mpobj_key_is(k, "dispatches")) s->dispatches = as_u64(v);
	else if (mpobj_key_is(k, "scratch_bytes")) s->scratch_bytes = as_u64(v);
	else if (mpobj_key_is(k, "scratch_failures")) s->scratch_failures = as_u64(v);
	else if (mpobj_key_is(k, "stream_chunk_bytes")) s->stream_chunk_bytes = as_u64(v);
	else if (mpobj_key_is(k, "stream_min_bytes")) s->stream_min_bytes = as_u64(v);
	else if (mpobj_key_is(k, "stream_queues")) s->stream_queues = as_u64(v);
	else if (mpobj_key_is(k, "stream_jobs")) s->stream_jobs = as_u64(v);
	else if (mpobj_key_is(k, "stream_chunks")) s->stream_chunks = as_u64(v);
	else if (mpobj_key_is(k, "stream_dw_blocks")) s->stream_dw_blocks = as_u64(v);
	else if (mpobj_key_is(k, "stream_shared_jobs")) s->stream_shared_jobs = as_u64(v);
	else if (mpobj_key_is(k, "spin_budget_us")) s->spin_budget_us = as_u64(v);
	else if (mpobj_key_is(k, "spin_us")) s->spin_us = as_u64(v);
	else if (mpobj_key_is(k, "spin_hits")) s->spin_hits = as_u64(v);
	else if (mpobj_key_is(k, "blocking_waits")) s->blocking_waits = as_u64(v);
	else if (mpobj_key_is(k, "spin_expected")) s->spin_expected = as_u64(v);
	else if (mpobj_key_is(k, "sched_small_jobs")) s->sched_small_jobs = as_u64(v);
	else if (mpobj_key_is(k, "sched_large_jobs")) s->sched_large_jobs = as_u64(v);
	else if (mpobj_key_is(k, "sched_slices")) s->sched_slices = as_u64(v);
	else if (mpobj_key_is(k, "device_bytes")) s->device_bytes = as_u64(v), s->has_tensors = true;
	else if (mpobj_key_is(k, "tensors")) s->tensors = as_u64(v), s->has_tensors = true;
	else if (mpobj_key_is(k, "host_read_bytes")) s->host_read_bytes = as_u64(v), s->has_tensors = true;
	else if (mpobj_key_is(k, "host_write_bytes")) s->host_write_bytes = as_u64(v), s->has_tensors = true;
	else if (mpobj_key_is(k, "device_bytes_by_uid") && v->type == MSGPACK_OBJECT_ARRAY) {
		s->n_dev_uids = 0;
		for (uint32_t i = 0; i < v->via.array.size && s->n_dev_uids < PROTO_MAX_UIDS; i++) {
			const msgpack_object *e = &v->via.array.ptr[i], *k2, *v2;
			if (e->type != MSGPACK_OBJECT_MAP)
				continue;
			proto_uid_bytes *u = &s->dev_uids[s->n_dev_uids++];
			memset(u, 0, sizeof(*u));
			FOR_KV(e, k2, v2) {
				if (mpobj_key_is(k2, "uid")) {
					uint64_t x = as_u64(v2);
					u->uid = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
				} else if (mpobj_key_is(k2, "bytes")) {
					u->bytes = as_u64(v2);
				}
			}
		}
	}
	else if (mpobj_key_is(k, "stages")) {
		const msgpack_object *k2, *v2;
		s->n_stages = 0;
		FOR_KV(v, k2, v2)
			unpack_stage_stat(k2, v2, s);
	} else if (mpobj_key_is(k, "histograms")) {
		const msgpack_object *k2, *v2;
		FOR_KV(v, k2, v2)
			unpack_histogram(k2, v2, s);
	} else {
		proto_opstats_unpack_kv(k, v, s);
	}
}

int proto_reply_decode(const uint8_t *body, size_t len, proto_reply *r, proto_err *err)
{
	const char *why = NULL;
	memset(r, 0, sizeof(*r));
	if (proto_mpcheck(body, len, PROTO_MAX_DEPTH, &why) != 0) {
		proto_fail(err, PROTO_BAD_FRAME, "reply is not valid msgpack: %s", why);
		return -EBADMSG;
	}
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	int rc = 0;
	if (msgpack_unpack_next(&u, (const char *)body, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP) {
		proto_fail(err, PROTO_BAD_FRAME, "reply is not a msgpack map");
		rc = -EBADMSG;
		goto out;
	}
	bool have_id = false, have_ok = false;
	unsigned have_trace = 0;
	const msgpack_object *k, *v, *k2, *v2;
	FOR_KV(&u.data, k, v) {
		if (mpobj_key_is(k, "id")) {
			r->id = as_u64(v);
			have_id = true;
		} else if (mpobj_key_is(k, "ok") && v->type == MSGPACK_OBJECT_BOOLEAN) {
			r->ok = v->via.boolean;
			have_ok = true;
		} else if (mpobj_key_is(k, "error")) {
			FOR_KV(v, k2, v2) {
				if (mpobj_key_is(k2, "code") && v2->type == MSGPACK_OBJECT_STR)
					r->err.code = proto_code_from_name(v2->via.str.ptr, v2->via.str.size);
				else if (mpobj_key_is(k2, "message"))
					copy_str(v2, r->err.message, sizeof(r->err.message));
			}
		} else if (mpobj_key_is(k, "region")) {
			r->region = as_u64(v);
		} else if (mpobj_key_is(k, "tensor")) {
			r->tensor = as_u64(v);
		} else if (mpobj_key_is(k, "queued_us")) {
			r->queued_us = as_u64(v);
		} else if (mpobj_key_is(k, "gpu_us")) {
			r->gpu_us = as_u64(v);
		} else if (mpobj_key_is(k, "batch_jobs")) {
			r->batch_jobs = as_u64(v);
		} else if (mpobj_key_is(k, "kernel_us")) {
			r->kernel_us = as_u64(v);
			r->has_kernel_us = true;
		} else if (mpobj_key_is(k, "t_recv_ns")) {
			r->trace.t_recv_ns = as_u64(v);
			have_trace |= 1;
		} else if (mpobj_key_is(k, "t_reply_ns")) {
			r->trace.t_reply_ns = as_u64(v);
			have_trace |= 2;
		} else if (mpobj_key_is(k, "stream_us") && v->type == MSGPACK_OBJECT_MAP) {
			unpack_stream(v, &r->stream);
		} else if (mpobj_key_is(k, "stages_ns") && v->type == MSGPACK_OBJECT_MAP) {
			unpack_trace_stages(v, &r->trace);
			have_trace |= 4;
		} else {
			unpack_stats_kv(k, v, &r->stats);
		}
	}
	unpack_hello(&u.data, &r->hello);
	/* a trace counts only whole: both times and the stages */
	r->trace.present = have_trace == 7;
	if (!have_id || !have_ok) {
		proto_fail(err, PROTO_BAD_FRAME, "reply lacks 'id' or 'ok'");
		rc = -EBADMSG;
	} else if (!r->ok && r->err.code == PROTO_OK) {
		r->err.code = PROTO_INTERNAL;
	}
out:
	msgpack_unpacked_destroy(&u);
	return rc;
}
