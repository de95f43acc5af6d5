// shaders/tiled128_tuned.glsl — linear_tiled128_gemm's tunable f32 path,
// included by shaders/tiled128_gemm.glsl for the f32 builds of
// linear_tiled128_gemm and linear_splitk128_gemm (f32 partials: C and d are
// f32 there too). It runs where the pipeline is specialised with T_ON = 1
// (daemon/pipelines.c, from
// VKGRAD_T128_TILE); otherwise the fixed 128×128 kernel of that file runs.
//
// C[m, n] (+)= Σ_k A(m, k) · B[k, n]: a T_BM × T_BN tile of C per workgroup
// of (T_BM / T_TM) · (T_BN / T_TN) threads, T_TM × T_TN outputs per thread,
// the reduction walked T_BK at a time through double-buffered shared-memory
// tiles with one barrier per step. A thread's rows are T_TM / 4 groups of
// four, (g · T_TY + ty) · 4 + {0..3}, its columns likewise with tx: each k
// is T_TM / 4 + T_TN / 4 vector (16-byte) shared loads for T_TM · T_TN
// multiply-adds. What it changes against the fixed kernel, to cut the
// registers it holds across the loop (161 there, one workgroup per SM):
//  - the next tile's global loads in T_SPLIT phases of the step (each phase
//    loads its share into registers, multiplies its k's, then stores them
//    to the other buffer), so only 1 / T_SPLIT of them are in flight;
//  - the fused bias from shared memory (thread r < T_BM sums row r of A's
//    tile after each phase's multiplies), one accumulator instead of eight;
//  - optionally a warp of T_WX × (32 / T_WX) threads (T_WX = 0: rows of
//    T_TX threads), for fewer distinct shared addresses per load;
//  - T_PAD vec4 of padding per shared row (spreads dX's transposed stores);
//  - vector stores of C where its row stride and offset allow.
// The accumulators and the a / b fragments are plain variables, not arrays:
// rI_J for row I (0 .. 15), column group J (0 .. 3), aG, bJ, each used under
// a specialisation-constant test (T_TM > I, T_GN > J: constants once the
// pipeline is made, the untaken code and its variables dropped). Arrays
// indexed by [[unroll]] loop counters were what this file had: on the H200
// every 8×8 tiling put its 16 vec4 of accumulators in local memory ("Local
// Memory Size" 256 bytes more than the 8×4 ones) and ran ~12× slower, as
// the fixed kernel's comment on its own accumulators says of arrays.

layout(constant_id = 5) const uint T_BM = 128;
layout(constant_id = 6) const uint T_BN = 128;
layout(constant_id = 7) const uint T_TM = 8;
layout(constant_id = 8) const uint T_TN = 8;
layout(constant_id = 9) const uint T_BK = 16;
layout(constant_id = 10) const uint T_SPLIT = 1;
layout(constant_id = 11) const uint T_PAD = 0;
layout(constant_id = 12) const uint T_WX = 0;

const uint T_TX = T_BN / T_TN; // threads along n
const uint T_TY = T_BM / T_TM; // threads along m
const uint T_NT = T_TX * T_TY;
const uint T_GM = T_TM / 4u; // row groups of four per thread
const uint T_GN = T_TN / 4u;
const uint T_AR = T_BM / 4u + T_PAD; // row stride of As / Bs, in vec4
const uint T_BR = T_BN / 4u + T_PAD;
const uint T_LA = T_BM * T_BK / (4u * T_NT); // vec4 of A, of B each thread loads per tile
const uint T_LB = T_BN * T_BK / (4u * T_NT);
const uint T_LP = (T_LA + T_LB) / T_SPLIT; // per phase
const uint T_KP = T_BK / T_SPLIT;

layout(std430, set = 0, binding = 2) buffer BufC4 { vec4 c4[]; };

// Load slot s (0 .. T_LA + T_LB - 1) of the tile at k0: slots below T_LA
// are A's vec4 number tid + s · T_NT, the others B's. Where it goes in the
// tile: (k, m) of A or (k, n) of B.
void t_slot(uint s, uint tid, out uint k, out uint mn)
{
	if (s < T_LA) {
		const uint idx = tid + s * T_NT;
		if (pc.sam == 1u) {
			k = idx / (T_BM / 4u);
			mn = (idx % (T_BM / 4u)) * 4u;
		} else {
			mn = idx / (T_BK / 4u);
			k = (idx % (T_BK / 4u)) * 4u;
		}
	} else {
		const uint idx = tid + (s - T_LA) * T_NT;
		k = idx / (T_BN / 4u);
		mn = (idx % (T_BN / 4u)) * 4u;
	}
}

