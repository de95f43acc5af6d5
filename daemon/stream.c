/* daemon/stream.c — see stream.h. */
#include "stream.h"

#include "log.h"
#include "record.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { ROLE_UP, ROLE_COMP, ROLE_DOWN, ROLES };

/* One submission of a role: its command buffer, the value of another
 * role's semaphore it waits for (wait_role < 0: none) and the value it
 * signals on its own role's semaphore. */
typedef struct stream_step {
	VkCommandBuffer cb;
	int wait_role;
	uint64_t wait, signal;
} stream_step;

/* A slot's command buffers and steps of one role. */
typedef struct stream_cmds {
	VkCommandPool pool;
	VkCommandBuffer *cb; /* allocated from pool; reused batch after batch */
	uint32_t ncb;
	stream_step *step;   /* recorded for the slot's batch; step[i].cb = cb[i] */
	uint32_t nstep, cap;
} stream_cmds;

struct stream {
	VkSemaphore sem[ROLES];
	uint64_t value[ROLES]; /* last value given out per role */
	VkQueue queue[ROLES];
	stream_cmds *cmds;     /* [slot * ROLES + role] */
	uint32_t nslots;
	/* one vkQueueSubmit's batches, reused */
	VkSubmitInfo *si;
	VkTimelineSemaphoreSubmitInfo *tsi;
	uint32_t nsi;
};

static const VkPipelineStageFlags wait_stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;

void stream_init(engine *e)
{
	const config *cfg = e->cfg;
	const device *d = e->dev;
	e->stream_chunk = cfg->stream_chunk_bytes;
	if (e->stream_chunk == CONFIG_AUTO)
		e->stream_chunk = d->xfer_queues ? CONFIG_STREAM_AUTO_CHUNK : CONFIG_OFF;
	e->stream_min = cfg->stream_min_bytes == CONFIG_AUTO ? CONFIG_STREAM_AUTO_MIN : cfg->stream_min_bytes;
	if (e->stream_chunk == CONFIG_OFF)
		log_info("streamed jobs off%s", cfg->stream_chunk_bytes == CONFIG_AUTO
							  ? " (no transfer-only queue to overlap copies on)" : "");
	else
		log_info("streamed jobs: device-local jobs of >= %llu tensor bytes in chunks of ~%llu "
			 "bytes of dY, copies on %s",
			 (unsigned long long)e->stream_min, (unsigned long long)e->stream_chunk,
			 d->xfer_queues == 2 ? "two transfer queues (in and out at once)"
			 : d->xfer_queues ? "one transfer queue" : "the compute queue (no overlap)");
}

bool stream_wants(const engine *e, const job *j)
{
	return e->stream && j->devlocal && e->stream_chunk != CONFIG_OFF &&
	       job_bytes(j) >= e->stream_min;
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
	if (!st->cmds)
		return -1;
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
	stream *st;
	uint32_t si;
	const record_target *tg; /* the slot's objects (record.h) */
	record_counts *counts;
	job *j;
	uint64_t es;     /* element size */
	VkResult err;    /* the first failure */
	VkCommandBuffer cb; /* the step being recorded */
	int role;
} srec;

static stream_cmds *cmds_of(const srec *r, int role)
{
	return &r->st->cmds[r->si * ROLES + (uint32_t)role];
}

/* Begin the next step of `role`, waiting for value `wait` of wait_role's
 * semaphore (wait_role < 0: nothing); r->cb is its command buffer, or NULL
 * after a failure (r->err), every later step then skipped. */
static void step_begin(srec *r, int role, int wait_role, uint64_t wait)
{
	r->cb = VK_NULL_HANDLE;
	r->role = role;
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
	if (r->err == VK_SUCCESS)
		r->cb = s->cb;
}

/* End the step begun last; returns the value it signals (0 after a failure). */
static uint64_t step_end(srec *r)
{
	if (!r->cb)
		return 0;
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

/* The job as its rows [r0, r0+rows) for dX: dY's and dX's rows alone. */
static void chunk_job(const job *j, job *c, uint64_t es, uint64_t r0, uint64_t rows)
{
	*c = *j;
	c->req.batch = rows;
	c->req.t[PROTO_T_DW].present = c->req.t[PROTO_T_DB].present = false;
	c->soff[PROTO_T_DY] += r0 * j->req.out * es;
	c->bytes[PROTO_T_DY] = rows * j->req.out * es;
	c->soff[PROTO_T_DX] += r0 * j->req.in * es;
	c->bytes[PROTO_T_DX] = rows * j->req.in * es;
}

/* The compute step of dX's chunk [r0, r0+rows), after its upload `up`. */
static uint64_t record_dx_chunk(srec *r, uint64_t up, uint64_t r0, uint64_t rows, bool first, bool last)
{
	job c;
	chunk_job(r->j, &c, r->es, r0, rows);
	step_begin(r, ROLE_COMP, ROLE_UP, up);
	if (!r->cb)
		return 0;
	record_barrier_all(r->cb); /* after the chunk before it (split-K partials are shared) */
	if (first && r->e->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->tg->queries, r->j->ts_index);
	record_job_kernels(r->e->rec, r->tg, r->cb, &c, false, true, r->counts);
	if (last && r->e->dev->timestamps)
		vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries, r->j->ts_index + 1);
	return step_end(r);
}

