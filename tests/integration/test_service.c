/* tests/integration/test_service.c — vkgradd as a system service: socket
 * activation through the real systemd-socket-activate, the sd_notify
 * protocol (READY=1 only after the pipelines are built, STATUS= with the
 * client count, STOPPING=1 on SIGTERM) read from a NOTIFY_SOCKET this test
 * binds, watchdog pings at half of WATCHDOG_USEC, peer checks
 * (--allow-uid/--allow-gid; another uid through setpriv when root), the
 * config file, --help, journald log prefixes with no line per job, and the
 * installed artefacts: `make install` into a staged DESTDIR, then
 * `systemd-analyze verify` and `security` on the units (the plain ones, an
 * instance of the per-GPU templates vkgradd@, the metrics service and
 * timer; the templates differ from the plain units only in their
 * per-instance lines), client/examples/hello_job.c built with `cc …
 * $(pkg-config --cflags --libs vkgrad)` against the staged tree and run
 * against a daemon, and the staged Python package importing the staged
 * library and running a job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "deadline.h"
#include "expect.h"
#include "jobcase.h"
#include "rawsock.h"
#include "vkgrad.h"

#define START_MS 60000
#define MAX_MSGS 1024

/* ---- helpers --------------------------------------------------------------- */

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *path)
{
	if (path && path[0])
		nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

/* Run `cmd` through sh with stdout+stderr into out[n]; the exit status
 * (0..255), or -1 when it did not exit normally. */
static int run_cmd(const char *cmd, char *out, size_t n)
{
	char full[8192];
	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	fflush(NULL);
	FILE *p = popen(full, "r");
	if (!p)
		return -1;
	size_t len = 0;
	if (out && n)
		out[0] = 0;
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), p)) > 0)
		if (out && len + 1 < n) {
			size_t take = got < n - 1 - len ? got : n - 1 - len;
			memcpy(out + len, buf, take);
			len += take;
			out[len] = 0;
		}
	int st = pclose(p);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool have_tool(const char *name)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null", name);
	return run_cmd(cmd, NULL, 0) == 0;
}

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && *b ? b : "build";
}

static unsigned count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	unsigned n = 0;
	int c;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* ---- a daemon with a notify socket ----------------------------------------- */

typedef struct notice {
	int64_t t_us;    /* when we read it (CLOCK_MONOTONIC) */
	int64_t k_us;    /* when the kernel queued it (SO_TIMESTAMP, realtime): gaps
			  * between these do not depend on when we got to read */
	char text[512];
} notice;

typedef struct svc {
	daemon_proc d;
	int nfd;            /* the NOTIFY_SOCKET datagram socket, -1: none */
	char notify[96];
	char env_notify[128];
	int64_t t_spawn;
	notice *msgs;       /* g_msgs: one svc at a time, nothing to leak on failure */
	unsigned nmsgs;
} svc;

static notice g_msgs[MAX_MSGS];

static void svc_init(svc *s, bool notify)
{
	memset(s, 0, sizeof(*s));
	s->nfd = -1;
	assert_int_equal(daemon_proc_init(&s->d), 0);
	s->msgs = g_msgs;
	if (!notify)
		return;
	snprintf(s->notify, sizeof(s->notify), "%s/notify", s->d.dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->notify);
	s->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(s->nfd >= 0);
	assert_int_equal(bind(s->nfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int on = 1;
	assert_int_equal(setsockopt(s->nfd, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on)), 0);
	snprintf(s->env_notify, sizeof(s->env_notify), "NOTIFY_SOCKET=%s", s->notify);
}

/* Free everything; the directory goes when remove is set (after a pass). */
static void svc_free(svc *s, bool remove)
{
	daemon_proc_kill(&s->d);
	if (s->nfd >= 0)
		close(s->nfd);
	s->nfd = -1;
	if (remove)
		remove_tree(s->d.dir);
	s->msgs = NULL;
}

/* Fork and exec argv with stdout+stderr into the daemon's log, like
 * daemon_proc_start does, plus NOTIFY_SOCKET when s has one, `env`
 * ("NAME=value" entries), and WATCHDOG_PID set to the child's own pid when
 * watchdog_pid. */
static void svc_spawn(svc *s, const char *const *argv, const char *const *env, bool watchdog_pid)
{
	fflush(NULL);
	s->t_spawn = deadline_now_us();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(s->d.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		/* nothing from a service manager this test may itself run under */
		unsetenv("JOURNAL_STREAM");
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
		unsetenv("VKGRAD_FAULT_INJECT");
		setenv("VKGRAD_VALIDATION", "1", 1);
		if (s->env_notify[0])
			putenv(s->env_notify);
		for (unsigned i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		if (watchdog_pid) {
			char p[32];
			snprintf(p, sizeof(p), "%d", (int)getpid());
			setenv("WATCHDOG_PID", p, 1);
		}
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	s->d.pid = pid;
}

/* Start vkgradd itself on s's socket, with extra args. */
static void svc_start(svc *s, const char *const *args, const char *const *env, bool watchdog_pid)
{
	const char *argv[32];
	unsigned n = 0;
	argv[n++] = daemon_proc_binary();
	argv[n++] = "--socket";
	argv[n++] = s->d.sock;
	argv[n++] = "--cache-dir";
	argv[n++] = s->d.cache;
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	for (unsigned i = 0; args && args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	svc_spawn(s, argv, env, watchdog_pid);
}

/* Receive every datagram that is there, waiting up to wait_ms for the first. */
static void svc_pump(svc *s, int wait_ms)
{
	struct pollfd p = {.fd = s->nfd, .events = POLLIN};
	if (poll(&p, 1, wait_ms) <= 0)
		return;
	for (;;) {
		char buf[4096];
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(struct timeval))];
		} cm;
		struct iovec io = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
		struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = cm.b,
				    .msg_controllen = sizeof(cm.b)};
		ssize_t n = recvmsg(s->nfd, &mh, 0);
		if (n < 0)
			return;
		buf[n] = 0;
		int64_t k_us = deadline_now_us();
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMP) {
				struct timeval tv;
				memcpy(&tv, CMSG_DATA(c), sizeof(tv));
				k_us = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
			}
		if (s->nmsgs < MAX_MSGS) {
			notice *m = &s->msgs[s->nmsgs++];
			m->t_us = deadline_now_us();
			m->k_us = k_us;
			snprintf(m->text, sizeof(m->text), "%.*s", (int)sizeof(m->text) - 1, buf);
		}
	}
}

