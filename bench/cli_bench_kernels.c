/* bench/cli_bench_kernels.c — `vkgrad bench --kernels`: what the kernels
 * themselves achieve, per shape, storage dtype and kernel variant.
 *
 * Each (shape, dtype, variant) runs the full backward (dW, db, dX), or the
 * outputs asked for, with --inflight jobs in flight (default one):
 * unmeasured warm-up jobs (at least one; 0.3 s, --warmup-ms, the first line
 * of a shape and dtype at least --settle-ms: bk_warm_up), then `reps`
 * measured ones (--prune X: a line whose first job took more than X times
 * the fastest line of its shape and dtype so far ends with that job as its
 * one rep). The GPU time is the reply's kernel_us (the job's own
 * dispatches, timestamps around them) where the daemon measured it, else
 * its batch's gpu_us over the batch's jobs. TFLOP/s and GB/s follow from that time; the
 * client's round trip is reported beside it. The outputs of each line are
 * checked against a float64 reference: the whole tensors for small shapes,
 * sampled entries (plus all of db) for large ones, where the full reference
 * would take the CPU minutes.
 *
 * Large shapes need large regions: without --socket the private daemon is
 * started with max_region_bytes and the total raised to fit the largest job
 * of the plan. A shape the daemon cannot take (max_tensor_bytes is the
 * device's largest storage-buffer binding, not a setting) is reported as
 * skipped, and so is one above --max-gflop, which defaults to a small cap on
 * a CPU device (lavapipe) so the default run stays short there.
 * The command line (options, shape sets, usage): bench_kernels_opts.c;
 * device tensors for --resident: bench_resident.c. */
#include "cli.h"
#include "cli_bench.h"
#include "bench_kernels_opts.h"
#include "bench_resident.h"
#include "peak_copy.h"
#include "ref.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Above this many FLOPs (4·B·I·O) the check is sampled: the full float64
 * reference costs about as many operations again on one CPU core. */
#define BK_SAMPLED_FLOP 2e9
#define BK_SAMPLES 512 /* entries of dW and of dX each; all of db */
/* Default --max-gflop on a CPU device. lavapipe on a small machine runs these
 * kernels at 0.2-2 GFLOP/s, so 4096×1024×16 (0.27 GFLOP) already takes
 * seconds per job and 2048×1024×1024 (8.6 GFLOP) tens of seconds. */
#define BK_CPU_MAX_GFLOP 1.0
/* Default reps stop early once a line's measured jobs took this long, but
 * never below BK_MIN_REPS. (Judged as they run, not from the warm-up job,
 * whose time can include one-off work such as a driver compiling a shader
 * on first use.) */
#define BK_REP_BUDGET_US 3000000.0
#define BK_MIN_REPS 3
/* One line's outcome, kept for the table at the end. */
typedef enum { BK_MEASURED, BK_SKIPPED, BK_REFUSED } bk_kind;

typedef struct bk_line {
	uint64_t shape[3];
	proto_dtype dtype;
	proto_variant variant;
	bk_kind kind;
	uint64_t reps;
	double gpu_us, batch_gpu_us, e2e_us, tflops, gbps, err;
	double batch_jobs; /* median jobs per batch */
	double copy_frac; /* gbps / copy_gbps, NaN when unknown */
	double warmed_ms; /* the warm-up's wall time, its first job included */
	bool measured, ok, sampled;
	bool pruned; /* --prune: its first job was its only rep */
	char note[320];
} bk_line;

typedef struct bk_run {
	const bk_opts *o;
	vkg_client *c;
	vkg_info info;
	char device[300]; /* JSON-escaped */
	double max_flop;  /* 0: no cap */
	double copy_gbps; /* the device's copy bandwidth, 0 when unknown */
	bk_line *lines;
	size_t nlines, cap;
	bool check_failed, daemon_failed;
	bool settle; /* the next line is its shape and dtype's first (--settle-ms) */
	double best_us; /* the fastest measured line of this shape and dtype (--prune); 0: none */
} bk_run;

/* ---- helpers --------------------------------------------------------------------- */

