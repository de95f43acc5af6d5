/* daemon/config.c — defaults, the environment, the optional config file,
 * command-line flags: every setting the daemon reads, read here. */
#include "config.h"

#include "kernel_registry.h"

#include "log.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a switch: on when set, whatever its value */
static bool env_set(const char *name)
{
	return getenv(name) != NULL;
}

/* on when set to exactly `value` */
static bool env_is(const char *name, const char *value)
{
	const char *v = getenv(name);
	return v && strcmp(v, value) == 0;
}

void config_read_env(config_env *e)
{
	memset(e, 0, sizeof(*e));
	e->xdg_runtime_dir = getenv("XDG_RUNTIME_DIR");
	e->cache_directory = getenv("CACHE_DIRECTORY");
	e->xdg_cache_home = getenv("XDG_CACHE_HOME");
	e->home = getenv("HOME");
	e->journal_stream = env_set("JOURNAL_STREAM");
	e->notify_socket = env_set("NOTIFY_SOCKET");
	e->validation = env_is("VKGRAD_VALIDATION", "1");
	e->keep_drivers = getenv("VKGRAD_KEEP_DRIVERS");
	const char *no_xfer = getenv("VKGRAD_NO_TRANSFER_QUEUE");
	e->no_transfer_queue = no_xfer && *no_xfer && strcmp(no_xfer, "0") != 0;
	e->cpu_import = env_is("VKGRAD_CPU_IMPORT", "1");
	e->fault_shared_16k = env_set("VKGRAD_FAULT_SHARED_16K");
	e->fault_no_storage16 = env_set("VKGRAD_FAULT_NO_STORAGE16");
	e->no_coopmat = env_set("VKGRAD_NO_COOPMAT");
	e->no_coopmat_khr = env_set("VKGRAD_NO_COOPMAT_KHR");
	e->no_coopmat_nv2 = env_set("VKGRAD_NO_COOPMAT_NV2");
	e->no_calibration = env_set("VKGRAD_NO_CALIBRATION");
	e->cmk_tile = getenv("VKGRAD_CMK_TILE");
	e->cmk_tile_small = getenv("VKGRAD_CMK_TILE_SMALL");
	e->cmk_small_below = getenv("VKGRAD_CMK_SMALL_BELOW");
	e->t128_tile = getenv("VKGRAD_T128_TILE"); /* T128_TILE_ENV */
	e->nv2_tile = getenv("VKGRAD_NV2_TILE"); /* NV2_TILE_ENV */
	e->dxs_tile = getenv("VKGRAD_DXS_TILE"); /* DXS_TILE_ENV */
	e->stream_no_sums = env_is("VKGRAD_STREAM_SUMS", "0");
	e->stream_no_timestamps = env_is("VKGRAD_STREAM_TIMESTAMPS", "0");
	e->fault_inject = getenv("VKGRAD_FAULT_INJECT");
}

void config_defaults(config *c)
{
	memset(c, 0, sizeof(*c));
	config_read_env(&c->env);
	const char *xdg = c->env.xdg_runtime_dir;
	if (xdg && *xdg)
		snprintf(c->socket_path, sizeof(c->socket_path), "%s/vkgrad.sock", xdg);
	else
		snprintf(c->socket_path, sizeof(c->socket_path), "/run/vkgrad/vkgrad.sock");
	const char *cd = c->env.cache_directory, *xc = c->env.xdg_cache_home, *home = c->env.home;
	/* one too long is refused by config_parse_args, unless --cache-dir
	 * names another (never cut: a cut path is some other directory) */
	int n = 0;
	if (cd && *cd)
		n = snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", cd);
	else if (xc && *xc)
		n = snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/vkgrad", xc);
	else if (home && *home)
		n = snprintf(c->cache_dir, sizeof(c->cache_dir), "%s/.cache/vkgrad", home);
	if (n > CONFIG_CACHE_DIR_MAX) {
		c->cache_dir[0] = 0;
		c->cache_dir_overlong = cd && *cd ? "CACHE_DIRECTORY" : xc && *xc ? "XDG_CACHE_HOME" : "HOME";
	}
	c->log_level = LOG_LEVEL_INFO;
	c->limits.max_frame = 65536;
	c->limits.max_regions = 64;
	c->limits.max_region_bytes = 4ull << 30;
	c->limits.max_inflight = 128;
	c->limits.max_dim = 1u << 20;
	c->limits.max_tensor_bytes = 4ull << 30;
	c->max_total_region_bytes = CONFIG_AUTO;
	c->max_region_bytes_per_uid = CONFIG_AUTO;
	c->max_device_bytes = CONFIG_AUTO;
	c->max_device_bytes_per_uid = CONFIG_AUTO;
	c->limits.max_tensors = CONFIG_MAX_TENSORS_DEFAULT;
	c->max_connections = 2048;
	c->max_connections_per_uid = 256;
	c->max_batch_jobs = 256;
	c->batch_per_client = 32;
	c->max_batch_bytes = 256u << 20;
	c->spin_us = 50;
	c->loop_spin_us = CONFIG_AUTO;
	c->inflight_batches = 2;
	c->max_outbound_bytes = 4u << 20;
	c->devlocal_min_bytes = CONFIG_AUTO;
	c->scratch_max_bytes = CONFIG_AUTO;
	c->stream_chunk_bytes = CONFIG_AUTO;
	c->stream_min_bytes = CONFIG_AUTO;
	c->copy_piece_bytes = CONFIG_AUTO;
	c->stream_shared_min_bytes = CONFIG_AUTO;
	c->submit_thread = true;
	c->dispatch_max_macs = 1ull << 36;
	c->loop_trips = CONFIG_LOOP_TRIPS_DEFAULT;
	c->client_batch_macs = CONFIG_AUTO;
	c->small_job_us = CONFIG_AUTO;
	c->slice_us = CONFIG_AUTO;
	c->drain_timeout_s = CONFIG_DRAIN_DEFAULT_S;
}