/* Does message m hold a line starting with `line`? */
static bool has_line(const notice *m, const char *line)
{
	size_t l = strlen(line);
	for (const char *p = m->text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, line, l) == 0)
			return true;
	return false;
}

/* Wait until a message from index `from` on has a line starting with
 * `line`; its index, or -1 after timeout_ms (or when the daemon died). */
static int svc_wait_for(svc *s, unsigned from, const char *line, int timeout_ms)
{
	const int64_t deadline = deadline_now_us() + (int64_t)timeout_ms * 1000;
	for (;;) {
		for (unsigned i = from; i < s->nmsgs; i++)
			if (has_line(&s->msgs[i], line))
				return (int)i;
		if (deadline_now_us() > deadline)
			return -1;
		if (s->d.pid > 0 && waitpid(s->d.pid, NULL, WNOHANG) == s->d.pid) {
			s->d.pid = 0;
			svc_pump(s, 0);
			for (unsigned i = from; i < s->nmsgs; i++)
				if (has_line(&s->msgs[i], line))
					return (int)i;
			return -1;
		}
		svc_pump(s, 20);
	}
}

static void print_notices(const svc *s)
{
	fprintf(stderr, "notify messages received (%u):\n", s->nmsgs);
	for (unsigned i = 0; i < s->nmsgs && i < 40; i++)
		fprintf(stderr, "  +%.1f ms: %s\n", (double)(s->msgs[i].t_us - s->t_spawn) / 1000.0,
			s->msgs[i].text);
}

/* SIGTERM and wait, for a daemon that daemon_proc_stop cannot query (it
 * refuses our connections): exit status 0 and no validation error. */
static void stop_unqueried(daemon_proc *d)
{
	assert_true(d->pid > 0);
	kill(d->pid, SIGTERM);
	int ws = daemon_proc_wait(d, START_MS);
	if (ws == -1 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0 ||
	    daemon_proc_log_validation_errors(d) != 0) {
		daemon_proc_print_log_tail(d, 30);
		fail_msg("vkgradd did not stop cleanly (wait status 0x%x)", ws);
	}
}

static void wait_connectable(svc *s)
{
	const int64_t deadline = deadline_now_us() + (int64_t)START_MS * 1000;
	while (!rawsock_daemon_serves(s->d.sock)) {
		if (deadline_now_us() > deadline || (s->d.pid > 0 && waitpid(s->d.pid, NULL, WNOHANG) == s->d.pid)) {
			daemon_proc_print_log_tail(&s->d, 30);
			fail_msg("vkgradd never served %s", s->d.sock);
		}
		deadline_sleep_ms(20);
	}
}

static void run_jobs(const char *sock, uint64_t seed)
{
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	if (!c)
		fail_msg("connect to %s: %s: %s", sock, err.code, err.message);
	jobcase cases[4];
	jobcase_init(&cases[0], 1, 1, 1, JC_ALL, false);
	jobcase_init(&cases[1], 33, 31, 17, JC_ALL, false);
	jobcase_init(&cases[2], 7, 300, 5, JC_DW | JC_DB, true);
	jobcase_init(&cases[3], 64, 64, 8, JC_DX, false);
	unsigned failed = jobcase_run(c, cases, 4, 2, seed, NULL);
	for (int i = 0; i < 4; i++)
		jobcase_free(&cases[i]);
	vkg_close(c);
	assert_int_equal(failed, 0);
}

/* ---- socket activation ------------------------------------------------------ */

