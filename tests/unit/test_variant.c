/* tests/unit/test_variant.c — the kernel selection table (daemon/kernels/variant.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pipelines.h"
#include "refine.h"
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

/* A pass run after variant_choose(q, caps) that must leave q's plan as
 * the rules made it, byte for byte; returns the plan. */
static variant_plan pass_leaves(void (*pass)(variant_plan *, const proto_request *), const proto_request *q,
				unsigned caps)
{
	variant_plan p = variant_choose(q, caps);
	const variant_plan before = p;
	pass(&p, q);
	assert_memory_equal(&p, &before, sizeof(p));
	return p;
}

static void test_narrow_layers(void **state)
{
	(void)state;
	/* measured on the H200 with tensors in device memory: narrow layers
	 * with a long batch go split-K, dX tiled (8192x4096x32 314 µs vs 927
	 * by the seed kernels; 4096x1024x16 47 vs 58) */
	proto_request q = job(4096, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 64); /* 4096 / 64 rows */
	assert_int_equal(p.input, KERN_TILED);
	q = job(8192, 4096, 32, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 64);
	assert_int_equal(p.input, KERN_TILED);
	/* a batch below 4096 keeps the seed kernel for dW */
	q = job(4095, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, KERN_TILED); /* batch*in >= 2^20 */
	/* a small layer: the seed kernels for both */
	q = job(256, 256, 16, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, KERN_INPUT);
	q = job(2048, 1024, 1024, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED); /* 16 x 16 tiles: 64x64 */
	assert_int_equal(p.input, KERN_TILED); /* 32 x 16 */
	q = job(1024, 4096, 64, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_TILED);
	assert_int_equal(p.input, KERN_TILED);
}

static void test_thresholds_at_the_tile_edge(void **state)
{
	(void)state;
	/* dW: out > 32, in >= 64, batch*in >= 2^20 */
	proto_request q = job(1024, 1024, 33, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED);
	q = job(1024, 1024, 32, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	q = job(2048, 63, 1024, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	q = job(1023, 1024, 1024, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM); /* batch*in just below 2^20 */
	/* dX: batch, in >= 64, batch*in >= 2^20, any out */
	q = job(16384, 64, 64, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_TILED);
	q = job(16384, 64, 1, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_TILED);
	q = job(16384, 63, 64, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT);
	q = job(63, 1u << 15, 64, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT);
	q = job(256, 256, 64, false, false, true, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT); /* small */
}

static void test_bias_alone_is_one_pass_over_dy(void **state)
{
	(void)state;
	proto_request q = job(8192, 4096, 4096, false, true, false, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	assert_int_equal(p.input, -1);
	q = job(1u << 20, 64, 8, false, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM); /* never split */
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
	/* 1M x 64 x 8: the seed kernel would launch 8 x 2 = 16 workgroups;
	 * S = min(64, 1024/1, 2^20/256) = 64 */
	proto_request q = job(1u << 20, 64, 8, true, true, false, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 64);
	/* 16384 x 64 x 48: tiled would be 1 tile; S = min(64, 1024, 64) = 64 */
	q = job(16384, 64, 48, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 64);
	/* tiled dW: 255 tiles split, 256 do not; batch 4095 never */
	q = job(8192, 64 * 15, 17 * 64, true, false, false, PROTO_VARIANT_AUTO); /* 17 x 15 = 255 */
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 5); /* min(64, ceil(1024/255 tiles), 8192/256) */
	q = job(8192, 64 * 16, 16 * 64, true, false, false, PROTO_VARIANT_AUTO); /* 256 */
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED);
	q = job(4095, 64, 8, true, false, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	/* narrow dW (out <= 32, or in < 64, or batch*in < 2^20): min(64, batch/64) */
	q = job(4096, 4, 2, true, true, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 64);
	q = job(4096 + 127, 1024, 32, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).slices, 64);
	/* a dW with many tiles is not split */
	q = job(65536, 64 * 16, 64 * 16, true, false, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).param, KERN_TILED); /* 256 tiles */
	/* forced: batch / 16 slices, 1..64; dX tiled */
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
	assert_int_equal(kshape_splitk_elems(&q, 64), 64 * 2);
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
	assert_int_equal(p.param, KERN_TILED);
	assert_int_equal(p.input, KERN_TILED);
	/* edges: 64 everywhere, batch 256 for dW */
	q = job(256, 64, 64, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, true);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
	q = job(255, 64, 63, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, true);
	assert_int_not_equal(p.param, KERN_COOPMAT);
	assert_int_not_equal(p.input, KERN_COOPMAT);
	/* narrow f16 layers (out < 64) go split-K and tiled, as f32 ones */
	q = job(8192, 4096, 32, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, true);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.input, KERN_TILED);
	/* forced: dW and dX on it; db alone by the row-parallel kernel */
	q = job(1, 1, 1, true, true, true, PROTO_VARIANT_COOPMAT);
	p = variant_choose(&q, true);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
	q = job(1, 1, 1, false, true, false, PROTO_VARIANT_COOPMAT);
	assert_int_equal(variant_choose(&q, true).param, KERN_PARAM);
}

/* VK_KHR_cooperative_matrix (f16 and bf16) comes first where the device
 * has it (faster than the NV kernel on the H200: docs/kernels.md), the
 * same shape thresholds. */
static void test_coopmat_khr_first(void **state)
{
	(void)state;
	const unsigned both = VARIANT_HAS_COOPMAT | VARIANT_HAS_CMK;
	proto_request q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	for (int t = PROTO_F16; t <= PROTO_BF16; t++) {
		q.dtype = (proto_dtype)t;
		variant_plan p = variant_choose(&q, both);
		assert_int_equal(p.param, KERN_CMK_DW);
		assert_int_equal(p.input, KERN_CMK_DX);
		p = variant_choose(&q, VARIANT_HAS_CMK);
		assert_int_equal(p.param, KERN_CMK_DW);
		assert_int_equal(p.input, KERN_CMK_DX);
		/* not widened to tiled128 */
		refine_widen(&p, &q);
		assert_int_equal(p.param, KERN_CMK_DW);
		assert_int_equal(p.input, KERN_CMK_DX);
	}
	/* the NV kernel where KHR is not there */
	variant_plan p = variant_choose(&q, VARIANT_HAS_COOPMAT);
	assert_int_equal(p.param, KERN_COOPMAT);
	/* edges as for coopmat: 64 everywhere, batch 256 for dW */
	q = job(256, 64, 64, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, VARIANT_HAS_CMK);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	q = job(255, 64, 63, true, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, VARIANT_HAS_CMK);
	assert_false(pipelines_is_cmk(p.param));
	assert_false(pipelines_is_cmk(p.input));
	/* forced: dW and dX on it, db alone by the row-parallel kernel; forcing
	 * it where the device lacks it never picks it (ops.c refuses first) */
	q = job(1, 1, 1, true, true, true, PROTO_VARIANT_COOPMAT_KHR);
	p = variant_choose(&q, VARIANT_HAS_CMK);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	p = variant_choose(&q, VARIANT_HAS_COOPMAT);
	assert_false(pipelines_is_cmk(p.param));
	assert_false(pipelines_is_cmk(p.input));
	q = job(1, 1, 1, false, true, false, PROTO_VARIANT_COOPMAT_KHR);
	assert_int_equal(variant_choose(&q, VARIANT_HAS_CMK).param, KERN_PARAM);
	/* coopmat_nv2 only when forced (auto keeps KHR), dW and dX */
	q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, both | VARIANT_HAS_NV2);
	assert_int_equal(p.param, KERN_CMK_DW);
	q.variant = PROTO_VARIANT_COOPMAT_NV2;
	p = variant_choose(&q, both | VARIANT_HAS_NV2);
	assert_int_equal(p.param, KERN_NV2_DW);
	assert_int_equal(p.input, KERN_NV2_DX);
	refine_cmk_tiling(&p, &q, 1u << 30, 128, 128); /* not a coopmat_khr kernel: untouched */
	assert_int_equal(p.param, KERN_NV2_DW);
	p = variant_choose(&q, both);
	assert_false(pipelines_is_nv2(p.param) || pipelines_is_nv2(p.input));
	/* forcing NV coopmat does not take KHR */
	q = job(1024, 1024, 1024, true, true, true, PROTO_VARIANT_COOPMAT);
	p = variant_choose(&q, both);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
}

/* coopmat_khr_f32x3: f32 on KERN_CMK_DW/DX only when forced (auto never
 * takes the tensor cores for f32: its max_rel_err is not measured <= 1e-5
 * on every shape), never the small tiling, never for f16/bf16; coopmat_khr
 * forced with f32 does not take f32's KERN_CMK_* (they are f32x3's). */
static void test_coopmat_khr_f32x3_forced_only(void **state)
{
	(void)state;
	/* what placement.c passes for f32 on a device with bf16 KHR matrices */
	const unsigned all = VARIANT_HAS_F32X3;
	proto_request q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	variant_plan p = variant_choose(&q, all);
	assert_false(pipelines_is_cmk(p.param) || pipelines_is_cmk(p.input));
	assert_int_equal(p.param, KERN_TILED);
	assert_int_equal(p.input, KERN_TILED);
	q.variant = PROTO_VARIANT_COOPMAT_KHR_F32X3;
	p = variant_choose(&q, all);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	refine_cmk_tiling(&p, &q, 1u << 30, 128, 128); /* every GEMM "small": still the large one */
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	/* db alone: the seed kernel, as for coopmat_khr */
	proto_request d = job(64, 64, 64, false, true, false, PROTO_VARIANT_COOPMAT_KHR_F32X3);
	d.dtype = PROTO_F32;
	assert_int_equal(variant_choose(&d, all).param, KERN_PARAM);
	/* without the pipelines (ops.c refuses it first): not the tensor cores */
	p = variant_choose(&q, 0);
	assert_false(pipelines_is_cmk(p.param) || pipelines_is_cmk(p.input));
	/* coopmat_khr with f32 (its pipelines are f32x3's), coopmat_khr_f32x3
	 * with bf16: never KERN_CMK_* */
	q.variant = PROTO_VARIANT_COOPMAT_KHR;
	p = variant_choose(&q, all);
	assert_false(pipelines_is_cmk(p.param) || pipelines_is_cmk(p.input));
	q.variant = PROTO_VARIANT_COOPMAT_KHR_F32X3;
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, all | VARIANT_HAS_CMK);
	assert_false(pipelines_is_cmk(p.param) || pipelines_is_cmk(p.input));
	/* its loop bound: two k steps of 16 per trip */
	assert_int_equal(kshape_max_k(KERN_CMK_DW, PROTO_F32), 32 * 32768);
	assert_int_equal(PIPELINES_F32X3_BK, KSHAPE_CMK_MIN_BK);
}

/* auto takes coopmat_nv2 for a GEMM of at least REFINE_NV2_MIN_TILES of
 * its tiles (dW: out x in, dX: batch x in), each GEMM apart, and only
 * coopmat_khr's place: never when forced, never f32, never a reduction
 * past nv2's loop bound. */