void config_region_budget(const config *c, uint64_t host_ram, uint64_t heap, uint64_t *total,
			  uint64_t *per_uid)
{
	uint64_t t = c->max_total_region_bytes;
	if (t == CONFIG_AUTO) {
		t = host_ram ? host_ram / 2 : 64ull << 30;
		if (heap && heap < t)
			t = heap;
		t &= ~((1ull << 20) - 1);
		if (t < 1ull << 20)
			t = 1ull << 20;
	}
	*total = t;
	*per_uid = c->max_region_bytes_per_uid == CONFIG_AUTO ? t / 2 : c->max_region_bytes_per_uid;
}

void config_device_budget(const config *c, uint64_t heap, uint64_t *total, uint64_t *per_uid)
{
	uint64_t t = c->max_device_bytes;
	if (t == CONFIG_AUTO) {
		t = heap ? heap / 2 : 1ull << 30;
		t &= ~((1ull << 20) - 1);
		if (t < 1ull << 20)
			t = 1ull << 20;
	}
	*total = t;
	*per_uid = c->max_device_bytes_per_uid == CONFIG_AUTO ? t / 2 : c->max_device_bytes_per_uid;
}

static void usage(const config *d)
{
	printf("usage: vkgradd [options]\n"
	       "  --config FILE          read settings from FILE first (default: none)\n"
	       "  --socket PATH          listening socket, unless the service manager passes one\n"
	       "                         (default %s)\n"
	       "  --cache-dir DIR        pipeline cache directory (default %s)\n"
	       "  --device N|UUID|NAME   device index, UUID (8+ leading characters) or name\n"
	       "                         substring (default: first discrete GPU, else\n"
	       "                         integrated, else CPU)\n"
	       "  --list-devices         print every Vulkan device (index, name, type, driver,\n"
	       "                         memory, UUID, PCI address, usable) and exit\n"
	       "  --log-level L          error|warn|notice|info|debug (default info)\n"
	       "  --allow-uid LIST       serve only these users (comma-separated uids or names;\n"
	       "                         default: everyone the socket's permissions let in)\n"
	       "  --allow-gid LIST       ... or members of these groups (primary or supplementary)\n"
	       "  --max-frame N          largest request frame in bytes (default %u)\n"
	       "  --max-regions N        regions per connection (default %u)\n"
	       "  --max-region-bytes N   bytes of one region (default %" PRIu64 ")\n"
	       "  --max-total-region-bytes N|auto  registered bytes, all clients (default auto:\n"
	       "                         " CONFIG_REGION_TOTAL_AUTO_DOC ")\n"
	       "  --max-region-bytes-per-uid N|auto  registered bytes of all connections of one\n"
	       "                         user (default auto: half of the total)\n"
	       "  --max-device-bytes N|auto  device tensors' bytes, all clients (default auto:\n"
	       "                         half of the device-local heap)\n"
	       "  --max-device-bytes-per-uid N|auto  device tensors' bytes of all connections\n"
	       "                         of one user (default auto: half of the total)\n"
	       "  --max-tensors N        device tensors per connection (default %u)\n"
	       "  --max-inflight N       queued+running jobs per connection (default %u)\n"
	       "  --max-dim N            largest in/out; batch: the byte limits (default %" PRIu64 ")\n"
	       "  --max-connections N    connections at once (default %u)\n"
	       "  --max-connections-per-uid N  connections at once of one user (default %u)\n"
	       "  --batch-jobs N         jobs per command buffer (default %u)\n"
	       "  --batch-per-client N   jobs one client adds to a batch per round (default %u)\n"
	       "  --max-batch-bytes N    tensor bytes per batch (default %" PRIu64 ")\n"
	       "  --spin-us N            after a submission the loop polls the GPU at most\n"
	       "                         this long, less for a device whose batches take\n"
	       "                         longer (adaptive), before it sleeps (default %u)\n"
	       "  --loop-spin-us N|auto  after a request the loop polls its sockets this long\n"
	       "                         before it sleeps (default auto: %u on a GPU, %u on a\n"
	       "                         CPU device)\n"
	       "  --inflight-batches N   submissions in flight (default %u)\n"
	       "  --max-outbound-bytes N reply bytes queued per slow client (default %" PRIu64 ")\n"
	       "  --no-host-import       never import client memory; use staging copies\n"
	       "  --devlocal-min-bytes N|auto|off  jobs with at least N tensor bytes are\n"
	       "                         copied to device memory, computed there and copied\n"
	       "                         back (default auto: %s)\n"
	       "  --scratch-max-bytes N|auto  device memory per submission slot for those\n"
	       "                         copies and split-K partials (default auto: a quarter\n"
	       "                         of device memory over the slots, at most 8 GiB)\n"
	       "  --stream-chunk-bytes N|auto|off  device-local jobs of at least\n"
	       "                         --stream-min-bytes run in chunks of about N bytes\n"
	       "                         of dY along the batch, copies overlapped with\n"
	       "                         kernels on a transfer queue (default auto: %llu of\n"
	       "                         f32, half of it of f16/bf16 (at least 1,024\n"
	       "                         rows and an eighth of the batch), on a device\n"
	       "                         with a transfer-only queue, else off)\n"
	       "  --stream-min-bytes N|auto  tensor bytes from which a job streams (default\n"
	       "                         auto: %llu)\n"
	       "  --stream-shared-min-bytes N|auto|off  while another connection's small\n"
	       "                         jobs are about (one queued in the last second),\n"
	       "                         large device-local jobs of at least N bytes\n"
	       "                         stream too, their copies on the transfer queues\n"
	       "                         rather than beside the small jobs (default auto:\n"
	       "                         every one where there is a transfer-only queue,\n"
	       "                         else none)\n"
	       "  --copy-piece-bytes N|auto|off  a device-local job's copies on the compute\n"
	       "                         queue go in pieces of at most N bytes, so small\n"
	       "                         jobs on their own queue can start between them;\n"
	       "                         costs the large job speed (default auto: off,\n"
	       "                         whole tensors)\n"
	       "  --submit-thread on|off  batches are recorded and submitted on a thread of\n"
	       "                         their own, so the loop goes on reading requests and\n"
	       "                         writing replies meanwhile (default on; off: on the\n"
	       "                         loop thread)\n"
	       "  --dispatch-max-macs N  multiply-adds per dispatch; larger kernels are cut\n"
	       "                         into several (default %" PRIu64 ")\n"
	       "  --drain-timeout-s N    on SIGTERM, wait at most N seconds for replies to be\n"
	       "                         read; then close the connections that did not read\n"
	       "                         them, save the cache and exit (default %u; below\n"
	       "                         the unit's TimeoutStopSec)\n"
	       "  --loop-trips N         iterations of a kernel's loop in one dispatch; longer\n"
	       "                         reductions are cut into several dispatches (default\n"
	       "                         %u, the most; lower only to test the cuts on small\n"
	       "                         shapes)\n"
	       "  --no-cost-model        auto picks kernels by its fixed rules alone: no\n"
	       "                         probes at start to measure what each costs here\n"
	       "  --cost-model           measure the cost model on a GPU too (by default only\n"
	       "                         on a CPU device: on the H200 it picked a slower f32\n"
	       "                         kernel for 2048x1024x1024)\n"
	       "  --client-batch-macs N|auto  multiply-adds one connection may add to a batch\n"
	       "                         and have in flight, so others' jobs wait about one\n"
	       "                         batch (its next job always runs once nothing of it\n"
	       "                         is in flight; default auto: %llu on a GPU,\n"
	       "                         %llu on a CPU device)\n"
	       "  --small-job-us N|auto  jobs estimated (from measured rates) to take at most\n"
	       "                         N µs of GPU time are small: their own queue and\n"
	       "                         submission slots (default auto: %d on a GPU, %d on\n"
	       "                         a CPU device)\n"
	       "  --slice-us N|auto      where small and large jobs share one queue, large\n"
	       "                         work is submitted in slices of about N µs (default\n"
	       "                         auto: %d on a GPU, %d on a CPU device)\n"
	       "  --help, --version\n"
	       "  --list-kernels         the kernels built into this daemon (name, variant,\n"
	       "                         dtype, status), whether or not a device runs them\n"
	       "\n"
	       "The config file holds 'key = value' lines; keys are the long options above\n"
	       "without dashes (max-inflight = 64, no-host-import = true), '#' starts a\n"
	       "comment line. Options on the command line override the file.\n"
	       "\n"
	       "Environment: CACHE_DIRECTORY, XDG_CACHE_HOME, HOME (cache directory default),\n"
	       "XDG_RUNTIME_DIR (socket default), JOURNAL_STREAM (journald log prefixes),\n"
	       "LISTEN_FDS/LISTEN_PID (socket activation), NOTIFY_SOCKET, WATCHDOG_USEC\n"
	       "(readiness, status, watchdog), VKGRAD_VALIDATION=1 (Khronos validation layer),\n"
	       "VKGRAD_FAULT_INJECT=submit:N|wait:N|recreate:N|late_wait:MS|unsealed|tensor_alloc:N\n"
	       "(tests),\n"
	       "VKGRAD_CPU_IMPORT=1 (import client memory on a CPU device too; tests),\n"
	       "VKGRAD_NO_TRANSFER_QUEUE=1 (streamed jobs' copies on the compute queue);\n"
	       "every variable, the other switches too: vkgradd(8), ENVIRONMENT.\n",
	       d->socket_path, d->cache_dir[0] ? d->cache_dir : "(none)", d->limits.max_frame,
	       d->limits.max_regions, d->limits.max_region_bytes,
	       d->limits.max_tensors, d->limits.max_inflight, d->limits.max_dim, d->max_connections, d->max_connections_per_uid, d->max_batch_jobs,
	       d->batch_per_client, d->max_batch_bytes, d->spin_us, CONFIG_LOOP_SPIN_AUTO_GPU,
	       CONFIG_LOOP_SPIN_AUTO_CPU, d->inflight_batches, d->max_outbound_bytes,
	       CONFIG_DEVLOCAL_AUTO_DOC, CONFIG_STREAM_AUTO_CHUNK, CONFIG_STREAM_AUTO_MIN,
	       d->dispatch_max_macs, d->drain_timeout_s, CONFIG_LOOP_TRIPS_DEFAULT, CONFIG_CLIENT_MACS_AUTO_GPU,
	       CONFIG_CLIENT_MACS_AUTO_CPU, CONFIG_SMALL_JOB_AUTO_GPU_US, CONFIG_SMALL_JOB_AUTO_CPU_US,
	       CONFIG_SLICE_AUTO_GPU_US, CONFIG_SLICE_AUTO_CPU_US);
}

