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
// @kernel kernel_name=bench_peak_mma domain=bench_peak variant=mma dtype=f16,bf16 status=experimental
// @build needs_f16=coopmat_khr needs_bf16=coopmat_khr,bfloat16 spirv_opt=off
//
// The ceiling of subgroup-scope cooperative-matrix multiply-adds
// (VK_KHR_cooperative_matrix) for `vkgrad bench --peak`
// (bench/cli_bench_peak.c), no part of the daemon's job path. The matrix
// shape CM_M×CM_N×CM_K is the device's (the benchmark passes what
// vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR offers, as
// linear_coopmat_khr_gemm gets it).
//
// Each subgroup (VKG_PEAK_MMA_SUBGROUPS per workgroup, as a 2×2 grid) keeps
// FA·FB f32 accumulators -- FA A fragments times FB B fragments, as the
// GEMM's subgroup keeps 4×4 for its 64×64 block -- and per loop trip runs
// one k-slice of VKG_PEAK_SLICE_K: SLICE_K / CM_K steps, each FA·FB
// coopMatMulAdd, no two in a step on the same accumulator.
//   SMEM = 0 (mma_regs): the fragments are loaded from memory once and stay
//     in registers: the multiply-adds alone.
//   SMEM = 1 (mma_smem): the workgroup first fills a shared A tile
//     (2·FA·CM_M rows of SLICE_K) and B tile (SLICE_K rows of 2·FB·CM_N),
//     rows padded by 16 bytes as in linear_coopmat_khr_gemm; every step each
//     subgroup loads its FA + FB fragments from them (coopMatLoad from shared
//     memory), and a barrier ends every slice, as in the GEMM's loop -- which
//     here only re-reads what is there: the shared->register->MMA loop with
//     no global traffic.
//   A_KMAJOR = 1 (mma_smem_dw, with SMEM = 1): the shared A tile is stored
//     [k][m] and loaded column-major, as the GEMM's dW pass (A = dYᵀ) keeps
//     it; 0 (mma_smem): [m][k], loaded row-major, as its dX pass.
// What is computed is known exactly: tile row block r holds A fragment
// r mod FA and column block c B fragment c mod FB, so accumulator (i, j) of
// every subgroup ends at init(i, j) + iters·(SLICE_K/CM_K)·A_i·B_j. The
// fragments hold small integers and the benchmark bounds iters so that
// every partial sum is an integer below 2^24: exact in f16/bf16 and f32.
// Each subgroup writes its accumulators to out.

layout(constant_id = 0) const uint CM_M = 16;
layout(constant_id = 1) const uint CM_N = 16;
layout(constant_id = 2) const uint CM_K = 16;
layout(constant_id = 3) const uint FA = 2;   // A fragments per subgroup
layout(constant_id = 4) const uint FB = 2;   // B fragments per subgroup
layout(constant_id = 5) const uint SMEM = 0; // 1: fragments from shared memory every step
layout(constant_id = 7) const uint A_KMAJOR = 0; // 1: the shared A tile as [k][m], column-major loads
// VKG_PEAK_MMA_SUBGROUPS subgroups (set by the benchmark from the subgroup size)
layout(local_size_x_id = 6) in;

const uint SK = VKG_PEAK_SLICE_K;
// shared tiles in uvec4 (8 elements), rows padded by one uvec4
const uint AM = 2u * FA * CM_M;                // rows of A in the tile
const uint ASTR = (SK + 8u) / 8u;              // A as [m][k]
const uint ASTR_KM = (AM + 8u) / 8u;           // A as [k][m]
const uint BSTR = (2u * FB * CM_N + 8u) / 8u;  // B as [k][n]
const uint A_TILE = A_KMAJOR != 0u ? SK * ASTR_KM : AM * ASTR;
const uint B_TILE = SK * BSTR;
const uint SH = SMEM != 0u ? A_TILE + B_TILE : 1u;
// the fragments in ab, in uvec4
const uint A_FRAG = CM_M * CM_K / 8u;
const uint B_FRAG = CM_K * CM_N / 8u;

