/* tests/unit/test_job.c — proto/job.h: linear_backward geometry checks
 * (dimensions, 64-bit sizes, alignment, bounds, overlap) against a fake
 * region table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "job.h"

/* ---- fake region table ---------------------------------------------------- */

typedef struct fake_region {
	uint64_t id, size;
} fake_region;

typedef struct fake_table {
	unsigned n;
	fake_region r[8];
	unsigned lookups; /* how often the callback ran */
} fake_table;

static int fake_region_size(void *ctx, uint64_t region, uint64_t *size)
{
	fake_table *t = ctx;
	t->lookups++;
	for (unsigned i = 0; i < t->n; i++) {
		if (t->r[i].id == region) {
			*size = t->r[i].size;
			return 0;
		}
	}
	return -1;
}

/* Region 1 (1 KiB) holds the inputs, region 2 (1 KiB) the outputs; region 3
 * is 96 bytes; region UINT64_MAX exists to show ids are opaque. */
static fake_table table(void)
{
	fake_table t = {0};
	t.r[t.n++] = (fake_region){1, 1024};
	t.r[t.n++] = (fake_region){2, 1024};
	t.r[t.n++] = (fake_region){3, 96};
	t.r[t.n++] = (fake_region){UINT64_MAX, 4096};
	return t;
}

static proto_limits limits(void)
{
	return (proto_limits){
		.max_frame = 65536,
		.max_regions = 16,
		.max_region_bytes = 1ull << 30,
		.max_inflight = 64,
		.max_dim = 1u << 20,
		.max_tensor_bytes = 1ull << 30,
	};
}

/* f32, batch 2, in 3, out 4: x 24 B, dy 32 B, w 48 B, dw 48 B, db 16 B, dx 24 B.
 * Inputs packed into region 1, outputs into region 2, each at a 256-byte slot. */
static proto_request base(void)
{
	proto_request r = {0};
	r.op = PROTO_OP_LINEAR_BACKWARD;
	r.id = 1;
	r.dtype = PROTO_F32;
	r.batch = 2;
	r.in = 3;
	r.out = 4;
	r.t[PROTO_T_X] = (proto_tensor){.present = true, .region = 1, .offset = 0};
	r.t[PROTO_T_DY] = (proto_tensor){.present = true, .region = 1, .offset = 256};
	r.t[PROTO_T_W] = (proto_tensor){.present = true, .region = 1, .offset = 512};
	r.t[PROTO_T_DW] = (proto_tensor){.present = true, .region = 2, .offset = 0};
	r.t[PROTO_T_DB] = (proto_tensor){.present = true, .region = 2, .offset = 256};
	r.t[PROTO_T_DX] = (proto_tensor){.present = true, .region = 2, .offset = 512};
	return r;
}

static int run(const proto_request *r, const proto_limits *lim, uint64_t bytes[PROTO_T_COUNT],
	       proto_err *err)
{
	fake_table t = table();
	memset(err, 0, sizeof(*err));
	for (int i = 0; i < PROTO_T_COUNT; i++)
		bytes[i] = 0xdead; /* must be overwritten */
	return proto_job_check(r, lim, fake_region_size, &t, bytes, err);
}

#define expect_ok(r) expect_ok_at(r, __LINE__)
#define expect_ok_lim(r, lim) expect_ok_lim_at(r, lim, __LINE__)
#define expect_fail(r, code, want) expect_fail_lim_at(r, NULL, code, want, __LINE__)
#define expect_fail_lim(r, lim, code, want) expect_fail_lim_at(r, lim, code, want, __LINE__)

static void expect_ok_lim_at(const proto_request *r, const proto_limits *lim, int line)
{
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	int rc = run(r, lim, bytes, &err);
	if (rc != 0)
		fail_msg("line %d: rejected: %s: %s", line, proto_code_name(err.code), err.message);
}

static void expect_ok_at(const proto_request *r, int line)
{
	proto_limits lim = limits();
	expect_ok_lim_at(r, &lim, line);
}

