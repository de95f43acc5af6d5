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

enum { X, DY, W, DW, DB, DX, NT };
enum { O_DW = 1u, O_DB = 2u, O_DX = 4u };

static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(*s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

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

typedef struct outcome {
	int rc; /* 0, or -1 when refused */
	char code[32], message[320];
	double err;     /* worst normwise error over the outputs */
	char bound[200]; /* the first element past its bound: where */
	char why[160];  /* a canary or input byte changed: where */
	uint8_t *bytes; /* the whole region after the job, when keep */
	size_t nbytes;
} outcome;

/* want and Σ|terms| in float64, dW[o][i] = Σ_b dy[b][o]·x[b][i], db[o] =
 * Σ_b dy[b][o], dX[b][i] = Σ_o dy[b][o]·w[o][i] */
static void reference(uint64_t B, uint64_t I, uint64_t O, float *const val[NT], const bool present[NT],
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

/* Run B×I×O f32 (outputs outs, accumulate acc) on `variant` on the daemon
 * at sock (loop bound `trips`), inputs from seed; every tensor `skew`
 * bytes past a multiple of 256, 256 canary bytes after each. */
static outcome run_job(const char *sock, const char *dtype, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
		       bool acc, const char *variant, uint64_t seed, uint64_t skew, uint64_t trips, bool keep)
{
	outcome oc = {0};
	const proto_dtype dt = strcmp(dtype, "f32") == 0 ? PROTO_F32 : strcmp(dtype, "f16") == 0 ? PROTO_F16 : PROTO_BF16;
	const size_t es = dt == PROTO_F32 ? 4 : 2;
	const uint64_t n[NT] = {B * I, B * O, O * I, O * I, O, B * I};
	const bool present[NT] = {true, true, (outs & O_DX) != 0, (outs & O_DW) != 0, (outs & O_DB) != 0,
				  (outs & O_DX) != 0};
	size_t off[NT], size = 0;
	for (int t = 0; t < NT; t++) {
		off[t] = size + skew;
		size += (skew + n[t] * es + 255) / 256 * 256 + 256;
	}
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	assert_non_null(c);
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, size, &reg, &err);
	assert_non_null(m);
	for (size_t i = 0; i < size; i++) /* canaries: a position-dependent pattern */
		m[i] = (uint8_t)(0xa5u ^ (i * 131u) ^ (i >> 8));
	float *val[NT];
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int t = 0; t < NT; t++) {
		val[t] = malloc((n[t] ? n[t] : 1) * sizeof(float));
		assert_non_null(val[t]);
		if (!present[t] && t > W)
			continue; /* (its bytes stay canaries) */
		for (uint64_t i = 0; i < n[t]; i++)
			val[t][i] = (t <= W || acc) ? rnd(&s) : NAN; /* an overwrite must not read it */
		vkg_ref_store(dt, m + off[t], val[t], n[t]);
		vkg_ref_load(dt, val[t], m + off[t], n[t]); /* the stored values */
	}
	uint8_t *before = malloc(size);
	assert_non_null(before);
	memcpy(before, m, size);
	vkg_job j = vkg_job_init();
	j.dtype = dtype;
	j.variant = variant;
	j.batch = B, j.in = I, j.out = O;
	j.accumulate = acc;
	vkg_tensor *slot[NT] = {&j.x, &j.dy, &j.w, &j.dw, &j.db, &j.dx};
	for (int t = 0; t < NT; t++)
		if (present[t])
			*slot[t] = (vkg_tensor){reg, off[t]};
	vkg_result r;
	if (vkg_linear_backward(c, &j, &r, &err) != 0) {
		oc.rc = -1;
		snprintf(oc.code, sizeof(oc.code), "%s", err.code);
		snprintf(oc.message, sizeof(oc.message), "%s", err.message);
	} else {
		double *want[NT] = {0}, *mag[NT] = {0};
		for (int t = DW; t < NT; t++)
			if (present[t]) {
				want[t] = calloc(n[t], sizeof(double));
				mag[t] = calloc(n[t], sizeof(double));
				assert_non_null(want[t]);
				assert_non_null(mag[t]);
			}
		reference(B, I, O, val, present, want, mag);
		uint64_t L, S;
		plan_of(B, I, O, present[DW], trips, &L, &S);
		for (int t = DW; t < NT; t++) {
			if (!present[t])
				continue;
			/* dX: coopmat_khr_f32x3, one pass over K = out */
			const double cl = t == DX ? (double)O : 2.0 * (double)L, cs = t == DX ? 1.0 : 2.0 * (double)S;
			const double cb = 3.03 * ldexp(1.0, -16) + 1.01 * gamma_n(3.0 * cl + 2.0 * cs + 4.0);
			float *got = malloc(n[t] * sizeof(float));
			double *based = acc ? malloc(n[t] * sizeof(double)) : NULL;
			assert_non_null(got);
			vkg_ref_load(dt, got, m + off[t], n[t]);
			for (uint64_t i = 0; i < n[t]; i++) {
				const double old = acc ? val[t][i] : 0.0, w = want[t][i] + old;
				if (based)
					based[i] = val[t][i];
				const double lim = cb * (mag[t][i] + fabs(old)) + ldexp(fabs(w), -24);
				if (!(fabs((double)got[i] - w) <= lim) && !oc.bound[0])
					snprintf(oc.bound, sizeof(oc.bound),
						 "%s[%llu] = %.9g, want %.9g: off by %.3g > bound %.3g (Σ|terms| %.4g, L %llu, S %llu)",
						 t == DW ? "dw" : t == DB ? "db" : "dx", (unsigned long long)i,
						 (double)got[i], w, fabs((double)got[i] - w), lim, mag[t][i],
						 (unsigned long long)L, (unsigned long long)S);
			}
			/* (vkg_ref_max_rel_err adds `based` to want itself) */
			const double e = vkg_ref_max_rel_err(got, want[t], based, n[t]);
			oc.err = e > oc.err || isnan(e) ? e : oc.err;
			free(got);
			free(based);
			free(want[t]);
			free(mag[t]);
		}
	}
	/* every byte but the outputs' (the daemon's outputs only where the job
	 * succeeded) as before */
	for (size_t i = 0; i < size && !oc.why[0]; i++) {
		bool out = false;
		for (int t = DW; t < NT && oc.rc == 0; t++)
			out |= present[t] && i >= off[t] && i < off[t] + n[t] * es;
		if (!out && m[i] != before[i])
			snprintf(oc.why, sizeof(oc.why), "byte %zu of %zu (outside the outputs) changed", i, size);
	}
	if (keep) {
		oc.bytes = malloc(size);
		assert_non_null(oc.bytes);
		memcpy(oc.bytes, m, size);
		oc.nbytes = size;
	}
	free(before);
	for (int t = 0; t < NT; t++)
		free(val[t]);
	assert_int_equal(vkg_region_destroy(c, reg, m, size, &err), 0);
	vkg_close(c);
	return oc;
}

