/* daemon/kernels/variant.c — see variant.h. */
#include "variant.h"

#include "coopmat_khr.h"
#include "costmodel.h"
#include "kiface.h"
#include "device.h"
#include "pipelines.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#define TILE VKG_TILE_TILED
#define WIDE_TILE VKG_TILE_TILED128
#define BIG (1ull << 20)      /* batch*in below this: the simple kernels win */
#define NARROW 32             /* out up to this: the seed kernel for dW */
#define SPLITK_WGS 256        /* fewer workgroups than this leave the GPU idle */
#define SPLITK_TARGET 1024    /* workgroups split-K aims for */
#define SPLITK_MIN_ROWS 256   /* auto: rows per slice at least this */
#define SPLITK_MAX 64
#define SPLITK_NARROW_ROWS 64 /* narrow dW: rows per slice at least this */

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The tensor-core kernel auto picks for q's dtype, or -1. */
static int matrix_kernel(unsigned caps)
{
	return caps & VARIANT_HAS_CMK ? KERN_CMK_DW : caps & VARIANT_HAS_COOPMAT ? KERN_COOPMAT : -1;
}

bool variant_narrow_fits(const proto_request *q)
{
	return q->batch >= VARIANT_NARROW_MIN_BATCH &&
	       ((q->in <= VARIANT_NARROW_MAX_FEATURES && q->out <= VARIANT_NARROW_MAX_FEATURES) ||
		(q->in <= VARIANT_NARROW_WIDE_MAX_IN && q->out <= VARIANT_NARROW_WIDE_MAX_OUT));
}

bool variant_narrow_dx_fits(const proto_request *q)
{
	return variant_narrow_fits(q) && q->batch >= VARIANT_NARROW_DX_MIN_BATCH;
}

/* q's dW/db on the narrow family: its blocks, fewer down to the loop
 * bound's least where the partials must shrink (placement.c). */
static void take_narrow(const proto_request *q, variant_plan *p)
{
	p->param = KERN_NARROW;
	p->slices = kshape_narrow_blocks(q);
	p->min_slices = kshape_narrow_min_blocks(q);
}

uint32_t variant_forced_splitk_slices(const proto_request *q)
{
	const uint64_t s = q->batch / 16;
	return (uint32_t)(s < 1 ? 1 : s > SPLITK_MAX ? SPLITK_MAX : s);
}

bool variant_cmks_fits(const proto_request *q)
{
	const uint64_t t = pipelines_cmks_side(KERN_CMK_SPLITK);
	const bool long_enough = q->batch >= VARIANT_CMKS_MIN_BATCH ||
				 (q->batch >= VARIANT_CMKS_SHORT_MIN_BATCH && q->in >= VARIANT_CMKS_SHORT_MIN_FEATURES &&
				  q->out >= VARIANT_CMKS_SHORT_MIN_FEATURES);
	return q->dtype != PROTO_F32 && q->t[PROTO_T_DW].present && long_enough &&
	       q->in <= VARIANT_CMKS_MAX_FEATURES && q->out <= VARIANT_CMKS_MAX_FEATURES &&
	       ceil_div(q->in ? q->in : 1, t) * ceil_div(q->out ? q->out : 1, t) <= VARIANT_CMKS_MAX_TILES;
}

uint32_t variant_cmks_min_slices(const proto_request *q)
{
	const uint64_t s = ceil_div(q->batch ? q->batch : 1, kshape_max_k(KERN_CMK_SPLITK, q->dtype));
	return (uint32_t)(s ? s : 1);
}

uint32_t variant_cmks_slices(const proto_request *q, uint64_t min_rows)
{
	return variant_cmks_slices_side(q, min_rows, pipelines_cmks_side(KERN_CMK_SPLITK));
}

