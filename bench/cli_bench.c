/* bench/cli_bench.c — `vkgrad bench`: latency and throughput of the daemon
 * under a few fixed scenarios, and (--direct, --compare) of the same jobs run
 * in-process without the daemon (cli_bench_direct.c), so the cost of the
 * socket, the messages and separate processes shows as a ratio.
 *
 * Socket mode: N forked client processes, each with its own connection and
 * one registered region. Each runs a few warm-up jobs, reports ready, waits
 * on a start barrier (a pipe the parent closes), then runs M jobs keeping K in
 * flight with the asynchronous API, timing each job from vkg_submit until
 * vkg_wait_any reports it, and sends its latencies back through a pipe. */
#include "cli_bench.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- scenarios ------------------------------------------------------------- */

/* Job counts keep the whole default run short on a CPU Vulkan driver
 * (lavapipe, 2 cores: ~1.5 ms per tiny job, ~2 s per narrow one); on a GPU
 * they finish quickly. --jobs scales them up. */
static const struct bench_line_def {
	const char *scenario;
	uint64_t batch, in, out;
	uint32_t clients, inflight;
	uint64_t jobs, warmup; /* per client */
} bench_lines[] = {
	{"tiny_latency", 32, 64, 8, 1, 1, 400, 20},
	{"tiny_throughput", 32, 64, 8, 1, 32, 1024, 32},
	{"tiny_throughput", 32, 64, 8, 4, 32, 256, 32},
	{"tiny_throughput", 32, 64, 8, 16, 32, 64, 32},
	{"narrow", 4096, 1024, 16, 1, 4, 2, 1},
	{"narrow", 4096, 1024, 16, 4, 4, 1, 1},
};
#define BENCH_NLINES (sizeof(bench_lines) / sizeof(bench_lines[0]))
#define BENCH_MAX_INFLIGHT 128 /* the daemon's default max_inflight per connection */

static const char bench_usage[] =
	"usage: vkgrad [--socket PATH] bench [--socket PATH] [--scenario NAME] [--clients N]\n"
	"                [--jobs M] [--inflight K] [--warmup W] [--json] [--direct | --compare]\n"
	"                [--check] [--daemon PATH] [--client-spin-us N]\n"
	"       vkgrad [--socket PATH] bench --scenario mixed [OPTIONS]\n"
	"       vkgrad [--socket PATH] bench --kernels [OPTIONS]\n"
	"       vkgrad bench --peak [OPTIONS]\n"
	"  scenarios (default: all of them):\n"
	"    tiny_latency     B×I×O=32×64×8, dw,db,dx; 1 client, 1 in flight\n"
	"    tiny_throughput  the same shape; 1, 4 and 16 clients, 32 in flight each\n"
	"    narrow           4096×1024×16, dw,db,dx; 1 and 4 clients, 4 in flight each\n"
	"    mixed            (not in the default run; its own options) synchronous tiny\n"
	"                     clients alone, a heavy client alone, then both at once\n"
	"                     (see 'vkgrad bench --scenario mixed --help')\n"
	"  --clients N   run each scenario with N client processes (one line)\n"
	"  --jobs M      measured jobs per client (default: per scenario line)\n"
	"  --inflight K  jobs each client keeps in flight (1..128)\n"
	"  --warmup W    unmeasured jobs per client first (default: per scenario line)\n"
	"  --json        print only the JSON lines (one per scenario line and mode)\n"
	"  --direct      run the jobs in this process through the daemon's engine,\n"
	"                without daemon or socket\n"
	"  --compare     run every line both ways and print the daemon/direct ratios\n"
	"  --check       compare each client's last result with the float64 reference\n"
	"  --client-spin-us N  each client polls its socket up to N µs before it\n"
	"                sleeps in a wait (vkg_set_wait_spin; default: $VKGRAD_WAIT_SPIN_US or 0)\n"
	"  --socket PATH use a running daemon; otherwise a private one is started\n"
	"                (--daemon PATH, default: the vkgradd next to this program)\n"
	"                on a temporary socket with an empty pipeline cache\n"
	"  --kernels     a different benchmark: kernel time, TFLOP/s and GB/s per\n"
	"                shape, dtype and variant (see 'vkgrad bench --kernels --help')\n"
	"  --peak        another: the device's ceilings through Vulkan (cooperative-\n"
	"                matrix multiply-adds, FP32 FMA) by microkernels, in this\n"
	"                process (see 'vkgrad bench --peak --help')\n"
	"Latency is a job's round trip: from vkg_submit until its completion is seen.\n"
	"jobs_per_s counts all clients' measured jobs over the time from the start\n"
	"barrier to the last client's last completion.\n";

