/* tests/unit/test_variant.c — the kernel selection table (daemon/variant.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pipelines.h"
#include "variant.h"

static proto_request job(uint64_t b, uint64_t i, uint64_t o, bool dw, bool db, bool dx,
			 proto_variant v)
{
	proto_request q = {.op = PROTO_OP_LINEAR_BACKWARD, .batch = b, .in = i, .out = o,
			   .variant = v};
	q.t[PROTO_T_X].present = q.t[PROTO_T_DY].present = true;
	q.t[PROTO_T_W].present = dx;
	q.t[PROTO_T_DW].present = dw;
	q.t[PROTO_T_DB].present = db;
	q.t[PROTO_T_DX].present = dx;
	return q;
}

static void test_narrow_layers_use_the_row_parallel_kernel(void **state)
{
	(void)state;
	proto_request q = job(2048, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, KERN_TILED); /* measured: 681 µs vs 854 all-generic */
	q = job(1024, 4096, 64, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED); /* batch too small for split-K */
	assert_int_equal(p.input, KERN_TILED128); /* 8x32 tiles of 128x128 */;
	q = job(2048, 1024, 8, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, KERN_INPUT); /* out < 16 */
	q = job(4096, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK); /* 16 tiles, 4 slices of 1024 rows */
	assert_int_equal(p.slices, 4);
}

static void test_thresholds_at_the_tile_edge(void **state)
{
	(void)state;
	/* dW: out >= 32, in >= 64, batch*in >= 2^20 (with 128+ output tiles,
	 * so split-K does not take it) */
	proto_request q = job(1024, 1024, 512, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED);
	q = job(1024, 8192, 31, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	q = job(16384, 63, 8192, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	q = job(1023, 1024, 1024, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM); /* batch*in just below 2^20 */
	/* dX: batch >= 64, in >= 64, out >= 16, batch*in >= 2^20 */
	q = job(16384, 64, 16, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_TILED);
	q = job(16384, 64, 15, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT);
	q = job(16384, 63, 16, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT);
	q = job(63, 1u << 15, 16, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT);
	q = job(256, 256, 16, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT); /* small: generic measured faster */
}

static void test_bias_alone_is_one_pass_over_dy(void **state)
{
	(void)state;
	proto_request q = job(8192, 4096, 4096, false, true, false, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, -1);
}

static void test_forced_variants(void **state)
{
	(void)state;
	proto_request q = job(1, 1, 1, true, true, true, PROTO_VARIANT_TILED);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED);
	assert_int_equal(p.input, KERN_TILED);
	q = job(4096, 4096, 4096, true, true, true, PROTO_VARIANT_GENERIC);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, KERN_INPUT);
	q = job(4096, 4096, 4096, false, false, true, PROTO_VARIANT_GENERIC);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, -1);
}

