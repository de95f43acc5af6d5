/* tests/unit/test_msg.c — proto/msg.h: request and reply encode/decode.
 *
 * Round trips for every op and every reply kind, then request validation:
 * each malformed request is built with msgpack_packer directly and must get
 * the right code, the right id, and a message naming the offending key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "frame.h"
#include "mpcheck.h"
#include "msg.h"
#include "job.h"
#include "optim.h"
#include "text.h"

/* ---- helpers -------------------------------------------------------------- */

static uint32_t be32(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The sbuffer holds exactly one frame: check its prefix, return the body. */
static const uint8_t *one_frame(const msgpack_sbuffer *sb, size_t *len)
{
	assert_true(sb->size > PROTO_FRAME_HDR);
	assert_int_equal(be32(sb->data), sb->size - PROTO_FRAME_HDR);
	*len = sb->size - PROTO_FRAME_HDR;
	return (const uint8_t *)sb->data + PROTO_FRAME_HDR;
}

static void request_round_trip(const proto_request *in, proto_request *out)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_request_encode(&sb, in), 0);
	size_t len;
	const uint8_t *body = one_frame(&sb, &len);
	uint64_t id = 12345;
	proto_err err = {0};
	int rc = proto_request_decode(body, len, out, &id, &err);
	if (rc != 0)
		fail_msg("decode of encoded %s failed: %s: %s", proto_op_name(in->op),
			 proto_code_name(err.code), err.message);
	assert_int_equal(id, in->id);
	assert_int_equal(out->id, in->id);
	assert_int_equal(out->op, in->op);
	msgpack_sbuffer_destroy(&sb);
}

static void reply_round_trip(proto_reply_kind kind, const proto_reply *in, proto_reply *out)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_reply_encode(&sb, kind, in), 0);
	size_t len;
	const uint8_t *body = one_frame(&sb, &len);
	proto_err err = {0};
	memset(out, 0xa5, sizeof(*out)); /* decode must not rely on a zeroed struct */
	int rc = proto_reply_decode(body, len, out, &err);
	if (rc != 0)
		fail_msg("reply decode failed: %s", err.message);
	assert_int_equal(out->id, in->id);
	assert_int_equal(out->ok, kind != PROTO_R_ERROR);
	msgpack_sbuffer_destroy(&sb);
}

/* ---- names ---------------------------------------------------------------- */

static void test_code_names(void **state)
{
	(void)state;
	static const char *const want[PROTO_CODE_COUNT] = {
		"ok", "bad_frame", "bad_request", "unknown_op", "unsupported", "bad_region",
		"out_of_bounds", "overlap", "limit", "device_lost", "internal", "bad_tensor",
	};
	for (int c = 0; c < PROTO_CODE_COUNT; c++) {
		assert_string_equal(proto_code_name((proto_code)c), want[c]);
		assert_int_equal(proto_code_from_name(want[c], strlen(want[c])), c);
	}
	assert_int_equal(proto_code_from_name("nope", 4), PROTO_INTERNAL);
	assert_int_equal(proto_code_from_name("limitx", 6), PROTO_INTERNAL);
	assert_int_equal(proto_code_from_name("limitx", 5), PROTO_LIMIT); /* length-bounded */
	assert_string_equal(proto_code_name((proto_code)999), "internal");
	assert_string_equal(proto_op_name(PROTO_OP_LINEAR_BACKWARD), "linear_backward");
	assert_string_equal(proto_op_name(PROTO_OP_UNREGISTER), "unregister");
	assert_string_equal(proto_dtype_name(PROTO_BF16), "bf16");
	assert_int_equal(proto_dtype_size(PROTO_F32), 4);
	assert_int_equal(proto_dtype_size(PROTO_F16), 2);
	assert_int_equal(proto_dtype_size(PROTO_BF16), 2);
}

static void test_proto_fail(void **state)
{
	(void)state;
	proto_err err = {0};
	assert_int_equal(proto_fail(&err, PROTO_LIMIT, "key '%s' = %d", "batch", 9), -(int)PROTO_LIMIT);
	assert_int_equal(err.code, PROTO_LIMIT);
	assert_string_equal(err.message, "key 'batch' = 9");
	/* long messages are cut, not overflowed */
	char big[1100];
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	proto_fail(&err, PROTO_INTERNAL, "%s", big);
	assert_int_equal(strlen(err.message), sizeof(err.message) - 1);
}

/* ---- request round trips ------------------------------------------------------ */

static void test_request_hello(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_HELLO;
	in.id = 1;
	in.version = PROTO_VERSION;
	strcpy(in.client, "pytorch-worker-3");
	request_round_trip(&in, &out);
	assert_int_equal(out.version, 1);
	assert_string_equal(out.client, "pytorch-worker-3");
	/* without client */
	in.client[0] = 0;
	in.id = UINT64_MAX;
	request_round_trip(&in, &out);
	assert_string_equal(out.client, "");
}

static void test_request_register(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_REGISTER;
	in.id = 77;
	in.size = (1ull << 40) + 3;
	request_round_trip(&in, &out);
	assert_int_equal(out.size, (1ull << 40) + 3);
}

static void test_request_unregister(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_UNREGISTER;
	in.id = 0; /* 0 is a valid id */
	in.region = 5;
	request_round_trip(&in, &out);
	assert_int_equal(out.region, 5);
}

static void test_request_stats_ping(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_STATS;
	in.id = 9;
	request_round_trip(&in, &out);
	in.op = PROTO_OP_PING;
	in.id = 10;
	request_round_trip(&in, &out);
}

/* linear_forward round trips with x, w, b, y; its decoder ignores the
 * backward's tensor keys (and a backward's ignores b and y); y is required. */
static void test_request_linear_forward(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_LINEAR_FORWARD;
	in.id = 77;
	in.dtype = PROTO_BF16;
	in.batch = 5, in.in = 6, in.out = 7;
	in.t[PROTO_T_X] = (proto_tensor){.present = true, .region = 1, .offset = 0};
	in.t[PROTO_T_W] = (proto_tensor){.present = true, .region = 1, .offset = 64};
	in.t[PROTO_T_B] = (proto_tensor){.present = true, .region = 2, .offset = 8};
	in.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = 3, .offset = 1ull << 36};
	in.variant = PROTO_VARIANT_TILED;
	in.accumulate = true;
	request_round_trip(&in, &out);
	assert_int_equal(out.op, PROTO_OP_LINEAR_FORWARD);
	assert_int_equal(out.dtype, PROTO_BF16);
	assert_int_equal(out.variant, PROTO_VARIANT_TILED);
	assert_true(out.accumulate);
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		assert_int_equal(out.t[t].present, in.t[t].present);
		assert_int_equal(out.t[t].offset, in.t[t].offset);
	}
	/* a backward's keys on a forward are unknown keys there, and the
	 * forward's on a backward */
	proto_request mix = in;
	mix.t[PROTO_T_DY] = (proto_tensor){.present = true, .region = 1, .offset = 128};
	mix.t[PROTO_T_DX] = (proto_tensor){.present = true, .region = 1, .offset = 256};
	request_round_trip(&mix, &out);
	assert_false(out.t[PROTO_T_DY].present || out.t[PROTO_T_DX].present);
	assert_true(out.t[PROTO_T_Y].present);
	mix.op = PROTO_OP_LINEAR_BACKWARD;
	mix.t[PROTO_T_W].present = false;
	mix.t[PROTO_T_DX].present = false;
	mix.t[PROTO_T_DW] = (proto_tensor){.present = true, .region = 1, .offset = 512};
	request_round_trip(&mix, &out);
	assert_false(out.t[PROTO_T_B].present || out.t[PROTO_T_Y].present);
	assert_true(out.t[PROTO_T_DW].present && out.t[PROTO_T_DY].present);
	/* y (then w, x) missing: bad_request naming it */
	static const int need[3] = {PROTO_T_Y, PROTO_T_W, PROTO_T_X};
	static const char *const key[3] = {"'y'", "'w'", "'x'"};
	for (int i = 0; i < 3; i++) {
		proto_request m = in;
		m.t[need[i]].present = false;
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		assert_int_equal(proto_request_encode(&sb, &m), 0);
		proto_request d;
		proto_err err;
		uint64_t id;
		assert_int_equal(proto_request_decode((const uint8_t *)sb.data + 4, sb.size - 4, &d, &id, &err),
				 -PROTO_BAD_REQUEST);
		assert_non_null(strstr(err.message, "linear_forward"));
		assert_non_null(strstr(err.message, key[i]));
		msgpack_sbuffer_destroy(&sb);
	}
}

static void test_request_linear_backward(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_LINEAR_BACKWARD;
	in.id = 4242;
	in.dtype = PROTO_F32;
	in.batch = 32;
	in.in = 1024;
	in.out = 4096;
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
		in.t[t].present = true;
		in.t[t].region = 10 + (uint64_t)t;
		in.t[t].offset = 1000u * (uint64_t)t + (t == PROTO_T_DX ? (1ull << 35) : 0);
	}
	in.accumulate = true;
	request_round_trip(&in, &out);
	assert_int_equal(out.dtype, PROTO_F32);
	assert_int_equal(out.batch, 32);
	assert_int_equal(out.in, 1024);
	assert_int_equal(out.out, 4096);
	assert_true(out.accumulate);
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
		assert_true(out.t[t].present);
		assert_int_equal(out.t[t].region, in.t[t].region);
		assert_int_equal(out.t[t].offset, in.t[t].offset);
	}

	/* minimal: only db asked for, other dtypes, no accumulate */
	const proto_dtype dts[] = {PROTO_F16, PROTO_BF16};
	for (int d = 0; d < 2; d++) {
		proto_request m = {0};
		m.op = PROTO_OP_LINEAR_BACKWARD;
		m.id = 5;
		m.dtype = dts[d];
		m.batch = 1;
		m.in = 1;
		m.out = 7;
		m.t[PROTO_T_X] = (proto_tensor){.present = true, .region = 1, .offset = 0};
		m.t[PROTO_T_DY] = (proto_tensor){.present = true, .region = 1, .offset = 64};
		m.t[PROTO_T_DB] = (proto_tensor){.present = true, .region = 2, .offset = 0};
		request_round_trip(&m, &out);
		assert_int_equal(out.dtype, dts[d]);
		assert_false(out.accumulate);
		assert_int_equal(out.out, 7);
		assert_true(out.t[PROTO_T_X].present);
		assert_true(out.t[PROTO_T_DY].present);
		assert_true(out.t[PROTO_T_DB].present);
		assert_int_equal(out.t[PROTO_T_DY].offset, 64);
		assert_int_equal(out.t[PROTO_T_DB].region, 2);
		assert_false(out.t[PROTO_T_W].present);
		assert_false(out.t[PROTO_T_DW].present);
		assert_false(out.t[PROTO_T_DX].present);
	}
}

/* Two requests appended to one sbuffer come out as two frames. */
static void test_request_encode_appends(void **state)
{
	(void)state;
	proto_request a = {.op = PROTO_OP_PING, .id = 1};
	proto_request b = {.op = PROTO_OP_REGISTER, .id = 2, .size = 4096};
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_request_encode(&sb, &a), 0);
	size_t first = sb.size;
	assert_int_equal(proto_request_encode(&sb, &b), 0);
	assert_int_equal(be32(sb.data), first - PROTO_FRAME_HDR);
	assert_int_equal(be32(sb.data + first), sb.size - first - PROTO_FRAME_HDR);
	proto_request out;
	uint64_t id;
	proto_err err;
	assert_int_equal(proto_request_decode((const uint8_t *)sb.data + first + PROTO_FRAME_HDR,
					      sb.size - first - PROTO_FRAME_HDR, &out, &id, &err), 0);
	assert_int_equal(out.op, PROTO_OP_REGISTER);
	assert_int_equal(out.size, 4096);
	msgpack_sbuffer_destroy(&sb);
}

/* ---- reply round trips -------------------------------------------------------- */

static void test_reply_plain(void **state)
{
	(void)state;
	proto_reply in = {0}, out;
	in.id = 31337;
	in.ok = true;
	reply_round_trip(PROTO_R_PLAIN, &in, &out);
	assert_true(out.ok);
	assert_int_equal(out.region, 0);
}

static void test_reply_register(void **state)
{
	(void)state;
	proto_reply in = {0}, out;
	in.id = 2;
	in.ok = true;
	in.region = 17;
	reply_round_trip(PROTO_R_REGISTER, &in, &out);
	assert_int_equal(out.region, 17);
}

static void test_reply_job(void **state)
{
	(void)state;
	proto_reply in = {0}, out;
	in.id = 3;
	in.ok = true;
	in.queued_us = 123;
	in.gpu_us = 4567890123ull;
	in.batch_jobs = 8;
	reply_round_trip(PROTO_R_JOB, &in, &out);
	assert_int_equal(out.queued_us, 123);
	assert_int_equal(out.gpu_us, 4567890123ull);
	assert_int_equal(out.batch_jobs, 8);
	/* kernel_us is an optional key: absent unless the daemon measured it */
	assert_false(out.has_kernel_us);
	assert_int_equal(out.kernel_us, 0);
}

