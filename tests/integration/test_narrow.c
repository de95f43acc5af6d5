/* tests/integration/test_narrow.c — the narrow family (linear_narrow_param +
 * linear_narrow_reduce, linear_narrow_input; issue 37): layers of few
 * features over many rows.
 *
 * Every job is compared with the float64 reference computed from the same
 * stored (rounded) inputs, normwise (vkg_ref_max_rel_err): f32 1e-4, f16
 * 2e-3, bf16 1e-2 (client/ref.h; the only error beyond f32 accumulation is
 * rounding each output once, twice with accumulate).
 *  - odd shapes, small enough for lavapipe: every dtype, every subset of
 *    the outputs, with accumulate and without, the family forced;
 *  - the issue's odd narrow shapes at full size (1,000,003×3×5, 65,537×1×1,
 *    262,147×33×17, 131,071×257×2), forced, once per dtype with the outputs
 *    and accumulate rotated (lavapipe takes seconds per job: the time is
 *    printed); a tensor past the device's storage-buffer range is refused
 *    naming max_tensor_bytes, and the daemon still serves;
 *  - dX (linear_narrow_input) on its own edges: odd widths (1 to 256
 *    features, tiles narrower than its 8x8 micro-tiles, W whole in shared
 *    memory and in chunks), dY, W and dX off their vector alignment, its
 *    16-byte stores giving the same bytes as its element stores, and a long
 *    out cut into several dispatches (a second daemon with a loop bound of
 *    16 trips and small dispatches), every dtype, overwrite and accumulate;
 *  - determinism: the same job twice, forced and on auto, the same bytes;
 *  - a batch of 4,194,304 rows (past max_dim, 2^20) is accepted by a
 *    daemon with the default limits, within the byte limits, and correct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bwjob.h"
#include "daemon_proc.h"
#include "rawsock.h"
#include "ref.h"
#include "vkgrad.h"

static daemon_proc g_d;
static daemon_proc g_lt; /* a loop bound of 16 trips, small dispatches (test_dx_long_out_cut) */
static vkg_info g_info;

enum { X, DY, W, DW, DB, DX, NT };
enum { O_DW = 1u, O_DB = 2u, O_DX = 4u, O_ALL = 7u };

static const char *const dt_name[3] = {"f32", "f16", "bf16"};
static const double dt_tol[3] = {VKG_REF_TOL_F32, VKG_REF_TOL_F16, VKG_REF_TOL_BF16};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A cheap generator (the shapes have millions of elements): [-1, 1). */
static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(*s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* One job's outcome. */
typedef struct outcome {
	int rc;           /* 0, or -1 when the daemon refused it */
	char code[32], message[256];
	double err;       /* worst normwise error over its outputs */
	uint8_t *bytes;   /* its outputs' bytes (dw, db, dx in turn), when keep */
	size_t nbytes;
	double seconds;
} outcome;

/* Run B×I×O of dtype dt with outputs outs on variant v (accumulate: acc)
 * against a fresh region; inputs from seed. Each tensor t starts shift[t]
 * elements (< 128) past a 256-byte boundary (shift NULL: none). */
static outcome run_job_at(vkg_client *c, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			  const char *v, uint64_t seed, bool keep, const uint64_t *shift)
{
	outcome oc = {0};
	const size_t es = dt == 0 ? 4 : 2;
	const uint64_t n[NT] = {B * I, B * O, O * I, O * I, O, B * I};
	const bool present[NT] = {true, true, (outs & O_DX) != 0, (outs & O_DW) != 0, (outs & O_DB) != 0,
				  (outs & O_DX) != 0};
	size_t off[NT], size = 0;
	for (int t = 0; t < NT; t++) {
		off[t] = size + (shift ? shift[t] * es : 0);
		size += (n[t] * es + 255) / 256 * 256 + 512;
	}
	vkg_error err;
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, size, &reg, &err);
	assert_non_null(m);
	float *val[NT];
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int t = 0; t < NT; t++) {
		val[t] = malloc((n[t] ? n[t] : 1) * sizeof(float));
		assert_non_null(val[t]);
		for (uint64_t i = 0; i < n[t]; i++)
			val[t][i] = (t <= W || acc) ? rnd(&s) : NAN; /* an overwrite must not read it */
		vkg_ref_store((proto_dtype)dt, m + off[t], val[t], n[t]);
		vkg_ref_load((proto_dtype)dt, val[t], m + off[t], n[t]); /* the stored values */
	}
	const vkg_job j = bwjob_region_job(dt_name[dt], v, B, I, O, acc, reg, off, present);
	vkg_result r;
	const double t0 = now_s();
	if (vkg_linear_backward(c, &j, &r, &err) != 0) {
		oc.rc = -1;
		snprintf(oc.code, sizeof(oc.code), "%s", err.code);
		snprintf(oc.message, sizeof(oc.message), "%s", err.message);
	} else {
		oc.seconds = now_s() - t0;
		double *ref[NT] = {0};
		for (int t = DW; t < NT; t++)
			if (present[t]) {
				ref[t] = calloc(n[t], sizeof(double));
				assert_non_null(ref[t]);
			}
		vkg_ref_linear_backward(B, I, O, val[X], val[DY], val[W], ref[DW], ref[DB], ref[DX]);
		for (int t = DW; t < NT; t++) {
			if (!present[t])
				continue;
			float *got = malloc(n[t] * sizeof(float)), *base = NULL;
			double *based = acc ? malloc(n[t] * sizeof(double)) : NULL;
			assert_non_null(got);
			vkg_ref_load((proto_dtype)dt, got, m + off[t], n[t]);
			if (based)
				for (uint64_t i = 0; i < n[t]; i++)
					based[i] = val[t][i];
			const double e = vkg_ref_max_rel_err(got, ref[t], based, n[t]);
			oc.err = e > oc.err || isnan(e) ? e : oc.err;
			if (keep) {
				oc.bytes = realloc(oc.bytes, oc.nbytes + n[t] * es);
				assert_non_null(oc.bytes);
				memcpy(oc.bytes + oc.nbytes, m + off[t], n[t] * es);
				oc.nbytes += n[t] * es;
			}
			free(got);
			free(base);
			free(based);
			free(ref[t]);
		}
	}
	for (int t = 0; t < NT; t++)
		free(val[t]);
	assert_int_equal(vkg_region_destroy(c, reg, m, size, &err), 0);
	return oc;
}

