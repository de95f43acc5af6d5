/* tests/integration/test_long_reductions.c — reductions as long as max_dim
 * allows, on every kernel family (issue 13, fault 9).
 *
 * llvmpipe (lavapipe) stops every shader loop after 65,535 iterations —
 * one counter per shader invocation, shared by all its loops — without an
 * error: a kernel whose reduction loop runs longer returns a wrong sum. The
 * daemon cuts every reduction into dispatches of at most
 * KSHAPE_MAX_LOOP_TRIPS (daemon/kernels/variant.h) loop iterations, on every
 * device.
 *
 * Each kernel family the device offers is forced on
 *   - "dW": batch = max_dim, in = out = 1, dW + db + dX: dW and db reduce
 *     over the whole batch;
 *   - "dX": batch = in = 1, out = max_dim, dX: dX reduces over all of out;
 * with constant tensors (X = W = 1, dY = c), so every output has an exact
 * float64 reference — dW = db = c·batch, dX = c·out — and the f32 partial
 * sums are exact integers times c: f32 results must be exact, f16/bf16
 * results the reference rounded once to their dtype (c = 1/32 for f16,
 * whose largest finite value is 65504).
 *
 * The families run against a daemon whose loop bound and max_dim are both
 * 128 times smaller than the defaults (--loop-trips 256, --max-dim 8176):
 * every reduction is cut into exactly the pieces a default daemon cuts
 * max_dim = 1048560 into (4 for the 8-row loops, 2 for the 16-row ones,
 * the 16-bit ones through split-K's f32 partials), on the same code paths,
 * at 1/128 of the work. (On lavapipe a 1048560-row reduction is one
 * workgroup walking a million rows, 2-20 s per job: over 4 minutes for the
 * list.) The default bound itself still runs at the default max_dim where
 * that is cheap: generic f32 dW/db (the seed kernel's loop at 131,070
 * iterations, past what llvmpipe counts, without the cut). f32 runs every family's own loop (auto picks among the
 * same kernels; split-K's dX is the tiled kernel), bf16 the two families
 * whose 16-bit loops take 8 rows per iteration (generic dW, tiled128) and
 * whose long reductions therefore go through split-K's f32 partials, and
 * f16/bf16 the tensor-core kernels (coopmat, coopmat_khr, coopmat_nv2)
 * where the device has them. On today's main (before the loop bound)
 * generic and tiled128 came back wrong: f32 dw = 131070 and 1048544 for
 * 1048560.
 *
 * Where scratch cannot hold the partials, a 16-bit reduction is cut in
 * place (a rounding per piece): a daemon with a 1-byte scratch cap must
 * still return the whole sum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_proc.h"
#include "ref.h"
#include "vkgrad.h"

static daemon_proc g_d;
static vkg_info g_info;
/* every kernel hello listed (vkg_info.kernels holds the first 32) */
static vkg_kernel_info g_kern[256];
static unsigned g_nkern;

/* the loop bound and max_dim both 1/128 of the defaults (32768, 1048560) */
#define SMALL_ARGS "--loop-trips", "256", "--max-dim", "8176"
#define DEFAULT_MAX_DIM 1048560u

/* One forced family on one dtype: its kernel as hello names it (NULL:
 * always there), on the dW shape and/or the dX shape. */
typedef struct lcase {
	const char *variant, *kernel;
	proto_dtype dtype;
	bool dw, dx;
} lcase;

