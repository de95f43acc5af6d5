/* tests/integration/test_t128_tile.c — linear_tiled128_gemm's tunable f32
 * path (VKGRAD_T128_TILE, daemon/kernels/t128_tile.h, shaders/tiled128_tuned.glsl).
 *
 * For each candidate tiling a daemon starts with it (its log must name the
 * tiling: the variable took effect), and f32 jobs forced to `tiled128` run
 * against the float64 reference at JC_TOL_F32 over shapes at that tiling's
 * edges (BM, BN, BK and ±1 around them, one row, one column, several tiles
 * each way, in/out multiples of 4 for the vector loads and stores, some
 * tensors off the 16-byte grid), for the output subsets dW+db+dX, dW+db,
 * dX and db alone, overwrite and accumulate. The tilings cover 8×8,
 * 8×4 / 4×8, 12×8 and 16×8 per thread, 64, 128 and 256 threads, k steps
 * of 4, 8 and 16, the loads in 1, 2 and 4 phases, padding, and
 * warp-shaped thread layouts (those of the H200 sweep in docs/kernels.md among
 * them, but for padding at k steps of 16: 33 KiB, above lavapipe's 32).
 *
 * The same through the device-local path cut into many small dispatches.
 * A reduction longer than the loop bound allows in one dispatch at k steps
 * of 4 (dispatch.c cuts it by the tiling's own BK: llvmpipe stops a loop
 * after 65,535 trips and returns a wrong sum otherwise) must still be
 * right and cut into as many pieces (run at 1/128 of the default bound,
 * --loop-trips). Malformed tilings, and one the device cannot hold, stop the
 * daemon at start with a message naming VKGRAD_T128_TILE and the accepted
 * form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon_proc.h"
#include "jobcase.h"
#include "vkgrad.h"

/* A tiling and its BM, BN, BK (for the shapes at its edges). */
typedef struct tcase {
	const char *tile;
	uint64_t bm, bn, bk;
} tcase;

static const tcase tilings[] = {
	{"128x128x8x8x16", 128, 128, 16},       /* the fixed kernel's tiling */
	{"128x128x8x8x16x2x0x8", 128, 128, 16}, /* the default: two phases, warps 8 wide */
	{"128x128x8x8x8x2", 128, 128, 8},       /* k steps of 8, loads in two phases */
	{"128x64x8x4x16x1x0x8", 128, 64, 16},   /* 8x4 per thread, warps 8 wide */
	{"64x128x4x8x16x1x1x16", 64, 128, 16},  /* 4x8 per thread, padding, warps 16 wide */
	{"96x128x12x8x16", 96, 128, 16},        /* 12 rows per thread: 3 loads of A */
	{"64x64x8x8x4x2", 64, 64, 4},           /* 64 threads, k steps of 4 */
	{"128x128x8x8x16x4x0x4", 128, 128, 16}, /* four phases, warps 4 wide */
	{"64x128x8x8x16x2x0x8", 64, 128, 16},   /* 128 threads, warps 8 wide */
	{"128x64x8x8x16x2", 128, 64, 16},       /* 128 threads */
	{"256x128x16x8x8", 256, 128, 8},        /* 16x8 per thread */
	{"128x128x8x8x8x2x1x8", 128, 128, 8},   /* padding, warps 8 wide */
	{"32x128x4x16x16", 32, 128, 16},        /* 4x16 per thread: four column groups */
	{"64x64x8x4x16", 64, 64, 16},           /* the small tiling (T128_TILE_SMALL) */
};

/* Every shape (batch, in, out) of `shapes` forced to tiled128, for each
 * output subset, overwriting and accumulating, against float64; `label`
 * names them in the messages. Returns the failures. */
