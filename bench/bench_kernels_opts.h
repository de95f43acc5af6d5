/* bench/bench_kernels_opts.h — `vkgrad bench --kernels`'s command line:
 * its options (bk_opts), their defaults, the named shape sets, the usage
 * text. The benchmark itself is cli_bench_kernels.c. */
#ifndef VKG_BENCH_KERNELS_OPTS_H
#define VKG_BENCH_KERNELS_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h" /* proto_dtype, proto_variant */

#define BK_MAX_SHAPES 32
/* Warm-up before each line's measured jobs: jobs until this much time has
 * passed since the first one began (at least one, at most BK_WARMUP_MAX). */
#define BK_WARMUP_US 300000.0
#define BK_WARMUP_MAX 50
/* --inflight's most */
#define BK_INFLIGHT_MAX 64

typedef struct bk_opts {
	const char *socket, *daemon;
	uint64_t shapes[BK_MAX_SHAPES][3];
	unsigned nshapes;
	proto_dtype dtypes[PROTO_DTYPE_COUNT];
	unsigned ndtypes; /* 0: what hello lists */
	proto_variant variants[PROTO_VARIANT_COUNT];
	unsigned nvariants;
	uint64_t reps; /* 0: by FLOPs */
	unsigned outputs; /* CLI_OUT_* */
	double max_gflop;
	bool max_gflop_set, json;
	double copy_gbps; /* --copy-gbps */
	bool copy_set;
	bool resident; /* --resident */
	unsigned inflight; /* --inflight: jobs kept in flight (0: 1) */
	double warmup_ms;  /* --warmup-ms (< 0: BK_WARMUP_US, at most BK_WARMUP_MAX jobs) */
	double settle_ms;  /* --settle-ms: the least warm-up of a shape and dtype's first line */
	double prune;      /* --prune: a line whose first job took more than this times its
			    * shape and dtype's best so far ends there (0: off) */
} bk_opts;

/* Parse argv (after `bench`) into o, its defaults first. Returns 0; -1
 * after --help (printed); else the CLI's usage exit code, the problem
 * printed. */
int bk_opts_parse(int argc, char **argv, bk_opts *o);
/* The storage dtype named s ("f32", ...), or -1. */
int bk_dtype_lookup(const char *s);

#endif