static void test_reply_job_kernel_us(void **state)
{
	(void)state;
	proto_reply in = {0}, out;
	in.id = 4;
	in.ok = true;
	in.queued_us = 5;
	in.gpu_us = 900;
	in.batch_jobs = 3;
	in.kernel_us = 4294967301ull; /* past 32 bits */
	in.has_kernel_us = true;
	reply_round_trip(PROTO_R_JOB, &in, &out);
	assert_true(out.has_kernel_us);
	assert_int_equal(out.kernel_us, 4294967301ull);
	assert_int_equal(out.gpu_us, 900);
	assert_int_equal(out.batch_jobs, 3);
	/* a measured 0 is still sent and still present */
	in.kernel_us = 0;
	reply_round_trip(PROTO_R_JOB, &in, &out);
	assert_true(out.has_kernel_us);
	assert_int_equal(out.kernel_us, 0);
	/* kernel_us set but not marked present is not sent */
	in.kernel_us = 77;
	in.has_kernel_us = false;
	reply_round_trip(PROTO_R_JOB, &in, &out);
	assert_false(out.has_kernel_us);
	assert_int_equal(out.kernel_us, 0);
	/* other replies never carry it */
	in.has_kernel_us = true;
	reply_round_trip(PROTO_R_PLAIN, &in, &out);
	assert_false(out.has_kernel_us);
}

/* A job reply's trace: t_recv_ns, the stages in order, t_reply_ns last as
 * a fixed-width uint64 the daemon overwrites in place at the send. */
static void test_reply_job_trace(void **state)
{
	(void)state;
	static proto_reply in, out; /* large */
	memset(&in, 0, sizeof(in));
	in.id = 9;
	in.ok = true;
	in.batch_jobs = 1;
	in.trace.present = true;
	in.trace.t_recv_ns = 1000;
	in.trace.t_reply_ns = 5; /* small: still 8 bytes wide */
	for (int i = PROTO_STAGE_DECODE; i <= PROTO_STAGE_ANSWER; i++) {
		proto_stage *st = &in.trace.st[in.trace.n++];
		snprintf(st->name, sizeof(st->name), "%s", proto_stage_name((proto_stage_id)i));
		st->ns = 10ull * (uint64_t)i + (i == PROTO_STAGE_GPU ? 1ull << 40 : 0);
	}
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_reply_encode(&sb, PROTO_R_JOB, &in), 0);
	/* the last 9 bytes: msgpack uint64 marker, then the value big endian */
	assert_int_equal((uint8_t)sb.data[sb.size - 9], 0xcf);
	proto_reply_put_time((uint8_t *)sb.data + sb.size, 0x0102030405060708ull);
	size_t len;
	const uint8_t *body = one_frame(&sb, &len);
	proto_err err;
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(proto_reply_decode(body, len, &out, &err), 0);
	assert_true(out.trace.present);
	assert_int_equal(out.trace.t_recv_ns, 1000);
	assert_int_equal(out.trace.t_reply_ns, 0x0102030405060708ull);
	assert_int_equal(out.trace.n, in.trace.n);
	for (unsigned i = 0; i < in.trace.n; i++) {
		assert_string_equal(out.trace.st[i].name, in.trace.st[i].name);
		assert_int_equal(out.trace.st[i].ns, in.trace.st[i].ns);
		assert_int_equal(proto_stage_parse(out.trace.st[i].name, strlen(out.trace.st[i].name)),
				 (int)(PROTO_STAGE_DECODE + i));
	}
	assert_int_equal(out.batch_jobs, 1);
	msgpack_sbuffer_destroy(&sb);
	/* without a trace none of its keys is sent */
	in.trace.present = false;
	reply_round_trip(PROTO_R_JOB, &in, &out);
	assert_false(out.trace.present);
	/* names: every stage has one, unknown ones parse to -1 */
	for (int i = 0; i < PROTO_STAGE_COUNT; i++)
		assert_int_equal(proto_stage_parse(proto_stage_name((proto_stage_id)i),
						   strlen(proto_stage_name((proto_stage_id)i))), i);
	assert_int_equal(proto_stage_parse("gpu_", 4), -1);
	assert_int_equal(proto_stage_parse("gp", 2), -1);
}

/* A streamed job's timeline (stream_us): name -> µs in order, past 32
 * bits too, packed before the trace so that t_reply_ns stays the frame's
 * last 9 bytes; absent without one, never on other replies. */
static void test_reply_job_stream(void **state)
{
	(void)state;
	static proto_reply in, out; /* large */
	memset(&in, 0, sizeof(in));
	in.id = 10;
	in.ok = true;
	in.batch_jobs = 1;
	static const char *const names[] = {"span_us", "upload_us", "compute_us", "tail_us"};
	for (unsigned i = 0; i < 4; i++) {
		snprintf(in.stream.f[i].name, sizeof(in.stream.f[i].name), "%s", names[i]);
		in.stream.f[i].us = 1000ull * i + (i == 2 ? 1ull << 33 : 0);
	}
	in.stream.n = 4;
	in.trace.present = true;
	in.trace.t_recv_ns = 7;
	in.trace.n = 1;
	snprintf(in.trace.st[0].name, sizeof(in.trace.st[0].name), "gpu");
	in.trace.st[0].ns = 99;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_reply_encode(&sb, PROTO_R_JOB, &in), 0);
	assert_int_equal((uint8_t)sb.data[sb.size - 9], 0xcf); /* t_reply_ns still last */
	proto_reply_put_time((uint8_t *)sb.data + sb.size, 42);
	size_t len;
	const uint8_t *body = one_frame(&sb, &len);
	proto_err err;
	memset(&out, 0xa5, sizeof(out));
	assert_int_equal(proto_reply_decode(body, len, &out, &err), 0);
	assert_int_equal(out.stream.n, 4);
	for (unsigned i = 0; i < 4; i++) {
		assert_string_equal(out.stream.f[i].name, names[i]);
		assert_int_equal(out.stream.f[i].us, in.stream.f[i].us);
	}
	assert_true(out.trace.present);
	assert_int_equal(out.trace.t_reply_ns, 42);
	msgpack_sbuffer_destroy(&sb);
	/* none: no key */
	in.stream.n = 0;
	reply_round_trip(PROTO_R_JOB, &in, &out);
	assert_int_equal(out.stream.n, 0);
	/* other replies never carry it */
	in.stream.n = 4;
	reply_round_trip(PROTO_R_PLAIN, &in, &out);
	assert_int_equal(out.stream.n, 0);
}

/* A trace missing one of its three keys is no trace; an over-long stage
 * name is skipped and the rest kept. */
static void test_reply_job_trace_partial(void **state)
{
	(void)state;
	static proto_reply out;
	for (int drop = 0; drop < 4; drop++) {
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 2 + (drop != 0) + (drop != 1) + (drop != 2));
		msgpack_pack_str(&pk, 2);
		msgpack_pack_str_body(&pk, "id", 2);
		msgpack_pack_uint64(&pk, 5);
		msgpack_pack_str(&pk, 2);
		msgpack_pack_str_body(&pk, "ok", 2);
		msgpack_pack_true(&pk);
		if (drop != 0) {
			msgpack_pack_str(&pk, 9);
			msgpack_pack_str_body(&pk, "t_recv_ns", 9);
			msgpack_pack_uint64(&pk, 7);
		}
		if (drop != 1) {
			msgpack_pack_str(&pk, 9);
			msgpack_pack_str_body(&pk, "stages_ns", 9);
			msgpack_pack_map(&pk, 2);
			msgpack_pack_str(&pk, 20);
			msgpack_pack_str_body(&pk, "a_name_far_too_long_", 20);
			msgpack_pack_uint64(&pk, 1);
			msgpack_pack_str(&pk, 3);
			msgpack_pack_str_body(&pk, "gpu", 3);
			msgpack_pack_uint64(&pk, 42);
		}
		if (drop != 2) {
			msgpack_pack_str(&pk, 10);
			msgpack_pack_str_body(&pk, "t_reply_ns", 10);
			msgpack_pack_uint64(&pk, 9);
		}
		proto_err err;
		assert_int_equal(proto_reply_decode((const uint8_t *)sb.data, sb.size, &out, &err), 0);
		assert_int_equal(out.trace.present, drop == 3);
		if (drop == 3) {
			assert_int_equal(out.trace.n, 1);
			assert_string_equal(out.trace.st[0].name, "gpu");
			assert_int_equal(out.trace.st[0].ns, 42);
		}
		msgpack_sbuffer_destroy(&sb);
	}
}

/* stats' stage windows and the completion wait's counters round trip. */
static void test_reply_stats_stages(void **state)
{
	(void)state;
	static proto_reply in, out;
	memset(&in, 0, sizeof(in));
	in.id = 11;
	in.ok = true;
	in.stats.spin_budget_us = 37;
	in.stats.spin_us = 1ull << 35;
	in.stats.spin_hits = 12;
	in.stats.spin_expected = 7;
	in.stats.blocking_waits = 13;
	in.stats.n_stages = 2;
	snprintf(in.stats.stages[0].name, 16, "queue");
	in.stats.stages[0].p50_us = 1.5;
	in.stats.stages[0].p99_us = 7.25;
	in.stats.stages[0].count = 1024;
	snprintf(in.stats.stages[1].name, 16, "write");
	in.stats.stages[1].p50_us = 0.1;
	in.stats.stages[1].p99_us = 0.1;
	in.stats.stages[1].count = 1;
	reply_round_trip(PROTO_R_STATS, &in, &out);
	assert_int_equal(out.stats.spin_budget_us, 37);
	assert_int_equal(out.stats.spin_us, 1ull << 35);
	assert_int_equal(out.stats.spin_hits, 12);
	assert_int_equal(out.stats.spin_expected, 7);
	assert_int_equal(out.stats.blocking_waits, 13);
	assert_int_equal(out.stats.n_stages, 2);
	assert_string_equal(out.stats.stages[0].name, "queue");
	assert_true(out.stats.stages[0].p50_us == 1.5 && out.stats.stages[0].p99_us == 7.25);
	assert_int_equal(out.stats.stages[0].count, 1024);
	assert_string_equal(out.stats.stages[1].name, "write");
	assert_int_equal(out.stats.stages[1].count, 1);
	/* no windows yet: no `stages` key */
	in.stats.n_stages = 0;
	reply_round_trip(PROTO_R_STATS, &in, &out);
	assert_int_equal(out.stats.n_stages, 0);
}

static void test_reply_hello(void **state)
{
	(void)state;
	proto_reply *in = calloc(1, sizeof(*in)), *out = malloc(sizeof(*out));
	assert_non_null(in);
	assert_non_null(out);
	in->id = 1;
	in->ok = true;
	proto_hello *h = &in->hello;
	h->version = 1;
	strcpy(h->server, "vkgradd 0.1.0");
	strcpy(h->device.name, "llvmpipe (LLVM 15.0.6, 256 bits)");
	h->device.vendor_id = 0x10005;
	h->device.device_id = 0xffffffffu;
	strcpy(h->device.driver, "Mesa 22.3.6");
	strcpy(h->device.api, "1.3.230");
	strcpy(h->device.type, "cpu");
	h->limits = (proto_limits){
		.max_frame = 65536,
		.max_regions = 64,
		.max_region_bytes = 1ull << 34,
		.max_inflight = 256,
		.max_dim = 1u << 20,
		.max_tensor_bytes = (1ull << 32) - 4,
		.max_total_region_bytes = 64ull << 30,
		.max_region_bytes_per_uid = 5ull << 30,
		.max_connections = 2048,
		.max_connections_per_uid = 256,
		.max_fds_per_message = 8,
		.max_fds_held = 16,
		.max_outbound_bytes = 4u << 20,
	};
	h->n_kernels = 3;
	for (unsigned i = 0; i < 3; i++) {
		snprintf(h->kernels[i].name, sizeof(h->kernels[i].name), "kernel_%u", i);
		strcpy(h->kernels[i].domain, "linear_backward");
		strcpy(h->kernels[i].variant, i == 2 ? "subgroup" : "generic");
		strcpy(h->kernels[i].dtype, i == 1 ? "f16" : "f32");
		strcpy(h->kernels[i].status, "experimental");
	}
	reply_round_trip(PROTO_R_HELLO, in, out);
	const proto_hello *g = &out->hello;
	assert_int_equal(g->version, 1);
	assert_string_equal(g->server, "vkgradd 0.1.0");
	assert_string_equal(g->device.name, h->device.name);
	assert_int_equal(g->device.vendor_id, 0x10005);
	assert_int_equal(g->device.device_id, 0xffffffffu);
	assert_string_equal(g->device.driver, "Mesa 22.3.6");
	assert_string_equal(g->device.api, "1.3.230");
	assert_string_equal(g->device.type, "cpu");
	assert_int_equal(g->limits.max_frame, 65536);
	assert_int_equal(g->limits.max_regions, 64);
	assert_int_equal(g->limits.max_region_bytes, 1ull << 34);
	assert_int_equal(g->limits.max_inflight, 256);
	assert_int_equal(g->limits.max_dim, 1u << 20);
	assert_int_equal(g->limits.max_tensor_bytes, (1ull << 32) - 4);
	assert_int_equal(g->limits.max_total_region_bytes, 64ull << 30);
	assert_int_equal(g->limits.max_region_bytes_per_uid, 5ull << 30);
	assert_int_equal(g->limits.max_connections, 2048);
	assert_int_equal(g->limits.max_connections_per_uid, 256);
	assert_int_equal(g->limits.max_fds_per_message, 8);
	assert_int_equal(g->limits.max_fds_held, 16);
	assert_int_equal(g->limits.max_outbound_bytes, 4u << 20);
	assert_int_equal(g->n_kernels, 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_string_equal(g->kernels[i].name, h->kernels[i].name);
		assert_string_equal(g->kernels[i].domain, "linear_backward");
		assert_string_equal(g->kernels[i].variant, h->kernels[i].variant);
		assert_string_equal(g->kernels[i].dtype, h->kernels[i].dtype);
		assert_string_equal(g->kernels[i].status, "experimental");
	}
	/* a hello reply with no kernels */
	in->hello.n_kernels = 0;
	reply_round_trip(PROTO_R_HELLO, in, out);
	assert_int_equal(out->hello.n_kernels, 0);
	assert_int_equal(out->hello.limits.max_regions, 64);
	free(in);
	free(out);
}

