/* client/cli_prom.c — `vkgrad stats --prometheus`: the counters, gauges and
 * latency histograms of one or more daemons in Prometheus' text exposition
 * format (0.0.4), on stdout or written atomically into a file for
 * node_exporter's textfile collector (systemd/vkgrad-metrics.service).
 *
 * Every sample carries the label socket="<path>", so the daemons of a
 * several-GPU host (vkgradd@.service) share one file; each family's
 * # HELP / # TYPE lines come once, before its samples. Every time is in
 * seconds, every counter ends in _total, the stage times are a summary:
 * `promtool check metrics` accepts the output without a warning
 * (tests/python/test_metrics.py). A daemon that does not answer reports
 * vkgrad_up 0 and nothing else; one left idle (socket_state.c) reports
 * vkgrad_up 0 and vkgrad_idle 1. docs/metrics.md lists every family. */
#include "cli.h"

#include "clients.h"
#include "common/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROM_MAX_TARGETS 64

typedef struct prom_target {
	char socket[256];
	bool up;
	bool idle;     /* a socket-activated daemon not running: left alone */
	char why[300]; /* when down */
	proto_hello info;
	proto_stats st;
} prom_target;

int cli_stats_fetch(vkg_client *c, proto_stats *out, vkg_error *err)
{
	void *body = NULL;
	size_t len = 0;
	int rc = vkg_call_raw(c, "stats", NULL, 0, &body, &len, err);
	if (rc)
		return rc;
	proto_reply *r = malloc(sizeof(*r));
	proto_err perr;
	if (!r) {
		free(body);
		snprintf(err->code, sizeof(err->code), "io");
		snprintf(err->message, sizeof(err->message), "out of memory");
		return -ENOMEM;
	}
	rc = proto_reply_decode(body, len, r, &perr);
	if (rc == 0)
		*out = r->stats;
	else {
		snprintf(err->code, sizeof(err->code), "bad_frame");
		snprintf(err->message, sizeof(err->message), "stats reply: %.200s", perr.message);
	}
	free(r);
	free(body);
	return rc;
}

/* hello as a monitor (the daemon logs this connection at debug level),
 * decoded into *out */
static int hello_monitor(vkg_client *c, proto_hello *out, vkg_error *err)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	static const char *const k[3] = {"version", "client", "monitor"};
	msgpack_pack_map(&pk, 3);
	for (int i = 0; i < 3; i++) {
		msgpack_pack_str(&pk, strlen(k[i]));
		msgpack_pack_str_body(&pk, k[i], strlen(k[i]));
		if (i == 0) {
			msgpack_pack_uint64(&pk, PROTO_VERSION);
		} else if (i == 1) {
			static const char name[] = "vkgrad-cli stats --prometheus";
			msgpack_pack_str(&pk, sizeof(name) - 1);
			msgpack_pack_str_body(&pk, name, sizeof(name) - 1);
		} else {
			msgpack_pack_true(&pk);
		}
	}
	void *body = NULL;
	size_t len = 0;
	int rc = vkg_call_raw(c, "hello", sb.data, sb.size, &body, &len, err);
	msgpack_sbuffer_destroy(&sb);
	if (rc)
		return rc;
	proto_reply *r = malloc(sizeof(*r));
	proto_err perr;
	if (!r) {
		free(body);
		snprintf(err->code, sizeof(err->code), "io");
		snprintf(err->message, sizeof(err->message), "out of memory");
		return -ENOMEM;
	}
	rc = proto_reply_decode(body, len, r, &perr);
	if (rc == 0) {
		*out = r->hello;
	} else {
		snprintf(err->code, sizeof(err->code), "bad_frame");
		snprintf(err->message, sizeof(err->message), "hello reply: %.200s", perr.message);
	}
	free(r);
	free(body);
	return rc;
}

static void scrape(prom_target *t, bool skip_idle)
{
	if (skip_idle && cli_socket_idle(t->socket, t->why, sizeof(t->why)) == 1) {
		t->idle = true;
		return;
	}
	vkg_error err;
	vkg_client *c = vkg_connect(t->socket, &err);
	if (c && hello_monitor(c, &t->info, &err) == 0 && cli_stats_fetch(c, &t->st, &err) == 0)
		t->up = true;
	else
		snprintf(t->why, sizeof(t->why), "%s: %s", err.code, err.message);
	vkg_close(c);
}

