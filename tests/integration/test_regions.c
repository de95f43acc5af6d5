/* tests/integration/test_regions.c — client memory as the daemon sees it:
 * files registered twice, files whose pages vanish under the daemon, and
 * one user's share of the registered bytes (issue 13, faults 1, 2 and 6).
 *
 * Two daemons: g_d with default flags, and g_staged with
 * --no-host-import, where every region is mirrored by a staging buffer
 * that the daemon copies through (the path where a file registered twice
 * lost accumulations), --max-region-bytes-per-uid 65536, and
 * VKGRAD_FAULT_INJECT=unsealed, so that a test can truncate a registered
 * file under it.
 *
 * Every job here uses small integers (|x|, |dy| <= 2, batch 8), so every
 * sum is exact in f32: results are compared with the float64 reference for
 * equality (tolerance 0). Each test ends by checking that the daemon still
 * serves (a new connection answers ping, and where it matters a good job
 * gives exact results). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "expect.h"
#include "rawsock.h"
#include "shm.h"

static daemon_proc g_d;      /* default flags */
static daemon_proc g_staged; /* --no-host-import */

/* ---- one small exact job in one page ------------------------------------------ */

/* batch x in x out; X at 0, dY at 1024, dW at 2048 + 512·slot,
 * db at 3584 + 64·slot (slot 0 or 1: two jobs' outputs side by side). */
#define JB 8
#define JI 16
#define JO 8
#define OFF_X 0
#define OFF_DY 1024
#define OFF_DW(slot) (2048u + 512u * (slot))
#define OFF_DB(slot) (3584u + 64u * (slot))
#define PAGE 4096

static float in_x(int b, int i)
{
	return (float)((b * 3 + i) % 5 - 2);
}

static float in_dy(int b, int o)
{
	return (float)((b + 2 * o) % 3 - 1);
}

/* Inputs in place, both slots' outputs zero. */
static void job_fill(void *map)
{
	float *x = (float *)((char *)map + OFF_X), *dy = (float *)((char *)map + OFF_DY);
	for (int b = 0; b < JB; b++) {
		for (int i = 0; i < JI; i++)
			x[b * JI + i] = in_x(b, i);
		for (int o = 0; o < JO; o++)
			dy[b * JO + o] = in_dy(b, o);
	}
	memset((char *)map + OFF_DW(0), 0, PAGE - OFF_DW(0));
}

/* One job: inputs from region rin, dW and db of `slot` into region rout. */
static proto_request job_req(uint64_t id, uint64_t rin, uint64_t rout, unsigned slot, bool acc)
{
	proto_request q = {.op = PROTO_OP_LINEAR_BACKWARD, .id = id, .dtype = PROTO_F32,
			   .batch = JB, .in = JI, .out = JO, .accumulate = acc};
	q.t[PROTO_T_X] = (proto_tensor){.present = true, .region = rin, .offset = OFF_X};
	q.t[PROTO_T_DY] = (proto_tensor){.present = true, .region = rin, .offset = OFF_DY};
	q.t[PROTO_T_DW] = (proto_tensor){.present = true, .region = rout, .offset = OFF_DW(slot)};
	q.t[PROTO_T_DB] = (proto_tensor){.present = true, .region = rout, .offset = OFF_DB(slot)};
	return q;
}

/* How many times the reference dW and db of one job `slot` of map holds:
 * returns k when every element equals k times the float64 reference
 * exactly, else -1 (with the first mismatch in why). */
static int job_multiple(const void *map, unsigned slot, char *why, size_t n)
{
	const float *dw = (const float *)((const char *)map + OFF_DW(slot));
	const float *db = (const float *)((const char *)map + OFF_DB(slot));
	int k = -1;
	for (int o = 0; o < JO; o++) {
		double gb = 0;
		for (int b = 0; b < JB; b++)
			gb += in_dy(b, o);
		for (int i = 0; i <= JI; i++) {
			double g = 0;
			if (i < JI)
				for (int b = 0; b < JB; b++)
					g += (double)in_dy(b, o) * in_x(b, i);
			else
				g = gb;
			double got = i < JI ? dw[o * JI + i] : db[o];
			if (g == 0)
				continue;
			if (k < 0)
				k = (int)(got / g + 0.5);
			if (got != (double)k * g) {
				snprintf(why, n, "%s[%d][%d] = %g, not %d x %g", i < JI ? "dW" : "db", o,
					 i < JI ? i : 0, got, k, g);
				return -1;
			}
		}
	}
	return k;
}

