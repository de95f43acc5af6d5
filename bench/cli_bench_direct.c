/* bench/cli_bench_direct.c — `vkgrad bench --direct`: the benchmark's jobs
 * run in this process through the daemon's own code (device.c, pipelines.c,
 * region.c, engine.c), with no daemon, socket or message in between. Each
 * simulated client is one engine lane with one region made from a memfd
 * exactly as a client would make it; the engine is driven from a libuv loop
 * like the daemon's, and a client submits its next job from the done
 * callback, so the difference to the socket mode is the cost of IPC and of
 * separate processes. */
#include "cli_bench.h"
#include "clock.h"

#include "cli.h"

#include "config.h"
#include "device.h"
#include "engine.h"
#include "job.h"
#include "log.h"
#include "pipelines.h"
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct dclient dclient;

struct bench_direct {
	device dev;
	pipelines pl;
	config cfg;
	proto_limits limits;  /* cfg's, clamped to the device (device_clamp_limits) */
	uv_loop_t loop;
	engine *eng;
	region_set regions;   /* the clients' */
	bool dev_open, pl_init, loop_init, eng_init;
	char cache_dir[256];
	/* the run in progress */
	const bench_spec *spec;
	bench_result *res;
	dclient *clients;
	uint32_t pending;     /* clients not done with the current phase */
	uint64_t t_last_ns;   /* when the last of them finished */
	bool failed;
	char fail_msg[256];
};

struct dclient {
	bench_direct *b;
	uint32_t idx;
	engine_lane *lane;
	region *reg;
	cli_task t;
	uint64_t target, submitted, finished, live;
	uint64_t *t_submit;   /* by job number within the phase */
	bool measure;
};

/* CLI tensor slots to protocol slots (the same order, spelled out). */
static const int slot_to_proto[CLI_NT] = {
	[CLI_X] = PROTO_T_X,   [CLI_DY] = PROTO_T_DY, [CLI_W] = PROTO_T_W,
	[CLI_DW] = PROTO_T_DW, [CLI_DB] = PROTO_T_DB, [CLI_DX] = PROTO_T_DX,
};

static int region_size_cb(void *ctx, uint64_t region, uint64_t *size)
{
	const dclient *c = ctx;
	if (!c->reg || region != c->reg->id)
		return -1;
	*size = c->reg->size;
	return 0;
}

static void __attribute__((format(printf, 2, 3))) fail_run(bench_direct *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	b->failed = true;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->fail_msg, sizeof(b->fail_msg), fmt, ap);
	va_end(ap);
}

/* Validate and queue the client's next job, as ops.c does for a frame. */
static int dclient_submit(dclient *c)
{
	bench_direct *b = c->b;
	const uint64_t t0 = clock_now_ns();
	proto_request q = {
		.op = PROTO_OP_LINEAR_BACKWARD,
		.id = c->submitted,
		.dtype = PROTO_F32,
		.batch = c->t.batch,
		.in = c->t.in,
		.out = c->t.out,
	};
	for (int s = 0; s < CLI_NT; s++)
		if (c->t.present[s])
			q.t[slot_to_proto[s]] = (proto_tensor){.present = true, .region = c->reg->id,
							       .offset = c->t.off[s]};
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	if (proto_job_check(&q, &b->limits, region_size_cb, c, bytes, &err) != 0) {
		fail_run(b, "job refused: %s: %s", proto_code_name(err.code), err.message);
		return -1;
	}
	region *regs[PROTO_T_COUNT];
	for (int t = 0; t < PROTO_T_COUNT; t++)
		regs[t] = c->reg;
	/* received at t0: its DECODE stage is the checks above, as for a frame */
	job *j = engine_job_new(b->eng, c, &q, bytes, regs, t0);
	if (!j) {
		fail_run(b, "out of memory");
		return -1;
	}
	c->t_submit[c->submitted] = t0;
	c->submitted++;
	c->live++;
	engine_enqueue(b->eng, c->lane, j);
	return 0;
}

/* engine_events.done: the loop thread, once per job. The next job is only
 * queued here; async_cb pumps the engine after all completions. */
