/* tests/common/bwjob.h — one linear_backward job of any dtype in a region
 * of its own, with canaries, checked against float64.
 *
 * The split-K tests' job (test_cmk_splitk, test_cmks_dx): B×I×O of dtype
 * f32/f16/bf16, the chosen outputs, accumulate or not, a variant; every
 * tensor `skew` bytes past a multiple of 256 with 256 canary bytes after
 * it; inputs random in [-1, 1) stored in the dtype, outputs random when
 * the job accumulates, NaN otherwise (an overwrite must not read them).
 * Afterwards the outputs are compared, normwise (vkg_ref_max_rel_err),
 * with the float64 reference of the stored inputs (client/ref.h), and
 * every other byte with what was written: the daemon may write nothing
 * outside the outputs. (jobcase.h is the f32 job of many layouts.) */
#ifndef VKG_TEST_BWJOB_H
#define VKG_TEST_BWJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vkgrad.h"

/* outputs */
enum { BWJOB_DW = 1u, BWJOB_DB = 2u, BWJOB_DX = 4u };
/* tensor slots */
enum { BWJOB_T_X, BWJOB_T_DY, BWJOB_T_W, BWJOB_T_DW, BWJOB_T_DB, BWJOB_T_DX, BWJOB_NT };

/* by dtype index (0 f32, 1 f16, 2 bf16: proto_dtype's order) */
extern const char *const bwjob_dtype[3];
extern const double bwjob_tol[3]; /* VKG_REF_TOL_* */

typedef struct bwjob_outcome {
	int rc; /* 0, or -1 when refused */
	char code[32], message[320];
	double err;     /* worst normwise error over the outputs */
	char bound[200]; /* a checker's first element past its bound: where */
	char why[160];  /* a canary or input byte changed: where */
	uint8_t *bytes; /* the whole region after the job, when keep (free it) */
	size_t nbytes;
} bwjob_outcome;

/* What a job that succeeded wrote, for a checker: its shape, which slots it
 * named, their elements, the stored inputs (and the outputs' old values,
 * accumulating: val[t] of an output) and the outputs as read back (got[t],
 * NULL where absent), as floats. */
typedef struct bwjob_result {
	uint64_t B, I, O;
	bool acc;
	bool present[BWJOB_NT];
	uint64_t n[BWJOB_NT];
	float *const *val;
	float *const *got;
} bwjob_result;

/* Checks r's outputs into oc (err: the worst normwise error; bound: the
 * first element past a bound of its own). */
typedef void (*bwjob_checker)(const bwjob_result *r, bwjob_outcome *oc, const void *ctx);

/* Run B×I×O of dtype dt (outputs outs, accumulate acc) on `variant` on the
 * daemon at sock, inputs from seed, tensors `skew` bytes off the 256-byte
 * grid; keep: the region's bytes afterwards into the outcome. Its outputs
 * are checked by the normwise error against the float64 reference
 * (vkg_ref_max_rel_err). */
bwjob_outcome bwjob_run(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			const char *variant, uint64_t seed, uint64_t skew, bool keep);
/* bwjob_run, the outputs checked by check(ctx) instead. */
bwjob_outcome bwjob_run_checked(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
				bool acc, const char *variant, uint64_t seed, uint64_t skew, bool keep,
				bwjob_checker check, const void *ctx);

/* "dw,db" and the like. */
const char *bwjob_outs_name(unsigned outs);

/* bwjob_run that must succeed within bwjob_tol[dt], touching nothing else:
 * 0, or 1 with the job and what went wrong on stderr. */
unsigned bwjob_check(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
		     const char *variant, uint64_t seed, uint64_t skew);
/* bwjob_check, the outputs checked by check(ctx) (bwjob_run_checked); a
 * bound it reports fails the job too. */
unsigned bwjob_check_checked(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
			     bool acc, const char *variant, uint64_t seed, uint64_t skew, bwjob_checker check,
			     const void *ctx);

/* The same job twice (bwjob_run_checked, bytes kept): the first must
 * succeed within bwjob_tol[dt] with no bound or byte outside the outputs
 * broken, the second give the whole region's bytes again (a fixed order of
 * sums, no atomics). 0, or 1 with the job and what differed on stderr. */
unsigned bwjob_same_bits_checked(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
				 bool acc, const char *variant, uint64_t seed, uint64_t skew, bwjob_checker check,
				 const void *ctx);
/* bwjob_same_bits_checked with the normwise check of bwjob_run. */
unsigned bwjob_same_bits(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			 const char *variant, uint64_t seed, uint64_t skew);

/* The job of B×I×O of dtype `dtype` on `variant` (NULL: auto), accumulating
 * when acc, naming [reg, off[t]) for each slot t where present[t] (slots in
 * BWJOB_T_* order: X, dY, W, dW, db, dX). */
vkg_job bwjob_region_job(const char *dtype, const char *variant, uint64_t B, uint64_t I, uint64_t O, bool acc,
			 uint64_t reg, const size_t off[BWJOB_NT], const bool present[BWJOB_NT]);

/* Which dtypes hello lists `kernel` for, on the daemon at sock (a hello as
 * `client`): offered[dt] by dtype index, the device's name into device.
 * -1 when it cannot ask, or when a record of `kernel` names another
 * variant than `variant` or a dtype outside `dtypes` (bit dt: dtype dt). */
enum { BWJOB_F32_ONLY = 1u, BWJOB_16BIT_ONLY = 6u }; /* bwjob_offered's dtypes */
int bwjob_offered(const char *sock, const char *client, const char *kernel, const char *variant,
		  unsigned dtypes, bool offered[3], char *device, size_t n);
/* bwjob_offered for a 16-bit kernel, then a line saying where it is
 * offered ("KERNEL on DEVICE: f16 offered, bf16 absent"). */
int bwjob_offered_16bit(const char *sock, const char *client, const char *kernel, const char *variant,
			bool offered[3], char *device, size_t n);

#endif
