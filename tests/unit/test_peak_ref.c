/* tests/unit/test_peak_ref.c — bench/peak_ref.h: the references of `vkgrad
 * bench --peak`'s microkernels and the check of what they wrote.
 *
 * The closed forms (peak_fma_expect, peak_mma_expect, peak_nv2_expect) are compared with the
 * microkernels' loops run step by step here in float32, as the GPU runs them
 * (fmaf; an f32 accumulator += a k-long dot product of f16/bf16 integers),
 * and the loop bounds are checked to keep every partial sum exact. The
 * check fails what a broken kernel would write: one value off by one, a
 * NaN, one multiply-add step missing everywhere, an output cut short
 * (zeros). The copy line's pattern is positional and its check fails data
 * from a wrong offset, a changed byte, an unwritten or cut-short copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peak_ref.h"

#define UNROLL 4 /* VKG_PEAK_FMA_UNROLL */

/* One invocation of bench_peak_fma in float32, as the shader runs it. */
static float fma_invocation(uint32_t t, uint32_t chains, uint32_t iters)
{
	float acc[32][4];
	for (uint32_t c = 0; c < chains; c++)
		for (uint32_t j = 0; j < 4; j++)
			acc[c][j] = (float)((t + 4u * c + j) & 255u);
	for (uint32_t i = 0; i < iters; i++)
		for (uint32_t u = 0; u < UNROLL; u++)
			for (uint32_t c = 0; c < chains; c++)
				for (uint32_t j = 0; j < 4; j++)
					acc[c][j] = fmaf(acc[c][j], 1.0f, 1.0f);
	float s = 0;
	for (uint32_t c = 0; c < chains; c++)
		s += (acc[c][0] + acc[c][1]) + (acc[c][2] + acc[c][3]);
	return s;
}

static void test_fma_expect_matches_the_loop(void **state)
{
	(void)state;
	static const uint32_t chains[] = {1, 4, 8, 16, 32};
	for (size_t k = 0; k < sizeof(chains) / sizeof(chains[0]); k++)
		for (uint32_t t = 0; t < 512; t += 37)
			for (uint32_t it = 0; it < 40; it += 13)
				assert_true((double)fma_invocation(t, chains[k], it) ==
					    peak_fma_expect(t, chains[k], UNROLL, it));
}

/* At the bound every value and the invocation's sum stay below 2^24, one
 * trip more would not; the float32 loop still agrees there. */
static void test_fma_bound_keeps_it_exact(void **state)
{
	(void)state;
	for (uint32_t chains = 1; chains <= 32; chains *= 2) {
		const uint32_t m = peak_fma_max_iters(chains, UNROLL);
		assert_true(m > 1000);
		double worst = 0;
		for (uint32_t t = 0; t < 256; t++)
			worst = fmax(worst, peak_fma_expect(t, chains, UNROLL, m));
		assert_true(worst < PEAK_EXACT_LIMIT);
		assert_true(4.0 * chains * (255.0 + (double)(m + 1) * UNROLL) >= PEAK_EXACT_LIMIT);
	}
	assert_true((double)fma_invocation(255, 32, peak_fma_max_iters(32, UNROLL)) ==
		    peak_fma_expect(255, 32, UNROLL, peak_fma_max_iters(32, UNROLL)));
	assert_int_equal(peak_fma_max_iters(0, UNROLL), 0);
}

/* One subgroup of bench_peak_mma in float32: every step, every
 * accumulator += A_fa · B_fb. */
static void mma_subgroup(const peak_mma_geom *g, uint32_t iters, float *out)
{
	const uint32_t mn = g->m * g->n;
	for (uint32_t i = 0; i < g->fa * g->fb; i++)
		for (uint32_t e = 0; e < mn; e++)
			out[i * mn + e] = (float)peak_mma_init(g, i, e / g->n, e % g->n);
	for (uint32_t s = 0; s < iters * g->steps; s++)
		for (uint32_t i = 0; i < g->fa * g->fb; i++)
			for (uint32_t e = 0; e < mn; e++) {
				float dot = 0;
				for (uint32_t k = 0; k < g->k; k++)
					dot += (float)peak_mma_a(g, i / g->fb, e / g->n, k) *
					       (float)peak_mma_b(g, i % g->fb, k, e % g->n);
				out[i * mn + e] += dot;
			}
}

