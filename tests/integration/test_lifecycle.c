/* tests/integration/test_lifecycle.c — the daemon's life and its clients':
 * hello's description of the daemon, unregister, a client that half-closes
 * (shutdown SHUT_WR) and still gets every reply, a client killed with jobs
 * in flight, closing without unregistering, SIGTERM with jobs in flight
 * (every accepted job answered, then exit 0), a second daemon on a live
 * socket, a stale socket file, and command-line handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "expect.h"
#include "jobcase.h"
#include "rawsock.h"
#include "shm.h"
#include "vkgrad.h"

static daemon_proc g_d;

/* Jobs big enough to be still running a moment later: 256³; 64³ under
 * valgrind (make test-valgrind), where lavapipe is ~60 times slower. */
#define BIG ((uint64_t)(daemon_proc_slow() ? 64 : 256))

/* ---- hello ------------------------------------------------------------------------ */

/* vkg_info.kernels holds the first 32 only: every one through
 * vkg_info_kernel (the client's last hello), into *k */
static const vkg_kernel_info *find_kernel(const vkg_client *c, const vkg_info *in, const char *name,
					  vkg_kernel_info *k)
{
	for (unsigned i = 0; i < in->n_kernels; i++)
		if (vkg_info_kernel(c, i, k) == 0 && !strcmp(k->name, name))
			return k;
	return NULL;
}

static void test_hello_describes_daemon_and_kernels(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	vkg_info in;
	vkg_error err;
	if (vkg_hello(c, "test_lifecycle", &in, &err) != 0)
		fail_msg("hello: %s: %s", err.code, err.message);
	assert_int_equal(strncmp(in.server, "vkgradd ", 8), 0);
	assert_true(in.device_name[0] && in.driver[0] && in.api[0] && in.device_type[0]);
	assert_true(strchr(in.api, '.') != NULL); /* "1.3.230" */
	/* the defaults of daemon/config.c */
	assert_int_equal(in.max_frame, 65536);
	assert_int_equal(in.max_regions, 64);
	assert_int_equal(in.max_inflight, 128);
	assert_true(in.max_dim >= 4096);
	assert_true(in.max_region_bytes >= 4096);
	assert_true(in.n_kernels >= 2); /* the two generic kernels, then variants */
	const char *names[] = {"linear_parameter_backward", "linear_input_backward"};
	for (int i = 0; i < 2; i++) {
		vkg_kernel_info kb;
		const vkg_kernel_info *k = find_kernel(c, &in, names[i], &kb);
		if (!k)
			fail_msg("hello does not list kernel %s", names[i]);
		assert_string_equal(k->domain, "linear_backward");
		assert_string_equal(k->dtype, "f32");
		assert_true(k->variant[0] != 0);
		assert_true(k->status[0] != 0);
	}
	/* only what a request reaches: not the registry's bench_peak
	 * microkernels (`vkgrad bench --peak`), although this device could run
	 * bench_peak_fma */
	vkg_kernel_info kt;
	for (unsigned i = 0; i < in.n_kernels; i++) {
		assert_int_equal(vkg_info_kernel(c, i, &kt), 0);
		if (strcmp(kt.domain, "linear_backward") != 0 &&
		    !(strcmp(kt.domain, "linear_forward") == 0 &&
		      strcmp(kt.name, "linear_forward_prep") == 0) &&
		    !(strcmp(kt.domain, "linear_activation") == 0 &&
		      strcmp(kt.name, "linear_activation") == 0) &&
		    !(strcmp(kt.domain, "optim") == 0 &&
		      strcmp(kt.name, "optim_step") == 0))
			fail_msg("hello lists %s of domain %s", kt.name, kt.domain);
	}
	assert_non_null(find_kernel(c, &in, "linear_forward_prep", &kt)); /* linear_forward's own */
	assert_non_null(find_kernel(c, &in, "linear_activation", &kt)); /* the fused activations' */
	assert_non_null(find_kernel(c, &in, "optim_step", &kt));        /* sgd_step, adam_step */
	assert_null(find_kernel(c, &in, "bench_peak_fma", &kt));
	/* hello again, any number of times */
	assert_int_equal(vkg_hello(c, NULL, &in, &err), 0);
	vkg_close(c);

	/* the raw reply carries version 1 */
	proto_hello h;
	expect_hello(g_d.sock, &h);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.n_kernels, in.n_kernels);
	/* every limit, with the defaults of daemon/config.c and conn.h */
	const proto_limits *l = &h.limits;
	/* derived from the host's memory (test_regions checks how) */
	assert_true(l->max_total_region_bytes >= 1u << 20);
	assert_int_equal(l->max_region_bytes_per_uid, l->max_total_region_bytes / 2);
	assert_int_equal(l->max_connections, 2048);
	assert_int_equal(l->max_connections_per_uid, 256);
	assert_int_equal(l->max_fds_per_message, 8);
	assert_int_equal(l->max_fds_held, 16);
	assert_int_equal(l->max_outbound_bytes, 4u << 20);
	assert_true(l->max_tensor_bytes > 0 && l->max_tensor_bytes <= 4ull << 30);
}

