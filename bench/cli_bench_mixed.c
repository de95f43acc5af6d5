/* bench/cli_bench_mixed.c — `vkgrad bench --scenario mixed`: what one heavy
 * tenant does to many small ones sharing the daemon, and what they do to it.
 *
 * Three phases of S seconds, each client a forked process with its own
 * connection and its own registered regions (separate processes are what
 * real tenants are):
 *   tiny_alone   N synchronous tiny clients: 32×64×8 f32, dW, db and dX,
 *                one job at a time, each timed from submit to reply;
 *   heavy_alone  one heavy client: B×I×O of one dtype, dW, db and dX, K jobs
 *                in flight, each on a region of its own (so no job of the
 *                client waits on another's outputs);
 *   beside       both at once.
 * Every process warms up, says ready, waits on a start barrier (a pipe the
 * parent closes), then submits for S seconds from its release. A tiny job
 * submitted before the end counts however late it ends (a slow one is the
 * point of the measure); tiny jobs/s is their count over the time from the
 * barrier to the last one's reply. The heavy client counts the jobs that
 * ended within the S seconds, over the time from the barrier to the last
 * of them; those still in flight at the end are waited for, not counted.
 * Each client checks its last result against the float64 reference (the
 * heavy one sampled when large). */
#include "cli_bench_mixed.h"

#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MX_TINY_B 32
#define MX_TINY_I 64
#define MX_TINY_O 8
/* each in-flight heavy job has its own region: at most max_regions (64) */
#define MX_MAX_INFLIGHT 64
#define MX_MAX_SECONDS 3600.0
/* Default --heavy-max-gflop on a CPU device: lavapipe on a small machine
 * runs these kernels at 0.2-2 GFLOP/s, so a heavy job stays well under a
 * second and a phase of a few seconds sees several. */
#define MX_CPU_MAX_GFLOP 0.02

static const char mx_usage[] =
	"usage: vkgrad [--socket PATH] bench --scenario mixed [--tiny-clients N]\n"
	"                [--heavy-shape BxIxO] [--heavy-dtype f32|f16|bf16]\n"
	"                [--heavy-inflight K] [--seconds S] [--heavy-max-gflop X]\n"
	"                [--json] [--socket PATH] [--daemon PATH]\n"
	"Sharing: N synchronous tiny clients (32x64x8 f32, dW, db, dX) alone, then\n"
	"one heavy client (BxIxO, full backward, K jobs in flight, each on its own\n"
	"registered region) alone, then both at once; S seconds each, every client\n"
	"a process with its own connection. One JSON line per phase (tiny_alone,\n"
	"heavy_alone, beside) with tiny p50/p99 round trip (µs), tiny jobs/s and\n"
	"heavy jobs/s, and a summary line with the ratios beside / alone; then a\n"
	"table (not with --json).\n"
	"  --tiny-clients N   tiny client processes (1..256, default 8)\n"
	"  --heavy-shape BxIxO  the heavy job (default 8192x4096x4096)\n"
	"  --heavy-dtype D    its storage dtype (default bf16)\n"
	"  --heavy-inflight K its jobs in flight (1..64, default 4)\n"
	"  --seconds S        length of each phase (0 < S <= 3600, default 5)\n"
	"  --heavy-max-gflop X  halve B, I and O of the heavy shape until its full\n"
	"                     backward (4·B·I·O FLOPs) is at most X·1e9; default\n"
	"                     none on a GPU, 0.02 on a CPU device (lavapipe); 0: none\n"
	"  --json             only the JSON lines (no progress, no table)\n"
	"  --socket PATH      use a running daemon; otherwise a private one is started\n"
	"                     (--daemon PATH, default: the vkgradd next to this\n"
	"                     program) with region limits raised for the heavy client\n"
	"Tiny jobs submitted before a phase's end count, however late they end; the\n"
	"heavy client counts the jobs that ended within the phase. Every client\n"
	"checks its last result against a float64 reference.\n"
	"exit status: 1 when a check failed, 2 on bad usage, 3 when the daemon\n"
	"failed a job or the connection broke.\n";

typedef struct mx_opts {
	const char *socket, *daemon;
	uint64_t tiny_clients, inflight;
	uint64_t heavy[3];
	proto_dtype dtype;
	double seconds, max_gflop;
	bool max_gflop_set, json;
} mx_opts;

/* One client process: `k` jobs of one shape in flight, each on its own region. */

/* ---- options --------------------------------------------------------------------- */