/* FLOPs of the outputs asked for: dW and dX 2·B·I·O each, db B·O. */
static double flop_of(const uint64_t s[3], unsigned outputs)
{
	const double bio = (double)s[0] * (double)s[1] * (double)s[2];
	return ((outputs & CLI_OUT_DW) ? 2 * bio : 0) + ((outputs & CLI_OUT_DX) ? 2 * bio : 0) +
	       ((outputs & CLI_OUT_DB) ? (double)s[0] * (double)s[2] : 0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v): the middle one, or the mean of the two. */
static double median_u64(uint64_t *v, uint64_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

/* Named values of each rep, by name (the reps' stream timelines,
 * vkg_stream_last, or their traces' stages, vkg_trace_last): the names of
 * the first rep that had any, each rep's values where its names match. */
#define BK_NAMED_MAX 16
typedef struct bk_named {
	unsigned n;
	char name[BK_NAMED_MAX][32];
	uint64_t *v;    /* [field * cap + rep] */
	uint64_t cap, reps;
	double scale;   /* printed value = median / scale */
} bk_named;

static void bk_named_note(bk_named *s, unsigned n, const char (*name)[32], const uint64_t *val)
{
	if (!s->v || n == 0 || s->reps >= s->cap)
		return;
	n = n < BK_NAMED_MAX ? n : BK_NAMED_MAX;
	if (s->reps == 0) {
		s->n = n;
		memcpy(s->name, name, n * sizeof(name[0]));
	}
	if (n != s->n)
		return;
	for (unsigned i = 0; i < n; i++)
		if (strcmp(name[i], s->name[i]) != 0)
			return;
	for (unsigned i = 0; i < n; i++)
		s->v[i * s->cap + s->reps] = val[i];
	s->reps++;
}

/* This thread's last job's timeline and trace into tl and st. */
static void bk_named_last(bk_named *tl, bk_named *st)
{
	char name[BK_NAMED_MAX][32];
	uint64_t val[BK_NAMED_MAX];
	unsigned n = 0;
	vkg_stream_timeline t;
	if (vkg_stream_last(&t) == 0) {
		for (n = 0; n < t.n && n < BK_NAMED_MAX; n++) {
			snprintf(name[n], sizeof(name[n]), "%s", t.f[n].name);
			val[n] = t.f[n].us;
		}
		bk_named_note(tl, n, (const char (*)[32])name, val);
	}
	vkg_trace tr;
	if (vkg_trace_last(&tr) == 0 && tr.complete) {
		for (n = 0; n < tr.n_stages && n < BK_NAMED_MAX; n++) {
			snprintf(name[n], sizeof(name[n]), "%s", tr.stages[n].name);
			val[n] = tr.stages[n].ns;
		}
		bk_named_note(st, n, (const char (*)[32])name, val);
	}
}

/* ,"KEY":{name: median / scale, ...} when every rep had values, else "". */
static void bk_named_json(bk_named *s, const char *key, uint64_t reps, char *out, size_t len)
{
	out[0] = 0;
	if (!s->v || s->reps == 0 || s->reps != reps)
		return;
	size_t at = (size_t)snprintf(out, len, ",\"%s\":{", key);
	for (unsigned i = 0; i < s->n && at < len; i++)
		at += (size_t)snprintf(out + at, len - at, "%s\"%s\":%.1f", i ? "," : "", s->name[i],
				       median_u64(s->v + (uint64_t)i * s->cap, s->reps) / s->scale);
	if (at < len)
		snprintf(out + at, len - at, "}");
}

static uint64_t default_reps(double flop)
{
	return flop <= 1e8 ? 50 : flop <= 1e9 ? 20 : flop <= 1e10 ? 10 : flop <= 1e11 ? 5 : 3;
}

/* A number for JSON: null when not finite (JSON has no NaN or infinity). */
static const char *json_num(char *buf, size_t cap, const char *fmt, double v)
{
	if (!isfinite(v))
		snprintf(buf, cap, "null");
	else
		snprintf(buf, cap, fmt, v);
	return buf;
}

static bk_line *line_add(bk_run *r, const uint64_t shape[3])
{
	if (r->nlines == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		bk_line *n = realloc(r->lines, cap * sizeof(*n));
		if (!n)
			return NULL;
		r->lines = n;
		r->cap = cap;
	}
	bk_line *l = &r->lines[r->nlines++];
	memset(l, 0, sizeof(*l));
	memcpy(l->shape, shape, sizeof(l->shape));
	return l;
}

/* The common head of every line: {"bench":"kernels","shape":[B,I,O] */
static int line_head(char *buf, size_t cap, const uint64_t s[3])
{
	return snprintf(buf, cap, "{\"bench\":\"kernels\",\"shape\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]",
			s[0], s[1], s[2]);
}

/* A (shape, dtype, variant) the daemon refused or failed. */
static void print_error(bk_run *r, const uint64_t s[3], const char *dtype, const char *variant,
			const vkg_error *err)
{
	char buf[2048], msg[600], outs[16];
	cli_outputs_name(r->o->outputs, outs);
	int n = line_head(buf, sizeof(buf), s);
	cli_json_escape(msg, sizeof(msg), err->message);
	snprintf(buf + n, sizeof(buf) - (size_t)n,
		 ",\"dtype\":\"%s\",\"variant\":\"%s\",\"outputs\":\"%s\","
		 "\"error\":{\"code\":\"%s\",\"message\":\"%s\"},\"device\":\"%s\"}\n",
		 dtype, variant, outs, err->code, msg, r->device);
	cli_out("%s", buf);
}

/* A skipped shape (dtype NULL: every dtype) or (shape, dtype). */
static void print_skipped(bk_run *r, const uint64_t s[3], const char *dtype, const char *why)
{
	char buf[768], w[400];
	int n = line_head(buf, sizeof(buf), s);
	if (dtype)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, ",\"dtype\":\"%s\"", dtype);
	cli_json_escape(w, sizeof(w), why);
	snprintf(buf + n, sizeof(buf) - (size_t)n, ",\"skipped\":\"%s\",\"device\":\"%s\"}\n", w,
		 r->device);
	cli_out("%s", buf);
	bk_line *l = line_add(r, s);
	if (l) {
		l->kind = BK_SKIPPED;
		l->dtype = dtype ? (proto_dtype)bk_dtype_lookup(dtype) : PROTO_DTYPE_COUNT;
		snprintf(l->note, sizeof(l->note), "%s", why);
	}
}

/* ---- one line ----------------------------------------------------------------------- */

/* A job of line l failed after the first one ran (`when`: "warm-up", "rep N"):
 * the daemon's failure. Prints the error line for a reply (returns 0, the
 * bench goes on) or reports a broken connection (returns -1). */
static int late_failure(bk_run *r, bk_line *l, int rc, const vkg_error *err, const char *when)
{
	r->daemon_failed = true;
	if (rc != VKG_EREMOTE) {
		cli_fail(err);
		return -1;
	}
	print_error(r, l->shape, proto_dtype_name(l->dtype), proto_variant_name(l->variant), err);
	l->kind = BK_REFUSED;
	snprintf(l->note, sizeof(l->note), "%.23s: %.250s (%s)", err->code, err->message, when);
	return 0;
}

/* More warm-up after the line's first job (sent at t0), up to
 * BK_WARMUP_US (at most BK_WARMUP_MAX jobs) or --warmup-ms, the line's
 * shape and dtype's first at least --settle-ms, --inflight jobs in flight:
 * after a run of small jobs the GPU is not at full clock yet, and one job
 * was seen to be not enough (8192x4096x4096 on the H200 measured 2.5x
 * slower right after the small shapes than after other large jobs).
 * Sets l->warmed_ms. Returns 0; 1 when a job failed and the line ended
 * with its error (late_failure); -1 when the connection failed. */
static int bk_warm_up(bk_run *r, bk_line *l, const vkg_job *job, uint64_t t0)
{
	const bk_opts *o = r->o;
	const unsigned k = o->inflight ? o->inflight : 1;
	uint64_t hs[BK_INFLIGHT_MAX];
	vkg_error err;
	vkg_result res;
	const double settle_us = r->settle ? o->settle_ms * 1e3 : 0;
	double want_us = o->warmup_ms >= 0 ? o->warmup_ms * 1e3 : BK_WARMUP_US;
	const uint64_t most = o->warmup_ms >= 0 || settle_us > want_us ? UINT64_MAX : BK_WARMUP_MAX;
	if (settle_us > want_us)
		want_us = settle_us;
	uint64_t sent = 1, done = 1; /* the first job, sent by the caller */
	for (;;) {
		while (sent - done < k && sent < most && (double)(now_ns() - t0) / 1e3 < want_us) {
			const int rc = vkg_submit(r->c, job, &hs[sent % k], &err);
			if (rc != 0)
				return late_failure(r, l, rc, &err, "warm-up") < 0 ? -1 : 1;
			sent++;
		}
		if (done == sent)
			break;
		const int rc = vkg_wait(r->c, hs[done % k], -1, &res, &err);
		if (rc != 0)
			return late_failure(r, l, rc, &err, "warm-up") < 0 ? -1 : 1;
		done++;
	}
	l->warmed_ms = (double)(now_ns() - t0) / 1e6;
	return 0;
}

/* A line's per-rep numbers are one block of 5 · reps (bk_measure_on): GPU
 * (the batch's), kernel, end-to-end µs, the batch's GPU ns over its jobs
 * (share) and the batch's jobs. Rep i from res, e2e_us its round trip;
 * *all_kernel stays true while every rep carried kernel_us. */
static void note_rep(uint64_t *per_rep, uint64_t reps, uint64_t i, const vkg_result *res, uint64_t e2e_us,
		     bool *all_kernel)
{
	const uint64_t jobs = res->batch_jobs ? res->batch_jobs : 1;
	per_rep[i] = res->gpu_us;
	per_rep[reps + i] = res->kernel_us;
	per_rep[2 * reps + i] = e2e_us;
	per_rep[3 * reps + i] = res->gpu_us * 1000 / jobs;
	per_rep[4 * reps + i] = jobs;
	*all_kernel &= res->kernel_us != 0;
}

/* One job's GPU time as a line reports it: its kernel_us where the reply
 * has it, else its batch's gpu_us over the batch's jobs. */
static double job_us(const vkg_result *res)
{
	return res->kernel_us ? (double)res->kernel_us
			      : (double)res->gpu_us / (res->batch_jobs ? res->batch_jobs : 1);
}

/* Run (shape, dtype, variant) on the task's region, or on br's device
 * tensors (--resident), and print its line. Returns 0, or -1 when the
 * connection failed (nothing more can run). */
static int bk_measure_on(bk_run *r, cli_task *t, proto_variant v, const bench_resident *br)
{
	const bk_opts *o = r->o;
	const uint64_t shape[3] = {t->batch, t->in, t->out};
	const char *dname = proto_dtype_name(t->dtype), *vname = proto_variant_name(v);
	const double flop = flop_of(shape, o->outputs);
	char outs[16];
	cli_outputs_name(o->outputs, outs);
	bk_line *l = line_add(r, shape);
	if (!l) {
		cli_errf("vkgrad: bench: out of memory\n");
		return -1;
	}
	l->dtype = t->dtype;
	l->variant = v;
	t->variant = v == PROTO_VARIANT_AUTO ? NULL : vname;
	const vkg_job job = br ? bench_resident_job(br, t) : cli_task_job(t);
	vkg_error err;
	vkg_result res;

	/* outputs NaN first: an element the kernels leave alone fails the check */
	cli_task_poison_outputs(t);
	uint64_t t0 = now_ns();
	int rc = vkg_linear_backward(r->c, &job, &res, &err);
	const double warm_us = (double)(now_ns() - t0) / 1e3;
	if (rc != 0 && rc != VKG_EREMOTE) {
		r->daemon_failed = true;
		cli_fail(&err);
		return -1;
	}
	if (rc == VKG_EREMOTE) {
		/* refused: unsupported dtype/variant (or a limit) is the device's
		 * answer, not a failure of the bench; anything else is */
		const bool refusal = strcmp(err.code, "unsupported") == 0 ||
				     strcmp(err.code, "limit") == 0 ||
				     strcmp(err.code, "bad_request") == 0;
		if (!refusal)
			r->daemon_failed = true;
		print_error(r, shape, dname, vname, &err);
		l->kind = BK_REFUSED;
		snprintf(l->note, sizeof(l->note), "%.23s: %.250s", err.code, err.message);
		return 0;
	}

	/* --prune: a first job slower than X times the fastest line of this
	 * shape and dtype so far is the line's one rep (it cannot be the
	 * fastest); its outputs are checked as any */
	l->pruned = o->prune > 0 && r->best_us > 0 && job_us(&res) > o->prune * r->best_us;
	if (!l->pruned) {
		rc = bk_warm_up(r, l, &job, t0);
		if (rc != 0) /* (1: the line ended with its error; the bench goes on) */
			return rc < 0 ? -1 : 0;
	} else {
		l->warmed_ms = warm_us / 1e3;
	}
	const unsigned k = o->inflight ? o->inflight : 1;
	uint64_t hs[BK_INFLIGHT_MAX], ts[BK_INFLIGHT_MAX];

	uint64_t reps = l->pruned ? 1 : o->reps ? o->reps : default_reps(flop);
	if (!o->json)
		cli_errf("bench: %" PRIu64 "x%" PRIu64 "x%" PRIu64 " %s %s: %s%" PRIu64
			 " reps (warm-up %.0f us)...\n",
			 shape[0], shape[1], shape[2], dname, vname, o->reps ? "" : "up to ", reps,
			 warm_us);
	/* each rep's numbers, one block; share: the batch's GPU ns over its
	 * jobs (when there is no kernel_us) */
	uint64_t *per_rep = calloc(5 * reps, sizeof(uint64_t));
	if (!per_rep) {
		cli_errf("vkgrad: bench: out of memory\n");
		return -1;
	}
	uint64_t *gpu = per_rep, *kern = per_rep + reps, *e2e = per_rep + 2 * reps, *share = per_rep + 3 * reps,
		 *bjobs = per_rep + 4 * reps;
	bool all_kernel = true;
	double spent_us = 0;
	bk_named tl = {.cap = reps, .scale = 1, .v = calloc(reps * BK_NAMED_MAX, sizeof(uint64_t))};
	bk_named stg = {.cap = reps, .scale = 1000, .v = calloc(reps * BK_NAMED_MAX, sizeof(uint64_t))};
	/* up to k jobs in flight; enough measured once they took
	 * BK_REP_BUDGET_US (then the ones sent are waited for and counted) */
	uint64_t sent = 0, done = 0;
	bool stop = false;
	if (l->pruned) { /* the first job's numbers */
		note_rep(per_rep, reps, 0, &res, (uint64_t)(warm_us + 0.5), &all_kernel);
		bk_named_last(&tl, &stg);
		sent = done = 1;
	}
	while (done < sent || (!stop && sent < reps)) {
		while (!stop && sent < reps && sent - done < k) {
			ts[sent % k] = now_ns();
			rc = vkg_submit(r->c, &job, &hs[sent % k], &err);
			if (rc != 0)
				break;
			sent++;
		}
		if (rc == 0)
			rc = vkg_wait(r->c, hs[done % k], -1, &res, &err);
		const uint64_t t1 = now_ns();
		if (rc != 0) {
			free(per_rep), free(tl.v), free(stg.v);
			char when[32];
			snprintf(when, sizeof(when), "rep %" PRIu64, done + 1);
			return late_failure(r, l, rc, &err, when);
		}
		note_rep(per_rep, reps, done, &res, (t1 - ts[done % k] + 500) / 1000, &all_kernel);
		spent_us += (double)e2e[done];
		bk_named_last(&tl, &stg);
		done++;
		if (!o->reps && done >= BK_MIN_REPS && spent_us > BK_REP_BUDGET_US)
			stop = true; /* enough time measured */
	}
	reps = done;
	char tl_json[2048];
	bk_named_json(&tl, "stream_us", reps, tl_json, 1024);
	bk_named_json(&stg, "stages_us", reps, tl_json + strlen(tl_json), sizeof(tl_json) - strlen(tl_json));
	free(tl.v), free(stg.v);
	l->kind = BK_MEASURED;
	l->reps = reps;
	l->measured = all_kernel;
	l->batch_gpu_us = median_u64(gpu, reps);
	l->gpu_us = all_kernel ? median_u64(kern, reps) : median_u64(share, reps) / 1000.0;
	l->batch_jobs = median_u64(bjobs, reps);
	l->e2e_us = median_u64(e2e, reps);
	free(per_rep);
	if (!l->pruned && l->gpu_us > 0 && (r->best_us == 0 || l->gpu_us < r->best_us))
		r->best_us = l->gpu_us;

	const double es = proto_dtype_size(t->dtype);
	const double bi = (double)shape[0] * (double)shape[1], bo = (double)shape[0] * (double)shape[2],
		     io = (double)shape[2] * (double)shape[1];
	const unsigned ou = o->outputs;
	const double bytes = es * (((ou & CLI_OUT_DW) ? bi + io : 0) + /* X, dW */
				   ((ou & CLI_OUT_DX) ? io + bi : 0) + /* W, dX */
				   bo +                                 /* dY */
				   ((ou & CLI_OUT_DB) ? (double)shape[2] : 0));
	const double us = l->gpu_us > 0 ? l->gpu_us : NAN;
	l->tflops = flop / us / 1e6;
	l->gbps = bytes / us / 1e3;
	l->copy_frac = r->copy_gbps > 0 ? l->gbps / r->copy_gbps : NAN;
	if (br && (rc = bench_resident_read(br, r->c, t, &err)) != 0)
		return late_failure(r, l, rc, &err, "reading the outputs");
	l->err = cli_task_check(t);
	l->sampled = t->sample[CLI_DW] != NULL;
	const double tol = vkg_ref_tolerance(t->dtype);
	l->ok = l->err <= tol; /* NaN fails */
	if (!l->ok)
		r->check_failed = true;

	char buf[3072], nb[6][40], how[96];
	snprintf(how, sizeof(how), "%s%s\"inflight\":%u,\"batch_jobs\":%.1f,", br ? "\"resident\":true," : "",
		 l->pruned ? "\"pruned\":true," : "", k, l->batch_jobs);
	int n = line_head(buf, sizeof(buf), shape);
	snprintf(buf + n, sizeof(buf) - (size_t)n,
		 ",\"dtype\":\"%s\",\"variant\":\"%s\",\"outputs\":\"%s\",\"reps\":%" PRIu64
		 ",\"gpu_us\":%.1f,\"kernel_us_measured\":%s,\"batch_gpu_us\":%.1f,"
		 "\"tflops\":%s,\"gbps\":%s,\"end_to_end_us\":%.1f,\"warmup_us\":%.0f,\"warmed_ms\":%.1f,"
		 "\"copy_gbps\":%s,\"copy_fraction\":%s,"
		 "\"max_rel_err\":%s,\"tol\":%s,\"check\":\"%s\",\"ok\":%s,%s\"device\":\"%s\"%s}\n",
		 dname, vname, outs, reps, l->gpu_us, all_kernel ? "true" : "false", l->batch_gpu_us,
		 json_num(nb[0], sizeof(nb[0]), "%.4g", l->tflops),
		 json_num(nb[1], sizeof(nb[1]), "%.4g", l->gbps), l->e2e_us, warm_us, l->warmed_ms,
		 json_num(nb[3], sizeof(nb[3]), "%.1f", r->copy_gbps > 0 ? r->copy_gbps : NAN),
		 json_num(nb[4], sizeof(nb[4]), "%.3f", l->copy_frac),
		 json_num(nb[2], sizeof(nb[2]), "%.3g", l->err), vkg_ref_tolerance_text(t->dtype),
		 l->sampled ? "sampled" : "full", l->ok ? "true" : "false", how, r->device, tl_json);
	cli_out("%s", buf);
	return 0;
}

static int bk_measure(bk_run *r, cli_task *t, proto_variant v)
{
	if (!r->o->resident)
		return bk_measure_on(r, t, v, NULL);
	/* the poisoned outputs go to the tensors too (bk_measure_on) */
	cli_task_poison_outputs(t);
	bench_resident br;
	vkg_error err;
	const int rc = bench_resident_open(&br, r->c, t, &err);
	if (rc == VKG_EREMOTE) { /* a limit (max_device_bytes, ...): this line only */
		const uint64_t shape[3] = {t->batch, t->in, t->out};
		print_error(r, shape, proto_dtype_name(t->dtype), proto_variant_name(v), &err);
		bk_line *l = line_add(r, shape);
		if (l) {
			l->dtype = t->dtype;
			l->variant = v;
			l->kind = BK_REFUSED;
			snprintf(l->note, sizeof(l->note), "%.23s: %.250s (device tensors)", err.code,
				 err.message);
		}
		return 0;
	}
	if (rc != 0) {
		r->daemon_failed = true;
		cli_fail(&err);
		return -1;
	}
	const int m = bk_measure_on(r, t, v, &br);
	bench_resident_close(&br, r->c);
	return m;
}

/* Why the daemon cannot take (shape, dtype) as hello describes it, or NULL. */
static const char *limit_problem(const bk_run *r, const cli_task *t, char *why, size_t len)
{
	static const char *const nm[CLI_NT] = {"x", "dy", "w", "dw", "db", "dx"};
	const uint64_t dims[3] = {t->batch, t->in, t->out};
	for (int k = 1; k < 3; k++) /* (batch: the byte limits alone) */
		if (r->info.max_dim && dims[k] > r->info.max_dim) {
			snprintf(why, len, "%s %" PRIu64 " > max_dim %" PRIu64,
				 k == 1 ? "in" : "out", dims[k], r->info.max_dim);
			return why;
		}
	for (int s = 0; s < CLI_NT; s++)
		if (t->present[s] && cli_task_bytes(t, s) > r->info.max_tensor_bytes) {
			snprintf(why, len,
				 "tensor %s needs %" PRIu64 " bytes > max_tensor_bytes %" PRIu64
				 " (the device's largest storage-buffer binding)",
				 nm[s], cli_task_bytes(t, s), r->info.max_tensor_bytes);
			return why;
		}
	if (t->size > r->info.max_region_bytes) {
		snprintf(why, len, "region of %zu bytes > max_region_bytes %" PRIu64, t->size,
			 r->info.max_region_bytes);
		return why;
	}
	return NULL;
}

/* Every variant of one (shape, dtype) on one region. -1: connection lost. */
static int bk_shape_dtype(bk_run *r, const uint64_t s[3], proto_dtype d)
{
	const char *dname = proto_dtype_name(d);
	cli_task t;
	char why[512];
	if (cli_task_init(&t, s[0], s[1], s[2], r->o->outputs, false, d, why, sizeof(why)) != 0) {
		print_skipped(r, s, dname, why);
		return 0;
	}
	if (limit_problem(r, &t, why, sizeof(why))) {
		print_skipped(r, s, dname, why);
		return 0;
	}
	vkg_error err;
	if (cli_task_map(&t, r->c, &err) != 0) {
		/* the daemon's limits were checked: a refusal here is a real one
		 * (total bytes, memory), so report it and go on */
		snprintf(why, sizeof(why), "region of %zu bytes: %s: %s", t.size, err.code,
			 err.message);
		print_skipped(r, s, dname, why);
		if (strcmp(err.code, "limit") != 0)
			r->daemon_failed = true;
		return strcmp(err.code, "io") == 0 ? -1 : 0;
	}
	const double flop = flop_of(s, r->o->outputs);
	if (!r->o->json)
		cli_errf("bench: %" PRIu64 "x%" PRIu64 "x%" PRIu64 " %s: filling %zu bytes, %s "
			 "reference...\n",
			 s[0], s[1], s[2], dname, t.size, flop > BK_SAMPLED_FLOP ? "sampled" : "full");
	cli_task_fill_inputs(&t, 1);
	/* the reference before any job, so it never competes with the device
	 * for the CPU (lavapipe computes on it) */
	int rc = flop > BK_SAMPLED_FLOP ? cli_task_reference_sampled(&t, BK_SAMPLES, 0x5eed)
					: cli_task_reference(&t);
	if (rc != 0) {
		cli_errf("vkgrad: bench: out of memory for the reference of %" PRIu64 "x%" PRIu64
			 "x%" PRIu64 " %s\n",
			 s[0], s[1], s[2], dname);
		r->daemon_failed = true; /* not the daemon's fault, but a failed run */
		cli_task_free(&t, r->c);
		return 0;
	}
	rc = 0;
	r->best_us = 0;
	for (unsigned k = 0; k < r->o->nvariants && rc == 0; k++) {
		r->settle = k == 0;
		rc = bk_measure(r, &t, r->o->variants[k]);
	}
	r->settle = false;
	cli_task_free(&t, r->c);
	return rc;
}

/* ---- the private daemon ------------------------------------------------------------ */

/* Start it with max_region_bytes and the total raised to fit the plan's
 * largest job (a region of X, dY, W, dW, db, dX), at least the defaults. */
static const char *bk_daemon_up(const bk_opts *o, cli_daemon *priv)
{
	uint64_t need = 0;
	for (unsigned i = 0; i < o->nshapes; i++) {
		cli_task t;
		char why[160];
		if (cli_task_init(&t, o->shapes[i][0], o->shapes[i][1], o->shapes[i][2], CLI_OUT_ALL,
				  false, PROTO_F32, why, sizeof(why)) == 0 &&
		    t.size > need)
			need = t.size; /* f32 is the largest dtype */
	}
	uint64_t region = 4ull << 30, total = 64ull << 30;
	if (need > region)
		region = need;
	if (need * 2 > total)
		total = need * 2;
	static char region_s[32], total_s[32];
	snprintf(region_s, sizeof(region_s), "%" PRIu64, region);
	snprintf(total_s, sizeof(total_s), "%" PRIu64, total);
	/* one user: all of the total (the per-uid default would be half) */
	const char *const args[] = {"--max-region-bytes", region_s, "--max-total-region-bytes",
				    total_s, "--max-region-bytes-per-uid", total_s, NULL};
	char bin[4096], why[512];
	if (o->daemon)
		snprintf(bin, sizeof(bin), "%s", o->daemon);
	else if (cli_daemon_default_binary(bin, sizeof(bin)) != 0) {
		cli_errf("vkgrad: bench: cannot find vkgradd next to this program; "
			 "pass --daemon PATH or --socket PATH\n");
		return NULL;
	}
	if (!o->json)
		cli_errf("bench: starting a private daemon (%s --max-region-bytes %s "
			 "--max-total-region-bytes %s --max-region-bytes-per-uid %s)...\n",
			 bin, region_s, total_s, total_s);
	if (cli_daemon_start(priv, bin, args, 120000, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: %s\n", why);
		return NULL;
	}
	return priv->sock;
}

/* ---- output: the table --------------------------------------------------------------- */

static void print_table(const bk_run *r)
{
	printf("\n%-18s %-5s %-8s %5s %11s %4s %9s %9s %7s %12s %9s  %s\n", "shape", "dtype",
	       "variant", "reps", "gpu_us", "kern", "TFLOP/s", "GB/s", "of_copy", "end2end_us", "max_err",
	       "check");
	for (size_t i = 0; i < r->nlines; i++) {
		const bk_line *l = &r->lines[i];
		char shape[48];
		snprintf(shape, sizeof(shape), "%" PRIu64 "x%" PRIu64 "x%" PRIu64, l->shape[0],
			 l->shape[1], l->shape[2]);
		const char *dn = l->dtype < PROTO_DTYPE_COUNT ? proto_dtype_name(l->dtype) : "*";
		if (l->kind == BK_SKIPPED) {
			printf("%-18s %-5s %-8s skipped: %s\n", shape, dn, "*", l->note);
		} else if (l->kind == BK_REFUSED) {
			printf("%-18s %-5s %-8s error: %s\n", shape, dn, proto_variant_name(l->variant),
			       l->note);
		} else {
			char frac[16] = "-";
			if (isfinite(l->copy_frac))
				snprintf(frac, sizeof(frac), "%.3f", l->copy_frac);
			printf("%-18s %-5s %-8s %5" PRIu64 " %11.1f %4s %9.4g %9.4g %7s %12.1f %9.2g  %s%s%s\n",
			       shape, dn, proto_variant_name(l->variant), l->reps, l->gpu_us,
			       l->measured ? "yes" : "no", l->tflops, l->gbps, frac, l->e2e_us, l->err,
			       l->sampled ? "sampled " : "full ", l->ok ? "ok" : "MISMATCH",
			       l->pruned ? " (pruned: one job)" : "");
		}
	}
	printf("device: %s (%s)", r->info.device_name, r->info.device_type);
	if (r->copy_gbps > 0)
		printf("; copy_gbps %.1f (of_copy: GB/s / copy_gbps)", r->copy_gbps);
	printf("\n");
	printf("gpu_us: kernel_us (the job's own dispatches) where kern=yes, else the batch's "
	       "gpu_us\n");
	fflush(stdout);
}

/* ---- auto against the others ------------------------------------------------------------ */

/* For each shape and dtype where auto and another variant were measured:
 * auto's gpu_us over the fastest other's, a JSON line each (and a table). */
static void print_auto_summary(const bk_run *r)
{
	bool head = false;
	double worst = 0;
	for (size_t i = 0; i < r->nlines; i++) {
		const bk_line *a = &r->lines[i];
		if (a->kind != BK_MEASURED || a->variant != PROTO_VARIANT_AUTO || !(a->gpu_us > 0))
			continue;
		const bk_line *best = NULL;
		for (size_t k = 0; k < r->nlines; k++) {
			const bk_line *b = &r->lines[k];
			if (b->kind == BK_MEASURED && b->variant != PROTO_VARIANT_AUTO && b->dtype == a->dtype &&
			    !memcmp(b->shape, a->shape, sizeof(a->shape)) && b->gpu_us > 0 &&
			    (!best || b->gpu_us < best->gpu_us))
				best = b;
		}
		if (!best)
			continue;
		const double ratio = a->gpu_us / best->gpu_us;
		worst = ratio > worst ? ratio : worst;
		if (r->o->json) {
			cli_out("{\"bench\":\"kernels_auto\",\"shape\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64
				"],\"dtype\":\"%s\",\"auto_us\":%.1f,\"best\":\"%s\",\"best_us\":%.1f,"
				"\"auto_over_best\":%.3f,\"device\":\"%s\"}\n",
				a->shape[0], a->shape[1], a->shape[2], proto_dtype_name(a->dtype), a->gpu_us,
				proto_variant_name(best->variant), best->gpu_us, ratio, r->device);
			continue;
		}
		if (!head) {
			printf("\nauto against the fastest other variant (gpu_us):\n%-18s %-5s %11s %-12s %11s %8s\n",
			       "shape", "dtype", "auto", "best", "best_us", "auto/best");
			head = true;
		}
		char shape[48];
		snprintf(shape, sizeof(shape), "%" PRIu64 "x%" PRIu64 "x%" PRIu64, a->shape[0], a->shape[1],
			 a->shape[2]);
		printf("%-18s %-5s %11.1f %-12s %11.1f %8.2f\n", shape, proto_dtype_name(a->dtype), a->gpu_us,
		       proto_variant_name(best->variant), best->gpu_us, ratio);
	}
	if (head)
		printf("worst auto/best: %.2f\n", worst);
}

/* The device's copy bandwidth for the lines' copy_fraction: --copy-gbps,
 * or measured here (peak_copy.h) on the default device; 0 when neither. */
static double bk_copy_gbps(const bk_opts *o)
{
	if (o->copy_set)
		return o->copy_gbps;
	peak_vk *v = calloc(1, sizeof(*v));
	char err[512] = "";
	peak_copy_result c = {0};
	double g = 0;
	if (!v) {
		snprintf(err, sizeof(err), "out of memory");
	} else if (peak_vk_open(v, 16u << 20, err, sizeof(err)) == 0) {
		if (peak_copy_measure(v, 0, 5, &c, err, sizeof(err)) == 0 && c.ok)
			g = c.gbps;
		else if (!c.ok && !err[0])
			snprintf(err, sizeof(err), "the copy read back wrong");
		peak_vk_close(v);
	}
	if (g <= 0)
		cli_errf("bench --kernels: copy_gbps not measured (%s); no copy_fraction\n", err);
	else if (!o->json)
		cli_errf("bench: copy_gbps %.1f (2 x %" PRIu64 " bytes copied device to device, median of %u; "
			 "the larger of vkCmdCopyBuffer %.1f and a shader copy %.1f)\n",
			 g, c.bytes, c.reps, c.way[PEAK_COPY_DMA].gbps, c.way[PEAK_COPY_SHADER].gbps);
	free(v);
	return g;
}

/* ---- the command ----------------------------------------------------------------------- */

int cli_bench_kernels(const cli_ctx *ctx, int argc, char **argv)
{
	bk_opts o;
	int rc = bk_opts_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (!o.socket)
		o.socket = ctx->socket;

	bk_run r = {.o = &o};
	cli_daemon priv = {0};
	const char *sock = o.socket;
	char why[512];
	if (!sock && !(sock = bk_daemon_up(&o, &priv)))
		return CLI_EXIT_DAEMON;
	vkg_error err;
	rc = CLI_EXIT_OK;
	if (!(r.c = vkg_connect(sock, &err)) ||
	    vkg_hello(r.c, "vkgrad bench --kernels", &r.info, &err) != 0) {
		rc = cli_fail(&err);
		goto out;
	}
	cli_json_escape(r.device, sizeof(r.device), r.info.device_name);
	/* the dtypes the device serves, unless asked for others */
	if (!o.ndtypes) {
		for (int d = 0; d < PROTO_DTYPE_COUNT; d++) {
			bool served = false;
			vkg_kernel_info ki; /* every one: vkg_info.kernels holds 32 */
			for (unsigned k = 0; k < r.info.n_kernels; k++)
				served |= vkg_info_kernel(r.c, k, &ki) == 0 &&
					  strcmp(ki.dtype, proto_dtype_name((proto_dtype)d)) == 0;
			if (served)
				o.dtypes[o.ndtypes++] = (proto_dtype)d;
		}
	}
	r.copy_gbps = bk_copy_gbps(&o);
	const bool cpu = strcmp(r.info.device_type, "cpu") == 0;
	const double max_gflop = o.max_gflop_set ? o.max_gflop : cpu ? BK_CPU_MAX_GFLOP : 0;
	r.max_flop = max_gflop * 1e9;
	if (!o.json)
		cli_errf("bench: kernels on %s (%s); %u shape%s, cap %s\n", r.info.device_name,
			 r.info.device_type, o.nshapes, o.nshapes == 1 ? "" : "s",
			 r.max_flop > 0 ? "--max-gflop applies" : "none");

	for (unsigned i = 0; i < o.nshapes && rc == CLI_EXIT_OK; i++) {
		const uint64_t *s = o.shapes[i];
		if (r.max_flop > 0 && flop_of(s, o.outputs) > r.max_flop) {
			snprintf(why, sizeof(why), "%.3g GFLOP > --max-gflop %g%s",
				 flop_of(s, o.outputs) / 1e9, max_gflop,
				 o.max_gflop_set ? "" : " (the default on a CPU device)");
			print_skipped(&r, s, NULL, why);
			continue;
		}
		for (unsigned k = 0; k < o.ndtypes; k++)
			if (bk_shape_dtype(&r, s, o.dtypes[k]) != 0) {
				rc = CLI_EXIT_DAEMON;
				break;
			}
	}
	if (!o.json && r.nlines)
		print_table(&r);
	print_auto_summary(&r);
out:
	vkg_close(r.c);
	if (priv.pid && cli_daemon_stop(&priv, 60000, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: %s\n", why);
		rc = CLI_EXIT_DAEMON;
	}
	free(r.lines);
	if (rc == CLI_EXIT_OK && r.daemon_failed)
		rc = CLI_EXIT_DAEMON;
	if (rc == CLI_EXIT_OK && r.check_failed)
		rc = CLI_EXIT_CHECK;
	return rc;
}