static void test_socket_activation(void **state)
{
	(void)state;
	if (!have_tool("systemd-socket-activate")) {
		printf("skipped: systemd-socket-activate is not installed (package systemd)\n");
		skip();
	}
	svc s;
	svc_init(&s, false);
	/* the tool passes on only a few variables of its own environment:
	 * name the others (the sanitizers' options under make test-asan) */
	const char *argv[32];
	unsigned n = 0;
	argv[n++] = "systemd-socket-activate";
	argv[n++] = "-l";
	argv[n++] = s.d.sock;
	argv[n++] = "-E";
	argv[n++] = "VKGRAD_VALIDATION=1";
	static const char *const pass[] = {"ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS",
					   "VKGRAD_KEEP_DRIVERS"};
	for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
		if (getenv(pass[i])) {
			argv[n++] = "-E";
			argv[n++] = pass[i];
		}
	argv[n++] = daemon_proc_binary();
	argv[n++] = "--cache-dir";
	argv[n++] = s.d.cache;
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	/* a socket path that is not the one passed: must be ignored */
	argv[n++] = "--socket";
	argv[n++] = "/nonexistent/vkgrad.sock";
	argv[n] = NULL;
	svc_spawn(&s, argv, NULL, false);
	/* the tool binds the socket, then execs vkgradd on the first connection */
	struct stat st;
	const int64_t deadline = deadline_now_us() + 10 * 1000000;
	while (stat(s.d.sock, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		if (deadline_now_us() > deadline) {
			daemon_proc_print_log_tail(&s.d, 20);
			fail_msg("systemd-socket-activate did not create %s", s.d.sock);
		}
		deadline_sleep_ms(10);
	}
	run_jobs(s.d.sock, 11);
	assert_true(daemon_proc_log_contains(&s.d, "(passed by the service manager)"));
	assert_true(daemon_proc_log_contains(&s.d, "Khronos validation layer enabled"));
	proto_stats ps;
	assert_int_equal(rawsock_stats(s.d.sock, &ps), 0);
	assert_int_equal(ps.validation_errors, 0);
	assert_true(ps.jobs_done >= 4);
	stop_unqueried(&s.d);
	/* the socket belongs to the service manager: the daemon leaves it */
	assert_int_equal(stat(s.d.sock, &st), 0);
	svc_free(&s, true);
}

/* ---- readiness, status, stopping -------------------------------------------- */

static void test_ready_after_pipelines_then_stopping(void **state)
{
	(void)state;
	svc s;
	svc_init(&s, true);
	svc_start(&s, NULL, NULL, false);
	int ready = svc_wait_for(&s, 0, "READY=1", START_MS);
	if (ready < 0) {
		print_notices(&s);
		daemon_proc_print_log_tail(&s.d, 30);
		fail_msg("no READY=1 within %d s", START_MS / 1000);
	}
	/* READY=1 after the pipelines are built and the socket listens: the
	 * daemon wrote those log lines before sending it */
	if (!daemon_proc_log_contains(&s.d, "pipelines: ") ||
	    !daemon_proc_log_contains(&s.d, " built") ||
	    !daemon_proc_log_contains(&s.d, "listening on ")) {
		daemon_proc_print_log_tail(&s.d, 30);
		fail_msg("READY=1 came before the pipelines were built or the socket listened");
	}
	int building = svc_wait_for(&s, 0, "STATUS=building pipelines", 0);
	assert_true(building >= 0 && building < ready);
	assert_true(has_line(&s.msgs[ready], "STATUS=serving on "));
	/* and a client connecting right after READY is served */
	int64_t t_ready = s.msgs[ready].t_us;
	assert_true(rawsock_daemon_serves(s.d.sock));
	char pl[160] = "";
	FILE *f = fopen(s.d.log, "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "pipelines: ") && strstr(line, " built"))
			snprintf(pl, sizeof(pl), "%.*s", (int)sizeof(pl) - 1, line);
	if (f)
		fclose(f);
	printf("READY=1 %.1f ms after exec; first ping answered %.1f ms after READY; log: %s",
	       (double)(t_ready - s.t_spawn) / 1000.0, (double)(deadline_now_us() - t_ready) / 1000.0, pl);

	/* STATUS= follows the client count */
	unsigned from = s.nmsgs;
	rawsock r;
	assert_int_equal(rawsock_open(&r, s.d.sock), 0);
	int one = svc_wait_for(&s, from, "STATUS=serving on", START_MS);
	while (one >= 0 && !strstr(s.msgs[one].text, "; 1 client(s)"))
		one = svc_wait_for(&s, (unsigned)one + 1, "STATUS=serving on", START_MS);
	rawsock_close(&r);
	if (one < 0) {
		print_notices(&s);
		fail_msg("no STATUS= with 1 client");
	}
	int zero = svc_wait_for(&s, (unsigned)one + 1, "STATUS=serving on", START_MS);
	while (zero >= 0 && !strstr(s.msgs[zero].text, "; 0 client(s)"))
		zero = svc_wait_for(&s, (unsigned)zero + 1, "STATUS=serving on", START_MS);
	if (zero < 0) {
		print_notices(&s);
		fail_msg("no STATUS= with 0 clients after the client left");
	}
	assert_int_equal(svc_wait_for(&s, 0, "WATCHDOG=1", 0), -1); /* none asked for */

	/* SIGTERM: STOPPING=1, then a clean exit */
	from = s.nmsgs;
	assert_int_equal(daemon_proc_stop(&s.d), 0);
	svc_pump(&s, 1000);
	if (svc_wait_for(&s, from, "STOPPING=1", 0) < 0) {
		print_notices(&s);
		fail_msg("no STOPPING=1 after SIGTERM");
	}
	svc_free(&s, false); /* daemon_proc_stop removed the directory */
}

/* ---- watchdog ------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* WATCHDOG_USEC=400000: the daemon says it pings every 200 ms, and the
 * pings come at that period: the median gap between 12 of them (by when
 * the kernel queued each, SO_TIMESTAMP) is 0.8 to 1.6 times it. A ratio,
 * not a deadline: a loaded machine delays a ping now and then, but neither
 * halves the period nor doubles it (pinging at WATCHDOG_USEC itself). */
static void test_watchdog_pings(void **state)
{
	(void)state;
	enum { PINGS = 13, PERIOD_US = 200000 };
	svc s;
	svc_init(&s, true);
	const char *env[] = {"WATCHDOG_USEC=400000", NULL};
	svc_start(&s, NULL, env, true);
	int ready = svc_wait_for(&s, 0, "READY=1", START_MS);
	if (ready < 0) {
		daemon_proc_print_log_tail(&s.d, 30);
		fail_msg("no READY=1");
	}
	int64_t at[PINGS];
	unsigned pings = 0;
	int from = ready;
	while (pings < PINGS) {
		int i = svc_wait_for(&s, (unsigned)from + 1, "WATCHDOG=1", START_MS);
		if (i < 0) {
			print_notices(&s);
			fail_msg("%u WATCHDOG=1 after READY=1, then none for %d s", pings,
				 START_MS / 1000);
		}
		at[pings++] = s.msgs[i].k_us;
		from = i;
	}
	int64_t gap[PINGS - 1];
	for (unsigned i = 0; i + 1 < PINGS; i++)
		gap[i] = at[i + 1] - at[i];
	qsort(gap, PINGS - 1, sizeof(gap[0]), cmp_i64);
	double median = (double)(gap[(PINGS - 1) / 2 - 1] + gap[(PINGS - 1) / 2]) / 2.0;
	printf("WATCHDOG_USEC=400000: %d gaps between pings, median %.1f ms (period 200 ms), "
	       "shortest %.1f, longest %.1f\n",
	       PINGS - 1, median / 1000.0, (double)gap[0] / 1000.0,
	       (double)gap[PINGS - 2] / 1000.0);
	if (median < 0.8 * PERIOD_US || median > 1.6 * PERIOD_US)
		fail_msg("median gap %.1f ms is not 0.8-1.6 times the 200 ms period", median / 1000.0);
	assert_true(daemon_proc_log_contains(&s.d, "watchdog: pinging every 200 ms"));
	assert_int_equal(daemon_proc_stop(&s.d), 0);
	svc_free(&s, false);
}

/* WATCHDOG_PID naming another process: that one is watched, not us. After
 * five periods, a ping answered proves the loop ran past every timer that
 * was due (libuv runs due timers before it polls), and no WATCHDOG=1 came. */
static void test_watchdog_other_pid(void **state)
{
	(void)state;
	svc s;
	svc_init(&s, true);
	const char *env[] = {"WATCHDOG_USEC=200000", "WATCHDOG_PID=1", NULL};
	svc_start(&s, NULL, env, false);
	assert_true(svc_wait_for(&s, 0, "READY=1", START_MS) >= 0);
	const int64_t t0 = deadline_now_us();
	while (deadline_now_us() - t0 < 500000)
		svc_pump(&s, 50);
	assert_true(rawsock_daemon_serves(s.d.sock));
	svc_pump(&s, 0);
	assert_int_equal(svc_wait_for(&s, 0, "WATCHDOG=1", 0), -1);
	assert_int_equal(daemon_proc_stop(&s.d), 0);
	svc_free(&s, false);
}

/* ---- peer checks ---------------------------------------------------------- */

static void test_peer_uid_not_allowed_is_refused(void **state)
{
	(void)state;
	char uid[16], gid[16], want[96];
	snprintf(uid, sizeof(uid), "%u", getuid() == 4242 ? 4243u : 4242u);
	snprintf(gid, sizeof(gid), "%u", getgid() == 4242 ? 4243u : 4242u);
	svc s;
	svc_init(&s, false);
	const char *args[] = {"--allow-uid", uid, "--allow-gid", gid, NULL};
	svc_start(&s, args, NULL, false);
	const int64_t deadline = deadline_now_us() + (int64_t)START_MS * 1000;
	while (!daemon_proc_log_contains(&s.d, "listening on ")) {
		assert_true(deadline_now_us() < deadline);
		deadline_sleep_ms(20);
	}
	rawsock r;
	assert_int_equal(rawsock_open(&r, s.d.sock), 0);
	proto_request q = {.op = PROTO_OP_PING, .id = 1};
	rawsock_send_request(&r, &q, NULL, 0); /* may fail: already closed */
	/* one error frame saying why (issue 25), then the close */
	proto_reply rep;
	assert_int_equal(rawsock_recv(&r, &rep, 10000), 0);
	assert_false(rep.ok);
	assert_int_equal(rep.err.code, PROTO_LIMIT);
	assert_non_null(strstr(rep.err.message, "--allow-uid"));
	assert_int_equal(rawsock_expect_eof(&r, 10000), 0);
	rawsock_close(&r);
	snprintf(want, sizeof(want), "refusing client pid %d uid %u", (int)getpid(), getuid());
	if (!daemon_proc_log_contains(&s.d, want)) {
		daemon_proc_print_log_tail(&s.d, 20);
		fail_msg("no '%s' in the log", want);
	}
	stop_unqueried(&s.d);
	svc_free(&s, true);
}

static void test_peer_other_uid_via_setpriv(void **state)
{
	(void)state;
	if (getuid() != 0) {
		printf("skipped: running a client as another uid needs root (uid %u)\n", getuid());
		skip();
	}
	if (!have_tool("setpriv")) {
		printf("skipped: setpriv (util-linux) is not installed\n");
		skip();
	}
	char cli[PATH_MAX], cmd[PATH_MAX + 256], out[4096];
	snprintf(cli, sizeof(cli), "%s/vkgrad", build_dir());
	snprintf(cmd, sizeof(cmd), "setpriv --reuid=65534 --regid=65534 --clear-groups %s --version", cli);
	if (run_cmd(cmd, out, sizeof(out)) != 0) {
		printf("skipped: uid 65534 cannot run %s (directory permissions?): %s\n", cli, out);
		skip();
	}
	svc s;
	svc_init(&s, false);
	char uid[16];
	snprintf(uid, sizeof(uid), "%u", getuid());
	const char *args[] = {"--allow-uid", uid, "--allow-gid", "4242", NULL};
	svc_start(&s, args, NULL, false);
	wait_connectable(&s);
	/* let the other uid through the file permissions: the daemon decides */
	chmod(s.d.dir, 0711);
	chmod(s.d.sock, 0666);

	snprintf(cmd, sizeof(cmd), "setpriv --reuid=65534 --regid=65534 --clear-groups %s --socket %s ping",
		 cli, s.d.sock);
	int rc = run_cmd(cmd, out, sizeof(out));
	printf("uid 65534, no allowed group: exit %d: %s", rc, out);
	assert_int_equal(rc, 3); /* daemon or connection error */
	assert_true(daemon_proc_log_contains(&s.d, "uid 65534 gid 65534: uid 65534 not in --allow-uid"));

	snprintf(cmd, sizeof(cmd), "setpriv --reuid=65534 --regid=65534 --groups=4242 %s --socket %s ping",
		 cli, s.d.sock);
	rc = run_cmd(cmd, out, sizeof(out));
	printf("uid 65534 with supplementary group 4242 (allowed): exit %d: %s", rc, out);
	assert_int_equal(rc, 0);

	snprintf(cmd, sizeof(cmd), "%s --socket %s ping", cli, s.d.sock);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_int_equal(daemon_proc_stop(&s.d), 0);
	svc_free(&s, false);
}

/* ---- configuration -------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_config_file_then_flags(void **state)
{
	(void)state;
	daemon_proc d;
	assert_int_equal(daemon_proc_init(&d), 0);
	char conf[128], bad[128];
	snprintf(conf, sizeof(conf), "%s/vkgradd.conf", d.dir);
	snprintf(bad, sizeof(bad), "%s/bad.conf", d.dir);
	write_file(conf, "# vkgradd settings\n"
			 "max-inflight = 7\n"
			 "  max-regions=9   \n"
			 "\n"
			 "; another comment\n"
			 "allow-uid = 4242\n"
			 "no-host-import = true\n");
	char uid[16];
	snprintf(uid, sizeof(uid), "%u", getuid());
	/* the command line overrides the file: max-regions, and the uid list
	 * (else the file's 4242 would refuse us) */
	const char *args[] = {"--config", conf, "--max-regions", "5", "--allow-uid", uid, NULL};
	assert_int_equal(daemon_proc_start(&d, args, NULL), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_service", &info, &err), 0);
	assert_int_equal(info.max_inflight, 7);
	assert_int_equal(info.max_regions, 5);
	uint64_t region;
	void *m = vkg_region_create(c, 4096, &region, &err);
	assert_non_null(m);
	vkg_stats st;
	assert_int_equal(vkg_stats_get(c, &st, &err), 0);
	assert_int_equal(st.staged_regions, 1); /* no-host-import = true */
	vkg_region_destroy(c, region, m, 4096, &err);
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);

	/* a bad file: exit 2, the file and line named */
	assert_int_equal(daemon_proc_init(&d), 0);
	snprintf(bad, sizeof(bad), "%s/bad.conf", d.dir);
	write_file(bad, "max-inflight = 8\nbogus-key = 1\n");
	const char *a2[] = {"--config", bad, NULL};
	int ws = daemon_proc_run(a2, d.log, 10000);
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 2);
	char want[256];
	snprintf(want, sizeof(want), "%s:2: unknown key 'bogus-key'", bad);
	assert_true(daemon_proc_log_contains(&d, want));
	write_file(bad, "max-inflight = 0\n");
	ws = daemon_proc_run(a2, d.log, 10000);
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 2);
	assert_true(daemon_proc_log_contains(&d, ":1: --max-inflight: '0' is not an integer"));
	const char *a3[] = {"--config", "/nonexistent/vkgradd.conf", NULL};
	ws = daemon_proc_run(a3, d.log, 10000);
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 2);
	remove_tree(d.dir);
}

