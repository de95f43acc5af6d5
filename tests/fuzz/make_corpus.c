/* tests/fuzz/make_corpus.c — writes the seed corpus of the fuzz targets:
 *   make_corpus DIR   →   DIR/request/NAME (one frame body each)
 *                         DIR/frame/NAME   (fuzz_frame.c's header + a stream)
 * `make fuzz-corpus` runs it into tests/fuzz/corpus/. Valid requests and
 * replies come from proto's own encoders; the hostile ones are packed by hand
 * from the cases of issue 5.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <msgpack.h>

#include "frame.h"
#include "msg.h"
#include "optim.h"

static const char *g_dir;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void write_file(const char *sub, const char *name, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s/%s", g_dir, sub, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		die(path);
	if (n && fwrite(p, 1, n, f) != n)
		die(path);
	if (fclose(f) != 0)
		die(path);
}

/* ---- frame seeds ------------------------------------------------------------ */

/* fuzz_frame.c's header: chunk sizes, then regions 1..4 sized as
 * fuzz_request.c's fixed table (1 MiB, 128 MiB, 2^64 - 1, 64). */
static void frame_header(msgpack_sbuffer *sb, const size_t *chunk, unsigned nchunk)
{
	static const uint64_t reg[4] = {1u << 20, 1u << 27, UINT64_MAX, 64};
	uint8_t b[8];
	b[0] = (uint8_t)((nchunk - 1) | 3u << 3);
	msgpack_sbuffer_write(sb, (const char *)b, 1);
	for (unsigned i = 0; i < nchunk; i++) {
		b[0] = (uint8_t)((chunk[i] - 1) >> 8);
		b[1] = (uint8_t)(chunk[i] - 1);
		msgpack_sbuffer_write(sb, (const char *)b, 2);
	}
	for (unsigned i = 0; i < 4; i++) {
		for (unsigned k = 0; k < 8; k++)
			b[k] = (uint8_t)(reg[i] >> (56 - 8 * k));
		msgpack_sbuffer_write(sb, (const char *)b, 8);
	}
}

static void put_len(msgpack_sbuffer *sb, uint32_t n)
{
	uint8_t b[PROTO_FRAME_HDR];
	proto_frame_put_len(b, n);
	msgpack_sbuffer_write(sb, (const char *)b, sizeof(b));
}

/* One stream with the given chunking. */
static void frame_seed(const char *name, const size_t *chunk, unsigned nchunk,
		       const void *stream, size_t n)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	frame_header(&sb, chunk, nchunk);
	msgpack_sbuffer_write(&sb, stream, n);
	write_file("frame", name, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

/* A body as a request seed, and framed (one read of 65536) as a frame seed. */
static void body_seed(const char *name, const void *body, size_t n)
{
	static const size_t one_read[1] = {65536};
	write_file("request", name, body, n);
	msgpack_sbuffer s;
	msgpack_sbuffer_init(&s);
	put_len(&s, (uint32_t)n);
	msgpack_sbuffer_write(&s, body, n);
	frame_seed(name, one_read, 1, s.data, s.size);
	msgpack_sbuffer_destroy(&s);
}

/* a string literal's bytes, without its terminating NUL */
#define BYTES(name, lit) body_seed(name, lit, sizeof(lit) - 1)

/* Encoders give a framed message: strip the length prefix. */
static void framed_seed(const char *name, const msgpack_sbuffer *sb)
{
	body_seed(name, sb->data + PROTO_FRAME_HDR, sb->size - PROTO_FRAME_HDR);
}

/* ---- valid requests and replies ---------------------------------------------- */

static proto_request lb_request(proto_dtype dt)
{
	/* batch 4, in 8, out 3: every tensor apart in region 1 */
	proto_request q = {.op = PROTO_OP_LINEAR_BACKWARD, .id = 7, .dtype = dt,
			   .batch = 4, .in = 8, .out = 3};
	static const uint64_t at[PROTO_T_BACKWARD_COUNT] = {0, 128, 256, 512, 640, 768};
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++)
		q.t[t] = (proto_tensor){.present = true, .region = 1, .offset = at[t]};
	return q;
}

static void request_seed(const char *name, const proto_request *q)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	if (proto_request_encode(&sb, q) != 0)
		die("proto_request_encode");
	framed_seed(name, &sb);
	msgpack_sbuffer_destroy(&sb);
}

