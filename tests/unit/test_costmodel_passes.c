/* tests/unit/test_costmodel_passes.c — how many times the cost model
 * submits its probe set (daemon/kernels/costmodel.h): once on a GPU; on a
 * CPU device three times (the first warms the pipelines up), then again while the last pass made some probe of at
 * least COSTMODEL_SETTLE_MIN_NS more than COSTMODEL_SETTLE_GAIN faster
 * (a burst of the host's other work over part of the set), at most
 * COSTMODEL_CPU_MAX_PASSES; a measurement whose last pass still gained
 * that much is unsettled (logged). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "costmodel.h"

#define MS 1e6 /* ns */

static void test_gain(void **state)
{
	(void)state;
	/* the first pass: nothing measured before */
	const double none[3] = {INFINITY, INFINITY, INFINITY};
	const double a[3] = {2 * MS, 1 * MS, 4 * MS};
	assert_true(isinf(costmodel_pass_gain(none, a, 3, COSTMODEL_SETTLE_MIN_NS)));
	/* the same times again, or slower: no gain */
	assert_true(costmodel_pass_gain(a, a, 3, COSTMODEL_SETTLE_MIN_NS) == 1.0);
	const double slower[3] = {3 * MS, 2 * MS, 9 * MS};
	assert_true(costmodel_pass_gain(a, slower, 3, COSTMODEL_SETTLE_MIN_NS) == 1.0);
	/* the largest gain of any probe: 4 ms -> 1 ms */
	const double faster[3] = {1.5 * MS, 0.9 * MS, 1 * MS};
	assert_true(fabs(costmodel_pass_gain(a, faster, 3, COSTMODEL_SETTLE_MIN_NS) - 4.0) < 1e-12);
	/* a probe shorter than min_ns does not count, however much it gained */
	const double before[2] = {1 * MS, 0.1 * MS};
	const double tiny[2] = {1 * MS, 0.01 * MS};
	assert_true(costmodel_pass_gain(before, tiny, 2, COSTMODEL_SETTLE_MIN_NS) == 1.0);
	assert_true(costmodel_pass_gain(before, tiny, 2, 0.005 * MS) > 9.99);
	/* no probes */
	assert_true(costmodel_pass_gain(a, a, 0, COSTMODEL_SETTLE_MIN_NS) == 1.0);
}

static void test_passes(void **state)
{
	(void)state;
	/* a GPU: one pass, whatever the gain */
	assert_true(costmodel_more_passes(0, INFINITY, false));
	assert_false(costmodel_more_passes(1, INFINITY, false));
	assert_false(costmodel_more_passes(1, 1.0, false));
	/* a CPU device: at least COSTMODEL_CPU_PASSES, however settled */
	assert_int_equal(COSTMODEL_CPU_PASSES, 3);
	assert_true(costmodel_more_passes(0, INFINITY, true));
	assert_true(costmodel_more_passes(1, 1.0, true));
	assert_true(costmodel_more_passes(2, 1.0, true));
	/* then more only while the last pass gained over the bound */
	assert_false(costmodel_more_passes(3, 1.0, true));
	assert_false(costmodel_more_passes(3, COSTMODEL_SETTLE_GAIN, true));
	assert_true(costmodel_more_passes(3, COSTMODEL_SETTLE_GAIN + 0.01, true));
	assert_true(costmodel_more_passes(COSTMODEL_CPU_MAX_PASSES - 1, 3.0, true));
	/* and never past COSTMODEL_CPU_MAX_PASSES */
	assert_false(costmodel_more_passes(COSTMODEL_CPU_MAX_PASSES, 3.0, true));
	assert_false(costmodel_more_passes(COSTMODEL_CPU_MAX_PASSES + 1, INFINITY, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gain),
		cmocka_unit_test(test_passes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
