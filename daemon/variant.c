/* daemon/variant.c — see variant.h. */
#include "variant.h"

#include "pipelines.h"

#include <stdbool.h>

#define TILE 64

variant_plan variant_choose(const proto_request *q)
{
	variant_plan p = {-1, -1};
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	if (dw || db) {
		bool tiled;
		if (q->variant == PROTO_VARIANT_AUTO)
			tiled = dw && q->out >= TILE && q->in >= TILE;
		else
			tiled = q->variant == PROTO_VARIANT_TILED;
		p.param = tiled ? KERN_TILED : KERN_PARAM;
	}
	if (q->t[PROTO_T_DX].present) {
		bool tiled;
		if (q->variant == PROTO_VARIANT_AUTO)
			tiled = q->batch >= TILE && q->in >= TILE && q->out >= 16;
		else
			tiled = q->variant == PROTO_VARIANT_TILED;
		p.input = tiled ? KERN_TILED : KERN_INPUT;
	}
	return p;
}
