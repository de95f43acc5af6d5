/* client/cli_info.c — `vkgrad info`, `vkgrad stats`, `vkgrad ping`: what the
 * daemon is, what it has done, and how fast it answers. */
#include "cli.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Subcommands without options accept only --help. Returns true when the
 * command should end at once, with *rc its exit status. */
static bool no_options(int argc, char **argv, int *rc)
{
	if (argc < 2)
		return false;
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		printf("usage: vkgrad %s [--socket PATH]\n", argv[0]);
		*rc = CLI_EXIT_OK;
	} else {
		*rc = cli_usage_fail("%s: unexpected argument '%s'", argv[0], argv[1]);
	}
	return true;
}

static vkg_client *connect_or_fail(const cli_ctx *ctx, int *rc)
{
	vkg_error err;
	vkg_client *c = vkg_connect(ctx->socket, &err);
	if (!c)
		*rc = cli_fail(&err);
	return c;
}

static void print_bytes(const char *label, uint64_t b)
{
	if (b >= (1ull << 30) && b % (1ull << 20) == 0)
		printf("  %-18s %" PRIu64 " (%.1f GiB)\n", label, b, (double)b / (1ull << 30));
	else if (b >= (1ull << 20))
		printf("  %-18s %" PRIu64 " (%.1f MiB)\n", label, b, (double)b / (1ull << 20));
	else
		printf("  %-18s %" PRIu64 "\n", label, b);
}

/* op's whole reply as JSON (cli_json.c); args: a msgpack map's bytes */
static int reply_json(const cli_ctx *ctx, const char *op, const void *args, size_t args_len)
{
	int rc;
	vkg_client *c = connect_or_fail(ctx, &rc);
	if (!c)
		return rc;
	vkg_error err;
	void *body = NULL;
	size_t len = 0;
	if (vkg_call_raw(c, op, args, args_len, &body, &len, &err) != 0)
		rc = cli_fail(&err);
	else
		rc = cli_print_json(body, len, cli_socket_path(ctx));
	free(body);
	vkg_close(c);
	return rc;
}

/* `info --json`: the hello reply */
static int info_json(const cli_ctx *ctx)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	static const char name[] = "vkgrad-cli info";
	msgpack_pack_map(&pk, 2);
	msgpack_pack_str(&pk, 7);
	msgpack_pack_str_body(&pk, "version", 7);
	msgpack_pack_uint64(&pk, PROTO_VERSION);
	msgpack_pack_str(&pk, 6);
	msgpack_pack_str_body(&pk, "client", 6);
	msgpack_pack_str(&pk, sizeof(name) - 1);
	msgpack_pack_str_body(&pk, name, sizeof(name) - 1);
	int rc = reply_json(ctx, "hello", sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

int cli_info(const cli_ctx *ctx, int argc, char **argv)
{
	int rc;
	if (argc == 2 && strcmp(argv[1], "--json") == 0)
		return info_json(ctx);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: vkgrad info [--json] [--socket PATH]\n"
		       "  --json   the daemon's hello reply as one JSON object\n");
		return CLI_EXIT_OK;
	}
	if (no_options(argc, argv, &rc))
		return rc;
	vkg_client *c = connect_or_fail(ctx, &rc);
	if (!c)
		return rc;
	vkg_error err;
	static vkg_info info; /* large: keep it off the stack */
	if (vkg_hello(c, "vkgrad-cli info", &info, &err) != 0) {
		rc = cli_fail(&err);
		goto out;
	}
	printf("server    %s (protocol v1) on %s\n", info.server, cli_socket_path(ctx));
	printf("device    %s\n", info.device_name);
	printf("  %-18s %s\n", "type", info.device_type);
	printf("  %-18s 0x%04x\n", "vendor_id", info.vendor_id);
	printf("  %-18s 0x%04x\n", "device_id", info.device_id);
	printf("  %-18s %s\n", "driver", info.driver);
	printf("  %-18s %s\n", "vulkan api", info.api);
	printf("limits\n");
	print_bytes("max_frame", info.max_frame);
	printf("  %-18s %" PRIu32 " per connection\n", "max_regions", info.max_regions);
	print_bytes("max_region_bytes", info.max_region_bytes);
	printf("  %-18s %" PRIu32 " jobs per connection\n", "max_inflight", info.max_inflight);
	printf("  %-18s %" PRIu64 " (in, out each; batch by the byte limits)\n", "max_dim", info.max_dim);
	print_bytes("max_tensor_bytes", info.max_tensor_bytes);

	/* an aligned table: widths from the longest cell of each column */
	const char *head[5] = {"NAME", "DOMAIN", "VARIANT", "DTYPE", "STATUS"};
	int w[5];
	for (int k = 0; k < 5; k++)
		w[k] = (int)strlen(head[k]);
	/* every kernel (vkg_info.kernels holds the first 32): vkg_info_kernel */
	const unsigned n = info.n_kernels;
	for (unsigned i = 0; i < n; i++) {
		vkg_kernel_info kb;
		if (vkg_info_kernel(c, i, &kb) != 0)
			break;
		const vkg_kernel_info *k = &kb;
		const char *cell[5] = {k->name, k->domain, k->variant, k->dtype, k->status};
		for (int j = 0; j < 5; j++)
			if ((int)strlen(cell[j]) > w[j])
				w[j] = (int)strlen(cell[j]);
	}
	printf("kernels   %u\n", info.n_kernels);
	printf("  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], head[0], w[1], head[1], w[2], head[2],
	       w[3], head[3], head[4]);
	for (unsigned i = 0; i < n; i++) {
		vkg_kernel_info kb;
		if (vkg_info_kernel(c, i, &kb) != 0)
			break;
		const vkg_kernel_info *k = &kb;
		printf("  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], k->name, w[1], k->domain, w[2],
		       k->variant, w[3], k->dtype, k->status);
	}
	rc = CLI_EXIT_OK;
