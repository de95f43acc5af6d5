/* client/cli_demo.c — `vkgrad demo`: several client processes share the
 * daemon at once. Each connects on its own, keeps a few jobs in flight with
 * the asynchronous API and checks every result against the CPU reference. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Narrow layers (few outputs, like a classifier head) and square ones,
 * including sizes that are no multiple of any workgroup size. Kept moderate
 * so the demo stays quick on a CPU Vulkan driver (lavapipe). */
static const struct {
	uint64_t batch, in, out;
} demo_shapes[] = {
	{4096, 1024, 16}, {256, 256, 256}, {32, 64, 8},	  {512, 512, 512},
	{256, 256, 16},	  {33, 257, 31},   {1024, 128, 64}, {1, 1, 1},
};
#define DEMO_NSHAPES (sizeof(demo_shapes) / sizeof(demo_shapes[0]))

static const unsigned demo_outputs[] = {
	CLI_OUT_ALL, CLI_OUT_DW | CLI_OUT_DB, CLI_OUT_DX, CLI_OUT_DW, CLI_OUT_DB | CLI_OUT_DX,
};
#define DEMO_NOUTPUTS (sizeof(demo_outputs) / sizeof(demo_outputs[0]))

/* What a child tells the parent through the pipe (one write, < PIPE_BUF). */
typedef struct demo_report {
	uint32_t client, jobs, ok, mismatched, errors, max_batch;
} demo_report;

typedef struct demo_job {
	cli_task t;
	uint64_t handle;
	bool live;
} demo_job;

/* "512×512×512" padded to width display columns (× is two bytes, one column). */
static void shape_text(char *buf, size_t cap, const cli_task *t, int width)
{
	int n = snprintf(buf, cap, "%" PRIu64 "×%" PRIu64 "×%" PRIu64, t->batch, t->in, t->out);
	int cols = n - 2;
	while (cols < width && (size_t)n + 1 < cap) {
		buf[n++] = ' ';
		buf[n] = 0;
		cols++;
	}
}

/* Prepare job j (region, inputs, base), submit it, then compute its reference
 * while the daemon works. Returns 0, or a CLI exit status. */
static int demo_start(vkg_client *c, unsigned client, uint64_t j, demo_job *dj)
{
	const unsigned k = (unsigned)((client * 7 + j * 3) % DEMO_NSHAPES);
	const unsigned outputs = demo_outputs[(client + j) % DEMO_NOUTPUTS];
	const bool accumulate = (client + j) % 3 == 1;
	char why[160];
	vkg_error err;
	if (cli_task_init(&dj->t, demo_shapes[k].batch, demo_shapes[k].in, demo_shapes[k].out,
			  outputs, accumulate, PROTO_F32, why, sizeof(why)) != 0) {
		cli_errf("client %u job %" PRIu64 ": %s\n", client, j + 1, why);
		return CLI_EXIT_USAGE;
	}
	if (cli_task_map(&dj->t, c, &err) != 0)
		return cli_fail(&err);
	const uint64_t seed = (uint64_t)client * 1000 + j + 1;
	cli_task_fill_inputs(&dj->t, seed);
	cli_task_fill_outputs(&dj->t, seed + 500);
	if (cli_task_snapshot(&dj->t) != 0) {
		cli_errf("vkgrad: io: out of memory\n");
		return CLI_EXIT_DAEMON;
	}
	vkg_job job = cli_task_job(&dj->t);
	if (vkg_submit(c, &job, &dj->handle, &err) != 0)
		return cli_fail(&err);
	dj->live = true;
	if (cli_task_reference(&dj->t) != 0) {
		cli_errf("vkgrad: io: out of memory\n");
		return CLI_EXIT_DAEMON;
	}
	return 0;
}