static void test_mma_expect_matches_the_loop(void **state)
{
	(void)state;
	static const peak_mma_geom geoms[] = {
		{16, 16, 16, 2, 2, 2}, {16, 16, 16, 4, 4, 2}, {16, 8, 16, 2, 4, 2}, {8, 8, 32, 1, 2, 1},
	};
	for (size_t q = 0; q < sizeof(geoms) / sizeof(geoms[0]); q++) {
		const peak_mma_geom *g = &geoms[q];
		const uint32_t n = g->fa * g->fb * g->m * g->n;
		float *got = malloc(n * sizeof(*got));
		double *want = malloc(n * sizeof(*want));
		assert_non_null(got);
		assert_non_null(want);
		for (uint32_t it = 0; it < 9; it += 4) {
			mma_subgroup(g, it, got);
			for (uint32_t i = 0; i < g->fa * g->fb; i++)
				peak_mma_expect(g, i, it, want + i * g->m * g->n);
			for (uint32_t e = 0; e < n; e++)
				if ((double)got[e] != want[e])
					fail_msg("geometry %zu, %u trips, value %u: %g, want %g", q, it, e,
						 (double)got[e], want[e]);
		}
		/* the accumulators differ from each other (no two alike for a
		 * compiler to merge) and the inputs are not all zero */
		peak_mma_expect(g, 0, 1, want);
		peak_mma_expect(g, g->fa * g->fb - 1, 1, want + g->m * g->n);
		if (g->fa * g->fb > 1)
			assert_true(memcmp(want, want + g->m * g->n, g->m * g->n * sizeof(*want)) != 0);
		free(got);
		free(want);
	}
}

static void test_mma_bound_keeps_it_exact(void **state)
{
	(void)state;
	const peak_mma_geom g = {16, 16, 16, 4, 4, 2};
	const uint32_t m = peak_mma_max_iters(&g);
	assert_true(m > 10000); /* room for ~20 ms of an H200's multiply-adds */
	double *want = malloc(16 * 16 * sizeof(*want));
	assert_non_null(want);
	double worst = 0;
	for (uint32_t i = 0; i < 16; i++) {
		peak_mma_expect(&g, i, m, want);
		for (uint32_t e = 0; e < 256; e++)
			worst = fmax(worst, fabs(want[e]));
	}
	assert_true(worst < PEAK_EXACT_LIMIT);
	free(want);
	const peak_mma_geom none = {16, 16, 16, 0, 4, 2};
	assert_int_equal(peak_mma_max_iters(&none), 0);
}

/* ---- bench_peak_nv2 ---- */

/* One workgroup of bench_peak_nv2 in float32: per trip, `steps`
 * multiply-adds, step j adding k-slice (j mod slices) of A times that of B. */
static void nv2_workgroup(const peak_nv2_geom *g, uint32_t iters, float *out)
{
	for (uint32_t e = 0; e < g->m * g->n; e++)
		out[e] = (float)peak_nv2_init(e / g->n, e % g->n);
	for (uint32_t it = 0; it < iters; it++)
		for (uint32_t j = 0; j < g->steps; j++)
			for (uint32_t e = 0; e < g->m * g->n; e++) {
				const uint32_t k0 = (j % g->slices) * g->k;
				float dot = 0;
				for (uint32_t k = k0; k < k0 + g->k; k++)
					dot += (float)peak_nv2_a(e / g->n, k) * (float)peak_nv2_b(k, e % g->n);
				out[e] += dot;
			}
}

