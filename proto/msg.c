/* proto/msg.c — see msg.h: names, errors and encoding (requests, hello,
 * stats, job replies); decoding is request_decode.c and reply_decode.c,
 * the names of error codes and ops and the errors as values codes.c. */
#include "msg.h"

#include "frame.h"
#include "mpcheck.h"
#include "opstats.h"
#include "optim.h"
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (the names of error codes and ops, and proto_fail: codes.c) */
static const char *const dtype_names[PROTO_DTYPE_COUNT] = {"f32", "f16", "bf16"};
static const char *const variant_names[PROTO_VARIANT_COUNT] = {"auto", "generic", "tiled", "splitk",
								       "coopmat", "tiled128", "coopmat_khr",
								       "coopmat_nv2", "coopmat_khr_f32x3", "narrow",
								       "splitk128", "coopmat_khr_splitk",
								       "coopmat_khr_f32_splitk"};

const char *proto_variant_name(proto_variant v)
{
	return (unsigned)v < PROTO_VARIANT_COUNT ? variant_names[v] : "?";
}

int proto_variant_parse(const char *s)
{
	for (int i = 0; i < PROTO_VARIANT_COUNT; i++)
		if (strcmp(s, variant_names[i]) == 0)
			return i;
	return -1;
}

/* The order in which messages list them: from the default to the special */
static const proto_variant variant_order[PROTO_VARIANT_COUNT] = {
	PROTO_VARIANT_AUTO, PROTO_VARIANT_GENERIC, PROTO_VARIANT_TILED,
	PROTO_VARIANT_TILED128, PROTO_VARIANT_SPLITK, PROTO_VARIANT_SPLITK128, PROTO_VARIANT_NARROW, PROTO_VARIANT_COOPMAT, PROTO_VARIANT_COOPMAT_KHR,
	PROTO_VARIANT_COOPMAT_KHR_SPLITK, PROTO_VARIANT_COOPMAT_NV2, PROTO_VARIANT_COOPMAT_KHR_F32X3,
	PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK,
};

bool proto_variant_fits(proto_variant v, proto_dtype d)
{
	if (v == PROTO_VARIANT_COOPMAT)
		return d == PROTO_F16;
	if (v == PROTO_VARIANT_COOPMAT_KHR || v == PROTO_VARIANT_COOPMAT_KHR_SPLITK || v == PROTO_VARIANT_COOPMAT_NV2)
		return d == PROTO_F16 || d == PROTO_BF16;
	if (v == PROTO_VARIANT_COOPMAT_KHR_F32X3 || v == PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK)
		return d == PROTO_F32;
	return true;
}

unsigned proto_variant_list(char *buf, size_t cap, int d,
			    bool (*keep)(void *ctx, proto_variant v), void *ctx)
{
	unsigned n = 0;
	size_t o = 0;
	if (cap)
		buf[0] = 0;
	for (int i = 0; i < PROTO_VARIANT_COUNT; i++) {
		const proto_variant v = variant_order[i];
		if ((d >= 0 && !proto_variant_fits(v, (proto_dtype)d)) || (keep && !keep(ctx, v)))
			continue;
		if (o < cap) {
			int k = snprintf(buf + o, cap - o, "%s%s", n ? ", " : "", variant_names[v]);
			o += k > 0 ? (size_t)k : 0;
		}
		n++;
	}
	return n;
}

/* each name in a proto_stage's name[] width, so proto_stage_copy_name
 * copies a fixed 16 bytes */
static const char stage_names[PROTO_STAGE_COUNT][sizeof(((proto_stage *)0)->name)] = {
	[PROTO_STAGE_REQUEST] = "request",   [PROTO_STAGE_DECODE] = "decode",
	[PROTO_STAGE_QUEUE] = "queue",       [PROTO_STAGE_RECORD] = "record",
	[PROTO_STAGE_SUBMIT] = "submit",     [PROTO_STAGE_LAUNCH] = "launch",
	[PROTO_STAGE_GPU] = "gpu",           [PROTO_STAGE_COMPLETE] = "complete",
	[PROTO_STAGE_GPU_WAIT] = "gpu_wait", [PROTO_STAGE_HANDOFF] = "handoff",
	[PROTO_STAGE_ANSWER] = "answer",     [PROTO_STAGE_WRITE] = "write",
	[PROTO_STAGE_CLIENT_WAKE] = "client_wake",
};
_Static_assert(PROTO_STAGE_COUNT <= PROTO_MAX_STAGES, "every stage fits a trace");