/* A label value: backslash, double quote and newline escaped. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f), fputc(*s, f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_start(FILE *f, const char *name, const char *suffix, const prom_target *t)
{
	fprintf(f, "%s%s{socket=\"", name, suffix);
	put_label(f, t->socket);
	fputc('"', f);
}

/* One family: its # HELP / # TYPE lines, then samples() for each daemon
 * that answered (for every daemon where all_targets). */
typedef struct prom_family prom_family;
typedef void (*prom_samples_fn)(FILE *f, const prom_family *m, const prom_target *t);
struct prom_family {
	const char *name, *type, *help;
	prom_samples_fn samples;
	size_t off;       /* stat_samples: the value's offset in proto_stats */
	bool is_double;   /* stat_samples: a double there, else a uint64_t */
	bool all_targets; /* samples() for daemons that did not answer too */
	double scale;     /* stat_samples, uid_samples: to base units (µs -> s) */
};

/* vkgrad_up: 1 or 0, for every daemon. */
static void up_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	sample_start(f, m->name, "", t);
	fprintf(f, "} %d\n", t->up ? 1 : 0);
}

/* vkgrad_idle: 1 for a daemon left idle, else 0, for every daemon. */
static void idle_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	sample_start(f, m->name, "", t);
	fprintf(f, "} %d\n", t->idle ? 1 : 0);
}

/* vkgrad_info: the version and device as labels, value 1. */
static void info_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	const proto_hello *in = &t->info;
	sample_start(f, m->name, "", t);
	const char *k[4] = {"server", "device", "type", "driver"};
	const char *v[4] = {in->server, in->device.name, in->device.type, in->device.driver};
	for (int j = 0; j < 4; j++) {
		fprintf(f, ",%s=\"", k[j]);
		put_label(f, v[j]);
		fputc('"', f);
	}
	fputs("} 1\n", f);
}

/* One value of proto_stats, at m->off, times m->scale. */
static void stat_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	const char *p = (const char *)&t->st + m->off;
	sample_start(f, m->name, "", t);
	if (m->is_double)
		fprintf(f, "} %.9g\n", *(const double *)p * m->scale);
	else if (m->scale != 1.0)
		fprintf(f, "} %.9g\n", (double)*(const uint64_t *)p * m->scale);
	else
		fprintf(f, "} %" PRIu64 "\n", *(const uint64_t *)p);
}

/* vkgrad_start_time_seconds: from the daemon, else (an older one) now
 * less its uptime */
static void start_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	double v = t->st.started_unix_s;
	if (!t->st.has_counters) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		v = (double)ts.tv_sec + ts.tv_nsec / 1e9 - t->st.uptime_s;
	}
	sample_start(f, m->name, "", t);
	fprintf(f, "} %.3f\n", v);
}

/* vkgrad_devlocal_min_bytes: one sample per dtype class. */
static void devlocal_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	sample_start(f, m->name, "", t);
	fprintf(f, ",dtype=\"f32\"} %" PRIu64 "\n", t->st.devlocal_min_bytes);
	sample_start(f, m->name, "", t);
	fprintf(f, ",dtype=\"f16_bf16\"} %" PRIu64 "\n", t->st.devlocal_min_bytes_16bit);
}

/* One sample per error code (ok left out) of the array at m->off; an
 * older daemon, without them, gives the total as code="unknown" (jobs
 * failed) or nothing (rejections). */
static void by_code_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	const uint64_t *v = (const uint64_t *)((const char *)&t->st + m->off);
	if (!t->st.has_counters) {
		if (m->off == offsetof(proto_stats, jobs_failed_by_code)) {
			sample_start(f, m->name, "", t);
			fprintf(f, ",code=\"unknown\"} %" PRIu64 "\n", t->st.jobs_failed);
		}
		return;
	}
	for (int c = 1; c < PROTO_CODE_COUNT; c++) {
		sample_start(f, m->name, "", t);
		fprintf(f, ",code=\"%s\"} %" PRIu64 "\n", proto_code_name((proto_code)c), v[c]);
	}
}

static void refused_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	if (!t->st.has_counters)
		return;
	for (int r = 0; r < PROTO_REFUSED_COUNT; r++) {
		sample_start(f, m->name, "", t);
		fprintf(f, ",reason=\"%s\"} %" PRIu64 "\n", proto_refusal_name((proto_refusal)r),
			t->st.connections_refused[r]);
	}
}

