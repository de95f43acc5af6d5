/* tests/unit/test_dxs_tile.c — linear_coopmat_khr_dx_stream's tiling
 * (daemon/kernels/dxs_tile.h: VKGRAD_DXS_TILE parsed, the tile, the GEMMs
 * it takes) and auto's rule that gives it a narrow layer's 16-bit dX
 * (refine_cmk_dx_stream, daemon/kernels/refine.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "dxs_tile.h"
#include "pipelines.h"
#include "refine.h"
#include "variant.h"

static proto_request job(uint64_t b, uint64_t i, uint64_t o, bool dw, proto_dtype t, proto_variant v)
{
	proto_request q = {.op = PROTO_OP_LINEAR_BACKWARD, .batch = b, .in = i, .out = o, .variant = v, .dtype = t};
	q.t[PROTO_T_X].present = q.t[PROTO_T_DY].present = true;
	q.t[PROTO_T_W].present = q.t[PROTO_T_DX].present = true;
	q.t[PROTO_T_DW].present = q.t[PROTO_T_DB].present = dw;
	return q;
}

static void test_parse(void **state)
{
	(void)state;
	dxs_tile t;
	char err[512];
	assert_int_equal(dxs_tile_parse("4x8x1x16", &t, err, sizeof(err)), 0);
	assert_true(t.on && t.nw == 4 && t.tk == 8 && t.rt == 1 && t.strips == 16);
	assert_int_equal(dxs_tile_bm(&t), 256);
	assert_int_equal(dxs_tile_bn(&t), 64);
	assert_int_equal(dxs_tile_threads(&t), 128);
	/* two stages of 16 rows of 128 16-bit elements, and each subgroup's 16
	 * rows of 16 16-bit elements, every row padded by 16 bytes */
	assert_int_equal(dxs_tile_shared(&t), 2 * 16 * (256 + 16) + 4 * 16 * 48);
	uint32_t v[DXS_SPECS];
	dxs_tile_specs(&t, v);
	const uint32_t want[DXS_SPECS] = {4, 8, 1, 16, 128, 1};
	assert_memory_equal(v, want, sizeof(want));
	/* two strips' loads in flight */
	assert_int_equal(dxs_tile_parse("16x16x2x16x2", &t, err, sizeof(err)), 0);
	assert_true(t.on && t.nw == 16 && t.tk == 16 && t.rt == 2 && t.strips == 16 && t.ahead == 2);
	dxs_tile_specs(&t, v);
	const uint32_t want2[DXS_SPECS] = {16, 16, 2, 16, 512, 2};
	assert_memory_equal(v, want2, sizeof(want2));
	assert_int_equal(dxs_tile_parse("off", &t, err, sizeof(err)), 0);
	assert_false(t.on);
	static const struct {
		const char *s, *fault;
	} bad[] = {{"", "not a list of numbers"}, {"8x16x2", "fewer than 4"}, {"8x16x2x8x1x1", "more than 5"},
		   {"8x16x2x8x3", "AHEAD must be 1 or 2"}, {"8x16x2x8x0", "AHEAD must be 1 or 2"},
		   {"0x16x2x8", "NW must be 1 to 32"}, {"8x0x2x8", "TK must be 1 to 16"},
		   {"8x16x0x8", "RT must be 1 to 4"}, {"8x16x2x0", "STRIPS must be 1 to 64"},
		   {"OFF", "not a list of numbers"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(dxs_tile_parse(bad[i].s, &t, err, sizeof(err)), -1);
		assert_false(t.on);
		assert_non_null(strstr(err, "VKGRAD_DXS_TILE="));
		assert_non_null(strstr(err, bad[i].fault));
		assert_non_null(strstr(err, DXS_TILE_FORM));
	}
}

/* VKGRAD_DXS_TILE's value per class: unset and "on" each class's
 * default, "off" off, a tiling every class's. */