static void test_nv2_large(void **state)
{
	(void)state;
	const unsigned caps = VARIANT_HAS_CMK | VARIANT_HAS_NV2;
	proto_request q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	variant_plan p = variant_choose(&q, caps);
	assert_int_equal(p.param, KERN_CMK_DW); /* variant_choose alone: coopmat_khr */
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES); /* dW 32x16, dX 64x16 tiles */
	assert_int_equal(p.param, KERN_NV2_DW);
	assert_int_equal(p.input, KERN_NV2_DX);
	/* 2048x1024x1024: dW 8x4, dX 16x4: coopmat_khr (then its small tiling) */
	q = job(2048, 1024, 1024, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F16;
	p = variant_choose(&q, caps);
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	/* the edge, dW and dX apart: dW 16x16 = 256 tiles of 128x256 at out
	 * 2048, in 4096; 255 one row less; dX 4096/128 x 16 = 512 */
	q = job(4096, 4096, 2048, true, false, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, caps);
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, KERN_NV2_DW);
	assert_int_equal(p.input, KERN_NV2_DX);
	q.out = 2048 - 128;
	p = variant_choose(&q, caps);
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_NV2_DX);
	/* forced coopmat_khr stays; f32 and bm 0 (no nv2) are left alone */
	q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_COOPMAT_KHR);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, caps);
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	q.variant = PROTO_VARIANT_AUTO;
	p = variant_choose(&q, caps);
	refine_nv2_large(&p, &q, 0, 0, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, KERN_CMK_DW);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, VARIANT_HAS_F32X3 | VARIANT_HAS_NV2);
	const variant_plan before = p;
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, before.param);
	assert_int_equal(p.input, before.input);
	/* a reduction past nv2's loop bound (16 per trip) keeps coopmat_khr */
	const uint64_t kmax = kshape_max_k(KERN_NV2_DW, PROTO_BF16);
	q = job(kmax + 16, 4096, 4096, true, false, false, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, caps);
	if (p.param == KERN_CMK_DW) {
		refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
		assert_int_equal(p.param, KERN_CMK_DW);
	}
	q.batch = kmax;
	p = variant_choose(&q, caps);
	assert_int_equal(p.param, KERN_CMK_DW);
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	assert_int_equal(p.param, KERN_NV2_DW);
}

/* auto's plan for q (dtype dt) with coopmat_khr and coopmat_nv2: the
 * large tiling (128x256) then the small layers' (sbm x sbm; 0: none). */
static variant_plan nv2_plan(proto_request q, proto_dtype dt, unsigned caps, uint32_t sbm)
{
	q.dtype = dt;
	variant_plan p = variant_choose(&q, caps);
	refine_nv2_large(&p, &q, 128, 256, REFINE_NV2_MIN_TILES);
	refine_nv2_small(&p, &q, sbm, sbm, REFINE_NV2_SMALL_MIN_TILES);
	return p;
}

static void expect_kernels(variant_plan p, int param, int input)
{
	assert_int_equal(p.param, param);
	assert_int_equal(p.input, input);
}

/* Then coopmat_nv2's small layers' tiling for each GEMM still on
 * coopmat_khr with at least REFINE_NV2_SMALL_MIN_TILES of its tiles:
 * 2048x1024x1024 (dW 8x8 = 64 tiles of 128x128, dX 16x8), each GEMM apart;
 * whole tiles only; never forced, never f32, never without the pipelines
 * (bm 0), never in place of the large tiling, never a reduction past the
 * loop bound. */
static void test_nv2_small(void **state)
{
	(void)state;
	const unsigned caps = VARIANT_HAS_CMK | VARIANT_HAS_NV2;
	const proto_request q2048 = job(2048, 1024, 1024, true, true, true, PROTO_VARIANT_AUTO);
	/* 32 and 64 large tiles: without the small tiling, coopmat_khr */
	expect_kernels(nv2_plan(q2048, PROTO_BF16, caps, 0), KERN_CMK_DW, KERN_CMK_DX);
	expect_kernels(nv2_plan(q2048, PROTO_BF16, caps, 128), KERN_NV2_DW_S, KERN_NV2_DX_S);
	/* one row of tiles less in dW: 7x8 = 56, coopmat_khr; dX still 128 */
	proto_request q = q2048;
	q.out = 1024 - 128;
	expect_kernels(nv2_plan(q, PROTO_BF16, caps, 128), KERN_CMK_DW, KERN_NV2_DX_S);
	/* a batch of 512: dX 4x8 = 32 tiles, coopmat_khr */
	q = job(512, 1024, 1024, true, true, true, PROTO_VARIANT_AUTO);
	expect_kernels(nv2_plan(q, PROTO_F16, caps, 128), KERN_NV2_DW_S, KERN_CMK_DX);
	/* edge tiles: 1536x1000x1040 (dW 1040x1000, dX 1536x1000) keeps
	 * coopmat_khr; 2048x1024x1040: dW's 1040 rows have an edge, dX none */
	q = job(1536, 1000, 1040, true, true, true, PROTO_VARIANT_AUTO);
	expect_kernels(nv2_plan(q, PROTO_BF16, caps, 128), KERN_CMK_DW, KERN_CMK_DX);
	q = job(2048, 1024, 1040, true, true, true, PROTO_VARIANT_AUTO);
	expect_kernels(nv2_plan(q, PROTO_F16, caps, 128), KERN_CMK_DW, KERN_NV2_DX_S);
	/* the large tiling keeps what it took */
	q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	expect_kernels(nv2_plan(q, PROTO_BF16, caps, 128), KERN_NV2_DW, KERN_NV2_DX);
	/* forced coopmat_khr, and f32, are left alone */
	q = q2048;
	q.variant = PROTO_VARIANT_COOPMAT_KHR;
	expect_kernels(nv2_plan(q, PROTO_BF16, caps, 128), KERN_CMK_DW, KERN_CMK_DX);
	q.variant = PROTO_VARIANT_AUTO;
	q.dtype = PROTO_F32;
	const variant_plan f32 = variant_choose(&q, VARIANT_HAS_F32X3 | VARIANT_HAS_NV2);
	expect_kernels(nv2_plan(q, PROTO_F32, VARIANT_HAS_F32X3 | VARIANT_HAS_NV2, 128), f32.param, f32.input);
	/* a reduction past the loop bound keeps coopmat_khr */
	q = job(kshape_max_k(KERN_NV2_DW_S, PROTO_BF16) + 16, 1024, 1024, true, false, false, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	if (variant_choose(&q, caps).param == KERN_CMK_DW)
		assert_int_equal(nv2_plan(q, PROTO_BF16, caps, 128).param, KERN_CMK_DW);
}

/* The small tiling where a GEMM has fewer than small_below large tiles:
 * measured 2048x1024x1024 61 µs against 85, 8192x4096x4096 3666 against 2607. */
static void test_coopmat_khr_tiling(void **state)
{
	(void)state;
	proto_request q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	variant_plan p = variant_choose(&q, VARIANT_HAS_CMK);
	refine_cmk_tiling(&p, &q, 256, 128, 128); /* dW 32x32 tiles, dX 64x32 */
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	q = job(2048, 1024, 1024, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, VARIANT_HAS_CMK);
	refine_cmk_tiling(&p, &q, 256, 128, 128); /* dW 8x8, dX 16x8 */
	assert_int_equal(p.param, KERN_CMK_DW_S);
	assert_int_equal(p.input, KERN_CMK_DX_S);
	assert_int_equal(pipelines_cmk_tiling(p.param), 1);
	assert_true(pipelines_cmk_dw(p.param) && !pipelines_cmk_dw(p.input));
	/* the edge: 16x16 = 256 tiles stays large, 255 takes the small one;
	 * dW and dX decide apart (dX: 4096/128 x 2048/128 = 512) */
	q = job(4096, 2048, 2048, true, false, true, PROTO_VARIANT_COOPMAT_KHR);
	p = variant_choose(&q, VARIANT_HAS_CMK);
	refine_cmk_tiling(&p, &q, 256, 128, 128);
	assert_int_equal(p.param, KERN_CMK_DW);
	assert_int_equal(p.input, KERN_CMK_DX);
	q.out = 2048 - 128;
	p = variant_choose(&q, VARIANT_HAS_CMK);
	refine_cmk_tiling(&p, &q, 256, 128, 128);
	assert_int_equal(p.param, KERN_CMK_DW_S);
	assert_int_equal(p.input, KERN_CMK_DX);
	/* 0: never small; other kernels are left alone */
	q = job(256, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, VARIANT_HAS_CMK);
	refine_cmk_tiling(&p, &q, 0, 128, 128);
	assert_int_equal(p.param, KERN_CMK_DW);
	p = variant_choose(&q, 0);
	variant_plan before = p;
	refine_cmk_tiling(&p, &q, 256, 128, 128);
	assert_memory_equal(&p, &before, sizeof(p));
}

/* The device-local path widens large GEMMs to the 128x128 tile: 512 tiles
 * and a reduction of 1024 or more, auto only. */
static void test_widen_large_gemms(void **state)
{
	(void)state;
	proto_request q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.param, KERN_TILED128);
	assert_int_equal(p.input, KERN_TILED128);
	/* dW 2048x2048 = 256 tiles of 128: stays; dX 8192x2048 = 1024: widens */
	q = job(8192, 2048, 2048, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.param, KERN_TILED);
	assert_int_equal(p.input, KERN_TILED128);
	/* dX of a narrow layer: K = out = 32 < 1024 */
	q = job(8192, 4096, 32, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.input, KERN_TILED);
	/* dX at the edge: K = 1023 no, 1024 yes */
	q = job(8192, 8192, 1023, false, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.input, KERN_TILED);
	q.out = 1024;
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.input, KERN_TILED128);
	/* forced variants are left alone */
	q.variant = PROTO_VARIANT_TILED;
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.input, KERN_TILED);
	q.variant = PROTO_VARIANT_TILED128;
	p = variant_choose(&q, false);
	assert_int_equal(p.input, KERN_TILED128);
	/* coopmat is not touched */
	q = job(8192, 4096, 4096, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F16;
	p = variant_choose(&q, true);
	refine_widen(&p, &q);
	assert_int_equal(p.param, KERN_COOPMAT);
	assert_int_equal(p.input, KERN_COOPMAT);
}

/* The loop bound (issue 13): how much of a reduction each kernel walks in
 * one dispatch, and f16/bf16 reductions longer than that going through
 * split-K's f32 partials (one rounding), whatever the family. */
