/* tests/common/group.c — see group.h. */
#include "group.h"

#include <stdio.h>

#include "leakcheck.h"
#include "rawsock.h"
#include "vkgrad.h"

#define SETTLE_MS 30000

int group_daemon_start(daemon_proc *d, const char *const *args, jobcase *warm, size_t n)
{
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
