/* client/cli_run.c — `vkgrad run`: one job shape in one storage dtype,
 * repeated, optionally checked against the float64 CPU reference. */
#include "cli.h"
#include "msg.h"
#include "ref.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char run_usage[] =
	"usage: vkgrad [--socket PATH] run --batch B --in I --out O [--outputs dw,db,dx]\n"
	"                [--dtype f32|f16|bf16] [--variant V] [--accumulate] [--repeat N]\n"
	"                [--check] [--seed S] [--quiet]\n"
	"  --outputs    which gradients to compute (default dw,db,dx)\n"
	"  --dtype D    storage type of every tensor: f32 (default), f16, bf16; the\n"
	"               random inputs are rounded to it, the daemon computes in f32\n"
	"               and rounds each output once\n"
	"  --accumulate add to the outputs' contents instead of overwriting them\n"
	"  --variant V  force the kernel family: auto (default), generic, tiled,\n"
	"               tiled128, splitk, splitk128 (split-K on the 128 tile, dW and dX),\n"
	"               narrow, coopmat (f16 only), coopmat_khr, coopmat_khr_splitk\n"
	"               (split-K of dW/db on the tensor cores), coopmat_nv2 (f16, bf16),\n"
	"               coopmat_khr_f32x3 (f32 on bf16 tensor cores),\n"
	"               coopmat_khr_f32_splitk (its split-K of dW/db, f32)\n"
	"  --repeat N   run the job N times (default 1)\n"
	"  --check      compare with a float64 CPU reference computed from the stored\n"
	"               (rounded) inputs; exit 1 on a mismatch (pass:\n"
	"               max|got-want| / max|want| <= " CLI_TOL_ALL_TEXT ")\n"
	"  --seed S     seed of the pseudo-random inputs (default 1)\n"
	"  --quiet      print only errors and mismatches\n";

typedef struct run_opts {
	uint64_t batch, in, out, repeat, seed;
	unsigned outputs;
	bool accumulate, check, quiet;
	const char *variant;
	proto_dtype dtype;
} run_opts;

/* The dtype for a name, or -1. */
static int dtype_parse(const char *s)
{
	for (int d = 0; d < PROTO_DTYPE_COUNT; d++)
		if (strcmp(s, proto_dtype_name((proto_dtype)d)) == 0)
			return d;
	return -1;
}

static int run_parse(int argc, char **argv, run_opts *o)
{
	static const struct option opts[] = {
		{"batch", required_argument, NULL, 'b'},
		{"in", required_argument, NULL, 'i'},
		{"out", required_argument, NULL, 'o'},
		{"outputs", required_argument, NULL, 'O'},
		{"accumulate", no_argument, NULL, 'a'},
		{"repeat", required_argument, NULL, 'r'},
		{"check", no_argument, NULL, 'c'},
		{"seed", required_argument, NULL, 's'},
		{"quiet", no_argument, NULL, 'q'},
		{"variant", required_argument, NULL, 'V'},
		{"dtype", required_argument, NULL, 'd'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	*o = (run_opts){.repeat = 1, .seed = 1, .outputs = CLI_OUT_ALL, .dtype = PROTO_F32};
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "+b:i:o:O:ar:cs:qV:d:h", opts, NULL)) != -1;) {
		int bad = 0;
		switch (c) {
		case 'b': bad = cli_parse_u64("--batch", optarg, 1, UINT32_MAX, &o->batch); break;
		case 'i': bad = cli_parse_u64("--in", optarg, 1, UINT32_MAX, &o->in); break;
		case 'o': bad = cli_parse_u64("--out", optarg, 1, UINT32_MAX, &o->out); break;
		case 'r': bad = cli_parse_u64("--repeat", optarg, 1, 1000000, &o->repeat); break;
		case 's': bad = cli_parse_u64("--seed", optarg, 0, UINT64_MAX, &o->seed); break;
		case 'O':
			if (cli_outputs_parse(optarg, &o->outputs) != 0)
				return cli_usage_fail("run: --outputs takes a list of dw, db, dx "
						      "separated by commas (got '%s')",
						      optarg);
			break;
		case 'a': o->accumulate = true; break;
		case 'c': o->check = true; break;
		case 'q': o->quiet = true; break;
		case 'V':
			if (proto_variant_parse(optarg) < 0) {
				char names[192];
				proto_variant_list(names, sizeof(names), -1, NULL, NULL);
				return cli_usage_fail("run: --variant takes one of %s (got '%s')", names,
						      optarg);
			}
			o->variant = optarg;
			break;
		case 'd': {
			int d = dtype_parse(optarg);
			if (d < 0)
				return cli_usage_fail("run: --dtype takes f32, f16 or bf16 (got '%s')",
						      optarg);
			o->dtype = (proto_dtype)d;
			break;
		}
		case 'h': fputs(run_usage, stdout); return -1;
		default:
			return cli_usage_fail("run: bad option or missing value: '%s'",
					      argv[optind - 1]);
		}
		if (bad)
			return CLI_EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage_fail("run: unexpected argument '%s'", argv[optind]);
	if (!o->batch || !o->in || !o->out)
		return cli_usage_fail("run: --batch, --in and --out are required");
	return 0;
}

