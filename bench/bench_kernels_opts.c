/* bench/bench_kernels_opts.c — see bench_kernels_opts.h. */
#include "bench_kernels_opts.h"

#include "cli.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t bk_default_shapes[][3] = {
	{32, 64, 8},        {256, 256, 16},     {4096, 1024, 16},    {8192, 4096, 32},
	{2048, 1024, 1024}, {8192, 4096, 4096}, {16384, 8192, 8192},
};
/* --shapes narrow: issue 37's narrow layers over many rows */
static const uint64_t bk_narrow_shapes[][3] = {
	{1048576, 64, 64}, {1048576, 32, 16}, {4194304, 64, 64}, {1048576, 128, 128}, {262144, 256, 256},
};
/* --shapes grid: auto against every family, B from 2^10 to 2^22, I and O
 * from 1 to 1024 with odd sizes (issue 37, item 2) */
static const uint64_t bk_grid_shapes[][3] = {
	{1024, 1, 1},       {1024, 3, 5},       {1024, 64, 64},       {1024, 257, 129},   {1024, 1024, 1024},
	{16384, 1, 1},      {16384, 33, 17},    {16384, 64, 64},      {16384, 257, 129},  {16384, 1024, 1024},
	{262144, 1, 1},     {262144, 33, 17},   {262144, 64, 64},     {262144, 257, 2},   {262144, 1024, 16},
	{4194304, 1, 1},    {4194304, 3, 5},    {4194304, 32, 16},    {4194304, 64, 64},  {4194304, 128, 128},
};

