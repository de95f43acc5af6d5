/* tests/common/expect.c — see expect.h. */
#include "expect.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

void expect_open(rawsock *s, const char *path)
{
	int rc = rawsock_open(s, path);
	if (rc)
		fail_msg("connect %s: %s", path, strerror(-rc));
}

void expect_serves(const char *path)
{
	if (!rawsock_daemon_serves(path))
		fail_msg("the daemon no longer answers ping on a new connection");
}

void expect_conn_serves(rawsock *s)
{
	static uint64_t id = 900000;
	proto_request q = {.op = PROTO_OP_PING, .id = ++id};
	proto_reply r;
	int rc = rawsock_call(s, &q, &r, RAWSOCK_TIMEOUT_MS);
	if (rc || !r.ok)
		fail_msg("the connection stopped answering ping (rc %d)", rc);
}
