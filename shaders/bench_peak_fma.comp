#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_EXT_control_flow_attributes : require
// @kernel kernel_name=bench_peak_fma domain=bench_peak variant=fma dtype=f32 status=experimental
//
// FP32 FMA throughput for `vkgrad bench --peak` (bench/cli_bench_peak.c),
// no part of the daemon's job path. Each invocation runs CHAINS independent
// vec4 chains acc = fma(acc, a, b) -- 4·CHAINS scalar FMAs with no
// dependence between them per step, VKG_PEAK_FMA_UNROLL steps per loop trip
// -- and writes the sum of its chains' components. a and b come from the
// push constants, so the compiler cannot fold them; the benchmark passes
// a = 1, b = 1 and starts chain c's component j of invocation t at
// (t + 4c + j) mod 256, so every value stays a small integer, exact in f32,
// and the result is known: Σ (start + iters·UNROLL).

layout(local_size_x = VKG_PEAK_FMA_WG) in;
layout(constant_id = 1) const uint CHAINS = 8;

layout(std430, set = 0, binding = 0) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params { VKG_PC_PEAK_FMA(uint) } pc;

void main()
{
	const uint t = gl_GlobalInvocationID.x;
	const vec4 a = vec4(uintBitsToFloat(pc.a_bits));
	const vec4 b = vec4(uintBitsToFloat(pc.b_bits));
	vec4 acc[CHAINS];
	[[unroll]] for (uint c = 0u; c < CHAINS; c++)
		acc[c] = vec4(float((t + 4u * c) & 255u), float((t + 4u * c + 1u) & 255u),
			      float((t + 4u * c + 2u) & 255u), float((t + 4u * c + 3u) & 255u));
	for (uint i = 0u; i < pc.iters; i++) {
		[[unroll]] for (uint u = 0u; u < VKG_PEAK_FMA_UNROLL; u++)
			[[unroll]] for (uint c = 0u; c < CHAINS; c++)
				acc[c] = fma(acc[c], a, b);
	}
	float s = 0.0;
	[[unroll]] for (uint c = 0u; c < CHAINS; c++)
		s += (acc[c].x + acc[c].y) + (acc[c].z + acc[c].w);
	o[t] = s;
}