static outcome run_job(vkg_client *c, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
		       const char *v, uint64_t seed, bool keep)
{
	return run_job_at(c, dt, B, I, O, outs, acc, v, seed, keep, NULL);
}

static const char *outs_name(unsigned o)
{
	static const char *const nm[8] = {"", "dw", "db", "dw,db", "dx", "dw,dx", "db,dx", "dw,db,dx"};
	return nm[o & 7];
}

/* A job that must succeed within its dtype's tolerance, its tensors
 * `shift` elements past their places (NULL: none; run_job_at). */
static void expect_ok_at(vkg_client *c, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			 const char *v, uint64_t seed, const uint64_t *shift)
{
	outcome oc = run_job_at(c, dt, B, I, O, outs, acc, v, seed, false, shift);
	const char *sh = shift ? ", shifted" : "";
	if (oc.rc != 0)
		fail_msg("%s %llux%llux%llu %s%s%s on %s: %s: %s", dt_name[dt], (unsigned long long)B,
			 (unsigned long long)I, (unsigned long long)O, outs_name(outs), acc ? " acc" : "", sh, v,
			 oc.code, oc.message);
	if (!(oc.err <= dt_tol[dt]))
		fail_msg("%s %llux%llux%llu %s%s%s on %s: max_rel_err %.3g > %.0e", dt_name[dt],
			 (unsigned long long)B, (unsigned long long)I, (unsigned long long)O, outs_name(outs),
			 acc ? " acc" : "", sh, v, oc.err, dt_tol[dt]);
}

static void expect_ok(vkg_client *c, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
		      const char *v, uint64_t seed)
{
	expect_ok_at(c, dt, B, I, O, outs, acc, v, seed, NULL);
}

/* The same job twice: both within the tolerance, the same bytes. */
static void expect_same_bytes_twice(vkg_client *c, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
				    const char *v, uint64_t seed)
{
	outcome a = run_job(c, dt, B, I, O, outs, false, v, seed, true);
	outcome b = run_job(c, dt, B, I, O, outs, false, v, seed, true);
	assert_int_equal(a.rc, 0);
	assert_int_equal(b.rc, 0);
	assert_true(a.err <= dt_tol[dt]);
	assert_int_equal(a.nbytes, b.nbytes);
	if (memcmp(a.bytes, b.bytes, a.nbytes) != 0)
		fail_msg("%s %llux%llux%llu %s on %s: two runs gave different bytes", dt_name[dt],
			 (unsigned long long)B, (unsigned long long)I, (unsigned long long)O, outs_name(outs), v);
	free(a.bytes);
	free(b.bytes);
}

static vkg_client *connect_g(void)
{
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	return c;
}

/* Odd shapes (no size a multiple of anything, a layer wider than one 64
 * tile in each direction, a 1x1 layer), every dtype, every subset of the
 * outputs, with accumulate and without. */
