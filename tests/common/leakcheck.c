/* tests/common/leakcheck.c — see leakcheck.h. */
#include "leakcheck.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deadline.h"
#include "growth.h"
#include "rawsock.h"

#define SETTLE_MS 60000
#define MAX_CYCLES 64

#ifdef __SANITIZE_ADDRESS__
static const bool judge_memory = false; /* the quarantine holds freed memory */
#else
static const bool judge_memory = true;
#endif

int leakcheck_sample_daemon(const daemon_proc *d, leakcheck_sample *s)
{
	s->fds = daemon_proc_fd_count(d);
	s->kb = daemon_proc_owned_kb(d);
	return s->fds < 0 || s->kb < 0 ? -1 : 0;
}

static bool idle(const proto_stats *st)
{
	return st->clients == 1 && st->regions == 0 && st->jobs_queued == 0 && st->jobs_running == 0;
}

/* Settle, then sample (out may be NULL) while our one stats connection is
 * still open: every sample counts that connection's descriptor alike. */
static int settle_sample(const daemon_proc *d, int timeout_ms, leakcheck_sample *out)
{
	const int64_t deadline = deadline_now_ms() + deadline_scaled_ms(timeout_ms);
	rawsock s;
	int rc = rawsock_open(&s, d->sock);
	if (rc) {
		fprintf(stderr, "leakcheck: connect %s: %s\n", d->sock, strerror(-rc));
		return -1;
	}
	proto_stats st = {0};
	int prev = -1;
	for (;;) {
		rc = rawsock_call_stats(&s, &st);
		int fds = daemon_proc_fd_count(d);
		if (rc == 0 && idle(&st) && fds >= 0 && fds == prev) {
			rc = out ? leakcheck_sample_daemon(d, out) : 0;
			rawsock_close(&s);
			return rc;
		}
		prev = rc == 0 && idle(&st) ? fds : -1;
		if (rc || fds < 0 || deadline_now_ms() > deadline)
			break;
		deadline_sleep_ms(50);
	}
	rawsock_close(&s);
	fprintf(stderr,
		"leakcheck: the daemon did not settle within %d s (stats rc %d: %llu clients, %llu "
		"regions, %llu jobs queued, %llu running; want 1, 0, 0, 0); its descriptors:\n",
		deadline_scaled_ms(timeout_ms) / 1000, rc, (unsigned long long)st.clients,
		(unsigned long long)st.regions, (unsigned long long)st.jobs_queued,
		(unsigned long long)st.jobs_running);
	daemon_proc_print_fds(d);
	return -1;
}

int leakcheck_settle(const daemon_proc *d, int timeout_ms)
{
	return settle_sample(d, timeout_ms, NULL);
}

/* Defaults filled in; skips the running test under a wrapper. */
static leakcheck_opts resolve(const leakcheck_opts *o)
{
	leakcheck_opts r = o ? *o : (leakcheck_opts){0};
	if (!r.warmup)
		r.warmup = 1;
	if (!r.cycles)
		r.cycles = 5;
	const char *env = getenv("VKGRAD_TEST_LEAK_CYCLES");
	if (env && atoi(env) > 0)
		r.cycles = (unsigned)atoi(env);
	if (r.cycles < GROWTH_MIN_SAMPLES)
		r.cycles = GROWTH_MIN_SAMPLES;
	if (r.cycles > MAX_CYCLES)
		r.cycles = MAX_CYCLES;
	if (r.kb_per_cycle <= 0)
		r.kb_per_cycle = LEAKCHECK_KB_PER_CYCLE;
	if (r.fds_per_cycle <= 0)
		r.fds_per_cycle = LEAKCHECK_FDS_PER_CYCLE;
	if (daemon_proc_slow()) {
		printf("leakcheck: skipped under VKGRAD_TEST_DAEMON_WRAPPER (memcheck checks leaks)\n");
		skip();
	}
	return r;
}

static void print_series(const char *what, const char *unit, const double *y, size_t n,
			 const growth_fit *f)
{
	char desc[256];
	printf("leakcheck %s: %s: %s\n  after each cycle:", what, unit,
	       growth_describe(f, unit, desc, sizeof(desc)));
	for (size_t i = 0; i < n; i++)
		printf(" %.0f", y[i]);
	printf("\n");
}

