/* bench/cli_bench_peak.c — `vkgrad bench --peak`: the ceilings Vulkan gives
 * this device, by microkernels with no memory traffic to speak of:
 *
 *   mma_regs  subgroup-scope cooperative-matrix multiply-adds
 *             (VK_KHR_cooperative_matrix, the device's shape) with the
 *             fragments in registers, per accumulator count
 *   mma_smem  the same with every step's fragments loaded from shared
 *             memory, as linear_coopmat_khr_gemm's inner loop does (A as
 *             [m][k], as its dX pass; mma_smem_dw: [k][m], as its dW pass)
 *   fma_f32   FP32 FMA throughput (vec4 FMAs, independent chains)
 *   fma_outer the same as the outer product of a GEMM's thread tile
 *   nv2_regs  workgroup-scope multiply-adds (VK_NV_cooperative_matrix2)
 *             on linear_coopmat_nv2_gemm's tiling (VKGRAD_NV2_TILE or its
 *             default, fitted by daemon/nv2_tile.c), A and B loaded once
 *   nv2_load  the same with each step's A and B loaded through tensor
 *             layouts from small buffers that stay in L2, as that GEMM's
 *             inner loop loads them (nv2_load_dw: A read transposed, as its
 *             dW pass; nv2_smem: from shared memory instead)
 *
 * (shaders/bench_peak_mma.comp, shaders/bench_peak_fma.comp,
 * shaders/bench_peak_nv2.comp), and the copy bandwidth (bench/peak_copy.c:
 * vkCmdCopyBuffer and shaders/bench_peak_copy.comp). The nv2_* lines run only where --only
 * names them (they take seconds each). Each line
 * calibrates its loop count to about --ms of GPU time per dispatch, then
 * times --reps dispatches with GPU timestamps; TFLOP/s from the median and
 * the best. Every result is read back and compared with the float64
 * reference (bench/peak_ref.c: small integers, so exactly). The device,
 * its features and the cooperative-matrix shape are the daemon's own
 * (daemon/device.c, daemon/coopmat_khr.c), opened in this process. */
#include "cli.h"
#include "cli_bench.h"
#include "peak_copy.h"
#include "peak_ref.h"
#include "peak_vk.h"
#include "ref.h"

#include "kiface.h"
#include "nv2_tile.h"

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK_MAX_LIST 8
#define PK_STAGE_BYTES (16u << 20)
#define PK_DEFAULT_SMS 132 /* a GPU that does not say how many SMs it has: as many as an H200's */
_Static_assert(VKG_PEAK_NV2_SLICES % VKG_PEAK_NV2_SMEM_SLICES == 0, "nv2_smem: whole trips of its slices");

static const char pk_usage[] =
	"usage: vkgrad bench --peak [--only LIST] [--dtypes f16,bf16] [--accs 4,8,16]\n"
	"                [--chains 4,8,16] [--ms X] [--reps N] [--wgs-per-sm N] [--json]\n"
	"The ceilings this device reaches through Vulkan, by microkernels that run\n"
	"in this process on the daemon's device (the default choice; VKGRAD_VALIDATION=1\n"
	"adds the validation layer). One line each (a JSON line with --json):\n"
	"  mma_regs  per dtype (f16, bf16) and accumulator count: each subgroup keeps\n"
	"            A and B fragments (the device's KHR cooperative-matrix shape) and\n"
	"            ACCS independent f32 accumulators in registers and runs\n"
	"            coopMatMulAdd in a loop\n"
	"  mma_smem  the same, each step's fragments loaded from shared memory (rows\n"
	"            padded by 16 bytes, a barrier per k-slice of 32), as the GEMM's\n"
	"            inner loop: shared -> registers -> MMA, no global traffic; the\n"
	"            A tile as [m][k] (row-major loads), as in the GEMM's dX pass\n"
	"  mma_smem_dw  the same with the A tile as [k][m] (column-major loads), as\n"
	"            in the GEMM's dW pass (A = dY transposed)\n"
	"  fma_f32   FP32 FMA throughput: CHAINS independent vec4 fma() chains per\n"
	"            invocation, the same a and b for all\n"
	"  fma_outer the same FMAs as an outer product (CHAINS/2 rows of 8: a GEMM's\n"
	"            thread tile, e.g. 8x8 for 16), three source registers per FMA\n"
	"  nv2_regs  per dtype: workgroup-scope matrices (VK_NV_cooperative_matrix2)\n"
	"            on linear_coopmat_nv2_gemm's tiling (VKGRAD_NV2_TILE's BMxBNxBKx\n"
	"            THREADS as the daemon takes it, else its default 128x256x64, 256\n"
	"            threads; checked against the device's flexible dimensions): a\n"
	"            BMxBK A and a BKxBN B loaded once, coopMatMulAdd into a BMxBN\n"
	"            f32 accumulator in a loop: the multiply-adds alone\n"
	"  nv2_load  the same, each step's A and B loaded with coopMatLoadTensorNV\n"
	"            through unclamped tensor layouts, cycling over 8 k-slices of\n"
	"            8 small copies (they stay in L2), as the GEMM's inner loop;\n"
	"            A as [m][k], as its dX pass\n"
	"  nv2_load_dw  the same with A stored [k][m], read through a transposed\n"
	"            view, as its dW pass (A = dY transposed)\n"
	"  nv2_smem  the same loads from a copy of one k-slice in shared memory\n"
	"  (the nv2_* lines only where --only names them)\n"
	"  copy      the memory bandwidth: 1 GiB (64 MiB on a CPU device) copied device\n"
	"            to device two ways, GB/s = 2 x bytes (read and written) / the\n"
	"            median GPU time, as bench --kernels counts a line's gbps:\n"
	"            copy_dma_gbps by vkCmdCopyBuffer (a driver may run it on a copy\n"
	"            engine, below the memory's speed), copy_shader_gbps by a compute\n"
	"            kernel copying 16-byte elements (bench_peak_copy), and copy_gbps\n"
	"            = the larger (copy_by names it): the best copy the device does;\n"
	"            each way's result read back at both ends of the buffer and\n"
	"            compared with the source's pattern (dma_ok, shader_ok; ok: both)\n"
	"Fields: kernel, dtype, shape [M,N,K] (nv2: [BM,BN,BK]), accs (frags [A,B]),\n"
	"  chains, or (nv2) slices (k-slices the steps cycle through), steps (per\n"
	"  loop trip), copies, a_kmajor,\n"
	"  workgroups, threads (per workgroup), iters (loop trips, calibrated to about\n"
	"  --ms per dispatch), reps, gpu_us (median), tflops (FLOPs / median),\n"
	"  tflops_best (FLOPs / fastest), registers (the driver's statistic, null\n"
	"  where it gives none), max_rel_err, mismatches, ok: every value read back\n"
	"  equals the float64 reference exactly (the inputs are small integers).\n"
	"  A line the device cannot run says \"unsupported\" with what it lacks.\n"
	"  --only LIST      mma_regs,mma_smem,mma_smem_dw,fma_f32,fma_outer,nv2_regs,\n"
	"                   nv2_load,nv2_load_dw,nv2_smem,copy (default all but nv2_*)\n"
	"  --dtypes LIST    f16,bf16 (default both)\n"
	"  --accs LIST      accumulators per subgroup, of 1,2,4,8,16 (default 4,8,16:\n"
	"                   2x2, 2x4, 4x4 fragments)\n"
	"  --chains LIST    vec4 accumulators per invocation, 1..32 (default 4,8,16;\n"
	"                   even for fma_outer, which skips odd ones unless --only\n"
	"                   names it)\n"
	"  --ms X           GPU time per dispatch to aim for (default 20; 30 on a CPU device)\n"
	"  --reps N         measured dispatches per line (default 5; 2 on a CPU device)\n"
	"  --wgs-per-sm N   workgroups per SM (VK_NV_shader_sm_builtins' count, else 132;\n"
	"                   2 SMs on a CPU device); default 16\n"
	"exit status: 1 when a check failed, 2 bad usage, 3 when the device failed.\n";

