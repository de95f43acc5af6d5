/* tests/integration/test_cmks_dx.c — dX beside dW in the split-K pass on
 * the tensor cores (linear_coopmat_khr_splitk_dx_gemm, KERN_CMKS_DX;
 * issue 37): auto's plan for f16/bf16 jobs whose dW/db take
 * coopmat_khr_splitk, that ask for dX too, with out <= 64 and in >= 64.
 * One pass reads X and dY once and writes dW's partials and dX. (The
 * shapes of in < 64 below run the narrow family since 2026-12-06: they
 * check auto there; on the H100 at 04:34 UTC they ran fused, 64 jobs, 0
 * failed.)
 *
 * Where the device offers it (hello lists linear_coopmat_khr_splitk_dx_gemm
 * for the dtype: a GPU with VK_KHR_cooperative_matrix), for f16 and bf16,
 * on a daemon without a cost model and without streaming (the plan is the
 * rules' and the job one pass):
 *  - auto jobs of odd and even shapes (65,537×3×5, 131,071×64×64,
 *    262,147×33×17, 100,003×64×40, 65,536×257×64, and on the 32x32 tiles
 *    (KERN_CMKS_DX_S: in and out <= 32) 131,073×32×17 and 65,539×31×29;
 *    1,048,576×64×64 and 1,048,576×32×16 with every output), outputs dX
 *    alone (its own pass), dW+db+dX and dW+dX,
 *    with accumulate and without, half of them with every tensor at an odd
 *    element offset (no vector loads or stores), each against the float64
 *    reference of the stored inputs, normwise (vkg_ref_max_rel_err): f16
 *    2e-3, bf16 1e-2 (client/ref.h); every byte outside the outputs
 *    (canaries, inputs) as before;
 *  - the same job twice: the same bytes;
 *  - stats: a fused job counts in splitk_jobs and takes no more dispatches
 *    than the same job without dX (an unfused dX would add its own);
 *  - loops cut at 16 trips and grids in small dispatches (device-local);
 *  - a daemon that streams every job (--stream-min-bytes 1): a fused plan
 *    recorded one unit at a time runs unfused, and is correct;
 *  - no Vulkan validation error.
 * Where it does not (lavapipe: no VK_KHR_cooperative_matrix), those skip,
 * saying why, and instead: hello lists it for no dtype (never for f32);
 * auto on 65,536×64×64 f16/bf16 with dW+db+dX and with dX alone is
 * correct against float64 (the narrow family), and the daemon serves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_proc.h"
#include "bwjob.h"
#include "expect.h"
#include "rawsock.h"
#include "ref.h"
#include "vkgrad.h"

#define VARIANT "coopmat_khr_splitk"
#define KERNEL "linear_coopmat_khr_splitk_dx_gemm"

/* g_d: no cost model, no streaming; g_cut: loops cut at 16 trips, small
 * dispatches; g_st: every job streamed (the last two started only where
 * the kernel runs) */
static daemon_proc g_d, g_cut, g_st;
static bool g_cut_up, g_st_up;
static bool g_offered[PROTO_DTYPE_COUNT]; /* hello lists KERNEL for the dtype */
static char g_device[128];

enum { O_DW = BWJOB_DW, O_DB = BWJOB_DB, O_DX = BWJOB_DX };


/* Skip (printed) where no 16-bit dtype has it; else true. */
static bool any_offered(const char *test)
{
	if (g_offered[PROTO_F16] || g_offered[PROTO_BF16])
		return true;
	printf("SKIP %s: %s does not offer %s (it needs VK_KHR_cooperative_matrix with f16/bf16 matrices); "
	       "auto's dX there is checked by test_auto_where_absent\n", test, g_device, KERNEL);
	return false;
}

/* B, I, O */
static const uint64_t shapes[][3] = {{65537, 3, 5},    {131071, 64, 64},  {262147, 33, 17}, {100003, 64, 40},
				     {65536, 257, 64}, {131073, 32, 17}, {65539, 31, 29}};

static void test_fused_shapes_outputs_offsets(void **state)
{
	(void)state;
	if (!any_offered("fused shapes")) {
		skip();
		return;
	}
	static const unsigned subsets[] = {O_DX, O_DW | O_DB | O_DX, O_DW | O_DX};
	unsigned failed = 0, n = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt]) {
			printf("%s: not offered for %s\n", KERNEL, bwjob_dtype[dt]);
			continue;
		}
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (unsigned k = 0; k < 3; k++)
				for (int acc = 0; acc < 2; acc++, n++)
					/* every other job: each tensor one 16-bit element
					 * past the 256-byte grid (odd element offsets) */
					failed += bwjob_check(g_d.sock, dt, shapes[s][0], shapes[s][1], shapes[s][2], subsets[k], acc, "auto", 100 + n, n % 2 ? 2 : 0);
		/* the shape of issue 37, every output, aligned and not */
		failed += bwjob_check(g_d.sock, dt, 1048576, 64, 64, O_DW | O_DB | O_DX, false, "auto", 300 + dt, 0);
		failed += bwjob_check(g_d.sock, dt, 1048576, 64, 64, O_DW | O_DB | O_DX, true, "auto", 310 + dt, 6);
		failed += bwjob_check(g_d.sock, dt, 1048576, 32, 16, O_DW | O_DB | O_DX, false, "auto", 320 + dt, 0);
		failed += bwjob_check(g_d.sock, dt, 1048576, 32, 16, O_DW | O_DB | O_DX, true, "auto", 330 + dt, 2);
		n += 4;
	}
	printf("%s: %u auto jobs, %u failed\n", KERNEL, n, failed);
	assert_int_equal(failed, 0);
}

