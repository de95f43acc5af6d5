#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_splitk_reduce domain=linear_backward variant=splitk dtype=f32,f16,bf16 status=experimental
//
// Split-K, second pass: out[i] (+)= Σ_s part[s·stride + i] for i < n, the
// slices summed in order 0, 1, … by one thread per element, so the result
// is the same bits on every run (no atomics, no order that depends on
// scheduling). Partials are f32; the output is stored in its dtype, rounded
// once.

#include "dtype.glsl"

layout(local_size_x = VKG_REDUCE_WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufP { float part[]; };
layout(std430, set = 0, binding = 1) buffer BufO { STYPE o[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_REDUCE(uint) } pc;

void main()
{
	const uint i = pc.base + gl_GlobalInvocationID.x;
	if (i >= pc.n)
		return;
	float s = 0.0;
	for (uint k = 0u; k < pc.slices; k++)
		s += part[pc.part_off + k * pc.stride + i];
	const uint j = pc.out_off + i;
	o[j] = STORE((pc.flags & VKG_FLAG_ACCUMULATE) != 0u ? LOAD(o[j]) + s : s);
}
