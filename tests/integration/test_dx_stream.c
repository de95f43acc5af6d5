/* tests/integration/test_dx_stream.c — a narrow layer's 16-bit dX with W
 * in registers (linear_coopmat_khr_dx_stream, KERN_CMK_DXS; issue 37):
 * auto's dX of f16/bf16 jobs that coopmat_khr would take, out a multiple
 * of 16 up to 256, in a multiple of 16, the batch a multiple of the
 * strips' rows; three pipelines, one per class of out (up to 64, 128,
 * 256), each with its own tiling (refine_cmk_dx_stream; the rule and the
 * tilings are unit-tested in tests/unit/test_dxs_tile.c). The shapes below
 * take every class. It is on unless VKGRAD_DXS_TILE=off (dxs_tile.h).
 *
 * On any device:
 *  - VKGRAD_DXS_TILE malformed or out of its ranges stops the daemon at
 *    start, its log naming the variable, the value, what is wrong and the
 *    accepted form; the same directory then serves;
 *  - VKGRAD_DXS_TILE=off: hello lists the kernel for no dtype,
 *    auto's dX is correct against float64 on its other kernels, the
 *    daemon serves.
 *  - VKGRAD_DXS_TILE=on: hello lists it for the dtypes the default does.
 * Where the default daemon offers it (hello lists it for the
 * dtype: a GPU with VK_KHR_cooperative_matrix and 16×16×16 matrices), for
 * f16 and bf16, on a daemon without a cost model and without streaming:
 *  - auto jobs of the shapes it takes (dX alone and the full backward, out
 *    and in from 16 to 256, with accumulate and without), and of shapes
 *    beside them it does not take (out 264, in 40, a batch of 16·odd rows),
 *    half of them with every tensor at an odd element offset (those go
 *    back to coopmat_khr when recorded), each against the float64
 *    reference of the stored inputs, normwise (f16 2e-3, bf16 1e-2:
 *    client/ref.h), every byte outside the outputs as before;
 *  - the same job twice: the same bytes;
 *  - grids in small dispatches (--dispatch-max-macs: the workgroups'
 *    first row and column tiles through m_base and n_base), device-local;
 *  - every job streamed in chunks of rows that are not whole strips (its
 *    chunks then go back to coopmat_khr when recorded), and of rows that
 *    are;
 *  - no Vulkan validation error;
 * each step prints the seconds since the start (the first GPU runs ran out
 * of time in the same-bits test without saying where).
 * Where it does not (lavapipe), those skip, saying why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwjob.h"
#include "daemon_proc.h"
#include "expect.h"
#include "rawsock.h"
#include "deadline.h"
#include "ref.h"
#include "rounding.h"
#include "vkgrad.h"

/* Seconds since the first call, for the progress lines (the GPU run of
 * 2026-12-07 ran out of time in this file without saying where). */
static double elapsed_s(void)
{
	static int64_t t0 = -1;
	const int64_t t = deadline_now_ms();
	if (t0 < 0)
		t0 = t;
	return (double)(t - t0) / 1e3;
}

#define VARIANT "coopmat_khr"
#define KERNEL "linear_coopmat_khr_dx_stream"

/* g_d: the default (the kernel on), no cost model, no streaming; g_cut: small dispatches (started only
 * where the kernel runs) */
static daemon_proc g_d, g_cut;
static bool g_cut_up;
static bool g_offered[PROTO_DTYPE_COUNT];
static char g_device[128];

enum { O_DW = BWJOB_DW, O_DB = BWJOB_DB, O_DX = BWJOB_DX };

static bool any_offered(const char *test)
{
	if (g_offered[PROTO_F16] || g_offered[PROTO_BF16])
		return true;
	printf("SKIP %s: %s does not offer %s (it needs VK_KHR_cooperative_matrix with 16x16x16 f16/bf16 "
	       "matrices)\n", test, g_device, KERNEL);
	return false;
}