static void test_nv2_expect_matches_the_loop(void **state)
{
	(void)state;
	static const peak_nv2_geom geoms[] = {
		{16, 16, 16, 4, 4}, {16, 32, 16, 1, 4}, {32, 16, 32, 2, 4}, {16, 16, 64, 4, 8},
	};
	for (size_t q = 0; q < sizeof(geoms) / sizeof(geoms[0]); q++) {
		const peak_nv2_geom *g = &geoms[q];
		float *got = malloc(g->m * g->n * sizeof(*got));
		double *want = malloc(g->m * g->n * sizeof(*want));
		assert_non_null(got);
		assert_non_null(want);
		for (uint32_t it = 0; it < 9; it += 4) {
			nv2_workgroup(g, it, got);
			peak_nv2_expect(g, it, want);
			for (uint32_t e = 0; e < g->m * g->n; e++)
				if ((double)got[e] != want[e])
					fail_msg("geometry %zu, %u trips, value %u: %g, want %g", q, it, e,
						 (double)got[e], want[e]);
		}
		free(got);
		free(want);
	}
}

/* k-slice s of A times that of B at (row, col). */
static double nv2_slice(uint32_t k, uint32_t s, uint32_t row, uint32_t col)
{
	double p = 0;
	for (uint32_t i = s * k; i < (s + 1) * k; i++)
		p += peak_nv2_a(row, i) * peak_nv2_b(i, col);
	return p;
}

/* At the default tiling (128x256x64) every slice's product differs from
 * every other's at most elements, and is not zero at most: a kernel that
 * read one slice for another, dropped a step, or never advanced past slice
 * 0 fails the check (nv2_load's result differs from nv2_regs'). */
static void test_nv2_slices_are_told_apart(void **state)
{
	(void)state;
	const uint32_t m = 128, n = 256, k = 64, slices = 8, total = m * n;
	uint32_t zero[8] = {0}, same[8][8] = {{0}};
	for (uint32_t r = 0; r < m; r++)
		for (uint32_t c = 0; c < n; c++) {
			double p[8];
			for (uint32_t s = 0; s < slices; s++) {
				p[s] = nv2_slice(k, s, r, c);
				zero[s] += p[s] == 0;
			}
			for (uint32_t s = 0; s < slices; s++)
				for (uint32_t t = s + 1; t < slices; t++)
					same[s][t] += p[s] == p[t];
		}
	for (uint32_t s = 0; s < slices; s++) {
		if (zero[s] > total / 4)
			fail_msg("slice %u's product is 0 at %u of %u elements", s, zero[s], total);
		for (uint32_t t = s + 1; t < slices; t++)
			if (same[s][t] > total / 4)
				fail_msg("slices %u and %u agree at %u of %u elements", s, t, same[s][t], total);
	}
	const peak_nv2_geom regs = {m, n, k, 1, 8}, load = {m, n, k, 8, 8};
	double *a = malloc(total * sizeof(*a)), *b = malloc(total * sizeof(*b));
	assert_non_null(a);
	assert_non_null(b);
	peak_nv2_expect(&regs, 10, a);
	peak_nv2_expect(&load, 10, b);
	uint32_t equal = 0;
	for (uint32_t e = 0; e < total; e++)
		equal += a[e] == b[e];
	assert_true(equal < total / 4);
	free(a);
	free(b);
}

static void test_nv2_bound_keeps_it_exact(void **state)
{
	(void)state;
	static const peak_nv2_geom geoms[] = {{128, 256, 64, 8, 8}, {128, 256, 64, 1, 8}, {128, 128, 32, 8, 8}};
	for (size_t q = 0; q < sizeof(geoms) / sizeof(geoms[0]); q++) {
		const peak_nv2_geom *g = &geoms[q];
		const uint32_t it = peak_nv2_max_iters(g);
		/* room for ~20 ms of an H200's multiply-adds: ~500 trips of
		 * 8 steps per workgroup at one workgroup per SM */
		if (it < 20000)
			fail_msg("geometry %zu: only %u trips", q, it);
		double *want = malloc(g->m * g->n * sizeof(*want));
		assert_non_null(want);
		peak_nv2_expect(g, it, want);
		double worst = 0;
		for (uint32_t e = 0; e < g->m * g->n; e++)
			worst = fmax(worst, fabs(want[e]));
		assert_true(worst < PEAK_EXACT_LIMIT);
		free(want);
	}
	const peak_nv2_geom none = {128, 256, 64, 0, 4}, uneven = {128, 256, 64, 3, 4};
	assert_int_equal(peak_nv2_max_iters(&none), 0);
	assert_int_equal(peak_nv2_max_iters(&uneven), 0);
}