static const lcase cases[] = {
	{"generic", NULL, PROTO_F32, true, true},
	{"tiled", "linear_tiled_gemm", PROTO_F32, true, true},
	{"tiled128", "linear_tiled128_gemm", PROTO_F32, true, true},
	{"splitk", "linear_splitk_gemm", PROTO_F32, true, false},
	{"splitk128", "linear_splitk128_gemm", PROTO_F32, true, true}, /* 64 slices of 128 */
	{"splitk128", "linear_splitk128_gemm", PROTO_BF16, true, true},
	{"generic", NULL, PROTO_BF16, true, true},
	{"tiled128", "linear_tiled128_gemm", PROTO_BF16, true, true},
	{"coopmat", "linear_coopmat_gemm", PROTO_F16, true, true},
	{"coopmat_khr", "linear_coopmat_khr_gemm", PROTO_F16, true, true},
	{"coopmat_khr", "linear_coopmat_khr_gemm", PROTO_BF16, true, true},
	{"coopmat_nv2", "linear_coopmat_nv2_gemm", PROTO_F16, true, true},
	{"coopmat_nv2", "linear_coopmat_nv2_gemm", PROTO_BF16, true, true},
};

static bool offered(const char *kernel, const char *dtype)
{
	if (!kernel)
		return true;
	for (unsigned i = 0; i < g_nkern; i++)
		if (!strcmp(g_kern[i].name, kernel) && !strcmp(g_kern[i].dtype, dtype))
			return true;
	return false;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n elements of dtype d at p, all v (exactly representable). */
static void fill(proto_dtype d, void *p, size_t n, float v)
{
	if (d == PROTO_F32) {
		for (size_t i = 0; i < n; i++)
			((float *)p)[i] = v;
		return;
	}
	uint16_t h = d == PROTO_F16 ? vkg_ref_f16_from_float(v) : vkg_ref_bf16_from_float(v);
	for (size_t i = 0; i < n; i++)
		((uint16_t *)p)[i] = h;
}

/* Every one of the n elements at p is `want` rounded once to dtype d;
 * otherwise the first wrong one into why. */
static int check_all(proto_dtype d, const void *p, size_t n, double want, const char *what,
		     char *why, size_t wn)
{
	float w = (float)want;
	if (d == PROTO_F16)
		w = vkg_ref_f16_to_float(vkg_ref_f16_from_float(w));
	else if (d == PROTO_BF16)
		w = vkg_ref_bf16_to_float(vkg_ref_bf16_from_float(w));
	for (size_t i = 0; i < n; i++) {
		double got = vkg_ref_load_one(d, p, i);
		if (got != (double)w) {
			snprintf(why, wn, "%s[%zu] = %.9g, want %.9g (%.9g rounded once to %s)", what,
				 i, got, (double)w, want, proto_dtype_name(d));
			return -1;
		}
	}
	return 0;
}

/* One job of shape B×I×O on constant tensors (X = W = 1, dY = c), outputs
 * dW and db (`dw_db`) and dX (`dx`), forced to `variant`; checks every
 * output element and, with max_k_cut (every reduction longer than one
 * dispatch's loop bound), that the daemon's dispatches counter grew by at
 * least two per long reduction: a bound that cut nothing would pass the
 * sums at 1/128 of max_dim. Returns 0, or -1 with the problem in why. */
static int run_const(vkg_client *c, const char *variant, proto_dtype d, uint64_t B, uint64_t I,
		     uint64_t O, bool dw_db, bool dx, bool max_k_cut, char *why, size_t wn)
{
	const size_t es = proto_dtype_size(d);
	const float cv = d == PROTO_F16 ? 1.0f / 32 : 1.0f;
	/* x | dy | w | dw | db | dx, each at a multiple of 256 bytes */
	const uint64_t n[6] = {B * I, B * O, O * I, O * I, O, B * I};
	uint64_t off[6], at = 0;
	for (int t = 0; t < 6; t++) {
		off[t] = at;
		at += (n[t] * es + 255) / 256 * 256;
	}
	vkg_error err;
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, at, &reg, &err);
	if (!m) {
		snprintf(why, wn, "region of %llu bytes: %s: %.200s", (unsigned long long)at, err.code,
			 err.message);
		return -1;
	}
	fill(d, m + off[0], n[0], 1.0f);
	fill(d, m + off[1], n[1], cv);
	fill(d, m + off[2], n[2], 1.0f);
	memset(m + off[3], 0xff, at - off[3]); /* NaN in every output */
	vkg_job j = vkg_job_init();
	j.dtype = proto_dtype_name(d);
	j.batch = B, j.in = I, j.out = O;
	j.variant = variant;
	j.x = (vkg_tensor){reg, off[0]};
	j.dy = (vkg_tensor){reg, off[1]};
	j.w = (vkg_tensor){reg, off[2]};
	if (dw_db) {
		j.dw = (vkg_tensor){reg, off[3]};
		j.db = (vkg_tensor){reg, off[4]};
	}
	if (dx)
		j.dx = (vkg_tensor){reg, off[5]};
	vkg_result r;
	vkg_stats st0, st1;
	const double t0 = now_s();
	int rc = vkg_stats_get(c, &st0, &err);
	if (rc == 0)
		rc = vkg_linear_backward(c, &j, &r, &err);
	if (rc == 0)
		rc = vkg_stats_get(c, &st1, &err);
	printf("  %-8s %-4s %7llux%llux%-7llu %s %6.2f s\n", variant, j.dtype, (unsigned long long)B,
	       (unsigned long long)I, (unsigned long long)O, dw_db ? (dx ? "dw,db,dx" : "dw,db   ") : "dx      ",
	       now_s() - t0);
	/* each reduction over B (dW, db) or O (dX) longer than the bound is cut:
	 * at least two dispatches for it, one more for a dX of 1 */
	const uint64_t min_disp = (B > 1 ? 2 : 0) + (O > 1 ? 2 : dx ? 1 : 0);
	if (rc != 0)
		snprintf(why, wn, "%s: %.200s", err.code, err.message);
	else if (max_k_cut && st1.dispatches - st0.dispatches < min_disp) {
		snprintf(why, wn, "%llu dispatches, want at least %llu: the reduction was not cut",
			 (unsigned long long)(st1.dispatches - st0.dispatches), (unsigned long long)min_disp);
		rc = -1;
	} else if (dw_db && (check_all(d, m + off[3], n[3], cv * (double)B, "dw", why, wn) ||
			   check_all(d, m + off[4], n[4], cv * (double)B, "db", why, wn)))
		rc = -1;
	else if (dx && check_all(d, m + off[5], n[5], cv * (double)O, "dx", why, wn))
		rc = -1;
	vkg_region_destroy(c, reg, m, at, &err);
	return rc;
}

