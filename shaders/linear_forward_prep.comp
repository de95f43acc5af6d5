#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_forward_prep domain=linear_forward variant=generic dtype=f32,f16,bf16 status=experimental
//
// What linear_forward's GEMM needs before it runs (shaders/iface/kernels.h):
// W transposed into the daemon's scratch (VKG_FLAG_PREP_TRANSPOSE), or the
// bias broadcast into Y's rows (VKG_FLAG_PREP_BIAS), which the GEMM then
// accumulates onto, so that each element of Y = X·Wᵀ + b is rounded once.
// A 32×32 tile per workgroup of 32×8 threads, each thread 4 rows of it.
// The transpose moves elements unchanged (widened to f32 and narrowed
// back: exact in every dtype), through shared memory so both its reads and its writes walk rows.

#include "dtype.glsl"

layout(local_size_x = VKG_PREP_TILE, local_size_y = VKG_PREP_ROWS, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer BufS { STYPE src[]; };
layout(std430, set = 0, binding = 1) buffer BufD { STYPE dst[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_PREP(uint) } pc;

// f32 (16-bit shared memory is a feature of its own): widening a stored
// element and narrowing it again gives its bits back
shared float tile[VKG_PREP_TILE][VKG_PREP_TILE + 1];

void main()
{
	const uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
	const uint r0 = (pc.r_base + gl_WorkGroupID.y) * VKG_PREP_TILE;
	const uint c0 = (pc.c_base + gl_WorkGroupID.x) * VKG_PREP_TILE;
	const uint steps = VKG_PREP_TILE / VKG_PREP_ROWS;
	if ((pc.flags & VKG_FLAG_PREP_TRANSPOSE) != 0u) {
		// tile[r][c] = src[(r0 + r)·cols + c0 + c]
		for (uint s = 0u; s < steps; s++) {
			const uint r = ly + s * VKG_PREP_ROWS;
			if (r0 + r < pc.rows && c0 + lx < pc.cols)
				tile[r][lx] = LOAD(src[pc.src_off + (r0 + r) * pc.cols + c0 + lx]);
		}
		barrier();
		// dst[(c0 + c)·rows + r0 + r] = tile[r][c], lanes along r
		for (uint s = 0u; s < steps; s++) {
			const uint c = ly + s * VKG_PREP_ROWS;
			if (c0 + c < pc.cols && r0 + lx < pc.rows)
				dst[pc.dst_off + (c0 + c) * pc.rows + r0 + lx] = STORE(tile[lx][c]);
		}
		return;
	}
	if ((pc.flags & VKG_FLAG_PREP_BIAS) == 0u || c0 + lx >= pc.cols)
		return;
	const float b = LOAD(src[pc.src_off + c0 + lx]);
	const bool acc = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;
	for (uint s = 0u; s < steps; s++) {
		const uint r = r0 + ly + s * VKG_PREP_ROWS;
		if (r < pc.rows) {
			const uint k = pc.dst_off + r * pc.cols + c0 + lx;
			// (b widened and narrowed again: its bits; no 16-bit values in registers)
			dst[k] = STORE(acc ? LOAD(dst[k]) + b : b);
		}
	}
}