static void reply_seed(const char *name, proto_reply_kind kind, const proto_reply *r)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	if (proto_reply_encode(&sb, kind, r) != 0)
		die("proto_reply_encode");
	framed_seed(name, &sb);
	msgpack_sbuffer_destroy(&sb);
}

static void valid_seeds(void)
{
	proto_request q = {.op = PROTO_OP_HELLO, .id = 1, .version = 1};
	request_seed("valid-hello-noclient", &q);
	strcpy(q.client, "fuzz");
	request_seed("valid-hello", &q);
	q = (proto_request){.op = PROTO_OP_REGISTER, .id = 2, .size = 4096};
	request_seed("valid-register", &q);
	q = (proto_request){.op = PROTO_OP_UNREGISTER, .id = 3, .region = 1};
	request_seed("valid-unregister", &q);
	q = (proto_request){.op = PROTO_OP_STATS, .id = 4};
	request_seed("valid-stats", &q);
	q = (proto_request){.op = PROTO_OP_PING, .id = 5};
	request_seed("valid-ping", &q);

	q = lb_request(PROTO_F32);
	request_seed("valid-linear-f32-all", &q);
	q = lb_request(PROTO_F16);
	q.t[PROTO_T_W].present = q.t[PROTO_T_DB].present = q.t[PROTO_T_DX].present = false;
	request_seed("valid-linear-f16-dw", &q);
	q = lb_request(PROTO_BF16);
	q.t[PROTO_T_DW].present = q.t[PROTO_T_DB].present = false;
	q.accumulate = true;
	request_seed("valid-linear-bf16-dx-accumulate", &q);
	/* outputs in region 2, inputs in region 1 */
	q = lb_request(PROTO_F32);
	for (int t = PROTO_T_DW; t <= PROTO_T_DX; t++)
		q.t[t].region = 2;
	request_seed("valid-linear-two-regions", &q);
	/* device tensors: the ops, and {"tensor": T} operands */
	q = (proto_request){.op = PROTO_OP_TENSOR_NEW, .id = 6, .dtype = PROTO_BF16, .rows = 3, .cols = 5};
	request_seed("valid-tensor-new", &q);
	q = (proto_request){.op = PROTO_OP_TENSOR_WRITE, .id = 7, .tensor = 2,
			    .io = {.present = true, .region = 1, .offset = 64}};
	request_seed("valid-tensor-write", &q);
	q.op = PROTO_OP_TENSOR_READ;
	request_seed("valid-tensor-read", &q);
	q = (proto_request){.op = PROTO_OP_TENSOR_FREE, .id = 8, .tensor = 2};
	request_seed("valid-tensor-free", &q);
	q = lb_request(PROTO_F32);
	q.t[PROTO_T_W] = (proto_tensor){.present = true, .is_tensor = true, .tensor = 1};
	q.t[PROTO_T_DW] = (proto_tensor){.present = true, .is_tensor = true, .tensor = 2};
	request_seed("valid-linear-tensor-operands", &q);
	/* fused activations: a forward's z, a backward's y (relu) or z (gelu) */
	q = lb_request(PROTO_F16);
	q.activation = PROTO_ACT_GELU;
	q.t[PROTO_T_Z] = (proto_tensor){.present = true, .region = 1, .offset = 1024};
	request_seed("valid-linear-gelu", &q);
	/* the optimizer steps */
	static const uint64_t ids[4][2] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}};
	proto_optim o;
	proto_optim_defaults(&o);
	o.n = 2, o.lr = 0.01, o.step = 3, o.has_lr = o.has_step = true;
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		o.has[k] = true, o.ids[k] = ids[k];
	q = (proto_request){.op = PROTO_OP_ADAM_STEP, .id = 10, .optim = &o};
	request_seed("valid-adam-step", &q);
	o.has[PROTO_OPT_BUF2] = false, o.momentum = 0.9, o.nesterov = true;
	q = (proto_request){.op = PROTO_OP_SGD_STEP, .id = 11, .optim = &o};
	request_seed("valid-sgd-step", &q);

	proto_reply r = {.id = 9, .ok = true, .region = 3, .queued_us = 12, .gpu_us = 34,
			 .batch_jobs = 2};
	reply_seed("reply-plain", PROTO_R_PLAIN, &r);
	reply_seed("reply-register", PROTO_R_REGISTER, &r);
	reply_seed("reply-job", PROTO_R_JOB, &r);
	r.trace = (proto_trace){.present = true, .t_recv_ns = 1000, .t_reply_ns = 2000, .n = 3,
				.st = {{"decode", 5}, {"gpu", 900}, {"answer", 7}}};
	reply_seed("reply-job-trace", PROTO_R_JOB, &r);
	r.trace.present = false;
	r.stats = (proto_stats){.uptime_s = 1.5, .clients = 2, .jobs_done = 3,
				.jobs_per_batch_avg = 1.25};
	reply_seed("reply-stats", PROTO_R_STATS, &r);
	r.stats.n_hist = 1;
	r.stats.hist[0] = (proto_histogram){.name = "job_latency", .n_le = 3, .le_us = {10, 25, 50},
					    .counts = {1, 0, 2, 1}, .sum_us = 99, .count = 4};
	reply_seed("reply-stats-histograms", PROTO_R_STATS, &r);
	r.stats.n_hist = 0;
	r.stats.n_stages = 2;
	r.stats.stages[0] = (proto_stage_stat){.name = "queue", .p50_us = 1.5, .p99_us = 9, .count = 3};
	r.stats.stages[1] = (proto_stage_stat){.name = "write", .p50_us = 0.5, .p99_us = 2, .count = 3};
	reply_seed("reply-stats-stages", PROTO_R_STATS, &r);
	r.stats.n_stages = 0;
	r.hello.version = 1;
	strcpy(r.hello.server, "vkgradd 0.1.0");
	strcpy(r.hello.device.name, "llvmpipe");
	strcpy(r.hello.device.driver, "mesa");
	strcpy(r.hello.device.api, "1.3.255");
	strcpy(r.hello.device.type, "cpu");
	r.hello.limits = (proto_limits){.max_frame = 65536, .max_regions = 64,
					.max_region_bytes = 4ull << 30, .max_inflight = 64,
					.max_dim = 1u << 20, .max_tensor_bytes = 4ull << 30};
	r.hello.n_kernels = 2;
	r.hello.kernels[0] = (proto_kernel_info){"dw_f32", "linear", "tiled", "f32", "ready"};
	r.hello.kernels[1] = (proto_kernel_info){"dx_f32", "linear", "tiled", "f32", "ready"};
	reply_seed("reply-hello", PROTO_R_HELLO, &r);
	r.ok = false;
	r.err.code = PROTO_OUT_OF_BOUNDS;
	strcpy(r.err.message, "tensor 'x': bytes [0, +128) do not lie inside region 1");
	reply_seed("reply-error", PROTO_R_ERROR, &r);
}

