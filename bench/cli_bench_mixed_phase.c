/* bench/cli_bench_mixed_phase.c — the client processes of `vkgrad bench
 * --scenario mixed` (cli_bench_mixed.h) and one phase of them: fork, warm
 * up, release together, gather what each measured. */
#include "cli_bench_mixed.h"

#include "cli.h"
#include "ref.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Above this many FLOPs the heavy check is sampled (cli_bench_kernels.c). */
#define MX_SAMPLED_FLOP 2e9
#define MX_SAMPLES 512
#define MX_TINY_WARMUP_NS 200000000ull  /* 0.2 s, at least MX_TINY_WARMUP_MIN jobs */
#define MX_TINY_WARMUP_MIN 20
#define MX_HEAVY_WARMUP_NS 300000000ull /* 0.3 s, at least one round of K */

/* What a child sends back; n latencies (ns) and n stage rows follow. */
typedef struct mx_report {
	int32_t ok;
	uint32_t mismatched;
	uint64_t n;          /* latencies that follow (one per counted job) */
	uint64_t jobs;       /* jobs counted */
	uint64_t t_last_ns;  /* the last counted job's reply (CLOCK_MONOTONIC) */
	double max_err;
	char err[320];
} mx_report;

uint64_t mx_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double mx_flop(const uint64_t s[3])
{
	return 4.0 * (double)s[0] * (double)s[1] * (double)s[2];
}

/* ---- one client process ----------------------------------------------------------- */

static void stage_row(uint64_t *row)
{
	vkg_trace tr;
	bench_stage_row_clear(row);
	if (vkg_trace_last(&tr) != 0)
		return;
	for (unsigned i = 0; i < tr.n_stages; i++)
		bench_stage_put(row, tr.stages[i].name, tr.stages[i].ns);
}

/* Room for one more latency and stage row; -1 when out of memory. */
static int grow(uint64_t **lat, uint64_t **stg, uint64_t n, uint64_t *cap)
{
	if (n < *cap)
		return 0;
	uint64_t c = *cap ? *cap * 2 : 4096;
	uint64_t *l = realloc(*lat, c * sizeof(*l));
	if (l)
		*lat = l;
	uint64_t *s = l ? realloc(*stg, c * PROTO_STAGE_COUNT * sizeof(*s)) : NULL;
	if (!s)
		return -1;
	*stg = s;
	*cap = c;
	return 0;
}

typedef struct mx_child {
	const mx_client *cl;
	vkg_client *c;
	cli_task *t;
	vkg_job *job;
	uint64_t *handle, *t_sub;
	uint64_t *lat, *stg, cap;
	mx_report rep;
} mx_child;

/* Keep every task's job in flight until `until` (monotonic ns), then wait
 * for the rest. count: record the jobs (tiny: every one submitted before
 * `until`; heavy: those that ended by it). 0, or -1 with rep.err. */
static int child_run(mx_child *ch, uint64_t until, bool count)
{
	const mx_client *cl = ch->cl;
	uint32_t live = 0;
	vkg_error err;
	for (uint32_t i = 0; i < cl->k; i++) {
		ch->t_sub[i] = mx_now();
		if (vkg_submit(ch->c, &ch->job[i], &ch->handle[i], &err) != 0)
			goto fail_submit;
		live++;
	}
	while (live) {
		uint64_t h = 0;
		vkg_result res;
		if (vkg_wait_any(ch->c, &h, -1, &res, &err) != 0) {
			snprintf(ch->rep.err, sizeof(ch->rep.err), "job: %s: %s", err.code,
				 err.message);
			return -1;
		}
		const uint64_t t1 = mx_now();
		uint32_t i = 0;
		while (i < cl->k && ch->handle[i] != h)
			i++;
		if (i == cl->k) {
			snprintf(ch->rep.err, sizeof(ch->rep.err), "a reply for unknown handle %" PRIu64,
				 h);
			return -1;
		}
		live--;
		ch->handle[i] = 0;
		if (count && (!cl->heavy || t1 <= until)) {
			ch->rep.jobs++;
			ch->rep.t_last_ns = t1;
			if (grow(&ch->lat, &ch->stg, ch->rep.n, &ch->cap) != 0) {
				snprintf(ch->rep.err, sizeof(ch->rep.err), "out of memory");
				return -1;
			}
			stage_row(ch->stg + ch->rep.n * PROTO_STAGE_COUNT);
			ch->lat[ch->rep.n++] = t1 - ch->t_sub[i];
		}
		if (t1 < until) {
			ch->t_sub[i] = mx_now();
			if (vkg_submit(ch->c, &ch->job[i], &ch->handle[i], &err) != 0)
				goto fail_submit;
			live++;
		}
	}
	return 0;
fail_submit:
	snprintf(ch->rep.err, sizeof(ch->rep.err), "submit: %s: %s", err.code, err.message);
	return -1;
}

/* Set up the regions and their references, warm up, say ready, wait for
 * the barrier, run `seconds`, check. Fills ch->rep; 0 or -1. */
