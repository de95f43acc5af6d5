/* daemon/kernels/record.c — how a batch becomes a command buffer: tensors bound as
 * push descriptors, the kernel each part of a job runs (daemon/kernels/variant.h),
 * and barriers only where one dispatch's bound bytes conflict with an
 * earlier one's since the last barrier. */
#include "record.h"

#include "job.h"
#include "kiface.h"
#include "variant.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define TOUCH_NONE UINT32_MAX

/* A byte range a dispatch of the batch bound since the last barrier;
 * `prev`: the same region's range before it (TOUCH_NONE: none). */
typedef struct record_touch {
	uint64_t lo, hi;
	bool write;
	uint32_t prev;
} record_touch;

/* A region the batch uses: its ranges of this epoch, newest first from
 * `last` (valid while epoch is the recorder's). An entry of an earlier
 * batch (batch != the recorder's) is a free one: the table is not
 * cleared between batches. */
typedef struct record_region {
	const region *key; /* NULL: a free entry */
	uint64_t epoch;
	uint64_t batch;
	uint32_t last;
} record_region;

/* A lane (a connection's queue) with jobs in the batch being recorded:
 * how many of them the batch has so far (valid while batch is the
 * recorder's). */
typedef struct record_lane {
	const void *key;
	uint64_t batch;
	uint32_t count;
} record_lane;

struct recorder {
	const device *dev;
	const pipelines *pl;
	uint64_t dispatch_max_macs;
	/* conflict tracking: a barrier starts a new epoch, which forgets every
	 * range; a range that could not be remembered makes the next dispatch
	 * take a barrier regardless */
	uint64_t epoch;
	bool untracked;
	/* the ranges of the epoch, for all regions together: the array only
	 * grows (geometrically) and is reused epoch after epoch, so steady
	 * state allocates nothing per job */
	record_touch *touch;
	uint32_t ntouch, touch_cap;
	/* the batch's regions: open addressing keyed by region pointer over
	 * the first mask + 1 entries, sized per batch to at least twice the
	 * regions its jobs can name, entries of earlier batches free (not
	 * cleared: a new batch only counts up `batch`); allocated once for a
	 * full batch (max_batch_jobs · PROTO_T_COUNT regions) */
	record_region *tab;
	uint32_t mask, used, tab_len;
	uint64_t batch; /* the batch being recorded, counted from 1 */
	/* the order jobs are recorded in (interleave_owners): per lane (a
	 * connection), how many of its jobs came before, over an open
	 * addressing table like tab's; then a counting sort by that rank */
	record_lane *lanes;
	uint32_t lane_mask;
	uint32_t *rank, *order, *start; /* max_batch_jobs (+ 1 for start) */
	uint32_t max_jobs;
	record_counts counts; /* the batch being recorded */
	/* a slice (record_target.slice_len): the dispatch pieces whose first
	 * multiply-add, counted over the batch in recording order, falls in
	 * [slice_from, slice_from + slice_len) are recorded, the others
	 * skipped; slice_pos counts as the recording goes */
	uint64_t slice_from, slice_len, slice_pos;
	/* what the command buffer has bound now (forgotten at each recording's
	 * start), so a bind or push that changes nothing is not recorded: the
	 * compute pipeline, and set 0's push descriptors with the layout they
	 * were pushed with (a push with another layout replaces them) */
	VkPipeline bound_pipe;
	VkPipelineLayout set_layout;
	uint32_t set_n;
	VkDescriptorBufferInfo set_info[VKG_BINDINGS_GEMM_SUMS];
};

/* Nothing bound: a command buffer's start. */
static void forget_bound(recorder *rc)
{
	rc->bound_pipe = VK_NULL_HANDLE;
	rc->set_layout = VK_NULL_HANDLE;
	rc->set_n = 0;
}

typedef struct binding {
	VkDescriptorBufferInfo info;
	uint32_t elem_off;
} binding;

/* What one job's recording needs to know. */
typedef struct rec {
	recorder *rc;
	const record_target *tg;
	VkCommandBuffer cb;
	job *j;
	uint64_t piece; /* the job's position among all slots' jobs (dummy pieces) */
	/* workgroup rows [gy0, gy1) of the grid alone (gy1 0: all); set for a
	 * row block of dW's GEMM (record_job_param_part) */
	uint64_t gy0, gy1;
	/* VKG_FLAG_SUMS_IN / _OUT for dW's GEMM: a batch chunk of a reduction
	 * resumed in the job's running sums (record_job_param_part) */
	uint32_t sums;
	/* linear_input_backward reads W transposed (VKG_FLAG_B_TRANS): a
	 * linear_forward's generic kernel (record_forward_kernels) */
	bool b_trans;
} rec;

/* Bind a tensor: its device-local copy in the slot's scratch (or a tensor
 * that lives only there, reg[t] NULL: a linear_forward's Wᵀ), or the
 * client's buffer from the aligned-down offset so any offset that is a
 * multiple of the element size works (the remainder goes to the shader as
 * elements). */
static binding bind_tensor(const rec *r, int t)
{
	const job *j = r->j;
	const VkDeviceSize align = r->rc->dev->props.limits.minStorageBufferOffsetAlignment;
	if (j->devlocal || !j->reg[t]) {
		/* aligned down as below: a streamed job's row chunk (stream.c)
		 * starts anywhere in its tensor's copy; a whole tensor's copy
		 * starts aligned, element offset 0 */
		const uint64_t base = j->soff[t] / align * align;
		binding b = {.info = {.buffer = r->tg->scratch, .offset = base,
				      .range = j->soff[t] + j->bytes[t] - base},
			     .elem_off = (uint32_t)((j->soff[t] - base) / proto_dtype_size(j->req.dtype))};
		return b;
	}
	uint64_t off = j->req.t[t].offset;
	uint64_t base = off / align * align;
	binding b = {
		.info = {.buffer = j->reg[t]->buf, .offset = base, .range = off + j->bytes[t] - base},
		.elem_off = (uint32_t)((off - base) / proto_dtype_size(j->req.dtype)),
	};
	return b;
}

/* An unasked-for output binds its own small piece of the daemon's dummy
 * buffer (never written: the kernel's flags say so), three pieces (dW, db,
 * the tiled dX kernel's bias) per job position of each submission slot, so no two dispatches
 * that may run at once bind the same bytes. */
static binding bind_dummy(const rec *r, uint64_t which)
{
	const record_target *tg = r->tg;
	binding b = {.info = {.buffer = tg->dummy, .offset = (3 * r->piece + which) * tg->dummy_piece,
			      .range = tg->dummy_piece}};
	return b;
}

