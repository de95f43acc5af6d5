#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_bfloat16 : require
// @kernel kernel_name=linear_coopmat_khr_f32x3_gemm domain=linear_backward variant=coopmat_khr_f32x3 dtype=f32 status=experimental
// @build needs_f32=coopmat_khr,bfloat16 spirv_opt=off
//
// f32 GEMM on the bf16 tensor cores (variant coopmat_khr_f32x3, forced
// only): C[m, n] (+)= Σ_k A(m, k) · B[k, n] for f32 tensors, each f32
// operand split into two bf16 pieces as it goes to shared memory,
//   x = hi + lo,  hi = bf16(x) (round to nearest even),  lo = bf16(x - hi)
// (x - hi is exact in f32), and three bf16 x bf16 -> f32 cooperative-matrix
// products per k step: lo_a·hi_b + hi_a·lo_b + hi_a·hi_b (the small terms
// first). Dropped: lo_a·lo_b and the rounding of the pieces, each at most
// 2^-16 |x| relative, so |a·b - sum| <= 3·2^-16·|a·b| (about 4.6e-5) per
// product before the f32 accumulation; over a dot product the error is at
// most about (3·2^-16 + K·2^-24)·Σ|a_k·b_k| (tests/unit/test_f32x3_numerics.c
// checks this bound in float64 on the CPU, and the typical error of random
// inputs, a few 2^-20 of Σ|a_k·b_k|). It is the tiling, the loads and the
// epilogue of linear_coopmat_khr_gemm (same push constants, specialization
// constants and flags; vectors of 8 elements = 32 bytes); the shared tiles
// hold hi and lo side by side, so they take twice the room, and the daemon
// runs it with k steps of 16 (daemon/pipelines.c). Only where the device
// multiplies bf16 cooperative matrices (VK_KHR_cooperative_matrix with
// VK_KHR_shader_bfloat16); built only by a compiler with GL_KHR_cooperative_matrix
// and GL_EXT_bfloat16 (scripts/shader-tools.sh). The body is
// shaders/coopmat_khr_f32x3_gemm.glsl, which
// linear_coopmat_khr_f32x3_splitk_gemm builds with VKG_PARTIAL.
#define ETYPE bfloat16_t

#include "coopmat_khr_f32x3_gemm.glsl"
