/* daemon/kernels/refine.c — see refine.h. */
#include "refine.h"

#include <assert.h>

#include "kiface.h"
#include "pipelines.h"

#define WIDE_TILE VKG_TILE_TILED128

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

#define WIDE_MIN_TILES 512 /* about four workgroups per SM on a 132-SM H200 */
#define WIDE_MIN_K 1024    /* 8192x4096x32's dX (K = 32) ran slower on it */

/* C = A·B with A m×k, B k×n. */
static bool wide_enough(uint64_t m, uint64_t n, uint64_t k)
{
	return k >= WIDE_MIN_K && ceil_div(m, WIDE_TILE) * ceil_div(n, WIDE_TILE) >= WIDE_MIN_TILES;
}

void refine_widen(variant_plan *p, const proto_request *q)
{
	if (q->variant != PROTO_VARIANT_AUTO)
		return;
	/* f16/bf16: not where the 128 tile (8 rows per iteration) would cut a
	 * reduction the 64 tile walks in one dispatch (a rounding per piece) */
	const uint64_t kmax = q->dtype == PROTO_F32 ? UINT64_MAX : kshape_max_k(KERN_TILED128, q->dtype);
	if (p->param == KERN_TILED && q->t[PROTO_T_DW].present && wide_enough(q->out, q->in, q->batch) &&
	    q->batch <= kmax)
		p->param = KERN_TILED128;
	if (p->input == KERN_TILED && wide_enough(q->batch, q->in, q->out) && q->out <= kmax)
		p->input = KERN_TILED128;
}


void refine_t128_small(variant_plan *p, const proto_request *q, bool gpu)
{
	if (q->dtype != PROTO_F32 || !q->t[PROTO_T_DX].present || q->in > REFINE_T128_SMALL_MAX_IN)
		return;
	if (q->variant == PROTO_VARIANT_TILED128 && p->input == KERN_TILED128)
		p->input = KERN_TILED128_S;
	else if (gpu && q->variant == PROTO_VARIANT_AUTO && p->input == KERN_NARROW_DX &&
		 q->in >= REFINE_T128_SMALL_MIN_IN) {
		/* dX alone, or beside the narrow family's dW/db after a barrier */
		const bool param = q->t[PROTO_T_DW].present || q->t[PROTO_T_DB].present;
		if (param && p->param != KERN_NARROW)
			return;
		p->input = KERN_TILED128_S;
		p->apart = param;
	}
}

void refine_narrow_short(variant_plan *p, const proto_request *q)
{
	if (q->variant != PROTO_VARIANT_AUTO || q->dtype != PROTO_F32 || p->param != KERN_NARROW ||
	    !q->t[PROTO_T_DW].present || q->batch >= VARIANT_NARROW_DX_MIN_BATCH ||
	    q->in < REFINE_NARROW_SHORT_MIN_IN || q->out < REFINE_NARROW_SHORT_MIN_OUT)
		return;
	p->param = KERN_SPLITK;
	p->slices = variant_forced_splitk_slices(q);
	p->min_slices = 2;
	if (p->input == KERN_INPUT)
		p->input = KERN_TILED;
}

void refine_host_dx(variant_plan *p, const proto_request *q)
{
	if (q->variant != PROTO_VARIANT_AUTO || !q->t[PROTO_T_DX].present || p->input != KERN_NARROW_DX)
		return;
	p->input = KERN_INPUT;
	p->dx_slices = 1;
}

void refine_short(variant_plan *p, const proto_request *q)
{
	if (q->variant != PROTO_VARIANT_AUTO || q->batch > REFINE_SHORT_MAX_BATCH ||
	    q->in > REFINE_SHORT_MAX_FEATURES || q->out > REFINE_SHORT_MAX_FEATURES ||
	    q->in * q->out > REFINE_SHORT_MAX_WEIGHTS)
		return;
	if (q->t[PROTO_T_DW].present || q->t[PROTO_T_DB].present) {
		p->param = KERN_PARAM;
		p->slices = 1;
	}
	if (q->t[PROTO_T_DX].present) {
		p->input = KERN_INPUT;
		p->dx_slices = 1;
	}
}

