#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_narrow_param domain=linear_backward variant=narrow dtype=f32,f16,bf16 status=experimental
//
// The narrow family's first stage (shaders/iface/kernels.h): one row block
// of the batch × one 64×64 tile of dW (and db) per workgroup, its f32
// partial sums to the slot's scratch; linear_narrow_reduce adds the blocks
// in order. Built for layers of 16-256 features over 2^16-2^24 rows, where
// the work is one pass over X and dY at the memory's speed:
//  - many workgroups whatever the layer's width (blocks × tiles), so the
//    device is full even for a 16×32 layer;
//  - X and dY stream through shared memory a step at a time (64 rows of a
//    64-wide tile, up to 1024 of a narrower one: 4096 elements of each),
//    16 bytes per thread per load where aligned, the next step's loads
//    issued before the current rows are multiplied;
//  - the threads are 8×8 output micro-tiles (two vec4 of dY's row times
//    two of X's: 64 FMAs per four shared loads) times row groups: a layer
//    of few features gets as many row groups as its micro-tiles leave
//    threads (a 16×32 tile: 8 micro-tiles, 32 groups), not idle threads;
//  - the groups are summed by a fixed tree at the end: no atomics, the same
//    bits every run.

#include "dtype.glsl"
#define NARROW_EPT 16u
#include "narrow.glsl"

