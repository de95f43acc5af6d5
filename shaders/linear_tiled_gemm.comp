#version 450
#extension GL_GOOGLE_include_directive : require
// @kernel kernel_name=linear_tiled_gemm domain=linear_backward variant=tiled dtype=f32,f16,bf16 status=experimental
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n], register-blocked: a 64×64 tile of C
// per workgroup of 16×16 threads, 4×4 outputs per thread (see tiled_gemm.glsl),
// the reduction walked 16 at a time through shared-memory tiles of A and B.
// A's strides are push constants, so one kernel serves both gradients:
//   dW = dYᵀ·X : M = out,   N = in, K = batch, A(m,k) = dY[k·out + m]
//   dX = dY·W  : M = batch, N = in, K = out,   A(m,k) = dY[m·out + k]
// With flag 2 the workgroups of column tile 0 also sum A over k for their
// rows: db = Σ_rows dY from the same pass (fused bias).

#include "tiled_gemm.glsl"
