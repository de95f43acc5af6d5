// shaders/tiled_gemm.glsl — the body of the register-blocked tiled GEMM,
// shared by linear_tiled_gemm (writes the tensors, in their dtype) and
// linear_splitk_gemm (VKG_PARTIAL: writes one slice's f32 partial sums into
// the daemon's scratch; linear_splitk_reduce adds the slices up).
#include "partial.glsl"

// A TILE×TILE tile of C per workgroup of 16×16 threads, R×R outputs per
// thread (rows ly + 16i, columns lx + 16j, so shared-memory reads are
// broadcasts or consecutive words), loops unrolled ([[unroll]]) so the
// accumulators stay in registers. Measured on the H200: 64×64 with 4×4 per
// thread; 8×8 per thread (a 128×128 tile, or 64 threads) ran 5-10× slower.
#define TILE VKG_TILE_TILED
#define R (TILE / 16)
#define AST (TILE + 1) // odd row stride of As/Bs: column writes spread over banks

layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufA { STYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { STYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { CTYPE c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { CTYPE d[]; };
layout(std430, set = 0, binding = 4) buffer BufE { float e[]; }; // running sums (SUMS_IN/OUT)
#if !defined(VKG_DTYPE_F16) && !defined(VKG_DTYPE_BF16)
// f32: the same A and B four elements at a time (flag 8: every vector the
// loads touch is aligned and wholly inside or outside its tensor)
layout(std430, set = 0, binding = 0) readonly buffer BufA4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
#define VEC_LOADS 1
#endif

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_GEMM(uint) } pc;

shared float As[16 * AST]; // [k][m]
shared float Bs[16 * AST]; // [k][n]

#if R != 4
#error "main() stores R = 4 rows per thread"
#endif

// Row m of a thread's outputs: columns n0 + lx + 16j from rr[j], and the
// row's bias (by the lx == 0 threads).
void store_row(uint m, uint n0, uint lx, float rr[R], float bias, bool want_c, bool want_d, bool acc)
{
	if (m >= pc.M)
		return;
	if (want_c) {
		[[unroll]] for (int j = 0; j < R; j++) {
			const uint n = n0 + lx + 16u * uint(j);
			if (n < pc.N) {
				const uint k = pc.c_off + m * pc.N + n;
				c[k] = CSTORE(acc ? CLOAD(c[k]) + rr[j] : rr[j]);
			}
		}
	}
	if (want_d && lx == 0u) {
		const uint k = pc.d_off + m;
		d[k] = CSTORE(acc ? CLOAD(d[k]) + bias : bias);
	}
}

// Row m's running sums into e, as store_row stores them into C and d.
void save_row(uint m, uint n0, uint lx, float rr[R], float bias, bool want_c, bool want_d)
{
	if (m >= pc.M)
		return;
	if (want_c) {
		[[unroll]] for (int j = 0; j < R; j++) {
			const uint n = n0 + lx + 16u * uint(j);
			if (n < pc.N)
				e[m * pc.N + n] = rr[j];
		}
	}
	if (want_d && lx == 0u)
		e[pc.M * pc.N + m] = bias;
}

void main()
{
	const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
	const uint tid = ly * 16u + lx;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * TILE;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * TILE;
	const bool want_c = (pc.flags & VKG_FLAG_WRITE_C) != 0u;
	const bool want_d = (pc.flags & VKG_FLAG_WRITE_D) != 0u && n0 == 0u;
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;

	// the accumulators: zero, or (SUMS_IN) the running sums an earlier
	// piece of the reduction left in e (only rows and columns inside C
	// are ever stored or read; the others stay zero, as unresumed)
	const bool sums_in = (pc.flags & VKG_FLAG_SUMS_IN) != 0u;
	float r[R][R];
	float bias[R];
	[[unroll]] for (int i = 0; i < R; i++) {
		const uint m = m0 + ly + 16u * uint(i);
		bias[i] = sums_in && want_d && m < pc.M ? e[pc.M * pc.N + m] : 0.0;
		[[unroll]] for (int j = 0; j < R; j++) {
			const uint n = n0 + lx + 16u * uint(j);
			r[i][j] = sums_in && want_c && m < pc.M && n < pc.N ? e[m * pc.N + n] : 0.0;
		}
	}
	for (uint k0 = 0u; k0 < pc.K; k0 += 16u) {
#ifdef VEC_LOADS
		if ((pc.flags & VKG_FLAG_VEC_LOADS) != 0u) {
			// 4·TILE vectors of A and of B, TILE/64 each per thread
			[[unroll]] for (int q = 0; q < TILE / 64; q++) {
				const uint idx = tid + uint(q) * 256u;
				if (pc.sam == 1u) {
					const uint kk = idx / (TILE / 4u), mm = (idx % (TILE / 4u)) * 4u;
					const uint gm = m0 + mm, gk = k0 + kk;
					const vec4 v = (gm < pc.M && gk < pc.K) ? a4[(pc.a_off + gm + gk * pc.sak) / 4u] : vec4(0.0);
					As[kk * AST + mm] = v.x;
					As[kk * AST + mm + 1u] = v.y;
					As[kk * AST + mm + 2u] = v.z;
					As[kk * AST + mm + 3u] = v.w;
				} else {
					const uint mm = idx / 4u, kk = (idx % 4u) * 4u;
					const uint gm = m0 + mm, gk = k0 + kk;
					const vec4 v = (gm < pc.M && gk < pc.K) ? a4[(pc.a_off + gm * pc.sam + gk) / 4u] : vec4(0.0);
					As[kk * AST + mm] = v.x;
					As[(kk + 1u) * AST + mm] = v.y;
					As[(kk + 2u) * AST + mm] = v.z;
					As[(kk + 3u) * AST + mm] = v.w;
				}
				const uint bk = idx / (TILE / 4u), bn = (idx % (TILE / 4u)) * 4u;
				const uint gbk = k0 + bk, gbn = n0 + bn;
				const vec4 v = (gbk < pc.K && gbn < pc.N) ? b4[(pc.b_off + gbk * pc.N + gbn) / 4u] : vec4(0.0);
				Bs[bk * AST + bn] = v.x;
				Bs[bk * AST + bn + 1u] = v.y;
				Bs[bk * AST + bn + 2u] = v.z;
				Bs[bk * AST + bn + 3u] = v.w;
			}
		} else
#endif
		{
			// 16·TILE elements of A and of B, TILE/16 each per thread,
			// walking memory contiguously (A along m when sam == 1, along
			// k otherwise)
			[[unroll]] for (int q = 0; q < TILE / 16; q++) {
				const uint idx = tid + uint(q) * 256u;
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
		[[unroll]] for (int kk = 0; kk < 16; kk++) {
			float av[R], bv[R];
			[[unroll]] for (int i = 0; i < R; i++) {
				av[i] = As[uint(kk) * AST + ly + 16u * uint(i)];
				bv[i] = Bs[uint(kk) * AST + lx + 16u * uint(i)];
			}
			[[unroll]] for (int i = 0; i < R; i++) {
				[[unroll]] for (int j = 0; j < R; j++)
					r[i][j] += av[i] * bv[j];
				bias[i] += av[i];
			}
		}
		barrier();
	}
	if ((pc.flags & VKG_FLAG_SUMS_OUT) != 0u) { // a later piece resumes from e, not C and d
		save_row(m0 + ly, n0, lx, r[0], bias[0], want_c, want_d);
		save_row(m0 + ly + 16u, n0, lx, r[1], bias[1], want_c, want_d);
		save_row(m0 + ly + 32u, n0, lx, r[2], bias[2], want_c, want_d);
		save_row(m0 + ly + 48u, n0, lx, r[3], bias[3], want_c, want_d);
		return;
	}
	// Row by row with constant indices (spirv-opt leaves a loop over the
	// rows rolled, and r indexed by a loop counter would live in local
	// memory).
	store_row(m0 + ly, n0, lx, r[0], bias[0], want_c, want_d, acc);
	store_row(m0 + ly + 16u, n0, lx, r[1], bias[1], want_c, want_d, acc);
	store_row(m0 + ly + 32u, n0, lx, r[2], bias[2], want_c, want_d, acc);
	store_row(m0 + ly + 48u, n0, lx, r[3], bias[3], want_c, want_d, acc);
}
