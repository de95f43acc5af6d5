/* tests/unit/test_growth.c — tests/common/growth.h, the judge of the leak
 * checks (tests/common/leakcheck.h, scripts/soak.sh): synthetic series of
 * what a daemon's memory and descriptors do after repeated identical cycles.
 * A leak must be found however noisy the samples; a one-off rise (a cold
 * driver cache compiling during the first cycles), a spike or a sawtooth
 * must not be called one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "growth.h"

#define KB_BOUND 256.0 /* LEAKCHECK_KB_PER_CYCLE */
#define FD_BOUND 0.5   /* LEAKCHECK_FDS_PER_CYCLE */

/* Deterministic noise in [-amp, amp]. */
static double noise(unsigned *seed, double amp)
{
	*seed = *seed * 1103515245u + 12345u;
	return ((double)((*seed >> 8) & 0xffff) / 65535.0 * 2.0 - 1.0) * amp;
}

static bool judge(const double *y, size_t n, double bound)
{
	growth_fit f;
	assert_int_equal(growth_fit_series(y, n, &f), 0);
	char buf[256];
	printf("  %s -> %s\n", growth_describe(&f, "units", buf, sizeof(buf)),
	       growth_grows(&f, bound) ? "grows" : "flat");
	return growth_grows(&f, bound);
}

static void test_exact_slopes_of_a_line(void **state)
{
	(void)state;
	double y[8];
	for (int i = 0; i < 8; i++)
		y[i] = 100.0 + 3.0 * i;
	growth_fit f;
	assert_int_equal(growth_fit_series(y, 8, &f), 0);
	assert_true(fabs(f.step - 3.0) < 1e-12);
	assert_true(fabs(f.halves - 3.0) < 1e-12);
	assert_true(fabs(f.lsq - 3.0) < 1e-12);
	assert_true(f.first == 100.0 && f.last == 121.0 && f.n == 8);
	/* odd n: the middle sample belongs to neither half */
	assert_int_equal(growth_fit_series(y, 7, &f), 0);
	assert_true(fabs(f.halves - 3.0) < 1e-12);
}

static void test_bad_input_refused(void **state)
{
	(void)state;
	double y[GROWTH_MAX_SAMPLES + 1] = {0};
	growth_fit f;
	assert_int_equal(growth_fit_series(y, GROWTH_MIN_SAMPLES - 1, &f), -EINVAL);
	assert_int_equal(growth_fit_series(y, GROWTH_MAX_SAMPLES + 1, &f), -EINVAL);
	assert_int_equal(growth_fit_series(y, GROWTH_MIN_SAMPLES, &f), 0);
	y[2] = NAN;
	assert_int_equal(growth_fit_series(y, 6, &f), -EINVAL);
	y[2] = INFINITY;
	assert_int_equal(growth_fit_series(y, 6, &f), -EINVAL);
}

/* A steady leak well above the bound, with noise of +-300 KiB on every sample:
 * found, for every seed and length from 4 to 12 cycles. */
static void test_steady_leak_in_noise_is_growth(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 50; seed++)
		for (size_t n = 4; n <= 12; n++) {
			unsigned s = seed;
			double y[12];
			for (size_t i = 0; i < n; i++)
				y[i] = 150000.0 + 1024.0 * (double)i + noise(&s, 300.0);
			growth_fit f;
			assert_int_equal(growth_fit_series(y, n, &f), 0);
			if (!growth_grows(&f, KB_BOUND))
				fail_msg("seed %u, %zu cycles: a 1 MiB/cycle leak not found (step %.1f, "
					 "halves %.1f)",
					 seed, n, f.step, f.halves);
		}
}

/* Just above the bound with little noise: growth; just below: not. */
static void test_bound_is_the_line(void **state)
{
	(void)state;
	double up[8], down[8];
	unsigned s = 7;
	for (int i = 0; i < 8; i++) {
		double e = noise(&s, 10.0);
		up[i] = 1000.0 + 300.0 * i + e;
		down[i] = 1000.0 + 200.0 * i + e;
	}
	assert_true(judge(up, 8, KB_BOUND));
	assert_false(judge(down, 8, KB_BOUND));
}

