/* daemon/sched/stream.c — see stream.h: the streams' objects, a streamed
 * job's steps recorded and submitted (how it is cut: stream_chunk.c). */
#include "stream.h"
#include "stream_priv.h"

#include "log.h"
#include "record.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;

uint32_t stream_queries(const engine *e)
{
	const device *d = e->dev;
	if (e->stream_chunk == CONFIG_OFF || !d->timestamps || !d->host_query_reset)
		return 0;
	return STREAM_TS_FIRST + 2 * STREAM_MAX_STEPS;
}

static uint32_t role_family(const device *d, int role)
{
	return role != ROLE_COMP && d->xfer_queues ? d->xfer_family : d->queue_family;
}

int stream_create(engine *e)
{
	const device *d = e->dev;
	if (e->stream_chunk == CONFIG_OFF)
		return 0;
	stream *st = calloc(1, sizeof(*st));
	if (!st)
		return -1;
	e->stream = st;
	st->nslots = e->nslots;
	st->cmds = calloc((size_t)e->nslots * ROLES, sizeof(*st->cmds));
	st->marks = calloc(e->nslots, sizeof(*st->marks));
	if (!st->cmds || !st->marks)
		return -1;
	st->no_sums = e->cfg->env.stream_no_sums;
	st->timed = stream_queries(e) > 0 && !e->cfg->env.stream_no_timestamps;
	log_info("streamed jobs: dW resumed chunk by chunk %s; otherwise equal chunks, dW after all of X; "
		 "per-step GPU timestamps %s",
		 st->no_sums ? "never (VKGRAD_STREAM_SUMS=0)" : "where its kernel can (tiled, coopmat_nv2)",
		 !st->timed ? "off (no timestamps, no host query reset, or VKGRAD_STREAM_TIMESTAMPS=0)"
		 : d->xfer_queues && !d->xfer_timestamps ? "on the compute queue only (the transfer family has none)"
							  : "on");
	st->queue[ROLE_COMP] = d->queue;
	st->queue[ROLE_UP] = d->xfer_queues ? d->xfer_up : d->queue;
	st->queue[ROLE_DOWN] = d->xfer_queues ? d->xfer_down : d->queue;
	for (int r = 0; r < ROLES; r++) {
		VkSemaphoreTypeCreateInfo stci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
						  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
		VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &stci};
		if (vkCreateSemaphore(d->dev, &sci, NULL, &st->sem[r]) != VK_SUCCESS)
			return -1;
	}
	for (uint32_t i = 0; i < e->nslots * ROLES; i++) {
		VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
						.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
						.queueFamilyIndex = role_family(d, (int)(i % ROLES))};
		if (vkCreateCommandPool(d->dev, &cpci, NULL, &st->cmds[i].pool) != VK_SUCCESS)
			return -1;
	}
	return 0;
}

void stream_release(engine *e)
{
	stream *st = e->stream;
	const device *d = e->dev;
	if (!st)
		return;
	for (uint32_t i = 0; st->cmds && i < st->nslots * ROLES; i++) {
		if (st->cmds[i].pool)
			vkDestroyCommandPool(d->dev, st->cmds[i].pool, NULL); /* frees its buffers */
		free(st->cmds[i].cb);
		free(st->cmds[i].step);
	}
	for (int r = 0; r < ROLES; r++)
		if (st->sem[r])
			vkDestroySemaphore(d->dev, st->sem[r], NULL);
	for (uint32_t i = 0; st->marks && i < st->nslots; i++)
		free(st->marks[i].m);
	free(st->marks);
	free(st->cmds);
	free(st->si);
	free(st->tsi);
	free(st);
	e->stream = NULL;
}

/* ---- recording --------------------------------------------------------------- */

/* What recording one streamed job needs. */
typedef struct srec {
	engine *e;
	recorder *rec;   /* the slot's track's */
	stream *st;
	uint32_t si;
	const record_target *tg; /* the slot's objects (record.h) */
	record_counts *counts;
	job *j;
	uint64_t es;     /* element size */
	VkResult err;    /* the first failure */
	VkCommandBuffer cb; /* the step being recorded */
	int role;
	int32_t mark;    /* the step's mark in the slot's marks, or -1: untimed */
} srec;

static stream_cmds *cmds_of(const srec *r, int role)
{
	return &r->st->cmds[r->si * ROLES + (uint32_t)role];
}