/* ---- hand-packed requests --------------------------------------------------- */

static void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

static void pk_tensor(msgpack_packer *pk, const char *key, uint64_t region, uint64_t off)
{
	pk_str(pk, key);
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint64(pk, region);
	msgpack_pack_uint64(pk, off);
}

/* A linear_backward map: op, id, dtype, then batch/in/out packed by the
 * caller's function, then the tensors x, dy, dw (region 1 unless given). */
typedef void (*dims_fn)(msgpack_packer *pk);

static void lb_seed(const char *name, dims_fn dims, uint64_t x_region, uint64_t x_off,
		    uint64_t dy_off)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 9);
	pk_str(&pk, "op");
	pk_str(&pk, "linear_backward");
	pk_str(&pk, "id");
	msgpack_pack_uint64(&pk, 11);
	pk_str(&pk, "dtype");
	pk_str(&pk, "f32");
	dims(&pk); /* three key/value pairs */
	pk_tensor(&pk, "x", x_region, x_off);
	pk_tensor(&pk, "dy", 1, dy_off);
	pk_tensor(&pk, "dw", 2, 0);
	body_seed(name, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

static void dims_small(msgpack_packer *pk)
{
	pk_str(pk, "batch"); msgpack_pack_uint64(pk, 4);
	pk_str(pk, "in"); msgpack_pack_uint64(pk, 8);
	pk_str(pk, "out"); msgpack_pack_uint64(pk, 3);
}

static void dims_negative(msgpack_packer *pk)
{
	pk_str(pk, "batch"); msgpack_pack_int64(pk, -1);
	pk_str(pk, "in"); msgpack_pack_int64(pk, INT64_MIN);
	pk_str(pk, "out"); msgpack_pack_uint64(pk, 3);
}

static void dims_float(msgpack_packer *pk)
{
	pk_str(pk, "batch"); msgpack_pack_uint64(pk, 4);
	pk_str(pk, "in"); msgpack_pack_double(pk, 1.5);
	pk_str(pk, "out"); msgpack_pack_float(pk, 3.0f);
}

static void dims_overflow(msgpack_packer *pk)
{
	pk_str(pk, "batch"); msgpack_pack_uint64(pk, 1ull << 33);
	pk_str(pk, "in"); msgpack_pack_uint64(pk, 1ull << 33);
	pk_str(pk, "out"); msgpack_pack_uint64(pk, 1);
}

static void dims_max(msgpack_packer *pk)
{
	pk_str(pk, "batch"); msgpack_pack_uint64(pk, 1u << 20);
	pk_str(pk, "in"); msgpack_pack_uint64(pk, 1u << 20);
	pk_str(pk, "out"); msgpack_pack_uint64(pk, 1u << 20);
}

static void dims_zero(msgpack_packer *pk)
{
	pk_str(pk, "batch"); msgpack_pack_uint64(pk, 0);
	pk_str(pk, "in"); msgpack_pack_uint64(pk, 8);
	pk_str(pk, "out"); msgpack_pack_uint64(pk, 3);
}

/* A map of the given key/value pairs, values given as ready msgpack bytes. */
static void map_seed(const char *name, unsigned n, const char *const *kv)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, n);
	for (unsigned i = 0; i < n; i++) {
		pk_str(&pk, kv[2 * i]);
		const char *v = kv[2 * i + 1];
		/* "s:text" a string, "u:123" an unsigned, "i:-5" a signed, "nil" */
		if (strncmp(v, "s:", 2) == 0)
			pk_str(&pk, v + 2);
		else if (strncmp(v, "u:", 2) == 0)
			msgpack_pack_uint64(&pk, strtoull(v + 2, NULL, 0));
		else if (strncmp(v, "i:", 2) == 0)
			msgpack_pack_int64(&pk, strtoll(v + 2, NULL, 0));
		else
			msgpack_pack_nil(&pk);
	}
	body_seed(name, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

static void hostile_seeds(void)
{
	lb_seed("lb-negative-dims", dims_negative, 1, 0, 128);
	lb_seed("lb-float-dims", dims_float, 1, 0, 128);
	lb_seed("lb-overflow-dims-2^33", dims_overflow, 1, 0, 128);
	lb_seed("lb-max-dims", dims_max, 1, 0, 128);
	lb_seed("lb-zero-batch", dims_zero, 1, 0, 128);
	/* region 3 is 2^64 - 1 bytes: offset + bytes wraps, or lands on the top */
	lb_seed("lb-offset-wraps-2^64", dims_small, 3, UINT64_MAX - 3, 128);
	lb_seed("lb-offset-fits-top", dims_small, 3, UINT64_MAX - 131, 128);
	lb_seed("lb-offset-misaligned-max", dims_small, 1, 0, UINT64_MAX);
	lb_seed("lb-offset-out-of-region", dims_small, 4, 0, 128);
	lb_seed("lb-unknown-region", dims_small, 99, 0, 128);
	lb_seed("lb-overlap-x-dy", dims_small, 1, 0, 0); /* inputs may overlap */

	/* dw (region 2, at 0) overlapping x placed in region 2 */
	lb_seed("lb-overlap-dw-x", dims_small, 2, 64, 128);

	{
		/* nil tensors and nil accumulate mean "absent" */
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 11);
		pk_str(&pk, "op"); pk_str(&pk, "linear_backward");
		pk_str(&pk, "id"); msgpack_pack_uint64(&pk, 12);
		pk_str(&pk, "dtype"); pk_str(&pk, "f32");
		dims_small(&pk);
		pk_tensor(&pk, "x", 1, 0);
		pk_tensor(&pk, "dy", 1, 128);
		pk_tensor(&pk, "db", 2, 0);
		pk_str(&pk, "dx"); msgpack_pack_nil(&pk);
		pk_str(&pk, "accumulate"); msgpack_pack_nil(&pk);
		body_seed("lb-nil-tensors", sb.data, sb.size);
		msgpack_sbuffer_destroy(&sb);
	}

	static const char *const unknown_op[] = {"op", "s:linear_forward", "id", "u:3"};
	map_seed("unknown-op", 2, unknown_op);
	static const char *const no_id[] = {"op", "s:ping"};
	map_seed("missing-id", 1, no_id);
	static const char *const neg_id[] = {"op", "s:ping", "id", "i:-1"};
	map_seed("negative-id", 2, neg_id);
	static const char *const op_int[] = {"op", "u:5", "id", "u:1"};
	map_seed("op-not-string", 2, op_int);
	static const char *const dup[] = {"op", "s:ping", "id", "u:1", "op", "s:stats",
					  "id", "u:2"};
	map_seed("duplicate-keys", 4, dup);
	static const char *const v2[] = {"op", "s:hello", "id", "u:1", "version", "u:2"};
	map_seed("hello-version-2", 3, v2);
	static const char *const longc[] = {
		"op", "s:hello", "id", "u:1", "version", "u:1", "client",
		"s:0123456789012345678901234567890123456789012345678901234567890123"};
	map_seed("hello-client-64", 4, longc);
	static const char *const reg0[] = {"op", "s:register", "id", "u:1", "size", "u:0"};
	map_seed("register-size-0", 3, reg0);
	static const char *const f64[] = {"op", "s:linear_backward", "id", "u:1", "dtype",
					  "s:f64"};
	map_seed("lb-dtype-f64", 3, f64);
	static const char *const unreg[] = {"op", "s:unregister", "id", "u:1", "region", "nil"};
	map_seed("unregister-region-nil", 3, unreg);

	static const char nul_client[] = "\x84\xa2op\xa5hello\xa2id\x01\xa7version\x01"
					 "\xa6" "client\xa3" "a\0b";
	BYTES("hello-client-nul", nul_client);
}