uint32_t variant_cmks_slices_side(const proto_request *q, uint64_t min_rows, uint64_t t)
{
	const uint64_t tiles = ceil_div(q->out ? q->out : 1, t) *
			       (q->t[PROTO_T_DW].present ? ceil_div(q->in ? q->in : 1, t) : 1);
	uint64_t s = VARIANT_CMKS_WAVE / tiles;
	s = min_u64(s, q->batch / (min_rows ? min_rows : 1));
	if (s < variant_cmks_min_slices(q))
		s = variant_cmks_min_slices(q);
	if (s > UINT32_MAX)
		s = UINT32_MAX;
	return kshape_cmks_slices(q->batch, (uint32_t)(s ? s : 1));
}

/* q's dW/db on split-K on the tensor cores, slices of at least min_rows. */
static void take_cmks(const proto_request *q, variant_plan *p, uint64_t min_rows, uint32_t least)
{
	p->param = KERN_CMK_SPLITK;
	p->slices = variant_cmks_slices(q, min_rows);
	p->min_slices = variant_cmks_min_slices(q);
	if (p->min_slices < least)
		p->min_slices = least;
	if (p->min_slices > p->slices)
		p->min_slices = p->slices;
}

/* dW (and db) when nothing is forced. */
static void choose_param_auto(const proto_request *q, unsigned caps, variant_plan *p)
{
	const bool dw = q->t[PROTO_T_DW].present;
	if ((caps & VARIANT_HAS_CMKS) && variant_cmks_fits(q)) {
		take_cmks(q, p, VARIANT_CMKS_MIN_ROWS, 2);
		return;
	}
	if ((caps & VARIANT_HAS_NARROW) && variant_narrow_fits(q)) {
		take_narrow(q, p);
		return;
	}
	if (!dw) {
		p->param = KERN_PARAM; /* db alone: one pass over dY */
		return;
	}
	if (matrix_kernel(caps) >= 0 && q->out >= TILE && q->in >= TILE && q->batch >= 256) {
		p->param = matrix_kernel(caps);
		return;
	}
	const uint64_t tiles = ceil_div(q->out, TILE) * ceil_div(q->in, TILE);
	const bool tiled = q->out > NARROW && q->in >= TILE && q->batch * q->in >= BIG;
	p->param = tiled ? KERN_TILED : KERN_PARAM;
	if (q->batch < 4096)
		return;
	/* a long reduction: cut the batch into S slices */
	uint64_t s = 0;
	if (!tiled) /* the seed kernel's workgroups would each walk the whole batch */
		s = min_u64(SPLITK_MAX, q->batch / SPLITK_NARROW_ROWS);
	else if (tiles < SPLITK_WGS) /* too few workgroups */
		s = min_u64(min_u64(SPLITK_MAX, ceil_div(SPLITK_TARGET, tiles)), q->batch / SPLITK_MIN_ROWS);
	if (s >= 2) {
		p->param = KERN_SPLITK;
		p->slices = (uint32_t)s;
	}
}

bool variant_available(const pipelines *pl, proto_variant v, proto_dtype d)
{
	return !variant_refused(pl, NULL, v, d, NULL, 0);
}

/* why[n] (when why is not NULL) gets fmt's sentence; true (refused). */
static bool refuse(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool refuse(char *why, size_t n, const char *fmt, ...)
{
	if (why && n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, n, fmt, ap);
		va_end(ap);
	}
	return true;
}