vec4 t_load(uint s, uint tid, uint k0, uint m0, uint n0, bool vec)
{
	uint k, mn;
	t_slot(s, tid, k, mn);
	return s < T_LA ? load_a(m0 + mn, k0 + k, vec) : load_b(k0 + k, n0 + mn, vec);
}

// Into the shared tiles at As[abase..], Bs[bbase..].
void t_store(uint s, uint tid, uint abase, uint bbase, vec4 v)
{
	uint k, mn;
	t_slot(s, tid, k, mn);
	if (s >= T_LA) {
		Bs[bbase + k * T_BR + mn / 4u] = v;
	} else if (pc.sam == 1u) {
		As[abase + k * T_AR + mn / 4u] = v;
	} else {
		As[abase + k * T_AR + mn / 4u][mn % 4u] = v.x;
		As[abase + (k + 1u) * T_AR + mn / 4u][mn % 4u] = v.y;
		As[abase + (k + 2u) * T_AR + mn / 4u][mn % 4u] = v.z;
		As[abase + (k + 3u) * T_AR + mn / 4u][mn % 4u] = v.w;
	}
}

// Columns n..n+3 of row m (m < M): one vector where vc (N and c_off
// multiples of 4, so n < N means all four are in), else one by one.
void t_store_c(uint m, uint n, vec4 v, bool acc, bool vc)
{
	if (vc) {
		if (n < pc.N) {
			const uint k = (pc.c_off + m * pc.N + n) / 4u;
			c4[k] = acc ? c4[k] + v : v;
		}
		return;
	}
	store_one(m, n, v.x, acc);
	store_one(m, n + 1u, v.y, acc);
	store_one(m, n + 2u, v.z, acc);
	store_one(m, n + 3u, v.w, acc);
}

// Row I (= 4·G + Q) of the accumulators, column group J: declared zero.
#define T_DECL_ROW(I) vec4 r##I##_0 = vec4(0.0), r##I##_1 = vec4(0.0), \
	r##I##_2 = vec4(0.0), r##I##_3 = vec4(0.0);
// Row I += s · b0..b3, the column groups that exist.
#define T_FMA_ROW(I, s) if (T_TM > uint(I)) { \
	r##I##_0 += (s) * b0; \
	if (T_GN > 1u) r##I##_1 += (s) * b1; \
	if (T_GN > 2u) r##I##_2 += (s) * b2; \
	if (T_GN > 3u) r##I##_3 += (s) * b3; }