/* Send reqs[0..n) in one write, then read n replies: each must be ok.
 * Returns the number that were not (printing the first). */
static unsigned pipeline(rawsock *s, const proto_request *reqs, unsigned n)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	for (unsigned k = 0; k < n; k++)
		assert_int_equal(proto_request_encode(&sb, &reqs[k]), 0);
	assert_int_equal(rawsock_send(s, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	unsigned bad = 0;
	for (unsigned k = 0; k < n; k++) {
		proto_reply r;
		int rc = rawsock_recv(s, &r, RAWSOCK_TIMEOUT_MS);
		if (rc)
			fail_msg("reply %u of %u: %s", k + 1, n, strerror(-rc));
		if (!r.ok && bad++ == 0)
			fprintf(stderr, "job %llu: %s: %s\n", (unsigned long long)r.id,
				proto_code_name(r.err.code), r.err.message);
	}
	return bad;
}

/* A new connection runs one overwrite job on a fresh region and gets
 * exactly the reference: the daemon still computes for other clients. */
static void expect_good_job(const daemon_proc *d)
{
	void *map;
	int fd = shm_create(PAGE, true, PAGE, &map);
	assert_true(fd >= 0);
	job_fill(map);
	rawsock s;
	expect_open(&s, d->sock);
	uint64_t reg;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 1, fd, PAGE, &reg, &r), 0);
	close(fd);
	proto_request q = job_req(2, reg, reg, 0, false);
	assert_int_equal(pipeline(&s, &q, 1), 0);
	char why[160];
	if (job_multiple(map, 0, why, sizeof(why)) != 1)
		fail_msg("a good job after the failure: %s", why);
	rawsock_close(&s);
	munmap(map, PAGE);
	expect_serves(d->sock);
}

/* ---- fault 2: one file, two registrations ---------------------------------- */

/* The same file registered again on one connection (through another
 * descriptor of it: `again` is a dup or a reopen of fd) is refused with
 * bad_region naming the first region. If it were accepted, 60 pipelined
 * accumulate jobs alternating between the two ids must still add up to
 * 60x: the failure says how much they lost. */
