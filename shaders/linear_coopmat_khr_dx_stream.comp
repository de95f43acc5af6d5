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
// @kernel kernel_name=linear_coopmat_khr_dx_stream domain=linear_backward variant=coopmat_khr dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_khr needs_bf16=coopmat_khr,bfloat16 spirv_opt=off
//
// dX = dY·W (+ dX) of a narrow layer on the tensor cores, streaming the
// batch: C[m, n] (+)= Σ_k A[m, k] · B[k, n] with A = dY (batch × out,
// row-major: sam = K, sak = 1), B = W (out × in, row-major), C = dX
// (batch × in), for a reduction K (= out) of at most 16·TK. Same push
// constants and bindings as linear_coopmat_khr_gemm (binding 3 unused).
//
// Each subgroup owns 16 columns of C and holds W's K × 16 block of them in
// registers for its whole life (TK cooperative matrices of 16×16, loaded
// once). The workgroup (NW subgroups side by side: 16·NW columns × 16·RT·
// STRIPS rows of C) then walks its STRIPS strips of 16·RT rows: each strip
// of A (all of its K columns) goes to shared memory in 16-byte loads, the
// next AHEAD strips' loads in flight while the current one is multiplied
// (two stages, rows padded by 16 bytes, one barrier a strip; with AHEAD 2
// a thread's loads of strip j land in ra for even j, rb for odd, each
// stored to its stage one strip before it is multiplied: no faster on the
// H100, docs/performance.md's nineteenth run, so the tilings keep 1);
// every subgroup takes its A fragments from there, TK products per 16 rows
// into f32 accumulators (RT independent chains), and each 16×16 result is
// rounded once to the storage type (accumulate: the old block loaded as a
// matrix and added in f32 first; bf16: each element to nearest even before
// the matrix conversion, which cuts toward zero on the H100) and goes out
// through a small shared staging of its subgroup, eight elements (16
// bytes) per lane. The staging holds the 16-bit block, not the f32 one:
// half the shared memory, which lets 16 subgroups (256 columns: dY read
// once) fit 48 KiB with two stages of a 32-row strip (H100, 2026-12-07,
// eighteenth run in docs/performance.md: bf16 dX alone at 262,144×256×256
// 217 µs against 259 with the f32 staging; full backward 435 against 476,
// 519 against 544 at 1,048,576×128×128).
//
// Every element of C is written by one subgroup, its sum in a fixed order:
// the same bits every run. The daemon takes it only where every load and
// store is whole and aligned (refine.h: K and N multiples of 16, K at
// most 16·TK, M a multiple of 16·RT, the offsets multiples of 8); it never
// reads or writes past the tensors, so nothing else is checked here.
// Created where linear_coopmat_khr_gemm is and the device's matrices for
// the dtype are 16×16×16 (daemon/gpu/pipelines.c), unless
// VKGRAD_DXS_TILE=off (daemon/kernels/dxs_tile.h: on by default).

layout(constant_id = 0) const uint NW = 8;      // subgroups per workgroup (16 columns each)
layout(constant_id = 1) const uint TK = 16;     // the reduction's 16-wide blocks held (K <= 16·TK)
layout(constant_id = 2) const uint RT = 2;      // 16-row blocks per strip
layout(constant_id = 3) const uint STRIPS = 8;  // strips per workgroup
layout(local_size_x_id = 4) in;                 // NW·32 (set by the daemon)
layout(constant_id = 5) const uint AHEAD = 1;   // strips whose loads are in flight (1 or 2)

const uint BN = NW * 16u;
const uint NT = NW * 32u;
const uint SROWS = 16u * RT;
const uint BM = SROWS * STRIPS;
const uint ESTR = 16u / 8u + 1u; // uvec4 per staged row of 16 elements (+ one of padding)
const uint ASTR = 2u * TK + 1u;  // uvec4 per shared row of a strip of A (+ one of padding)
const uint ASTAGE = SROWS * ASTR;
const uint LA = (SROWS * 2u * TK + NT - 1u) / NT; // 16-byte loads per thread and strip, at most