const char *proto_stage_name(proto_stage_id s)
{
	return (unsigned)s < PROTO_STAGE_COUNT ? stage_names[s] : "?";
}

void proto_stage_copy_name(proto_stage *st, proto_stage_id s)
{
	if ((unsigned)s < PROTO_STAGE_COUNT)
		memcpy(st->name, stage_names[s], sizeof(st->name));
	else
		memcpy(st->name, "?", 2);
}

int proto_stage_parse(const char *s, size_t n)
{
	for (int i = 0; i < PROTO_STAGE_COUNT; i++)
		if (strlen(stage_names[i]) == n && memcmp(stage_names[i], s, n) == 0)
			return i;
	return -1;
}

void proto_reply_put_time(uint8_t *end, uint64_t ns)
{
	for (int i = 1; i <= 8; i++, ns >>= 8)
		end[-i] = (uint8_t)ns;
}

const char *const proto_tensor_key[PROTO_T_COUNT] = {"x", "dy", "w", "dw", "db", "dx", "b", "y", "z"};

static const char *const activation_names[PROTO_ACT_COUNT] = {"none", "relu", "gelu"};

const char *proto_activation_name(proto_activation a)
{
	return (unsigned)a < PROTO_ACT_COUNT ? activation_names[a] : "none";
}

int proto_activation_parse(const char *s, size_t n)
{
	for (int i = 0; i < PROTO_ACT_COUNT; i++)
		if (strlen(activation_names[i]) == n && memcmp(activation_names[i], s, n) == 0)
			return i;
	return -1;
}

const char *proto_dtype_name(proto_dtype d)
{
	return (unsigned)d < PROTO_DTYPE_COUNT ? dtype_names[d] : "?";
}

unsigned proto_dtype_size(proto_dtype d)
{
	return d == PROTO_F32 ? 4 : 2;
}

/* ---- encoding helpers --------------------------------------------------- */

static void pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pk_kv_u(msgpack_packer *pk, const char *k, uint64_t v)
{
	pk_str(pk, k);
	msgpack_pack_uint64(pk, v);
}

static void pk_kv_s(msgpack_packer *pk, const char *k, const char *v)
{
	pk_str(pk, k);
	pk_str(pk, v);
}

/* A string value of a reply: strict UTF-8 whatever it holds, so that a
 * client decoding strictly never fails on it. Client text is escaped where
 * it enters a message already; this catches anything else (a driver's
 * device name), escaping what is not UTF-8. */
static void pk_kv_text(msgpack_packer *pk, const char *k, const char *v)
{
	size_t n = strlen(v);
	pk_str(pk, k);
	if (proto_text_valid(v, n)) {
		msgpack_pack_str(pk, n);
		msgpack_pack_str_body(pk, v, n);
		return;
	}
	char buf[PROTO_TEXT_ESCAPED_CAP(256)];
	size_t m = proto_text_escape(buf, sizeof(buf), v, n, 256, PROTO_TEXT_KEEP_BACKSLASH);
	msgpack_pack_str(pk, m);
	msgpack_pack_str_body(pk, buf, m);
}

static void pk_kv_d(msgpack_packer *pk, const char *k, double v)
{
	pk_str(pk, k);
	msgpack_pack_double(pk, v);
}

void proto_sbuffer_reuse(msgpack_sbuffer *sb, size_t keep)
{
	if (sb->alloc > keep) {
		msgpack_sbuffer_destroy(sb);
		msgpack_sbuffer_init(sb);
	}
	sb->size = 0;
}

/* Reserve the 4-byte length; returns the offset of the prefix. */
static size_t frame_begin(msgpack_sbuffer *sb)
{
	static const char zero[PROTO_FRAME_HDR] = {0};
	size_t at = sb->size;
	msgpack_sbuffer_write(sb, zero, PROTO_FRAME_HDR);
	return at;
}