/* ---- raw msgpack ------------------------------------------------------------ */

static void raw_seeds(void)
{
	BYTES("array32-ffffffff", "\xdd\xff\xff\xff\xff");
	BYTES("map32-ffffffff", "\xdf\xff\xff\xff\xff");
	BYTES("array16-ffff", "\xdc\xff\xff");
	BYTES("bin32-ffffffff", "\xc6\xff\xff\xff\xff");
	BYTES("str8-truncated", "\xd9\x20" "abc");
	BYTES("str16-truncated", "\xda\x01\x00" "abc");
	BYTES("str32-truncated", "\xdb\x00\x01\x00\x00" "abc");
	BYTES("str32-header-truncated", "\xdb\x00\x01");
	BYTES("bin8-truncated", "\xc4\x10" "ab");
	BYTES("bin16-truncated", "\xc5\x01\x00" "ab");
	BYTES("bin32-truncated", "\xc6\x00\x00\x01\x00" "ab");
	BYTES("ext8-truncated", "\xc7\x10\x01" "ab");
	BYTES("ext16-truncated", "\xc8\x01\x00\x01" "ab");
	BYTES("ext32-truncated", "\xc9\x00\x00\x01\x00\x01" "ab");
	BYTES("fixext16-truncated", "\xd8\x01" "abc");
	BYTES("fixmap-key-truncated", "\x81\xa2o");
	BYTES("invalid-c1", "\x81\xa2op\xc1");
	BYTES("not-a-map", "\x92\xa4ping\x01");
	BYTES("ping-trailing-nil", "\x82\xa2op\xa4ping\xa2id\x01\xc0");
	BYTES("ping-truncated", "\x82\xa2op\xa4ping\xa2id");
	BYTES("ping-map16-ext-keys", "\xde\x00\x03\xa2op\xa4ping\xa2id\x01\xd6\x01\x00\x00\x00\x00\xc7\x00\x05");

	/* 10,000 nested one-element arrays around a nil */
	enum { DEEP = 10000 };
	char *deep = malloc(DEEP + 1);
	if (!deep)
		die("malloc");
	memset(deep, 0x91, DEEP);
	deep[DEEP] = (char)0xc0;
	body_seed("nested-arrays-10000", deep, DEEP + 1);
	/* the deepest accepted (16), and one more, inside a request map */
	char d16[64];
	size_t n = 0;
	static const char head[] = "\x83\xa2op\xa4ping\xa2id\x01\xa3pad";
	memcpy(d16, head, sizeof(head) - 1);
	n = sizeof(head) - 1;
	for (int i = 0; i < 15; i++)
		d16[n++] = (char)0x91;
	d16[n++] = (char)0xc0;
	body_seed("nested-16-in-request", d16, n);
	memmove(d16 + sizeof(head), d16 + sizeof(head) - 1, n - (sizeof(head) - 1));
	d16[sizeof(head) - 1] = (char)0x91;
	body_seed("nested-17-in-request", d16, n + 1);
	free(deep);
}