static void test_reply_stats(void **state)
{
	(void)state;
	proto_reply in = {0}, out;
	in.id = 6;
	in.ok = true;
	in.stats = (proto_stats){
		.uptime_s = 12.5,
		.clients = 3,
		.regions = 7,
		.region_bytes = 1ull << 33,
		.jobs_done = 1000,
		.jobs_failed = 2,
		.batches = 250,
		.jobs_per_batch_avg = 4.0,
		.pipelines = 2,
		.pipeline_cache_hits = 998,
		.jobs_queued = 5,
		.jobs_running = 1,
		.host_imports = 6,
		.staged_regions = 1,
		.validation_errors = 11,
		.devlocal_min_bytes = 4u << 20,
		.devlocal_min_bytes_16bit = 17,
		.devlocal_jobs = 12,
		.devlocal_copy_bytes = 1ull << 40,
		.splitk_jobs = 13,
		.dispatches = 14,
		.scratch_bytes = 15,
		.scratch_failures = 16,
	};
	reply_round_trip(PROTO_R_STATS, &in, &out);
	assert_true(out.stats.uptime_s == 12.5);
	assert_int_equal(out.stats.clients, 3);
	assert_int_equal(out.stats.regions, 7);
	assert_int_equal(out.stats.region_bytes, 1ull << 33);
	assert_int_equal(out.stats.jobs_done, 1000);
	assert_int_equal(out.stats.jobs_failed, 2);
	assert_int_equal(out.stats.devlocal_min_bytes, 4u << 20);
	assert_int_equal(out.stats.devlocal_min_bytes_16bit, 17);
	assert_int_equal(out.stats.devlocal_jobs, 12);
	assert_int_equal(out.stats.devlocal_copy_bytes, 1ull << 40);
	assert_int_equal(out.stats.splitk_jobs, 13);
	assert_int_equal(out.stats.dispatches, 14);
	assert_int_equal(out.stats.scratch_bytes, 15);
	assert_int_equal(out.stats.scratch_failures, 16);
	assert_int_equal(out.stats.batches, 250);
	assert_true(out.stats.jobs_per_batch_avg == 4.0);
	assert_int_equal(out.stats.pipelines, 2);
	assert_int_equal(out.stats.pipeline_cache_hits, 998);
	assert_int_equal(out.stats.jobs_queued, 5);
	assert_int_equal(out.stats.jobs_running, 1);
	assert_int_equal(out.stats.host_imports, 6);
	assert_int_equal(out.stats.staged_regions, 1);
	assert_int_equal(out.stats.validation_errors, 11);
	assert_int_equal(out.stats.n_hist, 0); /* none sent: none decoded */
}

static void test_reply_stats_histograms(void **state)
{
	(void)state;
	static proto_reply in, out; /* large */
	memset(&in, 0, sizeof(in));
	in.id = 7;
	in.ok = true;
	in.stats.n_hist = 3;
	const char *names[3] = {"job_latency", "job_queued", "batch_gpu"};
	for (unsigned i = 0; i < 3; i++) {
		proto_histogram *h = &in.stats.hist[i];
		snprintf(h->name, sizeof(h->name), "%s", names[i]);
		h->n_le = 3 + i;
		for (unsigned b = 0; b < h->n_le; b++)
			h->le_us[b] = 10 * (b + 1) * (i + 1);
		for (unsigned b = 0; b <= h->n_le; b++) {
			h->counts[b] = b * 7 + i;
			h->count += h->counts[b];
		}
		h->sum_us = 123456789012ull + i;
	}
	reply_round_trip(PROTO_R_STATS, &in, &out);
	assert_int_equal(out.stats.n_hist, 3);
	for (unsigned i = 0; i < 3; i++) {
		const proto_histogram *a = &in.stats.hist[i], *b = &out.stats.hist[i];
		assert_string_equal(b->name, a->name);
		assert_int_equal(b->n_le, a->n_le);
		assert_memory_equal(b->le_us, a->le_us, a->n_le * sizeof(uint64_t));
		assert_memory_equal(b->counts, a->counts, (a->n_le + 1) * sizeof(uint64_t));
		assert_int_equal(b->sum_us, a->sum_us);
		assert_int_equal(b->count, a->count);
	}
}

/* {name: {le_us: [le...], counts: [counts...], sum_us: 1, count: 2}} */
static void pack_hist(msgpack_packer *pk, const char *name, const uint64_t *le, unsigned nle,
		      const uint64_t *counts, unsigned ncounts)
{
	msgpack_pack_str(pk, strlen(name));
	msgpack_pack_str_body(pk, name, strlen(name));
	msgpack_pack_map(pk, 4);
	msgpack_pack_str(pk, 5);
	msgpack_pack_str_body(pk, "le_us", 5);
	msgpack_pack_array(pk, nle);
	for (unsigned i = 0; i < nle; i++)
		msgpack_pack_uint64(pk, le[i]);
	msgpack_pack_str(pk, 6);
	msgpack_pack_str_body(pk, "counts", 6);
	msgpack_pack_array(pk, ncounts);
	for (unsigned i = 0; i < ncounts; i++)
		msgpack_pack_uint64(pk, counts[i]);
	msgpack_pack_str(pk, 6);
	msgpack_pack_str_body(pk, "sum_us", 6);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_str(pk, 5);
	msgpack_pack_str_body(pk, "count", 5);
	msgpack_pack_uint64(pk, 2);
}

/* A histogram that does not add up is dropped whole; more than
 * PROTO_MAX_HIST are cut; the reply still decodes. */
static void test_reply_stats_histograms_malformed(void **state)
{
	(void)state;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "id", 2);
	msgpack_pack_uint64(&pk, 9);
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "ok", 2);
	msgpack_pack_true(&pk);
	msgpack_pack_str(&pk, 10);
	msgpack_pack_str_body(&pk, "histograms", 10);
	msgpack_pack_map(&pk, 10);
	const uint64_t le[3] = {1, 2, 3}, falling[3] = {1, 3, 2}, c4[4] = {1, 1, 1, 1};
	static uint64_t many[PROTO_HIST_MAX_LE + 2];
	for (unsigned i = 0; i < PROTO_HIST_MAX_LE + 2; i++)
		many[i] = i + 1;
	pack_hist(&pk, "short_counts", le, 3, c4, 3);  /* dropped */
	pack_hist(&pk, "falling", falling, 3, c4, 4);   /* dropped */
	pack_hist(&pk, "too_many", many, PROTO_HIST_MAX_LE + 1, many, PROTO_HIST_MAX_LE + 2);
	msgpack_pack_str(&pk, 6);                       /* not a map: dropped */
	msgpack_pack_str_body(&pk, "scalar", 6);
	msgpack_pack_uint64(&pk, 5);
	for (int i = 0; i < 6; i++) {                   /* 6 good ones: 4 kept */
		char name[8];
		snprintf(name, sizeof(name), "ok%d", i);
		pack_hist(&pk, name, le, 3, c4, 4);
	}
	static proto_reply out;
	proto_err err = {0};
	assert_int_equal(proto_reply_decode((const uint8_t *)sb.data, sb.size, &out, &err), 0);
	assert_int_equal(out.stats.n_hist, PROTO_MAX_HIST);
	for (unsigned i = 0; i < PROTO_MAX_HIST; i++) {
		char name[8];
		snprintf(name, sizeof(name), "ok%u", i);
		assert_string_equal(out.stats.hist[i].name, name);
		assert_int_equal(out.stats.hist[i].n_le, 3);
		assert_int_equal(out.stats.hist[i].count, 2);
	}
	msgpack_sbuffer_destroy(&sb);
}

static void test_reply_error(void **state)
{
	(void)state;
	for (int c = PROTO_BAD_FRAME; c < PROTO_CODE_COUNT; c++) {
		proto_reply in = {0}, out;
		in.id = 100 + (uint64_t)c;
		in.ok = false;
		in.err.code = (proto_code)c;
		snprintf(in.err.message, sizeof(in.err.message), "key 'x': message for code %d", c);
		reply_round_trip(PROTO_R_ERROR, &in, &out);
		assert_false(out.ok);
		assert_int_equal(out.err.code, c);
		assert_string_equal(out.err.message, in.err.message);
	}
}

/* A reply with unknown keys (a newer daemon) still decodes; one without
 * id or ok does not; !ok without an error code reads as internal. */
static void test_reply_decode_edges(void **state)
{
	(void)state;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	proto_reply r;
	proto_err err;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	msgpack_pack_str_with_body(&pk, "future", 6);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint64(&pk, 8);
	msgpack_pack_str_with_body(&pk, "ok", 2);
	msgpack_pack_true(&pk);
	msgpack_pack_str_with_body(&pk, "region", 6);
	msgpack_pack_uint64(&pk, 3);
	assert_int_equal(proto_reply_decode((uint8_t *)sb.data, sb.size, &r, &err), 0);
	assert_int_equal(r.id, 8);
	assert_true(r.ok);
	assert_int_equal(r.region, 3);
	msgpack_sbuffer_destroy(&sb);

	msgpack_sbuffer_init(&sb);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint64(&pk, 8);
	assert_int_equal(proto_reply_decode((uint8_t *)sb.data, sb.size, &r, &err), -EBADMSG);
	assert_int_equal(err.code, PROTO_BAD_FRAME);
	msgpack_sbuffer_destroy(&sb);

	msgpack_sbuffer_init(&sb);
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str_with_body(&pk, "id", 2);
	msgpack_pack_uint64(&pk, 8);
	msgpack_pack_str_with_body(&pk, "ok", 2);
	msgpack_pack_false(&pk);
	assert_int_equal(proto_reply_decode((uint8_t *)sb.data, sb.size, &r, &err), 0);
	assert_false(r.ok);
	assert_int_equal(r.err.code, PROTO_INTERNAL);
	msgpack_sbuffer_destroy(&sb);

	/* not a map; not msgpack */
	const uint8_t arr[] = {0x92, 0x01, 0x02};
	assert_int_equal(proto_reply_decode(arr, sizeof(arr), &r, &err), -EBADMSG);
	const uint8_t hostile[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
	assert_int_equal(proto_reply_decode(hostile, sizeof(hostile), &r, &err), -EBADMSG);
	assert_int_equal(err.code, PROTO_BAD_FRAME);
}

/* Regression: a float where the client expects an unsigned integer was
 * converted with a plain cast, undefined behaviour for values >= 2^64 (UBSan
 * float-cast-overflow on gpu_us = 1e300). Now clamped to [0, UINT64_MAX]. */
static void test_reply_float_counters_clamped(void **state)
{
	(void)state;
	static const struct {
		double v;
		uint64_t want;
	} cases[] = {
		{1e300, UINT64_MAX},
		{18446744073709551616.0, UINT64_MAX},
		{1.0 / 0.0, UINT64_MAX},
		{-1.0 / 0.0, 0},
		{-5.0, 0},
		{0.0 / 0.0, 0},
		{42.9, 42},
		{9007199254740992.0, 9007199254740992ull},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 4);
		msgpack_pack_str_with_body(&pk, "id", 2);
		msgpack_pack_uint64(&pk, 1);
		msgpack_pack_str_with_body(&pk, "ok", 2);
		msgpack_pack_true(&pk);
		msgpack_pack_str_with_body(&pk, "gpu_us", 6);
		msgpack_pack_double(&pk, cases[i].v);
		msgpack_pack_str_with_body(&pk, "queued_us", 9);
		msgpack_pack_float(&pk, (float)cases[i].v);
		proto_reply r;
		proto_err err;
		assert_int_equal(proto_reply_decode((uint8_t *)sb.data, sb.size, &r, &err), 0);
		assert_int_equal(r.gpu_us, cases[i].want);
		if (cases[i].want == UINT64_MAX || cases[i].want == 0)
			assert_int_equal(r.queued_us, cases[i].want);
		msgpack_sbuffer_destroy(&sb);
	}
}

/* ---- request validation ------------------------------------------------------- */

typedef void (*pack_fn)(msgpack_packer *pk);

typedef struct field {
	const char *key;
	pack_fn val;
} field;

typedef struct fields {
	int n;
	field f[24];
} fields;

