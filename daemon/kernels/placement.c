/* daemon/kernels/placement.c — see placement.h. */
#include "placement.h"

#include "log.h"
#include "scratch.h"
#include "job.h"
#include "refine.h"
#include "variant.h"

#include <string.h>

void placement_init(placement *p, const device *d, const pipelines *pl, const config *cfg,
		    uint32_t nslots)
{
	_Static_assert(CONFIG_LOOP_TRIPS_DEFAULT == KSHAPE_LOOP_TRIPS_MAX, "--loop-trips' default");
	p->dev = d;
	p->pl = pl;
	kshape_set_loop_trips(cfg->loop_trips);
	if (cfg->loop_trips != KSHAPE_LOOP_TRIPS_MAX)
		log_notice("kernel loops: at most %u iterations per dispatch (--loop-trips; default %u)",
			   kshape_loop_trips(), KSHAPE_LOOP_TRIPS_MAX);
	p->scratch_cap = cfg->scratch_max_bytes == CONFIG_AUTO ? scratch_default_cap(d, nslots)
							       : cfg->scratch_max_bytes;
	const bool cpu = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	for (int t = 0; t < PROTO_DTYPE_COUNT; t++) {
		uint64_t v = cfg->devlocal_min_bytes;
		if (v == CONFIG_AUTO)
			v = cpu ? CONFIG_OFF : t == PROTO_F32 ? CONFIG_DEVLOCAL_AUTO_F32 : CONFIG_DEVLOCAL_AUTO_16BIT;
		p->devlocal_min[t] = v;
	}
	char err[256];
	memset(&p->cost, 0, sizeof(p->cost));
	const bool dir = cfg->cache_dir[0] != 0;
	if (cfg->no_cost_model) {
		log_info("cost model: off (--no-cost-model): auto picks kernels by its fixed rules");
	} else if (!cpu && !cfg->cost_model_gpu) {
		/* measured on the H200 (docs/performance.md): f32 2048x1024x1024
		 * end to end 4,070 µs with it against 830-1,091 by the fixed rules */
		log_info("cost model: off on a GPU (--cost-model measures it): auto picks kernels by "
			 "its fixed rules");
	} else if (dir && costmodel_load(&p->cost, d, cfg->cache_dir, err, sizeof(err)) == 0) {
		log_info("cost model: loaded from the cache directory %s; auto picks among the plain "
			 "kernels by it", cfg->cache_dir);
		const unsigned dropped = costmodel_keep_served(&p->cost, pl);
		if (dropped)
			log_notice("cost model: %u of its fits are for kernels this daemon has no pipeline "
				   "for (a device limit, a creation that failed): auto leaves those out",
				   dropped);
	} else {
		if (dir)
			log_info("cost model: none saved to use (%s): measuring", err);
		if (costmodel_measure(&p->cost, d, pl, cfg->dispatch_max_macs, err, sizeof(err)) != 0) {
			log_warn("cost model: not measured (%s): auto keeps its fixed rules", err);
		} else {
			log_info("cost model: %u kernel parts timed in %.0f ms (%u passes); auto picks among the "
				 "plain kernels by it", p->cost.nprobes, p->cost.probe_ms, p->cost.passes);
			/* saved even so: a restart (or a second daemon on this cache
			 * directory) must choose the same kernels, for the same bits */
			if (p->cost.unsettled)
				log_notice("cost model: its %u passes did not settle (the last made a probe %.2fx "
					   "faster: the host busy?); remove costmodel-*.txt from the cache "
					   "directory to measure again at the next start",
					   p->cost.passes, p->cost.last_gain);
			if (dir && costmodel_save(&p->cost, d, cfg->cache_dir, err, sizeof(err)) != 0)
				log_warn("cost model: not saved (%s): a restart measures again", err);
		}
	}
	for (int t = 0; t < PROTO_DTYPE_COUNT; t++)
		for (int k = 0; k < KERN_COUNT; k++)
			if (p->cost.fit[k][t].ok)
				log_debug("cost model %s %s: %.0f ns + %.3g ns per workgroup + %.3g ns per "
					  "workgroup-iteration + %.3g ns per iteration",
					  proto_dtype_name((proto_dtype)t), costmodel_kernel_name(k), p->cost.fit[k][t].a,
					  p->cost.fit[k][t].g, p->cost.fit[k][t].b, p->cost.fit[k][t].c);
	if (p->devlocal_min[PROTO_F32] == CONFIG_OFF)
		log_info("device-local path off%s; scratch for split-K up to %llu bytes per slot",
			 cpu && cfg->devlocal_min_bytes == CONFIG_AUTO ? " (a CPU device's memory is host memory)" : "",
			 (unsigned long long)p->scratch_cap);
	else
		log_info("device-local path: jobs of >= %llu tensor bytes (f16/bf16: %llu) run on device "
			 "copies; scratch up to %llu bytes per slot",
			 (unsigned long long)p->devlocal_min[PROTO_F32],
			 (unsigned long long)p->devlocal_min[PROTO_F16], (unsigned long long)p->scratch_cap);
}