static void test_help_lists_every_setting(void **state)
{
	(void)state;
	static const char *const settings[] = {
		"--config FILE", "--socket PATH", "--cache-dir DIR", "--device", "--log-level",
		"--allow-uid LIST", "--allow-gid LIST", "--max-frame", "--max-regions",
		"--max-region-bytes", "--max-total-region-bytes", "--max-region-bytes-per-uid",
		"--max-inflight", "--max-dim",
		"--max-connections", "--batch-jobs", "--batch-per-client", "--max-batch-bytes",
		"--spin-us", "--loop-spin-us", "--inflight-batches", "--max-outbound-bytes",
		"--no-host-import", "--client-batch-macs N|auto",
		"--version", "--list-devices", "CACHE_DIRECTORY", "NOTIFY_SOCKET", "WATCHDOG_USEC",
		"LISTEN_FDS",
	};
	char cmd[PATH_MAX], out[16384];
	snprintf(cmd, sizeof(cmd), "%s --help", daemon_proc_binary());
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		if (!strstr(out, settings[i]))
			fail_msg("--help does not mention %s", settings[i]);
	/* every numeric setting states its default */
	unsigned defaults = 0;
	for (const char *p = out; (p = strstr(p, "(default")); p++)
		defaults++;
	assert_true(defaults >= 17);
	snprintf(cmd, sizeof(cmd), "%s --version", daemon_proc_binary());
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_string_equal(out, "vkgradd " VKG_VERSION "\n");
}

