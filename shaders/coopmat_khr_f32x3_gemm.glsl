// shaders/coopmat_khr_f32x3_gemm.glsl — the body of
// linear_coopmat_khr_f32x3_gemm (f32 on the bf16 tensor cores, three
// products per k step, C written as f32) and of
// linear_coopmat_khr_f32x3_splitk_gemm (VKG_PARTIAL: one workgroup per row
// tile and slice of the reduction, writing the slice's f32 partial sums for
// linear_narrow_reduce). The including .comp enables the extensions, sets
// ETYPE (bfloat16_t) and says what the kernel is; the split, tiling, loads,
// multiply and epilogue are here, described in
// linear_coopmat_khr_f32x3_gemm.comp. Without VKG_PARTIAL the code is
// linear_coopmat_khr_f32x3_gemm's as it was (the same SPIR-V).
layout(constant_id = 0) const uint CM_M = 16;
layout(constant_id = 1) const uint CM_N = 16;
layout(constant_id = 2) const uint CM_K = 16;
layout(constant_id = 3) const uint A_KMAJOR = 1;
layout(constant_id = 4) const uint WARPS_M = 2;
layout(constant_id = 5) const uint WARPS_N = 2;
layout(constant_id = 6) const uint WM = 64; // C rows per subgroup
layout(constant_id = 7) const uint WN = 64; // C columns per subgroup
// the workgroup is WARPS_M·WARPS_N·32 threads (set by the daemon)
layout(local_size_x_id = 8) in;
layout(constant_id = 9) const uint BK = 16;    // reduction step
layout(constant_id = 10) const uint DEPTH = 1; // slices in flight from memory (1 or 2)

const uint NT = WARPS_M * WARPS_N * 32u;
const uint BM = WARPS_M * WM;
const uint BN = WARPS_N * WN;
const uint TM = WM / CM_M;
const uint TN = WN / CM_N;
// shared tiles in uvec4 (8 bf16), as linear_coopmat_khr_gemm's; each stage
// is the hi pieces of A and B, then (PIECE further) their lo pieces
const uint ASTR_KM = (BM + 8u) / 8u;
const uint ASTR_MK = (BK + 8u) / 8u;
const uint BSTR = (BN + 8u) / 8u;
const uint A_STAGE = A_KMAJOR != 0u ? BK * ASTR_KM : BM * ASTR_MK;
const uint B_STAGE = BK * BSTR;
const uint PIECE = A_STAGE + B_STAGE;
const uint STAGE = 2u * PIECE;
// vectors of 8 elements of A and B each thread loads per slice
const uint LA = BM * BK / 8u / NT;
const uint LB = BN * BK / 8u / NT;
const uint ESTR = WN / 4u + 1u;
const uint EPI = WARPS_M * WARPS_N * CM_M * ESTR;
const uint SH = 2u * STAGE > EPI ? 2u * STAGE : EPI;

