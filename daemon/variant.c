/* daemon/variant.c — see variant.h. */
#include "variant.h"

#include "pipelines.h"

#include <stdbool.h>

#define TILE 64
#define BIG (1ull << 20)      /* batch*in below this: the simple kernels win */
#define SPLITK_TILES 128      /* fewer output tiles than this leave the GPU idle */
#define SPLITK_TARGET 256     /* workgroups split-K aims for */
#define SPLITK_MIN_ROWS 1024  /* auto: rows per slice at least this */
#define SPLITK_MAX 64
#define TILED128_MIN_TILES 132 /* auto: 128x128 tiles only when there are this many */

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The tiled kernel for an m×n output: 128×128 tiles where both sides have
 * one and (unless forced) there are enough of them, else 64×64. */
static int tiled_for(uint64_t m, uint64_t n, bool forced)
{
	if (m >= 128 && n >= 128 && (forced || ceil_div(m, 128) * ceil_div(n, 128) >= TILED128_MIN_TILES))
		return KERN_TILED128;
	return KERN_TILED;
}

variant_plan variant_choose(const proto_request *q, bool coopmat)
{
	variant_plan p = {-1, -1, 1};
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	const bool force_cm = q->variant == PROTO_VARIANT_COOPMAT && coopmat;
	if (dw || db) {
		const uint64_t tiles = ceil_div(q->out, TILE) * ceil_div(q->in, TILE);
		if (force_cm || (q->variant == PROTO_VARIANT_AUTO && coopmat && q->out >= TILE &&
				 q->in >= TILE && q->batch >= 256)) {
			p.param = dw ? KERN_COOPMAT : KERN_PARAM;
		} else if (q->variant == PROTO_VARIANT_AUTO) {
			uint64_t s = min_u64(min_u64(SPLITK_MAX, ceil_div(SPLITK_TARGET, tiles)),
					     q->batch / SPLITK_MIN_ROWS);
			if (dw && tiles < SPLITK_TILES && q->batch >= 4 * SPLITK_MIN_ROWS && s >= 2) {
				p.param = KERN_SPLITK;
				p.slices = (uint32_t)s;
			} else if (dw && q->out >= 32 && q->in >= TILE && q->batch * q->in >= BIG) {
				p.param = KERN_TILED;
			} else {
				p.param = KERN_PARAM;
			}
		} else if (q->variant == PROTO_VARIANT_SPLITK) {
			p.param = KERN_SPLITK;
			uint64_t s = q->batch / 16;
			p.slices = (uint32_t)(s < 1 ? 1 : s > SPLITK_MAX ? SPLITK_MAX : s);
		} else {
			p.param = q->variant == PROTO_VARIANT_GENERIC ? KERN_PARAM : KERN_TILED;
		}
	}
	if (q->t[PROTO_T_DX].present) {
		bool tiled;
		if (force_cm || (q->variant == PROTO_VARIANT_AUTO && coopmat && q->batch >= TILE &&
				 q->in >= TILE && q->out >= TILE)) {
			p.input = KERN_COOPMAT;
			return p;
		}
		if (q->variant == PROTO_VARIANT_AUTO)
			tiled = q->batch >= TILE && q->in >= TILE && q->out >= 16 &&
				q->batch * q->in >= BIG;
		else
			tiled = q->variant != PROTO_VARIANT_GENERIC;
		p.input = tiled ? KERN_TILED : KERN_INPUT;
	}
	const bool forced = q->variant != PROTO_VARIANT_AUTO;
	if (p.param == KERN_TILED && q->t[PROTO_T_DW].present)
		p.param = tiled_for(q->out, q->in, forced);
	if (p.input == KERN_TILED)
		p.input = tiled_for(q->batch, q->in, forced);
	return p;
}

uint64_t variant_splitk_elems(const proto_request *q, uint32_t slices)
{
	return (uint64_t)slices * (q->out * q->in + q->out);
}
