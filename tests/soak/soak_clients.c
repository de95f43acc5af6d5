/* tests/soak/soak_clients.c — the client processes of the soak (soak.h). */
#include "soak.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msgpack.h>

#include "deadline.h"
#include "jobcase.h"
#include "rawsock.h"
#include "shm.h"
#include "vkgrad.h"

const char *const soak_kind_name[SOAK_KIND_COUNT] = {"small", "large", "churn", "hostile",
						     "killer"};
const char *const soak_kind_unit[SOAK_KIND_COUNT] = {"jobs", "jobs", "connections", "frames",
						     "clients killed"};

void soak_tally(soak_slot *sl, const char *code)
{
	for (int i = 0; i < SOAK_CODES; i++) {
		if (!sl->codes[i].code[0])
			snprintf(sl->codes[i].code, sizeof(sl->codes[i].code), "%s", code);
		if (strcmp(sl->codes[i].code, code) == 0) {
			atomic_fetch_add(&sl->codes[i].n, 1);
			return;
		}
	}
}

void soak_fail(soak_slot *sl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sl->last_failure, sizeof(sl->last_failure), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&sl->failed, 1);
	fprintf(stderr, "soak %s: %s\n", soak_kind_name[sl->kind], sl->last_failure);
}

static bool stopping(const soak_shared *sh)
{
	return atomic_load(&sh->stop) != 0;
}

/* Between two operations: when the driver asks for a quiet point, close
 * the connection held across operations (*c, may be NULL), say so, and
 * wait until it is over. */
static void pause_point(soak_shared *sh, vkg_client **c)
{
	if (!atomic_load(&sh->pause))
		return;
	if (c && *c) {
		vkg_close(*c);
		*c = NULL;
	}
	atomic_fetch_add(&sh->paused, 1);
	while (atomic_load(&sh->pause) && !stopping(sh))
		deadline_sleep_ms(5);
	atomic_fetch_sub(&sh->paused, 1);
}

/* xorshift64: the clients' choices. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- small: synchronous, random shapes, each checked --------------------- */

static void run_small(soak_shared *sh, soak_slot *sl, uint64_t seed)
{
	vkg_client *c = NULL;
	while (!stopping(sh)) {
		pause_point(sh, &c);
		vkg_error err;
		if (!c && !(c = vkg_connect(sh->sock, &err))) {
			soak_tally(sl, err.code);
			soak_fail(sl, "connect: %s: %s", err.code, err.message);
			deadline_sleep_ms(100);
			continue;
		}
		jobcase jc;
		unsigned outputs = 1 + (unsigned)(rnd(&seed) % 7);
		jobcase_init(&jc, 1 + rnd(&seed) % 48, 1 + rnd(&seed) % 48, 1 + rnd(&seed) % 48,
			     outputs, rnd(&seed) % 2);
		unsigned bad = jobcase_run(c, &jc, 1, 1, seed, NULL);
		jobcase_free(&jc);
		if (bad) {
			soak_fail(sl, "a small job failed or was wrong (above)");
			vkg_close(c);
			c = NULL;
			continue;
		}
		atomic_fetch_add(&sl->ops, 1);
		atomic_fetch_add(&sl->checked, 1);
	}
	vkg_close(c);
}

/* ---- large: three in flight, each checked ------------------------------------ */

static void run_large(soak_shared *sh, soak_slot *sl, uint64_t seed)
{
	enum { N = 6 };
	vkg_client *c = NULL;
	while (!stopping(sh)) {
		pause_point(sh, &c);
		vkg_error err;
		if (!c && !(c = vkg_connect(sh->sock, &err))) {
			soak_tally(sl, err.code);
			soak_fail(sl, "connect: %s: %s", err.code, err.message);
			deadline_sleep_ms(100);
			continue;
		}
		jobcase jc[N];
		for (int i = 0; i < N; i++)
			jobcase_init(&jc[i], 192, 256, 128, JC_ALL, i % 2);
		unsigned bad = jobcase_run(c, jc, N, 3, rnd(&seed), NULL);
		for (int i = 0; i < N; i++)
			jobcase_free(&jc[i]);
		atomic_fetch_add(&sl->ops, N - bad);
		atomic_fetch_add(&sl->checked, N - bad);
		if (bad) {
			soak_fail(sl, "%u of %d large jobs failed or were wrong (above)", bad, N);
			vkg_close(c);
			c = NULL;
		}
	}
	vkg_close(c);
}

