/* daemon/variant.c — see variant.h. */
#include "variant.h"

#include "pipelines.h"

#include <stdbool.h>

#define TILE 64
#define BIG (1ull << 20) /* batch*in below this: the simple kernels win */

variant_plan variant_choose(const proto_request *q)
{
	variant_plan p = {-1, -1};
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	if (dw || db) {
		bool tiled;
		if (q->variant == PROTO_VARIANT_AUTO)
			tiled = dw && q->out >= 32 && q->in >= TILE && q->batch * q->in >= BIG;
		else
			tiled = q->variant == PROTO_VARIANT_TILED;
		p.param = tiled ? KERN_TILED : KERN_PARAM;
	}
	if (q->t[PROTO_T_DX].present) {
		bool tiled;
		if (q->variant == PROTO_VARIANT_AUTO)
			tiled = q->batch >= TILE && q->in >= TILE && q->out >= 16 &&
				q->batch * q->in >= BIG;
		else
			tiled = q->variant == PROTO_VARIANT_TILED;
		p.input = tiled ? KERN_TILED : KERN_INPUT;
	}
	return p;
}