static void demo_child(const cli_ctx *ctx, unsigned client, uint64_t jobs, uint64_t inflight,
		       demo_report *rep)
{
	vkg_error err;
	rep->client = client;
	rep->jobs = (uint32_t)jobs;
	vkg_client *c = vkg_connect(ctx->socket, &err);
	if (!c) {
		cli_errf("client %u: ", client);
		cli_fail(&err);
		rep->errors = (uint32_t)jobs;
		return;
	}
	/* optional, but it names this client in the daemon's log */
	char name[32];
	snprintf(name, sizeof(name), "vkgrad demo client %u", client);
	static vkg_info info; /* per process: each child has its own copy */
	if (vkg_hello(c, name, &info, &err) != 0) {
		cli_errf("client %u: vkgrad: %s: %s\n", client, err.code, err.message);
		rep->errors = (uint32_t)jobs;
		goto out_close;
	}
	demo_job *dj = calloc(jobs, sizeof(*dj));
	if (!dj) {
		cli_errf("client %u: out of memory\n", client);
		rep->errors = (uint32_t)jobs;
		goto out_close;
	}
	uint64_t next = 0, done = 0, live = 0;
	while (done < jobs) {
		while (next < jobs && live < inflight) {
			if (demo_start(c, client, next, &dj[next]) != 0) {
				rep->errors++;
				cli_task_free(&dj[next].t, c);
				done++;
			} else {
				live++;
			}
			next++;
		}
		if (live == 0)
			continue;
		uint64_t h;
		vkg_result res = {0};
		int rc = vkg_poll_any(c, &h, &res, &err);
		if (rc == -EAGAIN) {
			/* nothing finished and nothing buffered: sleep on the socket */
			struct pollfd p = {.fd = vkg_fd(c), .events = POLLIN};
			poll(&p, 1, -1);
			continue;
		}
		demo_job *d = NULL;
		for (uint64_t j = 0; j < next; j++)
			if (dj[j].live && dj[j].handle == h)
				d = &dj[j];
		if (rc != 0 && rc != VKG_EREMOTE) {
			/* the connection is gone: every job still in flight is lost */
			cli_errf("client %u: vkgrad: %s: %s\n", client, err.code, err.message);
			rep->errors += (uint32_t)(jobs - done);
			break;
		}
		if (!d) {
			cli_errf("client %u: reply for unknown handle %" PRIu64 "\n", client, h);
			rep->errors++;
			continue;
		}
		const uint64_t j = (uint64_t)(d - dj);
		char shape[48], outs[16];
		shape_text(shape, sizeof(shape), &d->t, 14);
		cli_outputs_name(d->t.outputs, outs);
		char what[48];
		snprintf(what, sizeof(what), "%s%s", outs, d->t.accumulate ? " (accumulate)" : "");
		if (rc == VKG_EREMOTE) {
			cli_out("client %u job %" PRIu64 "  B×I×O=%s  outputs=%-22s  FAILED: %s: %s\n",
				client, j + 1, shape, what, err.code, err.message);
			rep->errors++;
		} else {
			double e = cli_task_check(&d->t);
			bool ok = e <= CLI_TOL;
			cli_out("client %u job %" PRIu64 "  B×I×O=%s  outputs=%-22s  max_rel_err=%.1e "
				"(tol %s) %s  queued=%" PRIu64 "us gpu=%" PRIu64 "us batch=%" PRIu64 "\n",
				client, j + 1, shape, what, e, CLI_TOL_TEXT, ok ? "ok" : "MISMATCH",
				res.queued_us, res.gpu_us, res.batch_jobs);
			if (ok)
				rep->ok++;
			else
				rep->mismatched++;
			if (res.batch_jobs > rep->max_batch)
				rep->max_batch = (uint32_t)res.batch_jobs;
		}
		d->live = false;
		cli_task_free(&d->t, c);
		live--;
		done++;
	}
	for (uint64_t j = 0; j < jobs; j++)
		cli_task_free(&dj[j].t, c);
	free(dj);
out_close:
	vkg_close(c);
}

