/* tests/common/lregion.c — see lregion.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lregion.h"

void lregion_make(vkg_client *c, lregion *r, uint64_t batch, uint64_t in, uint64_t out, bool acc,
		  uint64_t seed)
{
	vkg_error err;
	jobcase_init(&r->jc, batch, in, out, JC_ALL, acc);
	r->map = vkg_region_create(c, r->jc.size[0], &r->id, &err);
	if (!r->map)
		fail_msg("region: %s: %s", err.code, err.message);
	assert_int_equal(jobcase_fill(&r->jc, &r->map, seed), 0);
}

void lregion_job_ok(vkg_client *c, lregion *r, const char *what)
{
	vkg_error err;
	vkg_result res;
	vkg_job j = jobcase_job(&r->jc, &r->id);
	if (vkg_linear_backward(c, &j, &res, &err) != 0)
		fail_msg("%s: %s: %s", what, err.code, err.message);
	char why[320];
	if (jobcase_check(&r->jc, &r->map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("%s: %s", what, why);
}

void lregion_free(vkg_client *c, lregion *r)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(c, r->id, r->map, r->jc.size[0], &err), 0);
	jobcase_free(&r->jc);
}