static int parse_shape(const char *s, uint64_t out[3])
{
	const char *q = s;
	for (int k = 0; k < 3; k++) {
		char *end;
		if (*q < '0' || *q > '9')
			return -1;
		errno = 0;
		unsigned long long v = strtoull(q, &end, 10);
		if (errno || v == 0 || v > UINT32_MAX)
			return -1;
		if (k < 2 ? (*end != 'x' && *end != ',') : *end != 0)
			return -1;
		out[k] = v;
		q = end + 1;
	}
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !isfinite(*out) ? -1 : 0;
}

static int mx_parse(int argc, char **argv, mx_opts *o)
{
	enum { MO_SCEN = 256, MO_TINY, MO_SHAPE, MO_DTYPE, MO_INFL, MO_SECS, MO_MAXGF, MO_JSON,
	       MO_SOCKET, MO_DAEMON, MO_HELP };
	static const struct option opts[] = {
		{"scenario", required_argument, NULL, MO_SCEN},
		{"tiny-clients", required_argument, NULL, MO_TINY},
		{"heavy-shape", required_argument, NULL, MO_SHAPE},
		{"heavy-dtype", required_argument, NULL, MO_DTYPE},
		{"heavy-inflight", required_argument, NULL, MO_INFL},
		{"seconds", required_argument, NULL, MO_SECS},
		{"heavy-max-gflop", required_argument, NULL, MO_MAXGF},
		{"json", no_argument, NULL, MO_JSON},
		{"socket", required_argument, NULL, MO_SOCKET},
		{"daemon", required_argument, NULL, MO_DAEMON},
		{"help", no_argument, NULL, MO_HELP},
		{0},
	};
	memset(o, 0, sizeof(*o));
	o->tiny_clients = 8;
	o->inflight = 4;
	o->heavy[0] = 8192, o->heavy[1] = 4096, o->heavy[2] = 4096;
	o->dtype = PROTO_BF16;
	o->seconds = 5;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
		int bad = 0;
		switch (c) {
		case MO_SCEN:
			if (strcmp(optarg, "mixed") != 0)
				return cli_usage_fail("bench: --scenario mixed runs alone; drop "
						      "--scenario %s",
						      optarg);
			break;
		case MO_TINY:
			bad = cli_parse_u64("--tiny-clients", optarg, 1, MX_MAX_TINY, &o->tiny_clients);
			break;
		case MO_SHAPE:
			if (parse_shape(optarg, o->heavy) != 0)
				return cli_usage_fail("bench --scenario mixed: --heavy-shape takes BxIxO "
						      "with each in [1, 2^32) (got '%s')",
						      optarg);
			break;
		case MO_DTYPE: {
			int d = -1;
			for (int i = 0; i < PROTO_DTYPE_COUNT && d < 0; i++)
				if (strcmp(optarg, proto_dtype_name((proto_dtype)i)) == 0)
					d = i;
			if (d < 0)
				return cli_usage_fail("bench --scenario mixed: --heavy-dtype takes f32, "
						      "f16 or bf16 (got '%s')",
						      optarg);
			o->dtype = (proto_dtype)d;
			break;
		}
		case MO_INFL:
			bad = cli_parse_u64("--heavy-inflight", optarg, 1, MX_MAX_INFLIGHT, &o->inflight);
			break;
		case MO_SECS:
			if (parse_double(optarg, &o->seconds) != 0 || !(o->seconds > 0) ||
			    o->seconds > MX_MAX_SECONDS)
				return cli_usage_fail("bench --scenario mixed: --seconds takes a number "
						      "in (0, 3600] (got '%s')",
						      optarg);
			break;
		case MO_MAXGF:
			if (parse_double(optarg, &o->max_gflop) != 0 || !(o->max_gflop >= 0))
				return cli_usage_fail("bench --scenario mixed: --heavy-max-gflop takes a "
						      "number >= 0 (got '%s')",
						      optarg);
			o->max_gflop_set = true;
			break;
		case MO_JSON: o->json = true; break;
		case MO_SOCKET: o->socket = optarg; break;
		case MO_DAEMON: o->daemon = optarg; break;
		case 'h':
		case MO_HELP: fputs(mx_usage, stdout); return -1;
		default:
			return cli_usage_fail("bench --scenario mixed: bad option or missing value: "
					      "'%s' (see 'vkgrad bench --scenario mixed --help')",
					      argv[optind - 1]);
		}
		if (bad)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_fail("bench --scenario mixed: unexpected argument '%s'",
				      argv[optind]);
	if (o->socket && o->daemon)
		return cli_usage_fail("bench --scenario mixed: --daemon starts a private daemon; "
				      "--socket uses a running one: give one of them");
	return 0;
}

