/* daemon/kernels/dispatch.c — how a job's work becomes dispatches: tensors
 * bound as push descriptors, the kernel each unit of a job runs
 * (daemon/kernels/variant.h), reductions cut at the loop bound, grids cut
 * into bounded pieces, and of a slice only its pieces. Where the barriers
 * between jobs go is record.c's. */
#include "record_priv.h"

#include "variant.h"

#include <assert.h>
#include <string.h>

void dispatch_forget_bound(recorder *rc)
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
	const bool apart = (gx > cols || gy - y0 > rows) && record_bound_overlap(rc, r->j);
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
				record_barrier_inside(r);
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
			record_barrier_inside(r);
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
			record_barrier_inside(r);
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
	record_barrier_inside(r);
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
			record_barrier_inside(r);
		pc.dy_off = (uint32_t)(b[0].elem_off + k0);
		/* (transposed, W's rows k0.. are its columns k0..) */
		pc.w_off = (uint32_t)(b[1].elem_off + k0 * (trans ? 1 : q->in));
		pc.flags = acc | trans | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		pc.k_len = (uint32_t)len;
		dispatch_split(r, KERN_INPUT, &pc, sizeof(pc), &pc.b_base, VKG_INPUT_TILE, &pc.c_base, 1,
			       (q->in + tile - 1) / tile, (q->batch + tile - 1) / tile, tile * tile * len);
	}
}

int dispatch_unit_kernel(const job *j, unsigned mask)
{
	const int k = mask == UNIT_PARAM ? j->plan.param : j->plan.input;
	if (k == KERN_SPLITK || is_gemm(k))
		return k;
	return mask == UNIT_PARAM ? KERN_PARAM : KERN_INPUT;
}

void dispatch_unit(const rec *r, unsigned mask)
{
	const int k = dispatch_unit_kernel(r->j, mask);
	if (k == KERN_SPLITK)
		record_splitk(r, mask == UNIT_INPUT);
	else if (k == KERN_PARAM)
		record_param(r);
	else if (k == KERN_INPUT)
		record_input(r);
	else
		record_tiled(r, mask == UNIT_INPUT, k);
}

binding dispatch_bind(const rec *r, int t)
{
	return bind_tensor(r, t);
}

binding dispatch_bind_dummy(const rec *r, uint64_t which)
{
	return bind_dummy(r, which);
}

void dispatch_kernel(const rec *r, int k, const binding *b, uint32_t n)
{
	bind_pipe(r, k);
	push_set(r, k, b, n);
}

void dispatch_grid(const rec *r, int k, const void *pc, uint32_t pc_bytes, uint32_t *xbase,
		   uint32_t xscale, uint64_t gx, uint64_t wg_macs)
{
	dispatch_split(r, k, pc, pc_bytes, NULL, 0, xbase, xscale, gx, 1, wg_macs);
}

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

void dispatch_forward(const rec *r)
{
	const job *j = r->j;
	const proto_request *q = &j->req;
	job fj = *j; /* the GEMM's view of j: its request and slots remapped */
	proto_forward_as_input(q, &fj.req);
	for (int t = 0; t < PROTO_T_COUNT; t++)
		fj.reg[t] = NULL;
	const int from[3] = {PROTO_T_X, PROTO_T_W, PROTO_T_Y}, to[3] = {PROTO_T_DY, PROTO_T_W, PROTO_T_DX};
	fj.req.t[PROTO_T_Z] = (proto_tensor){0}; /* (the activation's, below) */
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
		record_barrier_inside(r);
	dispatch_unit(&fr, UNIT_INPUT);
	/* y = act(z) over the GEMM's Y, z copied out first (activation.c) */
	if (q->activation != PROTO_ACT_NONE || q->t[PROTO_T_Z].present) {
		record_barrier_inside(r);
		activation_forward(r);
	}
}

void dispatch_backward_units(const rec *r, bool param, bool input)
{
	if (r->j->req.activation == PROTO_ACT_NONE) {
		if (param)
			dispatch_unit(r, UNIT_PARAM);
		if (input)
			dispatch_unit(r, UNIT_INPUT);
		return;
	}
	/* dZ = dY ⊙ act'(·) into scratch, a barrier, then the kernels read
	 * it as dY: the job's view with dY's slot at dz_off (activation.c) */
	activation_backward(r);
	record_barrier_inside(r);
	job aj;
	rec ar = *r;
	activation_view(r->j, &aj);
	ar.j = &aj;
	if (param)
		dispatch_unit(&ar, UNIT_PARAM);
	if (input)
		dispatch_unit(&ar, UNIT_INPUT);
}

/* Record r's dW/db kernels (param) and dX kernels (input) into r->cb, the
 * caller's command buffer, adding their dispatches to counts. */
static void record_units_into(const rec *r, bool param, bool input, record_counts *counts)
{
	assert(r->j->devlocal);
	r->rc->counts = (record_counts){0};
	dispatch_forget_bound(r->rc); /* the caller's command buffer, with what it recorded */
	dispatch_backward_units(r, param, input);
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
