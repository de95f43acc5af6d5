/* tests/integration/test_dtypes.c — f16 and bf16 storage (f32 accumulation)
 * on the plain-shader path, every kernel family, against the float64
 * reference computed from the same rounded inputs.
 *
 * Tolerances (normwise, vkg_ref_max_rel_err): the only error beyond f32
 * accumulation is rounding each output to the storage type once (twice with
 * accumulate: base + gradient): f16 keeps 11 significant bits (half-ulp
 * 2^-11 ≈ 4.9e-4), bf16 keeps 8 (2^-8 ≈ 3.9e-3). Stated limits: f16 2e-3,
 * bf16 1e-2. And each family rounds to nearest: of the overwritten
 * outputs' elements, at most 1 % lie farther than half an ulp (plus f32
 * accumulation's share) from the reference; a conversion that rounds
 * toward zero (the H200's for VK_NV_cooperative_matrix2 bf16 matrices,
 * before coopmat_nv2 rounded first) misses on about half. */
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
#include "ref.h"
#include "rounding.h"
#include "vkgrad.h"

static daemon_proc g_d;
static bool g_coopmat; /* hello lists linear_coopmat_gemm */
static bool g_cmk[3];  /* hello lists linear_coopmat_khr_gemm for f32, f16, bf16 */
static bool g_f32x3;  /* linear_coopmat_khr_f32x3_gemm (f32) */
static bool g_nv2[3];  /* and linear_coopmat_nv2_gemm */
static char g_device[128];

#define TOL_F16 VKG_REF_TOL_F16
#define TOL_BF16 VKG_REF_TOL_BF16

/* the client library's conversions (round to nearest even, NaN kept) */
static uint16_t to_bits(float f, bool bf16)
{
	return bf16 ? vkg_ref_bf16_from_float(f) : vkg_ref_f16_from_float(f);
}

static float from_bits(uint16_t v, bool bf16)
{
	return bf16 ? vkg_ref_bf16_to_float(v) : vkg_ref_f16_to_float(v);
}

enum { X, DY, W, DW, DB, DX, NT };

/* Elements of got (the outputs of one job, overwritten) not rounded to
 * nearest from the float64 reference want (rounding_missed). */
static uint64_t misrounded(const float *got, const double *want, const double *abs_sum, uint64_t n,
			   bool bf16)
{
	uint64_t bad = 0;
	for (uint64_t i = 0; i < n; i++)
		bad += rounding_missed((double)got[i], want[i], abs_sum[i], bf16);
	return bad;
}

/* Run one job; returns the worst normwise error over its outputs, or
 * INFINITY when it failed; mis and all count misrounded elements (overwritten
 * outputs only) and the elements checked. */