static unsigned run_shapes(const daemon_proc *d, const char *label, const uint64_t (*shapes)[3], size_t nshapes)
{
	static const unsigned subsets[] = {JC_ALL, JC_DW | JC_DB, JC_DX, JC_DB};
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	unsigned failed = 0, n = 0;
	char name[96], why[320];
	for (size_t s = 0; s < nshapes; s++) {
		for (unsigned k = 0; k < 4; k++) {
			for (int acc = 0; acc < 2; acc++) {
				jobcase jc;
				jobcase_init(&jc, shapes[s][0], shapes[s][1], shapes[s][2], subsets[k], acc);
				jc.skew = (s + k) % 3 == 2 ? 4 : 0; /* some tensors off the 16-byte grid */
				jobcase_layout(&jc);
				uint64_t reg;
				void *map = vkg_region_create(c, jc.size[0], &reg, &err);
				assert_non_null(map);
				assert_int_equal(jobcase_fill(&jc, &map, 500 + s * 10 + k * 2 + (unsigned)acc), 0);
				vkg_job j = jobcase_job(&jc, &reg);
				j.variant = "tiled128";
				vkg_result r;
				n++;
				if (vkg_linear_backward(c, &j, &r, &err) != 0) {
					fprintf(stderr, "%s %s: %s: %s\n", label, jobcase_name(&jc, name, sizeof(name)),
						err.code, err.message);
					failed++;
				} else if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)) != 0) {
					fprintf(stderr, "%s %s: %s\n", label, jobcase_name(&jc, name, sizeof(name)),
						why);
					failed++;
				}
				assert_int_equal(vkg_region_destroy(c, reg, map, jc.size[0], &err), 0);
				jobcase_free(&jc);
			}
		}
	}
	printf("%s: %u cases, %u failed (tol %g)\n", label, n, failed, JC_TOL_F32);
	vkg_close(c);
	return failed;
}

static unsigned run_tiling(const daemon_proc *d, const tcase *t)
{
	const uint64_t M = t->bm, N = t->bn, K = t->bk;
	/* batch, in, out: dW is out x in over batch, dX batch x in over out */
	const uint64_t shapes[][3] = {
		{1, 1, 1},
		{K - 1, N + 1, M - 1},
		{K + 1, N - 1, M + 1},
		{2 * K, N, M},             /* exact tiles, vector loads */
		{M + 1, N + 1, K + 1},     /* dX: M + 1 rows over K + 1 */
		{M - 1, 1, K - 1},         /* one column */
		{1, N + 3, M + 4},         /* one row */
		{2 * M + 1, 2 * N + 4, 3 * K + 4}, /* several tiles, multiples of 4 */
		{M + 4, 2 * N, M + 8},
	};
	char label[96];
	snprintf(label, sizeof(label), "VKGRAD_T128_TILE=%s", t->tile);
	return run_shapes(d, label, shapes, sizeof(shapes) / sizeof(shapes[0]));
}

/* A daemon with tiling `tile` and command-line arguments args (NULL:
 * none); its log names the tiling. */
static void start_with_args(daemon_proc *d, const char *tile, const char *const *args)
{
	char env[96], want[128];
	snprintf(env, sizeof(env), "VKGRAD_T128_TILE=%s", tile);
	const char *const envs[] = {env, NULL};
	memset(d, 0, sizeof(*d));
	assert_int_equal(daemon_proc_start(d, args, envs), 0);
	unsigned bm, bn;
	assert_int_equal(sscanf(tile, "%ux%u", &bm, &bn), 2);
	snprintf(want, sizeof(want), "VKGRAD_T128_TILE: linear_tiled128_gemm (f32) with %ux%u tiles", bm, bn);
	assert_true(daemon_proc_log_contains(d, want));
}

static void start_with(daemon_proc *d, const char *tile)
{
	start_with_args(d, tile, NULL);
}

static void test_tilings(void **state)
{
	(void)state;
	unsigned failed = 0;
	for (size_t i = 0; i < sizeof(tilings) / sizeof(tilings[0]); i++) {
		daemon_proc d;
		start_with(&d, tilings[i].tile);
		failed += run_tiling(&d, &tilings[i]);
		assert_int_equal(daemon_proc_stop(&d), 0);
	}
	assert_int_equal(failed, 0);
}

