#version 450
#extension GL_GOOGLE_include_directive : require
#include "iface/kernels.h"
// @kernel kernel_name=optim_step domain=optim variant=generic dtype=f32,f16,bf16 status=experimental
//
// sgd_step and adam_step on one parameter (shaders/iface/kernels.h,
// VKG_PC_OPTIM), as torch.optim.SGD, Adam and AdamW step it (the names and
// order of operations of torch's single-tensor loops), f32 arithmetic:
//   SGD:  g += wd·p; buf = first ? g : momentum·buf + (1 − dampening)·g;
//         g = nesterov ? g + momentum·buf : buf (with momentum); p −= lr·g
//   Adam: AdamW: p *= 1 − lr·wd, else g += wd·p; m = β1·m + (1 − β1)·g;
//         v = β2·v + (1 − β2)·g²; p −= step_size·m / (√v·inv_sqrt_bc2 + eps)
// Every tensor is bound as 32-bit words whatever its dtype (each its own:
// a parameter in bf16 with f32 buffers works), so this one kernel serves
// every combination; it is built once per storage dtype like the others
// (the builds are alike: nothing here reads dtype.glsl). A thread owns
// elements 2i and 2i + 1: for a 16-bit tensor that is one word, which no
// other thread writes; past an odd n the word's other half is written back
// as it was (a device tensor's buffer is whole words, daemon/gpu/tensor.c).

layout(local_size_x = VKG_OPTIM_WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) buffer BufP { uint p[]; };
layout(std430, set = 0, binding = 1) buffer BufG { uint g[]; };
layout(std430, set = 0, binding = 2) buffer BufB1 { uint b1[]; };
layout(std430, set = 0, binding = 3) buffer BufB2 { uint b2[]; };

// push constants, flags, bindings: shaders/iface/kernels.h
layout(push_constant) uniform Params { VKG_PC_OPTIM(uint) } pc;

// round to nearest even, NaN stays NaN (shaders/dtype.glsl's)
uint bf16_bits(float f)
{
	uint u = floatBitsToUint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (u >> 16) | 0x40u;
	u += 0x7fffu + ((u >> 16) & 1u);
	return u >> 16;
}

// the two elements of pair q of a tensor of dtype dt from its words w0
// (the pair's first word) and w1 (f32's second)
vec2 unpack2(uint dt, uint w0, uint w1)
{
	if (dt == VKG_OPT_F16)
		return unpackHalf2x16(w0);
	if (dt == VKG_OPT_BF16)
		return vec2(uintBitsToFloat(w0 << 16), uintBitsToFloat(w0 & 0xffff0000u));
	return vec2(uintBitsToFloat(w0), uintBitsToFloat(w1));
}

// a 16-bit word of v (old: the word before, its high half kept when !two)
uint pack16(uint dt, vec2 v, uint old, bool two)
{
	uint lo, hi;
	if (dt == VKG_OPT_F16) {
		const uint w = packHalf2x16(v);
		lo = w & 0xffffu;
		hi = w >> 16;
	} else {
		lo = bf16_bits(v.x);
		hi = bf16_bits(v.y);
	}
	return lo | ((two ? hi : old >> 16) << 16);
}

#define DT(k) ((pc.dtypes >> (2u * (k))) & 3u)
// the pair q of buffer B (slot k): load into a vec2, store back
#define LOAD2(B, k, q, two) (DT(k) == VKG_OPT_F32 ? unpack2(VKG_OPT_F32, B[2u * (q)], (two) ? B[2u * (q) + 1u] : 0u) \
						    : unpack2(DT(k), B[q], 0u))
#define STORE2(B, k, q, v, two)                                                   \
	if (DT(k) == VKG_OPT_F32) {                                               \
		B[2u * (q)] = floatBitsToUint((v).x);                             \
		if (two)                                                          \
			B[2u * (q) + 1u] = floatBitsToUint((v).y);                \
	} else {                                                                  \
		B[q] = pack16(DT(k), (v), B[q], (two));                           \
	}

void main()
{
	const uint q = pc.base + gl_GlobalInvocationID.x;
	if (2u * q >= pc.n)
		return;
	const bool two = 2u * q + 1u < pc.n;
	const float lr = uintBitsToFloat(pc.lr), c1 = uintBitsToFloat(pc.c1);
	const float c2 = uintBitsToFloat(pc.c2), wd = uintBitsToFloat(pc.wd);
	vec2 pv = LOAD2(p, 0u, q, two);
	vec2 gv = LOAD2(g, 1u, q, two);
	if (pc.kind == VKG_OPT_SGD) {
		if (wd != 0.0)
			gv += wd * pv;
		if ((pc.flags & VKG_OPT_MOMENTUM) != 0u) {
			vec2 buf;
			if ((pc.flags & VKG_OPT_FIRST) != 0u) {
				buf = gv;
			} else {
				buf = LOAD2(b1, 2u, q, two);
				buf = c1 * buf + (1.0 - c2) * gv;
			}
			STORE2(b1, 2u, q, buf, two);
			gv = (pc.flags & VKG_OPT_NESTEROV) != 0u ? gv + c1 * buf : buf;
		}
		pv -= lr * gv;
		STORE2(p, 0u, q, pv, two);
		return;
	}
	// Adam / AdamW
	if ((pc.flags & VKG_OPT_DECOUPLED) != 0u)
		pv *= 1.0 - lr * wd;
	else if (wd != 0.0)
		gv += wd * pv;
	vec2 m = LOAD2(b1, 2u, q, two);
	vec2 v = LOAD2(b2, 3u, q, two);
	m = c1 * m + (1.0 - c1) * gv;
	v = c2 * v + (1.0 - c2) * gv * gv;
	STORE2(b1, 2u, q, m, two);
	STORE2(b2, 3u, q, v, two);
	const vec2 denom = sqrt(v) * uintBitsToFloat(pc.inv_sqrt_bc2) + uintBitsToFloat(pc.eps);
	pv -= uintBitsToFloat(pc.step_size) * m / denom;
	STORE2(p, 0u, q, pv, two);
}