int cli_run(const cli_ctx *ctx, int argc, char **argv)
{
	run_opts o;
	int rc = run_parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? CLI_EXIT_OK : rc;

	cli_task t;
	char why[160], outs[16];
	if (cli_task_init(&t, o.batch, o.in, o.out, o.outputs, o.accumulate, o.dtype, why,
			  sizeof(why)))
		return cli_usage_fail("run: %s", why);
	t.variant = o.variant;
	cli_outputs_name(o.outputs, outs);
	const char *dname = proto_dtype_name(o.dtype);
	const double tol = vkg_ref_tolerance(o.dtype);
	const char *tol_text = vkg_ref_tolerance_text(o.dtype);

	vkg_error err;
	vkg_client *c = vkg_connect(ctx->socket, &err);
	if (!c)
		return cli_fail(&err);
	if (cli_task_map(&t, c, &err) != 0) {
		rc = cli_fail(&err);
		goto out_close;
	}
	if (!o.quiet) {
		printf("run: B×I×O=%" PRIu64 "×%" PRIu64 "×%" PRIu64 " %s, outputs %s (%s), "
		       "%" PRIu64 " time%s, seed %" PRIu64 "\n",
		       o.batch, o.in, o.out, dname, outs,
		       o.accumulate ? "accumulated onto their contents" : "overwritten",
		       o.repeat, o.repeat == 1 ? "" : "s", o.seed);
		printf("     region %" PRIu64 " of %zu bytes:", t.region, t.size);
		static const char *const nm[CLI_NT] = {"x", "dy", "w", "dw", "db", "dx"};
		for (int s = 0; s < CLI_NT; s++)
			if (t.present[s])
				printf(" %s@%zu", nm[s], t.off[s]);
		printf("\n");
		if (o.check)
			printf("     check: float64 CPU reference; pass when max_rel_err = "
			       "max|got-want| / max|want| <= %s (%s)\n",
			       tol_text, dname);
	}
	cli_task_fill_inputs(&t, o.seed);
	cli_task_fill_outputs(&t, o.seed + 1);

	uint64_t failed = 0;
	rc = CLI_EXIT_OK;
	for (uint64_t r = 0; r < o.repeat; r++) {
		/* Fresh garbage in the outputs shows each run really overwrites; for
		 * accumulate the base is whatever the previous run left. */
		if (!o.accumulate && r > 0)
			cli_task_fill_outputs(&t, o.seed + 1 + r);
		if (o.check && cli_task_snapshot(&t) != 0) {
			cli_errf("vkgrad: io: out of memory for the reference\n");
			rc = CLI_EXIT_DAEMON;
			break;
		}
		vkg_job job = cli_task_job(&t);
		uint64_t h, t0 = cli_now_us();
		vkg_result res = {0};
		if (vkg_submit(c, &job, &h, &err) != 0) {
			rc = cli_fail(&err);
			break;
		}
		/* the CPU reference runs while the daemon works */
		if (o.check && r == 0 && cli_task_reference(&t) != 0) {
			cli_errf("vkgrad: io: out of memory for the reference\n");
			rc = CLI_EXIT_DAEMON;
			break;
		}
		if (vkg_wait(c, h, -1, &res, &err) != 0) {
			rc = cli_fail(&err);
			break;
		}
		uint64_t wall = cli_now_us() - t0;
		char chk[192] = "", kern[40] = "";
		if (res.kernel_us) /* only when the daemon measured it */
			snprintf(kern, sizeof(kern), " kernel=%" PRIu64 "us", res.kernel_us);
		bool bad = false;
		if (o.check) {
			double e = cli_task_check(&t);
			bad = !(e <= tol);
			int n = snprintf(chk, sizeof(chk), "  max_rel_err=%.1e (tol %s) %s", e,
					 tol_text, bad ? "MISMATCH" : "ok");
			if (bad) {
				n += snprintf(chk + n, sizeof(chk) - (size_t)n, " [");
				const char *nm[CLI_NT] = {[CLI_DW] = "dw", [CLI_DB] = "db", [CLI_DX] = "dx"};
				const char *sep = "";
				for (int s = CLI_DW; s <= CLI_DX; s++) {
					if (!t.present[s])
						continue;
					n += snprintf(chk + n, sizeof(chk) - (size_t)n, "%s%s %.1e", sep,
						      nm[s], t.err[s]);
					sep = ", ";
				}
				snprintf(chk + n, sizeof(chk) - (size_t)n, "]");
			}
			failed += bad;
		}
		if (!o.quiet || bad)
			cli_out("job %" PRIu64 "/%" PRIu64 "  B×I×O=%" PRIu64 "×%" PRIu64 "×%" PRIu64
				" %s  outputs=%s%s%s  queued=%" PRIu64 "us gpu=%" PRIu64
				"us%s batch=%" PRIu64 "  round_trip=%" PRIu64 "us\n",
				r + 1, o.repeat, o.batch, o.in, o.out, dname, outs,
				o.accumulate ? " (accumulate)" : "", chk, res.queued_us, res.gpu_us,
				kern, res.batch_jobs, wall);
	}
	if (rc == CLI_EXIT_OK && o.check) {
		if (failed) {
			cli_out("run: %" PRIu64 " of %" PRIu64 " jobs did NOT match the reference\n",
				failed, o.repeat);
			rc = CLI_EXIT_CHECK;
		} else if (!o.quiet) {
			cli_out("run: all %" PRIu64 " job%s matched the float64 reference "
				"within %s (%s)\n",
				o.repeat, o.repeat == 1 ? "" : "s", tol_text, dname);
		}
	}
	cli_task_free(&t, c);
out_close:
	vkg_close(c);
	return rc;
}
