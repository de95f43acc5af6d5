#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_parameter_backward domain=linear_backward variant=generic dtype=f32,f16,bf16 status=experimental
//
// dW = dYᵀ·X and db = Σ_rows dY for Y = X·Wᵀ + b, row-parallel:
// one workgroup per output feature o and 32-wide tile of input features;
// the 8 rows of the workgroup are reduction stripes walking the batch
// (stripe s takes rows s, s+8, s+16, ...). Partial sums meet in padded
// shared memory (33 columns so stripes land in different banks) and are
// reduced as a tree; the bias gradient comes from the same pass, summed by
// the workgroups of tile 0 from the dY values they already load.
//
// Bindings are push descriptors (set 0): the daemon binds each tensor's own
// region buffer; element offsets into it arrive as push constants.

#include "dtype.glsl"

layout(local_size_x = VKG_PARAM_COLS, local_size_y = VKG_PARAM_STRIPES, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufX { STYPE x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufDY { STYPE dy[]; };
layout(std430, set = 0, binding = 2) buffer BufDW { STYPE dw[]; };
layout(std430, set = 0, binding = 3) buffer BufDB { STYPE db[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_PARAM(uint) } pc;

shared float part[8][33];
shared float bpart[8];

void main()
{
	const uint lx = gl_LocalInvocationID.x;
	const uint s = gl_LocalInvocationID.y;
	const uint o = pc.o_base + gl_WorkGroupID.y;
	const uint tile = pc.c_base + gl_WorkGroupID.x;
	const uint i = tile * 32u + lx;
	const bool want_dw = (pc.flags & VKG_FLAG_WRITE_C) != 0u;
	const bool want_db = (pc.flags & VKG_FLAG_WRITE_D) != 0u && tile == 0u;
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	const bool col = want_dw && i < pc.n_in;

	float sum = 0.0;
	float bsum = 0.0;
	for (uint b = s; b < pc.batch; b += 8u) {
		const float g = LOAD(dy[pc.dy_off + b * pc.n_out + o]);
		if (col)
			sum += g * LOAD(x[pc.x_off + b * pc.n_in + i]);
		bsum += g;
	}
	part[s][lx] = sum;
	if (lx == 0u)
		bpart[s] = bsum;
	barrier();
	for (uint stride = 4u; stride > 0u; stride >>= 1u) {
		if (s < stride) {
			part[s][lx] += part[s + stride][lx];
			if (lx == 0u)
				bpart[s] += bpart[s + stride];
		}
		barrier();
	}
	if (s != 0u)
		return;
	if (col) {
		const uint k = pc.dw_off + o * pc.n_in + i;
		dw[k] = STORE(acc ? LOAD(dw[k]) + part[0][lx] : part[0][lx]);
	}
	if (want_db && lx == 0u) {
		const uint k = pc.db_off + o;
		db[k] = STORE(acc ? LOAD(db[k]) + bpart[0] : bpart[0]);
	}
}