static int frame_end(msgpack_sbuffer *sb, size_t at)
{
	if (!sb->data || sb->size < at + PROTO_FRAME_HDR)
		return -ENOMEM;
	size_t n = sb->size - at - PROTO_FRAME_HDR;
	if (n > UINT32_MAX)
		return -EMSGSIZE;
	proto_frame_put_len((uint8_t *)sb->data + at, (uint32_t)n);
	return 0;
}

/* An operand: [region, byte_offset], or {"tensor": T} */
static void pk_operand(msgpack_packer *pk, const proto_tensor *t)
{
	if (t->is_tensor) {
		msgpack_pack_map(pk, 1);
		pk_kv_u(pk, "tensor", t->tensor);
		return;
	}
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint64(pk, t->region);
	msgpack_pack_uint64(pk, t->offset);
}

int proto_request_encode(msgpack_sbuffer *sb, const proto_request *req)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	size_t at = frame_begin(sb);
	unsigned n = 2;
	switch (req->op) {
	case PROTO_OP_HELLO: n += 1 + (req->client[0] != 0) + req->monitor; break;
	case PROTO_OP_REGISTER: n += 1; break;
	case PROTO_OP_UNREGISTER: n += 1; break;
	case PROTO_OP_LINEAR_BACKWARD:
	case PROTO_OP_LINEAR_FORWARD:
		n += 5 + (req->variant != PROTO_VARIANT_AUTO) + (req->activation != PROTO_ACT_NONE);
		for (int t = 0; t < PROTO_T_COUNT; t++)
			n += req->t[t].present;
		break;
	case PROTO_OP_TENSOR_NEW: n += 3; break;
	case PROTO_OP_TENSOR_WRITE:
	case PROTO_OP_TENSOR_READ: n += 2; break;
	case PROTO_OP_TENSOR_FREE: n += 1; break;
	case PROTO_OP_SGD_STEP:
	case PROTO_OP_ADAM_STEP: n += req->optim ? proto_optim_count(req->op, req->optim) : 0; break;
	default: break;
	}
	msgpack_pack_map(&pk, n);
	pk_kv_s(&pk, "op", proto_op_name(req->op));
	pk_kv_u(&pk, "id", req->id);
	switch (req->op) {
	case PROTO_OP_HELLO:
		pk_kv_u(&pk, "version", req->version);
		if (req->client[0])
			pk_kv_s(&pk, "client", req->client);
		if (req->monitor) {
			pk_str(&pk, "monitor");
			msgpack_pack_true(&pk);
		}
		break;
	case PROTO_OP_REGISTER:
		pk_kv_u(&pk, "size", req->size);
		break;
	case PROTO_OP_UNREGISTER:
		pk_kv_u(&pk, "region", req->region);
		break;
	case PROTO_OP_LINEAR_BACKWARD:
	case PROTO_OP_LINEAR_FORWARD:
		pk_kv_s(&pk, "dtype", proto_dtype_name(req->dtype));
		pk_kv_u(&pk, "batch", req->batch);
		pk_kv_u(&pk, "in", req->in);
		pk_kv_u(&pk, "out", req->out);
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			if (!req->t[t].present)
				continue;
			pk_str(&pk, proto_tensor_key[t]);
			pk_operand(&pk, &req->t[t]);
		}
		if (req->variant != PROTO_VARIANT_AUTO)
			pk_kv_s(&pk, "variant", proto_variant_name(req->variant));
		if (req->activation != PROTO_ACT_NONE)
			pk_kv_s(&pk, "activation", proto_activation_name(req->activation));
		pk_str(&pk, "accumulate");
		if (req->accumulate)
			msgpack_pack_true(&pk);
		else
			msgpack_pack_false(&pk);
		break;
	case PROTO_OP_TENSOR_NEW:
		pk_kv_s(&pk, "dtype", proto_dtype_name(req->dtype));
		pk_kv_u(&pk, "rows", req->rows);
		pk_kv_u(&pk, "cols", req->cols);
		break;
	case PROTO_OP_TENSOR_WRITE:
	case PROTO_OP_TENSOR_READ:
		pk_kv_u(&pk, "tensor", req->tensor);
		pk_str(&pk, req->op == PROTO_OP_TENSOR_WRITE ? "src" : "dst");
		msgpack_pack_array(&pk, 2);
		msgpack_pack_uint64(&pk, req->io.region);
		msgpack_pack_uint64(&pk, req->io.offset);
		break;
	case PROTO_OP_TENSOR_FREE:
		pk_kv_u(&pk, "tensor", req->tensor);
		break;
	case PROTO_OP_SGD_STEP:
	case PROTO_OP_ADAM_STEP:
		if (req->optim)
			proto_optim_pack(&pk, req->op, req->optim);
		break;
	default:
		break;
	}
	return frame_end(sb, at);
}