static int child_body(mx_child *ch, const char *sock, double seconds, int ready_fd,
		      int start_fd, bool *ready_sent)
{
	const mx_client *cl = ch->cl;
	vkg_error err;
	char why[256];
	ch->c = vkg_connect(sock, &err);
	if (!ch->c) {
		snprintf(ch->rep.err, sizeof(ch->rep.err), "connect: %s: %s", err.code, err.message);
		return -1;
	}
	for (uint32_t i = 0; i < cl->k; i++) {
		cli_task *t = &ch->t[i];
		if (cli_task_init(t, cl->shape[0], cl->shape[1], cl->shape[2], CLI_OUT_ALL, false,
				  cl->dtype, why, sizeof(why)) != 0) {
			snprintf(ch->rep.err, sizeof(ch->rep.err), "%s", why);
			return -1;
		}
		if (cli_task_map(t, ch->c, &err) != 0) {
			snprintf(ch->rep.err, sizeof(ch->rep.err), "region of %zu bytes: %s: %s",
				 t->size, err.code, err.message);
			return -1;
		}
		if (i == 0) {
			cli_task_fill_inputs(t, cl->seed);
			cli_task_poison_outputs(t);
		} else {
			memcpy(t->mem, ch->t[0].mem, t->size); /* the same job on each region */
		}
		ch->job[i] = cli_task_job(t);
	}
	/* the reference before any job, so it never competes with the device
	 * for the CPU (lavapipe computes on it) */
	const bool sampled = mx_flop(cl->shape) > MX_SAMPLED_FLOP;
	if ((sampled ? cli_task_reference_sampled(&ch->t[0], MX_SAMPLES, 0x5eed)
		     : cli_task_reference(&ch->t[0])) != 0) {
		snprintf(ch->rep.err, sizeof(ch->rep.err), "out of memory for the reference");
		return -1;
	}
	/* warm-up: pipelines, first touches of the regions, clocks */
	const uint64_t w0 = mx_now();
	const bool heavy = cl->heavy;
	const uint64_t wns = heavy ? MX_HEAVY_WARMUP_NS : MX_TINY_WARMUP_NS;
	for (unsigned round = 0;; round++) {
		if (round >= (heavy ? 1u : MX_TINY_WARMUP_MIN) && mx_now() - w0 >= wns)
			break;
		if (child_run(ch, 0, false) != 0)
			return -1;
	}
	if (bench_write_all(ready_fd, "r", 1) != 0) {
		snprintf(ch->rep.err, sizeof(ch->rep.err), "the parent went away");
		return -1;
	}
	*ready_sent = true;
	char b;
	while (read(start_fd, &b, 1) < 0 && errno == EINTR)
		;
	const uint64_t t0 = mx_now();
	if (child_run(ch, t0 + (uint64_t)(seconds * 1e9), true) != 0)
		return -1;
	/* every job of a region writes the same outputs: the last one's are checked */
	ch->rep.max_err = cli_task_check(&ch->t[0]);
	ch->rep.mismatched = !(ch->rep.max_err <= vkg_ref_tolerance(cl->dtype));
	return 0;
}

static int child_main(const mx_client *cl, const char *sock, double seconds, int ready_fd,
		      int start_fd, int out_fd)
{
	mx_child ch = {.cl = cl};
	bool ready_sent = false;
	ch.t = calloc(cl->k, sizeof(*ch.t));
	ch.job = calloc(cl->k, sizeof(*ch.job));
	ch.handle = calloc(cl->k, sizeof(*ch.handle));
	ch.t_sub = calloc(cl->k, sizeof(*ch.t_sub));
	if (!ch.t || !ch.job || !ch.handle || !ch.t_sub)
		snprintf(ch.rep.err, sizeof(ch.rep.err), "out of memory");
	else if (child_body(&ch, sock, seconds, ready_fd, start_fd, &ready_sent) == 0)
		ch.rep.ok = 1;
	if (!ready_sent)
		bench_write_all(ready_fd, "!", 1);
	if (!ch.rep.ok)
		ch.rep.n = 0;
	int rc = bench_write_all(out_fd, &ch.rep, sizeof(ch.rep)) == 0 &&
			 bench_write_all(out_fd, ch.lat, ch.rep.n * sizeof(uint64_t)) == 0 &&
			 bench_write_all(out_fd, ch.stg,
					 ch.rep.n * PROTO_STAGE_COUNT * sizeof(uint64_t)) == 0
		 ? 0
		 : 4;
	close(out_fd);
	for (uint32_t i = 0; ch.t && i < cl->k; i++)
		cli_task_free(&ch.t[i], ch.c);
	vkg_close(ch.c);
	free(ch.t), free(ch.job), free(ch.handle), free(ch.t_sub), free(ch.lat), free(ch.stg);
	return ch.rep.ok ? rc : 3;
}

/* ---- one phase: fork the clients, release them together, gather ------------------ */

void mx_side_free(mx_side *s)
{
	free(s->lat);
	free(s->stg);
	memset(s, 0, sizeof(*s));
}

