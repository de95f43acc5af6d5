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

#include "msg.h" /* proto_dtype */

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

/* ---- fused activations (proto/README.md, key `activation`) ----------------
 * In float64: act(x) (none: x; relu: max(x, 0); gelu: torch's tanh form,
 * ½x(1 + tanh(√(2/π)(x + 0.044715x³)))), and its derivative act'(v) as a
 * backward reads it: relu from the forward's output y (1 where y > 0, else
 * 0: torch's threshold_backward), gelu from the pre-activation z. */
double vkg_ref_act(proto_activation a, double x);
double vkg_ref_act_grad(proto_activation a, double v);

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

/* ---- storage dtypes ------------------------------------------------------
 * f16 and bf16 tensors are stored in 16 bits; the daemon widens them to f32
 * for all arithmetic and rounds each output once (proto/README.md). The
 * reference is computed in float64 from the stored (already rounded) inputs,
 * so the only error left beyond f32 summation is that final rounding. */

/* float -> 16-bit storage, round to nearest even (NaN stays a quiet NaN),
 * and back (exact). */
uint16_t vkg_ref_f16_from_float(float f);
float vkg_ref_f16_to_float(uint16_t h);
uint16_t vkg_ref_bf16_from_float(float f);
float vkg_ref_bf16_to_float(uint16_t h);

/* Store n floats as dtype (rounded as above) at dst; load n stored values of
 * dtype from src as floats; one stored value src[i] as a double. */
void vkg_ref_store(proto_dtype d, void *dst, const float *src, size_t n);
void vkg_ref_load(proto_dtype d, float *dst, const void *src, size_t n);
double vkg_ref_load_one(proto_dtype d, const void *src, size_t i);

/* Largest vkg_ref_max_rel_err a correct result of dtype may have. Rounding
 * each output once to the storage type costs at most half an ulp relative to
 * the tensor's largest entry: f16 keeps 11 significant bits (2^-11 ≈ 4.9e-4),
 * bf16 keeps 8 (2^-8 ≈ 3.9e-3); with accumulate the sum is rounded twice
 * (base, then base + gradient). f32 has 1e-4 for the kernels' summation
 * order. Limits: f32 1e-4, f16 2e-3, bf16 1e-2. */
#define VKG_REF_TOL_F32 1e-4
#define VKG_REF_TOL_F16 2e-3
#define VKG_REF_TOL_BF16 1e-2
double vkg_ref_tolerance(proto_dtype d);
/* The same as text ("1e-4", "2e-3", "1e-2"), for messages. */
const char *vkg_ref_tolerance_text(proto_dtype d);

#ifdef __cplusplus
}
#endif
#endif