enum {
	PK_MMA_REGS,
	PK_MMA_SMEM,
	PK_MMA_SMEM_DW,
	PK_FMA,
	PK_FMA_OUTER,
	PK_NV2_REGS,
	PK_NV2_LOAD,
	PK_NV2_LOAD_DW,
	PK_NV2_SMEM,
	PK_COPY,
	PK_NKERN
};
static const char *const pk_kernel_name[PK_NKERN] = {
	"mma_regs", "mma_smem", "mma_smem_dw", "fma_f32", "fma_outer",
	"nv2_regs", "nv2_load", "nv2_load_dw", "nv2_smem", "copy",
};

typedef struct pk_opts {
	bool kern[PK_NKERN];
	bool dtype[PROTO_DTYPE_COUNT];
	uint32_t accs[PK_MAX_LIST], chains[PK_MAX_LIST];
	unsigned naccs, nchains;
	double ms;
	uint64_t reps, wgs_per_sm;
	bool json, ms_set, reps_set;
} pk_opts;

/* One line's measurement. */
typedef struct pk_line {
	const char *kernel, *dtype;
	char config[48];
	uint32_t groups, threads, iters;
	double flops_per_iter; /* FLOPs of one loop trip over the whole dispatch */
	double med_us, min_us;
	unsigned reps;
	int64_t registers;
	peak_check chk;
	bool ok;
} pk_line;

typedef struct pk_run {
	const pk_opts *o;
	peak_vk v;
	char device[256]; /* JSON-escaped name */
	bool failed_check;
} pk_run;

/* ---- options ---- */

/* "a,b,c" of unsigned numbers in [lo, hi] into out (at most PK_MAX_LIST). */
static int parse_u32_list(const char *opt, const char *s, uint32_t lo, uint32_t hi, uint32_t *out, unsigned *n)
{
	*n = 0;
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (*n == PK_MAX_LIST)
			return cli_usage_fail("bench --peak: %s takes at most %d values", opt, PK_MAX_LIST);
		if (cli_parse_u64(opt, t, lo, hi, &v) != 0)
			return CLI_EXIT_USAGE;
		out[(*n)++] = (uint32_t)v;
	}
	return *n ? 0 : cli_usage_fail("bench --peak: %s needs a value", opt);
}

static int parse_names(const char *s, bool *kern, bool *dtype)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		bool found = false;
		for (int k = 0; kern && k < PK_NKERN; k++)
			if (strcmp(t, pk_kernel_name[k]) == 0)
				kern[k] = found = true;
		if (dtype && strcmp(t, "f16") == 0)
			dtype[PROTO_F16] = found = true;
		if (dtype && strcmp(t, "bf16") == 0)
			dtype[PROTO_BF16] = found = true;
		if (!found)
			return cli_usage_fail("bench --peak: unknown %s '%s'", kern ? "microkernel" : "dtype", t);
	}
	return 0;
}