static double run_one(vkg_client *c, bool bf16, uint64_t B, uint64_t I, uint64_t O,
		      unsigned outs, bool acc, const char *variant, unsigned seed, uint64_t *mis,
		      uint64_t *all)
{
	const uint64_t n[NT] = {B * I, B * O, O * I, O * I, O, B * I};
	bool present[NT] = {true, true, (outs & 4) != 0, (outs & 1) != 0, (outs & 2) != 0,
			    (outs & 4) != 0};
	size_t off[NT], size = 0;
	for (int t = 0; t < NT; t++) {
		off[t] = size;
		size += (n[t] * 2 + 255) / 256 * 256 + 256;
	}
	vkg_error err;
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, size, &reg, &err);
	assert_non_null(m);
	float *val[NT];
	srand(seed);
	for (int t = 0; t < NT; t++) {
		val[t] = calloc(n[t], sizeof(float));
		assert_non_null(val[t]);
		uint16_t *p = (uint16_t *)(m + off[t]);
		for (uint64_t i = 0; i < n[t]; i++) {
			bool input = t <= W;
			uint16_t bits = (input || acc) ? to_bits((float)rand() / (float)RAND_MAX * 2.0f - 1.0f, bf16)
						       : 0x7e00; /* NaN: overwrite must not read it */
			p[i] = bits;
			val[t][i] = from_bits(bits, bf16);
		}
	}
	const vkg_job j = bwjob_region_job(bf16 ? "bf16" : "f16", variant, B, I, O, acc, reg, off, present);
	vkg_result r;
	double worst = 0;
	if (vkg_linear_backward(c, &j, &r, &err) != 0) {
		fprintf(stderr, "%s %llux%llux%llu: %s: %s\n", j.dtype, (unsigned long long)B,
			(unsigned long long)I, (unsigned long long)O, err.code, err.message);
		worst = INFINITY;
	} else {
		double *ref[NT] = {0}, *sum_abs[NT] = {0};
		for (int t = DW; t < NT; t++)
			if (present[t]) {
				ref[t] = calloc(n[t], sizeof(double));
				sum_abs[t] = calloc(n[t], sizeof(double));
				assert_non_null(ref[t]);
				assert_non_null(sum_abs[t]);
			}
		vkg_ref_linear_backward(B, I, O, val[X], val[DY], val[W], ref[DW], ref[DB], ref[DX]);
		float *abs_in[W + 1];
		for (int t = X; t <= W; t++) {
			abs_in[t] = calloc(n[t], sizeof(float));
			assert_non_null(abs_in[t]);
			for (uint64_t i = 0; i < n[t]; i++)
				abs_in[t][i] = fabsf(val[t][i]);
		}
		vkg_ref_linear_backward(B, I, O, abs_in[X], abs_in[DY], abs_in[W], sum_abs[DW], sum_abs[DB],
					sum_abs[DX]);
		for (int t = X; t <= W; t++)
			free(abs_in[t]);
		for (int t = DW; t < NT; t++) {
			if (!present[t])
				continue;
			float *got = calloc(n[t], sizeof(float));
			double *base = acc ? calloc(n[t], sizeof(double)) : NULL;
			assert_non_null(got);
			const uint16_t *p = (const uint16_t *)(m + off[t]);
			for (uint64_t i = 0; i < n[t]; i++) {
				got[i] = from_bits(p[i], bf16);
				if (base)
					base[i] = val[t][i];
			}
			double e = vkg_ref_max_rel_err(got, ref[t], base, n[t]);
			if (e > worst)
				worst = e;
			if (!acc) {
				*mis += misrounded(got, ref[t], sum_abs[t], n[t], bf16);
				*all += n[t];
			}
			free(got);
			free(base);
			free(ref[t]);
			free(sum_abs[t]);
		}
	}
	for (int t = 0; t < NT; t++)
		free(val[t]);
	assert_int_equal(vkg_region_destroy(c, reg, m, size, &err), 0);
	return worst;
}

