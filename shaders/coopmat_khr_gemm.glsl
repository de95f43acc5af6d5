// shaders/coopmat_khr_gemm.glsl — the body of linear_coopmat_khr_gemm
// (tiles of C rounded to the storage type) and of
// linear_coopmat_khr_splitk_gemm (VKG_PARTIAL: one workgroup per row tile
// and slice of the reduction, writing the slice's f32 partial sums for
// linear_narrow_reduce; with VKG_FUSED_DX too, linear_coopmat_khr_splitk_dx_gemm:
// dX beside dW, coopmat_khr_fused_dx.glsl). The including .comp enables the extensions, sets
// ETYPE and says what the kernel is; the tiling, loads, multiply and
// epilogue are here, described in linear_coopmat_khr_gemm.comp.
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
layout(constant_id = 9) const uint BK = 32;   // reduction step (16 or 32)
layout(constant_id = 10) const uint DEPTH = 1; // slices in flight from memory (1 or 2)

const uint NT = WARPS_M * WARPS_N * 32u;
const uint BM = WARPS_M * WM;
const uint BN = WARPS_N * WN;
const uint TM = WM / CM_M; // accumulators per subgroup, down
const uint TN = WN / CM_N; // and across
// shared tiles in uvec4 (8 elements): A as [k][m] (A_KMAJOR) or [m][k],
// B as [k][n], each row padded by one uvec4
const uint ASTR_KM = (BM + 8u) / 8u; // row stride of A as [k][m]
const uint ASTR_MK = (BK + 8u) / 8u; // row stride of A as [m][k]
const uint BSTR = (BN + 8u) / 8u;
const uint A_STAGE = A_KMAJOR != 0u ? BK * ASTR_KM : BM * ASTR_MK;
const uint B_STAGE = BK * BSTR;
const uint STAGE = A_STAGE + B_STAGE;
// vectors of A and B each thread loads per slice
const uint LA = BM * BK / 8u / NT;
const uint LB = BN * BK / 8u / NT;
// epilogue: per subgroup CM_M rows of WN f32, rows padded by one uvec4
const uint ESTR = WN / 4u + 1u; // uvec4 per staged row
const uint EPI = WARPS_M * WARPS_N * CM_M * ESTR;
#if defined(VKG_FUSED_DX)
// dX beside dW (linear_coopmat_khr_splitk_dx_gemm): after the two stages
// W's tile, BM rows (out) of BN columns (in) as [o][n] (rows padded by one
// uvec4, as B's), then each subgroup's staging of its dX rows (CM_M rows
// of WN f32 at a time, as the epilogue's). Each k step's BK rows of dX are
// WARPS_M × WARPS_N blocks of XROWS × WN, XTM × TN accumulators each.
const uint SH_W = 2u * STAGE;
const uint SH_X = SH_W + BM * BSTR;
const uint XROWS = BK / WARPS_M;
const uint XTM = XROWS / CM_M;
const uint SH = SH_X + EPI; // (the final epilogue's EPI fits in front)
#else
const uint SH = 2u * STAGE > EPI ? 2u * STAGE : EPI;
#endif

