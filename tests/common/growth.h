/* tests/common/growth.h — does a series of samples grow? Pure arithmetic,
 * no I/O: the judge behind tests/common/leakcheck.h and scripts/soak.sh's
 * verdict (the same rule, see there), unit-tested in tests/unit/test_growth.c.
 *
 * The samples y[0..n) are one measure (RSS in KiB, open descriptors) taken
 * after each of n identical cycles of work, after a warm-up. A leak adds
 * about the same amount every cycle; what is not a leak adds once (a cache
 * filled, a malloc arena made, a driver's lazy state) or goes up and down
 * (pages trimmed and touched again). Two robust slopes tell them apart:
 *
 *  - step:   the median of the n-1 successive differences y[i+1] - y[i].
 *            A steady leak makes most steps positive; a one-off jump is one
 *            step of n-1 and does not move the median; a spike is two.
 *  - halves: (median of the last h samples - median of the first h) / (n-h),
 *            h = n/2: the rise between the two halves per cycle. A sawtooth
 *            whose small rises are undone by a drop has a positive median
 *            step but flat halves.
 *
 * The series grows when BOTH exceed the bound per cycle. The least-squares
 * slope is reported too (what a reader expects to see), not judged: one
 * outlier moves it. */
#ifndef VKG_TEST_GROWTH_H
#define VKG_TEST_GROWTH_H

#include <stdbool.h>
#include <stddef.h>

/* The fewest samples growth_fit accepts: 3 steps, halves of 2. */
#define GROWTH_MIN_SAMPLES 4
/* The most (the medians sort a copy on the stack). */
#define GROWTH_MAX_SAMPLES 4096

typedef struct growth_fit {
	size_t n;            /* samples */
	double first, last;  /* y[0], y[n-1] */
	double step;         /* median successive difference, per cycle */
	double halves;       /* rise between the halves' medians, per cycle */
	double lsq;          /* least-squares slope, per cycle (reported only) */
} growth_fit;

/* Fit y[0..n). Returns 0, or -EINVAL when n is outside
 * [GROWTH_MIN_SAMPLES, GROWTH_MAX_SAMPLES] or a sample is not finite. */
int growth_fit_series(const double *y, size_t n, growth_fit *f);
/* True when both robust slopes exceed max_per_cycle (see above). */
bool growth_grows(const growth_fit *f, double max_per_cycle);
/* "n 8, 1000 -> 1090, step +12.0/cycle, halves +11.5/cycle, lsq +12.3/cycle"
 * into buf (unit: e.g. "KiB"); returns buf. */
const char *growth_describe(const growth_fit *f, const char *unit, char *buf, size_t n);

#endif