/* where: the setting's origin, "" for the command line, else "FILE:LINE: "
 * (error messages start with it; source.where). */
static int parse_u64(const char *where, const char *opt, const char *s, uint64_t lo, uint64_t hi,
		     uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "vkgradd: %s--%s: '%s' is not an integer in [%" PRIu64 ", %" PRIu64 "]\n",
			where, opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* "auto", "off" (when off_ok) or a byte count in [1, 2^40]: CONFIG_AUTO,
 * CONFIG_OFF or the number. */
static int parse_auto(const char *where, const char *opt, const char *s, bool off_ok, uint64_t *out)
{
	const uint64_t hi = 1ull << 40;
	char *end;
	errno = 0;
	unsigned long long v = 0;
	if (!strcmp(s, "auto") || (off_ok && !strcmp(s, "off"))) {
		*out = s[0] == 'a' ? CONFIG_AUTO : CONFIG_OFF;
		return 0;
	}
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-' || v < 1 || v > hi) {
		fprintf(stderr, "vkgradd: %s--%s: '%s' is not auto%s or a byte count in [1, %" PRIu64 "]\n",
			where, opt, s, off_ok ? ", off" : "", hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* "1000,1001,alice": numbers or names (resolved now, through NSS). */
static int parse_ids(const char *where, const char *opt, const char *s, bool users, uint32_t *list,
		     unsigned *n)
{
	char buf[1024];
	if (strlen(s) >= sizeof(buf)) {
		fprintf(stderr, "vkgradd: %s--%s: list too long\n", where, opt);
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		size_t len = strlen(tok);
		while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
			tok[--len] = 0;
		if (!len)
			continue;
		char *end;
		errno = 0;
		unsigned long v = strtoul(tok, &end, 10);
		if (tok[0] >= '0' && tok[0] <= '9') {
			if (errno || *end || v >= UINT32_MAX) {
				fprintf(stderr, "vkgradd: %s--%s: '%s' is not a valid id\n", where, opt, tok);
				return -1;
			}
		} else if (users) {
			struct passwd *pw = getpwnam(tok);
			if (!pw) {
				fprintf(stderr, "vkgradd: %s--%s: no user '%s'\n", where, opt, tok);
				return -1;
			}
			v = pw->pw_uid;
		} else {
			struct group *gr = getgrnam(tok);
			if (!gr) {
				fprintf(stderr, "vkgradd: %s--%s: no group '%s'\n", where, opt, tok);
				return -1;
			}
			v = gr->gr_gid;
		}
		if (*n >= CONFIG_MAX_ALLOW) {
			fprintf(stderr, "vkgradd: %s--%s: more than %d ids\n", where, opt, CONFIG_MAX_ALLOW);
			return -1;
		}
		list[(*n)++] = (uint32_t)v;
	}
	return 0;
}

enum { O_SOCKET = 256, O_CACHE, O_DEVICE, O_LOG, O_FRAME, O_REGIONS, O_RBYTES, O_TBYTES,
       O_INFL, O_DIM, O_CONNS, O_BJOBS, O_IBATCH, O_OUTB, O_NOIMPORT, O_BPC, O_BBYTES, O_SPIN,
       O_CONNS_UID, O_CONFIG, O_ALLOW_UID, O_ALLOW_GID, O_DEVLOCAL, O_SCRATCH, O_DISPATCH,
       O_RBYTES_UID, O_CLIENT_MACS, O_SMALL_JOB, O_SLICE, O_LOOPSPIN, O_STREAM_CHUNK, O_STREAM_MIN,
       O_COPY_PIECE, O_STREAM_SHARED, O_SUBMIT_THREAD,
       O_DRAIN, O_LOOP_TRIPS, O_NO_COST_MODEL, O_COST_MODEL, O_DBYTES, O_DBYTES_UID, O_TENSORS, O_HELP, O_VERSION, O_LISTDEV, O_KERNELS };
/* in the enum's order: opts[o - O_SOCKET] is option o */
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
	{"max-connections-per-uid", required_argument, 0, O_CONNS_UID},
	{"config", required_argument, 0, O_CONFIG},
	{"allow-uid", required_argument, 0, O_ALLOW_UID},
	{"allow-gid", required_argument, 0, O_ALLOW_GID},
	{"devlocal-min-bytes", required_argument, 0, O_DEVLOCAL},
	{"scratch-max-bytes", required_argument, 0, O_SCRATCH},
	{"dispatch-max-macs", required_argument, 0, O_DISPATCH},
	{"max-region-bytes-per-uid", required_argument, 0, O_RBYTES_UID},
	{"client-batch-macs", required_argument, 0, O_CLIENT_MACS},
	{"small-job-us", required_argument, 0, O_SMALL_JOB},
	{"slice-us", required_argument, 0, O_SLICE},
	{"loop-spin-us", required_argument, 0, O_LOOPSPIN},
	{"stream-chunk-bytes", required_argument, 0, O_STREAM_CHUNK},
	{"stream-min-bytes", required_argument, 0, O_STREAM_MIN},
	{"copy-piece-bytes", required_argument, 0, O_COPY_PIECE},
	{"stream-shared-min-bytes", required_argument, 0, O_STREAM_SHARED},
	{"submit-thread", required_argument, 0, O_SUBMIT_THREAD},
	{"drain-timeout-s", required_argument, 0, O_DRAIN},
	{"loop-trips", required_argument, 0, O_LOOP_TRIPS},
	{"no-cost-model", no_argument, 0, O_NO_COST_MODEL},
	{"cost-model", no_argument, 0, O_COST_MODEL},
	{"max-device-bytes", required_argument, 0, O_DBYTES},
	{"max-device-bytes-per-uid", required_argument, 0, O_DBYTES_UID},
	{"max-tensors", required_argument, 0, O_TENSORS},
	{"help", no_argument, 0, O_HELP},
	{"version", no_argument, 0, O_VERSION},
	{"list-devices", no_argument, 0, O_LISTDEV},
	{"list-kernels", no_argument, 0, O_KERNELS},
	{0, 0, 0, 0},
};

/* One source of settings (the file, then the command line): a list named
 * in a source replaces the list of an earlier source. */
typedef struct source {
	bool uid_seen, gid_seen;
	char where[600]; /* "" for the command line, else "FILE:LINE: " */
} source;

/* Apply setting o with argument arg (NULL for flags). 0, or -1 printed. */
static int apply(config *c, source *src, int o, const char *arg)
{
	const char *name = o >= O_SOCKET && o <= O_KERNELS ? opts[o - O_SOCKET].name : "?";
	uint64_t v;
	switch (o) {
	case O_SOCKET:
		if (strlen(arg) >= sizeof(c->socket_path)) {
			fprintf(stderr, "vkgradd: %s--socket: path longer than %zu bytes\n", src->where,
				sizeof(c->socket_path) - 1);
			return -1;
		}
		snprintf(c->socket_path, sizeof(c->socket_path), "%s", arg);
		break;
	case O_CACHE:
		if (strlen(arg) > CONFIG_CACHE_DIR_MAX) {
			fprintf(stderr, "vkgradd: %s--cache-dir: path of %zu bytes is longer than %d bytes "
				"(the pipeline cache's file name goes after it)\n", src->where, strlen(arg),
				CONFIG_CACHE_DIR_MAX);
			return -1;
		}
		snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", arg);
		c->cache_dir_overlong = NULL;
		break;
	case O_DEVICE: snprintf(c->device, sizeof(c->device), "%s", arg); break;
	case O_LOG:
		if ((c->log_level = log_parse_level(arg)) < 0) {
			fprintf(stderr, "vkgradd: %s--log-level: '%s' is not one of error, warn, notice, info, debug\n",
				src->where, arg);
			return -1;
		}
		break;
	case O_FRAME:
		if (parse_u64(src->where, name, arg, 65536, 64u << 20, &v)) return -1;
		c->limits.max_frame = (uint32_t)v; break;
	case O_REGIONS:
		if (parse_u64(src->where, name, arg, 1, 1u << 20, &v)) return -1;
		c->limits.max_regions = (uint32_t)v; break;
	case O_RBYTES:
		if (parse_u64(src->where, name, arg, 4096, UINT64_MAX / 2, &v)) return -1;
		c->limits.max_region_bytes = v; break;
	case O_TBYTES:
	case O_RBYTES_UID:
		v = CONFIG_AUTO;
		if (strcmp(arg, "auto") != 0 && parse_u64(src->where, name, arg, 4096, UINT64_MAX / 2, &v))
			return -1;
		*(o == O_TBYTES ? &c->max_total_region_bytes : &c->max_region_bytes_per_uid) = v;
		break;
	case O_DBYTES:
	case O_DBYTES_UID:
		v = CONFIG_AUTO;
		if (strcmp(arg, "auto") != 0 && parse_u64(src->where, name, arg, 4096, UINT64_MAX / 2, &v))
			return -1;
		*(o == O_DBYTES ? &c->max_device_bytes : &c->max_device_bytes_per_uid) = v;
		break;
	case O_TENSORS:
		if (parse_u64(src->where, name, arg, 1, 1u << 20, &v)) return -1;
		c->limits.max_tensors = (uint32_t)v; break;
	case O_INFL:
		if (parse_u64(src->where, name, arg, 1, 1u << 20, &v)) return -1;
		c->limits.max_inflight = (uint32_t)v; break;
	case O_DIM:
		if (parse_u64(src->where, name, arg, 1, 1u << 20, &v)) return -1;
		c->limits.max_dim = v; break;
	case O_CONNS:
		if (parse_u64(src->where, name, arg, 1, 1u << 20, &v)) return -1;
		c->max_connections = (uint32_t)v; break;
	case O_CONNS_UID:
		if (parse_u64(src->where, name, arg, 1, 1u << 20, &v)) return -1;
		c->max_connections_per_uid = (uint32_t)v; break;
	case O_BJOBS:
		if (parse_u64(src->where, name, arg, 1, 65536, &v)) return -1;
		c->max_batch_jobs = (uint32_t)v; break;
	case O_IBATCH:
		if (parse_u64(src->where, name, arg, 1, CONFIG_MAX_INFLIGHT_BATCHES, &v)) return -1;
		c->inflight_batches = (uint32_t)v; break;
	case O_OUTB:
		if (parse_u64(src->where, name, arg, 65536, UINT64_MAX / 2, &v)) return -1;
		c->max_outbound_bytes = v; break;
	case O_NOIMPORT: c->no_host_import = true; break;
	case O_NO_COST_MODEL: c->no_cost_model = true; break;
	case O_COST_MODEL: c->cost_model_gpu = true; break;
	case O_BPC:
		if (parse_u64(src->where, name, arg, 1, 65536, &v)) return -1;
		c->batch_per_client = (uint32_t)v; break;
	case O_BBYTES:
		if (parse_u64(src->where, name, arg, 1, UINT64_MAX / 2, &v)) return -1;
		c->max_batch_bytes = v; break;
	case O_SPIN:
		if (parse_u64(src->where, name, arg, 0, 100000, &v)) return -1;
		c->spin_us = (uint32_t)v; break;
	case O_LOOPSPIN:
		v = CONFIG_AUTO;
		if (strcmp(arg, "auto") != 0 && parse_u64(src->where, name, arg, 0, 100000, &v))
			return -1;
		c->loop_spin_us = v;
		break;
	case O_DEVLOCAL:
		if (!strcmp(arg, "auto") || !strcmp(arg, "off")) {
			c->devlocal_min_bytes = arg[0] == 'a' ? CONFIG_AUTO : CONFIG_OFF;
			break;
		}
		if (parse_u64(src->where, name, arg, 1, UINT64_MAX / 2, &v)) return -1;
		c->devlocal_min_bytes = v; break;
	case O_STREAM_CHUNK:
	case O_STREAM_MIN:
		return parse_auto(src->where, name, arg, o == O_STREAM_CHUNK,
				  o == O_STREAM_CHUNK ? &c->stream_chunk_bytes : &c->stream_min_bytes);
	case O_COPY_PIECE:
	case O_STREAM_SHARED:
		return parse_auto(src->where, name, arg, true,
				  o == O_COPY_PIECE ? &c->copy_piece_bytes : &c->stream_shared_min_bytes);
	case O_SUBMIT_THREAD:
		if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0) {
			fprintf(stderr, "vkgradd: %s--%s: '%s' is not on or off\n", src->where, name, arg);
			return -1;
		}
		c->submit_thread = arg[1] == 'n';
		break;
	case O_SCRATCH:
		if (!strcmp(arg, "auto")) {
			c->scratch_max_bytes = CONFIG_AUTO;
			break;
		}
		if (parse_u64(src->where, name, arg, 1, UINT64_MAX / 2, &v)) return -1;
		c->scratch_max_bytes = v; break;
	case O_DRAIN:
		if (parse_u64(src->where, name, arg, 0, CONFIG_DRAIN_MAX_S, &v)) return -1;
		c->drain_timeout_s = (uint32_t)v; break;
	case O_DISPATCH:
		if (parse_u64(src->where, name, arg, 1, UINT64_MAX / 2, &v)) return -1;
		c->dispatch_max_macs = v; break;
	case O_LOOP_TRIPS:
		if (parse_u64(src->where, name, arg, CONFIG_LOOP_TRIPS_MIN, CONFIG_LOOP_TRIPS_DEFAULT, &v))
			return -1;
		c->loop_trips = (uint32_t)v; break;
	case O_CLIENT_MACS:
		if (!strcmp(arg, "auto")) {
			c->client_batch_macs = CONFIG_AUTO;
			break;
		}
		if (parse_u64(src->where, name, arg, 1, UINT64_MAX / 2, &v)) return -1;
		c->client_batch_macs = v; break;
	case O_SMALL_JOB:
	case O_SLICE: {
		uint64_t *dst = o == O_SMALL_JOB ? &c->small_job_us : &c->slice_us;
		if (!strcmp(arg, "auto")) {
			*dst = CONFIG_AUTO;
			break;
		}
		if (parse_u64(src->where, name, arg, 1, 60000000, &v)) return -1;
		*dst = v; break;
	}
	case O_ALLOW_UID:
		if (!src->uid_seen)
			c->n_allow_uid = 0;
		src->uid_seen = true;
		return parse_ids(src->where, name, arg, true, c->allow_uid, &c->n_allow_uid);
	case O_ALLOW_GID:
		if (!src->gid_seen)
			c->n_allow_gid = 0;
		src->gid_seen = true;
		return parse_ids(src->where, name, arg, false, c->allow_gid, &c->n_allow_gid);
	default:
		return -1;
	}
	return 0;
}

/* "false" for a flag in the file: undo it. */
static void clear_flag(config *c, int o)
{
	if (o == O_NOIMPORT)
		c->no_host_import = false;
	if (o == O_NO_COST_MODEL)
		c->no_cost_model = false;
	if (o == O_COST_MODEL)
		c->cost_model_gpu = false;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = 0;
	return s;
}

static int file_error(FILE *f, const source *src, const char *fmt, const char *arg)
{
	fprintf(stderr, "vkgradd: %s", src->where);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fclose(f);
	return -1;
}

/* key = value lines, '#' (or ';') comment lines, blank lines. */
static int load_file(config *c, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "vkgradd: --config %s: %s\n", path, strerror(errno));
		return -1;
	}
	source src = {0};
	char line[1024];
	unsigned ln = 0;
	while (fgets(line, sizeof(line), f)) {
		ln++;
		snprintf(src.where, sizeof(src.where), "%.500s:%u: ", path, ln);
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n' && !feof(f))
			return file_error(f, &src, "line longer than %s bytes", "1022");
		char *s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			return file_error(f, &src, "expected 'key = value', got '%s'", s);
		*eq = 0;
		char *key = trim(s), *val = trim(eq + 1);
		size_t vl = strlen(val);
		if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
			val[vl - 1] = 0;
			val++;
		}
		const struct option *opt = NULL;
		for (const struct option *o = opts; o->name; o++)
			if (strcmp(o->name, key) == 0 && o->val != O_CONFIG && o->val != O_HELP &&
			    o->val != O_VERSION && o->val != O_LISTDEV && o->val != O_KERNELS)
				opt = o;
		if (!opt)
			return file_error(f, &src, "unknown key '%s' (keys are the long options of --help, without dashes)", key);
		if (opt->has_arg == no_argument) {
			if (!strcmp(val, "true") || !strcmp(val, "yes") || !strcmp(val, "1") || !strcmp(val, "on"))
				apply(c, &src, opt->val, NULL);
			else if (!strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "0") || !strcmp(val, "off"))
				clear_flag(c, opt->val);
			else
				return file_error(f, &src, "'%s' is not true or false", val);
		} else if (apply(c, &src, opt->val, val) != 0) {
			fclose(f);
			return -1;
		}
	}
	int e = ferror(f);
	fclose(f);
	if (e) {
		fprintf(stderr, "vkgradd: --config %s: read error\n", path);
		return -1;
	}
	return 0;
}