static void pk_s(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void v_op_lb(msgpack_packer *pk) { pk_s(pk, "linear_backward"); }
static void v_op_hello(msgpack_packer *pk) { pk_s(pk, "hello"); }
static void v_op_register(msgpack_packer *pk) { pk_s(pk, "register"); }
static void v_op_unregister(msgpack_packer *pk) { pk_s(pk, "unregister"); }
static void v_op_ping(msgpack_packer *pk) { pk_s(pk, "ping"); }
static void v_op_frobnicate(msgpack_packer *pk) { pk_s(pk, "frobnicate"); }
static void v_id(msgpack_packer *pk) { msgpack_pack_uint64(pk, 7); }
static void v_f32(msgpack_packer *pk) { pk_s(pk, "f32"); }
static void v_f64(msgpack_packer *pk) { pk_s(pk, "f64"); }
static void v_long_str(msgpack_packer *pk) { pk_s(pk, "float32_but_much_longer_than_any_dtype"); }
static void v_2(msgpack_packer *pk) { msgpack_pack_uint64(pk, 2); }
static void v_3(msgpack_packer *pk) { msgpack_pack_uint64(pk, 3); }
static void v_4(msgpack_packer *pk) { msgpack_pack_uint64(pk, 4); }
static void v_1(msgpack_packer *pk) { msgpack_pack_uint64(pk, 1); }
static void v_0(msgpack_packer *pk) { msgpack_pack_uint64(pk, 0); }
static void v_neg(msgpack_packer *pk) { msgpack_pack_int64(pk, -1); }
static void v_float(msgpack_packer *pk) { msgpack_pack_double(pk, 4096.0); }
static void v_true(msgpack_packer *pk) { msgpack_pack_true(pk); }
static void v_false(msgpack_packer *pk) { msgpack_pack_false(pk); }
static void v_nil(msgpack_packer *pk) { msgpack_pack_nil(pk); }
static void v_str(msgpack_packer *pk) { pk_s(pk, "seven"); }
static void v_empty_map(msgpack_packer *pk) { msgpack_pack_map(pk, 0); }
static void v_size(msgpack_packer *pk) { msgpack_pack_uint64(pk, 1 << 20); }

static void tensor(msgpack_packer *pk, uint64_t region, uint64_t off)
{
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint64(pk, region);
	msgpack_pack_uint64(pk, off);
}
static void v_x(msgpack_packer *pk) { tensor(pk, 1, 0); }
static void v_dy(msgpack_packer *pk) { tensor(pk, 1, 64); }
static void v_w(msgpack_packer *pk) { tensor(pk, 1, 128); }
static void v_dw(msgpack_packer *pk) { tensor(pk, 2, 0); }
static void v_db(msgpack_packer *pk) { tensor(pk, 2, 256); }
static void v_dx(msgpack_packer *pk) { tensor(pk, 2, 512); }
static void v_arr3(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 3);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_uint64(pk, 0);
	msgpack_pack_uint64(pk, 0);
}
static void v_arr1(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 1);
	msgpack_pack_uint64(pk, 1);
}
static void v_neg_off(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_int64(pk, -4);
}
static void v_nil_off(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 2);
	msgpack_pack_uint64(pk, 1);
	msgpack_pack_nil(pk);
}
static void v_float_region(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 2);
	msgpack_pack_double(pk, 1.0);
	msgpack_pack_uint64(pk, 0);
}
static void v_str_region(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 2);
	pk_s(pk, "r1");
	msgpack_pack_uint64(pk, 0);
}
static void v_tensor_map(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	pk_s(pk, "region");
	msgpack_pack_uint64(pk, 1);
	pk_s(pk, "offset");
	msgpack_pack_uint64(pk, 0);
}
static void v_deep(msgpack_packer *pk)
{
	for (int i = 0; i < 3; i++)
		msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 1);
	pk_s(pk, "k");
	msgpack_pack_bin_with_body(pk, "\xc1\xdd", 2);
}

static void f_add(fields *fs, const char *key, pack_fn val)
{
	assert_true(fs->n < 24);
	fs->f[fs->n++] = (field){key, val};
}

/* Replace key's value, or append the key when absent. */
static void f_set(fields *fs, const char *key, pack_fn val)
{
	for (int i = 0; i < fs->n; i++) {
		if (strcmp(fs->f[i].key, key) == 0) {
			fs->f[i].val = val;
			return;
		}
	}
	f_add(fs, key, val);
}

static void f_del(fields *fs, const char *key)
{
	for (int i = 0; i < fs->n; i++) {
		if (strcmp(fs->f[i].key, key) == 0) {
			memmove(&fs->f[i], &fs->f[i + 1], (size_t)(fs->n - i - 1) * sizeof(field));
			fs->n--;
			return;
		}
	}
	fail_msg("no key '%s' to delete", key);
}

/* A valid linear_backward request with id 7 and every tensor. */
static fields lb_base(void)
{
	fields fs = {0};
	f_add(&fs, "op", v_op_lb);
	f_add(&fs, "id", v_id);
	f_add(&fs, "dtype", v_f32);
	f_add(&fs, "batch", v_2);
	f_add(&fs, "in", v_3);
	f_add(&fs, "out", v_4);
	f_add(&fs, "x", v_x);
	f_add(&fs, "dy", v_dy);
	f_add(&fs, "w", v_w);
	f_add(&fs, "dw", v_dw);
	f_add(&fs, "db", v_db);
	f_add(&fs, "dx", v_dx);
	f_add(&fs, "accumulate", v_false);
	return fs;
}

static fields simple(pack_fn op)
{
	fields fs = {0};
	f_add(&fs, "op", op);
	f_add(&fs, "id", v_id);
	return fs;
}

static void pack_fields(msgpack_sbuffer *sb, const fields *fs)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, (size_t)fs->n);
	for (int i = 0; i < fs->n; i++) {
		pk_s(&pk, fs->f[i].key);
		fs->f[i].val(&pk);
	}
}

/* Frames decode_buf saw go the general way (proto_decoder.general). */
static uint64_t decoded_general;

/* Decode sb as the daemon does (the direct way where the frame allows),
 * and again the general way only (proto_mpcheck, msgpack_unpack): every
 * outcome — code, id, request, message — must be the same. */
static int decode_buf(const msgpack_sbuffer *sb, proto_request *req, uint64_t *id, proto_err *err)
{
	*id = 0xdeadbeef; /* the decoder must set it in every outcome */
	memset(err, 0, sizeof(*err));
	proto_decoder d;
	proto_decoder_init(&d);
	int rc = proto_request_decode_with(&d, (const uint8_t *)sb->data, sb->size, req, id, err);
	decoded_general += d.general;
	static proto_request greq;
	proto_err gerr;
	uint64_t gid = 0xdeadbeef;
	memset(&gerr, 0, sizeof(gerr));
	d.general_only = true;
	int grc = proto_request_decode_with(&d, (const uint8_t *)sb->data, sb->size, &greq, &gid, &gerr);
	proto_decoder_free(&d);
	assert_int_equal(rc, grc);
	assert_int_equal(*id, gid);
	assert_memory_equal(req, &greq, sizeof(greq));
	if (rc) {
		assert_int_equal(err->code, gerr.code);
		assert_string_equal(err->message, gerr.message);
	}
	return rc;
}

static int decode_fields(const fields *fs, proto_request *req, uint64_t *id, proto_err *err)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	pack_fields(&sb, fs);
	int rc = decode_buf(&sb, req, id, err);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* Decoding fs fails with code, the given id, and a message containing want. */
#define expect_fail(fs, code, want_id, want) expect_fail_at(fs, code, want_id, want, __LINE__)

static void expect_fail_at(const fields *fs, proto_code code, uint64_t want_id, const char *want,
			   int line)
{
	proto_request req;
	uint64_t id;
	proto_err err;
	int rc = decode_fields(fs, &req, &id, &err);
	if (rc != -(int)code || err.code != code)
		fail_msg("line %d: rc %d code %s (%s), want %s", line, rc, proto_code_name(err.code),
			 err.message, proto_code_name(code));
	if (id != want_id)
		fail_msg("line %d: id %llu, want %llu", line, (unsigned long long)id,
			 (unsigned long long)want_id);
	if (want && !strstr(err.message, want))
		fail_msg("line %d: message '%s' does not name %s", line, err.message, want);
}

static void expect_ok(const fields *fs, proto_request *req)
{
	uint64_t id;
	proto_err err;
	int rc = decode_fields(fs, req, &id, &err);
	if (rc != 0)
		fail_msg("rejected: %s: %s", proto_code_name(err.code), err.message);
	assert_int_equal(id, req->id);
}

static void test_valid_base_request(void **state)
{
	(void)state;
	fields fs = lb_base();
	proto_request req;
	expect_ok(&fs, &req);
	assert_int_equal(req.op, PROTO_OP_LINEAR_BACKWARD);
	assert_int_equal(req.id, 7);
	assert_int_equal(req.batch, 2);
	assert_int_equal(req.in, 3);
	assert_int_equal(req.out, 4);
	assert_int_equal(req.t[PROTO_T_DY].offset, 64);
	assert_int_equal(req.t[PROTO_T_DX].region, 2);
	assert_int_equal(req.t[PROTO_T_DX].offset, 512);
	assert_false(req.accumulate);
	/* keys in any order */
	fields rev = {0};
	for (int i = fs.n - 1; i >= 0; i--)
		f_add(&rev, fs.f[i].key, fs.f[i].val);
	expect_ok(&rev, &req);
	assert_int_equal(req.t[PROTO_T_W].offset, 128);
}

static void test_body_not_a_map(void **state)
{
	(void)state;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	proto_request req;
	uint64_t id;
	proto_err err;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 2);
	pk_s(&pk, "ping");
	msgpack_pack_uint64(&pk, 7);
	assert_int_equal(decode_buf(&sb, &req, &id, &err), -(int)PROTO_BAD_FRAME);
	assert_int_equal(err.code, PROTO_BAD_FRAME);
	assert_int_equal(id, 0);
	assert_non_null(strstr(err.message, "map"));
	msgpack_sbuffer_destroy(&sb);

	msgpack_sbuffer_init(&sb);
	msgpack_pack_uint64(&pk, 7);
	assert_int_equal(decode_buf(&sb, &req, &id, &err), -(int)PROTO_BAD_FRAME);
	assert_int_equal(id, 0);
	msgpack_sbuffer_destroy(&sb);

	/* not msgpack at all, and hostile headers */
	const uint8_t bad[][5] = {
		{0xc1, 0, 0, 0, 0},
		{0xdd, 0xff, 0xff, 0xff, 0xff},
		{0xdf, 0xff, 0xff, 0xff, 0xff},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		id = 5;
		assert_int_equal(proto_request_decode(bad[i], 5, &req, &id, &err),
				 -(int)PROTO_BAD_FRAME);
		assert_int_equal(id, 0);
	}
	/* a valid request followed by a trailing byte */
	fields fs = simple(v_op_ping);
	msgpack_sbuffer_init(&sb);
	pack_fields(&sb, &fs);
	msgpack_sbuffer_write(&sb, "\x00", 1);
	assert_int_equal(decode_buf(&sb, &req, &id, &err), -(int)PROTO_BAD_FRAME);
	assert_int_equal(id, 0);
	msgpack_sbuffer_destroy(&sb);
	/* too deep */
	fs = simple(v_op_ping);
	f_add(&fs, "extra", v_deep);
	proto_request ok;
	expect_ok(&fs, &ok); /* depth 5: fine */
	msgpack_sbuffer_init(&sb);
	msgpack_pack_map(&pk, 3);
	pk_s(&pk, "op");
	pk_s(&pk, "ping");
	pk_s(&pk, "id");
	msgpack_pack_uint64(&pk, 7);
	pk_s(&pk, "extra");
	for (int i = 0; i < PROTO_MAX_DEPTH; i++)
		msgpack_pack_array(&pk, 1);
	msgpack_pack_nil(&pk);
	assert_int_equal(decode_buf(&sb, &req, &id, &err), -(int)PROTO_BAD_FRAME);
	assert_int_equal(id, 0);
	msgpack_sbuffer_destroy(&sb);
}

static void test_op_and_id_validation(void **state)
{
	(void)state;
	fields fs;

	fs = simple(v_op_ping);
	f_del(&fs, "op");
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'op'");

	fs = simple(v_op_ping);
	f_set(&fs, "op", v_3);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'op'");

	fs = simple(v_op_ping);
	f_set(&fs, "op", v_nil);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'op'");

	fs = simple(v_op_ping);
	f_del(&fs, "id");
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'id'");

	fs = simple(v_op_ping);
	f_set(&fs, "id", v_neg);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'id'");

	fs = simple(v_op_ping);
	f_set(&fs, "id", v_float);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'id'");

	fs = simple(v_op_ping);
	f_set(&fs, "id", v_str);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'id'");

	fs = simple(v_op_ping);
	f_set(&fs, "id", v_true);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'id'");

	/* the whole linear_backward with a bad id is still a bad frame */
	fs = lb_base();
	f_set(&fs, "id", v_neg);
	expect_fail(&fs, PROTO_BAD_FRAME, 0, "'id'");

	/* the empty map */
	fs = (fields){0};
	expect_fail(&fs, PROTO_BAD_FRAME, 0, NULL);
}

static void test_unknown_op(void **state)
{
	(void)state;
	fields fs = simple(v_op_frobnicate);
	expect_fail(&fs, PROTO_UNKNOWN_OP, 7, "frobnicate");
	/* a prefix of a real op name is not that op */
	fields p = simple(v_op_ping);
	f_set(&p, "op", v_long_str);
	expect_fail(&p, PROTO_UNKNOWN_OP, 7, NULL);
}

static void test_hello_validation(void **state)
{
	(void)state;
	proto_request req;
	fields fs = simple(v_op_hello);
	f_add(&fs, "version", v_1);
	expect_ok(&fs, &req);
	assert_int_equal(req.version, 1);

	f_set(&fs, "version", v_2);
	expect_fail(&fs, PROTO_UNSUPPORTED, 7, "version");

	f_set(&fs, "version", v_0);
	expect_fail(&fs, PROTO_UNSUPPORTED, 7, "version");

	f_set(&fs, "version", v_str);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'version'");

	f_del(&fs, "version");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'version'");

	fs = simple(v_op_hello);
	f_add(&fs, "version", v_1);
	f_add(&fs, "client", v_3);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'client'");
	f_set(&fs, "client", v_long_str);
	expect_ok(&fs, &req); /* 38 bytes fits the 64-byte field */
	assert_string_equal(req.client, "float32_but_much_longer_than_any_dtype");
}

