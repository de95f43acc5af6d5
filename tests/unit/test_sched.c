/* tests/unit/test_sched.c — daemon/sched/ without a GPU.
 * fair.h: two lanes that keep a class busy get the same GPU time whatever
 * their jobs' sizes; estimates are corrected by what jobs really took; a
 * lane that was idle banks no credit; a lane that cannot give a job now is
 * passed over; equal lanes take turns.
 * estimate.h: priors per device type and dtype until a kind is measured,
 * then the measured rate (an exponential average); measurements that are
 * mostly overhead teach nothing; kinds differ by dtype, outputs, forced
 * variant and path; many kinds do not lose the newest. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sched/estimate.h"
#include "sched/fair.h"

/* Serve n jobs from c: each pick charges the lane's job cost (cost[i] for
 * lanes[i]); given[i] adds up what lane i got. */
static void serve(fair_class *c, fair_lane *lanes, const double *cost, double *given, int nl,
		  int n)
{
	for (int k = 0; k < n; k++) {
		fair_lane *l = fair_pick(c, NULL, NULL);
		assert_non_null(l);
		const int i = (int)(l - lanes);
		assert_true(i >= 0 && i < nl);
		fair_charge(c, l, cost[i]);
		given[i] += cost[i];
	}
}

static void test_two_busy_lanes_share_time_not_jobs(void **state)
{
	(void)state;
	fair_class c;
	fair_lane l[2];
	fair_init(&c);
	fair_lane_init(&l[0]);
	fair_lane_init(&l[1]);
	fair_activate(&c, &l[0]);
	fair_activate(&c, &l[1]);
	const double cost[2] = {10000, 1000}; /* ns: one job of lane 0 is ten of lane 1 */
	double given[2] = {0, 0};
	serve(&c, l, cost, given, 2, 2200);
	const double share = given[0] / (given[0] + given[1]);
	assert_true(share > 0.45 && share < 0.55);
}

static void test_corrections_share_what_jobs_really_took(void **state)
{
	(void)state;
	fair_class c;
	fair_lane l[2];
	fair_init(&c);
	fair_lane_init(&l[0]);
	fair_lane_init(&l[1]);
	fair_activate(&c, &l[0]);
	fair_activate(&c, &l[1]);
	/* both estimated at 1000 ns; lane 0's jobs really take 3000 */
	double really[2] = {0, 0};
	for (int k = 0; k < 2000; k++) {
		fair_lane *p = fair_pick(&c, NULL, NULL);
		const int i = (int)(p - l);
		fair_charge(&c, p, 1000);
		const double actual = i == 0 ? 3000 : 1000;
		fair_correct(p, 1000, actual);
		really[i] += actual;
	}
	const double share = really[0] / (really[0] + really[1]);
	assert_true(share > 0.45 && share < 0.55);
}

static void test_idle_time_banks_no_credit(void **state)
{
	(void)state;
	fair_class c;
	fair_lane l[2];
	fair_init(&c);
	fair_lane_init(&l[0]);
	fair_lane_init(&l[1]);
	fair_activate(&c, &l[0]);
	const double cost[2] = {1000, 1000};
	double given[2] = {0, 0};
	serve(&c, l, cost, given, 1, 100); /* lane 0 alone: 100 jobs */
	fair_activate(&c, &l[1]);
	given[0] = 0;
	serve(&c, l, cost, given, 2, 20);
	/* from now on they alternate: lane 1 does not get 100 jobs in a row */
	assert_true(given[0] >= 9000 && given[1] >= 9000);
}

static bool only_lane_0(fair_lane *l, void *ctx)
{
	return l == (fair_lane *)ctx;
}