static int pk_parse(int argc, char **argv, pk_opts *o)
{
	enum { O_PEAK = 256, O_ONLY, O_DTYPES, O_ACCS, O_CHAINS, O_MS, O_REPS, O_WGS, O_JSON };
	static const struct option opts[] = {
		{"peak", no_argument, NULL, O_PEAK},	     {"only", required_argument, NULL, O_ONLY},
		{"dtypes", required_argument, NULL, O_DTYPES}, {"accs", required_argument, NULL, O_ACCS},
		{"chains", required_argument, NULL, O_CHAINS}, {"ms", required_argument, NULL, O_MS},
		{"reps", required_argument, NULL, O_REPS},     {"wgs-per-sm", required_argument, NULL, O_WGS},
		{"json", no_argument, NULL, O_JSON},	     {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	*o = (pk_opts){.accs = {4, 8, 16}, .naccs = 3, .chains = {4, 8, 16}, .nchains = 3, .reps = 5,
		       .wgs_per_sm = 16, .ms = 20};
	bool kern_set = false, dtype_set = false;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1;) {
		int bad = 0;
		switch (c) {
		case O_PEAK: break;
		case O_ONLY: kern_set = true; bad = parse_names(optarg, o->kern, NULL); break;
		case O_DTYPES: dtype_set = true; bad = parse_names(optarg, NULL, o->dtype); break;
		case O_ACCS: bad = parse_u32_list("--accs", optarg, 1, 16, o->accs, &o->naccs); break;
		case O_CHAINS: bad = parse_u32_list("--chains", optarg, 1, 32, o->chains, &o->nchains); break;
		case O_MS:
			o->ms_set = true;
			bad = cli_parse_double("--ms", optarg, 0.1, 10000, &o->ms);
			break;
		case O_REPS: o->reps_set = true; bad = cli_parse_u64("--reps", optarg, 1, 1000, &o->reps); break;
		case O_WGS: bad = cli_parse_u64("--wgs-per-sm", optarg, 1, 256, &o->wgs_per_sm); break;
		case O_JSON: o->json = true; break;
		case 'h': fputs(pk_usage, stdout); return -1;
		default: return cli_usage_fail("bench --peak: unknown option '%s'", argv[optind - 1]);
		}
		if (bad)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_fail("bench --peak: unexpected argument '%s'", argv[optind]);
	for (unsigned i = 0; i < o->naccs; i++)
		if (o->accs[i] & (o->accs[i] - 1))
			return cli_usage_fail("bench --peak: --accs takes 1, 2, 4, 8 or 16, not %u", o->accs[i]);
	for (int k = 0; !kern_set && k < PK_NV2_REGS; k++)
		o->kern[k] = true;
	o->kern[PK_COPY] |= !kern_set;
	/* a malformed tiling is a usage error before any device work */
	const char *tile = getenv(NV2_TILE_ENV);
	char terr[512];
	nv2_tile t;
	const bool any_nv2 = o->kern[PK_NV2_REGS] || o->kern[PK_NV2_LOAD] || o->kern[PK_NV2_LOAD_DW] ||
			     o->kern[PK_NV2_SMEM];
	if (any_nv2 && tile && nv2_tile_parse(tile, &t, terr, sizeof(terr)) != 0)
		return cli_usage_fail("bench --peak: %s", terr);
	/* (without --only, fma_outer skips the odd counts fma_f32 runs) */
	for (unsigned i = 0; kern_set && o->kern[PK_FMA_OUTER] && i < o->nchains; i++)
		if (o->chains[i] % 2)
			return cli_usage_fail("bench --peak: fma_outer takes an even --chains (rows of 8), "
					      "not %u", o->chains[i]);
	if (!dtype_set)
		o->dtype[PROTO_F16] = o->dtype[PROTO_BF16] = true;
	return 0;
}

/* ---- output ---- */

static void print_line(const pk_run *r, const pk_line *l, const char *shape_json, const char *extra_json)
{
	const double tf = l->flops_per_iter * l->iters / (l->med_us * 1e6);
	const double best = l->flops_per_iter * l->iters / (l->min_us * 1e6);
	char regs[24] = "null", err[32];
	if (l->registers >= 0)
		snprintf(regs, sizeof(regs), "%" PRId64, l->registers);
	snprintf(err, sizeof(err), isnan(l->chk.max_rel_err) ? "null" : "%.3g", l->chk.max_rel_err);
	if (r->o->json) {
		cli_out("{\"bench\":\"peak\",\"kernel\":\"%s\",\"dtype\":\"%s\"%s%s,\"workgroups\":%u,"
			"\"threads\":%u,\"iters\":%u,\"reps\":%u,\"gpu_us\":%.1f,\"tflops\":%.4g,"
			"\"tflops_best\":%.4g,\"registers\":%s,\"max_rel_err\":%s,\"mismatches\":%" PRIu64
			",\"check\":\"exact\",\"ok\":%s,\"device\":\"%s\"}\n",
			l->kernel, l->dtype, shape_json, extra_json, l->groups, l->threads, l->iters, l->reps,
			l->med_us, tf, best, regs, err, l->chk.mismatches, l->ok ? "true" : "false", r->device);
		return;
	}
	cli_out("%-11s %-5s %-16s %6u %8u %11.1f %9.2f %9.2f %5s  %s\n", l->kernel, l->dtype, l->config, l->groups,
		l->iters, l->med_us, tf, best, regs, l->ok ? "ok" : "MISMATCH");
	if (!l->ok)
		cli_out("    %" PRIu64 " values differ from the reference, the first at %" PRIu64
			", max_rel_err %s\n",
			l->chk.mismatches, l->chk.first_bad, err);
}

static void print_unsupported(const pk_run *r, const char *kernel, const char *dtype, const char *why)
{
	char w[1024];
	cli_json_escape(w, sizeof(w), why);
	if (r->o->json)
		cli_out("{\"bench\":\"peak\",\"kernel\":\"%s\",\"dtype\":\"%s\",\"unsupported\":\"%s\","
			"\"device\":\"%s\"}\n",
			kernel, dtype, w, r->device);
	else
		cli_out("%-11s %-5s unsupported: needs %s\n", kernel, dtype, why);
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* What a microkernel's timed loop dispatches: the pipeline, its buffers,
 * its push constants with the loop count at word 0. */
typedef struct pk_job {
	const peak_pipe *pipe;
	peak_buf *bufs[PEAK_MAX_BINDINGS];
	uint32_t push[4];
	uint32_t max_iters;
} pk_job;

/* Calibrate iters to about --ms per dispatch (within max_iters), then time
 * the reps. 0, or -1 with err. */
static int time_job(pk_run *r, pk_job *j, pk_line *l, char *err, size_t errlen)
{
	const double target_us = r->o->ms * 1e3;
	uint32_t iters = j->max_iters < 4 ? j->max_iters : 4;
	double us = 0;
	/* round 0 is a warm-up: a first dispatch can carry one-off costs
	 * (a driver finishing the pipeline, starting threads) */
	for (int round = 0; round < 7; round++) {
		j->push[0] = iters;
		if (peak_dispatch(&r->v, j->pipe, j->bufs, j->push, l->groups, &us, err, errlen) != 0)
			return -1;
		if (round == 0)
			continue;
		if (us >= target_us * 0.5 || iters >= j->max_iters)
			break;
		/* at most ×64 a round */
		double f = target_us / (us > 1 ? us : 1);
		f = f > 64 ? 64 : f;
		const double next = ceil(iters * f);
		iters = next >= j->max_iters ? j->max_iters : (uint32_t)next;
	}
	l->iters = iters;
	l->reps = (unsigned)r->o->reps;
	double t[1000];
	for (unsigned i = 0; i < l->reps; i++)
		if (peak_dispatch(&r->v, j->pipe, j->bufs, j->push, l->groups, &t[i], err, errlen) != 0)
			return -1;
	qsort(t, l->reps, sizeof(t[0]), cmp_double);
	l->med_us = l->reps % 2 ? t[l->reps / 2] : (t[l->reps / 2 - 1] + t[l->reps / 2]) / 2;
	l->min_us = t[0];
	l->registers = j->pipe->registers;
	return 0;
}

/* Read n floats of b back and compare them with want (period values). */
static int check_output(pk_run *r, peak_buf *b, uint64_t n, const double *want, uint64_t period, pk_line *l,
			char *err, size_t errlen)
{
	float *got = malloc(n * sizeof(float));
	if (!got) {
		snprintf(err, errlen, "out of memory reading back %" PRIu64 " values", n);
		return -1;
	}
	int rc = peak_buf_download(&r->v, b, 0, got, n * sizeof(float), err, errlen);
	if (rc == 0) {
		double mx = 0;
		for (uint64_t i = 0; i < period; i++)
			mx = fmax(mx, fabs(want[i]));
		memset(&l->chk, 0, sizeof(l->chk));
		peak_check_run(&l->chk, got, n, want, period, mx);
		l->ok = l->chk.mismatches == 0;
		r->failed_check |= !l->ok;
	}
	free(got);
	return rc;
}

static uint32_t groups_for(const pk_run *r)
{
	const uint64_t sms = r->v.sm_count ? r->v.sm_count : r->v.cpu ? 2 : PK_DEFAULT_SMS;
	const uint64_t g = sms * r->o->wgs_per_sm;
	const uint64_t cap = r->v.dev.props.limits.maxComputeWorkGroupCount[0];
	return (uint32_t)(g < cap ? g : cap);
}

/* ---- the microkernels ---- */

static int run_fma(pk_run *r, uint32_t chains, bool outer, char *err, size_t errlen)
{
	const char *kname = pk_kernel_name[outer ? PK_FMA_OUTER : PK_FMA];
	const kreg_entry *e = kreg_find("bench_peak_fma", "f32", "fma");
	if (!e) {
		print_unsupported(r, kname, "f32", "bench_peak_fma, which this build left out");
		return 0;
	}
	pk_line l = {.kernel = kname, .dtype = "f32", .groups = groups_for(r), .threads = VKG_PEAK_FMA_WG};
	if (outer)
		snprintf(l.config, sizeof(l.config), "%ux8 (chains %u)", chains / 2, chains);
	else
		snprintf(l.config, sizeof(l.config), "chains %u", chains);
	const uint64_t n = (uint64_t)l.groups * VKG_PEAK_FMA_WG;
	l.flops_per_iter = (double)n * VKG_PEAK_FMA_UNROLL * chains * 4 * 2;
	const uint32_t spec[2] = {chains, outer ? 1 : 0};
	const VkSpecializationMapEntry me[2] = {{1, 0, sizeof(uint32_t)}, {2, sizeof(uint32_t), sizeof(uint32_t)}};
	const VkSpecializationInfo si = {2, me, sizeof(spec), spec};
	peak_pipe p;
	peak_buf out = {0};
	int rc = peak_pipe_create(&r->v, &p, e, VKG_BINDINGS_PEAK_FMA, sizeof(kiface_peak_fma), &si, err, errlen);
	if (rc == 0)
		rc = peak_buf_create(&r->v, &out, n * sizeof(float), err, errlen);
	if (rc == 0) {
		const float one = 1.0f;
		uint32_t bits;
		memcpy(&bits, &one, sizeof(bits));
		pk_job j = {.pipe = &p, .bufs = {&out}, .push = {0, bits, bits, 0 /* 0.0f */},
			    .max_iters = peak_fma_max_iters(chains, VKG_PEAK_FMA_UNROLL)};
		rc = time_job(r, &j, &l, err, errlen);
	}
	if (rc == 0) {
		/* invocation t's value depends on t mod 256 only */
		double want[256];
		for (uint32_t t = 0; t < 256; t++)
			want[t] = peak_fma_expect(t, chains, VKG_PEAK_FMA_UNROLL, l.iters);
		rc = check_output(r, &out, n, want, 256, &l, err, errlen);
	}
	if (rc == 0) {
		char extra[48];
		if (outer)
			snprintf(extra, sizeof(extra), ",\"chains\":%u,\"tile\":[%u,8]", chains, chains / 2);
		else
			snprintf(extra, sizeof(extra), ",\"chains\":%u", chains);
		print_line(r, &l, "", extra);
	}
	peak_buf_destroy(&r->v, &out);
	if (p.pipe || p.layout || p.dsl)
		peak_pipe_destroy(&r->v, &p);
	return rc;
}

/* The fragments (as f16 or bf16) and the accumulators' starts (f32) into
 * ab and init. */
static int mma_inputs(pk_run *r, const peak_mma_geom *g, proto_dtype t, peak_buf *ab, peak_buf *init, char *err,
		      size_t errlen)
{
	const size_t na = (size_t)g->fa * g->m * g->k + (size_t)g->fb * g->k * g->n;
	const size_t ni = (size_t)g->fa * g->fb * g->m * g->n;
	uint16_t *h = malloc(na * sizeof(*h));
	float *f = malloc(ni * sizeof(*f));
	int rc = -1;
	if (!h || !f) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	size_t at = 0;
	for (uint32_t i = 0; i < g->fa; i++)
		for (uint32_t row = 0; row < g->m; row++)
			for (uint32_t col = 0; col < g->k; col++) {
				const float v = (float)peak_mma_a(g, i, row, col);
				h[at++] = t == PROTO_BF16 ? vkg_ref_bf16_from_float(v) : vkg_ref_f16_from_float(v);
			}
	for (uint32_t j = 0; j < g->fb; j++)
		for (uint32_t row = 0; row < g->k; row++)
			for (uint32_t col = 0; col < g->n; col++) {
				const float v = (float)peak_mma_b(g, j, row, col);
				h[at++] = t == PROTO_BF16 ? vkg_ref_bf16_from_float(v) : vkg_ref_f16_from_float(v);
			}
	for (uint32_t i = 0; i < g->fa * g->fb; i++)
		for (uint32_t e = 0; e < g->m * g->n; e++)
			f[i * g->m * g->n + e] = (float)peak_mma_init(g, i, e / g->n, e % g->n);
	rc = peak_buf_from(&r->v, ab, h, na * sizeof(*h), err, errlen);
	if (rc == 0)
		rc = peak_buf_from(&r->v, init, f, ni * sizeof(*f), err, errlen);
out:
	free(h);
	free(f);
	return rc;
}

/* Why mma_* cannot run for dtype t here ("" when it can). */
static void mma_why(const pk_run *r, proto_dtype t, const peak_mma_geom *g, int kern, char *why, size_t n)
{
	why[0] = 0;
	if (!r->v.dev.cmk.ok[t]) {
		snprintf(why, n, "%s", r->v.dev.cmk.why[t]);
		return;
	}
	if (!kreg_find("bench_peak_mma", proto_dtype_name(t), "mma")) {
		snprintf(why, n, "bench_peak_mma (%s), which this build left out (no shader compiler here "
			 "had GL_KHR_cooperative_matrix%s)", proto_dtype_name(t),
			 t == PROTO_BF16 ? " and GL_EXT_bfloat16" : "");
		return;
	}
	/* the shared tiles of shaders/bench_peak_mma.comp */
	const uint64_t a_tile = kern == PK_MMA_SMEM_DW ? (uint64_t)VKG_PEAK_SLICE_K * (2ull * g->fa * g->m + 8) * 2
						       : 2ull * g->fa * g->m * (VKG_PEAK_SLICE_K + 8) * 2;
	const uint64_t b_tile = (uint64_t)VKG_PEAK_SLICE_K * (2ull * g->fb * g->n + 8) * 2;
	if (kern != PK_MMA_REGS && a_tile + b_tile > r->v.dev.props.limits.maxComputeSharedMemorySize)
		snprintf(why, n, "%llu bytes of shared memory (the device offers %u)",
			 (unsigned long long)(a_tile + b_tile), r->v.dev.props.limits.maxComputeSharedMemorySize);
}

static int run_mma(pk_run *r, proto_dtype t, uint32_t accs, int kern, char *err, size_t errlen)
{
	const char *kname = pk_kernel_name[kern];
	const cmk_shape s = r->v.dev.cmk.shape[t];
	const uint32_t fa = accs >= 16 ? 4 : accs >= 4 ? 2 : 1;
	peak_mma_geom g = {.m = s.m, .n = s.n, .k = s.k, .fa = fa, .fb = accs / fa,
			   .steps = s.k ? VKG_PEAK_SLICE_K / s.k : 0};
	char why[256];
	mma_why(r, t, &g, kern, why, sizeof(why));
	if (why[0]) {
		print_unsupported(r, kname, proto_dtype_name(t), why);
		return 0;
	}
	pk_line l = {.kernel = kname, .dtype = proto_dtype_name(t), .groups = groups_for(r),
		     .threads = VKG_PEAK_MMA_SUBGROUPS * r->v.subgroup};
	snprintf(l.config, sizeof(l.config), "%ux%ux%u accs %u", s.m, s.n, s.k, accs);
	const uint64_t subgroups = (uint64_t)l.groups * VKG_PEAK_MMA_SUBGROUPS;
	const uint64_t per_sg = (uint64_t)accs * s.m * s.n;
	l.flops_per_iter = (double)subgroups * g.steps * accs * 2.0 * s.m * s.n * s.k;
	/* constant_id i: CM_M, CM_N, CM_K, FA, FB, SMEM, the workgroup size, A_KMAJOR */
	const uint32_t spec[8] = {s.m, s.n, s.k, g.fa, g.fb, kern != PK_MMA_REGS, l.threads, kern == PK_MMA_SMEM_DW};
	VkSpecializationMapEntry me[8];
	for (uint32_t i = 0; i < 8; i++)
		me[i] = (VkSpecializationMapEntry){i, i * sizeof(uint32_t), sizeof(uint32_t)};
	const VkSpecializationInfo si = {8, me, sizeof(spec), spec};
	const kreg_entry *e = kreg_find("bench_peak_mma", proto_dtype_name(t), "mma");
	peak_pipe p = {0};
	peak_buf ab = {0}, init = {0}, out = {0};
	double *want = NULL;
	int rc = peak_pipe_create(&r->v, &p, e, VKG_BINDINGS_PEAK_MMA, sizeof(kiface_peak_mma), &si, err, errlen);
	if (rc == 0)
		rc = mma_inputs(r, &g, t, &ab, &init, err, errlen);
	if (rc == 0)
		rc = peak_buf_create(&r->v, &out, subgroups * per_sg * sizeof(float), err, errlen);
	if (rc == 0) {
		pk_job j = {.pipe = &p, .bufs = {&ab, &init, &out}, .max_iters = peak_mma_max_iters(&g)};
		rc = time_job(r, &j, &l, err, errlen);
	}
	if (rc == 0 && !(want = malloc(per_sg * sizeof(*want)))) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	if (rc == 0) {
		for (uint32_t i = 0; i < accs; i++)
			peak_mma_expect(&g, i, l.iters, want + (uint64_t)i * s.m * s.n);
		rc = check_output(r, &out, subgroups * per_sg, want, per_sg, &l, err, errlen);
	}
	if (rc == 0) {
		char shape[64], extra[64];
		snprintf(shape, sizeof(shape), ",\"shape\":[%u,%u,%u]", s.m, s.n, s.k);
		snprintf(extra, sizeof(extra), ",\"accs\":%u,\"frags\":[%u,%u]", accs, g.fa, g.fb);
		print_line(r, &l, shape, extra);
	}
	free(want);
	peak_buf_destroy(&r->v, &out);
	peak_buf_destroy(&r->v, &init);
	peak_buf_destroy(&r->v, &ab);
	peak_pipe_destroy(&r->v, &p);
	return rc;
}

/* The f16/bf16 encoding of an exactly representable small integer. */
static uint16_t half_of(proto_dtype t, double v)
{
	return t == PROTO_BF16 ? vkg_ref_bf16_from_float((float)v) : vkg_ref_f16_from_float((float)v);
}

/* a (VKG_PEAK_NV2_COPIES copies of A over all VKG_PEAK_NV2_SLICES slices,
 * as [m][k] or, a_kmajor, [k][m]), b (as many of B, [k][n]) and init (f32
 * m×n), as shaders/bench_peak_nv2.comp reads them. */
static int nv2_inputs(pk_run *r, const peak_nv2_geom *g, proto_dtype t, bool a_kmajor, peak_buf *a, peak_buf *b,
		      peak_buf *init, char *err, size_t errlen)
{
	const uint64_t C = VKG_PEAK_NV2_COPIES, K = (uint64_t)VKG_PEAK_NV2_SLICES * g->k;
	const size_t na = C * g->m * K, nb = K * C * g->n, ni = (size_t)g->m * g->n;
	uint16_t *ha = malloc(na * sizeof(*ha)), *hb = malloc(nb * sizeof(*hb));
	float *f = malloc(ni * sizeof(*f));
	int rc = -1;
	if (!ha || !hb || !f) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (uint64_t c = 0; c < C; c++)
		for (uint64_t m = 0; m < g->m; m++)
			for (uint64_t k = 0; k < K; k++)
				ha[a_kmajor ? k * C * g->m + c * g->m + m : (c * g->m + m) * K + k] =
					half_of(t, peak_nv2_a((uint32_t)m, (uint32_t)k));
	for (uint64_t k = 0; k < K; k++)
		for (uint64_t c = 0; c < C; c++)
			for (uint64_t n = 0; n < g->n; n++)
				hb[(k * C + c) * g->n + n] = half_of(t, peak_nv2_b((uint32_t)k, (uint32_t)n));
	for (size_t e = 0; e < ni; e++)
		f[e] = (float)peak_nv2_init((uint32_t)(e / g->n), (uint32_t)(e % g->n));
	rc = peak_buf_from(&r->v, a, ha, na * sizeof(*ha), err, errlen);
	if (rc == 0)
		rc = peak_buf_from(&r->v, b, hb, nb * sizeof(*hb), err, errlen);
	if (rc == 0)
		rc = peak_buf_from(&r->v, init, f, ni * sizeof(*f), err, errlen);
out:
	free(ha);
	free(hb);
	free(f);
	return rc;
}

/* Why nv2_* cannot run for dtype t here ("" when it can); else its tiling:
 * VKGRAD_NV2_TILE (as the daemon takes it for linear_coopmat_nv2_gemm) or
 * NV2_TILE_DEFAULT, fitted to the device's workgroup-scope shapes by
 * daemon/nv2_tile.c, into *tile. */
static void nv2_why(const pk_run *r, proto_dtype t, int kern, nv2_tile *tile, char *why, size_t n)
{
	const char *dn = proto_dtype_name(t);
	why[0] = 0;
	if (!r->v.dev.cmk.nv2_ok[t]) {
		snprintf(why, n, "%s", r->v.dev.cmk.nv2_why[t]);
		return;
	}
	if (!kreg_find("bench_peak_nv2", dn, "nv2")) {
		snprintf(why, n, "bench_peak_nv2 (%s), which this build left out (no shader compiler here had "
			 "GL_NV_cooperative_matrix2%s)", dn, t == PROTO_BF16 ? " and GL_EXT_bfloat16" : "");
		return;
	}
	const char *env = getenv(NV2_TILE_ENV);
	const char *name = env ? NV2_TILE_ENV : "the default tiling", *val = env ? env : NV2_TILE_DEFAULT;
	char err[640];
	if (nv2_tile_parse(val, tile, err, sizeof(err)) != 0 ||
	    nv2_tile_fit(tile, &r->v.dev.cmk.nv2[t], name, val, dn, err, sizeof(err)) != 0) {
		snprintf(why, n, "a workgroup-scope shape for %s", err);
		return;
	}
	/* shaders/bench_peak_nv2.comp's shared copies (one of A, one of B) */
	const uint64_t sh = (uint64_t)VKG_PEAK_NV2_SMEM_SLICES * tile->bk * (tile->bm + tile->bn) * 2;
	if (kern == PK_NV2_SMEM && sh > r->v.dev.props.limits.maxComputeSharedMemorySize)
		snprintf(why, n, "%llu bytes of shared memory (the device offers %u)", (unsigned long long)sh,
			 r->v.dev.props.limits.maxComputeSharedMemorySize);
}

static int run_nv2(pk_run *r, proto_dtype t, int kern, char *err, size_t errlen)
{
	const char *kname = pk_kernel_name[kern];
	nv2_tile tile;
	char why[768];
	nv2_why(r, t, kern, &tile, why, sizeof(why));
	if (why[0]) {
		print_unsupported(r, kname, proto_dtype_name(t), why);
		return 0;
	}
	/* constant_id 4, LOAD: 0 regs, 1 tensor loads from a and b, 2 from shared memory */
	const uint32_t load = kern == PK_NV2_REGS ? 0 : kern == PK_NV2_SMEM ? 2 : 1;
	const bool a_kmajor = kern == PK_NV2_LOAD_DW;
	/* the k-slices the steps cycle through: regs slice 0 only, smem those in shared memory */
	const uint32_t slices = load == 1 ? VKG_PEAK_NV2_SLICES : load == 2 ? VKG_PEAK_NV2_SMEM_SLICES : 1;
	const peak_nv2_geom g = {.m = tile.bm, .n = tile.bn, .k = tile.bk, .slices = slices,
				 .steps = VKG_PEAK_NV2_SLICES};
	pk_line l = {.kernel = kname, .dtype = proto_dtype_name(t), .groups = groups_for(r), .threads = tile.threads};
	snprintf(l.config, sizeof(l.config), "%ux%ux%u", tile.bm, tile.bn, tile.bk);
	const uint64_t per_wg = (uint64_t)tile.bm * tile.bn;
	l.flops_per_iter = (double)l.groups * g.steps * 2.0 * tile.bm * tile.bn * tile.bk;
	/* constant_id 0..5: THREADS, BM, BN, BK, LOAD, A_KMAJOR */
	const uint32_t spec[6] = {tile.threads, tile.bm, tile.bn, tile.bk, load, a_kmajor};
	VkSpecializationMapEntry me[6];
	for (uint32_t i = 0; i < 6; i++)
		me[i] = (VkSpecializationMapEntry){i, i * sizeof(uint32_t), sizeof(uint32_t)};
	const VkSpecializationInfo si = {6, me, sizeof(spec), spec};
	const kreg_entry *e = kreg_find("bench_peak_nv2", proto_dtype_name(t), "nv2");
	peak_pipe p = {0};
	peak_buf a = {0}, b = {0}, init = {0}, out = {0};
	double *want = NULL;
	int rc = peak_pipe_create(&r->v, &p, e, VKG_BINDINGS_PEAK_NV2, sizeof(kiface_peak_nv2), &si, err, errlen);
	if (rc == 0)
		rc = nv2_inputs(r, &g, t, a_kmajor, &a, &b, &init, err, errlen);
	if (rc == 0)
		rc = peak_buf_create(&r->v, &out, l.groups * per_wg * sizeof(float), err, errlen);
	if (rc == 0) {
		pk_job j = {.pipe = &p, .bufs = {&a, &b, &init, &out}, .push = {0, 0 /* zero */},
			    .max_iters = peak_nv2_max_iters(&g)};
		rc = time_job(r, &j, &l, err, errlen);
	}
	if (rc == 0 && !(want = malloc(per_wg * sizeof(*want)))) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	if (rc == 0) {
		peak_nv2_expect(&g, l.iters, want);
		rc = check_output(r, &out, l.groups * per_wg, want, per_wg, &l, err, errlen);
	}
	if (rc == 0) {
		char shape[64], extra[96];
		snprintf(shape, sizeof(shape), ",\"shape\":[%u,%u,%u]", tile.bm, tile.bn, tile.bk);
		snprintf(extra, sizeof(extra), ",\"slices\":%u,\"steps\":%u,\"copies\":%u,\"a_kmajor\":%s",
			 g.slices, g.steps, VKG_PEAK_NV2_COPIES, a_kmajor ? "true" : "false");
		print_line(r, &l, shape, extra);
	}
	free(want);
	peak_buf_destroy(&r->v, &out);
	peak_buf_destroy(&r->v, &init);
	peak_buf_destroy(&r->v, &b);
	peak_buf_destroy(&r->v, &a);
	peak_pipe_destroy(&r->v, &p);
	return rc;
}

/* ---- the command ---- */

/* The copy bandwidth (peak_copy.h): both ways, copy_gbps the larger. */
static int run_copy(pk_run *r, char *err, size_t errlen)
{
	peak_copy_result c;
	if (peak_copy_measure(&r->v, 0, (unsigned)r->o->reps, &c, err, errlen) != 0)
		return -1;
	if (!c.ok)
		r->failed_check = true;
	const peak_copy_way *d = &c.way[PEAK_COPY_DMA], *s = &c.way[PEAK_COPY_SHADER];
	if (r->o->json) {
		cli_out("{\"bench\":\"peak\",\"kernel\":\"copy\",\"bytes\":%" PRIu64 ",\"reps\":%u,"
			"\"gpu_us\":%.1f,\"copy_gbps\":%.1f,\"copy_gbps_best\":%.1f,\"copy_by\":\"%s\","
			"\"copy_dma_gbps\":%.1f,\"copy_dma_gbps_best\":%.1f,\"dma_gpu_us\":%.1f,\"dma_ok\":%s,"
			"\"copy_shader_gbps\":%.1f,\"copy_shader_gbps_best\":%.1f,\"shader_gpu_us\":%.1f,"
			"\"shader_workgroups\":%u,\"shader_ok\":%s,\"ok\":%s,\"device\":\"%s\"}\n",
			c.bytes, c.reps, c.med_us, c.gbps, c.best_gbps, peak_copy_way_name(c.best), d->gbps,
			d->best_gbps, d->med_us, d->ok ? "true" : "false", s->gbps, s->best_gbps, s->med_us,
			c.groups, s->ok ? "true" : "false", c.ok ? "true" : "false", r->device);
		return 0;
	}
	for (int w = 0; w < PEAK_COPY_WAYS; w++) {
		const peak_copy_way *y = &c.way[w];
		char groups[16] = "-";
		if (w == PEAK_COPY_SHADER)
			snprintf(groups, sizeof(groups), "%u", c.groups);
		cli_out("%-11s %-5s %-16s %6s %8s %11.1f %9s %9s %5s  %s  %s %.1f GB/s (best %.1f)\n", "copy", "-",
			w == PEAK_COPY_DMA ? "vkCmdCopyBuffer" : "shader uvec4", groups, "-", y->med_us, "-", "-",
			"-", y->ok ? "ok" : "MISMATCH", w == PEAK_COPY_DMA ? "copy_dma_gbps" : "copy_shader_gbps",
			y->gbps, y->best_gbps);
		if (!y->ok)
			cli_out("    %zu bytes read back at the buffer's two ends differ from the source\n",
				y->bad_bytes);
	}
	cli_out("copy_gbps %.1f (best %.1f), the %s copy: 2 x %" PRIu64 " bytes / GPU time, the larger of "
		"the two\n", c.gbps, c.best_gbps, peak_copy_way_name(c.best), c.bytes);
	return 0;
}

static int run_all(pk_run *r)
{
	char err[512] = "";
	if (r->o->kern[PK_COPY] && run_copy(r, err, sizeof(err)) != 0) {
		cli_errf("vkgrad: bench --peak: copy: %s\n", err);
		return CLI_EXIT_DAEMON;
	}
	const proto_dtype dts[2] = {PROTO_F16, PROTO_BF16};
	for (int k = PK_MMA_REGS; k <= PK_MMA_SMEM_DW; k++)
		for (int d = 0; d < 2 && r->o->kern[k]; d++)
			for (unsigned a = 0; a < r->o->naccs && r->o->dtype[dts[d]]; a++) {
				if (run_mma(r, dts[d], r->o->accs[a], k, err, sizeof(err)) != 0) {
					cli_errf("vkgrad: bench --peak: %s %s accs %u: %s\n", pk_kernel_name[k],
						 proto_dtype_name(dts[d]), r->o->accs[a], err);
					return CLI_EXIT_DAEMON;
				}
				/* one unsupported line per kernel and dtype is enough */
				if (!r->v.dev.cmk.ok[dts[d]] || !kreg_find("bench_peak_mma", proto_dtype_name(dts[d]), "mma"))
					break;
			}
	for (int k = PK_FMA; k <= PK_FMA_OUTER; k++)
		for (unsigned c = 0; c < r->o->nchains && r->o->kern[k]; c++)
			if ((k == PK_FMA || r->o->chains[c] % 2 == 0) && run_fma(r, r->o->chains[c], k == PK_FMA_OUTER, err, sizeof(err)) != 0) {
				cli_errf("vkgrad: bench --peak: %s chains %u: %s\n", pk_kernel_name[k],
					 r->o->chains[c], err);
				return CLI_EXIT_DAEMON;
			}
	for (int k = PK_NV2_REGS; k <= PK_NV2_SMEM; k++)
		for (int d = 0; d < 2 && r->o->kern[k]; d++)
			if (r->o->dtype[dts[d]] && run_nv2(r, dts[d], k, err, sizeof(err)) != 0) {
				cli_errf("vkgrad: bench --peak: %s %s: %s\n", pk_kernel_name[k],
					 proto_dtype_name(dts[d]), err);
				return CLI_EXIT_DAEMON;
			}
	return 0;
}

int cli_bench_peak(int argc, char **argv)
{
	pk_opts o;
	int rc = pk_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	pk_run *r = calloc(1, sizeof(*r));
	if (!r)
		return CLI_EXIT_DAEMON;
	r->o = &o;
	char err[512];
	if (peak_vk_open(&r->v, PK_STAGE_BYTES, err, sizeof(err)) != 0) {
		cli_errf("vkgrad: bench --peak: %s\n", err);
		free(r);
		return CLI_EXIT_DAEMON;
	}
	if (r->v.cpu) {
		o.ms = o.ms_set ? o.ms : 30;
		o.reps = o.reps_set ? o.reps : 2;
	}
	cli_json_escape(r->device, sizeof(r->device), r->v.dev.props.deviceName);
	if (!o.json) {
		cli_out("device: %s; SMs %s%u; subgroup %u; %.0f ms per dispatch, %" PRIu64 " reps\n",
			r->v.dev.props.deviceName, r->v.sm_count ? "" : "unknown, taken as ",
			r->v.sm_count ? r->v.sm_count : r->v.cpu ? 2 : PK_DEFAULT_SMS, r->v.subgroup, o.ms, o.reps);
		cli_out("%-11s %-5s %-16s %6s %8s %11s %9s %9s %5s  %s\n", "kernel", "dtype", "config", "wgs", "iters",
			"gpu_us(med)", "TFLOP/s", "best", "regs", "check");
	}
	rc = run_all(r);
	const unsigned verr = atomic_load(&r->v.dev.validation_errors);
	if (rc == 0 && r->v.dev.validation && verr) {
		cli_errf("vkgrad: bench --peak: the validation layer reported %u error(s)\n", verr);
		rc = CLI_EXIT_DAEMON;
	}
	if (rc == 0 && r->failed_check)
		rc = CLI_EXIT_CHECK;
	peak_vk_close(&r->v);
	free(r);
	return rc;
}
