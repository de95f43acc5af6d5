/* client/ref.c — see ref.h. Loops are ordered so the innermost one walks
 * contiguous rows (x, w, dw, dx), which lets the compiler vectorise it;
 * 512×512×512 takes a fraction of a second. */
#include "ref.h"

#include <math.h>
#include <string.h>

void vkg_ref_linear_backward(uint64_t batch, uint64_t in, uint64_t out, const float *x,
			     const float *dy, const float *w, double *dw, double *db,
			     double *dx)
{
	if (dw) {
		memset(dw, 0, (size_t)(out * in) * sizeof(*dw));
		/* dw[o][:] += dy[b][o] * x[b][:] for every row b */
		for (uint64_t b = 0; b < batch; b++) {
			const float *xr = x + b * in;
			for (uint64_t o = 0; o < out; o++) {
				const double g = dy[b * out + o];
				if (g == 0.0)
					continue;
				double *d = dw + o * in;
				for (uint64_t i = 0; i < in; i++)
					d[i] += g * (double)xr[i];
			}
		}
	}
	if (db) {
		memset(db, 0, (size_t)out * sizeof(*db));
		for (uint64_t b = 0; b < batch; b++)
			for (uint64_t o = 0; o < out; o++)
				db[o] += (double)dy[b * out + o];
	}
	if (dx && w) {
		memset(dx, 0, (size_t)(batch * in) * sizeof(*dx));
		/* dx[b][:] += dy[b][o] * w[o][:] for every o */
		for (uint64_t b = 0; b < batch; b++) {
			double *d = dx + b * in;
			for (uint64_t o = 0; o < out; o++) {
				const double g = dy[b * out + o];
				if (g == 0.0)
					continue;
				const float *wr = w + o * in;
				for (uint64_t i = 0; i < in; i++)
					d[i] += g * (double)wr[i];
			}
		}
	}
}

double vkg_ref_act(proto_activation a, double x)
{
	if (a == PROTO_ACT_RELU)
		return x <= 0 ? 0 : x; /* (NaN stays NaN) */
	if (a == PROTO_ACT_GELU)
		return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
	return x;
}

double vkg_ref_act_grad(proto_activation a, double v)
{
	if (a == PROTO_ACT_RELU)
		return v <= 0 ? 0 : 1;
	if (a == PROTO_ACT_GELU) {
		const double k = 0.7978845608028654, c = 0.044715;
		const double t = tanh(k * (v + c * v * v * v));
		return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
	}
	return 1;
}

double vkg_ref_max_rel_err(const float *got, const double *want, const double *base,
			   size_t n)
{
	double max_diff = 0, max_ref = 0;
	for (size_t i = 0; i < n; i++) {
		const double t = want[i] + (base ? base[i] : 0.0);
		const double g = got[i];
		if (!isfinite(g))
			return INFINITY;
		const double d = fabs(g - t);
		if (d > max_diff)
			max_diff = d;
		if (fabs(t) > max_ref)
			max_ref = fabs(t);
	}
	return max_ref > 0 ? max_diff / max_ref : max_diff;
}

/* ---- storage dtypes ------------------------------------------------------ */

uint16_t vkg_ref_f16_from_float(float f)
{
	/* the compiler's conversion rounds to nearest even, as the GPU's does */
	_Float16 h = (_Float16)f;
	uint16_t u;
	memcpy(&u, &h, sizeof(u));
	return u;
}

float vkg_ref_f16_to_float(uint16_t v)
{
	_Float16 h;
	memcpy(&h, &v, sizeof(h));
	return (float)h;
}

uint16_t vkg_ref_bf16_from_float(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	/* NaN: keep the sign and the top of the payload, force it quiet (the
	 * rounding below could carry a NaN into infinity) */
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	/* round to nearest, ties to the even upper half */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float vkg_ref_bf16_to_float(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

void vkg_ref_store(proto_dtype d, void *dst, const float *src, size_t n)
{
	uint16_t *h = dst;
	switch (d) {
	case PROTO_F16:
		for (size_t i = 0; i < n; i++)
			h[i] = vkg_ref_f16_from_float(src[i]);
		break;
	case PROTO_BF16:
		for (size_t i = 0; i < n; i++)
			h[i] = vkg_ref_bf16_from_float(src[i]);
		break;
	default:
		memmove(dst, src, n * sizeof(float));
		break;
	}
}

void vkg_ref_load(proto_dtype d, float *dst, const void *src, size_t n)
{
	const uint16_t *h = src;
	switch (d) {
	case PROTO_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = vkg_ref_f16_to_float(h[i]);
		break;
	case PROTO_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = vkg_ref_bf16_to_float(h[i]);
		break;
	default:
		memmove(dst, src, n * sizeof(float));
		break;
	}
}

double vkg_ref_load_one(proto_dtype d, const void *src, size_t i)
{
	switch (d) {
	case PROTO_F16: return vkg_ref_f16_to_float(((const uint16_t *)src)[i]);
	case PROTO_BF16: return vkg_ref_bf16_to_float(((const uint16_t *)src)[i]);
	default: return ((const float *)src)[i];
	}
}

double vkg_ref_tolerance(proto_dtype d)
{
	switch (d) {
	case PROTO_F16: return VKG_REF_TOL_F16;
	case PROTO_BF16: return VKG_REF_TOL_BF16;
	default: return VKG_REF_TOL_F32;
	}
}

const char *vkg_ref_tolerance_text(proto_dtype d)
{
	switch (d) {
	case PROTO_F16: return "2e-3";
	case PROTO_BF16: return "1e-2";
	default: return "1e-4";
	}
}
