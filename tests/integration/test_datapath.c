/* tests/integration/test_datapath.c — the small-job path, against real
 * daemons: each job's trace (vkg_trace_last) names every stage once, in
 * order, and its stages add up exactly to the library's round trip, which
 * lies inside the caller's own; with the GPU clock calibrated (lavapipe
 * offers VK_EXT_calibrated_timestamps) and without (VKGRAD_NO_CALIBRATION);
 * `stats` reports each stage's median over its recent window; an idle
 * daemon with 16 connections uses next to no CPU, also one that polls
 * (spin.h) after activity; the library's own wait spin (vkg_set_wait_spin)
 * and its refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "group.h"
#include "jobcase.h"
#include "msg.h"
#include "vkgrad.h"

static daemon_proc g_d;

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static vkg_client *connect_to(const daemon_proc *d)
{
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	if (!c)
		fail_msg("connect: %s: %s", err.code, err.message);
	return c;
}

/* A small job in its own region, filled; the caller frees. */
typedef struct small_job {
	jobcase jc;
	void *map[2];
	uint64_t region[2];
	vkg_job job;
} small_job;

static void small_job_batch(vkg_client *c, small_job *s, uint64_t seed, uint64_t batch)
{
	vkg_error err;
	jobcase_init(&s->jc, batch, 64, 8, JC_ALL, false);
	s->map[0] = vkg_region_create(c, s->jc.size[0], &s->region[0], &err);
	if (!s->map[0])
		fail_msg("region: %s: %s", err.code, err.message);
	assert_int_equal(jobcase_fill(&s->jc, s->map, seed), 0);
	s->job = jobcase_job(&s->jc, s->region);
}

static void small_job_make(vkg_client *c, small_job *s, uint64_t seed)
{
	small_job_batch(c, s, seed, 32);
}

static void small_job_free(vkg_client *c, small_job *s)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(c, s->region[0], s->map[0], s->jc.size[0], &err), 0);
	jobcase_free(&s->jc);
}