static void same_file_twice(const daemon_proc *d, int again_kind)
{
	enum { NJOBS = 60 };
	void *map;
	int fd = shm_create(PAGE, true, PAGE, &map);
	assert_true(fd >= 0);
	job_fill(map);
	rawsock s;
	expect_open(&s, d->sock);
	uint64_t r1, r2;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 1, fd, PAGE, &r1, &r), 0);
	int again = fd;
	char path[64];
	if (again_kind == 1)
		again = dup(fd);
	else if (again_kind == 2) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		again = open(path, O_RDWR | O_CLOEXEC);
	}
	assert_true(again >= 0);
	int rc = rawsock_register(&s, 2, again, PAGE, &r2, &r);
	if (again != fd)
		close(again);
	if (rc == 0) {
		proto_request q[NJOBS];
		for (unsigned k = 0; k < NJOBS; k++) {
			uint64_t id = k % 2 ? r2 : r1;
			q[k] = job_req(10 + k, id, id, 0, true);
		}
		unsigned bad = pipeline(&s, q, NJOBS);
		char why[160] = "";
		int mult = job_multiple(map, 0, why, sizeof(why));
		fail_msg("the same file registered twice on one connection was accepted (regions %llu "
			 "and %llu); %d accumulate jobs alternating between them: %u failed, dW and db "
			 "hold %dx the reference (want %dx) %s",
			 (unsigned long long)r1, (unsigned long long)r2, NJOBS, bad, mult, NJOBS, why);
	}
	assert_int_equal(rc, -EREMOTEIO);
	assert_int_equal(r.err.code, PROTO_BAD_REGION);
	char want[64];
	snprintf(want, sizeof(want), "region %llu", (unsigned long long)r1);
	if (!strstr(r.err.message, want) || !strstr(r.err.message, "already registered"))
		fail_msg("message \"%s\" does not say the file is already registered as %s",
			 r.err.message, want);
	/* the first region serves on: 60 accumulations, exactly 60x */
	proto_request q[NJOBS];
	for (unsigned k = 0; k < NJOBS; k++)
		q[k] = job_req(100 + k, r1, r1, 0, true);
	assert_int_equal(pipeline(&s, q, NJOBS), 0);
	char why[160];
	int mult = job_multiple(map, 0, why, sizeof(why));
	if (mult != NJOBS)
		fail_msg("%d accumulations gave %dx %s", NJOBS, mult, why);
	/* once the first is unregistered (its reply: no job uses it any
	 * more), the file may be registered again */
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 200, .region = r1};
	assert_int_equal(rawsock_call(&s, &u, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	assert_int_equal(rawsock_register(&s, 201, fd, PAGE, &r2, &r), 0);
	assert_true(r2 != r1);
	close(fd);
	expect_conn_serves(&s);
	rawsock_close(&s);
	munmap(map, PAGE);
	expect_good_job(d);
}

static void test_same_file_twice_staged(void **state)
{
	(void)state;
	same_file_twice(&g_staged, 0);
}

static void test_same_file_twice_dup_and_reopen(void **state)
{
	(void)state;
	same_file_twice(&g_staged, 1);
	same_file_twice(&g_staged, 2);
	same_file_twice(&g_d, 1);
}

/* One file registered by two connections: allowed. Each connection
 * accumulates 30 times into its own slot of the file, both pipelined at
 * once: each slot holds exactly 30x, so neither staging mirror overwrote
 * the other's bytes. */
static void two_connections_one_file(const daemon_proc *d)
{
	enum { NJOBS = 30 };
	void *map;
	int fd = shm_create(PAGE, true, PAGE, &map);
	assert_true(fd >= 0);
	job_fill(map);
	rawsock a, b;
	expect_open(&a, d->sock);
	expect_open(&b, d->sock);
	uint64_t ra, rb;
	proto_reply r;
	assert_int_equal(rawsock_register(&a, 1, fd, PAGE, &ra, &r), 0);
	assert_int_equal(rawsock_register(&b, 1, fd, PAGE, &rb, &r), 0);
	close(fd);
	msgpack_sbuffer sa, sb;
	msgpack_sbuffer_init(&sa);
	msgpack_sbuffer_init(&sb);
	for (unsigned k = 0; k < NJOBS; k++) {
		proto_request qa = job_req(10 + k, ra, ra, 0, true);
		proto_request qb = job_req(10 + k, rb, rb, 1, true);
		assert_int_equal(proto_request_encode(&sa, &qa), 0);
		assert_int_equal(proto_request_encode(&sb, &qb), 0);
	}
	assert_int_equal(rawsock_send(&a, sa.data, sa.size, NULL, 0), 0);
	assert_int_equal(rawsock_send(&b, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sa);
	msgpack_sbuffer_destroy(&sb);
	for (unsigned k = 0; k < 2 * NJOBS; k++) {
		rawsock *s = k % 2 ? &b : &a;
		assert_int_equal(rawsock_recv(s, &r, RAWSOCK_TIMEOUT_MS), 0);
		if (!r.ok)
			fail_msg("job %llu: %s: %s", (unsigned long long)r.id, proto_code_name(r.err.code),
				 r.err.message);
	}
	char why[160];
	for (unsigned slot = 0; slot < 2; slot++) {
		int mult = job_multiple(map, slot, why, sizeof(why));
		if (mult != NJOBS)
			fail_msg("connection %c's %d accumulations gave %dx %s", slot ? 'b' : 'a', NJOBS,
				 mult, why);
	}
	rawsock_close(&a);
	rawsock_close(&b);
	munmap(map, PAGE);
	expect_good_job(d);
}

static void test_same_file_on_two_connections(void **state)
{
	(void)state;
	two_connections_one_file(&g_staged);
	two_connections_one_file(&g_d);
}

/* ---- fault 1: client memory that faults --------------------------------------- */

/* A /proc/meminfo value in kB, or -1. */
static long meminfo_kb(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -1;
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* With huge pages reserved (vm.nr_hugepages), what the issue reported: a
 * sealed hugetlbfs region with a hole punched in it and the freed huge
 * pages taken by someone else, then a job reading the hole. Says what the
 * daemon did in out. */
static void hugetlb_hole_attack(int fd, void *map, size_t hp, rawsock *s, uint64_t reg, char *out,
				size_t n)
{
	job_fill((char *)map + hp); /* the job's inputs in the second huge page */
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)hp, (off_t)hp) != 0) {
		snprintf(out, n, "(punching a hole failed: %s)", strerror(errno));
		return;
	}
	/* the pages nobody has reserved (Free counts reserved ones too) */
	long free_pages = meminfo_kb("HugePages_Free") - meminfo_kb("HugePages_Rsvd");
	int take = memfd_create("vkgrad-test-take", MFD_CLOEXEC | MFD_HUGETLB);
	size_t tn = free_pages > 0 ? (size_t)free_pages * hp : 0;
	void *t = MAP_FAILED;
	if (take >= 0 && tn && ftruncate(take, (off_t)tn) == 0)
		t = mmap(NULL, tn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, take, 0);
	proto_request q = job_req(50, reg, reg, 0, false);
	for (int k = 0; k < PROTO_T_COUNT; k++)
		q.t[k].offset += hp;
	proto_reply r;
	int rc = rawsock_call(s, &q, &r, RAWSOCK_TIMEOUT_MS);
	int ws = daemon_proc_wait(&g_d, 2000);
	if (ws >= 0 && WIFSIGNALED(ws))
		snprintf(out, n, "killed the daemon with signal %d (%s)", WTERMSIG(ws),
			 strsignal(WTERMSIG(ws)));
	else if (rc)
		snprintf(out, n, "got no reply (%s)", strerror(-rc));
	else
		snprintf(out, n, "was answered %s", r.ok ? "ok" : proto_code_name(r.err.code));
	if (t != MAP_FAILED)
		munmap(t, tn);
	if (take >= 0)
		close(take);
}

