/* bench/peak_ref.h — the inputs and float64 reference of `vkgrad bench
 * --peak`'s microkernels (shaders/bench_peak_fma.comp,
 * shaders/bench_peak_mma.comp, shaders/bench_peak_nv2.comp), and the check
 * of what they wrote; the byte pattern of the copy line (bench/peak_copy.c)
 * and its check. No
 * Vulkan: tests/unit/test_peak_ref.c runs it on its own.
 *
 * Every value a microkernel computes is a small integer, exact in f16, bf16
 * and f32, as long as the loop count stays within the bounds below; the
 * check then wants every element equal to the reference. */
#ifndef VKG_BENCH_PEAK_REF_H
#define VKG_BENCH_PEAK_REF_H

#include <stddef.h>
#include <stdint.h>

#define PEAK_EXACT_LIMIT 16777216.0 /* 2^24: integers below it are exact in f32 */

/* ---- bench_peak_fma ---- */

/* The most loop trips for which every chain and the sum of an invocation's
 * chains (4·chains values, each at most 255 + iters·unroll, with a = b = 1)
 * stay below 2^24. */
uint32_t peak_fma_max_iters(uint32_t chains, uint32_t unroll);
/* What invocation t writes after `iters` trips (a = b = 1). */
double peak_fma_expect(uint32_t t, uint32_t chains, uint32_t unroll, uint32_t iters);

/* ---- bench_peak_mma ---- */

typedef struct peak_mma_geom {
	uint32_t m, n, k; /* the matrix shape */
	uint32_t fa, fb;  /* A and B fragments per subgroup: fa·fb accumulators */
	uint32_t steps;   /* multiply-adds into each accumulator per loop trip */
} peak_mma_geom;

/* Fragment f of A (m×k, row-major), g of B (k×n), accumulator i's start
 * (m×n): small integers. */
double peak_mma_a(const peak_mma_geom *g, uint32_t f, uint32_t row, uint32_t col);
double peak_mma_b(const peak_mma_geom *g, uint32_t f, uint32_t row, uint32_t col);
double peak_mma_init(const peak_mma_geom *g, uint32_t i, uint32_t row, uint32_t col);
/* The most loop trips for which every partial sum of every accumulator
 * stays an integer below 2^24 (0 when even one does not fit). */
uint32_t peak_mma_max_iters(const peak_mma_geom *g);
/* Accumulator (i = a·fb + b) of any subgroup after iters trips, m·n values
 * row-major into out. */
void peak_mma_expect(const peak_mma_geom *g, uint32_t i, uint32_t iters, double *out);

/* ---- bench_peak_nv2 ---- */

/* One workgroup's multiply: a BM×BN accumulator (m×n) += A_s (m×k) · B_s
 * (k×n), where A_s and B_s are k-slice s of an m × (slices·k) A and a
 * (slices·k) × n B; a loop trip runs `steps` multiply-adds (a multiple of
 * slices), step j on slice j mod slices. */
typedef struct peak_nv2_geom {
	uint32_t m, n, k;
	uint32_t slices; /* 1: slice 0 only (nv2_regs, nv2_smem) */
	uint32_t steps;
} peak_nv2_geom;

/* A at (row m, column k) and B at (row k, column n) over all slices, and
 * the accumulator's start (m×n): small integers that change along k with
 * periods (5 and 7) that no power-of-two slice width is a multiple of, so
 * that every slice is a different product. */
double peak_nv2_a(uint32_t row, uint32_t col);
double peak_nv2_b(uint32_t row, uint32_t col);
double peak_nv2_init(uint32_t row, uint32_t col);
/* The most loop trips for which every partial sum stays an integer below
 * 2^24 (0 when even one trip does not fit, or g is empty). */
uint32_t peak_nv2_max_iters(const peak_nv2_geom *g);
/* The accumulator after iters trips: m·n values row-major into out. */
void peak_nv2_expect(const peak_nv2_geom *g, uint32_t iters, double *out);

/* ---- the check ---- */

typedef struct peak_check {
	uint64_t mismatches;  /* elements not equal to the reference (NaN too) */
	uint64_t first_bad;   /* the first of them (when mismatches > 0) */
	double max_rel_err;   /* max|got - want| / max|want| (NaN: a NaN came back) */
} peak_check;

/* Compare got[0..n) with want[i % period] for i in [0, n): the same
 * `period` values repeated (every subgroup or block of invocations writes
 * the same). Adds into *c, which starts zeroed; max_want is the largest
 * |want| of the whole comparison (for the relative error). */
void peak_check_run(peak_check *c, const float *got, uint64_t n, const double *want, uint64_t period,
		    double max_want);

/* ---- the copy line (bench/peak_copy.c) ---- */

/* The pattern's n bytes from byte offset off of the copied buffer into p:
 * byte o is byte (o mod 4) of a 32-bit hash of o / 4, so no two 4-byte
 * words in reach of a probe repeat and data at a wrong offset (one
 * element, one word, a whole probe away) or left unwritten (any fill) does
 * not match. */
void peak_copy_pattern(uint64_t off, uint8_t *p, size_t n);
/* How many of the n bytes at p differ from the pattern at off (0: all as
 * written); *first the first of them (n when none). */
size_t peak_copy_check(uint64_t off, const uint8_t *p, size_t n, size_t *first);

#endif
