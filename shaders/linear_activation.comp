#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=linear_activation domain=linear_activation variant=generic dtype=f32,f16,bf16 status=experimental
//
// The fused activations (shaders/iface/kernels.h, VKG_PC_ACT): linear_forward's
// y = act(z) after its GEMM, in place on Y (and z copied out when asked for),
// and linear_backward's dZ = dY ⊙ act'(y or z) into the daemon's scratch,
// which its dW, db and dX kernels then read as dY. One element per thread,
// f32 arithmetic, each stored value rounded once (z is the GEMM's Y: already
// stored, so act(z) is of the stored z, as torch computes it in that dtype).
//
// gelu is torch's tanh form (approximate="tanh"):
//   gelu(x) = ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³)
//   gelu'(x) = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²), t = tanh(u)
// with tanh(u) = 1 − 2/(e^{2u} + 1): ±1 where e^{2u} over- or underflows,
// never inf/inf.

#include "dtype.glsl"

layout(local_size_x = VKG_ACT_WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BufA { STYPE a[]; };
layout(std430, set = 0, binding = 1) buffer BufB { STYPE b[]; };
layout(std430, set = 0, binding = 2) buffer BufC { STYPE c[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_ACT(uint) } pc;

const float K_SQRT_2_PI = 0.7978845608028654;
const float K_C = 0.044715;

float tanh_safe(float u)
{
	return 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
}

float act(float x)
{
	if (pc.act == VKG_ACT_RELU) // (a NaN stays NaN, as torch's relu)
		return x <= 0.0 ? 0.0 : x;
	if (pc.act == VKG_ACT_GELU)
		return 0.5 * x * (1.0 + tanh_safe(K_SQRT_2_PI * (x + K_C * x * x * x)));
	return x;
}

// act'(v): relu reads the forward's output y, gelu the pre-activation z
float act_grad(float v)
{
	if (pc.act == VKG_ACT_RELU)
		return v <= 0.0 ? 0.0 : 1.0;
	if (pc.act == VKG_ACT_GELU) {
		const float t = tanh_safe(K_SQRT_2_PI * (v + K_C * v * v * v));
		return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * K_SQRT_2_PI * (1.0 + 3.0 * K_C * v * v);
	}
	return 1.0;
}

void main()
{
	const uint i = pc.base + gl_GlobalInvocationID.x;
	if (i >= pc.n)
		return;
	if ((pc.flags & VKG_FLAG_ACT_FORWARD) != 0u) {
		// (widened and narrowed again: z's bits; no 16-bit values in registers)
		const float z = LOAD(a[pc.a_off + i]);
		if ((pc.flags & VKG_FLAG_WRITE_C) != 0u)
			b[pc.b_off + i] = STORE(z);
		a[pc.a_off + i] = STORE(act(z));
		return;
	}
	const float g = LOAD(a[pc.a_off + i]);
	// relu: torch's threshold_backward, 0 where y <= 0, else dY (a NaN dY
	// where y <= 0 gives 0, a NaN y passes dY, as there)
	if (pc.act == VKG_ACT_RELU) {
		c[pc.c_off + i] = STORE(LOAD(b[pc.b_off + i]) <= 0.0 ? 0.0 : g);
		return;
	}
	c[pc.c_off + i] = STORE(g * act_grad(LOAD(b[pc.b_off + i])));
}