/* Is kernel k one that writes split-K's partials (on the 64 or the 128
 * tile, or on the tensor cores)? */
static bool is_splitk(int k)
{
	return k == KERN_SPLITK || k == KERN_SPLITK128 || pipelines_is_cmks(k) || pipelines_is_cmks_dx(k);
}

/* Does j's dX have split-K partials of its own? (Not a dX beside dW,
 * whose pass writes dX itself.) */
static bool dx_partials(const job *j)
{
	return is_splitk(j->plan.input) && !variant_dx_fused(&j->plan);
}

/* Split-K's or the narrow family's partials given up: dW (and db) by the
 * tiled kernel, db alone by the seed kernel. */
static void drop_param_splitk(job *j)
{
	/* (dX beside dW: dX back on its own pass, coopmat_khr, which needs
	 * no scratch) */
	if (variant_dx_fused(&j->plan))
		j->plan.input = KERN_CMK_DX;
	if (is_splitk(j->plan.param) || j->plan.param == KERN_NARROW) {
		j->plan.param = j->req.t[PROTO_T_DW].present ? KERN_TILED : KERN_PARAM;
		j->plan.slices = 1;
	}
}

static void drop_input_splitk(job *j)
{
	if (dx_partials(j)) {
		j->plan.input = KERN_TILED;
		j->plan.dx_slices = 1;
	}
}

/* Without scratch: the job reads the client's memory, dW (and dX) by the
 * tiled kernel instead of split-K; linear_forward, with no room for Wᵀ,
 * by the generic kernel reading W transposed. */
void placement_drop(job *j)
{
	j->devlocal = false;
	j->streamed = false;
	drop_param_splitk(j);
	drop_input_splitk(j);
	if (j->req.op == PROTO_OP_LINEAR_FORWARD) {
		j->plan.input = KERN_INPUT;
		j->wt = false;
	}
	/* a backward's dZ has no place but scratch: the engine answers it */
	if (j->req.op == PROTO_OP_LINEAR_BACKWARD && j->req.activation != PROTO_ACT_NONE)
		j->act_no_scratch = true;
}

/* The partials are one storage-buffer binding each: fewer slices when they
 * would pass maxStorageBufferRange (a shape-only choice, so still the same
 * bits every run); the caller gives split-K up below the plan's minimum. */
static uint32_t fit_slices(const placement *p, uint64_t elems_per_slice, uint32_t slices)
{
	const uint64_t fit = p->dev->props.limits.maxStorageBufferRange / (elems_per_slice * 4);
	return fit < slices ? (uint32_t)fit : slices;
}

/* f32 partials of j's dW/db with `slices` slices (split-K) or blocks
 * (narrow). */
