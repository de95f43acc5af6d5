/* tests/integration/test_cmk_splitk.c — split-K of dW/db on the tensor
 * cores (linear_coopmat_khr_splitk_gemm + linear_narrow_reduce, variant
 * `coopmat_khr_splitk`; issue 37): narrow, long f16/bf16 layers.
 *
 * Where the device offers it (hello lists linear_coopmat_khr_splitk_gemm
 * for the dtype: a GPU with VK_KHR_cooperative_matrix), for f16 and bf16:
 *  - odd shapes (65,537×3×5, 262,147×33×17, 131,071×64×64, 20,000×257×2,
 *    and for the other two tilings, refine_cmks_tiling: 70,001×130×129 on
 *    128x128 tiles, 65,539×32×31 on 32x32 ones; 65,537×3×5 takes them too),
 *    every subset of dW / db (and with dX, which runs coopmat_khr),
 *    with accumulate and without, forced, each against the float64
 *    reference of the stored inputs, normwise (vkg_ref_max_rel_err): f16
 *    2e-3, bf16 1e-2 (client/ref.h: 16-bit inputs, f32 accumulation, each
 *    output rounded once, twice with accumulate); every byte outside the
 *    outputs (canaries between the tensors, the inputs) as written before;
 *  - tensors off the 16-byte grid (scalar loads, element-wise partials);
 *  - on a daemon whose loops stop after 16 trips (--loop-trips 16, the
 *    least the daemon takes: short slices, many of them) and whose grids are
 *    cut into small dispatches (--devlocal-min-bytes 1, --dispatch-max-macs:
 *    the slices' rows of workgroups split across dispatches);
 *  - determinism: the same job twice, the same bytes;
 *  - stats.splitk_jobs counts a forced job, and auto (no cost model) takes
 *    it for 131,071×64×64 dW+db;
 *  - no Vulkan validation error.
 * Where it does not (lavapipe: no VK_KHR_cooperative_matrix), those skip,
 * saying why, and instead: hello does not list it; forcing it is
 * `unsupported` naming the variant and what is missing (lavapipe:
 * VK_KHR_cooperative_matrix; f32 everywhere: a 16-bit dtype), nothing is
 * written, and the daemon still serves (a following job succeeds); auto
 * on 65,536×64×64 f16/bf16 dW+db runs (the narrow family) without split-K
 * (stats.splitk_jobs unchanged) and is correct. */
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
#define KERNEL "linear_coopmat_khr_splitk_gemm"

/* g_d: plain; g_cut: loops cut at 2 trips, small dispatches (started only
 * where the variant runs) */
static daemon_proc g_d, g_cut;
static bool g_cut_up;
static bool g_offered[PROTO_DTYPE_COUNT]; /* hello lists KERNEL for the dtype */
static char g_device[128];

enum { O_DW = BWJOB_DW, O_DB = BWJOB_DB, O_DX = BWJOB_DX };


/* Skip (printed) where no 16-bit dtype has it; else the dtypes that do. */
static bool any_offered(const char *test)
{
	if (g_offered[PROTO_F16] || g_offered[PROTO_BF16])
		return true;
	printf("SKIP %s: %s does not offer variant %s (no %s pipeline: it needs VK_KHR_cooperative_matrix "
	       "with f16/bf16 matrices); its refusal is checked by test_refused_where_absent\n",
	       test, g_device, VARIANT, KERNEL);
	return false;
}

static const uint64_t odd[][3] = {{65537, 3, 5},    {262147, 33, 17},  {131071, 64, 64},
				   {20000, 257, 2},  {70001, 130, 129}, {65539, 32, 31}};

static void test_odd_shapes_every_output_subset(void **state)
{
	(void)state;
	if (!any_offered("odd shapes")) {
		skip();
		return;
	}
	static const unsigned subsets[] = {O_DW, O_DB, O_DW | O_DB};
	unsigned failed = 0, n = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt]) {
			printf("%s: not offered for %s\n", VARIANT, bwjob_dtype[dt]);
			continue;
		}
		for (size_t s = 0; s < sizeof(odd) / sizeof(odd[0]); s++)
			for (unsigned k = 0; k < 3; k++)
				for (int acc = 0; acc < 2; acc++, n++)
					failed += bwjob_check(g_d.sock, dt, odd[s][0], odd[s][1], odd[s][2], subsets[k], acc, VARIANT, 100 + n, 0);
		/* with dX (coopmat_khr's) and every output */
		failed += bwjob_check(g_d.sock, dt, 20000, 257, 2, O_DW | O_DB | O_DX, true, VARIANT, 300 + dt, 0);
		failed += bwjob_check(g_d.sock, dt, 131071, 64, 64, O_DW | O_DB | O_DX, false, VARIANT, 310 + dt, 0);
		failed += bwjob_check(g_d.sock, dt, 70001, 130, 129, O_DW | O_DB | O_DX, true, VARIANT, 320 + dt, 0);
		failed += bwjob_check(g_d.sock, dt, 65539, 32, 31, O_DW | O_DB | O_DX, false, VARIANT, 330 + dt, 0);
		n += 4;
	}
	printf("%s odd shapes: %u jobs, %u failed\n", VARIANT, n, failed);
	assert_int_equal(failed, 0);
}

