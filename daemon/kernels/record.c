/* daemon/kernels/record.c — how a batch becomes a command buffer: its jobs
 * in an order that interleaves connections, barriers only where one
 * dispatch's bound bytes conflict with an earlier one's since the last
 * barrier (and between a job's two units where its plan keeps them
 * apart), device-local jobs' copies, the timestamps and the batch's end.
 * What each job dispatches is dispatch.c's. */
#include "record_priv.h"

#include "plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define TOUCH_NONE UINT32_MAX

/* A byte range a dispatch of the batch bound since the last barrier;
 * `prev`: the same region's range before it (TOUCH_NONE: none). */
struct record_touch {
	uint64_t lo, hi;
	bool write;
	uint32_t prev;
};

/* A region the batch uses: its ranges of this epoch, newest first from
 * `last` (valid while epoch is the recorder's). An entry of an earlier
 * batch (batch != the recorder's) is a free one: the table is not
 * cleared between batches. */
struct record_region {
	const region *key; /* NULL: a free entry */
	uint64_t epoch;
	uint64_t batch;
	uint32_t last;
};

/* A lane (a connection's queue) with jobs in the batch being recorded:
 * how many of them the batch has so far (valid while batch is the
 * recorder's). */
struct record_lane {
	const void *key;
	uint64_t batch;
	uint32_t count;
};

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

static void barrier_inside(const rec *r)
{
	record_barrier_all(r->cb);
	new_epoch(r->rc);
	r->rc->untracked = false;
}

/* The bytes a dispatch binds for tensor t: from the offset aligned down as
 * dispatch.c's grid_bind_tensor() binds it, to the tensor's end. */
static void bound_range(const recorder *rc, const job *j, int t, uint64_t *lo, uint64_t *hi)
{
	const VkDeviceSize align = rc->dev->props.limits.minStorageBufferOffsetAlignment;
	*lo = j->req.t[t].offset / align * align;
	*hi = j->req.t[t].offset + j->bytes[t];
}

static bool bound_overlap(const recorder *rc, const job *j)
{
	for (int o = 0; o < PROTO_T_COUNT; o++) {
		if (!j->reg[o] || !job_is_output(j, o))
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
			if (k->lo < hi && lo < k->hi && (k->write || job_is_output(j, t)))
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
		rc->touch[rc->ntouch] = (record_touch){lo, hi, job_is_output(j, t), g->last};
		g->last = rc->ntouch++;
	}
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
	dispatch_unit(r, mask);
	mark_touched(rc, r->j, mask);
}

/* The tensors in `mask` copied between the client's buffer and the job's
 * piece of scratch, each in copies of at most rc->copy_piece bytes. */
static void copy_tensors(const rec *r, unsigned mask, bool to_scratch)
{
	const job *j = r->j;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!(mask & (1u << t)) || !j->req.t[t].present)
			continue;
		const uint64_t n = j->bytes[t], piece = r->rc->copy_piece ? r->rc->copy_piece : n;
		for (uint64_t at = 0; at < n; at += piece) {
			VkBufferCopy c = {.srcOffset = (to_scratch ? j->req.t[t].offset : j->soff[t]) + at,
					  .dstOffset = (to_scratch ? j->soff[t] : j->req.t[t].offset) + at,
					  .size = n - at < piece ? n - at : piece};
			if (to_scratch)
				vkCmdCopyBuffer(r->cb, j->reg[t]->buf, r->tg->scratch, 1, &c);
			else
				vkCmdCopyBuffer(r->cb, r->tg->scratch, j->reg[t]->buf, 1, &c);
		}
		r->rc->counts.copy_bytes += n;
	}
}

/* j's present slots that are its outputs (outputs true) or its inputs
 * (a linear_backward's y and z are inputs, a linear_forward's outputs) */
static unsigned job_mask(const job *j, bool outputs)
{
	unsigned m = 0;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		if (j->req.t[t].present && job_is_output(j, t) == outputs)
			m |= 1u << t;
	return m;
}

#define MASK_ALL ((1u << PROTO_T_COUNT) - 1u)

/* A linear_forward job reading the client's memory, after a barrier when
 * its ranges conflict with what the batch did since the last one. */