/* The cases of dtype d the device offers, each on its shapes of D rows,
 * against the daemon on `sock`; only generic when generic_only. */
static void run_dtype_on(const char *sock, proto_dtype d, uint64_t D, bool generic_only)
{
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	assert_non_null(c);
	unsigned failed = 0, ran = 0;
	char why[512];
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const lcase *lc = &cases[k];
		if (lc->dtype != d || (generic_only && strcmp(lc->variant, "generic") != 0))
			continue;
		if (!offered(lc->kernel, proto_dtype_name(d))) {
			printf("  %-8s %-4s not offered by this device: skipped\n", lc->variant,
			       proto_dtype_name(d));
			continue;
		}
		const uint64_t shp[2][3] = {{D, 1, 1}, {1, 1, D}};
		for (int s = 0; s < 2; s++) {
			if (!(s == 0 ? lc->dw : lc->dx))
				continue;
			ran++;
			if (run_const(c, lc->variant, d, shp[s][0], shp[s][1], shp[s][2], s == 0, true,
				      true, why, sizeof(why)) != 0) {
				fprintf(stderr, "%s %s %llux%llux%llu: %s\n", lc->variant,
					proto_dtype_name(d), (unsigned long long)shp[s][0],
					(unsigned long long)shp[s][1], (unsigned long long)shp[s][2], why);
				failed++;
			}
		}
	}
	printf("%s: %u of %u jobs at max_dim %llu wrong\n", proto_dtype_name(d), failed, ran,
	       (unsigned long long)D);
	vkg_close(c);
	assert_int_equal(failed, 0);
	if (ran == 0) {
		printf("SKIP: no %s case runs on this device\n", proto_dtype_name(d));
		skip();
	}
}

