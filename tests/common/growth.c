/* tests/common/growth.c — see growth.h. */
#include "growth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of v[0..n), n >= 1; sorts v. */
static double median_inplace(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static double median_of(const double *y, size_t n)
{
	double tmp[GROWTH_MAX_SAMPLES];
	memcpy(tmp, y, n * sizeof(*y));
	return median_inplace(tmp, n);
}

static double lsq_slope(const double *y, size_t n)
{
	double mx = (double)(n - 1) / 2.0, my = 0;
	for (size_t i = 0; i < n; i++)
		my += y[i];
	my /= (double)n;
	double sxy = 0, sxx = 0;
	for (size_t i = 0; i < n; i++) {
		double dx = (double)i - mx;
		sxy += dx * (y[i] - my);
		sxx += dx * dx;
	}
	return sxy / sxx;
}

int growth_fit_series(const double *y, size_t n, growth_fit *f)
{
	if (n < GROWTH_MIN_SAMPLES || n > GROWTH_MAX_SAMPLES)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(y[i]))
			return -EINVAL;
	double d[GROWTH_MAX_SAMPLES];
	for (size_t i = 0; i + 1 < n; i++)
		d[i] = y[i + 1] - y[i];
	size_t h = n / 2;
	f->n = n;
	f->first = y[0];
	f->last = y[n - 1];
	f->step = median_inplace(d, n - 1);
	f->halves = (median_of(y + n - h, h) - median_of(y, h)) / (double)(n - h);
	f->lsq = lsq_slope(y, n);
	return 0;
}

bool growth_grows(const growth_fit *f, double max_per_cycle)
{
	return f->step > max_per_cycle && f->halves > max_per_cycle;
}

const char *growth_describe(const growth_fit *f, const char *unit, char *buf, size_t n)
{
	snprintf(buf, n,
		 "%zu samples, %.0f -> %.0f %s, median step %+.1f/cycle, halves %+.1f/cycle, "
		 "least squares %+.1f/cycle",
		 f->n, f->first, f->last, unit, f->step, f->halves, f->lsq);
	return buf;
}
