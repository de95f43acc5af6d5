/* daemon/config.c — defaults and command-line flags. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void config_defaults(config *c)
{
	memset(c, 0, sizeof(*c));
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg)
		snprintf(c->socket_path, sizeof(c->socket_path), "%s/vkgrad.sock", xdg);
	else
		snprintf(c->socket_path, sizeof(c->socket_path), "/run/vkgrad/vkgrad.sock");
	const char *cd = getenv("CACHE_DIRECTORY"), *xc = getenv("XDG_CACHE_HOME"),
		   *home = getenv("HOME");
	if (cd && *cd)
		snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", cd);
	else if (xc && *xc)
		snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/vkgrad", xc);
	else if (home && *home)
		snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/.cache/vkgrad", home);
	c->log_level = LOG_INFO;
	c->limits.max_frame = 65536;
	c->limits.max_regions = 64;
	c->limits.max_region_bytes = 4ull << 30;
	c->limits.max_inflight = 128;
	c->limits.max_dim = 1u << 20;
	c->limits.max_tensor_bytes = 4ull << 30;
	c->max_total_region_bytes = 64ull << 30;
	c->max_connections = 2048;
	c->max_batch_jobs = 256;
	c->batch_per_client = 32;
	c->max_batch_bytes = 256u << 20;
	c->spin_us = 50;
	c->inflight_batches = 2;
	c->max_outbound_bytes = 4u << 20;
}

static void usage(const config *d)
{
	printf("usage: vkgradd [options]\n"
	       "  --socket PATH          listening socket (default %s)\n"
	       "  --cache-dir DIR        pipeline cache directory (default %s)\n"
	       "  --device N|NAME        device index or name substring (default: first\n"
	       "                         discrete GPU, else integrated, else CPU)\n"
	       "  --log-level L          error|warn|notice|info|debug (default info)\n"
	       "  --max-frame N          largest request frame in bytes (default %u)\n"
	       "  --max-regions N        regions per connection (default %u)\n"
	       "  --max-region-bytes N   bytes of one region (default %" PRIu64 ")\n"
	       "  --max-total-region-bytes N  registered bytes, all clients (default %" PRIu64 ")\n"
	       "  --max-inflight N       queued+running jobs per connection (default %u)\n"
	       "  --max-dim N            largest batch/in/out (default %" PRIu64 ")\n"
	       "  --max-connections N    connections at once (default %u)\n"
	       "  --batch-jobs N         jobs per command buffer (default %u)\n"
	       "  --batch-per-client N   jobs one client adds to a batch per round (default %u)\n"
	       "  --max-batch-bytes N    tensor bytes per batch (default %" PRIu64 ")\n"
	       "  --spin-us N            completion spins this long before blocking (default %u)\n"
	       "  --inflight-batches N   submissions in flight (default %u)\n"
	       "  --max-outbound-bytes N reply bytes queued per slow client (default %" PRIu64 ")\n"
	       "  --no-host-import       never import client memory; use staging copies\n"
	       "  --help, --version\n",
	       d->socket_path, d->cache_dir[0] ? d->cache_dir : "(none)", d->limits.max_frame,
	       d->limits.max_regions, d->limits.max_region_bytes, d->max_total_region_bytes,
	       d->limits.max_inflight, d->limits.max_dim, d->max_connections, d->max_batch_jobs,
	       d->batch_per_client, d->max_batch_bytes, d->spin_us, d->inflight_batches, d->max_outbound_bytes);
}

static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "vkgradd: --%s: '%s' is not an integer in [%" PRIu64 ", %" PRIu64 "]\n",
			opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int config_parse_args(config *c, int argc, char **argv)
{
	enum { O_SOCKET = 256, O_CACHE, O_DEVICE, O_LOG, O_FRAME, O_REGIONS, O_RBYTES, O_TBYTES,
	       O_INFL, O_DIM, O_CONNS, O_BJOBS, O_IBATCH, O_OUTB, O_NOIMPORT, O_BPC, O_BBYTES, O_SPIN, O_HELP, O_VERSION };
	static const struct option opts[] = {
		{"socket", required_argument, 0, O_SOCKET},
		{"cache-dir", required_argument, 0, O_CACHE},
		{"device", required_argument, 0, O_DEVICE},
		{"log-level", required_argument, 0, O_LOG},
		{"max-frame", required_argument, 0, O_FRAME},
		{"max-regions", required_argument, 0, O_REGIONS},
		{"max-region-bytes", required_argument, 0, O_RBYTES},
		{"max-total-region-bytes", required_argument, 0, O_TBYTES},
		{"max-inflight", required_argument, 0, O_INFL},
		{"max-dim", required_argument, 0, O_DIM},
		{"max-connections", required_argument, 0, O_CONNS},
		{"batch-jobs", required_argument, 0, O_BJOBS},
		{"inflight-batches", required_argument, 0, O_IBATCH},
		{"max-outbound-bytes", required_argument, 0, O_OUTB},
		{"no-host-import", no_argument, 0, O_NOIMPORT},
		{"batch-per-client", required_argument, 0, O_BPC},
		{"max-batch-bytes", required_argument, 0, O_BBYTES},
		{"spin-us", required_argument, 0, O_SPIN},
		{"help", no_argument, 0, O_HELP},
		{"version", no_argument, 0, O_VERSION},
		{0, 0, 0, 0},
	};
	config d = *c;
	int o;
	uint64_t v;
	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		const char *name = o >= O_SOCKET && o <= O_VERSION ? opts[o - O_SOCKET].name : "?";
		switch (o) {
		case O_SOCKET:
			if (strlen(optarg) >= sizeof(c->socket_path)) {
				fprintf(stderr, "vkgradd: --socket: path longer than %zu bytes\n",
					sizeof(c->socket_path) - 1);
				return -1;
			}
			snprintf(c->socket_path, sizeof(c->socket_path), "%s", optarg);
			break;
		case O_CACHE: snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", optarg); break;
		case O_DEVICE: snprintf(c->device, sizeof(c->device), "%s", optarg); break;
		case O_LOG:
			if ((c->log_level = log_parse_level(optarg)) < 0) {
				fprintf(stderr, "vkgradd: --log-level: '%s' is not one of error, warn, notice, info, debug\n", optarg);
				return -1;
			}
			break;
		case O_FRAME:
			if (parse_u64(name, optarg, 65536, 64u << 20, &v)) return -1;
			c->limits.max_frame = (uint32_t)v; break;
		case O_REGIONS:
			if (parse_u64(name, optarg, 1, 1u << 20, &v)) return -1;
			c->limits.max_regions = (uint32_t)v; break;
		case O_RBYTES:
			if (parse_u64(name, optarg, 4096, UINT64_MAX / 2, &v)) return -1;
			c->limits.max_region_bytes = v; break;
		case O_TBYTES:
			if (parse_u64(name, optarg, 4096, UINT64_MAX / 2, &v)) return -1;
			c->max_total_region_bytes = v; break;
		case O_INFL:
			if (parse_u64(name, optarg, 1, 1u << 20, &v)) return -1;
			c->limits.max_inflight = (uint32_t)v; break;
		case O_DIM:
			if (parse_u64(name, optarg, 1, 1u << 20, &v)) return -1;
			c->limits.max_dim = v; break;
		case O_CONNS:
			if (parse_u64(name, optarg, 1, 1u << 20, &v)) return -1;
			c->max_connections = (uint32_t)v; break;
		case O_BJOBS:
			if (parse_u64(name, optarg, 1, 65536, &v)) return -1;
			c->max_batch_jobs = (uint32_t)v; break;
		case O_IBATCH:
			if (parse_u64(name, optarg, 1, 16, &v)) return -1;
			c->inflight_batches = (uint32_t)v; break;
		case O_OUTB:
			if (parse_u64(name, optarg, 65536, UINT64_MAX / 2, &v)) return -1;
			c->max_outbound_bytes = v; break;
		case O_NOIMPORT: c->no_host_import = true; break;
		case O_BPC:
			if (parse_u64(name, optarg, 1, 65536, &v)) return -1;
			c->batch_per_client = (uint32_t)v; break;
		case O_BBYTES:
			if (parse_u64(name, optarg, 1, UINT64_MAX / 2, &v)) return -1;
			c->max_batch_bytes = v; break;
		case O_SPIN:
			if (parse_u64(name, optarg, 0, 100000, &v)) return -1;
			c->spin_us = (uint32_t)v; break;
		case O_HELP: usage(&d); return 1;
		case O_VERSION: printf("vkgradd %s\n", VKG_VERSION); return 1;
		default:
			fprintf(stderr, "vkgradd: try --help\n");
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vkgradd: unexpected argument '%s' (try --help)\n", argv[optind]);
		return -1;
	}
	return 0;
}