static void v_client_too_long(msgpack_packer *pk)
{
	char s[65];
	memset(s, 'c', 64);
	s[64] = 0;
	pk_s(pk, s);
}

static void test_hello_client_too_long(void **state)
{
	(void)state;
	fields fs = simple(v_op_hello);
	f_add(&fs, "version", v_1);
	f_add(&fs, "client", v_client_too_long);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'client'");
}

static void test_register_validation(void **state)
{
	(void)state;
	proto_request req;
	fields fs = simple(v_op_register);
	f_add(&fs, "size", v_size);
	expect_ok(&fs, &req);
	assert_int_equal(req.size, 1 << 20);

	f_set(&fs, "size", v_0);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'size'");

	f_set(&fs, "size", v_neg);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'size'");

	f_set(&fs, "size", v_float);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "must be an unsigned integer");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'size'");

	f_set(&fs, "size", v_str);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'size'");

	f_set(&fs, "size", v_nil);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'size'");

	f_del(&fs, "size");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'size'");
}

static void test_unregister_validation(void **state)
{
	(void)state;
	proto_request req;
	fields fs = simple(v_op_unregister);
	f_add(&fs, "region", v_4);
	expect_ok(&fs, &req);
	assert_int_equal(req.region, 4);
	f_set(&fs, "region", v_neg);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'region'");
	f_del(&fs, "region");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'region'");
}

static void test_lb_missing_keys(void **state)
{
	(void)state;
	static const char *const required[] = {"dtype", "batch", "in", "out", "x", "dy"};
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		fields fs = lb_base();
		f_del(&fs, required[i]);
		char want[16];
		snprintf(want, sizeof(want), "'%s'", required[i]);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
	}
	/* nil means absent, so a required tensor set to nil is missing */
	fields fs = lb_base();
	f_set(&fs, "x", v_nil);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'x'");
}

static void test_lb_dtype(void **state)
{
	(void)state;
	fields fs = lb_base();
	/* any string names a dtype: one not served is `unsupported`
	 * (PROTOCOL.md), echoed, naming the served ones */
	f_set(&fs, "dtype", v_f64);
	expect_fail(&fs, PROTO_UNSUPPORTED, 7, "dtype 'f64' is not served here");
	expect_fail(&fs, PROTO_UNSUPPORTED, 7, "f32, f16, bf16");

	f_set(&fs, "dtype", v_long_str);
	expect_fail(&fs, PROTO_UNSUPPORTED, 7, "dtype 'float32_but_much...'");

	/* a missing key is bad_request before an unknown dtype */
	f_set(&fs, "dtype", v_f64);
	f_del(&fs, "batch");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'batch'");

	/* not a string: malformed */
	fs = lb_base();
	f_set(&fs, "dtype", v_4);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'dtype'");

	f_set(&fs, "dtype", v_nil);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'dtype'");
}

static void v_variant_fast(msgpack_packer *pk) { pk_s(pk, "fast!"); }
static void v_variant_tiled(msgpack_packer *pk) { pk_s(pk, "tiled"); }
static void v_variant_coopmat(msgpack_packer *pk) { pk_s(pk, "coopmat"); }
static void v_variant_raw(msgpack_packer *pk) { msgpack_pack_str_with_body(pk, "t\xffiled\n", 7); }
static void v_f16(msgpack_packer *pk) { pk_s(pk, "f16"); }
static void v_bf16(msgpack_packer *pk) { pk_s(pk, "bf16"); }

/* An unknown variant names every variant of the request's dtype (the
 * daemon adds which its device cannot run); one name per variant. */
static void test_lb_variant(void **state)
{
	(void)state;
	fields fs = lb_base();
	proto_request req;
	uint64_t id;
	proto_err err;
	f_set(&fs, "variant", v_variant_fast);
	assert_int_equal(decode_fields(&fs, &req, &id, &err), -(int)PROTO_BAD_REQUEST);
	assert_string_equal(err.message, "linear_backward: key 'variant' = 'fast!' is not one of "
			    "auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat_khr_f32x3, coopmat_khr_f32_splitk "
			    "for dtype f32 (coopmat is f16 only; "
			    "coopmat_khr, coopmat_khr_splitk, coopmat_nv2 are f16 and bf16 only)");
	assert_true(req.variant_unknown);
	assert_int_equal(req.dtype, PROTO_F32);
	f_set(&fs, "dtype", v_f16);
	assert_int_equal(decode_fields(&fs, &req, &id, &err), -(int)PROTO_BAD_REQUEST);
	assert_string_equal(err.message, "linear_backward: key 'variant' = 'fast!' is not one of "
			    "auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat, coopmat_khr, coopmat_khr_splitk, "
			    "coopmat_nv2 for dtype f16 (coopmat_khr_f32x3, coopmat_khr_f32_splitk are f32 only)");
	f_set(&fs, "dtype", v_bf16);
	assert_int_equal(decode_fields(&fs, &req, &id, &err), -(int)PROTO_BAD_REQUEST);
	assert_string_equal(err.message, "linear_backward: key 'variant' = 'fast!' is not one of "
			    "auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat_khr, coopmat_khr_splitk, "
			    "coopmat_nv2 for dtype bf16 (coopmat is f16 only; coopmat_khr_f32x3, coopmat_khr_f32_splitk are "
			    "f32 only)");
	assert_true(req.variant_unknown);
	/* echoed escaped */
	f_set(&fs, "variant", v_variant_raw);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'t\\xffiled\\n'");
	/* known names decode, whatever the dtype (coopmat with f32 is the
	 * daemon's to refuse, saying what it needs) */
	fs = lb_base();
	f_set(&fs, "variant", v_variant_tiled);
	expect_ok(&fs, &req);
	assert_int_equal(req.variant, PROTO_VARIANT_TILED);
	assert_false(req.variant_unknown);
	f_set(&fs, "variant", v_variant_coopmat);
	expect_ok(&fs, &req);
	assert_int_equal(req.variant, PROTO_VARIANT_COOPMAT);
	f_set(&fs, "variant", v_nil);
	expect_ok(&fs, &req);
	assert_int_equal(req.variant, PROTO_VARIANT_AUTO);
	f_set(&fs, "variant", v_4);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'variant' must be a string");
	assert_false(req.variant_unknown);
	/* the list, filtered */
	char buf[192];
	assert_int_equal(proto_variant_list(buf, sizeof(buf), -1, NULL, NULL), PROTO_VARIANT_COUNT);
	assert_string_equal(buf, "auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat, coopmat_khr, "
				 "coopmat_khr_splitk, coopmat_nv2, coopmat_khr_f32x3, coopmat_khr_f32_splitk");
	assert_int_equal(proto_variant_list(buf, sizeof(buf), PROTO_BF16, NULL, NULL), 10);
	assert_string_equal(buf, "auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat_khr, "
				 "coopmat_khr_splitk, coopmat_nv2");
	assert_true(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_SPLITK, PROTO_F16));
	assert_true(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_SPLITK, PROTO_BF16));
	assert_false(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_SPLITK, PROTO_F32));
	assert_int_equal(proto_variant_parse("coopmat_khr_splitk"), PROTO_VARIANT_COOPMAT_KHR_SPLITK);
	assert_int_equal(proto_variant_list(buf, sizeof(buf), PROTO_F32, NULL, NULL), 9);
	assert_string_equal(buf, "auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat_khr_f32x3, "
				 "coopmat_khr_f32_splitk");
	assert_true(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK, PROTO_F32));
	assert_false(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK, PROTO_F16));
	assert_false(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK, PROTO_BF16));
	assert_int_equal(proto_variant_parse("coopmat_khr_f32_splitk"), PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
	/* every name fits hello's kernel records (vkg_kernel_info.variant[24]) */
	for (int v = 0; v < PROTO_VARIANT_COUNT; v++)
		assert_true(strlen(proto_variant_name((proto_variant)v)) < sizeof(((proto_kernel_info *)0)->variant));
	assert_true(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32X3, PROTO_F32));
	assert_false(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32X3, PROTO_F16));
	assert_false(proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32X3, PROTO_BF16));
	assert_int_equal(proto_variant_parse("coopmat_khr_f32x3"), PROTO_VARIANT_COOPMAT_KHR_F32X3);
	for (int v = 0; v < PROTO_VARIANT_COUNT; v++)
		assert_true(strstr("auto, generic, tiled, tiled128, splitk, splitk128, narrow, coopmat, coopmat_khr, "
				   "coopmat_khr_splitk, coopmat_nv2, coopmat_khr_f32x3, coopmat_khr_f32_splitk",
				   proto_variant_name((proto_variant)v)) != NULL);
}

/* Every string a reply carries is valid UTF-8: echoes are escaped and cut
 * on character boundaries, and the encoder escapes what slips through. */
static void op_bytes(msgpack_packer *pk, const char *s, size_t n)
{
	msgpack_pack_str_with_body(pk, s, n);
}

static void test_messages_are_utf8(void **state)
{
	(void)state;
	/* an unknown op with a character across the 40-character echo */
	for (size_t lead = 36; lead <= 42; lead++) {
		char op[64];
		memset(op, 'o', lead);
		memcpy(op + lead, "\xf0\x9f\x98\x80\xe2\x82\xac", 7);
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 2);
		pk_s(&pk, "op");
		op_bytes(&pk, op, lead + 7);
		pk_s(&pk, "id");
		msgpack_pack_uint64(&pk, 7);
		proto_request req;
		uint64_t id;
		proto_err err;
		assert_int_equal(decode_buf(&sb, &req, &id, &err), -(int)PROTO_UNKNOWN_OP);
		msgpack_sbuffer_destroy(&sb);
		if (!proto_text_valid(err.message, strlen(err.message)))
			fail_msg("op of %zu + 7 bytes: message not UTF-8: %s", lead, err.message);
		/* 40 characters, then "..." when more came */
		const char *q = strchr(err.message, '\'');
		assert_non_null(q);
		assert_int_equal(strncmp(q + 1, op, lead < 40 ? lead : 40), 0);
		assert_non_null(strstr(err.message, lead + 2 <= 40 ? "\xe2\x82\xac'" : "...'"));
	}
	/* proto_fail and proto_err_append cut long messages between characters */
	proto_err err;
	char euros[800];
	for (int i = 0; i < 266; i++)
		memcpy(euros + 3 * i, "\xe2\x82\xac", 3);
	euros[798] = 0;
	for (int skew = 0; skew < 3; skew++) {
		proto_fail(&err, PROTO_INTERNAL, "%.*s%s", skew, "ab", euros);
		assert_true(strlen(err.message) >= sizeof(err.message) - 4);
		assert_true(proto_text_valid(err.message, strlen(err.message)));
		proto_fail(&err, PROTO_INTERNAL, "%.*s", 250 + skew, "0123456789012345678901234567890123456789"
			   "0123456789012345678901234567890123456789012345678901234567890123456789"
			   "0123456789012345678901234567890123456789012345678901234567890123456789"
			   "0123456789012345678901234567890123456789012345678901234567890123456789");
		assert_int_equal(proto_err_append(&err, "%s", euros), -(int)PROTO_INTERNAL);
		assert_true(proto_text_valid(err.message, strlen(err.message)));
		assert_true(strlen(err.message) >= 250 + (size_t)skew);
	}
	proto_fail(&err, PROTO_LIMIT, "short");
	proto_err_append(&err, ", %d more", 3);
	assert_string_equal(err.message, "short, 3 more");
	assert_int_equal(err.code, PROTO_LIMIT);
}

/* Walk a msgpack object: every str valid UTF-8. */
static void assert_all_utf8(const msgpack_object *o)
{
	if (o->type == MSGPACK_OBJECT_STR)
		assert_true(proto_text_valid(o->via.str.ptr, o->via.str.size));
	else if (o->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < o->via.array.size; i++)
			assert_all_utf8(&o->via.array.ptr[i]);
	else if (o->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			assert_all_utf8(&o->via.map.ptr[i].key);
			assert_all_utf8(&o->via.map.ptr[i].val);
		}
}

static void test_reply_strings_escaped_when_not_utf8(void **state)
{
	(void)state;
	proto_reply *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->id = 9;
	strcpy(r->err.message, "bad \xff byte \\ and a cut \xe2\x82");
	r->err.code = PROTO_INTERNAL;
	strcpy(r->hello.device.name, "GPU \xc0\xaf \xc3\xa9");
	r->hello.n_kernels = 1;
	strcpy(r->hello.kernels[0].name, "k\xed\xa0\x80");
	for (int kind = 0; kind < 2; kind++) {
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		assert_int_equal(proto_reply_encode(&sb, kind ? PROTO_R_HELLO : PROTO_R_ERROR, r), 0);
		size_t len;
		const uint8_t *body = one_frame(&sb, &len);
		msgpack_unpacked u;
		msgpack_unpacked_init(&u);
		size_t off = 0;
		assert_int_equal(msgpack_unpack_next(&u, (const char *)body, len, &off),
				 MSGPACK_UNPACK_SUCCESS);
		assert_all_utf8(&u.data);
		msgpack_unpacked_destroy(&u);
		proto_reply *g = calloc(1, sizeof(*g));
		proto_err err;
		assert_int_equal(proto_reply_decode(body, len, g, &err), 0);
		if (kind == 0) /* a backslash stays single: only what is not UTF-8 changes */
			assert_string_equal(g->err.message, "bad \\xff byte \\ and a cut \\xe2\\x82");
		else {
			assert_string_equal(g->hello.device.name, "GPU \\xc0\\xaf \xc3\xa9");
			assert_string_equal(g->hello.kernels[0].name, "k\\xed\\xa0\\x80");
		}
		free(g);
		msgpack_sbuffer_destroy(&sb);
	}
	free(r);
}

