#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
#extension GL_EXT_control_flow_attributes : require
// @kernel kernel_name=bench_peak_fma domain=bench_peak variant=fma dtype=f32 status=experimental
//
// FP32 FMA throughput for `vkgrad bench --peak` (bench/cli_bench_peak.c),
// no part of the daemon's job path. Each invocation keeps CHAINS vec4
// accumulators -- 4·CHAINS scalar FMAs with no dependence between them per
// step, VKG_PEAK_FMA_UNROLL steps per loop trip -- and writes the sum of
// their components:
//   OUTER = 0 (fma_f32): chains acc = fma(acc, a, b), a and b the same two
//     values for every chain
//   OUTER = 1 (fma_outer): the outer product of a GEMM's thread tile,
//     CHAINS/2 rows of 8: acc[i][q] = fma(a_i, b_q, acc[i][q]) with CHAINS/2
//     values a_i and 8 values b_q in registers, three different source
//     registers per FMA as in tiled128's inner loop
// a, b and zero come from the push constants, so the compiler cannot fold
// them; the benchmark passes a = 1, b = 1, zero = 0 (a_i = a + i·zero, b_q
// = b + q·zero are then 1 too) and starts component j of accumulator c of
// invocation t at (t + 4c + j) mod 256, so every value stays a small
// integer, exact in f32, and the result is known: Σ (start + iters·UNROLL).

layout(local_size_x = VKG_PEAK_FMA_WG) in;
layout(constant_id = 1) const uint CHAINS = 8;
layout(constant_id = 2) const uint OUTER = 0;
const uint ROWS = OUTER != 0u ? CHAINS / 2u : 1u; // OUTER: rows of 8 (two vec4)

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
	if (OUTER == 0u) {
		for (uint i = 0u; i < pc.iters; i++) {
			[[unroll]] for (uint u = 0u; u < VKG_PEAK_FMA_UNROLL; u++)
				[[unroll]] for (uint c = 0u; c < CHAINS; c++)
					acc[c] = fma(acc[c], a, b);
		}
	} else {
		const float zero = uintBitsToFloat(pc.zero_bits);
		float ai[ROWS];
		[[unroll]] for (uint r = 0u; r < ROWS; r++)
			ai[r] = a.x + float(r) * zero;
		const vec4 b0 = b + vec4(0.0, 1.0, 2.0, 3.0) * zero;
		const vec4 b1 = b + vec4(4.0, 5.0, 6.0, 7.0) * zero;
		for (uint i = 0u; i < pc.iters; i++) {
			[[unroll]] for (uint u = 0u; u < VKG_PEAK_FMA_UNROLL; u++)
				[[unroll]] for (uint r = 0u; r < ROWS; r++) {
					acc[2u * r] = fma(vec4(ai[r]), b0, acc[2u * r]);
					acc[2u * r + 1u] = fma(vec4(ai[r]), b1, acc[2u * r + 1u]);
				}
		}
	}
	float s = 0.0;
	[[unroll]] for (uint c = 0u; c < CHAINS; c++)
		s += (acc[c].x + acc[c].y) + (acc[c].z + acc[c].w);
	o[t] = s;
}