// Row I = 4·G + Q of C, the column groups that exist.
#define T_STORE_ROW(I, G, Q) if (T_TM > uint(I)) { \
	const uint m = m0 + (uint(G) * T_TY + ty) * 4u + uint(Q); \
	if (m < pc.M) { \
		t_store_c(m, n0 + tx * 4u, r##I##_0, acc, vc); \
		if (T_GN > 1u) t_store_c(m, n0 + (T_TX + tx) * 4u, r##I##_1, acc, vc); \
		if (T_GN > 2u) t_store_c(m, n0 + (2u * T_TX + tx) * 4u, r##I##_2, acc, vc); \
		if (T_GN > 3u) t_store_c(m, n0 + (3u * T_TX + tx) * 4u, r##I##_3, acc, vc); \
	} }
// Fragment G of A (rows 4·G .. 4·G + 3), J of B, at step k, where they exist.
#define T_LOAD_A(G) if (T_GM > uint(G)) a##G = As[abase + k * T_AR + uint(G) * T_TY + ty];
#define T_LOAD_B(J) if (T_GN > uint(J)) b##J = Bs[bbase + k * T_BR + uint(J) * T_TX + tx];

void tuned_main()
{
	const uint tid = gl_LocalInvocationIndex;
	uint tx = tid % T_TX, ty = tid / T_TX;
	if (T_WX != 0u) {
		const uint lane = tid % 32u, w = tid / 32u, wpr = T_TX / T_WX;
		tx = (w % wpr) * T_WX + lane % T_WX;
		ty = (w / wpr) * (32u / T_WX) + lane / T_WX;
	}
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * T_BM;
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * T_BN;
	const bool want_c = (pc.flags & VKG_FLAG_WRITE_C) != 0u;
	const bool want_d = (pc.flags & VKG_FLAG_WRITE_D) != 0u && n0 == 0u;
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	const bool vec = (pc.flags & VKG_FLAG_VEC_LOADS) != 0u;
	const bool sum_d = want_d && tid < T_BM; // this thread sums row tid of A

	// TM ≤ 16, TN ≤ 16 (daemon/t128_tile.c): rows 0 .. 15, groups 0 .. 3
	T_DECL_ROW(0) T_DECL_ROW(1) T_DECL_ROW(2) T_DECL_ROW(3)
	T_DECL_ROW(4) T_DECL_ROW(5) T_DECL_ROW(6) T_DECL_ROW(7)
	T_DECL_ROW(8) T_DECL_ROW(9) T_DECL_ROW(10) T_DECL_ROW(11)
	T_DECL_ROW(12) T_DECL_ROW(13) T_DECL_ROW(14) T_DECL_ROW(15)
	float bias = 0.0;

	// the first tile into buffer 0
	[[unroll]] for (uint s = 0u; s < T_LA + T_LB; s++)
		t_store(s, tid, 0u, 0u, t_load(s, tid, 0u, m0, n0, vec));
	barrier();

	vec4 pre[T_LP];
	uint buf = 0u;
	for (uint k0 = 0u; k0 < pc.K; k0 += T_BK) {
		const uint abase = buf * (T_BK * T_AR), bbase = buf * (T_BK * T_BR);
		const uint anext = (buf ^ 1u) * (T_BK * T_AR), bnext = (buf ^ 1u) * (T_BK * T_BR);
		const bool more = k0 + T_BK < pc.K;
		[[unroll]] for (uint p = 0u; p < T_SPLIT; p++) {
			// this phase's share of the next tile flies while its k's are multiplied
			if (more) {
				[[unroll]] for (uint l = 0u; l < T_LP; l++)
					pre[l] = t_load(p * T_LP + l, tid, k0 + T_BK, m0, n0, vec);
			}
			[[unroll]] for (uint kk = 0u; kk < T_KP; kk++) {
				const uint k = p * T_KP + kk;
				vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);
				vec4 b0 = vec4(0.0), b1 = vec4(0.0), b2 = vec4(0.0), b3 = vec4(0.0);
				T_LOAD_A(0) T_LOAD_A(1) T_LOAD_A(2) T_LOAD_A(3)
				T_LOAD_B(0) T_LOAD_B(1) T_LOAD_B(2) T_LOAD_B(3)
				T_FMA_ROW(0, a0.x) T_FMA_ROW(1, a0.y) T_FMA_ROW(2, a0.z) T_FMA_ROW(3, a0.w)
				T_FMA_ROW(4, a1.x) T_FMA_ROW(5, a1.y) T_FMA_ROW(6, a1.z) T_FMA_ROW(7, a1.w)
				T_FMA_ROW(8, a2.x) T_FMA_ROW(9, a2.y) T_FMA_ROW(10, a2.z) T_FMA_ROW(11, a2.w)
				T_FMA_ROW(12, a3.x) T_FMA_ROW(13, a3.y) T_FMA_ROW(14, a3.z) T_FMA_ROW(15, a3.w)
			}
			// the bias after the phase's multiplies (one branch per phase,
			// none among them), k in order as the fixed kernel sums
			if (sum_d) {
				[[unroll]] for (uint kk = 0u; kk < T_KP; kk++)
					bias += As[abase + (p * T_KP + kk) * T_AR + tid / 4u][tid % 4u];
			}
			// the other buffer: its last readers finished before the
			// barrier that began this step
			if (more) {
				[[unroll]] for (uint l = 0u; l < T_LP; l++)
					t_store(p * T_LP + l, tid, anext, bnext, pre[l]);
			}
		}
		barrier();
		buf ^= 1u;
	}

	const bool vc = pc.N % 4u == 0u && pc.c_off % 4u == 0u;
	if (want_c) {
		T_STORE_ROW(0, 0, 0) T_STORE_ROW(1, 0, 1) T_STORE_ROW(2, 0, 2) T_STORE_ROW(3, 0, 3)
		T_STORE_ROW(4, 1, 0) T_STORE_ROW(5, 1, 1) T_STORE_ROW(6, 1, 2) T_STORE_ROW(7, 1, 3)
		T_STORE_ROW(8, 2, 0) T_STORE_ROW(9, 2, 1) T_STORE_ROW(10, 2, 2) T_STORE_ROW(11, 2, 3)
		T_STORE_ROW(12, 3, 0) T_STORE_ROW(13, 3, 1) T_STORE_ROW(14, 3, 2) T_STORE_ROW(15, 3, 3)
	}
	if (sum_d && m0 + tid < pc.M) {
		const uint k = pc.d_off + m0 + tid;
		d[k] = CSTORE(acc ? CLOAD(d[k]) + bias : bias);
	}
}