static uint64_t param_elems(const job *j, const proto_request *q, uint32_t slices)
{
	return j->plan.param == KERN_NARROW ? kshape_narrow_elems(q, slices) : kshape_splitk_elems(q, slices);
}

/* Split-K partials of j's dW/db and dX in scratch: their bytes, the
 * offsets relative to the job's first scratch byte set. */
static uint64_t place_partials(const placement *p, job *j, const proto_request *q)
{
	uint64_t bytes = 0;
	/* (the narrow family's partials: split-K's layout, a slice per block) */
	const bool partials = is_splitk(j->plan.param) || j->plan.param == KERN_NARROW;
	if (partials) {
		const uint32_t s = fit_slices(p, param_elems(j, q, 1), j->plan.slices);
		if (j->plan.param == KERN_NARROW && s < j->plan.slices && s >= j->plan.min_slices)
			/* fewer, longer blocks: whole steps again */
			j->plan.slices = (uint32_t)((q->batch + kshape_narrow_rows(q, s) - 1) / kshape_narrow_rows(q, s));
		else if (j->plan.param == KERN_SPLITK128 && s)
			/* whole 16-row steps, none empty (the same when s is the plan's) */
			j->plan.slices = kshape_s128_slices(q->batch, s);
		else if ((pipelines_is_cmks(j->plan.param) || pipelines_is_cmks_dx(j->plan.param)) && s)
			/* whole 64-row trips, none empty (below min_slices: past the
			 * loop bound, given up) */
			j->plan.slices = kshape_cmks_slices(q->batch, s);
		else
			j->plan.slices = s;
		if (j->plan.slices < j->plan.min_slices || j->plan.slices == 0)
			drop_param_splitk(j);
	}
	if (dx_partials(j)) {
		j->plan.dx_slices = fit_slices(p, kshape_splitk_dx_elems(q, 1), j->plan.dx_slices);
		if (j->plan.input == KERN_SPLITK128 && j->plan.dx_slices)
			j->plan.dx_slices = kshape_s128_slices(q->out, j->plan.dx_slices);
		if (j->plan.dx_slices == 0)
			drop_input_splitk(j);
	}
	if (is_splitk(j->plan.param) || j->plan.param == KERN_NARROW) {
		j->splitk_off = 0;
		bytes += scratch_round(param_elems(j, q, j->plan.slices) * 4);
	}
	if (dx_partials(j)) {
		j->splitk_dx_off = bytes;
		bytes += scratch_round(kshape_splitk_dx_elems(q, j->plan.dx_slices) * 4);
	}
	/* linear_forward's GEMMs but the generic kernel read Wᵀ from scratch */
	j->wt = j->req.op == PROTO_OP_LINEAR_FORWARD && j->plan.input != KERN_INPUT;
	if (j->wt) {
		j->wt_off = bytes;
		bytes += scratch_round(j->bytes[PROTO_T_W]);
	}
	return bytes;
}

/* Does j's size ask for the device-local path (copies of its tensors in
 * scratch; placement_place drops it where they do not fit)? A job naming a
 * device tensor is not copied: its device operands are there already. */
static bool devlocal_wanted(const placement *p, const job *j)
{
	const uint64_t min = p->devlocal_min[j->req.dtype];
	return min != CONFIG_OFF && job_bytes(j) >= min && !job_has_device_tensor(j);
}

/* Does j's dX GEMM read dY or write dX through the bus: the job not on the
 * device-local path (devlocal: devlocal_wanted's answer), and one of the
 * two in a client's region? (linear_forward's X and Y are its dX GEMM's dY
 * and dX.) */
static bool dx_through_bus(const job *j, bool devlocal)
{
	const bool fwd = j->req.op == PROTO_OP_LINEAR_FORWARD;
	return !devlocal &&
	       !(job_on_device(j, fwd ? PROTO_T_X : PROTO_T_DY) && job_on_device(j, fwd ? PROTO_T_Y : PROTO_T_DX));
}