static void test_long_16bit_reductions_go_split_k(void **state)
{
	(void)state;
	assert_int_equal(KSHAPE_MAX_LOOP_TRIPS, 32768);
	assert_int_equal(kshape_max_k(KERN_PARAM, PROTO_F32), 8 * 32768);
	assert_int_equal(kshape_max_k(KERN_INPUT, PROTO_BF16), 16 * 32768);
	assert_int_equal(kshape_max_k(KERN_TILED, PROTO_F16), 16 * 32768);
	assert_int_equal(kshape_max_k(KERN_SPLITK, PROTO_F32), 16 * 32768);
	assert_int_equal(kshape_max_k(KERN_TILED128, PROTO_F32), 16 * 32768);
	assert_int_equal(kshape_max_k(KERN_TILED128, PROTO_BF16), 8 * 32768);
	assert_int_equal(kshape_max_k(KERN_COOPMAT, PROTO_F16), 32 * 32768);
	assert_int_equal(kshape_max_k(KERN_CMK_DW, PROTO_BF16), 32 * 32768); /* 2 steps of BK >= 16 */
	assert_int_equal(kshape_max_k(KERN_CMK_DX_S, PROTO_F16), 32 * 32768);
	/* coopmat_nv2: VKGRAD_NV2_TILE's BK may be as small as 16 (dispatch.c cuts by the real one) */
	assert_int_equal(kshape_max_k(KERN_NV2_DW, PROTO_F16), 16 * 32768);
	assert_int_equal(kshape_max_k(KERN_NV2_DX, PROTO_BF16), NV2_TILE_MIN_BK * 32768);
	assert_int_equal(kshape_max_k(KERN_REDUCE, PROTO_F32), 32768); /* not a reduction over k: 1 per trip */
	/* f32 keeps the family (dispatch.c cuts it into accumulating pieces) */
	proto_request q = job(1048560, 1, 1, true, true, false, PROTO_VARIANT_GENERIC);
	variant_plan p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_PARAM);
	/* bf16: the seed kernel walks 2^18 rows in one dispatch; one more goes split-K */
	q.dtype = PROTO_BF16;
	q.batch = 8 * 32768;
	assert_int_equal(variant_choose(&q, false).param, KERN_PARAM);
	q.batch++;
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 1);
	assert_int_equal(p.min_slices, 1);
	q.batch = 1048560;
	p = variant_choose(&q, false);
	assert_int_equal(p.param, KERN_SPLITK);
	assert_int_equal(p.slices, 2); /* 2^19 rows per slice */
	/* db alone too */
	q = job(1048560, 1, 1, false, true, false, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F16;
	assert_int_equal(variant_choose(&q, false).param, KERN_SPLITK);
	/* dX over a long out: split-K over out */
	q = job(1, 1, 1048560, false, false, true, PROTO_VARIANT_TILED128);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, false);
	assert_int_equal(p.input, KERN_SPLITK);
	assert_int_equal(p.dx_slices, 2);
	assert_int_equal(kshape_splitk_dx_elems(&q, 2), 2);
	q.dtype = PROTO_F32;
	assert_int_equal(variant_choose(&q, false).input, KERN_TILED128);
	q = job(4, 3, 16 * 32768, false, false, true, PROTO_VARIANT_GENERIC);
	q.dtype = PROTO_F16;
	assert_int_equal(variant_choose(&q, false).input, KERN_INPUT);
	q.out++;
	assert_int_equal(variant_choose(&q, false).input, KERN_SPLITK);
	/* split-K that auto chose for speed may not give up below 2 slices
	 * unless the tiled kernel it would fall back to had to cut (16-bit) */
	q = job(1u << 20, 64, 8, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, false).min_slices, 2);
	q.dtype = PROTO_BF16;
	assert_int_equal(variant_choose(&q, false).min_slices, 1);
	/* the device-local path does not widen a 16-bit GEMM to the 128 tile
	 * (8 rows per iteration) where that would cut its reduction */
	q = job(300000, 8192, 8192, true, false, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.param, KERN_TILED);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, false);
	refine_widen(&p, &q);
	assert_int_equal(p.param, KERN_TILED128);
}

static void test_variant_names_round_trip(void **state)
{
	(void)state;
	for (int v = 0; v < PROTO_VARIANT_COUNT; v++)
		assert_int_equal(proto_variant_parse(proto_variant_name((proto_variant)v)), v);
	assert_int_equal(proto_variant_parse("tiled64"), -1);
	assert_int_equal(proto_variant_parse(""), -1);
}

/* The narrow family: auto takes it (dW/db and dX) where the device has it
 * and the shape is narrow, ahead of the tensor cores; its blocks depend on
 * the shape alone, are whole 64-row steps within the loop bound, and none
 * is empty. */
static void test_narrow_family(void **state)
{
	(void)state;
	const unsigned all = VARIANT_HAS_NARROW | VARIANT_HAS_CMK;
	proto_request q = job(1u << 20, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	variant_plan p = variant_choose(&q, all);
	assert_int_equal(p.param, KERN_NARROW);
	/* a 16-bit dX of 64+ features: coopmat_khr (VARIANT_CMK_DX_MIN_FEATURES); f32's: the family's */
	assert_int_equal(p.input, KERN_CMK_DX);
	q.dtype = PROTO_F32;
	assert_int_equal(variant_choose(&q, all).input, KERN_NARROW_DX);
	q.dtype = PROTO_BF16;
	/* about KSHAPE_NARROW_WGS workgroups: one tile, 512 blocks of 2048 rows */
	assert_int_equal(p.slices, 512);
	assert_int_equal(kshape_narrow_rows(&q, p.slices), 2048);
	/* without the family (a device with 16 KiB of shared memory): the rules before */
	p = variant_choose(&q, VARIANT_HAS_CMK);
	assert_int_equal(p.param, KERN_CMK_DW);
	/* below the batch bound, or wider than 256: not narrow */
	q = job(VARIANT_NARROW_MIN_BATCH - 1, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, all);
	assert_int_not_equal(p.param, KERN_NARROW);
	assert_int_not_equal(p.input, KERN_NARROW_DX);
	/* dW/db from 16,384 rows, dX from 65,536 (VARIANT_NARROW_DX_MIN_BATCH:
	 * its row tiles leave a short batch few workgroups) */
	q = job(32768, 3, 5, true, true, false, PROTO_VARIANT_AUTO);
	assert_int_equal(variant_choose(&q, all).param, KERN_NARROW);
	q = job(VARIANT_NARROW_DX_MIN_BATCH - 1, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, all);
	assert_int_equal(p.param, KERN_NARROW);
	assert_int_not_equal(p.input, KERN_NARROW_DX);
	q = job(VARIANT_NARROW_DX_MIN_BATCH, 16, 8, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, all);
	assert_int_equal(p.param, KERN_NARROW);
	assert_int_equal(p.input, KERN_NARROW_DX);
	q = job(1u << 20, 257, 64, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, all);
	assert_int_not_equal(p.param, KERN_NARROW);
	/* db alone on it too */
	q = job(1u << 20, 64, 64, false, true, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, all);
	assert_int_equal(p.param, KERN_NARROW);
	assert_int_equal(p.input, -1);
	/* forced: any shape, 1x1x1 included */
	q = job(1, 1, 1, true, true, true, PROTO_VARIANT_NARROW);
	p = variant_choose(&q, 0);
	assert_int_equal(p.param, KERN_NARROW);
	assert_int_equal(p.input, KERN_NARROW_DX);
	assert_int_equal(p.slices, 1);
	/* blocks: shape-only, whole steps, within the loop bound, none empty */
	static const uint64_t shapes[][3] = {{1000003, 3, 5}, {65537, 1, 1}, {262147, 33, 17},
					     {131071, 257, 2}, {1ull << 24, 64, 64}, {4194304, 1, 1},
					     {64, 1024, 1024}, {65, 1, 1}};
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		q = job(shapes[i][0], shapes[i][1], shapes[i][2], true, true, true, PROTO_VARIANT_NARROW);
		const uint32_t b = kshape_narrow_blocks(&q);
		const uint64_t r = kshape_narrow_rows(&q, b);
		assert_true(b >= 1);
		assert_int_equal(r % VKG_NARROW_STEP, 0);
		assert_true(r <= kshape_narrow_max_rows());
		assert_true((uint64_t)b * r >= q.batch);       /* covers the batch */
		assert_true((uint64_t)(b - 1) * r < q.batch); /* the last block not empty */
		assert_true(b >= kshape_narrow_min_blocks(&q));
		assert_int_equal(kshape_narrow_blocks(&q), b);
		/* 16-bit: no cut reduction, so no split-K for one rounding */
		q.dtype = PROTO_F16;
		p = variant_choose(&q, all);
		assert_int_equal(p.param, KERN_NARROW);
		assert_int_equal(p.input, KERN_NARROW_DX);
		/* dX's row groups cover every row tile within half the loop bound */
		uint32_t tiles;
		const uint64_t groups = kshape_narrow_dx_groups(&q, &tiles);
		const uint64_t tr = kshape_narrow_dx_tile_rows(q.in);
		assert_true(groups * tiles * tr >= q.batch);
		assert_true((uint64_t)tiles * (q.out < kshape_max_k(KERN_NARROW_DX, q.dtype)
						       ? q.out + 2 : kshape_max_k(KERN_NARROW_DX, q.dtype) + 2) <=
			    KSHAPE_MAX_LOOP_TRIPS / 2);
	}
	/* the dX tile: 2048 / P rows, P the power of two covering min(in, 64) / 8
	 * (the shader's columns of 8x8 micro-tiles) */
	assert_int_equal(kshape_narrow_dx_tile_rows(64), 256);
	assert_int_equal(kshape_narrow_dx_tile_rows(1000), 256);
	assert_int_equal(kshape_narrow_dx_tile_rows(65), 256);
	assert_int_equal(kshape_narrow_dx_tile_rows(33), 256);
	assert_int_equal(kshape_narrow_dx_tile_rows(32), 512);
	assert_int_equal(kshape_narrow_dx_tile_rows(17), 512);
	assert_int_equal(kshape_narrow_dx_tile_rows(16), 1024);
	assert_int_equal(kshape_narrow_dx_tile_rows(9), 1024);
	assert_int_equal(kshape_narrow_dx_tile_rows(8), 2048);
	assert_int_equal(kshape_narrow_dx_tile_rows(3), 2048);
	assert_int_equal(kshape_narrow_dx_tile_rows(1), 2048);
	/* a lower loop bound: shorter blocks, more of them */
	kshape_set_loop_trips(256);
	q = job(262147, 33, 17, true, true, false, PROTO_VARIANT_NARROW);
	assert_true(kshape_narrow_rows(&q, kshape_narrow_blocks(&q)) <= 64);
	kshape_set_loop_trips(KSHAPE_LOOP_TRIPS_MAX);
}

/* Split-K on the tensor cores (variant.h, coopmat_khr_splitk): auto takes
 * it for f16/bf16 dW (+ db) of narrow, long layers where the device has it,
 * ahead of the narrow family; dX of 64+ features on coopmat_khr; db alone, short
 * batches, wide layers, f32 and devices without it keep theirs. Slices:
 * whole 64-row trips, none empty, about VARIANT_CMKS_WAVE workgroups,
 * within the loop bound. */
