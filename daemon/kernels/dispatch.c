/* daemon/kernels/dispatch.c — how a job's work becomes dispatches: tensors
 * bound as push descriptors, the kernel each unit of a job runs
 * (daemon/kernels/variant.h), reductions cut at the loop bound, grids cut
 * into bounded pieces, and of a slice only its pieces. Where the barriers
 * between jobs go is record.c's. */
#include "record_priv.h"

#include "kshape.h"
#include "plan.h"

#include <assert.h>
#include <string.h>

/* Length of the piece of a reduction of K elements that starts at k0, in
 * pieces of at most `step` (kshape_max_k: the loop bound, variant.h). */
static uint64_t piece_len(uint64_t K, uint64_t k0, uint64_t step)
{
	return K - k0 < step ? K - k0 : step;
}

/* linear_parameter_backward for dW and/or db. */
static void record_param(const rec *r)
{
	const proto_request *q = &r->j->req;
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	binding b[VKG_BINDINGS_PARAM] = {
		grid_bind_tensor(r, PROTO_T_X),
		grid_bind_tensor(r, PROTO_T_DY),
		dw ? grid_bind_tensor(r, PROTO_T_DW) : grid_bind_dummy(r, 0),
		db ? grid_bind_tensor(r, PROTO_T_DB) : grid_bind_dummy(r, 1),
	};
	grid_bind_pipe(r, KERN_PARAM);
	grid_push_set(r, KERN_PARAM, b, VKG_BINDINGS_PARAM);
	const uint32_t flags = (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u) | acc;
	kiface_param pc = {
		.batch = (uint32_t)q->batch, .n_in = (uint32_t)q->in, .n_out = (uint32_t)q->out,
		.x_off = b[0].elem_off, .dy_off = b[1].elem_off, .dw_off = b[2].elem_off,
		.db_off = b[3].elem_off, .flags = flags,
	};
	const uint64_t gx = dw ? (q->in + VKG_PARAM_COLS - 1) / VKG_PARAM_COLS : 1;
	/* the batch in pieces within the loop bound: rows k0.. of X and dY,
	 * the later pieces accumulating */
	const uint64_t step = kshape_max_k(KERN_PARAM, q->dtype);
	for (uint64_t k0 = 0; k0 < q->batch; k0 += step) {
		const uint64_t len = piece_len(q->batch, k0, step);
		if (k0)
			r->rc->ops.barrier_inside(r);
		pc.batch = (uint32_t)len;
		pc.x_off = (uint32_t)(b[0].elem_off + k0 * q->in);
		pc.dy_off = (uint32_t)(b[1].elem_off + k0 * q->out);
		pc.flags = flags | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		grid_split(r, KERN_PARAM, &pc, sizeof(pc), &pc.o_base, 1, &pc.c_base, 1, gx, q->out,
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
	uint32_t w = pipelines_is_t128(k) || q->dtype == PROTO_F32 ? 4 : 0;
	if (k == KERN_COOPMAT || pipelines_is_cmk(k) || pipelines_is_nv2(k) || pipelines_is_cmks(k))
		w = 8;
	if (!w || q->in % w || q->out % w || a_off % w || b_off % w)
		return 0;
	return VKG_FLAG_VEC_LOADS;
}

/* The longest reduction GEMM kernel k walks in one dispatch: kshape_max_k,
 * for linear_coopmat_khr_gemm with its pipelines' own BK (two k steps per
 * loop iteration). */
static uint64_t gemm_max_k(const recorder *rc, int k, proto_dtype dt)
{
	if (pipelines_is_cmk(k))
		return 2ull * pipelines_cmk_tile_for(rc->pl, k, dt).bk * KSHAPE_MAX_LOOP_TRIPS;
	const t128_tile *tt = pipelines_is_t128(k) ? pipelines_t128_for(rc->pl, k, dt) : NULL;
	if (tt)
		return (uint64_t)tt->bk * KSHAPE_MAX_LOOP_TRIPS;
	if (pipelines_is_nv2(k))
		return (uint64_t)pipelines_nv2_tile(rc->pl, k, dt)->bk * KSHAPE_MAX_LOOP_TRIPS;
	if (pipelines_is_dxs(k)) /* (the W it holds: refine_cmk_dx_stream takes no more) */
		return 16ull * rc->pl->dxs[pipelines_dxs_class(k)].tk;
	return kshape_max_k(k, dt);
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
			r->rc->ops.barrier_inside(r);
		pc->K = (uint32_t)len;
		pc->a_off = (uint32_t)(a_off + k0 * pc->sak);
		pc->b_off = (uint32_t)(b_off + k0 * pc->N);
		pc->flags = flags | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		grid_split(r, k, pc, sizeof(*pc), &pc->m_base, 1, &pc->n_base, 1, gx, gy,
			       tile_macs * len);
	}
}

/* GEMM kernel k's C tile per workgroup, tm rows by tn columns
 * (shaders/iface/kernels.h; coopmat_khr's chosen at pipeline creation). */
static void gemm_tile(const recorder *rc, int k, proto_dtype dt, uint64_t *tm, uint64_t *tn)
{
	*tm = *tn = k == KERN_COOPMAT ? VKG_TILE_COOPMAT : VKG_TILE_TILED;
	if (pipelines_is_t128(k)) { /* the tunable path's tiling, else the fixed 128x128 */
		const t128_tile *tt = pipelines_t128_for(rc->pl, k, dt);
		*tm = tt ? tt->bm : VKG_TILE_TILED128, *tn = tt ? tt->bn : VKG_TILE_TILED128;
	}
	if (pipelines_is_nv2(k)) { /* VKGRAD_NV2_TILE's, or the small layers' */
		const nv2_tile *t = pipelines_nv2_tile(rc->pl, k, dt);
		*tm = t->bm, *tn = t->bn;
	}
	if (pipelines_is_cmk(k))
		*tm = rc->pl->cmk_bm[pipelines_cmk_tiling(k)], *tn = rc->pl->cmk_bn[pipelines_cmk_tiling(k)];
	if (pipelines_is_dxs(k)) {
		const dxs_tile *t = &rc->pl->dxs[pipelines_dxs_class(k)];
		*tm = dxs_tile_bm(t), *tn = dxs_tile_bn(t);
	}
}

/* Is kernel k one of the GEMMs record_tiled records? */
static bool is_gemm(int k)
{
	return k == KERN_TILED || k == KERN_TILED128 || k == KERN_TILED128_S || k == KERN_COOPMAT || pipelines_is_cmk(k) ||
	       pipelines_is_nv2(k) || pipelines_is_dxs(k);
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
		b[0] = grid_bind_tensor(r, PROTO_T_DY);
		b[1] = grid_bind_tensor(r, PROTO_T_X);
		b[2] = dw ? grid_bind_tensor(r, PROTO_T_DW) : grid_bind_dummy(r, 0);
		b[3] = db ? grid_bind_tensor(r, PROTO_T_DB) : grid_bind_dummy(r, 1);
		b[4] = grid_bind_sums(r);
		m = q->out, n = dw ? q->in : 1;
		pc = (kiface_gemm){
			.M = (uint32_t)q->out, .N = (uint32_t)q->in, .K = (uint32_t)q->batch,
			.a_off = b[0].elem_off, .b_off = b[1].elem_off, .c_off = b[2].elem_off,
			.d_off = b[3].elem_off, .sam = 1, .sak = (uint32_t)q->out,
			.flags = (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u) | acc | r->sums,
		};
	} else {
		b[0] = grid_bind_tensor(r, PROTO_T_DY);
		b[1] = grid_bind_tensor(r, PROTO_T_W);
		b[2] = grid_bind_tensor(r, PROTO_T_DX);
		b[3] = b[4] = grid_bind_dummy(r, 2);
		m = q->batch, n = q->in;
		pc = (kiface_gemm){
			.M = (uint32_t)q->batch, .N = (uint32_t)q->in, .K = (uint32_t)q->out,
			.a_off = b[0].elem_off, .b_off = b[1].elem_off, .c_off = b[2].elem_off,
			.d_off = 0, .sam = (uint32_t)q->out, .sak = 1, .flags = VKG_FLAG_WRITE_C | acc,
		};
		/* linear_coopmat_khr_dx_stream reads and writes whole 16-row
		 * strips 16 bytes at a time, unchecked: a GEMM its tiling does
		 * not take as recorded (a streamed job's chunk of rows that are
		 * not whole strips) or tensors off that grid take coopmat_khr */
		if (pipelines_is_dxs(k) &&
		    (!dxs_tile_takes(&r->rc->pl->dxs[pipelines_dxs_class(k)], q->batch, q->in, q->out) ||
		     !dxs_tile_aligned(pc.a_off, pc.b_off, pc.c_off)))
			k = KERN_CMK_DX;
	}
	pc.flags |= vec_flag(q, k, pc.a_off, pc.b_off);
	grid_bind_pipe(r, k);
	grid_push_set(r, k, b, pipelines_bindings(k));
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

/* Split-K's second pass: kernel rk (linear_splitk_reduce, KERN_REDUCE:
 * VKG_REDUCE_WG elements per workgroup, one thread each; or
 * linear_narrow_reduce, KERN_NARROW_RED: VKG_NARROW_RED_COLS, 16 lanes
 * each) adds the first SK of the job's S slices of partials (dW's or
 * dX's, mn elements of C per slice, db's row sums after all S of C) in
 * order into the outputs, rounding once (accumulate: onto what they
 * hold). */
static void record_splitk_reduce(const rec *r, int rk, bool for_dx, uint32_t S, uint32_t SK, uint64_t mn)
{
	const proto_request *q = &r->j->req;
	const uint64_t per = rk == KERN_NARROW_RED ? VKG_NARROW_RED_COLS : VKG_REDUCE_WG;
	grid_bind_pipe(r, rk);
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	for (int t = PROTO_T_DW; t <= PROTO_T_DX; t++) {
		if (!q->t[t].present || (t == PROTO_T_DX) != for_dx)
			continue;
		const uint64_t cnt = t == PROTO_T_DB ? q->out : mn;
		binding rb[VKG_BINDINGS_REDUCE] = {grid_bind_partials(r, for_dx), grid_bind_tensor(r, t)};
		grid_push_set(r, rk, rb, VKG_BINDINGS_REDUCE);
		kiface_reduce pc = {
			.n = (uint32_t)cnt, .slices = SK, .stride = (uint32_t)cnt,
			.part_off = t == PROTO_T_DB ? (uint32_t)(S * mn) : 0u,
			.out_off = rb[1].elem_off, .flags = acc,
		};
		grid_split(r, rk, &pc, sizeof(pc), NULL, 0, &pc.base, (uint32_t)per, (cnt + per - 1) / per, 1,
			   per * (uint64_t)SK);
	}
}

/* Split-K for dW (+ db), or for dX: each slice of the reduction (dW: the
 * batch's rows; dX: out) through the first pass, kernel k
 * (linear_splitk_gemm, KERN_SPLITK: 64x64 tiles; linear_splitk128_gemm,
 * KERN_SPLITK128: 128x128 tiles, slices of whole 16-row steps), into the
 * job's f32 partials in scratch (a slice longer than the loop bound in
 * pieces that accumulate there), one barrier, then linear_splitk_reduce
 * adds the slices in order into the outputs, rounding once. dX = dY·W is
 * the same GEMM with A = dY along out (sam = out, sak = 1) and B = W. */
static void record_splitk(const rec *r, bool for_dx, int k)
{
	const proto_request *q = &r->j->req;
	const bool dw = !for_dx && q->t[PROTO_T_DW].present, db = !for_dx && q->t[PROTO_T_DB].present;
	const uint32_t S = for_dx ? r->j->plan.dx_slices : r->j->plan.slices;
	const uint64_t K = for_dx ? q->out : q->batch, m = for_dx ? q->batch : q->out;
	const uint64_t n = for_dx || dw ? q->in : 1, mn = m * q->in;
	/* per slice; S·L covers K. The slices that start inside K, SK of them,
	 * are computed and added: ceil(K / S) rows each can leave the last
	 * ones empty (1040 rows in 64 slices of 17: 62 and 63 start past
	 * the batch), and an empty slice has no rows to read (its partials
	 * keep their place in the layout, unwritten and unread). On the 128
	 * tile placement.c made S kshape_s128_slices: none empty. */
	const uint64_t L = k == KERN_SPLITK128 ? kshape_s128_len(K, S) : (K + S - 1) / S;
	const uint32_t SK = (uint32_t)((K + L - 1) / L);
	const uint32_t sam = for_dx ? (uint32_t)q->out : 1, sak = for_dx ? 1 : (uint32_t)q->out;
	binding b[VKG_BINDINGS_GEMM_SUMS] = {grid_bind_tensor(r, PROTO_T_DY),
					grid_bind_tensor(r, for_dx ? PROTO_T_W : PROTO_T_X),
					grid_bind_partials(r, for_dx), grid_bind_partials(r, for_dx),
					grid_bind_dummy(r, 2)};
	grid_bind_pipe(r, k);
	grid_push_set(r, k, b, pipelines_bindings(k));
	uint64_t tm = VKG_TILE_TILED, tn = VKG_TILE_TILED; /* the 128 tile's: VKGRAD_T128_TILE's (f32) */
	if (k == KERN_SPLITK128)
		gemm_tile(r->rc, k, q->dtype, &tm, &tn);
	for (uint32_t s = 0; s < SK; s++) {
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
		pc.flags |= vec_flag(q, k, pc.a_off, pc.b_off);
		dispatch_gemm(r, k, &pc, (n + tn - 1) / tn, (m + tm - 1) / tm, tm * tn);
	}
	r->rc->ops.barrier_inside(r);
	record_splitk_reduce(r, KERN_REDUCE, for_dx, S, SK, mn);
}

/* Split-K of dW (+ db) on the tensor cores (linear_coopmat_khr_splitk_gemm:
 * pipeline k, KERN_CMK_SPLITK or its 128x128 or 32x32 tiling, whose tile
 * side pipelines_cmks_side gives): every slice × row tile × column tile of dW one
 * workgroup of one grid (the slices down the grid's rows: row r is slice
 * r / m_tiles, row tile r % m_tiles; shaders/iface/kernels.h
 * VKG_PC_GEMM_SPLIT), each slice kshape_cmks_len rows long (placement.c
 * made S kshape_cmks_slices: none empty, none past the loop bound), into
 * the job's f32 partials in split-K's layout; one barrier, then the
 * slices added by linear_narrow_reduce (the layout linear_splitk_reduce
 * reads, part[part_off + s·stride + i], but 16 lanes per element each
 * taking every 16th slice and a fixed tree, a fixed order: hundreds of
 * slices are short chains of loads, not one long one per element).
 * fused (k KERN_CMKS_DX or KERN_CMKS_DX_S, linear_coopmat_khr_splitk_dx_gemm:
 * out within one row tile): the same grid also writes dX = dY·W, each workgroup its
 * slice's rows and column tile (W and dX bound fifth and sixth; dX
 * rounded once, accumulating onto what it holds where the job does). */
static void record_cmk_splitk(const rec *r, int k)
{
	const proto_request *q = &r->j->req;
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	const bool fused = pipelines_is_cmks_dx(k);
	const uint32_t S = r->j->plan.slices;
	const uint64_t K = q->batch, m = q->out, n = dw ? q->in : 1, mn = m * q->in;
	const uint64_t L = kshape_cmks_len(K, S);
	const uint32_t SK = (uint32_t)((K + L - 1) / L);
	assert(SK == S && L <= kshape_max_k(k, q->dtype));
	const uint64_t tm = pipelines_cmks_side(k), tn = tm;
	const uint64_t mt = (m + tm - 1) / tm;
	/* (fused: dW's one row tile holds all of out, and every column tile
	 * of in has its workgroups: dW is asked for) */
	assert(!fused || (mt == 1 && dw));
	binding b[VKG_BINDINGS_GEMM_SPLIT_DX] = {grid_bind_tensor(r, PROTO_T_DY), grid_bind_tensor(r, PROTO_T_X),
						 grid_bind_partials(r, false), grid_bind_partials(r, false)};
	if (fused) {
		b[4] = grid_bind_tensor(r, PROTO_T_W);
		b[5] = grid_bind_tensor(r, PROTO_T_DX);
	}
	grid_bind_pipe(r, k);
	grid_push_set(r, k, b, pipelines_bindings(k));
	kiface_gemm_split_dx pcx;
	kiface_gemm_split pc = {
		.M = (uint32_t)m, .N = (uint32_t)q->in, .K = (uint32_t)K,
		.a_off = b[0].elem_off, .b_off = b[1].elem_off,
		.c_off = 0,                   /* slice s's partials at s·mn */
		.d_off = (uint32_t)(S * mn), /* its row sums at S·mn + s·m, after all C */
		.sam = 1, .sak = (uint32_t)q->out,
		.flags = (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u),
		.slice_len = (uint32_t)L, .m_tiles = (uint32_t)mt,
	};
	pc.flags |= vec_flag(q, KERN_CMK_SPLITK, pc.a_off, pc.b_off);
	if (fused) {
		/* the partials' words, then dX's: W read and dX written eight
		 * at a time where in and both offsets are multiples of 8 */
		memset(&pcx, 0, sizeof(pcx));
		memcpy(&pcx, &pc, sizeof(pc));
		pcx.w_off = b[4].elem_off;
		pcx.dx_off = b[5].elem_off;
		pcx.dx_flags = (q->accumulate ? VKG_FLAG_ACCUMULATE : 0u) |
			       (q->in % 8 == 0 && pcx.w_off % 8 == 0 && pcx.dx_off % 8 == 0 ? VKG_FLAG_VEC_LOADS : 0u);
		/* (a workgroup's multiply-adds: dW's tile and as many again for
		 * its rows × columns of dX over out's BM) */
		grid_split(r, k, &pcx, sizeof(pcx), &pcx.m_base, 1, &pcx.n_base, 1, (n + tn - 1) / tn, mt * S,
			   2 * tm * tn * L);
	} else {
		grid_split(r, k, &pc, sizeof(pc), &pc.m_base, 1, &pc.n_base, 1, (n + tn - 1) / tn, mt * S,
			   tm * tn * L);
	}
	r->rc->ops.barrier_inside(r);
	record_splitk_reduce(r, KERN_NARROW_RED, false, S, S, mn);
}

/* The narrow family's dW/db (variant.h): linear_narrow_param over every
 * row block × 64x64 tile into the job's f32 partials in scratch (a block
 * per slice of the split-K layout), one barrier, then linear_narrow_reduce
 * adds the blocks in order into dW and db, rounding once. */
static void record_narrow_param(const rec *r)
{
	const proto_request *q = &r->j->req;
	const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
	const uint32_t blocks = r->j->plan.slices;
	const uint64_t rows = kshape_narrow_rows(q, blocks), stride = kshape_narrow_stride(q);
	binding b[VKG_BINDINGS_NARROW] = {grid_bind_tensor(r, PROTO_T_X), grid_bind_tensor(r, PROTO_T_DY),
					  grid_bind_partials(r, false)};
	grid_bind_pipe(r, KERN_NARROW);
	grid_push_set(r, KERN_NARROW, b, VKG_BINDINGS_NARROW);
	kiface_narrow pc = {
		.batch = (uint32_t)q->batch, .n_in = (uint32_t)q->in, .n_out = (uint32_t)q->out,
		.x_off = b[0].elem_off, .dy_off = b[1].elem_off, .p_off = 0, .stride = (uint32_t)stride,
		.rows = (uint32_t)rows, .flags = (dw ? VKG_FLAG_WRITE_C : 0u) | (db ? VKG_FLAG_WRITE_D : 0u),
	};
	grid_split(r, KERN_NARROW, &pc, sizeof(pc), &pc.b_base, 1, &pc.t_base, 1, kshape_narrow_tiles(q),
		       blocks, rows * VKG_NARROW_TILE * VKG_NARROW_TILE);
	r->rc->ops.barrier_inside(r);
	grid_bind_pipe(r, KERN_NARROW_RED);
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	for (int t = PROTO_T_DW; t <= PROTO_T_DB; t++) {
		if (!q->t[t].present)
			continue;
		const uint64_t cnt = t == PROTO_T_DB ? q->out : q->out * q->in;
		binding rb[VKG_BINDINGS_REDUCE] = {grid_bind_partials(r, false), grid_bind_tensor(r, t)};
		grid_push_set(r, KERN_NARROW_RED, rb, VKG_BINDINGS_REDUCE);
		kiface_reduce rp = {
			.n = (uint32_t)cnt, .slices = blocks, .stride = (uint32_t)stride,
			.part_off = t == PROTO_T_DB ? (uint32_t)(stride - q->out) : 0u,
			.out_off = rb[1].elem_off, .flags = acc,
		};
		grid_split(r, KERN_NARROW_RED, &rp, sizeof(rp), NULL, 0, &rp.base, VKG_NARROW_RED_COLS,
			       (cnt + VKG_NARROW_RED_COLS - 1) / VKG_NARROW_RED_COLS, 1,
			       VKG_NARROW_RED_COLS * (uint64_t)blocks);
	}
}

/* The narrow family's dX (linear_narrow_input): column tiles × row groups,
 * out in pieces within the loop bound (kshape_max_k), the later ones
 * accumulating after a barrier. */
static void record_narrow_input(const rec *r)
{
	const proto_request *q = &r->j->req;
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	binding b[VKG_BINDINGS_NARROW_DX] = {grid_bind_tensor(r, PROTO_T_DY), grid_bind_tensor(r, PROTO_T_W),
					     grid_bind_tensor(r, PROTO_T_DX)};
	grid_bind_pipe(r, KERN_NARROW_DX);
	grid_push_set(r, KERN_NARROW_DX, b, VKG_BINDINGS_NARROW_DX);
	uint32_t tiles;
	const uint64_t groups = kshape_narrow_dx_groups(q, &tiles);
	const uint64_t ctiles = (q->in + VKG_NARROW_TILE - 1) / VKG_NARROW_TILE;
	const uint64_t tr = kshape_narrow_dx_tile_rows(q->in);
	const uint64_t step = kshape_max_k(KERN_NARROW_DX, q->dtype);
	for (uint64_t k0 = 0; k0 < q->out; k0 += step) {
		const uint64_t len = piece_len(q->out, k0, step);
		if (k0)
			r->rc->ops.barrier_inside(r);
		kiface_narrow_dx pc = {
			.batch = (uint32_t)q->batch, .n_in = (uint32_t)q->in, .n_out = (uint32_t)q->out,
			.dy_off = (uint32_t)(b[0].elem_off + k0), .w_off = (uint32_t)(b[1].elem_off + k0 * q->in),
			.dx_off = b[2].elem_off, .flags = acc | (k0 ? VKG_FLAG_ACCUMULATE : 0u), .tiles = tiles,
			.k_len = (uint32_t)len,
		};
		grid_split(r, KERN_NARROW_DX, &pc, sizeof(pc), &pc.r_base, 1, &pc.c_base, 1, ctiles, groups,
			       tiles * tr * VKG_NARROW_TILE * len);
	}
}

static void record_input(const rec *r)
{
	const proto_request *q = &r->j->req;
	const uint32_t acc = q->accumulate ? VKG_FLAG_ACCUMULATE : 0u;
	binding b[VKG_BINDINGS_INPUT] = {grid_bind_tensor(r, PROTO_T_DY), grid_bind_tensor(r, PROTO_T_W),
					 grid_bind_tensor(r, PROTO_T_DX)};
	grid_bind_pipe(r, KERN_INPUT);
	grid_push_set(r, KERN_INPUT, b, VKG_BINDINGS_INPUT);
	kiface_input pc = {
		.batch = (uint32_t)q->batch, .n_in = (uint32_t)q->in, .n_out = (uint32_t)q->out,
		.dy_off = b[0].elem_off, .w_off = b[1].elem_off, .dx_off = b[2].elem_off,
		.flags = acc, .k_len = (uint32_t)q->out,
	};
	const uint32_t trans = r->b_trans ? VKG_FLAG_B_TRANS : 0u;
	/* the reduction over out in pieces within the loop bound: columns k0..
	 * of dY, rows k0.. of W, the later pieces accumulating */
	const uint64_t tile = VKG_INPUT_TILE;
	const uint64_t step = kshape_max_k(KERN_INPUT, q->dtype);
	for (uint64_t k0 = 0; k0 < q->out; k0 += step) {
		const uint64_t len = piece_len(q->out, k0, step);
		if (k0)
			r->rc->ops.barrier_inside(r);
		pc.dy_off = (uint32_t)(b[0].elem_off + k0);
		/* (transposed, W's rows k0.. are its columns k0..) */
		pc.w_off = (uint32_t)(b[1].elem_off + k0 * (trans ? 1 : q->in));
		pc.flags = acc | trans | (k0 ? VKG_FLAG_ACCUMULATE : 0u);
		pc.k_len = (uint32_t)len;
		grid_split(r, KERN_INPUT, &pc, sizeof(pc), &pc.b_base, VKG_INPUT_TILE, &pc.c_base, 1,
			       (q->in + tile - 1) / tile, (q->batch + tile - 1) / tile, tile * tile * len);
	}
}

int dispatch_unit_kernel(const job *j, unsigned mask)
{
	if (variant_dx_fused(&j->plan))
	{
		/* (recorded one unit at a time: dW/db on the fused kernel's
		 * tiling without dX, dX on coopmat_khr) */
		if (mask == UNIT_BOTH)
			return j->plan.param;
		if (mask == UNIT_PARAM)
			return j->plan.param == KERN_CMKS_DX_S ? KERN_CMKS_S : KERN_CMK_SPLITK;
		return KERN_CMK_DX;
	}
	assert(mask != UNIT_BOTH);
	const int k = mask == UNIT_PARAM ? j->plan.param : j->plan.input;
	if (k == KERN_SPLITK || k == KERN_SPLITK128 || pipelines_is_cmks(k) || k == KERN_NARROW ||
	    k == KERN_NARROW_DX || is_gemm(k))
		return k;
	return mask == UNIT_PARAM ? KERN_PARAM : KERN_INPUT;
}

void dispatch_unit(const rec *r, unsigned mask)
{
	const int k = dispatch_unit_kernel(r->j, mask);
	if (k == KERN_SPLITK || k == KERN_SPLITK128)
		record_splitk(r, mask == UNIT_INPUT, k);
	else if (pipelines_is_cmks(k) || pipelines_is_cmks_dx(k))
		record_cmk_splitk(r, k);
	else if (k == KERN_NARROW)
		record_narrow_param(r);
	else if (k == KERN_NARROW_DX)
		record_narrow_input(r);
	else if (k == KERN_PARAM)
		record_param(r);
	else if (k == KERN_INPUT)
		record_input(r);
	else
		record_tiled(r, mask == UNIT_INPUT, k);
}

/* linear_forward_prep over a rows × cols source (kernels.h): W into Wᵀ
 * (VKG_FLAG_PREP_TRANSPOSE) or the bias into Y's rows (_BIAS). */
static void record_prep(const rec *r, binding src, binding dst, uint64_t rows, uint64_t cols,
			uint32_t flags)
{
	const binding b[VKG_BINDINGS_PREP] = {src, dst};
	grid_bind_pipe(r, KERN_PREP);
	grid_push_set(r, KERN_PREP, b, VKG_BINDINGS_PREP);
	kiface_prep pc = {.rows = (uint32_t)rows, .cols = (uint32_t)cols, .src_off = src.elem_off,
			  .dst_off = dst.elem_off, .flags = flags};
	const uint64_t tile = VKG_PREP_TILE;
	grid_split(r, KERN_PREP, &pc, sizeof(pc), &pc.r_base, 1, &pc.c_base, 1, (cols + tile - 1) / tile,
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
	if (j->wt) { /* Wᵀ lives in scratch alone (grid_bind_tensor: reg NULL) */
		fj.reg[PROTO_T_W] = NULL;
		fj.soff[PROTO_T_W] = j->wt_off;
		record_prep(r, grid_bind_tensor(r, PROTO_T_W), grid_bind_tensor(&fr, PROTO_T_W), q->out, q->in,
			    VKG_FLAG_PREP_TRANSPOSE);
		prep = true;
	}
	if (q->t[PROTO_T_B].present) {
		record_prep(r, grid_bind_tensor(r, PROTO_T_B), grid_bind_tensor(r, PROTO_T_Y), q->batch, q->out,
			    VKG_FLAG_PREP_BIAS | (q->accumulate ? VKG_FLAG_ACCUMULATE : 0u));
		prep = true;
	}
	if (prep)
		r->rc->ops.barrier_inside(r);
	dispatch_unit(&fr, UNIT_INPUT);
	/* y = act(z) over the GEMM's Y, z copied out first (activation.c) */
	if (q->activation != PROTO_ACT_NONE || q->t[PROTO_T_Z].present) {
		r->rc->ops.barrier_inside(r);
		activation_forward(r);
	}
}

/* dW/db's unit and then dX's, a barrier between where the plan keeps
 * them apart */
static void units_in_turn(const rec *r, bool param, bool input)
{
	if (param)
		dispatch_unit(r, UNIT_PARAM);
	if (param && input && r->j->plan.apart)
		r->rc->ops.barrier_inside(r);
	if (input)
		dispatch_unit(r, UNIT_INPUT);
}

void dispatch_backward_units(const rec *r, bool param, bool input)
{
	/* dX beside dW: both units in one pass (one at a time: unfused) */
	const bool both = param && input && variant_dx_fused(&r->j->plan);
	if (r->j->req.activation == PROTO_ACT_NONE) {
		if (both)
			dispatch_unit(r, UNIT_BOTH);
		else
			units_in_turn(r, param, input);
		return;
	}
	/* dZ = dY ⊙ act'(·) into scratch, a barrier, then the kernels read
	 * it as dY: the job's view with dY's slot at dz_off (activation.c) */
	activation_backward(r);
	r->rc->ops.barrier_inside(r);
	job aj;
	rec ar = *r;
	activation_view(r->j, &aj);
	ar.j = &aj;
	if (both)
		dispatch_unit(&ar, UNIT_BOTH);
	else
		units_in_turn(&ar, param, input);
}

/* Record r's dW/db kernels (param) and dX kernels (input) into r->cb, the
 * caller's command buffer, adding their dispatches to counts. */
static void record_units_into(const rec *r, bool param, bool input, record_counts *counts)
{
	assert(r->j->devlocal);
	r->rc->counts = (record_counts){0};
	grid_forget_bound(r->rc); /* the caller's command buffer, with what it recorded */
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