/* The job's split-K partial sums (of dW/db, or of dX) in the slot's scratch. */
static binding bind_partials(const rec *r, bool for_dx)
{
	const job *j = r->j;
	const uint64_t elems = for_dx ? variant_splitk_dx_elems(&j->req, j->plan.dx_slices)
				      : variant_splitk_elems(&j->req, j->plan.slices);
	binding b = {.info = {.buffer = r->tg->scratch,
			      .offset = for_dx ? j->splitk_dx_off : j->splitk_off, .range = elems * 4}};
	return b;
}

/* The GEMM's fifth binding: the job's running sums of dW and db in the
 * slot's scratch (j->sums_off) for a resumed chunk, else a dummy piece
 * (the kernel's flags leave it untouched). */
static binding bind_sums(const rec *r)
{
	const job *j = r->j;
	if (!r->sums)
		return bind_dummy(r, 2);
	binding b = {.info = {.buffer = r->tg->scratch, .offset = j->sums_off,
			      .range = (j->req.out * j->req.in + j->req.out) * 4}};
	return b;
}

/* Kernel k's pipeline for the job's dtype, unless it is bound already
 * (binding a pipeline leaves descriptors and push constants as they are). */
static void bind_pipe(const rec *r, int k)
{
	recorder *rc = r->rc;
	const VkPipeline p = rc->pl->pipe[k][r->j->req.dtype];
	if (p == rc->bound_pipe)
		return;
	vkCmdBindPipeline(r->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
	rc->bound_pipe = p;
}

/* Push kernel k's n bindings as set 0, unless set 0 holds exactly these,
 * pushed with k's layout (consecutive units of one kind of kernel on the
 * same tensors: a client's repeated job). */
static void push_set(const rec *r, int k, const binding *b, uint32_t n)
{
	recorder *rc = r->rc;
	assert(n <= VKG_BINDINGS_GEMM_SUMS);
	bool same = rc->set_layout == rc->pl->layout[k] && rc->set_n == n;
	for (uint32_t i = 0; same && i < n; i++)
		same = memcmp(&rc->set_info[i], &b[i].info, sizeof(b[i].info)) == 0;
	if (same)
		return;
	rc->set_layout = rc->pl->layout[k];
	rc->set_n = n;
	for (uint32_t i = 0; i < n; i++)
		rc->set_info[i] = b[i].info;
	VkWriteDescriptorSet w[VKG_BINDINGS_GEMM_SUMS];
	for (uint32_t i = 0; i < n; i++)
		w[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstBinding = i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &b[i].info,
		};
	r->rc->dev->cmd_push_descriptor_set(r->cb, VK_PIPELINE_BIND_POINT_COMPUTE,
					   r->rc->pl->layout[k], 0, n, w);
}

void record_barrier_all(VkCommandBuffer cb)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
				 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	};
	const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
	vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* After a barrier: what came before is ordered before what follows, so no
 * range recorded so far can conflict any more. */
static void new_epoch(recorder *rc)
{
	rc->epoch++;
	rc->ntouch = 0;
}

/* A barrier inside a job's kernels (between the pieces of a cut reduction,
 * or split-K's two passes): everything recorded before it is ordered before
 * everything after, so the batch's conflict tracking starts afresh. */
static void barrier_inside(const rec *r)
{
	record_barrier_all(r->cb);
	new_epoch(r->rc);
	r->rc->untracked = false;
}

/* Length of the piece of a reduction of K elements that starts at k0, in
 * pieces of at most `step` (variant_max_k: the loop bound, variant.h). */
static uint64_t piece_len(uint64_t K, uint64_t k0, uint64_t step)
{
	return K - k0 < step ? K - k0 : step;
}

/* A slice cuts a job's grid, never its reductions: the pieces of a
 * reduction are those of the loop bound (variant_max_k) on every path, so
 * a sliced job sums in the order of the same job whole, devlocal or
 * streamed (the same bits). At most SLICE_MAX_PIECES dispatches per grid. */
#define SLICE_MAX_PIECES 32

static void bound_range(const recorder *rc, const job *j, int t, uint64_t *lo, uint64_t *hi);

/* Do two of j's tensors in one region, one read and one written, have
 * bound ranges that overlap? Their bytes never do (proto_job_check), but a
 * binding starts at its offset aligned down (bind_tensor), so an output
 * right behind an input shares the input's last aligned bytes. Dispatches
 * of one kernel that bind both then need a barrier between them, or the
 * second reads bytes the first wrote (as far as ranges tell). */
static bool job_bound_overlap(const recorder *rc, const job *j)
{
	for (int o = 0; o < PROTO_T_COUNT; o++) {
		if (!j->reg[o] || !job_is_output(o))
			continue;
		uint64_t olo, ohi;
		bound_range(rc, j, o, &olo, &ohi);
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			if (t == o || j->reg[t] != j->reg[o])
				continue;
			uint64_t lo, hi;
			bound_range(rc, j, t, &lo, &hi);
			if (lo < ohi && olo < hi)
				return true;
		}
	}
	return false;
}

/* Dispatch a gx × gy grid of workgroups, each costing wg_macs
 * multiply-adds, in pieces of at most dispatch_max_macs (whole rows of the
 * grid, or part of one row when a row alone is more), so no single dispatch
 * runs long enough to meet a driver's timeout; also keeps each piece within
 * maxComputeWorkGroupCount. pc is kernel k's push constants (pc_bytes, a
 * kiface.h struct); the piece's first row (× yscale) goes to its field
 * *ybase (NULL: the grid has one row, no row base), its first column
 * (× xscale) to *xbase. */
