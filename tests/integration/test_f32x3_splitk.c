/* tests/integration/test_f32x3_splitk.c — split-K of f32 dW/db on the bf16
 * tensor cores (linear_coopmat_khr_f32x3_splitk_gemm + linear_narrow_reduce,
 * variant `coopmat_khr_f32_splitk`, forced only; issue 37): narrow, long
 * f32 layers, each f32 operand as hi + lo bf16, three products per k step.
 *
 * Where the device offers it (hello lists linear_coopmat_khr_f32x3_splitk_gemm
 * for f32: a GPU with VK_KHR_cooperative_matrix and bf16 matrices):
 *  - odd shapes (65,537×3×5, 262,147×33×17, 131,071×64×64, 20,000×257×2),
 *    dW / db / dW+db (and twice with dX, which runs coopmat_khr_f32x3), with
 *    accumulate and without, forced, against the float64 reference of the
 *    inputs, two ways:
 *      · per element, the bound of tests/unit/test_f32x3_numerics.c's
 *        analysis: |got − want| <= c·(Σ_k |a_k·b_k| + |old|) + 2^-24·|want|
 *        with c = 3.03·2^-16 + 1.01·γ(3·2L + 2S + 4), γ(n) = n·2^-24 / (1 −
 *        n·2^-24): three bf16 products per term (each at most 3·2^-16
 *        relative off), one slice's L rows summed in f32, the S slices'
 *        partials added in f32 (linear_narrow_reduce), the accumulate add
 *        and one rounding; L and S are the daemon's plan (variant.h:
 *        variant_cmks_slices, forced: slices of at least 64 rows, about 528 /
 *        tiles of them), taken here at twice their length and count. db
 *        sums unsplit f32 values, inside the same bound; dX (coopmat_khr_f32x3,
 *        one slice of K = out) likewise with L = out, S = 1;
 *      · normwise (vkg_ref_max_rel_err) at f32's VKG_REF_TOL_F32 = 1e-4. The
 *        worst-case bound above does not fit 1e-4 normwise for these K
 *        (Σ|a·b| is up to ~100 times max|want| on random inputs), but the
 *        analysis' typical error of random inputs is a few 2^-20 (~3e-6;
 *        test_f32x3_numerics prints it), so every correct run passes with a
 *        wide margin; a slice lost or counted twice (an error of about one
 *        slice's sum, ~1e-2 normwise) fails it where the per-element bound
 *        alone would not;
 *    every byte outside the outputs (canaries between the tensors, the
 *    inputs) as written before;
 *  - tensors off the 16-byte grid (scalar loads, element-wise partials);
 *  - on a daemon whose loops stop after 16 trips (--loop-trips 16, the
 *    least the daemon takes: slices of at most 1,024 rows, many of them) and
 *    whose grids are cut into small dispatches;
 *  - determinism: the same job twice, the same bytes;
 *  - stats.splitk_jobs counts a forced job;
 *  - no Vulkan validation error.
 * Everywhere (lavapipe lacks VK_KHR_cooperative_matrix, so there the tests
 * above skip, saying why): f16/bf16 forced to it are `unsupported` naming
 * the variant and dtype f32; where f32 is not offered, forcing it is
 * `unsupported` naming what is missing (lavapipe: VK_KHR_cooperative_matrix)
 * with nothing written; the daemon still serves; and auto never picks it
 * (f32 131,071×64×64 dW+db under auto: no split-K job counted, correct). */
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

#define VARIANT "coopmat_khr_f32_splitk"
#define KERNEL "linear_coopmat_khr_f32x3_splitk_gemm"

/* g_d: plain; g_cut: loops cut at 16 trips, small dispatches (started only
 * where the variant runs) */
static daemon_proc g_d, g_cut;
static bool g_cut_up;
static bool g_offered; /* hello lists KERNEL for f32 */
static char g_device[128];

enum { X = BWJOB_T_X, DY = BWJOB_T_DY, W = BWJOB_T_W, DW = BWJOB_T_DW, DB = BWJOB_T_DB, DX = BWJOB_T_DX,
       NT = BWJOB_NT };
enum { O_DW = BWJOB_DW, O_DB = BWJOB_DB, O_DX = BWJOB_DX };

static uint64_t cdiv(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* The daemon's forced plan for B×I×O (variant.h, variant_cmks_slices with
 * slices of at least 64 rows; kshape_cmks_len): slice length *L, slices
 * *S; loop bound `trips` (64 rows per trip). */
