/* tests/integration/test_races.c — races that load exposes, repeated until
 * a loaded 2-core machine hits them (issue 38).
 *
 * 1. A job sent right behind one whose batch the device loses (streamed
 *    jobs: each runs alone, its semaphores and command pools go with the
 *    device) must be answered: before the fix the loop destroyed the old
 *    device's semaphores as soon as the engine had finished every batch,
 *    while the driver's queue thread (lavapipe's) could still be releasing
 *    the last submission's hold on them; it then waited on a freed lock,
 *    vkDestroyDevice waited for it, and the loop with it: no recovery,
 *    and the queued job behind the lost one was never answered.
 * 2. A second SIGTERM (or SIGINT) while the daemon stops, after it has
 *    answered everything, while it saves the pipeline cache, must not end
 *    it by the signal: it is logged and the daemon exits 0 by itself.
 *
 * VKGRAD_TEST_RACE_ROUNDS (default 12) sets the rounds of each test;
 * VKGRAD_TEST_FILTER (a cmocka pattern, `*` allowed) picks the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "deadline.h"
#include "jobcase.h"
#include "lregion.h"
#include "rawsock.h"

static int rounds(void)
{
	const char *s = getenv("VKGRAD_TEST_RACE_ROUNDS");
	int n = s ? atoi(s) : 0;
	return n > 0 ? n : 12;
}

static void lregion_check(lregion *r, const char *what, int round)
{
	char why[320];
	if (jobcase_check(&r->jc, &r->map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("round %d: %s: %s", round, what, why);
}

/* ---- 1. the job behind a lost batch ------------------------------------------ */

/* One round: job 1 runs; jobs 2 and 3 are sent back to back; job 2's batch
 * is the 2nd wait, which reports device loss; job 3 must be answered, ok
 * (it ran in a batch of its own, or waited for the recreated device), and
 * a job after the recreation runs. Every job streamed in 1-byte chunks. */
