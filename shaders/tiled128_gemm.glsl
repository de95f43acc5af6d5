// shaders/tiled128_gemm.glsl — the body of the 128×128-tile GEMM (8×8
// outputs per thread, double-buffered shared memory), shared by
// linear_tiled128_gemm (writes the tensors, in their dtype) and
// linear_splitk128_gemm (VKG_PARTIAL: writes one slice's f32 partial sums
// into the daemon's scratch, as linear_splitk_gemm does for the 64 tile;
// linear_splitk_reduce adds the slices up). The f32 builds of both also
// carry the tunable path of tiled128_tuned.glsl, which the daemon turns on
// (specialisation constants, VKGRAD_T128_TILE, on by default) for both. See linear_tiled128_gemm.comp
// for why this kernel exists and how its threads share a tile.
#include "partial.glsl"

#define BM VKG_TILE_TILED128
// Reduction step: 16 for f32 (H200, 8192x4096x4096: 18.0 ms against 20.9
// with 8), 8 for f16/bf16 (their 16 needed 163 registers and ran 24.0 ms
// against 19.3). The double-buffered tiles then take 32 KiB and 16.5 KiB.
#if defined(VKG_DTYPE_F16) || defined(VKG_DTYPE_BF16)
#define BK 8
#define AV 33 // row stride of As/Bs in vec4: 132 floats, spreads the transposed stores over the banks
#else
#define BK 16
#define AV 32 // row stride of As/Bs in vec4 (no padding: 2·2·16·32·16 bytes = 32 KiB)
#define TWO_GROUPS 1
#endif

#if defined(VKG_DTYPE_F16) || defined(VKG_DTYPE_BF16)
layout(local_size_x = 16, local_size_y = 16, local_size_z = 1) in;
#else
// f32 (the tensors' kernel and the partials' alike): specialisation constants, whose defaults are this fixed kernel; the
// daemon sets them only for the tunable path (shaders/tiled128_tuned.glsl,
// VKGRAD_T128_TILE): T_ON = 1, its workgroup size and shared tiles.
#define TUNABLE 1
// (the workgroup size: constant_id 1 and 2, 16 and 16 unless specialised)
layout(constant_id = 0) const uint T_ON = 0;
layout(constant_id = 3) const uint SH_A = 2 * BK * AV; // vec4 of As
layout(constant_id = 4) const uint SH_B = 2 * BK * AV; // vec4 of Bs
layout(local_size_x = 16, local_size_y = 16, local_size_x_id = 1, local_size_y_id = 2, local_size_z = 1) in;
#endif