static void test_a_lane_that_cannot_give_is_passed_over(void **state)
{
	(void)state;
	fair_class c;
	fair_lane l[2];
	fair_init(&c);
	fair_lane_init(&l[0]);
	fair_lane_init(&l[1]);
	fair_activate(&c, &l[0]);
	fair_activate(&c, &l[1]);
	fair_charge(&c, &l[0], 5000); /* lane 1 is behind: it would go first */
	assert_ptr_equal(fair_pick(&c, NULL, NULL), &l[1]);
	assert_ptr_equal(fair_pick(&c, only_lane_0, &l[0]), &l[0]);
	fair_deactivate(&c, &l[0]);
	assert_null(fair_pick(&c, only_lane_0, &l[0]));
	assert_int_equal(c.n, 1);
	fair_deactivate(&c, &l[1]);
	fair_deactivate(&c, &l[1]); /* twice: no-op */
	assert_int_equal(c.n, 0);
	assert_null(fair_pick(&c, NULL, NULL));
}

static void test_equal_lanes_take_turns(void **state)
{
	(void)state;
	fair_class c;
	fair_lane l[3];
	fair_init(&c);
	for (int i = 0; i < 3; i++) {
		fair_lane_init(&l[i]);
		fair_activate(&c, &l[i]);
	}
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 3; i++) {
			fair_lane *p = fair_pick(&c, NULL, NULL);
			assert_ptr_equal(p, &l[i]);
			fair_charge(&c, p, 100);
		}
}

static proto_request req(proto_dtype dt, bool dw, bool db, bool dx, uint64_t b, uint64_t i,
			 uint64_t o)
{
	proto_request q;
	memset(&q, 0, sizeof(q));
	q.op = PROTO_OP_LINEAR_BACKWARD;
	q.dtype = dt;
	q.batch = b, q.in = i, q.out = o;
	q.t[PROTO_T_DW].present = dw;
	q.t[PROTO_T_DB].present = db;
	q.t[PROTO_T_DX].present = dx;
	return q;
}

static void test_estimates_start_from_priors(void **state)
{
	(void)state;
	estimate g, c;
	estimate_init(&g, false);
	estimate_init(&c, true);
	const proto_request q = req(PROTO_F32, true, true, true, 1024, 1024, 1024);
	const uint64_t macs = estimate_macs(&q);
	assert_int_equal(macs, 2ull * 1024 * 1024 * 1024 + 1024 * 1024);
	const uint64_t k = estimate_key(&q, false);
	/* a CPU device is thousands of times slower */
	assert_true(estimate_ns(&c, k, PROTO_F32, macs) > 1000 * estimate_ns(&g, k, PROTO_F32, macs));
	/* 16-bit is faster than f32 on a GPU */
	assert_true(estimate_ns(&g, k, PROTO_BF16, macs) < estimate_ns(&g, k, PROTO_F32, macs));
	/* zero work costs the overhead */
	assert_true(estimate_ns(&g, k, PROTO_F32, 0) > 0);
}

static void test_measurements_teach_the_rate(void **state)
{
	(void)state;
	estimate e;
	estimate_init(&e, false);
	const proto_request q = req(PROTO_F32, true, false, false, 4096, 4096, 4096);
	const uint64_t k = estimate_key(&q, false), macs = estimate_macs(&q);
	/* 10x slower than the prior: 2 ns per 1000 multiply-adds... measured */
	const double truth = 10.0 * estimate_rate(&e, k, PROTO_F32);
	const uint64_t ns = (uint64_t)(e.overhead_ns + truth * (double)macs);
	estimate_learn(&e, k, PROTO_F32, macs, ns);
	assert_true(fabs(estimate_rate(&e, k, PROTO_F32) - truth) < 1e-3 * truth);
	/* then twice as fast: moves a quarter of the way per measurement */
	estimate_learn(&e, k, PROTO_F32, macs, (uint64_t)(e.overhead_ns + truth / 2 * (double)macs));
	const double r1 = estimate_rate(&e, k, PROTO_F32);
	assert_true(fabs(r1 - truth * (1 - 0.125)) < 1e-3 * truth);
	for (int i = 0; i < 40; i++)
		estimate_learn(&e, k, PROTO_F32, macs, (uint64_t)(e.overhead_ns + truth / 2 * (double)macs));
	assert_true(fabs(estimate_rate(&e, k, PROTO_F32) - truth / 2) < 1e-2 * truth);
	assert_int_equal(e.learned, 42);
}

