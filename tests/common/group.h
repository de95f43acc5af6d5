/* tests/common/group.h — one daemon shared by the tests of a cmocka group.
 *
 * A plain group (test_cli, test_client, test_datapath): the daemon started
 * with default arguments before the first test and stopped, and checked,
 * after the last (group_run_plain).
 *
 * A settled group (test_errors, test_hostile): started and warmed up by
 * the group setup, let settle after each test (the per-test teardown), its
 * growth judged by a last test that runs the group's tests again and again
 * (group_daemon_expect_flat), stopped and checked by the group teardown
 * (daemon_proc_stop: no validation error, a clean exit). */
#ifndef VKG_TEST_GROUP_H
#define VKG_TEST_GROUP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon_proc.h"
#include "jobcase.h"

/* Run the cmocka group `name` of tests[0..n) with a plain daemon d: started
 * (daemon_proc_start, no extra arguments or environment) by the group
 * setup, stopped by its teardown (daemon_proc_stop: no validation error, a
 * clean exit). Returns main's exit status: 1 when a test failed or the
 * daemon did not start or stop cleanly (cmocka 1.1 still returns 0 after a
 * failed group teardown: daemon_proc_failures counts it), else 0. */
int group_run_plain_n(const char *name, const struct CMUnitTest *tests, size_t n,
		      daemon_proc *d);
/* The same for an array `tests` (its length taken from its size). */
#define group_run_plain(name, tests, d) \
	group_run_plain_n(name, tests, sizeof(tests) / sizeof((tests)[0]), d)

/* Start d with `args` (NULL-terminated, or NULL), then warm it up: run
 * warm[0..n) through one client, all in flight at once (jobcase_run, seed
 * 1), and a new connection must answer ping; then wait until it settled.
 * Returns 0, or -1 after printing why. */
int group_daemon_start(daemon_proc *d, const char *const *args, jobcase *warm, size_t n);
/* The per-test teardown: the daemon settles (leakcheck_settle, 30 s: no
 * client left, no region, no job) — so the next test starts from an idle
 * daemon. Returns 0, or -1 and counts a failure in daemon_proc_failures. */
int group_daemon_settle(const daemon_proc *d);
/* The growth check, the group's last test: stop d (checked as
 * daemon_proc_stop does: the validation layer saw nothing wrong), start it
 * again on a new socket with the same arguments but WITHOUT the validation
 * layer — the memory judged is then the daemon's own, as deployed, not the
 * layer's bookkeeping, which grows with every Vulkan object it has seen —
 * and with LEAKCHECK_MALLOC_ENV (malloc trims its heaps' free tops) — and
 * run leakcheck_expect_flat_tests(d, tests, n, self, teardown) on it.
 * Skipped under a wrapper (leakcheck.h). Fails the running test. */
void group_daemon_expect_flat(daemon_proc *d, const struct CMUnitTest *tests, size_t n,
			      CMUnitTestFunction self, CMFixtureFunction teardown);

#endif