static void direct_done_cb(void *ctx, job *j, proto_code code, const char *msg, uint64_t queued_us,
			   uint64_t gpu_us, uint32_t batch_jobs)
{
	const uint64_t now = clock_now_ns();
	(void)ctx;
	(void)queued_us;
	(void)gpu_us;
	dclient *c = j->owner;
	bench_direct *b = c->b;
	c->live--;
	c->finished++;
	if (code != PROTO_OK) {
		fail_run(b, "job failed: %s: %s", proto_code_name(code), msg ? msg : "");
	} else if (c->measure) {
		bench_result *r = b->res;
		/* the engine's stages, up to this callback standing in for a reply */
		proto_trace tr;
		uint64_t *row = r->stage_ns + r->n * PROTO_STAGE_COUNT;
		engine_job_trace(j, now, &tr);
		bench_stage_row_clear(row);
		for (unsigned i = 0; i < tr.n; i++)
			bench_stage_put(row, tr.st[i].name, tr.st[i].ns);
		r->lat_ns[r->n++] = now - c->t_submit[j->req.id];
		r->batch_jobs_sum += batch_jobs;
	}
	if (c->finished == c->target) {
		if (--b->pending == 0)
			b->t_last_ns = now;
	} else if (c->submitted < c->target && !b->failed) {
		dclient_submit(c);
	}
}

static bool any_live(const bench_direct *b)
{
	for (uint32_t i = 0; i < b->spec->clients; i++)
		if (b->clients[i].live)
			return true;
	return false;
}

/* Every client runs `jobs` jobs keeping inflight in flight. Returns 0 with
 * *wall_ns from the first submission to the last completion, or -1. */
static int run_phase(bench_direct *b, uint64_t jobs, bool measure, uint64_t *wall_ns)
{
	const bench_spec *s = b->spec;
	b->pending = 0;
	for (uint32_t i = 0; i < s->clients; i++) {
		dclient *c = &b->clients[i];
		c->target = jobs;
		c->submitted = c->finished = 0;
		c->measure = measure;
		b->pending += jobs > 0;
	}
	if (!b->pending)
		return 0;
	/* the first jobs go in one by one, each pumped as ops.c pumps a
	 * frame's job; later ones from the done callback, pumped by the
	 * engine after the completions it handles */
	const uint64_t t0 = clock_now_ns();
	for (uint32_t i = 0; i < s->clients && !b->failed; i++) {
		dclient *c = &b->clients[i];
		while (c->submitted < jobs && c->live < s->inflight && !b->failed) {
			dclient_submit(c);
			engine_pump(b->eng);
		}
	}
	while (b->pending && !b->failed)
		uv_run(&b->loop, UV_RUN_ONCE);
	/* after a failure, let what was submitted finish: it holds the regions */
	while (any_live(b))
		uv_run(&b->loop, UV_RUN_ONCE);
	if (b->failed)
		return -1;
	if (wall_ns)
		*wall_ns = b->t_last_ns - t0;
	return 0;
}

static int dclient_setup(bench_direct *b, dclient *c, uint32_t idx, char *why, size_t why_len)
{
	const bench_spec *s = b->spec;
	c->b = b;
	c->idx = idx;
	if (cli_task_init(&c->t, s->batch, s->in, s->out, s->outputs, false, PROTO_F32,
			  why, why_len) != 0)
		return -1;
	uint64_t most = s->jobs > s->warmup ? s->jobs : s->warmup;
	c->t_submit = calloc(most ? most : 1, sizeof(*c->t_submit));
	c->lane = engine_lane_open(b->eng);
	if (!c->t_submit || !c->lane) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	/* the region as a client makes it: sealed memfd, then region_create */
	int fd = memfd_create("vkgrad-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)c->t.size) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
		snprintf(why, why_len, "memfd of %zu bytes: %s", c->t.size, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	proto_err err;
	if (region_create(&c->reg, &b->regions, &b->dev, fd, c->t.size, !b->cfg.no_host_import, NULL,
			  &err) != 0) {
		snprintf(why, why_len, "region: %s: %s", proto_code_name(err.code), err.message);
		return -1;
	}
	c->reg->id = 1;
	c->t.mem = c->reg->map;
	c->t.region = c->reg->id;
	cli_task_fill_inputs(&c->t, idx + 1);
	cli_task_fill_outputs(&c->t, idx + 1001);
	return 0;
}

static void dclient_teardown(bench_direct *b, dclient *c)
{
	if (c->lane)
		engine_lane_close(b->eng, c->lane);
	c->lane = NULL;
	cli_task_free(&c->t, NULL); /* the mapping is the region's */
	region_unref(c->reg);       /* the table's reference: frees it */
	c->reg = NULL;
	free(c->t_submit);
	c->t_submit = NULL;
}

int bench_direct_run(bench_direct *b, const bench_spec *s, bench_result *r, char *why,
		     size_t why_len)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->device, sizeof(r->device), "%s", b->dev.info.name); /* what hello reports */
	b->spec = s;
	b->res = r;
	b->failed = false;
	b->fail_msg[0] = 0;
	int rc = -1;
	b->clients = calloc(s->clients, sizeof(*b->clients));
	r->lat_ns = calloc(s->clients * s->jobs + 1, sizeof(*r->lat_ns));
	r->stage_ns = calloc((s->clients * s->jobs + 1) * PROTO_STAGE_COUNT, sizeof(*r->stage_ns));
	if (!b->clients || !r->lat_ns || !r->stage_ns) {
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < s->clients; i++)
		if (dclient_setup(b, &b->clients[i], i, why, why_len) != 0)
			goto out;
	if (run_phase(b, s->warmup, false, NULL) != 0 ||
	    run_phase(b, s->jobs, true, &r->wall_ns) != 0) {
		snprintf(why, why_len, "%s", b->fail_msg);
		goto out;
	}
	if (s->check) {
		for (uint32_t i = 0; i < s->clients; i++) {
			cli_task *t = &b->clients[i].t;
			if (cli_task_reference(t) != 0) {
				snprintf(why, why_len, "out of memory for the reference");
				goto out;
			}
			if (!(cli_task_check(t) <= CLI_TOL))
				r->mismatched++;
		}
	}
	rc = 0;
out:
	for (uint32_t i = 0; b->clients && i < s->clients; i++)
		dclient_teardown(b, &b->clients[i]);
	free(b->clients);
	b->clients = NULL;
	b->spec = NULL;
	b->res = NULL;
	if (rc != 0)
		bench_result_free(r);
	return rc;
}