/* ---- streams ---------------------------------------------------------------- */

static void stream_add_ping(msgpack_sbuffer *s, uint64_t id)
{
	proto_request q = {.op = PROTO_OP_PING, .id = id};
	if (proto_request_encode(s, &q) != 0)
		die("encode");
}

static void stream_seeds(void)
{
	static const size_t one_read[1] = {65536};
	msgpack_sbuffer s;
	char tail[16] = {0};

	/* bad length prefixes, each followed by bytes that would be a ping */
	static const uint32_t bad_len[] = {0, PROTO_MIN_MAX_FRAME + 1, 0xffffffffu};
	static const char *const bad_name[] = {"len-0", "len-65537", "len-ffffffff"};
	for (int i = 0; i < 3; i++) {
		msgpack_sbuffer_init(&s);
		put_len(&s, bad_len[i]);
		stream_add_ping(&s, 1);
		frame_seed(bad_name[i], one_read, 1, s.data, s.size);
		msgpack_sbuffer_destroy(&s);
	}
	/* a good frame first, then the bad length */
	msgpack_sbuffer_init(&s);
	stream_add_ping(&s, 1);
	put_len(&s, 0xffffffffu);
	msgpack_sbuffer_write(&s, tail, sizeof(tail));
	frame_seed("ping-then-len-ffffffff", one_read, 1, s.data, s.size);
	msgpack_sbuffer_destroy(&s);

	/* linear_backward + hello + ping split at odd places */
	msgpack_sbuffer_init(&s);
	proto_request q = lb_request(PROTO_F32);
	proto_request_encode(&s, &q);
	q = (proto_request){.op = PROTO_OP_HELLO, .id = 1, .version = 1};
	proto_request_encode(&s, &q);
	stream_add_ping(&s, 2);
	static const size_t weird[8] = {1, 2, 3, 5, 7, 11, 13, 64};
	frame_seed("split-weird", weird, 8, s.data, s.size);
	static const size_t bytewise[1] = {1};
	frame_seed("split-every-byte", bytewise, 1, s.data, s.size);
	static const size_t mid_prefix[2] = {3, 4096};
	frame_seed("split-inside-prefix-then-merged", mid_prefix, 2, s.data, s.size);
	frame_seed("three-frames-one-read", one_read, 1, s.data, s.size);
	msgpack_sbuffer_destroy(&s);

	/* two frames merged into one read, the second cut short */
	msgpack_sbuffer_init(&s);
	stream_add_ping(&s, 1);
	stream_add_ping(&s, 2);
	frame_seed("two-frames-merged", one_read, 1, s.data, s.size);
	frame_seed("two-frames-bytewise", bytewise, 1, s.data, s.size);
	frame_seed("two-frames-second-cut", one_read, 1, s.data, s.size - 3);
	msgpack_sbuffer_destroy(&s);

	/* 200 pings, read in 17- and 4096-byte pieces */
	msgpack_sbuffer_init(&s);
	for (uint64_t i = 1; i <= 200; i++)
		stream_add_ping(&s, i);
	static const size_t mixed[2] = {17, 4096};
	frame_seed("pings-200", mixed, 2, s.data, s.size);
	msgpack_sbuffer_destroy(&s);

	/* a frame of exactly max_frame bytes (a ping with an ignored pad key),
	 * then a ping: the buffer's bound is reached here */
	msgpack_sbuffer_init(&s);
	{
		msgpack_sbuffer b;
		msgpack_sbuffer_init(&b);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 3);
		pk_str(&pk, "op"); pk_str(&pk, "ping");
		pk_str(&pk, "id"); msgpack_pack_uint64(&pk, 3);
		pk_str(&pk, "pad");
		const size_t pad = PROTO_MIN_MAX_FRAME - b.size - 3; /* str16 header */
		char *z = calloc(1, pad);
		if (!z)
			die("calloc");
		msgpack_pack_str(&pk, pad);
		msgpack_pack_str_body(&pk, z, pad);
		free(z);
		if (b.size != PROTO_MIN_MAX_FRAME)
			die("max frame size");
		put_len(&s, (uint32_t)b.size);
		msgpack_sbuffer_write(&s, b.data, b.size);
		msgpack_sbuffer_destroy(&b);
	}
	stream_add_ping(&s, 4);
	frame_seed("max-frame-then-ping", one_read, 1, s.data, s.size);
	static const size_t odd[2] = {4095, 65536};
	frame_seed("max-frame-odd-reads", odd, 2, s.data, s.size);
	msgpack_sbuffer_destroy(&s);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	g_dir = argv[1];
	char path[4096];
	const char *const sub[] = {"", "/request", "/frame"};
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s%s", g_dir, sub[i]);
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			die(path);
	}
	valid_seeds();
	hostile_seeds();
	raw_seeds();
	stream_seeds();
	return 0;
}