static void test_choose(void **state)
{
	(void)state;
	static const char *const dflt[DXS_CLASSES] = DXS_TILE_DEFAULTS;
	char err[512];
	for (int c = 0; c < DXS_CLASSES; c++) {
		dxs_tile t, want;
		assert_int_equal(dxs_tile_choose("off", c, &t, err, sizeof(err)), 0);
		assert_false(t.on);
		assert_int_equal(dxs_tile_parse(dflt[c], &want, err, sizeof(err)), 0);
		assert_true(want.on);
		assert_int_equal(dxs_tile_choose("on", c, &t, err, sizeof(err)), 0);
		assert_memory_equal(&t, &want, sizeof(t));
		assert_int_equal(dxs_tile_choose(NULL, c, &t, err, sizeof(err)), 0);
		assert_memory_equal(&t, &want, sizeof(t));
		assert_int_equal(dxs_tile_choose("4x16x1x2", c, &t, err, sizeof(err)), 0);
		assert_true(t.on && t.nw == 4 && t.tk == 16 && t.rt == 1 && t.strips == 2);
		assert_int_equal(dxs_tile_choose("On", c, &t, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "the accepted form is on, off, or NWxTKxRTxSTRIPS"));
	}
	/* no such class: unset is off, not a parse of nothing */
	dxs_tile t;
	assert_int_equal(dxs_tile_choose(NULL, DXS_CLASSES, &t, err, sizeof(err)), 0);
	assert_false(t.on);
	/* one tiling per class, joined by commas ("on": the class's default) */
	const char *list = "4x8x2x16x2,off,on";
	assert_int_equal(dxs_tile_choose(list, 0, &t, err, sizeof(err)), 0);
	assert_true(t.on && t.nw == 4 && t.tk == 8 && t.rt == 2 && t.strips == 16 && t.ahead == 2);
	assert_int_equal(dxs_tile_choose(list, 1, &t, err, sizeof(err)), 0);
	assert_false(t.on);
	dxs_tile want;
	assert_int_equal(dxs_tile_choose(list, 2, &t, err, sizeof(err)), 0);
	assert_int_equal(dxs_tile_parse(dflt[2], &want, err, sizeof(err)), 0);
	assert_memory_equal(&t, &want, sizeof(t));
	assert_int_equal(dxs_tile_choose(list, DXS_CLASSES, &t, err, sizeof(err)), 0);
	assert_false(t.on);
	/* two items, four, an empty one, a bad one: refused, naming the form */
	static const struct {
		const char *v, *fault;
	} badl[] = {{"4x8x2x16,8x8x2x16", "not 3 tilings joined by commas"},
		    {"on,on,on,on", "not 3 tilings joined by commas"},
		    {"4x8x2x16,,16x16x2x16", "not a list of numbers"},
		    {"4x8x2x16,8x8x2x16x5,16x16x2x16", "AHEAD must be 1 or 2"}};
	for (size_t i = 0; i < sizeof(badl) / sizeof(badl[0]); i++) {
		int bad = 0;
		for (int c = 0; c < DXS_CLASSES; c++) {
			err[0] = 0;
			if (dxs_tile_choose(badl[i].v, c, &t, err, sizeof(err)) != 0) {
				assert_false(t.on);
				assert_non_null(strstr(err, "VKGRAD_DXS_TILE"));
				assert_non_null(strstr(err, badl[i].fault));
				assert_non_null(strstr(err, DXS_TILE_FORM));
				bad++;
			}
		}
		assert_true(bad > 0);
	}
}

/* m × n = A (m × k) · B (k × n): whole 16-wide blocks, k at most 16·TK,
 * m whole strips of 16·RT rows; off takes nothing. */
static void test_takes(void **state)
{
	(void)state;
	dxs_tile t;
	char err[512];
	assert_int_equal(dxs_tile_parse("8x16x2x8", &t, err, sizeof(err)), 0);
	assert_true(dxs_tile_takes(&t, 262144, 256, 256));
	assert_true(dxs_tile_takes(&t, 32, 16, 16));
	assert_false(dxs_tile_takes(&t, 262144, 256, 272)); /* k > 16·TK */
	assert_false(dxs_tile_takes(&t, 262144, 256, 40));  /* k not whole blocks */
	assert_false(dxs_tile_takes(&t, 262144, 40, 64));   /* n not whole blocks */
	assert_false(dxs_tile_takes(&t, 65552, 64, 64));    /* 16·odd rows: not whole strips of 32 */
	assert_false(dxs_tile_takes(&t, 0, 64, 64));
	assert_int_equal(dxs_tile_parse("8x8x1x8", &t, err, sizeof(err)), 0);
	assert_true(dxs_tile_takes(&t, 65552, 64, 128));
	assert_false(dxs_tile_takes(&t, 65552, 64, 144));
	assert_int_equal(dxs_tile_parse("off", &t, err, sizeof(err)), 0);
	assert_false(dxs_tile_takes(&t, 262144, 256, 256));
	assert_true(dxs_tile_aligned(0, 8, 1u << 20));
	assert_false(dxs_tile_aligned(2, 0, 0));
	assert_false(dxs_tile_aligned(0, 4, 0));
	assert_false(dxs_tile_aligned(0, 0, 1));
}

/* The three classes' default tilings parse, hold their class's K and
 * fit the 48 KiB of shared memory Vulkan devices with the tensor cores
 * offer (the H100's 49,152 bytes). */