/* ---- churn: connect, register, maybe a job, maybe unregister, disconnect ------ */

static void churn_once(soak_shared *sh, soak_slot *sl, jobcase *jc, int fd, void *map,
		       uint64_t r)
{
	rawsock s;
	int rc = rawsock_open(&s, sh->sock);
	if (rc) {
		soak_tally(sl, "connect");
		soak_fail(sl, "connect: %s", strerror(-rc));
		deadline_sleep_ms(100);
		return;
	}
	uint64_t region;
	proto_reply rep;
	rc = rawsock_register(&s, 1, fd, jc->size[0], &region, &rep);
	if (rc) {
		soak_tally(sl, rc == -EREMOTEIO ? proto_code_name(rep.err.code) : "io");
		soak_fail(sl, "register: rc %d %s", rc, rc == -EREMOTEIO ? rep.err.message : "");
		goto out;
	}
	if (r % 2 == 0) {
		void *maps[1] = {map};
		jobcase_fill(jc, maps, r);
		proto_request q = jobcase_request(jc, &region, 2);
		rc = rawsock_call(&s, &q, &rep, RAWSOCK_TIMEOUT_MS);
		char why[320];
		if (rc || !rep.ok) {
			soak_tally(sl, rc ? "io" : proto_code_name(rep.err.code));
			soak_fail(sl, "job: rc %d %s", rc, rc ? "" : rep.err.message);
			goto out;
		}
		if (jobcase_check(jc, maps, JC_TOL_F32, why, sizeof(why)) != 0) {
			soak_fail(sl, "churn job wrong: %s", why);
			goto out;
		}
		atomic_fetch_add(&sl->checked, 1);
	}
	if (r % 3 == 0) { /* unregister; otherwise the daemon drops it on close */
		proto_request q = {.op = PROTO_OP_UNREGISTER, .id = 3, .region = region};
		rc = rawsock_call(&s, &q, &rep, RAWSOCK_TIMEOUT_MS);
		if (rc || !rep.ok) {
			soak_tally(sl, rc ? "io" : proto_code_name(rep.err.code));
			soak_fail(sl, "unregister: rc %d", rc);
			goto out;
		}
	}
	atomic_fetch_add(&sl->ops, 1);
out:
	rawsock_close(&s);
}

static void run_churn(soak_shared *sh, soak_slot *sl, uint64_t seed)
{
	jobcase jc;
	jobcase_init(&jc, 4, 8, 4, JC_ALL, false);
	void *map;
	int fd = shm_create(jc.size[0], true, jc.size[0], &map);
	if (fd < 0) {
		soak_fail(sl, "memfd: %s", strerror(-fd));
		return;
	}
	while (!stopping(sh)) {
		pause_point(sh, NULL);
		churn_once(sh, sl, &jc, fd, map, rnd(&seed));
	}
	close(fd);
	munmap(map, jc.size[0]);
	jobcase_free(&jc);
}

/* ---- hostile: frames no client should send ----------------------------------- */

/* The daemon's answer to what was just sent: a reply's code, "eof" when it
 * closed the connection first; a timeout is unexpected. */
static void hostile_answer(soak_slot *sl, rawsock *s)
{
	proto_reply r;
	int rc = rawsock_recv(s, &r, 30000);
	if (rc == 0)
		soak_tally(sl, r.ok ? "ok" : proto_code_name(r.err.code));
	else if (rc == -ECONNRESET)
		soak_tally(sl, "eof");
	else {
		soak_tally(sl, rc == -ETIMEDOUT ? "timeout" : "io");
		soak_fail(sl, "no answer to a hostile frame: %s", strerror(-rc));
	}
}

