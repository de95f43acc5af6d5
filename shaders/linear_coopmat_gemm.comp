#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
// @kernel kernel_name=linear_coopmat_gemm domain=linear_backward variant=coopmat dtype=f16 status=experimental
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n] on the tensor cores through
// VK_NV_cooperative_matrix (16×16×16 f16 products, f32 accumulators), for
// f16 tensors: a 128×128 tile of C per workgroup of eight subgroups (2×4),
// each subgroup 64×32 of it (4×2 matrices). The reduction goes 32 at a time:
// the workgroup stages A and B tiles in shared memory (zero outside the
// tensors, so any shape works), the subgroups multiply from there. Each
// accumulator goes out through a small per-subgroup shared buffer, element
// by element with bounds checks, rounded once to f16 (accumulate: added to
// the old value in f32). Same push constants as linear_tiled_gemm, so the same
// strides serve dW = dYᵀ·X and dX = dY·W; with flag 2 the workgroups of
// column tile 0 also sum their rows of A over k from the staged tile: db =
// Σ_rows dY from the same pass (as a separate pass over dY it cost 0.6 ms of
// 10 for 8192×4096×4096 on the H200). Built only where the device offers VK_NV_cooperative_matrix
// with 16×16×16 f16→f32 (the H200; not lavapipe).
//
// (Debian 12's glslang 11 knows GL_NV_cooperative_matrix but not the KHR
// one, hence the NV extension.)

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufA { float16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { float16_t c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { float16_t d[]; };
// the same A and B, 8 elements at a time (flag 8: every vector the loads
// touch is 16-byte aligned and wholly inside or outside the tensor)
layout(std430, set = 0, binding = 0) readonly buffer BufA8 { uvec4 a8[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB8 { uvec4 b8[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_GEMM(uint) } pc;

#define BM VKG_TILE_COOPMAT
#define BN VKG_TILE_COOPMAT
#define BK 32
#define AS 40   // row stride of As as [m][k] (f16): 80 bytes, a multiple of 16
#define ATS 136 // row stride of As as [k][m] (f16): 272 bytes
#define BS 136  // row stride of Bs (f16): 272 bytes

// A's tile is kept the way it lies in memory, so a thread's consecutive
// elements land in consecutive shared words: [m][k] when A runs along k
// (dX: A = dY), [k][m] when it runs along m (dW: A = dYᵀ), then read as a
// column-major matrix. The tiles are arrays of uvec4 (8 f16 each): a
// thread stores its 8 elements in one 16-byte store (8 separate 16-bit
// stores were the kernel's bottleneck), and the matrix loads read them with
// offsets and strides in uvec4.
shared uvec4 As[BM * AS / 8];  // [m][k] (BM·AS >= BK·ATS: also [k][m])
shared uvec4 Bs[BK * BS / 8];  // [k][n]
shared float Ct[8 * 256];      // per subgroup: one 16×16 accumulator on its way out

uint pack2(float16_t x, float16_t y)
{
	return packFloat2x16(f16vec2(x, y));
}

// Eight elements of A from (gm, gk): along m when sam == 1, else along k;
// zero outside the tensor.
uvec4 load_a8(uint gm, uint gk, bool vec)
{
	if (vec) {
		const uint at = pc.sam == 1u ? pc.a_off + gm + gk * pc.sak : pc.a_off + gm * pc.sam + gk;
		return (gm < pc.M && gk < pc.K) ? a8[at / 8u] : uvec4(0u);
	}
	float16_t h[8];
	[[unroll]] for (uint c = 0u; c < 8u; c++) {
		const uint m = pc.sam == 1u ? gm + c : gm, k = pc.sam == 1u ? gk : gk + c;
		h[c] = (m < pc.M && k < pc.K) ? a[pc.a_off + m * pc.sam + k * pc.sak] : float16_t(0.0);
	}
	return uvec4(pack2(h[0], h[1]), pack2(h[2], h[3]), pack2(h[4], h[5]), pack2(h[6], h[7]));
}

// B[gk, gn..gn+7], zero outside the tensor.
uvec4 load_b8(uint gk, uint gn, bool vec)
{
	if (vec)
		return (gk < pc.K && gn < pc.N) ? b8[(pc.b_off + gk * pc.N + gn) / 8u] : uvec4(0u);
	float16_t h[8];
	[[unroll]] for (uint c = 0u; c < 8u; c++)
		h[c] = (gk < pc.K && gn + c < pc.N) ? b[pc.b_off + gk * pc.N + gn + c] : float16_t(0.0);
	return uvec4(pack2(h[0], h[1]), pack2(h[2], h[3]), pack2(h[4], h[5]), pack2(h[6], h[7]));
}

// Element e (f16) of a uvec4 tile.
float tile_elem(uvec4 v, uint e)
{
	const uint w = v[(e / 2u) % 4u];
	return float(unpackFloat2x16(w)[e % 2u]);
}

void main()
{
	const uint tid = gl_LocalInvocationID.x;
	const uint warp = tid / 32u, lane = tid % 32u;
	const uint wm = (warp / 4u) * 64u, wn = (warp % 4u) * 32u;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * BM;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * BN;
	const bool want_d = (pc.flags & VKG_FLAG_WRITE_D) != 0u && n0 == 0u;
	const bool vec = (pc.flags & VKG_FLAG_VEC_LOADS) != 0u;
	float bias = 0.0; // row m0 + tid of A summed over k (tid < BM)

	fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[4][2];
	[[unroll]] for (int i = 0; i < 4; i++)
		[[unroll]] for (int j = 0; j < 2; j++)
			acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

	// what this thread moves of each tile: two groups of 8 elements of A
	// and two of B (A along m: k = idx / 16, m = 8·(idx % 16); along k:
	// m = idx / 4, k = 8·(idx % 4); B: k = idx / 16, n = 8·(idx % 16);
	// idx = tid and tid + 256), into shared element `a_at` / `b_at`
	uint a_m[2], a_k[2], a_at[2], b_k[2], b_n[2], b_at[2];
	[[unroll]] for (uint q = 0u; q < 2u; q++) {
		const uint idx = tid + q * 256u;
		a_k[q] = pc.sam == 1u ? idx / 16u : (idx % 4u) * 8u;
		a_m[q] = pc.sam == 1u ? (idx % 16u) * 8u : idx / 4u;
		a_at[q] = pc.sam == 1u ? a_k[q] * ATS + a_m[q] : a_m[q] * AS + a_k[q];
		b_k[q] = idx / 16u;
		b_n[q] = (idx % 16u) * 8u;
		b_at[q] = b_k[q] * BS + b_n[q];
	}
	uvec4 va[2], vb[2];
	[[unroll]] for (uint q = 0u; q < 2u; q++) {
		va[q] = load_a8(m0 + a_m[q], a_k[q], vec);
		vb[q] = load_b8(b_k[q], n0 + b_n[q], vec);
	}

	for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
		[[unroll]] for (uint q = 0u; q < 2u; q++) {
			As[a_at[q] / 8u] = va[q];
			Bs[b_at[q] / 8u] = vb[q];
		}
		barrier();
		// the next tile's loads fly while this one is multiplied
		if (k0 + BK < pc.K) {
			[[unroll]] for (uint q = 0u; q < 2u; q++) {
				va[q] = load_a8(m0 + a_m[q], k0 + BK + a_k[q], vec);
				vb[q] = load_b8(k0 + BK + b_k[q], n0 + b_n[q], vec);
			}
		}
	if (want_d && tid < BM) {
			float s = 0.0;
			if (pc.sam == 1u) {
				[[unroll]] for (uint kk = 0u; kk < BK; kk++)
					s += tile_elem(As[(kk * ATS + tid) / 8u], tid);
			} else {
				[[unroll]] for (uint kk = 0u; kk < BK; kk++)
					s += tile_elem(As[(tid * AS + kk) / 8u], kk);
			}
			bias += s;
		}
		[[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
			fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[4];
			fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[2];
			if (pc.sam == 1u) {
				[[unroll]] for (uint i = 0u; i < 4u; i++)
					coopMatLoadNV(fa[i], As, (kk * ATS + wm + 16u * i) / 8u, ATS / 8u, true);
			} else {
				[[unroll]] for (uint i = 0u; i < 4u; i++)
					coopMatLoadNV(fa[i], As, ((wm + 16u * i) * AS + kk) / 8u, AS / 8u, false);
			}
			[[unroll]] for (uint j = 0u; j < 2u; j++)
				coopMatLoadNV(fb[j], Bs, (kk * BS + wn + 16u * j) / 8u, BS / 8u, false);
			[[unroll]] for (uint i = 0u; i < 4u; i++)
				[[unroll]] for (uint j = 0u; j < 2u; j++)
					acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
		}
		barrier();
	}
	const bool accum = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	if (want_d && tid < BM && m0 + tid < pc.M) {
		const uint k = pc.d_off + m0 + tid;
		d[k] = float16_t(accum ? float(d[k]) + bias : bias);
	}
	if ((pc.flags & VKG_FLAG_WRITE_C) == 0u)
		return;
	[[unroll]] for (uint i = 0u; i < 4u; i++)
		[[unroll]] for (uint j = 0u; j < 2u; j++) {
			coopMatStoreNV(acc[i][j], Ct, warp * 256u, 16u, false);
			subgroupMemoryBarrierShared();
			subgroupBarrier();
			[[unroll]] for (uint q = 0u; q < 8u; q++) {
				const uint e = lane + 32u * q;
				const uint gm = m0 + wm + 16u * i + e / 16u;
				const uint gn = n0 + wn + 16u * j + e % 16u;
				if (gm < pc.M && gn < pc.N) {
					const uint k = pc.c_off + gm * pc.N + gn;
					const float v = Ct[warp * 256u + e];
					c[k] = float16_t(accum ? float(c[k]) + v : v);
				}
			}
			subgroupBarrier();
		}
}
