/* tests/unit/test_admission.c — daemon/net/admission.h: a peer is taken below
 * both connection limits; at max_connections, and at
 * max_connections_per_uid for its uid, it is refused with a limit error
 * naming the limit and its value; one the allow lists refuse is denied
 * with a limit error naming the list, through the same rate-limited log;
 * every refusal is counted by reason (stats' connections_refused); the
 * refusal log's rate limiter (one warning a second, the rest counted) is
 * the admission's own state, so two servers' admissions do not share it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admission.h"
#include "config.h"

#define SEC 1000000000ull

static config g_cfg;
static proto_limits g_lim;
static int g_sv[2];
static struct ucred g_cred;

static int setup(void **state)
{
	(void)state;
	config_defaults(&g_cfg);
	memset(&g_lim, 0, sizeof(g_lim));
	g_lim.max_connections = 4;
	g_lim.max_connections_per_uid = 2;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, g_sv) != 0)
		return -1;
	socklen_t len = sizeof(g_cred);
	return getsockopt(g_sv[0], SOL_SOCKET, SO_PEERCRED, &g_cred, &len);
}

static int teardown(void **state)
{
	(void)state;
	close(g_sv[0]);
	close(g_sv[1]);
	return 0;
}

static void test_limits(void **state)
{
	(void)state;
	admission a;
	admission_init(&a, &g_cfg, &g_lim);
	proto_err err;
	assert_int_equal(admission_check(&a, g_sv[0], &g_cred, 3, 1, 10 * SEC, &err), ADMISSION_TAKE);
	assert_int_equal(err.code, PROTO_OK);

	assert_int_equal(admission_check(&a, g_sv[0], &g_cred, 4, 0, 10 * SEC, &err), ADMISSION_LIMIT);
	assert_int_equal(err.code, PROTO_LIMIT);
	assert_non_null(strstr(err.message, "max_connections = 4 reached"));

	assert_int_equal(admission_check(&a, g_sv[0], &g_cred, 3, 2, 11 * SEC, &err), ADMISSION_LIMIT);
	assert_int_equal(err.code, PROTO_LIMIT);
	assert_non_null(strstr(err.message, "max_connections_per_uid = 2"));

	assert_int_equal(a.refused[PROTO_REFUSED_MAX_CONNECTIONS], 1);
	assert_int_equal(a.refused[PROTO_REFUSED_MAX_CONNECTIONS_PER_UID], 1);
	assert_int_equal(a.refused[PROTO_REFUSED_ALLOW_LIST], 0);
}

static void test_allow_lists_deny(void **state)
{
	(void)state;
	config cfg = g_cfg;
	cfg.allow_uid[0] = g_cred.uid + 1;
	cfg.n_allow_uid = 1;
	admission a;
	admission_init(&a, &cfg, &g_lim);
	proto_err err;
	/* denied before the limits are looked at, even below them, with an
	 * error for the peer's one frame; logged through the limiter */
	assert_int_equal(admission_check(&a, g_sv[0], &g_cred, 0, 0, 10 * SEC, &err), ADMISSION_DENY);
	assert_int_equal(err.code, PROTO_LIMIT);
	assert_non_null(strstr(err.message, "connection refused: uid"));
	assert_non_null(strstr(err.message, "--allow-uid"));
	assert_int_equal(a.warned_ns, 10 * SEC);
	assert_int_equal(admission_check(&a, g_sv[0], &g_cred, 0, 0, 10 * SEC + 1, &err), ADMISSION_DENY);
	assert_int_equal(a.quiet, 1);
	assert_int_equal(a.refused[PROTO_REFUSED_ALLOW_LIST], 2);
	assert_int_equal(a.refused[PROTO_REFUSED_MAX_CONNECTIONS], 0);
	cfg.allow_uid[1] = g_cred.uid;
	cfg.n_allow_uid = 2;
	assert_int_equal(admission_check(&a, g_sv[0], &g_cred, 0, 0, 10 * SEC, &err), ADMISSION_TAKE);
	assert_int_equal(err.code, PROTO_OK);
	assert_int_equal(a.refused[PROTO_REFUSED_ALLOW_LIST], 2);
}

/* One warning a second: refusals in between are counted, the next
 * warning (a second later) reports and resets the count. */
static void test_rate_limit(void **state)
{
	(void)state;
	admission a, b;
	admission_init(&a, &g_cfg, &g_lim);
	admission_init(&b, &g_cfg, &g_lim);
	proto_err err;
	admission_check(&a, g_sv[0], &g_cred, 4, 0, 10 * SEC, &err);
	assert_int_equal(a.warned_ns, 10 * SEC);
	assert_int_equal(a.quiet, 0);
	admission_check(&a, g_sv[0], &g_cred, 4, 0, 10 * SEC + 1, &err);
	admission_check(&a, g_sv[0], &g_cred, 4, 0, 11 * SEC - 1, &err);
	assert_int_equal(a.warned_ns, 10 * SEC);
	assert_int_equal(a.quiet, 2);
	/* another admission has its own limiter: its first refusal warns */
	admission_check(&b, g_sv[0], &g_cred, 4, 0, 10 * SEC + 2, &err);
	assert_int_equal(b.warned_ns, 10 * SEC + 2);
	assert_int_equal(b.quiet, 0);
	admission_check(&a, g_sv[0], &g_cred, 4, 0, 11 * SEC, &err);
	assert_int_equal(a.warned_ns, 11 * SEC);
	assert_int_equal(a.quiet, 0);
	/* a peer taken does not touch the limiter */
	admission_check(&a, g_sv[0], &g_cred, 0, 0, 11 * SEC + 5, &err);
	assert_int_equal(a.warned_ns, 11 * SEC);
	assert_int_equal(a.quiet, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_allow_lists_deny),
		cmocka_unit_test(test_rate_limit),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