static void test_odd_shapes_every_output_subset(void **state)
{
	(void)state;
	static const uint64_t shapes[][3] = {{4099, 5, 3}, {1031, 33, 17}, {389, 257, 2}, {131, 70, 67},
					     {3, 1, 1}};
	vkg_client *c = connect_g();
	const double t0 = now_s();
	unsigned jobs = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int dt = 0; dt < 3; dt++)
			for (unsigned o = 1; o <= O_ALL; o++)
				for (int acc = 0; acc < 2; acc++, jobs++)
					expect_ok(c, dt, shapes[s][0], shapes[s][1], shapes[s][2], o, acc, "narrow",
						  1000 + jobs);
	printf("odd shapes: %u jobs in %.1f s\n", jobs, now_s() - t0);
	vkg_close(c);
}

/* The issue's shapes at full size, forced to the family, each dtype once
 * (f32 every output with accumulate, f16 dW and db, bf16 dX and db with
 * accumulate). A tensor past max_tensor_bytes (lavapipe's storage buffers
 * end at 128 MiB: 131,071×257 f32 is 134,740,988 bytes) is refused naming
 * the limit. */
static void test_issue_shapes_full_size(void **state)
{
	(void)state;
	static const uint64_t shapes[][3] = {{1000003, 3, 5}, {65537, 1, 1}, {262147, 33, 17}, {131071, 257, 2}};
	static const unsigned outs[3] = {O_ALL, O_DW | O_DB, O_DX | O_DB};
	static const bool acc[3] = {true, false, true};
	vkg_client *c = connect_g();
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int dt = 0; dt < 3; dt++) {
			const uint64_t B = shapes[s][0], I = shapes[s][1], O = shapes[s][2];
			const uint64_t es = dt == 0 ? 4 : 2;
			const uint64_t big = (B * (I > O ? I : O)) * es;
			outcome oc = run_job(c, dt, B, I, O, outs[dt], acc[dt], "narrow", 77 + s * 3 + (uint64_t)dt,
					     false);
			if (big > g_info.max_tensor_bytes) {
				assert_int_equal(oc.rc, -1);
				assert_string_equal(oc.code, "limit");
				assert_non_null(strstr(oc.message, "max_tensor_bytes"));
				printf("%s %llux%llux%llu: refused (%s)\n", dt_name[dt], (unsigned long long)B,
				       (unsigned long long)I, (unsigned long long)O, oc.message);
				assert_true(rawsock_daemon_serves(g_d.sock));
				continue;
			}
			if (oc.rc != 0)
				fail_msg("%s %llux%llux%llu: %s: %s", dt_name[dt], (unsigned long long)B,
					 (unsigned long long)I, (unsigned long long)O, oc.code, oc.message);
			printf("%s %llux%llux%llu %s%s: max_rel_err %.2g (tol %.0e), %.2f s\n", dt_name[dt],
			       (unsigned long long)B, (unsigned long long)I, (unsigned long long)O, outs_name(outs[dt]),
			       acc[dt] ? " acc" : "", oc.err, dt_tol[dt], oc.seconds);
			if (!(oc.err <= dt_tol[dt]))
				fail_msg("max_rel_err %.3g > %.0e", oc.err, dt_tol[dt]);
		}
	vkg_close(c);
}

/* The same job twice gives the same bytes: the blocks and their order
 * depend on the shape alone, no atomics. Forced and on auto (which takes
 * the family for this shape or, by its cost model, another: the same one
 * both times). */
static void test_same_job_same_bits(void **state)
{
	(void)state;
	vkg_client *c = connect_g();
	static const char *const vs[2] = {"narrow", "auto"};
	for (int dt = 0; dt < 3; dt++)
		for (int v = 0; v < 2; v++)
			expect_same_bytes_twice(c, dt, 70001, 33, 17, O_ALL, vs[v], 5);
	vkg_close(c);
}

/* f32 dW on whole 64x64 tiles (shaders/narrow_mt8.glsl: 8x8 micro-tiles
 * x 4 row groups, db from the loaded registers): one tile, a grid of 2x3
 * tiles, whole tiles beside partial ones (68 inputs: a tile of 64 and one
 * of 4; 130 outputs: 64, 64, 2), a partial last step (batch not a multiple
 * of 64) and many blocks; dW and db, dW alone and every output, overwrite
 * and accumulate. X one element past its vector alignment takes the 4x4
 * path: the same job within the tolerance. Twice on one shape: the same
 * bytes. */
