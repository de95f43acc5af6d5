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