/* The same job twice: the same bytes (each dX element written by one
 * workgroup, dW's slices added in a fixed order). */
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
		for (int acc = 0; acc < 2; acc++)
			assert_int_equal(bwjob_same_bits(g_d.sock, dt, 262147, 33, 17, O_DW | O_DB | O_DX, acc, "auto", 7, 2), 0);
		assert_int_equal(bwjob_same_bits(g_d.sock, dt, 131073, 32, 17, O_DW | O_DB | O_DX, true, "auto", 8, 0), 0);
	}
}

/* stats: the fused job counts in splitk_jobs and takes as many
 * dispatches as the same shape without dX (the partials' pass and the
 * reduce), where dX on a pass of its own would add at least one. */
static void test_stats_count_it(void **state)
{
	(void)state;
	if (!any_offered("stats")) {
		skip();
		return;
	}
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt])
			continue;
		proto_stats s0, s1, s2, s3;
		/* the 64x64 tiles, then the 32x32 ones (KERN_CMKS_DX_S) */
		static const uint64_t io[][2] = {{32, 17}, {64, 64}};
		for (int i = 0; i < 2; i++) {
			const uint64_t I = io[i][0], O = io[i][1];
			assert_int_equal(rawsock_stats(g_d.sock, &s0), 0);
			assert_int_equal(bwjob_check(g_d.sock, dt, 131071, I, O, O_DW | O_DB, false, "auto", 600 + dt, 0), 0);
			assert_int_equal(rawsock_stats(g_d.sock, &s1), 0);
			assert_int_equal(bwjob_check(g_d.sock, dt, 131071, I, O, O_DW | O_DB | O_DX, false, "auto", 610 + dt, 0),
					 0);
			assert_int_equal(rawsock_stats(g_d.sock, &s2), 0);
			assert_int_equal(s1.splitk_jobs, s0.splitk_jobs + 1);
			assert_int_equal(s2.splitk_jobs, s1.splitk_jobs + 1);
			const uint64_t without = s1.dispatches - s0.dispatches, with = s2.dispatches - s1.dispatches;
			printf("%s 131071x%llux%llu auto: %llu dispatches with dX, %llu without\n", bwjob_dtype[dt],
			       (unsigned long long)I, (unsigned long long)O, (unsigned long long)with,
			       (unsigned long long)without);
			assert_true(without >= 2); /* (the partials, then dW's and db's reduce) */
			assert_int_equal(with, without);
		}
		/* forced coopmat_khr_splitk: unfused (dX on coopmat_khr's pass;
		 * its own slices, so its dispatch count is only printed), correct */
		bwjob_outcome oc = bwjob_run(g_d.sock, dt, 131071, 64, 64, O_DW | O_DB | O_DX, false, VARIANT, 620 + dt, 0,
				     false);
		assert_int_equal(oc.rc, 0);
		assert_true(oc.err <= bwjob_tol[dt] && !oc.why[0]);
		assert_int_equal(rawsock_stats(g_d.sock, &s3), 0);
		assert_int_equal(s3.splitk_jobs, s2.splitk_jobs + 1);
		printf("%s 131071x64x64 forced %s (unfused): %llu dispatches\n", bwjob_dtype[dt], VARIANT,
		       (unsigned long long)(s3.dispatches - s2.dispatches));
	}
	expect_validation_clean(&g_d, 0, KERNEL);
}

/* Loops cut at 16 trips (short slices, many of them) and grids in small
 * dispatches (the slices' rows of workgroups and the column tiles split
 * across dispatches), device-local. */
