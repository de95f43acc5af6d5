#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#if defined(VKG_DTYPE_BF16)
#extension GL_EXT_bfloat16 : require
#define ETYPE bfloat16_t
#else
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ETYPE float16_t
#endif
// @kernel kernel_name=linear_coopmat_khr_splitk_gemm domain=linear_backward variant=coopmat_khr_splitk dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_khr needs_bf16=coopmat_khr,bfloat16 spirv_opt=off
//
// Split-K on the tensor cores for the dW (+ db) pass of narrow, long layers
// (issue 37: 1,048,576×64×64 and the like, f16 and bf16): dW = dYᵀ·X over
// the batch, cut into slices, every slice × row tile × column tile a
// workgroup of one grid, each writing its f32 partial sums into the
// daemon's scratch (split-K's layout); linear_narrow_reduce then adds the
// slices (16 lanes per element, each every 16th slice, a fixed tree) in a fixed
// order (no atomics: the same bits every run, each output rounded once).
// linear_coopmat_khr_gemm alone runs a 64×64 dW as one workgroup walking
// the whole batch.
//
// It is linear_coopmat_khr_gemm's body (shaders/coopmat_khr_gemm.glsl:
// double-buffered shared tiles, 16-byte loads of the next k step in
// flight while the current one is multiplied, the fused db sums, the
// staged epilogue), built with VKG_PARTIAL: two push-constant words more
// (VKG_PC_GEMM_SPLIT: the slice length and the row tiles per slice, the
// slice read from the workgroup's row), f32 partials out (C four floats
// at a time where aligned, else one by one; db's row sums as f32).
// Specialization constants as linear_coopmat_khr_gemm's; the daemon runs
// it with the tiling for narrow outputs (daemon/gpu/pipelines.c,
// PIPELINES_CMKS_TILE): 2×2 subgroups of 32×32, a 64×64 tile of dW per
// workgroup of 128 threads (all four subgroups busy on a 64×64 dW), k
// steps of 32 rows, two steps in flight. A = dYᵀ along m (A_KMAJOR = 1):
// the dW pass only; dX stays on its own kernels.

#define VKG_PARTIAL
#include "coopmat_khr_gemm.glsl"