static void test_overhead_bound_measurements_teach_nothing(void **state)
{
	(void)state;
	estimate e;
	estimate_init(&e, false);
	const proto_request q = req(PROTO_F32, true, true, true, 32, 64, 8);
	const uint64_t k = estimate_key(&q, false);
	const double prior = estimate_rate(&e, k, PROTO_F32);
	estimate_learn(&e, k, PROTO_F32, estimate_macs(&q), (uint64_t)(2 * e.overhead_ns));
	assert_true(estimate_rate(&e, k, PROTO_F32) == prior);
	assert_int_equal(e.learned, 0);
	/* ... but the kind is known now: its jobs are that short */
	assert_true(estimate_known(&e, k));
	assert_false(estimate_known(&e, k + 1));
	/* a tiny job that took long (a first dispatch) teaches no rate either */
	estimate_learn(&e, k, PROTO_F32, estimate_macs(&q), (uint64_t)(100 * e.overhead_ns));
	assert_true(estimate_rate(&e, k, PROTO_F32) == prior);
	assert_int_equal(e.learned, 0);
	estimate_learn(&e, k, PROTO_F32, 0, 1000000000); /* no work: nothing to learn */
	assert_int_equal(e.learned, 0);
}

static void test_kinds_are_apart(void **state)
{
	(void)state;
	const proto_request a = req(PROTO_F32, true, false, false, 64, 64, 64);
	proto_request b = a;
	b.dtype = PROTO_BF16;
	proto_request c = a;
	c.t[PROTO_T_DX].present = true;
	proto_request d = a;
	d.variant = (proto_variant)1;
	const uint64_t ka = estimate_key(&a, false);
	assert_true(ka != 0);
	assert_true(ka != estimate_key(&b, false));
	assert_true(ka != estimate_key(&c, false));
	assert_true(ka != estimate_key(&d, false));
	assert_true(ka != estimate_key(&a, true));
	/* the shape is not part of the kind */
	proto_request e = a;
	e.batch = 4096;
	assert_int_equal(ka, estimate_key(&e, false));
	/* learning one kind leaves another's rate alone */
	estimate est;
	estimate_init(&est, false);
	const double prior = estimate_rate(&est, estimate_key(&b, false), PROTO_BF16);
	estimate_learn(&est, ka, PROTO_F32, 1ull << 30, 1000000000);
	assert_true(estimate_rate(&est, estimate_key(&b, false), PROTO_BF16) == prior);
}

static void test_many_kinds_keep_the_newest(void **state)
{
	(void)state;
	estimate e;
	estimate_init(&e, true);
	proto_request q = req(PROTO_F32, true, false, false, 64, 64, 64);
	uint64_t last = 0;
	for (int v = 0; v < 3 * ESTIMATE_KINDS; v++) {
		q.variant = (proto_variant)(v % 8);
		q.dtype = (proto_dtype)(v / 8 % PROTO_DTYPE_COUNT);
		q.t[PROTO_T_DB].present = v / 24 % 2;
		q.t[PROTO_T_DX].present = v / 48 % 2;
		last = estimate_key(&q, v / 96 % 2);
		estimate_learn(&e, last, q.dtype, 1000000, 1000000000 + (uint64_t)v);
	}
	const double want = (1000000000.0 + 3 * ESTIMATE_KINDS - 1 - e.overhead_ns) / 1000000.0;
	assert_true(fabs(estimate_rate(&e, last, q.dtype) - want) < 1e-6 * want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_busy_lanes_share_time_not_jobs),
		cmocka_unit_test(test_corrections_share_what_jobs_really_took),
		cmocka_unit_test(test_idle_time_banks_no_credit),
		cmocka_unit_test(test_a_lane_that_cannot_give_is_passed_over),
		cmocka_unit_test(test_equal_lanes_take_turns),
		cmocka_unit_test(test_estimates_start_from_priors),
		cmocka_unit_test(test_measurements_teach_the_rate),
		cmocka_unit_test(test_overhead_bound_measurements_teach_nothing),
		cmocka_unit_test(test_kinds_are_apart),
		cmocka_unit_test(test_many_kinds_keep_the_newest),
	};
	return cmocka_run_group_tests_name("sched", tests, NULL, NULL);
}