static void test_defaults(void **state)
{
	(void)state;
	static const char *const dflt[DXS_CLASSES] = DXS_TILE_DEFAULTS;
	static const uint32_t max_k[DXS_CLASSES] = DXS_CLASS_MAX_K;
	char err[512];
	for (int c = 0; c < DXS_CLASSES; c++) {
		dxs_tile t;
		assert_int_equal(dxs_tile_parse(dflt[c], &t, err, sizeof(err)), 0);
		assert_true(t.on);
		assert_true(dxs_tile_takes(&t, 1048576, 64, max_k[c]));
		assert_true(dxs_tile_shared(&t) <= 49152);
		assert_true(dxs_tile_threads(&t) <= 1024);
	}
	/* the largest class on 16 subgroups: all 256 columns, dY read once */
	dxs_tile l;
	assert_int_equal(dxs_tile_parse(dflt[DXS_CLASSES - 1], &l, err, sizeof(err)), 0);
	assert_int_equal(dxs_tile_bn(&l), 256);
	assert_int_equal(dxs_tile_shared(&l), 46080);
}

/* auto, f16/bf16, a dX on coopmat_khr (either tiling) that a class takes:
 * that class's pipeline (the first that holds out); nothing else changes,
 * and nothing else moves. */
static void test_refine(void **state)
{
	(void)state;
	static const char *const dflt[DXS_CLASSES] = DXS_TILE_DEFAULTS;
	dxs_tile t[DXS_CLASSES];
	char err[512];
	for (int c = 0; c < DXS_CLASSES; c++)
		assert_int_equal(dxs_tile_parse(dflt[c], &t[c], err, sizeof(err)), 0);
	const dxs_tile *const all[DXS_CLASSES] = {&t[0], &t[1], &t[2]};
	const dxs_tile *const none[DXS_CLASSES] = {NULL, NULL, NULL};
	const dxs_tile *const no_small[DXS_CLASSES] = {NULL, &t[1], &t[2]};
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		/* out 256, 128, 64, 16: the class that holds it */
		static const struct {
			uint64_t out;
			int k;
		} cls[] = {{256, KERN_CMK_DXS_L}, {144, KERN_CMK_DXS_L}, {128, KERN_CMK_DXS_M},
			   {80, KERN_CMK_DXS_M},  {64, KERN_CMK_DXS},    {16, KERN_CMK_DXS}};
		for (size_t i = 0; i < sizeof(cls) / sizeof(cls[0]); i++) {
			proto_request q = job(262144, 256, cls[i].out, true, (proto_dtype)dt, PROTO_VARIANT_AUTO);
			variant_plan p = {.param = KERN_CMKS_L, .input = KERN_CMK_DX};
			variant_plan want = p;
			want.input = cls[i].k;
			refine_cmk_dx_stream(&p, &q, all);
			assert_memory_equal(&p, &want, sizeof(p));
			p.input = KERN_CMK_DX_S; /* the small tiling too */
			refine_cmk_dx_stream(&p, &q, all);
			assert_int_equal(p.input, cls[i].k);
			assert_true(pipelines_is_dxs(p.input));
		}
		/* a class without its pipeline: the next that holds out */
		proto_request q = job(262144, 256, 64, true, (proto_dtype)dt, PROTO_VARIANT_AUTO);
		variant_plan p = {.param = KERN_CMKS_L, .input = KERN_CMK_DX};
		refine_cmk_dx_stream(&p, &q, no_small);
		assert_int_equal(p.input, KERN_CMK_DXS_M);
		/* left as they are: no pipeline, forced coopmat_khr, f32, a dX
		 * elsewhere, a shape no class takes */
		q.out = 256;
		const int kept[] = {KERN_CMK_DX, KERN_CMK_DX, KERN_CMK_DX, KERN_NV2_DX, KERN_CMK_DX, KERN_CMK_DX};
		for (int c = 0; c < 6; c++) {
			proto_request r = q;
			if (c == 1)
				r.variant = PROTO_VARIANT_COOPMAT_KHR;
			if (c == 2)
				r.dtype = PROTO_F32;
			if (c == 4)
				r.out = 264;
			if (c == 5)
				r.batch = 65552; /* 16·odd rows: no whole strips of 32 */
			variant_plan x = {.param = KERN_CMKS_L, .input = kept[c]};
			const variant_plan before = x;
			refine_cmk_dx_stream(&x, &r, c == 0 ? none : all);
			assert_memory_equal(&x, &before, sizeof(x));
		}
		/* the fused plan (dX beside dW) stays fused */
		variant_plan f = {.param = KERN_CMKS_DX, .input = KERN_CMKS_DX};
		const variant_plan fb = f;
		refine_cmk_dx_stream(&f, &q, all);
		assert_memory_equal(&f, &fb, sizeof(f));
	}
	/* what the rules give a wide narrow 16-bit layer's dX on a device with
	 * the tensor cores, then this pass: the new kernel */
	proto_request q = job(1048576, 128, 128, true, PROTO_BF16, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, VARIANT_HAS_CMK | VARIANT_HAS_CMKS | VARIANT_HAS_NARROW);
	assert_int_equal(p.input, KERN_CMK_DX);
	refine_cmk_dx_stream(&p, &q, all);
	assert_int_equal(p.input, KERN_CMK_DXS_M);
	assert_int_equal(pipelines_dxs_class(p.input), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_takes),
		cmocka_unit_test(test_choose),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_refine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
