/* daemon/kernels/tilespec.c — see tilespec.h. */
#include "tilespec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

unsigned tilespec_numbers(const char *s, uint32_t *v, unsigned min, unsigned max, char *fault,
			  size_t faultlen)
{
	unsigned n = 0;
	const char *p = s ? s : "";
	for (;;) {
		char *end = NULL;
		if (*p < '0' || *p > '9') {
			snprintf(fault, faultlen, "not a list of numbers joined by 'x'");
			return 0;
		}
		errno = 0;
		const unsigned long x = strtoul(p, &end, 10);
		if (errno || x > 4096 || n >= max) {
			if (n >= max)
				snprintf(fault, faultlen, "more than %u numbers", max);
			else
				snprintf(fault, faultlen, "a number above 4096");
			return 0;
		}
		v[n++] = (uint32_t)x;
		if (*end == 0)
			break;
		if (*end != 'x') {
			snprintf(fault, faultlen, "not a list of numbers joined by 'x'");
			return 0;
		}
		p = end + 1;
	}
	if (n < min) {
		snprintf(fault, faultlen, "fewer than %u numbers", min);
		return 0;
	}
	return n;
}