/* ---- the check ---- */

static void test_check_passes_equal_values(void **state)
{
	(void)state;
	const double want[3] = {1, -2, 300};
	float got[9];
	for (int i = 0; i < 9; i++)
		got[i] = (float)want[i % 3];
	peak_check c = {0};
	peak_check_run(&c, got, 9, want, 3, 300);
	assert_int_equal(c.mismatches, 0);
	assert_true(c.max_rel_err == 0);
}

static void test_check_fails_a_corrupted_value(void **state)
{
	(void)state;
	const double want[3] = {1, -2, 300};
	float got[9];
	for (int i = 0; i < 9; i++)
		got[i] = (float)want[i % 3];
	got[7] += 1; /* an off-by-one anywhere, even where it is small relatively */
	peak_check c = {0};
	peak_check_run(&c, got, 9, want, 3, 300);
	assert_int_equal(c.mismatches, 1);
	assert_int_equal(c.first_bad, 7);
	assert_true(fabs(c.max_rel_err - 1.0 / 300) < 1e-12);
	got[7] = NAN;
	c = (peak_check){0};
	peak_check_run(&c, got, 9, want, 3, 300);
	assert_int_equal(c.mismatches, 1);
	assert_true(isnan(c.max_rel_err));
	/* a NaN is not forgotten by a later, finite mismatch */
	got[8] = 0;
	c = (peak_check){0};
	peak_check_run(&c, got, 9, want, 3, 300);
	assert_int_equal(c.mismatches, 2);
	assert_true(isnan(c.max_rel_err));
}

/* What a kernel that dropped one multiply-add step, or never wrote its
 * output, leaves behind: every subgroup off. */
static void test_check_fails_a_missing_step_and_zeros(void **state)
{
	(void)state;
	const peak_mma_geom g = {16, 16, 16, 2, 4, 2};
	const uint32_t per = g.fa * g.fb * g.m * g.n, subgroups = 5, iters = 1000;
	double *want = malloc(per * sizeof(*want));
	float *got = malloc((size_t)per * subgroups * sizeof(*got));
	assert_non_null(want);
	assert_non_null(got);
	double mx = 0;
	for (uint32_t i = 0; i < g.fa * g.fb; i++)
		peak_mma_expect(&g, i, iters, want + i * g.m * g.n);
	for (uint32_t e = 0; e < per; e++)
		mx = fmax(mx, fabs(want[e]));
	/* one step short: iters trips less one step = (iters·steps - 1) steps */
	for (uint32_t s = 0; s < subgroups; s++)
		for (uint32_t i = 0; i < g.fa * g.fb; i++) {
			double one[256], zero[256];
			peak_mma_expect(&g, i, iters, one);
			peak_mma_expect(&g, i, 0, zero);
			for (uint32_t e = 0; e < 256; e++) {
				const double step = (one[e] - zero[e]) / ((double)iters * g.steps);
				got[(s * g.fa * g.fb + i) * 256 + e] = (float)(one[e] - step);
			}
		}
	peak_check c = {0};
	peak_check_run(&c, got, (uint64_t)per * subgroups, want, per, mx);
	assert_true(c.mismatches > (uint64_t)per * subgroups / 2);
	assert_true(c.max_rel_err > 0);
	memset(got, 0, (size_t)per * subgroups * sizeof(*got));
	c = (peak_check){0};
	peak_check_run(&c, got, (uint64_t)per * subgroups, want, per, mx);
	assert_true(c.mismatches > (uint64_t)per * subgroups / 2);
	assert_true(c.max_rel_err > 0.5);
	free(want);
	free(got);
}

/* ---- the copy line's pattern and check ---- */