/* head: queries reset, the batch's first timestamp, after earlier batches */
static uint64_t record_head(srec *r)
{
	step_begin(r, ROLE_COMP, -1, 0);
	if (!r->cb)
		return 0;
	record_barrier_all(r->cb);
	if (r->e->dev->timestamps) {
		vkCmdResetQueryPool(r->cb, r->tg->queries, 0, r->counts->nqueries);
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

/* Rows per chunk: about stream_chunk bytes of dY, at most STREAM_MAX_CHUNKS
 * chunks; the whole batch when dX is not asked for (nothing to overlap). */
static uint64_t chunk_rows(const engine *e, const job *j, uint64_t es)
{
	const proto_request *q = &j->req;
	if (!q->t[PROTO_T_DX].present)
		return q->batch;
	uint64_t rows = e->stream_chunk / (q->out * es);
	if (rows == 0)
		rows = 1;
	const uint64_t least = (q->batch + STREAM_MAX_CHUNKS - 1) / STREAM_MAX_CHUNKS;
	return rows < least ? least : rows;
}

/* The three roles' steps (stream.h's table), in an order where every wait
 * is on a step recorded before it. */
static void record_steps(srec *r)
{
	const proto_request *q = &r->j->req;
	const bool dx = q->t[PROTO_T_DX].present;
	const bool param = q->t[PROTO_T_DW].present || q->t[PROTO_T_DB].present;
	const uint64_t rows = chunk_rows(r->e, r->j, r->es);
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
	step_begin(r, ROLE_UP, up_wait, head);
	if (dx) /* (W named without dX, or X without dW/db, is not read: not copied) */
		copy_whole(r, PROTO_T_W, true);
	if (q->accumulate) {
		copy_whole(r, PROTO_T_DW, true);
		copy_whole(r, PROTO_T_DB, true);
	}
	step_end(r);
	uint64_t last_down = 0, n = 0;
	for (uint64_t r0 = 0; r0 < q->batch; r0 += rows, n++) {
		const uint64_t len = q->batch - r0 < rows ? q->batch - r0 : rows;
		step_begin(r, ROLE_UP, up_wait, head);
		copy_rows(r, PROTO_T_DY, q->out, r0, len, true);
		if (q->accumulate)
			copy_rows(r, PROTO_T_DX, q->in, r0, len, true);
		const uint64_t up = step_end(r);
		if (!dx)
			continue;
		const uint64_t comp = record_dx_chunk(r, up, r0, len, r0 == 0, !param && r0 + len >= q->batch);
		step_begin(r, ROLE_DOWN, ROLE_COMP, comp);
		copy_rows(r, PROTO_T_DX, q->in, r0, len, false);
		if (r->cb)
			barrier_host(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT);
		last_down = step_end(r);
	}
	r->e->stream_chunks += n;
	step_begin(r, ROLE_UP, up_wait, head);
	if (param)
		copy_whole(r, PROTO_T_X, true);
	const uint64_t up_x = step_end(r);
	if (param) {
		step_begin(r, ROLE_COMP, ROLE_UP, up_x);
		if (r->cb) {
			record_barrier_all(r->cb);
			if (!dx && r->e->dev->timestamps)
				vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->tg->queries,
						    r->j->ts_index);
			record_job_kernels(r->e->rec, r->tg, r->cb, r->j, true, false, r->counts);
			if (r->e->dev->timestamps)
				vkCmdWriteTimestamp(r->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, r->tg->queries,
						    r->j->ts_index + 1);
		}
		const uint64_t comp = step_end(r);
		step_begin(r, ROLE_DOWN, ROLE_COMP, comp);
		copy_whole(r, PROTO_T_DW, false);
		copy_whole(r, PROTO_T_DB, false);
		if (r->cb)
			barrier_host(r->cb, VK_PIPELINE_STAGE_TRANSFER_BIT);
		last_down = step_end(r);
	}
	(void)last_down; /* the tail waits for the download role's last value */
}

VkResult stream_record(engine *e, uint32_t si, const record_target *tg, record_counts *counts)
{
	assert(e->stream && tg->njobs == 1 && tg->jobs[0]->streamed);
	memset(counts, 0, sizeof(*counts));
	srec r = {.e = e, .st = e->stream, .si = si, .tg = tg, .counts = counts, .j = tg->jobs[0],
		  .es = proto_dtype_size(tg->jobs[0]->req.dtype)};
	vkResetCommandPool(e->dev->dev, tg->pool, 0);
	for (int role = 0; role < ROLES; role++) {
		stream_cmds *c = cmds_of(&r, role);
		vkResetCommandPool(e->dev->dev, c->pool, 0);
		c->nstep = 0;
	}
	/* queries: the batch's two, the job's two (its kernels' span) */
	counts->nqueries = 4;
	r.j->ts_index = 2;
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
		.signalSemaphoreCount = 1, .pSignalSemaphores = &e->timeline};
	return vkQueueSubmit(e->dev->queue, 1, &sub, VK_NULL_HANDLE);
}