static void plan_of(uint64_t B, uint64_t I, uint64_t O, bool dw, uint64_t trips, uint64_t *L, uint64_t *S)
{
	const uint64_t tiles = cdiv(O, 64) * (dw ? cdiv(I, 64) : 1);
	uint64_t s = 528 / tiles;
	if (s > B / 64)
		s = B / 64;
	if (s < cdiv(B, 64 * trips))
		s = cdiv(B, 64 * trips);
	if (s < 1)
		s = 1;
	*L = cdiv(cdiv(B, s), 64) * 64;
	*S = cdiv(B, *L);
}

static double gamma_n(double n)
{
	const double u = ldexp(1.0, -24);
	return n * u / (1.0 - n * u);
}

/* want and Σ|terms| in float64, dW[o][i] = Σ_b dy[b][o]·x[b][i], db[o] =
 * Σ_b dy[b][o], dX[b][i] = Σ_o dy[b][o]·w[o][i] */
static void reference(uint64_t B, uint64_t I, uint64_t O, float *const *val, const bool present[NT],
		      double *want[NT], double *mag[NT])
{
	for (uint64_t b = 0; b < B; b++) {
		const float *xr = val[X] + b * I, *dyr = val[DY] + b * O;
		for (uint64_t o = 0; o < O; o++) {
			const double g = dyr[o];
			if (present[DB]) {
				want[DB][o] += g;
				mag[DB][o] += fabs(g);
			}
			if (present[DW])
				for (uint64_t i = 0; i < I; i++) {
					want[DW][o * I + i] += g * xr[i];
					mag[DW][o * I + i] += fabs(g * xr[i]);
				}
			if (present[DX])
				for (uint64_t i = 0; i < I; i++) {
					want[DX][b * I + i] += g * val[W][o * I + i];
					mag[DX][b * I + i] += fabs(g * val[W][o * I + i]);
				}
		}
	}
}

#define TRIPS_ALL 32768u /* the daemon's default loop bound (KSHAPE_LOOP_TRIPS_MAX) */
static const uint64_t trips_all = TRIPS_ALL;

/* bwjob's checker: every output element within coopmat_khr_f32x3's bound
 * for the forced plan at loop bound *(const uint64_t *)ctx (oc->bound: the
 * first past it), and the normwise error against the same reference. */
static void check_f32x3(const bwjob_result *r, bwjob_outcome *oc, const void *ctx)
{
	const uint64_t trips = *(const uint64_t *)ctx;
	double *want[NT] = {0}, *mag[NT] = {0};
	for (int t = DW; t < NT; t++)
		if (r->present[t]) {
			want[t] = calloc(r->n[t], sizeof(double));
			mag[t] = calloc(r->n[t], sizeof(double));
			assert_non_null(want[t]);
			assert_non_null(mag[t]);
		}
	reference(r->B, r->I, r->O, r->val, r->present, want, mag);
	uint64_t L, S;
	plan_of(r->B, r->I, r->O, r->present[DW], trips, &L, &S);
	for (int t = DW; t < NT; t++) {
		if (!r->present[t])
			continue;
		/* dX: coopmat_khr_f32x3, one pass over K = out */
		const double cl = t == DX ? (double)r->O : 2.0 * (double)L, cs = t == DX ? 1.0 : 2.0 * (double)S;
		const double cb = 3.03 * ldexp(1.0, -16) + 1.01 * gamma_n(3.0 * cl + 2.0 * cs + 4.0);
		const float *got = r->got[t];
		double *based = r->acc ? malloc(r->n[t] * sizeof(double)) : NULL;
		for (uint64_t i = 0; i < r->n[t]; i++) {
			const double old = r->acc ? r->val[t][i] : 0.0, w = want[t][i] + old;
			if (based)
				based[i] = r->val[t][i];
			const double lim = cb * (mag[t][i] + fabs(old)) + ldexp(fabs(w), -24);
			if (!(fabs((double)got[i] - w) <= lim) && !oc->bound[0])
				snprintf(oc->bound, sizeof(oc->bound),
					 "%s[%llu] = %.9g, want %.9g: off by %.3g > bound %.3g (Σ|terms| %.4g, L %llu, S %llu)",
					 t == DW ? "dw" : t == DB ? "db" : "dx", (unsigned long long)i, (double)got[i], w,
					 fabs((double)got[i] - w), lim, mag[t][i], (unsigned long long)L,
					 (unsigned long long)S);
		}
		/* (vkg_ref_max_rel_err adds `based` to want itself) */
		const double e = vkg_ref_max_rel_err(got, want[t], based, r->n[t]);
		oc->err = e > oc->err || isnan(e) ? e : oc->err;
		free(based);
		free(want[t]);
		free(mag[t]);
	}
}

