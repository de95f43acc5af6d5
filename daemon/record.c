/* daemon/record.c — how a batch becomes a command buffer: tensors bound as
 * push descriptors, the kernel each part of a job runs (daemon/variant.h),
 * and barriers only where one dispatch's bound bytes conflict with an
 * earlier one's since the last barrier. */
#include "record.h"

#include "variant.h"

#include <stdlib.h>
#include <string.h>

static bool is_output(int t)
{
	return engine_is_output(t);
}

typedef struct binding {
	VkDescriptorBufferInfo info;
	uint32_t elem_off;
} binding;

/* Bind a tensor from the aligned-down offset so any offset that is a multiple
 * of the element size works; the remainder goes to the shader as elements. */
static binding bind_tensor(const engine *e, const job *j, int t)
{
	const VkDeviceSize align = e->dev->props.limits.minStorageBufferOffsetAlignment;
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
static binding bind_dummy(const engine *e, uint64_t piece)
{
	binding b = {.info = {.buffer = e->dummy, .offset = piece * e->dummy_piece,
			      .range = e->dummy_piece}};
	return b;
}

static void push_set(const engine *e, VkCommandBuffer cb, int k, const binding *b, uint32_t n)
{
	VkWriteDescriptorSet w[4];
	for (uint32_t i = 0; i < n; i++)
		w[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstBinding = i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &b[i].info,
		};
	e->dev->cmd_push_descriptor_set(cb, VK_PIPELINE_BIND_POINT_COMPUTE, e->pl->layout[k], 0, n, w);
}

static void barrier(VkCommandBuffer cb, VkPipelineStageFlags src, VkAccessFlags sa,
		    VkPipelineStageFlags dst, VkAccessFlags da)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = sa, .dstAccessMask = da};
	vkCmdPipelineBarrier(cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void record_param(engine *e, VkCommandBuffer cb, const job *j, uint64_t piece)
{
	const proto_request *q = &j->req;
	const uint32_t max_y = e->dev->props.limits.maxComputeWorkGroupCount[1];
	const uint32_t acc = q->accumulate ? 4u : 0u;
	binding b[4] = {
		bind_tensor(e, j, PROTO_T_X),
		bind_tensor(e, j, PROTO_T_DY),
		q->t[PROTO_T_DW].present ? bind_tensor(e, j, PROTO_T_DW) : bind_dummy(e, 3 * piece),
		q->t[PROTO_T_DB].present ? bind_tensor(e, j, PROTO_T_DB) : bind_dummy(e, 3 * piece + 1),
	};
	vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, e->pl->pipe[KERN_PARAM][q->dtype]);
	push_set(e, cb, KERN_PARAM, b, 4);
	uint32_t pc[9] = {(uint32_t)q->batch, (uint32_t)q->in, (uint32_t)q->out,
			  b[0].elem_off, b[1].elem_off, b[2].elem_off, b[3].elem_off,
			  (q->t[PROTO_T_DW].present ? 1u : 0u) | (q->t[PROTO_T_DB].present ? 2u : 0u) | acc,
			  0};
	uint32_t gx = q->t[PROTO_T_DW].present ? (uint32_t)((q->in + 31) / 32) : 1;
	for (uint64_t o = 0; o < q->out; o += max_y) {
		pc[8] = (uint32_t)o;
		vkCmdPushConstants(cb, e->pl->layout[KERN_PARAM], VK_SHADER_STAGE_COMPUTE_BIT, 0,
				   sizeof(pc), pc);
		uint64_t gy = q->out - o < max_y ? q->out - o : max_y;
		vkCmdDispatch(cb, gx, (uint32_t)gy, 1);
	}
}