static void expect_fail_lim_at(const proto_request *r, const proto_limits *limp, proto_code code,
			       const char *want, int line)
{
	proto_limits lim = limp ? *limp : limits();
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	int rc = run(r, &lim, bytes, &err);
	if (rc != -(int)code || err.code != code)
		fail_msg("line %d: rc %d %s (%s), want %s", line, rc, proto_code_name(err.code),
			 err.message, proto_code_name(code));
	if (want && !strstr(err.message, want))
		fail_msg("line %d: message '%s' does not name %s", line, err.message, want);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_valid_job_bytes(void **state)
{
	(void)state;
	proto_request r = base();
	proto_limits lim = limits();
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	assert_int_equal(run(&r, &lim, bytes, &err), 0);
	assert_int_equal(bytes[PROTO_T_X], 2 * 3 * 4);
	assert_int_equal(bytes[PROTO_T_DY], 2 * 4 * 4);
	assert_int_equal(bytes[PROTO_T_W], 4 * 3 * 4);
	assert_int_equal(bytes[PROTO_T_DW], 4 * 3 * 4);
	assert_int_equal(bytes[PROTO_T_DB], 4 * 4);
	assert_int_equal(bytes[PROTO_T_DX], 2 * 3 * 4);

	/* absent tensors get 0 bytes */
	r.t[PROTO_T_W].present = false;
	r.t[PROTO_T_DX].present = false;
	r.t[PROTO_T_DW].present = false;
	assert_int_equal(run(&r, &lim, bytes, &err), 0);
	assert_int_equal(bytes[PROTO_T_W], 0);
	assert_int_equal(bytes[PROTO_T_DX], 0);
	assert_int_equal(bytes[PROTO_T_DW], 0);
	assert_int_equal(bytes[PROTO_T_DB], 16);
	assert_int_equal(bytes[PROTO_T_X], 24);

	/* 2-byte dtypes halve every size */
	r = base();
	r.dtype = PROTO_F16;
	assert_int_equal(run(&r, &lim, bytes, &err), 0);
	assert_int_equal(bytes[PROTO_T_X], 12);
	assert_int_equal(bytes[PROTO_T_DY], 16);
	assert_int_equal(bytes[PROTO_T_W], 24);
	assert_int_equal(bytes[PROTO_T_DB], 8);
	r.dtype = PROTO_BF16;
	assert_int_equal(run(&r, &lim, bytes, &err), 0);
	assert_int_equal(bytes[PROTO_T_DW], 24);
}

static void test_tensor_elems(void **state)
{
	(void)state;
	proto_request r = base();
	r.batch = 5;
	r.in = 7;
	r.out = 11;
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_X), 35);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_DX), 35);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_DY), 55);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_W), 77);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_DW), 77);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_DB), 11);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_COUNT), 0);
}

static void test_zero_dims(void **state)
{
	(void)state;
	proto_request r = base();
	r.batch = 0;
	expect_fail(&r, PROTO_BAD_REQUEST, "'batch'");
	r = base();
	r.in = 0;
	expect_fail(&r, PROTO_BAD_REQUEST, "'in'");
	r = base();
	r.out = 0;
	expect_fail(&r, PROTO_BAD_REQUEST, "'out'");
}

static void test_dim_limit(void **state)
{
	(void)state;
	proto_limits lim = limits();
	lim.max_dim = 64;
	/* exactly max_dim is allowed (db only: out × 4 bytes fits region 2) */
	proto_request r = base();
	r.t[PROTO_T_W].present = r.t[PROTO_T_DW].present = r.t[PROTO_T_DX].present = false;
	r.out = 64;
	r.t[PROTO_T_DY].offset = 0; /* 2 × 64 × 4 = 512 B */
	r.t[PROTO_T_X].region = 2;
	r.t[PROTO_T_X].offset = 512;
	r.t[PROTO_T_DB].offset = 0;
	r.t[PROTO_T_DB].region = 3; /* 256 B: past the end of region 3 */
	expect_fail_lim(&r, &lim, PROTO_OUT_OF_BOUNDS, "'db'");
	r.t[PROTO_T_DB].region = UINT64_MAX;
	expect_ok_lim(&r, &lim);

	static const char *const names[] = {"'batch'", "'in'", "'out'"};
	for (int d = 0; d < 3; d++) {
		r = base();
		uint64_t *dim = d == 0 ? &r.batch : d == 1 ? &r.in : &r.out;
		*dim = 65;
		expect_fail_lim(&r, &lim, PROTO_LIMIT, names[d]);
		*dim = UINT64_MAX;
		expect_fail_lim(&r, &lim, PROTO_LIMIT, names[d]);
		expect_fail_lim(&r, &lim, PROTO_LIMIT, "max_dim");
	}
}