layout(local_size_x = VKG_NARROW_THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufX { STYPE x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufDY { STYPE dy[]; };
layout(std430, set = 0, binding = 0) readonly buffer BufXV { VTYPE xv4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufDYV { VTYPE dyv4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer BufP { float part[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_NARROW(uint) } pc;

// a step's rows of dY (sm[0, 1024)) and of X (sm[1024, 2048)), wq vec4 per
// row (the tile's wider side in quads, a power of two): 64 rows of a
// 64-wide tile, 1024 of a 1-4 wide one; at the end, the row groups' sums on
// their way down the tree
shared vec4 sm[2048];
#define XS 1024u

uint wq; // vec4 per shared row

void put_y(uint r, uint c, float f)
{
	sm[r * wq + (c >> 2)][c & 3u] = f;
}

void put_x(uint r, uint c, float f)
{
	sm[XS + r * wq + (c >> 2)][c & 3u] = f;
}

void put_y4(uint r, uint c, vec4 f)
{
	sm[r * wq + (c >> 2)] = f;
}

void put_x4(uint r, uint c, vec4 f)
{
	sm[XS + r * wq + (c >> 2)] = f;
}

void main()
{
	const uint tid = gl_LocalInvocationIndex;
	const bool want_dw = (pc.flags & VKG_FLAG_WRITE_C) != 0u;
	const uint nti = want_dw ? (pc.n_in + 63u) / 64u : 1u;
	const uint tile = pc.t_base + gl_WorkGroupID.x;
	const uint ti = tile % nti, to = tile / nti;
	const uint i0 = ti * 64u, o0 = to * 64u;
	const uint nci = want_dw ? min(64u, pc.n_in - i0) : 0u;
	const uint nco = min(64u, pc.n_out - o0);
	const bool want_db = (pc.flags & VKG_FLAG_WRITE_D) != 0u && ti == 0u;

	// The tile in quads (4 columns): qo of dY's side, qi of X's. A thread
	// owns two quads of each side, q and q + h (h: half the quads, rounded
	// up), so its 8×8 micro-tile is four 4×4 blocks and the threads of a
	// warp read consecutive vec4s of a shared row (no bank conflicts).
	// The second quad of an odd count lies past the tile: it is computed
	// from whatever the shared row holds there and never stored; `& (wq -
	// 1)` keeps its index in the row.
	const uint qo = (nco + 3u) / 4u, qi = max((nci + 3u) / 4u, 1u);
	const uint ho = (qo + 1u) / 2u, hi = (qi + 1u) / 2u, nmt = ho * hi;
	const uint p2 = narrow_pow2(nmt), G = VKG_NARROW_THREADS / p2;
	const uint m = tid & (p2 - 1u), g = tid / p2;
	const bool busy = m < nmt;
	const uint oq = m / hi, iq = m - oq * hi;
	wq = narrow_pow2(max(qo, qi));
	const uint oq2 = (oq + ho) & (wq - 1u), iq2 = (iq + hi) & (wq - 1u);
	const uint SR = 1024u / wq; // rows per step: 64 for a 64-wide tile

	const uint blk = pc.b_base + gl_WorkGroupID.y;
	const uint r_begin = blk * pc.rows;
	const uint r_end = r_begin < pc.batch ? min(pc.batch, r_begin + pc.rows) : r_begin;
	const uint steps = (r_end - r_begin + SR - 1u) / SR;
	// 16-byte loads: offsets on VW elements (each block's and step's first
	// row is a multiple of 64, its first column of 64), and the block
	// contiguous or its rows whole vectors
	const bool vy = pc.dy_off % VW == 0u && (nco == pc.n_out || pc.n_out % VW == 0u);
	const bool vx = pc.x_off % VW == 0u && (nci == pc.n_in || pc.n_in % VW == 0u);

	// acc[4·(2·bo + bi) + a]: row a of block (bo, bi), bo/bi 0 for quad q,
	// 1 for q + h; bs[bo]: db's quads
	vec4 acc[16];
	[[unroll]] for (uint k = 0u; k < 16u; k++)
		acc[k] = vec4(0.0);
	vec4 bs[2] = vec4[2](vec4(0.0), vec4(0.0));
	float ry[NARROW_EPT], rx[NARROW_EPT];
	uint row = r_begin;
	if (steps > 0u) {
		const uint nr = min(SR, r_end - row);
		NARROW_LOAD(dy, dyv4, ry, pc.dy_off + row * pc.n_out + o0, pc.n_out, nco, nr * nco, vy)
		if (want_dw) {
			NARROW_LOAD(x, xv4, rx, pc.x_off + row * pc.n_in + i0, pc.n_in, nci, nr * nci, vx)
		}
	}
	for (uint s = 0u; s < steps; s++) {
		barrier();
		NARROW_PUT_V(ry, nco, SR * nco, put_y, put_y4)
		if (want_dw) {
			NARROW_PUT_V(rx, nci, SR * nci, put_x, put_x4)
		}
		barrier();
		if (s + 1u < steps) { // the next rows in flight while these are multiplied
			row += SR;
			const uint nr = min(SR, r_end - row);
			NARROW_LOAD(dy, dyv4, ry, pc.dy_off + row * pc.n_out + o0, pc.n_out, nco, nr * nco, vy)
			if (want_dw) {
				NARROW_LOAD(x, xv4, rx, pc.x_off + row * pc.n_in + i0, pc.n_in, nci, nr * nci, vx)
			}
		}
		if (busy) {
			for (uint r = g; r < SR; r += G) {
				const vec4 y[2] = vec4[2](sm[r * wq + oq], sm[r * wq + oq2]);
				bs[0] += y[0];
				bs[1] += y[1];
				if (want_dw) {
					const vec4 xv[2] = vec4[2](sm[XS + r * wq + iq], sm[XS + r * wq + iq2]);
					[[unroll]] for (uint bo = 0u; bo < 2u; bo++)
						[[unroll]] for (uint bi = 0u; bi < 2u; bi++)
							[[unroll]] for (uint a = 0u; a < 4u; a++)
								acc[4u * (2u * bo + bi) + a] += y[bo][a] * xv[bi];
				}
			}
		}
	}

	// The row groups' sums, by a fixed tree: at each stage the groups
	// [st, 2·st) park theirs in shared memory ((G/2)·p2 threads × 16 vec4
	// at most: 2048) and groups [0, st) add them. dW's blocks first, then
	// db's quads.
	// group g + st parks at (g + st)·p2 + m − st·p2 = tid of its partner g
	if (want_dw) {
		for (uint st = G >> 1; st > 0u; st >>= 1) {
			barrier();
			if (g >= st && g < 2u * st) {
				[[unroll]] for (uint k = 0u; k < 16u; k++)
					sm[(tid - st * p2) * 16u + k] = acc[k];
			}
			barrier();
			if (g < st) {
				[[unroll]] for (uint k = 0u; k < 16u; k++)
					acc[k] += sm[tid * 16u + k];
			}
		}
	}
	if (want_db) {
		for (uint st = G >> 1; st > 0u; st >>= 1) {
			barrier();
			if (g >= st && g < 2u * st) {
				sm[(tid - st * p2) * 2u] = bs[0];
				sm[(tid - st * p2) * 2u + 1u] = bs[1];
			}
			barrier();
			if (g < st) {
				bs[0] += sm[tid * 2u];
				bs[1] += sm[tid * 2u + 1u];
			}
		}
	}
	if (g != 0u || !busy)
		return;
	const uint base = pc.p_off + blk * pc.stride;
	const uint oqs[2] = uint[2](oq, oq + ho), iqs[2] = uint[2](iq, iq + hi);
	if (want_dw) {
		[[unroll]] for (uint bo = 0u; bo < 2u; bo++)
			[[unroll]] for (uint a = 0u; a < 4u; a++) {
				const uint o = o0 + oqs[bo] * 4u + a;
				[[unroll]] for (uint bi = 0u; bi < 2u; bi++)
					[[unroll]] for (uint c = 0u; c < 4u; c++) {
						const uint i = i0 + iqs[bi] * 4u + c;
						if (o < o0 + nco && i < i0 + nci)
							part[base + o * pc.n_in + i] = acc[4u * (2u * bo + bi) + a][c];
					}
			}
	}
	if (want_db && iq == 0u) {
		[[unroll]] for (uint bo = 0u; bo < 2u; bo++)
			[[unroll]] for (uint a = 0u; a < 4u; a++) {
				const uint o = o0 + oqs[bo] * 4u + a;
				if (o < o0 + nco)
					part[base + pc.stride - pc.n_out + o] = bs[bo][a];
			}
	}
}
