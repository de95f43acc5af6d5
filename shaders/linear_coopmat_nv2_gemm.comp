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
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#define ETYPE bfloat16_t
// f32 → bf16 of a matrix: the driver's conversion was measured on the H200
// to cut to 1 ulp (twice cuBLAS's error, which is correctly rounded), so
// each element is first rounded to nearest even, to a value bf16 holds
// exactly (NaN stays NaN; as dtype.glsl's bf16_bits)
float bf16_rne(const in uint32_t row, const in uint32_t col, const in float x)
{
	uint u = floatBitsToUint(x);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return x;
	u += 0x7fffu + ((u >> 16) & 1u);
	return uintBitsToFloat(u & 0xffff0000u);
}
#define NV2_ROUND(M) coopMatPerElementNV(M, M, bf16_rne)
#else
#define NV2_ROUND(M)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ETYPE float16_t
#endif
// @kernel kernel_name=linear_coopmat_nv2_gemm domain=linear_backward variant=coopmat_nv2 dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_nv2 needs_bf16=coopmat_nv2,bfloat16 spirv_opt=off target=vulkan1.3
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n] on the tensor cores through
// VK_NV_cooperative_matrix2: workgroup-scope matrices (a BM×BN tile of C per
// workgroup, the driver spreads it over the subgroups and stages the
// operands as it sees fit), loaded straight from the tensors through
// tensor layouts. Clamped layouts read zeros outside the tensors and their
// stores skip what lies outside, so any shape works without a bounds check
// here. With UNCLAMP, a workgroup whose tile lies wholly inside C, when A's
// and B's rows start on 16 bytes (VKG_FLAG_VEC_LOADS: dispatch.c), reads its
// whole k steps through plain layouts (no clamping; strides and offsets
// masked to multiples of 8 so the compiler may see the alignment), UNROLL
// steps per trip, and only the last partial step through the clamped ones
// (as llama.cpp's mul_mm_cm2.comp does); UNCLAMP 0 clamps every load.
// f16 or bf16 operands, f32 accumulators, one conversion to the storage
// type at the end (accumulate: the old C converted to f32 and added first).
// A(m, k) = a[a_off + m·sam + k·sak] as in linear_tiled_gemm: A_KMAJOR = 1
// reads A = dYᵀ (dW) through a transposed view of dY. db (flag 2, dW
// only): A times a BK×DBN matrix of ones, whose first column is the row
// sums, stored through a one-column layout of d; by C's first column of
// tiles, or with DB_APART by workgroups of their own, one column past C's
// tiles (the only column when C is not written: dispatch.c dispatches it).
// SUMS_IN / SUMS_OUT (a reduction resumed across dispatches, kernels.h):
// acc and the row sums start from / end in e (f32, C's M×N then d's M)
// through clamped layouts like C's and d's, instead of zero / the epilogue.
// Sizes are specialization constants: the daemon checks them against the
// device's vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV
// (daemon/nv2_tile.h; VKGRAD_NV2_TILE chooses them).

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint BM = 128;
layout(constant_id = 2) const uint BN = 128;
layout(constant_id = 3) const uint BK = 32;
layout(constant_id = 4) const uint A_KMAJOR = 1;
layout(constant_id = 5) const uint DBN = 16;    // columns of the row-sum product (db)
layout(constant_id = 6) const uint UNCLAMP = 0; // plain layouts inside C
layout(constant_id = 7) const uint UNROLL = 1;  // k steps per trip of the unclamped loop
layout(constant_id = 8) const uint DB_APART = 0; // db in workgroups of its own