/* Does the queue of `role` write timestamps? */
static bool role_timed(const srec *r, int role)
{
	return r->st->timed && (role == ROLE_COMP || !r->e->dev->xfer_queues || r->e->dev->xfer_timestamps);
}

/* The step being begun is timed: a mark, its first timestamp (top of
 * pipe: when its queue reached it, its wait over; it may begin before the
 * step before it on its queue has ended, where no barrier orders them),
 * the second at its end (bottom of pipe: its commands and all before it
 * done). */
static void mark_begin(srec *r, int what, uint32_t index)
{
	stream_marks *ms = &r->st->marks[r->si];
	r->mark = -1;
	if (!role_timed(r, r->role) || ms->n >= STREAM_MAX_STEPS)
		return;
	if (ms->n == ms->cap) {
		const uint32_t cap = ms->cap ? ms->cap * 2 : 32;
		stream_mark *nm = realloc(ms->m, cap * sizeof(*nm));
		if (!nm)
			return; /* untimed; the timeline is dropped (stream_timeline) */
		ms->m = nm;
		ms->cap = cap;
	}
	const uint32_t q = STREAM_TS_FIRST + 2 * ms->n;
	ms->m[ms->n] = (stream_mark){.role = (uint8_t)r->role, .what = (uint8_t)what, .index = index, .q = q};
	r->mark = (int32_t)ms->n++;
	vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->tg->queries, q);
	r->counts->nqueries = q + 2;
}

/* Begin the next step of `role`, waiting for value `wait` of wait_role's
 * semaphore (wait_role < 0: nothing), timed as `what` number `index`;
 * r->cb is its command buffer, or NULL after a failure (r->err), every
 * later step then skipped. */
static void step_begin(srec *r, int role, int wait_role, uint64_t wait, int what, uint32_t index)
{
	r->cb = VK_NULL_HANDLE;
	r->role = role;
	r->mark = -1;
	if (r->err != VK_SUCCESS)
		return;
	stream_cmds *c = cmds_of(r, role);
	if (c->nstep == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 8;
		stream_step *ns = realloc(c->step, cap * sizeof(*ns));
		VkCommandBuffer *nc = ns ? realloc(c->cb, cap * sizeof(*nc)) : NULL;
		if (ns)
			c->step = ns;
		if (nc)
			c->cb = nc;
		if (!ns || !nc) {
			r->err = VK_ERROR_OUT_OF_HOST_MEMORY;
			return;
		}
		c->cap = cap;
	}
	if (c->nstep == c->ncb) {
		VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
						    .commandPool = c->pool,
						    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
						    .commandBufferCount = 1};
		r->err = vkAllocateCommandBuffers(r->e->dev->dev, &cbai, &c->cb[c->ncb]);
		if (r->err != VK_SUCCESS)
			return;
		c->ncb++;
	}
	stream_step *s = &c->step[c->nstep];
	s->cb = c->cb[c->nstep];
	s->wait_role = wait_role;
	s->wait = wait;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	r->err = vkBeginCommandBuffer(s->cb, &bi);
	if (r->err != VK_SUCCESS)
		return;
	r->cb = s->cb;
	mark_begin(r, what, index);
}

/* End the step begun last (its second timestamp once its commands are
 * done); returns the value it signals (0 after a failure). */
static uint64_t step_end(srec *r)
{
	if (!r->cb)
		return 0;
	if (r->mark >= 0)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->tg->queries,
				    r->st->marks[r->si].m[r->mark].q + 1);
	stream_cmds *c = cmds_of(r, r->role);
	r->err = vkEndCommandBuffer(r->cb);
	r->cb = VK_NULL_HANDLE;
	if (r->err != VK_SUCCESS)
		return 0;
	stream_step *s = &c->step[c->nstep++];
	s->signal = ++r->st->value[r->role];
	return s->signal;
}

