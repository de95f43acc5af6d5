/* tests/unit/test_spin.c — daemon/spin.h: the loop's polling budget follows
 * what the device's batches take: the maximum until batches are seen;
 * 1.5 x their 75th percentile plus 5 µs, at most the maximum, while that
 * percentile is within it; 0 (no polling for the GPU) once most batches
 * take longer; back again when they are short again; never with a
 * maximum of 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spin.h"

#define US 1000ull

static void test_starts_at_the_maximum(void **state)
{
	(void)state;
	spin s;
	spin_init(&s, 50 * US, 20 * US);
	assert_int_equal(s.budget_ns, 50 * US);
	assert_int_equal(s.after_ns, 20 * US);
}

static void test_short_batches_set_the_budget(void **state)
{
	(void)state;
	spin s;
	spin_init(&s, 50 * US, 0);
	/* 20 µs batches: 1.5 x 20 + 5 = 35 µs */
	for (int i = 0; i < 40; i++)
		spin_note(&s, 20 * US);
	assert_int_equal(s.budget_ns, 35 * US);
	/* a quarter of them long: the 75th percentile is still a short one */
	for (int i = 0; i < 40; i++)
		spin_note(&s, i % 4 == 0 ? 5000 * US : 10 * US);
	assert_int_equal(s.budget_ns, 20 * US);
	/* 40 µs batches: 65 µs, capped at the maximum */
	for (int i = 0; i < 40; i++)
		spin_note(&s, 40 * US);
	assert_int_equal(s.budget_ns, 50 * US);
}

static void test_long_batches_stop_the_polling(void **state)
{
	(void)state;
	spin s;
	spin_init(&s, 50 * US, 0);
	/* most batches past the maximum: polling would seldom catch one */
	for (int i = 0; i < 40; i++)
		spin_note(&s, i % 2 ? 60 * US : 1000 * US);
	assert_int_equal(s.budget_ns, 0);
	/* the first short batch does not bring it back, most of them do */
	spin_note(&s, 10 * US);
	assert_int_equal(s.budget_ns, 0);
	for (int i = 0; i < SPIN_WINDOW; i++)
		spin_note(&s, 10 * US);
	assert_int_equal(s.budget_ns, 20 * US);
}

static void test_zero_maximum_never_polls(void **state)
{
	(void)state;
	spin s;
	spin_init(&s, 0, 0);
	for (int i = 0; i < 40; i++)
		spin_note(&s, 1 * US);
	assert_int_equal(s.budget_ns, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_starts_at_the_maximum),
		cmocka_unit_test(test_short_batches_set_the_budget),
		cmocka_unit_test(test_long_batches_stop_the_polling),
		cmocka_unit_test(test_zero_maximum_never_polls),
	};
	return cmocka_run_group_tests_name("spin", tests, NULL, NULL);
}