static void test_size_overflow(void **state)
{
	(void)state;
	proto_limits lim = limits();
	lim.max_dim = UINT64_MAX;
	lim.max_tensor_bytes = UINT64_MAX;
	/* batch × in = 2^66 elements */
	proto_request r = base();
	r.batch = 1ull << 33;
	r.in = 1ull << 33;
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "'x'");
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "overflow");
	/* 2^62 elements fit, × 4 bytes does not */
	r.batch = 1ull << 31;
	r.in = 1ull << 31;
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "overflow");
	/* overflow in dy (batch × out × 4) while x is small and valid */
	r = base();
	r.batch = 1;
	r.in = 4;
	r.out = 1ull << 62;
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "'dy'");
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "overflow");
	/* the same product with f16: 2^62 × 2 = 2^63 does not overflow but
	 * does not fit any region */
	r = base();
	r.dtype = PROTO_F16;
	r.batch = 1ull << 31;
	r.in = 1ull << 31;
	expect_fail_lim(&r, &lim, PROTO_OUT_OF_BOUNDS, "'x'");
}

static void test_tensor_bytes_limit(void **state)
{
	(void)state;
	proto_limits lim = limits();
	lim.max_tensor_bytes = 48; /* w and dw are exactly 48 B */
	proto_request r = base();
	expect_ok_lim(&r, &lim);
	lim.max_tensor_bytes = 47;
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "max_tensor_bytes");
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "'w'");
	/* without w, dw is the one over */
	r.t[PROTO_T_W].present = false;
	r.t[PROTO_T_DX].present = false;
	expect_fail_lim(&r, &lim, PROTO_LIMIT, "'dw'");
}

static void test_unknown_region(void **state)
{
	(void)state;
	proto_request r = base();
	r.t[PROTO_T_DY].region = 9;
	expect_fail(&r, PROTO_BAD_REGION, "'dy'");
	expect_fail(&r, PROTO_BAD_REGION, "9");
	r = base();
	r.t[PROTO_T_DX].region = 0;
	expect_fail(&r, PROTO_BAD_REGION, "'dx'");
	/* an absent tensor's region is never looked up */
	r = base();
	r.t[PROTO_T_DX].present = false;
	r.t[PROTO_T_DX].region = 9;
	expect_ok(&r);
}

static void test_misaligned_offset(void **state)
{
	(void)state;
	proto_request r = base();
	r.t[PROTO_T_X].offset = 2;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r.t[PROTO_T_X].offset = 1;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "multiple");
	r.t[PROTO_T_X].offset = 4;
	expect_ok(&r);
	/* offset 2 is fine for 2-byte dtypes, 1 is not */
	r.t[PROTO_T_X].offset = 2;
	r.dtype = PROTO_F16;
	expect_ok(&r);
	r.t[PROTO_T_X].offset = 1;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r = base();
	r.t[PROTO_T_DB].offset = 258;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'db'");
}

static void test_bounds(void **state)
{
	(void)state;
	/* x is 24 B; region 1 is 1024 B */
	proto_request r = base();
	r.t[PROTO_T_X].offset = 1000;
	expect_ok(&r); /* ends exactly at 1024 */
	r.t[PROTO_T_X].offset = 1004;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r.t[PROTO_T_X].offset = 1024;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r.t[PROTO_T_X].offset = 1ull << 40;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");

	/* an output ending exactly at the region's end */
	r = base();
	r.t[PROTO_T_DX].offset = 1024 - 24;
	expect_ok(&r);
	r.t[PROTO_T_DX].offset = 1024 - 20;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'dx'");

	/* a tensor bigger than its whole region */
	r = base();
	r.t[PROTO_T_W].region = 3;
	r.t[PROTO_T_W].offset = 0;
	expect_ok(&r); /* 48 B in 96 B */
	r.batch = 8;   /* dy = 8 × 4 × 4 = 128 B */
	r.t[PROTO_T_DY].region = 3;
	r.t[PROTO_T_DY].offset = 0;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'dy'");
}

static void test_offset_wraps(void **state)
{
	(void)state;
	proto_request r = base();
	r.t[PROTO_T_X].offset = UINT64_MAX - 3; /* aligned to 4; + 24 wraps to 20 */
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r.t[PROTO_T_X].offset = UINT64_MAX - 23; /* + 24 wraps to exactly 0 */
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r.t[PROTO_T_X].offset = UINT64_MAX - 1027; /* no wrap: ends far past the region */
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'x'");
	r = base();
	r.t[PROTO_T_DW].offset = (UINT64_MAX / 4) * 4;
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'dw'");
	/* with the largest region id, too */
	r = base();
	r.t[PROTO_T_DB].region = UINT64_MAX;
	r.t[PROTO_T_DB].offset = UINT64_MAX - 15; /* + 16 wraps to 0 */
	expect_fail(&r, PROTO_OUT_OF_BOUNDS, "'db'");
}

