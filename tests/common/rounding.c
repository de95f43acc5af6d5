/* tests/common/rounding.c — see rounding.h. */
#include "rounding.h"

#include <math.h>

bool rounding_missed(double got, double want, double abs_sum, bool bf16)
{
	if (want == 0)
		return false;
	const double half_ulp = ldexp(1.0, ilogb(fabs(want)) - (bf16 ? 8 : 11));
	return fabs(got - want) > half_ulp + ldexp(abs_sum, -16);
}
