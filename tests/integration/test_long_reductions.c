/* tests/integration/test_long_reductions.c — reductions as long as max_dim
 * allows, on every kernel family (issue 13, fault 9).
 *
 * llvmpipe (lavapipe) stops every shader loop after 65,535 iterations —
 * one counter per shader invocation, shared by all its loops — without an
 * error: a kernel whose reduction loop runs longer returns a wrong sum. The
 * daemon cuts every reduction into dispatches of at most
 * RECORD_MAX_LOOP_TRIPS (daemon/kernels/record.h) loop iterations, on every device.
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
 * On lavapipe each job is one workgroup walking a million rows (a full
 * 64×64 or 128×128 tile for a 1×1 output: 2–20 s each), so the list is the
 * kernels, not every combination: f32 runs every family's own loop (auto
 * picks among the same kernels; split-K's dX is the tiled kernel), bf16 the
 * two families whose 16-bit loops take 8 rows per iteration (generic dW,
 * tiled128) and whose long reductions therefore go through split-K's f32
 * partials, and f16/bf16 the tensor-core kernels (coopmat, coopmat_khr,
 * coopmat_nv2) where the device has them. On
 * today's main (before the loop bound) generic and tiled128 came back
 * wrong: f32 dw = 131070 and 1048544 for 1048560.
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
	for (unsigned i = 0; i < g_info.n_kernels; i++)
		if (!strcmp(g_info.kernels[i].name, kernel) && !strcmp(g_info.kernels[i].dtype, dtype))
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
 * `dw_db` (dW and db) and dX, forced to `variant`; checks every output
 * element. Returns 0, or -1 with the problem in why. */
static int run_const(vkg_client *c, const char *variant, proto_dtype d, uint64_t B, uint64_t I,
		     uint64_t O, bool dw_db, char *why, size_t wn)
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
	j.dx = (vkg_tensor){reg, off[5]};
	vkg_result r;
	const double t0 = now_s();
	int rc = vkg_linear_backward(c, &j, &r, &err);
	printf("  %-8s %-4s %7llux%llux%-7llu %s %6.2f s\n", variant, j.dtype, (unsigned long long)B,
	       (unsigned long long)I, (unsigned long long)O, dw_db ? "dw,db,dx" : "dx      ",
	       now_s() - t0);
	if (rc != 0)
		snprintf(why, wn, "%s: %.200s", err.code, err.message);
	else if (dw_db && (check_all(d, m + off[3], n[3], cv * (double)B, "dw", why, wn) ||
			   check_all(d, m + off[4], n[4], cv * (double)B, "db", why, wn)))
		rc = -1;
	else if (check_all(d, m + off[5], n[5], cv * (double)O, "dx", why, wn))
		rc = -1;
	vkg_region_destroy(c, reg, m, at, &err);
	return rc;
}

/* The cases of dtype d the device offers, each on its shapes. */
static void run_dtype(proto_dtype d)
{
	const uint64_t D = g_info.max_dim;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	unsigned failed = 0, ran = 0;
	char why[512];
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const lcase *lc = &cases[k];
		if (lc->dtype != d)
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
			if (run_const(c, lc->variant, d, shp[s][0], shp[s][1], shp[s][2], s == 0, why,
				      sizeof(why)) != 0) {
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
	static const char *const args[] = {"--scratch-max-bytes", "1", NULL};
	assert_int_equal(daemon_proc_start(&d, args, NULL), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	char why[512];
	if (run_const(c, "generic", PROTO_BF16, g_info.max_dim, 1, 1, true, why, sizeof(why)) != 0)
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
	if (daemon_proc_start(&g_d, NULL, NULL) != 0)
		return -1;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	if (!c || vkg_hello(c, "test_long_reductions", &g_info, &err) != 0) {
		vkg_close(c);
		return -1;
	}
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
	};
	int rc = cmocka_run_group_tests_name("long_reductions", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