static void pack_hello(msgpack_packer *pk, const proto_hello *h)
{
	pk_kv_u(pk, "version", h->version);
	pk_kv_text(pk, "server", h->server);
	pk_str(pk, "device");
	msgpack_pack_map(pk, 6);
	pk_kv_text(pk, "name", h->device.name);
	pk_kv_u(pk, "vendor_id", h->device.vendor_id);
	pk_kv_u(pk, "device_id", h->device.device_id);
	pk_kv_text(pk, "driver", h->device.driver);
	pk_kv_text(pk, "api", h->device.api);
	pk_kv_text(pk, "type", h->device.type);
	pk_str(pk, "limits");
	msgpack_pack_map(pk, 16);
	pk_kv_u(pk, "max_frame", h->limits.max_frame);
	pk_kv_u(pk, "max_regions", h->limits.max_regions);
	pk_kv_u(pk, "max_region_bytes", h->limits.max_region_bytes);
	pk_kv_u(pk, "max_inflight", h->limits.max_inflight);
	pk_kv_u(pk, "max_dim", h->limits.max_dim);
	pk_kv_u(pk, "max_tensor_bytes", h->limits.max_tensor_bytes);
	pk_kv_u(pk, "max_total_region_bytes", h->limits.max_total_region_bytes);
	pk_kv_u(pk, "max_region_bytes_per_uid", h->limits.max_region_bytes_per_uid);
	pk_kv_u(pk, "max_connections", h->limits.max_connections);
	pk_kv_u(pk, "max_connections_per_uid", h->limits.max_connections_per_uid);
	pk_kv_u(pk, "max_fds_per_message", h->limits.max_fds_per_message);
	pk_kv_u(pk, "max_fds_held", h->limits.max_fds_held);
	pk_kv_u(pk, "max_outbound_bytes", h->limits.max_outbound_bytes);
	pk_kv_u(pk, "max_device_bytes", h->limits.max_device_bytes);
	pk_kv_u(pk, "max_device_bytes_per_uid", h->limits.max_device_bytes_per_uid);
	pk_kv_u(pk, "max_tensors", h->limits.max_tensors);
	pk_str(pk, "kernels");
	msgpack_pack_array(pk, h->n_kernels);
	for (unsigned i = 0; i < h->n_kernels; i++) {
		const proto_kernel_info *k = &h->kernels[i];
		msgpack_pack_map(pk, 5);
		pk_kv_text(pk, "name", k->name);
		pk_kv_text(pk, "domain", k->domain);
		pk_kv_text(pk, "variant", k->variant);
		pk_kv_text(pk, "dtype", k->dtype);
		pk_kv_text(pk, "status", k->status);
	}
}