/* ---- logs ------------------------------------------------------------------ */

/* 24 small jobs on c (4 in flight), every one checked. */
static void run_24_jobs(vkg_client *c)
{
	jobcase cases[24];
	for (int i = 0; i < 24; i++)
		jobcase_init(&cases[i], 1 + (uint64_t)i, 3, 2, JC_ALL, false);
	assert_int_equal(jobcase_run(c, cases, 24, 4, 5, NULL), 0);
	for (int i = 0; i < 24; i++)
		jobcase_free(&cases[i]);
}

/* Wait (stats over s) until `done` jobs are done and none is left. */
static void wait_jobs_done(rawsock *s, uint64_t done)
{
	const int64_t until = deadline_now_ms() + START_MS;
	proto_stats st;
	for (;;) {
		assert_int_equal(rawsock_call_stats(s, &st), 0);
		if (st.jobs_done >= done && st.jobs_queued + st.jobs_running == 0)
			return;
		if (deadline_now_ms() > until)
			fail_msg("stats: %llu jobs done, want %llu", (unsigned long long)st.jobs_done,
				 (unsigned long long)done);
		deadline_sleep_ms(10);
	}
}

/* s with every run of digits made one '#' (pids, counts, times differ
 * between two lines that say the same thing). */
static void mask_digits(char *s)
{
	char *w = s;
	for (const char *r = s; *r; r++)
		if (*r < '0' || *r > '9')
			*w++ = *r;
		else if (w == s || w[-1] != '#')
			*w++ = '#';
	*w = 0;
}

/* Every line carries a journald priority prefix. Whether a line is per job
 * is told by what it says, not by how many came: the daemon runs 24 jobs
 * once (first use of each kernel, a cold driver cache compiling, a slow
 * start: one-off lines may come), then the same 24 again on the same open
 * connection (so no connection comes or goes). Those must add no line at
 * info or debug priority (routine work logs nothing), and no line twice
 * (with digits masked): a line per job would do either. */
static void test_journal_prefixes_and_no_line_per_job(void **state)
{
	(void)state;
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	const char *args[] = {"--log-level", "info", NULL};
	const char *env[] = {"JOURNAL_STREAM=8:4242", NULL};
	assert_int_equal(daemon_proc_start(&d, args, env), 0);
	rawsock st_conn;
	expect_open(&st_conn, d.sock);
	proto_stats st0;
	assert_int_equal(rawsock_call_stats(&st_conn, &st0), 0);
	vkg_client *c = expect_client(d.sock);
	run_24_jobs(c);
	wait_jobs_done(&st_conn, st0.jobs_done + 24);
	unsigned mark = count_lines(d.log);
	run_24_jobs(c);
	wait_jobs_done(&st_conn, st0.jobs_done + 48);
	FILE *f = fopen(d.log, "r");
	assert_non_null(f);
	enum { MAXT = 64 };
	static char seen[MAXT][256];
	unsigned nseen = 0, n = 0, added = 0, bad = 0;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (!(line[0] == '<' && line[1] >= '3' && line[1] <= '7' && line[2] == '>'))
			fail_msg("log line %u without a journald prefix: %s", n, line);
		if (n <= mark)
			continue;
		added++;
		if (line[1] >= '6') {
			fprintf(stderr, "a line at info/debug while jobs ran: %s", line);
			bad++;
		}
		mask_digits(line);
		bool again = false;
		for (unsigned i = 0; i < nseen && !again; i++)
			again = strncmp(seen[i], line, sizeof(seen[i]) - 1) == 0;
		if (again) {
			fprintf(stderr, "a line again while jobs ran: %s", line);
			bad++;
		} else if (nseen < MAXT) {
			snprintf(seen[nseen++], sizeof(seen[0]), "%.*s", (int)sizeof(seen[0]) - 1, line);
		}
	}
	fclose(f);
	printf("24 jobs at --log-level info (after 24 others on the same connection) added %u "
	       "log line(s), %u of them routine or repeated\n",
	       added, bad);
	assert_int_equal(bad, 0);
	assert_true(n > 0);
	vkg_close(c);
	rawsock_close(&st_conn);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* --list-devices: what an operator needs to pick vkgradd@ instances, and a
 * device named by its UUID (whole, or the first 8 characters) is the one
 * opened; a UUID that matches nothing is refused with its text. */