/* Fit both series, print them; true (after printing why) when one grows. */
static bool grows(const char *what, const double *fds, const double *kb, size_t n,
		  const leakcheck_opts *o, char *why, size_t whylen)
{
	growth_fit ff, fk;
	if (growth_fit_series(fds, n, &ff) != 0 || growth_fit_series(kb, n, &fk) != 0) {
		snprintf(why, whylen, "%s: %zu samples cannot be judged", what, n);
		return true;
	}
	print_series(what, "descriptors", fds, n, &ff);
	print_series(what, "KiB", kb, n, &fk);
	bool gf = growth_grows(&ff, o->fds_per_cycle);
	bool gk = judge_memory && growth_grows(&fk, o->kb_per_cycle);
	if (!judge_memory)
		printf("leakcheck %s: memory not judged in an AddressSanitizer build\n", what);
	snprintf(why, whylen,
		 "%s: %s%s%s grow over %zu cycles after %u warm-up (bounds %.1f descriptors, "
		 "%.0f KiB per cycle; the series are above)",
		 what, gf ? "descriptors" : "", gf && gk ? " and " : "", gk ? "memory" : "", n,
		 o->warmup, o->fds_per_cycle, o->kb_per_cycle);
	return gf || gk;
}

void leakcheck_expect_flat(const daemon_proc *d, const char *what, leakcheck_cycle_fn fn,
			   void *arg, const leakcheck_opts *opts)
{
	leakcheck_opts o = resolve(opts);
	double fds[MAX_CYCLES], kb[MAX_CYCLES];
	for (unsigned c = 0; c < o.warmup + o.cycles; c++) {
		fn(arg);
		leakcheck_sample s;
		if (settle_sample(d, SETTLE_MS, &s) != 0)
			fail_msg("%s: cycle %u: the daemon did not settle (above)", what, c);
		if (c >= o.warmup) {
			fds[c - o.warmup] = s.fds;
			kb[c - o.warmup] = (double)s.kb;
		}
	}
	char why[512];
	if (grows(what, fds, kb, o.cycles, &o, why, sizeof(why)))
		fail_msg("%s", why);
}

/* What rose across each test, summed over the sampled cycles (rise[i]:
 * after test i minus before it), printed for the tests where anything did. */
static void print_rises(const struct CMUnitTest *const *run, size_t m, const leakcheck_sample *rise)
{
	printf("leakcheck: what rose across each test, summed over the sampled cycles "
	       "(memory shows where the heap grew, not always where it leaked):\n");
	for (size_t i = 0; i < m; i++)
		if (rise[i].fds > 0 || rise[i].kb > 0)
			printf("  %-48s %+d descriptors %+ld KiB\n", run[i]->name, rise[i].fds,
			       rise[i].kb);
}

void leakcheck_expect_flat_tests(const daemon_proc *d, const struct CMUnitTest *tests, size_t n,
				 CMUnitTestFunction self, CMFixtureFunction teardown,
				 const leakcheck_opts *opts)
{
	leakcheck_opts o = resolve(opts);
	const struct CMUnitTest **run = calloc(n ? n : 1, sizeof(*run));
	leakcheck_sample *rise = calloc(n ? n : 1, sizeof(*rise));
	assert_true(run && rise);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (tests[i].test_func && tests[i].test_func != self &&
		    tests[i].teardown_func == teardown)
			run[m++] = &tests[i];
	printf("leakcheck: %u + %u cycles of %zu tests\n", o.warmup, o.cycles, m);
	double fds[MAX_CYCLES], kb[MAX_CYCLES];
	leakcheck_sample s = {0}, prev = {0};
	for (unsigned c = 0; c < o.warmup + o.cycles; c++) {
		for (size_t i = 0; i < m; i++) {
			void *state = run[i]->initial_state;
			run[i]->test_func(&state);
			if (settle_sample(d, SETTLE_MS, &s) != 0)
				fail_msg("cycle %u: the daemon did not settle after %s (above)", c,
					 run[i]->name);
			if (c >= o.warmup) {
				rise[i].fds += s.fds - prev.fds;
				rise[i].kb += s.kb - prev.kb;
			}
			prev = s;
		}
		if (c >= o.warmup) {
			fds[c - o.warmup] = s.fds;
			kb[c - o.warmup] = (double)s.kb;
		}
	}
	char why[512];
	bool bad = grows("the group's tests", fds, kb, o.cycles, &o, why, sizeof(why));
	if (bad)
		print_rises(run, m, rise);
	free(run);
	free(rise);
	if (bad)
		fail_msg("%s", why);
}
