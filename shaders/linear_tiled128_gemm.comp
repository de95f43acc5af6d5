#version 450
#extension GL_GOOGLE_include_directive : require
// @kernel kernel_name=linear_tiled128_gemm domain=linear_backward variant=tiled128 dtype=f32,f16,bf16 status=experimental
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n] for large layers: a 128×128 tile of C
// per workgroup of 16×16 threads, 8×8 outputs per thread, the reduction
// walked 16 (f32) or 8 (f16, bf16) at a time through double-buffered shared-memory tiles. Same push
// constants (and so the same strides for dW = dYᵀ·X with fused db, and for
// dX = dY·W) as linear_tiled_gemm; see that shader for the geometry.
//
// Why a second tiled kernel: with 4×4 outputs per thread each step of the
// reduction costs 8 shared-memory loads for 16 multiply-adds, and the SM's
// shared-memory port (one warp-wide load per clock against four warp-wide
// FMAs) caps the 64×64 kernel near half the FP32 peak. Here a thread's
// rows are ly·4 + {0..3} and 64 + ly·4 + {0..3} (columns likewise with lx),
// so a step is 4 vector (16-byte) loads for 64 FMAs, kept in vec4
// accumulators. The next tile's global loads are issued before the current
// tile's multiplies and stored to the other shared buffer after them: one
// barrier per step.
// (the body: shaders/tiled128_gemm.glsl)
#include "tiled128_gemm.glsl"