static void dispatch_split(const rec *r, int k, const void *pc, uint32_t pc_bytes, uint32_t *ybase,
			   uint32_t yscale, uint32_t *xbase, uint32_t xscale, uint64_t gx, uint64_t gy,
			   uint64_t wg_macs)
{
	const uint32_t *lim = r->rc->dev->props.limits.maxComputeWorkGroupCount;
	recorder *rc = r->rc;
	uint64_t max_macs = rc->dispatch_max_macs;
	if (rc->slice_len && rc->slice_len < max_macs) {
		/* pieces no longer than a slice, and at most SLICE_MAX_PIECES */
		const uint64_t all = gx * gy * (wg_macs ? wg_macs : 1);
		max_macs = rc->slice_len > all / SLICE_MAX_PIECES ? rc->slice_len : all / SLICE_MAX_PIECES;
		if (max_macs > rc->dispatch_max_macs)
			max_macs = rc->dispatch_max_macs;
	}
	uint64_t per = max_macs / (wg_macs ? wg_macs : 1);
	if (per == 0)
		per = 1;
	uint64_t cols = gx <= per ? gx : per;
	uint64_t rows = gx <= per ? per / gx : 1;
	if (cols > lim[0])
		cols = lim[0];
	if (rows > lim[1])
		rows = lim[1];
	/* a row block: its workgroup rows alone; each workgroup's tile is
	 * computed the same wherever the dispatch that carries it starts */
	const uint64_t y0 = r->gy1 ? r->gy0 : 0;
	if (r->gy1 && r->gy1 < gy)
		gy = r->gy1;
	/* pieces whose bound ranges meet: a barrier between them (rare: only
	 * tensors packed at unaligned offsets, and only a grid in pieces) */
	const bool apart = (gx > cols || gy - y0 > rows) && job_bound_overlap(rc, r->j);
	bool first = true;
	for (uint64_t y = y0; y < gy; y += rows)
		for (uint64_t x = 0; x < gx; x += cols) {
			const uint32_t nx = (uint32_t)(gx - x < cols ? gx - x : cols);
			const uint32_t ny = (uint32_t)(gy - y < rows ? gy - y : rows);
			if (rc->slice_len) {
				/* a slice: this piece only when it starts inside it */
				const uint64_t at = rc->slice_pos;
				rc->slice_pos += (uint64_t)nx * ny * (wg_macs ? wg_macs : 1);
				if (at < rc->slice_from)
					continue;
				if (at >= rc->slice_from + rc->slice_len) {
					if (!rc->counts.slice_more)
						rc->counts.slice_next = at;
					rc->counts.slice_more = true;
					continue;
				}
			}
			if (apart && !first)
				barrier_inside(r);
			first = false;
			if (ybase)
				*ybase = (uint32_t)(y * yscale);
			*xbase = (uint32_t)(x * xscale);
			vkCmdPushConstants(r->cb, rc->pl->layout[k], VK_SHADER_STAGE_COMPUTE_BIT, 0,
					   pc_bytes, pc);
			vkCmdDispatch(r->cb, nx, ny, 1);
			rc->counts.dispatches++;
		}
}

/* linear_parameter_backward for dW and/or db. */
static void record_param(const rec *r)
{
	const proto_request *q = &r->j->req;
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	binding b[VKG_BINDINGS_PARAM] = {
		bind_tensor(r, PROTO_T_X),
		bind_tensor(r, PROTO_T_DY),
		dw ? bind_tensor(r, PROTO_T_DW) : bind_dummy(r, 0),
		db ? bind_tensor(r, PROTO_T_DB) : bind_dummy(r, 1),
	};
	bind_pipe(r, KERN_PARAM);
	push_set(r, KERN_PARAM, b, VKG_BINDINGS_PARAM);
	const uint32_t flags = (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u) | acc;
	kiface_param pc = {
		.batch = (uint32_t)q->batch, .n_in = (uint32_t)q->in, .n_out = (uint32_t)q->out,
		.x_off = b[0].elem_off, .dy_off = b[1].elem_off, .dw_off = b[2].elem_off,
		.db_off = b[3].elem_off, .flags = flags,
	};
	const uint64_t gx = dw ? (q->in + VKG_PARAM_COLS - 1) / VKG_PARAM_COLS : 1;
	/* the batch in pieces within the loop bound: rows k0.. of X and dY,
	 * the later pieces accumulating */
	const uint64_t step = variant_max_k(KERN_PARAM, q->dtype);
	for (uint64_t k0 = 0; k0 < q->batch; k0 += step) {
		const uint64_t len = piece_len(q->batch, k0, step);
		if (k0)
			barrier_inside(r);
		pc.batch = (uint32_t)len;
		pc.x_off = (uint32_t)(b[0].elem_off + k0 * q->in);
		pc.dy_off = (uint32_t)(b[1].elem_off + k0 * q->out);
		pc.flags = flags | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		dispatch_split(r, KERN_PARAM, &pc, sizeof(pc), &pc.o_base, 1, &pc.c_base, 1, gx, q->out,
			       VKG_PARAM_COLS * len);
	}
}

/* VKG_FLAG_VEC_LOADS of the GEMM kernels: vector loads of A and B (coopmat, coopmat_khr: 8 f16/bf16;
 * coopmat_nv2: rows of A and B on 16 bytes, for its unclamped loads;
 * tiled/split-K f32: 4 f32), when every vector is aligned and wholly inside
 * or outside its tensor: in and out multiples of the width, A's and B's
 * element offsets too. */
static uint32_t vec_flag(const proto_request *q, int k, uint32_t a_off, uint32_t b_off)
{
	uint32_t w = k == KERN_TILED128 || q->dtype == PROTO_F32 ? 4 : 0;
	if (k == KERN_COOPMAT || pipelines_is_cmk(k) || pipelines_is_nv2(k))
		w = 8;
	if (!w || q->in % w || q->out % w || a_off % w || b_off % w)
		return 0;
	return VKG_FLAG_VEC_LOADS;
}

/* The longest reduction GEMM kernel k walks in one dispatch: variant_max_k,
 * for linear_coopmat_khr_gemm with its pipelines' own BK (two k steps per
 * loop iteration). */
static uint64_t gemm_max_k(const recorder *rc, int k, proto_dtype dt)
{
	if (pipelines_is_cmk(k))
		return 2ull * pipelines_cmk_tile_for(rc->pl, k, dt).bk * VARIANT_MAX_LOOP_TRIPS;
	if (k == KERN_TILED128 && dt == PROTO_F32 && rc->pl->t128.on)
		return (uint64_t)rc->pl->t128.bk * VARIANT_MAX_LOOP_TRIPS;
	if (pipelines_is_nv2(k))
		return (uint64_t)pipelines_nv2_tile(rc->pl, k, dt)->bk * VARIANT_MAX_LOOP_TRIPS;
	return variant_max_k(k, dt);
}

/* Dispatch GEMM kernel k (push constants in pc) over a gx × gy grid of
 * workgroups of tile_macs multiply-adds per k, the reduction (pc->K) cut
 * into pieces of at most gemm_max_k: a piece's A and B start k0 further
 * along k (A by k0·sak, B by k0·N; k0 is a multiple of 2^18, so vector
 * loads stay aligned), its K is its length, and the pieces after the first
 * accumulate, after a barrier, into what the earlier ones wrote. */
static void dispatch_gemm(const rec *r, int k, kiface_gemm *pc, uint64_t gx, uint64_t gy,
			  uint64_t tile_macs)
{
	const uint64_t K = pc->K, step = gemm_max_k(r->rc, k, r->j->req.dtype);
	const uint32_t a_off = pc->a_off, b_off = pc->b_off, flags = pc->flags;
	for (uint64_t k0 = 0; k0 < K; k0 += step) {
		const uint64_t len = piece_len(K, k0, step);
		if (k0)
			barrier_inside(r);
		pc->K = (uint32_t)len;
		pc->a_off = (uint32_t)(a_off + k0 * pc->sak);
		pc->b_off = (uint32_t)(b_off + k0 * pc->N);
		pc->flags = flags | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		dispatch_split(r, k, pc, sizeof(*pc), &pc->m_base, 1, &pc->n_base, 1, gx, gy,
			       tile_macs * len);
	}
}