typedef struct bench_opts {
	const char *socket, *scenario, *daemon;
	uint64_t clients, jobs, inflight, warmup; /* 0: the line's default */
	bool warmup_set, json, direct, compare, check;
	uint64_t client_spin_us;
	bool client_spin_set;
} bench_opts;

/* This thread's last job's trace (vkg_trace_last) into row. */
static void stage_row_from_trace(uint64_t *row)
{
	vkg_trace tr;
	bench_stage_row_clear(row);
	if (vkg_trace_last(&tr) != 0)
		return;
	for (unsigned i = 0; i < tr.n_stages; i++)
		bench_stage_put(row, tr.stages[i].name, tr.stages[i].ns);
}

/* ---- socket mode: one client process --------------------------------------- */

/* What a child sends back first; n latencies (uint64_t ns) follow. */
typedef struct child_report {
	int32_t ok;
	uint32_t mismatched;
	uint64_t n, batch_jobs_sum, t_end_ns;
	char err[320];
} child_report;

typedef struct inflight_slot {
	uint64_t handle, t0;
	bool used;
} inflight_slot;

static uint64_t now_ns_precise(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Run `total` jobs keeping `k` in flight. lat (may be NULL) gets each
 * round trip, stg (with lat) each job's stages (PROTO_STAGE_COUNT per
 * job). 0, or -1 with rep->err filled. */
static int child_jobs(vkg_client *c, const vkg_job *job, uint64_t total, uint32_t k,
		      inflight_slot *fl, uint64_t *lat, uint64_t *stg, child_report *rep)
{
	uint64_t submitted = 0, done = 0, live = 0;
	vkg_error err;
	for (uint32_t i = 0; i < k; i++)
		fl[i].used = false;
	while (done < total) {
		while (submitted < total && live < k) {
			uint32_t i = 0;
			while (fl[i].used)
				i++;
			fl[i].t0 = now_ns_precise();
			if (vkg_submit(c, job, &fl[i].handle, &err) != 0) {
				snprintf(rep->err, sizeof(rep->err), "submit: %s: %s", err.code, err.message);
				return -1;
			}
			fl[i].used = true;
			submitted++;
			live++;
		}
		uint64_t h = 0;
		vkg_result res = {0};
		int rc = vkg_wait_any(c, &h, -1, &res, &err);
		const uint64_t t1 = now_ns_precise();
		if (rc != 0) {
			snprintf(rep->err, sizeof(rep->err), "job: %s: %s", err.code, err.message);
			return -1;
		}
		uint32_t i = 0;
		while (i < k && !(fl[i].used && fl[i].handle == h))
			i++;
		if (i == k) {
			snprintf(rep->err, sizeof(rep->err), "a reply for unknown handle %" PRIu64, h);
			return -1;
		}
		fl[i].used = false;
		if (lat) {
			stage_row_from_trace(stg + rep->n * PROTO_STAGE_COUNT);
			lat[rep->n++] = t1 - fl[i].t0;
			rep->batch_jobs_sum += res.batch_jobs;
		}
		live--;
		done++;
	}
	return 0;
}

