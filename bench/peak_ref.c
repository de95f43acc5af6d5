/* bench/peak_ref.c — see peak_ref.h. */
#include "peak_ref.h"

#include <math.h>

uint32_t peak_fma_max_iters(uint32_t chains, uint32_t unroll)
{
	if (!chains || !unroll)
		return 0;
	/* 4·chains·(255 + iters·unroll) <= 2^24 - 1 */
	const double per = (PEAK_EXACT_LIMIT - 1.0) / (4.0 * chains) - 255.0;
	if (per < unroll)
		return 0;
	const double it = floor(per / unroll);
	return it > UINT32_MAX ? UINT32_MAX : (uint32_t)it;
}

double peak_fma_expect(uint32_t t, uint32_t chains, uint32_t unroll, uint32_t iters)
{
	double s = 0;
	for (uint32_t c = 0; c < chains; c++)
		for (uint32_t j = 0; j < 4; j++)
			s += (double)((t + 4u * c + j) & 255u) + (double)iters * unroll;
	return s;
}

/* values in [-2, 2] and [-4, 4], different per fragment and accumulator */
double peak_mma_a(const peak_mma_geom *g, uint32_t f, uint32_t row, uint32_t col)
{
	(void)g;
	return (double)((row * 3u + col * 5u + f * 7u) % 5u) - 2.0;
}

double peak_mma_b(const peak_mma_geom *g, uint32_t f, uint32_t row, uint32_t col)
{
	(void)g;
	return (double)((row * 7u + col * 3u + f * 11u + 1u) % 5u) - 2.0;
}

double peak_mma_init(const peak_mma_geom *g, uint32_t i, uint32_t row, uint32_t col)
{
	(void)g;
	return (double)((i * 13u + row * 5u + col * 3u) % 9u) - 4.0;
}

/* A_fa · B_fb at (row, col) */
static double product(const peak_mma_geom *g, uint32_t fa, uint32_t fb, uint32_t row, uint32_t col)
{
	double s = 0;
	for (uint32_t k = 0; k < g->k; k++)
		s += peak_mma_a(g, fa, row, k) * peak_mma_b(g, fb, k, col);
	return s;
}

uint32_t peak_mma_max_iters(const peak_mma_geom *g)
{
	if (!g->m || !g->n || !g->k || !g->fa || !g->fb || !g->steps)
		return 0;
	/* each multiply-add's own products and sums: |a·b| summed over k */
	double worst_step = 0, worst_init = 0, worst_k = 0;
	for (uint32_t i = 0; i < g->fa * g->fb; i++)
		for (uint32_t r = 0; r < g->m; r++)
			for (uint32_t c = 0; c < g->n; c++) {
				double p = fabs(product(g, i / g->fb, i % g->fb, r, c));
				double q = 0;
				for (uint32_t k = 0; k < g->k; k++)
					q += fabs(peak_mma_a(g, i / g->fb, r, k) * peak_mma_b(g, i % g->fb, k, c));
				worst_step = fmax(worst_step, p);
				worst_k = fmax(worst_k, q);
				worst_init = fmax(worst_init, fabs(peak_mma_init(g, i, r, c)));
			}
	/* any partial sum is at most |init| + (steps done)·worst_step plus
	 * one step's partial products: below 2^24 */
	const double room = PEAK_EXACT_LIMIT - 1.0 - worst_init - worst_k;
	if (room < 0)
		return 0;
	if (worst_step == 0)
		return UINT32_MAX;
	const double it = floor(room / (worst_step * g->steps));
	return it > UINT32_MAX ? UINT32_MAX : (uint32_t)it;
}

void peak_mma_expect(const peak_mma_geom *g, uint32_t i, uint32_t iters, double *out)
{
	const uint32_t fa = i / g->fb, fb = i % g->fb;
	for (uint32_t r = 0; r < g->m; r++)
		for (uint32_t c = 0; c < g->n; c++)
			out[r * g->n + c] = peak_mma_init(g, i, r, c) +
					    (double)iters * g->steps * product(g, fa, fb, r, c);
}

