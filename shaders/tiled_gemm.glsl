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

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufA { STYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { STYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { CTYPE c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { CTYPE d[]; };

layout(push_constant) uniform Params {
	uint M, N, K;
	uint a_off, b_off, c_off, d_off;
	uint sam, sak;  // A(m, k) = a[a_off + m·sam + k·sak]; B row stride is N
	uint flags;     // 1: write C, 2: write d (bias), 4: accumulate
	uint m_base;    // first row tile of this dispatch (chunking)
	uint n_base;    // first column tile of this dispatch (chunking)
} pc;

shared float As[16][65]; // [k][m]
shared float Bs[16][65]; // [k][n]

void main()
{
	const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
	const uint tid = ly * 16u + lx;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * 64u;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * 64u;
	const bool want_c = (pc.flags & 1u) != 0u;
	const bool want_d = (pc.flags & 2u) != 0u && n0 == 0u;
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
					c[k] = CSTORE(acc ? CLOAD(c[k]) + r[i][j] : r[i][j]);
				}
			}
		}
		if (want_d && lx == 0u) {
			const uint k = pc.d_off + m;
			d[k] = CSTORE(acc ? CLOAD(d[k]) + bias[i] : bias[i]);
		}
	}
}
