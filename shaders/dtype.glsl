// shaders/dtype.glsl — storage type of tensors, chosen at build time:
// glslc -DVKG_DTYPE_F16 / -DVKG_DTYPE_BF16 / neither (f32). Arithmetic is f32
// in every case: LOAD widens a stored element, STORE narrows an f32 result.
#if defined(VKG_DTYPE_F16)
#extension GL_EXT_shader_16bit_storage : require
#define STYPE float16_t
#define LOAD(v) float(v)
#define STORE(f) float16_t(f)
#elif defined(VKG_DTYPE_BF16)
#extension GL_EXT_shader_16bit_storage : require
// bfloat16 is the top half of an IEEE f32: widen by shifting, narrow with
// round-to-nearest-even (NaN stays NaN).
// (16-bit types may only be stored and converted here, hence macros)
#define STYPE uint16_t
#define LOAD(v) uintBitsToFloat(uint(v) << 16)
#define STORE(f) uint16_t(bf16_bits(f))
uint bf16_bits(float f)
{
	uint u = floatBitsToUint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (u >> 16) | 0x40u;
	u += 0x7fffu + ((u >> 16) & 1u);
	return u >> 16;
}
#else
#define STYPE float
#define LOAD(v) (v)
#define STORE(f) (f)
#endif
