#version 450
#extension GL_GOOGLE_include_directive : require
// @kernel kernel_name=linear_splitk_gemm domain=linear_backward variant=splitk dtype=f32,f16,bf16 status=experimental
//
// Split-K, first pass: the tiled GEMM of linear_tiled_gemm over one slice
// of the reduction (the daemon offsets A and B to the slice's first k and
// sets K to its length), writing f32 partial sums of dW (and of db, fused as
// in the tiled kernel) into slice s of the daemon's scratch buffer. Used for
// tall-skinny dW = dYᵀ·X (huge batch, few 64×64 output tiles), where one
// workgroup per tile would leave most of the GPU idle. The second pass is
// linear_splitk_reduce.
#define VKG_PARTIAL
#include "tiled_gemm.glsl"