static void test_overlap_output_input(void **state)
{
	(void)state;
	/* dw in region 1 over the last element of x */
	proto_request r = base();
	r.t[PROTO_T_DW].region = 1;
	r.t[PROTO_T_DW].offset = 20;
	expect_fail(&r, PROTO_OVERLAP, "'dw'");
	expect_fail(&r, PROTO_OVERLAP, "'x'");
	/* dw starting right after x: touching, not overlapping */
	r.t[PROTO_T_DW].offset = 24;
	expect_ok(&r);
	/* dw ending right where dy starts (dy at 256) */
	r.t[PROTO_T_DW].offset = 256 - 48;
	expect_ok(&r);
	r.t[PROTO_T_DW].offset = 256 - 44;
	expect_fail(&r, PROTO_OVERLAP, "'dy'");
	/* an output containing an input entirely, and the other way round */
	r = base();
	r.t[PROTO_T_DX].region = 1;
	r.t[PROTO_T_DX].offset = 512 + 8; /* inside w [512, 560) */
	expect_fail(&r, PROTO_OVERLAP, "'w'");
	r = base();
	r.t[PROTO_T_DW].region = 1;
	r.t[PROTO_T_DW].offset = 0; /* dw (48 B) covers x (24 B) */
	expect_fail(&r, PROTO_OVERLAP, "'dw'");
	/* the output is the same memory as the input */
	r = base();
	r.t[PROTO_T_DX] = r.t[PROTO_T_X];
	expect_fail(&r, PROTO_OVERLAP, "'dx'");
	/* inputs may alias each other */
	r = base();
	r.t[PROTO_T_W] = r.t[PROTO_T_X];
	r.t[PROTO_T_DY].offset = 8;
	expect_ok(&r);
}

static void test_overlap_outputs(void **state)
{
	(void)state;
	proto_request r = base();
	r.t[PROTO_T_DB].offset = 44; /* dw [0,48) vs db [44,60) */
	expect_fail(&r, PROTO_OVERLAP, "'dw'");
	expect_fail(&r, PROTO_OVERLAP, "'db'");
	r.t[PROTO_T_DB].offset = 48; /* adjacent */
	expect_ok(&r);
	r = base();
	r.t[PROTO_T_DX].offset = 256; /* dx [256,280) vs db [256,272) */
	expect_fail(&r, PROTO_OVERLAP, "'dx'");
	expect_fail(&r, PROTO_OVERLAP, "'db'");
	r.t[PROTO_T_DX].offset = 272; /* adjacent after db */
	expect_ok(&r);
	r.t[PROTO_T_DX].offset = 256 - 24; /* adjacent before db */
	expect_ok(&r);
	/* dx before dw: the check is symmetric */
	r = base();
	r.t[PROTO_T_DW].offset = 512 + 20;
	expect_fail(&r, PROTO_OVERLAP, "output");
	/* dw and dx identical */
	r = base();
	r.t[PROTO_T_DX] = r.t[PROTO_T_DW];
	expect_fail(&r, PROTO_OVERLAP, "output");
}

static void test_same_offsets_different_regions(void **state)
{
	(void)state;
	proto_request r = base();
	for (int t = 0; t < PROTO_T_COUNT; t++)
		r.t[t].offset = 0;
	/* inputs all at offset 0 of region 1 alias (allowed); outputs each at 0
	 * of their own region */
	r.t[PROTO_T_DW].region = 2;
	r.t[PROTO_T_DB].region = 3;
	r.t[PROTO_T_DX].region = UINT64_MAX;
	expect_ok(&r);
	/* two outputs at offset 0 of the same region do overlap */
	r.t[PROTO_T_DB].region = 2;
	expect_fail(&r, PROTO_OVERLAP, "output");
}

/* Every tensor is looked up (once each), and nothing at all when a dimension
 * is refused first. */
static void test_region_lookups(void **state)
{
	(void)state;
	proto_request r = base();
	proto_limits lim = limits();
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	fake_table t = table();
	assert_int_equal(proto_job_check(&r, &lim, fake_region_size, &t, bytes, &err), 0);
	assert_int_equal(t.lookups, PROTO_T_BACKWARD_COUNT);
	t.lookups = 0;
	r.batch = 0;
	assert_int_not_equal(proto_job_check(&r, &lim, fake_region_size, &t, bytes, &err), 0);
	assert_int_equal(t.lookups, 0);
}

/* linear_forward: x batch×in, w out×in, b out, y batch×out; y may overlap
 * no input; and its view as a backward's dX GEMM (proto_forward_as_input). */