bool variant_refused(const pipelines *pl, const device *dev, proto_variant v, proto_dtype d,
		     char *why, size_t n)
{
	if (!why)
		n = 0;
	const char *dt = (unsigned)d < PROTO_DTYPE_COUNT ? proto_dtype_name(d) : "?";
	const char *name = n ? dev->info.name : "";
	if ((unsigned)d >= PROTO_DTYPE_COUNT || !pl->dtype_ok[d])
		return refuse(why, n, "dtype '%s' is not served on this device (it lacks 16-bit storage)",
			      dt);
	switch (v) {
	case PROTO_VARIANT_COOPMAT:
		if (pl->pipe[KERN_COOPMAT][d])
			return false;
		return refuse(why, n,
			      "variant 'coopmat' needs dtype f16 on a device with "
			      "VK_NV_cooperative_matrix (16x16x16 f16 -> f32); this job is %s on %s%s",
			      dt, name, n && !dev->coopmat ? ", which lacks it" : "");
	case PROTO_VARIANT_NARROW:
		if (pl->pipe[KERN_NARROW][d] && pl->pipe[KERN_NARROW_RED][d] && pl->pipe[KERN_NARROW_DX][d])
			return false;
		return refuse(why, n,
			      "variant 'narrow' needs %u bytes of shared memory per "
			      "workgroup; %s offers maxComputeSharedMemorySize = %u",
			      PIPELINES_NARROW_SHARED_BYTES, name,
			      n ? dev->props.limits.maxComputeSharedMemorySize : 0u);
	case PROTO_VARIANT_SPLITK128:
		if (pl->pipe[KERN_SPLITK128][d] && pl->pipe[KERN_REDUCE][d])
			return false;
		return refuse(why, n,
			      "variant 'splitk128' needs 32768 bytes of shared memory per "
			      "workgroup; %s offers maxComputeSharedMemorySize = %u",
			      name, n ? dev->props.limits.maxComputeSharedMemorySize : 0u);
	case PROTO_VARIANT_COOPMAT_KHR_SPLITK:
		/* (f32's KERN_CMK_SPLITK is coopmat_khr_f32_splitk's) */
		if (d != PROTO_F32 && pl->pipe[KERN_CMK_SPLITK][d] && pl->pipe[KERN_NARROW_RED][d] &&
		    pl->pipe[KERN_CMK_DX][d])
			return false;
		return refuse(why, n, "variant 'coopmat_khr_splitk' needs %s; this job is %s on %s",
			      d == PROTO_F32 ? "dtype f16 or bf16 (it multiplies 16-bit operands)"
			      : pl->cmks_why[d][0] ? pl->cmks_why[d] : "linear_coopmat_khr_gemm's pipelines",
			      dt, name);
	case PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK:
		/* f32 only: f16 and bf16 have coopmat_khr_splitk */
		if (d == PROTO_F32 && pl->pipe[KERN_CMK_SPLITK][d] && pl->pipe[KERN_NARROW_RED][d] &&
		    pl->pipe[KERN_CMK_DX][d])
			return false;
		return refuse(why, n, "variant 'coopmat_khr_f32_splitk' needs %s; this job is %s on %s",
			      d != PROTO_F32 ? "dtype f32 (f16 and bf16: coopmat_khr_splitk)"
			      : pl->cmks_why[d][0] ? pl->cmks_why[d] : "linear_coopmat_khr_f32x3_gemm's pipelines",
			      dt, name);
	case PROTO_VARIANT_TILED128:
		if (pl->pipe[KERN_TILED128][d])
			return false;
		return refuse(why, n,
			      "variant 'tiled128' needs 32768 bytes of shared memory per "
			      "workgroup; %s offers maxComputeSharedMemorySize = %u",
			      name, n ? dev->props.limits.maxComputeSharedMemorySize : 0u);
	case PROTO_VARIANT_COOPMAT_KHR:
		/* (f32's KERN_CMK_* pipelines are coopmat_khr_f32x3's) */
		if (d != PROTO_F32 && pl->pipe[KERN_CMK_DW][d])
			return false;
		return refuse(why, n, "variant 'coopmat_khr' needs %s; this job is %s on %s",
			      d == PROTO_F32 ? "dtype f16 or bf16 (it multiplies 16-bit operands)"
					     : pl->cmk_why[d],
			      dt, name);
	case PROTO_VARIANT_COOPMAT_KHR_F32X3:
		if (d == PROTO_F32 && pl->pipe[KERN_CMK_DW][d] && pl->pipe[KERN_CMK_DX][d])
			return false;
		return refuse(why, n, "variant 'coopmat_khr_f32x3' needs %s; this job is %s on %s",
			      d != PROTO_F32 ? "dtype f32" : pl->cmk_why[d], dt, name);
	case PROTO_VARIANT_COOPMAT_NV2:
		if (pl->pipe[KERN_NV2_DW][d] && pl->pipe[KERN_NV2_DX][d])
			return false;
		return refuse(why, n, "variant 'coopmat_nv2' needs %s; this job is %s on %s",
			      pl->nv2_why[d], dt, name);
	default:
		if ((unsigned)v < PROTO_VARIANT_COUNT)
			return false;
		return refuse(why, n, "variant %u is not one this daemon knows", (unsigned)v);
	}
}