static void test_f32_whole_tiles(void **state)
{
	(void)state;
	static const uint64_t shapes[][3] = {{4099, 64, 64}, {1031, 128, 192}, {777, 68, 130}, {70001, 64, 64}};
	static const unsigned outs[3] = {O_DW | O_DB, O_DW, O_ALL};
	static const uint64_t x_odd[NT] = {1, 0, 0, 0, 0, 0};
	vkg_client *c = connect_g();
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int o = 0; o < 3; o++)
			for (int acc = 0; acc < 2; acc++) {
				const uint64_t B = shapes[s][0], I = shapes[s][1], O = shapes[s][2];
				const uint64_t seed = 6000 + s * 8 + (uint64_t)o * 2 + (uint64_t)acc;
				expect_ok(c, 0, B, I, O, outs[o], acc, "narrow", seed);
				expect_ok_at(c, 0, B, I, O, outs[o], acc, "narrow", seed, x_odd);
			}
	expect_same_bytes_twice(c, 0, 70001, 128, 64, O_DW | O_DB, "narrow", 9);
	vkg_close(c);
}

/* dX (linear_narrow_input) on odd widths, every dtype, overwrite and
 * accumulate. Its threads are 8x8 micro-tiles, P columns of them (P the
 * power of two covering min(in, 64) / 8), a row tile 2048 / P rows, out in
 * chunks of 2·P, W kept whole in shared memory while out·8·P <= 4096: the
 * shapes take widths that are not multiples of 8, tiles narrower than one
 * micro-tile (1, 3, 5; the last column tile of 65, 127 and 255), several
 * row tiles with a partial last one, out in one chunk and in many, and W
 * whole (63x64, 16x70) as well as in chunks (65x127, 8x600, 12x300). */
static void test_dx_odd_widths(void **state)
{
	(void)state;
	static const uint64_t shapes[][3] = {
		{2051, 1, 3},    {2051, 3, 5},    {4099, 5, 1},    {2100, 8, 600},  {1100, 9, 1},
		{1100, 12, 300}, {1100, 16, 70},  {1031, 17, 33},  {777, 33, 17},   {777, 63, 64},
		{777, 64, 63},   {600, 65, 127},  {600, 127, 65},  {300, 128, 255}, {300, 255, 128},
		{300, 256, 256},
	};
	vkg_client *c = connect_g();
	const double t0 = now_s();
	unsigned jobs = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int dt = 0; dt < 3; dt++)
			for (int acc = 0; acc < 2; acc++, jobs++)
				expect_ok(c, dt, shapes[s][0], shapes[s][1], shapes[s][2], O_DX, acc, "narrow",
					  3000 + jobs);
	printf("dX odd widths: %u jobs in %.1f s\n", jobs, now_s() - t0);
	vkg_close(c);
}

/* dX with dY, W and dX at offsets off their vectors' alignment (1 and 3
 * elements past), every dtype, overwrite and accumulate, within the
 * tolerance; and dX stored 16 bytes at a time (dX aligned, rows whole
 * vectors: in 64, 24, 40) gives the same bytes as stored element by element
 * (dX one element past: no row aligned), run after run. */
static void test_dx_unaligned_offsets(void **state)
{
	(void)state;
	static const uint64_t shapes[][3] = {{777, 64, 64}, {1100, 24, 19}, {600, 40, 70}, {2051, 5, 3}};
	vkg_client *c = connect_g();
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int dt = 0; dt < 3; dt++)
			for (int acc = 0; acc < 2; acc++) {
				const uint64_t B = shapes[s][0], I = shapes[s][1], O = shapes[s][2];
				const uint64_t seed = 4000 + s * 8 + (uint64_t)dt * 2 + (uint64_t)acc;
				static const uint64_t odd[NT] = {0, 1, 3, 0, 0, 3};
				expect_ok_at(c, dt, B, I, O, O_DX, acc, "narrow", seed, odd);
				static const uint64_t vec[NT] = {0}, one[NT] = {0, 0, 0, 0, 0, 1};
				outcome a = run_job_at(c, dt, B, I, O, O_DX, acc, "narrow", seed, true, vec);
				outcome b = run_job_at(c, dt, B, I, O, O_DX, acc, "narrow", seed, true, vec);
				outcome e = run_job_at(c, dt, B, I, O, O_DX, acc, "narrow", seed, true, one);
				assert_int_equal(a.rc, 0);
				assert_int_equal(b.rc, 0);
				assert_int_equal(e.rc, 0);
				assert_true(a.err <= dt_tol[dt]);
				assert_int_equal(a.nbytes, B * I * (dt == 0 ? 4 : 2));
				assert_int_equal(b.nbytes, a.nbytes);
				assert_int_equal(e.nbytes, a.nbytes);
				if (memcmp(a.bytes, b.bytes, a.nbytes) != 0)
					fail_msg("%s %llux%llux%llu dx%s: two runs gave different bytes", dt_name[dt],
						 (unsigned long long)B, (unsigned long long)I, (unsigned long long)O,
						 acc ? " acc" : "");
				if (memcmp(a.bytes, e.bytes, a.nbytes) != 0)
					fail_msg("%s %llux%llux%llu dx%s: aligned and unaligned dX differ", dt_name[dt],
						 (unsigned long long)B, (unsigned long long)I, (unsigned long long)O,
						 acc ? " acc" : "");
				free(a.bytes);
				free(b.bytes);
				free(e.bytes);
			}
	vkg_close(c);
}