/* Per uid: m->off is the offset of the value in proto_uid_stat, scale
 * turns µs into seconds. */
static void uid_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	for (unsigned i = 0; i < t->st.n_uids; i++) {
		const proto_uid_stat *u = &t->st.uids[i];
		const uint64_t v = *(const uint64_t *)((const char *)u + m->off);
		sample_start(f, m->name, "", t);
		if (u->uid == PROTO_UID_OTHER)
			fputs(",uid=\"other\"", f);
		else
			fprintf(f, ",uid=\"%u\"", u->uid);
		if (m->scale != 1.0)
			fprintf(f, "} %.6f\n", (double)v * m->scale);
		else
			fprintf(f, "} %" PRIu64 "\n", v);
	}
}

/* Device tensors (a daemon that sends them): vkgrad_device_bytes per
 * uid holding any. */
static void dev_uid_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	for (unsigned i = 0; i < t->st.n_dev_uids; i++) {
		const proto_uid_bytes *u = &t->st.dev_uids[i];
		sample_start(f, m->name, "", t);
		if (u->uid == PROTO_UID_OTHER)
			fputs(",uid=\"other\"", f);
		else
			fprintf(f, ",uid=\"%u\"", u->uid);
		fprintf(f, "} %" PRIu64 "\n", u->bytes);
	}
}

/* One value of proto_stats at m->off, only from a daemon with device
 * tensors (has_tensors). */
static void tensor_stat_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	if (t->st.has_tensors)
		stat_samples(f, m, t);
}

/* vkgrad_stage_seconds, a summary: each stage's median and 99th
 * percentile over its last 1024 jobs, and its count and sum since start. */
static void stage_samples(FILE *f, const prom_family *m, const prom_target *t)
{
	for (unsigned k = 0; k < t->st.n_stages; k++) {
		const proto_stage_stat *st = &t->st.stages[k];
		for (int q = 0; q < 2; q++) {
			sample_start(f, m->name, "", t);
			fputs(",stage=\"", f);
			put_label(f, st->name);
			fprintf(f, "\",quantile=\"%s\"} %.9g\n", q ? "0.99" : "0.5",
				(q ? st->p99_us : st->p50_us) / 1e6);
		}
		if (!st->has_total)
			continue;
		sample_start(f, m->name, "_sum", t);
		fputs(",stage=\"", f);
		put_label(f, st->name);
		fprintf(f, "\"} %.9g\n", st->sum_us / 1e6);
		sample_start(f, m->name, "_count", t);
		fputs(",stage=\"", f);
		put_label(f, st->name);
		fprintf(f, "\"} %" PRIu64 "\n", st->total);
	}
}

#define U(n, t, field, h) {n, t, h, stat_samples, offsetof(proto_stats, field), false, false, 1.0}
#define D(n, t, field, h) {n, t, h, stat_samples, offsetof(proto_stats, field), true, false, 1.0}
/* a value in µs, exported in seconds */
#define US(n, t, field, h) {n, t, h, stat_samples, offsetof(proto_stats, field), false, false, 1e-6}
#define UID(n, field, scale, h) {n, "counter", h, uid_samples, offsetof(proto_uid_stat, field), false, false, scale}
/* Every family but the histograms, in the order they are written
 * (docs/metrics.md lists them). */
