/* daemon/config.h — every setting of the daemon, with its default. */
#ifndef VKG_DAEMON_CONFIG_H
#define VKG_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

#define CONFIG_AUTO 0
#define CONFIG_OFF UINT64_MAX
#define CONFIG_MAX_ALLOW 64 /* ids per --allow-uid / --allow-gid list */
/* --inflight-batches at most: the engine's ring of submitted slots (engine.h) */
#define CONFIG_MAX_INFLIGHT_BATCHES 16
/* what --devlocal-min-bytes auto means (engine.c resolves it; why these:
 * docs/architecture.md, memory path) */
#define CONFIG_DEVLOCAL_AUTO_F32 (64ull << 20)
#define CONFIG_DEVLOCAL_AUTO_16BIT (4ull << 20)
#define CONFIG_DEVLOCAL_AUTO_DOC "on a GPU 64 MiB for f32 jobs, 4 MiB for f16/bf16;\n" \
	"                         off on a CPU device, whose device memory is host memory"

/* what --stream-chunk-bytes and --stream-min-bytes auto mean (stream.c
 * resolves them): on a device with a transfer-only queue, jobs on the
 * device-local path with at least 64 MiB of tensors stream in chunks of
 * about 4 Mi elements of dY (16 MiB of f32, 8 MiB of f16/bf16); without
 * one (nothing to overlap with) streaming is off. f16/bf16 chunks are at
 * least 1,024 rows and an eighth of the batch. The measurements behind
 * these sizes: docs/performance.md, end to end and streaming. */
#define CONFIG_STREAM_AUTO_CHUNK (16ull << 20) /* bytes of f32 dY */
#define CONFIG_STREAM_AUTO_CHUNK_ELEMS (4ull << 20)
#define CONFIG_STREAM_AUTO_MIN_ROWS_16BIT 1024ull
#define CONFIG_STREAM_AUTO_CHUNKS_16BIT 8ull /* at most this many chunks of 16-bit dY */
#define CONFIG_STREAM_AUTO_MIN (64ull << 20)
/* --stream-shared-min-bytes: how recent another connection's small job
 * must be for large jobs to stream as sharing (stream_chunk.c) */
#define CONFIG_STREAM_SHARED_WINDOW_NS 1000000000ull

/* what --client-batch-macs auto means: about 5 ms of f32 GEMM on the H200
 * (~15 T multiply-adds/s); 0.1-0.5 s on lavapipe (0.25-1 G/s here) */
#define CONFIG_CLIENT_MACS_AUTO_GPU (1ull << 36)
#define CONFIG_CLIENT_MACS_AUTO_CPU (1ull << 27)
/* what --small-job-us and --slice-us auto mean: on a GPU a small job is
 * one a tiny client's round trip can wait for; on a CPU device (lavapipe)
 * its "GPU" is these cores, where a tiny job alone takes about a
 * millisecond and a slice of 10 ms keeps its wait within tens of them */
#define CONFIG_SMALL_JOB_AUTO_GPU_US 250
#define CONFIG_SMALL_JOB_AUTO_CPU_US 5000
#define CONFIG_SLICE_AUTO_GPU_US 2000
#define CONFIG_SLICE_AUTO_CPU_US 10000
/* --loop-trips: the default is the most (variant.h's KSHAPE_LOOP_TRIPS_MAX) */
#define CONFIG_LOOP_TRIPS_DEFAULT 32768u
#define CONFIG_LOOP_TRIPS_MIN 16u
/* what --loop-spin-us auto means: on a GPU, polling this long after a
 * request catches a synchronous client's next one (its round trip is tens
 * of µs); a CPU device's "GPU" is these cores, which polling would take */
#define CONFIG_LOOP_SPIN_AUTO_GPU 50
#define CONFIG_LOOP_SPIN_AUTO_CPU 0

/* the longest --cache-dir: the cache's file name (pipelines.c) goes after it */
#define CONFIG_CACHE_DIR_MAX 511
/* --drain-timeout-s: the default, below systemd/vkgradd.service's
 * TimeoutStopSec=30 (past which the service manager kills the daemon
 * before it saved its cache), and the most */
#define CONFIG_DRAIN_DEFAULT_S 10
#define CONFIG_DRAIN_MAX_S 3600

/* What the environment says, read once by config_read_env (the one place
 * in daemon/ that reads it; man/vkgradd.8, ENVIRONMENT, lists every
 * variable): the defaults' sources, what the service manager tells the
 * daemon, and the debugging and testing switches the modules act on.
 * Strings point into the environment (NULL: unset); a switch "set" is on
 * whatever its value, even empty. */