/* f16/bf16: a reduction longer than its kernel walks in one dispatch would
 * be cut into pieces that each round the running sum to 16 bits (dispatch.c);
 * split-K's f32 partials round each output once instead (variant.h). */
static void keep_one_rounding(const proto_request *q, variant_plan *p)
{
	const uint64_t per_slice = kshape_max_k(KERN_SPLITK, q->dtype);
	if (q->dtype == PROTO_F32)
		return;
	if (p->param == KERN_SPLITK128 || pipelines_is_cmks(p->param) || pipelines_is_cmks_dx(p->param)) {
		/* f32 partials already, slices within the loop bound */
	} else if (p->param == KERN_SPLITK) {
		/* without split-K it would run tiled (placement.c): cut there */
		if (q->batch > kshape_max_k(KERN_TILED, q->dtype))
			p->min_slices = 1;
	} else if (p->param >= 0 && q->batch > kshape_max_k(p->param, q->dtype)) {
		p->param = KERN_SPLITK;
		p->slices = (uint32_t)min_u64(SPLITK_MAX, ceil_div(q->batch, per_slice));
		p->min_slices = 1;
	}
	if (p->input >= 0 && p->input != KERN_SPLITK128 && !pipelines_is_cmks_dx(p->input) &&
	    q->out > kshape_max_k(p->input, q->dtype)) {
		p->input = KERN_SPLITK;
		p->dx_slices = (uint32_t)min_u64(SPLITK_MAX, ceil_div(q->out, per_slice));
	}
}

/* Model cm's estimate (ns) of one part on kernel k (S slices), or < 0. */
static double part_ns(const costmodel *cm, const proto_request *q, bool for_dx, int k, uint32_t slices)
{
	const costmodel_geom g = costmodel_geometry(q, for_dx, k, slices);
	return g.work > 0 ? costmodel_ns(cm, k, q->dtype, g.wgs, g.work, g.trips) : -1.0;
}

uint64_t variant_estimate_ns(const costmodel *cm, const variant_plan *p, const proto_request *q)
{
	double ns = 0;
	if (!cm)
		return 0;
	if (p->param >= 0) {
		const double t = part_ns(cm, q, false, p->param, p->slices);
		if (t < 0)
			return 0;
		ns += t;
	}
	if (p->input >= 0) {
		const double t = part_ns(cm, q, true, p->input, p->dx_slices);
		if (t < 0)
			return 0;
		ns += t;
	}
	return ns > 1 ? (uint64_t)ns : 1;
}

/* May the model put q on the narrow family? Over a wider range than the
 * rules' (variant_narrow_fits): a batch of VARIANT_NARROW_MODEL_MIN_BATCH
 * rows or more (on lavapipe 4096x16x8 took 5.5 ms on it against the seed
 * kernels' 11.8), in and out within its bound; not the short batches of
 * square and wide layers, whose few long rows its probes do not cover. */
static bool model_narrow(const proto_request *q)
{
	return q->batch >= VARIANT_NARROW_MODEL_MIN_BATCH && q->in <= VARIANT_NARROW_MAX_FEATURES &&
	       q->out <= VARIANT_NARROW_MAX_FEATURES;
}

/* Is kernel k one the model may put on q's dW/db (for_dx false) or dX?
 * A 16-bit job's plain kernels only where they walk the reduction in one
 * dispatch: a longer one would go split-K after the model's choice
 * (keep_one_rounding), at a cost the model did not estimate (f16
 * 1048576x1x1 dW/db on lavapipe: the model took generic, which became
 * split-K's 64 slices of 64x64 tiles, 13 s against the narrow family's
 * 1.6 s); tiled128 likewise (its 8 rows per iteration would cut one the
 * 64 tile does not). */
