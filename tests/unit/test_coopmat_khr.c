/* tests/unit/test_coopmat_khr.c — daemon/kernels/coopmat_khr.h (which matrix shape
 * linear_coopmat_khr_gemm takes from the device's list) and the tilings'
 * shared-memory sizes (pipelines_cmk_shared), as the shader lays them out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "coopmat_khr.h"
#include "pipelines.h"

static void test_shape_fits(void **state)
{
	(void)state;
	assert_true(cmk_shape_fits((cmk_shape){16, 16, 16}));
	assert_true(cmk_shape_fits((cmk_shape){16, 8, 16}));
	assert_true(cmk_shape_fits((cmk_shape){16, 8, 8}));
	assert_true(cmk_shape_fits((cmk_shape){32, 32, 32}));
	assert_false(cmk_shape_fits((cmk_shape){16, 16, 64}));  /* k step of 32 */
	assert_false(cmk_shape_fits((cmk_shape){48, 16, 16}));  /* 64-row blocks */
	assert_false(cmk_shape_fits((cmk_shape){16, 16, 4}));   /* 16-byte rows */
	assert_false(cmk_shape_fits((cmk_shape){0, 16, 16}));
	assert_false(cmk_shape_fits((cmk_shape){128, 16, 16}));
}

static void test_pick(void **state)
{
	(void)state;
	/* the H200's f16 list, in its order: 16x16x16 wins wherever it is */
	const cmk_shape h200[] = {{16, 8, 16}, {16, 8, 8}, {16, 16, 16}};
	assert_int_equal(cmk_pick(h200, 3), 2);
	/* else the most work per product among those that fit */
	const cmk_shape other[] = {{16, 8, 8}, {16, 16, 64}, {16, 8, 16}, {8, 8, 8}};
	assert_int_equal(cmk_pick(other, 4), 2);
	/* none that fits: -1 (the daemon then refuses coopmat_khr, naming it) */
	const cmk_shape none[] = {{16, 16, 64}, {48, 48, 16}};
	assert_int_equal(cmk_pick(none, 2), -1);
	assert_int_equal(cmk_pick(NULL, 0), -1);
}

static pipelines_cmk_tile tile(uint32_t wm_, uint32_t wn_, uint32_t wm, uint32_t wn, uint32_t bk,
			       uint32_t depth)
{
	return (pipelines_cmk_tile){wm_, wn_, wm, wn, bk, depth};
}

static void test_shared_bytes(void **state)
{
	(void)state;
	const cmk_shape s = {16, 16, 16};
	/* the large tiling: two stages of A (32 rows of 128+8 f16 as [k][m], or
	 * 128 rows of 32+8 as [m][k]) and B (32 rows of 128+8); the H200's
	 * driver reported 34816 and 37888 bytes for these pipelines */
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 64, 64, 32, 1), s, true), 34816);
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 64, 64, 32, 1), s, false), 37888);
	/* the small tiling: the epilogue's staging (16 subgroups x 16 rows of
	 * 32+4 f32) is the larger for dW (36864, as the driver said) */
	assert_int_equal(pipelines_cmk_shared(tile(4, 4, 32, 32, 32, 1), s, true), 36864);
	assert_int_equal(pipelines_cmk_shared(tile(4, 4, 32, 32, 32, 1), s, false), 37888);
	/* k steps of 16: half the stages */
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 64, 64, 16, 2), s, true), 17408);
	/* tilings the shader cannot run: 0 */
	assert_int_equal(pipelines_cmk_shared(tile(4, 4, 32, 32, 16, 2), s, true), 0); /* < 1 vector each */
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 64, 64, 32, 3), s, true), 0); /* depth */
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 48, 64, 32, 1), s, true), 0);
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 64, 64, 8, 1), s, true), 0);  /* bk < k */
	assert_int_equal(pipelines_cmk_shared(tile(8, 8, 64, 64, 32, 1), s, true), 0); /* 2048 threads */
	assert_int_equal(pipelines_cmk_shared(tile(0, 2, 64, 64, 32, 1), s, true), 0);
	assert_int_equal(pipelines_cmk_shared(tile(2, 2, 64, 64, 32, 1), (cmk_shape){0, 0, 0}, true), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shape_fits),
		cmocka_unit_test(test_pick),
		cmocka_unit_test(test_shared_bytes),
	};
	return cmocka_run_group_tests_name("coopmat_khr", tests, NULL, NULL);
}