/* Tensors 4 bytes off the 16-byte grid: no vector loads, partials written
 * one by one; aligned sizes that would otherwise take the vector path. */
static void test_unaligned_tensors(void **state)
{
	(void)state;
	if (!any_offered("unaligned tensors")) {
		skip();
		return;
	}
	unsigned failed = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		if (g_offered[dt]) {
			failed += bwjob_check(g_d.sock, dt, 131071, 64, 64, O_DW | O_DB, true, VARIANT, 400 + dt, 4);
			failed += bwjob_check(g_d.sock, dt, 65537, 3, 5, O_DW | O_DB, false, VARIANT, 410 + dt, 4);
			failed += bwjob_check(g_d.sock, dt, 70001, 130, 129, O_DW | O_DB, true, VARIANT, 420 + dt, 4);
			failed += bwjob_check(g_d.sock, dt, 65536, 128, 128, O_DW | O_DB, false, VARIANT, 430 + dt, 4);
		}
	assert_int_equal(failed, 0);
}

/* Loops cut at 16 trips (short slices; 2 was refused on the H100 run:
 * --loop-trips takes 16-32768) and grids in small dispatches,
 * device-local. */
static void test_loop_bound_small_dispatches(void **state)
{
	(void)state;
	if (!any_offered("loop bound, small dispatches")) {
		skip();
		return;
	}
	if (!g_cut_up) {
		static const char *const args[] = {"--no-cost-model", "--loop-trips", "16", "--devlocal-min-bytes", "1",
						   "--dispatch-max-macs", "2000000", NULL};
		assert_int_equal(daemon_proc_start(&g_cut, args, NULL), 0);
		g_cut_up = true;
	}
	unsigned failed = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		if (g_offered[dt]) {
			failed += bwjob_check(g_cut.sock, dt, 131071, 64, 64, O_DW | O_DB, false, VARIANT, 500 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 262147, 33, 17, O_DW | O_DB, true, VARIANT, 510 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 20000, 257, 2, O_DB, true, VARIANT, 520 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 70001, 130, 129, O_DW | O_DB, false, VARIANT, 530 + dt, 0);
			failed += bwjob_check(g_cut.sock, dt, 65539, 32, 31, O_DW | O_DB, true, VARIANT, 540 + dt, 0);
		}
	assert_int_equal(failed, 0);
	expect_validation_clean(&g_cut, 0, "coopmat_khr_splitk, loops cut, small dispatches");
}

/* The same job twice: the same bytes (slices in a fixed order, no atomics). */
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
		assert_int_equal(bwjob_same_bits(g_d.sock, dt, 131071, 64, 64, O_DW | O_DB, true, VARIANT, 7, 0), 0);
		assert_int_equal(bwjob_same_bits(g_d.sock, dt, 70001, 130, 129, O_DW | O_DB, true, VARIANT, 8, 0), 0);
		assert_int_equal(bwjob_same_bits(g_d.sock, dt, 65539, 32, 31, O_DW | O_DB, false, VARIANT, 9, 0), 0);
	}
}

/* Forced, a job counts in stats.splitk_jobs; auto (no cost model) takes it
 * for 131,071x64x64 dW+db where offered, and is correct. */