/* Copies written for the host (the client's mapping) once they finish. */
static void barrier_host(VkCommandBuffer cb, VkPipelineStageFlags src)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
	if (src == VK_PIPELINE_STAGE_TRANSFER_BIT)
		mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
	vkCmdPipelineBarrier(cb, src, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Rows [r0, r0+rows) of tensor t (row length `row` elements) between the
 * client's buffer and the job's scratch copy, into the current step. */
static void copy_rows(srec *r, int t, uint64_t row, uint64_t r0, uint64_t rows, bool in)
{
	const job *j = r->j;
	if (!r->cb || !j->req.t[t].present || rows == 0)
		return;
	const uint64_t off = r0 * row * r->es, size = rows * row * r->es;
	VkBufferCopy c = {.srcOffset = (in ? j->req.t[t].offset : j->soff[t]) + off,
			  .dstOffset = (in ? j->soff[t] : j->req.t[t].offset) + off, .size = size};
	VkBuffer scratch = r->tg->scratch;
	if (in)
		vkCmdCopyBuffer(r->cb, j->reg[t]->buf, scratch, 1, &c);
	else
		vkCmdCopyBuffer(r->cb, scratch, j->reg[t]->buf, 1, &c);
	r->counts->copy_bytes += size;
}

/* A whole tensor: its rows are the batch (dY, X, dX) or it is one row (W,
 * dW, db). */
static void copy_whole(srec *r, int t, bool in)
{
	copy_rows(r, t, r->j->bytes[t] / r->es, 0, 1, in);
}

/* The first upload step: W (W named without dX is not read: not copied)
 * and, accumulating, the old dW and db. */
static void record_up_w(srec *r, int up_wait, uint64_t head)
{
	const proto_request *q = &r->j->req;
	step_begin(r, ROLE_UP, up_wait, head, MARK_UP_W, 0);
	if (q->t[PROTO_T_DX].present)
		copy_whole(r, PROTO_T_W, true);
	if (q->accumulate) {
		copy_whole(r, PROTO_T_DW, true);
		copy_whole(r, PROTO_T_DB, true);
	}
	step_end(r);
}

/* A download step after value comp of the compute role, timed as `what`
 * number `index`: rows [r0, r0+len) of dX or dW (t; rows of `in`
 * elements either way), and db where `db`, visible to the host after. */
static void record_down(srec *r, uint64_t comp, int what, uint32_t index, int t, uint64_t r0, uint64_t len,
			bool db)
{
	assert(t == PROTO_T_DX || t == PROTO_T_DW);
	step_begin(r, ROLE_DOWN, ROLE_COMP, comp, what, index);
	copy_rows(r, t, r->j->req.in, r0, len, false);
	if (db)
		copy_whole(r, PROTO_T_DB, false);
	if (r->cb)
		barrier_host(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT);
	step_end(r);
}

/* The job's kernel span (kernel_us) begins: its first timestamp, before
 * its first kernel. */
static void kernel_ts_first(srec *r, bool first)
{
	if (first && r->e->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->tg->queries, r->j->ts_index);
}

/* The compute step of dX's chunk n, rows [r0, r0+rows), after its upload `up`. */
static uint64_t record_dx_chunk(srec *r, uint64_t up, uint32_t n, uint64_t r0, uint64_t rows, bool first,
				bool last)
{
	job c;
	stream_chunk_job(r->j, &c, r->es, r0, rows);
	step_begin(r, ROLE_COMP, ROLE_UP, up, MARK_DX, n);
	if (!r->cb)
		return 0;
	/* after everything before it, resumed dW or not. Chunks write their own
	 * rows of dX and share no bytes, but a kernel step still running
	 * beside the next one may read a cache line that holds the next
	 * chunk's first rows of dY (or dX, accumulating) from before that
	 * chunk's upload, and leave it where the next step's reads find it:
	 * without this barrier (a schedule since deleted had none) two accumulating jobs in
	 * flight gave other dX bits than unstreamed in four of four H200 runs
	 * of test_stream (1-row chunks; rows 23-24 of 45 in one, row 42 in
	 * another), on the session's start build too. */
	record_barrier_all(r->cb);
	kernel_ts_first(r, first);
	record_job_kernels(r->rec, r->tg, r->cb, &c, false, true, r->counts);
	if (last && r->e->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries, r->j->ts_index + 1);
	return step_end(r);
}

/* head: the batch's queries reset (the streamed steps' own are reset on
 * the host, stream_record: uploads may run before the head), the batch's
 * first timestamp, after earlier batches */
static uint64_t record_head(srec *r)
{
	step_begin(r, ROLE_COMP, -1, 0, MARK_HEAD, 0);
	if (!r->cb)
		return 0;
	record_barrier_all(r->cb);
	if (r->e->dev->timestamps) {
		vkCmdResetQueryPool(r->cb, r->tg->queries, 0, STREAM_TS_FIRST);
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->tg->queries, 0);
	}
	return step_end(r);
}

/* The tail in the slot's own command buffer: the batch's last timestamp,
 * the timestamps copied out, everything visible to the host. */
