/* tests/unit/test_dispatch_units.c — the kernel each unit of a job's plan
 * records (daemon/kernels/record_priv.h: dispatch_unit_kernel). A job
 * recorded whole runs UNIT_BOTH where its plan fuses dX into the dW pass;
 * one recorded a unit at a time (a streamed job's dW pass and dX chunks)
 * runs the fused plan's parts unfused: dW/db on the fused kernel's tiling
 * without dX, dX on coopmat_khr. Split-K's tilings and the other families
 * record their own kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pipelines.h"
#include "record_priv.h"

static job with_plan(int param, int input)
{
	job j;
	memset(&j, 0, sizeof(j));
	j.plan = (variant_plan){.param = param, .input = input, .slices = 1, .min_slices = 1, .dx_slices = 1};
	return j;
}

static void test_fused_plans(void **state)
{
	(void)state;
	job j = with_plan(KERN_CMKS_DX, KERN_CMKS_DX);
	assert_true(variant_dx_fused(&j.plan));
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_BOTH), KERN_CMKS_DX);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_PARAM), KERN_CMK_SPLITK);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_INPUT), KERN_CMK_DX);
	/* the 32x32 tiles: dW/db alone on the same tiling */
	j = with_plan(KERN_CMKS_DX_S, KERN_CMKS_DX_S);
	assert_true(variant_dx_fused(&j.plan));
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_BOTH), KERN_CMKS_DX_S);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_PARAM), KERN_CMKS_S);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_INPUT), KERN_CMK_DX);
	assert_int_equal(pipelines_cmks_side(KERN_CMKS_DX_S), pipelines_cmks_side(KERN_CMKS_S));
	assert_int_equal(pipelines_cmks_side(KERN_CMKS_DX), pipelines_cmks_side(KERN_CMK_SPLITK));
}

static void test_split_k_tilings_and_others(void **state)
{
	(void)state;
	static const int param[] = {KERN_CMK_SPLITK, KERN_CMKS_L, KERN_CMKS_S, KERN_SPLITK, KERN_SPLITK128,
				    KERN_NARROW, KERN_TILED};
	for (size_t i = 0; i < sizeof(param) / sizeof(param[0]); i++) {
		job j = with_plan(param[i], KERN_NARROW_DX);
		assert_false(variant_dx_fused(&j.plan));
		assert_int_equal(dispatch_unit_kernel(&j, UNIT_PARAM), param[i]);
		assert_int_equal(dispatch_unit_kernel(&j, UNIT_INPUT), KERN_NARROW_DX);
	}
	assert_int_equal(pipelines_cmks_side(KERN_CMKS_L), 128);
	assert_int_equal(pipelines_cmks_side(KERN_CMK_SPLITK), 64);
	assert_int_equal(pipelines_cmks_side(KERN_CMKS_S), 32);
	/* the seed kernels, and no part */
	job j = with_plan(KERN_PARAM, KERN_INPUT);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_PARAM), KERN_PARAM);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_INPUT), KERN_INPUT);
	j = with_plan(-1, -1);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_PARAM), KERN_PARAM);
	assert_int_equal(dispatch_unit_kernel(&j, UNIT_INPUT), KERN_INPUT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fused_plans),
		cmocka_unit_test(test_split_k_tilings_and_others),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