static void run_dtype(bool bf16)
{
	static const uint64_t shapes[][3] = {{1, 1, 1},    {33, 257, 31}, {64, 64, 64},
					     {65, 63, 129}, {200, 65, 16}, {7, 300, 5},
					     {200, 72, 136}, /* in, out multiples of 8: coopmat's vector loads */
					     {160, 136, 130}};
	static const unsigned subsets[] = {1, 2, 4, 3, 7};
	/* coopmat and coopmat_khr only where the daemon has them (f16 on
	 * VK_NV_cooperative_matrix; f16, bf16 on VK_KHR_cooperative_matrix) */
	const char *variants[10] = {"generic", "tiled", "tiled128", "splitk", "narrow", "splitk128"};
	int nv = 6;
	if (!bf16 && g_coopmat)
		variants[nv++] = "coopmat";
	else if (!bf16)
		printf("f16: variant coopmat skipped: hello lists no linear_coopmat_gemm on this device\n");
	if (g_cmk[bf16 ? 2 : 1])
		variants[nv++] = "coopmat_khr";
	else
		printf("%s: variant coopmat_khr skipped: hello lists no linear_coopmat_khr_gemm for it here\n",
		       bf16 ? "bf16" : "f16");
	if (g_nv2[bf16 ? 2 : 1])
		variants[nv++] = "coopmat_nv2";
	else
		printf("%s: variant coopmat_nv2 skipped: hello lists no linear_coopmat_nv2_gemm for it here\n",
		       bf16 ? "bf16" : "f16");
	const double tol = bf16 ? TOL_BF16 : TOL_F16;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	unsigned failed = 0, cases = 0;
	double worst = 0;
	uint64_t mis[10] = {0}, all[10] = {0};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (unsigned k = 0; k < 5; k++)
			for (int v = 0; v < nv; v++) {
				bool acc = (s + k + (unsigned)v) % 2;
				double e = run_one(c, bf16, shapes[s][0], shapes[s][1], shapes[s][2],
						   subsets[k], acc, variants[v], (unsigned)(s * 100 + k * 10 + (unsigned)v),
						   &mis[v], &all[v]);
				cases++;
				if (e > worst)
					worst = e;
				if (!(e <= tol)) {
					failed++;
					fprintf(stderr, "%s %llux%llux%llu outputs %u %s%s: err %.3g > %g\n",
						bf16 ? "bf16" : "f16", (unsigned long long)shapes[s][0],
						(unsigned long long)shapes[s][1], (unsigned long long)shapes[s][2],
						subsets[k], variants[v], acc ? " acc" : "", e, tol);
				}
			}
	printf("%s: %u cases, worst max_rel_err %.3g (tol %g), %u failed\n", bf16 ? "bf16" : "f16",
	       cases, worst, tol, failed);
	/* each family rounds its outputs to nearest: at most 1 % of the
	 * elements past half an ulp (rounding toward zero: about half) */
	for (int v = 0; v < nv; v++) {
		printf("%s %s: %llu of %llu elements past half an ulp\n", bf16 ? "bf16" : "f16", variants[v],
		       (unsigned long long)mis[v], (unsigned long long)all[v]);
		if (mis[v] * 100 > all[v] * ROUNDING_MAX_PERCENT) {
			fprintf(stderr, "%s %s: %llu of %llu elements not rounded to nearest\n",
				bf16 ? "bf16" : "f16", variants[v], (unsigned long long)mis[v],
				(unsigned long long)all[v]);
			failed++;
		}
	}
	vkg_close(c);
	assert_int_equal(failed, 0);
}

static void test_f16(void **state)
{
	(void)state;
	run_dtype(false);
}

static void test_bf16(void **state)
{
	(void)state;
	run_dtype(true);
}

static void test_hello_lists_every_dtype(void **state)
{
	(void)state;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_dtypes", &info, &err), 0);
	unsigned seen[3] = {0};
	/* info.kernels holds the first 32 only: vkg_info_kernel reads all */
	for (unsigned i = 0; i < info.n_kernels; i++) {
		vkg_kernel_info k;
		assert_int_equal(vkg_info_kernel(c, i, &k), 0);
		if (strcmp(k.name, "linear_coopmat_gemm") == 0) {
			assert_string_equal(k.dtype, "f16");
			continue;
		}
		if (strcmp(k.name, "linear_coopmat_khr_gemm") == 0 ||
		    strcmp(k.name, "linear_coopmat_khr_dx_stream") == 0 ||
		    strcmp(k.name, "linear_coopmat_nv2_gemm") == 0) {
			assert_string_not_equal(k.dtype, "f32");
			assert_string_equal(k.variant, k.name[15] == 'k'
									     ? "coopmat_khr" : "coopmat_nv2");
			continue;
		}
		if (strcmp(k.name, "linear_coopmat_khr_splitk_gemm") == 0 ||
		    strcmp(k.name, "linear_coopmat_khr_splitk_dx_gemm") == 0) {
			assert_string_not_equal(k.dtype, "f32");
			assert_string_equal(k.variant, "coopmat_khr_splitk");
			continue;
		}
		if (strcmp(k.name, "linear_coopmat_khr_f32x3_gemm") == 0) {
			assert_string_equal(k.dtype, "f32");
			assert_string_equal(k.variant, "coopmat_khr_f32x3");
			continue;
		}
		if (strcmp(k.name, "linear_coopmat_khr_f32x3_splitk_gemm") == 0) {
			assert_string_equal(k.dtype, "f32");
			assert_string_equal(k.variant, "coopmat_khr_f32_splitk");
			continue;
		}
		if (strcmp(k.dtype, "f32") == 0) seen[0]++;
		if (strcmp(k.dtype, "f16") == 0) seen[1]++;
		if (strcmp(k.dtype, "bf16") == 0) seen[2]++;
	}
	vkg_close(c);
	/* lavapipe has storageBuffer16BitAccess: the thirteen plain kernels in
	 * all three dtypes (parameter, input, tiled, tiled128, split-K's two
	 * passes, split-K on the 128 tile, linear_forward_prep,
	 * linear_activation, optim_step, the narrow family's three) */
	assert_int_equal(seen[0], 13);
	assert_int_equal(seen[1], 13);
	assert_int_equal(seen[2], 13);
}