static void test_lb_dims(void **state)
{
	(void)state;
	static const char *const dims[] = {"batch", "in", "out"};
	for (size_t i = 0; i < 3; i++) {
		char want[16];
		snprintf(want, sizeof(want), "'%s'", dims[i]);
		fields fs = lb_base();
		f_set(&fs, dims[i], v_neg);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, dims[i], v_float);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, dims[i], v_str);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
	}
}

static void test_lb_tensor_shape(void **state)
{
	(void)state;
	static const char *const keys[] = {"x", "dy", "w", "dw", "db", "dx"};
	for (size_t i = 0; i < 6; i++) {
		char want[16], want0[32], want1[32];
		snprintf(want, sizeof(want), "'%s'", keys[i]);
		snprintf(want0, sizeof(want0), "'%s[0] (region)'", keys[i]);
		snprintf(want1, sizeof(want1), "'%s[1] (byte_offset)'", keys[i]);
		fields fs = lb_base();
		f_set(&fs, keys[i], v_4);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, keys[i], v_str);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, keys[i], v_tensor_map);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, keys[i], v_arr3);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, keys[i], v_arr1);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want);
		f_set(&fs, keys[i], v_neg_off);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want1);
		f_set(&fs, keys[i], v_nil_off);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want1);
		f_set(&fs, keys[i], v_float_region);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want0);
		f_set(&fs, keys[i], v_str_region);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, want0);
	}
}

/* ---- device tensors (additions) ------------------------------------------------- */

static void v_op_tnew(msgpack_packer *pk) { pk_s(pk, "tensor_new"); }
static void v_op_twrite(msgpack_packer *pk) { pk_s(pk, "tensor_write"); }
static void v_op_tread(msgpack_packer *pk) { pk_s(pk, "tensor_read"); }
static void v_op_tfree(msgpack_packer *pk) { pk_s(pk, "tensor_free"); }
static void v_tref(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	pk_s(pk, "tensor");
	msgpack_pack_uint64(pk, 42);
}
static void v_tref_neg(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	pk_s(pk, "tensor");
	msgpack_pack_int64(pk, -3);
}
static void v_tref_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	pk_s(pk, "tensor");
	pk_s(pk, "t1");
}
static void v_tref_key(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	pk_s(pk, "tensr");
	msgpack_pack_uint64(pk, 42);
}
static void v_tref_two(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	pk_s(pk, "tensor");
	msgpack_pack_uint64(pk, 42);
	pk_s(pk, "offset");
	msgpack_pack_uint64(pk, 0);
}

/* Every op's round trip, and a job's {"tensor": T} operands beside
 * [region, offset] ones. */
static void test_request_tensor_ops(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_TENSOR_NEW;
	in.id = 9;
	in.dtype = PROTO_F16;
	in.rows = 3;
	in.cols = 1ull << 33;
	request_round_trip(&in, &out);
	assert_int_equal(out.dtype, PROTO_F16);
	assert_int_equal(out.rows, 3);
	assert_int_equal(out.cols, 1ull << 33);
	const proto_op copies[2] = {PROTO_OP_TENSOR_WRITE, PROTO_OP_TENSOR_READ};
	for (int i = 0; i < 2; i++) {
		memset(&in, 0, sizeof(in));
		in.op = copies[i];
		in.id = 10 + (uint64_t)i;
		in.tensor = 1ull << 40;
		in.io = (proto_tensor){.present = true, .region = 5, .offset = 4096};
		request_round_trip(&in, &out);
		assert_int_equal(out.tensor, 1ull << 40);
		assert_true(out.io.present && !out.io.is_tensor);
		assert_int_equal(out.io.region, 5);
		assert_int_equal(out.io.offset, 4096);
	}
	memset(&in, 0, sizeof(in));
	in.op = PROTO_OP_TENSOR_FREE;
	in.id = 12;
	in.tensor = 77;
	request_round_trip(&in, &out);
	assert_int_equal(out.tensor, 77);
	/* operands: x, dw, b, y tensors, the rest regions */
	const proto_op jobs[2] = {PROTO_OP_LINEAR_BACKWARD, PROTO_OP_LINEAR_FORWARD};
	for (int i = 0; i < 2; i++) {
		memset(&in, 0, sizeof(in));
		in.op = jobs[i];
		in.id = 13;
		in.batch = 2, in.in = 3, in.out = 4;
		in.t[PROTO_T_X] = (proto_tensor){.present = true, .is_tensor = true, .tensor = 1};
		in.t[PROTO_T_W] = (proto_tensor){.present = true, .region = 2, .offset = 64};
		if (jobs[i] == PROTO_OP_LINEAR_BACKWARD) {
			in.t[PROTO_T_DY] = (proto_tensor){.present = true, .region = 2, .offset = 0};
			in.t[PROTO_T_DW] = (proto_tensor){.present = true, .is_tensor = true, .tensor = UINT64_MAX};
		} else {
			in.t[PROTO_T_B] = (proto_tensor){.present = true, .is_tensor = true, .tensor = 3};
			in.t[PROTO_T_Y] = (proto_tensor){.present = true, .is_tensor = true, .tensor = 4};
		}
		request_round_trip(&in, &out);
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			assert_int_equal(out.t[t].present, in.t[t].present);
			assert_int_equal(out.t[t].is_tensor, in.t[t].is_tensor);
			assert_int_equal(out.t[t].tensor, in.t[t].tensor);
			assert_int_equal(out.t[t].region, in.t[t].region);
			assert_int_equal(out.t[t].offset, in.t[t].offset);
		}
	}
}

/* Both decoders (decode_buf compares them) on good and bad tensor requests. */
static void test_tensor_validation(void **state)
{
	(void)state;
	proto_request req;
	/* an operand {"tensor": T} */
	fields fs = lb_base();
	f_set(&fs, "w", v_tref);
	expect_ok(&fs, &req);
	assert_true(req.t[PROTO_T_W].present && req.t[PROTO_T_W].is_tensor);
	assert_int_equal(req.t[PROTO_T_W].tensor, 42);
	assert_int_equal(req.t[PROTO_T_W].region, 0);
	assert_true(req.t[PROTO_T_X].present && !req.t[PROTO_T_X].is_tensor);
	/* a key twice, in both forms: the last alone counts (fuzz_request) */
	fields dup = lb_base();
	f_add(&dup, "dy", v_tref);
	expect_ok(&dup, &req);
	assert_true(req.t[PROTO_T_DY].is_tensor);
	assert_int_equal(req.t[PROTO_T_DY].region, 0);
	assert_int_equal(req.t[PROTO_T_DY].offset, 0);
	f_add(&dup, "dy", v_dy);
	expect_ok(&dup, &req);
	assert_false(req.t[PROTO_T_DY].is_tensor);
	assert_int_equal(req.t[PROTO_T_DY].tensor, 0);
	f_set(&fs, "w", v_tref_neg);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'w.tensor' must be >= 0");
	f_set(&fs, "w", v_tref_str);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'w.tensor'");
	f_set(&fs, "w", v_tref_key);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "{\"tensor\": id}");
	f_set(&fs, "w", v_w);
	f_set(&fs, "dw", v_tref_two);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'dw'");
	/* tensor_new */
	fs = simple(v_op_tnew);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'dtype' is missing");
	f_add(&fs, "dtype", v_f32);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'rows' is missing");
	f_add(&fs, "rows", v_2);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'cols' is missing");
	f_add(&fs, "cols", v_0);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'cols' must be >= 1");
	f_set(&fs, "cols", v_neg);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'cols'");
	f_set(&fs, "cols", v_str);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'cols'");
	f_set(&fs, "cols", v_2);
	f_set(&fs, "dtype", v_f64);
	expect_fail(&fs, PROTO_UNSUPPORTED, 7, "tensor_new: dtype 'f64'");
	f_set(&fs, "dtype", v_2);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'dtype' must be a string");
	f_set(&fs, "dtype", v_f32);
	expect_ok(&fs, &req);
	assert_int_equal(req.op, PROTO_OP_TENSOR_NEW);
	assert_int_equal(req.rows, 2);
	assert_int_equal(req.cols, 2);
	/* tensor_write / tensor_read: tensor and src / dst */
	const pack_fn ops[2] = {v_op_twrite, v_op_tread};
	const char *const keys[2] = {"src", "dst"};
	for (int i = 0; i < 2; i++) {
		char missing[32];
		snprintf(missing, sizeof(missing), "'%s' is missing", keys[i]);
		fs = simple(ops[i]);
		f_add(&fs, "tensor", v_2);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, missing);
		f_add(&fs, keys[i], v_tref); /* a tensor is not client memory */
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, "[region, byte_offset]");
		f_set(&fs, keys[i], v_neg_off);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, "byte_offset");
		f_set(&fs, keys[i], v_x);
		expect_ok(&fs, &req);
		assert_int_equal(req.tensor, 2);
		assert_true(req.io.present);
		f_del(&fs, "tensor");
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'tensor' is missing");
		f_add(&fs, "tensor", v_neg);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'tensor' must be >= 0");
		/* the other op's key is an unknown one here */
		f_set(&fs, "tensor", v_2);
		f_del(&fs, keys[i]);
		f_add(&fs, keys[!i], v_x);
		expect_fail(&fs, PROTO_BAD_REQUEST, 7, missing);
	}
	fs = simple(v_op_tfree);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "tensor_free: key 'tensor' is missing");
	f_add(&fs, "tensor", v_str);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'tensor' must be an unsigned integer");
	f_set(&fs, "tensor", v_2);
	expect_ok(&fs, &req);
	assert_int_equal(req.tensor, 2);
}

/* tensor_new's reply, hello's and stats' additions */
static void test_reply_tensor(void **state)
{
	(void)state;
	proto_reply in = {.id = 31, .ok = true, .tensor = 1ull << 50}, *out = malloc(sizeof(*out));
	assert_non_null(out);
	reply_round_trip(PROTO_R_TENSOR, &in, out);
	assert_int_equal(out->tensor, 1ull << 50);
	proto_reply *h = calloc(1, sizeof(*h));
	assert_non_null(h);
	h->id = 1;
	h->ok = true;
	h->hello.limits.max_device_bytes = 1ull << 35;
	h->hello.limits.max_device_bytes_per_uid = 1ull << 34;
	h->hello.limits.max_tensors = 4096;
	reply_round_trip(PROTO_R_HELLO, h, out);
	assert_int_equal(out->hello.limits.max_device_bytes, 1ull << 35);
	assert_int_equal(out->hello.limits.max_device_bytes_per_uid, 1ull << 34);
	assert_int_equal(out->hello.limits.max_tensors, 4096);
	memset(h, 0, sizeof(*h));
	h->id = 2;
	h->ok = true;
	h->stats.has_tensors = true;
	h->stats.device_bytes = 123456789;
	h->stats.tensors = 17;
	h->stats.host_read_bytes = 1ull << 41;
	h->stats.host_write_bytes = 99;
	h->stats.n_dev_uids = 2;
	h->stats.dev_uids[0] = (proto_uid_bytes){1000, 4096};
	h->stats.dev_uids[1] = (proto_uid_bytes){PROTO_UID_OTHER, 8};
	reply_round_trip(PROTO_R_STATS, h, out);
	assert_true(out->stats.has_tensors);
	assert_int_equal(out->stats.device_bytes, 123456789);
	assert_int_equal(out->stats.tensors, 17);
	assert_int_equal(out->stats.host_read_bytes, 1ull << 41);
	assert_int_equal(out->stats.host_write_bytes, 99);
	assert_int_equal(out->stats.n_dev_uids, 2);
	assert_int_equal(out->stats.dev_uids[0].uid, 1000);
	assert_int_equal(out->stats.dev_uids[0].bytes, 4096);
	assert_int_equal(out->stats.dev_uids[1].uid, PROTO_UID_OTHER);
	/* an older daemon's stats: no tensor keys, has_tensors false */
	h->stats.has_tensors = false;
	reply_round_trip(PROTO_R_STATS, h, out);
	assert_false(out->stats.has_tensors);
	assert_int_equal(out->stats.n_dev_uids, 0);
	free(h);
	free(out);
}

static void test_lb_outputs(void **state)
{
	(void)state;
	proto_request req;
	fields fs = lb_base();
	f_del(&fs, "dw");
	f_del(&fs, "db");
	f_del(&fs, "dx");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "output");
	/* outputs all nil is the same as absent */
	f_set(&fs, "dw", v_nil);
	f_set(&fs, "db", v_nil);
	f_set(&fs, "dx", v_nil);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "output");

	/* each output alone is enough (dx with w) */
	static const char *const outs[] = {"dw", "db", "dx"};
	for (int keep = 0; keep < 3; keep++) {
		fs = lb_base();
		for (int o = 0; o < 3; o++)
			if (o != keep)
				f_del(&fs, outs[o]);
		expect_ok(&fs, &req);
		assert_true(req.t[PROTO_T_DW].present == (keep == 0));
		assert_true(req.t[PROTO_T_DB].present == (keep == 1));
		assert_true(req.t[PROTO_T_DX].present == (keep == 2));
	}

	/* dx without w */
	fs = lb_base();
	f_del(&fs, "w");
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'w'");
	f_set(&fs, "w", v_nil);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'w'");
	/* w is optional when dx is not asked for */
	f_del(&fs, "w");
	f_del(&fs, "dx");
	expect_ok(&fs, &req);
	assert_false(req.t[PROTO_T_W].present);
	assert_false(req.t[PROTO_T_DX].present);
}