static const prom_family families[] = {
	{"vkgrad_up", "gauge", "Whether the daemon on this socket answered (1) or not (0).",
	 up_samples, 0, false, true, 1.0},
	{"vkgrad_idle", "gauge",
	 "1 when the daemon's socket unit is listening with the daemon not started: not scraped, "
	 "so as not to start it.",
	 idle_samples, 0, false, true, 1.0},
	{"vkgrad_info", "gauge", "The daemon's version and device (value 1).", info_samples, 0,
	 false, false, 1.0},
	{"vkgrad_start_time_seconds", "gauge",
	 "When the daemon started, seconds since the epoch (its restarts: changes() of this).",
	 start_samples, 0, false, false, 1.0},
	D("vkgrad_uptime_seconds", "gauge", uptime_s, "Seconds since the daemon started."),
	U("vkgrad_clients", "gauge", clients, "Connections open now."),
	U("vkgrad_regions", "gauge", regions, "Shared-memory regions registered now, all clients."),
	U("vkgrad_region_bytes", "gauge", region_bytes, "Bytes of the regions registered now."),
	{"vkgrad_tensors", "gauge", "Device tensors live now, all clients.", tensor_stat_samples,
	 offsetof(proto_stats, tensors), false, false, 1.0},
	{"vkgrad_device_tensor_bytes", "gauge", "Device memory the live device tensors hold, all clients.",
	 tensor_stat_samples, offsetof(proto_stats, device_bytes), false, false, 1.0},
	{"vkgrad_device_bytes", "gauge", "Device memory the live device tensors of a uid hold.",
	 dev_uid_samples, 0, false, false, 1.0},
	{"vkgrad_host_read_bytes_total", "counter",
	 "Client memory jobs and tensor ops read (host to device traffic).", tensor_stat_samples,
	 offsetof(proto_stats, host_read_bytes), false, false, 1.0},
	{"vkgrad_host_write_bytes_total", "counter",
	 "Client memory jobs and tensor ops wrote (device to host traffic).", tensor_stat_samples,
	 offsetof(proto_stats, host_write_bytes), false, false, 1.0},
	U("vkgrad_host_import_regions", "gauge", host_imports,
	  "Regions registered now that the GPU uses in place (host-memory import)."),
	U("vkgrad_staged_regions", "gauge", staged_regions,
	  "Regions registered now that are mirrored through staging copies."),
	U("vkgrad_jobs_queued", "gauge", jobs_queued, "Jobs waiting for a submission slot now."),
	U("vkgrad_jobs_running", "gauge", jobs_running, "Jobs on the GPU now."),
	U("vkgrad_pipelines", "gauge", pipelines, "Compute pipelines built."),
	U("vkgrad_scratch_bytes", "gauge", scratch_bytes,
	  "Device memory held for device-local copies and split-K partial sums."),
	U("vkgrad_jobs_done_total", "counter", jobs_done, "Accepted jobs that finished."),
	{"vkgrad_jobs_failed_total", "counter",
	 "Accepted jobs that failed afterwards, by error code (device_lost, internal, ...).",
	 by_code_samples, offsetof(proto_stats, jobs_failed_by_code), false, false, 1.0},
	{"vkgrad_requests_rejected_total", "counter",
	 "Requests answered with an error at once, by error code (bad_request, limit, ...).",
	 by_code_samples, offsetof(proto_stats, requests_rejected_by_code), false, false, 1.0},
	{"vkgrad_connections_refused_total", "counter",
	 "Connections refused, by reason (allow_list, max_connections, max_connections_per_uid).",
	 refused_samples, 0, false, false, 1.0},
	U("vkgrad_device_losses_total", "counter", device_losses,
	  "Times the GPU was lost (VK_ERROR_DEVICE_LOST)."),
	U("vkgrad_device_recoveries_total", "counter", device_recoveries,
	  "Times the daemon recreated the device after a loss."),
	U("vkgrad_device_recovery_failures_total", "counter", device_recovery_failures,
	  "Attempts to recreate the device that failed (two in a row: the daemon exits)."),
	UID("vkgrad_uid_jobs_done_total", jobs_done, 1.0, "Accepted jobs that finished, per client uid."),
	UID("vkgrad_uid_jobs_failed_total", jobs_failed, 1.0,
	    "Accepted jobs that failed afterwards, per client uid."),
	UID("vkgrad_uid_gpu_seconds_total", gpu_us, 1e-6,
	    "GPU time charged to a uid's jobs: their own dispatches, else their share of the batch."),
	U("vkgrad_batches_total", "counter", batches,
	  "GPU submissions (command buffers); jobs per batch = rate(jobs_done) / rate(batches)."),
	U("vkgrad_dispatches_total", "counter", dispatches, "Kernel dispatches recorded."),
	U("vkgrad_pipeline_cache_hits_total", "counter", pipeline_cache_hits,
	  "Pipelines built from the pipeline cache."),
	U("vkgrad_devlocal_jobs_total", "counter", devlocal_jobs,
	  "Jobs run on device-local copies of their tensors."),
	U("vkgrad_devlocal_copy_bytes_total", "counter", devlocal_copy_bytes,
	  "Bytes copied to and from device memory for those jobs."),
	U("vkgrad_splitk_jobs_total", "counter", splitk_jobs, "Jobs whose dW ran split-K."),
	U("vkgrad_stream_jobs_total", "counter", stream_jobs,
	  "Device-local jobs streamed: copies overlapped with kernels, in chunks."),
	U("vkgrad_stream_chunks_total", "counter", stream_chunks, "Chunks those jobs were cut into."),
	U("vkgrad_stream_shared_jobs_total", "counter", stream_shared_jobs,
	  "Of them, jobs under the streaming threshold streamed beside other connections' small jobs."),
	U("vkgrad_stream_dw_blocks_total", "counter", stream_dw_blocks,
	  "Steps those jobs' dW ran in (row blocks, each downloaded while the next computes)."),
	U("vkgrad_scratch_failures_total", "counter", scratch_failures,
	  "Batches run without scratch because allocating it failed."),
	U("vkgrad_validation_errors_total", "counter", validation_errors,
	  "Khronos validation layer errors (0 unless VKGRAD_VALIDATION=1)."),
	US("vkgrad_spin_budget_seconds", "gauge", spin_budget_us,
	   "How long past a submission the loop polls the GPU now (adapted to the device)."),
	US("vkgrad_poll_seconds_total", "counter", spin_us,
	   "Time the loop spent polling rather than sleeping."),
	U("vkgrad_batches_seen_polling_total", "counter", spin_hits,
	  "Batches the polling loop found done."),
	U("vkgrad_batches_seen_blocking_total", "counter", blocking_waits,
	  "Batches the completion thread's blocking wait reported."),
	U("vkgrad_batches_expected_total", "counter", spin_expected,
	  "Single-job batches of a kind seen before, given an expected end (the loop polls near it)."),
	U("vkgrad_sched_small_jobs_total", "counter", sched_small_jobs,
	  "Jobs run in the small class (estimated GPU time at most --small-job-us)."),
	U("vkgrad_sched_large_jobs_total", "counter", sched_large_jobs,
	  "Jobs run in the large class."),
	U("vkgrad_sched_slices_total", "counter", sched_slices,
	  "Submissions the large class made: its batches, and each slice of a sliced large job."),
	{"vkgrad_devlocal_min_bytes", "gauge",
	 "Tensor bytes from which a job runs on device-local copies (0: never), per dtype.",
	 devlocal_samples, 0, false, false, 1.0},
	{"vkgrad_stage_seconds", "summary",
	 "A stage of a job's round trip: median and 99th percentile of the last 1024 jobs, count "
	 "and sum since start.",
	 stage_samples, 0, false, false, 1.0},
};
#undef U
#undef D
#undef US
#undef UID