/* Forcing coopmat where it cannot run is `unsupported`, naming the variant,
 * and writes nothing; the daemon goes on serving. */
static void test_coopmat_unsupported_where_absent(void **state)
{
	(void)state;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	for (int k = 0; k < 3; k++) {
		static const char *const dt[] = {"f32", "bf16", "f16"};
		if (k == 2 && g_coopmat) {
			printf("coopmat f16 is served here: its numbers are checked in test_f16\n");
			break;
		}
		expect_refused_untouched(c, dt[k], "coopmat", "unsupported", "coopmat", dt[k]);
	}
	vkg_close(c);
	assert_true(rawsock_daemon_serves(g_d.sock));
}

/* Forcing coopmat_khr or coopmat_nv2 where it cannot run is `unsupported`,
 * naming the variant and what is missing (on lavapipe: VK_KHR_cooperative_matrix; for
 * f32 always: it multiplies 16-bit operands), and writes nothing; the daemon
 * goes on serving. */
static void test_coopmat_khr_unsupported_where_absent(void **state)
{
	(void)state;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	for (int v = 0; v < 2; v++) {
		const char *var = v ? "coopmat_nv2" : "coopmat_khr";
		const bool *served = v ? g_nv2 : g_cmk;
		expect_refused_untouched(c, "f32", var, "unsupported", var, "f16 or bf16");
		for (int k = 1; k < 3; k++) {
			static const char *const dt[] = {"f32", "f16", "bf16"};
			if (served[k]) {
				printf("%s %s is served here: its numbers are checked in test_%s\n", var, dt[k], dt[k]);
				continue;
			}
			const bool lvp = strstr(g_device, "llvmpipe") != NULL;
			expect_refused_untouched(c, dt[k], var, "unsupported", var,
						 lvp ? "needs VK_KHR_cooperative_matrix" : "needs ");
		}
	}
	vkg_close(c);
	assert_true(rawsock_daemon_serves(g_d.sock));
}

/* Forcing coopmat_khr_f32x3 (f32 on the bf16 tensor cores) where it cannot
 * run is `unsupported`, naming the variant and what is missing (on lavapipe:
 * VK_KHR_cooperative_matrix; for f16 and bf16 always: dtype f32), and
 * writes nothing; the daemon goes on serving. */
static void test_coopmat_khr_f32x3_unsupported_where_absent(void **state)
{
	(void)state;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	const char *var = "coopmat_khr_f32x3";
	expect_refused_untouched(c, "f16", var, "unsupported", var, "needs dtype f32");
	expect_refused_untouched(c, "bf16", var, "unsupported", var, "needs dtype f32");
	if (g_f32x3) {
		printf("%s f32 is served here: its numbers are checked by scripts/device-run.sh kernels\n", var);
	} else {
		const bool lvp = strstr(g_device, "llvmpipe") != NULL;
		expect_refused_untouched(c, "f32", var, "unsupported", var,
					 lvp ? "needs VK_KHR_cooperative_matrix" : "needs ");
	}
	vkg_close(c);
	assert_true(rawsock_daemon_serves(g_d.sock));
}

