#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_narrow_reduce domain=linear_backward variant=narrow dtype=f32,f16,bf16 status=experimental
//
// The narrow family's second stage: out[i] (+)= Σ_blocks part[part_off +
// block·stride + i] for i < n. A workgroup owns VKG_NARROW_RED_COLS
// consecutive elements; for each, VKG_NARROW_RED_LANES lanes sum every
// LANES-th block in order (lane l: blocks l, l + LANES, ...), so a few
// hundred blocks are many short chains of loads, not one long one; the
// lanes meet by a fixed tree in shared memory. No atomics: the same bits
// every run. Partials are f32; the output is rounded once to its dtype.

#include "dtype.glsl"

layout(local_size_x = VKG_NARROW_RED_COLS, local_size_y = VKG_NARROW_RED_LANES, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufP { float part[]; };
layout(std430, set = 0, binding = 1) buffer BufO { STYPE o[]; };

// push constants, flags, bindings: shaders/iface/kernels.h (`slices`: blocks)
layout(push_constant) uniform Params { VKG_PC_REDUCE(uint) } pc;

shared float red[VKG_NARROW_RED_LANES][VKG_NARROW_RED_COLS + 1];

void main()
{
	const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
	const uint i = pc.base + gl_WorkGroupID.x * VKG_NARROW_RED_COLS + lx;
	float s = 0.0;
	if (i < pc.n)
		for (uint k = ly; k < pc.slices; k += VKG_NARROW_RED_LANES)
			s += part[pc.part_off + k * pc.stride + i];
	red[ly][lx] = s;
	barrier();
	for (uint st = VKG_NARROW_RED_LANES / 2u; st > 0u; st >>= 1) {
		if (ly < st)
			red[ly][lx] += red[ly + st][lx];
		barrier();
	}
	if (ly != 0u || i >= pc.n)
		return;
	const uint j = pc.out_off + i;
	const float v = red[0][lx];
	o[j] = STORE((pc.flags & VKG_FLAG_ACCUMULATE) != 0u ? LOAD(o[j]) + v : v);
}