/* daemon histogram name -> help; others get a generic one */
static const char *hist_help(const char *name)
{
	if (!strcmp(name, "job_latency"))
		return "Time of a finished job in the daemon, from its request's arrival to its reply.";
	if (!strcmp(name, "job_queued"))
		return "Time of a finished job from its request's arrival to its GPU submission.";
	if (!strcmp(name, "batch_gpu"))
		return "GPU time of each submitted batch (timestamp queries).";
	return "Latency histogram reported by the daemon.";
}

static const proto_histogram *find_hist(const prom_target *t, const char *name)
{
	for (unsigned i = 0; t->up && i < t->st.n_hist; i++)
		if (!strcmp(t->st.hist[i].name, name))
			return &t->st.hist[i];
	return NULL;
}

static void emit_hist(FILE *f, const prom_target *ts, unsigned n, const char *hname)
{
	char name[64];
	snprintf(name, sizeof(name), "vkgrad_%s_seconds", hname);
	family(f, name, "histogram", hist_help(hname));
	for (unsigned i = 0; i < n; i++) {
		const proto_histogram *h = find_hist(&ts[i], hname);
		if (!h)
			continue;
		uint64_t cum = 0;
		for (unsigned b = 0; b <= h->n_le; b++) {
			cum += h->counts[b];
			sample_start(f, name, "_bucket", &ts[i]);
			if (b < h->n_le)
				fprintf(f, ",le=\"%.9g\"} %" PRIu64 "\n", (double)h->le_us[b] / 1e6, cum);
			else
				fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
		}
		sample_start(f, name, "_sum", &ts[i]);
		fprintf(f, "} %.9g\n", (double)h->sum_us / 1e6);
		sample_start(f, name, "_count", &ts[i]);
		fprintf(f, "} %" PRIu64 "\n", cum);
	}
}