static void test_bad_values_refused(void **state)
{
	(void)state;
	static const struct {
		const char *value, *fault;
	} bad[] = {
		{"", "not a list of numbers"},
		{"fast", "not a list of numbers"},
		{"8x16x2", "fewer than 4 numbers"},
		{"8x16x2x8x1x1", "more than 5 numbers"},
		{"8x16x2x8x3", "AHEAD must be 1 or 2"},
		{"8x16x2x8,4x8x2x16", "not 3 tilings joined by commas"},
		{"4x8x2x16,8x8x2x16,16x16x2x16x0", "AHEAD must be 1 or 2"},
		{"0x16x2x8", "NW must be 1 to 32"},
		{"33x16x2x8", "NW must be 1 to 32"},
		{"8x17x2x8", "TK must be 1 to 16"},
		{"8x16x5x8", "RT must be 1 to 4"},
		{"8x16x2x65", "STRIPS must be 1 to 64"},
	};
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_init(&d), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		static char text[1 << 16];
		int ws;
		if (!daemon_proc_knob_refused(&d, "VKGRAD_DXS_TILE", bad[i].value, &ws, text, sizeof(text)) ||
		    !strstr(text, bad[i].fault) || !strstr(text, "the accepted form is on, off, or NWxTKxRTxSTRIPS"))
			fail_msg("VKGRAD_DXS_TILE='%s': wait status %d, log:\n%s", bad[i].value, ws, text);
	}
	/* the same directory then serves */
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	assert_int_equal(bwjob_check(d.sock, PROTO_BF16, 4096, 64, 64, O_DX, false, "auto", 1, 0), 0);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* off: no pipeline, auto's dX correct on its other kernels; on: the
 * default's offer (the classes' tilings). */
static void test_off_and_on(void **state)
{
	(void)state;
	static const char *const args[] = {"--no-cost-model", NULL};
	static const char *const env[2][2] = {{"VKGRAD_DXS_TILE=off", NULL}, {"VKGRAD_DXS_TILE=on", NULL}};
	for (int i = 0; i < 2; i++) {
		daemon_proc d;
		memset(&d, 0, sizeof(d));
		assert_int_equal(daemon_proc_start(&d, args, env[i]), 0);
		bool offered[PROTO_DTYPE_COUNT] = {false};
		char device[128];
		assert_int_equal(bwjob_offered(d.sock, "test_dx_stream", KERNEL, VARIANT, BWJOB_16BIT_ONLY, offered,
					       device, sizeof(device)),
				 0);
		for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
			assert_true(offered[dt] == (i == 1 && g_offered[dt]));
		assert_true(daemon_proc_log_contains(&d, i ? "VKGRAD_DXS_TILE=on: linear_coopmat_khr_dx_stream on"
							   : "VKGRAD_DXS_TILE=off: linear_coopmat_khr_dx_stream off"));
		if (i == 0)
			for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
				assert_int_equal(bwjob_check(d.sock, dt, 4096, 128, 128, O_DX, true, "auto", 20 + dt, 0), 0);
				assert_int_equal(
					bwjob_check(d.sock, dt, 1024, 256, 256, O_DW | O_DB | O_DX, false, "auto", 30 + dt, 0),
					0);
			}
		assert_true(rawsock_daemon_serves(d.sock));
		assert_int_equal(daemon_proc_stop(&d), 0);
	}
}

/* B, I, O: the ones it takes (out and in multiples of 16 up to 256, the
 * batch a multiple of 32), then beside them (out 264 > 256, in 40, a
 * batch of 16·odd rows: the default's strips are 32 rows) */
static const uint64_t shapes[][3] = {{65536, 64, 64},  {32768, 128, 128}, {32768, 256, 256}, {65536, 32, 16},
				     {4096, 48, 80},   {32768, 256, 16},   {32768, 16, 256}, {8192, 64, 264},
				     {8192, 40, 64},   {65552, 128, 128}};

