/* client/ref.h — float64 CPU reference for the linear-layer backward pass,
 * used by the vkgrad CLI and the tests to check the daemon's results.
 *
 * Tensors are row-major and contiguous, as on the wire (proto/README.md):
 *   x  batch × in,  dy batch × out,  w  out × in
 *   dw = dYᵀ·X  (out × in),  db = Σ over rows of dY  (out),  dx = dY·W  (batch × in)
 */
#ifndef VKGRAD_REF_H
#define VKGRAD_REF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compute the gradients in float64. Any of dw, db, dx may be NULL (not
 * computed); w may be NULL when dx is. Outputs are overwritten, never
 * accumulated: for an `accumulate` job the expected result is the output's
 * previous contents plus this gradient (pass that base to
 * vkg_ref_max_rel_err). Sums run in float64 in the order of the batch rows. */
void vkg_ref_linear_backward(uint64_t batch, uint64_t in, uint64_t out, const float *x,
			     const float *dy, const float *w, double *dw, double *db,
			     double *dx);

/* The error of n computed values against the reference:
 *
 *   target[i] = want[i] + (base ? base[i] : 0)
 *   err       = max_i |got[i] - target[i]|  /  max_i |target[i]|
 *
 * i.e. the largest deviation measured relative to the tensor's largest
 * magnitude (a normwise relative error). Unlike an element-wise |Δ|/|target|
 * it stays meaningful for entries that cancel to near zero, whose absolute
 * rounding error follows the size of the summed terms, not of the result.
 * When every target is 0 the absolute error max |got[i]| is returned; a NaN
 * or infinite got[i] gives INFINITY; n == 0 gives 0. For f32 results a
 * tolerance of 1e-4 leaves ample room for the summation order of a GPU
 * kernel while catching any wrong element, index or accumulation. */
double vkg_ref_max_rel_err(const float *got, const double *want, const double *base,
			   size_t n);

#ifdef __cplusplus
}
#endif
#endif