static void emit(FILE *f, const prom_target *ts, unsigned n)
{
	for (size_t m = 0; m < sizeof(families) / sizeof(families[0]); m++) {
		const prom_family *fam = &families[m];
		family(f, fam->name, fam->type, fam->help);
		for (unsigned i = 0; i < n; i++)
			if (ts[i].up || fam->all_targets)
				fam->samples(f, fam, &ts[i]);
	}
	/* each histogram name once, in the order the daemons report them */
	for (unsigned i = 0; i < n; i++)
		for (unsigned h = 0; ts[i].up && h < ts[i].st.n_hist; h++) {
			const char *hn = ts[i].st.hist[h].name;
			bool seen = false;
			for (unsigned j = 0; j < i && !seen; j++)
				seen = find_hist(&ts[j], hn) != NULL;
			if (!seen)
				emit_hist(f, ts, n, hn);
		}
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const prom_target *)a)->socket, ((const prom_target *)b)->socket);
}

/* Every socket named *.sock in dir, sorted. */
static int scan_dir(const char *dir, prom_target *ts, unsigned *n)
{
	DIR *d = opendir(dir);
	if (!d) {
		cli_errf("vkgrad: stats: --scan %s: %s\n", dir, strerror(errno));
		return -1;
	}
	unsigned first = *n;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		size_t l = strlen(e->d_name);
		if (l < 6 || strcmp(e->d_name + l - 5, ".sock") != 0)
			continue;
		char p[sizeof(ts[0].socket)];
		struct stat st;
		if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p) ||
		    stat(p, &st) != 0 || !S_ISSOCK(st.st_mode))
			continue;
		if (*n == PROM_MAX_TARGETS) {
			cli_errf("vkgrad: stats: more than %d daemons; the rest left out\n",
				 PROM_MAX_TARGETS);
			break;
		}
		snprintf(ts[(*n)++].socket, sizeof(ts[0].socket), "%s", p);
	}
	closedir(d);
	qsort(ts + first, *n - first, sizeof(*ts), by_name);
	return 0;
}

int cli_stats_prometheus(const cli_ctx *ctx, const char *output, const char *scan,
			 char **sockets, int nsockets, bool start_idle)
{
	prom_target *ts = calloc(PROM_MAX_TARGETS, sizeof(*ts));
	if (!ts) {
		cli_errf("vkgrad: stats: out of memory\n");
		return CLI_EXIT_DAEMON;
	}
	unsigned n = 0;
	int rc = CLI_EXIT_OK;
	for (int i = 0; i < nsockets && n < PROM_MAX_TARGETS; i++)
		snprintf(ts[n++].socket, sizeof(ts[0].socket), "%s", sockets[i]);
	if (scan && scan_dir(scan, ts, &n) != 0) {
		free(ts);
		return CLI_EXIT_USAGE;
	}
	if (!nsockets && !scan)
		snprintf(ts[n++].socket, sizeof(ts[0].socket), "%s", cli_socket_path(ctx));
	/* A daemon down is a fact to report (vkgrad_up 0), not a failure of
	 * the scrape: the exit status is 0 once the exposition is written,
	 * except on stdout when no daemon answered at all. */
	unsigned answered = 0;
	for (unsigned i = 0; i < n; i++) {
		scrape(&ts[i], !start_idle);
		if (ts[i].idle)
			cli_errf("vkgrad: stats: %s: %s; left idle (vkgrad_idle 1)\n", ts[i].socket,
				 ts[i].why);
		else if (!ts[i].up)
			cli_errf("vkgrad: stats: %s: %s (vkgrad_up 0)\n", ts[i].socket, ts[i].why);
		answered += ts[i].up || ts[i].idle;
	}
	if (!output && n > 0 && answered == 0)
		rc = CLI_EXIT_DAEMON;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		cli_errf("vkgrad: stats: out of memory\n");
		free(ts);
		return CLI_EXIT_DAEMON;
	}
	if (n == 0)
		fprintf(f, "# vkgrad: no daemon socket (*.sock) in %s\n", scan);
	else
		emit(f, ts, n);
	fclose(f);
	if (output) {
		/* atomically, so a reader (node_exporter) never sees half a
		 * file; readable by all: node_exporter runs as another user */
		char err[2 * PATH_MAX + 64];
		if (atomic_file_write(output, buf, len, 0644, err, sizeof(err)) != 0) {
			cli_errf("vkgrad: stats: %s\n", err);
			rc = CLI_EXIT_DAEMON;
		}
	} else {
		fwrite(buf, 1, len, stdout);
		fflush(stdout);
	}
	free(buf);
	free(ts);
	return rc;
}