double peak_nv2_a(uint32_t row, uint32_t col)
{
	return (double)((row * 3u + col * 2u) % 5u) - 2.0;
}

double peak_nv2_b(uint32_t row, uint32_t col)
{
	return (double)((row * 4u + col * 3u + 1u) % 7u) - 3.0;
}

double peak_nv2_init(uint32_t row, uint32_t col)
{
	return (double)((row * 5u + col * 3u) % 9u) - 4.0;
}

/* Over one trip at (row, col): *p = the sum of its products (steps/slices
 * times Σ_s A_s·B_s), *q = the sum of their magnitudes. */
static void nv2_trip(const peak_nv2_geom *g, uint32_t row, uint32_t col, double *p, double *q)
{
	double s = 0, a = 0;
	for (uint32_t k = 0; k < g->slices * g->k; k++) {
		const double x = peak_nv2_a(row, k) * peak_nv2_b(k, col);
		s += x;
		a += fabs(x);
	}
	*p = s * (g->steps / g->slices);
	*q = a * (g->steps / g->slices);
}

uint32_t peak_nv2_max_iters(const peak_nv2_geom *g)
{
	if (!g->m || !g->n || !g->k || !g->slices || !g->steps || g->steps % g->slices)
		return 0;
	double worst_trip = 0, worst_abs = 0, worst_init = 0;
	for (uint32_t r = 0; r < g->m; r++)
		for (uint32_t c = 0; c < g->n; c++) {
			double p, q;
			nv2_trip(g, r, c, &p, &q);
			worst_trip = fmax(worst_trip, fabs(p));
			worst_abs = fmax(worst_abs, q);
			worst_init = fmax(worst_init, fabs(peak_nv2_init(r, c)));
		}
	/* a partial sum inside trip t+1 is at most |init| + t·|trip| plus the
	 * magnitudes of one trip's products: below 2^24 for t < iters */
	const double room = PEAK_EXACT_LIMIT - 1.0 - worst_init - worst_abs;
	if (room < 0)
		return 0;
	if (worst_trip == 0)
		return UINT32_MAX;
	const double it = floor(room / worst_trip) + 1.0;
	return it > UINT32_MAX ? UINT32_MAX : (uint32_t)it;
}

void peak_nv2_expect(const peak_nv2_geom *g, uint32_t iters, double *out)
{
	for (uint32_t r = 0; r < g->m; r++)
		for (uint32_t c = 0; c < g->n; c++) {
			double p, q;
			nv2_trip(g, r, c, &p, &q);
			out[(uint64_t)r * g->n + c] = peak_nv2_init(r, c) + (double)iters * p;
		}
}

void peak_check_run(peak_check *c, const float *got, uint64_t n, const double *want, uint64_t period,
		    double max_want)
{
	const double den = max_want > 0 ? max_want : 1.0;
	for (uint64_t i = 0; i < n; i++) {
		const double w = want[i % period], v = got[i];
		if (v == w)
			continue;
		if (c->mismatches++ == 0)
			c->first_bad = i;
		const double e = fabs(v - w) / den;
		if (isnan(e))
			c->max_rel_err = NAN;
		else if (!isnan(c->max_rel_err) && e > c->max_rel_err)
			c->max_rel_err = e;
	}
}

/* ---- the copy line ---- */

/* A 32-bit mix (lowbias32) of the word index, its high half folded in. */
static uint32_t copy_word(uint64_t w)
{
	uint32_t x = (uint32_t)w ^ (uint32_t)(w >> 32) * 0x9e3779b9u;
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

void peak_copy_pattern(uint64_t off, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const uint64_t o = off + i;
		p[i] = (uint8_t)(copy_word(o >> 2) >> (8 * (o & 3)));
	}
}

size_t peak_copy_check(uint64_t off, const uint8_t *p, size_t n, size_t *first)
{
	size_t bad = 0;
	*first = n;
	for (size_t i = 0; i < n; i++) {
		const uint64_t o = off + i;
		if (p[i] != (uint8_t)(copy_word(o >> 2) >> (8 * (o & 3)))) {
			if (!bad)
				*first = i;
			bad++;
		}
	}
	return bad;
}