static void test_lb_accumulate(void **state)
{
	(void)state;
	proto_request req;
	fields fs = lb_base();
	f_set(&fs, "accumulate", v_true);
	expect_ok(&fs, &req);
	assert_true(req.accumulate);
	f_set(&fs, "accumulate", v_false);
	expect_ok(&fs, &req);
	assert_false(req.accumulate);
	f_del(&fs, "accumulate");
	expect_ok(&fs, &req);
	assert_false(req.accumulate);
	f_set(&fs, "accumulate", v_1);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'accumulate'");
	f_set(&fs, "accumulate", v_str);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'accumulate'");
	f_set(&fs, "accumulate", v_empty_map);
	expect_fail(&fs, PROTO_BAD_REQUEST, 7, "'accumulate'");
}

/* The additions of issue 36: a forward's activation and z, a backward's
 * activation with the y or z it reads, and the optimizer steps' keys,
 * through encode and decode; their refusals. */
static void test_activation_and_optim_round_trip(void **state)
{
	(void)state;
	proto_request in = {0}, out;
	in.op = PROTO_OP_LINEAR_FORWARD;
	in.id = 5;
	in.batch = 2, in.in = 3, in.out = 4;
	in.t[PROTO_T_X] = (proto_tensor){.present = true, .region = 1, .offset = 0};
	in.t[PROTO_T_W] = (proto_tensor){.present = true, .region = 1, .offset = 64};
	in.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = 1, .offset = 128};
	in.t[PROTO_T_Z] = (proto_tensor){.present = true, .region = 2, .offset = 8};
	in.activation = PROTO_ACT_GELU;
	request_round_trip(&in, &out);
	assert_int_equal(out.activation, PROTO_ACT_GELU);
	assert_true(out.t[PROTO_T_Z].present && out.t[PROTO_T_Z].region == 2 && out.t[PROTO_T_Z].offset == 8);
	/* a backward with relu keeps y, drops z (unread) */
	proto_request b = {0};
	b.op = PROTO_OP_LINEAR_BACKWARD;
	b.id = 6;
	b.batch = 2, b.in = 3, b.out = 4;
	b.t[PROTO_T_X] = (proto_tensor){.present = true, .region = 1, .offset = 0};
	b.t[PROTO_T_DY] = (proto_tensor){.present = true, .region = 1, .offset = 64};
	b.t[PROTO_T_DW] = (proto_tensor){.present = true, .region = 1, .offset = 256};
	b.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = 1, .offset = 512};
	b.t[PROTO_T_Z] = (proto_tensor){.present = true, .region = 1, .offset = 768};
	b.activation = PROTO_ACT_RELU;
	request_round_trip(&b, &out);
	assert_int_equal(out.activation, PROTO_ACT_RELU);
	assert_true(out.t[PROTO_T_Y].present);
	assert_false(out.t[PROTO_T_Z].present);
	assert_true(proto_slot_is_output(PROTO_OP_LINEAR_FORWARD, PROTO_T_Z));
	assert_false(proto_slot_is_output(PROTO_OP_LINEAR_BACKWARD, PROTO_T_Y));
	assert_false(proto_slot_is_output(PROTO_OP_LINEAR_BACKWARD, PROTO_T_Z));
	/* the optimizer steps */
	const uint64_t p[3] = {1, 2, 3}, g[3] = {4, 5, 6}, m[3] = {7, 8, 9}, v[3] = {10, 11, 12};
	proto_optim o;
	proto_optim_defaults(&o);
	o.n = 3;
	o.has[0] = o.has[1] = o.has[2] = o.has[3] = true;
	o.ids[0] = p, o.ids[1] = g, o.ids[2] = m, o.ids[3] = v;
	o.lr = 0.25, o.weight_decay = 0.5, o.step = 7, o.decoupled = true, o.beta1 = 0.8;
	o.has_lr = o.has_step = true;
	proto_request a = {.op = PROTO_OP_ADAM_STEP, .id = 9, .optim = &o};
	request_round_trip(&a, &out);
	assert_non_null(out.optim);
	assert_int_equal(out.optim->n, 3);
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		for (int i = 0; i < 3; i++)
			assert_int_equal(out.optim->ids[k][i], o.ids[k][i]);
	assert_true(out.optim->lr == 0.25 && out.optim->weight_decay == 0.5 && out.optim->beta1 == 0.8 &&
		    out.optim->beta2 == 0.999 && out.optim->step == 7 && out.optim->decoupled);
	/* refusals: step 0, v missing, nesterov with dampening */
	msgpack_sbuffer sb;
	uint64_t id;
	proto_err err;
	o.step = 0;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_request_encode(&sb, &a), 0);
	size_t len;
	const uint8_t *body = one_frame(&sb, &len);
	assert_true(proto_request_decode(body, len, &out, &id, &err) < 0);
	assert_int_equal(err.code, PROTO_BAD_REQUEST);
	assert_non_null(strstr(err.message, "'step'"));
	msgpack_sbuffer_destroy(&sb);
	o.step = 1, o.has[3] = false;
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_request_encode(&sb, &a), 0);
	body = one_frame(&sb, &len);
	assert_true(proto_request_decode(body, len, &out, &id, &err) < 0);
	assert_non_null(strstr(err.message, "key 'v' is missing"));
	msgpack_sbuffer_destroy(&sb);
	proto_optim so;
	proto_optim_defaults(&so);
	so.n = 1, so.has[0] = so.has[1] = so.has[2] = true;
	so.ids[0] = p, so.ids[1] = g, so.ids[2] = m;
	so.lr = 0.1, so.momentum = 0.9, so.dampening = 0.1, so.nesterov = true, so.has_lr = true;
	proto_request sg = {.op = PROTO_OP_SGD_STEP, .id = 10, .optim = &so};
	msgpack_sbuffer_init(&sb);
	assert_int_equal(proto_request_encode(&sb, &sg), 0);
	body = one_frame(&sb, &len);
	assert_true(proto_request_decode(body, len, &out, &id, &err) < 0);
	assert_non_null(strstr(err.message, "'nesterov'"));
	msgpack_sbuffer_destroy(&sb);
	so.dampening = 0;
	request_round_trip(&sg, &out);
	assert_true(out.optim->nesterov && out.optim->momentum == 0.9 && out.optim->has[PROTO_OPT_BUF1]);
}

static void test_unknown_keys_ignored(void **state)
{
	(void)state;
	proto_request req;
	fields fs = lb_base();
	f_add(&fs, "priority", v_str);
	f_add(&fs, "z", v_deep);
	f_add(&fs, "size", v_neg);    /* a key of another op */
	f_add(&fs, "version", v_str); /* ditto */
	expect_ok(&fs, &req);
	assert_int_equal(req.batch, 2);

	fs = simple(v_op_ping);
	f_add(&fs, "x", v_arr3);
	f_add(&fs, "dtype", v_4);
	f_add(&fs, "trace", v_empty_map);
	expect_ok(&fs, &req);
	assert_int_equal(req.op, PROTO_OP_PING);

	fs = simple(v_op_register);
	f_add(&fs, "size", v_size);
	f_add(&fs, "seals", v_str);
	expect_ok(&fs, &req);
	assert_int_equal(req.size, 1 << 20);

	/* a non-string key is ignored too */
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	msgpack_pack_uint64(&pk, 1);
	msgpack_pack_uint64(&pk, 2);
	pk_s(&pk, "op");
	pk_s(&pk, "ping");
	pk_s(&pk, "id");
	msgpack_pack_uint64(&pk, 99);
	uint64_t id;
	proto_err err;
	assert_int_equal(decode_buf(&sb, &req, &id, &err), 0);
	assert_int_equal(id, 99);
	msgpack_sbuffer_destroy(&sb);
}

/* One decoder for many frames (the daemon keeps one, server.h): each
 * frame decodes exactly as with a fresh decoder, after good frames, failed
 * ones and one that outgrew the zone; the zone never keeps more than its
 * first chunk. */
static void v_big_array(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 4000); /* 4000 objects: far past one 8 KiB chunk */
	for (int i = 0; i < 4000; i++)
		msgpack_pack_uint64(pk, (uint64_t)i);
}
static void v_batch_5(msgpack_packer *pk) { msgpack_pack_uint64(pk, 5); }

/* Decode fs with d and with a fresh decoder; both give the same outcome. */
static int decode_both(proto_decoder *d, const fields *fs, proto_request *req, proto_err *err)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	pack_fields(&sb, fs);
	proto_request fresh;
	proto_err ferr = {0};
	uint64_t id, fid;
	memset(err, 0, sizeof(*err));
	int rc = proto_request_decode_with(d, (const uint8_t *)sb.data, sb.size, req, &id, err);
	int frc = proto_request_decode((const uint8_t *)sb.data, sb.size, &fresh, &fid, &ferr);
	assert_int_equal(rc, frc);
	assert_int_equal(id, fid);
	assert_memory_equal(req, &fresh, sizeof(fresh));
	assert_string_equal(err->message, ferr.message);
	msgpack_sbuffer_destroy(&sb);
	/* emptied for the next frame, at most one chunk of the first size */
	assert_true(d->ready);
	assert_int_equal(d->zone.chunk_list.free, MSGPACK_ZONE_CHUNK_SIZE);
	return rc;
}

static void test_decoder_reuse(void **state)
{
	(void)state;
	proto_decoder d;
	proto_decoder_init(&d);
	proto_request req;
	proto_err err;
	fields lb = lb_base();
	assert_int_equal(decode_both(&d, &lb, &req, &err), 0);
	assert_int_equal(req.op, PROTO_OP_LINEAR_BACKWARD);
	assert_int_equal(d.rebuilds, 0);
	const void *chunk = d.zone.chunk_list.head;

	/* a frame that needs more than the chunk: decoded, then the zone is
	 * rebuilt at its first size */
	fields big = simple(v_op_ping);
	f_add(&big, "pad", v_big_array);
	assert_int_equal(decode_both(&d, &big, &req, &err), 0);
	assert_int_equal(req.op, PROTO_OP_PING);
	assert_int_equal(d.rebuilds, 1);

	/* failures (each kind), each followed by a good frame */
	fields bad[4] = {simple(v_op_frobnicate), lb_base(), lb_base(), simple(v_op_ping)};
	f_set(&bad[1], "x", v_neg_off);
	f_set(&bad[2], "dtype", v_4);
	f_set(&bad[3], "id", v_str);
	const proto_code want[4] = {PROTO_UNKNOWN_OP, PROTO_BAD_REQUEST, PROTO_BAD_REQUEST,
				    PROTO_BAD_FRAME};
	for (int i = 0; i < 4; i++) {
		assert_int_equal(decode_both(&d, &bad[i], &req, &err), -(int)want[i]);
		assert_int_equal(err.code, want[i]);
		fields good = lb_base();
		f_set(&good, "batch", v_batch_5);
		assert_int_equal(decode_both(&d, &good, &req, &err), 0);
		assert_int_equal(req.batch, 5);
	}
	/* not msgpack at all: refused before the zone is touched */
	static const uint8_t junk[] = {0xc1, 0x00};
	uint64_t id;
	assert_int_equal(proto_request_decode_with(&d, junk, sizeof(junk), &req, &id, &err),
			 -(int)PROTO_BAD_FRAME);
	/* many frames: the chunk is reused, nothing rebuilt */
	chunk = d.zone.chunk_list.head;
	for (int i = 0; i < 1000; i++)
		assert_int_equal(decode_both(&d, &lb, &req, &err), 0);
	assert_ptr_equal(d.zone.chunk_list.head, chunk);
	assert_int_equal(d.rebuilds, 1);
	proto_decoder_free(&d);
	assert_false(d.ready);
	proto_decoder_free(&d); /* twice is harmless (server_destroy after a failed start) */
}

/* Which frames go the direct way: a request of scalars and [region,
 * offset] pairs does (the daemon's every linear_backward); a float, a
 * nested map, an array past the direct way's room, a truncated or
 * trailing byte go the general way — with the same outcome, which
 * decode_buf checks for each. */
static void v_arr40(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 40);
	for (int i = 0; i < 40; i++)
		msgpack_pack_uint64(pk, (uint64_t)i);
}
static void v_i8_pos(msgpack_packer *pk) { msgpack_pack_int8(pk, 5); }
static void v_i64_neg(msgpack_packer *pk) { msgpack_pack_int64(pk, INT64_MIN); }
static void v_str300(msgpack_packer *pk)
{
	char s[301];
	memset(s, 'a', 300);
	s[300] = 0;
	pk_s(pk, s);
}

static void expect_way(const fields *fs, uint64_t general, int want_rc)
{
	proto_request req;
	proto_err err;
	uint64_t id;
	const uint64_t before = decoded_general;
	assert_int_equal(decode_fields(fs, &req, &id, &err), want_rc);
	assert_int_equal(decoded_general - before, general);
}