/* linear_tiled_gemm for dW (+ fused db) or for dX; see the shader. */
static void record_tiled(engine *e, VkCommandBuffer cb, const job *j, bool for_dx, uint64_t piece)
{
	const proto_request *q = &j->req;
	const uint32_t max_y = e->dev->props.limits.maxComputeWorkGroupCount[1];
	const uint32_t acc = q->accumulate ? 4u : 0u;
	binding b[4];
	uint32_t pc[12];
	uint64_t m, n;
	if (!for_dx) {
		const bool dw = q->t[PROTO_T_DW].present, db = q->t[PROTO_T_DB].present;
		b[0] = bind_tensor(e, j, PROTO_T_DY);
		b[1] = bind_tensor(e, j, PROTO_T_X);
		b[2] = dw ? bind_tensor(e, j, PROTO_T_DW) : bind_dummy(e, 3 * piece);
		b[3] = db ? bind_tensor(e, j, PROTO_T_DB) : bind_dummy(e, 3 * piece + 1);
		m = q->out, n = dw ? q->in : 1;
		uint32_t init[12] = {(uint32_t)q->out, (uint32_t)q->in, (uint32_t)q->batch,
				     b[0].elem_off, b[1].elem_off, b[2].elem_off, b[3].elem_off,
				     1, (uint32_t)q->out, (dw ? 1u : 0u) | (db ? 2u : 0u) | acc, 0};
		memcpy(pc, init, sizeof(pc));
	} else {
		b[0] = bind_tensor(e, j, PROTO_T_DY);
		b[1] = bind_tensor(e, j, PROTO_T_W);
		b[2] = bind_tensor(e, j, PROTO_T_DX);
		b[3] = bind_dummy(e, 3 * piece + 2);
		m = q->batch, n = q->in;
		uint32_t init[12] = {(uint32_t)q->batch, (uint32_t)q->in, (uint32_t)q->out,
				     b[0].elem_off, b[1].elem_off, b[2].elem_off, 0,
				     (uint32_t)q->out, 1, 1u | acc, 0};
		memcpy(pc, init, sizeof(pc));
	}
	vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, e->pl->pipe[KERN_TILED][q->dtype]);
	push_set(e, cb, KERN_TILED, b, 4);
	const uint32_t gx = (uint32_t)((n + 63) / 64);
	const uint64_t rows = (m + 63) / 64;
	for (uint64_t y = 0; y < rows; y += max_y) {
		pc[11] = (uint32_t)y;
		vkCmdPushConstants(cb, e->pl->layout[KERN_TILED], VK_SHADER_STAGE_COMPUTE_BIT, 0,
				   sizeof(pc), pc);
		vkCmdDispatch(cb, gx, (uint32_t)(rows - y < max_y ? rows - y : max_y), 1);
	}
}

static void record_input(engine *e, VkCommandBuffer cb, const job *j)
{
	const proto_request *q = &j->req;
	const uint32_t max_y = e->dev->props.limits.maxComputeWorkGroupCount[1];
	const uint32_t acc = q->accumulate ? 4u : 0u;
	binding b[3] = {bind_tensor(e, j, PROTO_T_DY), bind_tensor(e, j, PROTO_T_W),
			bind_tensor(e, j, PROTO_T_DX)};
	vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, e->pl->pipe[KERN_INPUT][q->dtype]);
	push_set(e, cb, KERN_INPUT, b, 3);
	uint32_t pc[8] = {(uint32_t)q->batch, (uint32_t)q->in, (uint32_t)q->out, b[0].elem_off,
			  b[1].elem_off, b[2].elem_off, acc, 0};
	uint32_t gx = (uint32_t)((q->in + 15) / 16);
	uint64_t rows = (q->batch + 15) / 16;
	for (uint64_t y = 0; y < rows; y += max_y) {
		pc[7] = (uint32_t)(y * 16);
		vkCmdPushConstants(cb, e->pl->layout[KERN_INPUT], VK_SHADER_STAGE_COMPUTE_BIT, 0,
				   sizeof(pc), pc);
		uint64_t gy = rows - y < max_y ? rows - y : max_y;
		vkCmdDispatch(cb, gx, (uint32_t)gy, 1);
	}
}

/* The bytes a dispatch binds for tensor t: from the offset aligned down as
 * bind_tensor() binds it, to the tensor's end. */
static void bound_range(const engine *e, const job *j, int t, uint64_t *lo, uint64_t *hi)
{
	const VkDeviceSize align = e->dev->props.limits.minStorageBufferOffsetAlignment;
	*lo = j->req.t[t].offset / align * align;
	*hi = j->req.t[t].offset + j->bytes[t];
}

/* Tensor slots each kernel binds. */
#define UNIT_PARAM ((1u << PROTO_T_X) | (1u << PROTO_T_DY) | (1u << PROTO_T_DW) | (1u << PROTO_T_DB))
#define UNIT_INPUT ((1u << PROTO_T_DY) | (1u << PROTO_T_W) | (1u << PROTO_T_DX))

/* Does the dispatch binding tensors `mask` of j need a barrier before it,
 * given what the batch did since the last one? Only when its bound bytes
 * overlap bytes an earlier dispatch wrote, or it writes bytes an earlier
 * one bound: independent jobs run concurrently. */
