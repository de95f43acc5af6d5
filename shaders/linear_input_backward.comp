#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_input_backward domain=linear_backward variant=generic dtype=f32,f16,bf16 status=experimental
//
// dX = dY·W for Y = X·Wᵀ + b: a 16×16 output tile per workgroup (rows are
// batch rows, columns input features), the reduction over out walked in
// 16-wide steps through shared-memory tiles of dY and W (17 columns of
// padding against bank conflicts). One dispatch walks k_len of the out
// positions (the daemon cuts a longer reduction into pieces within its
// loop bound, daemon/variant.h, offsetting dy_off and w_off to the piece's
// first position; the later pieces accumulate). With VKG_FLAG_B_TRANS W is
// read transposed (linear_forward's generic kernel, shaders/iface/kernels.h).

#include "dtype.glsl"

layout(local_size_x = VKG_INPUT_TILE, local_size_y = VKG_INPUT_TILE, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufDY { STYPE dy[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STYPE w[]; };
layout(std430, set = 0, binding = 2) buffer BufDX { STYPE dx[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_INPUT(uint) } pc;

shared float tdy[16][17]; // [row][k]
shared float tw[16][17];  // [k][col]

void main()
{
	const uint lx = gl_LocalInvocationID.x;
	const uint ly = gl_LocalInvocationID.y;
	const uint i = (pc.c_base + gl_WorkGroupID.x) * 16u + lx;
	const uint b = pc.b_base + gl_WorkGroupID.y * 16u + ly;
	float sum = 0.0;
	for (uint k0 = 0u; k0 < pc.k_len; k0 += 16u) {
		// tdy[ly][lx] = dY[b_tile+ly, k0+lx]; tw[ly][lx] = W[k0+ly, i]
		const uint kb = k0 + lx;
		tdy[ly][lx] = (b < pc.batch && kb < pc.k_len) ? LOAD(dy[pc.dy_off + b * pc.n_out + kb]) : 0.0;
		if ((pc.flags & VKG_FLAG_B_TRANS) != 0u) {
			// W'[k0+lx, c_tile+ly] = w[(c_tile+ly)·n_out + k0+lx]: lanes
			// along k, contiguous in w
			const uint ic = i - lx + ly;
			tw[lx][ly] = (kb < pc.k_len && ic < pc.n_in) ? LOAD(w[pc.w_off + ic * pc.n_out + kb]) : 0.0;
		} else {
			const uint kw = k0 + ly;
			tw[ly][lx] = (kw < pc.k_len && i < pc.n_in) ? LOAD(w[pc.w_off + kw * pc.n_in + i]) : 0.0;
		}
		barrier();
		for (uint k = 0u; k < 16u; k++)
			sum += tdy[ly][k] * tw[k][lx];
		barrier();
	}
	if (b < pc.batch && i < pc.n_in) {
		const uint idx = pc.dx_off + b * pc.n_in + i;
		dx[idx] = STORE((pc.flags & VKG_FLAG_ACCUMULATE) != 0u ? LOAD(dx[idx]) + sum : sum);
	}
}