/* A device without 16-bit storage serves f32 only: hello lists no f16/bf16
 * kernels and such a job is `unsupported`, naming the dtype. */
static void test_dtype_unsupported_without_16bit_storage(void **state)
{
	(void)state;
	daemon_proc d = {0};
	static const char *const env[] = {"VKGRAD_FAULT_NO_STORAGE16=1", NULL};
	assert_int_equal(daemon_proc_start(&d, NULL, env), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_dtypes", &info, &err), 0);
	for (unsigned i = 0; i < info.n_kernels; i++) {
		vkg_kernel_info k; /* every one: vkg_info.kernels holds 32 */
		assert_int_equal(vkg_info_kernel(c, i, &k), 0);
		assert_string_equal(k.dtype, "f32");
	}
	for (int bf = 0; bf < 2; bf++) {
		uint64_t reg;
		void *m = vkg_region_create(c, 4096, &reg, &err);
		assert_non_null(m);
		vkg_job j = vkg_job_init();
		j.dtype = bf ? "bf16" : "f16";
		j.batch = j.in = j.out = 4;
		j.x = (vkg_tensor){reg, 0};
		j.dy = (vkg_tensor){reg, 256};
		j.db = (vkg_tensor){reg, 512};
		memset(m, 0x5a, 4096);
		vkg_result r;
		assert_int_equal(vkg_linear_backward(c, &j, &r, &err), VKG_EREMOTE);
		assert_string_equal(err.code, "unsupported");
		assert_non_null(strstr(err.message, j.dtype));
		for (int i = 0; i < 4096; i++)
			assert_int_equal(((uint8_t *)m)[i], 0x5a); /* nothing written */
		assert_int_equal(vkg_region_destroy(c, reg, m, 4096, &err), 0);
	}
	vkg_close(c);
	assert_true(rawsock_daemon_serves(d.sock));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static int group_setup(void **state)
{
	(void)state;
	if (daemon_proc_start(&g_d, NULL, NULL) != 0)
		return -1;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	vkg_info info;
	if (!c || vkg_hello(c, "test_dtypes", &info, &err) != 0)
		return -1;
	for (unsigned i = 0; i < info.n_kernels; i++) {
		vkg_kernel_info k; /* every one: vkg_info.kernels holds 32 */
		if (vkg_info_kernel(c, i, &k) != 0)
			return -1;
		g_coopmat |= strcmp(k.name, "linear_coopmat_gemm") == 0;
		for (int t = 0; t < 3; t++) {
			const bool dt = strcmp(k.dtype, (const char *[]){"f32", "f16", "bf16"}[t]) == 0;
			g_cmk[t] |= dt && strcmp(k.name, "linear_coopmat_khr_gemm") == 0;
			g_nv2[t] |= dt && strcmp(k.name, "linear_coopmat_nv2_gemm") == 0;
			g_f32x3 |= dt && strcmp(k.name, "linear_coopmat_khr_f32x3_gemm") == 0;
		}
	}
	snprintf(g_device, sizeof(g_device), "%s", info.device_name);
	vkg_close(c);
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
		cmocka_unit_test(test_hello_lists_every_dtype),
		cmocka_unit_test(test_f16),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_coopmat_unsupported_where_absent),
		cmocka_unit_test(test_coopmat_khr_unsupported_where_absent),
		cmocka_unit_test(test_coopmat_khr_f32x3_unsupported_where_absent),
		cmocka_unit_test(test_dtype_unsupported_without_16bit_storage),
	};
	int rc = cmocka_run_group_tests_name("dtypes", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