int cli_demo(const cli_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"clients", required_argument, NULL, 'c'},
		{"jobs", required_argument, NULL, 'j'},
		{"inflight", required_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	uint64_t clients = 4, jobs = 4, inflight = 2;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "+c:j:k:h", opts, NULL)) != -1;) {
		int bad = 0;
		switch (o) {
		case 'c': bad = cli_parse_u64("--clients", optarg, 1, 64, &clients); break;
		case 'j': bad = cli_parse_u64("--jobs", optarg, 1, 1000, &jobs); break;
		case 'k': bad = cli_parse_u64("--inflight", optarg, 1, 64, &inflight); break;
		case 'h':
			printf("usage: vkgrad [--socket PATH] demo [--clients N] [--jobs M] "
			       "[--inflight K]\n");
			return CLI_EXIT_OK;
		default:
			return cli_usage_fail("demo: bad option or missing value: '%s'",
					      argv[optind - 1]);
		}
		if (bad)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_fail("demo: unexpected argument '%s'", argv[optind]);

	printf("demo: %" PRIu64 " client processes, %" PRIu64 " jobs each, up to %" PRIu64
	       " in flight per client\n",
	       clients, jobs, inflight);
	printf("  Each client is its own process with its own connection and its own shared\n"
	       "  memory (a sealed memfd registered with the daemon). It fills the inputs with\n"
	       "  pseudo-random numbers, submits linear_backward jobs without waiting, and\n"
	       "  checks each result against a float64 CPU reference: max_rel_err =\n"
	       "  max|got-want| / max|want| must stay <= %s (f32). \"(accumulate)\" jobs add\n"
	       "  to what the outputs held. queued = time in the daemon's queue, gpu = GPU\n"
	       "  time of the batch, batch = jobs (from any client) in that GPU submission.\n\n",
	       CLI_TOL_TEXT);
	fflush(stdout); /* or the children would inherit and repeat it */

	int pfd[2];
	if (pipe(pfd) != 0) {
		cli_errf("vkgrad: io: pipe: %s\n", strerror(errno));
		return CLI_EXIT_DAEMON;
	}
	const uint64_t t0 = cli_now_us();
	pid_t *pids = calloc(clients, sizeof(*pids));
	if (!pids) {
		cli_errf("vkgrad: io: out of memory\n");
		close(pfd[0]);
		close(pfd[1]);
		return CLI_EXIT_DAEMON;
	}
	uint64_t started = 0;
	for (unsigned i = 0; i < clients; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			cli_errf("vkgrad: io: fork: %s\n", strerror(errno));
			break;
		}
		if (pid == 0) {
			close(pfd[0]);
			demo_report rep = {0};
			demo_child(ctx, i + 1, jobs, inflight, &rep);
			ssize_t w = write(pfd[1], &rep, sizeof(rep));
			_exit(w == (ssize_t)sizeof(rep) ? 0 : 4);
		}
		pids[started++] = pid;
	}
	close(pfd[1]);

	demo_report tot = {0};
	bool *reported = calloc(clients + 1, sizeof(bool));
	demo_report rep;
	ssize_t n;
	while ((n = read(pfd[0], &rep, sizeof(rep))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rep))
			break;
		tot.ok += rep.ok;
		tot.mismatched += rep.mismatched;
		tot.errors += rep.errors;
		if (rep.max_batch > tot.max_batch)
			tot.max_batch = rep.max_batch;
		if (reported && rep.client <= clients)
			reported[rep.client] = true;
	}
	close(pfd[0]);
	for (uint64_t i = 0; i < started; i++) {
		int st;
		while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR)
			;
	}
	/* a child that crashed never reported: its jobs count as errors */
	for (unsigned i = 1; i <= clients; i++) {
		if (reported && !reported[i]) {
			cli_errf("demo: client %u did not finish\n", i);
			tot.errors += (uint32_t)jobs;
		}
	}
	free(reported);
	free(pids);

	const double secs = (double)(cli_now_us() - t0) / 1e6;
	const uint64_t all = clients * jobs;
	cli_out("\ndemo: %" PRIu64 " jobs from %" PRIu64 " clients in %.1f s: %u matched the "
		"reference, %u mismatched, %u failed\n",
		all, clients, secs, tot.ok, tot.mismatched, tot.errors);
	if (tot.max_batch > 1)
		cli_out("demo: the daemon ran up to %u jobs in one GPU submission\n", tot.max_batch);
	if (tot.errors)
		return CLI_EXIT_DAEMON;
	return tot.mismatched ? CLI_EXIT_CHECK : CLI_EXIT_OK;
}
