/* client/cli.h — internals of the vkgrad command-line tool, shared by its
 * subcommands (cli_main.c dispatches; cli_info.c, cli_run.c, cli_demo.c
 * implement; cli_bench_front.c runs vkgrad-bench for `bench`, which
 * bench/cli_bench.c implements; cli_util.c holds the helpers and cli_task.c
 * one job's memory, inputs and reference check, both linked into
 * vkgrad-bench too; bench/cli_bench.h has the benchmark's own parts). */
#ifndef VKGRAD_CLI_H
#define VKGRAD_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "msg.h" /* proto_dtype, proto_variant */
#include "vkgrad.h"

/* Exit codes of every subcommand. */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_CHECK = 1,  /* a result differed from the reference */
	CLI_EXIT_USAGE = 2,  /* bad command line */
	CLI_EXIT_DAEMON = 3, /* the daemon refused, or the connection failed */
};

/* f32 results must match the float64 reference within this (ref.h metric);
 * f16 and bf16 within vkg_ref_tolerance() (ref.h). */
#define CLI_TOL 1e-4
#define CLI_TOL_TEXT "1e-4"
#define CLI_TOL_ALL_TEXT "f32 1e-4, f16 2e-3, bf16 1e-2"

typedef struct cli_ctx {
	const char *socket; /* --socket, or NULL for the library default */
} cli_ctx;

/* ---- helpers (cli_util.c) ---- */

/* printf into a buffer, then one write(2) to stdout / stderr, so lines from
 * several processes never interleave mid-line. */
void cli_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print "vkgrad: <code>: <message>" and return CLI_EXIT_DAEMON. */
int cli_fail(const vkg_error *err);
/* Print "vkgrad: <message>" and a hint, return CLI_EXIT_USAGE. */
int cli_usage_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parse an unsigned decimal in [min, max] for option opt; 0 or -1 (printed). */
int cli_parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Parse a finite number in [min, max] (max DBL_MAX: no bound) for option
 * opt; 0 or -1 (printed). */
int cli_parse_double(const char *opt, const char *s, double min, double max, double *out);
/* The socket path in use, for messages. */
const char *cli_socket_path(const cli_ctx *ctx);
/* vkg_connect to --socket, or the library's choice. */
vkg_client *cli_connect(const cli_ctx *ctx, vkg_error *err);
/* Monotonic microseconds. */
uint64_t cli_now_us(void);

/* ---- subcommands ---- */
int cli_info(const cli_ctx *ctx, int argc, char **argv);
int cli_stats(const cli_ctx *ctx, int argc, char **argv);
int cli_ping(const cli_ctx *ctx, int argc, char **argv);
int cli_run(const cli_ctx *ctx, int argc, char **argv);
int cli_demo(const cli_ctx *ctx, int argc, char **argv);
/* `bench`: in vkgrad, cli_bench_front.c runs vkgrad-bench; in vkgrad-bench,
 * bench/cli_bench.c is the benchmark itself */
int cli_bench(const cli_ctx *ctx, int argc, char **argv);
/* `stats --prometheus` (cli_prom.c): the daemons on `sockets` (none: the
 * context's) and/or every *.sock socket in scan, to stdout or atomically
 * into output. A socket whose systemd socket unit listens with its daemon
 * not started is left alone (vkgrad_idle 1) unless start_idle. */
int cli_stats_prometheus(const cli_ctx *ctx, const char *output, const char *scan,
			 char **sockets, int nsockets, bool start_idle);
/* Is the socket at path a systemd socket unit's that is listening with
 * its service not started (socket_state.c)? 1 (why says which unit), 0
 * (running, or no unit of systemd's: connect), -1 when systemd cannot be
 * asked (no bus: connect). */
int cli_socket_idle(const char *path, char *why, size_t why_len);
/* The whole `stats` reply, histograms included (cli_prom.c). */
int cli_stats_fetch(vkg_client *c, proto_stats *out, vkg_error *err);

/* A reply body as one line of JSON on stdout, `socket` first (cli_json.c).
 * CLI_EXIT_OK, or CLI_EXIT_DAEMON when it is not a msgpack map. */