/* The child's whole life; returns its exit status. */
static int child_main(const char *sock, const bench_spec *s, uint32_t idx, int ready_fd,
		      int start_fd, int out_fd)
{
	child_report rep = {0};
	vkg_error err;
	cli_task t;
	bool ready_sent = false;
	uint64_t *lat = calloc(s->jobs + 1, sizeof(*lat));
	uint64_t *stg = calloc((s->jobs + 1) * PROTO_STAGE_COUNT, sizeof(*stg));
	inflight_slot *fl = calloc(s->inflight, sizeof(*fl));
	vkg_client *c = NULL;
	char why[160];
	memset(&t, 0, sizeof(t));
	if (!lat || !stg || !fl) {
		snprintf(rep.err, sizeof(rep.err), "out of memory");
		goto out;
	}
	if (cli_task_init(&t, s->batch, s->in, s->out, s->outputs, false, PROTO_F32, why,
			  sizeof(why)) != 0) {
		snprintf(rep.err, sizeof(rep.err), "%s", why);
		goto out;
	}
	c = vkg_connect(sock, &err);
	if (!c) {
		snprintf(rep.err, sizeof(rep.err), "connect: %s: %s", err.code, err.message);
		goto out;
	}
	if (cli_task_map(&t, c, &err) != 0) {
		snprintf(rep.err, sizeof(rep.err), "region: %s: %s", err.code, err.message);
		goto out;
	}
	cli_task_fill_inputs(&t, idx + 1);
	cli_task_fill_outputs(&t, idx + 1001);
	const vkg_job job = cli_task_job(&t);
	if (child_jobs(c, &job, s->warmup, s->inflight, fl, NULL, NULL, &rep) != 0)
		goto out;
	/* ready, then wait for the start barrier: EOF when the parent closes it */
	if (bench_write_all(ready_fd, "r", 1) != 0)
		goto out;
	ready_sent = true;
	char b;
	while (read(start_fd, &b, 1) < 0 && errno == EINTR)
		;
	if (child_jobs(c, &job, s->jobs, s->inflight, fl, lat, stg, &rep) != 0)
		goto out;
	rep.t_end_ns = now_ns_precise();
	if (s->check) {
		if (cli_task_reference(&t) != 0) {
			snprintf(rep.err, sizeof(rep.err), "out of memory for the reference");
			goto out;
		}
		rep.mismatched = !(cli_task_check(&t) <= CLI_TOL);
	}
	rep.ok = 1;
out:
	if (!ready_sent)
		bench_write_all(ready_fd, "!", 1);
	if (!rep.ok)
		rep.n = 0;
	int rc = bench_write_all(out_fd, &rep, sizeof(rep)) == 0 &&
			 bench_write_all(out_fd, lat, rep.n * sizeof(*lat)) == 0 &&
			 bench_write_all(out_fd, stg, rep.n * PROTO_STAGE_COUNT * sizeof(*stg)) == 0
		 ? 0
		 : 4;
	close(out_fd);
	cli_task_free(&t, c);
	vkg_close(c);
	free(lat);
	free(stg);
	free(fl);
	return rep.ok ? rc : 3;
}

static void kill_children(const pid_t *pids, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
}

/* Wait until each of the `n` children (pids) said ready ('r') on fd, or
 * one failed ('!'); one that died without a word is found by looking at
 * the children while the pipe is quiet. 0, or -1 with why. */
