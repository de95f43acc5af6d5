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
// @kernel kernel_name=linear_coopmat_khr_splitk_dx_gemm domain=linear_backward variant=coopmat_khr_splitk dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_khr needs_bf16=coopmat_khr,bfloat16 spirv_opt=off
//
// linear_coopmat_khr_splitk_gemm with dX = dY·W beside dW (issue 37: the
// full backward of narrow, long f16/bf16 layers is bound by memory; the
// separate dX pass read all of dY a second time). Valid for out <= 64 (one
// 64-row tile of dW, so each workgroup's shared stages hold all of out)
// and in <= 1024. Each workgroup (slice s × column tile j of in) streams
// its slice's rows of dY and of X's columns j through shared memory for
// dW's partials, exactly as linear_coopmat_khr_splitk_gemm; for the same
// rows, before the stage is overwritten, it also multiplies the stage's
// dY rows (row-major from the k-major A stage) by W's tile (out × 64 of
// in, loaded into shared memory once, zero past out and in) on the
// cooperative matrices, sums over all of out in f32 and writes dX[rows,
// tile j] rounded once (round to nearest even; accumulate: old + new,
// rounded once), eight elements at a time where aligned, else one by one.
// Each dX element is written by one workgroup: no atomics, the same bits
// every run. Traffic X + dY + dX instead of X + 2·dY + dX, and one launch
// less. The body and the dX part: shaders/coopmat_khr_gemm.glsl and
// shaders/coopmat_khr_fused_dx.glsl; push constants VKG_PC_GEMM_SPLIT_DX,
// bindings dY, X, partials (C, d), W, dX (shaders/iface/kernels.h). The
// daemon runs it with linear_coopmat_khr_splitk_gemm's tiling
// (PIPELINES_CMKS_TILE) and shared memory of two stages, W's tile and the
// dX staging (36 KiB with 16x16x16 matrices). Written without a device
// that has cooperative matrices: compiled and validated (spirv-val), not
// yet run on a GPU.

#define VKG_PARTIAL
#define VKG_FUSED_DX
#include "coopmat_khr_gemm.glsl"