layout(std430, set = 0, binding = 0) readonly buffer BufA { STYPE a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { STYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { CTYPE c[]; };
layout(std430, set = 0, binding = 3) buffer BufD { CTYPE d[]; };
// the same A and B four elements at a time (flag 8: every vector the loads
// touch is aligned and wholly inside or outside its tensor)
#if defined(VKG_DTYPE_F16) || defined(VKG_DTYPE_BF16)
layout(std430, set = 0, binding = 0) readonly buffer BufA4 { uvec2 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB4 { uvec2 b4[]; };
#else
layout(std430, set = 0, binding = 0) readonly buffer BufA4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
#endif

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_GEMM(uint) } pc;

#ifdef TUNABLE
shared vec4 As[SH_A]; // [buffer][k][m / 4]
shared vec4 Bs[SH_B]; // [buffer][k][n / 4]
#else
shared vec4 As[2 * BK * AV]; // [buffer][k][m / 4]
shared vec4 Bs[2 * BK * AV]; // [buffer][k][n / 4]
#endif

#if defined(VKG_DTYPE_F16)
vec4 widen4(uvec2 v) { return vec4(unpackHalf2x16(v.x), unpackHalf2x16(v.y)); }
#elif defined(VKG_DTYPE_BF16)
vec4 widen4(uvec2 v)
{
	return uintBitsToFloat(uvec4(v.x << 16, v.x & 0xffff0000u, v.y << 16, v.y & 0xffff0000u));
}
#else
vec4 widen4(vec4 v) { return v; }
#endif

// Four consecutive elements of A: along m when sam == 1 (A(m..m+3, k)),
// else along k (A(m, k..k+3)). Zero outside the tensor.
vec4 load_a(uint gm, uint gk, bool vec)
{
	if (pc.sam == 1u) {
		if (vec)
			return (gm < pc.M && gk < pc.K) ? widen4(a4[(pc.a_off + gm + gk * pc.sak) / 4u]) : vec4(0.0);
		vec4 v;
		[[unroll]] for (int c = 0; c < 4; c++)
			v[c] = (gm + uint(c) < pc.M && gk < pc.K) ? LOAD(a[pc.a_off + gm + uint(c) + gk * pc.sak]) : 0.0;
		return v;
	}
	if (vec)
		return (gm < pc.M && gk < pc.K) ? widen4(a4[(pc.a_off + gm * pc.sam + gk) / 4u]) : vec4(0.0);
	vec4 v;
	[[unroll]] for (int c = 0; c < 4; c++)
		v[c] = (gm < pc.M && gk + uint(c) < pc.K) ? LOAD(a[pc.a_off + gm * pc.sam + gk + uint(c)]) : 0.0;
	return v;
}

// B[k, n..n+3], zero outside the tensor.
vec4 load_b(uint gk, uint gn, bool vec)
{
	if (vec)
		return (gk < pc.K && gn < pc.N) ? widen4(b4[(pc.b_off + gk * pc.N + gn) / 4u]) : vec4(0.0);
	vec4 v;
	[[unroll]] for (int c = 0; c < 4; c++)
		v[c] = (gk < pc.K && gn + uint(c) < pc.N) ? LOAD(b[pc.b_off + gk * pc.N + gn + uint(c)]) : 0.0;
	return v;
}

// Row m of the thread's outputs: columns n0 + lx·4 + {0..3} from lo,
// n0 + 64 + lx·4 + {0..3} from hi; the bias of row m by the lx == 0 threads.
void store_one(uint m, uint n, float v, bool acc)
{
	if (n < pc.N) {
		const uint k = pc.c_off + m * pc.N + n;
		c[k] = CSTORE(acc ? CLOAD(c[k]) + v : v);
	}
}

void store_row(uint m, vec4 lo, vec4 hi, float bias, bool want_c, bool want_d, bool acc, uint n0, uint lx)
{
	if (m >= pc.M)
		return;
	if (want_c) {
		const uint nl = n0 + lx * 4u, nh = n0 + 64u + lx * 4u;
		store_one(m, nl, lo.x, acc);
		store_one(m, nl + 1u, lo.y, acc);
		store_one(m, nl + 2u, lo.z, acc);
		store_one(m, nl + 3u, lo.w, acc);
		store_one(m, nh, hi.x, acc);
		store_one(m, nh + 1u, hi.y, acc);
		store_one(m, nh + 2u, hi.z, acc);
		store_one(m, nh + 3u, hi.w, acc);
	}
	if (want_d && lx == 0u) {
		const uint k = pc.d_off + m;
		d[k] = CSTORE(acc ? CLOAD(d[k]) + bias : bias);
	}
}

// Four elements of A into shared buffer `base`: at row k, columns m..m+3
// when they run along m (sam == 1), else rows k..k+3 of column m.
void put_a(uint base, uint k, uint m, vec4 v)
{
	if (pc.sam == 1u) {
		As[base + k * AV + m / 4u] = v;
	} else {
		As[base + k * AV + m / 4u][m % 4u] = v.x;
		As[base + (k + 1u) * AV + m / 4u][m % 4u] = v.y;
		As[base + (k + 2u) * AV + m / 4u][m % 4u] = v.z;
		As[base + (k + 3u) * AV + m / 4u][m % 4u] = v.w;
	}
}

#ifdef TUNABLE
#include "tiled128_tuned.glsl"
#define FIXED_MAIN fixed_main
#else
#define FIXED_MAIN main
#endif

void FIXED_MAIN()
{
	const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
	const uint tid = ly * 16u + lx;
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * BM;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * BM;
	const bool want_c = (pc.flags & VKG_FLAG_WRITE_C) != 0u;
	const bool want_d = (pc.flags & VKG_FLAG_WRITE_D) != 0u && n0 == 0u;
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	const bool vec = (pc.flags & VKG_FLAG_VEC_LOADS) != 0u;

	// what this thread loads of each tile: groups of four elements of A
	// and of B, for idx = tid (and tid + 256 when BK is 16): A along m: row
	// k = idx / 32, m = 4·(idx % 32); along k: m = idx / (BK / 4), k =
	// 4·(idx % (BK / 4)); B: row k = idx / 32, n = 4·(idx % 32)
	const uint a_k = pc.sam == 1u ? tid / 32u : (tid % (BK / 4u)) * 4u;
	const uint a_m = pc.sam == 1u ? (tid % 32u) * 4u : tid / (BK / 4u);
	const uint b_k = tid / 32u, b_n = (tid % 32u) * 4u;
#ifdef TWO_GROUPS
	const uint t2 = tid + 256u;
	const uint a_k2 = pc.sam == 1u ? t2 / 32u : (t2 % (BK / 4u)) * 4u;
	const uint a_m2 = pc.sam == 1u ? (t2 % 32u) * 4u : t2 / (BK / 4u);
	const uint b_k2 = t2 / 32u, b_n2 = (t2 % 32u) * 4u;
#endif

	// accumulators: rows ly·4 + {0..3} (r0x) and 64 + ly·4 + {0..3} (r1x),
	// columns lx·4 + {0..3} (..L) and 64 + lx·4 + {0..3} (..H). Plain
	// variables, not an array: an array indexed by a loop counter that the
	// compiler leaves rolled goes to local memory, and every multiply-add
	// with it (measured: 10x slower on the H200).
	vec4 r00L = vec4(0.0), r00H = vec4(0.0), r01L = vec4(0.0), r01H = vec4(0.0);
	vec4 r02L = vec4(0.0), r02H = vec4(0.0), r03L = vec4(0.0), r03H = vec4(0.0);
	vec4 r10L = vec4(0.0), r10H = vec4(0.0), r11L = vec4(0.0), r11H = vec4(0.0);
	vec4 r12L = vec4(0.0), r12H = vec4(0.0), r13L = vec4(0.0), r13H = vec4(0.0);
	vec4 bias0 = vec4(0.0), bias1 = vec4(0.0);

	vec4 va = load_a(m0 + a_m, a_k, vec);
	vec4 vb = load_b(b_k, n0 + b_n, vec);
#ifdef TWO_GROUPS
	vec4 va2 = load_a(m0 + a_m2, a_k2, vec);
	vec4 vb2 = load_b(b_k2, n0 + b_n2, vec);
#endif
	uint buf = 0u;
	for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
		// the tile in registers goes to shared buffer `buf`
		const uint base = buf * (BK * AV);
		put_a(base, a_k, a_m, va);
		Bs[base + b_k * AV + b_n / 4u] = vb;
#ifdef TWO_GROUPS
		put_a(base, a_k2, a_m2, va2);
		Bs[base + b_k2 * AV + b_n2 / 4u] = vb2;
#endif
		barrier();
		// the next tile's loads fly while this one is multiplied
		if (k0 + BK < pc.K) {
			va = load_a(m0 + a_m, k0 + BK + a_k, vec);
			vb = load_b(k0 + BK + b_k, n0 + b_n, vec);
#ifdef TWO_GROUPS
			va2 = load_a(m0 + a_m2, k0 + BK + a_k2, vec);
			vb2 = load_b(k0 + BK + b_k2, n0 + b_n2, vec);
#endif
		}
		[[unroll]] for (int k = 0; k < BK; k++) {
			const uint row = base + uint(k) * AV;
			const vec4 a0 = As[row + ly], a1 = As[row + 16u + ly];
			const vec4 bL = Bs[row + lx], bH = Bs[row + 16u + lx];
			r00L += a0.x * bL; r00H += a0.x * bH;
			r01L += a0.y * bL; r01H += a0.y * bH;
			r02L += a0.z * bL; r02H += a0.z * bH;
			r03L += a0.w * bL; r03H += a0.w * bH;
			r10L += a1.x * bL; r10H += a1.x * bH;
			r11L += a1.y * bL; r11H += a1.y * bH;
			r12L += a1.z * bL; r12H += a1.z * bH;
			r13L += a1.w * bL; r13H += a1.w * bH;
			if (want_d) {
				bias0 += a0;
				bias1 += a1;
			}
		}
		// the other buffer next: its last readers finished before the
		// barrier above
		buf ^= 1u;
	}
	const uint mA = m0 + ly * 4u, mB = m0 + 64u + ly * 4u;
	store_row(mA, r00L, r00H, bias0.x, want_c, want_d, acc, n0, lx);
	store_row(mA + 1u, r01L, r01H, bias0.y, want_c, want_d, acc, n0, lx);
	store_row(mA + 2u, r02L, r02H, bias0.z, want_c, want_d, acc, n0, lx);
	store_row(mA + 3u, r03L, r03H, bias0.w, want_c, want_d, acc, n0, lx);
	store_row(mB, r10L, r10H, bias1.x, want_c, want_d, acc, n0, lx);
	store_row(mB + 1u, r11L, r11H, bias1.y, want_c, want_d, acc, n0, lx);
	store_row(mB + 2u, r12L, r12H, bias1.z, want_c, want_d, acc, n0, lx);
	store_row(mB + 3u, r13L, r13H, bias1.w, want_c, want_d, acc, n0, lx);
}

#ifdef TUNABLE
void main()
{
	if (T_ON != 0u)
		tuned_main();
	else
		fixed_main();
}
#endif