static void test_list_devices_and_uuid(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 64], out[16384];
	snprintf(cmd, sizeof(cmd), "%s --list-devices --config /nonexistent", daemon_proc_binary());
	int rc = run_cmd(cmd, out, sizeof(out));
	printf("%s", out);
	assert_int_equal(rc, 0);
	static const char *const want[] = {"0: ", "(cpu, the default)", "    driver  llvmpipe",
					   "Vulkan 1.", "    memory  ", " GiB device-local",
					   "    ids     vendor 0x", "    uuid    ",
					   "    usable  yes: vkgradd --device 0", "unit vkgradd@0.socket",
					   "    queues  family 0: 1 x", " compute", ", timestamps 64 bits"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(out, want[i]))
			fail_msg("--list-devices does not show '%s'", want[i]);
	char uuid[37] = "";
	const char *u = strstr(out, "    uuid    ");
	assert_non_null(u);
	assert_int_equal(sscanf(u + 12, "%36s", uuid), 1);
	assert_int_equal(strlen(uuid), 36);

	/* by the whole UUID and by its first 8 characters: device 0 serves */
	char prefix[9];
	snprintf(prefix, sizeof(prefix), "%.8s", uuid);
	const char *names[2] = {uuid, prefix};
	for (int i = 0; i < 2; i++) {
		daemon_proc d;
		memset(&d, 0, sizeof(d));
		const char *args[] = {"--device", names[i], NULL};
		assert_int_equal(daemon_proc_start(&d, args, NULL), 0);
		assert_true(daemon_proc_log_contains(&d, "using device 0: "));
		assert_int_equal(daemon_proc_stop(&d), 0);
	}
	/* a UUID of no device: refused, naming it */
	char bad[37];
	snprintf(bad, sizeof(bad), "%s", uuid);
	bad[0] = bad[0] == 'f' ? '0' : 'f';
	snprintf(cmd, sizeof(cmd), "%s --socket /nonexistent/s --device %s", daemon_proc_binary(), bad);
	rc = run_cmd(cmd, out, sizeof(out));
	assert_int_equal(rc, 1);
	char msg[96];
	snprintf(msg, sizeof(msg), "no usable Vulkan device matches '%s'", bad);
	if (!strstr(out, msg))
		fail_msg("want '%s' in:\n%s", msg, out);
}

/* ---- installed artefacts ---------------------------------------------------- */

static char g_stage[64];   /* DESTDIR of `make install`, "" before */
static bool g_stage_failed;

/* `make install DESTDIR=… PREFIX=/usr/local` once for the tests below. */
static const char *stage(void)
{
	if (g_stage[0] || g_stage_failed)
		return g_stage_failed ? NULL : g_stage;
	snprintf(g_stage, sizeof(g_stage), "/tmp/vkgrad-stage.XXXXXX");
	if (!mkdtemp(g_stage)) {
		g_stage_failed = true;
		return NULL;
	}
	char cmd[512], out[16384];
	/* a nested make must not join the outer one's jobserver */
	snprintf(cmd, sizeof(cmd),
		 "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install DESTDIR=%s PREFIX=/usr/local BUILD=%s",
		 g_stage, build_dir());
	int rc = run_cmd(cmd, out, sizeof(out));
	if (rc != 0) {
		fprintf(stderr, "%s: exit %d\n%s\n", cmd, rc, out);
		g_stage_failed = true;
		return NULL;
	}
	return g_stage;
}