bench_direct *bench_direct_open(char *why, size_t why_len)
{
	bench_direct *b = calloc(1, sizeof(*b));
	if (!b) {
		snprintf(why, why_len, "out of memory");
		return NULL;
	}
	config_defaults(&b->cfg); /* and the environment, as vkgradd reads it */
	/* the daemon's own logging, quiet unless something is wrong */
	log_init(LOG_LEVEL_WARN, b->cfg.env.journal_stream);
	const char *tmp = getenv("TMPDIR");
	snprintf(b->cache_dir, sizeof(b->cache_dir), "%s/vkgrad-bench-direct.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(b->cache_dir)) {
		snprintf(why, why_len, "mkdtemp %s: %s", b->cache_dir, strerror(errno));
		b->cache_dir[0] = 0;
		goto fail;
	}
	char err[256];
	if (device_open(&b->dev, b->cfg.device, &b->cfg.env, err, sizeof(err)) != 0) {
		snprintf(why, why_len, "device: %s", err);
		goto fail;
	}
	b->dev_open = true;
	b->pl_init = true; /* pipelines_destroy also cleans up a failed init */
	if (pipelines_init(&b->pl, &b->dev, b->cache_dir, &b->cfg.env, err, sizeof(err)) != 0) {
		snprintf(why, why_len, "pipelines: %s", err);
		goto fail;
	}
	/* the limits a connection gets, as server_start computes them */
	b->limits = b->cfg.limits;
	device_clamp_limits(&b->dev, &b->limits);
	if (uv_loop_init(&b->loop) != 0) {
		snprintf(why, why_len, "uv_loop_init failed");
		goto fail;
	}
	b->loop_init = true;
	const engine_events ev = {.done = direct_done_cb}; /* no recovery: a loss fails the jobs */
	b->eng = engine_new();
	if (!b->eng) {
		snprintf(why, why_len, "engine: out of memory");
		goto fail;
	}
	if (engine_init(b->eng, &b->loop, &b->dev, &b->pl, &b->cfg, &ev, err, sizeof(err)) != 0) {
		snprintf(why, why_len, "engine: %s", err);
		goto fail;
	}
	b->eng_init = true;
	return b;
fail:
	bench_direct_close(b);
	return NULL;
}

void bench_direct_close(bench_direct *b)
{
	if (!b)
		return;
	if (b->eng_init)
		engine_destroy(b->eng);
	if (b->loop_init) {
		uv_run(&b->loop, UV_RUN_NOWAIT); /* the engine's async handle closes */
		if (uv_loop_close(&b->loop) != 0)
			cli_errf("vkgrad: bench: the direct-mode loop closed with handles open\n");
	}
	engine_free(b->eng);
	if (b->pl_init)
		pipelines_destroy(&b->pl, &b->dev);
	if (b->dev_open) {
		unsigned verr = atomic_load(&b->dev.validation_errors);
		if (verr)
			cli_errf("vkgrad: bench: %u Vulkan validation error(s) in direct mode\n", verr);
		device_close(&b->dev);
	}
	cli_rmtree(b->cache_dir);
	free(b);
}

/* ---- the helper process --------------------------------------------------------- */

/* One run's answer on the result pipe; n latencies (uint64_t ns) follow,
 * then n rows of stages (PROTO_STAGE_COUNT uint64_t each). */
typedef struct direct_report {
	int32_t ok;
	uint32_t mismatched;
	uint64_t n, batch_jobs_sum, wall_ns;
	char device[128];
	char err[512];
} direct_report;

