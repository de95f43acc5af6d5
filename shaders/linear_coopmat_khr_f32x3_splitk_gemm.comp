#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_bfloat16 : require
// @kernel kernel_name=linear_coopmat_khr_f32x3_splitk_gemm domain=linear_backward variant=coopmat_khr_f32_splitk dtype=f32 status=experimental
// @build needs_f32=coopmat_khr,bfloat16 spirv_opt=off
//
// Split-K of f32 on the bf16 tensor cores for the dW (+ db) pass of narrow,
// long f32 layers (issue 37: 1,048,576×64×64 and the like; variant
// coopmat_khr_f32_splitk, forced only): dW = dYᵀ·X over the batch, cut
// into slices, every slice × row tile × column tile a workgroup of one
// grid, each writing its f32 partial sums into the daemon's scratch
// (split-K's layout); linear_narrow_reduce then adds the slices in a fixed
// order (no atomics: the same bits every run, each output rounded once).
//
// It is linear_coopmat_khr_f32x3_gemm's body
// (shaders/coopmat_khr_f32x3_gemm.glsl: each f32 operand split into hi +
// lo bf16 on its way to shared memory, three bf16 products per k step, the
// fused db summed from the unsplit f32 values), built with VKG_PARTIAL: two
// push-constant words more (VKG_PC_GEMM_SPLIT: the slice length and the row
// tiles per slice, the slice read from the workgroup's row); C and db's row
// sums were f32 already and now go to the partials. Its error bound per
// slice is linear_coopmat_khr_f32x3_gemm's over the slice's rows
// (tests/unit/test_f32x3_numerics.c); the reduce adds the slices in f32.
// The daemon runs it with coopmat_khr_splitk's tiling (daemon/gpu/
// pipelines.c, PIPELINES_CMKS_TILE): 2×2 subgroups of 32×32, a 64×64 tile
// of dW per workgroup of 128 threads, k steps of 32 rows, two steps in
// flight; the hi and lo tiles take 36 KiB of shared memory. A = dYᵀ along
// m (A_KMAJOR = 1): the dW pass only; dX runs on
// linear_coopmat_khr_f32x3_gemm. Never run on a GPU yet.
#define ETYPE bfloat16_t

#define VKG_PARTIAL
#include "coopmat_khr_f32x3_gemm.glsl"