/* An m × n GEMM over k that auto cuts on the 128 tile (refine_splitk128). */
static bool s128_fits(uint64_t m, uint64_t n, uint64_t k)
{
	return m >= WIDE_TILE && n >= WIDE_TILE && k >= VARIANT_S128_MIN_K && m * n * k >= VARIANT_S128_MIN_MACS &&
	       ceil_div(m, WIDE_TILE) * ceil_div(n, WIDE_TILE) < VARIANT_S128_WAVE;
}

void refine_splitk128(variant_plan *p, const proto_request *q)
{
	if (q->variant != PROTO_VARIANT_AUTO || q->dtype != PROTO_F32)
		return;
	/* a narrow f32 layer at least VARIANT_NARROW_S128_MIN_FEATURES wide
	 * both ways: off the narrow family's FMA loops */
	const bool wide_narrow =
		q->in >= VARIANT_NARROW_S128_MIN_FEATURES && q->out >= VARIANT_NARROW_S128_MIN_FEATURES;
	/* ... but dW/db of up to VARIANT_NARROW_MT8_MAX_FEATURES over
	 * VARIANT_NARROW_MT8_MIN_BATCH rows or more stay: whole 64x64 tiles
	 * on the family's 8x8 path (shaders/narrow_mt8.glsl) */
	const bool mt8 = q->in <= VARIANT_NARROW_MT8_MAX_FEATURES && q->out <= VARIANT_NARROW_MT8_MAX_FEATURES &&
			 q->batch >= VARIANT_NARROW_MT8_MIN_BATCH;
	if (p->input == KERN_NARROW_DX && wide_narrow)
		p->input = KERN_TILED128;
	if ((p->param == KERN_PARAM || p->param == KERN_TILED || p->param == KERN_SPLITK ||
	     (p->param == KERN_NARROW && wide_narrow && !mt8)) &&
	    q->t[PROTO_T_DW].present && s128_fits(q->out, q->in, q->batch)) {
		const uint32_t s = variant_s128_slices(q->out, q->in, q->batch, VARIANT_S128_MIN_ROWS, 2);
		const uint64_t wgs = (uint64_t)s * ceil_div(q->out, WIDE_TILE) * ceil_div(q->in, WIDE_TILE);
		/* where the rules split on the 64 tile already, not for less than
		 * half a wave (8192x256x256: 128 workgroups of slices of 256
		 * rows, against split-K's 512) */
		if (s >= 2 && (p->param != KERN_SPLITK || wgs >= VARIANT_S128_WAVE / 2)) {
			p->param = KERN_SPLITK128;
			p->slices = s;
			p->min_slices = 2;
		}
	}
	if ((p->input == KERN_INPUT || p->input == KERN_TILED) && s128_fits(q->batch, q->in, q->out)) {
		const uint32_t s = variant_s128_slices(q->batch, q->in, q->out, VARIANT_S128_MIN_ROWS, 2);
		if (s >= 2) {
			p->input = KERN_SPLITK128;
			p->dx_slices = s;
		}
	}
}

/* Does an m × n GEMM take coopmat_nv2 with tiles of bm × bn: at least
 * min_tiles of them, all whole where `whole` says so? */
static bool nv2_fits(uint64_t m, uint64_t n, uint32_t bm, uint32_t bn, uint64_t min_tiles, bool whole)
{
	return ceil_div(m, bm) * ceil_div(n, bn) >= min_tiles && (!whole || (m % bm == 0 && n % bn == 0));
}

/* Each of q's GEMMs still on coopmat_khr to coopmat_nv2's pipeline kdw
 * (dW) or kdx (dX), tiles of bm × bn, where they fit (nv2_fits) and its
 * reduction is one the loop bound takes in one dispatch. */