/* The small tiling beside the default (KERN_TILED128_S, T128_TILE_SMALL):
 * a daemon without VKGRAD_T128_TILE says it has it, and runs a forced
 * tiled128 f32 dX of in <= 64 on it (refine_t128_small): shapes at its
 * 64x64 tile's and 16-row k step's edges, in from 1 to 64, every output
 * subset (dW/db stay on the 128x128 tiles), against float64. */
static void test_small_tiling(void **state)
{
	(void)state;
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	assert_true(daemon_proc_log_contains(&d, "small tiling: linear_tiled128_gemm (f32) with 64x64 tiles"));
	const uint64_t shapes[][3] = {
		{1, 1, 1},
		{63, 64, 15},
		{65, 63, 17},
		{128, 64, 32},  /* exact tiles, vector loads */
		{129, 33, 17},
		{200, 1, 300},  /* one column, a long k */
		{1, 61, 68},    /* one row */
		{260, 64, 48},
		{1000, 16, 7},
	};
	const unsigned failed = run_shapes(&d, "the small tiling", shapes, sizeof(shapes) / sizeof(shapes[0]));
	assert_int_equal(daemon_proc_stop(&d), 0);
	assert_int_equal(failed, 0);
}

/* Tiles other than 128x128 cut into many small dispatches (each a range
 * of row and column tiles: m_base, n_base) through the device-local path. */
static void test_small_dispatches(void **state)
{
	(void)state;
	static const char *const args[] = {"--devlocal-min-bytes", "1", "--dispatch-max-macs", "100000", NULL};
	static const tcase t[] = {{"128x64x8x4x16x1x0x8", 128, 64, 16}, {"64x128x8x8x16x2", 64, 128, 16}};
	for (int i = 0; i < 2; i++) {
		daemon_proc d;
		start_with_args(&d, t[i].tile, args);
		assert_int_equal(run_tiling(&d, &t[i]), 0);
		vkg_error err;
		vkg_client *c = vkg_connect(d.sock, &err);
		assert_non_null(c);
		vkg_stats st;
		assert_int_equal(vkg_stats_get(c, &st, &err), 0);
		vkg_close(c);
		assert_int_equal(st.devlocal_jobs, st.jobs_done);
		assert_true(st.dispatches > 2 * st.jobs_done);
		assert_int_equal(daemon_proc_stop(&d), 0);
	}
}

/* dW + db over a batch of K rows (in = out = 1) and dX over out = K at k
 * steps of 4: more loop trips than one dispatch may take unless the
 * dispatches are cut by the tiling's BK (at 16 per trip, the fixed
 * kernel's, they would be cut 4 times too coarsely). The daemon's loop
 * bound is 1/128 of the default (--loop-trips 256) and K = 600,000 / 128
 * = 4,688: the same 5 pieces the default bound cuts 600,000 rows into
 * (more than the 65,535 trips llvmpipe runs in one dispatch; 1/128 of the
 * work), so each job must raise the dispatches counter by at least 5. */