static void test_decode_ways(void **state)
{
	(void)state;
	fields fs = lb_base();
	expect_way(&fs, 0, 0);
	f_set(&fs, "variant", v_nil);
	f_set(&fs, "extra", v_str300); /* str16, an unknown key */
	f_set(&fs, "batch", v_i8_pos); /* a signed encoding of 5: batch 5 */
	expect_way(&fs, 0, 0);
	f_set(&fs, "in", v_i64_neg); /* negative: the same message both ways */
	expect_way(&fs, 0, -(int)PROTO_BAD_REQUEST);
	fs = lb_base();
	f_set(&fs, "batch", v_float);
	expect_way(&fs, 1, -(int)PROTO_BAD_REQUEST);
	fs = lb_base();
	f_set(&fs, "x", v_tensor_map);
	expect_way(&fs, 1, -(int)PROTO_BAD_REQUEST);
	/* {"tensor": T} operands (one-entry maps) the direct way, good or bad */
	fs = lb_base();
	f_set(&fs, "x", v_tref);
	f_set(&fs, "dw", v_tref);
	expect_way(&fs, 0, -(int)PROTO_OK);
	f_set(&fs, "dw", v_tref_key);
	expect_way(&fs, 0, -(int)PROTO_BAD_REQUEST);
	f_set(&fs, "dw", v_tref_str);
	expect_way(&fs, 0, -(int)PROTO_BAD_REQUEST);
	f_set(&fs, "dw", v_tref_two); /* two entries: the general way */
	expect_way(&fs, 1, -(int)PROTO_BAD_REQUEST);
	fs = lb_base();
	f_set(&fs, "pad", v_arr40);
	expect_way(&fs, 1, 0);
	fs = lb_base();
	f_set(&fs, "x", v_arr3);
	expect_way(&fs, 0, -(int)PROTO_BAD_REQUEST);
	/* bytes: truncated, trailing, not a map, empty */
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	fs = lb_base();
	pack_fields(&sb, &fs);
	proto_request req;
	proto_err err;
	uint64_t id;
	for (size_t cut = 0; cut < sb.size; cut++) {
		msgpack_sbuffer part = {.size = cut, .data = sb.data, .alloc = sb.alloc};
		const uint64_t before = decoded_general;
		assert_int_equal(decode_buf(&part, &req, &id, &err), -(int)PROTO_BAD_FRAME);
		assert_int_equal(decoded_general - before, 1);
	}
	msgpack_sbuffer_write(&sb, "\x01", 1);
	assert_int_equal(decode_buf(&sb, &req, &id, &err), -(int)PROTO_BAD_FRAME);
	assert_non_null(strstr(err.message, "trailing bytes"));
	msgpack_sbuffer_destroy(&sb);
	/* 40 unknown keys before the request's: the general way (more keys
	 * than the direct way holds), the keys past the 32nd found too */
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	fs = lb_base();
	msgpack_pack_map(&pk, 40 + (size_t)fs.n);
	for (int i = 0; i < 40; i++) {
		char k[8];
		snprintf(k, sizeof(k), "pad%02d", i);
		pk_s(&pk, k);
		msgpack_pack_uint64(&pk, (uint64_t)i);
	}
	for (int i = 0; i < fs.n; i++) {
		pk_s(&pk, fs.f[i].key);
		fs.f[i].val(&pk);
	}
	const uint64_t before = decoded_general;
	assert_int_equal(decode_buf(&sb, &req, &id, &err), 0);
	assert_int_equal(decoded_general - before, 1);
	assert_int_equal(id, 7);
	assert_true(req.t[PROTO_T_DX].present);
	assert_int_equal(req.t[PROTO_T_DX].offset, 512);
	assert_int_equal(req.out, 4);
	msgpack_sbuffer_destroy(&sb);
}

/* A job reply as msgpack-c's packer writes it, key by key (how
 * proto_reply_encode wrote every job reply before its direct encoder):
 * the reference the direct encoder must match byte for byte. */
static void ref_pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

static void ref_job_reply(msgpack_sbuffer *sb, const proto_reply *r)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	const char zero[PROTO_FRAME_HDR] = {0};
	msgpack_sbuffer_write(sb, zero, sizeof(zero));
	msgpack_pack_map(&pk, 5 + r->has_kernel_us + (r->stream.n > 0) + 3 * r->trace.present);
	ref_pk_str(&pk, "id");
	msgpack_pack_uint64(&pk, r->id);
	ref_pk_str(&pk, "ok");
	msgpack_pack_true(&pk);
	ref_pk_str(&pk, "queued_us");
	msgpack_pack_uint64(&pk, r->queued_us);
	ref_pk_str(&pk, "gpu_us");
	msgpack_pack_uint64(&pk, r->gpu_us);
	ref_pk_str(&pk, "batch_jobs");
	msgpack_pack_uint64(&pk, r->batch_jobs);
	if (r->has_kernel_us) {
		ref_pk_str(&pk, "kernel_us");
		msgpack_pack_uint64(&pk, r->kernel_us);
	}
	if (r->stream.n > 0) {
		ref_pk_str(&pk, "stream_us");
		msgpack_pack_map(&pk, r->stream.n);
		for (unsigned i = 0; i < r->stream.n; i++) {
			ref_pk_str(&pk, r->stream.f[i].name);
			msgpack_pack_uint64(&pk, r->stream.f[i].us);
		}
	}
	if (r->trace.present) {
		ref_pk_str(&pk, "t_recv_ns");
		msgpack_pack_uint64(&pk, r->trace.t_recv_ns);
		ref_pk_str(&pk, "stages_ns");
		msgpack_pack_map(&pk, r->trace.n);
		for (unsigned i = 0; i < r->trace.n; i++) {
			ref_pk_str(&pk, r->trace.st[i].name);
			msgpack_pack_uint64(&pk, r->trace.st[i].ns);
		}
		ref_pk_str(&pk, "t_reply_ns");
		msgpack_pack_fix_uint64(&pk, r->trace.t_reply_ns);
	}
	proto_frame_put_len((uint8_t *)sb->data, (uint32_t)(sb->size - PROTO_FRAME_HDR));
}

/* proto_reply_encode writes a job reply directly, not through msgpack-c's
 * packer: the same bytes for every width of every integer (each boundary
 * of msgpack's uint encodings), with and without kernel_us, a streamed
 * job's stream_us (0, 5 or PROTO_MAX_STREAM_FIELDS fields, names of 1 to 31
 * characters) and the trace (0 to PROTO_MAX_STAGES stages, names of 1 to
 * 15 characters), into an empty buffer and after other bytes in a small
 * one that must grow. */
static void test_reply_job_bytes(void **state)
{
	(void)state;
	static const uint64_t vals[] = {0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295ull,
					4294967296ull, UINT64_MAX};
	const size_t nv = sizeof(vals) / sizeof(vals[0]);
	static proto_reply r;
	unsigned cases = 0;
	for (size_t a = 0; a < nv; a++)
		for (int variant = 0; variant < 6; variant++) {
			memset(&r, 0, sizeof(r));
			r.ok = true;
			r.id = vals[a];
			r.queued_us = vals[(a + 1) % nv];
			r.gpu_us = vals[(a + 2) % nv];
			r.batch_jobs = vals[(a + 3) % nv];
			r.has_kernel_us = variant & 1;
			r.kernel_us = vals[(a + 4) % nv];
			r.trace.present = variant >= 2;
			r.trace.t_recv_ns = vals[(a + 5) % nv];
			r.trace.t_reply_ns = vals[(a + 6) % nv];
			r.trace.n = variant == 2 ? 0 : variant == 3 ? 9 : PROTO_MAX_STAGES;
			for (unsigned i = 0; i < r.trace.n; i++) {
				const char *nm = i < PROTO_STAGE_COUNT ? proto_stage_name((proto_stage_id)i)
								       : "stage_fifteen__";
				snprintf(r.trace.st[i].name, sizeof(r.trace.st[i].name), "%.*s",
					 (int)(1 + (i + a) % 15), nm);
				r.trace.st[i].ns = vals[(a + i) % nv];
			}
			r.stream.n = variant < 2 ? (unsigned)variant * 5 : variant == 5 ? PROTO_MAX_STREAM_FIELDS : 0;
			for (unsigned i = 0; i < r.stream.n; i++) {
				snprintf(r.stream.f[i].name, sizeof(r.stream.f[i].name), "%.*s",
					 (int)(1 + (i * 7 + a) % 31), "stream_field_name_thirty_one_ch");
				r.stream.f[i].us = vals[(a + 2 * i) % nv];
			}
			msgpack_sbuffer want, got;
			msgpack_sbuffer_init(&want);
			msgpack_sbuffer_init(&got);
			ref_job_reply(&want, &r);
			/* after other bytes, in a buffer that must grow */
			if (variant & 1) {
				got.data = malloc(8);
				assert_non_null(got.data);
				got.alloc = 8;
				memcpy(got.data, "prefix", 6);
				got.size = 6;
			}
			const size_t at = got.size;
			assert_int_equal(proto_reply_encode(&got, PROTO_R_JOB, &r), 0);
			assert_int_equal(got.size - at, want.size);
			assert_memory_equal(got.data + at, want.data, want.size);
			if (variant & 1)
				assert_memory_equal(got.data, "prefix", 6);
			msgpack_sbuffer_destroy(&want);
			msgpack_sbuffer_destroy(&got);
			cases++;
		}
	assert_int_equal(cases, nv * 6);
}

/* A kept reply buffer (the daemon's conn_reply_timed): each reply encodes
 * to the same bytes as into a fresh buffer; the memory stays until it grew
 * past `keep`, then is freed. */
static void expect_same_encoding(msgpack_sbuffer *kept, const proto_reply *r)
{
	msgpack_sbuffer fresh;
	msgpack_sbuffer_init(&fresh);
	assert_int_equal(proto_reply_encode(&fresh, PROTO_R_JOB, r), 0);
	assert_int_equal(kept->size, 0);
	assert_int_equal(proto_reply_encode(kept, PROTO_R_JOB, r), 0);
	assert_int_equal(kept->size, fresh.size);
	assert_memory_equal(kept->data, fresh.data, fresh.size);
	msgpack_sbuffer_destroy(&fresh);
}

static void test_sbuffer_reuse(void **state)
{
	(void)state;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	proto_sbuffer_reuse(&sb, 16384); /* never used: stays empty */
	assert_null(sb.data);
	proto_reply r = {.id = 5, .ok = true, .queued_us = 1, .gpu_us = 2, .batch_jobs = 3};
	expect_same_encoding(&sb, &r);
	char *kept = sb.data;
	proto_sbuffer_reuse(&sb, 16384);
	assert_ptr_equal(sb.data, kept); /* kept, emptied */
	r.id = 6;
	r.has_kernel_us = true;
	r.kernel_us = 9;
	expect_same_encoding(&sb, &r);
	/* a reply past keep: freed at the reuse, the next one starts anew */
	static char blob[20000];
	assert_int_equal(msgpack_sbuffer_write(&sb, blob, sizeof(blob)), 0);
	assert_true(sb.alloc > 16384);
	proto_sbuffer_reuse(&sb, 16384);
	assert_null(sb.data);
	assert_int_equal(sb.alloc, 0);
	r.id = 7;
	expect_same_encoding(&sb, &r);
	proto_sbuffer_reuse(&sb, 16384);
	msgpack_sbuffer_destroy(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_code_names),
		cmocka_unit_test(test_proto_fail),
		cmocka_unit_test(test_request_hello),
		cmocka_unit_test(test_request_register),
		cmocka_unit_test(test_request_unregister),
		cmocka_unit_test(test_request_stats_ping),
		cmocka_unit_test(test_request_linear_backward),
		cmocka_unit_test(test_request_linear_forward),
		cmocka_unit_test(test_request_encode_appends),
		cmocka_unit_test(test_request_tensor_ops),
		cmocka_unit_test(test_tensor_validation),
		cmocka_unit_test(test_reply_tensor),
		cmocka_unit_test(test_reply_plain),
		cmocka_unit_test(test_reply_register),
		cmocka_unit_test(test_reply_job),
		cmocka_unit_test(test_reply_job_kernel_us),
		cmocka_unit_test(test_reply_job_trace),
		cmocka_unit_test(test_reply_job_stream),
		cmocka_unit_test(test_reply_job_trace_partial),
		cmocka_unit_test(test_reply_stats_stages),
		cmocka_unit_test(test_reply_hello),
		cmocka_unit_test(test_reply_stats),
		cmocka_unit_test(test_reply_stats_histograms),
		cmocka_unit_test(test_reply_stats_histograms_malformed),
		cmocka_unit_test(test_reply_error),
		cmocka_unit_test(test_reply_decode_edges),
		cmocka_unit_test(test_reply_float_counters_clamped),
		cmocka_unit_test(test_valid_base_request),
		cmocka_unit_test(test_body_not_a_map),
		cmocka_unit_test(test_op_and_id_validation),
		cmocka_unit_test(test_unknown_op),
		cmocka_unit_test(test_hello_validation),
		cmocka_unit_test(test_hello_client_too_long),
		cmocka_unit_test(test_register_validation),
		cmocka_unit_test(test_unregister_validation),
		cmocka_unit_test(test_lb_missing_keys),
		cmocka_unit_test(test_lb_dtype),
		cmocka_unit_test(test_lb_variant),
		cmocka_unit_test(test_messages_are_utf8),
		cmocka_unit_test(test_reply_strings_escaped_when_not_utf8),
		cmocka_unit_test(test_lb_dims),
		cmocka_unit_test(test_lb_tensor_shape),
		cmocka_unit_test(test_lb_outputs),
		cmocka_unit_test(test_lb_accumulate),
		cmocka_unit_test(test_unknown_keys_ignored),
		cmocka_unit_test(test_activation_and_optim_round_trip),
		cmocka_unit_test(test_decoder_reuse),
		cmocka_unit_test(test_sbuffer_reuse),
		cmocka_unit_test(test_reply_job_bytes),
		cmocka_unit_test(test_decode_ways),
	};
	return cmocka_run_group_tests_name("msg", tests, NULL, NULL);
}