/* ---- statistics and output ------------------------------------------------------- */

typedef struct mx_stats {
	bool have;
	uint64_t jobs;
	double p50_us, p99_us, jobs_per_s;
	double stage_us[PROTO_STAGE_COUNT];
	bool has_stage[PROTO_STAGE_COUNT];
} mx_stats;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v, in µs. */
static double pct_us(const uint64_t *v, uint64_t n, double p)
{
	if (!n)
		return 0;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)n);
	rank = rank < 1 ? 1 : rank > n ? n : rank;
	return (double)v[rank - 1] / 1e3;
}

static mx_stats stats_of(mx_side *s, uint64_t t0)
{
	mx_stats st = {.have = true, .jobs = s->jobs};
	uint64_t *v = malloc((s->n + 1) * sizeof(*v));
	for (int k = 0; v && k < PROTO_STAGE_COUNT; k++) {
		uint64_t m = 0;
		for (uint64_t i = 0; i < s->n; i++)
			if (s->stg[i * PROTO_STAGE_COUNT + k] != BENCH_NO_STAGE)
				v[m++] = s->stg[i * PROTO_STAGE_COUNT + k];
		if (!m)
			continue;
		qsort(v, m, sizeof(*v), cmp_u64);
		st.has_stage[k] = true;
		st.stage_us[k] = pct_us(v, m, 50);
	}
	free(v);
	qsort(s->lat, s->n, sizeof(*s->lat), cmp_u64);
	st.p50_us = pct_us(s->lat, s->n, 50);
	st.p99_us = pct_us(s->lat, s->n, 99);
	st.jobs_per_s = s->jobs && s->t_last > t0 ? (double)s->jobs / ((double)(s->t_last - t0) / 1e9)
						  : 0;
	return st;
}

/* A number for JSON, or null. */
static const char *num(char *buf, size_t cap, bool have, const char *fmt, double v)
{
	if (!have || !isfinite(v))
		snprintf(buf, cap, "null");
	else
		snprintf(buf, cap, fmt, v);
	return buf;
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

typedef struct mx_run {
	const mx_opts *o;
	uint64_t heavy[3];       /* as run (scaled on a CPU device) */
	bool scaled;
	double max_gflop;        /* the cap in force; 0: none */
	char device[300];        /* JSON-escaped */
	char device_raw[128];
	mx_stats tiny[3], heavy_st[3];
	uint32_t mismatched;
	double max_err;
} mx_run;

static const char *const mx_phase_name[3] = {"tiny_alone", "heavy_alone", "beside"};

static void print_phase_json(const mx_run *r, int p)
{
	const mx_stats *t = &r->tiny[p], *h = &r->heavy_st[p];
	char stages[512], b[8][40];
	size_t o = (size_t)snprintf(stages, sizeof(stages), "{");
	for (int k = 0; t->have && k < PROTO_STAGE_COUNT && o < sizeof(stages); k++)
		if (t->has_stage[k])
			o += (size_t)snprintf(stages + o, sizeof(stages) - o, "%s\"%s\":%.1f",
					      o > 1 ? "," : "", proto_stage_name((proto_stage_id)k),
					      t->stage_us[k]);
	if (o < sizeof(stages))
		snprintf(stages + o, sizeof(stages) - o, "}");
	cli_out("{\"bench\":\"mixed\",\"phase\":\"%s\",\"seconds\":%g,\"tiny_clients\":%" PRIu64
		",\"tiny_shape\":[%d,%d,%d],\"tiny_jobs\":%s,\"tiny_p50_us\":%s,\"tiny_p99_us\":%s,"
		"\"tiny_jobs_per_s\":%s,\"tiny_stages_us\":%s,\"heavy_shape\":[%" PRIu64 ",%" PRIu64
		",%" PRIu64 "],\"heavy_dtype\":\"%s\",\"heavy_inflight\":%" PRIu64
		",\"heavy_jobs\":%s,\"heavy_jobs_per_s\":%s,\"heavy_p50_us\":%s,\"device\":\"%s\"}\n",
		mx_phase_name[p], r->o->seconds, r->o->tiny_clients, MX_TINY_B, MX_TINY_I, MX_TINY_O,
		num(b[0], sizeof(b[0]), t->have, "%.0f", (double)t->jobs),
		num(b[1], sizeof(b[1]), t->have, "%.1f", t->p50_us),
		num(b[2], sizeof(b[2]), t->have, "%.1f", t->p99_us),
		num(b[3], sizeof(b[3]), t->have, "%.6g", t->jobs_per_s), t->have ? stages : "null",
		r->heavy[0], r->heavy[1], r->heavy[2], proto_dtype_name(r->o->dtype), r->o->inflight,
		num(b[4], sizeof(b[4]), h->have, "%.0f", (double)h->jobs),
		num(b[5], sizeof(b[5]), h->have, "%.6g", h->jobs_per_s),
		num(b[6], sizeof(b[6]), h->have && h->jobs, "%.1f", h->p50_us), r->device);
}

static void print_summary_json(const mx_run *r)
{
	const mx_stats *ta = &r->tiny[0], *tb = &r->tiny[2], *ha = &r->heavy_st[1],
		       *hb = &r->heavy_st[2];
	char b[6][40], from[96] = "null";
	if (r->scaled)
		snprintf(from, sizeof(from), "[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", r->o->heavy[0],
			 r->o->heavy[1], r->o->heavy[2]);
	cli_out("{\"bench\":\"mixed\",\"phase\":\"summary\",\"tiny_p50_ratio\":%s,"
		"\"tiny_p99_ratio\":%s,\"tiny_jobs_per_s_ratio\":%s,\"heavy_jobs_per_s_ratio\":%s,"
		"\"heavy_shape\":[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "],\"heavy_scaled_from\":%s,"
		"\"heavy_max_gflop\":%s,\"check\":\"%s\",\"max_rel_err\":%s,\"device\":\"%s\"}\n",
		num(b[0], sizeof(b[0]), true, "%.3f", ratio(tb->p50_us, ta->p50_us)),
		num(b[1], sizeof(b[1]), true, "%.3f", ratio(tb->p99_us, ta->p99_us)),
		num(b[2], sizeof(b[2]), true, "%.3f", ratio(tb->jobs_per_s, ta->jobs_per_s)),
		num(b[3], sizeof(b[3]), true, "%.3f", ratio(hb->jobs_per_s, ha->jobs_per_s)),
		r->heavy[0], r->heavy[1], r->heavy[2], from,
		num(b[4], sizeof(b[4]), r->max_gflop > 0, "%g", r->max_gflop),
		r->mismatched ? "mismatch" : "ok", num(b[5], sizeof(b[5]), true, "%.3g", r->max_err),
		r->device);
}