int config_parse_args(config *c, int argc, char **argv)
{
	config d = *c;
	int o;
	/* first pass, silent: only --config (and whether --help/--version make
	 * the file moot); errors are reported by the second pass */
	const char *file = NULL;
	bool info = false;
	opterr = 0;
	optind = 0;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == O_CONFIG)
			file = optarg;
		else if (o == O_HELP || o == O_VERSION || o == O_LISTDEV || o == O_KERNELS)
			info = true;
	}
	if (file && !info && load_file(c, file) != 0)
		return -1;
	source src = {0}; /* where "": the command line */
	opterr = 1;
	optind = 0;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_CONFIG: break;
		case O_HELP: usage(&d); return 1;
		case O_VERSION: printf("vkgradd %s\n", VKG_VERSION); return 1;
		case O_LISTDEV: c->list_devices = true; break;
		case O_KERNELS: kreg_print(stdout); return 1;
		default:
			if (o < O_SOCKET || o > O_KERNELS) {
				fprintf(stderr, "vkgradd: try --help\n");
				return -1;
			}
			if (apply(c, &src, o, optarg) != 0)
				return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vkgradd: unexpected argument '%s' (try --help)\n", argv[optind]);
		return -1;
	}
	if (c->cache_dir_overlong) {
		fprintf(stderr, "vkgradd: the default cache directory (from $%s) is longer than %d bytes; "
			"pass a shorter --cache-dir\n", c->cache_dir_overlong, CONFIG_CACHE_DIR_MAX);
		return -1;
	}
	return 0;
}