static void pack_stats(msgpack_packer *pk, const proto_stats *s)
{
	pk_kv_d(pk, "uptime_s", s->uptime_s);
	pk_kv_u(pk, "clients", s->clients);
	pk_kv_u(pk, "regions", s->regions);
	pk_kv_u(pk, "region_bytes", s->region_bytes);
	pk_kv_u(pk, "jobs_done", s->jobs_done);
	pk_kv_u(pk, "jobs_failed", s->jobs_failed);
	pk_kv_u(pk, "batches", s->batches);
	pk_kv_d(pk, "jobs_per_batch_avg", s->jobs_per_batch_avg);
	pk_kv_u(pk, "pipelines", s->pipelines);
	pk_kv_u(pk, "pipeline_cache_hits", s->pipeline_cache_hits);
	pk_kv_u(pk, "jobs_queued", s->jobs_queued);
	pk_kv_u(pk, "jobs_running", s->jobs_running);
	pk_kv_u(pk, "host_imports", s->host_imports);
	pk_kv_u(pk, "staged_regions", s->staged_regions);
	pk_kv_u(pk, "validation_errors", s->validation_errors);
	pk_kv_u(pk, "devlocal_min_bytes", s->devlocal_min_bytes);
	pk_kv_u(pk, "devlocal_min_bytes_16bit", s->devlocal_min_bytes_16bit);
	pk_kv_u(pk, "devlocal_jobs", s->devlocal_jobs);
	pk_kv_u(pk, "devlocal_copy_bytes", s->devlocal_copy_bytes);
	pk_kv_u(pk, "splitk_jobs", s->splitk_jobs);
	pk_kv_u(pk, "dispatches", s->dispatches);
	pk_kv_u(pk, "scratch_bytes", s->scratch_bytes);
	pk_kv_u(pk, "scratch_failures", s->scratch_failures);
	pk_kv_u(pk, "stream_chunk_bytes", s->stream_chunk_bytes);
	pk_kv_u(pk, "stream_min_bytes", s->stream_min_bytes);
	pk_kv_u(pk, "stream_queues", s->stream_queues);
	pk_kv_u(pk, "stream_jobs", s->stream_jobs);
	pk_kv_u(pk, "stream_chunks", s->stream_chunks);
	pk_kv_u(pk, "stream_dw_blocks", s->stream_dw_blocks);
	pk_kv_u(pk, "stream_shared_jobs", s->stream_shared_jobs);
	pk_kv_u(pk, "spin_budget_us", s->spin_budget_us);
	pk_kv_u(pk, "spin_us", s->spin_us);
	pk_kv_u(pk, "spin_hits", s->spin_hits);
	pk_kv_u(pk, "blocking_waits", s->blocking_waits);
	pk_kv_u(pk, "spin_expected", s->spin_expected);
	pk_kv_u(pk, "sched_small_jobs", s->sched_small_jobs);
	pk_kv_u(pk, "sched_large_jobs", s->sched_large_jobs);
	pk_kv_u(pk, "sched_slices", s->sched_slices);
	proto_opstats_pack(pk, s);
	if (s->has_tensors) {
		pk_kv_u(pk, "device_bytes", s->device_bytes);
		pk_kv_u(pk, "tensors", s->tensors);
		pk_kv_u(pk, "host_read_bytes", s->host_read_bytes);
		pk_kv_u(pk, "host_write_bytes", s->host_write_bytes);
		pk_str(pk, "device_bytes_by_uid");
		const unsigned n = s->n_dev_uids < PROTO_MAX_UIDS ? s->n_dev_uids : PROTO_MAX_UIDS;
		msgpack_pack_array(pk, n);
		for (unsigned i = 0; i < n; i++) {
			msgpack_pack_map(pk, 2);
			pk_kv_u(pk, "uid", s->dev_uids[i].uid);
			pk_kv_u(pk, "bytes", s->dev_uids[i].bytes);
		}
	}
	if (s->n_stages) {
		pk_str(pk, "stages");
		msgpack_pack_map(pk, s->n_stages);
		for (unsigned i = 0; i < s->n_stages; i++) {
			const proto_stage_stat *st = &s->stages[i];
			pk_str(pk, st->name);
			msgpack_pack_map(pk, st->has_total ? 5 : 3);
			pk_kv_d(pk, "p50_us", st->p50_us);
			pk_kv_d(pk, "p99_us", st->p99_us);
			pk_kv_u(pk, "count", st->count);
			if (st->has_total) {
				pk_kv_u(pk, "total", st->total);
				pk_kv_d(pk, "sum_us", st->sum_us);
			}
		}
	}
	if (s->n_hist == 0)
		return;
	pk_str(pk, "histograms");
	msgpack_pack_map(pk, s->n_hist);
	for (unsigned i = 0; i < s->n_hist; i++) {
		const proto_histogram *h = &s->hist[i];
		pk_str(pk, h->name);
		msgpack_pack_map(pk, 4);
		pk_str(pk, "le_us");
		msgpack_pack_array(pk, h->n_le);
		for (unsigned b = 0; b < h->n_le; b++)
			msgpack_pack_uint64(pk, h->le_us[b]);
		pk_str(pk, "counts");
		msgpack_pack_array(pk, h->n_le + 1);
		for (unsigned b = 0; b <= h->n_le; b++)
			msgpack_pack_uint64(pk, h->counts[b]);
		pk_kv_u(pk, "sum_us", h->sum_us);
		pk_kv_u(pk, "count", h->count);
	}
}