static void run_dtype(proto_dtype d)
{
	assert_int_equal(g_info.max_dim, 8176);
	run_dtype_on(g_d.sock, d, g_info.max_dim, false);
}

/* The default loop bound at the default max_dim where that is cheap: the
 * seed kernel's dW and db over 1048560 rows (131,070 iterations of its
 * loop, past the 65,535 llvmpipe counts, 0.5 s on lavapipe), f32. (Every
 * other family's loop over a million rows walks 64x64 or 16x16 tiles, and
 * so does bf16's split-K: 15-40 s each on lavapipe; the same cuts run at
 * 1/128 above.) */
static void test_generic_at_default_bound_is_whole(void **state)
{
	(void)state;
	daemon_proc d = {0};
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	vkg_error err;
	vkg_info info;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	assert_int_equal(vkg_hello(c, "test_long_reductions", &info, &err), 0);
	assert_int_equal(info.max_dim, DEFAULT_MAX_DIM);
	char why[512];
	if (run_const(c, "generic", PROTO_F32, info.max_dim, 1, 1, true, false, true, why, sizeof(why)) != 0)
		fail_msg("generic f32 %llux1x1: %s", (unsigned long long)info.max_dim, why);
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static void test_f32_reductions_of_max_dim_are_exact(void **state)
{
	(void)state;
	run_dtype(PROTO_F32);
}

static void test_bf16_reductions_of_max_dim_round_once(void **state)
{
	(void)state;
	run_dtype(PROTO_BF16);
}

static void test_f16_reductions_of_max_dim_round_once(void **state)
{
	(void)state;
	run_dtype(PROTO_F16);
}

/* A daemon whose scratch cannot hold split-K's partials (1 byte per slot)
 * runs a long 16-bit reduction cut in place (one rounding per piece), still
 * within the loop bound: the sum is complete, never silently short. */
static void test_bf16_without_scratch_is_cut_in_place(void **state)
{
	(void)state;
	daemon_proc d = {0};
	static const char *const args[] = {"--scratch-max-bytes", "1", SMALL_ARGS, NULL};
	assert_int_equal(daemon_proc_start(&d, args, NULL), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	char why[512];
	if (run_const(c, "generic", PROTO_BF16, g_info.max_dim, 1, 1, true, true, true, why, sizeof(why)) !=
	    0)
		fail_msg("generic bf16 %llux1x1 without scratch: %s", (unsigned long long)g_info.max_dim,
			 why);
	vkg_stats st;
	assert_int_equal(vkg_stats_get(c, &st, &err), 0);
	assert_int_equal(st.splitk_jobs, 0); /* it did run without partials */
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {SMALL_ARGS, NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	if (!c || vkg_hello(c, "test_long_reductions", &g_info, &err) != 0) {
		vkg_close(c);
		return -1;
	}
	for (g_nkern = 0; g_nkern < g_info.n_kernels && g_nkern < 256; g_nkern++)
		if (vkg_info_kernel(c, g_nkern, &g_kern[g_nkern]) != 0)
			break;
	vkg_close(c);
	printf("max_dim %llu on %s\n", (unsigned long long)g_info.max_dim, g_info.device_name);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32_reductions_of_max_dim_are_exact),
		cmocka_unit_test(test_bf16_reductions_of_max_dim_round_once),
		cmocka_unit_test(test_f16_reductions_of_max_dim_round_once),
		cmocka_unit_test(test_bf16_without_scratch_is_cut_in_place),
		cmocka_unit_test(test_generic_at_default_bound_is_whole),
	};
	int rc = cmocka_run_group_tests_name("long_reductions", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