/* ---- unregister ---------------------------------------------------------------------- */

static void test_unregister(void **state)
{
	(void)state;
	proto_stats before = expect_settled(g_d.sock, 0, 1);
	rawsock s;
	assert_int_equal(rawsock_open(&s, g_d.sock), 0);
	jobcase jc;
	jobcase_init(&jc, 31, 33, 7, JC_ALL, true);
	void *map;
	int fd = shm_create(jc.size[0], true, jc.size[0], &map);
	assert_true(fd >= 0);
	uint64_t region;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 1, fd, jc.size[0], &region, &r), 0);
	close(fd);
	proto_stats st;
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	assert_int_equal(st.regions, before.regions + 1);
	assert_int_equal(st.region_bytes, before.region_bytes + jc.size[0]);
	assert_int_equal(jobcase_fill(&jc, &map, 17), 0);
	proto_request q = jobcase_request(&jc, &region, 2);
	assert_int_equal(rawsock_call(&s, &q, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	char why[320];
	if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)))
		fail_msg("%s", why);
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 3, .region = region};
	assert_int_equal(rawsock_call(&s, &u, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	/* at the reply the daemon holds nothing of it */
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	assert_int_equal(st.regions, before.regions);
	assert_int_equal(st.region_bytes, before.region_bytes);
	/* the id is gone; our mapping is still ours, untouched by the attempt */
	memcpy(jc.before[0], map, jc.size[0]);
	q.id = 4;
	assert_int_equal(rawsock_call(&s, &q, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_false(r.ok);
	assert_int_equal(r.err.code, PROTO_BAD_REGION);
	assert_int_equal(jobcase_check_untouched(&jc, &map, why, sizeof(why)), 0);
	/* a new region gets a new id: ids are not reused on a connection */
	fd = shm_create(4096, true, 0, NULL);
	uint64_t region2;
	assert_int_equal(rawsock_register(&s, 5, fd, 4096, &region2, &r), 0);
	close(fd);
	assert_int_not_equal(region2, region);
	rawsock_close(&s);
	munmap(map, jc.size[0]);
	jobcase_free(&jc);
	expect_settled(g_d.sock, before.regions, 1);
}

/* Regions left registered are released when the connection closes. */
static void test_close_releases_regions(void **state)
{
	(void)state;
	expect_settled(g_d.sock, 0, 1);
	vkg_client *c = expect_client(g_d.sock);
	vkg_error err;
	uint64_t id;
	for (int i = 0; i < 3; i++)
		assert_non_null(vkg_region_create(c, 4096 * (size_t)(i + 1), &id, &err));
	proto_stats st;
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	assert_int_equal(st.regions, 3);
	assert_int_equal(st.region_bytes, 6 * 4096);
	vkg_close(c);
	expect_settled(g_d.sock, 0, 1);
}

/* ---- a half-closed client ----------------------------------------------------------- */

/* A client that sends its requests and then shutdown(SHUT_WR) still gets
 * every reply before the daemon closes: N pipelined jobs, an unregister
 * (answered once the jobs are done) and a ping, then the half-close; read
 * until EOF. The daemon used to take the EOF for a closed client and drop
 * the queued jobs. */
static void test_half_closed_client_gets_every_reply(void **state)
{
	(void)state;
	enum { N = 24 };
	expect_settled(g_d.sock, 0, 1);
	rawsock s;
	assert_int_equal(rawsock_open(&s, g_d.sock), 0);
	jobcase jc;
	jobcase_init(&jc, BIG / 2, BIG / 2, BIG / 2, JC_ALL, false);
	void *map;
	int fd = shm_create(jc.size[0], true, jc.size[0], &map);
	assert_true(fd >= 0);
	uint64_t region;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 1, fd, jc.size[0], &region, &r), 0);
	close(fd);
	assert_int_equal(jobcase_fill(&jc, &map, 5), 0);
	for (uint64_t i = 0; i < N; i++) {
		proto_request q = jobcase_request(&jc, &region, 100 + i);
		assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	}
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 200, .region = region};
	assert_int_equal(rawsock_send_request(&s, &u, NULL, 0), 0);
	proto_request p = {.op = PROTO_OP_PING, .id = 201};
	assert_int_equal(rawsock_send_request(&s, &p, NULL, 0), 0);
	assert_int_equal(shutdown(s.fd, SHUT_WR), 0);
	bool seen[N + 2] = {false};
	unsigned got = 0;
	for (;;) {
		int rc = rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS);
		if (rc == -ECONNRESET)
			break;
		if (rc)
			fail_msg("after %u of %d replies: %s", got, N + 2, strerror(-rc));
		const uint64_t k = r.id == 200 ? N : r.id == 201 ? N + 1 : r.id - 100;
		if (k >= N + 2 || seen[k])
			fail_msg("unexpected or repeated reply id %llu", (unsigned long long)r.id);
		if (!r.ok)
			fail_msg("request %llu failed: %s: %s", (unsigned long long)r.id,
				 proto_code_name(r.err.code), r.err.message);
		seen[k] = true;
		got++;
	}
	if (got != N + 2)
		fail_msg("the daemon closed the half-closed connection after %u of %d replies", got,
			 N + 2);
	char why[320];
	if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)))
		fail_msg("%s", why);
	rawsock_close(&s);
	munmap(map, jc.size[0]);
	jobcase_free(&jc);
	assert_true(rawsock_daemon_serves(g_d.sock));
	expect_settled(g_d.sock, 0, 1);
}

