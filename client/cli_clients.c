/* client/cli_clients.c — `vkgrad clients`: the daemon's open connections
 * (the `clients` op, proto/clients.h), one line each, the way pw-top lists
 * PipeWire's: pid, uid, the name its hello gave, jobs finished and failed,
 * in flight, GPU time charged to them, regions and bytes registered,
 * device tensors and their bytes, and
 * how long ago it connected. --json: the reply as JSON. */
#include "cli.h"

#include "clients.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char clients_usage[] =
	"usage: vkgrad clients [--json] [--socket PATH]\n"
	"  the daemon's open connections: PID, UID, NAME (its hello's), JOBS done,\n"
	"  FAILED, INFLIGHT, GPU time charged to its jobs, REGIONS and BYTES registered\n"
	"  now, and how long it has been CONNECTED; this command's own is marked '*'\n"
	"  --json   the reply as one JSON object\n";

/* A name a client chose, safe for a terminal: printable ASCII kept, any
 * other byte as '?', at most 24 characters. */
static void safe_name(char out[32], const char *in)
{
	size_t o = 0;
	for (; *in && o < 24; in++)
		out[o++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
	if (o == 0)
		out[o++] = '-';
	out[o] = 0;
}

static void human_bytes(char out[16], uint64_t b)
{
	if (b >= (1ull << 30))
		snprintf(out, 16, "%.1fG", (double)b / (1ull << 30));
	else if (b >= (1ull << 20))
		snprintf(out, 16, "%.1fM", (double)b / (1ull << 20));
	else if (b >= (1ull << 10))
		snprintf(out, 16, "%.1fK", (double)b / (1ull << 10));
	else
		snprintf(out, 16, "%" PRIu64, b);
}

int cli_clients(const cli_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	bool json = false;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		switch (o) {
		case 'j': json = true; break;
		case 'h': fputs(clients_usage, stdout); return CLI_EXIT_OK;
		default: return cli_usage_fail("clients: bad option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_fail("clients: unexpected argument '%s'", argv[optind]);
	vkg_error err;
	vkg_client *c = cli_connect(ctx, &err);
	if (!c)
		return cli_fail(&err);
	void *body = NULL;
	size_t len = 0;
	int rc = vkg_call_raw(c, "clients", NULL, 0, &body, &len, &err);
	vkg_close(c);
	if (rc != 0) {
		if (strcmp(err.code, "unknown_op") == 0)
			snprintf(err.message, sizeof(err.message),
				 "this daemon predates the clients op (vkgradd 0.2); upgrade it");
		free(body);
		return cli_fail(&err);
	}
	if (json) {
		rc = cli_print_json(body, len, cli_socket_path(ctx));
		free(body);
		return rc;
	}
	proto_client_info *v = NULL;
	unsigned n = 0;
	proto_err perr;
	if (proto_clients_decode(body, len, &v, &n, &perr) != 0) {
		free(body);
		cli_errf("vkgrad: clients: %s\n", perr.message);
		return CLI_EXIT_DAEMON;
	}
	free(body);
	printf("%-8s %-6s %-24s %9s %7s %8s %12s %7s %8s %7s %9s %10s\n", "PID", "UID", "NAME", "JOBS",
	       "FAILED", "INFLIGHT", "GPU_TIME_S", "REGIONS", "BYTES", "TENSORS", "DEV_BYTES",
	       "CONNECTED");
	const int self = (int)getpid();
	for (unsigned i = 0; i < n; i++) {
		const proto_client_info *e = &v[i];
		char name[32], bytes[16], dbytes[16], pid[16];
		safe_name(name, e->name);
		human_bytes(bytes, e->region_bytes);
		human_bytes(dbytes, e->device_bytes);
		snprintf(pid, sizeof(pid), "%" PRId32 "%s", e->pid, e->pid == self ? "*" : "");
		printf("%-8s %-6" PRIu32 " %-24s %9" PRIu64 " %7" PRIu64 " %8" PRIu64 " %12.6f %7" PRIu64
		       " %8s %7" PRIu64 " %9s %9.1fs\n",
		       pid, e->uid, name, e->jobs_done, e->jobs_failed, e->inflight,
		       (double)e->gpu_us / 1e6, e->regions, bytes, e->tensors, dbytes, e->connected_s);
	}
	free(v);
	return CLI_EXIT_OK;
}