static void nv2_take(variant_plan *p, const proto_request *q, uint32_t bm, uint32_t bn, uint64_t min_tiles,
		     bool whole, int kdw, int kdx)
{
	if (q->variant != PROTO_VARIANT_AUTO || q->dtype == PROTO_F32 || !bm || !bn)
		return;
	const uint64_t kmax = kshape_max_k(kdw, q->dtype);
	if (p->param == KERN_CMK_DW && q->batch <= kmax && nv2_fits(q->out, q->in, bm, bn, min_tiles, whole))
		p->param = kdw;
	/* (a dX the narrow layers' rule put on coopmat_khr stays there: variant.h) */
	if (p->input == KERN_CMK_DX && q->out <= kmax && !variant_cmk_dx_narrow(q, VARIANT_HAS_CMK, p->param) &&
	    nv2_fits(q->batch, q->in, bm, bn, min_tiles, whole))
		p->input = kdx;
}

void refine_nv2_large(variant_plan *p, const proto_request *q, uint32_t bm, uint32_t bn, uint64_t min_tiles)
{
	nv2_take(p, q, bm, bn, min_tiles, false, KERN_NV2_DW, KERN_NV2_DX);
}

void refine_nv2_small(variant_plan *p, const proto_request *q, uint32_t bm, uint32_t bn, uint64_t min_tiles)
{
	nv2_take(p, q, bm, bn, min_tiles, true, KERN_NV2_DW_S, KERN_NV2_DX_S);
}

void refine_cmks_tiling(variant_plan *p, const proto_request *q, bool has_l, bool has_s, bool has_dx_s)
{
	if (p->param != KERN_CMK_SPLITK || q->dtype == PROTO_F32)
		return;
	int k = pipelines_cmks_for(q->t[PROTO_T_DW].present ? q->in : 1, q->out);
	if ((k == KERN_CMKS_L && !has_l) || (k == KERN_CMKS_S && !has_s) || k == KERN_CMK_SPLITK)
		return;
	/* (auto and forced alike cut at whole 64-row trips: VARIANT_CMKS_MIN_ROWS) */
	const uint32_t s = variant_cmks_slices_side(q, KSHAPE_CMKS_STEP, pipelines_cmks_side(k));
	/* (fewer or as many tiles as the 64x64 ones: as many slices or more,
	 * and the plan's least was at most its slices) */
	assert(s >= p->slices && s >= p->min_slices);
	/* auto's dX of such a layer on the narrow family: beside dW instead */
	const bool fuse = k == KERN_CMKS_S && has_dx_s && q->variant == PROTO_VARIANT_AUTO &&
			  q->t[PROTO_T_DW].present && p->input == KERN_NARROW_DX;
	if (fuse)
		k = p->input = KERN_CMKS_DX_S;
	p->param = k;
	p->slices = s;
}

void refine_cmk_dx_stream(variant_plan *p, const proto_request *q, const dxs_tile *const tiles[DXS_CLASSES])
{
	if (q->variant != PROTO_VARIANT_AUTO || q->dtype == PROTO_F32 ||
	    (p->input != KERN_CMK_DX && p->input != KERN_CMK_DX_S))
		return;
	static const uint32_t max_k[DXS_CLASSES] = DXS_CLASS_MAX_K;
	for (int c = 0; c < DXS_CLASSES; c++)
		if (q->out <= max_k[c] && tiles[c] && dxs_tile_takes(tiles[c], q->batch, q->in, q->out)) {
			p->input = KERN_CMK_DXS + c;
			return;
		}
}

void refine_cmk_tiling(variant_plan *p, const proto_request *q, uint64_t small_below, uint32_t bm,
			uint32_t bn)
{
	if (q->variant == PROTO_VARIANT_COOPMAT_KHR_F32X3) /* the large tiling only */
		return;
	if (p->param == KERN_CMK_DW && ceil_div(q->out, bm) * ceil_div(q->in, bn) < small_below)
		p->param = KERN_CMK_DW_S;
	if (p->input == KERN_CMK_DX && ceil_div(q->batch, bm) * ceil_div(q->in, bn) < small_below)
		p->input = KERN_CMK_DX_S;
}