/* The same while the daemon cannot write: a client sends 3000 pings
 * without reading, so their replies fill the socket and wait in the
 * daemon, then half-closes. The EOF must not pass for a closed peer
 * because the socket is not writable: every reply comes once it reads. */
static void test_half_closed_client_with_replies_backed_up(void **state)
{
	(void)state;
	enum { N = 3000 };
	expect_settled(g_d.sock, 0, 1);
	rawsock s;
	assert_int_equal(rawsock_open(&s, g_d.sock), 0);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	for (uint64_t i = 0; i < N; i++) {
		proto_request p = {.op = PROTO_OP_PING, .id = 1000 + i};
		assert_int_equal(proto_request_encode(&sb, &p), 0);
	}
	assert_int_equal(rawsock_send(&s, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	assert_int_equal(shutdown(s.fd, SHUT_WR), 0);
	/* not a synchronisation: only makes it likely that the daemon sees
	 * the EOF before we read (the test passes either way when right) */
	usleep(200000);
	unsigned got = 0;
	proto_reply r;
	for (;;) {
		int rc = rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS);
		if (rc == -ECONNRESET)
			break;
		if (rc)
			fail_msg("after %u of %d replies: %s", got, N, strerror(-rc));
		if (!r.ok || r.id != 1000 + got)
			fail_msg("reply %u: id %llu ok %d", got, (unsigned long long)r.id, r.ok);
		got++;
	}
	if (got != N)
		fail_msg("the daemon closed the half-closed connection after %u of %d replies", got, N);
	rawsock_close(&s);
	assert_true(rawsock_daemon_serves(g_d.sock));
	expect_settled(g_d.sock, 0, 1);
}

/* ---- a client killed with jobs in flight -------------------------------------------- */

static void test_client_killed_with_jobs_in_flight(void **state)
{
	(void)state;
	proto_stats before = expect_settled(g_d.sock, 0, 1);
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		vkg_error err;
		vkg_client *c = vkg_connect(g_d.sock, &err);
		if (!c)
			_exit(1);
		for (int i = 0; i < 3; i++) {
			jobcase jc;
			jobcase_init(&jc, BIG, BIG, BIG, JC_ALL, false);
			uint64_t region, h;
			void *map = vkg_region_create(c, jc.size[0], &region, &err);
			if (!map || jobcase_fill(&jc, &map, (uint64_t)i) != 0)
				_exit(1);
			vkg_job j = jobcase_job(&jc, &region);
			if (vkg_submit(c, &j, &h, &err) != 0)
				_exit(1);
		}
		/* the ping's reply proves the daemon read all three jobs */
		if (vkg_ping(c, &err) != 0)
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char b;
	assert_int_equal(read(ready[0], &b, 1), 1);
	close(ready[0]);
	proto_stats mid;
	assert_int_equal(rawsock_stats(g_d.sock, &mid), 0);
	assert_int_equal(mid.regions, 3);
	if (mid.jobs_queued + mid.jobs_running == 0)
		fail_msg("the child's jobs finished before the kill; make them bigger");
	kill(pid, SIGKILL);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	/* others are served meanwhile, correctly */
	assert_true(rawsock_daemon_serves(g_d.sock));
	vkg_client *c = expect_client(g_d.sock);
	jobcase jc[3];
	jobcase_init(&jc[0], 33, 257, 16, JC_ALL, true);
	jobcase_init(&jc[1], 7, 9, 11, JC_DW | JC_DB, false);
	jobcase_init(&jc[2], 64, 31, 33, JC_DX, true);
	assert_int_equal(jobcase_run(c, jc, 3, 3, 1234, NULL), 0);
	vkg_close(c);
	/* the dead client's regions go once its jobs ended */
	proto_stats after = expect_settled(g_d.sock, 0, 1);
	assert_true(after.jobs_done + after.jobs_failed >= before.jobs_done + before.jobs_failed + 6);
}

/* Clients that close right after submitting, again and again: the daemon
 * drops or finishes their jobs, frees their regions, and keeps serving. */
static void test_clients_closing_with_jobs_queued(void **state)
{
	(void)state;
	expect_settled(g_d.sock, 0, 1);
	for (int round = 0; round < 30; round++) {
		vkg_client *c = expect_client(g_d.sock);
		vkg_error err;
		for (int i = 0; i < 4; i++) {
			jobcase jc;
			jobcase_init(&jc, 64 + (uint64_t)i, 48, 32, JC_ALL, i % 2);
			uint64_t region, h;
			void *map = vkg_region_create(c, jc.size[0], &region, &err);
			if (!map)
				fail_msg("round %d: region: %s: %s", round, err.code, err.message);
			assert_int_equal(jobcase_fill(&jc, &map, (uint64_t)(round * 4 + i)), 0);
			vkg_job j = jobcase_job(&jc, &region);
			assert_int_equal(vkg_submit(c, &j, &h, &err), 0);
			jobcase_free(&jc);
		}
		if (round % 3 == 0) /* sometimes with an unregister on the way too */
			vkg_region_destroy(c, 1, NULL, 0, NULL);
		vkg_close(c);
	}
	assert_true(rawsock_daemon_serves(g_d.sock));
	expect_settled(g_d.sock, 0, 1);
	/* and jobs still come out right */
	vkg_client *c = expect_client(g_d.sock);
	jobcase jc;
	jobcase_init(&jc, 33, 31, 17, JC_ALL, true);
	assert_int_equal(jobcase_run(c, &jc, 1, 1, 99, NULL), 0);
	vkg_close(c);
}

/* ---- SIGTERM with jobs in flight ------------------------------------------------------- */

static void test_sigterm_with_jobs_in_flight(void **state)
{
	(void)state;
	enum { NJOBS = 4 };
	daemon_proc d = {0};
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	vkg_client *c = expect_client(d.sock);
	jobcase jc[NJOBS];
	uint64_t region[NJOBS], h[NJOBS];
	void *map[NJOBS];
	vkg_error err;
	for (int i = 0; i < NJOBS; i++) {
		jobcase_init(&jc[i], BIG, BIG, BIG, JC_ALL, i % 2);
		map[i] = vkg_region_create(c, jc[i].size[0], &region[i], &err);
		assert_non_null(map[i]);
		assert_int_equal(jobcase_fill(&jc[i], &map[i], 50 + (uint64_t)i), 0);
	}
	for (int i = 0; i < NJOBS; i++) {
		vkg_job j = jobcase_job(&jc[i], &region[i]);
		assert_int_equal(vkg_submit(c, &j, &h[i], &err), 0);
	}
	/* all read by the daemon (the ping came back) and not all done yet */
	assert_int_equal(vkg_ping(c, &err), 0);
	proto_stats st;
	assert_int_equal(rawsock_stats(d.sock, &st), 0);
	uint64_t verr = st.validation_errors;
	if (st.jobs_queued + st.jobs_running == 0)
		fail_msg("the jobs finished before SIGTERM; make them bigger");
	assert_int_equal(kill(d.pid, SIGTERM), 0);
	for (int i = 0; i < NJOBS; i++) {
		char why[320], name[96];
		vkg_result res;
		if (vkg_wait(c, h[i], 60000, &res, &err) != 0)
			fail_msg("job %d after SIGTERM: %s: %s", i, err.code, err.message);
		if (jobcase_check(&jc[i], &map[i], JC_TOL_F32, why, sizeof(why)))
			fail_msg("%s: %s", jobcase_name(&jc[i], name, sizeof(name)), why);
		jobcase_free(&jc[i]);
	}
	/* then the daemon closes the connection and exits 0 */
	int ws = daemon_proc_wait(&d, 60000);
	if (ws == -1) {
		daemon_proc_print_log_tail(&d, 30);
		daemon_proc_kill(&d);
		fail_msg("no exit within 60 s of SIGTERM");
	}
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		daemon_proc_print_log_tail(&d, 30);
		fail_msg("exit status 0x%x after SIGTERM (want exit 0)", ws);
	}
	assert_int_not_equal(vkg_ping(c, &err), 0);
	vkg_close(c);
	assert_int_not_equal(access(d.sock, F_OK), 0); /* socket file removed */
	if (verr != 0 || daemon_proc_log_validation_errors(&d) != 0) {
		daemon_proc_print_log_tail(&d, 10);
		fail_msg("validation errors: stats said %llu, the log holds %d",
			 (unsigned long long)verr, daemon_proc_log_validation_errors(&d));
	}
	daemon_proc_cleanup(&d);
}