static const char bk_usage[] =
	"usage: vkgrad [--socket PATH] bench --kernels [--shapes B,I,O[;B,I,O...]]\n"
	"                [--dtypes f32,f16,bf16] [--variants auto,generic,tiled] [--reps N]\n"
	"                [--outputs dw,db,dx] [--max-gflop X] [--json] [--socket PATH]\n"
	"                [--daemon PATH]\n"
	"Kernel throughput: for each shape, dtype and variant the full backward\n"
	"(dW, db, dX) runs with one job in flight, warm-up jobs (0.3 s, at least one) then N measured;\n"
	"one JSON line each:\n"
	"  shape [B,I,O], dtype, variant, outputs \"dw,db,dx\", reps\n"
	"  gpu_us          median over the reps of the reply's kernel_us (the job's own\n"
	"                  dispatches) when the daemon sent it, else of its gpu_us\n"
	"                  (the whole batch, i.e. this job and its copies) over the\n"
	"                  batch's jobs (batch_jobs: their median; 1 but with\n"
	"                  --inflight, where a batch may take several small jobs)\n"
	"  kernel_us_measured  true when every rep's reply carried kernel_us\n"
	"  stream_us       (streamed jobs) medians of the replies' GPU timelines:\n"
	"                  upload/compute/download busy and end times, the first\n"
	"                  kernel's start, tail_us after the last kernel (proto/README.md)\n"
	"  stages_us       medians of the replies' traces: where the round trip went,\n"
	"                  stage by stage (request ... client_wake, proto/README.md)\n"
	"  batch_gpu_us    median of the replies' gpu_us\n"
	"  tflops          FLOPs (4·B·I·O for all three outputs) / gpu_us / 1e6\n"
	"  gbps            bytes of X, dY, W read + dW, db, dX written / gpu_us / 1e3\n"
	"  end_to_end_us   median client round trip, submit to reply, with the\n"
	"                  tensors in the client's memory\n"
	"  warmed_ms       the line's warm-up, its first job included (wall ms)\n"
	"  max_rel_err     max|got-want| / max|want| of the worst output against a\n"
	"                  float64 reference: every element when 4·B·I·O <= 2e9\n"
	"                  (check \"full\"), else 512 random entries of dW and of dX\n"
	"                  and all of db (check \"sampled\"); ok is false above the\n"
	"                  dtype's tolerance (" CLI_TOL_ALL_TEXT ")\n"
	"A shape above --max-gflop, or one the daemon's limits cannot take\n"
	"(max_tensor_bytes, max_region_bytes, max_dim), prints a line with\n"
	"\"skipped\"; a dtype/variant the daemon refuses prints one with \"error\".\n"
	"  --shapes      default 32,64,8;256,256,16;4096,1024,16;8192,4096,32;\n"
	"                2048,1024,1024;8192,4096,4096;16384,8192,8192; or a set by name:\n"
	"                narrow (1048576,64,64;1048576,32,16;4194304,64,64;\n"
	"                1048576,128,128;262144,256,256), grid (B 2^10..2^22 by I, O\n"
	"                1..1024, odd sizes among them: 20 shapes)\n"
	"  copy_gbps, copy_fraction  the device's copy bandwidth (bench --peak's\n"
	"                copy: 2 x bytes of a device-to-device copy / its time,\n"
	"                the faster of vkCmdCopyBuffer and a shader copy,\n"
	"                measured once in this process on the daemon's default\n"
	"                device) and gbps / copy_gbps: how near the line is to\n"
	"                the memory's speed\n"
	"  --copy-gbps X take X as copy_gbps instead of measuring it (0: leave the\n"
	"                fraction out)\n"
	"After the lines, one {\"bench\":\"kernels_auto\"} line per shape and dtype\n"
	"where auto and another variant ran: auto_us, best (the fastest other\n"
	"variant), best_us, auto_over_best.\n"
	"  --dtypes      default: every dtype the daemon's hello lists kernels for\n"
	"  --variants    default auto,generic,tiled (the request key `variant`)\n"
	"  --outputs L   the gradients each job computes (default dw,db,dx): one at a\n"
	"                time shows where a full backward's time goes; FLOPs and bytes\n"
	"                count only what is asked (dW, dX 2·B·I·O each, db B·O)\n"
	"  --reps N      measured jobs per line; default 50 up to 1e8 FLOPs, 20 up to\n"
	"                1e9, 10 up to 1e10, 5 up to 1e11, else 3 -- stopping early\n"
	"                (after at least 3) once they took 3 s\n"
	"  --max-gflop X skip shapes with more than X·1e9 FLOPs; default none on a GPU,\n"
	"                1 on a CPU device (lavapipe); 0 means none\n"
	"  --json        only the JSON lines (no progress, no table)\n"
	"  --resident    the tensors as device tensors (vkg_tensor_new): the jobs\n"
	"                read and write device memory only, as a model kept on the\n"
	"                daemon does (its lines carry \"resident\":true); without\n"
	"                it they name client memory, which the daemon copies in and\n"
	"                out around the kernels\n"
	"  --inflight K  keep K jobs of the line in flight (default 1: each waits for\n"
	"                the last); the GPU then has the next job queued while one\n"
	"                runs, as a training loop's does. gpu_us stays each job's own\n"
	"                kernel time where the daemon measures it (kernel_us_measured);\n"
	"                else its batch's GPU time over the batch's jobs (a connection's\n"
	"                batch takes several small jobs; batch_jobs: the median)\n"
	"  --warmup-ms X unmeasured jobs for X ms before each line's reps (default:\n"
	"                300 ms, at most 50 jobs). An idle GPU lowers its clock\n"
	"                (an H100 went to 345 MHz from 1980 between short lines):\n"
	"                give it long enough, with --inflight, to come back up\n"
	"  --settle-ms X the first line of each shape and dtype warms up at least X ms\n"
	"                (default 0): the float64 reference is computed before it, and\n"
	"                the GPU idles meanwhile (each line's warmed_ms: its warm-up)\n"
	"  --prune X     a line whose first job's kernel_us is more than X (>= 1) times\n"
	"                the fastest line of its shape and dtype so far ends there:\n"
	"                that job is its one rep, checked as any (\"pruned\":true).\n"
	"                It cannot be the fastest, so auto against the best is the\n"
	"                same; a grid of slow families then takes far less time\n"
	"                (default 0: off)\n"
	"  --socket PATH use a running daemon; otherwise a private one is started\n"
	"                (--daemon PATH, default: the vkgradd next to this program)\n"
	"                with max_region_bytes raised to fit the largest job\n"
	"exit status: 1 when a line's check failed, 3 when the daemon failed a job\n"
	"(other than refusing a dtype/variant) or the connection broke.\n";

/* ---- options ----------------------------------------------------------------- */

