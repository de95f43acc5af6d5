#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_EXT_control_flow_attributes : require
// @kernel kernel_name=bench_peak_copy domain=bench_peak variant=copy dtype=f32 status=experimental
//
// The memory bandwidth as a kernel reaches it, for `vkgrad bench --peak`'s
// copy line (bench/peak_copy.c), no part of the daemon's job path: dst[i] =
// src[i] over n 16-byte elements, the bits as they are (the buffers' type
// does not matter; registered as f32 only). Invocation t of T (all of the
// dispatch's) copies elements t, t + T, t + 2T, ...: one loop trip loads
// VKG_PEAK_COPY_UNROLL of them (t + u·T) before it stores any, so each
// invocation keeps that many 16-byte loads in flight; neighbouring
// invocations touch neighbouring elements (coalesced). The host dispatches
// at most 2^32 / (UNROLL·VKG_PEAK_COPY_WG) workgroups, so U·T fits in 32
// bits, and an index is formed only below n, so nothing wraps.

layout(local_size_x = VKG_PEAK_COPY_WG) in;

layout(std430, set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Params { VKG_PC_PEAK_COPY(uint) } pc;

void main()
{
	const uint T = gl_NumWorkGroups.x * uint(VKG_PEAK_COPY_WG);
	const uint n = pc.n;
	uint i = gl_GlobalInvocationID.x;
	while (i < n) {
		const uint left = n - i; /* >= 1: element i + u·T exists when u·T < left */
		uvec4 v[VKG_PEAK_COPY_UNROLL];
		[[unroll]] for (uint u = 0u; u < VKG_PEAK_COPY_UNROLL; u++)
			if (u * T < left)
				v[u] = src[i + u * T];
		[[unroll]] for (uint u = 0u; u < VKG_PEAK_COPY_UNROLL; u++)
			if (u * T < left)
				dst[i + u * T] = v[u];
		if (left <= VKG_PEAK_COPY_UNROLL * T)
			break;
		i += VKG_PEAK_COPY_UNROLL * T;
	}
}