static void test_cmk_splitk_narrow_long(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_CMK | VARIANT_HAS_CMKS;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		proto_request q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		variant_plan p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		/* one 64x64 tile: 528 aimed for, 1986 rows -> 2048, 512 slices */
		assert_int_equal(p.slices, 512);
		assert_int_equal(kshape_cmks_len(q.batch, p.slices), 2048);
		assert_int_equal(p.min_slices, 2);
		/* dX of 64 features and more: coopmat_khr (VARIANT_CMK_DX_MIN_FEATURES) */
		assert_int_equal(p.input, KERN_CMK_DX);
		/* coopmat_nv2 does not take a narrow layer's dX (nor its dW) */
		refine_nv2_large(&p, &q, 128, 128, 1);
		assert_int_equal(p.input, KERN_CMK_DX);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		/* dX of fewer than 64 features: the narrow family's, dW/db
		 * beside it on coopmat_khr_splitk; below 256 weights (in·out)
		 * dW/db on the narrow family too (variant.h,
		 * VARIANT_CMKS_BESIDE_NARROW_MIN_WEIGHTS); dW+db alone stays on
		 * coopmat_khr_splitk */
		q = job(1048576, 63, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.input, KERN_NARROW_DX);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		q = job(1048576, 32, 16, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.input, KERN_NARROW_DX);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		static const uint64_t few[][2] = {{16, 15}, {3, 5}, {1, 1}, {63, 4}, {8, 31}};
		for (size_t i = 0; i < sizeof(few) / sizeof(few[0]); i++) {
			q = job(1048576, few[i][0], few[i][1], true, true, true, PROTO_VARIANT_AUTO);
			q.dtype = (proto_dtype)dt;
			p = variant_choose(&q, gpu);
			assert_int_equal(p.input, KERN_NARROW_DX);
			assert_int_equal(p.param, KERN_NARROW);
		}
		q = job(1048576, 16, 16, true, true, true, PROTO_VARIANT_AUTO); /* 256: the bound */
		q.dtype = (proto_dtype)dt;
		assert_int_equal(variant_choose(&q, gpu).param, KERN_CMK_SPLITK);
		q = job(1048576, 32, 16, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		assert_int_equal(variant_choose(&q, gpu).param, KERN_CMK_SPLITK);
		/* out below 64 keeps dX on coopmat_khr where in is 64 or more,
		 * and a layer wider than the narrow family's (16 tiles) */
		q = job(1048576, 64, 16, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		assert_int_equal(variant_choose(&q, gpu).input, KERN_CMK_DX);
		q = job(262144, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		assert_int_equal(p.input, KERN_CMK_DX);
		refine_nv2_large(&p, &q, 128, 128, 1);
		assert_int_equal(p.input, KERN_CMK_DX);
		q = job(1048576, 256, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		assert_int_equal(variant_choose(&q, gpu).input, KERN_CMK_DX);
		/* without coopmat_khr (lavapipe): the narrow family's */
		assert_int_equal(variant_choose(&q, VARIANT_HAS_NARROW).input, KERN_NARROW_DX);
		/* 262144x256x256: 16 tiles of 64x64, 528 / 16 = 33 slices aimed
		 * for: 7,944 rows rounded up to 8,000, 33 slices */
		q = job(262144, 256, 256, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		assert_int_equal(kshape_cmks_len(q.batch, 33), 8000);
		assert_int_equal(p.slices, 33);
		assert_true(p.slices * 16 <= VARIANT_CMKS_WAVE);
		/* odd shapes: whole trips, none empty, covering the batch */
		q = job(65537, 3, 5, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		/* 528 aimed for (one tile), at most 65537 / 64 = 1024: 125 rows
		 * rounded up to 128, ceil(65537 / 128) = 513 slices */
		assert_int_equal(p.slices, 513);
		{
			const uint64_t l = kshape_cmks_len(q.batch, p.slices);
			assert_true((uint64_t)(p.slices - 1) * l < q.batch && (uint64_t)p.slices * l >= q.batch);
		}
		/* db alone: the narrow family */
		q = job(1048576, 64, 64, false, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_NARROW);
		/* a short batch: only from 1,024 rows of 64 or more features
		 * (VARIANT_CMKS_SHORT_*), its dX unfused; else not it */
		q = job(16383, 63, 64, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_not_equal(p.param, KERN_CMK_SPLITK);
		q = job(1023, 64, 64, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		assert_int_not_equal(variant_choose(&q, gpu).param, KERN_CMK_SPLITK);
		q = job(1024, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu | VARIANT_HAS_CMKS_DX);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		assert_int_equal(p.slices, 16); /* 1,024 / 64 */
		assert_int_equal(p.input, KERN_CMK_DX);
		q.batch = 16383;
		assert_int_equal(variant_choose(&q, gpu | VARIANT_HAS_CMKS_DX).param, KERN_CMK_SPLITK);
		q.batch = 16384; /* the fused dX from here on */
		assert_int_equal(variant_choose(&q, gpu | VARIANT_HAS_CMKS_DX).param, KERN_CMKS_DX);
		q = job(1048576, 1025, 64, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_not_equal(p.param, KERN_CMK_SPLITK);
		/* more than 16 tiles of 64x64 (VARIANT_CMKS_MAX_TILES): 5 x 4 */
		q = job(1048576, 257, 256, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_not_equal(p.param, KERN_CMK_SPLITK);
		/* 257 x 64: 5 tiles, it */
		q = job(1048576, 257, 64, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		/* a device without it (lavapipe): the narrow family */
		q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, VARIANT_HAS_NARROW);
		assert_int_equal(p.param, KERN_NARROW);
		/* forced: dW/db on it (slices of at least one trip), dX on
		 * coopmat_khr; db alone too */
		q = job(20000, 257, 2, true, true, true, PROTO_VARIANT_COOPMAT_KHR_SPLITK);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		assert_int_equal(p.input, KERN_CMK_DX);
		assert_int_equal(p.min_slices, 1);
		/* 1 x 5 tiles: 528 / 5 = 105 slices aimed for (20000 / 64 allows
		 * 312) */
		assert_int_equal(p.slices, kshape_cmks_slices(20000, VARIANT_CMKS_WAVE / 5));
		q = job(20000, 257, 2, false, true, false, PROTO_VARIANT_COOPMAT_KHR_SPLITK);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
	}
	/* f32: never (the pipeline is f16/bf16 only) */
	proto_request q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	variant_plan p = variant_choose(&q, gpu);
	assert_int_not_equal(p.param, KERN_CMK_SPLITK);
	assert_int_equal(p.input, KERN_NARROW_DX); /* f32 dX: the narrow family's */
	/* the loop bound: slices no longer than kshape_max_k */
	kshape_set_loop_trips(4);
	q = job(65536, 64, 64, true, true, false, PROTO_VARIANT_COOPMAT_KHR_SPLITK);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, gpu);
	assert_int_equal(p.min_slices, 65536 / 256);
	assert_true(kshape_cmks_len(q.batch, p.slices) <= kshape_max_k(KERN_CMK_SPLITK, q.dtype));
	kshape_set_loop_trips(0);
	/* kshape_cmks_slices is its own fixed point */
	for (uint64_t k = 1; k < 5000; k += 37)
		for (uint32_t s = 1; s < 100; s += 7) {
			const uint32_t a = kshape_cmks_slices(k, s);
			assert_true(a >= 1 && a <= s);
			assert_int_equal(kshape_cmks_slices(k, a), a);
			assert_int_equal(kshape_cmks_len(k, a) % KSHAPE_CMKS_STEP, 0);
		}
}

/* dX beside dW (KERN_CMKS_DX, linear_coopmat_khr_splitk_dx_gemm;
 * variant.h): auto takes it, f16/bf16, where dW/db went to
 * coopmat_khr_splitk, dX is asked for, out <= 64 and the device has it
 * (VARIANT_HAS_CMKS_DX beside coopmat_khr's); the plan is then param =
 * input = KERN_CMKS_DX with coopmat_khr_splitk's slices, and no tiling
 * pass moves it. Not for out > 64, f32, db alone, dX absent, dX alone,
 * devices without it, or a forced coopmat_khr_splitk (unfused: dX on
 * coopmat_khr). */
static void test_cmks_dx_fused(void **state)
{
	(void)state;
	const unsigned unfused = VARIANT_HAS_NARROW | VARIANT_HAS_CMK | VARIANT_HAS_CMKS;
	const unsigned gpu = unfused | VARIANT_HAS_CMKS_DX;
	static const uint64_t fused[][3] = {{1048576, 64, 64}, {131071, 64, 64}, {100003, 64, 40},
					    {65536, 257, 64},  {262144, 1024, 16}, {16384, 64, 1}};
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		for (size_t i = 0; i < sizeof(fused) / sizeof(fused[0]); i++)
			for (int db = 0; db < 2; db++) {
				proto_request q = job(fused[i][0], fused[i][1], fused[i][2], true, db, true,
						      PROTO_VARIANT_AUTO);
				q.dtype = (proto_dtype)dt;
				variant_plan p = variant_choose(&q, gpu);
				assert_int_equal(p.param, KERN_CMKS_DX);
				assert_int_equal(p.input, KERN_CMKS_DX);
				assert_true(variant_dx_fused(&p));
				/* coopmat_khr_splitk's slices: whole trips, none empty */
				proto_request qw = q;
				qw.t[PROTO_T_DX].present = false;
				const variant_plan pw = variant_choose(&qw, gpu);
				assert_int_equal(pw.param, KERN_CMK_SPLITK);
				assert_int_equal(p.slices, pw.slices);
				assert_int_equal(p.min_slices, pw.min_slices);
				assert_int_equal(p.dx_slices, 1);
				const uint64_t l = kshape_cmks_len(q.batch, p.slices);
				assert_true((uint64_t)(p.slices - 1) * l < q.batch && (uint64_t)p.slices * l >= q.batch);
				assert_true(l <= kshape_max_k(KERN_CMKS_DX, q.dtype));
				/* the tiling passes leave it */
				refine_nv2_large(&p, &q, 128, 128, 1);
				refine_nv2_small(&p, &q, 64, 64, 1);
				refine_cmk_tiling(&p, &q, UINT64_MAX, 128, 128);
				refine_widen(&p, &q);
				refine_splitk128(&p, &q);
				assert_int_equal(p.param, KERN_CMKS_DX);
				assert_int_equal(p.input, KERN_CMKS_DX);
				/* a device without it: unfused (dX on its own pass) */
				p = variant_choose(&q, unfused);
				assert_false(variant_dx_fused(&p));
				assert_int_not_equal(p.input, KERN_CMKS_DX);
				assert_true(p.input >= 0);
				/* without coopmat_khr (nor the bit alone): not it */
				p = variant_choose(&q, VARIANT_HAS_NARROW | VARIANT_HAS_CMKS | VARIANT_HAS_CMKS_DX);
				assert_false(variant_dx_fused(&p));
				/* forced coopmat_khr_splitk: unfused, dX on coopmat_khr */
				q.variant = PROTO_VARIANT_COOPMAT_KHR_SPLITK;
				p = variant_choose(&q, gpu);
				assert_int_equal(p.param, KERN_CMK_SPLITK);
				assert_int_equal(p.input, KERN_CMK_DX);
				assert_false(variant_dx_fused(&p));
			}
		/* in < 64: not fused (899 us at 1,048,576x32x16 on the H100
		 * against 353 unfused, variant.h): dX on the narrow family where
		 * it takes it, dW/db on coopmat_khr_splitk beside it (on the
		 * narrow family below 256 weights) */
		static const uint64_t thin[][3] = {{1048576, 32, 16}, {65537, 3, 5}, {262147, 33, 17},
						   {1048576, 63, 64}};
		for (size_t i = 0; i < sizeof(thin) / sizeof(thin[0]); i++) {
			proto_request q = job(thin[i][0], thin[i][1], thin[i][2], true, true, true,
					      PROTO_VARIANT_AUTO);
			q.dtype = (proto_dtype)dt;
			const variant_plan p = variant_choose(&q, gpu);
			assert_false(variant_dx_fused(&p));
			assert_int_equal(p.param, thin[i][1] * thin[i][2] < 256 ? KERN_NARROW : KERN_CMK_SPLITK);
			assert_int_equal(p.input, KERN_NARROW_DX);
		}
		/* out > 64: unfused (coopmat_khr_splitk + coopmat_khr's dX) */
		proto_request q = job(1048576, 64, 65, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		variant_plan p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		assert_int_equal(p.input, KERN_CMK_DX);
		q = job(262144, 256, 256, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_false(variant_dx_fused(&p));
		assert_int_equal(p.input, KERN_CMK_DX);
		/* dW/db not on coopmat_khr_splitk (a short batch; in > 1024): not it */
		q = job(16383, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_false(variant_dx_fused(&p));
		assert_int_not_equal(p.input, KERN_CMKS_DX);
		q = job(1048576, 1025, 16, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_false(variant_dx_fused(&p));
		assert_int_not_equal(p.input, KERN_CMKS_DX);
		/* db alone with dX: dW not asked, so dW/db not on coopmat_khr_splitk */
		q = job(1048576, 64, 64, false, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_false(variant_dx_fused(&p));
		assert_int_not_equal(p.input, KERN_CMKS_DX);
		/* dX absent: coopmat_khr_splitk alone */
		q = job(1048576, 64, 64, true, true, false, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_CMK_SPLITK);
		assert_int_equal(p.input, -1);
		/* dX alone: its own pass */
		q = job(1048576, 64, 64, false, false, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, -1);
		assert_int_equal(p.input, KERN_CMK_DX);
		/* the rule itself */
		q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = (proto_dtype)dt;
		assert_true(variant_cmks_dx_fits(&q, gpu, KERN_CMK_SPLITK));
		assert_false(variant_cmks_dx_fits(&q, gpu, KERN_NARROW));
		assert_false(variant_cmks_dx_fits(&q, unfused, KERN_CMK_SPLITK));
	}
	/* f32: never (the pipeline is f16/bf16 only), auto or forced */
	proto_request q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	variant_plan p = variant_choose(&q, gpu | VARIANT_HAS_F32X3);
	assert_false(variant_dx_fused(&p));
	assert_int_not_equal(p.input, KERN_CMKS_DX);
	assert_false(variant_cmks_dx_fits(&q, gpu | VARIANT_HAS_F32X3, KERN_CMK_SPLITK));
	q.variant = PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK;
	p = variant_choose(&q, gpu | VARIANT_HAS_F32X3);
	assert_int_equal(p.param, KERN_CMK_SPLITK);
	assert_int_equal(p.input, KERN_CMK_DX);
}

/* Split-K of f32 on the bf16 tensor cores (coopmat_khr_f32_splitk, f32's
 * KERN_CMK_SPLITK): forced only. Forced f32 dW/db run on it with
 * coopmat_khr_splitk's slices (whole 64-row trips, none empty, about
 * VARIANT_CMKS_WAVE workgroups, within the loop bound), dX on
 * coopmat_khr_f32x3 (f32's KERN_CMK_DX); auto never takes it, whatever the
 * shape; not forced onto f16/bf16 (the daemon refuses those), nor where
 * the device lacks it. */
/* refine_cmks_tiling: a 16-bit dW/db on coopmat_khr_splitk moves to the
 * 128x128 tiles where in and out are both >= 128, to the 32x32 tiles where
 * both are <= 32, where the device has that pipeline, with its slices
 * again for its tile count; f32, the fused dX plan and other shapes keep
 * the 64x64 tile. Auto's narrow dX beside it on the 32x32 tiles goes into
 * the dW pass where the device has KERN_CMKS_DX_S. */
static void test_cmks_tilings(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_CMK | VARIANT_HAS_CMKS | VARIANT_HAS_CMKS_DX;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		for (int o = 0; o < 3; o++) { /* dW+db, dW, full backward */
			const bool db = o != 1, dx = o == 2;
			/* in x out: the kernel each takes */
			static const struct {
				uint64_t b, in, out;
				int k;
			} c[] = {
				{1048576, 128, 128, KERN_CMKS_L}, {262144, 256, 256, KERN_CMKS_L},
				{262147, 257, 129, KERN_CMKS_L},  {1048576, 127, 128, KERN_CMK_SPLITK},
				{1048576, 128, 127, KERN_CMK_SPLITK}, {1048576, 64, 64, KERN_CMK_SPLITK},
				{1048576, 32, 16, KERN_CMKS_S},   {1048576, 32, 32, KERN_CMKS_S},
				{65537, 16, 31, KERN_CMKS_S},     {1048576, 33, 32, KERN_CMK_SPLITK},
				{1048576, 32, 33, KERN_CMK_SPLITK},
			};
			for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
				proto_request q = job(c[i].b, c[i].in, c[i].out, true, db, dx, PROTO_VARIANT_AUTO);
				q.dtype = (proto_dtype)dt;
				variant_plan p = variant_choose(&q, gpu);
				if (p.param != KERN_CMK_SPLITK) {
					/* (dX beside dW, or the narrow family: untouched) */
					const variant_plan before = p;
					refine_cmks_tiling(&p, &q, true, true, false);
					assert_memory_equal(&p, &before, sizeof(p));
					assert_true(dx);
					continue;
				}
				const variant_plan before = p;
				/* without that pipeline: as the rules made it */
				refine_cmks_tiling(&p, &q, c[i].k != KERN_CMKS_L, c[i].k != KERN_CMKS_S, false);
				assert_memory_equal(&p, &before, sizeof(p));
				refine_cmks_tiling(&p, &q, true, true, false);
				assert_int_equal(p.param, c[i].k);
				assert_int_equal(p.input, before.input);
				assert_int_equal(p.min_slices, before.min_slices);
				const uint64_t side = c[i].k == KERN_CMKS_L ? 128 : c[i].k == KERN_CMKS_S ? 32 : 64;
				assert_int_equal(pipelines_cmks_side(p.param), side);
				assert_int_equal(p.slices, variant_cmks_slices_side(&q, KSHAPE_CMKS_STEP, side));
				/* whole trips, none empty, covering the batch */
				const uint64_t l = kshape_cmks_len(q.batch, p.slices);
				assert_true((uint64_t)(p.slices - 1) * l < q.batch && (uint64_t)p.slices * l >= q.batch);
				assert_true(p.slices >= p.min_slices);
			}
		}
	/* the fused plan's bound on out is its one row tile */
	assert_int_equal(VARIANT_CMKS_DX_MAX_OUT, pipelines_cmks_side(KERN_CMKS_DX));
	/* 262,144x256x256: 4 tiles of 128 -> 132 slices aimed for, 1,986 rows
	 * -> 2,048: 128 slices (16 tiles of 64 -> 33 aimed for: 33) */
	proto_request q = job(262144, 256, 256, true, true, false, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	variant_plan p = variant_choose(&q, VARIANT_HAS_CMK | VARIANT_HAS_CMKS);
	assert_int_equal(p.slices, 33);
	refine_cmks_tiling(&p, &q, true, true, false);
	assert_int_equal(p.param, KERN_CMKS_L);
	assert_int_equal(p.slices, 128);
	/* 1,048,576x32x16: 1 tile of 32 -> 528 aimed for -> 1,986 rows -> 2,048: 512 */
	q = job(1048576, 32, 16, true, true, false, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, VARIANT_HAS_CMK | VARIANT_HAS_CMKS);
	refine_cmks_tiling(&p, &q, true, true, false);
	assert_int_equal(p.param, KERN_CMKS_S);
	assert_int_equal(p.slices, 512);
	/* forced coopmat_khr_splitk takes the tilings too */
	q = job(65537, 3, 5, true, true, true, PROTO_VARIANT_COOPMAT_KHR_SPLITK);
	q.dtype = PROTO_F16;
	p = variant_choose(&q, VARIANT_HAS_CMK | VARIANT_HAS_CMKS);
	assert_int_equal(p.param, KERN_CMK_SPLITK);
	refine_cmks_tiling(&p, &q, true, true, false);
	assert_int_equal(p.param, KERN_CMKS_S);
	assert_int_equal(p.input, KERN_CMK_DX);
	/* auto's full backward of a layer of <= 32 features: dW/db on the
	 * 32x32 tiles beside the narrow family's dX, or, where the device has
	 * it, dX beside dW on them (KERN_CMKS_DX_S) with the same slices */
	const unsigned g16 = VARIANT_HAS_NARROW | VARIANT_HAS_CMK | VARIANT_HAS_CMKS | VARIANT_HAS_CMKS_DX;
	static const uint64_t small[][2] = {{32, 16}, {32, 32}, {16, 31}, {17, 17}};
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++)
		for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
			for (int acc = 0; acc < 2; acc++) {
				q = job(1048576, small[i][0], small[i][1], true, true, true, PROTO_VARIANT_AUTO);
				q.dtype = (proto_dtype)dt;
				q.accumulate = acc;
				p = variant_choose(&q, g16);
				assert_int_equal(p.param, KERN_CMK_SPLITK);
				assert_int_equal(p.input, KERN_NARROW_DX);
				variant_plan u = p;
				refine_cmks_tiling(&u, &q, true, true, false);
				assert_int_equal(u.param, KERN_CMKS_S);
				assert_int_equal(u.input, KERN_NARROW_DX);
				assert_false(variant_dx_fused(&u));
				refine_cmks_tiling(&p, &q, true, true, true);
				assert_int_equal(p.param, KERN_CMKS_DX_S);
				assert_int_equal(p.input, KERN_CMKS_DX_S);
				assert_true(variant_dx_fused(&p));
				assert_int_equal(p.slices, u.slices);
				assert_int_equal(p.min_slices, u.min_slices);
				assert_int_equal(pipelines_cmks_side(p.param), 32);
			}
	/* not fused: dW/db alone; a layer of < 256 weights (dW/db on the
	 * narrow family); 33 features; forced coopmat_khr_splitk (dX on
	 * coopmat_khr) */
	static const struct {
		uint64_t in, out;
		bool dw, dx;
		proto_variant v;
	} keep[] = {{32, 16, true, false, PROTO_VARIANT_AUTO},
		    {16, 15, true, true, PROTO_VARIANT_AUTO},
		    {33, 16, true, true, PROTO_VARIANT_AUTO},
		    {32, 16, false, true, PROTO_VARIANT_AUTO},
		    {32, 16, true, true, PROTO_VARIANT_COOPMAT_KHR_SPLITK}};
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		q = job(1048576, keep[i].in, keep[i].out, keep[i].dw, true, keep[i].dx, keep[i].v);
		q.dtype = PROTO_BF16;
		p = variant_choose(&q, g16);
		refine_cmks_tiling(&p, &q, true, true, true);
		assert_false(variant_dx_fused(&p));
		assert_int_not_equal(p.input, KERN_CMKS_DX_S);
	}
	/* f32 (coopmat_khr_f32_splitk's KERN_CMK_SPLITK): untouched */
	q = job(1048576, 128, 128, true, true, false, PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
	p = variant_choose(&q, VARIANT_HAS_F32X3 | VARIANT_HAS_CMKS);
	assert_int_equal(p.param, KERN_CMK_SPLITK);
	const variant_plan before = p;
	refine_cmks_tiling(&p, &q, true, true, false);
	assert_memory_equal(&p, &before, sizeof(p));
}

static void test_f32_splitk_forced_only(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_F32X3 | VARIANT_HAS_CMKS;
	proto_request q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
	variant_plan p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_CMK_SPLITK);
	/* one 64x64 tile: 528 aimed for, 1986 rows -> 2048, 512 slices */
	assert_int_equal(p.slices, 512);
	assert_int_equal(kshape_cmks_len(q.batch, p.slices), 2048);
	assert_int_equal(p.min_slices, 1);
	assert_int_equal(p.input, KERN_CMK_DX); /* f32's: coopmat_khr_f32x3 */
	/* odd shapes: whole trips, none empty, covering the batch */
	static const uint64_t odd[][3] = {{65537, 3, 5}, {262147, 33, 17}, {131071, 64, 64}, {20000, 257, 2}};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		for (int o = 0; o < 3; o++) {
			q = job(odd[i][0], odd[i][1], odd[i][2], o != 1, o != 0, false,
				PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
			p = variant_choose(&q, gpu);
			assert_int_equal(p.param, KERN_CMK_SPLITK);
			assert_int_equal(p.input, -1);
			const uint64_t l = kshape_cmks_len(q.batch, p.slices);
			assert_true((uint64_t)(p.slices - 1) * l < q.batch && (uint64_t)p.slices * l >= q.batch);
			assert_int_equal(l % KSHAPE_CMKS_STEP, 0);
			assert_int_equal(p.slices, variant_cmks_slices(&q, KSHAPE_CMKS_STEP));
		}
	/* 20000x257x2 dW: 1 x 5 tiles, 105 slices aimed for */
	q = job(20000, 257, 2, true, true, false, PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
	p = variant_choose(&q, gpu);
	assert_int_equal(p.slices, kshape_cmks_slices(20000, VARIANT_CMKS_WAVE / 5));
	/* auto never takes it: the narrow family, and with no narrow family
	 * anything but it */
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		q = job(odd[i][0], odd[i][1], odd[i][2], true, true, true, PROTO_VARIANT_AUTO);
		p = variant_choose(&q, gpu);
		assert_int_not_equal(p.param, KERN_CMK_SPLITK);
		assert_int_not_equal(p.input, KERN_CMK_DX);
		p = variant_choose(&q, VARIANT_HAS_F32X3 | VARIANT_HAS_CMKS);
		assert_int_not_equal(p.param, KERN_CMK_SPLITK);
	}
	q = job(1048576, 64, 64, true, true, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_NARROW);
	assert_false(variant_cmks_fits(&q));
	/* f16/bf16 naming it, or coopmat_khr_splitk with f32: not on it (the
	 * daemon refuses both before planning) */
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, VARIANT_HAS_NARROW | VARIANT_HAS_CMK | VARIANT_HAS_CMKS);
		assert_int_not_equal(p.param, KERN_CMK_SPLITK);
		assert_int_not_equal(p.input, KERN_CMK_DX);
	}
	q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_COOPMAT_KHR_SPLITK);
	p = variant_choose(&q, gpu);
	assert_int_not_equal(p.param, KERN_CMK_SPLITK);
	/* a device without it (lavapipe): not on it */
	q = job(1048576, 64, 64, true, true, true, PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
	p = variant_choose(&q, VARIANT_HAS_NARROW);
	assert_int_not_equal(p.param, KERN_CMK_SPLITK);
	p = variant_choose(&q, VARIANT_HAS_NARROW | VARIANT_HAS_CMKS); /* no f32x3 dX */
	assert_int_not_equal(p.param, KERN_CMK_SPLITK);
	/* the loop bound: slices no longer than kshape_max_k */
	kshape_set_loop_trips(16);
	q = job(262147, 33, 17, true, true, false, PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK);
	p = variant_choose(&q, gpu);
	assert_int_equal(p.min_slices, (262147 + 1023) / 1024);
	assert_true(kshape_cmks_len(q.batch, p.slices) <= kshape_max_k(KERN_CMK_SPLITK, q.dtype));
	assert_true(p.slices >= p.min_slices);
	kshape_set_loop_trips(0);
}

/* Split-K on the 128 tile (issue 37 item 3): auto on a GPU (placement.c
 * applies refine_splitk128 after the rules where the device is not a CPU
 * device) takes it for 2048x1024x1024 f32, dW (+ db) in 4 slices of 512
 * rows (64 tiles: 256 workgroups, one wave of 264) and dX in 2 slices of
 * 512 (128 tiles: 256 workgroups); not for f16/bf16, short reductions, narrow or
 * many-tile shapes, nor a forced variant. Slices are whole 16-row steps,
 * none empty, at most VARIANT_S128_WAVE (one workgroup a slice for one
 * tile). */
static void test_splitk128_mid_size(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_F32X3 | VARIANT_HAS_NV2;
	proto_request q = job(2048, 1024, 1024, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	variant_plan p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_TILED); /* the rules alone (and on lavapipe) */
	assert_int_equal(p.input, KERN_TILED);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.slices, 4);
	assert_int_equal(p.min_slices, 2);
	assert_int_equal(p.input, KERN_SPLITK128);
	assert_int_equal(p.dx_slices, 2);
	assert_int_equal(kshape_s128_len(2048, 4), 512);
	assert_int_equal(kshape_s128_len(1024, 2), 512);
	/* (ceil(264 / 64) = 5 slices would make 320 workgroups: a second
	 * wave a fifth full) */
	assert_int_equal(kshape_s128_len(2048, 5), 416);
	/* dW alone, dX alone */
	q = job(2048, 1024, 1024, true, false, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.input, -1);
	q = job(2048, 1024, 1024, false, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, -1);
	assert_int_equal(p.input, KERN_SPLITK128);
	/* 2048x256x256: the rules' generic kernels, 4 tiles: floor(264 / 4) =
	 * 66, at most 2048 / 256 = 8 slices of 256 */
	q = job(2048, 256, 256, true, true, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.slices, 8);
	assert_int_equal(p.input, KERN_INPUT); /* (out 256 < 1024: untouched) */
	assert_int_equal(p.dx_slices, 1);
	/* the rules' split-K on the 64 tile (512 workgroups) stays where the
	 * 128 tile would make less than half a wave: 8192x256x256, 4 tiles x
	 * 32 slices of 256 rows = 128; 8192x512x512 takes it: 16 x 16 = 256 */
	q = job(8192, 256, 256, true, true, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_SPLITK);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK);
	q = job(8192, 512, 512, true, true, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_SPLITK);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.slices, 16);
	/* db alone: the seed kernel's one pass */
	q = job(2048, 1024, 1024, false, true, false, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_PARAM);
	/* not: f16/bf16, a short reduction, a dimension below the tile, many
	 * tiles (8192x4096x4096: 1024), a narrow layer, a forced variant */
	const struct {
		uint64_t b, i, o;
		proto_dtype dt;
		proto_variant v;
	} no[] = {
		{2048, 1024, 1024, PROTO_F16, PROTO_VARIANT_AUTO},
		{2048, 1024, 1024, PROTO_BF16, PROTO_VARIANT_AUTO},
		{1000, 1024, 1000, PROTO_F32, PROTO_VARIANT_AUTO},
		{2048, 1024, 100, PROTO_F32, PROTO_VARIANT_AUTO},
		{8192, 4096, 4096, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 64, 64, PROTO_F32, PROTO_VARIANT_AUTO},
		{2048, 1024, 1024, PROTO_F32, PROTO_VARIANT_TILED},
		{2048, 1024, 1024, PROTO_F32, PROTO_VARIANT_SPLITK},
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		q = job(no[i].b, no[i].i, no[i].o, true, true, true, no[i].v);
		q.dtype = no[i].dt;
		p = pass_leaves(refine_splitk128, &q, gpu);
		assert_int_not_equal(p.param, KERN_SPLITK128);
		assert_int_not_equal(p.input, KERN_SPLITK128);
	}
	/* too little work (m·n·k < VARIANT_S128_MIN_MACS): 1,024x257x129's
	 * dW is 34 M multiply-adds; 1,024x1024x1024's dW takes it */
	q = job(1024, 257, 129, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_not_equal(p.param, KERN_SPLITK128);
	assert_true(1024ull * 257 * 129 < VARIANT_S128_MIN_MACS);
	q = job(1024, 1024, 1024, true, true, false, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	/* the 1,024-row edge: dX's out = 1024 takes it, 1023 does not */
	q = job(4096, 512, 1023, false, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_not_equal(p.input, KERN_SPLITK128);
	q.out = 1024;
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.input, KERN_SPLITK128);
	/* 256 tiles (132 < tiles < 264): two slices, 512 workgroups */
	q = job(2048, 2048, 1024, false, false, true, PROTO_VARIANT_AUTO);
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.input, KERN_SPLITK128);
	assert_int_equal(p.dx_slices, 2);
	/* up to 132 tiles, a long reduction: one wave (tiles x S <= 264),
	 * more than half of it (tiles x S > 132) */
	for (uint64_t m = 128; m <= 2048; m += 128)
		for (uint64_t n = 128; n <= 2048; n += 384) {
			const uint64_t tiles = ((m + 127) / 128) * ((n + 127) / 128);
			if (tiles > 132)
				continue;
			const uint32_t s = variant_s128_slices(m, n, 1u << 16, VARIANT_S128_MIN_ROWS, 2);
			assert_true(tiles * s <= VARIANT_S128_WAVE);
			assert_true(tiles * s > VARIANT_S128_WAVE / 2);
		}
	/* forced, any dtype: both parts; slices of at least 16 rows */
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++) {
		q = job(1000, 130, 129, true, true, true, PROTO_VARIANT_SPLITK128);
		q.dtype = (proto_dtype)dt;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_SPLITK128);
		assert_int_equal(p.input, KERN_SPLITK128);
		assert_int_equal(p.min_slices, 1);
		/* 4 tiles: floor(264 / 4) = 66, 62 by 16-row slices; ceil(1000 /
		 * 62) = 17 rounded up to 32 rows: 32 slices */
		assert_int_equal(p.slices, 32);
		/* dX: 8 x 2 tiles, floor(264 / 16) = 16, 129 / 16 = 8; ceil(129 /
		 * 8) = 17 -> 32: 5 slices */
		assert_int_equal(p.dx_slices, 5);
	}
	/* every slice count a shape gets: whole steps, none empty, within 64 */
	static const uint64_t ks[] = {1, 15, 16, 17, 32, 33, 255, 1000, 1040, 2048, 4097, 1u << 20};
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
		for (uint32_t s0 = 1; s0 <= 64; s0++) {
			const uint64_t K = ks[i];
			const uint32_t s = kshape_s128_slices(K, s0);
			const uint64_t L = kshape_s128_len(K, s);
			assert_true(s >= 1 && s <= s0);
			assert_int_equal(L % KSHAPE_S128_STEP, 0);
			assert_true((uint64_t)s * L >= K);
			assert_true((uint64_t)(s - 1) * L < K);
			assert_int_equal(kshape_s128_slices(K, s), s);
		}
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		const uint32_t s = variant_s128_slices(128, 128, ks[i], KSHAPE_S128_STEP, 1);
		assert_true(s >= 1 && s <= VARIANT_S128_WAVE * VARIANT_S128_ONE_TILE_WAVES);
		assert_true(ks[i] < 32 || kshape_s128_len(ks[i], s) >= KSHAPE_S128_STEP);
	}
	/* one tile over a long reduction: two waves of slices of >= 1,024
	 * rows; one row short of that, or two tiles, one wave */
	const uint64_t two = (uint64_t)VARIANT_S128_ONE_TILE_WAVES * VARIANT_S128_WAVE * VARIANT_S128_ONE_TILE_MIN_ROWS;
	const uint64_t waves = (uint64_t)VARIANT_S128_WAVE * VARIANT_S128_ONE_TILE_WAVES;
	static const uint64_t one_tile[][3] = {{128, 128, 1u << 20}, {128, 128, two}, {100, 17, 1u << 20},
					       {128, 128, 1u << 24}};
	for (size_t i = 0; i < sizeof(one_tile) / sizeof(one_tile[0]); i++) {
		const uint64_t K = one_tile[i][2];
		const uint32_t s = variant_s128_slices(one_tile[i][0], one_tile[i][1], K, VARIANT_S128_MIN_ROWS, 2);
		/* (whole 16-row steps may take one slice off) */
		assert_true(s > waves - VARIANT_S128_WAVE / 2 && s <= waves);
		assert_true(s > VARIANT_S128_WAVE);
		assert_true(kshape_s128_len(K, s) >= VARIANT_S128_ONE_TILE_MIN_ROWS - KSHAPE_S128_STEP);
	}
	assert_true(variant_s128_slices(128, 128, two - 1, VARIANT_S128_MIN_ROWS, 2) <= VARIANT_S128_WAVE);
	assert_true(variant_s128_slices(256, 128, 1u << 20, VARIANT_S128_MIN_ROWS, 2) <= VARIANT_S128_WAVE / 2);
	assert_true(variant_s128_slices(256, 256, 1u << 20, VARIANT_S128_MIN_ROWS, 2) <= VARIANT_S128_WAVE / 4);
}

/* Short layers on a GPU (variant.h, REFINE_SHORT_MAX_BATCH): after every
 * other pass, at most 1,024 rows of at most 512 features each way and
 * 65,536 weights go to the seed kernels, every dtype and output subset;
 * one past each bound, or a forced variant, stays. */
static void test_short_layers(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_CMKS | VARIANT_HAS_CMKS_DX | VARIANT_HAS_CMK |
			     VARIANT_HAS_F32X3 | VARIANT_HAS_NV2;
	static const uint64_t in_[][3] = {{1024, 64, 64}, {1024, 257, 129}, {1024, 1, 1}, {1, 512, 128},
					  {1000, 3, 5}};
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		for (size_t i = 0; i < sizeof(in_) / sizeof(in_[0]); i++)
			for (int outs = 1; outs < 8; outs++) {
				proto_request q = job(in_[i][0], in_[i][1], in_[i][2], outs & 1, (outs & 2) != 0,
						      (outs & 4) != 0, PROTO_VARIANT_AUTO);
				q.dtype = (proto_dtype)dt;
				variant_plan p = variant_choose(&q, gpu);
				refine_splitk128(&p, &q);
				refine_short(&p, &q);
				assert_int_equal(p.param, (outs & 3) ? KERN_PARAM : -1);
				assert_int_equal(p.input, (outs & 4) ? KERN_INPUT : -1);
				assert_int_equal(p.slices, 1);
				assert_int_equal(p.dx_slices, 1);
			}
	/* the rules' pick before the pass: 1,024x64x64 bf16 on split-K on the
	 * tensor cores, 1,024x257x129 f32 not on the seed kernels' dX */
	proto_request q = job(1024, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	assert_int_equal(variant_choose(&q, gpu).param, KERN_CMK_SPLITK);
	static const struct {
		uint64_t b, i, o;
		proto_variant v;
	} stay[] = {
		{1025, 64, 64, PROTO_VARIANT_AUTO},   {1024, 513, 64, PROTO_VARIANT_AUTO},
		{1024, 64, 513, PROTO_VARIANT_AUTO},  {1024, 512, 129, PROTO_VARIANT_AUTO},
		{1024, 64, 64, PROTO_VARIANT_TILED},  {1024, 64, 64, PROTO_VARIANT_NARROW},
		{1024, 64, 64, PROTO_VARIANT_SPLITK},
	};
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		for (size_t i = 0; i < sizeof(stay) / sizeof(stay[0]); i++) {
			q = job(stay[i].b, stay[i].i, stay[i].o, true, true, true, stay[i].v);
			q.dtype = (proto_dtype)dt;
			pass_leaves(refine_short, &q, gpu);
		}
}

/* Narrow f32 layers of 128 features or more both ways (variant.h,
 * VARIANT_NARROW_S128_MIN_FEATURES): the rules give them to the narrow
 * family; on a GPU refine_splitk128 moves dW/db to split-K on the 128
 * tile (one wave of slices, 66 for four tiles; two waves for one tile
 * over 786,432 rows) and dX to
 * tiled128 (with db alone too). 64 features, one side below 128, db
 * alone, f16/bf16 and a forced narrow stay; so do the dW/db of 128x128
 * over 2^20 rows or more (VARIANT_NARROW_MT8_MIN_BATCH: the family's 8x8
 * path), their dX still to tiled128. */
static void test_splitk128_wide_narrow(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_F32X3 | VARIANT_HAS_NV2;
	static const uint64_t mt8[] = {VARIANT_NARROW_MT8_MIN_BATCH, 1u << 22};
	for (size_t i = 0; i < sizeof(mt8) / sizeof(mt8[0]); i++) {
		proto_request m = job(mt8[i], VARIANT_NARROW_MT8_MAX_FEATURES, VARIANT_NARROW_MT8_MAX_FEATURES, true,
				      true, true, PROTO_VARIANT_AUTO);
		m.dtype = PROTO_F32;
		variant_plan mp = variant_choose(&m, gpu);
		refine_splitk128(&mp, &m);
		assert_int_equal(mp.param, KERN_NARROW);
		assert_int_equal(mp.input, KERN_TILED128);
	}
	proto_request q = job(VARIANT_NARROW_MT8_MIN_BATCH - 1, 256, 129, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	variant_plan p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128); /* wider than the 8x8 path's bound */
	q = job(786432, 128, 128, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_NARROW); /* the rules alone (and on lavapipe) */
	assert_int_equal(p.input, KERN_NARROW_DX);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.min_slices, 2);
	/* one tile over 2^20 rows: two waves (VARIANT_S128_ONE_TILE_WAVES) */
	assert_true(p.slices > VARIANT_S128_WAVE && p.slices <= VARIANT_S128_WAVE * VARIANT_S128_ONE_TILE_WAVES);
	const uint64_t l = kshape_s128_len(q.batch, p.slices);
	assert_true((uint64_t)(p.slices - 1) * l < q.batch && (uint64_t)p.slices * l >= q.batch);
	assert_int_equal(p.input, KERN_TILED128);
	/* 4 tiles: floor(264 / 4) = 66 slices of 3,972 rows (whole 16-row steps) */
	q = job(1u << 18, 256, 256, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.slices, 66);
	assert_int_equal(p.input, KERN_TILED128);
	/* dX alone, dX with db */
	q = job(1u << 20, 128, 128, false, false, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_equal(p.input, KERN_TILED128);
	q = job(1u << 20, 128, 128, false, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	refine_splitk128(&p, &q);
	assert_int_not_equal(p.param, KERN_SPLITK128);
	assert_int_equal(p.input, KERN_TILED128);
	const struct {
		uint64_t b, i, o;
		bool dw, db;
		proto_dtype dt;
		proto_variant v;
	} stay[] = {
		{1u << 20, 64, 64, true, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 128, 64, true, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 64, 128, true, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 128, 128, false, true, PROTO_F32, PROTO_VARIANT_AUTO}, /* (no dX) */
		{1u << 20, 128, 128, true, true, PROTO_BF16, PROTO_VARIANT_AUTO},
		{1u << 20, 128, 128, true, true, PROTO_F32, PROTO_VARIANT_NARROW},
	};
	for (size_t i = 0; i < sizeof(stay) / sizeof(stay[0]); i++) {
		q = job(stay[i].b, stay[i].i, stay[i].o, stay[i].dw, stay[i].db, stay[i].dw, stay[i].v);
		q.dtype = stay[i].dt;
		p = pass_leaves(refine_splitk128, &q, gpu);
		assert_int_not_equal(p.param, KERN_SPLITK128);
		assert_int_not_equal(p.input, KERN_TILED128);
	}
}

/* Short narrow f32 layers on a GPU (refine_narrow_short): forced
 * split-K's plan where the rules gave the narrow family fewer than 65,536
 * rows of at least 32 inputs and 16 outputs; narrow layers, long batches,
 * 16-bit, forced variants and db alone keep theirs. */
static void test_narrow_short(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_F32X3 | VARIANT_HAS_NV2;
	const uint64_t take[][3] = {{16384, 33, 17}, {16384, 64, 64}, {65535, 32, 16}, {20000, 256, 256}};
	for (size_t i = 0; i < sizeof(take) / sizeof(take[0]); i++) {
		proto_request q = job(take[i][0], take[i][1], take[i][2], true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = PROTO_F32;
		variant_plan p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_NARROW); /* the rules alone (and on lavapipe) */
		refine_narrow_short(&p, &q);
		proto_request f = q;
		f.variant = PROTO_VARIANT_SPLITK;
		const variant_plan forced = variant_choose(&f, gpu);
		assert_int_equal(p.param, KERN_SPLITK);
		assert_int_equal(p.slices, forced.slices);
		assert_int_equal(p.input, forced.input);
		assert_int_equal(p.min_slices, 2);
	}
	const struct {
		uint64_t b, i, o;
		bool dw;
		proto_dtype dt;
		proto_variant v;
	} stay[] = {
		{16384, 1, 1, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{16384, 31, 64, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{16384, 64, 15, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{65536, 64, 64, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{16384, 64, 64, true, PROTO_BF16, PROTO_VARIANT_AUTO},
		{16384, 64, 64, true, PROTO_F32, PROTO_VARIANT_NARROW},
		{16384, 64, 64, false, PROTO_F32, PROTO_VARIANT_AUTO},
	};
	for (size_t i = 0; i < sizeof(stay) / sizeof(stay[0]); i++) {
		proto_request q = job(stay[i].b, stay[i].i, stay[i].o, stay[i].dw, true, true, stay[i].v);
		q.dtype = stay[i].dt;
		pass_leaves(refine_narrow_short, &q, gpu);
	}
}

/* A dX read through the bus (refine_host_dx, where placement.c finds dY or
 * dX in host memory on a GPU): auto's narrow dX goes to the seed kernel,
 * its dW/db stay; forced narrow, other dX kernels and jobs without dX keep
 * their plans. */
static void test_host_dx(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_F32X3 | VARIANT_HAS_NV2;
	const uint64_t take[][3] = {{65536, 16, 8}, {262144, 3, 5}, {65536, 1, 1}, {1048576, 256, 256}};
	for (size_t i = 0; i < sizeof(take) / sizeof(take[0]); i++)
		for (int d = 0; d < 2; d++) {
			proto_request q = job(take[i][0], take[i][1], take[i][2], true, true, true, PROTO_VARIANT_AUTO);
			q.dtype = d ? PROTO_BF16 : PROTO_F32;
			variant_plan p = variant_choose(&q, gpu);
			const variant_plan before = p;
			assert_int_equal(p.input, KERN_NARROW_DX); /* the rules alone (and on lavapipe) */
			refine_host_dx(&p, &q);
			assert_int_equal(p.input, KERN_INPUT);
			assert_int_equal(p.dx_slices, 1);
			assert_int_equal(p.param, before.param);
			assert_int_equal(p.slices, before.slices);
		}
	proto_request q = job(65536, 16, 8, true, true, true, PROTO_VARIANT_NARROW);
	q.dtype = PROTO_F32;
	assert_int_equal(pass_leaves(refine_host_dx, &q, gpu).input, KERN_NARROW_DX);
	q = job(65536, 16, 8, true, true, false, PROTO_VARIANT_AUTO); /* no dX */
	q.dtype = PROTO_F32;
	pass_leaves(refine_host_dx, &q, gpu);
	q = job(32768, 16, 8, true, true, true, PROTO_VARIANT_AUTO); /* dX not on the narrow family */
	q.dtype = PROTO_F32;
	assert_int_not_equal(pass_leaves(refine_host_dx, &q, gpu).input, KERN_NARROW_DX);
}

/* The narrow family also takes a layer of up to 1024 inputs onto at most
 * 16 outputs (VARIANT_NARROW_WIDE_MAX_IN / _OUT); 16-bit keeps
 * coopmat_khr_splitk's plan where the device has it. */
static void test_narrow_wide_in(void **state)
{
	(void)state;
	const unsigned narrow = VARIANT_HAS_NARROW;
	proto_request q = job(262144, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	variant_plan p = variant_choose(&q, narrow | VARIANT_HAS_F32X3);
	assert_int_equal(p.param, KERN_NARROW);
	assert_int_equal(p.input, KERN_NARROW_DX);
	q.in = 300; /* in between */
	assert_int_equal(variant_choose(&q, narrow).param, KERN_NARROW);
	const uint64_t no[][3] = {{262144, 1025, 16}, {262144, 1024, 17}, {16383, 1024, 16}};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		q = job(no[i][0], no[i][1], no[i][2], true, true, true, PROTO_VARIANT_AUTO);
		q.dtype = PROTO_F32;
		p = variant_choose(&q, narrow);
		assert_int_not_equal(p.param, KERN_NARROW);
		assert_int_not_equal(p.input, KERN_NARROW_DX);
	}
	q = job(262144, 1024, 16, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_BF16;
	p = variant_choose(&q, narrow | VARIANT_HAS_CMK | VARIANT_HAS_CMKS | VARIANT_HAS_CMKS_DX);
	assert_int_equal(p.param, KERN_CMKS_DX);
	assert_int_equal(variant_choose(&q, narrow).param, KERN_NARROW); /* (lavapipe) */
}

/* linear_tiled128_gemm's small tiling (KERN_TILED128_S, variant.h):
 * forced tiled128's f32 dX of in <= 64 on every device; auto's narrow-family
 * f32 dX of 32 <= in <= 64 on a GPU only: alone, or beside the narrow
 * family's dW/db after a barrier (the plan's `apart`). */
static void test_t128_small(void **state)
{
	(void)state;
	const unsigned gpu = VARIANT_HAS_NARROW | VARIANT_HAS_F32X3 | VARIANT_HAS_NV2;
	proto_request q = job(5000, 64, 48, true, true, true, PROTO_VARIANT_TILED128);
	q.dtype = PROTO_F32;
	variant_plan p = variant_choose(&q, gpu);
	assert_int_equal(p.input, KERN_TILED128);
	refine_t128_small(&p, &q, false);
	assert_int_equal(p.input, KERN_TILED128_S);
	assert_int_equal(p.param, KERN_TILED128); /* dW/db keep the 128 tile */
	q.in = 65;
	p = variant_choose(&q, gpu);
	refine_t128_small(&p, &q, true);
	assert_int_equal(p.input, KERN_TILED128);
	/* auto, narrow layers, dX alone: 64 and 32 inputs move on a GPU, 16
	 * stay; beside dW/db (the full backward) the narrow family keeps it */
	q = job(1u << 20, 64, 64, false, false, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	assert_int_equal(p.input, KERN_NARROW_DX);
	refine_t128_small(&p, &q, false); /* lavapipe: its rules */
	assert_int_equal(p.input, KERN_NARROW_DX);
	refine_t128_small(&p, &q, true);
	assert_int_equal(p.input, KERN_TILED128_S);
	q = job(1u << 20, 32, 16, false, false, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	refine_t128_small(&p, &q, true);
	assert_int_equal(p.input, KERN_TILED128_S);
	assert_int_equal(p.apart, 0); /* dX alone: nothing to keep apart */
	/* the full backward: dX moves beside the narrow family's dW/db, after
	 * a barrier; on lavapipe nothing changes */
	for (int with_db = 0; with_db < 2; with_db++) {
		q = job(1u << 20, 64, 64, true, with_db, true, PROTO_VARIANT_AUTO);
		q.dtype = PROTO_F32;
		p = variant_choose(&q, gpu);
		assert_int_equal(p.param, KERN_NARROW);
		assert_int_equal(p.input, KERN_NARROW_DX);
		assert_int_equal(p.apart, 0);
		variant_plan lp = p;
		refine_t128_small(&lp, &q, false);
		assert_memory_equal(&lp, &p, sizeof(p));
		refine_t128_small(&p, &q, true);
		assert_int_equal(p.param, KERN_NARROW);
		assert_int_equal(p.input, KERN_TILED128_S);
		assert_int_equal(p.apart, 1);
	}
	/* db alone beside dX */
	q = job(1u << 20, 32, 16, false, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = variant_choose(&q, gpu);
	assert_int_equal(p.param, KERN_NARROW);
	refine_t128_small(&p, &q, true);
	assert_int_equal(p.input, KERN_TILED128_S);
	assert_int_equal(p.apart, 1);
	/* dW/db on another family: the narrow dX stays (not measured) */
	q = job(1u << 20, 64, 64, true, true, true, PROTO_VARIANT_AUTO);
	q.dtype = PROTO_F32;
	p = (variant_plan){.param = KERN_SPLITK, .input = KERN_NARROW_DX, .slices = 8, .min_slices = 2,
			   .dx_slices = 1};
	const variant_plan other = p;
	refine_t128_small(&p, &q, true);
	assert_memory_equal(&p, &other, sizeof(p));
	const struct {
		uint64_t b, i, o;
		bool dx;
		proto_dtype dt;
		proto_variant v;
	} stay[] = {
		{1u << 20, 16, 64, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 31, 64, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 65, 64, true, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 64, 64, false, PROTO_F32, PROTO_VARIANT_AUTO},
		{1u << 20, 64, 64, true, PROTO_BF16, PROTO_VARIANT_AUTO},
		{1u << 20, 64, 64, true, PROTO_F32, PROTO_VARIANT_NARROW},
		{5000, 64, 48, true, PROTO_BF16, PROTO_VARIANT_TILED128},
		{5000, 64, 48, true, PROTO_F32, PROTO_VARIANT_TILED},
	};
	for (size_t i = 0; i < sizeof(stay) / sizeof(stay[0]); i++) {
		q = job(stay[i].b, stay[i].i, stay[i].o, true, true, stay[i].dx, stay[i].v);
		q.dtype = stay[i].dt;
		p = variant_choose(&q, gpu);
		const variant_plan before = p;
		refine_t128_small(&p, &q, true);
		assert_memory_equal(&p, &before, sizeof(p));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_narrow_layers),
		cmocka_unit_test(test_splitk128_wide_narrow),
		cmocka_unit_test(test_t128_small),
		cmocka_unit_test(test_narrow_wide_in),
		cmocka_unit_test(test_narrow_short),
		cmocka_unit_test(test_host_dx),
		cmocka_unit_test(test_short_layers),
		cmocka_unit_test(test_thresholds_at_the_tile_edge),
		cmocka_unit_test(test_bias_alone_is_one_pass_over_dy),
		cmocka_unit_test(test_forced_variants),
		cmocka_unit_test(test_splitk_for_tall_skinny),
		cmocka_unit_test(test_coopmat_where_the_device_has_it),
		cmocka_unit_test(test_coopmat_khr_first),
		cmocka_unit_test(test_coopmat_khr_tiling),
		cmocka_unit_test(test_widen_large_gemms),
		cmocka_unit_test(test_long_16bit_reductions_go_split_k),
		cmocka_unit_test(test_variant_names_round_trip),
		cmocka_unit_test(test_coopmat_khr_f32x3_forced_only),
		cmocka_unit_test(test_nv2_large),
		cmocka_unit_test(test_nv2_small),
		cmocka_unit_test(test_narrow_family),
		cmocka_unit_test(test_splitk128_mid_size),
		cmocka_unit_test(test_cmk_splitk_narrow_long),
		cmocka_unit_test(test_f32_splitk_forced_only),
		cmocka_unit_test(test_cmks_dx_fused),
		cmocka_unit_test(test_cmks_tilings),
	};
	return cmocka_run_group_tests_name("variant", tests, NULL, NULL);
}
