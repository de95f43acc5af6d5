#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
#if defined(VKG_DTYPE_BF16)
#extension GL_EXT_bfloat16 : require
#define ETYPE bfloat16_t
#else
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ETYPE float16_t
#endif
// @kernel kernel_name=bench_peak_nv2 domain=bench_peak variant=nv2 dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_nv2 needs_bf16=coopmat_nv2,bfloat16 spirv_opt=off target=vulkan1.3
//
// The ceiling of workgroup-scope cooperative-matrix multiply-adds
// (VK_NV_cooperative_matrix2) for `vkgrad bench --peak`
// (bench/cli_bench_peak.c), no part of the daemon's job path: the multiply
// of linear_coopmat_nv2_gemm, with the same matrices (a BM×BK A, a BK×BN B,
// a BM×BN f32 accumulator per workgroup of THREADS invocations; the tiling
// is the GEMM's, checked by the benchmark against the device's
// flexible-dimensions list through daemon/nv2_tile.h), with its loads
// taken away or kept:
//   LOAD = 0 (nv2_regs): A and B are loaded once (k-slice 0) and every step
//     multiplies them: the multiply-adds alone, whatever the driver keeps
//     them in.
//   LOAD = 1 (nv2_load): step s of each trip loads k-slice s of A and B with
//     coopMatLoadTensorNV through plain (unclamped) tensor layouts, strides
//     multiples of 8 and offsets masked to them, as the GEMM's unclamped
//     inner loop does. a and b are small (VKG_PEAK_NV2_COPIES copies of
//     VKG_PEAK_NV2_SLICES slices: 3 MiB at the default tiling), so they
//     stay in L2 (a workgroup's copy, 384 KiB, is more than an SM's L1): the loads' cost without DRAM's bandwidth. A_KMAJOR = 1
//     (nv2_load_dw): A stored [k][m] and read through a transposed view,
//     as the GEMM's dW pass reads dYᵀ; 0: [m][k], as its dX pass.
//   LOAD = 2 (nv2_smem): the workgroup first copies VKG_PEAK_NV2_SMEM_SLICES
//     slices of its copy of A ([m][k]) and B into shared memory; step s
//     loads slice s mod SMEM_SLICES from there through tensor layouts (no
//     barrier in the loop: the shared tiles do not change).
// Workgroup w reads copy w mod COPIES (other addresses than its neighbours,
// as a GEMM's workgroups read other tiles; the copies hold equal values).
// What is computed is known exactly: the accumulator of every workgroup
// ends at init + iters·(SLICES/slices used)·Σ_s A_s·B_s over the slices
// used (bench/peak_ref.h, peak_nv2_expect). The inputs hold small integers
// and the benchmark bounds iters so that every partial sum is an integer
// below 2^24: exact in f16/bf16 and f32. Each workgroup stores its
// accumulator to rows w·BM.. of out.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 256;
layout(constant_id = 3) const uint BK = 64;
layout(constant_id = 4) const uint LOAD = 0;     // 0 regs, 1 tensor loads from a and b, 2 from shared memory
layout(constant_id = 5) const uint A_KMAJOR = 0; // LOAD 1: A stored [k][m], read transposed

const uint S = VKG_PEAK_NV2_SLICES;
const uint C = VKG_PEAK_NV2_COPIES;
const uint SS = VKG_PEAK_NV2_SMEM_SLICES;
// shared copies of SS slices (LOAD 2): A as [m][k], B as [k][n]
const uint SH_A = LOAD == 2u ? BM * SS * BK : 1u;
const uint SH_B = LOAD == 2u ? SS * BK * BN : 1u;