static int wait_ready(int fd, const pid_t *pids, uint32_t n, char *why, size_t why_len)
{
	for (uint32_t got = 0; got < n;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int pr = poll(&p, 1, 500);
		if (pr == 0) {
			for (uint32_t i = 0; i < n; i++) {
				siginfo_t si = {0};
				if (waitid(P_PID, (id_t)pids[i], &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
				    si.si_pid) {
					snprintf(why, why_len, "client %u died before the measured phase",
						 i + 1);
					return -1;
				}
			}
			continue;
		}
		char c;
		ssize_t k = pr < 0 ? -1 : read(fd, &c, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k != 1 || c != 'r') {
			snprintf(why, why_len, "a client failed before the measured phase");
			return -1;
		}
		got++;
	}
	return 0;
}

/* Read each child's report (outs[]) into r: its latencies and stages
 * appended, r->wall_ns from t0 to the last child's end. Every report is
 * read even after a failure. 0, or -1 with why (the first failure's). */
static int collect_reports(const bench_spec *s, const int *outs, uint64_t t0, bench_result *r,
			   char *why, size_t why_len)
{
	uint64_t t_end = t0;
	bool failed = false;
	for (uint32_t i = 0; i < s->clients; i++) {
		child_report rep;
		if (bench_read_all(outs[i], &rep, sizeof(rep)) != 0) {
			snprintf(why, why_len, "client %u ended without a report", i + 1);
			failed = true;
			continue;
		}
		rep.err[sizeof(rep.err) - 1] = 0;
		if (!rep.ok || rep.n > s->jobs) {
			if (!failed)
				snprintf(why, why_len, "client %u: %s", i + 1,
					 rep.ok ? "bad report" : rep.err);
			failed = true;
			continue;
		}
		if (bench_read_all(outs[i], r->lat_ns + r->n, rep.n * sizeof(uint64_t)) != 0 ||
		    bench_read_all(outs[i], r->stage_ns + r->n * PROTO_STAGE_COUNT,
				   rep.n * PROTO_STAGE_COUNT * sizeof(uint64_t)) != 0) {
			snprintf(why, why_len, "client %u: short report", i + 1);
			failed = true;
			continue;
		}
		r->n += rep.n;
		r->batch_jobs_sum += rep.batch_jobs_sum;
		r->mismatched += rep.mismatched;
		if (rep.t_end_ns > t_end)
			t_end = rep.t_end_ns;
	}
	r->wall_ns = t_end - t0;
	return failed ? -1 : 0;
}

/* One line in socket mode. 0, or -1 with why. */
static int bench_socket_run(const char *sock, const bench_spec *s, bench_result *r, char *why,
			    size_t why_len)
{
	memset(r, 0, sizeof(*r));
	int ready[2] = {-1, -1}, start[2] = {-1, -1};
	int *outs = calloc(s->clients, sizeof(int));
	pid_t *pids = calloc(s->clients, sizeof(pid_t));
	r->lat_ns = calloc(s->clients * s->jobs + 1, sizeof(*r->lat_ns));
	r->stage_ns = calloc((s->clients * s->jobs + 1) * PROTO_STAGE_COUNT, sizeof(*r->stage_ns));
	uint32_t started = 0;
	int rc = -1;
	why[0] = 0;
	if (!outs || !pids || !r->lat_ns || !r->stage_ns) {
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < s->clients; i++)
		outs[i] = -1;
	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(start, O_CLOEXEC) != 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		goto out;
	}
	fflush(stdout);
	fflush(stderr);
	for (uint32_t i = 0; i < s->clients; i++) {
		int res[2];
		if (pipe2(res, O_CLOEXEC) != 0) {
			snprintf(why, why_len, "pipe: %s", strerror(errno));
			goto abort;
		}
		pid_t pid = fork();
		if (pid < 0) {
			snprintf(why, why_len, "fork: %s", strerror(errno));
			close(res[0]);
			close(res[1]);
			goto abort;
		}
		if (pid == 0) {
			close(ready[0]);
			close(start[1]);
			close(res[0]);
			_exit(child_main(sock, s, i, ready[1], start[0], res[1]));
		}
		close(res[1]);
		outs[i] = res[0];
		pids[i] = pid;
		started++;
	}
	close(ready[1]);
	ready[1] = -1;
	close(start[0]);
	start[0] = -1;

	if (wait_ready(ready[0], pids, started, why, why_len) != 0)
		goto abort;
	const uint64_t t0 = now_ns_precise();
	close(start[1]); /* go */
	start[1] = -1;

	rc = collect_reports(s, outs, t0, r, why, why_len);
	goto reap;
abort:
	kill_children(pids, started);
reap:
	for (uint32_t i = 0; i < started; i++) {
		int st = 0;
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
		if (rc == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
			snprintf(why, why_len, "client %u exited with status %d", i + 1, st);
			rc = -1;
		}
	}
	/* after an abort, the first failed client's own words, if it left them
	 * (the children are gone, so these reads cannot block) */
	for (uint32_t i = 0; rc != 0 && i < started && outs[i] >= 0; i++) {
		child_report rep;
		if (bench_read_all(outs[i], &rep, sizeof(rep)) == 0 && !rep.ok && rep.err[0]) {
			rep.err[sizeof(rep.err) - 1] = 0;
			snprintf(why, why_len, "client %u: %s", i + 1, rep.err);
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
	for (uint32_t i = 0; outs && i < s->clients; i++)
		if (outs[i] >= 0)
			close(outs[i]);
	free(outs);
	free(pids);
	if (rc != 0)
		bench_result_free(r);
	return rc;
}

/* ---- statistics and output ---------------------------------------------------- */

typedef struct bench_stats {
	double p50_us, p99_us, jobs_per_s, avg_batch;
	uint64_t jobs;
	double stage_p50_us[PROTO_STAGE_COUNT]; /* median of the jobs that have the stage */
	bool has_stage[PROTO_STAGE_COUNT];
	double untraced_p50_us; /* median of (round trip - its stages) over traced jobs */
	bool has_untraced;
} bench_stats;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v. */
static double percentile_us(const uint64_t *v, uint64_t n, double p)
{
	if (!n)
		return 0;
	uint64_t rank = (uint64_t)(p / 100.0 * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)v[rank - 1] / 1000.0;
}

/* Each stage's median over the jobs whose trace has it. */
static void stage_medians(const bench_result *r, bench_stats *st)
{
	uint64_t *v = r->stage_ns ? malloc((r->n + 1) * sizeof(*v)) : NULL;
	for (int k = 0; v && k < PROTO_STAGE_COUNT; k++) {
		uint64_t m = 0;
		for (uint64_t i = 0; i < r->n; i++)
			if (r->stage_ns[i * PROTO_STAGE_COUNT + k] != BENCH_NO_STAGE)
				v[m++] = r->stage_ns[i * PROTO_STAGE_COUNT + k];
		if (!m)
			continue;
		qsort(v, m, sizeof(*v), cmp_u64);
		st->has_stage[k] = true;
		st->stage_p50_us[k] = percentile_us(v, m, 50);
	}
	/* what the trace leaves out of each round trip: the bench's own
	 * timing around the library (a job whose stages add up to more counts 0) */
	uint64_t m = 0;
	for (uint64_t i = 0; v && i < r->n; i++) {
		uint64_t sum = 0;
		bool any = false;
		for (int k = 0; k < PROTO_STAGE_COUNT; k++)
			if (r->stage_ns[i * PROTO_STAGE_COUNT + k] != BENCH_NO_STAGE) {
				sum += r->stage_ns[i * PROTO_STAGE_COUNT + k];
				any = true;
			}
		if (any)
			v[m++] = r->lat_ns[i] > sum ? r->lat_ns[i] - sum : 0;
	}
	if (m) {
		qsort(v, m, sizeof(*v), cmp_u64);
		st->has_untraced = true;
		st->untraced_p50_us = percentile_us(v, m, 50);
	}
	free(v);
}

static bench_stats stats_of(bench_result *r)
{
	bench_stats st = {0};
	stage_medians(r, &st); /* before lat_ns is sorted: rows match jobs */
	qsort(r->lat_ns, r->n, sizeof(uint64_t), cmp_u64);
	st.jobs = r->n;
	st.p50_us = percentile_us(r->lat_ns, r->n, 50);
	st.p99_us = percentile_us(r->lat_ns, r->n, 99);
	st.jobs_per_s = r->wall_ns ? (double)r->n / ((double)r->wall_ns / 1e9) : 0;
	st.avg_batch = r->n ? (double)r->batch_jobs_sum / (double)r->n : 0;
	return st;
}

/* {"request":12.3,...}: each traced stage's median, in proto_stage_id
 * order ({} when no job had a trace), then ,"untraced_us":N when some had. */
static void stages_json(char *out, size_t cap, const bench_stats *st)
{
	size_t o = (size_t)snprintf(out, cap, "{");
	for (int k = 0; k < PROTO_STAGE_COUNT && o < cap; k++)
		if (st->has_stage[k])
			o += (size_t)snprintf(out + o, cap - o, "%s\"%s\":%.1f", o > 1 ? "," : "",
					      proto_stage_name((proto_stage_id)k), st->stage_p50_us[k]);
	if (o < cap)
		o += (size_t)snprintf(out + o, cap - o, "}");
	if (st->has_untraced && o < cap)
		snprintf(out + o, cap - o, ",\"untraced_us\":%.1f", st->untraced_p50_us);
}

static void print_json(const bench_spec *s, const char *mode, const bench_stats *st,
		       const char *device)
{
	char dev[300], stages[512];
	cli_json_escape(dev, sizeof(dev), device);
	stages_json(stages, sizeof(stages), st);
	cli_out("{\"scenario\":\"%s\",\"mode\":\"%s\",\"clients\":%u,\"inflight\":%u,\"jobs\":%" PRIu64
		",\"shape\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\"p50_us\":%.1f,\"p99_us\":%.1f,"
		"\"jobs_per_s\":%.1f,\"avg_batch_jobs\":%.2f,\"stages_us\":%s,\"client_spin_us\":%llu,"
		"\"device\":\"%s\"}\n",
		s->scenario, mode, s->clients, s->inflight, st->jobs, s->batch, s->in, s->out,
		st->p50_us, st->p99_us, st->jobs_per_s, st->avg_batch, stages,
		getenv("VKGRAD_WAIT_SPIN_US") ? strtoull(getenv("VKGRAD_WAIT_SPIN_US"), NULL, 10) : 0ull,
		dev);
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

static void print_ratio_json(const bench_spec *s, const bench_stats *d, const bench_stats *x)
{
	cli_out("{\"scenario\":\"%s\",\"mode\":\"ratio\",\"clients\":%u,\"inflight\":%u,"
		"\"p50_ratio\":%.3f,\"p99_ratio\":%.3f,\"jobs_per_s_ratio\":%.3f}\n",
		s->scenario, s->clients, s->inflight, ratio(d->p50_us, x->p50_us),
		ratio(d->p99_us, x->p99_us), ratio(d->jobs_per_s, x->jobs_per_s));
}

static void print_table_row(const bench_spec *s, const char *mode, const bench_stats *st)
{
	char shape[48];
	snprintf(shape, sizeof(shape), "%" PRIu64 "x%" PRIu64 "x%" PRIu64, s->batch, s->in, s->out);
	printf("%-16s %-7s %7u %8u %7" PRIu64 "  %-14s %10.1f %10.1f %10.1f %9.2f\n", s->scenario,
	       mode, s->clients, s->inflight, st->jobs, shape, st->p50_us, st->p99_us,
	       st->jobs_per_s, st->avg_batch);
	/* where the time went: each stage's median */
	bool any = false;
	for (int k = 0; k < PROTO_STAGE_COUNT; k++)
		if (st->has_stage[k]) {
			printf("%s %s %.1f", any ? "," : "    stages (µs, medians):",
			       proto_stage_name((proto_stage_id)k), st->stage_p50_us[k]);
			any = true;
		}
	if (any)
		printf("\n");
}

/* ---- the command ----------------------------------------------------------------- */

static int bench_parse(int argc, char **argv, bench_opts *o)
{
	enum { BO_SOCKET = 256, BO_SCEN, BO_CLIENTS, BO_JOBS, BO_INFL, BO_WARM, BO_JSON, BO_DIRECT,
	       BO_COMPARE, BO_CHECK, BO_DAEMON, BO_SPIN, BO_HELP };
	static const struct option opts[] = {
		{"socket", required_argument, NULL, BO_SOCKET},
		{"scenario", required_argument, NULL, BO_SCEN},
		{"clients", required_argument, NULL, BO_CLIENTS},
		{"jobs", required_argument, NULL, BO_JOBS},
		{"inflight", required_argument, NULL, BO_INFL},
		{"warmup", required_argument, NULL, BO_WARM},
		{"json", no_argument, NULL, BO_JSON},
		{"direct", no_argument, NULL, BO_DIRECT},
		{"compare", no_argument, NULL, BO_COMPARE},
		{"check", no_argument, NULL, BO_CHECK},
		{"daemon", required_argument, NULL, BO_DAEMON},
		{"client-spin-us", required_argument, NULL, BO_SPIN},
		{"help", no_argument, NULL, BO_HELP},
		{0},
	};
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
		int bad = 0;
		switch (c) {
		case BO_SOCKET: o->socket = optarg; break;
		case BO_SCEN: o->scenario = optarg; break;
		case BO_CLIENTS: bad = cli_parse_u64("--clients", optarg, 1, 256, &o->clients); break;
		case BO_JOBS: bad = cli_parse_u64("--jobs", optarg, 1, 10000000, &o->jobs); break;
		case BO_INFL:
			bad = cli_parse_u64("--inflight", optarg, 1, BENCH_MAX_INFLIGHT, &o->inflight);
			break;
		case BO_WARM:
			bad = cli_parse_u64("--warmup", optarg, 0, 1000000, &o->warmup);
			o->warmup_set = true;
			break;
		case BO_JSON: o->json = true; break;
		case BO_DIRECT: o->direct = true; break;
		case BO_COMPARE: o->compare = true; break;
		case BO_CHECK: o->check = true; break;
		case BO_DAEMON: o->daemon = optarg; break;
		case BO_SPIN:
			bad = cli_parse_u64("--client-spin-us", optarg, 0, VKG_MAX_WAIT_SPIN_US,
					    &o->client_spin_us);
			o->client_spin_set = true;
			break;
		case 'h':
		case BO_HELP: fputs(bench_usage, stdout); return -1;
		default:
			return cli_usage_fail("bench: bad option or missing value: '%s'",
					      argv[optind - 1]);
		}
		if (bad)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_fail("bench: unexpected argument '%s'", argv[optind]);
	if (o->direct && o->compare)
		return cli_usage_fail("bench: --direct and --compare exclude each other "
				      "(--compare runs both modes)");
	if (o->direct && (o->socket || o->daemon))
		return cli_usage_fail("bench: --direct uses no daemon; drop --socket/--daemon");
	if (o->scenario) {
		bool known = false;
		for (size_t i = 0; i < BENCH_NLINES; i++)
			known |= strcmp(o->scenario, bench_lines[i].scenario) == 0;
		if (!known)
			return cli_usage_fail("bench: unknown scenario '%s' (tiny_latency, "
					      "tiny_throughput, narrow, mixed)",
					      o->scenario);
	}
	return 0;
}

/* The lines to run: the table filtered by --scenario, with the overrides;
 * --clients turns a scenario's lines into one. */
static uint32_t bench_plan(const bench_opts *o, bench_spec *out)
{
	uint32_t n = 0;
	for (size_t i = 0; i < BENCH_NLINES; i++) {
		const struct bench_line_def *d = &bench_lines[i];
		if (o->scenario && strcmp(o->scenario, d->scenario) != 0)
			continue;
		if (o->clients && n && strcmp(out[n - 1].scenario, d->scenario) == 0)
			continue;
		bench_spec s = {
			.scenario = d->scenario,
			.batch = d->batch,
			.in = d->in,
			.out = d->out,
			.outputs = CLI_OUT_ALL,
			.clients = o->clients ? (uint32_t)o->clients : d->clients,
			.inflight = o->inflight ? (uint32_t)o->inflight : d->inflight,
			.jobs = o->jobs ? o->jobs : d->jobs,
			.warmup = o->warmup_set ? o->warmup : d->warmup,
			.check = o->check,
		};
		out[n++] = s;
	}
	return n;
}

static void progress(const bench_opts *o, const bench_spec *s, const char *mode)
{
	if (!o->json)
		cli_errf("bench: %s, %s mode: %u client%s x %" PRIu64 " jobs (%" PRIu64
			 " warm-up), %u in flight...\n",
			 s->scenario, mode, s->clients, s->clients == 1 ? "" : "s", s->jobs,
			 s->warmup, s->inflight);
}

static void print_table(const bench_opts *o, const bench_spec *plan, uint32_t n,
			const bool *have_d, const bench_stats *sd, const bool *have_x,
			const bench_stats *sx, const char *device, uint32_t mismatched)
{
	printf("\n%-16s %-7s %7s %8s %7s  %-14s %10s %10s %10s %9s\n", "scenario", "mode",
	       "clients", "inflight", "jobs", "shape", "p50_us", "p99_us", "jobs/s", "avg_batch");
	for (uint32_t i = 0; i < n; i++) {
		if (have_d[i])
			print_table_row(&plan[i], "daemon", &sd[i]);
		if (have_x[i])
			print_table_row(&plan[i], "direct", &sx[i]);
		if (have_d[i] && have_x[i])
			printf("%-16s %-7s %7s %8s %7s  %-14s %9.2fx %9.2fx %9.2fx\n", "", "ratio", "",
			       "", "", "daemon/direct", ratio(sd[i].p50_us, sx[i].p50_us),
			       ratio(sd[i].p99_us, sx[i].p99_us), ratio(sd[i].jobs_per_s, sx[i].jobs_per_s));
	}
	printf("device: %s\n", device);
	if (o->check)
		printf("check: %s\n", mismatched ? "some results did NOT match the reference"
						 : "every client's last result matched the float64 "
						   "reference");
	fflush(stdout);
}

/* Start the private daemon unless a socket was given; the socket to use,
 * or NULL after printing why. */
static const char *bench_daemon_up(const bench_opts *o, cli_daemon *priv)
{
	char why[512];
	if (o->socket)
		return o->socket;
	char bin[4096];
	if (o->daemon)
		snprintf(bin, sizeof(bin), "%s", o->daemon);
	else if (cli_daemon_default_binary(bin, sizeof(bin)) != 0) {
		cli_errf("vkgrad: bench: cannot find vkgradd next to this program; "
			 "pass --daemon PATH or --socket PATH\n");
		return NULL;
	}
	if (!o->json)
		cli_errf("bench: starting a private daemon (%s)...\n", bin);
	if (cli_daemon_start(priv, bin, NULL, 120000, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: %s\n", why);
		return NULL;
	}
	return priv->sock;
}

int cli_bench(const cli_ctx *ctx, int argc, char **argv)
{
	/* --kernels and --peak are different benchmarks with their own options */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--kernels") == 0)
			return cli_bench_kernels(ctx, argc, argv);
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--peak") == 0)
			return cli_bench_peak(argc, argv);
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--scenario=mixed") == 0 ||
		    (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc &&
		     strcmp(argv[i + 1], "mixed") == 0))
			return cli_bench_mixed(ctx, argc, argv);
	bench_opts o = {0};
	int rc = bench_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (!o.socket)
		o.socket = ctx->socket;
	if (o.client_spin_set) { /* the clients' vkg_connect reads it */
		char v[24];
		snprintf(v, sizeof(v), "%" PRIu64, o.client_spin_us);
		setenv("VKGRAD_WAIT_SPIN_US", v, 1);
	}

	bench_spec plan[BENCH_NLINES];
	const uint32_t n = bench_plan(&o, plan);
	const bool run_daemon = !o.direct, run_direct = o.direct || o.compare;
	bench_result rd[BENCH_NLINES], rx[BENCH_NLINES];
	bench_stats sd[BENCH_NLINES], sx[BENCH_NLINES];
	bool have_d[BENCH_NLINES] = {0}, have_x[BENCH_NLINES] = {0};
	memset(rd, 0, sizeof(rd));
	memset(rx, 0, sizeof(rx));
	char why[512], device[128] = "";
	uint32_t mismatched = 0;
	cli_daemon priv = {0};
	bench_direct_proc dp = {.pid = 0, .cmd_fd = -1, .res_fd = -1};
	const char *sock = NULL;

	/* the direct mode's helper first, while this process has no threads */
	if (run_direct && bench_direct_proc_start(&dp, plan, n, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: direct mode: %s\n", why);
		return CLI_EXIT_DAEMON;
	}
	if (run_daemon) {
		if (!(sock = bench_daemon_up(&o, &priv))) {
			rc = CLI_EXIT_DAEMON;
			goto out;
		}
		vkg_error err;
		vkg_info info;
		vkg_client *c = vkg_connect(sock, &err);
		if (!c || vkg_hello(c, "vkgrad bench", &info, &err) != 0) {
			vkg_close(c);
			rc = cli_fail(&err);
			goto out;
		}
		vkg_close(c);
		snprintf(device, sizeof(device), "%s", info.device_name);
	}
	/* both modes of a line back to back, so a slow spell of a shared machine
	 * hits the two alike */
	for (uint32_t i = 0; i < n; i++) {
		if (run_daemon) {
			progress(&o, &plan[i], "daemon");
			if (bench_socket_run(sock, &plan[i], &rd[i], why, sizeof(why)) != 0) {
				cli_errf("vkgrad: bench: %s (daemon mode): %s\n", plan[i].scenario, why);
				rc = CLI_EXIT_DAEMON;
				break;
			}
			snprintf(rd[i].device, sizeof(rd[i].device), "%s", device);
			mismatched += rd[i].mismatched;
			sd[i] = stats_of(&rd[i]);
			have_d[i] = true;
			print_json(&plan[i], "daemon", &sd[i], rd[i].device);
		}
		if (run_direct) {
			progress(&o, &plan[i], "direct");
			if (bench_direct_proc_run(&dp, i, &rx[i], why, sizeof(why)) != 0) {
				cli_errf("vkgrad: bench: %s (direct mode): %s\n", plan[i].scenario, why);
				rc = CLI_EXIT_DAEMON;
				break;
			}
			mismatched += rx[i].mismatched;
			sx[i] = stats_of(&rx[i]);
			have_x[i] = true;
			print_json(&plan[i], "direct", &sx[i], rx[i].device);
			if (!device[0])
				snprintf(device, sizeof(device), "%s", rx[i].device);
		}
		if (have_d[i] && have_x[i])
			print_ratio_json(&plan[i], &sd[i], &sx[i]);
	}
out:
	if (priv.pid && cli_daemon_stop(&priv, 60000, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: %s\n", why);
		rc = CLI_EXIT_DAEMON;
	}
	if (run_direct && bench_direct_proc_stop(&dp, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: %s\n", why);
		rc = CLI_EXIT_DAEMON;
	}
	bool any = false;
	for (uint32_t i = 0; i < n; i++)
		any |= have_d[i] || have_x[i];
	if (!o.json && any)
		print_table(&o, plan, n, have_d, sd, have_x, sx, device, mismatched);
	for (uint32_t i = 0; i < n; i++) {
		bench_result_free(&rd[i]);
		bench_result_free(&rx[i]);
	}
	if (rc == CLI_EXIT_OK && mismatched)
		rc = CLI_EXIT_CHECK;
	return rc;
}