static void table_cell(char *buf, size_t cap, bool have, const char *fmt, double v)
{
	if (have)
		snprintf(buf, cap, fmt, v);
	else
		snprintf(buf, cap, "-");
}

static void print_table(const mx_run *r)
{
	const mx_opts *o = r->o;
	printf("\n%-12s %12s %12s %12s %13s\n", "phase", "tiny_p50_us", "tiny_p99_us", "tiny_jobs/s",
	       "heavy_jobs/s");
	for (int p = 0; p < 3; p++) {
		const mx_stats *t = &r->tiny[p], *h = &r->heavy_st[p];
		char c[4][32];
		table_cell(c[0], sizeof(c[0]), t->have, "%.1f", t->p50_us);
		table_cell(c[1], sizeof(c[1]), t->have, "%.1f", t->p99_us);
		table_cell(c[2], sizeof(c[2]), t->have, "%.1f", t->jobs_per_s);
		table_cell(c[3], sizeof(c[3]), h->have, "%.2f", h->jobs_per_s);
		printf("%-12s %12s %12s %12s %13s\n", mx_phase_name[p], c[0], c[1], c[2], c[3]);
	}
	const double rv[4] = {ratio(r->tiny[2].p50_us, r->tiny[0].p50_us),
			      ratio(r->tiny[2].p99_us, r->tiny[0].p99_us),
			      ratio(r->tiny[2].jobs_per_s, r->tiny[0].jobs_per_s),
			      ratio(r->heavy_st[2].jobs_per_s, r->heavy_st[1].jobs_per_s)};
	char rs[4][32];
	for (int k = 0; k < 4; k++)
		table_cell(rs[k], sizeof(rs[k]), isfinite(rv[k]), "%.2fx", rv[k]);
	printf("ratio beside/alone: tiny p50 %s, tiny p99 %s, tiny jobs/s %s, heavy jobs/s %s\n",
	       rs[0], rs[1], rs[2], rs[3]);
	printf("tiny: %" PRIu64 " synchronous client%s, %dx%dx%d f32; heavy: %" PRIu64 "x%" PRIu64
	       "x%" PRIu64 " %s, %" PRIu64 " in flight; %g s per phase; dW, db, dX\n",
	       o->tiny_clients, o->tiny_clients == 1 ? "" : "s", MX_TINY_B, MX_TINY_I, MX_TINY_O,
	       r->heavy[0], r->heavy[1], r->heavy[2], proto_dtype_name(o->dtype), o->inflight,
	       o->seconds);
	if (r->scaled)
		printf("heavy shape scaled down from %" PRIu64 "x%" PRIu64 "x%" PRIu64
		       " to stay within %g GFLOP per job (--heavy-max-gflop%s; 0 for none)\n",
		       o->heavy[0], o->heavy[1], o->heavy[2], r->max_gflop,
		       o->max_gflop_set ? "" : ", the default on a CPU device");
	for (int p = 1; p < 3; p++)
		if (r->heavy_st[p].have && !r->heavy_st[p].jobs)
			printf("note: no heavy job ended within the %s phase; raise --seconds\n",
			       mx_phase_name[p]);
	printf("device: %s\n", r->device_raw);
	printf("check: %s\n", r->mismatched ? "some results did NOT match the float64 reference"
					    : "every client's last result matched the float64 "
					      "reference");
	fflush(stdout);
}