/* Choose j's kernels and where its tensors live, given `used` bytes of the
 * slot's scratch already placed: split-K partials and, for a job of at
 * least devlocal_min tensor bytes, its tensors' device-local copies. What
 * does not fit the cap even alone is dropped (devlocal first, then
 * split-K). Returns the scratch bytes it takes, or UINT64_MAX when it
 * would fit an empty slot but not this one. */
uint64_t placement_place(const placement *p, job *j, uint64_t used)
{
	const proto_dtype t = j->req.dtype;
	j->devlocal = false;
	j->streamed = false;
	if (job_is_copy(j) || job_is_optim(j)) {
		/* a device tensor's copy or fill, an optimizer step: no GEMMs,
		 * no scratch */
		memset(&j->plan, 0, sizeof(j->plan));
		return 0;
	}
	/* linear_forward: its kernels' view, the dX GEMM of a backward */
	proto_request fq;
	const proto_request *q = &j->req;
	if (q->op == PROTO_OP_LINEAR_FORWARD) {
		proto_forward_as_input(q, &fq);
		q = &fq;
	}
	/* (f32's KERN_CMK_* are coopmat_khr_f32x3's: forced only) */
	const bool cmk = p->pl->pipe[KERN_CMK_DW][t] && p->pl->pipe[KERN_CMK_DX][t];
	const bool narrow = p->pl->pipe[KERN_NARROW][t] && p->pl->pipe[KERN_NARROW_RED][t] &&
			    p->pl->pipe[KERN_NARROW_DX][t];
	/* (only where linear_coopmat_khr_gemm runs too; f32's is
	 * coopmat_khr_f32_splitk's: forced only, variant_cmks_fits) */
	const bool cmks = p->pl->pipe[KERN_CMK_SPLITK][t] && p->pl->pipe[KERN_NARROW_RED][t];
	/* dX beside it (f16/bf16 only, variant_cmks_dx_fits) */
	const bool cmks_dx = cmks && p->pl->pipe[KERN_CMKS_DX][t];
	j->plan = variant_choose_costed(q, (p->pl->pipe[KERN_COOPMAT][t] ? VARIANT_HAS_COOPMAT : 0u) |
						  (narrow ? VARIANT_HAS_NARROW : 0u) | (cmks ? VARIANT_HAS_CMKS : 0u) |
						  (cmks_dx ? VARIANT_HAS_CMKS_DX : 0u) |
						  (cmk ? (t == PROTO_F32 ? VARIANT_HAS_F32X3 : VARIANT_HAS_CMK) : 0u) |
						  (p->pl->pipe[KERN_NV2_DW][t] && p->pl->pipe[KERN_NV2_DX][t]
							   ? VARIANT_HAS_NV2 : 0u),
					  &p->cost);
	if (p->pl->pipe[KERN_NV2_DW][t] && p->pl->pipe[KERN_NV2_DX][t])
		refine_nv2_large(&j->plan, q, p->pl->nv2[t].bm, p->pl->nv2[t].bn, REFINE_NV2_MIN_TILES);
	if (p->pl->pipe[KERN_NV2_DW_S][t] && p->pl->pipe[KERN_NV2_DX_S][t])
		refine_nv2_small(&j->plan, q, p->pl->nv2_small[t].bm, p->pl->nv2_small[t].bn,
				  REFINE_NV2_SMALL_MIN_TILES);
	refine_cmk_tiling(&j->plan, q, p->pl->cmk_small_below, p->pl->cmk_bm[0], p->pl->cmk_bn[0]);
	const dxs_tile *dxs[DXS_CLASSES];
	for (int c = 0; c < DXS_CLASSES; c++)
		dxs[c] = p->pl->pipe[KERN_CMK_DXS + c][t] ? &p->pl->dxs[c] : NULL;
	refine_cmk_dx_stream(&j->plan, q, dxs);
	refine_cmks_tiling(&j->plan, q, p->pl->pipe[KERN_CMKS_L][t] != VK_NULL_HANDLE,
			    p->pl->pipe[KERN_CMKS_S][t] != VK_NULL_HANDLE,
			    p->pl->pipe[KERN_CMKS_S][t] && p->pl->pipe[KERN_CMKS_DX_S][t] && p->pl->pipe[KERN_CMK_DX][t]);
	/* the rules measured on a GPU only (variant.h); a CPU device
	 * (lavapipe) keeps the pick of the rules and its model: mid-size and
	 * wide narrow f32 GEMMs on split-K's 128 tile, short narrow f32 layers
	 * on forced split-K's plan, narrow f32 dX alone on tiled128's small
	 * tiling (and forced tiled128's dX there on every device), short
	 * layers on the seed kernels */
	const bool gpu = p->dev->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
	const bool devlocal = devlocal_wanted(p, j);
	if (gpu && p->pl->pipe[KERN_SPLITK128][t] && p->pl->pipe[KERN_REDUCE][t])
		refine_splitk128(&j->plan, q);
	if (gpu && p->pl->pipe[KERN_SPLITK][t] && p->pl->pipe[KERN_REDUCE][t])
		refine_narrow_short(&j->plan, q);
	if (p->pl->pipe[KERN_TILED128_S][t])
		refine_t128_small(&j->plan, q, gpu);
	if (gpu && dx_through_bus(j, devlocal))
		refine_host_dx(&j->plan, q);
	if (gpu)
		refine_short(&j->plan, q);
	/* (j->devlocal and j->streamed were cleared above; the engine decides
	 * streaming: stream_wants) */
	j->act_no_scratch = false;
	uint64_t split = place_partials(p, j, q);
	/* a linear_backward with an activation: dZ (as many bytes as dY),
	 * which nothing can do without (activation.c) */
	uint64_t must = j->req.op == PROTO_OP_LINEAR_BACKWARD && j->req.activation != PROTO_ACT_NONE
				? scratch_round(j->bytes[PROTO_T_DY])
				: 0;
	uint64_t dl = 0;
	if (devlocal)
		for (int t = 0; t < PROTO_T_COUNT; t++)
			if (j->req.t[t].present)
				dl += scratch_round(j->bytes[t]);
	if (split + must + dl > p->scratch_cap)
		dl = 0;
	if (split + must > p->scratch_cap) {
		placement_drop(j); /* (sets act_no_scratch for a dZ) */
		split = 0;
		if (must <= p->scratch_cap)
			j->act_no_scratch = false; /* dZ alone fits */
		else
			must = 0;
	}
	if (used + split + must + dl > p->scratch_cap)
		return UINT64_MAX;
	uint64_t at = used;
	if (split) {
		j->splitk_off += at;
		j->splitk_dx_off += at;
		j->wt_off += at;
		at += split;
	}
	if (must) {
		j->dz_off = at;
		at += must;
	}
	/* GEMMs whose operands are all in device memory, copied there or (on
	 * a GPU) device tensors: the 128 tile where it is wide enough
	 * (variant.h). Device tensors took it from the H100 run of 2026-12-06
	 * 09:41 UTC: the grid's 16,384x1024x1024 f32 full backward on them
	 * took 2,389 us with dX on tiled (the 64 tile) against splitk128
	 * forced's 1,896 (the 128 tile's body for dX, in one slice). */
	if ((dl || (gpu && job_all_device_tensors(j))) && p->pl->pipe[KERN_TILED128][j->req.dtype])
		refine_widen(&j->plan, q);
	if (dl) {
		j->devlocal = true;
		for (int t = 0; t < PROTO_T_COUNT; t++)
			if (j->req.t[t].present) {
				j->soff[t] = at;
				at += scratch_round(j->bytes[t]);
			}
	}
	return at - used;
}
