/* bench/cli_bench_mixed.h — the two halves of `vkgrad bench --scenario
 * mixed`: cli_bench_mixed.c (options, statistics, output, the command) and
 * cli_bench_mixed_phase.c (the client processes and one phase of them). */
#ifndef VKGRAD_CLI_BENCH_MIXED_H
#define VKGRAD_CLI_BENCH_MIXED_H

#include "cli_bench.h"

#include <stdbool.h>
#include <stdint.h>

#define MX_MAX_TINY 256 /* --tiny-clients */

/* One client process: k jobs of one shape (dW, db, dX) kept in flight, each
 * on a region of its own, timed from submit to reply. Every job a tiny
 * client submits before the phase's end counts, however late it ends; a
 * heavy client counts the jobs that ended within the phase and waits for,
 * without counting, those still in flight at its end. */
typedef struct mx_client {
	bool heavy;
	char name[24]; /* "tiny client 3", "heavy client": for messages */
	uint64_t shape[3];
	proto_dtype dtype;
	uint32_t k;
	uint64_t seed; /* of the inputs */
} mx_client;

/* A phase's merged measure of one kind of client: each counted job's round
 * trip (lat, ns) and trace (stg, PROTO_STAGE_COUNT per job, BENCH_NO_STAGE
 * where absent), the jobs counted, the last one's reply (CLOCK_MONOTONIC
 * ns), the clients whose last result failed the float64 check, and the
 * largest error of the checks (ref.h metric). */
typedef struct mx_side {
	uint64_t *lat, *stg, n, jobs, t_last;
	uint32_t mismatched;
	double max_err;
} mx_side;

typedef struct mx_phase_result {
	mx_side tiny, heavy;
	uint64_t t0; /* the start barrier's release */
} mx_phase_result;

/* Fork cl[0..n) (n <= MX_MAX_TINY + 1), each connecting to sock, setting up
 * its regions and reference and warming up; release them together and
 * gather their measures of `seconds`. Call it while this process has no
 * threads. 0, or -1 with why (r then holds nothing). */
int mx_phase(const char *sock, const mx_client *cl, uint32_t n, double seconds,
	     mx_phase_result *r, char *why, size_t len);
void mx_side_free(mx_side *s);

uint64_t mx_now(void);
/* FLOPs of the full backward of B×I×O: 4·B·I·O. */
double mx_flop(const uint64_t s[3]);

#endif