static int parse_shapes(const char *s, bk_opts *o)
{
	o->nshapes = 0;
	const char *p = s;
	while (*p) {
		size_t n = strcspn(p, ";");
		char one[96];
		if (n == 0 || n >= sizeof(one) || o->nshapes == BK_MAX_SHAPES)
			return -1;
		memcpy(one, p, n);
		one[n] = 0;
		uint64_t *d = o->shapes[o->nshapes];
		char *q = one, *end;
		for (int k = 0; k < 3; k++) {
			if (*q < '0' || *q > '9')
				return -1;
			errno = 0;
			unsigned long long v = strtoull(q, &end, 10);
			if (errno || v == 0 || v > UINT32_MAX || *end != (k < 2 ? ',' : 0))
				return -1;
			d[k] = v;
			q = end + 1;
		}
		o->nshapes++;
		p += n;
		if (*p == ';')
			p++;
	}
	return o->nshapes ? 0 : -1;
}

/* A comma-separated list of names; lookup returns the index or -1. Each name
 * once; 0, or -1 on an unknown name, a repeat or an empty list. */
static int parse_names(const char *s, int (*lookup)(const char *), int *out, unsigned max,
		       unsigned *n)
{
	*n = 0;
	const char *p = s;
	while (*p) {
		size_t len = strcspn(p, ",");
		char one[32];
		if (len == 0 || len >= sizeof(one))
			return -1;
		memcpy(one, p, len);
		one[len] = 0;
		int v = lookup(one);
		if (v < 0 || *n == max)
			return -1;
		for (unsigned i = 0; i < *n; i++)
			if (out[i] == v)
				return -1;
		out[(*n)++] = v;
		p += len;
		if (*p == ',')
			p++;
	}
	return *n ? 0 : -1;
}

/* A whole number of milliseconds, 0 to 10 minutes, for option `name`:
 * 0 with *ms set, or cli_parse_u64's nonzero (it said why). */
static int parse_ms(const char *name, const char *arg, double *ms)
{
	uint64_t v;
	const int bad = cli_parse_u64(name, arg, 0, 600000, &v);
	if (!bad)
		*ms = (double)v;
	return bad;
}

int bk_dtype_lookup(const char *s)
{
	for (int d = 0; d < PROTO_DTYPE_COUNT; d++)
		if (strcmp(s, proto_dtype_name((proto_dtype)d)) == 0)
			return d;
	return -1;
}