static bool needs_barrier(const engine *e, const job *j, unsigned mask)
{
	if (e->untracked)
		return true;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		const region *r = j->reg[t];
		if (!r || !(mask & (1u << t)) || r->touch_epoch != e->epoch)
			continue;
		uint64_t lo, hi;
		bound_range(e, j, t, &lo, &hi);
		for (uint32_t i = 0; i < r->ntouch; i++) {
			const struct region_touch *k = &r->touch[i];
			if (k->lo < hi && lo < k->hi && (k->write || is_output(t)))
				return true;
		}
	}
	return false;
}

/* Remember the dispatch's bound ranges. The arrays only grow
 * (geometrically) and are reused batch after batch, so steady state
 * allocates nothing per job. */
static void mark_touched(engine *e, job *j, unsigned mask)
{
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		region *r = j->reg[t];
		if (!r || !(mask & (1u << t)))
			continue;
		if (r->touch_epoch != e->epoch) {
			r->touch_epoch = e->epoch;
			r->ntouch = 0;
		}
		if (r->ntouch == r->touch_cap) {
			uint32_t cap = r->touch_cap ? r->touch_cap * 2 : 16;
			struct region_touch *nt = realloc(r->touch, cap * sizeof(*nt));
			if (!nt) {
				/* cannot track: the next dispatch gets a barrier regardless */
				e->untracked = true;
				continue;
			}
			r->touch = nt;
			r->touch_cap = cap;
		}
		uint64_t lo, hi;
		bound_range(e, j, t, &lo, &hi);
		r->touch[r->ntouch++] = (struct region_touch){lo, hi, is_output(t)};
	}
}

/* Record one dispatch unit of j, after a barrier when it needs one. */
static void record_unit(engine *e, VkCommandBuffer cb, job *j, unsigned mask, uint64_t piece)
{
	if (needs_barrier(e, j, mask)) {
		barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
			VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
			VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
			VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
		e->epoch++;
		e->untracked = false;
	}
	const variant_plan plan = variant_choose(&j->req);
	if (mask == UNIT_PARAM && plan.param == KERN_TILED)
		record_tiled(e, cb, j, false, piece);
	else if (mask == UNIT_PARAM)
		record_param(e, cb, j, piece);
	else if (plan.input == KERN_TILED)
		record_tiled(e, cb, j, true, piece);
	else
		record_input(e, cb, j);
	mark_touched(e, j, mask);
}


/* Record the jobs of slot si, already taken from the queue, into its
 * command buffer: timestamps around them, a barrier after earlier batches
 * when this one touches their regions, each job's dispatches with barriers
 * only where ranges conflict, and the host-visibility barrier at the end. */
void record_batch(engine *e, uint32_t si)
{
	engine_slot *s = &e->slots[si];
	VkCommandBuffer cb = s->cb;
	vkResetCommandPool(e->dev->dev, s->pool, 0);
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	vkBeginCommandBuffer(cb, &bi);
	if (e->dev->timestamps) {
		vkCmdResetQueryPool(cb, s->queries, 0, 2);
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, s->queries, 0);
	}
	bool after_inflight = false;
	for (uint32_t i = 0; i < s->njobs; i++)
		for (int t = 0; t < PROTO_T_COUNT; t++)
			if (s->jobs[i]->reg[t] && s->jobs[i]->reg[t]->inflight)
				after_inflight = true;
	/* earlier batches still running touch some of these regions: order this
	 * batch after them (a barrier's first scope includes earlier submissions) */
	if (after_inflight)
		barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
			VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
			VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
	e->epoch++;
	for (uint32_t i = 0; i < s->njobs; i++) {
		job *j = s->jobs[i];
		const proto_tensor *t = j->req.t;
		if (t[PROTO_T_DW].present || t[PROTO_T_DB].present)
			record_unit(e, cb, j, UNIT_PARAM, (uint64_t)si * e->cfg->max_batch_jobs + i);
		if (t[PROTO_T_DX].present)
			record_unit(e, cb, j, UNIT_INPUT, (uint64_t)si * e->cfg->max_batch_jobs + i);
	}
	/* outputs visible to the host (the client's mapping) at completion */
	barrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
		VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
	if (e->dev->timestamps) {
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, s->queries, 1);
		vkCmdCopyQueryPoolResults(cb, s->queries, 0, 2, s->ts_buf, 0, sizeof(uint64_t),
					  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
		barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
			VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
	}
	vkEndCommandBuffer(cb);
}