layout(std430, set = 0, binding = 0) readonly buffer BufA { ETYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { ETYPE b[]; };
layout(std430, set = 0, binding = 2) readonly buffer Init { float init[]; };
layout(std430, set = 0, binding = 3) buffer Out { float o[]; };
layout(push_constant) uniform Params { VKG_PC_PEAK_NV2(uint) } pc;

shared ETYPE sha[SH_A];
shared ETYPE shb[SH_B];

// A multiply-add of k-slice K0 of A and B through layouts LA and LB of
// buffers (or shared arrays) BA and BB, from element offset OFF.
#define NV2_STEP(BA, BB, LA, LB, OFF, K0)                                                       \
	{                                                                                       \
		coopmat<ETYPE, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;                    \
		coopmat<ETYPE, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;                    \
		if (A_KMAJOR != 0u)                                                             \
			coopMatLoadTensorNV(ma, BA, OFF, sliceTensorLayoutNV(LA, K0, BK, m0, BM), \
					    transposed);                                        \
		else                                                                            \
			coopMatLoadTensorNV(ma, BA, OFF, sliceTensorLayoutNV(LA, m0, BM, K0, BK)); \
		coopMatLoadTensorNV(mb, BB, OFF, sliceTensorLayoutNV(LB, K0, BK, n0, BN));      \
		acc = coopMatMulAdd(ma, mb, acc);                                               \
	}

// The workgroup's copy's first SS slices of A and B into sha and shb.
void fill_shared(uint copy)
{
	const uint nt = gl_WorkGroupSize.x;
	for (uint v = gl_LocalInvocationID.x; v < BM * SS * BK; v += nt) {
		const uint m = v / (SS * BK), k = v % (SS * BK);
		sha[v] = a[(copy * BM + m) * (S * BK) + k];
	}
	for (uint v = gl_LocalInvocationID.x; v < SS * BK * BN; v += nt) {
		const uint k = v / BN, n = v % BN;
		shb[v] = b[k * (C * BN) + copy * BN + n];
	}
	barrier();
}

void main()
{
	const uint w = gl_WorkGroupID.x, copy = w % C;
	tensorLayoutNV<2> la = createTensorLayoutNV(2);
	tensorLayoutNV<2> lb = createTensorLayoutNV(2);
	tensorLayoutNV<2> lt = createTensorLayoutNV(2); // init, and each workgroup's rows of out
	tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
	// a: (C·BM rows, S·BK columns), or stored [k][m]: (S·BK, C·BM); b: (S·BK, C·BN)
	if (A_KMAJOR != 0u) {
		la = setTensorLayoutDimensionNV(la, S * BK, C * BM);
		la = setTensorLayoutStrideNV(la, C * BM, 1);
	} else {
		la = setTensorLayoutDimensionNV(la, C * BM, S * BK);
		la = setTensorLayoutStrideNV(la, S * BK, 1);
	}
	lb = setTensorLayoutDimensionNV(lb, S * BK, C * BN);
	lb = setTensorLayoutStrideNV(lb, C * BN, 1);
	lt = setTensorLayoutDimensionNV(lt, gl_NumWorkGroups.x * BM, BN);
	lt = setTensorLayoutStrideNV(lt, BN, 1);
	uint m0 = copy * BM, n0 = copy * BN;

	coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc;
	coopMatLoadTensorNV(acc, init, 0, sliceTensorLayoutNV(lt, 0, BM, 0, BN));
	if (LOAD == 0u) {
		coopmat<ETYPE, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
		coopmat<ETYPE, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
		if (A_KMAJOR != 0u)
			coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(la, 0, BK, m0, BM), transposed);
		else
			coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(la, m0, BM, 0, BK));
		coopMatLoadTensorNV(mb, b, 0, sliceTensorLayoutNV(lb, 0, BK, n0, BN));
		for (uint it = 0u; it < pc.iters; it++)
			[[unroll]] for (uint s = 0u; s < S; s++)
				acc = coopMatMulAdd(ma, mb, acc);
	} else if (LOAD == 1u) {
		for (uint it = 0u; it < pc.iters; it++) {
			const uint off = (it * pc.zero) & ~7u;
			[[unroll]] for (uint s = 0u; s < S; s++)
				NV2_STEP(a, b, la, lb, off, s * BK)
		}
	} else {
		fill_shared(copy);
		// the shared copies: A (BM, SS·BK), B (SS·BK, BN), this workgroup's only
		la = setTensorLayoutDimensionNV(la, BM, SS * BK);
		la = setTensorLayoutStrideNV(la, SS * BK, 1);
		lb = setTensorLayoutDimensionNV(lb, SS * BK, BN);
		lb = setTensorLayoutStrideNV(lb, BN, 1);
		m0 = 0u;
		n0 = 0u;
		for (uint it = 0u; it < pc.iters; it++) {
			const uint off = (it * pc.zero) & ~7u;
			[[unroll]] for (uint s = 0u; s < S; s++)
				NV2_STEP(sha, shb, la, lb, off, (s % SS) * BK)
		}
	}
	coopMatStoreTensorNV(acc, o, 0, sliceTensorLayoutNV(lt, w * BM, BM, 0, BN));
}