/* Wait until n children said ready ('r'), or one failed ('!') or died. */
static int wait_ready(int fd, const pid_t *pids, uint32_t n, char *why, size_t len)
{
	for (uint32_t got = 0; got < n;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, 500);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr > 0) {
			char b;
			ssize_t r = read(fd, &b, 1);
			if (r == 1 && b == 'r') {
				got++;
				continue;
			}
			if (r < 0 && errno == EINTR)
				continue;
			snprintf(why, len, "a client failed before the start");
			return -1;
		}
		for (uint32_t i = 0; i < n; i++)
			if (waitpid(pids[i], NULL, WNOHANG) == pids[i]) {
				snprintf(why, len, "a client died before the start");
				return -1;
			}
	}
	return 0;
}

/* Read one child's report into side s. 0, or -1 with why. */
static int gather(int fd, const char *name, mx_side *s, char *why, size_t len)
{
	mx_report rep;
	if (bench_read_all(fd, &rep, sizeof(rep)) != 0) {
		snprintf(why, len, "%s: no report (it died?)", name);
		return -1;
	}
	rep.err[sizeof(rep.err) - 1] = 0;
	if (!rep.ok) {
		snprintf(why, len, "%s: %s", name, rep.err);
		return -1;
	}
	if (rep.n > (1ull << 32)) {
		snprintf(why, len, "%s: bad report", name);
		return -1;
	}
	uint64_t *l = realloc(s->lat, (s->n + rep.n + 1) * sizeof(*l));
	if (l)
		s->lat = l;
	uint64_t *g = l ? realloc(s->stg, (s->n + rep.n + 1) * PROTO_STAGE_COUNT * sizeof(*g))
			: NULL;
	if (!g) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	s->stg = g;
	if (bench_read_all(fd, s->lat + s->n, rep.n * sizeof(uint64_t)) != 0 ||
	    bench_read_all(fd, s->stg + s->n * PROTO_STAGE_COUNT,
			   rep.n * PROTO_STAGE_COUNT * sizeof(uint64_t)) != 0) {
		snprintf(why, len, "%s: short report", name);
		return -1;
	}
	s->n += rep.n;
	s->jobs += rep.jobs;
	if (rep.t_last_ns > s->t_last)
		s->t_last = rep.t_last_ns;
	s->mismatched += rep.mismatched;
	if (!(rep.max_err <= s->max_err))
		s->max_err = rep.max_err; /* NaN sticks */
	return 0;
}

int mx_phase(const char *sock, const mx_client *cl, uint32_t n, double seconds,
		    mx_phase_result *r, char *why, size_t len)
{
	memset(r, 0, sizeof(*r));
	int ready[2] = {-1, -1}, start[2] = {-1, -1}, outs[MX_MAX_TINY + 1];
	pid_t pids[MX_MAX_TINY + 1];
	uint32_t started = 0;
	int rc = -1;
	bool released = false;
	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(start, O_CLOEXEC) != 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		goto out;
	}
	fflush(stdout);
	fflush(stderr);
	for (uint32_t i = 0; i < n; i++) {
		int res[2];
		if (pipe2(res, O_CLOEXEC) != 0) {
			snprintf(why, len, "pipe: %s", strerror(errno));
			goto abort;
		}
		pid_t pid = fork();
		if (pid < 0) {
			snprintf(why, len, "fork: %s", strerror(errno));
			close(res[0]), close(res[1]);
			goto abort;
		}
		if (pid == 0) {
			close(ready[0]), close(start[1]), close(res[0]);
			for (uint32_t j = 0; j < started; j++)
				close(outs[j]);
			_exit(child_main(&cl[i], sock, seconds, ready[1], start[0], res[1]));
		}
		close(res[1]);
		outs[i] = res[0];
		pids[i] = pid;
		started++;
	}
	close(ready[1]), close(start[0]);
	ready[1] = start[0] = -1;
	if (wait_ready(ready[0], pids, started, why, len) != 0)
		goto abort;
	r->t0 = mx_now();
	close(start[1]); /* go */
	start[1] = -1;
	released = true;
	rc = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++)
		rc = gather(outs[i], cl[i].name, cl[i].heavy ? &r->heavy : &r->tiny, why, len);
	if (rc == 0)
		goto reap;
abort:
	rc = -1;
	for (uint32_t i = 0; i < started; i++)
		kill(pids[i], SIGTERM);
reap:
	for (uint32_t i = 0; i < started; i++) {
		int st = 0;
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
		if (rc == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
			snprintf(why, len, "%s exited with status %d", cl[i].name, st);
			rc = -1;
		}
	}
	/* after an abort, the first failed client's own words, if it left them
	 * (the children are gone, so these reads cannot block) */
	for (uint32_t i = 0; rc != 0 && !released && i < started; i++) {
		mx_report rep;
		if (bench_read_all(outs[i], &rep, sizeof(rep)) == 0 && !rep.ok && rep.err[0]) {
			rep.err[sizeof(rep.err) - 1] = 0;
			snprintf(why, len, "%s: %s", cl[i].name, rep.err);
			break;
		}
	}
out:
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (start[i] >= 0)
			close(start[i]);
	}
	for (uint32_t i = 0; i < started; i++)
		close(outs[i]);
	if (rc != 0) {
		mx_side_free(&r->tiny);
		mx_side_free(&r->heavy);
	}
	return rc;
}

