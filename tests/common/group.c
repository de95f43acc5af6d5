/* tests/common/group.c — see group.h. */
#include "group.h"

#include <stdio.h>

#include "leakcheck.h"
#include "rawsock.h"
#include "vkgrad.h"

#define SETTLE_MS 30000

/* The arguments of the group's daemon, for group_daemon_expect_flat. */
static const char *const *g_args;
/* The plain group's daemon (cmocka's group fixtures take no argument). */
static daemon_proc *g_plain;

static int plain_setup(void **state)
{
	(void)state;
	return daemon_proc_start(g_plain, NULL, NULL) == 0 ? 0 : -1;
}

static int plain_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(g_plain) == 0 ? 0 : -1;
}

int group_run_plain_n(const char *name, const struct CMUnitTest *tests, size_t n,
		      daemon_proc *d)
{
	g_plain = d;
	int rc = _cmocka_run_group_tests(name, tests, n, plain_setup, plain_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}

int group_daemon_start(daemon_proc *d, const char *const *args, jobcase *warm, size_t n)
{
	g_args = args;
	if (daemon_proc_start(d, args, NULL) != 0)
		return -1;
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	if (!c) {
		fprintf(stderr, "group: connect %s: %s: %s\n", d->sock, err.code, err.message);
		return -1;
	}
	unsigned bad = n ? jobcase_run(c, warm, n, (unsigned)n, 1, NULL) : 0;
	vkg_close(c);
	if (bad) {
		fprintf(stderr, "group: %u of %zu warm-up jobs failed (above)\n", bad, n);
		return -1;
	}
	if (!rawsock_daemon_serves(d->sock)) {
		fprintf(stderr, "group: the daemon does not answer ping after its warm-up\n");
		return -1;
	}
	return leakcheck_settle(d, SETTLE_MS);
}

int group_daemon_settle(const daemon_proc *d)
{
	if (leakcheck_settle(d, SETTLE_MS) == 0)
		return 0;
	daemon_proc_failures++;
	return -1;
}

void group_daemon_expect_flat(daemon_proc *d, const struct CMUnitTest *tests, size_t n,
			      CMUnitTestFunction self, CMFixtureFunction teardown)
{
	if (daemon_proc_slow()) {
		printf("leakcheck: skipped under VKGRAD_TEST_DAEMON_WRAPPER (memcheck checks leaks)\n");
		skip();
	}
	if (daemon_proc_stop(d) != 0)
		fail_msg("the group's daemon did not stop cleanly (above)");
	d->dir[0] = 0; /* a new directory and socket */
	static const char *const bare[] = {"VKGRAD_VALIDATION=0", LEAKCHECK_MALLOC_ENV, NULL};
	if (daemon_proc_start(d, g_args, bare) != 0)
		fail_msg("the group's daemon did not start again without the validation layer");
	printf("leakcheck: the group's daemon again, without the validation layer (pid %d)\n",
	       (int)d->pid);
	/* a fresh process: two cycles to warm it up */
	const leakcheck_opts o = {.warmup = 2};
	leakcheck_expect_flat_tests(d, tests, n, self, teardown, &o);
}