static void test_splitk_for_tall_skinny(void **state)
{
	(void)state;
	/* 1 tile, batch 16384: S = min(64, 256/1, 16384/1024) = 16 */
	proto_request q = job(16384, 64, 32, true, true, false, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 16);
	/* 8192x4096x32: 64 tiles, S = min(64, 4, 8) = 4 */
	q = job(8192, 4096, 32, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 4);
	assert_int_equal(p.input, KERN_TILED128);
	/* edges: batch 4095 is below 4 slices of 1024; 128 tiles is enough */
	q = job(4095, 64, 32, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_not_equal(variant_choose(&q, false).param, KERN_SPLITK);
	q = job(4096, 64, 32, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_SPLITK);
	q = job(65536, 64 * 16, 64 * 8, true, false, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED);
	q = job(65536, 64 * 127, 64, true, false, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 3); /* ceil(256 / 127) */
	/* db alone never splits */
	q = job(1u << 20, 64, 32, false, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	/* forced: batch / 16 slices, 1..64 */
	q = job(1, 1, 1, true, true, true, PROTO_VARIANT_SPLITK);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 1);
	assert_int_equal(p.input, KERN_TILED);
	q = job(33, 1, 1, true, false, false, PROTO_VARIANT_SPLITK);
	assert_int_equal(variant_choose(&q, false).slices, 2);
	q = job(1u << 20, 1, 1, true, false, false, PROTO_VARIANT_SPLITK);
	assert_int_equal(variant_choose(&q, false).slices, 64);
	/* scratch: S * (out*in + out) f32 */
	assert_int_equal(variant_splitk_elems(&q, 64), 64 * 2);
}

static void test_coopmat_where_the_device_has_it(void **state)
{
	(void)state;
	proto_request q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F16;
	variant_plan p = variant_choose(&q, true);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
	p = variant_choose(&q, false); /* no cooperative matrices: plain kernels */
	assert_int_equal(p.param, KERN_TILED128);
	assert_int_equal(p.input, KERN_TILED128);
	/* edges: 64 everywhere, batch 256 for dW */
	q = job(256, 64, 64, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, true);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
	q = job(255, 64, 63, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, true);
	assert_int_not_equal(p.param, KERN_COOPMAT);
	assert_int_not_equal(p.input, KERN_COOPMAT);
	/* forced: dW and dX on it; db alone by the row-parallel kernel */
	q = job(1, 1, 1, true, true, true, PROTO_VARIANT_COOPMAT);
	p = variant_choose(&q, true);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
	q = job(1, 1, 1, false, true, false, PROTO_VARIANT_COOPMAT);
	assert_int_equal(variant_choose(&q, true).param, KERN_PARAM);
}

static void test_tiled128_for_big_outputs(void **state)
{
	(void)state;
	/* auto: both sides >= 128 and >= 132 tiles of 128x128 */
	proto_request q = job(4096, 12 * 128, 11 * 128, true, false, true, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED128); /* 11 x 12 = 132 tiles */
	assert_int_equal(p.input, KERN_TILED128); /* 32 x 12 */
	q = job(4096, 12 * 128, 11 * 128 - 1, true, false, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED128); /* still 11 x 12 */
	q = job(4096, 12 * 128, 10 * 128, true, false, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED); /* 120 tiles */
	/* forced tiled: both sides >= 128 is enough */
	q = job(300, 130, 129, true, true, true, PROTO_VARIANT_TILED);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED128);
	assert_int_equal(p.input, KERN_TILED128);
	q = job(300, 130, 127, true, true, true, PROTO_VARIANT_TILED);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED);    /* out < 128 */
	assert_int_equal(p.input, KERN_TILED128); /* 300 x 130 */
	q = job(127, 130, 129, false, false, true, PROTO_VARIANT_TILED);
	assert_int_equal(variant_choose(&q, false).input, KERN_TILED);
	/* db alone never goes tiled */
	q = job(4096, 4096, 4096, false, true, false, PROTO_VARIANT_TILED);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED);
}

static void test_variant_names_round_trip(void **state)
{
	(void)state;
	for (int v = 0; v < PROTO_VARIANT_COUNT; v++)
		assert_int_equal(proto_variant_parse(proto_variant_name((proto_variant)v)), v);
	assert_int_equal(proto_variant_parse("tiled64"), -1);
	assert_int_equal(proto_variant_parse(""), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_narrow_layers_use_the_row_parallel_kernel),
		cmocka_unit_test(test_thresholds_at_the_tile_edge),
		cmocka_unit_test(test_bias_alone_is_one_pass_over_dy),
		cmocka_unit_test(test_forced_variants),
		cmocka_unit_test(test_splitk_for_tall_skinny),
		cmocka_unit_test(test_coopmat_where_the_device_has_it),
		cmocka_unit_test(test_tiled128_for_big_outputs),
		cmocka_unit_test(test_variant_names_round_trip),
	};
	return cmocka_run_group_tests_name("variant", tests, NULL, NULL);
}
