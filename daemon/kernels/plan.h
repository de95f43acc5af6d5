/* daemon/kernels/plan.h — a job's plan: which kernels compute its dW/db
 * and its dX, in how many slices. variant.c (auto's rules, the forced
 * variants) and placement.c write it; the recorder (record.c, dispatch.c)
 * and the engine read it. A header of its own so that the readers need not
 * include variant.h: variant.c reads the cost model, which records probe
 * jobs through record.c, and the files must not call each other in a loop. */
#ifndef VKG_DAEMON_PLAN_H
#define VKG_DAEMON_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "pipelines.h"

typedef struct variant_plan {
	int param;       /* KERN_* computing dW and/or db, or -1 */
	int input;       /* KERN_* computing dX, or -1 */
	uint32_t slices; /* split-K slices when param is KERN_SPLITK, else 1 */
	uint32_t min_slices; /* placement may lower `slices` down to this (its
			      * partials must fit) before it gives split-K up:
			      * 2 when auto chose split-K for speed, 1 when forced
			      * or taken for one rounding of a 16-bit output */
	uint32_t dx_slices;  /* split-K slices when input is KERN_SPLITK (16-bit
			      * dX over an out too long for one dispatch), else 1 */
	uint32_t apart;      /* 1: a job of both units records dX after a
			      * barrier behind dW/db, not beside it
			      * (refine_t128_small: the two kernels side by side
			      * ran slower than one after the other); 0 or 1, a
			      * word so that the struct has no padding */
} variant_plan;

/* Does plan p run dX in its dW pass (KERN_CMKS_DX or KERN_CMKS_DX_S,
 * variant.h)? */
static inline bool variant_dx_fused(const variant_plan *p)
{
	return p->param == KERN_CMKS_DX || p->param == KERN_CMKS_DX_S;
}

#endif