layout(std430, set = 0, binding = 0) readonly buffer BufA { uint16_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { uint16_t b[]; };
#if defined(VKG_PARTIAL)
// split-K: C and d are the slices' f32 partial sums in the daemon's scratch
layout(std430, set = 0, binding = 2) buffer BufC { float c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { float d[]; };
#else
layout(std430, set = 0, binding = 2) buffer BufC { uint16_t c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { uint16_t d[]; };
#endif
// the same A, B and C eight elements (16 bytes) at a time (split-K: C four
// f32 at a time)
layout(std430, set = 0, binding = 0) readonly buffer BufA8 { uvec4 a8[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB8 { uvec4 b8[]; };
#if defined(VKG_PARTIAL)
layout(std430, set = 0, binding = 2) buffer BufC4 { vec4 c4[]; };
#else
layout(std430, set = 0, binding = 2) buffer BufC8 { uvec4 c8[]; };
#endif

#if defined(VKG_FUSED_DX)
// dX beside dW: W (out × in, row-major) and dX (batch × in), 16-bit, and
// the same eight elements at a time
layout(std430, set = 0, binding = 4) readonly buffer BufW { uint16_t w[]; };
layout(std430, set = 0, binding = 5) buffer BufDX { uint16_t dx[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufW8 { uvec4 w8[]; };
layout(std430, set = 0, binding = 5) buffer BufDX8 { uvec4 dx8[]; };
#endif

// push constants, flags, bindings: shaders/iface/kernels.h
#include "coopmat_khr_partial.glsl"

shared uvec4 sh[SH];

// ---- storage type <-> f32 ---------------------------------------------------
vec2 unpack2(uint w)
{
#if defined(VKG_DTYPE_BF16)
	return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xffff0000u));
#else
	return unpackHalf2x16(w);
#endif
}

uint narrow1(float f)
{
#if defined(VKG_DTYPE_BF16)
	// round to nearest even, NaN stays NaN (as shaders/dtype.glsl)
	uint u = floatBitsToUint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (u >> 16) | 0x40u;
	u += 0x7fffu + ((u >> 16) & 1u);
	return u >> 16;
#else
	return packHalf2x16(vec2(f, 0.0)) & 0xffffu;
#endif
}

uint pack2(float x, float y)
{
	return narrow1(x) | (narrow1(y) << 16);
}

float widen1(uint h)
{
	return unpack2(h).x;
}

// ---- global loads -----------------------------------------------------------
// Eight elements of A from (gm, gk): along m when A_KMAJOR, else along k;
// zero outside the tensor.
uvec4 load_a8(uint gm, uint gk, bool vec)
{
	if (vec) {
		const uint at = A_KMAJOR != 0u ? CMK_A_OFF + gm + gk * pc.sak : CMK_A_OFF + gm * pc.sam + gk;
		return (gm < pc.M && gk < CMK_PK) ? a8[at / 8u] : uvec4(0u);
	}
	uint h[8];
	[[unroll]] for (uint e = 0u; e < 8u; e++) {
		const uint m = A_KMAJOR != 0u ? gm + e : gm, k = A_KMAJOR != 0u ? gk : gk + e;
		h[e] = (m < pc.M && k < CMK_PK) ? uint(a[CMK_A_OFF + m * pc.sam + k * pc.sak]) : 0u;
	}
	return uvec4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}

// B[gk, gn..gn+7], zero outside the tensor.
uvec4 load_b8(uint gk, uint gn, bool vec)
{
	if (vec)
		return (gk < CMK_PK && gn < pc.N) ? b8[(CMK_B_OFF + gk * pc.N + gn) / 8u] : uvec4(0u);
	uint h[8];
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		h[e] = (gk < CMK_PK && gn + e < pc.N) ? uint(b[CMK_B_OFF + gk * pc.N + gn + e]) : 0u;
	return uvec4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}

#include "coopmat_khr_slots.glsl"

// ---- the epilogue -------------------------------------------------------------
// Eight staged f32 values of C row gm from column gn: write them (accumulate:
// onto the old values). Split-K: as f32 partial sums, two vec4 where cvec
// (N and the slice's offset multiples of 8: at is then a multiple of 8),
// else one by one.
void store_c8(uint gm, uint gn, vec4 lo, vec4 hi, bool accum, bool cvec)
{
	if (gm >= pc.M || gn >= pc.N)
		return;
	const uint at = CMK_C_OFF + gm * pc.N + gn;
#if defined(VKG_PARTIAL)
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
#else
	if (cvec) {
		if (accum) {
			const uvec4 o = c8[at / 8u];
			lo += vec4(unpack2(o.x), unpack2(o.y));
			hi += vec4(unpack2(o.z), unpack2(o.w));
		}
		c8[at / 8u] = uvec4(pack2(lo.x, lo.y), pack2(lo.z, lo.w), pack2(hi.x, hi.y), pack2(hi.z, hi.w));
		return;
	}
	const float v[8] = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		if (gn + e < pc.N) {
			const float o = accum ? widen1(uint(c[at + e])) : 0.0;
			c[at + e] = uint16_t(narrow1(v[e] + o));
		}
#endif
}

// db: thread t < BM adds the partial sums of its row, written by the
// threads that loaded it (A_KMAJOR: thread i always loads columns
// (i % (BM/8))·8 .. +7 of the tile), and writes d.
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
#if defined(VKG_PARTIAL)
		d[k] = accum ? d[k] + s : s;
#else
		d[k] = uint16_t(narrow1(accum ? widen1(uint(d[k])) + s : s));
#endif
	}
}

// This thread's share of the next slices on their way from memory to
// shared memory (two sets when DEPTH = 2: slice k+2 loads while slice k+1
// waits in the other set), and its partial row sums of A (db).
uvec4 ra0[LA], rb0[LB], ra1[LA], rb1[LB];
float part[8];

// (macros, so that each register set is a plain, statically indexed array)
#define LOAD_SLICE(RA, RB, K0)                                                   \
	{                                                                          \
		[[unroll]] for (uint q = 0u; q < LA; q++) {                        \
			uint m, k, at;                                             \
			a_slot(q, m, k, at);                                       \
			RA[q] = load_a8(m0 + m, (K0) + k, vec);                    \
		}                                                                  \
		[[unroll]] for (uint q = 0u; q < LB; q++) {                        \
			uint k, n, at;                                             \
			b_slot(q, k, n, at);                                       \
			RB[q] = load_b8((K0) + k, n0 + n, vec);                    \
		}                                                                  \
	}
#define STORE_SLICE(RA, RB, BASE)                                                \
	{                                                                          \
		[[unroll]] for (uint q = 0u; q < LA; q++) {                        \
			uint m, k, at;                                             \
			a_slot(q, m, k, at);                                       \
			sh[(BASE) + at] = RA[q];                                   \
			if (want_d)                                                \
				add_rows(RA[q]);                                   \
		}                                                                  \
		[[unroll]] for (uint q = 0u; q < LB; q++) {                        \
			uint k, n, at;                                             \
			b_slot(q, k, n, at);                                       \
			sh[(BASE) + at] = RB[q];                                   \
		}                                                                  \
	}

// db: the eight elements of a vector of A (eight rows m, one k) onto the
// thread's row sums
void add_rows(uvec4 v)
{
	[[unroll]] for (uint w = 0u; w < 4u; w++) {
		const vec2 f = unpack2(v[w]);
		part[2u * w] += f.x;
		part[2u * w + 1u] += f.y;
	}
}

// Every subgroup's accumulators += its rows of stage `base`'s A slice times
// its columns of the B slice.
coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> acc[TM * TN];

void multiply(uint base, uint wm, uint wn)
{
	[[unroll]] for (uint kk = 0u; kk < BK; kk += CM_K) {
		coopmat<ETYPE, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> fa[TM];
		coopmat<ETYPE, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> fb[TN];
		[[unroll]] for (uint i = 0u; i < TM; i++) {
			if (A_KMAJOR != 0u)
				coopMatLoad(fa[i], sh, base + kk * ASTR_KM + (wm + i * CM_M) / 8u, ASTR_KM,
					    gl_CooperativeMatrixLayoutColumnMajor);
			else
				coopMatLoad(fa[i], sh, base + (wm + i * CM_M) * ASTR_MK + kk / 8u, ASTR_MK,
					    gl_CooperativeMatrixLayoutRowMajor);
		}
		[[unroll]] for (uint j = 0u; j < TN; j++)
			coopMatLoad(fb[j], sh, base + A_STAGE + kk * BSTR + (wn + j * CM_N) / 8u, BSTR,
				    gl_CooperativeMatrixLayoutRowMajor);
		[[unroll]] for (uint i = 0u; i < TM; i++)
			[[unroll]] for (uint j = 0u; j < TN; j++)
				acc[i * TN + j] = coopMatMulAdd(fa[i], fb[j], acc[i * TN + j]);
	}
}

#if defined(VKG_FUSED_DX)
#include "coopmat_khr_fused_dx.glsl"
#endif

#include "coopmat_khr_main.glsl"