typedef struct config_env {
	/* defaults of --socket and --cache-dir (config_defaults) */
	const char *xdg_runtime_dir, *cache_directory, *xdg_cache_home, *home;
	/* the service manager (libsystemd reads LISTEN_FDS, LISTEN_PID,
	 * WATCHDOG_USEC and WATCHDOG_PID itself, service.c) */
	bool journal_stream;     /* JOURNAL_STREAM set: "<N>" log prefixes (log.c) */
	bool notify_socket;      /* NOTIFY_SOCKET set: sd_notify messages (service.c) */
	/* the device (device.c, coopmat_khr.c) */
	bool validation;         /* VKGRAD_VALIDATION=1: the Khronos validation layer */
	const char *keep_drivers;/* VKGRAD_KEEP_DRIVERS: libraries kept loaded (colon-separated) */
	bool no_transfer_queue;  /* VKGRAD_NO_TRANSFER_QUEUE set, not empty, not "0" */
	bool cpu_import;         /* VKGRAD_CPU_IMPORT=1: import client memory on a CPU device */
	bool fault_shared_16k;   /* VKGRAD_FAULT_SHARED_16K set: 16 KiB of shared memory */
	bool fault_no_storage16; /* VKGRAD_FAULT_NO_STORAGE16 set: no 16-bit storage */
	bool no_coopmat;         /* VKGRAD_NO_COOPMAT set: no VK_NV_cooperative_matrix */
	bool no_coopmat_khr;     /* VKGRAD_NO_COOPMAT_KHR set: no VK_KHR_cooperative_matrix */
	bool no_coopmat_nv2;     /* VKGRAD_NO_COOPMAT_NV2 set: no VK_NV_cooperative_matrix2 */
	bool no_calibration;     /* VKGRAD_NO_CALIBRATION set: no calibrated timestamps */
	/* kernels' tilings, for measuring others (pipelines.c) */
	const char *cmk_tile, *cmk_tile_small; /* VKGRAD_CMK_TILE, VKGRAD_CMK_TILE_SMALL */
	const char *cmk_small_below;           /* VKGRAD_CMK_SMALL_BELOW */
	const char *t128_tile;                 /* VKGRAD_T128_TILE (t128_tile.h) */
	const char *nv2_tile;                  /* VKGRAD_NV2_TILE (nv2_tile.h) */
	const char *dxs_tile;                  /* VKGRAD_DXS_TILE (dxs_tile.h) */
	/* streamed jobs (stream.c) */
	bool stream_no_sums;       /* VKGRAD_STREAM_SUMS=0: dW never resumed */
	bool stream_no_timestamps; /* VKGRAD_STREAM_TIMESTAMPS=0: steps untimed */
	/* faults for tests (setup.c sched_parse_faults) */
	const char *fault_inject;  /* VKGRAD_FAULT_INJECT */
} config_env;