int cli_print_json(const void *body, size_t len, const char *socket);
/* `vkgrad clients` (cli_clients.c). */
int cli_clients(const cli_ctx *ctx, int argc, char **argv);

/* ---- one linear_backward job with its own region (cli_task.c) ---- */

enum { CLI_X, CLI_DY, CLI_W, CLI_DW, CLI_DB, CLI_DX, CLI_NT };
#define CLI_OUT_DW (1u << 0)
#define CLI_OUT_DB (1u << 1)
#define CLI_OUT_DX (1u << 2)
#define CLI_OUT_ALL (CLI_OUT_DW | CLI_OUT_DB | CLI_OUT_DX)

typedef struct cli_task {
	uint64_t batch, in, out;
	unsigned outputs;        /* CLI_OUT_* */
	bool accumulate;
	proto_dtype dtype;       /* storage type of every tensor */
	const char *variant;     /* NULL: the daemon's choice */
	bool present[CLI_NT];
	size_t off[CLI_NT];      /* byte offsets in the region, 256-aligned */
	size_t size;             /* region bytes */
	uint8_t *mem;            /* the mapping, NULL until registered */
	uint64_t region;
	double *ref[CLI_NT];     /* float64 gradients of the outputs (or of the samples) */
	uint64_t *sample[CLI_NT]; /* NULL: ref holds every element; else the indices */
	size_t nsample[CLI_NT];  /* ... of the nsample elements ref holds */
	double *base[CLI_NT];    /* outputs before the job (accumulate only) */
	double err[CLI_NT];      /* last check, per output */
} cli_task;

/* Lay out the tensors, each stored as dtype. Returns 0, or -1 with why
 * filled (too large). */
int cli_task_init(cli_task *t, uint64_t batch, uint64_t in, uint64_t out, unsigned outputs,
		  bool accumulate, proto_dtype dtype, char *why, size_t why_len);
uint64_t cli_task_elems(const cli_task *t, int slot);
/* Bytes of one tensor. */
uint64_t cli_task_bytes(const cli_task *t, int slot);
/* The tensor's first element in the mapping (t->dtype values), or NULL. */
void *cli_task_ptr(const cli_task *t, int slot);
/* Create and register the region. 0 or a negative value with err set. */
int cli_task_map(cli_task *t, vkg_client *c, vkg_error *err);
/* Deterministic values in [-1, 1] from seed, rounded to the dtype: the
 * inputs, or the outputs (garbage to be overwritten, or the base an
 * accumulate job adds to). */
void cli_task_fill_inputs(cli_task *t, uint64_t seed);
void cli_task_fill_outputs(cli_task *t, uint64_t seed);
/* Fill the outputs with NaN (all bits set, a NaN in every dtype): a job that
 * leaves any element unwritten then fails the check. Cheaper than random
 * values for large tensors. */
void cli_task_poison_outputs(cli_task *t);
/* Remember the outputs' contents as the base of an accumulate job. */
int cli_task_snapshot(cli_task *t);
/* Compute the float64 reference (once; inputs must not change afterwards).
 * 0 or -ENOMEM. */
int cli_task_reference(cli_task *t);
/* The same for large shapes, where the full reference would take minutes:
 * every element of db, and n elements of dw and of dx picked from seed
 * (all of them when the tensor has no more), each a float64 dot product
 * over the stored inputs. 0 or -ENOMEM. */
int cli_task_reference_sampled(cli_task *t, size_t n, uint64_t seed);
/* Compare the outputs with the reference (+ base): vkg_ref_max_rel_err over
 * every element, or over the sampled ones. Returns the largest error and
 * fills t->err per output. */
double cli_task_check(cli_task *t);
vkg_job cli_task_job(const cli_task *t);
/* Unregister and unmap the region (through c, even when its connection
 * failed: the library then still unmaps), free the reference arrays. Call it
 * before vkg_close(c). */
void cli_task_free(cli_task *t, vkg_client *c);

/* "dw,db,dx" <-> CLI_OUT_* mask. parse returns 0 or -1. */
int cli_outputs_parse(const char *s, unsigned *mask);
const char *cli_outputs_name(unsigned mask, char buf[16]);

#endif