static void test_make_install_layout(void **state)
{
	(void)state;
	const char *dir = stage();
	assert_non_null(dir);
	static const char *const files[] = {
		"bin/vkgradd", "bin/vkgrad", "bin/vkgrad-bench", "lib/libvkgrad.so.0.2.0",
		"lib/libvkgrad.a", "include/vkgrad.h", "lib/pkgconfig/vkgrad.pc",
		"lib/systemd/system/vkgradd.service",
		"lib/systemd/system/vkgradd.socket", "lib/systemd/system/vkgradd@.service",
		"lib/systemd/system/vkgradd@.socket", "lib/systemd/system/vkgrad-metrics.service",
		"lib/systemd/system/vkgrad-metrics.timer", "lib/sysusers.d/vkgrad.conf",
		"share/man/man8/vkgradd.8", "share/man/man1/vkgrad.1", "etc/vkgrad/vkgradd.conf",
		"share/man/man3/vkgrad.3", "lib/systemd/user/vkgradd.socket",
		"lib/systemd/user/vkgradd.service",
	};
	char p[PATH_MAX], link[PATH_MAX];
	struct stat st;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/usr/local/%s", dir, files[i]);
		if (stat(p, &st) != 0)
			fail_msg("not installed: %s", p);
	}
	snprintf(p, sizeof(p), "%s/usr/local/lib/libvkgrad.so.0", dir);
	ssize_t n = readlink(p, link, sizeof(link) - 1);
	assert_true(n > 0);
	link[n] = 0;
	assert_string_equal(link, "libvkgrad.so.0.2.0");
	snprintf(p, sizeof(p), "%s/usr/local/lib/libvkgrad.so", dir);
	n = readlink(p, link, sizeof(link) - 1);
	assert_true(n > 0);
	link[n] = 0;
	assert_string_equal(link, "libvkgrad.so.0");
	/* the Python package, told where the library went */
	char cmd[PATH_MAX + 128], out[4096];
	snprintf(cmd, sizeof(cmd), "grep -l 'LIBDIR = \"/usr/local/lib\"' %s/usr/local/lib/python3*/dist-packages/vkgrad/_install.py && "
		 "ls %s/usr/local/lib/python3*/dist-packages/vkgrad/__init__.py %s/usr/local/lib/python3*/dist-packages/vkgrad/torch.py",
		 dir, dir, dir);
	if (run_cmd(cmd, out, sizeof(out)) != 0)
		fail_msg("the Python package is not installed as expected:\n%s", out);
	/* the templates were filled */
	snprintf(cmd, sizeof(cmd), "grep -h '@[A-Z]*@' %s/usr/local/lib/systemd/system/* "
		 "%s/usr/local/lib/systemd/user/* %s/usr/local/lib/pkgconfig/vkgrad.pc",
		 dir, dir, dir);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 1);
	/* uninstall into a second stage removes everything it installed */
	char tmp[64] = "/tmp/vkgrad-uninst.XXXXXX";
	assert_non_null(mkdtemp(tmp));
	snprintf(cmd, sizeof(cmd),
		 "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install DESTDIR=%s BUILD=%s >/dev/null && "
		 "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s uninstall DESTDIR=%s BUILD=%s && "
		 "find %s -type f -o -type l",
		 tmp, build_dir(), tmp, build_dir(), tmp);
	int rc = run_cmd(cmd, out, sizeof(out));
	if (rc != 0 || out[0])
		fail_msg("make uninstall left files (exit %d): %s", rc, out);
	remove_tree(tmp);
}

static void test_units_verify_and_security(void **state)
{
	(void)state;
	if (!have_tool("systemd-analyze")) {
		printf("skipped: systemd-analyze is not installed (package systemd)\n");
		skip();
	}
	const char *dir = stage();
	assert_non_null(dir);
	/* The units name /usr/local/bin/vkgradd, which verify wants to exist:
	 * check copies whose paths point into the staged tree, with the staged
	 * man pages on MANPATH for the Documentation= check. */
	char cmd[4 * PATH_MAX], out[65536];
	/* Templates are verified as instance 0 (vkgradd@0.service). */
	snprintf(cmd, sizeof(cmd),
		 "set -e; d=%s; mkdir -p $d/verify; "
		 "for u in vkgradd.service vkgradd.socket vkgradd@.service vkgradd@.socket "
		 "vkgrad-metrics.service vkgrad-metrics.timer; do "
		 "sed \"s|/usr/local/|$d/usr/local/|g\" $d/usr/local/lib/systemd/system/$u >$d/verify/$(echo $u | sed s/@/@0/); done; "
		 "man=--man=no; command -v man >/dev/null && man=--man=yes; "
		 "echo \"verify $man\"; "
		 "MANPATH=$d/usr/local/share/man systemd-analyze verify $man $d/verify/vkgradd.socket $d/verify/vkgradd.service "
		 "$d/verify/vkgradd@0.socket $d/verify/vkgradd@0.service "
		 "$d/verify/vkgrad-metrics.service $d/verify/vkgrad-metrics.timer",
		 dir);
	int rc = run_cmd(cmd, out, sizeof(out));
	printf("systemd-analyze verify (exit %d):\n%s", rc, out);
	assert_int_equal(rc, 0);
	/* nothing but the "verify --man=…" line we echoed */
	assert_null(strchr(strchr(out, '\n') + 1, '\n'));

	static const char *const services[] = {"vkgradd.service", "vkgradd@0.service",
					       "vkgrad-metrics.service"};
	for (size_t i = 0; i < sizeof(services) / sizeof(services[0]); i++) {
		snprintf(cmd, sizeof(cmd), "systemd-analyze security --offline=yes --threshold=30 %s/verify/%s",
			 dir, services[i]);
		rc = run_cmd(cmd, out, sizeof(out));
		char want[128];
		snprintf(want, sizeof(want), "Overall exposure level for %s: ", services[i]);
		const char *lvl = strstr(out, want);
		if (!lvl) {
			printf("%s\n", out);
			fail_msg("%s: no overall exposure level in the output (exit %d)", services[i], rc);
		}
		double exposure = atof(lvl + strlen(want));
		const char *eol = strchr(lvl, '\n');
		printf("systemd-analyze security: %.*s\n", eol ? (int)(eol - lvl) : (int)strlen(lvl), lvl);
		assert_true(exposure <= 3.0);
		assert_int_equal(rc, 0);
	}
}

/* vkgradd@.service/.socket are vkgradd.service/.socket but for the lines
 * that name the instance: a hardening line added to one and not the other
 * fails here. */
static void test_templates_match_plain_units(void **state)
{
	(void)state;
	char cmd[2048], out[16384];
	snprintf(cmd, sizeof(cmd),
		 "set -e; t=$(mktemp -d); trap 'rm -rf $t' EXIT; "
		 "for u in service socket; do "
		 "grep -v -e '^#' -e '^$' -e '^Description=' systemd/vkgradd.$u.in "
		 "| sed -e 's|^Requires=vkgradd.socket|Requires=vkgradd@%%i.socket|' "
		 "-e 's|^After=vkgradd.socket|After=vkgradd@%%i.socket|' "
		 "-e 's|^Also=vkgradd.socket|Also=vkgradd@%%i.socket|' "
		 "-e 's|^\\(ExecStart=.*\\)$|\\1 --device %%I|' "
		 "-e 's|^CacheDirectory=vkgrad$|CacheDirectory=vkgrad/%%i|' "
		 "-e 's|^Environment=XDG_CACHE_HOME=%%C/vkgrad$|Environment=XDG_CACHE_HOME=%%C/vkgrad/%%i|' "
		 "-e 's|^ListenStream=/run/vkgrad/vkgrad.sock$|ListenStream=/run/vkgrad/vkgrad-%%i.sock|' >$t/want.$u; "
		 "grep -v -e '^#' -e '^$' -e '^Description=' systemd/vkgradd@.$u.in >$t/got.$u; "
		 "diff -u $t/want.$u $t/got.$u; "
		 "grep -q '^Description=.*%%I' systemd/vkgradd@.$u.in; done");
	int rc = run_cmd(cmd, out, sizeof(out));
	if (rc != 0)
		fail_msg("the templates differ from the plain units beyond their instance lines "
			 "(exit %d):\n%s", rc, out);
}