static void record_tail(srec *r)
{
	if (r->err != VK_SUCCESS)
		return;
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	r->err = vkBeginCommandBuffer(r->tg->cb, &bi);
	if (r->err != VK_SUCCESS)
		return;
	barrier_host(r->tg->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
	if (r->e->dev->timestamps) {
		vkCmdWriteTimestamp(r->tg->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->tg->queries, 1);
		vkCmdCopyQueryPoolResults(r->tg->cb, r->tg->queries, 0, r->counts->nqueries, r->tg->ts_buf,
					  0, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
		barrier_host(r->tg->cb, VK_PIPELINE_STAGE_TRANSFER_BIT);
	}
	r->err = vkEndCommandBuffer(r->tg->cb);
}

/* dW/db after all of X (upload value up_x) and dY: in row blocks, each
 * downloaded on the download queue while the next computes; db with the
 * last block. `first`: no dX chunk wrote the kernel span's first
 * timestamp. */
static void record_param(srec *r, uint64_t up_x, bool first)
{
	const proto_request *q = &r->j->req;
	const uint64_t block = stream_dw_block_rows(r->e, r->j);
	uint32_t b = 0;
	for (uint64_t r0 = 0; r0 < q->out; r0 += block, b++) {
		const uint64_t len = q->out - r0 < block ? q->out - r0 : block;
		const bool last = r0 + len >= q->out;
		step_begin(r, ROLE_COMP, ROLE_UP, up_x, MARK_DW, b);
		r->e->stream_dw_blocks++;
		if (r->cb) {
			record_barrier_all(r->cb);
			kernel_ts_first(r, first && r0 == 0);
			if (block == q->out)
				record_job_kernels(r->rec, r->tg, r->cb, r->j, true, false, r->counts);
			else
				record_job_param_part(r->rec, r->tg, r->cb, r->j, 0, r0, len, r->counts);
			if (last && r->e->dev->timestamps)
				vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries,
						    r->j->ts_index + 1);
		}
		record_down(r, step_end(r), MARK_DOWN_DW, b, PROTO_T_DW, r0, len, last);
	}
}

/* The dW/db step of chunk n, rows [r0, r0+rows), after its upload `up`:
 * the running sums resumed (all but the first chunk) and left for the next
 * (all but the last, which writes dW and db as the unchunked kernels do).
 * `first`: the kernel span's first timestamp is this step's. The last
 * chunk's step covers dW's rows [d0, d0+dn) alone (dn 0: all): its row
 * blocks go back one by one (record_steps_sums). */
static uint64_t record_dw_chunk(srec *r, uint64_t up, uint32_t n, uint64_t r0, uint64_t rows, bool first,
				bool last, uint64_t d0, uint64_t dn, bool end)
{
	job c;
	stream_chunk_param_job(r->j, &c, r->es, r0, rows);
	step_begin(r, ROLE_COMP, ROLE_UP, up, MARK_DW_CHUNK, n);
	r->e->stream_dw_blocks++;
	if (!r->cb)
		return 0;
	/* after the chunk before it, which wrote the sums this one reads
	 * (a row block after the one before: no bytes shared, none needed) */
	if (d0 == 0)
		record_barrier_all(r->cb);
	kernel_ts_first(r, first && d0 == 0);
	const uint32_t sums = (r0 ? VKG_FLAG_SUMS_IN : 0u) | (last ? 0u : VKG_FLAG_SUMS_OUT);
	record_job_param_part(r->rec, r->tg, r->cb, &c, sums, d0, dn, r->counts);
	if (end && r->e->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries, r->j->ts_index + 1);
	return step_end(r);
}

/* The last chunk's dW/db steps, rows [r0, r0+len) of the batch: dW's row
 * blocks (stream_last_block_rows), each downloaded after its own kernels, db with
 * the last. */
static void record_last_dw(srec *r, uint64_t up, uint32_t n, uint64_t r0, uint64_t len, bool first)
{
	const uint64_t out = r->j->req.out, block = stream_last_block_rows(r->e, r->j);
	uint32_t b = 0;
	for (uint64_t d0 = 0; d0 < out; d0 += block, b++) {
		const uint64_t dn = out - d0 < block ? out - d0 : block;
		const bool end = d0 + dn >= out;
		const uint64_t comp = record_dw_chunk(r, up, n, r0, len, first, true, d0, block == out ? 0 : dn, end);
		record_down(r, comp, MARK_DOWN_DW, b, PROTO_T_DW, d0, dn, end);
	}
}

/* The steps of a job whose dW resumes (j->sums, stream.h): W in first,
 * then per chunk dY's and X's rows; its dX kernels and download, then its
 * dW/db kernels (they resume the sums the chunk before left); dW and db
 * back after the last chunk. */
static void record_steps_sums(srec *r, int up_wait, uint64_t head)
{
	const proto_request *q = &r->j->req;
	const bool dx = q->t[PROTO_T_DX].present;
	const uint64_t rows = stream_sums_rows(r->e, r->j);
	record_up_w(r, up_wait, head);
	uint32_t n = 0;
	for (uint64_t r0 = 0; r0 < q->batch; n++) {
		const uint64_t len = q->batch - r0 < rows ? q->batch - r0 : rows;
		const bool last = r0 + len >= q->batch;
		step_begin(r, ROLE_UP, up_wait, head, MARK_UP_CHUNK, n);
		copy_rows(r, PROTO_T_DY, q->out, r0, len, true);
		copy_rows(r, PROTO_T_X, q->in, r0, len, true);
		if (q->accumulate)
			copy_rows(r, PROTO_T_DX, q->in, r0, len, true);
		const uint64_t up = step_end(r);
		if (dx) {
			const uint64_t cx = record_dx_chunk(r, up, n, r0, len, r0 == 0, false);
			record_down(r, cx, MARK_DOWN_DX, n, PROTO_T_DX, r0, len, false);
		}
		if (!last)
			record_dw_chunk(r, up, n, r0, len, !dx && r0 == 0, false, 0, 0, false);
		else /* in row blocks, each going back while the next computes */
			record_last_dw(r, up, n, r0, len, !dx && r0 == 0);
		r0 += len;
	}
	r->e->stream_chunks += n;
}

/* The three roles' steps (stream.h's table), in an order where every wait
 * is on a step recorded before it. */
static void record_steps(srec *r)
{
	const proto_request *q = &r->j->req;
	const bool dx = q->t[PROTO_T_DX].present;
	const bool param = q->t[PROTO_T_DW].present || q->t[PROTO_T_DB].present;
	const uint64_t rows = stream_job_rows(r->e, r->j);
	/* the uploads wait for the head, which comes after every earlier
	 * batch on the compute queue, when one of those still running touches
	 * this job's regions (it may write what is read here, or read what is
	 * written); each upload waits, not only the first: a wait orders its
	 * own batch. Otherwise they start at once, beside earlier batches. */
	bool after = false;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		after |= r->j->reg[t] && r->j->reg[t]->inflight;
	const uint64_t head = record_head(r);
	const int up_wait = after ? ROLE_COMP : -1;
	if (r->j->sums) {
		record_steps_sums(r, up_wait, head);
		return;
	}
	record_up_w(r, up_wait, head);
	uint32_t n = 0;
	for (uint64_t r0 = 0; r0 < q->batch; n++) {
		const uint64_t len = q->batch - r0 < rows ? q->batch - r0 : rows;
		step_begin(r, ROLE_UP, up_wait, head, MARK_UP_CHUNK, n);
		copy_rows(r, PROTO_T_DY, q->out, r0, len, true);
		if (q->accumulate)
			copy_rows(r, PROTO_T_DX, q->in, r0, len, true);
		const uint64_t up = step_end(r);
		if (dx) {
			const uint64_t comp = record_dx_chunk(r, up, n, r0, len, r0 == 0, !param && r0 + len >= q->batch);
			record_down(r, comp, MARK_DOWN_DX, n, PROTO_T_DX, r0, len, false);
		}
		r0 += len;
	}
	r->e->stream_chunks += n;
	step_begin(r, ROLE_UP, up_wait, head, MARK_UP_X, 0);
	if (param)
		copy_whole(r, PROTO_T_X, true);
	const uint64_t up_x = step_end(r);
	if (param)
		record_param(r, up_x, !dx);
	/* the tail waits for the download role's last value */
}

VkResult stream_record(engine *e, uint32_t si, const record_target *tg, record_counts *counts)
{
	assert(e->stream && tg->njobs == 1 && tg->jobs[0]->streamed);
	memset(counts, 0, sizeof(*counts));
	srec r = {.e = e, .rec = e->track[e->slots[si].cls].rec, .st = e->stream, .si = si, .tg = tg, .counts = counts, .j = tg->jobs[0],
		  .es = proto_dtype_size(tg->jobs[0]->req.dtype)};
	vkResetCommandPool(e->dev->dev, tg->pool, 0);
	for (int role = 0; role < ROLES; role++) {
		stream_cmds *c = cmds_of(&r, role);
		vkResetCommandPool(e->dev->dev, c->pool, 0);
		c->nstep = 0;
	}
	/* queries: the batch's two, the job's two (its kernels' span), then
	 * two per timed step, reset here: the slot's last batch is done with
	 * them, and the uploads may start before the head */
	counts->nqueries = STREAM_TS_FIRST;
	r.j->ts_index = 2;
	e->stream->marks[si].n = 0;
	if (e->stream->timed)
		vkResetQueryPool(e->dev->dev, tg->queries, STREAM_TS_FIRST, 2 * STREAM_MAX_STEPS);
	e->stream_jobs++;
	record_steps(&r);
	record_tail(&r);
	return r.err;
}

/* ---- submission -------------------------------------------------------------- */

/* Room for n batches in one vkQueueSubmit. */
static int submit_room(stream *st, uint32_t n)
{
	if (n <= st->nsi)
		return 0;
	VkSubmitInfo *si = realloc(st->si, n * sizeof(*si));
	if (si)
		st->si = si;
	VkTimelineSemaphoreSubmitInfo *tsi = si ? realloc(st->tsi, n * sizeof(*tsi)) : NULL;
	if (tsi)
		st->tsi = tsi;
	if (!si || !tsi)
		return -1;
	st->nsi = n;
	return 0;
}

/* One role's steps of slot si as one vkQueueSubmit. */
static VkResult submit_role(engine *e, uint32_t si, int role, uint32_t from, uint32_t to)
{
	stream *st = e->stream;
	stream_cmds *c = &st->cmds[si * ROLES + (uint32_t)role];
	if (from >= to)
		return VK_SUCCESS;
	if (submit_room(st, to - from) != 0)
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	for (uint32_t i = from; i < to; i++) {
		const stream_step *p = &c->step[i];
		const bool w = p->wait_role >= 0;
		st->tsi[i - from] = (VkTimelineSemaphoreSubmitInfo){
			.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
			.waitSemaphoreValueCount = w, .pWaitSemaphoreValues = &p->wait,
			.signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &p->signal};
		st->si[i - from] = (VkSubmitInfo){
			.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &st->tsi[i - from],
			.waitSemaphoreCount = w, .pWaitSemaphores = w ? &st->sem[p->wait_role] : NULL,
			.pWaitDstStageMask = &wait_stage,
			.commandBufferCount = 1, .pCommandBuffers = &p->cb,
			.signalSemaphoreCount = 1, .pSignalSemaphores = &st->sem[role]};
	}
	return vkQueueSubmit(st->queue[role], to - from, st->si, VK_NULL_HANDLE);
}

VkResult stream_submit(engine *e, uint32_t si)
{
	stream *st = e->stream;
	engine_slot *s = &e->slots[si];
	const stream_cmds *down = &st->cmds[si * ROLES + ROLE_DOWN];
	const uint32_t ncomp = st->cmds[si * ROLES + ROLE_COMP].nstep;
	/* the head, every upload, the compute steps, every download: each
	 * waits only on what went before */
	VkResult r = submit_role(e, si, ROLE_COMP, 0, 1);
	if (r == VK_SUCCESS)
		r = submit_role(e, si, ROLE_UP, 0, st->cmds[si * ROLES + ROLE_UP].nstep);
	if (r == VK_SUCCESS)
		r = submit_role(e, si, ROLE_COMP, 1, ncomp);
	if (r == VK_SUCCESS)
		r = submit_role(e, si, ROLE_DOWN, 0, down->nstep);
	if (r != VK_SUCCESS)
		return r;
	/* the tail: after the last download, signalling the engine's value */
	const uint64_t wait = down->nstep ? down->step[down->nstep - 1].signal : 0;
	VkTimelineSemaphoreSubmitInfo tsi = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &wait,
		.signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &s->value};
	VkSubmitInfo sub = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi,
		.waitSemaphoreCount = 1, .pWaitSemaphores = &st->sem[ROLE_DOWN],
		.pWaitDstStageMask = &wait_stage,
		.commandBufferCount = 1, .pCommandBuffers = &s->cb,
		.signalSemaphoreCount = 1, .pSignalSemaphores = &e->track[s->cls].timeline};
	return vkQueueSubmit(e->track[s->cls].queue, 1, &sub, VK_NULL_HANDLE);
}
