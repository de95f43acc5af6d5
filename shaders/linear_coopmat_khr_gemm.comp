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
// @kernel kernel_name=linear_coopmat_khr_gemm domain=linear_backward variant=coopmat_khr dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_khr needs_bf16=coopmat_khr,bfloat16 spirv_opt=off
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n] on the tensor cores through
// VK_KHR_cooperative_matrix, for f16 and bf16 tensors (f16×f16 or
// bf16×bf16 products, f32 accumulators). The matrix shape (CM_M×CM_N×CM_K)
// is whatever the device reports for these types
// (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR; the H200: 16×16×16),
// passed as specialization constants, as are A's layout and the tiling:
//
//   - a BM×BN tile of C per workgroup of WARPS_M×WARPS_N subgroups of 32
//     (default 2×2 subgroups, each a 64×64 block of C as (64/CM_M)×(64/CM_N)
//     f32 accumulators: 128×128 per workgroup of 128 threads, two
//     workgroups per SM)
//   - the reduction BK = 32 at a time through two shared-memory stages: the
//     next slice's global loads (16 bytes per thread and load where every
//     vector is aligned and wholly inside or outside the tensor, flag 8)
//     are in flight while the current slice is multiplied, then go to the
//     other stage; one barrier per slice. Outside the tensors the tiles are
//     zero, so any shape works.
//   - rows of the shared tiles padded by 16 bytes, so the matrix loads of
//     eight consecutive rows hit distinct banks
//   - an epilogue that stages each subgroup's f32 accumulators in shared
//     memory and writes C eight elements (16 bytes) at a time where aligned,
//     element by element at the edges, rounding once to the storage type
//     (accumulate: added to the old value in f32 first)
//
// A(m, k) = a[a_off + m·sam + k·sak]: A_KMAJOR = 1 when A runs along m
// (sam = 1; dW = dYᵀ·X, A = dYᵀ), 0 when it runs along k (sak = 1; dX =
// dY·W). Same push constants as linear_tiled_gemm. With flag 2 the
// workgroups of column tile 0 also sum A's rows over k (db = Σ_rows dY, in
// the dW pass): each thread adds up the eight rows of every vector it loads,
// then the workgroup reduces those partial sums once at the end.
//
// Built only with a shader compiler that knows GL_KHR_cooperative_matrix
// (glslang 13+) and, for bf16, GL_EXT_bfloat16 (glslang 15.3+): see
// scripts/shader-tools.sh. Created only on devices that offer what it
// needs (daemon/device.c). The body is shaders/coopmat_khr_gemm.glsl, shared
// with linear_coopmat_khr_splitk_gemm (split-K for narrow, long dW).

#include "coopmat_khr_gemm.glsl"