layout(std430, set = 0, binding = 0) readonly buffer AB { uvec4 ab[]; };
layout(std430, set = 0, binding = 0) readonly buffer AB16 { uint16_t ab16[]; }; // the same, by element
layout(std430, set = 0, binding = 1) readonly buffer Init { float init[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { VKG_PC_PEAK_MMA(uint) } pc;

shared uvec4 sh[SH];

coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> acc[FA * FB];

// The shared tiles from the fragments in ab (see the top).
void fill_tiles()
{
	const uint nt = gl_WorkGroupSize.x;
	for (uint v = gl_LocalInvocationID.x; A_KMAJOR == 0u && v < AM * (SK / 8u); v += nt) {
		const uint r = v / (SK / 8u), k = (v % (SK / 8u)) * 8u;
		const uint f = (r / CM_M) % FA;
		sh[r * ASTR + k / 8u] = ab[f * A_FRAG + ((r % CM_M) * CM_K + k % CM_K) / 8u];
	}
	// [k][m]: eight rows m of one column k per vector, gathered by element
	for (uint v = gl_LocalInvocationID.x; A_KMAJOR != 0u && v < SK * (AM / 8u); v += nt) {
		const uint k = v / (AM / 8u), m0 = (v % (AM / 8u)) * 8u;
		uint w[4];
		[[unroll]] for (uint e = 0u; e < 4u; e++) {
			uint h[2];
			[[unroll]] for (uint q = 0u; q < 2u; q++) {
				const uint m = m0 + 2u * e + q;
				h[q] = uint(ab16[((m / CM_M) % FA) * CM_M * CM_K + (m % CM_M) * CM_K + k % CM_K]);
			}
			w[e] = h[0] | (h[1] << 16);
		}
		sh[k * ASTR_KM + m0 / 8u] = uvec4(w[0], w[1], w[2], w[3]);
	}
	const uint bc = 2u * FB * CM_N;
	for (uint v = gl_LocalInvocationID.x; v < SK * (bc / 8u); v += nt) {
		const uint k = v / (bc / 8u), c = (v % (bc / 8u)) * 8u;
		const uint g = (c / CM_N) % FB;
		sh[A_TILE + k * BSTR + c / 8u] =
			ab[FA * A_FRAG + g * B_FRAG + ((k % CM_K) * CM_N + c % CM_N) / 8u];
	}
	barrier();
}

void run_smem(uint wy, uint wx)
{
	fill_tiles();
	for (uint it = 0u; it < pc.iters; it++) {
		[[unroll]] for (uint kk = 0u; kk < SK; kk += CM_K) {
			coopmat<ETYPE, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> fa[FA];
			coopmat<ETYPE, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> fb[FB];
			[[unroll]] for (uint i = 0u; i < FA; i++) {
				if (A_KMAJOR != 0u)
					coopMatLoad(fa[i], sh, kk * ASTR_KM + (wy * FA * CM_M + i * CM_M) / 8u, ASTR_KM,
						    gl_CooperativeMatrixLayoutColumnMajor);
				else
					coopMatLoad(fa[i], sh, (wy * FA * CM_M + i * CM_M) * ASTR + kk / 8u, ASTR,
						    gl_CooperativeMatrixLayoutRowMajor);
			}
			[[unroll]] for (uint j = 0u; j < FB; j++)
				coopMatLoad(fb[j], sh, A_TILE + kk * BSTR + (wx * FB * CM_N + j * CM_N) / 8u, BSTR,
					    gl_CooperativeMatrixLayoutRowMajor);
			[[unroll]] for (uint i = 0u; i < FA; i++)
				[[unroll]] for (uint j = 0u; j < FB; j++)
					acc[i * FB + j] = coopMatMulAdd(fa[i], fb[j], acc[i * FB + j]);
		}
		barrier();
	}
}

void run_regs()
{
	coopmat<ETYPE, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> fa[FA];
	coopmat<ETYPE, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> fb[FB];
	[[unroll]] for (uint i = 0u; i < FA; i++)
		coopMatLoad(fa[i], ab, i * A_FRAG, CM_K / 8u, gl_CooperativeMatrixLayoutRowMajor);
	[[unroll]] for (uint j = 0u; j < FB; j++)
		coopMatLoad(fb[j], ab, FA * A_FRAG + j * B_FRAG, CM_N / 8u, gl_CooperativeMatrixLayoutRowMajor);
	for (uint it = 0u; it < pc.iters; it++) {
		[[unroll]] for (uint kk = 0u; kk < SK; kk += CM_K)
			[[unroll]] for (uint i = 0u; i < FA; i++)
				[[unroll]] for (uint j = 0u; j < FB; j++)
					acc[i * FB + j] = coopMatMulAdd(fa[i], fb[j], acc[i * FB + j]);
	}
}

void main()
{
	const uint sg = gl_SubgroupID;
	[[unroll]] for (uint i = 0u; i < FA * FB; i++)
		coopMatLoad(acc[i], init, i * CM_M * CM_N, CM_N, gl_CooperativeMatrixLayoutRowMajor);
	if (SMEM != 0u)
		run_smem(sg / 2u, sg % 2u);
	else
		run_regs();
	const uint base = (gl_WorkGroupID.x * VKG_PEAK_MMA_SUBGROUPS + sg) * FA * FB;
	[[unroll]] for (uint i = 0u; i < FA * FB; i++)
		coopMatStore(acc[i], o, (base + i) * CM_M * CM_N, CM_N, gl_CooperativeMatrixLayoutRowMajor);
}