static bool model_may(const proto_request *q, bool for_dx, int k)
{
	if (q->dtype == PROTO_F32 || k == KERN_SPLITK || k == KERN_NARROW)
		return true;
	return (for_dx ? q->out : q->batch) <= kshape_max_k(k, q->dtype);
}

/* dW (and db) by the cheapest plain family on the model (generic, tiled,
 * tiled128, split-K at 2, 4, ... 64 slices of at least 16 rows), where the
 * rules took one of them and the model's pick is VARIANT_MODEL_MARGIN
 * times cheaper. */
static void cost_param(const proto_request *q, const costmodel *cm, bool narrow, variant_plan *p)
{
	if (!q->t[PROTO_T_DW].present || (p->param != KERN_PARAM && p->param != KERN_TILED &&
					   p->param != KERN_SPLITK && p->param != KERN_NARROW))
		return;
	const double rules = part_ns(cm, q, false, p->param, p->slices);
	if (rules < 0)
		return;
	static const int plain[] = {KERN_PARAM, KERN_TILED, KERN_TILED128};
	int best = -1;
	uint32_t best_s = 1;
	double best_ns = 0;
	for (unsigned i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		const double t = part_ns(cm, q, false, plain[i], 1);
		if (t >= 0 && model_may(q, false, plain[i]) && (best < 0 || t < best_ns))
			best = plain[i], best_ns = t;
	}
	for (uint32_t s = 2; s <= SPLITK_MAX && q->batch / s >= 16; s *= 2) {
		const double t = part_ns(cm, q, false, KERN_SPLITK, s);
		if (t >= 0 && (best < 0 || t < best_ns))
			best = KERN_SPLITK, best_s = s, best_ns = t;
	}
	if (narrow && model_narrow(q)) {
		const uint32_t s = kshape_narrow_blocks(q);
		const double t = part_ns(cm, q, false, KERN_NARROW, s);
		if (t >= 0 && (best < 0 || t < best_ns))
			best = KERN_NARROW, best_s = s, best_ns = t;
	}
	if (best < 0 || best_ns * VARIANT_MODEL_MARGIN > rules)
		return;
	if (best == KERN_NARROW) {
		take_narrow(q, p);
		return;
	}
	p->param = best;
	p->slices = best_s;
	p->min_slices = 2;
}

/* dX the same, among linear_input_backward, linear_tiled_gemm and
 * linear_tiled128_gemm. */
static void cost_input(const proto_request *q, const costmodel *cm, bool narrow, variant_plan *p)
{
	if (p->input != KERN_INPUT && p->input != KERN_TILED && p->input != KERN_NARROW_DX)
		return;
	const double rules = part_ns(cm, q, true, p->input, 1);
	if (rules < 0)
		return;
	static const int plain[] = {KERN_INPUT, KERN_TILED, KERN_TILED128, KERN_NARROW_DX};
	int best = -1;
	double best_ns = 0;
	for (unsigned i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		if (plain[i] == KERN_NARROW_DX && !(narrow && model_narrow(q)))
			continue;
		const double t = part_ns(cm, q, true, plain[i], 1);
		if (t >= 0 && model_may(q, true, plain[i]) && (best < 0 || t < best_ns))
			best = plain[i], best_ns = t;
	}
	if (best >= 0 && best_ns * VARIANT_MODEL_MARGIN <= rules)
		p->input = best;
}

bool variant_cmk_dx_narrow(const proto_request *q, unsigned caps, int param)
{
	return q->variant == PROTO_VARIANT_AUTO && (caps & VARIANT_HAS_CMK) && q->dtype != PROTO_F32 &&
	       q->t[PROTO_T_DX].present && (variant_narrow_fits(q) || param == KERN_CMK_SPLITK) &&
	       q->in >= VARIANT_CMK_DX_MIN_FEATURES;
}