/* GEMM kernel k's C tile per workgroup, tm rows by tn columns
 * (shaders/iface/kernels.h; coopmat_khr's chosen at pipeline creation). */
static void gemm_tile(const recorder *rc, int k, proto_dtype dt, uint64_t *tm, uint64_t *tn)
{
	*tm = *tn = k == KERN_COOPMAT ? VKG_TILE_COOPMAT : VKG_TILE_TILED;
	if (k == KERN_TILED128) /* f32: VKGRAD_T128_TILE's where set */
		*tm = pipelines_t128_bm(rc->pl, dt), *tn = pipelines_t128_bn(rc->pl, dt);
	if (pipelines_is_nv2(k)) { /* VKGRAD_NV2_TILE's, or the small layers' */
		const nv2_tile *t = pipelines_nv2_tile(rc->pl, k, dt);
		*tm = t->bm, *tn = t->bn;
	}
	if (pipelines_is_cmk(k))
		*tm = rc->pl->cmk_bm[pipelines_cmk_tiling(k)], *tn = rc->pl->cmk_bn[pipelines_cmk_tiling(k)];
}

/* Is kernel k one of the GEMMs record_tiled records? */
static bool is_gemm(int k)
{
	return k == KERN_TILED || k == KERN_TILED128 || k == KERN_COOPMAT || pipelines_is_cmk(k) ||
	       pipelines_is_nv2(k);
}

/* The GEMM kernels for dW (+ fused db) or for dX: linear_tiled_gemm (k =
 * KERN_TILED), linear_tiled128_gemm (KERN_TILED128), linear_coopmat_gemm
 * (KERN_COOPMAT) or linear_coopmat_khr_gemm (KERN_CMK_*), all
 * with the same push constants. See the shaders. */
static void record_tiled(const rec *r, bool for_dx, int k)
{
	const proto_request *q = &r->j->req;
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	binding b[VKG_BINDINGS_GEMM_SUMS]; /* (e: only the kernels that resume, pipelines_bindings) */
	kiface_gemm pc;
	uint64_t m, n;
	if (!for_dx) {
		const bool dw = q->t[PROTO_T_DW].present;
		const bool db = q->t[PROTO_T_DB].present;
		b[0] = bind_tensor(r, PROTO_T_DY);
		b[1] = bind_tensor(r, PROTO_T_X);
		b[2] = dw ? bind_tensor(r, PROTO_T_DW) : bind_dummy(r, 0);
		b[3] = db ? bind_tensor(r, PROTO_T_DB) : bind_dummy(r, 1);
		b[4] = bind_sums(r);
		m = q->out, n = dw ? q->in : 1;
		pc = (kiface_gemm){
			.M = (uint32_t)q->out, .N = (uint32_t)q->in, .K = (uint32_t)q->batch,
			.a_off = b[0].elem_off, .b_off = b[1].elem_off, .c_off = b[2].elem_off,
			.d_off = b[3].elem_off, .sam = 1, .sak = (uint32_t)q->out,
			.flags = (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u) | acc | r->sums,
		};
	} else {
		b[0] = bind_tensor(r, PROTO_T_DY);
		b[1] = bind_tensor(r, PROTO_T_W);
		b[2] = bind_tensor(r, PROTO_T_DX);
		b[3] = b[4] = bind_dummy(r, 2);
		m = q->batch, n = q->in;
		pc = (kiface_gemm){
			.M = (uint32_t)q->batch, .N = (uint32_t)q->in, .K = (uint32_t)q->out,
			.a_off = b[0].elem_off, .b_off = b[1].elem_off, .c_off = b[2].elem_off,
			.d_off = 0, .sam = (uint32_t)q->out, .sak = 1, .flags = VKG_FLAG_WRITE_C | acc,
		};
	}
	pc.flags |= vec_flag(q, k, pc.a_off, pc.b_off);
	bind_pipe(r, k);
	push_set(r, k, b, pipelines_bindings(k));
	uint64_t tm, tn;
	gemm_tile(r->rc, k, q->dtype, &tm, &tn);
	/* coopmat_nv2 with DBAPART: db by a column of workgroups past C's tiles */
	uint64_t db_col = 0;
	if (pipelines_is_nv2(k)) {
		const nv2_tile *t = pipelines_nv2_tile(r->rc->pl, k, q->dtype);
		db_col = t->db_apart && !for_dx && q->t[PROTO_T_DW].present && q->t[PROTO_T_DB].present;
	}
	dispatch_gemm(r, k, &pc, (n + tn - 1) / tn + db_col, (m + tm - 1) / tm, tm * tn);
}

/* Split-K for dW (+ db), or for dX: each slice of the reduction (dW: the
 * batch's rows; dX: out) through linear_splitk_gemm into the job's f32
 * partials in scratch (a slice longer than the loop bound in pieces that
 * accumulate there), one barrier, then linear_splitk_reduce adds the slices
 * in order into the outputs, rounding once. dX = dY·W is the same GEMM with
 * A = dY along out (sam = out, sak = 1) and B = W. */