/* Flat memory with page-sized noise: not growth, for every seed. */
static void test_noise_alone_is_flat(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 200; seed++) {
		unsigned s = seed;
		double y[6];
		for (int i = 0; i < 6; i++)
			y[i] = 160000.0 + noise(&s, 200.0);
		growth_fit f;
		assert_int_equal(growth_fit_series(y, 6, &f), 0);
		if (growth_grows(&f, KB_BOUND))
			fail_msg("seed %u: noise of +-200 KiB called growth", seed);
	}
}

/* What a cold shader cache does: one rise of 22 MiB (test_errors saw
 * 156,816 -> 179,256 KiB) at any cycle, flat before and after. */
static void test_one_off_rise_is_flat(void **state)
{
	(void)state;
	for (int at = 1; at < 6; at++) {
		double y[6];
		unsigned s = (unsigned)at;
		for (int i = 0; i < 6; i++)
			y[i] = (i < at ? 156816.0 : 179256.0) + noise(&s, 64.0);
		if (judge(y, 6, KB_BOUND))
			fail_msg("a single rise before cycle %d called growth", at);
	}
}

/* One sample far off (a transient descriptor, a burst of memory) is flat. */
static void test_spike_is_flat(void **state)
{
	(void)state;
	double kb[6] = {150000, 150010, 170000, 150005, 149990, 150000};
	double fd[6] = {12, 12, 12, 13, 12, 12};
	assert_false(judge(kb, 6, KB_BOUND));
	assert_false(judge(fd, 6, FD_BOUND));
}

/* Rising by 300 KiB a cycle, then trimmed back: each step but the drop is
 * above the bound, the halves are level: not growth. */
static void test_sawtooth_is_flat(void **state)
{
	(void)state;
	double y[8] = {1000, 1300, 1600, 1000, 1300, 1600, 1000, 1300};
	growth_fit f;
	assert_int_equal(growth_fit_series(y, 8, &f), 0);
	assert_true(f.step > KB_BOUND); /* the step alone would be fooled */
	assert_false(judge(y, 8, KB_BOUND));
}

/* Descriptors: one lost per cycle is growth, even with a transient one on
 * top; a constant count or one that went down is not. */
static void test_descriptors(void **state)
{
	(void)state;
	double leak[6] = {12, 13, 14, 15, 16, 17};
	double leak_noisy[8] = {12, 13, 15, 15, 16, 18, 18, 19};
	double flat[6] = {12, 12, 12, 12, 12, 12};
	double down[6] = {14, 13, 12, 12, 12, 12};
	assert_true(judge(leak, 6, FD_BOUND));
	assert_true(judge(leak_noisy, 8, FD_BOUND));
	assert_false(judge(flat, 6, FD_BOUND));
	assert_false(judge(down, 6, FD_BOUND));
}

/* Shrinking memory is not growth, however steep. */
static void test_decline_is_flat(void **state)
{
	(void)state;
	double y[6] = {200000, 190000, 180000, 170000, 160000, 150000};
	assert_false(judge(y, 6, KB_BOUND));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_slopes_of_a_line),
		cmocka_unit_test(test_bad_input_refused),
		cmocka_unit_test(test_steady_leak_in_noise_is_growth),
		cmocka_unit_test(test_bound_is_the_line),
		cmocka_unit_test(test_noise_alone_is_flat),
		cmocka_unit_test(test_one_off_rise_is_flat),
		cmocka_unit_test(test_spike_is_flat),
		cmocka_unit_test(test_sawtooth_is_flat),
		cmocka_unit_test(test_descriptors),
		cmocka_unit_test(test_decline_is_flat),
	};
	return cmocka_run_group_tests_name("growth", tests, NULL, NULL);
}