static void test_loop_bound_small_dispatches(void **state)
{
	(void)state;
	if (!any_offered("loop bound, small dispatches")) {
		skip();
		return;
	}
	if (!g_cut_up) {
		static const char *const args[] = {"--no-cost-model", "--loop-trips", "16", "--devlocal-min-bytes", "1",
						   "--dispatch-max-macs", "2000000", "--stream-chunk-bytes", "off", NULL};
		assert_int_equal(daemon_proc_start(&g_cut, args, NULL), 0);
		g_cut_up = true;
	}
	unsigned failed = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		if (g_offered[dt]) {
			failed += bwjob_check(g_cut.sock, dt, 131071, 64, 64, O_DW | O_DB | O_DX, false, "auto", 500 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 262147, 33, 17, O_DW | O_DX, true, "auto", 510 + dt, 2);
			failed += bwjob_check(g_cut.sock, dt, 65536, 257, 64, O_DW | O_DB | O_DX, true, "auto", 520 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 131073, 32, 17, O_DW | O_DB | O_DX, false, "auto", 530 + dt, 2);
		}
	assert_int_equal(failed, 0);
	expect_validation_clean(&g_cut, 0, KERNEL ", loops cut, small dispatches");
}

/* Every job streamed: dW's pass and dX's chunks recorded one unit at a
 * time, so the fused plan runs unfused (coopmat_khr_splitk, coopmat_khr's
 * dX), correct. */
static void test_streamed_runs_unfused(void **state)
{
	(void)state;
	if (!any_offered("streamed")) {
		skip();
		return;
	}
	if (!g_st_up) {
		static const char *const args[] = {"--no-cost-model", "--devlocal-min-bytes", "1", "--stream-min-bytes",
						   "1", "--stream-chunk-bytes", "1048576", NULL};
		assert_int_equal(daemon_proc_start(&g_st, args, NULL), 0);
		g_st_up = true;
	}
	unsigned failed = 0;
	proto_stats s0, s1;
	assert_int_equal(rawsock_stats(g_st.sock, &s0), 0);
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		if (g_offered[dt]) {
			failed += bwjob_check(g_st.sock, dt, 131071, 64, 64, O_DW | O_DB | O_DX, true, "auto", 800 + dt, 0);
			failed += bwjob_check(g_st.sock, dt, 65537, 3, 5, O_DW | O_DX, false, "auto", 810 + dt, 2);
			failed += bwjob_check(g_st.sock, dt, 131073, 32, 17, O_DW | O_DB | O_DX, true, "auto", 820 + dt, 0);
		}
	assert_int_equal(rawsock_stats(g_st.sock, &s1), 0);
	printf("streaming daemon: %llu of the jobs streamed\n", (unsigned long long)(s1.stream_jobs - s0.stream_jobs));
	assert_int_equal(failed, 0);
	expect_validation_clean(&g_st, 0, KERNEL ", streamed");
}

/* Where the device does not offer it: listed for no such dtype (lavapipe:
 * none); auto's full backward and dX alone on 65,536x64x64 correct
 * against float64; the daemon serves. */
static void test_auto_where_absent(void **state)
{
	(void)state;
	const bool lvp = strstr(g_device, "llvmpipe") != NULL;
	unsigned absent = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (g_offered[dt]) {
			printf("%s %s is served on %s: checked by the tests above\n", KERNEL, bwjob_dtype[dt], g_device);
			continue;
		}
		printf("%s %s absent on %s (no VK_KHR_cooperative_matrix pipeline for it): auto's dX checked "
		       "on its other kernels\n", KERNEL, bwjob_dtype[dt], g_device);
		absent++;
		assert_int_equal(bwjob_check(g_d.sock, dt, 65536, 64, 64, O_DW | O_DB | O_DX, false, "auto", 700 + dt, 0), 0);
		assert_int_equal(bwjob_check(g_d.sock, dt, 65536, 64, 64, O_DX, true, "auto", 710 + dt, 2), 0);
		/* and the same bits twice there too */
		assert_int_equal(bwjob_same_bits(g_d.sock, dt, 4099, 33, 17, O_DW | O_DB | O_DX, true, "auto", 720 + dt, 2), 0);
	}
	assert_true(rawsock_daemon_serves(g_d.sock));
	expect_validation_clean(&g_d, 0, KERNEL " absent, auto");
	if (lvp)
		assert_int_equal(absent, 2); /* lavapipe never offers it */
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--no-cost-model", "--stream-chunk-bytes", "off", NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	/* listed per dtype in hello, under coopmat_khr_splitk, never for f32 */
	return bwjob_offered_16bit(g_d.sock, "test_cmks_dx", KERNEL, VARIANT, g_offered, g_device, sizeof(g_device));
}

static int group_teardown(void **state)
{
	(void)state;
	int rc = daemon_proc_stop(&g_d);
	if (g_cut_up)
		rc |= daemon_proc_stop(&g_cut);
	if (g_st_up)
		rc |= daemon_proc_stop(&g_st);
	return rc;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_where_absent),
		cmocka_unit_test(test_fused_shapes_outputs_offsets),
		cmocka_unit_test(test_same_bits_every_run),
		cmocka_unit_test(test_stats_count_it),
		cmocka_unit_test(test_loop_bound_small_dispatches),
		cmocka_unit_test(test_streamed_runs_unfused),
	};
	return cmocka_run_group_tests_name("cmks_dx", tests, group_setup, group_teardown);
}