static void test_auto_shapes_outputs_offsets(void **state)
{
	(void)state;
	if (!any_offered("auto shapes")) {
		skip();
		return;
	}
	static const unsigned subsets[] = {O_DX, O_DW | O_DB | O_DX};
	unsigned failed = 0, n = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt]) {
			printf("%s: not offered for %s\n", KERNEL, bwjob_dtype[dt]);
			continue;
		}
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			printf("%.1f s: %s %llux%llux%llu\n", elapsed_s(), bwjob_dtype[dt], (unsigned long long)shapes[s][0],
			       (unsigned long long)shapes[s][1], (unsigned long long)shapes[s][2]);
			fflush(stdout);
			for (unsigned k = 0; k < 2; k++)
				for (int acc = 0; acc < 2; acc++, n++)
					failed += bwjob_check(g_d.sock, dt, shapes[s][0], shapes[s][1], shapes[s][2],
							      subsets[k], acc, "auto", 100 + n, n % 2 ? 2 : 0);
		}
	}
	printf("%s: %u auto jobs, %u failed\n", KERNEL, n, failed);
	assert_int_equal(failed, 0);
	expect_validation_clean(&g_d, 0, KERNEL);
}

/* bwjob's checker for a dX-alone job: the normwise error against the
 * float64 reference, and each element rounded to nearest once (the kernel
 * rounds its f32 sum, plus the old value when accumulating, to the storage
 * type): more than ROUNDING_MAX_PERCENT of the elements past
 * rounding_missed's bound is a bound broken. */
static void check_rounded(const bwjob_result *r, bwjob_outcome *oc, const void *ctx)
{
	const bool bf16 = *(const int *)ctx == PROTO_BF16;
	const uint64_t n = r->n[BWJOB_T_DX];
	double *want = malloc(n * sizeof(double)), *based = r->acc ? malloc(n * sizeof(double)) : NULL;
	assert_true(want && (based || !r->acc));
	uint64_t bad = 0;
	for (uint64_t b = 0; b < r->B; b++)
		for (uint64_t i = 0; i < r->I; i++) {
			double sum = 0, mag = 0;
			for (uint64_t o = 0; o < r->O; o++) {
				const double t = (double)r->val[BWJOB_T_DY][b * r->O + o] *
						 (double)r->val[BWJOB_T_W][o * r->I + i];
				sum += t;
				mag += fabs(t);
			}
			const uint64_t e = b * r->I + i;
			const double old = r->acc ? r->val[BWJOB_T_DX][e] : 0.0;
			want[e] = sum;
			if (based)
				based[e] = old;
			bad += rounding_missed((double)r->got[BWJOB_T_DX][e], sum + old, mag, bf16);
		}
	if (bad * 100 > n * ROUNDING_MAX_PERCENT)
		snprintf(oc->bound, sizeof(oc->bound), "dx: %llu of %llu elements past half an ulp (not rounded to nearest)",
			 (unsigned long long)bad, (unsigned long long)n);
	/* (vkg_ref_max_rel_err adds `based` to want itself) */
	oc->err = vkg_ref_max_rel_err(r->got[BWJOB_T_DX], want, based, n);
	free(based);
	free(want);
}

/* n values in [-0.5, 0.5) that bf16 holds, from *seed. */
static void fill_bf16(float *v, int n, uint64_t *seed)
{
	for (int k = 0; k < n; k++) {
		*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
		v[k] = vkg_ref_bf16_to_float(vkg_ref_bf16_from_float((float)((double)(*seed >> 11) / 0x1p53 - 0.5)));
	}
}