typedef struct config {
	config_env env;         /* config_read_env, by config_defaults */
	char socket_path[108];
	char cache_dir[CONFIG_CACHE_DIR_MAX + 1];
	const char *cache_dir_overlong; /* the variable whose default was too long, or NULL */
	char device[128];      /* "" = automatic, else index or name substring */
	int log_level;
	proto_limits limits;    /* what hello reports; max_tensor_bytes is
				   lowered to the device's storage-buffer range */
	/* registered bytes of all connections together, and of all
	 * connections of one peer uid; CONFIG_AUTO: config_region_budget */
	uint64_t max_total_region_bytes;
	uint64_t max_region_bytes_per_uid;
	/* device tensors' bytes, all connections and one peer uid's;
	 * CONFIG_AUTO: config_device_budget. limits.max_tensors: per
	 * connection (CONFIG_MAX_TENSORS_DEFAULT) */
	uint64_t max_device_bytes;
	uint64_t max_device_bytes_per_uid;
	uint32_t max_connections;
	uint32_t max_connections_per_uid; /* connections at once of one peer uid */
	uint32_t max_batch_jobs;  /* jobs recorded into one command buffer */
	uint32_t batch_per_client;/* jobs one connection adds to a batch per round */
	uint64_t max_batch_bytes; /* tensor bytes one batch may carry (first job always fits) */
	uint32_t spin_us;         /* the loop polls the GPU at most this long past a submission (spin.h) */
	uint64_t loop_spin_us;    /* ... and its sockets this long after activity; CONFIG_AUTO: by device type */
	uint32_t inflight_batches;/* submissions in flight at once */
	uint64_t max_outbound_bytes; /* reply bytes queued for a slow reader */
	uint32_t drain_timeout_s; /* SIGTERM: how long replies may wait to be read */
	bool no_host_import;     /* force the staging-copy path (testing) */
	bool no_cost_model;      /* auto by its fixed rules, no probes (costmodel.h) */
	bool cost_model_gpu;     /* --cost-model: measure it on a GPU too */
	bool list_devices;       /* --list-devices: print them and exit */
	/* the device-local path (engine.h): jobs with at least this many tensor
	 * bytes run on device-local copies; CONFIG_AUTO: chosen per device type,
	 * CONFIG_OFF: never */
	uint64_t devlocal_min_bytes;
	uint64_t scratch_max_bytes;  /* per submission slot; CONFIG_AUTO: scratch.h */
	/* streamed jobs (stream.h): bytes of dY per chunk (CONFIG_AUTO: by
	 * device, CONFIG_OFF: never), and the tensor bytes from which a
	 * device-local job streams (CONFIG_AUTO: CONFIG_STREAM_AUTO_MIN) */
	uint64_t stream_chunk_bytes;
	uint64_t stream_min_bytes;
	/* ... and from which a large one streams while other connections'
	 * small jobs are about (CONFIG_AUTO: every device-local one where
	 * the device has a transfer-only queue, else never; CONFIG_OFF:
	 * never) */
	uint64_t stream_shared_min_bytes;
	/* bytes per vkCmdCopyBuffer of a device-local job's copies on the
	 * compute queue (CONFIG_AUTO, CONFIG_OFF: whole tensors). On the H200
	 * 64 KiB pieces let small jobs in between them, 256 KiB and more did
	 * not, and 64 KiB left a 2048x1024x1024 bf16 tenant 0.41 of its
	 * speed: off unless asked (docs/performance.md, "Mixed tenants") */
	uint64_t copy_piece_bytes;
	/* batches recorded and submitted on the engine's submission thread
	 * (sched/submit.c) rather than on the loop thread */
	bool submit_thread;
	uint64_t dispatch_max_macs;  /* multiply-adds per dispatch (driver timeouts) */
	/* iterations of any kernel's loops in one dispatch (variant.h, "Loop
	 * bound"): at most CONFIG_LOOP_TRIPS_DEFAULT; lower to test the cut
	 * reductions on small shapes */
	uint32_t loop_trips;
	/* fairness in time (engine.h): multiply-adds one connection may add to
	 * a batch and have in flight; CONFIG_AUTO: by device type (below) */
	uint64_t client_batch_macs;
	/* job classes (engine.h): jobs estimated to take at most small_job_us
	 * of GPU time are small, on their own queue and slots; on a device
	 * whose small and large jobs share one queue, large work goes in
	 * slices of about slice_us. CONFIG_AUTO: by device type (below) */
	uint64_t small_job_us;
	uint64_t slice_us;
	/* peer checks (peer.h): both empty = everyone the socket lets in */
	uint32_t allow_uid[CONFIG_MAX_ALLOW], allow_gid[CONFIG_MAX_ALLOW];
	unsigned n_allow_uid, n_allow_gid;
} config;

#define CONFIG_REGION_TOTAL_AUTO_DOC "half of the host's memory, at most the device heap\n" \
	"                         that staging buffers come from"

/* What the registered-bytes limits come to. Every registered byte costs
 * host memory: a staging mirror, or client pages the device import pins
 * (faulting in every page of a sparse memfd). So `auto` for the total is
 * half of the host's memory (host_ram; the other half stays for the
 * clients' own pages and everything else) and no more than the heap the
 * staging buffers are allocated from (heap, 0: unknown), rounded down to
 * MiB; with host_ram unknown (0), 64 GiB. `auto` for one uid is half of
 * the total, so one user never keeps everyone else out. */
void config_region_budget(const config *c, uint64_t host_ram, uint64_t heap, uint64_t *total,
			  uint64_t *per_uid);

/* The device tensors' budget: --max-device-bytes, or `auto`: half of the
 * device-local heap (heap; 0: unknown gives 1 GiB), rounded down to MiB;
 * --max-device-bytes-per-uid, or `auto`: half of the total. */
#define CONFIG_MAX_TENSORS_DEFAULT 4096
void config_device_budget(const config *c, uint64_t heap, uint64_t *total, uint64_t *per_uid);

/* Read every environment variable the daemon acts on into *e (the
 * process's environment as it is now). */
void config_read_env(config_env *e);
/* Defaults, after config_read_env(&c->env): socket path from
 * $XDG_RUNTIME_DIR or /run/vkgrad, cache directory from $CACHE_DIRECTORY,
 * $XDG_CACHE_HOME or $HOME. */
void config_defaults(config *c);
/* Parse argv, after the file named by --config FILE when there is one
 * (key = value lines, keys the long option names; the command line
 * overrides the file). Returns 0, 1 when the program should exit 0 (--help,
 * --version printed), or -1 after printing an error. */
int config_parse_args(config *c, int argc, char **argv);

#endif