/* SIGINT stops an idle daemon cleanly too. */
static void test_sigint_idle(void **state)
{
	(void)state;
	daemon_proc d = {0};
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	assert_true(rawsock_daemon_serves(d.sock));
	kill(d.pid, SIGINT);
	int ws = daemon_proc_wait(&d, 60000);
	if (ws == -1)
		daemon_proc_kill(&d);
	assert_true(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	assert_int_equal(daemon_proc_log_validation_errors(&d), 0);
	daemon_proc_cleanup(&d);
}

/* ---- sockets and flags ---------------------------------------------------------------- */

static void test_second_daemon_on_live_socket_refused(void **state)
{
	(void)state;
	char log[128];
	snprintf(log, sizeof(log), "%s/second.log", g_d.dir);
	const char *args[] = {"--socket", g_d.sock, "--cache-dir", g_d.cache, NULL};
	int ws = daemon_proc_run(args, log, 60000);
	assert_true(ws != -1);
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) != 0);
	/* the first one is unaffected, socket file included */
	assert_true(rawsock_daemon_serves(g_d.sock));
	unlink(log);
}

static void test_stale_socket_file_replaced(void **state)
{
	(void)state;
	daemon_proc d = {0};
	assert_int_equal(daemon_proc_init(&d), 0);
	/* a socket file nobody listens on, as a crashed daemon leaves it */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(access(d.sock, F_OK), 0);
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	assert_true(rawsock_daemon_serves(d.sock));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static void test_command_line(void **state)
{
	(void)state;
	const char *version[] = {"--version", NULL};
	const char *help[] = {"--help", NULL};
	const char *bogus[] = {"--bogus", NULL};
	const char *bad_dim[] = {"--max-dim", "0", NULL};
	const char *bad_frame[] = {"--max-frame", "100", NULL};
	const char *extra[] = {"stray-argument", NULL};
	int ws = daemon_proc_run(version, NULL, 30000);
	assert_true(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	ws = daemon_proc_run(help, NULL, 30000);
	assert_true(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	const char *const *bad[] = {bogus, bad_dim, bad_frame, extra};
	for (int i = 0; i < 4; i++) {
		ws = daemon_proc_run(bad[i], NULL, 30000);
		if (!(ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) == 2))
			fail_msg("vkgradd %s %s: wait status 0x%x, want exit 2", bad[i][0],
				 bad[i][1] ? bad[i][1] : "", ws);
	}
}

/* ---- setup ------------------------------------------------------------------------------ */

/* Last: no Vulkan validation error so far (the teardown checks again). */
static void test_no_validation_errors(void **state)
{
	(void)state;
	expect_validation_clean(&g_d, 0, "the shared daemon");
}

static int group_setup(void **state)
{
	(void)state;
	return daemon_proc_start(&g_d, NULL, NULL);
}

static int group_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_describes_daemon_and_kernels),
		cmocka_unit_test(test_unregister),
		cmocka_unit_test(test_close_releases_regions),
		cmocka_unit_test(test_half_closed_client_gets_every_reply),
		cmocka_unit_test(test_half_closed_client_with_replies_backed_up),
		cmocka_unit_test(test_client_killed_with_jobs_in_flight),
		cmocka_unit_test(test_clients_closing_with_jobs_queued),
		cmocka_unit_test(test_sigterm_with_jobs_in_flight),
		cmocka_unit_test(test_sigint_idle),
		cmocka_unit_test(test_second_daemon_on_live_socket_refused),
		cmocka_unit_test(test_stale_socket_file_replaced),
		cmocka_unit_test(test_command_line),
		cmocka_unit_test(test_no_validation_errors),
	};
	int rc = cmocka_run_group_tests_name("lifecycle", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
