/* daemon/kernels/grid.c — the recorder's primitives that every kernel's
 * recording shares: what is bound (a tensor, a dummy, the partials, the
 * running sums), a pipeline bound and its descriptors pushed only when
 * they change, and a grid of workgroups cut into bounded pieces (at most
 * dispatch_max_macs a piece, the recorder's barrier between pieces that
 * must be apart). Below dispatch.c (the families), activation.c and
 * optim_step.c, calling none of them: the calls run one way. */
#include "record_priv.h"

#include "kshape.h"

#include <assert.h>
#include <string.h>

void grid_forget_bound(recorder *rc)
{
	rc->bound_pipe = VK_NULL_HANDLE;
	rc->set_layout = VK_NULL_HANDLE;
	rc->set_n = 0;
}

/* Bind a tensor: its device-local copy in the slot's scratch (or a tensor
 * that lives only there, reg[t] NULL: a linear_forward's Wᵀ), or the
 * client's buffer from the aligned-down offset so any offset that is a
 * multiple of the element size works (the remainder goes to the shader as
 * elements). */
binding grid_bind_tensor(const rec *r, int t)
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
binding grid_bind_dummy(const rec *r, uint64_t which)
{
	const record_target *tg = r->tg;
	binding b = {.info = {.buffer = tg->dummy, .offset = (3 * r->piece + which) * tg->dummy_piece,
			      .range = tg->dummy_piece}};
	return b;
}

/* The job's split-K partial sums (of dW/db, or of dX) in the slot's scratch. */
binding grid_bind_partials(const rec *r, bool for_dx)
{
	const job *j = r->j;
	const uint64_t elems = for_dx ? kshape_splitk_dx_elems(&j->req, j->plan.dx_slices)
			       : j->plan.param == KERN_NARROW ? kshape_narrow_elems(&j->req, j->plan.slices)
							       : kshape_splitk_elems(&j->req, j->plan.slices);
	binding b = {.info = {.buffer = r->tg->scratch,
			      .offset = for_dx ? j->splitk_dx_off : j->splitk_off, .range = elems * 4}};
	return b;
}

/* The GEMM's fifth binding: the job's running sums of dW and db in the
 * slot's scratch (j->sums_off) for a resumed chunk, else a dummy piece
 * (the kernel's flags leave it untouched). */
binding grid_bind_sums(const rec *r)
{
	const job *j = r->j;
	if (!r->sums)
		return grid_bind_dummy(r, 2);
	binding b = {.info = {.buffer = r->tg->scratch, .offset = j->sums_off,
			      .range = (j->req.out * j->req.in + j->req.out) * 4}};
	return b;
}

/* Kernel k's pipeline for the job's dtype, unless it is bound already
 * (binding a pipeline leaves descriptors and push constants as they are). */
void grid_bind_pipe(const rec *r, int k)
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
void grid_push_set(const rec *r, int k, const binding *b, uint32_t n)
{
	recorder *rc = r->rc;
	assert(n <= VKG_BINDINGS_MAX);
	bool same = rc->set_layout == rc->pl->layout[k] && rc->set_n == n;
	for (uint32_t i = 0; same && i < n; i++)
		same = memcmp(&rc->set_info[i], &b[i].info, sizeof(b[i].info)) == 0;
	if (same)
		return;
	rc->set_layout = rc->pl->layout[k];
	rc->set_n = n;
	for (uint32_t i = 0; i < n; i++)
		rc->set_info[i] = b[i].info;
	VkWriteDescriptorSet w[VKG_BINDINGS_MAX];
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

/* A slice cuts a job's grid, never its reductions: the pieces of a
 * reduction are those of the loop bound (kshape_max_k) on every path, so
 * a sliced job sums in the order of the same job whole, devlocal or
 * streamed (the same bits). At most SLICE_MAX_PIECES dispatches per grid. */
#define SLICE_MAX_PIECES 32

/* Dispatch a gx × gy grid of workgroups, each costing wg_macs
 * multiply-adds, in pieces of at most dispatch_max_macs (whole rows of the
 * grid, or part of one row when a row alone is more), so no single dispatch
 * runs long enough to meet a driver's timeout; also keeps each piece within
 * maxComputeWorkGroupCount. pc is kernel k's push constants (pc_bytes, a
 * kiface.h struct); the piece's first row (× yscale) goes to its field
 * *ybase (NULL: the grid has one row, no row base), its first column
 * (× xscale) to *xbase. */
void grid_split(const rec *r, int k, const void *pc, uint32_t pc_bytes, uint32_t *ybase,
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
	const bool apart = (gx > cols || gy - y0 > rows) && rc->ops.bound_overlap(rc, r->j);
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
				r->rc->ops.barrier_inside(r);
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

void grid_kernel(const rec *r, int k, const binding *b, uint32_t n)
{
	grid_bind_pipe(r, k);
	grid_push_set(r, k, b, n);
}

void grid_row(const rec *r, int k, const void *pc, uint32_t pc_bytes, uint32_t *xbase,
	      uint32_t xscale, uint64_t gx, uint64_t wg_macs)
{
	grid_split(r, k, pc, pc_bytes, NULL, 0, xbase, xscale, gx, 1, wg_macs);
}