/* ---- the private daemon -------------------------------------------------------------- */

/* Region limits raised to fit the heavy client: one region per job in flight. */
static const char *mx_daemon_up(const mx_opts *o, cli_daemon *priv)
{
	cli_task t;
	char why[512];
	uint64_t need = 0;
	if (cli_task_init(&t, o->heavy[0], o->heavy[1], o->heavy[2], CLI_OUT_ALL, false, o->dtype,
			  why, sizeof(why)) == 0)
		need = t.size;
	uint64_t region = 4ull << 30, total = 64ull << 30;
	if (need > region)
		region = need;
	if (need * o->inflight * 2 > total)
		total = need * o->inflight * 2;
	static char region_s[32], total_s[32];
	snprintf(region_s, sizeof(region_s), "%" PRIu64, region);
	snprintf(total_s, sizeof(total_s), "%" PRIu64, total);
	const char *const args[] = {"--max-region-bytes", region_s, "--max-total-region-bytes",
				    total_s, "--max-region-bytes-per-uid", total_s, NULL};
	char bin[4096];
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

/* ---- the command ----------------------------------------------------------------------- */

/* Halve B, I and O together while the full backward is above the cap. */
static void mx_scale(mx_run *r)
{
	memcpy(r->heavy, r->o->heavy, sizeof(r->heavy));
	while (r->max_gflop > 0 && mx_flop(r->heavy) > r->max_gflop * 1e9 &&
	       (r->heavy[0] > 1 || r->heavy[1] > 1 || r->heavy[2] > 1)) {
		for (int k = 0; k < 3; k++)
			r->heavy[k] = r->heavy[k] > 1 ? r->heavy[k] / 2 : 1;
		r->scaled = true;
	}
}

/* Why the daemon cannot take the heavy client as hello describes it, or NULL. */
static const char *mx_limits(const mx_run *r, const vkg_info *info, char *why, size_t len)
{
	cli_task t;
	if (cli_task_init(&t, r->heavy[0], r->heavy[1], r->heavy[2], CLI_OUT_ALL, false,
			  r->o->dtype, why, len) != 0)
		return why;
	if (info->max_regions && r->o->inflight > info->max_regions)
		snprintf(why, len, "--heavy-inflight %" PRIu64 " needs as many regions > the "
			 "daemon's max_regions %u", r->o->inflight, info->max_regions);
	else if (t.size > info->max_region_bytes)
		snprintf(why, len, "the heavy job's region of %zu bytes > the daemon's "
			 "max_region_bytes %" PRIu64 " (vkgradd --max-region-bytes)",
			 t.size, info->max_region_bytes);
	else if (cli_task_bytes(&t, CLI_X) > info->max_tensor_bytes)
		snprintf(why, len, "the heavy job's X of %" PRIu64 " bytes > the daemon's "
			 "max_tensor_bytes %" PRIu64, cli_task_bytes(&t, CLI_X),
			 info->max_tensor_bytes);
	else
		return NULL;
	return why;
}

int cli_bench_mixed(const cli_ctx *ctx, int argc, char **argv)
{
	mx_opts o;
	int rc = mx_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;
	if (!o.socket && !o.daemon)
		o.socket = ctx->socket;
	mx_run r = {.o = &o};
	cli_daemon priv = {0};
	char why[512];
	const char *sock = o.socket;
	if (!sock && !(sock = mx_daemon_up(&o, &priv)))
		return CLI_EXIT_DAEMON;

	vkg_error err;
	vkg_info info;
	vkg_client *c = vkg_connect(sock, &err);
	if (!c || vkg_hello(c, "vkgrad bench --scenario mixed", &info, &err) != 0) {
		vkg_close(c);
		rc = cli_fail(&err);
		goto out;
	}
	vkg_close(c);
	snprintf(r.device_raw, sizeof(r.device_raw), "%s", info.device_name);
	cli_json_escape(r.device, sizeof(r.device), info.device_name);
	const bool cpu = strcmp(info.device_type, "cpu") == 0;
	r.max_gflop = o.max_gflop_set ? o.max_gflop : cpu ? MX_CPU_MAX_GFLOP : 0;
	mx_scale(&r);
	if (mx_limits(&r, &info, why, sizeof(why))) {
		cli_errf("vkgrad: bench: %s\n", why);
		rc = CLI_EXIT_DAEMON;
		goto out;
	}
	if (!o.json && r.scaled)
		cli_errf("bench: heavy shape scaled down from %" PRIu64 "x%" PRIu64 "x%" PRIu64
			 " to %" PRIu64 "x%" PRIu64 "x%" PRIu64 " (--heavy-max-gflop %g%s)\n",
			 o.heavy[0], o.heavy[1], o.heavy[2], r.heavy[0], r.heavy[1], r.heavy[2],
			 r.max_gflop, o.max_gflop_set ? "" : ", the default on a CPU device");

	mx_client cl[MX_MAX_TINY + 1];
	const uint32_t nt = (uint32_t)o.tiny_clients;
	for (uint32_t i = 0; i <= nt; i++) {
		mx_client *x = &cl[i];
		memset(x, 0, sizeof(*x));
		x->heavy = i == nt;
		if (x->heavy) {
			memcpy(x->shape, r.heavy, sizeof(x->shape));
			x->dtype = o.dtype;
			x->k = (uint32_t)o.inflight;
			snprintf(x->name, sizeof(x->name), "heavy client");
		} else {
			x->shape[0] = MX_TINY_B, x->shape[1] = MX_TINY_I, x->shape[2] = MX_TINY_O;
			x->dtype = PROTO_F32;
			x->k = 1;
			snprintf(x->name, sizeof(x->name), "tiny client %u", i + 1);
		}
		x->seed = i + 1;
	}
	r.max_err = 0;
	for (int p = 0; p < 3; p++) {
		/* tiny_alone: cl[0..nt); heavy_alone: cl[nt]; beside: all */
		const mx_client *first = p == 1 ? &cl[nt] : &cl[0];
		const uint32_t n = p == 0 ? nt : p == 1 ? 1 : nt + 1;
		if (!o.json)
			cli_errf("bench: mixed, %s: %g s...\n", mx_phase_name[p], o.seconds);
		mx_phase_result pr;
		if (mx_phase(sock, first, n, o.seconds, &pr, why, sizeof(why)) != 0) {
			cli_errf("vkgrad: bench: mixed, %s: %s\n", mx_phase_name[p], why);
			rc = CLI_EXIT_DAEMON;
			break;
		}
		if (p != 1)
			r.tiny[p] = stats_of(&pr.tiny, pr.t0);
		if (p != 0)
			r.heavy_st[p] = stats_of(&pr.heavy, pr.t0);
		r.mismatched += pr.tiny.mismatched + pr.heavy.mismatched;
		const double e[2] = {pr.tiny.max_err, pr.heavy.max_err};
		for (int k = 0; k < 2; k++)
			if (!(e[k] <= r.max_err))
				r.max_err = e[k];
		mx_side_free(&pr.tiny);
		mx_side_free(&pr.heavy);
		print_phase_json(&r, p);
		if (p == 2) {
			print_summary_json(&r);
			if (!o.json)
				print_table(&r);
		}
	}
out:
	if (priv.pid && cli_daemon_stop(&priv, 60000, why, sizeof(why)) != 0) {
		cli_errf("vkgrad: bench: %s\n", why);
		rc = CLI_EXIT_DAEMON;
	}
	if (rc == CLI_EXIT_OK && r.mismatched)
		rc = CLI_EXIT_CHECK;
	return rc;
}