static void record_forward(const rec *r)
{
	recorder *rc = r->rc;
	if (needs_barrier(rc, r->j, MASK_ALL)) {
		record_barrier_all(r->cb);
		new_epoch(rc);
		rc->untracked = false;
	}
	dispatch_forward(r);
	mark_touched(rc, r->j, MASK_ALL);
}

/* A linear_backward job with an activation reading the client's memory:
 * its dZ pass, then its units reading dZ (dispatch_backward_units), with
 * barriers inside; before it one when its ranges conflict with what the
 * batch did since the last one. */
static void record_activated(const rec *r, bool param, bool input)
{
	recorder *rc = r->rc;
	if (needs_barrier(rc, r->j, MASK_ALL)) {
		record_barrier_all(r->cb);
		new_epoch(rc);
		rc->untracked = false;
	}
	dispatch_backward_units(r, param, input);
	mark_touched(rc, r->j, MASK_ALL);
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
	const unsigned out_mask = job_mask(j, true);
	const unsigned in_mask = job_mask(j, false) | (j->req.accumulate ? out_mask : 0);
	if (needs_barrier(rc, j, MASK_ALL))
		record_barrier_all(r->cb);
	copy_tensors(r, in_mask, true);
	record_barrier_all(r->cb);
	new_epoch(rc);
	rc->untracked = false;
	if (rc->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, r->tg->queries, ts);
	const proto_tensor *t = j->req.t;
	if (j->req.op == PROTO_OP_LINEAR_FORWARD)
		dispatch_forward(r);
	else
		dispatch_backward_units(r, t[PROTO_T_DW].present || t[PROTO_T_DB].present,
					t[PROTO_T_DX].present);
	if (rc->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries, ts + 1);
	record_barrier_all(r->cb);
	new_epoch(rc);
	copy_tensors(r, out_mask, false);
	mark_touched(rc, r->j, out_mask);
}

/* A device tensor's op (job_is_copy): tensor_new's zero fill of y, or a
 * copy of x's bytes into y (tensor_write: client → tensor; tensor_read:
 * tensor → client), after a barrier when its ranges conflict with what
 * the batch did since the last one. */
#define MASK_COPY ((1u << PROTO_T_X) | (1u << PROTO_T_Y))
static void record_copy(const rec *r)
{
	recorder *rc = r->rc;
	const job *j = r->j;
	if (needs_barrier(rc, j, MASK_COPY)) {
		record_barrier_all(r->cb);
		new_epoch(rc);
		rc->untracked = false;
	}
	if (j->req.op == PROTO_OP_TENSOR_NEW) {
		/* the whole buffer, rounded to words (tensor.c) */
		vkCmdFillBuffer(r->cb, j->reg[PROTO_T_Y]->buf, 0, VK_WHOLE_SIZE, 0);
	} else {
		const VkBufferCopy c = {.srcOffset = j->req.t[PROTO_T_X].offset,
					.dstOffset = j->req.t[PROTO_T_Y].offset,
					.size = j->bytes[PROTO_T_Y]};
		vkCmdCopyBuffer(r->cb, j->reg[PROTO_T_X]->buf, j->reg[PROTO_T_Y]->buf, 1, &c);
	}
	mark_touched(rc, j, MASK_COPY);
}

/* One parameter of an optimizer step (job_is_optim): optim_step over it,
 * after a barrier when its ranges conflict with what the batch did since
 * the last one. */