out:
	vkg_close(c);
	return rc;
}

static const char stats_usage[] =
	"usage: vkgrad stats [--json] [--socket PATH]\n"
	"       vkgrad stats --prometheus [--output FILE] [--scan DIR] [--start-idle] [SOCKET...]\n"
	"  --json        the whole stats reply as one JSON object\n"
	"  --prometheus  Prometheus text exposition (docs/metrics.md): counters (_total),\n"
	"                gauges, the stage summary and the latency histograms, all times\n"
	"                in seconds, label socket=\"PATH\"\n"
	"  --output FILE write it to FILE atomically (temporary file, fsync, rename),\n"
	"                e.g. for node_exporter's textfile collector\n"
	"  --scan DIR    every *.sock socket in DIR (one daemon per GPU: /run/vkgrad)\n"
	"  --start-idle  scrape a socket-activated daemon that is not running too (the\n"
	"                connection starts it); by default systemd is asked and such a\n"
	"                socket reports vkgrad_idle 1 instead\n"
	"  SOCKET...     these daemons (default: --socket's)\n"
	"A daemon that does not answer reports vkgrad_up 0 and a line on stderr; the exit\n"
	"status is 0 once the exposition is written (3 on stdout when none answered).\n";

/* "count 12, mean 0.41 ms, p50 <= 0.5 ms, p99 <= 2.5 ms": quantiles as the
 * upper bound of the bucket that holds them. */
static void print_hist(const proto_histogram *h)
{
	printf("  %-20s count %" PRIu64, h->name, h->count);
	if (h->count) {
		printf(", mean %.3f ms", (double)h->sum_us / (double)h->count / 1000.0);
		const double q[2] = {0.5, 0.99};
		const char *qn[2] = {"p50", "p99"};
		for (int k = 0; k < 2; k++) {
			uint64_t cum = 0, want = (uint64_t)((double)h->count * q[k] + 0.999999);
			unsigned b = 0;
			for (; b <= h->n_le; b++)
				if ((cum += h->counts[b]) >= want)
					break;
			if (b < h->n_le)
				printf(", %s <= %.3g ms", qn[k], (double)h->le_us[b] / 1000.0);
			else if (h->n_le)
				printf(", %s > %.3g ms", qn[k], (double)h->le_us[h->n_le - 1] / 1000.0);
		}
	}
	printf("\n");
}

