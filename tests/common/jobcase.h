/* tests/common/jobcase.h — one linear_backward job laid out in client
 * memory, filled, and checked afterwards.
 *
 * Every tensor slot (x, dy, w, dw, db, dx) gets a place in the region(s),
 * asked for or not, with canary bytes before, between and after them:
 *
 *   [gap][x][gap][dy][gap][w][gap][dw][gap][db][gap][dx][gap]
 *
 * Each slot starts at a multiple of 256 plus the case's `skew`, or, for a
 * `packed` case, 4 bytes after the previous one ends. Inputs are
 * random in [-1, 1); outputs that the job asks for hold random values when
 * it accumulates, NaN otherwise (an overwrite must not read them); every
 * other byte is a position-dependent canary pattern. jobcase_check compares
 * the outputs with the float64 reference of client/ref.h and every other
 * byte with what jobcase_fill wrote: the daemon may write nothing outside
 * the outputs of the job. */
#ifndef VKG_TEST_JOBCASE_H
#define VKG_TEST_JOBCASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"
#include "ref.h"
#include "vkgrad.h"

enum { JC_DW = 1u, JC_DB = 2u, JC_DX = 4u, JC_ALL = 7u };

/* f32 results: normwise relative error (vkg_ref_max_rel_err) at most this. */
#define JC_TOL_F32 VKG_REF_TOL_F32
/* Canary bytes around each tensor. */
#define JC_GAP 64u

typedef struct jobcase {
	/* the job */
	uint64_t batch, in, out;
	unsigned outputs; /* JC_* */
	bool accumulate;
	bool pass_w;      /* name w even when dx is not asked for */
	/* the layout: change these, then call jobcase_layout() */
	unsigned nregions; /* 1: all in region 0; 2: outputs in region 1 */
	uint64_t skew;     /* 0: slots at multiples of 256; else skew + 4·(slot % 3)
			    * bytes past them, skew ≡ 4 (mod 16) */
	bool tight;        /* the last slot of each region ends the region */
	bool packed;       /* slots back to back, 4 canary bytes apart */
	/* computed by jobcase_layout */
	unsigned reg[PROTO_T_BACKWARD_COUNT];
	uint64_t off[PROTO_T_BACKWARD_COUNT], nbytes[PROTO_T_BACKWARD_COUNT];
	size_t size[2];
	/* the bytes jobcase_fill wrote */
	uint8_t *before[2];
} jobcase;

/* A case with default layout (one region, skew 0, canary at the end). */
void jobcase_init(jobcase *jc, uint64_t batch, uint64_t in, uint64_t out, unsigned outputs,
		  bool accumulate);
void jobcase_layout(jobcase *jc);
void jobcase_free(jobcase *jc);
/* Is slot t (PROTO_T_*) named in the job? */
bool jobcase_names(const jobcase *jc, int t);
/* "33x257x31 dw+db acc skew=4 2reg tight" into buf. */
const char *jobcase_name(const jobcase *jc, char *buf, size_t n);

/* Fill the mapped region(s) map[0..nregions) (each size[r] bytes) from seed
 * and remember the contents. Returns 0 or -ENOMEM. */
int jobcase_fill(jobcase *jc, void *const map[], uint64_t seed);
/* The job for daemon regions region[0..nregions). */
vkg_job jobcase_job(const jobcase *jc, const uint64_t region[]);
/* The same as a raw request with the given id. */
proto_request jobcase_request(const jobcase *jc, const uint64_t region[], uint64_t id);

/* After the job succeeded: outputs within tol of the reference and every
 * other byte as filled. Returns 0, or -1 with the first problem in why. */
int jobcase_check(const jobcase *jc, void *const map[], double tol, char *why, size_t n);
/* After the job failed: every byte as filled. Returns 0 or -1 (why). */
int jobcase_check_untouched(const jobcase *jc, void *const map[], char *why, size_t n);

/* Reference values of output slot t (JC_DW → PROTO_T_DW, ...) as floats,
 * with the accumulate base added: what the region should hold after the
 * job. Returns a malloc'ed array of nbytes[t]/4 floats, or NULL. */
float *jobcase_expected(const jobcase *jc, int t);

/* Run cases[0..n) on client c with the asynchronous API, at most `inflight`
 * in flight: for each, create its region(s), fill (seed: seed + index),
 * submit, and when its reply came check it and destroy the region(s).
 * Each failure is printed to stderr. *max_batch_jobs (may be NULL) gets the
 * largest batch_jobs any reply reported. Returns the number of failed cases. */
unsigned jobcase_run(vkg_client *c, jobcase *cases, size_t n, unsigned inflight, uint64_t seed,
		     uint64_t *max_batch_jobs);

#endif