static void record_splitk(const rec *r, bool for_dx)
{
	const proto_request *q = &r->j->req;
	const bool dw = !for_dx && q->t[PROTO_T_DW].present, db = !for_dx && q->t[PROTO_T_DB].present;
	const uint32_t S = for_dx ? r->j->plan.dx_slices : r->j->plan.slices;
	const uint64_t K = for_dx ? q->out : q->batch, m = for_dx ? q->batch : q->out;
	const uint64_t n = for_dx || dw ? q->in : 1, mn = m * q->in;
	const uint64_t L = (K + S - 1) / S; /* per slice; S·L covers K */
	const uint32_t sam = for_dx ? (uint32_t)q->out : 1, sak = for_dx ? 1 : (uint32_t)q->out;
	binding b[VKG_BINDINGS_GEMM_SUMS] = {bind_tensor(r, PROTO_T_DY),
					bind_tensor(r, for_dx ? PROTO_T_W : PROTO_T_X),
					bind_partials(r, for_dx), bind_partials(r, for_dx),
					bind_dummy(r, 2)};
	bind_pipe(r, KERN_SPLITK);
	push_set(r, KERN_SPLITK, b, VKG_BINDINGS_GEMM_SUMS);
	const uint64_t tile = VKG_TILE_TILED;
	for (uint32_t s = 0; s < S; s++) {
		const uint64_t k0 = s * L, len = piece_len(K, k0, L);
		kiface_gemm pc = {
			.M = (uint32_t)m, .N = (uint32_t)q->in, .K = (uint32_t)len,
			.a_off = (uint32_t)(b[0].elem_off + k0 * sak),
			.b_off = (uint32_t)(b[1].elem_off + k0 * q->in),
			.c_off = (uint32_t)(s * mn), /* this slice's partials */
			.d_off = for_dx ? 0u : (uint32_t)(S * mn + s * m), /* its row sums, after all C */
			.sam = sam, .sak = sak,
			.flags = for_dx ? VKG_FLAG_WRITE_C
					: (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u),
		};
		pc.flags |= vec_flag(q, KERN_SPLITK, pc.a_off, pc.b_off);
		dispatch_gemm(r, KERN_SPLITK, &pc, (n + tile - 1) / tile, (m + tile - 1) / tile,
			      tile * tile);
	}
	barrier_inside(r);
	bind_pipe(r, KERN_REDUCE);
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	for (int t = PROTO_T_DW; t <= PROTO_T_DX; t++) {
		if (!q->t[t].present || (t == PROTO_T_DX) != for_dx)
			continue;
		const uint64_t cnt = t == PROTO_T_DB ? q->out : mn;
		binding rb[VKG_BINDINGS_REDUCE] = {bind_partials(r, for_dx), bind_tensor(r, t)};
		push_set(r, KERN_REDUCE, rb, VKG_BINDINGS_REDUCE);
		kiface_reduce pc = {
			.n = (uint32_t)cnt, .slices = S, .stride = (uint32_t)cnt,
			.part_off = t == PROTO_T_DB ? (uint32_t)(S * mn) : 0u,
			.out_off = rb[1].elem_off, .flags = acc,
		};
		dispatch_split(r, KERN_REDUCE, &pc, sizeof(pc), NULL, 0, &pc.base, VKG_REDUCE_WG,
			       (cnt + VKG_REDUCE_WG - 1) / VKG_REDUCE_WG, 1, VKG_REDUCE_WG * (uint64_t)S);
	}
}

static void record_input(const rec *r)
{
	const proto_request *q = &r->j->req;
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	binding b[VKG_BINDINGS_INPUT] = {bind_tensor(r, PROTO_T_DY), bind_tensor(r, PROTO_T_W),
					 bind_tensor(r, PROTO_T_DX)};
	bind_pipe(r, KERN_INPUT);
	push_set(r, KERN_INPUT, b, VKG_BINDINGS_INPUT);
	kiface_input pc = {
		.batch = (uint32_t)q->batch, .n_in = (uint32_t)q->in, .n_out = (uint32_t)q->out,
		.dy_off = b[0].elem_off, .w_off = b[1].elem_off, .dx_off = b[2].elem_off,
		.flags = acc, .k_len = (uint32_t)q->out,
	};
	const uint32_t trans = r->b_trans ? VKG_FLAG_B_TRANS : 0u;
	/* the reduction over out in pieces within the loop bound: columns k0..
	 * of dY, rows k0.. of W, the later pieces accumulating */
	const uint64_t tile = VKG_INPUT_TILE;
	const uint64_t step = variant_max_k(KERN_INPUT, q->dtype);
	for (uint64_t k0 = 0; k0 < q->out; k0 += step) {
		const uint64_t len = piece_len(q->out, k0, step);
		if (k0)
			barrier_inside(r);
		pc.dy_off = (uint32_t)(b[0].elem_off + k0);
		/* (transposed, W's rows k0.. are its columns k0..) */
		pc.w_off = (uint32_t)(b[1].elem_off + k0 * (trans ? 1 : q->in));
		pc.flags = acc | trans | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		pc.k_len = (uint32_t)len;
		dispatch_split(r, KERN_INPUT, &pc, sizeof(pc), &pc.b_base, VKG_INPUT_TILE, &pc.c_base, 1,
			       (q->in + tile - 1) / tile, (q->batch + tile - 1) / tile, tile * tile * len);
	}
}

/* The bytes a dispatch binds for tensor t: from the offset aligned down as
 * bind_tensor() binds it, to the tensor's end. */
static void bound_range(const recorder *rc, const job *j, int t, uint64_t *lo, uint64_t *hi)
{
	const VkDeviceSize align = rc->dev->props.limits.minStorageBufferOffsetAlignment;
	*lo = j->req.t[t].offset / align * align;
	*hi = j->req.t[t].offset + j->bytes[t];
}

/* Tensor slots each kernel binds. */
#define UNIT_PARAM ((1u << PROTO_T_X) | (1u << PROTO_T_DY) | (1u << PROTO_T_DW) | (1u << PROTO_T_DB))
#define UNIT_INPUT ((1u << PROTO_T_DY) | (1u << PROTO_T_W) | (1u << PROTO_T_DX))

/* Region g's entry in the batch's table: its own, or (add) the free one
 * where it goes, or NULL. The table is at most half full. */
static record_region *track_find(recorder *rc, const region *g, bool add)
{
	uint64_t h = (uint64_t)(uintptr_t)g * 0x9e3779b97f4a7c15ull;
	for (uint32_t i = (uint32_t)(h >> 32) & rc->mask;; i = (i + 1) & rc->mask) {
		record_region *k = &rc->tab[i];
		if (!k->key || k->batch != rc->batch) {
			if (!add)
				return NULL;
			assert(rc->used < (rc->mask + 1) / 2);
			rc->used++;
			*k = (record_region){.key = g, .epoch = rc->epoch - 1, .batch = rc->batch,
					     .last = TOUCH_NONE};
			return k;
		}
		if (k->key == g)
			return k;
	}
}

/* Does the dispatch binding tensors `mask` of j need a barrier before it,
 * given what the batch did since the last one? Only when its bound bytes
 * overlap bytes an earlier dispatch wrote, or it writes bytes an earlier
 * one bound: independent jobs run concurrently. */
static bool needs_barrier(recorder *rc, const job *j, unsigned mask)
{
	if (rc->untracked)
		return true;
	const region *key = NULL; /* a job's tensors often share a region: one lookup */
	const record_region *g = NULL;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!j->reg[t] || !(mask & (1u << t)))
			continue;
		if (j->reg[t] != key) {
			key = j->reg[t];
			g = track_find(rc, key, false);
		}
		if (!g || g->epoch != rc->epoch)
			continue;
		uint64_t lo, hi;
		bound_range(rc, j, t, &lo, &hi);
		for (uint32_t i = g->last; i != TOUCH_NONE; i = rc->touch[i].prev) {
			const record_touch *k = &rc->touch[i];
			if (k->lo < hi && lo < k->hi && (k->write || job_is_output(t)))
				return true;
		}
	}
	return false;
}