static void test_forward(void **state)
{
	(void)state;
	proto_request r = {0};
	r.op = PROTO_OP_LINEAR_FORWARD;
	r.id = 1;
	r.dtype = PROTO_F32;
	r.batch = 2, r.in = 3, r.out = 4;
	r.t[PROTO_T_X] = (proto_tensor){.present = true, .region = 1, .offset = 0};
	r.t[PROTO_T_W] = (proto_tensor){.present = true, .region = 1, .offset = 256};
	r.t[PROTO_T_B] = (proto_tensor){.present = true, .region = 1, .offset = 512};
	r.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = 2, .offset = 0};
	proto_limits lim = limits();
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	assert_int_equal(run(&r, &lim, bytes, &err), 0);
	assert_int_equal(bytes[PROTO_T_X], 24);
	assert_int_equal(bytes[PROTO_T_W], 48);
	assert_int_equal(bytes[PROTO_T_B], 16);
	assert_int_equal(bytes[PROTO_T_Y], 32);
	assert_int_equal(bytes[PROTO_T_DY] + bytes[PROTO_T_DW] + bytes[PROTO_T_DB] + bytes[PROTO_T_DX], 0);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_B), 4);
	assert_int_equal(proto_tensor_elems(&r, PROTO_T_Y), 8);
	/* y against each input, in the same region */
	const int in[3] = {PROTO_T_X, PROTO_T_W, PROTO_T_B};
	const char *msg[3] = {"output 'y' overlaps input 'x'", "output 'y' overlaps input 'w'",
			      "output 'y' overlaps input 'b'"};
	for (int i = 0; i < 3; i++) {
		proto_request o = r;
		o.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = 1, .offset = r.t[in[i]].offset + 4};
		expect_fail(&o, PROTO_OVERLAP, msg[i]);
	}
	/* inputs may share bytes; y just past b does not overlap it */
	proto_request o = r;
	o.t[PROTO_T_W].offset = 0;
	o.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = 1, .offset = 512 + 16};
	expect_ok(&o);
	/* y past its region's end (region 2 is 1 KiB) */
	o = r;
	o.t[PROTO_T_Y].offset = 1024 - 28;
	expect_fail(&o, PROTO_OUT_OF_BOUNDS, "tensor 'y'");
	o = r;
	o.t[PROTO_T_B].offset = 514;
	expect_fail(&o, PROTO_OUT_OF_BOUNDS, "tensor 'b'");
	/* the kernels' view */
	proto_request k;
	proto_forward_as_input(&r, &k);
	assert_int_equal(k.op, PROTO_OP_LINEAR_BACKWARD);
	assert_int_equal(k.batch, 2);
	assert_int_equal(k.in, 4);
	assert_int_equal(k.out, 3);
	assert_true(k.t[PROTO_T_DY].present && k.t[PROTO_T_DY].offset == 0);
	assert_true(k.t[PROTO_T_W].present && k.t[PROTO_T_W].offset == 256);
	assert_true(k.t[PROTO_T_DX].present && k.t[PROTO_T_DX].region == 2);
	assert_false(k.t[PROTO_T_X].present || k.t[PROTO_T_B].present || k.t[PROTO_T_Y].present ||
		     k.t[PROTO_T_DW].present || k.t[PROTO_T_DB].present);
	assert_true(k.accumulate); /* onto the bias */
	r.t[PROTO_T_B].present = false;
	proto_forward_as_input(&r, &k);
	assert_false(k.accumulate);
	/* the dX GEMM's tensors have the forward's sizes */
	for (int t = 0; t < PROTO_T_COUNT; t++)
		bytes[t] = 0;
	assert_int_equal(proto_tensor_elems(&k, PROTO_T_DY), proto_tensor_elems(&r, PROTO_T_X));
	assert_int_equal(proto_tensor_elems(&k, PROTO_T_W), proto_tensor_elems(&r, PROTO_T_W));
	assert_int_equal(proto_tensor_elems(&k, PROTO_T_DX), proto_tensor_elems(&r, PROTO_T_Y));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_job_bytes),
		cmocka_unit_test(test_tensor_elems),
		cmocka_unit_test(test_zero_dims),
		cmocka_unit_test(test_dim_limit),
		cmocka_unit_test(test_size_overflow),
		cmocka_unit_test(test_tensor_bytes_limit),
		cmocka_unit_test(test_unknown_region),
		cmocka_unit_test(test_misaligned_offset),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_offset_wraps),
		cmocka_unit_test(test_overlap_output_input),
		cmocka_unit_test(test_overlap_outputs),
		cmocka_unit_test(test_same_offsets_different_regions),
		cmocka_unit_test(test_region_lookups),
		cmocka_unit_test(test_forward),
	};
	return cmocka_run_group_tests_name("job", tests, NULL, NULL);
}