/* f's bf16 cut toward zero (its low 16 bits dropped). */
static float bf16_cut(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	u &= 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

/* check_rounded itself, on any device: a dX rounded to nearest passes, the
 * same cut toward zero breaks its bound. */
static void test_rounding_check_catches_truncation(void **state)
{
	(void)state;
	enum { B = 64, I = 16, O = 32 };
	static float x[B * I], dy[B * O], w[O * I], dx_near[B * I], dx_cut[B * I];
	uint64_t seed = 12345;
	fill_bf16(dy, B * O, &seed);
	fill_bf16(w, O * I, &seed);
	for (int b = 0; b < B; b++)
		for (int i = 0; i < I; i++) {
			double sum = 0;
			for (int o = 0; o < O; o++)
				sum += (double)dy[b * O + o] * w[o * I + i];
			dx_near[b * I + i] = vkg_ref_bf16_to_float(vkg_ref_bf16_from_float((float)sum));
			dx_cut[b * I + i] = bf16_cut((float)sum);
		}
	const int dt = PROTO_BF16;
	float *val[BWJOB_NT] = {x, dy, w, NULL, NULL, NULL}, *got[BWJOB_NT] = {0};
	bwjob_result r = {.B = B, .I = I, .O = O, .acc = false, .val = val, .got = got};
	r.present[BWJOB_T_X] = r.present[BWJOB_T_DY] = r.present[BWJOB_T_W] = r.present[BWJOB_T_DX] = true;
	r.n[BWJOB_T_DX] = B * I;
	bwjob_outcome oc = {0};
	got[BWJOB_T_DX] = dx_near;
	check_rounded(&r, &oc, &dt);
	assert_string_equal(oc.bound, "");
	assert_true(oc.err <= bwjob_tol[dt]);
	got[BWJOB_T_DX] = dx_cut;
	check_rounded(&r, &oc, &dt);
	assert_non_null(strstr(oc.bound, "not rounded to nearest"));
	printf("check_rounded: %s\n", oc.bound);
}

/* Each class's dX rounded to nearest, overwritten and accumulated
 * (check_rounded), over 16,384 rows (at 4,096 rows the H100 passed the
 * 256 class's jobs of a build that truncated: likely another kernel's). */
static void test_rounded_to_nearest(void **state)
{
	(void)state;
	if (!any_offered("rounding")) {
		skip();
		return;
	}
	unsigned failed = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt])
			continue;
		for (uint64_t k = 64; k <= 256; k *= 2)
			for (int acc = 0; acc < 2; acc++)
				failed += bwjob_check_checked(g_d.sock, dt, 16384, k, k, O_DX, acc, "auto", 40 + k + (uint64_t)acc,
							      0, check_rounded, &dt);
	}
	printf("%.1f s: rounding checked, %u failed\n", elapsed_s(), failed);
	assert_int_equal(failed, 0);
}

/* The same job twice: the same bytes (each dX element summed by one
 * subgroup in a fixed order). */
static void test_same_bits_every_run(void **state)
{
	(void)state;
	if (!any_offered("same bits")) {
		skip();
		return;
	}
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt])
			continue;
		for (int acc = 0; acc < 2; acc++) {
			printf("%.1f s: %s same bits, 16384x256x256 dX%s\n", elapsed_s(), bwjob_dtype[dt], acc ? " acc" : "");
			fflush(stdout);
			assert_int_equal(bwjob_same_bits(g_d.sock, dt, 16384, 256, 256, O_DX, acc, "auto", 7, 0), 0);
		}
		printf("%.1f s: %s same bits, 32768x128x128 full\n", elapsed_s(), bwjob_dtype[dt]);
		fflush(stdout);
		assert_int_equal(bwjob_same_bits(g_d.sock, dt, 32768, 128, 128, O_DW | O_DB | O_DX, true, "auto", 8, 0), 0);
	}
}

/* Every job streamed: dX in chunks of rows (the chunk's GEMM is recorded
 * on its own), once in chunks of 1,953 rows (not whole strips of 32: those
 * chunks must go back to coopmat_khr, or rows of dX would be left out)
 * and once in chunks of 4,096 rows (whole strips). */