/* Remember the dispatch's bound ranges. */
static void mark_touched(recorder *rc, const job *j, unsigned mask)
{
	const region *key = NULL; /* as in needs_barrier */
	record_region *g = NULL;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!j->reg[t] || !(mask & (1u << t)))
			continue;
		if (j->reg[t] != key) {
			key = j->reg[t];
			g = track_find(rc, key, true);
		}
		if (g->epoch != rc->epoch) {
			g->epoch = rc->epoch;
			g->last = TOUCH_NONE;
		}
		if (rc->ntouch == rc->touch_cap) {
			uint32_t cap = rc->touch_cap ? rc->touch_cap * 2 : 64;
			record_touch *nt = cap > rc->touch_cap ? realloc(rc->touch, cap * sizeof(*nt)) : NULL;
			if (!nt) {
				/* cannot track: the next dispatch gets a barrier regardless */
				rc->untracked = true;
				continue;
			}
			rc->touch = nt;
			rc->touch_cap = cap;
		}
		uint64_t lo, hi;
		bound_range(rc, j, t, &lo, &hi);
		rc->touch[rc->ntouch] = (record_touch){lo, hi, job_is_output(t), g->last};
		g->last = rc->ntouch++;
	}
}

/* The kernel one unit (UNIT_PARAM: dW/db, UNIT_INPUT: dX) of the job
 * starts with: its plan's split-K or GEMM kernel, else the plain
 * linear_parameter_backward / linear_input_backward. */
static int unit_kernel(const job *j, unsigned mask)
{
	const int k = mask == UNIT_PARAM ? j->plan.param : j->plan.input;
	if (k == KERN_SPLITK || is_gemm(k))
		return k;
	return mask == UNIT_PARAM ? KERN_PARAM : KERN_INPUT;
}

/* The kernels of one unit (dW/db, or dX) of the job. */
static void record_kernels(const rec *r, unsigned mask)
{
	const int k = unit_kernel(r->j, mask);
	if (k == KERN_SPLITK)
		record_splitk(r, mask == UNIT_INPUT);
	else if (k == KERN_PARAM)
		record_param(r);
	else if (k == KERN_INPUT)
		record_input(r);
	else
		record_tiled(r, mask == UNIT_INPUT, k);
}

/* Record one unit of a job reading the client's memory, after a barrier
 * when its ranges conflict with what the batch did since the last one. */
static void record_unit(const rec *r, unsigned mask)
{
	recorder *rc = r->rc;
	if (needs_barrier(rc, r->j, mask)) {
		record_barrier_all(r->cb);
		new_epoch(rc);
		rc->untracked = false;
	}
	record_kernels(r, mask);
	mark_touched(rc, r->j, mask);
}

/* One copy per tensor in `mask` between the client's buffer and the job's
 * piece of scratch. */
static void copy_tensors(const rec *r, unsigned mask, bool to_scratch)
{
	const job *j = r->j;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!(mask & (1u << t)) || !j->req.t[t].present)
			continue;
		VkBufferCopy c = {.srcOffset = to_scratch ? j->req.t[t].offset : j->soff[t],
				  .dstOffset = to_scratch ? j->soff[t] : j->req.t[t].offset,
				  .size = j->bytes[t]};
		if (to_scratch)
			vkCmdCopyBuffer(r->cb, j->reg[t]->buf, r->tg->scratch, 1, &c);
		else
			vkCmdCopyBuffer(r->cb, r->tg->scratch, j->reg[t]->buf, 1, &c);
		r->rc->counts.copy_bytes += j->bytes[t];
	}
}

#define MASK_INPUTS ((1u << PROTO_T_X) | (1u << PROTO_T_DY) | (1u << PROTO_T_W) | (1u << PROTO_T_B))
#define MASK_OUTPUTS ((1u << PROTO_T_DW) | (1u << PROTO_T_DB) | (1u << PROTO_T_DX) | (1u << PROTO_T_Y))
/* linear_forward's tensors */
#define MASK_FORWARD ((1u << PROTO_T_X) | (1u << PROTO_T_W) | (1u << PROTO_T_B) | (1u << PROTO_T_Y))

/* linear_forward_prep over a rows × cols source (kernels.h): W into Wᵀ
 * (VKG_FLAG_PREP_TRANSPOSE) or the bias into Y's rows (_BIAS). */
static void record_prep(const rec *r, binding src, binding dst, uint64_t rows, uint64_t cols,
			uint32_t flags)
{
	const binding b[VKG_BINDINGS_PREP] = {src, dst};
	bind_pipe(r, KERN_PREP);
	push_set(r, KERN_PREP, b, VKG_BINDINGS_PREP);
	kiface_prep pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .src_off = src.elem_off,
			  .dst_off = dst.elem_off, .flags = flags};
	const uint64_t tile = VKG_PREP_TILE;
	dispatch_split(r, KERN_PREP, &pc, sizeof(pc), &pc.r_base, 1, &pc.c_base, 1, (cols + tile - 1) / tile,
		       (rows + tile - 1) / tile, tile * tile);
}

/* A linear_forward job's kernels (proto_forward_as_input: the dX GEMM of
 * a backward with in and out swapped, dY' = X, W' = Wᵀ, dX' = Y): W
 * transposed into its scratch (j->wt; else the generic kernel reads W
 * transposed) and the bias written into Y's rows, a barrier, then the GEMM
 * by j->plan, accumulating onto the bias. The caller orders the rest. */
static void record_forward_kernels(const rec *r)
{
	const job *j = r->j;
	const proto_request *q = &j->req;
	job fj = *j; /* the GEMM's view of j: its request and slots remapped */
	proto_forward_as_input(q, &fj.req);
	for (int t = 0; t < PROTO_T_COUNT; t++)
		fj.reg[t] = NULL;
	const int from[3] = {PROTO_T_X, PROTO_T_W, PROTO_T_Y}, to[3] = {PROTO_T_DY, PROTO_T_W, PROTO_T_DX};
	for (int i = 0; i < 3; i++) {
		fj.reg[to[i]] = j->reg[from[i]];
		fj.bytes[to[i]] = j->bytes[from[i]];
		fj.soff[to[i]] = j->soff[from[i]];
	}
	rec fr = *r;
	fr.j = &fj;
	fr.b_trans = !j->wt;
	bool prep = false;
	if (j->wt) { /* Wᵀ lives in scratch alone (bind_tensor: reg NULL) */
		fj.reg[PROTO_T_W] = NULL;
		fj.soff[PROTO_T_W] = j->wt_off;
		record_prep(r, bind_tensor(r, PROTO_T_W), bind_tensor(&fr, PROTO_T_W), q->out, q->in,
			    VKG_FLAG_PREP_TRANSPOSE);
		prep = true;
	}
	if (q->t[PROTO_T_B].present) {
		record_prep(r, bind_tensor(r, PROTO_T_B), bind_tensor(r, PROTO_T_Y), q->batch, q->out,
			    VKG_FLAG_PREP_BIAS | (q->accumulate ? VKG_FLAG_ACCUMULATE : 0u));
		prep = true;
	}
	if (prep)
		barrier_inside(r);
	record_kernels(&fr, UNIT_INPUT);
}