int cli_stats(const cli_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"prometheus", no_argument, NULL, 'p'},
		{"output", required_argument, NULL, 'o'},
		{"scan", required_argument, NULL, 's'},
		{"start-idle", no_argument, NULL, 'i'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	bool prom = false, start_idle = false, json = false;
	const char *output = NULL, *scan = NULL;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		switch (o) {
		case 'p': prom = true; break;
		case 'o': output = optarg; break;
		case 's': scan = optarg; break;
		case 'i': start_idle = true; break;
		case 'j': json = true; break;
		case 'h': printf("%s", stats_usage); return CLI_EXIT_OK;
		default: return cli_usage_fail("stats: bad option '%s'", argv[optind - 1]);
		}
	}
	if (prom && json)
		return cli_usage_fail("stats: --json and --prometheus exclude each other");
	if (prom)
		return cli_stats_prometheus(ctx, output, scan, argv + optind, argc - optind,
					    start_idle);
	if (output || scan || start_idle)
		return cli_usage_fail("stats: --output, --scan and --start-idle go with --prometheus");
	if (optind < argc)
		return cli_usage_fail("stats: unexpected argument '%s'", argv[optind]);
	if (json)
		return reply_json(ctx, "stats", NULL, 0);
	int rc;
	vkg_client *c = connect_or_fail(ctx, &rc);
	if (!c)
		return rc;
	vkg_error err;
	static proto_stats s; /* large: keep it off the stack */
	if (cli_stats_fetch(c, &s, &err) != 0) {
		rc = cli_fail(&err);
		goto out;
	}
	printf("daemon stats (%s)\n", cli_socket_path(ctx));
	printf("  %-20s %.1f\n", "uptime_s", s.uptime_s);
	printf("  %-20s %" PRIu64 " (connected now, this one included)\n", "clients", s.clients);
	printf("  %-20s %" PRIu64 " (registered now, all clients)\n", "regions", s.regions);
	printf("  %-20s %" PRIu64 "\n", "region_bytes", s.region_bytes);
	printf("  %-20s %" PRIu64 "\n", "jobs_done", s.jobs_done);
	printf("  %-20s %" PRIu64 "\n", "jobs_failed", s.jobs_failed);
	printf("  %-20s %" PRIu64 "\n", "jobs_queued", s.jobs_queued);
	printf("  %-20s %" PRIu64 "\n", "jobs_running", s.jobs_running);
	printf("  %-20s %" PRIu64 " (GPU submissions)\n", "batches", s.batches);
	printf("  %-20s %.2f\n", "jobs_per_batch_avg", s.jobs_per_batch_avg);
	printf("  %-20s %" PRIu64 "\n", "pipelines", s.pipelines);
	printf("  %-20s %" PRIu64 "\n", "pipeline_cache_hits", s.pipeline_cache_hits);
	printf("  %-20s %" PRIu64 " (of those regions: used by the GPU in place)\n", "host_imports",
	       s.host_imports);
	printf("  %-20s %" PRIu64 " (of those regions: copied through staging buffers)\n",
	       "staged_regions", s.staged_regions);
	printf("  %-20s %" PRIu64 " (Vulkan validation-layer errors)\n", "validation_errors",
	       s.validation_errors);
	if (s.devlocal_min_bytes || s.devlocal_min_bytes_16bit)
		printf("  %-20s %" PRIu64 " f32, %" PRIu64 " f16/bf16 (jobs with this many tensor "
		       "bytes run on device copies; 0: never)\n",
		       "devlocal_min_bytes", s.devlocal_min_bytes, s.devlocal_min_bytes_16bit);
	else
		printf("  %-20s off (every job reads the client's memory directly)\n",
		       "devlocal_min_bytes");
	printf("  %-20s %" PRIu64 " (%" PRIu64 " bytes copied to and from device memory)\n",
	       "devlocal_jobs", s.devlocal_jobs, s.devlocal_copy_bytes);
	if (s.stream_chunk_bytes)
		printf("  %-20s %" PRIu64 " bytes of dY per chunk (f16/bf16: half, at least 1,024 rows and an eighth of the batch, under the daemon's auto), "
		       "jobs of >= %" PRIu64
		       " tensor bytes, copies on %s\n", "stream_chunk_bytes", s.stream_chunk_bytes,
		       s.stream_min_bytes,
		       s.stream_queues == 2 ? "two transfer queues" : s.stream_queues ? "one transfer queue"
									  : "the compute queue");
	else
		printf("  %-20s off (device-local jobs copy, compute and copy back in turn)\n",
		       "stream_chunk_bytes");
	printf("  %-20s %" PRIu64 " (%" PRIu64 " chunks, dW in %" PRIu64 " steps; %" PRIu64
	       " of them beside other connections' small jobs)\n",
	       "stream_jobs", s.stream_jobs, s.stream_chunks, s.stream_dw_blocks, s.stream_shared_jobs);
	printf("  %-20s %" PRIu64 "\n", "splitk_jobs", s.splitk_jobs);
	printf("  %-20s %" PRIu64 " (kernel launches)\n", "dispatches", s.dispatches);
	printf("  %-20s %" PRIu64 " (device memory held for copies and split-K)\n",
	       "scratch_bytes", s.scratch_bytes);
	printf("  %-20s %" PRIu64 " (batches run without scratch: allocation failed)\n",
	       "scratch_failures", s.scratch_failures);
	if (s.has_tensors) {
		printf("  %-20s %" PRIu64 " (device tensors live now, all clients)\n", "tensors", s.tensors);
		printf("  %-20s %" PRIu64 " (device memory they hold)\n", "device_bytes", s.device_bytes);
		for (unsigned i = 0; i < s.n_dev_uids; i++) {
			char uid[32];
			if (s.dev_uids[i].uid == PROTO_UID_OTHER)
				snprintf(uid, sizeof(uid), "device_bytes other");
			else
				snprintf(uid, sizeof(uid), "device_bytes uid %u", s.dev_uids[i].uid);
			printf("  %-20s %" PRIu64 "\n", uid, s.dev_uids[i].bytes);
		}
		printf("  %-20s %" PRIu64 " (client memory jobs and tensor ops read: host to device)\n",
		       "host_read_bytes", s.host_read_bytes);
		printf("  %-20s %" PRIu64 " (client memory they wrote: device to host)\n",
		       "host_write_bytes", s.host_write_bytes);
	}
	if (s.n_hist)
		printf("latency (in the daemon; vkgrad stats --prometheus has every bucket)\n");
	for (unsigned i = 0; i < s.n_hist; i++)
		print_hist(&s.hist[i]);
	if (s.n_stages)
		printf("stages of recent jobs (median / p99 µs, jobs in the window)\n");
	for (unsigned i = 0; i < s.n_stages; i++)
		printf("  %-20s %10.1f / %10.1f  (%" PRIu64 ")\n", s.stages[i].name, s.stages[i].p50_us,
		       s.stages[i].p99_us, s.stages[i].count);
	printf("completion wait: spin budget %" PRIu64 " µs, %" PRIu64 " µs spun, %" PRIu64
	       " waits ended spinning, %" PRIu64 " blocked, %" PRIu64 " with an expected end\n",
	       s.spin_budget_us, s.spin_us, s.spin_hits, s.blocking_waits, s.spin_expected);
	rc = CLI_EXIT_OK;
out:
	vkg_close(c);
	return rc;
}

int cli_ping(const cli_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"count", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	uint64_t count = 1;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "+c:h", opts, NULL)) != -1;) {
		switch (o) {
		case 'c':
			if (cli_parse_u64("--count", optarg, 1, 1000000, &count))
				return CLI_EXIT_USAGE;
			break;
		case 'h':
			printf("usage: vkgrad [--socket PATH] ping [--count N]\n");
			return CLI_EXIT_OK;
		default:
			return cli_usage_fail("ping: bad option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_fail("ping: unexpected argument '%s'", argv[optind]);
	int rc;
	vkg_client *c = connect_or_fail(ctx, &rc);
	if (!c)
		return rc;
	vkg_error err;
	rc = CLI_EXIT_OK;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t t0 = cli_now_us();
		if (vkg_ping(c, &err) != 0) {
			rc = cli_fail(&err);
			break;
		}
		printf("ping %s: %" PRIu64 " us round trip\n", cli_socket_path(ctx),
		       cli_now_us() - t0);
	}
	vkg_close(c);
	return rc;
}
