/* daemon/kernels/kshape.c — see kshape.h. */
#include "kshape.h"

#include "kiface.h"
#include "pipelines.h"

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t kshape_narrow_max_rows(void)
{
	const uint64_t r = (uint64_t)KSHAPE_MAX_LOOP_TRIPS / 4 / VKG_NARROW_STEP * VKG_NARROW_STEP;
	return r < VKG_NARROW_STEP ? VKG_NARROW_STEP : r;
}

uint64_t kshape_narrow_tiles(const proto_request *q)
{
	return (q->t[PROTO_T_DW].present ? ceil_div(q->in, VKG_NARROW_TILE) : 1) * ceil_div(q->out, VKG_NARROW_TILE);
}

uint64_t kshape_narrow_rows(const proto_request *q, uint32_t blocks)
{
	const uint64_t r = ceil_div(q->batch, blocks ? blocks : 1);
	return ceil_div(r, VKG_NARROW_STEP) * VKG_NARROW_STEP;
}

uint32_t kshape_narrow_blocks(const proto_request *q)
{
	uint64_t b = ceil_div(KSHAPE_NARROW_WGS, kshape_narrow_tiles(q));
	b = min_u64(b, ceil_div(q->batch, KSHAPE_NARROW_MIN_ROWS));
	const uint64_t least = ceil_div(q->batch, kshape_narrow_max_rows());
	if (b < least)
		b = least;
	if (b < 1)
		b = 1;
	/* whole blocks of whole steps: the last block not empty */
	return (uint32_t)ceil_div(q->batch, kshape_narrow_rows(q, (uint32_t)min_u64(b, UINT32_MAX)));
}

uint32_t kshape_narrow_min_blocks(const proto_request *q)
{
	return (uint32_t)ceil_div(q->batch, kshape_narrow_max_rows());
}

/* The least power of two >= n. */
static uint64_t pow2_ceil(uint64_t n)
{
	uint64_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

uint64_t kshape_narrow_step_rows(const proto_request *q)
{
	const uint64_t oq = ceil_div(min_u64(q->out, VKG_NARROW_TILE), 4);
	const uint64_t iq = q->t[PROTO_T_DW].present ? ceil_div(min_u64(q->in, VKG_NARROW_TILE), 4) : 1;
	return 1024 / pow2_ceil(oq > iq ? oq : iq);
}

uint64_t kshape_narrow_dx_tile_rows(uint64_t in)
{
	return 2048 / pow2_ceil(ceil_div(in < VKG_NARROW_TILE ? in : VKG_NARROW_TILE, 8));
}

uint64_t kshape_narrow_dx_groups(const proto_request *q, uint32_t *tiles)
{
	const uint64_t rowtiles = ceil_div(q->batch, kshape_narrow_dx_tile_rows(q->in));
	const uint64_t all = rowtiles * ceil_div(q->in, VKG_NARROW_TILE);
	uint64_t t = ceil_div(all, KSHAPE_NARROW_DX_WGS);
	/* a workgroup's loops: per row tile, out (in pieces of kshape_max_k)
	 * and a trip per chunk of at least 2 (at most k / 2 + 1 trips), within
	 * half the loop bound counted as k + 2 per row tile: at most 3/4 */
	const uint64_t k = min_u64(q->out, kshape_max_k(KERN_NARROW_DX, q->dtype));
	const uint64_t most = (uint64_t)KSHAPE_MAX_LOOP_TRIPS / 2 / (k + 2);
	t = min_u64(t, most ? most : 1);
	t = t ? t : 1;
	*tiles = (uint32_t)t;
	return ceil_div(rowtiles, t);
}

static uint32_t loop_trips = KSHAPE_LOOP_TRIPS_MAX;

uint32_t kshape_loop_trips(void)
{
	return loop_trips;
}

void kshape_set_loop_trips(uint32_t trips)
{
	loop_trips = trips >= 1 && trips <= KSHAPE_LOOP_TRIPS_MAX ? trips : KSHAPE_LOOP_TRIPS_MAX;
}

uint64_t kshape_max_k(int kern, proto_dtype dt)
{
	uint64_t per; /* elements of the reduction per loop iteration */
	switch (kern) {
	case KERN_PARAM: per = VKG_PARAM_STRIPES; break; /* stripes walk the batch */
	case KERN_INPUT:
	case KERN_TILED:
	case KERN_SPLITK: per = 16; break;
	case KERN_TILED128:
	case KERN_TILED128_S:
	case KERN_SPLITK128: per = dt == PROTO_F32 ? 16 : 8; break;
	case KERN_NARROW: return UINT64_MAX; /* any batch: its blocks (kshape_narrow_blocks) */
	case KERN_NARROW_DX: return (uint64_t)KSHAPE_MAX_LOOP_TRIPS / 4; /* out, one row tile per workgroup */
	case KERN_COOPMAT: per = 32; break;
	case KERN_NV2_DW:
	case KERN_NV2_DX:
	case KERN_NV2_DW_S:
	case KERN_NV2_DX_S: per = NV2_TILE_MIN_BK; break; /* its tiling's BK is at least this */
	case KERN_CMK_DW:
	case KERN_CMK_DX:
	case KERN_CMK_DW_S:
	case KERN_CMK_DX_S: per = 2 * KSHAPE_CMK_MIN_BK; break; /* two k steps per trip */
	case KERN_CMK_SPLITK:
	case KERN_CMKS_L:
	case KERN_CMKS_S:
	case KERN_CMKS_DX:
	case KERN_CMKS_DX_S: per = KSHAPE_CMKS_STEP; break; /* its two k steps of 32 per trip */
	default: per = 1; break;
	}
	return per * KSHAPE_MAX_LOOP_TRIPS;
}

uint64_t kshape_narrow_elems(const proto_request *q, uint32_t blocks)
{
	return (uint64_t)blocks * kshape_narrow_stride(q);
}

uint64_t kshape_narrow_stride(const proto_request *q)
{
	return (q->t[PROTO_T_DW].present ? q->out * q->in : 0) + q->out;
}

uint64_t kshape_splitk_elems(const proto_request *q, uint32_t slices)
{
	return (uint64_t)slices * (q->out * q->in + q->out);
}

uint64_t kshape_splitk_dx_elems(const proto_request *q, uint32_t slices)
{
	return (uint64_t)slices * q->batch * q->in;
}

/* A reduction of K cut into about `slices` slices of whole steps of `step`:
 * the slice length, and how many slices that makes (none empty). */
static uint64_t slice_len(uint64_t K, uint32_t slices, uint64_t step)
{
	const uint64_t l = ceil_div(K ? K : 1, slices ? slices : 1);
	return ceil_div(l, step) * step;
}

static uint32_t slice_count(uint64_t K, uint32_t slices, uint64_t step)
{
	return (uint32_t)ceil_div(K ? K : 1, slice_len(K, slices, step));
}

uint64_t kshape_cmks_len(uint64_t K, uint32_t slices)
{
	return slice_len(K, slices, KSHAPE_CMKS_STEP);
}

uint32_t kshape_cmks_slices(uint64_t K, uint32_t slices)
{
	return slice_count(K, slices, KSHAPE_CMKS_STEP);
}

uint64_t kshape_s128_len(uint64_t K, uint32_t slices)
{
	return slice_len(K, slices, KSHAPE_S128_STEP);
}

uint32_t kshape_s128_slices(uint64_t K, uint32_t slices)
{
	return slice_count(K, slices, KSHAPE_S128_STEP);
}