/* A linear_forward job reading the client's memory, after a barrier when
 * its ranges conflict with what the batch did since the last one. */
static void record_forward(const rec *r)
{
	recorder *rc = r->rc;
	if (needs_barrier(rc, r->j, MASK_FORWARD)) {
		record_barrier_all(r->cb);
		new_epoch(rc);
		rc->untracked = false;
	}
	record_forward_kernels(r);
	mark_touched(rc, r->j, MASK_FORWARD);
}

/* A job on the device-local path: its inputs (and, accumulating, its
 * outputs) copied into scratch, its kernels run there between two
 * timestamps (the job's kernel_us), its outputs copied back into the
 * client's buffer. Barriers: before the copies in when they read what the
 * batch wrote, copies → kernels, kernels → copies out; afterwards only the
 * output ranges it wrote are live in the batch's tracking. */
static void record_devlocal(const rec *r, uint32_t ts)
{
	recorder *rc = r->rc;
	const job *j = r->j;
	const unsigned in_mask = MASK_INPUTS | (j->req.accumulate ? MASK_OUTPUTS : 0);
	if (needs_barrier(rc, j, MASK_INPUTS | MASK_OUTPUTS))
		record_barrier_all(r->cb);
	copy_tensors(r, in_mask, true);
	record_barrier_all(r->cb);
	new_epoch(rc);
	rc->untracked = false;
	if (rc->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, r->tg->queries, ts);
	const proto_tensor *t = j->req.t;
	if (j->req.op == PROTO_OP_LINEAR_FORWARD)
		record_forward_kernels(r);
	if (t[PROTO_T_DW].present || t[PROTO_T_DB].present)
		record_kernels(r, UNIT_PARAM);
	if (t[PROTO_T_DX].present)
		record_kernels(r, UNIT_INPUT);
	if (rc->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries, ts + 1);
	record_barrier_all(r->cb);
	new_epoch(rc);
	copy_tensors(r, MASK_OUTPUTS, false);
	mark_touched(rc, r->j, MASK_OUTPUTS);
}

/* Record r's dW/db kernels (param) and dX kernels (input) into r->cb, the
 * caller's command buffer, adding their dispatches to counts. */
static void record_units_into(const rec *r, bool param, bool input, record_counts *counts)
{
	assert(r->j->devlocal);
	r->rc->counts = (record_counts){0};
	forget_bound(r->rc); /* the caller's command buffer, with what it recorded */
	if (param)
		record_kernels(r, UNIT_PARAM);
	if (input)
		record_kernels(r, UNIT_INPUT);
	counts->dispatches += r->rc->counts.dispatches;
}

void record_job_kernels(recorder *rc, const record_target *tg, VkCommandBuffer cb, job *j,
			bool param, bool input, record_counts *counts)
{
	const rec r = {.rc = rc, .tg = tg, .cb = cb, .j = j, .piece = tg->first_piece};
	record_units_into(&r, param, input, counts);
}

uint64_t record_param_block_rows(const recorder *rc, const job *j)
{
	if (!is_gemm(j->plan.param))
		return 0;
	uint64_t tm, tn;
	gemm_tile(rc, j->plan.param, j->req.dtype, &tm, &tn);
	return tm;
}

uint64_t record_param_resume_granule(const recorder *rc, const job *j)
{
	const proto_request *q = &j->req;
	const int k = j->plan.param;
	if (!q->t[PROTO_T_DW].present || (k != KERN_TILED && !pipelines_nv2_dw(k)))
		return 0;
	/* unchunked, a reduction past the loop bound runs in pieces that
	 * accumulate in the output (dispatch_gemm): not what the sums give */
	if (q->batch > gemm_max_k(rc, k, q->dtype))
		return 0;
	/* the tiled kernel adds one k at a time (a chunk's padding adds
	 * zeros: no change to any sum); coopmat_nv2 multiplies BK at a time,
	 * UNROLL steps per trip of its unclamped loop: chunks of whole trips
	 * run each k step at the same place in the same loop as unchunked (not
	 * only the same BK steps: the driver may split a step differently in
	 * another loop) */
	if (pipelines_nv2_dw(k)) {
		const nv2_tile *t = pipelines_nv2_tile(rc->pl, k, q->dtype);
		return (uint64_t)t->bk * (t->unclamp && t->unroll ? t->unroll : 1);
	}
	return 1;
}

void record_job_param_part(recorder *rc, const record_target *tg, VkCommandBuffer cb, job *j,
			   uint32_t sums, uint64_t row0, uint64_t rows, record_counts *counts)
{
	const uint64_t tm = record_param_block_rows(rc, j);
	assert((!sums || record_param_resume_granule(rc, j)) && (!rows || (tm && row0 % tm == 0)));
	rec r = {.rc = rc, .tg = tg, .cb = cb, .j = j, .piece = tg->first_piece,
		 .sums = sums & (VKG_FLAG_SUMS_IN | VKG_FLAG_SUMS_OUT)};
	if (rows) {
		r.gy0 = row0 / tm;
		r.gy1 = (row0 + rows + tm - 1) / tm;
	}
	record_units_into(&r, true, false, counts);
}

/* The order to record tg's jobs in: each lane's jobs in their order, the
 * lanes interleaved — every lane's first job, then every lane's second, ...
 * Jobs of different connections never share a region, so they never
 * conflict; a connection's consecutive jobs often do (the same outputs
 * again), and recorded back to back each would need a barrier before it.
 * Interleaved, the jobs between two barriers are one per connection: the
 * GPU runs them together, and the batch records fewer barriers. Which
 * jobs ride the batch, and the order they are answered in, are the
 * engine's as before. Fills rc->order[0..njobs). */
static void interleave_owners(recorder *rc, const record_target *tg)
{
	const uint32_t n = tg->njobs;
	uint32_t maxrank = 0;
	for (uint32_t i = 0; i < n; i++) {
		const void *key = tg->jobs[i]->lane;
		uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull;
		uint32_t k = (uint32_t)(h >> 32) & rc->lane_mask;
		while (rc->lanes[k].batch == rc->batch && rc->lanes[k].key != key)
			k = (k + 1) & rc->lane_mask;
		record_lane *l = &rc->lanes[k];
		if (l->batch != rc->batch)
			*l = (record_lane){.key = key, .batch = rc->batch, .count = 0};
		rc->rank[i] = l->count++;
		if (rc->rank[i] > maxrank)
			maxrank = rc->rank[i];
	}
	/* counting sort by rank, stable: a lane's jobs keep their order */
	memset(rc->start, 0, (maxrank + 2) * sizeof(*rc->start));
	for (uint32_t i = 0; i < n; i++)
		rc->start[rc->rank[i] + 1]++;
	for (uint32_t r = 0; r <= maxrank; r++)
		rc->start[r + 1] += rc->start[r];
	for (uint32_t i = 0; i < n; i++)
		rc->order[rc->start[rc->rank[i]]++] = i;
}

