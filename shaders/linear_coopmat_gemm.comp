#version 450
#extension GL_GOOGLE_include_directive : require
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

layout(push_constant) uniform Params {
	uint M, N, K;
	uint a_off, b_off, c_off, d_off;
	uint sam, sak;
	uint flags;     // 1: write C, 2: write d (bias), 4: accumulate, 8: vector loads (see BufA8)
	uint m_base;
	uint n_base;
} pc;

#define BM 128
#define BN 128
#define BK 32
#define AS 40   // row stride of As as [m][k] (f16): 80 bytes, a multiple of 16
#define ATS 136 // row stride of As as [k][m] (f16): 272 bytes
#define BS 136  // row stride of Bs (f16): 272 bytes

// A's tile is kept the way it lies in memory, so a thread's consecutive
// elements land in consecutive shared words: [m][k] when A runs along k
// (dX: A = dY), [k][m] when it runs along m (dW: A = dYᵀ), then read as a
// column-major matrix
shared float16_t As[BM * AS];  // [m][k] (BM·AS >= BK·ATS: also [k][m])
shared float16_t Bs[BK * BS];  // [k][n]
shared float Ct[8 * 256];      // per subgroup: one 16×16 accumulator on its way out

// Eight f16 of v into As from element `at`, `step` elements apart.
void put_a(uint at, uint step, uvec4 v)
{
	const uint w[4] = uint[4](v.x, v.y, v.z, v.w);
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const f16vec2 h = unpackFloat2x16(w[i]);
		As[at + (2u * i) * step] = h.x;
		As[at + (2u * i + 1u) * step] = h.y;
	}
}

void put_b(uint at, uvec4 v)
{
	const uint w[4] = uint[4](v.x, v.y, v.z, v.w);
	[[unroll]] for (uint i = 0u; i < 4u; i++) {
		const f16vec2 h = unpackFloat2x16(w[i]);
		Bs[at + 2u * i] = h.x;
		Bs[at + 2u * i + 1u] = h.y;
	}
}

void main()
{
	const uint tid = gl_LocalInvocationID.x;
	const uint warp = tid / 32u, lane = tid % 32u;
	const uint wm = (warp / 4u) * 64u, wn = (warp % 4u) * 32u;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * BM;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * BN;
	const bool want_d = (pc.flags & 2u) != 0u && n0 == 0u;
	float bias = 0.0; // row m0 + tid of A summed over k (tid < BM)

	fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[4][2];
	[[unroll]] for (int i = 0; i < 4; i++)
		[[unroll]] for (int j = 0; j < 2; j++)
			acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

	for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
		if ((pc.flags & 8u) != 0u) {
			// 512 vectors of A and of B, two each per thread
			[[unroll]] for (uint q = 0u; q < 2u; q++) {
				const uint idx = tid + q * 256u;
				if (pc.sam == 1u) {
					const uint kk = idx / 16u, mm = (idx % 16u) * 8u;
					const uint gm = m0 + mm, gk = k0 + kk;
					const uvec4 v = (gm < pc.M && gk < pc.K) ? a8[(pc.a_off + gm + gk * pc.sak) / 8u] : uvec4(0u);
					put_a(kk * ATS + mm, 1u, v);
				} else {
					const uint mm = idx / 4u, kk = (idx % 4u) * 8u;
					const uint gm = m0 + mm, gk = k0 + kk;
					const uvec4 v = (gm < pc.M && gk < pc.K) ? a8[(pc.a_off + gm * pc.sam + gk) / 8u] : uvec4(0u);
					put_a(mm * AS + kk, 1u, v);
				}
				const uint kk = idx / 16u, nn = (idx % 16u) * 8u;
				const uint gk = k0 + kk, gn = n0 + nn;
				const uvec4 v = (gk < pc.K && gn < pc.N) ? b8[(pc.b_off + gk * pc.N + gn) / 8u] : uvec4(0u);
				put_b(kk * BS + nn, v);
			}
		} else {
			// A tile 128×32: 16 elements per thread, walking memory
			// contiguously (along m when sam == 1, along k otherwise)
			[[unroll]] for (uint q = 0u; q < 16u; q++) {
				const uint idx = tid + q * 256u;
				uint mm, kk;
				if (pc.sam == 1u) {
					kk = idx / BM;
					mm = idx % BM;
				} else {
					mm = idx / BK;
					kk = idx % BK;
				}
				const uint gm = m0 + mm, gk = k0 + kk;
				const float16_t v = (gm < pc.M && gk < pc.K) ? a[pc.a_off + gm * pc.sam + gk * pc.sak] : float16_t(0.0);
				if (pc.sam == 1u)
					As[kk * ATS + mm] = v;
				else
					As[mm * AS + kk] = v;
			}
			// B tile 32×128, contiguous along n
			[[unroll]] for (uint q = 0u; q < 16u; q++) {
				const uint idx = tid + q * 256u;
				const uint kk = idx / BN, nn = idx % BN;
				const uint gk = k0 + kk, gn = n0 + nn;
				Bs[kk * BS + nn] = (gk < pc.K && gn < pc.N) ? b[pc.b_off + gk * pc.N + gn] : float16_t(0.0);
			}
		}
		barrier();
		if (want_d && tid < BM) {
			float s = 0.0;
			if (pc.sam == 1u) {
				[[unroll]] for (uint kk = 0u; kk < BK; kk++)
					s += float(As[kk * ATS + tid]);
			} else {
				[[unroll]] for (uint kk = 0u; kk < BK; kk++)
					s += float(As[tid * AS + kk]);
			}
			bias += s;
		}
		[[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
			fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[4];
			fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fb[2];
			if (pc.sam == 1u) {
				[[unroll]] for (uint i = 0u; i < 4u; i++)
					coopMatLoadNV(fa[i], As, kk * ATS + wm + 16u * i, ATS, true);
			} else {
				[[unroll]] for (uint i = 0u; i < 4u; i++)
					coopMatLoadNV(fa[i], As, (wm + 16u * i) * AS + kk, AS, false);
			}
			[[unroll]] for (uint j = 0u; j < 2u; j++)
				coopMatLoadNV(fb[j], Bs, kk * BS + wn + 16u * j, BS, false);
			[[unroll]] for (uint i = 0u; i < 4u; i++)
				[[unroll]] for (uint j = 0u; j < 2u; j++)
					acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
		}
		barrier();
	}
	const bool accum = (pc.flags & 4u) != 0u;
	if (want_d && tid < BM && m0 + tid < pc.M) {
		const uint k = pc.d_off + m0 + tid;
		d[k] = float16_t(accum ? float(d[k]) + bias : bias);
	}
	if ((pc.flags & 1u) == 0u)
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