/* ---- a job reply, written directly ------------------------------------------
 * The reply the daemon sends most, once per job: written straight into sb
 * in one reservation, keys as precomputed msgpack strings, instead of ~40
 * small writes through msgpack-c's packer. The bytes are exactly what the
 * packer writes (the smallest encoding of each uint, fixstr keys, fixmap
 * or map16 headers); tests/unit/test_msg.c test_reply_job_bytes checks them
 * against the packer. */

/* the most a job reply takes: header, map, 9 keys with uint64 values or
 * map headers, a map16 of PROTO_MAX_STAGES stages with names of up to 15
 * characters, one of PROTO_MAX_STREAM_FIELDS fields of up to 31 */
#define JOB_REPLY_MAX                                                                        \
	(PROTO_FRAME_HDR + 1 + 9 * (12 + 9) + 3 + PROTO_MAX_STAGES * (16 + 9) + 3 +             \
	 PROTO_MAX_STREAM_FIELDS * (32 + 9))

/* sb with room for n more bytes (grown as msgpack_sbuffer_write grows it),
 * or NULL */
static uint8_t *sb_reserve(msgpack_sbuffer *sb, size_t n)
{
	if (sb->alloc - sb->size < n) {
		size_t na = sb->alloc ? sb->alloc * 2 : MSGPACK_SBUFFER_INIT_SIZE;
		while (na < sb->size + n)
			na *= 2;
		char *d = realloc(sb->data, na);
		if (!d)
			return NULL;
		sb->data = d;
		sb->alloc = na;
	}
	return (uint8_t *)sb->data + sb->size;
}

static uint8_t *put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
	return p + bytes;
}

/* msgpack_pack_uint64's encoding */
static uint8_t *put_uint(uint8_t *p, uint64_t v)
{
	if (v < 128) {
		*p++ = (uint8_t)v;
		return p;
	}
	if (v < 256) {
		*p++ = 0xcc;
		*p++ = (uint8_t)v;
		return p;
	}
	if (v < 65536) {
		*p++ = 0xcd;
		return put_be(p, v, 2);
	}
	if (v <= UINT32_MAX) {
		*p++ = 0xce;
		return put_be(p, v, 4);
	}
	*p++ = 0xcf;
	return put_be(p, v, 8);
}

/* a str header for n < 256 bytes, as msgpack_pack_str writes it */
static uint8_t *put_str_hdr(uint8_t *p, size_t n)
{
	if (n < 32) {
		*p++ = (uint8_t)(0xa0 | n);
	} else {
		*p++ = 0xd9;
		*p++ = (uint8_t)n;
	}
	return p;
}

/* a map header for n < 65536 entries, as msgpack_pack_map writes it */
static uint8_t *put_map_hdr(uint8_t *p, unsigned n)
{
	if (n < 16) {
		*p++ = (uint8_t)(0x80 | n);
		return p;
	}
	*p++ = 0xde;
	return put_be(p, n, 2);
}

/* a key: its fixstr header and bytes, from a literal "\xa<n>name" */
#define PUT_KEY(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

