/* tests/unit/test_spin.c — daemon/sched/spin.h: the loop's polling budget follows
 * what the device's batches take: the maximum until batches are seen;
 * 1.5 x their 75th percentile plus 5 µs, at most the maximum, while that
 * percentile is within it; 0 (no polling for the GPU) once most batches
 * take longer; back again when they are short again; never with a
 * maximum of 0. Expected ends: a kind's last time, only past the budget,
 * none for an unknown kind, key 0 or a maximum of 0; the oldest kind
 * gives way after SPIN_KINDS others; the lead is 100 µs plus 1/32,
 * at most 1 ms. */
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

static void test_expected_ends(void **state)
{
	(void)state;
	spin s;
	spin_init(&s, 50 * US, 0);
	assert_int_equal(spin_expect(&s, 7), 0); /* unknown */
	spin_learn(&s, 7, 5000 * US);
	assert_int_equal(spin_expect(&s, 7), 5000 * US);
	assert_int_equal(spin_expect(&s, 8), 0);
	spin_learn(&s, 7, 4000 * US); /* the last time counts */
	assert_int_equal(spin_expect(&s, 7), 4000 * US);
	/* within the budget (50 µs until batches say otherwise): none */
	spin_learn(&s, 9, 40 * US);
	assert_int_equal(spin_expect(&s, 9), 0);
	/* key 0 is no kind */
	spin_learn(&s, 0, 5000 * US);
	assert_int_equal(spin_expect(&s, 0), 0);
	/* SPIN_KINDS new kinds later the oldest is gone, the newest kept */
	for (uint64_t k = 100; k < 100 + SPIN_KINDS; k++)
		spin_learn(&s, k, 1000 * US + k);
	assert_int_equal(spin_expect(&s, 7), 0);
	assert_int_equal(spin_expect(&s, 100 + SPIN_KINDS - 1), 1000 * US + 100 + SPIN_KINDS - 1);
	/* a batch that ended before its submission returned (0 ns, as
	 * lavapipe's can under load): past a budget of 0 (batches longer than
	 * the maximum) its kind's next end is still expected, at once */
	spin l;
	spin_init(&l, 10 * US, 0);
	for (int i = 0; i < 40; i++)
		spin_note(&l, 500 * US);
	assert_int_equal(l.budget_ns, 0);
	spin_learn(&l, 7, 0);
	assert_int_equal(spin_expect(&l, 7), 1);
	spin_learn(&l, 7, 600 * US);
	assert_int_equal(spin_expect(&l, 7), 600 * US);
	/* a maximum of 0: no polling, no expected ends */
	spin z;
	spin_init(&z, 0, 0);
	spin_learn(&z, 7, 5000 * US);
	assert_int_equal(spin_expect(&z, 7), 0);
}

static void test_lead(void **state)
{
	(void)state;
	assert_int_equal(spin_lead(0), 100 * US);
	assert_int_equal(spin_lead(3200 * US), 200 * US);
	assert_int_equal(spin_lead(28800 * US), 1000 * US);
	assert_int_equal(spin_lead(1000000 * US), 1000 * US);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_starts_at_the_maximum),
		cmocka_unit_test(test_short_batches_set_the_budget),
		cmocka_unit_test(test_long_batches_stop_the_polling),
		cmocka_unit_test(test_zero_maximum_never_polls),
		cmocka_unit_test(test_expected_ends),
		cmocka_unit_test(test_lead),
	};
	return cmocka_run_group_tests_name("spin", tests, NULL, NULL);
}