/* A long out cut into several dispatches: a daemon whose loop bound is 16
 * trips sums 4 positions of out per dispatch (kshape_max_k), the later
 * ones accumulating, and cuts the grid at 200,000 multiply-adds a dispatch
 * (several dispatches of row groups and column tiles); every dtype,
 * overwrite and accumulate, and the same bytes twice. */
static void test_dx_long_out_cut(void **state)
{
	(void)state;
	vkg_error err;
	vkg_client *c = vkg_connect(g_lt.sock, &err);
	assert_non_null(c);
	static const uint64_t shapes[][3] = {{2051, 5, 17}, {777, 64, 33}, {1031, 17, 9}, {600, 130, 7}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int dt = 0; dt < 3; dt++)
			for (int acc = 0; acc < 2; acc++) {
				const uint64_t B = shapes[s][0], I = shapes[s][1], O = shapes[s][2];
				const uint64_t seed = 5000 + s * 8 + (uint64_t)dt * 2 + (uint64_t)acc;
				outcome a = run_job(c, dt, B, I, O, O_DX, acc, "narrow", seed, true);
				outcome b = run_job(c, dt, B, I, O, O_DX, acc, "narrow", seed, true);
				if (a.rc != 0 || !(a.err <= dt_tol[dt]))
					fail_msg("%s %llux%llux%llu dx%s, loop bound 16: rc %d %s, max_rel_err %.3g",
						 dt_name[dt], (unsigned long long)B, (unsigned long long)I,
						 (unsigned long long)O, acc ? " acc" : "", a.rc, a.message, a.err);
				assert_int_equal(b.rc, 0);
				assert_int_equal(b.nbytes, a.nbytes);
				if (memcmp(a.bytes, b.bytes, a.nbytes) != 0)
					fail_msg("%s %llux%llux%llu dx%s, loop bound 16: two runs gave different bytes",
						 dt_name[dt], (unsigned long long)B, (unsigned long long)I,
						 (unsigned long long)O, acc ? " acc" : "");
				free(a.bytes);
				free(b.bytes);
			}
	vkg_close(c);
}

/* A batch past max_dim: the default daemon takes 4,194,304 rows of a 1x1
 * layer (8 MiB per f16 tensor, within the byte limits), on auto. */
static void test_4m_rows_accepted_by_default(void **state)
{
	(void)state;
	assert_true(g_info.max_dim < 4194304); /* (2^20 by default) */
	vkg_client *c = connect_g();
	const double t0 = now_s();
	expect_ok(c, 1, 4194304, 1, 1, O_ALL, false, "auto", 9);
	printf("f16 4194304x1x1 on auto: %.2f s\n", now_s() - t0);
	vkg_close(c);
}

static int group_setup(void **state)
{
	(void)state;
	if (daemon_proc_start(&g_d, NULL, NULL) != 0)
		return -1;
	static const char *const lt[] = {"--no-cost-model", "--loop-trips", "16", "--dispatch-max-macs", "200000",
					 NULL};
	if (daemon_proc_start(&g_lt, lt, NULL) != 0)
		return -1;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	if (!c || vkg_hello(c, "test_narrow", &g_info, &err) != 0)
		return -1;
	vkg_close(c);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int rc = daemon_proc_stop(&g_d);
	rc |= daemon_proc_stop(&g_lt);
	return rc;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_odd_shapes_every_output_subset),
		cmocka_unit_test(test_same_job_same_bits),
		cmocka_unit_test(test_f32_whole_tiles),
		cmocka_unit_test(test_dx_odd_widths),
		cmocka_unit_test(test_dx_unaligned_offsets),
		cmocka_unit_test(test_dx_long_out_cut),
		cmocka_unit_test(test_4m_rows_accepted_by_default),
		cmocka_unit_test(test_issue_shapes_full_size),
	};
	return cmocka_run_group_tests_name("narrow", tests, group_setup, group_teardown);
}