static const char *outs_name(unsigned o)
{
	static const char *const nm[8] = {"", "dw", "db", "dw,db", "dx", "dw,dx", "db,dx", "dw,db,dx"};
	return nm[o & 7];
}

#define TRIPS_ALL 32768u /* the daemon's default loop bound (KSHAPE_LOOP_TRIPS_MAX) */

/* A job that must succeed within both tolerances, touching nothing else;
 * 0 or 1 (printed) */
static unsigned check_job(const char *sock, uint64_t trips, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
			  bool acc, uint64_t seed, uint64_t skew)
{
	outcome oc = run_job(sock, "f32", B, I, O, outs, acc, VARIANT, seed, skew, trips, false);
	char what[128];
	snprintf(what, sizeof(what), "f32 %llux%llux%llu %s%s skew %llu", (unsigned long long)B,
		 (unsigned long long)I, (unsigned long long)O, outs_name(outs), acc ? " acc" : "",
		 (unsigned long long)skew);
	if (oc.rc != 0) {
		fprintf(stderr, "%s: %s: %s\n", what, oc.code, oc.message);
		return 1;
	}
	if (!(oc.err <= VKG_REF_TOL_F32) || oc.bound[0] || oc.why[0]) {
		fprintf(stderr, "%s: max_rel_err %.3g (tol %.0e)%s%s%s%s\n", what, oc.err, VKG_REF_TOL_F32,
			oc.bound[0] ? "; " : "", oc.bound, oc.why[0] ? "; " : "", oc.why);
		return 1;
	}
	return 0;
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
	outcome a = run_job(g_d.sock, "f32", 131071, 64, 64, O_DW | O_DB, true, VARIANT, 7, 0, TRIPS_ALL, true);
	outcome b = run_job(g_d.sock, "f32", 131071, 64, 64, O_DW | O_DB, true, VARIANT, 7, 0, TRIPS_ALL, true);
	assert_int_equal(rawsock_stats(g_d.sock, &s1), 0);
	assert_int_equal(s1.splitk_jobs, s0.splitk_jobs + 2);
	assert_int_equal(a.rc, 0);
	assert_int_equal(b.rc, 0);
	assert_true(a.err <= VKG_REF_TOL_F32 && !a.bound[0]);
	assert_int_equal(a.nbytes, b.nbytes);
	if (memcmp(a.bytes, b.bytes, a.nbytes) != 0)
		fail_msg("f32 131071x64x64 on %s: two runs gave different bytes", VARIANT);
	free(a.bytes);
	free(b.bytes);
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
		outcome oc = run_job(g_d.sock, "f32", 20000, 257, 2, O_DW | O_DB, true, VARIANT, 700, 0, TRIPS_ALL,
				     false);
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
	outcome oc = run_job(g_d.sock, "f32", 65536, 64, 64, O_DW | O_DB, false, "auto", 710, 0, TRIPS_ALL, false);
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
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	vkg_info info;
	if (!c || vkg_hello(c, "test_f32x3_splitk", &info, &err) != 0)
		return -1;
	snprintf(g_device, sizeof(g_device), "%s", info.device_name);
	/* listed in hello for f32 only */
	for (unsigned i = 0; i < info.n_kernels; i++) {
		vkg_kernel_info k;
		if (vkg_info_kernel(c, i, &k) != 0)
			return -1;
		if (strcmp(k.name, KERNEL) != 0)
			continue;
		if (strcmp(k.variant, VARIANT) != 0 || strcmp(k.dtype, "f32") != 0)
			return -1;
		g_offered = true;
	}
	vkg_close(c);
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
