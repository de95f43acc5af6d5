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
//  - the threads are 4×4 output micro-tiles (a vec4 of dY's column times a
//    vec4 of X's: 16 FMAs per two shared loads) times row groups: a layer
//    of few features gets as many row groups as its micro-tiles leave
//    threads (a 16×32 tile: 32 micro-tiles, 8 groups), not idle threads;
//  - a thread takes its rows of a step four at a time (a step has at least
//    four per thread: SR / G = 4·p2 / wq), its eight shared loads ahead of
//    the 64 FMAs: 539 µs against 608 one row at a time for 1,048,576×64×64
//    f32 dW+db on an H100 (docs/performance.md, 2026-12-06);
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

// a step's rows of dY and of X, wq vec4 per row (the tile's wider side in
// quads, a power of two): 64 rows of a 64-wide tile, 1024 of a 1-4 wide
// one; at the end, the row groups' sums (ys4: 4 vec4 of dW per thread,
// xs4: one of db)
shared vec4 ys4[1024];
shared vec4 xs4[1024];

uint wq; // vec4 per shared row

#if !defined(VKG_DTYPE_F16) && !defined(VKG_DTYPE_BF16)
#define NARROW_MT8 // f32: whole 64×64 tiles take the 8×8 path
#include "narrow_mt8.glsl"
#endif

void put_y(uint r, uint c, float f)
{
	ys4[r * wq + (c >> 2)][c & 3u] = f;
}

void put_x(uint r, uint c, float f)
{
	xs4[r * wq + (c >> 2)][c & 3u] = f;
}

void put_y4(uint r, uint c, vec4 f)
{
	ys4[r * wq + (c >> 2)] = f;
}

void put_x4(uint r, uint c, vec4 f)
{
	xs4[r * wq + (c >> 2)] = f;
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

	// micro-tiles (mtr rows × mtc columns of 4×4) × G row groups
	const uint mtc = max((nci + 3u) / 4u, 1u), mtr = (nco + 3u) / 4u, nmt = mtr * mtc;
	const uint p2 = narrow_pow2(nmt), G = VKG_NARROW_THREADS / p2;
	const uint m = tid & (p2 - 1u), g = tid / p2;
	const bool busy = m < nmt;
	const uint oq = m / mtc, iq = m - oq * mtc;
	wq = narrow_pow2(max(mtr, mtc));
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

#if defined(NARROW_MT8)
	if (want_dw && nci == 64u && nco == 64u && vx && vy) { // f32 64×64 tiles: shaders/narrow_mt8.glsl
		narrow_param_mt8(i0, o0, r_begin, r_end, blk, want_db);
		return;
	}
#endif
	vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0), bs = vec4(0.0);
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
			for (uint r = g; r < SR; r += 4u * G) { // SR / G >= 4, a power of two
				vec4 yv[4], xv[4];
				[[unroll]] for (uint u = 0u; u < 4u; u++)
					yv[u] = ys4[(r + u * G) * wq + oq];
				if (want_dw) {
					[[unroll]] for (uint u = 0u; u < 4u; u++)
						xv[u] = xs4[(r + u * G) * wq + iq];
				}
				[[unroll]] for (uint u = 0u; u < 4u; u++) {
					bs += yv[u];
					if (want_dw) {
						a0 += yv[u].x * xv[u];
						a1 += yv[u].y * xv[u];
						a2 += yv[u].z * xv[u];
						a3 += yv[u].w * xv[u];
					}
				}
			}
		}
	}

	// the row groups' sums, by a fixed tree (group g + st into group g)
	barrier();
	ys4[tid * 4u + 0u] = a0;
	ys4[tid * 4u + 1u] = a1;
	ys4[tid * 4u + 2u] = a2;
	ys4[tid * 4u + 3u] = a3;
	xs4[tid] = bs;
	barrier();
	for (uint st = G >> 1; st > 0u; st >>= 1) {
		if (g < st) {
			const uint t2 = tid + st * p2;
			[[unroll]] for (uint q = 0u; q < 4u; q++)
				ys4[tid * 4u + q] += ys4[t2 * 4u + q];
			xs4[tid] += xs4[t2];
		}
		barrier();
	}
	if (g != 0u || !busy)
		return;
	const uint base = pc.p_off + blk * pc.stride;
	if (want_dw) {
		[[unroll]] for (uint a = 0u; a < 4u; a++) {
			const uint o = o0 + oq * 4u + a;
			const vec4 v = ys4[tid * 4u + a];
			[[unroll]] for (uint c = 0u; c < 4u; c++) {
				const uint i = i0 + iq * 4u + c;
				if (o < pc.n_out && i < pc.n_in)
					part[base + o * pc.n_in + i] = v[c];
			}
		}
	}
	if (want_db && iq == 0u) {
		const vec4 v = xs4[tid];
		[[unroll]] for (uint a = 0u; a < 4u; a++) {
			const uint o = o0 + oq * 4u + a;
			if (o < pc.n_out)
				part[base + pc.stride - pc.n_out + o] = v[a];
		}
	}
}