/* An f32 job on VARIANT that must succeed within both tolerances, touching
 * nothing else; 0 or 1 (printed) */
static unsigned check_job(const char *sock, uint64_t trips, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
			  bool acc, uint64_t seed, uint64_t skew)
{
	return bwjob_check_checked(sock, PROTO_F32, B, I, O, outs, acc, VARIANT, seed, skew, check_f32x3, &trips);
}

/* The job whole: bwjob_run_checked at the default loop bound. */
static bwjob_outcome run_job(const char *sock, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			     const char *variant, uint64_t seed)
{
	return bwjob_run_checked(sock, PROTO_F32, B, I, O, outs, acc, variant, seed, 0, false, check_f32x3,
				 &trips_all);
}

/* Skip (printed) where f32 does not have it. */
static bool offered(const char *test)
{
	if (g_offered)
		return true;
	printf("SKIP %s: %s does not offer variant %s (no %s pipeline: it needs VK_KHR_cooperative_matrix "
	       "with bf16 matrices); its refusal is checked by test_refused_where_absent_never_auto\n",
	       test, g_device, VARIANT, KERNEL);
	return false;
}

static const uint64_t odd[][3] = {{65537, 3, 5}, {262147, 33, 17}, {131071, 64, 64}, {20000, 257, 2}};

static void test_odd_shapes_every_output_subset(void **state)
{
	(void)state;
	if (!offered("odd shapes")) {
		skip();
		return;
	}
	static const unsigned subsets[] = {O_DW, O_DB, O_DW | O_DB};
	unsigned failed = 0, n = 0;
	for (size_t s = 0; s < sizeof(odd) / sizeof(odd[0]); s++)
		for (unsigned k = 0; k < 3; k++)
			for (int acc = 0; acc < 2; acc++, n++)
				failed += check_job(g_d.sock, TRIPS_ALL, odd[s][0], odd[s][1], odd[s][2], subsets[k], acc,
						    100 + n, 0);
	/* with dX (coopmat_khr_f32x3's) and every output */
	failed += check_job(g_d.sock, TRIPS_ALL, 20000, 257, 2, O_DW | O_DB | O_DX, true, 300, 0);
	failed += check_job(g_d.sock, TRIPS_ALL, 131071, 64, 64, O_DW | O_DB | O_DX, false, 310, 0);
	n += 2;
	printf("%s odd shapes: %u jobs, %u failed\n", VARIANT, n, failed);
	assert_int_equal(failed, 0);
}

/* Tensors 4 bytes off the 16-byte grid: no vector loads, partials written
 * one by one; aligned sizes that would otherwise take the vector path. */
static void test_unaligned_tensors(void **state)
{
	(void)state;
	if (!offered("unaligned tensors")) {
		skip();
		return;
	}
	unsigned failed = 0;
	failed += check_job(g_d.sock, TRIPS_ALL, 131071, 64, 64, O_DW | O_DB, true, 400, 4);
	failed += check_job(g_d.sock, TRIPS_ALL, 65537, 3, 5, O_DW | O_DB, false, 410, 4);
	assert_int_equal(failed, 0);
}

/* Loops cut at 16 trips (slices of at most 1,024 rows; --loop-trips takes
 * 16-32768) and grids in small dispatches, device-local. */
