#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_narrow_input domain=linear_backward variant=narrow dtype=f32,f16,bf16 status=experimental
//
// The narrow family's dX = dY·W (shaders/iface/kernels.h): a workgroup
// owns a column tile of up to 64 input features and `tiles` consecutive
// row tiles. Its threads are 4×4 micro-tiles of dX, P columns of them
// (the least power of two covering the tile's features: 16 for 64, 8 for
// 32, 1 for up to 4) and 256/P rows, so a tile is 1024/P rows and no
// thread idles on a narrow layer. out is walked in chunks of 4·P: W's
// chunk (4·P × 64) and the tile's dY (1024/P rows × 4·P, transposed) in
// shared memory, 16 bytes per thread per load where aligned; where out
// fits one chunk, W is loaded once and stays while the workgroup's rows
// stream past it. A dispatch sums k_len positions of out (a longer out is
// cut into dispatches by the loop bound, the later ones accumulating).
// Each output is one f32 sum in the order of out, rounded
// once.

#include "dtype.glsl"
#define NARROW_EPT 16u
#include "narrow.glsl"

layout(local_size_x = VKG_NARROW_THREADS, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufDY { STYPE dy[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STYPE w[]; };
layout(std430, set = 0, binding = 0) readonly buffer BufDYV { VTYPE dyv4[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufWV { VTYPE wv4[]; };
layout(std430, set = 0, binding = 2) buffer BufDX { STYPE dx[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_NARROW_DX(uint) } pc;

shared vec4 ys4[1024]; // dY's tile transposed: [k][row / 4], 1024/P rows × 4·P
shared vec4 ws4[1024]; // W's chunk: [k][column / 4], 4·P × 64

uint trq; // row quads per tile (1024/P / 4)

void put_y(uint r, uint c, float f)
{
	ys4[c * trq + (r >> 2)][r & 3u] = f;
}

void put_w(uint r, uint c, float f)
{
	ws4[r * 16u + (c >> 2)][c & 3u] = f;
}

void put_w4(uint r, uint c, vec4 f)
{
	ws4[r * 16u + (c >> 2)] = f;
}

void main()
{
	const uint tid = gl_LocalInvocationIndex;
	const uint i0 = (pc.c_base + gl_WorkGroupID.x) * 64u;
	const uint nci = min(64u, pc.n_in - i0);
	const uint ncq = (nci + 3u) / 4u;
	const uint P = narrow_pow2(ncq), TR = 1024u / P, KC = 4u * P;
	trq = TR / 4u;
	const uint cq = tid & (P - 1u), rq = tid / P;
	const bool busy = cq < ncq;
	const uint rowtiles = (pc.batch + TR - 1u) / TR;
	const uint rt0 = (pc.r_base + gl_WorkGroupID.y) * pc.tiles;
	const uint rt1 = min(rowtiles, rt0 + pc.tiles);
	const uint nch = (pc.k_len + KC - 1u) / KC;
	// 16-byte loads (narrow.glsl): offsets on VW elements, and the block
	// contiguous or its rows whole vectors, at every chunk's start
	const bool vy = pc.dy_off % VW == 0u && ((nch == 1u && pc.k_len == pc.n_out) || (pc.n_out % VW == 0u && KC % VW == 0u && pc.k_len % VW == 0u));
	const bool vw = pc.w_off % VW == 0u &&
			(nci == pc.n_in ? (nch == 1u || (KC * pc.n_in) % VW == 0u) : pc.n_in % VW == 0u);
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	float rv[NARROW_EPT];
	for (uint rt = rt0; rt < rt1; rt++) {
		const uint r0 = rt * TR, nr = min(TR, pc.batch - r0);
		vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);
		for (uint ch = 0u; ch < nch; ch++) {
			const uint k0 = ch * KC, nck = min(KC, pc.k_len - k0);
			barrier();
			if (nch > 1u || rt == rt0) {
				NARROW_LOAD(w, wv4, rv, pc.w_off + k0 * pc.n_in + i0, pc.n_in, nci, nck * nci, vw)
				NARROW_PUT_V(rv, nci, KC * nci, put_w, put_w4)
			}
			NARROW_LOAD(dy, dyv4, rv, pc.dy_off + r0 * pc.n_out + k0, pc.n_out, nck, nr * nck, vy)
			NARROW_PUT(rv, nck, TR * nck, put_y)
			barrier();
			if (busy) {
				for (uint k = 0u; k < nck; k++) {
					const vec4 yv = ys4[k * trq + rq];
					const vec4 wv = ws4[k * 16u + cq];
					a0 += yv.x * wv;
					a1 += yv.y * wv;
					a2 += yv.z * wv;
					a3 += yv.w * wv;
				}
			}
		}
		if (!busy)
			continue;
		[[unroll]] for (uint a = 0u; a < 4u; a++) {
			const uint r = r0 + rq * 4u + a;
			const vec4 v = a == 0u ? a0 : a == 1u ? a1 : a == 2u ? a2 : a3;
			[[unroll]] for (uint c = 0u; c < 4u; c++) {
				const uint i = i0 + cq * 4u + c;
				if (r < pc.batch && i < pc.n_in) {
					const uint j = pc.dx_off + r * pc.n_in + i;
					dx[j] = STORE(acc ? LOAD(dx[j]) + v[c] : v[c]);
				}
			}
		}
	}
}
