#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_narrow_input domain=linear_backward variant=narrow dtype=f32,f16,bf16 status=experimental
//
// The narrow family's dX = dY·W (shaders/iface/kernels.h): a workgroup
// owns a column tile of up to 64 input features and `tiles` consecutive
// row tiles. Its threads are 8×8 micro-tiles of dX (64 FMAs per four
// shared vec4 loads), P columns of them (the least power of two covering
// min(n_in, 64) / 8: 8 for a 64-wide layer, 1 for up to 8 features; the
// same P in every column tile, so the tile rows agree with the dispatch,
// kshape_narrow_dx_tile_rows) and 256/P rows, so a tile is 2048/P rows and
// no thread idles. A thread's 8 columns are consecutive in dX (two quads,
// 2c and 2c+1) but sit P quads apart in shared memory (slots c and c+P),
// and its 8 rows are two row quads 256/P apart: consecutive threads read
// consecutive vec4s (no bank conflicts). Columns past the layer's are
// computed from whatever shared memory holds there and never stored.
//
// out is walked in chunks of KC = 2·P: the row tile's dY chunk (TR × KC,
// transposed: 4096 elements) through shared memory, 16 bytes per thread
// per load where aligned, the next chunk's loads issued before the
// current one is multiplied (across row tiles too). W stays in shared
// memory for the whole workgroup where this dispatch's out fits
// (k_len·8·P <= 4096 elements: k_len <= 64 for a 64-wide layer); else its
// chunk of KC rows comes with each dY chunk. A dispatch sums k_len
// positions of out (a longer out is cut into dispatches by the loop bound,
// the later ones accumulating). Each output is one f32 sum in the order of
// out, rounded once, and stored 16 bytes at a time where its row's 8 (f32:
// 4) elements are whole and aligned, element by element elsewhere; with
// VKG_FLAG_ACCUMULATE the old value is added in f32 first.

#include "dtype.glsl"
#define NARROW_EPT 16u
#include "narrow.glsl"