static void test_stats_and_auto(void **state)
{
	(void)state;
	if (!any_offered("stats and auto")) {
		skip();
		return;
	}
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!g_offered[dt])
			continue;
		proto_stats s0, s1, s2;
		assert_int_equal(rawsock_stats(g_d.sock, &s0), 0);
		assert_int_equal(bwjob_check(g_d.sock, dt, 65537, 64, 64, O_DW | O_DB, false, VARIANT, 600 + dt, 0), 0);
		assert_int_equal(rawsock_stats(g_d.sock, &s1), 0);
		assert_int_equal(s1.splitk_jobs, s0.splitk_jobs + 1);
		bwjob_outcome oc = bwjob_run(g_d.sock, dt, 131071, 64, 64, O_DW | O_DB, false, "auto", 610 + dt, 0, false);
		assert_int_equal(oc.rc, 0);
		assert_true(oc.err <= bwjob_tol[dt] && !oc.why[0]);
		assert_int_equal(rawsock_stats(g_d.sock, &s2), 0);
		assert_int_equal(s2.splitk_jobs, s1.splitk_jobs + 1); /* (narrow would not count) */
	}
	expect_validation_clean(&g_d, 0, "coopmat_khr_splitk");
}

/* Where the device does not offer it: hello does not list it, forcing it
 * is `unsupported` naming the variant and what is missing, nothing is
 * written, the daemon serves on; auto runs without split-K. f32 is refused
 * everywhere (a 16-bit variant). */
static void test_refused_where_absent(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	expect_refused_untouched(c, "f32", VARIANT, "unsupported", VARIANT, "f16 or bf16");
	const bool lvp = strstr(g_device, "llvmpipe") != NULL;
	unsigned refused = 0;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (g_offered[dt]) {
			printf("%s %s is served on %s: checked by the tests above\n", VARIANT, bwjob_dtype[dt], g_device);
			continue;
		}
		expect_refused_untouched(c, bwjob_dtype[dt], VARIANT, "unsupported", VARIANT,
					 lvp ? "needs VK_KHR_cooperative_matrix" : "needs ");
		/* a larger job, forced: refused, nothing written, the daemon on */
		bwjob_outcome oc = bwjob_run(g_d.sock, dt, 20000, 257, 2, O_DW | O_DB, true, VARIANT, 700 + dt, 0, false);
		assert_int_equal(oc.rc, -1);
		assert_string_equal(oc.code, "unsupported");
		assert_non_null(strstr(oc.message, "variant '" VARIANT "' needs"));
		if (oc.why[0])
			fail_msg("refused %s job: %s", bwjob_dtype[dt], oc.why);
		printf("%s %s refused: %s\n", VARIANT, bwjob_dtype[dt], oc.message);
		refused++;
		/* auto on the narrow, long shape: no split-K (the narrow family
		 * with no cost model), correct */
		proto_stats s0, s1;
		assert_int_equal(rawsock_stats(g_d.sock, &s0), 0);
		oc = bwjob_run(g_d.sock, dt, 65536, 64, 64, O_DW | O_DB, false, "auto", 710 + dt, 0, false);
		assert_int_equal(oc.rc, 0);
		if (!(oc.err <= bwjob_tol[dt]) || oc.why[0])
			fail_msg("auto %s 65536x64x64: max_rel_err %.3g %s", bwjob_dtype[dt], oc.err, oc.why);
		assert_int_equal(rawsock_stats(g_d.sock, &s1), 0);
		assert_int_equal(s1.splitk_jobs, s0.splitk_jobs);
	}
	vkg_close(c);
	assert_true(rawsock_daemon_serves(g_d.sock));
	expect_validation_clean(&g_d, 0, "coopmat_khr_splitk refused, auto");
	if (lvp)
		assert_int_equal(refused, 2); /* lavapipe never offers it */
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--no-cost-model", NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	proto_hello h;
	expect_hello(g_d.sock, &h);
	/* listed per dtype in hello, under coopmat_khr_splitk, never for f32 */
	if (bwjob_offered(g_d.sock, "test_cmk_splitk", KERNEL, VARIANT, BWJOB_16BIT_ONLY, g_offered, g_device, sizeof(g_device)) != 0)
		return -1;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		if (g_offered[dt] != expect_hello_lists(&h, VARIANT, (proto_dtype)dt))
			return -1;
	printf("%s on %s: f16 %s, bf16 %s\n", VARIANT, g_device, g_offered[PROTO_F16] ? "offered" : "absent",
	       g_offered[PROTO_BF16] ? "offered" : "absent");
	return 0;
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
		cmocka_unit_test(test_refused_where_absent),
		cmocka_unit_test(test_odd_shapes_every_output_subset),
		cmocka_unit_test(test_unaligned_tensors),
		cmocka_unit_test(test_loop_bound_small_dispatches),
		cmocka_unit_test(test_same_bits_every_run),
		cmocka_unit_test(test_stats_and_auto),
	};
	return cmocka_run_group_tests_name("cmk_splitk", tests, group_setup, group_teardown);
}
