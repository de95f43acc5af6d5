/* bench/cli_bench.h — internals of `vkgrad bench`, shared by its parts:
 * cli_bench.c (scenarios, options, the socket mode's client processes,
 * statistics and output), cli_bench_direct.c (the same jobs in-process
 * through the daemon's own engine, no socket), cli_bench_kernels.c
 * (`bench --kernels`), cli_daemon.c (a private vkgradd for the run) and
 * cli_bench_io.c (what they share). The benchmark lives outside client/
 * because the direct mode links the daemon's core (libvkgradd-core.a): it
 * is its own program, vkgrad-bench (bench_main.c), which `vkgrad bench` runs;
 * client/ is the library and the CLI's other commands, which use only
 * proto/ and the library. */
#ifndef VKGRAD_CLI_BENCH_H
#define VKGRAD_CLI_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "msg.h" /* proto_stage_id */

/* One measured line: a shape run by `clients` clients, each doing `warmup`
 * unmeasured jobs, then `jobs` measured ones with `inflight` in flight. */
typedef struct bench_spec {
	const char *scenario;
	uint64_t batch, in, out;
	unsigned outputs;       /* CLI_OUT_* */
	uint32_t clients, inflight;
	uint64_t jobs;          /* per client */
	uint64_t warmup;        /* per client */
	bool check;             /* compare each client's last result with the reference */
} bench_spec;

/* What one run measured. lat_ns holds every measured job's round trip;
 * stage_ns (when not NULL) each job's trace, PROTO_STAGE_COUNT values per
 * job in proto_stage_id order, BENCH_NO_STAGE where the trace had none. */
#define BENCH_NO_STAGE UINT64_MAX
typedef struct bench_result {
	uint64_t *lat_ns;
	uint64_t *stage_ns;
	uint64_t n;
	uint64_t batch_jobs_sum; /* of the measured replies */
	uint64_t wall_ns;        /* start barrier released .. last client done */
	uint32_t mismatched;     /* clients whose checked result was off */
	char device[128];
} bench_result;

/* `bench --kernels` (cli_bench_kernels.c); cli_bench hands over to it. */
struct cli_ctx;
int cli_bench_kernels(const struct cli_ctx *ctx, int argc, char **argv);
/* `bench --scenario mixed` (cli_bench_mixed.c): tiny tenants beside a
 * heavy one; cli_bench hands over to it. */
int cli_bench_mixed(const struct cli_ctx *ctx, int argc, char **argv);
/* `bench --peak` (cli_bench_peak.c): the device's ceilings by microkernels,
 * in this process (no daemon). */
int cli_bench_peak(int argc, char **argv);

/* ---- cli_bench_io.c ---- */
void bench_result_free(bench_result *r);
/* One job's row of stage_ns: every stage absent, then each named stage
 * (proto_stage_name; names it does not know are ignored) set. */
void bench_stage_row_clear(uint64_t *row);
void bench_stage_put(uint64_t *row, const char *name, uint64_t ns);
/* Whole reads and writes on a pipe: 0, or -1 (EOF or error). */
int bench_read_all(int fd, void *p, size_t len);
int bench_write_all(int fd, const void *p, size_t len);

/* ---- direct mode (cli_bench_direct.c) ----
 * The daemon's device, pipelines and engine in this process; each simulated
 * client is one engine lane with one region. */
typedef struct bench_direct bench_direct;

/* Open the device (the daemon's default choice), build the pipelines with a
 * temporary cache directory and start an engine. NULL with why on failure. */
bench_direct *bench_direct_open(char *why, size_t why_len);
/* Run one line. 0, or -1 with why. */
int bench_direct_run(bench_direct *b, const bench_spec *s, bench_result *r, char *why,
		     size_t why_len);
void bench_direct_close(bench_direct *b);

/* The direct mode in a helper process, forked while the caller has no
 * threads and no Vulkan device, so the caller can go on forking socket-mode
 * clients between direct runs, and both modes of a line run back to back.
 * The helper opens the device at its first run and keeps it. */
typedef struct bench_direct_proc {
	pid_t pid;
	int cmd_fd, res_fd;
} bench_direct_proc;

/* 0, or -1 with why. plan[0..n) is what runs later refer to. */
int bench_direct_proc_start(bench_direct_proc *p, const bench_spec *plan, uint32_t n, char *why,
			    size_t why_len);
/* Run plan[line] in the helper. 0, or -1 with why. */
int bench_direct_proc_run(bench_direct_proc *p, uint32_t line, bench_result *r, char *why,
			  size_t why_len);
/* Let the helper close the device and exit; 0 when it exited with 0. */
int bench_direct_proc_stop(bench_direct_proc *p, char *why, size_t why_len);

/* ---- a private daemon (cli_daemon.c) ---- */
typedef struct cli_daemon {
	pid_t pid;        /* 0 when not running */
	char dir[256];    /* temporary directory: socket, cache/, daemon.log */
	char sock[300];
	char log[300];
} cli_daemon;

/* The vkgradd next to this executable (/proc/self/exe); 0 or -1. */
int cli_daemon_default_binary(char *buf, size_t len);
/* Start `binary` on a socket in a fresh temporary directory with an empty
 * --cache-dir there, stderr to the log, and wait up to timeout_ms until it
 * answers ping. args: more command-line arguments (NULL-terminated, at most
 * 16; NULL for none), e.g. raised limits. 0, or -1 with why (the log's tail
 * printed to stderr). */
/* s as a JSON string body into out (quotes, backslashes and control
 * characters escaped; cut to fit cap). */
void cli_json_escape(char *out, size_t cap, const char *s);

int cli_daemon_start(cli_daemon *d, const char *binary, const char *const *args, int timeout_ms,
		     char *why, size_t why_len);
/* SIGTERM, wait up to timeout_ms, remove the directory. 0 when the daemon
 * exited with status 0, else -1 with why (the log kept and named). */
int cli_daemon_stop(cli_daemon *d, int timeout_ms, char *why, size_t why_len);

/* Remove a directory tree (best effort). */
void cli_rmtree(const char *dir);

#endif
