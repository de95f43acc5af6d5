/* client/cli_main.c — the vkgrad command-line tool: global options,
 * subcommand dispatch and usage (the helpers every subcommand uses are in
 * cli_util.c). */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: vkgrad [--socket PATH] COMMAND [OPTIONS]   (--socket may follow COMMAND too)\n"
	"\n"
	"Talk to vkgradd, the GPU daemon that computes linear-layer backward passes\n"
	"(dW = dYᵀ·X, db = Σ dY, dX = dY·W) for client processes.\n"
	"\n"
	"commands:\n"
	"  info [--json]        server, device, limits and kernels of the daemon\n"
	"  stats [--json]       the daemon's counters and latency histograms\n"
	"  stats --prometheus [--output FILE] [--scan DIR] [--start-idle] [SOCKET...]\n"
	"                       the same in Prometheus' text format (docs/metrics.md), of\n"
	"                       one or more daemons, optionally into FILE atomically\n"
	"  clients [--json]     the daemon's connections: pid, uid, name, jobs, GPU time,\n"
	"                       bytes registered\n"
	"  ping [--count N]     round-trip time of a ping request\n"
	"  run --batch B --in I --out O [--outputs dw,db,dx] [--dtype f32|f16|bf16]\n"
	"      [--variant V] [--accumulate] [--repeat N] [--check] [--seed S] [--quiet]\n"
	"                       run one job shape on random inputs; --check compares\n"
	"                       with a float64 CPU reference (tolerance " CLI_TOL_ALL_TEXT ")\n"
	"  demo [--clients N] [--jobs M] [--inflight K]\n"
	"                       N client processes (default 4) each run M checked jobs\n"
	"                       (default 4) of mixed shapes, K in flight (default 2)\n"
	"  bench [--scenario NAME] [--clients N] [--jobs M] [--inflight K] [--json]\n"
	"        [--direct | --compare] [--daemon PATH]\n"
	"                       latency and throughput of fixed scenarios (tiny_latency,\n"
	"                       tiny_throughput, narrow); without --socket on a private\n"
	"                       daemon; --direct runs the jobs in-process without the\n"
	"                       daemon, --compare both ways (see 'vkgrad bench --help')\n"
	"  bench --kernels [--shapes B,I,O;...] [--dtypes L] [--variants L] [--reps N]\n"
	"        [--outputs L] [--max-gflop X] [--json]\n"
	"                       kernel time, TFLOP/s, GB/s and max error of the full\n"
	"                       backward per shape, dtype and variant, one job in flight\n"
	"                       (see 'vkgrad bench --kernels --help')\n"
	"  bench --peak [--only LIST] [--dtypes L] [--accs L] [--chains L] [--ms X]\n"
	"        [--reps N] [--wgs-per-sm N] [--json]\n"
	"                       the MMA and FMA ceilings this device reaches through\n"
	"                       Vulkan, by microkernels run in this process\n"
	"                       (see 'vkgrad bench --peak --help')\n"
	"\n"
	"The socket: --socket PATH; else $VKGRAD_SOCKET; else $XDG_RUNTIME_DIR/vkgrad.sock\n"
	"when it exists (your own daemon: systemctl --user start vkgradd.socket); else the\n"
	"system daemon's /run/vkgrad/vkgrad.sock (docs/operations.md).\n"
	"\n"
	"exit status: 0 ok, 1 a check failed, 2 usage error, 3 daemon or connection error\n";

/* The global --socket, given after the command: taken out of argv (up to
 * a "--"), so the command's own parser never sees it. Not for bench,
 * whose --socket is its own (without it bench starts a private daemon).
 * Returns the new argc, or -1 (usage printed). */
static int lift_global_options(cli_ctx *ctx, int argc, char **argv)
{
	int o = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			while (i < argc)
				argv[o++] = argv[i++];
			break;
		}
		if (strcmp(a, "--socket") == 0) {
			if (i + 1 >= argc)
				return cli_usage_fail("%s needs a path", a), -1;
			ctx->socket = argv[++i];
		} else if (strncmp(a, "--socket=", 9) == 0) {
			ctx->socket = a + 9;
		} else {
			argv[o++] = argv[i];
		}
	}
	argv[o] = NULL;
	return o;
}

static const struct {
	const char *name;
	int (*fn)(const cli_ctx *ctx, int argc, char **argv);
} commands[] = {
	{"info", cli_info}, {"stats", cli_stats}, {"ping", cli_ping},
	{"run", cli_run},   {"demo", cli_demo}, {"bench", cli_bench},
	{"clients", cli_clients},
};

int main(int argc, char **argv)
{
	cli_ctx ctx = {0};
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(usage_text, stdout);
			return CLI_EXIT_OK;
		} else if (strcmp(a, "--version") == 0) {
			printf("vkgrad %s (protocol v1)\n", VKG_VERSION);
			return CLI_EXIT_OK;
		} else if (strcmp(a, "--socket") == 0 || strcmp(a, "-s") == 0) {
			if (i + 1 >= argc)
				return cli_usage_fail("%s needs a path", a);
			ctx.socket = argv[++i];
		} else if (strncmp(a, "--socket=", 9) == 0) {
			ctx.socket = a + 9;
		} else {
			return cli_usage_fail("unknown option '%s'", a);
		}
	}
	if (i >= argc) {
		fputs(usage_text, stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[i], "help") == 0) {
		fputs(usage_text, stdout);
		return CLI_EXIT_OK;
	}
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++) {
		if (strcmp(argv[i], commands[k].name) != 0)
			continue;
		int n = argc - i;
		if (commands[k].fn != cli_bench && (n = lift_global_options(&ctx, n, argv + i)) < 0)
			return CLI_EXIT_USAGE;
		return commands[k].fn(&ctx, n, argv + i);
	}
	return cli_usage_fail("unknown command '%s'", argv[i]);
}