/* A hugetlbfs memfd, sealed against shrinking, is refused (bad_region
 * naming hugetlbfs): its pool of huge pages is finite and anyone can take
 * it, so a hole punched in the file cannot be filled again and every
 * touch of it would raise SIGBUS. Skipped where the kernel makes no
 * hugetlbfs memfds. Where huge pages are reserved and the file was
 * accepted, the failure says what the attack did to the daemon. */
static void test_hugetlbfs_memfd_refused(void **state)
{
	(void)state;
	long hp_kb = meminfo_kb("Hugepagesize");
	size_t hp = hp_kb > 0 ? (size_t)hp_kb * 1024 : 2u << 20;
	int fd = memfd_create("vkgrad-test-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
	if (fd < 0) {
		printf("memfd_create(MFD_HUGETLB): %s: skipped\n", strerror(errno));
		skip();
	}
	if (ftruncate(fd, (off_t)(2 * hp)) != 0) {
		printf("ftruncate of a hugetlbfs memfd: %s: skipped\n", strerror(errno));
		close(fd);
		skip();
	}
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	/* mapped only where the pool has pages (otherwise ENOMEM) */
	void *map = mmap(NULL, 2 * hp, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rawsock s;
	expect_open(&s, g_d.sock);
	uint64_t reg;
	proto_reply r;
	int rc = rawsock_register(&s, 1, fd, 2 * hp, &reg, &r);
	if (rc == 0) {
		char what[160] = "was not tried (no huge page could be mapped here)";
		if (map != MAP_FAILED)
			hugetlb_hole_attack(fd, map, hp, &s, reg, what, sizeof(what));
		fail_msg("a sealed hugetlbfs memfd was accepted (region %llu); a job reading a hole "
			 "punched in it, its huge pages taken, %s",
			 (unsigned long long)reg, what);
	}
	close(fd);
	if (map != MAP_FAILED)
		munmap(map, 2 * hp);
	assert_int_equal(rc, -EREMOTEIO);
	if (r.err.code != PROTO_BAD_REGION || !strstr(r.err.message, "hugetlbfs"))
		fail_msg("got %s \"%s\"; want bad_region naming hugetlbfs",
			 proto_code_name(r.err.code), r.err.message);
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* The next reply on s: bad_region for request id, saying SIGBUS and
 * naming region reg. */
static void expect_fault(rawsock *s, uint64_t id, uint64_t reg)
{
	proto_reply r;
	int rc = rawsock_recv(s, &r, RAWSOCK_TIMEOUT_MS);
	if (rc) {
		int ws = daemon_proc_wait(&g_staged, 2000);
		fail_msg("job %llu: no reply (%s)%s%s", (unsigned long long)id, strerror(-rc),
			 ws >= 0 && WIFSIGNALED(ws) ? "; the daemon died of " : "",
			 ws >= 0 && WIFSIGNALED(ws) ? strsignal(WTERMSIG(ws)) : "");
	}
	char want[48];
	snprintf(want, sizeof(want), "region %llu", (unsigned long long)reg);
	if (r.id != id || r.ok || r.err.code != PROTO_BAD_REGION || !strstr(r.err.message, "SIGBUS") ||
	    !strstr(r.err.message, want))
		fail_msg("job %llu: got id %llu %s \"%s\"; want bad_region saying SIGBUS and %s",
			 (unsigned long long)id, (unsigned long long)r.id,
			 r.ok ? "ok" : proto_code_name(r.err.code), r.ok ? "" : r.err.message, want);
}

/* Pages vanish under a staged region (VKGRAD_FAULT_INJECT=unsealed lets
 * the daemon take an unsealed memfd, which the test then truncates: the
 * SIGBUS a hugetlbfs hole, a full tmpfs or a page refused to a sparse
 * memfd raise the same way). The daemon's copies into (an overwrite's
 * outputs) and out of (an accumulation's outputs, inputs) the lost pages
 * turn into bad_region for that job alone: the same connection and
 * another one go on getting exact results, and a job whose inputs faulted
 * wrote nothing. */
static void test_pages_vanish_under_a_staged_region(void **state)
{
	(void)state;
	void *map;
	int fa = shm_create(PAGE, true, PAGE, &map);
	assert_true(fa >= 0);
	job_fill(map);
	int fb = shm_create(2 * PAGE, false, 0, NULL);
	assert_true(fb >= 0);
	proto_stats st0, st;
	assert_int_equal(rawsock_stats(g_staged.sock, &st0), 0);
	rawsock s;
	expect_open(&s, g_staged.sock);
	uint64_t ra, rb;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 1, fa, PAGE, &ra, &r), 0);
	assert_int_equal(rawsock_register(&s, 2, fb, 2 * PAGE, &rb, &r), 0);
	close(fa);
	assert_int_equal(ftruncate(fb, 0), 0);
	close(fb);
	/* outputs into the lost pages: overwrite (copied out after the
	 * GPU), accumulate (copied in first) */
	proto_request q = job_req(10, ra, rb, 0, false);
	assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	expect_fault(&s, 10, rb);
	q = job_req(11, ra, rb, 0, true);
	assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	expect_fault(&s, 11, rb);
	/* inputs from the lost pages: nothing written to the outputs */
	q = job_req(12, rb, ra, 0, false);
	assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	expect_fault(&s, 12, rb);
	char why[160];
	if (job_multiple(map, 0, why, sizeof(why)) != 0)
		fail_msg("a job whose inputs faulted wrote its outputs %s", why);
	/* the same connection still computes, exactly */
	expect_conn_serves(&s);
	q = job_req(13, ra, ra, 0, false);
	assert_int_equal(pipeline(&s, &q, 1), 0);
	if (job_multiple(map, 0, why, sizeof(why)) != 1)
		fail_msg("a good job after the faults: %s", why);
	rawsock_close(&s);
	munmap(map, PAGE);
	expect_good_job(&g_staged);
	assert_int_equal(rawsock_stats(g_staged.sock, &st), 0);
	assert_int_equal(st.jobs_failed - st0.jobs_failed, 3);
}

/* On a CPU device (lavapipe) the "device" reads imported memory from the
 * driver's own threads, where a SIGBUS cannot be caught: the default
 * daemon stages every region there, even a page-aligned one it could
 * import. (On a GPU the test is skipped: imports pin the pages.) */
static void test_cpu_device_never_imports(void **state)
{
	(void)state;
	proto_hello h;
	expect_hello(g_d.sock, &h);
	if (strcmp(h.device.type, "cpu") != 0)
		skip();
	rawsock s;
	expect_open(&s, g_d.sock);
	proto_stats st0, st;
	assert_int_equal(rawsock_stats(g_d.sock, &st0), 0);
	int fd = shm_create(16 * PAGE, true, 0, NULL);
	assert_true(fd >= 0);
	uint64_t reg;
	proto_reply rr;
	assert_int_equal(rawsock_register(&s, 2, fd, 16 * PAGE, &reg, &rr), 0);
	close(fd);
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	if (st.host_imports != st0.host_imports || st.staged_regions != st0.staged_regions + 1)
		fail_msg("a page-aligned region on a CPU device: host_imports %llu -> %llu, "
			 "staged_regions %llu -> %llu (want it staged)",
			 (unsigned long long)st0.host_imports, (unsigned long long)st.host_imports,
			 (unsigned long long)st0.staged_regions, (unsigned long long)st.staged_regions);
	assert_true(daemon_proc_log_contains(&g_d, "host-memory import off on a CPU device"));
	rawsock_close(&s);
	expect_good_job(&g_d);
}

/* ---- fault 6: one user's share of the registered bytes -------------------------- */

/* g_staged's --max-region-bytes-per-uid */
#define PER_UID_BYTES (64u << 10)

/* Register a fresh sealed memfd of `size` bytes on s; returns the
 * register's result (0 or -EREMOTEIO with r filled). */
static int register_new(rawsock *s, uint64_t id, size_t size, uint64_t *reg, proto_reply *r,
			void **map)
{
	int fd = shm_create(size, true, map ? size : 0, map);
	assert_true(fd >= 0);
	int rc = rawsock_register(s, id, fd, size, reg, r);
	close(fd);
	return rc;
}

/* The next register of size bytes on s is refused: limit naming
 * max_region_bytes_per_uid and its value. */
static void expect_uid_limit(rawsock *s, uint64_t id, size_t size)
{
	uint64_t reg;
	proto_reply r;
	int rc = register_new(s, id, size, &reg, &r, NULL);
	char want[64];
	snprintf(want, sizeof(want), "max_region_bytes_per_uid %u", PER_UID_BYTES);
	if (rc != -EREMOTEIO || r.err.code != PROTO_LIMIT || !strstr(r.err.message, want) ||
	    !strstr(r.err.message, "'size'"))
		fail_msg("register of %zu bytes past the uid's share: rc %d, %s \"%s\" (want limit "
			 "naming '%s')", size, rc, rc == -EREMOTEIO ? proto_code_name(r.err.code) : "ok",
			 rc == -EREMOTEIO ? r.err.message : "", want);
}

/* All connections of one uid (every connection of this test process)
 * share --max-region-bytes-per-uid: two connections fill it, a third and
 * the first are refused (limit, naming the key and the limit), everyone
 * still computes, and an unregister or a closed connection gives the
 * bytes back. */
static void test_region_bytes_per_uid(void **state)
{
	(void)state;
	/* nothing registered any more by the tests before (the daemon reads
	 * their connections' EOF in its own time) */
	proto_stats st;
	for (int tries = 0;; tries++) {
		assert_int_equal(rawsock_stats(g_staged.sock, &st), 0);
		if (st.regions == 0)
			break;
		if (tries == 600)
			fail_msg("%llu regions still registered", (unsigned long long)st.regions);
		usleep(50000);
	}
	rawsock a, b, c;
	expect_open(&a, g_staged.sock);
	expect_open(&b, g_staged.sock);
	expect_open(&c, g_staged.sock);
	proto_hello h;
	expect_hello(g_staged.sock, &h);
	assert_int_equal(h.limits.max_region_bytes_per_uid, PER_UID_BYTES);
	assert_true(h.limits.max_total_region_bytes > PER_UID_BYTES);
	uint64_t ra, rb, rc_;
	proto_reply r;
	void *map;
	assert_int_equal(register_new(&a, 1, PER_UID_BYTES / 2, &ra, &r, &map), 0);
	assert_int_equal(register_new(&b, 1, PER_UID_BYTES / 2, &rb, &r, NULL), 0);
	expect_uid_limit(&c, 1, PAGE);
	expect_uid_limit(&a, 2, PAGE);
	/* the refused still serve, and the held regions still compute */
	expect_conn_serves(&c);
	job_fill(map);
	proto_request q = job_req(3, ra, ra, 0, false);
	assert_int_equal(pipeline(&a, &q, 1), 0);
	char why[160];
	if (job_multiple(map, 0, why, sizeof(why)) != 1)
		fail_msg("a job on a region within the share: %s", why);
	munmap(map, PER_UID_BYTES / 2);
	/* an unregister gives its bytes back */
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 2, .region = rb};
	assert_int_equal(rawsock_call(&b, &u, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	assert_int_equal(register_new(&c, 2, PER_UID_BYTES / 2, &rc_, &r, NULL), 0);
	expect_uid_limit(&b, 3, PAGE);
	/* and so does a closed connection */
	rawsock_close(&a);
	for (int tries = 0;; tries++) {
		if (register_new(&b, 10 + (uint64_t)tries, PER_UID_BYTES / 2, &rb, &r, NULL) == 0)
			break;
		/* the daemon learns of the close when it reads the EOF */
		if (tries == 600 || r.err.code != PROTO_LIMIT)
			fail_msg("after closing a connection: %s \"%s\"", proto_code_name(r.err.code),
				 r.err.message);
		usleep(50000);
	}
	rawsock_close(&b);
	rawsock_close(&c);
	expect_good_job(&g_staged);
}

/* The default daemon's shares: the total derived from the host's memory
 * (at most half of it), one uid's share half of that; the log says so. */
static void test_region_bytes_defaults(void **state)
{
	(void)state;
	proto_hello h;
	expect_hello(g_d.sock, &h);
	const uint64_t total = h.limits.max_total_region_bytes;
	const uint64_t per_uid = h.limits.max_region_bytes_per_uid;
	long mem_kb = meminfo_kb("MemTotal");
	assert_true(mem_kb > 0);
	if (total == 0 || total > (uint64_t)mem_kb * 1024 / 2 || total % (1u << 20) != 0)
		fail_msg("default max_total_region_bytes %llu: want a MiB multiple, at most half of "
			 "MemTotal (%ld kB)", (unsigned long long)total, mem_kb);
	assert_int_equal(per_uid, total / 2);
	assert_true(daemon_proc_log_contains(&g_d, "registered bytes: max_total_region_bytes"));
	assert_true(daemon_proc_log_contains(&g_d, "(auto)"));
}

/* ---- setup ------------------------------------------------------------------------------ */

static int group_setup(void **state)
{
	(void)state;
	static const char *const staged_args[] = {"--no-host-import", "--max-region-bytes-per-uid",
						  "65536", NULL};
	static const char *const staged_env[] = {"VKGRAD_FAULT_INJECT=unsealed", NULL};
	if (daemon_proc_start(&g_d, NULL, NULL) != 0)
		return -1;
	if (daemon_proc_start(&g_staged, staged_args, staged_env) != 0) {
		daemon_proc_kill(&g_d);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int a = daemon_proc_stop(&g_d);
	int b = daemon_proc_stop(&g_staged);
	return a || b ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_file_twice_staged),
		cmocka_unit_test(test_same_file_twice_dup_and_reopen),
		cmocka_unit_test(test_same_file_on_two_connections),
		cmocka_unit_test(test_hugetlbfs_memfd_refused),
		cmocka_unit_test(test_cpu_device_never_imports),
		cmocka_unit_test(test_region_bytes_per_uid),
		cmocka_unit_test(test_region_bytes_defaults),
		cmocka_unit_test(test_pages_vanish_under_a_staged_region),
	};
	int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
	return rc + daemon_proc_failures;
}