static void hostile_once(soak_shared *sh, soak_slot *sl, uint64_t r)
{
	rawsock s;
	if (rawsock_open(&s, sh->sock) != 0) {
		soak_fail(sl, "connect failed");
		deadline_sleep_ms(100);
		return;
	}
	uint8_t buf[256];
	switch (r % 6) {
	case 0: { /* garbage: 0xc1 is never valid msgpack */
		size_t n = 1 + (r >> 8) % 200;
		buf[0] = 0xc1;
		for (size_t i = 1; i < n; i++)
			buf[i] = (uint8_t)(r >> (i % 56));
		rawsock_send_frame(&s, buf, n, NULL, 0);
		hostile_answer(sl, &s);
		break;
	}
	case 1: /* truncated: 200 bytes announced, 20 sent, then gone */
		proto_frame_put_len(buf, 200);
		memset(buf + 4, 0x80, 20);
		rawsock_send(&s, buf, 24, NULL, 0);
		soak_tally(sl, "truncated-then-closed");
		break;
	case 2: /* length prefix 0 */
	case 3: /* length prefix 2^32-1 */
		proto_frame_put_len(buf, r % 6 == 2 ? 0 : 0xffffffffu);
		rawsock_send(&s, buf, 4, NULL, 0);
		hostile_answer(sl, &s);
		break;
	case 4: { /* a descriptor riding a ping */
		int fd = shm_create(4096, true, 0, NULL);
		proto_request q = {.op = PROTO_OP_PING, .id = 5};
		if (fd >= 0) {
			rawsock_send_request(&s, &q, &fd, 1);
			close(fd);
			hostile_answer(sl, &s);
		}
		break;
	}
	default: { /* hellos, then hang up before reading the replies */
		proto_request q = {.op = PROTO_OP_HELLO, .id = 6, .version = 1};
		for (int i = 0; i < 8; i++)
			rawsock_send_request(&s, &q, NULL, 0);
		soak_tally(sl, "hung-up-mid-reply");
		break;
	}
	}
	atomic_fetch_add(&sl->ops, 1);
	rawsock_close(&s);
}

/* Paced (a frame every 10 ms): a mix, not a flood that starves the rest. */
static void run_hostile(soak_shared *sh, soak_slot *sl, uint64_t seed)
{
	while (!stopping(sh)) {
		pause_point(sh, NULL);
		hostile_once(sh, sl, rnd(&seed));
		deadline_sleep_ms(10);
	}
}

/* ---- killer: clients killed mid-job --------------------------------------------- */

/* The victim: register, queue 12 jobs of 160^3, ping (the daemon read them
 * all), say so on `ready`, and wait to be killed. */
static void victim(const char *sock, int ready)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	if (!c)
		_exit(1);
	jobcase jc;
	jobcase_init(&jc, 160, 160, 160, JC_ALL, true);
	uint64_t region;
	void *map = vkg_region_create(c, jc.size[0], &region, &err);
	if (!map || jobcase_fill(&jc, &map, 1) != 0)
		_exit(1);
	for (int i = 0; i < 12; i++) {
		vkg_job j = jobcase_job(&jc, &region);
		uint64_t h;
		if (vkg_submit(c, &j, &h, &err) != 0)
			_exit(2);
	}
	if (vkg_ping(c, &err) != 0 || write(ready, "r", 1) != 1)
		_exit(3);
	for (;;)
		pause();
}

static void run_killer(soak_shared *sh, soak_slot *sl, uint64_t seed)
{
	while (!stopping(sh)) {
		pause_point(sh, NULL);
		uint64_t r = rnd(&seed);
		int p[2];
		if (pipe(p) != 0) {
			soak_fail(sl, "pipe: %s", strerror(errno));
			return;
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(p[0]);
			victim(sh->sock, p[1]);
		}
		close(p[1]);
		if (pid < 0) {
			close(p[0]);
			soak_fail(sl, "fork: %s", strerror(errno));
			return;
		}
		char b;
		/* when to kill: at once (mid-connect or -register), as soon as
		 * its jobs are queued, or up to 30 ms later (some are running) */
		if (r % 3 != 0 && read(p[0], &b, 1) != 1)
			soak_tally(sl, "victim-died-early");
		if (r % 3 == 2)
			deadline_sleep_ms((unsigned)(r >> 8) % 30);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(p[0]);
		soak_tally(sl, r % 3 == 0 ? "killed-early" : "killed-with-jobs-queued");
		atomic_fetch_add(&sl->ops, 1);
		deadline_sleep_ms(100); /* paced: a victim every ~0.1 s */
	}
}

void soak_client_run(soak_shared *sh, soak_slot *sl, uint64_t seed)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGPIPE, SIG_IGN);
	seed = seed * 0x9e3779b97f4a7c15ull + 1;
	switch (sl->kind) {
	case SOAK_SMALL:
		run_small(sh, sl, seed);
		break;
	case SOAK_LARGE:
		run_large(sh, sl, seed);
		break;
	case SOAK_CHURN:
		run_churn(sh, sl, seed);
		break;
	case SOAK_HOSTILE:
		run_hostile(sh, sl, seed);
		break;
	default:
		run_killer(sh, sl, seed);
		break;
	}
	_exit(0);
}