static int direct_worker(const bench_spec *plan, uint32_t n, int cmd_fd, int res_fd)
{
	bench_direct *b = NULL;
	uint32_t line;
	int rc = 0;
	while (bench_read_all(cmd_fd, &line, sizeof(line)) == 0) {
		direct_report rep;
		bench_result r;
		memset(&rep, 0, sizeof(rep));
		memset(&r, 0, sizeof(r));
		if (line >= n) {
			snprintf(rep.err, sizeof(rep.err), "no line %u", line);
		} else if (!b && !(b = bench_direct_open(rep.err, sizeof(rep.err)))) {
			/* rep.err says why */
		} else if (bench_direct_run(b, &plan[line], &r, rep.err, sizeof(rep.err)) == 0) {
			rep.ok = 1;
			rep.mismatched = r.mismatched;
			rep.n = r.n;
			rep.batch_jobs_sum = r.batch_jobs_sum;
			rep.wall_ns = r.wall_ns;
			snprintf(rep.device, sizeof(rep.device), "%s", r.device);
		}
		if (bench_write_all(res_fd, &rep, sizeof(rep)) != 0 ||
		    bench_write_all(res_fd, r.lat_ns, rep.n * sizeof(uint64_t)) != 0 ||
		    bench_write_all(res_fd, r.stage_ns, rep.n * PROTO_STAGE_COUNT * sizeof(uint64_t)) != 0)
			rc = 4;
		bench_result_free(&r);
		if (rc)
			break;
	}
	bench_direct_close(b);
	return rc;
}

int bench_direct_proc_start(bench_direct_proc *p, const bench_spec *plan, uint32_t n, char *why,
			    size_t why_len)
{
	int cmd[2], res[2];
	p->pid = 0;
	p->cmd_fd = p->res_fd = -1;
	if (pipe2(cmd, O_CLOEXEC) != 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		return -1;
	}
	if (pipe2(res, O_CLOEXEC) != 0) {
		snprintf(why, why_len, "pipe: %s", strerror(errno));
		close(cmd[0]);
		close(cmd[1]);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		close(cmd[0]);
		close(cmd[1]);
		close(res[0]);
		close(res[1]);
		return -1;
	}
	if (pid == 0) {
		close(cmd[1]);
		close(res[0]);
		_exit(direct_worker(plan, n, cmd[0], res[1]));
	}
	close(cmd[0]);
	close(res[1]);
	p->pid = pid;
	p->cmd_fd = cmd[1];
	p->res_fd = res[0];
	return 0;
}

int bench_direct_proc_run(bench_direct_proc *p, uint32_t line, bench_result *r, char *why,
			  size_t why_len)
{
	memset(r, 0, sizeof(*r));
	direct_report rep;
	if (bench_write_all(p->cmd_fd, &line, sizeof(line)) != 0 ||
	    bench_read_all(p->res_fd, &rep, sizeof(rep)) != 0) {
		snprintf(why, why_len, "the direct-mode helper process ended unexpectedly");
		return -1;
	}
	rep.err[sizeof(rep.err) - 1] = 0;
	rep.device[sizeof(rep.device) - 1] = 0;
	if (!rep.ok) {
		snprintf(why, why_len, "%s", rep.err);
		return -1;
	}
	r->lat_ns = calloc(rep.n + 1, sizeof(uint64_t));
	r->stage_ns = calloc((rep.n + 1) * PROTO_STAGE_COUNT, sizeof(uint64_t));
	if (!r->lat_ns || !r->stage_ns) {
		snprintf(why, why_len, "out of memory");
		bench_result_free(r);
		return -1;
	}
	if (bench_read_all(p->res_fd, r->lat_ns, rep.n * sizeof(uint64_t)) != 0 ||
	    bench_read_all(p->res_fd, r->stage_ns, rep.n * PROTO_STAGE_COUNT * sizeof(uint64_t)) != 0) {
		snprintf(why, why_len, "the direct-mode helper process sent a short report");
		bench_result_free(r);
		return -1;
	}
	r->n = rep.n;
	r->batch_jobs_sum = rep.batch_jobs_sum;
	r->wall_ns = rep.wall_ns;
	r->mismatched = rep.mismatched;
	snprintf(r->device, sizeof(r->device), "%s", rep.device);
	return 0;
}

int bench_direct_proc_stop(bench_direct_proc *p, char *why, size_t why_len)
{
	if (p->cmd_fd >= 0)
		close(p->cmd_fd); /* EOF: the helper closes the device and exits */
	if (p->res_fd >= 0)
		close(p->res_fd);
	p->cmd_fd = p->res_fd = -1;
	if (p->pid <= 0)
		return 0;
	int st = 0;
	while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR)
		;
	p->pid = 0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(why, why_len, "the direct-mode helper process ended with wait status %d", st);
		return -1;
	}
	return 0;
}
