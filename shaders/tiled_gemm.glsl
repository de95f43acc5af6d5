// shaders/tiled_gemm.glsl — the body of the register-blocked tiled GEMM,
// shared by linear_tiled_gemm (writes the tensors, in their dtype) and
// linear_splitk_gemm (VKG_PARTIAL: writes one slice's f32 partial sums into
// the daemon's scratch; linear_splitk_reduce adds the slices up).
#include "dtype.glsl"

#ifdef VKG_PARTIAL
#define CTYPE float
#define CLOAD(v) (v)
#define CSTORE(f) (f)
#else
#define CTYPE STYPE
#define CLOAD(v) LOAD(v)
#define CSTORE(f) STORE(f)
#endif

// TILE (64 by default, 128 for linear_tiled128_gemm): C tile per workgroup.
#ifndef TILE
#define TILE 64
#endif
#define TPR (TILE / 8)    // threads per row of the thread grid
#define NT (TPR * TPR)    // threads per workgroup
layout(local_size_x = NT, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufA { STYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { STYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { CTYPE c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { CTYPE d[]; };
#if !defined(VKG_DTYPE_F16) && !defined(VKG_DTYPE_BF16)
// f32: the same A and B four elements at a time (flag 8: every vector the
// loads touch is aligned and wholly inside or outside its tensor)
layout(std430, set = 0, binding = 0) readonly buffer BufA4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
#define VEC_LOADS 1
#endif

layout(push_constant) uniform Params {
	uint M, N, K;
	uint a_off, b_off, c_off, d_off;
	uint sam, sak;  // A(m, k) = a[a_off + m·sam + k·sak]; B row stride is N
	uint flags;     // 1: write C, 2: write d (bias), 4: accumulate, 8: vec4 loads (f32)
	uint m_base;    // first row tile of this dispatch (chunking)
	uint n_base;    // first column tile of this dispatch (chunking)
} pc;

// TILE×TILE tile of C per workgroup of (TILE/8)² threads, 8×8 outputs per
// thread: thread (tx, ty) = (tid % TPR, tid / TPR) owns rows 8·ty + i and columns
// 8·tx + j, so each k step reads 8 consecutive floats of A and of B from
// shared memory (vectorisable) for 64 multiply-adds.
#define AST (TILE + 4) // row stride of As/Bs: a multiple of 4 floats
shared float As[16 * AST]; // [k][m]
shared float Bs[16 * AST]; // [k][n]

void main()
{
	const uint tid = gl_LocalInvocationID.x;
	const uint tx = tid % TPR, ty = tid / TPR;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * TILE;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * TILE;
	const bool want_c = (pc.flags & 1u) != 0u;
	const bool want_d = (pc.flags & 2u) != 0u && n0 == 0u;
	const bool acc = (pc.flags & 4u) != 0u;

	float r[8][8];
	float bias[8];
	for (int i = 0; i < 8; i++) {
		bias[i] = 0.0;
		for (int j = 0; j < 8; j++)
			r[i][j] = 0.0;
	}
	for (uint k0 = 0u; k0 < pc.K; k0 += 16u) {
#ifdef VEC_LOADS
		if ((pc.flags & 8u) != 0u) {
			// 4·TILE vectors of A and of B
			for (uint q = 0u; q < 4u * TILE / NT; q++) {
				const uint idx = tid + q * NT;
				if (pc.sam == 1u) {
					const uint kk = idx / (TILE / 4u), mm = (idx % (TILE / 4u)) * 4u;
					const uint gm = m0 + mm, gk = k0 + kk;
					const vec4 v = (gm < pc.M && gk < pc.K) ? a4[(pc.a_off + gm + gk * pc.sak) / 4u] : vec4(0.0);
					for (uint e = 0u; e < 4u; e++)
						As[kk * AST + mm + e] = v[e];
				} else {
					const uint mm = idx / 4u, kk = (idx % 4u) * 4u;
					const uint gm = m0 + mm, gk = k0 + kk;
					const vec4 v = (gm < pc.M && gk < pc.K) ? a4[(pc.a_off + gm * pc.sam + gk) / 4u] : vec4(0.0);
					for (uint e = 0u; e < 4u; e++)
						As[(kk + e) * AST + mm] = v[e];
				}
				const uint bk = idx / (TILE / 4u), bn = (idx % (TILE / 4u)) * 4u;
				const uint gbk = k0 + bk, gbn = n0 + bn;
				const vec4 v = (gbk < pc.K && gbn < pc.N) ? b4[(pc.b_off + gbk * pc.N + gbn) / 4u] : vec4(0.0);
				for (uint e = 0u; e < 4u; e++)
					Bs[bk * AST + bn + e] = v[e];
			}
		} else
#endif
		{
			// 16·TILE elements of A and of B, walking memory
			// contiguously (A along m when sam == 1, along k otherwise)
			for (uint q = 0u; q < 16u * TILE / NT; q++) {
				const uint idx = tid + q * NT;
				uint kk, mm;
				if (pc.sam == 1u) {
					kk = idx / TILE;
					mm = idx % TILE;
				} else {
					mm = idx / 16u;
					kk = idx % 16u;
				}
				const uint gm = m0 + mm, gk = k0 + kk;
				As[kk * AST + mm] = (gm < pc.M && gk < pc.K) ? LOAD(a[pc.a_off + gm * pc.sam + gk * pc.sak]) : 0.0;
				const uint bk = idx / TILE, bn = idx % TILE;
				const uint gbk = k0 + bk, gbn = n0 + bn;
				Bs[bk * AST + bn] = (gbk < pc.K && gbn < pc.N) ? LOAD(b[pc.b_off + gbk * pc.N + gbn]) : 0.0;
			}
		}
		barrier();
		for (uint kk = 0u; kk < 16u; kk++) {
			float av[8], bv[8];
			for (uint i = 0u; i < 8u; i++) {
				av[i] = As[kk * AST + ty * 8u + i];
				bv[i] = Bs[kk * AST + tx * 8u + i];
			}
			for (uint i = 0u; i < 8u; i++) {
				for (uint j = 0u; j < 8u; j++)
					r[i][j] += av[i] * bv[j];
				bias[i] += av[i];
			}
		}
		barrier();
	}
	for (uint i = 0u; i < 8u; i++) {
		const uint m = m0 + ty * 8u + i;
		if (m >= pc.M)
			continue;
		if (want_c) {
			for (uint j = 0u; j < 8u; j++) {
				const uint n = n0 + tx * 8u + j;
				if (n < pc.N) {
					const uint k = pc.c_off + m * pc.N + n;
					c[k] = CSTORE(acc ? CLOAD(c[k]) + r[i][j] : r[i][j]);
				}
			}
		}
		if (want_d && tx == 0u) {
			const uint k = pc.d_off + m;
			d[k] = CSTORE(acc ? CLOAD(d[k]) + bias[i] : bias[i]);
		}
	}
}