static void record_optim(const rec *r)
{
	recorder *rc = r->rc;
	if (needs_barrier(rc, r->j, MASK_ALL)) {
		record_barrier_all(r->cb);
		new_epoch(rc);
		rc->untracked = false;
	}
	dispatch_optim(r);
	mark_touched(rc, r->j, MASK_ALL);
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
	rc->ops = (record_ops){.barrier_inside = barrier_inside, .bound_overlap = bound_overlap};
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

void record_set_copy_piece(recorder *rc, uint64_t bytes)
{
	rc->copy_piece = bytes;
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

/* Timestamp queries: the batch's two, then two per timed job. A
 * device-local job's bracket its dispatches between its copies
 * (record_devlocal). A job of GEMMs alone in its batch (ts_direct) gets
 * two where all the work recorded before has finished, before and after
 * its dispatches (record_batch): its kernel_us is then its dispatches'
 * time. Not where the batch has other jobs: a bottom-of-pipe timestamp
 * may keep the GPU from overlapping their dispatches, and that was not
 * measured; not in a sliced batch, which records the job in pieces. */
static uint32_t assign_queries(const record_target *tg)
{
	uint32_t nq = 2;
	for (uint32_t i = 0; i < tg->njobs; i++) {
		job *j = tg->jobs[i];
		j->ts_direct = tg->njobs == 1 && !j->devlocal && !job_is_copy(j) && !job_is_optim(j) &&
			       !tg->slice_len;
		if (j->devlocal || j->ts_direct)
			j->ts_index = (nq += 2) - 2;
	}
	return nq;
}

/* A direct job's timestamp: which = 0 before its dispatches, 1 after. */
static void direct_ts(const rec *r, uint32_t which)
{
	if (r->rc->dev->timestamps && r->j->ts_direct)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->tg->queries,
				    r->j->ts_index + which);
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

/* A job whose kernels read and write its tensors where they are (not
 * devlocal): its units, in the order that saves a pipeline bind. */
static void record_direct(const rec *r)
{
	const recorder *rc = r->rc;
	const proto_tensor *t = r->j->req.t;
	if (r->j->req.op == PROTO_OP_LINEAR_FORWARD) {
		record_forward(r);
		return;
	}
	const bool param = t[PROTO_T_DW].present || t[PROTO_T_DB].present;
	const bool input = t[PROTO_T_DX].present;
	if (r->j->req.activation != PROTO_ACT_NONE) {
		record_activated(r, param, input);
		return;
	}
	/* dX beside dW: one pass binding every tensor of both units,
	 * ordered (needs_barrier) against all of them */
	if (param && input && variant_dx_fused(&r->j->plan)) {
		record_unit(r, UNIT_BOTH);
		return;
	}
	/* dX after dW/db, a barrier between (the plan's `apart`) */
	if (param && input && r->j->plan.apart) {
		record_unit(r, UNIT_PARAM);
		barrier_inside(r);
		record_unit(r, UNIT_INPUT);
		return;
	}
	/* a job's two units are independent (proto_job_check: no output
	 * overlaps another tensor of the job), so either may go first:
	 * dX first when its kernel is the one bound (the previous job's
	 * last), which saves a pipeline bind per job in a run of jobs */
	if (param && input && rc->bound_pipe != VK_NULL_HANDLE &&
	    rc->bound_pipe == rc->pl->pipe[dispatch_unit_kernel(r->j, UNIT_INPUT)][r->j->req.dtype] &&
	    dispatch_unit_kernel(r->j, UNIT_PARAM) != dispatch_unit_kernel(r->j, UNIT_INPUT)) {
		record_unit(r, UNIT_INPUT);
		record_unit(r, UNIT_PARAM);
		return;
	}
	if (param)
		record_unit(r, UNIT_PARAM);
	if (input)
		record_unit(r, UNIT_INPUT);
}

VkResult record_batch(recorder *rc, const record_target *tg, record_counts *counts)
{
	VkCommandBuffer cb = tg->cb;
	memset(counts, 0, sizeof(*counts));
	rc->counts = (record_counts){0};
	rc->slice_from = tg->slice_from;
	rc->slice_len = tg->slice_len;
	rc->slice_pos = 0;
	grid_forget_bound(rc);
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
		if (job_is_optim(r.j)) {
			record_optim(&r);
			continue;
		}
		if (job_is_copy(r.j)) {
			record_copy(&r);
			continue;
		}
		if (r.j->devlocal) {
			record_devlocal(&r, r.j->ts_index);
			continue;
		}
		direct_ts(&r, 0);
		record_direct(&r);
		direct_ts(&r, 1);
	}
	record_end(rc, tg, nq);
	rc->slice_len = 0; /* the other entry points record whole kernels */
	*counts = rc->counts;
	return vkEndCommandBuffer(cb);
}