bool variant_cmks_dx_fits(const proto_request *q, unsigned caps, int param)
{
	return q->variant == PROTO_VARIANT_AUTO && (caps & VARIANT_HAS_CMKS_DX) && (caps & VARIANT_HAS_CMK) &&
	       q->dtype != PROTO_F32 && param == KERN_CMK_SPLITK && q->t[PROTO_T_DX].present &&
	       q->out <= VARIANT_CMKS_DX_MAX_OUT && q->in >= VARIANT_CMK_DX_MIN_FEATURES &&
	       q->in <= VARIANT_CMKS_MAX_FEATURES && q->batch >= VARIANT_CMKS_MIN_BATCH;
}

static variant_plan choose(const proto_request *q, unsigned caps, const costmodel *cm)
{
	variant_plan p = {.param = -1, .input = -1, .slices = 1, .min_slices = 2, .dx_slices = 1};
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	const bool force_cm = q->variant == PROTO_VARIANT_COOPMAT && (caps & VARIANT_HAS_COOPMAT);
	/* coopmat_khr_f32x3 is f32's KERN_CMK_* (VARIANT_HAS_F32X3) */
	const bool force_cmk = (q->variant == PROTO_VARIANT_COOPMAT_KHR && (caps & VARIANT_HAS_CMK)) ||
			       (q->variant == PROTO_VARIANT_COOPMAT_KHR_F32X3 && q->dtype == PROTO_F32 &&
				(caps & VARIANT_HAS_F32X3));
	const bool force_nv2 = q->variant == PROTO_VARIANT_COOPMAT_NV2 && (caps & VARIANT_HAS_NV2);
	/* split-K on the tensor cores: f16/bf16 (coopmat_khr_splitk) or f32 as
	 * three bf16 products (coopmat_khr_f32_splitk), both f32's and
	 * 16-bit's KERN_CMK_SPLITK (VARIANT_HAS_CMKS); dX on KERN_CMK_DX */
	const bool force_cmks =
		(caps & VARIANT_HAS_CMKS) &&
		((q->variant == PROTO_VARIANT_COOPMAT_KHR_SPLITK && q->dtype != PROTO_F32 && (caps & VARIANT_HAS_CMK)) ||
		 (q->variant == PROTO_VARIANT_COOPMAT_KHR_F32_SPLITK && q->dtype == PROTO_F32 &&
		  (caps & VARIANT_HAS_F32X3)));
	const int mk = matrix_kernel(caps);
	if (dw || db) {
		if (q->variant == PROTO_VARIANT_AUTO) {
			choose_param_auto(q, caps, &p);
		} else if (force_cmk) {
			p.param = dw ? KERN_CMK_DW : KERN_PARAM;
		} else if (force_nv2) {
			p.param = dw ? KERN_NV2_DW : KERN_PARAM;
		} else if (force_cmks) {
			take_cmks(q, &p, KSHAPE_CMKS_STEP, 1);
		} else if (force_cm) {
			p.param = dw ? KERN_COOPMAT : KERN_PARAM;
		} else if (q->variant == PROTO_VARIANT_SPLITK) {
			p.param = KERN_SPLITK;
			p.slices = variant_forced_splitk_slices(q);
			p.min_slices = 1;
		} else if (q->variant == PROTO_VARIANT_SPLITK128) {
			p.param = KERN_SPLITK128;
			p.slices = variant_s128_slices(q->out, dw ? q->in : 1, q->batch, KSHAPE_S128_STEP, 1);
			p.min_slices = 1;
		} else if (q->variant == PROTO_VARIANT_TILED128) {
			p.param = dw ? KERN_TILED128 : KERN_PARAM;
		} else if (q->variant == PROTO_VARIANT_NARROW) {
			take_narrow(q, &p);
		} else {
			p.param = q->variant == PROTO_VARIANT_GENERIC ? KERN_PARAM : KERN_TILED;
		}
	}
	if (variant_cmks_dx_fits(q, caps, p.param)) {
		/* dX beside dW in one pass (variant.h): the dX unit is the dW unit's */
		p.param = p.input = KERN_CMKS_DX;
	} else if (q->t[PROTO_T_DX].present) {
		if (force_cmk || force_cmks) /* (coopmat_khr_splitk: dX on coopmat_khr;
					      * coopmat_khr_f32_splitk: on coopmat_khr_f32x3) */
			p.input = KERN_CMK_DX;
		else if (force_nv2)
			p.input = KERN_NV2_DX;
		else if (force_cm)
			p.input = KERN_COOPMAT;
		else if (variant_cmk_dx_narrow(q, caps, p.param))
			p.input = KERN_CMK_DX; /* a narrow layer's 16-bit dX on the tensor cores (variant.h) */
		else if (q->variant == PROTO_VARIANT_NARROW ||
			 (q->variant == PROTO_VARIANT_AUTO && (caps & VARIANT_HAS_NARROW) && variant_narrow_dx_fits(q)))
			p.input = KERN_NARROW_DX;
		else if (q->variant == PROTO_VARIANT_AUTO && mk >= 0 && q->batch >= TILE && q->in >= TILE &&
			 q->out >= TILE)
			p.input = mk == KERN_CMK_DW ? KERN_CMK_DX : KERN_COOPMAT;
		else if (q->variant == PROTO_VARIANT_AUTO)
			p.input = q->batch >= TILE && q->in >= TILE && q->batch * q->in >= BIG
					  ? KERN_TILED : KERN_INPUT;
		else if (q->variant == PROTO_VARIANT_SPLITK128) {
			p.input = KERN_SPLITK128;
			p.dx_slices = variant_s128_slices(q->batch, q->in, q->out, KSHAPE_S128_STEP, 1);
		} else if (q->variant == PROTO_VARIANT_TILED128)
			p.input = KERN_TILED128;
		else
			p.input = q->variant != PROTO_VARIANT_GENERIC ? KERN_TILED : KERN_INPUT;
	}
	/* a 16-bit dX on the narrow family of a layer of few weights: dW/db
	 * there too, not on coopmat_khr_splitk (variant.h:
	 * VARIANT_CMKS_BESIDE_NARROW_MIN_WEIGHTS) */
	if (q->variant == PROTO_VARIANT_AUTO && q->dtype != PROTO_F32 && p.input == KERN_NARROW_DX &&
	    p.param == KERN_CMK_SPLITK && q->in * q->out < VARIANT_CMKS_BESIDE_NARROW_MIN_WEIGHTS)
		take_narrow(q, &p);
	if (cm && q->variant == PROTO_VARIANT_AUTO) {
		const bool narrow = (caps & VARIANT_HAS_NARROW) != 0;
		cost_param(q, cm, narrow, &p);
		cost_input(q, cm, narrow, &p);
	}
	keep_one_rounding(q, &p);
	return p;
}

variant_plan variant_choose(const proto_request *q, unsigned caps)
{
	return choose(q, caps, NULL);
}

variant_plan variant_choose_costed(const proto_request *q, unsigned caps, const costmodel *cm)
{
	return choose(q, caps, cm);
}

uint32_t variant_s128_slices(uint64_t m, uint64_t n, uint64_t k, uint64_t min_rows, uint32_t least)
{
	const uint64_t tiles = ceil_div(m ? m : 1, WIDE_TILE) * ceil_div(n ? n : 1, WIDE_TILE);
	uint64_t wave = VARIANT_S128_WAVE;
	if (tiles == 1 &&
	    k >= (uint64_t)VARIANT_S128_ONE_TILE_WAVES * VARIANT_S128_WAVE * VARIANT_S128_ONE_TILE_MIN_ROWS)
		wave *= VARIANT_S128_ONE_TILE_WAVES;
	uint64_t s = wave / tiles; /* whole waves, not just past one */
	if (s < least)
		s = least;
	s = min_u64(s, min_u64(wave, k / (min_rows ? min_rows : 1)));
	return kshape_s128_slices(k, (uint32_t)(s ? s : 1));
}