static int cmp_u32(const void *a, const void *b)
{
	const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The pattern at an offset is the same bytes as the pattern from 0 at that
 * place (so a probe at the buffer's end checks what the copy put there),
 * and no two of its 4-byte words in 4 MiB are equal (data from any other
 * place in reach differs). */
static void test_copy_pattern_is_positional(void **state)
{
	(void)state;
	const size_t n = 4u << 20, off = (3u << 20) + 16;
	uint8_t *all = malloc(n), *part = malloc(n - off);
	uint32_t *w = malloc(n);
	assert_non_null(all);
	assert_non_null(part);
	assert_non_null(w);
	peak_copy_pattern(0, all, n);
	peak_copy_pattern(off, part, n - off);
	assert_memory_equal(all + off, part, n - off);
	size_t first = 0;
	assert_int_equal(peak_copy_check(0, all, n, &first), 0);
	assert_int_equal(first, n);
	assert_int_equal(peak_copy_check(off, part, n - off, &first), 0);
	memcpy(w, all, n);
	qsort(w, n / 4, sizeof(uint32_t), cmp_u32);
	for (size_t i = 1; i < n / 4; i++)
		if (w[i] == w[i - 1])
			fail_msg("word value 0x%08x repeats in 4 MiB of the pattern", w[i]);
	/* past 4 GiB (the high half of the word index counts) */
	uint8_t hi[64], lo[64];
	peak_copy_pattern(1ull << 34, hi, sizeof(hi));
	peak_copy_pattern(0, lo, sizeof(lo));
	assert_memory_not_equal(hi, lo, sizeof(lo));
	free(all);
	free(part);
	free(w);
}

/* What a wrong copy leaves behind fails: data from one 16-byte element
 * further (a wrong offset), one byte changed, the destination's fill left
 * (nothing copied), the last element left out, the head's data read as
 * the tail's. */
static void test_copy_check_fails_wrong_data(void **state)
{
	(void)state;
	const size_t n = 1u << 20;
	const uint64_t tail = (64ull << 20) - n;
	uint8_t *p = malloc(n + 16);
	assert_non_null(p);
	size_t first = 0;
	/* a shader that copied src[i + 1] to dst[i] */
	peak_copy_pattern(16, p, n);
	assert_true(peak_copy_check(0, p, n, &first) > n - n / 64);
	assert_int_equal(first, 0);
	peak_copy_pattern(tail + 16, p, n);
	assert_true(peak_copy_check(tail, p, n, &first) > n - n / 64);
	/* one word off (4 bytes) */
	peak_copy_pattern(4, p, n);
	assert_true(peak_copy_check(0, p, n, &first) > n - n / 64);
	/* one byte */
	peak_copy_pattern(0, p, n);
	p[12345] ^= 0x10;
	assert_int_equal(peak_copy_check(0, p, n, &first), 1);
	assert_int_equal(first, 12345);
	/* nothing copied: the zero fill */
	memset(p, 0, n);
	assert_true(peak_copy_check(0, p, n, &first) > n - n / 64);
	/* the last element not copied */
	peak_copy_pattern(tail, p, n);
	memset(p + n - 16, 0, 16);
	const size_t bad = peak_copy_check(tail, p, n, &first);
	assert_true(bad >= 1 && bad <= 16);
	assert_true(first >= n - 16);
	/* the head's bytes where the tail's belong */
	peak_copy_pattern(0, p, n);
	assert_true(peak_copy_check(tail, p, n, &first) > n - n / 64);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fma_expect_matches_the_loop),
		cmocka_unit_test(test_fma_bound_keeps_it_exact),
		cmocka_unit_test(test_mma_expect_matches_the_loop),
		cmocka_unit_test(test_mma_bound_keeps_it_exact),
		cmocka_unit_test(test_nv2_expect_matches_the_loop),
		cmocka_unit_test(test_nv2_slices_are_told_apart),
		cmocka_unit_test(test_nv2_bound_keeps_it_exact),
		cmocka_unit_test(test_check_passes_equal_values),
		cmocka_unit_test(test_check_fails_a_corrupted_value),
		cmocka_unit_test(test_check_fails_a_missing_step_and_zeros),
		cmocka_unit_test(test_copy_pattern_is_positional),
		cmocka_unit_test(test_copy_check_fails_wrong_data),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