layout(std430, set = 0, binding = 0) readonly buffer BufA { ETYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { ETYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { ETYPE c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { ETYPE d[]; };
layout(std430, set = 0, binding = 4) buffer BufE { float e[]; }; // running sums (SUMS_IN/OUT)

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_GEMM(uint) } pc;

// One k step at k0: A's BM×BK and B's BK×BN through layouts LA and LB (from
// element offsets AOFF and BOFF), into acc, and into bias where db is wanted.
#define NV2_STEP(LA, LB, AOFF, BOFF)                                                              \
	{                                                                                         \
		coopmat<ETYPE, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;                      \
		coopmat<ETYPE, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;                      \
		if (A_KMAJOR != 0u)                                                               \
			coopMatLoadTensorNV(ma, a, AOFF, sliceTensorLayoutNV(LA, k0, BK, m0, BM), \
					    transposed);                                          \
		else                                                                              \
			coopMatLoadTensorNV(ma, a, AOFF, sliceTensorLayoutNV(LA, m0, BM, k0, BK)); \
		coopMatLoadTensorNV(mb, b, BOFF, sliceTensorLayoutNV(LB, k0, BK, n0, BN));        \
		acc = coopMatMulAdd(ma, mb, acc);                                                 \
		if (want_d)                                                                       \
			bias = coopMatMulAdd(ma, ones, bias);                                     \
	}

// Store the row sums (first column of SUMS) into d's rows m0.., added to
// what d holds when accumulating.
#define NV2_STORE_D(SUMS)                                                                             \
	{                                                                                             \
		if (accum) {                                                                          \
			coopmat<ETYPE, gl_ScopeWorkgroup, BM, DBN, gl_MatrixUseAccumulator> old;      \
			coopMatLoadTensorNV(old, d, pc.d_off, sliceTensorLayoutNV(ld, m0, BM, 0, DBN)); \
			SUMS += coopmat<float, gl_ScopeWorkgroup, BM, DBN, gl_MatrixUseAccumulator>(old); \
		}                                                                                     \
		NV2_ROUND(SUMS);                                                                      \
		coopmat<ETYPE, gl_ScopeWorkgroup, BM, DBN, gl_MatrixUseAccumulator> out_d =           \
			coopmat<ETYPE, gl_ScopeWorkgroup, BM, DBN, gl_MatrixUseAccumulator>(SUMS);    \
		coopMatStoreTensorNV(out_d, d, pc.d_off, sliceTensorLayoutNV(ld, m0, BM, 0, DBN));    \
	}

void main()
{
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * BM;
	const uint col = pc.n_base + gl_WorkGroupID.x;
	const uint n0 = col * BN;
	const bool want_db = (pc.flags & VKG_FLAG_WRITE_D) != 0u && A_KMAJOR != 0u;
	const bool db_only = DB_APART != 0u && want_db &&
			     (col == (pc.N + BN - 1u) / BN || (pc.flags & VKG_FLAG_WRITE_C) == 0u);
	const bool want_d = DB_APART == 0u && want_db && n0 == 0u;
	const bool accum = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;

	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lc = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ld = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
	// A: as stored, (K rows, M columns) when A_KMAJOR (dY for dW), else (M, K)
	const uint a_rows = A_KMAJOR != 0u ? pc.K : pc.M, a_cols = A_KMAJOR != 0u ? pc.M : pc.K;
	const uint a_stride = A_KMAJOR != 0u ? pc.sak : pc.sam;
	la = setTensorLayoutDimensionNV(la, a_rows, a_cols);
	la = setTensorLayoutStrideNV(la, a_stride, 1);
	lb = setTensorLayoutDimensionNV(lb, pc.K, pc.N);
	lb = setTensorLayoutStrideNV(lb, pc.N, 1);
	lc = setTensorLayoutDimensionNV(lc, pc.M, pc.N);
	lc = setTensorLayoutStrideNV(lc, pc.N, 1);
	ld = setTensorLayoutDimensionNV(ld, pc.M, 1);
	ld = setTensorLayoutStrideNV(ld, 1, 1);
	// e: C's running sums (as C), then d's (as d) from element M·N
	tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> le = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
	le = setTensorLayoutDimensionNV(le, pc.M, pc.N);
	le = setTensorLayoutStrideNV(le, pc.N, 1);
	const uint e_d = pc.M * pc.N;
	const bool sums_in = (pc.flags & VKG_FLAG_SUMS_IN) != 0u;
	const bool sums_out = (pc.flags & VKG_FLAG_SUMS_OUT) != 0u;
	// a tile inside C, rows on 32 bytes (N a multiple of 8: VEC_LOADS):
	// its sums through a plain layout, no clamping
	const bool e_plain = (pc.flags & VKG_FLAG_VEC_LOADS) != 0u && m0 + BM <= pc.M && n0 + BN <= pc.N;
	tensorLayoutNV<2> ue = createTensorLayoutNV(2);
	ue = setTensorLayoutDimensionNV(ue, pc.M, pc.N);
	ue = setTensorLayoutStrideNV(ue, pc.N & ~7u, 1);

	coopmat<float, gl_ScopeWorkgroup, BM, DBN, gl_MatrixUseAccumulator> bias =
		coopmat<float, gl_ScopeWorkgroup, BM, DBN, gl_MatrixUseAccumulator>(0.0);
	const coopmat<ETYPE, gl_ScopeWorkgroup, BK, DBN, gl_MatrixUseB> ones =
		coopmat<ETYPE, gl_ScopeWorkgroup, BK, DBN, gl_MatrixUseB>(ETYPE(1.0));
	if (sums_in && (want_d || db_only)) // (only column 0 is ever stored: the rest stay zero)
		coopMatLoadTensorNV(bias, e, e_d, sliceTensorLayoutNV(ld, m0, BM, 0, DBN));
	if (db_only) { // DB_APART: this workgroup sums A's rows m0.. and nothing else
		for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
			coopmat<ETYPE, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
			coopMatLoadTensorNV(ma, a, pc.a_off, sliceTensorLayoutNV(la, k0, BK, m0, BM), transposed);
			bias = coopMatMulAdd(ma, ones, bias);
		}
		if (sums_out)
			coopMatStoreTensorNV(bias, e, e_d, sliceTensorLayoutNV(ld, m0, BM, 0, DBN));
		else
			NV2_STORE_D(bias)
		return;
	}
	coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
		coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
	if (sums_in && (pc.flags & VKG_FLAG_WRITE_C) != 0u) {
		if (e_plain)
			coopMatLoadTensorNV(acc, e, 0, sliceTensorLayoutNV(ue, m0, BM, n0, BN));
		else
			coopMatLoadTensorNV(acc, e, 0, sliceTensorLayoutNV(le, m0, BM, n0, BN));
	}
	uint k0 = 0u;
	if (UNCLAMP != 0u && (pc.flags & VKG_FLAG_VEC_LOADS) != 0u && m0 + BM <= pc.M && n0 + BN <= pc.N) {
		// the tile lies inside C, rows start on 16 bytes (multiples of 8)
		tensorLayoutNV<2> ua = createTensorLayoutNV(2);
		tensorLayoutNV<2> ub = createTensorLayoutNV(2);
		const uint a_off8 = pc.a_off & ~7u, b_off8 = pc.b_off & ~7u;
		ua = setTensorLayoutDimensionNV(ua, a_rows, a_cols);
		ua = setTensorLayoutStrideNV(ua, a_stride & ~7u, 1);
		ub = setTensorLayoutDimensionNV(ub, pc.K, pc.N);
		ub = setTensorLayoutStrideNV(ub, pc.N & ~7u, 1);
		const uint k_trips = pc.K / (BK * UNROLL);
		for (uint i = 0u; i < k_trips; i++) {
			[[unroll]] for (uint u = 0u; u < UNROLL; u++) {
				NV2_STEP(ua, ub, a_off8, b_off8)
				k0 += BK;
			}
		}
		for (; k0 + BK <= pc.K; k0 += BK)
			NV2_STEP(ua, ub, a_off8, b_off8)
	}
	// edge tiles, UNCLAMP 0, and the last partial k step: clamped
	for (; k0 < pc.K; k0 += BK)
		NV2_STEP(la, lb, pc.a_off, pc.b_off)
	if (sums_out) { // a later piece resumes from e
		if (want_d)
			coopMatStoreTensorNV(bias, e, e_d, sliceTensorLayoutNV(ld, m0, BM, 0, DBN));
		if ((pc.flags & VKG_FLAG_WRITE_C) != 0u && e_plain)
			coopMatStoreTensorNV(acc, e, 0, sliceTensorLayoutNV(ue, m0, BM, n0, BN));
		else if ((pc.flags & VKG_FLAG_WRITE_C) != 0u)
			coopMatStoreTensorNV(acc, e, 0, sliceTensorLayoutNV(le, m0, BM, n0, BN));
		return;
	}
	if (want_d)
		NV2_STORE_D(bias)
	if ((pc.flags & VKG_FLAG_WRITE_C) == 0u)
		return;
	if (accum) {
		coopmat<ETYPE, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> old;
		coopMatLoadTensorNV(old, c, pc.c_off, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
		acc += coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(old);
	}
	NV2_ROUND(acc);
	coopmat<ETYPE, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> out_c =
		coopmat<ETYPE, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
	coopMatStoreTensorNV(out_c, c, pc.c_off, sliceTensorLayoutNV(lc, m0, BM, n0, BN));
}