static int stage_index(const vkg_trace *t, const char *name)
{
	for (unsigned i = 0; i < t->n_stages; i++)
		if (strcmp(t->stages[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* The stages a complete trace holds, in order: the GPU's part as the
 * daemon can measure it (calibrated: launch, gpu, complete; else gpu and
 * gpu_wait). */
static void expect_trace(const vkg_trace *t, uint64_t t0, uint64_t t1, bool calibrated)
{
	static const char *const cal[] = {"request", "decode", "queue", "record", "submit",
					  "launch", "gpu", "complete", "handoff", "answer",
					  "write", "client_wake"};
	static const char *const uncal[] = {"request", "decode", "queue", "record", "submit",
					    "gpu", "gpu_wait", "handoff", "answer", "write",
					    "client_wake"};
	const char *const *want = calibrated ? cal : uncal;
	const unsigned n = calibrated ? 12 : 11;
	assert_true(t->complete);
	if (t->n_stages != n) {
		for (unsigned i = 0; i < t->n_stages; i++)
			printf("  stage %s %llu ns\n", t->stages[i].name, (unsigned long long)t->stages[i].ns);
		fail_msg("%u stages, want %u", t->n_stages, n);
	}
	uint64_t sum = 0;
	for (unsigned i = 0; i < n; i++) {
		assert_string_equal(t->stages[i].name, want[i]);
		assert_true(t->stages[i].ns < 60000000000ull); /* no wrapped negative */
		sum += t->stages[i].ns;
	}
	/* exactly the library's round trip, which lies within the caller's */
	assert_true(t->t_submit_ns >= t0);
	assert_true(t->t_seen_ns <= t1);
	assert_true(t->t_submit_ns <= t->t_recv_ns && t->t_recv_ns <= t->t_reply_ns &&
		    t->t_reply_ns <= t->t_seen_ns);
	assert_int_equal(sum, t->t_seen_ns - t->t_submit_ns);
	/* the GPU ran the job: some of its time is the GPU's */
	assert_true(t->stages[stage_index(t, "gpu")].ns > 0);
}

/* Synchronous jobs, then asynchronous ones: each its own complete trace. */
static void traces_of(const daemon_proc *d, bool calibrated)
{
	vkg_client *c = connect_to(d);
	small_job s;
	small_job_make(c, &s, 7);
	vkg_error err;
	vkg_trace t;
	for (int i = 0; i < 20; i++) {
		const uint64_t t0 = mono_ns();
		if (vkg_linear_backward(c, &s.job, NULL, &err) != 0)
			fail_msg("job: %s: %s", err.code, err.message);
		const uint64_t t1 = mono_ns();
		assert_int_equal(vkg_trace_last(&t), 0);
		expect_trace(&t, t0, t1, calibrated);
		if (i == 0) {
			printf("trace of job 1 (%s):", calibrated ? "calibrated" : "uncalibrated");
			for (unsigned k = 0; k < t.n_stages; k++)
				printf(" %s %.1f", t.stages[k].name, (double)t.stages[k].ns / 1000.0);
			printf(" (µs)\n");
		}
	}
	uint64_t h[4];
	const uint64_t t0 = mono_ns();
	for (int i = 0; i < 4; i++)
		assert_int_equal(vkg_submit(c, &s.job, &h[i], &err), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(vkg_wait(c, h[i], 60000, NULL, &err), 0);
		assert_int_equal(vkg_trace_last(&t), 0);
		expect_trace(&t, t0, mono_ns(), calibrated);
	}
	char why[256];
	if (jobcase_check(&s.jc, s.map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("result: %s", why);
	/* a failed job leaves no trace of its own */
	vkg_job bad = s.job;
	bad.batch = 1u << 30;
	assert_int_equal(vkg_linear_backward(c, &bad, NULL, &err), VKG_EREMOTE);
	assert_int_equal(vkg_trace_last(&t), 0); /* still the last good one's */
	small_job_free(c, &s);
	vkg_close(c);
}

static void test_trace_adds_up_calibrated(void **state)
{
	(void)state;
	traces_of(&g_d, true);
}

static void test_trace_adds_up_uncalibrated(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const env[] = {"VKGRAD_NO_CALIBRATION=1", NULL};
	assert_int_equal(daemon_proc_start(&d, NULL, env), 0);
	assert_true(daemon_proc_log_contains(&d, "durations only"));
	traces_of(&d, false);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* stats of the daemon c is connected to, decoded into *r. */
static void stats_get(vkg_client *c, proto_reply *r)
{
	void *body = NULL;
	size_t len = 0;
	vkg_error err;
	assert_int_equal(vkg_call_raw(c, "stats", NULL, 0, &body, &len, &err), 0);
	proto_err perr;
	assert_int_equal(proto_reply_decode(body, len, r, &perr), 0);
	free(body);
}

/* A daemon whose loop polls past every batch, its completion thread made
 * 50 ms late (VKGRAD_FAULT_INJECT=late_wait:50): the loop sees the
 * batches done itself and answers them; results right, traces complete. */
static void test_loop_sees_batches_done(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const args[] = {"--spin-us", "100000", "--loop-spin-us", "1000", NULL};
	const char *const env[] = {"VKGRAD_FAULT_INJECT=late_wait:50", NULL};
	assert_int_equal(daemon_proc_start(&d, args, env), 0);
	traces_of(&d, true);
	vkg_client *c = connect_to(&d);
	static proto_reply r;
	stats_get(c, &r);
	printf("budget %llu µs, %llu µs polled; batches seen by the loop %llu, by the completion "
	       "thread %llu, of %llu\n",
	       (unsigned long long)r.stats.spin_budget_us, (unsigned long long)r.stats.spin_us,
	       (unsigned long long)r.stats.spin_hits, (unsigned long long)r.stats.blocking_waits,
	       (unsigned long long)r.stats.batches);
	/* the budget covers most of these tiny batches (1.5 x their 75th
	 * percentile): the loop must have seen a good part of them */
	assert_true(r.stats.spin_hits >= 5);
	assert_true(r.stats.spin_hits + r.stats.blocking_waits >= r.stats.batches);
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* jobs single-job batches of s's kind, synchronous; stats' spin_expected
 * afterwards */
static uint64_t expected_after(vkg_client *c, small_job *s, int jobs)
{
	vkg_error err;
	for (int i = 0; i < jobs; i++)
		if (vkg_linear_backward(c, &s->job, NULL, &err) != 0)
			fail_msg("job: %s: %s", err.code, err.message);
	static proto_reply r;
	stats_get(c, &r);
	return r.stats.spin_expected;
}

/* Expected ends (daemon/sched/spin.h): a single-job batch of a kind seen before
 * gets one (on lavapipe every batch is past the polling budget), a new
 * kind does not; the results stay right. With --spin-us 0, none. Slices
 * are off (--slice-us 60000000): a sliced batch has no expected end, and
 * whether a job is sliced depends on its estimate, which a loaded machine
 * (test-asan beside another binary) can push past the slice length. */
static void test_expected_ends(void **state)
{
	(void)state;
	for (int run = 0; run < 2; run++) {
		daemon_proc d = {0};
		/* --spin-us 10: a kind gets an expected end only when its
		 * batches take longer than the polling budget (at most
		 * --spin-us); at the default 50 a loaded lavapipe's tiny batches
		 * fell on both sides of it (e1 = 1 in a make test) */
		const char *const on[] = {"--spin-us", "10", "--slice-us", "60000000", NULL};
		const char *const off[] = {"--spin-us", "0", "--slice-us", "60000000", NULL};
		assert_int_equal(daemon_proc_start(&d, run ? off : on, NULL), 0);
		vkg_client *c = connect_to(&d);
		small_job a, b;
		small_job_make(c, &a, 11);
		small_job_batch(c, &b, 12, 48); /* another kind */
		/* the first of a kind is learned, each later one expected */
		const uint64_t e1 = expected_after(c, &a, 4);
		const uint64_t e2 = expected_after(c, &b, 1);
		const uint64_t e3 = expected_after(c, &a, 2);
		static proto_reply st;
		stats_get(c, &st);
		printf("spin_expected after 4 jobs of a kind: %llu, one of another: %llu, two more "
		       "of the first: %llu (--spin-us %s; %llu slices, %llu small and %llu large "
		       "jobs)\n",
		       (unsigned long long)e1, (unsigned long long)e2, (unsigned long long)e3,
		       run ? "0" : "10", (unsigned long long)st.stats.sched_slices,
		       (unsigned long long)st.stats.sched_small_jobs,
		       (unsigned long long)st.stats.sched_large_jobs);
		assert_int_equal(e1, run ? 0 : 3);
		assert_int_equal(e2, e1);
		assert_int_equal(e3, run ? 0 : 5);
		char why[256];
		if (jobcase_check(&a.jc, a.map, JC_TOL_F32, why, sizeof(why)) != 0 ||
		    jobcase_check(&b.jc, b.map, JC_TOL_F32, why, sizeof(why)) != 0)
			fail_msg("result: %s", why);
		small_job_free(c, &a);
		small_job_free(c, &b);
		vkg_close(c);
		assert_int_equal(daemon_proc_stop(&d), 0);
	}
}

/* stats: every daemon stage of the jobs above, with a median and p99 in
 * order and a count within the window. */
static void test_stats_stage_medians(void **state)
{
	(void)state;
	vkg_client *c = connect_to(&g_d);
	small_job s;
	small_job_make(c, &s, 9);
	vkg_error err;
	for (int i = 0; i < 10; i++)
		assert_int_equal(vkg_linear_backward(c, &s.job, NULL, &err), 0);
	static proto_reply r;
	stats_get(c, &r);
	static const char *const want[] = {"decode", "queue", "record", "submit", "launch", "gpu",
					   "complete", "handoff", "answer", "write"};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const proto_stage_stat *st = NULL;
		for (unsigned i = 0; i < r.stats.n_stages; i++)
			if (strcmp(r.stats.stages[i].name, want[k]) == 0)
				st = &r.stats.stages[i];
		if (!st)
			fail_msg("stats has no stage '%s'", want[k]);
		printf("  %-9s p50 %8.1f µs  p99 %8.1f µs  count %llu\n", st->name, st->p50_us,
		       st->p99_us, (unsigned long long)st->count);
		assert_true(st->count >= 10 && st->count <= 1024);
		assert_true(st->p50_us >= 0 && st->p50_us <= st->p99_us);
	}
	/* every batch's wait either ended spinning or blocked */
	printf("  completion wait: budget %llu µs, %llu µs spun, %llu hits, %llu blocked\n",
	       (unsigned long long)r.stats.spin_budget_us, (unsigned long long)r.stats.spin_us,
	       (unsigned long long)r.stats.spin_hits, (unsigned long long)r.stats.blocking_waits);
	assert_true(r.stats.spin_hits + r.stats.blocking_waits >= r.stats.batches);
	/* the client's own stages are not the daemon's to report */
	for (unsigned i = 0; i < r.stats.n_stages; i++) {
		assert_string_not_equal(r.stats.stages[i].name, "request");
		assert_string_not_equal(r.stats.stages[i].name, "client_wake");
	}
	small_job_free(c, &s);
	vkg_close(c);
}

/* ---- no busy CPU when idle --------------------------------------------------- */

/* utime + stime of every thread of pid, in clock ticks. */
static uint64_t cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	const char *p = strrchr(buf, ')'); /* past the command name, which may hold blanks */
	assert_non_null(p);
	unsigned long ut = 0, st = 0;
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
				&st), 2);
	return (uint64_t)ut + st;
}

/* 16 connections, each after a job, then idle: over 3 s the daemon uses
 * less than 5 % of a core (generous: an idle daemon should use ~0; a loop
 * that kept polling would use ~100 %). */
static void idle_cpu(const daemon_proc *d, const char *what)
{
	enum { N = 16 };
	vkg_client *c[N];
	small_job s[N];
	vkg_error err;
	for (int i = 0; i < N; i++) {
		c[i] = connect_to(d);
		small_job_make(c[i], &s[i], 100 + (uint64_t)i);
		assert_int_equal(vkg_linear_backward(c[i], &s[i].job, NULL, &err), 0);
	}
	usleep(300000); /* past every polling budget */
	const uint64_t t0 = cpu_ticks(d->pid), w0 = mono_ns();
	sleep(3);
	const uint64_t t1 = cpu_ticks(d->pid), w1 = mono_ns();
	const double cpu_s = (double)(t1 - t0) / (double)sysconf(_SC_CLK_TCK);
	const double share = cpu_s / ((double)(w1 - w0) / 1e9);
	printf("%s daemon, %d idle connections: %.3f s of CPU in %.2f s = %.1f %% of a core\n",
	       what, N, cpu_s, (double)(w1 - w0) / 1e9, 100 * share);
	assert_true(share < 0.05);
	for (int i = 0; i < N; i++) {
		assert_int_equal(vkg_linear_backward(c[i], &s[i].job, NULL, &err), 0); /* still serves */
		small_job_free(c[i], &s[i]);
		vkg_close(c[i]);
	}
}

static void test_idle_cpu_default(void **state)
{
	(void)state;
	idle_cpu(&g_d, "default");
}

/* A daemon that polls past every batch and for 2 ms after each request
 * (spin.h) must still stop polling once nothing happens. */
static void test_idle_cpu_polling(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const args[] = {"--spin-us", "100000", "--loop-spin-us", "2000", NULL};
	assert_int_equal(daemon_proc_start(&d, args, NULL), 0);
	idle_cpu(&d, "polling");
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* The library's wait spin (vkg_set_wait_spin, $VKGRAD_WAIT_SPIN_US): with a
 * budget longer than a job (the reply is found while polling) and shorter
 * (the wait goes on blocking), synchronous and asynchronous jobs give
 * complete traces and results matching float64; vkg_wait's time limit
 * still holds. */
static void test_client_wait_spin(void **state)
{
	(void)state;
	vkg_client *c = connect_to(&g_d);
	small_job s;
	small_job_make(c, &s, 11);
	vkg_error err;
	vkg_trace t;
	const unsigned budgets[] = {VKG_MAX_WAIT_SPIN_US, 1};
	for (unsigned b = 0; b < 2; b++) {
		assert_int_equal(vkg_set_wait_spin(c, budgets[b], &err), 0);
		for (int i = 0; i < 10; i++) {
			const uint64_t t0 = mono_ns();
			if (vkg_linear_backward(c, &s.job, NULL, &err) != 0)
				fail_msg("job (spin %u µs): %s: %s", budgets[b], err.code, err.message);
			assert_int_equal(vkg_trace_last(&t), 0);
			expect_trace(&t, t0, mono_ns(), true);
		}
		uint64_t h[4];
		for (int i = 0; i < 4; i++)
			assert_int_equal(vkg_submit(c, &s.job, &h[i], &err), 0);
		/* a zero time limit caps the spin: done or -ETIMEDOUT, never a wait */
		int rc = vkg_wait(c, h[0], 0, NULL, &err);
		assert_true(rc == 0 || rc == -ETIMEDOUT);
		for (int i = rc == 0 ? 1 : 0; i < 4; i++)
			assert_int_equal(vkg_wait(c, h[i], 60000, NULL, &err), 0);
		char why[256];
		if (jobcase_check(&s.jc, s.map, JC_TOL_F32, why, sizeof(why)) != 0)
			fail_msg("result (spin %u µs): %s", budgets[b], why);
	}
	small_job_free(c, &s);
	vkg_close(c);
}

/* Budgets over the limit are refused, naming the limit or the variable;
 * the connection and the daemon still serve. */
static void test_client_wait_spin_refusals(void **state)
{
	(void)state;
	vkg_client *c = connect_to(&g_d);
	vkg_error err;
	assert_int_equal(vkg_set_wait_spin(c, VKG_MAX_WAIT_SPIN_US + 1, &err), -EINVAL);
	assert_string_equal(err.code, "io");
	assert_non_null(strstr(err.message, "1000000"));
	assert_int_equal(vkg_ping(c, &err), 0);
	vkg_close(c);
	static const char *const bad[] = {"abc", "1000001", "-5", "12us", "99999999999999999999999"};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(setenv("VKGRAD_WAIT_SPIN_US", bad[i], 1), 0);
		vkg_client *x = vkg_connect(g_d.sock, &err);
		if (x)
			fail_msg("VKGRAD_WAIT_SPIN_US=%s accepted", bad[i]);
		assert_int_equal(errno, EINVAL);
		assert_non_null(strstr(err.message, "VKGRAD_WAIT_SPIN_US"));
		assert_non_null(strstr(err.message, "1000000"));
	}
	assert_int_equal(setenv("VKGRAD_WAIT_SPIN_US", "250", 1), 0);
	c = connect_to(&g_d);
	assert_int_equal(vkg_ping(c, &err), 0);
	vkg_close(c);
	assert_int_equal(unsetenv("VKGRAD_WAIT_SPIN_US"), 0);
	c = connect_to(&g_d);
	assert_int_equal(vkg_ping(c, &err), 0);
	vkg_close(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trace_adds_up_calibrated),
		cmocka_unit_test(test_trace_adds_up_uncalibrated),
		cmocka_unit_test(test_loop_sees_batches_done),
		cmocka_unit_test(test_stats_stage_medians),
		cmocka_unit_test(test_expected_ends),
		cmocka_unit_test(test_idle_cpu_default),
		cmocka_unit_test(test_idle_cpu_polling),
		cmocka_unit_test(test_client_wait_spin),
		cmocka_unit_test(test_client_wait_spin_refusals),
	};
	return group_run_plain("datapath", tests, &g_d);
}