/* The staged package (make install) imports the staged libvkgrad.so.0 and
 * runs a job; a numeric check against numpy (f32 tolerance 1e-4). */
static void test_python_package_installed(void **state)
{
	(void)state;
	if (run_cmd("/usr/bin/python3 -c 'import numpy'", NULL, 0) != 0) {
		printf("skipped: /usr/bin/python3 with numpy missing (package python3-numpy)\n");
		skip();
	}
	const char *dir = stage();
	assert_non_null(dir);
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	char cmd[4 * PATH_MAX], out[16384];
	/* a sanitizer build installs an instrumented library: preload its runtime */
	const char *pre = getenv("ASAN_OPTIONS") ? "LD_PRELOAD=\"$(cc -print-file-name=libasan.so) "
						    "$(cc -print-file-name=libubsan.so)\" ASAN_OPTIONS=detect_leaks=0 " : "";
	snprintf(cmd, sizeof(cmd),
		 "cd / && %sLD_LIBRARY_PATH=%s/usr/local/lib PYTHONPATH=$(echo %s/usr/local/lib/python3*/dist-packages) "
		 "VKGRAD_SOCKET=%s /usr/bin/python3 -c '"
		 "import numpy as np, vkgrad\n"
		 "print(vkgrad.__file__)\n"
		 "maps = open(\"/proc/self/maps\").read()\n"
		 "print([l.split()[-1] for l in maps.splitlines() if \"libvkgrad\" in l][0])\n"
		 "x = np.random.rand(9, 5).astype(np.float32); dy = np.random.rand(9, 3).astype(np.float32)\n"
		 "with vkgrad.connect() as c:\n"
		 "    g = c.linear_backward(x, dy)\n"
		 "want = dy.astype(np.float64).T @ x\n"
		 "e = abs(g[\"dw\"] - want).max() / abs(want).max()\n"
		 "print(\"dw error\", e)\n"
		 "assert e <= 1e-4\n"
		 "'",
		 pre, dir, dir, d.sock);
	int rc = run_cmd(cmd, out, sizeof(out));
	printf("%s", out);
	if (rc != 0)
		fail_msg("the installed package failed (exit %d)", rc);
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/usr/local/lib/python3", dir);
	if (!strstr(out, want))
		fail_msg("vkgrad was not imported from the staged tree");
	snprintf(want, sizeof(want), "%s/usr/local/lib/libvkgrad.so.0.2.0", dir);
	if (!strstr(out, want))
		fail_msg("the staged libvkgrad.so.0 was not the one loaded");
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static void test_pkgconfig_example(void **state)
{
	(void)state;
	if (!have_tool("pkg-config") || !have_tool("cc")) {
		printf("skipped: pkg-config or cc missing\n");
		skip();
	}
	const char *dir = stage();
	assert_non_null(dir);
	/* a sanitizer build installs instrumented libraries: the program then
	 * needs the runtime first in its link order */
	const char *san = getenv("ASAN_OPTIONS") ? " -fsanitize=address,undefined" : "";
	char cmd[4 * PATH_MAX], out[16384];
	snprintf(cmd, sizeof(cmd),
		 "export PKG_CONFIG_PATH=%s/usr/local/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=%s; "
		 "cc -std=c17 -Wall -Wextra -Werror%s -o %s/hello_job client/examples/hello_job.c "
		 "$(pkg-config --cflags --libs vkgrad)",
		 dir, dir, san, dir);
	int rc = run_cmd(cmd, out, sizeof(out));
	if (rc != 0)
		fail_msg("building the example failed (exit %d):\n%s\n%s", rc, cmd, out);

	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	snprintf(cmd, sizeof(cmd), "LD_LIBRARY_PATH=%s/usr/local/lib VKGRAD_SOCKET=%s %s/hello_job", dir,
		 d.sock, dir);
	rc = run_cmd(cmd, out, sizeof(out));
	printf("%s", out);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, ": ok"));
	/* it used the installed shared library */
	snprintf(cmd, sizeof(cmd), "LD_LIBRARY_PATH=%s/usr/local/lib ldd %s/hello_job", dir, dir);
	rc = run_cmd(cmd, out, sizeof(out));
	assert_int_equal(rc, 0);
	char want[128];
	snprintf(want, sizeof(want), "libvkgrad.so.0 => %s/usr/local/lib/libvkgrad.so.0", dir);
	if (!strstr(out, want))
		fail_msg("hello_job is not linked to the staged libvkgrad.so.0:\n%s", out);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static int teardown_group(void **state)
{
	(void)state;
	if (g_stage[0])
		remove_tree(g_stage);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_socket_activation),
		cmocka_unit_test(test_ready_after_pipelines_then_stopping),
		cmocka_unit_test(test_watchdog_pings),
		cmocka_unit_test(test_watchdog_other_pid),
		cmocka_unit_test(test_peer_uid_not_allowed_is_refused),
		cmocka_unit_test(test_peer_other_uid_via_setpriv),
		cmocka_unit_test(test_config_file_then_flags),
		cmocka_unit_test(test_help_lists_every_setting),
		cmocka_unit_test(test_journal_prefixes_and_no_line_per_job),
		cmocka_unit_test(test_list_devices_and_uuid),
		cmocka_unit_test(test_make_install_layout),
		cmocka_unit_test(test_units_verify_and_security),
		cmocka_unit_test(test_templates_match_plain_units),
		cmocka_unit_test(test_python_package_installed),
		cmocka_unit_test(test_pkgconfig_example),
	};
	int failed = cmocka_run_group_tests(tests, NULL, teardown_group);
	return failed + daemon_proc_failures;
}