static void test_streamed_chunks(void **state)
{
	(void)state;
	if (!any_offered("streamed chunks")) {
		skip();
		return;
	}
	/* chunk bytes of dY: 1,953 and 4,096 rows of a 128-wide 16-bit dY */
	static const char *const chunk[2] = {"499968", "1048576"};
	unsigned failed = 0;
	for (int i = 0; i < 2; i++) {
		const char *const args[] = {"--no-cost-model", "--devlocal-min-bytes", "1", "--stream-min-bytes", "1",
					    "--stream-chunk-bytes", chunk[i], NULL};
		daemon_proc st;
		memset(&st, 0, sizeof(st));
		assert_int_equal(daemon_proc_start(&st, args, NULL), 0);
		proto_stats s0, s1;
		assert_int_equal(rawsock_stats(st.sock, &s0), 0);
		for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
			if (g_offered[dt]) {
				failed += bwjob_check(st.sock, dt, 32768, 128, 128, O_DX, true, "auto", 900 + dt, 0);
				failed += bwjob_check(st.sock, dt, 32768, 64, 128, O_DW | O_DB | O_DX, false, "auto", 910 + dt, 0);
			}
		assert_int_equal(rawsock_stats(st.sock, &s1), 0);
		printf("%.1f s: chunks of %s bytes: %llu of the jobs streamed, %llu chunks\n", elapsed_s(), chunk[i],
		       (unsigned long long)(s1.stream_jobs - s0.stream_jobs),
		       (unsigned long long)(s1.stream_chunks - s0.stream_chunks));
		assert_true(s1.stream_jobs > s0.stream_jobs);
		expect_validation_clean(&st, 0, KERNEL ", streamed");
		assert_int_equal(daemon_proc_stop(&st), 0);
	}
	assert_int_equal(failed, 0);
}

/* Grids in small dispatches: the workgroups' row and column tiles
 * through m_base and n_base, device-local. */
static void test_small_dispatches(void **state)
{
	(void)state;
	if (!any_offered("small dispatches")) {
		skip();
		return;
	}
	if (!g_cut_up) {
		static const char *const args[] = {"--no-cost-model", "--devlocal-min-bytes", "1", "--dispatch-max-macs",
						   "2000000", "--stream-chunk-bytes", "off", NULL};
		assert_int_equal(daemon_proc_start(&g_cut, args, NULL), 0);
		g_cut_up = true;
	}
	proto_stats s0, s1;
	assert_int_equal(rawsock_stats(g_cut.sock, &s0), 0);
	unsigned failed = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		if (g_offered[dt]) {
			failed += bwjob_check(g_cut.sock, dt, 16384, 256, 256, O_DX, true, "auto", 500 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 32768, 128, 128, O_DX, false, "auto", 510 + dt, 0);
		}
	assert_int_equal(rawsock_stats(g_cut.sock, &s1), 0);
	printf("small dispatches: %llu dispatches for 4 jobs or fewer\n",
	       (unsigned long long)(s1.dispatches - s0.dispatches));
	assert_true(s1.dispatches - s0.dispatches > 8); /* (the grids were cut) */
	assert_int_equal(failed, 0);
	expect_validation_clean(&g_cut, 0, KERNEL ", small dispatches");
}

static int group_setup(void **state)
{
	(void)state;
	elapsed_s();
	static const char *const args[] = {"--no-cost-model", "--stream-chunk-bytes", "off", NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	return bwjob_offered_16bit(g_d.sock, "test_dx_stream", KERNEL, VARIANT, g_offered, g_device,
				   sizeof(g_device));
}

static int group_teardown(void **state)
{
	(void)state;
	int rc = daemon_proc_stop(&g_d);
	if (g_cut_up)
		rc |= daemon_proc_stop(&g_cut);
	return rc;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_values_refused),
		cmocka_unit_test(test_off_and_on),
		cmocka_unit_test(test_auto_shapes_outputs_offsets),
		cmocka_unit_test(test_rounding_check_catches_truncation),
		cmocka_unit_test(test_rounded_to_nearest),
		cmocka_unit_test(test_same_bits_every_run),
		cmocka_unit_test(test_small_dispatches),
		cmocka_unit_test(test_streamed_chunks),
	};
	int rc = cmocka_run_group_tests_name("dx_stream", tests, group_setup, group_teardown);
	return rc + daemon_proc_failures;
}