static void test_long_reduction_at_bk4(void **state)
{
	(void)state;
	enum { K = 600000 / 128, PIECES = 5 };
	daemon_proc d;
	static const char *const args[] = {"--loop-trips", "256", NULL};
	start_with_args(&d, "32x32x4x8x4", args);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	static const uint64_t shapes[][4] = {{K, 1, 1, JC_DW | JC_DB}, {1, 1, K, JC_DX}};
	for (int s = 0; s < 2; s++) {
		jobcase jc;
		jobcase_init(&jc, shapes[s][0], shapes[s][1], shapes[s][2], (unsigned)shapes[s][3], false);
		jobcase_layout(&jc);
		uint64_t reg;
		void *map = vkg_region_create(c, jc.size[0], &reg, &err);
		assert_non_null(map);
		assert_int_equal(jobcase_fill(&jc, &map, 91 + (unsigned)s), 0);
		vkg_job j = jobcase_job(&jc, &reg);
		j.variant = "tiled128";
		vkg_result r;
		vkg_stats st0, st1;
		char name[96], why[320];
		assert_int_equal(vkg_stats_get(c, &st0, &err), 0);
		if (vkg_linear_backward(c, &j, &r, &err) != 0)
			fail_msg("%s: %s: %s", jobcase_name(&jc, name, sizeof(name)), err.code, err.message);
		assert_int_equal(vkg_stats_get(c, &st1, &err), 0);
		if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)) != 0)
			fail_msg("%s: %s", jobcase_name(&jc, name, sizeof(name)), why);
		if (st1.dispatches - st0.dispatches < PIECES)
			fail_msg("%s: %llu dispatches, want at least %d: not cut by BK 4",
				 jobcase_name(&jc, name, sizeof(name)),
				 (unsigned long long)(st1.dispatches - st0.dispatches), PIECES);
		printf("32x32x4x8x4 %s: within %g of float64, %llu dispatches\n",
		       jobcase_name(&jc, name, sizeof(name)), JC_TOL_F32,
		       (unsigned long long)(st1.dispatches - st0.dispatches));
		assert_int_equal(vkg_region_destroy(c, reg, map, jc.size[0], &err), 0);
		jobcase_free(&jc);
	}
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* Each bad value: the daemon exits non-zero at start, its log naming the
 * variable, the value, what is wrong and the accepted form. */
static void test_bad_values_refused(void **state)
{
	(void)state;
	static const struct {
		const char *value, *fault;
	} bad[] = {
		{"", "not a list of numbers"},
		{"big", "not a list of numbers"},
		{"128x128x8x8", "fewer than 5 numbers"},
		{"128x128x8x8x16x1x0x0x0", "more than 8 numbers"},
		{"128x128x8x8x16 ", "not a list of numbers"},
		{"128x128x8x8x-16", "not a list of numbers"},
		{"128x128x8x8x99999", "a number above 4096"},
		{"128x128x6x8x16", "TM and TN must be"},
		{"512x128x8x8x16", "BM and BN must be at most 256"},
		{"128x120x8x16x16", "multiples of TM and TN"},
		{"128x128x16x16x16", "a multiple of 32, at least BM"},
		{"128x128x8x8x12", "BK must be 4, 8, 16 or 32"},
		{"128x128x8x8x4", "multiples of 4 * threads"},
		{"128x128x8x8x8x4x0x0x", "not a list of numbers"},
		{"128x128x8x8x16x3", "SPLIT must be"},
		{"128x128x8x8x16x1x2", "PAD must be 0 or 1"},
		{"128x128x8x8x16x1x0x3", "WX must be"},
		{"128x128x8x8x16x1x0x32", "WX must be"}, /* 32 does not divide 16 threads along n */
		{"256x256x8x8x32", "bytes of shared memory per workgroup; the device offers"},
	};
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_init(&d), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		static char text[1 << 16];
		int ws;
		if (!daemon_proc_knob_refused(&d, "VKGRAD_T128_TILE", bad[i].value, &ws, text, sizeof(text)) ||
		    !strstr(text, bad[i].fault) ||
		    (!strstr(text, "the device offers") && !strstr(text, "the accepted form is BMxBNxTMxTNxBK")))
			fail_msg("VKGRAD_T128_TILE='%s': wait status %d, log:\n%s", bad[i].value, ws, text);
	}
	/* the same directory then serves with a good tiling */
	start_with(&d, "128x64x8x4x16");
	const tcase t = {"128x64x8x4x16", 128, 64, 16};
	assert_int_equal(run_tiling(&d, &t), 0);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_values_refused),
		cmocka_unit_test(test_tilings),
		cmocka_unit_test(test_small_tiling),
		cmocka_unit_test(test_small_dispatches),
		cmocka_unit_test(test_long_reduction_at_bk4),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	return rc || daemon_proc_failures;
}
