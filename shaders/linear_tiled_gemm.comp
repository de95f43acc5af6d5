#version 450
#extension GL_GOOGLE_include_directive : require
// @kernel kernel_name=linear_tiled_gemm domain=linear_backward variant=tiled64 dtype=f32,f16,bf16 status=experimental
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n], register-blocked: a 64×64 tile of C
// per workgroup of 16×16 threads, 4×4 outputs per thread (rows ly + 16i,
// columns lx + 16j, so shared-memory reads are broadcast or consecutive),
// the reduction walked 16 at a time through shared-memory tiles of A and B.
// A's strides are push constants, so one kernel serves both gradients:
//   dW = dYᵀ·X : M = out,   N = in, K = batch, A(m,k) = dY[k·out + m]
//   dX = dY·W  : M = batch, N = in, K = out,   A(m,k) = dY[m·out + k]
// With flag 2 the workgroups of column tile 0 also sum A over k for their
// rows: db = Σ_rows dY from the same pass (fused bias).

#include "dtype.glsl"

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufA { STYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { STYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { STYPE c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { STYPE d[]; };

layout(push_constant) uniform Params {
	uint M, N, K;
	uint a_off, b_off, c_off, d_off;
	uint sam, sak;  // A(m, k) = a[a_off + m·sam + k·sak]; B row stride is N
	uint flags;     // 1: write C, 2: write d (bias), 4: accumulate
	uint m_base;    // first row tile of this dispatch (chunking)
} pc;

shared float As[16][65]; // [k][m]
shared float Bs[16][65]; // [k][n]

void main()
{
	const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
	const uint tid = ly * 16u + lx;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * 64u;
	const uint n0 = gl_WorkGroupID.x * 64u;
	const bool want_c = (pc.flags & 1u) != 0u;
	const bool want_d = (pc.flags & 2u) != 0u && gl_WorkGroupID.x == 0u;
	const bool acc = (pc.flags & 4u) != 0u;

	float r[4][4];
	float bias[4];
	for (int i = 0; i < 4; i++) {
		bias[i] = 0.0;
		for (int j = 0; j < 4; j++)
			r[i][j] = 0.0;
	}
	for (uint k0 = 0u; k0 < pc.K; k0 += 16u) {
		for (uint q = 0u; q < 4u; q++) {
			const uint idx = tid + q * 256u;
			// A tile: walk memory contiguously along m when sam == 1,
			// along k otherwise
			uint kk, mm;
			if (pc.sam == 1u) {
				kk = idx / 64u;
				mm = idx % 64u;
			} else {
				mm = idx / 16u;
				kk = idx % 16u;
			}
			const uint gm = m0 + mm, gk = k0 + kk;
			As[kk][mm] = (gm < pc.M && gk < pc.K) ? LOAD(a[pc.a_off + gm * pc.sam + gk * pc.sak]) : 0.0;
			const uint bk = idx / 64u, bn = idx % 64u;
			const uint gbk = k0 + bk, gbn = n0 + bn;
			Bs[bk][bn] = (gbk < pc.K && gbn < pc.N) ? LOAD(b[pc.b_off + gbk * pc.N + gbn]) : 0.0;
		}
		barrier();
		for (uint kk = 0u; kk < 16u; kk++) {
			float av[4], bv[4];
			for (uint i = 0u; i < 4u; i++) {
				av[i] = As[kk][ly + 16u * i];
				bv[i] = Bs[kk][lx + 16u * i];
			}
			for (uint i = 0u; i < 4u; i++) {
				for (uint j = 0u; j < 4u; j++)
					r[i][j] += av[i] * bv[j];
				bias[i] += av[i];
			}
		}
		barrier();
	}
	for (uint i = 0u; i < 4u; i++) {
		const uint m = m0 + ly + 16u * i;
		if (m >= pc.M)
			continue;
		if (want_c) {
			for (uint j = 0u; j < 4u; j++) {
				const uint n = n0 + lx + 16u * j;
				if (n < pc.N) {
					const uint k = pc.c_off + m * pc.N + n;
					c[k] = STORE(acc ? LOAD(c[k]) + r[i][j] : r[i][j]);
				}
			}
		}
		if (want_d && lx == 0u) {
			const uint k = pc.d_off + m;
			d[k] = STORE(acc ? LOAD(d[k]) + bias[i] : bias[i]);
		}
	}
}