layout(std430, set = 0, binding = 0) readonly buffer BufA8 { uvec4 a8[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB8 { uvec4 b8[]; };
layout(std430, set = 0, binding = 2) buffer BufC8 { uvec4 c8[]; };
layout(std430, set = 0, binding = 3) buffer BufD { uint16_t d[]; };

layout(push_constant) uniform Params { VKG_PC_GEMM(uint) } pc;

shared uvec4 sa[2u * ASTAGE]; // two stages of a strip of A (dY), rows padded
shared uvec4 st[NW * 16u * ESTR]; // each subgroup's staging of a 16x16 block, rounded

// this thread's share of a strip on its way to shared memory: the next
// one (AHEAD 1), or of the next two the even one in ra, the odd in rb
uvec4 ra[LA];
uvec4 rb[LA];

#if defined(VKG_DTYPE_BF16)
// f rounded to the nearest bf16 (ties to even), still an f32; NaN stays NaN.
// (dtype.glsl's bf16_bits rounds the same way; this is the form measured
// on the H100, where small changes to this kernel moved its matrices to
// local memory: docs/performance.md, eighteenth run.)
float bf16_rne(float f)
{
	uint u = floatBitsToUint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return f;
	u += 0x7fffu + ((u >> 16) & 1u);
	return uintBitsToFloat(u & 0xffff0000u);
}
#endif

// The strip of SROWS rows from r0 into R: K/8 vectors a row, thread tid's
// every NT-th. (Macros, so that ra and rb stay named registers.)
#define LOAD_STRIP(R, r0) \
	[[unroll]] for (uint q = 0u; q < LA; q++) { \
		const uint v = tid + q * NT; \
		if (v < SROWS * kv) \
			R[q] = a8[(pc.a_off + ((r0) + v / kv) * pc.sam) / 8u + v % kv]; \
	}
// R into the stage at base.
#define STORE_STRIP(R, base) \
	[[unroll]] for (uint q = 0u; q < LA; q++) { \
		const uint v = tid + q * NT; \
		if (v < SROWS * kv) \
			sa[(base) + (v / kv) * ASTR + v % kv] = R[q]; \
	}

void main()
{
	const uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID, tid = gl_LocalInvocationID.x;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * BN + warp * 16u;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * BM;
	const bool live = n0 < pc.N; // (a subgroup past C still loads and meets the barriers)
	const uint tk = pc.K / 16u, kv = pc.K / 8u; // (K a multiple of 16, at most 16·TK)
	const bool accum = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	// whole strips (M a multiple of SROWS); the last workgroup's may be fewer
	const uint ns = min(STRIPS, (pc.M - min(m0, pc.M)) / SROWS);

	// W's K × 16 block of this subgroup's columns, once
	coopmat<ETYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> w[TK];
	[[unroll]] for (uint t = 0u; t < TK; t++)
		if (live && t < tk)
			coopMatLoad(w[t], b8, (pc.b_off + t * 16u * pc.N + n0) / 8u, pc.N / 8u,
				    gl_CooperativeMatrixLayoutRowMajor);

	if (ns == 0u)
		return; // (uniform: the whole workgroup)
	LOAD_STRIP(ra, m0)
	STORE_STRIP(ra, 0u)
	if (AHEAD == 2u && ns > 1u)
		LOAD_STRIP(rb, m0 + SROWS)
	barrier();
	const uint ebase = warp * 16u * ESTR;
	const uint er = lane >> 1, eh = lane & 1u; // the row and half-row this lane writes
	for (uint s = 0u; s < ns; s++) {
		const uint r0 = m0 + s * SROWS, base = (s & 1u) * ASTAGE;
		// strip s + AHEAD's loads, in flight while this strip is multiplied
		if (s + AHEAD < ns) {
			if (AHEAD == 1u || ((s + AHEAD) & 1u) == 0u)
				LOAD_STRIP(ra, r0 + AHEAD * SROWS)
			else
				LOAD_STRIP(rb, r0 + AHEAD * SROWS)
		}
		if (live) {
			coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[RT];
			[[unroll]] for (uint i = 0u; i < RT; i++)
				acc[i] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
			[[unroll]] for (uint t = 0u; t < TK; t++) {
				if (t >= tk)
					continue;
				[[unroll]] for (uint i = 0u; i < RT; i++) {
					coopmat<ETYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
					coopMatLoad(a, sa, base + i * 16u * ASTR + t * 2u, ASTR,
						    gl_CooperativeMatrixLayoutRowMajor);
					acc[i] = coopMatMulAdd(a, w[t], acc[i]);
				}
			}
			[[unroll]] for (uint i = 0u; i < RT; i++) {
				const uint row = r0 + i * 16u;
				if (accum) {
					coopmat<ETYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> o;
					coopMatLoad(o, c8, (pc.c_off + row * pc.N + n0) / 8u, pc.N / 8u,
						    gl_CooperativeMatrixLayoutRowMajor);
					acc[i] = acc[i] + coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(o);
				}
#if defined(VKG_DTYPE_BF16)
				// the matrix conversion to bf16 cuts toward zero on some
				// devices (H100, 2026-12-07): each element is rounded to
				// nearest even first, so the conversion below is exact
				for (int e = 0; e < acc[i].length(); e++)
					acc[i][e] = bf16_rne(acc[i][e]);
#endif
				coopmat<ETYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> h =
					coopmat<ETYPE, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(acc[i]);
				coopMatStore(h, st, ebase, ESTR, gl_CooperativeMatrixLayoutRowMajor);
				subgroupMemoryBarrierShared();
				subgroupBarrier();
				c8[(pc.c_off + (row + er) * pc.N + n0 + eh * 8u) / 8u] = st[ebase + er * ESTR + eh];
				subgroupBarrier(); // (the next store overwrites the staging)
			}
		}
		// the next strip into the other stage (last read in step s - 1,
		// before the barrier that ended it)
		if (s + 1u < ns) {
			if (AHEAD == 1u || ((s + 1u) & 1u) == 0u)
				STORE_STRIP(ra, ASTAGE - base)
			else
				STORE_STRIP(rb, ASTAGE - base)
		}
		barrier();
	}
}