int bk_opts_parse(int argc, char **argv, bk_opts *o)
{
	enum { KO_KERNELS = 256, KO_SHAPES, KO_DTYPES, KO_VARIANTS, KO_REPS, KO_OUTPUTS, KO_MAXGF,
	       KO_JSON, KO_SOCKET, KO_DAEMON, KO_HELP, KO_COPY, KO_RESIDENT, KO_INFLIGHT, KO_WARMUP,
	       KO_SETTLE, KO_PRUNE };
	static const struct option opts[] = {
		{"kernels", no_argument, NULL, KO_KERNELS},
		{"shapes", required_argument, NULL, KO_SHAPES},
		{"dtypes", required_argument, NULL, KO_DTYPES},
		{"variants", required_argument, NULL, KO_VARIANTS},
		{"reps", required_argument, NULL, KO_REPS},
		{"outputs", required_argument, NULL, KO_OUTPUTS},
		{"max-gflop", required_argument, NULL, KO_MAXGF},
		{"json", no_argument, NULL, KO_JSON},
		{"resident", no_argument, NULL, KO_RESIDENT},
		{"inflight", required_argument, NULL, KO_INFLIGHT},
		{"warmup-ms", required_argument, NULL, KO_WARMUP},
		{"settle-ms", required_argument, NULL, KO_SETTLE},
		{"prune", required_argument, NULL, KO_PRUNE},
		{"socket", required_argument, NULL, KO_SOCKET},
		{"daemon", required_argument, NULL, KO_DAEMON},
		{"help", no_argument, NULL, KO_HELP},
		{"copy-gbps", required_argument, NULL, KO_COPY},
		{0},
	};
	memset(o, 0, sizeof(*o));
	o->nshapes = sizeof(bk_default_shapes) / sizeof(bk_default_shapes[0]);
	memcpy(o->shapes, bk_default_shapes, sizeof(bk_default_shapes));
	o->variants[0] = PROTO_VARIANT_AUTO;
	o->variants[1] = PROTO_VARIANT_GENERIC;
	o->variants[2] = PROTO_VARIANT_TILED;
	o->nvariants = 3;
	o->outputs = CLI_OUT_ALL;
	o->warmup_ms = -1;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
		int bad = 0, idx[PROTO_VARIANT_COUNT + PROTO_DTYPE_COUNT];
		switch (c) {
		case KO_KERNELS: break;
		case KO_SHAPES:
			if (strcmp(optarg, "narrow") == 0 || strcmp(optarg, "grid") == 0) {
				const bool nw = optarg[0] == 'n';
				o->nshapes = nw ? sizeof(bk_narrow_shapes) / sizeof(bk_narrow_shapes[0])
						: sizeof(bk_grid_shapes) / sizeof(bk_grid_shapes[0]);
				memcpy(o->shapes, nw ? (const void *)bk_narrow_shapes : (const void *)bk_grid_shapes,
				       o->nshapes * sizeof(o->shapes[0]));
				break;
			}
			if (parse_shapes(optarg, o) != 0)
				return cli_usage_fail("bench --kernels: --shapes takes B,I,O[;B,I,O...] "
						      "with each in [1, 2^32) (up to %d shapes; got '%s')",
						      BK_MAX_SHAPES, optarg);
			break;
		case KO_DTYPES:
			if (parse_names(optarg, bk_dtype_lookup, idx, PROTO_DTYPE_COUNT, &o->ndtypes) != 0)
				return cli_usage_fail("bench --kernels: --dtypes takes distinct names of "
						      "f32, f16, bf16 separated by commas (got '%s')",
						      optarg);
			for (unsigned i = 0; i < o->ndtypes; i++)
				o->dtypes[i] = (proto_dtype)idx[i];
			break;
		case KO_VARIANTS:
			if (parse_names(optarg, proto_variant_parse, idx, PROTO_VARIANT_COUNT,
					&o->nvariants) != 0)
				return cli_usage_fail("bench --kernels: --variants takes distinct variant "
						      "names (auto, generic, tiled, ...) separated by "
						      "commas (got '%s')",
						      optarg);
			for (unsigned i = 0; i < o->nvariants; i++)
				o->variants[i] = (proto_variant)idx[i];
			break;
		case KO_REPS: bad = cli_parse_u64("--reps", optarg, 1, 1000000, &o->reps); break;
		case KO_OUTPUTS:
			if (cli_outputs_parse(optarg, &o->outputs) != 0)
				return cli_usage_fail("bench --kernels: --outputs takes a list of dw, db, "
						      "dx separated by commas (got '%s')",
						      optarg);
			break;
		case KO_MAXGF:
			bad = cli_parse_double("--max-gflop", optarg, 0, DBL_MAX, &o->max_gflop);
			o->max_gflop_set = true;
			break;
		case KO_JSON: o->json = true; break;
		case KO_RESIDENT: o->resident = true; break;
		case KO_INFLIGHT: {
			uint64_t k;
			bad = cli_parse_u64("--inflight", optarg, 1, BK_INFLIGHT_MAX, &k);
			o->inflight = (unsigned)k;
			break;
		}
		case KO_WARMUP: bad = parse_ms("--warmup-ms", optarg, &o->warmup_ms); break;
		case KO_SETTLE: bad = parse_ms("--settle-ms", optarg, &o->settle_ms); break;
		case KO_PRUNE:
			bad = cli_parse_double("--prune", optarg, 0, 1000, &o->prune);
			if (!bad && o->prune > 0 && o->prune < 1)
				return cli_usage_fail("bench --kernels: --prune takes 0 (off) or a factor from 1 "
						      "to 1000 (got '%s')",
						      optarg);
			break;
		case KO_COPY:
			bad = cli_parse_double("--copy-gbps", optarg, 0, DBL_MAX, &o->copy_gbps);
			o->copy_set = true;
			break;
		case KO_SOCKET: o->socket = optarg; break;
		case KO_DAEMON: o->daemon = optarg; break;
		case 'h':
		case KO_HELP: fputs(bk_usage, stdout); return -1;
		default:
			return cli_usage_fail("bench --kernels: bad option or missing value: '%s'",
					      argv[optind - 1]);
		}
		if (bad)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_fail("bench --kernels: unexpected argument '%s'", argv[optind]);
	return 0;
}