static void test_loop_bound_small_dispatches(void **state)
{
	(void)state;
	if (!offered("loop bound, small dispatches")) {
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
	failed += check_job(g_cut.sock, 16, 131071, 64, 64, O_DW | O_DB, false, 500, 0);
	failed += check_job(g_cut.sock, 16, 262147, 33, 17, O_DW | O_DB, true, 510, 0);
	failed += check_job(g_cut.sock, 16, 20000, 257, 2, O_DB, true, 520, 0);
	assert_int_equal(failed, 0);
	expect_validation_clean(&g_cut, 0, "coopmat_khr_f32_splitk, loops cut, small dispatches");
}

/* The same job twice: the same bytes (slices in a fixed order, no atomics);
 * a forced job counts in stats.splitk_jobs. */
static void test_same_bits_every_run(void **state)
{
	(void)state;
	if (!offered("same bits")) {
		skip();
		return;
	}
	proto_stats s0, s1;
	assert_int_equal(rawsock_stats(g_d.sock, &s0), 0);
	assert_int_equal(bwjob_same_bits_checked(g_d.sock, PROTO_F32, 131071, 64, 64, O_DW | O_DB, true, VARIANT, 7, 0,
						 check_f32x3, &trips_all),
			 0);
	assert_int_equal(rawsock_stats(g_d.sock, &s1), 0);
	assert_int_equal(s1.splitk_jobs, s0.splitk_jobs + 2);
	expect_validation_clean(&g_d, 0, "coopmat_khr_f32_splitk");
}

/* Everywhere: f16/bf16 forced to it are `unsupported` (it is f32's), and
 * where f32 does not have it (lavapipe) so is f32, naming what is missing;
 * nothing is written; the daemon serves on; auto never takes it (no
 * split-K job counted for the narrow, long f32 shape, which the narrow
 * family runs). */
static void test_refused_where_absent_never_auto(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	expect_refused_untouched(c, "f16", VARIANT, "unsupported", "variant '" VARIANT "' needs dtype f32",
				 "this job is f16");
	expect_refused_untouched(c, "bf16", VARIANT, "unsupported", "variant '" VARIANT "' needs dtype f32",
				 "this job is bf16");
	const bool lvp = strstr(g_device, "llvmpipe") != NULL;
	if (g_offered) {
		printf("%s f32 is served on %s: checked by the tests above\n", VARIANT, g_device);
	} else {
		expect_refused_untouched(c, "f32", VARIANT, "unsupported", "variant '" VARIANT "' needs",
					 lvp ? "VK_KHR_cooperative_matrix" : "this job is f32");
		/* a larger job, forced, accumulating: refused, nothing written */
		bwjob_outcome oc = run_job(g_d.sock, 20000, 257, 2, O_DW | O_DB, true, VARIANT, 700);
		assert_int_equal(oc.rc, -1);
		assert_string_equal(oc.code, "unsupported");
		assert_non_null(strstr(oc.message, "variant '" VARIANT "' needs"));
		if (oc.why[0])
			fail_msg("refused f32 job: %s", oc.why);
		printf("%s f32 refused: %s\n", VARIANT, oc.message);
	}
	vkg_close(c);
	assert_true(rawsock_daemon_serves(g_d.sock));
	/* auto on the narrow, long f32 shape: never split-K on the tensor
	 * cores (nor any split-K: the narrow family), correct */
	proto_stats s0, s1;
	assert_int_equal(rawsock_stats(g_d.sock, &s0), 0);
	bwjob_outcome oc = run_job(g_d.sock, 65536, 64, 64, O_DW | O_DB, false, "auto", 710);
	assert_int_equal(oc.rc, 0);
	if (!(oc.err <= VKG_REF_TOL_F32) || oc.why[0])
		fail_msg("auto f32 65536x64x64: max_rel_err %.3g %s", oc.err, oc.why);
	assert_int_equal(rawsock_stats(g_d.sock, &s1), 0);
	assert_int_equal(s1.splitk_jobs, s0.splitk_jobs);
	expect_validation_clean(&g_d, 0, "coopmat_khr_f32_splitk refused, auto");
	if (lvp)
		assert_false(g_offered); /* lavapipe never offers it */
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--no-cost-model", NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	proto_hello h;
	expect_hello(g_d.sock, &h);
	/* listed in hello for f32 only */
	bool offered[3];
	if (bwjob_offered(g_d.sock, "test_f32x3_splitk", KERNEL, VARIANT, BWJOB_F32_ONLY, offered, g_device, sizeof(g_device)) != 0)
		return -1;
	g_offered = offered[PROTO_F32];
	if (g_offered != expect_hello_lists(&h, VARIANT, PROTO_F32) || expect_hello_lists(&h, VARIANT, PROTO_F16) ||
	    expect_hello_lists(&h, VARIANT, PROTO_BF16))
		return -1;
	printf("%s on %s: f32 %s\n", VARIANT, g_device, g_offered ? "offered" : "absent");
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
		cmocka_unit_test(test_refused_where_absent_never_auto),
		cmocka_unit_test(test_odd_shapes_every_output_subset),
		cmocka_unit_test(test_unaligned_tensors),
		cmocka_unit_test(test_loop_bound_small_dispatches),
		cmocka_unit_test(test_same_bits_every_run),
	};
	return cmocka_run_group_tests_name("f32x3_splitk", tests, group_setup, group_teardown);
}