static void lost_round(int round)
{
	static const char *const args[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "1",
					   "--stream-min-bytes", "1", NULL};
	static const char *const env[] = {"VKGRAD_FAULT_INJECT=wait:2", NULL};
	daemon_proc d = {0};
	if (daemon_proc_start(&d, args, env) != 0)
		fail_msg("round %d: could not start the daemon", round);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	lregion a, b, cc;
	lregion_make(c, &a, 33, 47, 17, true, 801);
	lregion_make(c, &b, 17, 9, 33, false, 802);
	lregion_make(c, &cc, 64, 31, 16, false, 803);
	vkg_job ja = jobcase_job(&a.jc, &a.id), jb = jobcase_job(&b.jc, &b.id),
		jcc = jobcase_job(&cc.jc, &cc.id);
	vkg_result res;
	if (vkg_linear_backward(c, &ja, &res, &err) != 0)
		fail_msg("round %d: job 1: %s: %s", round, err.code, err.message);
	lregion_check(&a, "job 1", round);
	uint64_t hb, hc;
	assert_int_equal(vkg_submit(c, &jb, &hb, &err), 0);
	assert_int_equal(vkg_submit(c, &jcc, &hc, &err), 0);
	int rc = vkg_wait(c, hb, 60000, &res, &err);
	if (rc != VKG_EREMOTE || strcmp(err.code, "device_lost") != 0) {
		daemon_proc_print_log_tail(&d, 30);
		fail_msg("round %d: job 2: rc %d %s (want device_lost)", round, rc, err.code);
	}
	if (vkg_wait(c, hc, 60000, &res, &err) != 0) {
		daemon_proc_print_log_tail(&d, 40);
		fail_msg("round %d: job 3, sent behind the lost one: %s: %s", round, err.code, err.message);
	}
	lregion_check(&cc, "job 3", round);
	/* after the recreation */
	assert_int_equal(jobcase_fill(&b.jc, &b.map, 804), 0);
	if (vkg_linear_backward(c, &jb, &res, &err) != 0)
		fail_msg("round %d: job 4, after the recreation: %s: %s", round, err.code, err.message);
	lregion_check(&b, "job 4", round);
	lregion_free(c, &a);
	lregion_free(c, &b);
	lregion_free(c, &cc);
	vkg_close(c);
	assert_true(daemon_proc_log_contains(&d, "device recreated after a device loss"));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static void test_job_behind_lost_batch_answered(void **state)
{
	(void)state;
	const int n = rounds();
	const int64_t t0 = deadline_now_ms();
	for (int i = 1; i <= n; i++)
		lost_round(i);
	printf("%d rounds of a device loss with a job behind it: every job answered (%lld ms)\n", n,
	       (long long)(deadline_now_ms() - t0));
}

/* ---- 2. a second SIGTERM while the daemon stops -------------------------------- */

/* Has the daemon's log a line with `needle` yet? */
static bool log_has(const daemon_proc *d, const char *needle)
{
	return daemon_proc_log_contains(d, needle);
}

/* One round: a client's jobs are queued and SIGTERM comes; once the
 * daemon has answered them and closed its connections (its log says so),
 * it is stopping: `extra` more signals, `gap_us` apart, the first one
 * `delay_us` after the log line, land while it closes its handles and
 * saves the pipeline cache. It must exit 0 by itself, log them, and have
 * answered every job. */
static void second_signal_round(int round, unsigned delay_us, int signum)
{
	daemon_proc d = {0};
	if (daemon_proc_start(&d, NULL, NULL) != 0)
		fail_msg("round %d: could not start the daemon", round);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	enum { JOBS = 4 };
	lregion r[JOBS];
	uint64_t h[JOBS];
	for (int i = 0; i < JOBS; i++) {
		lregion_make(c, &r[i], 48, 40, 24, false, 900 + (uint64_t)i);
		vkg_job j = jobcase_job(&r[i].jc, &r[i].id);
		assert_int_equal(vkg_submit(c, &j, &h[i], &err), 0);
	}
	assert_int_equal(kill(d.pid, SIGTERM), 0);
	for (int i = 0; i < JOBS; i++) {
		vkg_result res;
		if (vkg_wait(c, h[i], 60000, &res, &err) != 0)
			fail_msg("round %d: job %d after SIGTERM: %s: %s", round, i, err.code, err.message);
		lregion_check(&r[i], "job after SIGTERM", round);
	}
	/* the stop's last part: connections closed, handles closed, the
	 * cache saved; signals from the moment the log says so */
	const int64_t until = deadline_now_ms() + 60000;
	while (!log_has(&d, "all jobs answered") && deadline_now_ms() < until)
		usleep(200);
	if (delay_us)
		usleep(delay_us);
	int sent = 0;
	for (int k = 0; k < 40 && !log_has(&d, "stopped"); k++) {
		if (kill(d.pid, k % 2 ? signum : SIGTERM) != 0)
			break;
		sent++;
		usleep(250);
	}
	int ws = daemon_proc_wait(&d, 60000);
	for (int i = 0; i < JOBS; i++) {
		munmap(r[i].map, r[i].jc.size[0]);
		jobcase_free(&r[i].jc);
	}
	vkg_close(c);
	if (ws == -1) {
		daemon_proc_kill(&d);
		fail_msg("round %d: no exit within 60 s of SIGTERM", round);
	}
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		daemon_proc_print_log_tail(&d, 20);
		fail_msg("round %d: %d more signal(s) %u µs into the stop: wait status 0x%x (%s %d; want "
			 "exit status 0)",
			 round, sent, delay_us, ws, WIFSIGNALED(ws) ? "killed by signal" : "exit status",
			 WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
	}
	/* (one signal alone may come after the daemon's last look, a few µs
	 * before its exit: then it goes with the process, unlogged) */
	if (sent > 1 && !log_has(&d, "while stopping")) {
		daemon_proc_print_log_tail(&d, 20);
		fail_msg("round %d: %d signal(s) during the stop, none logged", round, sent);
	}
	assert_true(log_has(&d, "stopped"));
	assert_int_equal(daemon_proc_log_validation_errors(&d), 0);
	daemon_proc_cleanup(&d);
}

static void test_second_signal_while_stopping(void **state)
{
	(void)state;
	const int n = rounds();
	for (int i = 1; i <= n; i++)
		second_signal_round(i, (unsigned)(i % 4) * 1500u, i % 3 ? SIGTERM : SIGINT);
	printf("%d stops with more SIGTERM/SIGINT during the final shutdown: exit status 0 each\n", n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_second_signal_while_stopping),
		cmocka_unit_test(test_job_behind_lost_batch_answered),
	};
	/* VKGRAD_TEST_FILTER=test_job* runs the tests whose names match alone */
	const char *filter = getenv("VKGRAD_TEST_FILTER");
	if (filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests_name("races", tests, NULL, NULL) || daemon_proc_failures ? 1 : 0;
}