layout(local_size_x = VKG_NARROW_THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufDY { STYPE dy[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STYPE w[]; };
layout(std430, set = 0, binding = 0) readonly buffer BufDYV { VTYPE dyv4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufWV { VTYPE wv4[]; };
layout(std430, set = 0, binding = 2) buffer BufDX { STYPE dx[]; };
layout(std430, set = 0, binding = 2) buffer BufDXV { VTYPE dxv[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_NARROW_DX(uint) } pc;

shared vec4 ys4[1024]; // dY's chunk transposed: [k][row / 4], TR rows × KC (4096 elements)
shared vec4 ws4[1024]; // W: [k][slot], 2·P slots of a quad per k (all of k_len, or a chunk of KC)

uint P;   // micro-tile columns (a power of two, 1-8)
uint trq; // row quads per tile (TR / 4)

// W's column quad q (of the tile) lives in slot q / 2 (q even) or P + q / 2
// (q odd): thread c's quads 2c and 2c+1 are slots c and c + P.
uint wslot(uint c)
{
	const uint q = c >> 2;
	return (q & 1u) * P + (q >> 1);
}

void put_y(uint r, uint c, float f)
{
	ys4[c * trq + (r >> 2)][r & 3u] = f;
}

void put_w(uint r, uint c, float f)
{
	ws4[r * 2u * P + wslot(c)][c & 3u] = f;
}

void put_w4(uint r, uint c, vec4 f)
{
	ws4[r * 2u * P + wslot(c)] = f;
}

#if defined(VKG_DTYPE_F16)
uint pack2(float a, float b)
{
	return packHalf2x16(vec2(a, b));
}
#elif defined(VKG_DTYPE_BF16)
uint pack2(float a, float b)
{
	return bf16_bits(a) | (bf16_bits(b) << 16);
}
#endif

// Element j of dX, column i (of the layer), += or = v where i is the layer's.
void store1(uint j, uint i, float v, bool acc)
{
	if (i < pc.n_in)
		dx[j] = STORE(acc ? LOAD(dx[j]) + v : v);
}

// One row's 8 columns i.. (elements j..): v0 the first four, v1 the rest.
void store_row(uint j, uint i, vec4 v0, vec4 v1, bool acc)
{
#if defined(VKG_DTYPE_F16) || defined(VKG_DTYPE_BF16)
	if (j % 8u == 0u && i + 8u <= pc.n_in) {
		const uint u = j / 8u;
		if (acc) {
			const uvec4 o = dxv[u];
			v0 += vec4(vlane(o, 0u), vlane(o, 1u), vlane(o, 2u), vlane(o, 3u));
			v1 += vec4(vlane(o, 4u), vlane(o, 5u), vlane(o, 6u), vlane(o, 7u));
		}
		dxv[u] = uvec4(pack2(v0.x, v0.y), pack2(v0.z, v0.w), pack2(v1.x, v1.y), pack2(v1.z, v1.w));
		return;
	}
	[[unroll]] for (uint c = 0u; c < 4u; c++) {
		store1(j + c, i + c, v0[c], acc);
		store1(j + 4u + c, i + 4u + c, v1[c], acc);
	}
#else
	[[unroll]] for (uint h = 0u; h < 2u; h++) {
		const uint jh = j + 4u * h, ih = i + 4u * h;
		const vec4 v = h == 0u ? v0 : v1;
		if (jh % 4u == 0u && ih + 4u <= pc.n_in) {
			dxv[jh / 4u] = acc ? dxv[jh / 4u] + v : v;
		} else {
			[[unroll]] for (uint c = 0u; c < 4u; c++)
				store1(jh + c, ih + c, v[c], acc);
		}
	}
#endif
}

void main()
{
	const uint tid = gl_LocalInvocationIndex;
	const uint i0 = (pc.c_base + gl_WorkGroupID.x) * 64u;
	const uint nci = min(64u, pc.n_in - i0);
	P = narrow_pow2((min(64u, pc.n_in) + 7u) / 8u);
	const uint RQ = 256u / P, TR = 8u * RQ, KC = 2u * P, P2 = 2u * P;
	trq = TR / 4u;
	const uint cq = tid & (P - 1u), rq = tid / P;
	const uint rowtiles = (pc.batch + TR - 1u) / TR;
	const uint rt0 = min(rowtiles, (pc.r_base + gl_WorkGroupID.y) * pc.tiles);
	const uint rt1 = min(rowtiles, rt0 + pc.tiles);
	const uint nch = (pc.k_len + KC - 1u) / KC;
	const uint steps = (rt1 - rt0) * nch;
	// W for the whole workgroup, or a chunk per step
	const bool wall = pc.k_len * P2 <= 1024u;
	// 16-byte loads (narrow.glsl): offsets on VW elements, and the block
	// contiguous or its rows whole vectors, at every chunk's start (each
	// row tile's first row is a multiple of 8)
	const bool vy = pc.dy_off % VW == 0u && ((nch == 1u && pc.k_len == pc.n_out) || (pc.n_out % VW == 0u && KC % VW == 0u && pc.k_len % VW == 0u));
	const bool vw = pc.w_off % VW == 0u &&
			(nci == pc.n_in ? (wall || nch == 1u || (KC * pc.n_in) % VW == 0u) : pc.n_in % VW == 0u);
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	float rv[NARROW_EPT];  // the next dY chunk (TR × KC = 256·NARROW_EPT elements)
	float rw[VW];          // the next W chunk (KC × 8·P <= 1024 elements: one unit)
	if (steps == 0u)
		return;
	if (wall) {
		NARROW_LOAD(w, wv4, rv, pc.w_off + i0, pc.n_in, nci, pc.k_len * nci, vw)
		NARROW_PUT_V(rv, nci, pc.k_len * nci, put_w, put_w4)
	}
	uint rt = rt0, ch = 0u;
	NARROW_LOAD(dy, dyv4, rv, pc.dy_off + rt0 * TR * pc.n_out, pc.n_out, min(KC, pc.k_len),
		    min(TR, pc.batch - rt0 * TR) * min(KC, pc.k_len), vy)
	if (!wall) {
		NARROW_LOAD_N(1u, w, wv4, rw, pc.w_off + i0, pc.n_in, nci, min(KC, pc.k_len) * nci, vw)
	}
	vec4 a[16]; // [row 0-7][quad 0-1]: rows 4·rq + 0-3, then 4·(rq + RQ) + 0-3
	[[unroll]] for (uint m = 0u; m < 16u; m++)
		a[m] = vec4(0.0);
	for (uint s = 0u; s < steps; s++) {
		const uint k0 = ch * KC, nck = min(KC, pc.k_len - k0);
		const uint r0 = rt * TR;
		barrier();
		NARROW_PUT(rv, nck, TR * nck, put_y)
		if (!wall) {
			NARROW_PUT_V_N(1u, rw, nci, KC * nci, put_w, put_w4)
		}
		barrier();
		// the next chunk's loads in flight while this one is multiplied
		const uint nxch = ch + 1u == nch ? 0u : ch + 1u, nxrt = ch + 1u == nch ? rt + 1u : rt;
		if (s + 1u < steps) {
			const uint nk0 = nxch * KC, nnck = min(KC, pc.k_len - nk0), nr0 = nxrt * TR;
			NARROW_LOAD(dy, dyv4, rv, pc.dy_off + nr0 * pc.n_out + nk0, pc.n_out, nnck,
				    min(TR, pc.batch - nr0) * nnck, vy)
			if (!wall) {
				NARROW_LOAD_N(1u, w, wv4, rw, pc.w_off + nk0 * pc.n_in + i0, pc.n_in, nci, nnck * nci, vw)
			}
		}
		const uint wb = (wall ? k0 : 0u) * P2 + cq;
		for (uint k = 0u; k < nck; k++) {
			const vec4 y0 = ys4[k * trq + rq], y1 = ys4[k * trq + RQ + rq];
			const vec4 w0 = ws4[wb + k * P2], w1 = ws4[wb + k * P2 + P];
			[[unroll]] for (uint e = 0u; e < 4u; e++) {
				a[2u * e] += y0[e] * w0;
				a[2u * e + 1u] += y0[e] * w1;
				a[8u + 2u * e] += y1[e] * w0;
				a[9u + 2u * e] += y1[e] * w1;
			}
		}
		if (ch + 1u == nch) { // the row tile's sums: out
			const uint i = i0 + 8u * cq;
			[[unroll]] for (uint e = 0u; e < 8u; e++) {
				const uint r = r0 + 4u * (e < 4u ? rq : rq + RQ) + (e & 3u);
				if (r < pc.batch)
					store_row(pc.dx_off + r * pc.n_in + i, i, a[2u * e], a[2u * e + 1u], acc);
				a[2u * e] = vec4(0.0);
				a[2u * e + 1u] = vec4(0.0);
			}
		}
		rt = nxrt;
		ch = nxch;
	}
}