recorder *record_new(const device *d, const pipelines *pl, uint64_t dispatch_max_macs,
		     uint32_t max_batch_jobs)
{
	recorder *rc = calloc(1, sizeof(*rc));
	if (!rc)
		return NULL;
	rc->dev = d;
	rc->pl = pl;
	rc->dispatch_max_macs = dispatch_max_macs;
	/* at least twice the regions a full batch can name */
	uint64_t n = 16;
	while (n < 2ull * max_batch_jobs * PROTO_T_COUNT)
		n *= 2;
	rc->tab = n <= UINT32_MAX ? calloc(n, sizeof(*rc->tab)) : NULL;
	/* lanes: at least twice a full batch's */
	uint64_t nl = 16;
	while (nl < 2ull * max_batch_jobs)
		nl *= 2;
	rc->lanes = nl <= UINT32_MAX ? calloc(nl, sizeof(*rc->lanes)) : NULL;
	rc->rank = calloc(max_batch_jobs + 1u, sizeof(*rc->rank));
	rc->order = calloc(max_batch_jobs + 1u, sizeof(*rc->order));
	rc->start = calloc(max_batch_jobs + 2u, sizeof(*rc->start));
	if (!rc->tab || !rc->lanes || !rc->rank || !rc->order || !rc->start) {
		record_free(rc);
		return NULL;
	}
	rc->tab_len = (uint32_t)n;
	rc->lane_mask = (uint32_t)(nl - 1);
	rc->max_jobs = max_batch_jobs;
	return rc;
}

void record_free(recorder *rc)
{
	if (!rc)
		return;
	free(rc->touch);
	free(rc->tab);
	free(rc->lanes);
	free(rc->rank);
	free(rc->order);
	free(rc->start);
	free(rc);
}

/* Timestamp queries: the batch's two, then two per device-local job. */
static uint32_t assign_queries(const record_target *tg)
{
	uint32_t nq = 2;
	for (uint32_t i = 0; i < tg->njobs; i++)
		if (tg->jobs[i]->devlocal)
			tg->jobs[i]->ts_index = (nq += 2) - 2;
	return nq;
}

/* Does any job of the batch use a region that earlier batches still run on? */
static bool after_inflight(const record_target *tg)
{
	for (uint32_t i = 0; i < tg->njobs; i++)
		for (int t = 0; t < PROTO_T_COUNT; t++)
			if (tg->jobs[i]->reg[t] && tg->jobs[i]->reg[t]->inflight)
				return true;
	return false;
}

/* The batch's end: outputs visible to the host (the client's mapping) at
 * completion; the closing timestamp and the nq queries copied to ts_buf. */
static void record_end(const recorder *rc, const record_target *tg, uint32_t nq)
{
	VkCommandBuffer cb = tg->cb;
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
			     VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	if (!rc->dev->timestamps)
		return;
	vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, tg->queries, 1);
	vkCmdCopyQueryPoolResults(cb, tg->queries, 0, nq, tg->ts_buf, 0, sizeof(uint64_t),
				  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
	VkMemoryBarrier hb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &hb,
			     0, NULL, 0, NULL);
}

VkResult record_batch(recorder *rc, const record_target *tg, record_counts *counts)
{
	VkCommandBuffer cb = tg->cb;
	memset(counts, 0, sizeof(*counts));
	rc->counts = (record_counts){0};
	rc->slice_from = tg->slice_from;
	rc->slice_len = tg->slice_len;
	rc->slice_pos = 0;
	forget_bound(rc);
	vkResetCommandPool(rc->dev->dev, tg->pool, 0);
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	VkResult vr = vkBeginCommandBuffer(cb, &bi);
	if (vr != VK_SUCCESS) {
		rc->slice_len = 0;
		return vr;
	}
	const uint32_t nq = assign_queries(tg);
	rc->counts.nqueries = nq;
	if (rc->dev->timestamps) {
		vkCmdResetQueryPool(cb, tg->queries, 0, nq);
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, tg->queries, 0);
	}
	/* earlier batches still running touch some of these regions: order this
	 * batch after them (a barrier's first scope includes earlier submissions) */
	if (after_inflight(tg))
		record_barrier_all(cb);
	/* a new batch: an empty table, sized for its jobs, and a new epoch */
	uint64_t n = 16;
	while (n < 2ull * tg->njobs * PROTO_T_COUNT)
		n *= 2;
	assert(n <= rc->tab_len);
	rc->mask = (uint32_t)(n - 1);
	rc->used = 0;
	rc->batch++; /* every entry is now an earlier batch's: free */
	new_epoch(rc);
	assert(tg->njobs <= rc->max_jobs);
	interleave_owners(rc, tg);
	for (uint32_t o = 0; o < tg->njobs; o++) {
		const uint32_t i = rc->order[o];
		rec r = {.rc = rc, .tg = tg, .cb = cb, .j = tg->jobs[i], .piece = tg->first_piece + i};
		const proto_tensor *t = r.j->req.t;
		if (r.j->devlocal) {
			record_devlocal(&r, r.j->ts_index);
			continue;
		}
		if (r.j->req.op == PROTO_OP_LINEAR_FORWARD) {
			record_forward(&r);
			continue;
		}
		const bool param = t[PROTO_T_DW].present || t[PROTO_T_DB].present;
		const bool input = t[PROTO_T_DX].present;
		/* a job's two units are independent (proto_job_check: no output
		 * overlaps another tensor of the job), so either may go first:
		 * dX first when its kernel is the one bound (the previous job's
		 * last), which saves a pipeline bind per job in a run of jobs */
		if (param && input && rc->bound_pipe != VK_NULL_HANDLE &&
		    rc->bound_pipe == rc->pl->pipe[unit_kernel(r.j, UNIT_INPUT)][r.j->req.dtype] &&
		    unit_kernel(r.j, UNIT_PARAM) != unit_kernel(r.j, UNIT_INPUT)) {
			record_unit(&r, UNIT_INPUT);
			record_unit(&r, UNIT_PARAM);
			continue;
		}
		if (param)
			record_unit(&r, UNIT_PARAM);
		if (input)
			record_unit(&r, UNIT_INPUT);
	}
	record_end(rc, tg, nq);
	rc->slice_len = 0; /* the other entry points record whole kernels */
	*counts = rc->counts;
	return vkEndCommandBuffer(cb);
}