static int encode_job(msgpack_sbuffer *sb, const proto_reply *r)
{
	uint8_t *const p0 = sb_reserve(sb, JOB_REPLY_MAX);
	if (!p0)
		return -ENOMEM;
	uint8_t *p = p0 + PROTO_FRAME_HDR;
	*p++ = (uint8_t)(0x80 | (5 + r->has_kernel_us + (r->stream.n > 0) + 3 * r->trace.present));
	p = PUT_KEY(p, "\xa2id");
	p = put_uint(p, r->id);
	p = PUT_KEY(p, "\xa2ok\xc3");
	p = PUT_KEY(p, "\xa9queued_us");
	p = put_uint(p, r->queued_us);
	p = PUT_KEY(p, "\xa6gpu_us");
	p = put_uint(p, r->gpu_us);
	p = PUT_KEY(p, "\xaa" "batch_jobs");
	p = put_uint(p, r->batch_jobs);
	/* only when measured: a client must not mistake 0 for a time */
	if (r->has_kernel_us) {
		p = PUT_KEY(p, "\xa9kernel_us");
		p = put_uint(p, r->kernel_us);
	}
	/* a streamed job's timeline, before the trace (t_reply_ns stays last) */
	if (r->stream.n > 0) {
		const proto_stream_tl *st = &r->stream;
		const unsigned n = st->n < PROTO_MAX_STREAM_FIELDS ? st->n : PROTO_MAX_STREAM_FIELDS;
		p = PUT_KEY(p, "\xa9stream_us");
		p = put_map_hdr(p, n);
		for (unsigned i = 0; i < n; i++) {
			const size_t len = strnlen(st->f[i].name, sizeof(st->f[i].name) - 1);
			p = put_str_hdr(p, len);
			memcpy(p, st->f[i].name, len);
			p += len;
			p = put_uint(p, st->f[i].us);
		}
	}
	if (r->trace.present) {
		const proto_trace *t = &r->trace;
		const unsigned n = t->n < PROTO_MAX_STAGES ? t->n : PROTO_MAX_STAGES;
		p = PUT_KEY(p, "\xa9t_recv_ns");
		p = put_uint(p, t->t_recv_ns);
		p = PUT_KEY(p, "\xa9stages_ns");
		p = put_map_hdr(p, n);
		for (unsigned i = 0; i < n; i++) {
			const char *nm = t->st[i].name;
			size_t len = 0;
			while (len < sizeof(t->st[i].name) - 1 && nm[len])
				len++;
			*p++ = (uint8_t)(0xa0 | len);
			memcpy(p, nm, len);
			p += len;
			p = put_uint(p, t->st[i].ns);
		}
		/* last and fixed-width: the daemon fills in the write time in
		 * place (proto_reply_put_time) */
		p = PUT_KEY(p, "\xaa" "t_reply_ns\xcf");
		p = put_be(p, t->t_reply_ns, 8);
	}
	const size_t body = (size_t)(p - p0) - PROTO_FRAME_HDR;
	proto_frame_put_len(p0, (uint32_t)body);
	sb->size += (size_t)(p - p0);
	return 0;
}

int proto_reply_encode(msgpack_sbuffer *sb, proto_reply_kind kind, const proto_reply *r)
{
	if (kind == PROTO_R_JOB)
		return encode_job(sb, r);
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	size_t at = frame_begin(sb);
	unsigned extra = 0;
	switch (kind) {
	case PROTO_R_PLAIN: extra = 0; break;
	case PROTO_R_HELLO: extra = 5; break;
	case PROTO_R_REGISTER: extra = 1; break;
	case PROTO_R_JOB: break; /* encode_job */
	case PROTO_R_STATS:
		extra = 38 + proto_opstats_keys(&r->stats) + (r->stats.n_stages > 0) +
			(r->stats.n_hist > 0) + 5 * r->stats.has_tensors;
		break;
	case PROTO_R_ERROR: extra = 1; break;
	case PROTO_R_TENSOR: extra = 1; break;
	}
	msgpack_pack_map(&pk, 2 + extra);
	pk_kv_u(&pk, "id", r->id);
	pk_str(&pk, "ok");
	if (kind == PROTO_R_ERROR)
		msgpack_pack_false(&pk);
	else
		msgpack_pack_true(&pk);
	switch (kind) {
	case PROTO_R_PLAIN: break;
	case PROTO_R_HELLO: pack_hello(&pk, &r->hello); break;
	case PROTO_R_REGISTER: pk_kv_u(&pk, "region", r->region); break;
	case PROTO_R_TENSOR: pk_kv_u(&pk, "tensor", r->tensor); break;
	case PROTO_R_JOB: break; /* encode_job */
	case PROTO_R_STATS: pack_stats(&pk, &r->stats); break;
	case PROTO_R_ERROR:
		pk_str(&pk, "error");
		msgpack_pack_map(&pk, 2);
		pk_kv_s(&pk, "code", proto_code_name(r->err.code));
		pk_kv_text(&pk, "message", r->err.message);
		break;
	}
	return frame_end(sb, at);
}
