/* tests/common/rounding.h — is a 16-bit output rounded to nearest?
 *
 * An f16 or bf16 output is its f32 sum rounded once to the storage type.
 * Rounded to nearest, it lies within half a unit in the last place of that
 * type (bf16 8 significant bits, f16 11) of the float64 reference, plus
 * what f32 accumulation may add (2^-16 of the sum of the terms'
 * magnitudes: a generous bound for reductions of up to a few thousand
 * terms). A conversion that rounds toward zero misses on about half the
 * elements; the tests allow 1 % (ROUNDING_MAX_PERCENT). */
#ifndef VKG_TEST_ROUNDING_H
#define VKG_TEST_ROUNDING_H

#include <stdbool.h>

#define ROUNDING_MAX_PERCENT 1

/* Is got farther from want than half an ulp of the storage type (bf16 or
 * f16) plus f32 accumulation's share of abs_sum (Σ|terms|)? want 0: no. */
bool rounding_missed(double got, double want, double abs_sum, bool bf16);

#endif