layout(std430, set = 0, binding = 0) readonly buffer BufA { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { float b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { float c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { float d[]; };
// the same A, B and C four elements (16 bytes) at a time
layout(std430, set = 0, binding = 0) readonly buffer BufA4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) buffer BufC4 { vec4 c4[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
#include "coopmat_khr_partial.glsl"

shared uvec4 sh[SH];

// ---- the split ----------------------------------------------------------------
// bf16 bits of f (round to nearest even; a finite f that would round past
// the largest bf16 is truncated instead, so hi stays finite and lo carries
// the rest; NaN stays NaN, inf stays inf)
uint bf16_rne(float f)
{
	uint u = floatBitsToUint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (u >> 16) | 0x40u;
	const uint r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	if ((r & 0x7fffu) == 0x7f80u && (u & 0x7fffffffu) != 0x7f800000u)
		return u >> 16;
	return r;
}

// x = hi + lo: the two pieces' bf16 bits
uvec2 split1(float x)
{
	const uint h = bf16_rne(x);
	const float rest = x - uintBitsToFloat(h << 16); // exact
	return uvec2(h, isinf(x) ? 0u : bf16_rne(rest));
}

// eight f32 (two vec4) as the packed hi and lo pieces
void split8(vec4 p, vec4 q, out uvec4 hi, out uvec4 lo)
{
	const float v[8] = float[8](p.x, p.y, p.z, p.w, q.x, q.y, q.z, q.w);
	uint h[8], l[8];
	[[unroll]] for (uint e = 0u; e < 8u; e++) {
		const uvec2 s = split1(v[e]);
		h[e] = s.x;
		l[e] = s.y;
	}
	hi = uvec4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
	lo = uvec4(l[0] | (l[1] << 16), l[2] | (l[3] << 16), l[4] | (l[5] << 16), l[6] | (l[7] << 16));
}

// ---- global loads -----------------------------------------------------------
// Eight elements of A from (gm, gk) into p (first four) and q: along m when
// A_KMAJOR, else along k; zero outside the tensor.
void load_a8(uint gm, uint gk, bool vec, out vec4 p, out vec4 q)
{
	if (vec) {
		const uint at = A_KMAJOR != 0u ? CMK_A_OFF + gm + gk * pc.sak : CMK_A_OFF + gm * pc.sam + gk;
		const bool in_t = gm < pc.M && gk < CMK_PK;
		p = in_t ? a4[at / 4u] : vec4(0.0);
		q = in_t ? a4[at / 4u + 1u] : vec4(0.0);
		return;
	}
	float h[8];
	[[unroll]] for (uint e = 0u; e < 8u; e++) {
		const uint m = A_KMAJOR != 0u ? gm + e : gm, k = A_KMAJOR != 0u ? gk : gk + e;
		h[e] = (m < pc.M && k < CMK_PK) ? a[CMK_A_OFF + m * pc.sam + k * pc.sak] : 0.0;
	}
	p = vec4(h[0], h[1], h[2], h[3]);
	q = vec4(h[4], h[5], h[6], h[7]);
}

// B[gk, gn..gn+7], zero outside the tensor.
void load_b8(uint gk, uint gn, bool vec, out vec4 p, out vec4 q)
{
	if (vec) {
		const uint at = CMK_B_OFF + gk * pc.N + gn;
		const bool in_t = gk < CMK_PK && gn < pc.N;
		p = in_t ? b4[at / 4u] : vec4(0.0);
		q = in_t ? b4[at / 4u + 1u] : vec4(0.0);
		return;
	}
	float h[8];
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		h[e] = (gk < CMK_PK && gn + e < pc.N) ? b[CMK_B_OFF + gk * pc.N + gn + e] : 0.0;
	p = vec4(h[0], h[1], h[2], h[3]);
	q = vec4(h[4], h[5], h[6], h[7]);
}

#include "coopmat_khr_slots.glsl"

// ---- the epilogue -------------------------------------------------------------
void store_c8(uint gm, uint gn, vec4 lo, vec4 hi, bool accum, bool cvec)
{
	if (gm >= pc.M || gn >= pc.N)
		return;
	const uint at = CMK_C_OFF + gm * pc.N + gn;
	if (cvec) {
		if (accum) {
			lo += c4[at / 4u];
			hi += c4[at / 4u + 1u];
		}
		c4[at / 4u] = lo;
		c4[at / 4u + 1u] = hi;
		return;
	}
	const float v[8] = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		if (gn + e < pc.N)
			c[at + e] = accum ? c[at + e] + v[e] : v[e];
}

void store_bias(float part[8], uint m0, bool accum)
{
	const uint tid = gl_LocalInvocationID.x;
	barrier();
	[[unroll]] for (uint e = 0u; e < 8u; e += 4u)
		sh[tid * 2u + e / 4u] = floatBitsToUint(vec4(part[e], part[e + 1u], part[e + 2u], part[e + 3u]));
	barrier();
	if (tid < BM && m0 + tid < pc.M) {
		const uint grp = tid / 8u, e = tid % 8u;
		float s = 0.0;
		for (uint i = grp; i < NT; i += BM / 8u)
			s += uintBitsToFloat(sh[i * 2u + e / 4u][e % 4u]);
		const uint k = CMK_D_OFF + m0 + tid;
		d[k] = accum ? d[k] + s : s;
	}
}

// This thread's share of the next slices (two vec4 per vector of 8), and
// its partial row sums of A (db, in f32 from the unsplit values).
vec4 ra0[2u * LA], rb0[2u * LB], ra1[2u * LA], rb1[2u * LB];
float part[8];

#define LOAD_SLICE(RA, RB, K0)                                                   \
	{                                                                          \
		[[unroll]] for (uint q = 0u; q < LA; q++) {                        \
			uint m, k, at;                                             \
			a_slot(q, m, k, at);                                       \
			load_a8(m0 + m, (K0) + k, vec, RA[2u * q], RA[2u * q + 1u]); \
		}                                                                  \
		[[unroll]] for (uint q = 0u; q < LB; q++) {                        \
			uint k, n, at;                                             \
			b_slot(q, k, n, at);                                       \
			load_b8((K0) + k, n0 + n, vec, RB[2u * q], RB[2u * q + 1u]); \
		}                                                                  \
	}
#define STORE_SLICE(RA, RB, BASE)                                                \
	{                                                                          \
		[[unroll]] for (uint q = 0u; q < LA; q++) {                        \
			uint m, k, at;                                             \
			a_slot(q, m, k, at);                                       \
			uvec4 hi, lo;                                              \
			split8(RA[2u * q], RA[2u * q + 1u], hi, lo);               \
			sh[(BASE) + at] = hi;                                      \
			sh[(BASE) + PIECE + at] = lo;                              \
			if (want_d)                                                \
				add_rows(RA[2u * q], RA[2u * q + 1u]);             \
		}                                                                  \
		[[unroll]] for (uint q = 0u; q < LB; q++) {                        \
			uint k, n, at;                                             \
			b_slot(q, k, n, at);                                       \
			uvec4 hi, lo;                                              \
			split8(RB[2u * q], RB[2u * q + 1u], hi, lo);               \
			sh[(BASE) + at] = hi;                                      \
			sh[(BASE) + PIECE + at] = lo;                              \
		}                                                                  \
	}

void add_rows(vec4 p, vec4 q)
{
	[[unroll]] for (uint w = 0u; w < 4u; w++) {
		part[w] += p[w];
		part[4u + w] += q[w];
	}
}

coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> acc[TM * TN];

// Every subgroup's accumulators += its rows of stage `base`'s A slice times
// its columns of the B slice, three products per pair of matrices: the B
// pieces of the step held, the A pieces one row of matrices at a time.
void multiply(uint base, uint wm, uint wn)
{
	[[unroll]] for (uint kk = 0u; kk < BK; kk += CM_K) {
		coopmat<ETYPE, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> bh[TN], bl[TN];
		[[unroll]] for (uint j = 0u; j < TN; j++) {
			const uint o = base + A_STAGE + kk * BSTR + (wn + j * CM_N) / 8u;
			coopMatLoad(bh[j], sh, o, BSTR, gl_CooperativeMatrixLayoutRowMajor);
			coopMatLoad(bl[j], sh, o + PIECE, BSTR, gl_CooperativeMatrixLayoutRowMajor);
		}
		[[unroll]] for (uint i = 0u; i < TM; i++) {
			coopmat<ETYPE, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> ah, al;
			if (A_KMAJOR != 0u) {
				const uint o = base + kk * ASTR_KM + (wm + i * CM_M) / 8u;
				coopMatLoad(ah, sh, o, ASTR_KM, gl_CooperativeMatrixLayoutColumnMajor);
				coopMatLoad(al, sh, o + PIECE, ASTR_KM, gl_CooperativeMatrixLayoutColumnMajor);
			} else {
				const uint o = base + (wm + i * CM_M) * ASTR_MK + kk / 8u;
				coopMatLoad(ah, sh, o, ASTR_MK, gl_CooperativeMatrixLayoutRowMajor);
				coopMatLoad(al, sh, o + PIECE, ASTR_MK, gl_CooperativeMatrixLayoutRowMajor);
			}
			[[unroll]] for (uint j = 0u; j < TN; j++) {
				acc[i * TN + j] = coopMatMulAdd(al, bh[j], acc[i * TN + j]);
				acc[i * TN + j] = coopMatMulAdd(ah, bl[j], acc[i * TN + j]);
				acc[i * TN + j] = coopMatMulAdd(ah, bh[j], acc[i * TN + j]);
			}
		}
	}
}

#include "coopmat_khr_main.glsl"
