/* daemon/sched/setup.c — the engine's Vulkan objects: each track's timeline
 * semaphore and queue, the dummy buffer, each slot's command pool and
 * buffer, query pool and timestamp buffer; and the fault injection the
 * tests use (VKGRAD_FAULT_INJECT). */
#include "sched/internal.h"
#include "tensor.h"

#include "buffer.h"
#include "log.h"
#include "stream.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A host-visible buffer the slot's command buffer copies its two
 * timestamps into. */
static int make_ts_buffer(const device *d, engine_slot *s, uint32_t nq)
{
	const gpu_buffer_info bi = {
		.what = "timestamp",
		.size = nq * sizeof(uint64_t),
		.usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
		.map = true,
	};
	void *p = NULL;
	char err[160];
	if (gpu_buffer_create(d, &bi, &s->ts_buf, &s->ts_mem, &p, err, sizeof(err)) != VK_SUCCESS) {
		log_err("engine: %s", err);
		return -1;
	}
	s->ts_map = p;
	s->ts_map[0] = s->ts_map[1] = 0;
	return 0;
}

/* VKGRAD_FAULT_INJECT (config_env fault_inject): comma-separated submit:N, wait:N (the Nth
 * submission or wait reports VK_ERROR_DEVICE_LOST), recreate:N (the
 * first N device recreations fail; recovery.c), late_wait:MS (the
 * completion thread reports each batch MS ms late, at most 10000, so the
 * polling loop sees it first), unsealed (region.h) and tensor_alloc:N (the
 * Nth device tensor's allocation fails; tensor.h). */
void sched_parse_faults(engine *e)
{
	const char *fi = e->cfg->env.fault_inject;
	char buf[128];
	if (!fi || strlen(fi) >= sizeof(buf))
		return;
	strcpy(buf, fi);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned long long n;
		if (sscanf(t, "submit:%llu", &n) == 1)
			e->fault_submit_at = n;
		else if (sscanf(t, "wait:%llu", &n) == 1)
			e->fault_wait_at = n;
		else if (sscanf(t, "recreate:%llu", &n) == 1)
			e->fault_recreate = n;
		else if (sscanf(t, "late_wait:%llu", &n) == 1 && n <= 10000)
			e->fault_late_us = (useconds_t)n * 1000;
		else if (strcmp(t, "unsealed") == 0)
			region_fault_unsealed = true;
		else if (sscanf(t, "tensor_alloc:%llu", &n) == 1)
			tensor_fault_alloc_at = n;
		else
			log_warn("VKGRAD_FAULT_INJECT: '%s' not understood", t);
	}
}

/* The engine's objects on e->dev: the timeline semaphore, the dummy
 * buffer, each slot's pool, command buffer, query pool and timestamp
 * buffer. The timeline starts at next_value, so values stay increasing
 * across a device recreation and the regions' per-batch marks (timeline
 * values) cannot repeat. Returns 0 or -1; gpu_release cleans up either way. */
int sched_gpu_create(engine *e)
{
	const device *d = e->dev;
	const config *cfg = e->cfg;
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		engine_track *t = &e->track[c];
		VkSemaphoreTypeCreateInfo stci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
						  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
						  .initialValue = t->next_value};
		VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
					     .pNext = &stci};
		if (vkCreateSemaphore(d->dev, &sci, NULL, &t->timeline) != VK_SUCCESS)
			return -1;
		t->queue = c == ENGINE_SMALL ? d->small_queue : d->queue;
	}
	e->shared_queue = d->small_queue == d->queue;
	/* a small device buffer bound in place of outputs a job does not ask for;
	 * the kernels never write it (their flags say so) */
	e->dummy_piece = d->props.limits.minStorageBufferOffsetAlignment;
	if (e->dummy_piece < 16)
		e->dummy_piece = 16;
	const gpu_buffer_info dummy = {
		.what = "dummy",
		.size = e->dummy_piece * 3 * (uint64_t)cfg->max_batch_jobs * e->nslots,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
		.preferred = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
	};
	char err[160];
	if (gpu_buffer_create(d, &dummy, &e->dummy, &e->dummy_mem, NULL, err, sizeof(err)) != VK_SUCCESS) {
		log_err("engine: %s", err);
		return -1;
	}
	for (uint32_t i = 0; i < e->nslots; i++) {
		engine_slot *s = &e->slots[i];
		VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
						.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
						.queueFamilyIndex = d->queue_family};
		if (vkCreateCommandPool(d->dev, &cpci, NULL, &s->pool) != VK_SUCCESS)
			return -1;
		VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
						    .commandPool = s->pool,
						    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
						    .commandBufferCount = 1};
		if (vkAllocateCommandBuffers(d->dev, &cbai, &s->cb) != VK_SUCCESS)
			return -1;
		/* the batch's two timestamps, two per device-local job */
		uint32_t nq = 2 + 2 * cfg->max_batch_jobs;
		if (stream_queries(e) > nq) /* a streamed batch's steps timed */
			nq = stream_queries(e);
		VkQueryPoolCreateInfo qpci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
					      .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = nq};
		if (d->timestamps && (vkCreateQueryPool(d->dev, &qpci, NULL, &s->queries) != VK_SUCCESS ||
				      make_ts_buffer(d, s, nq) != 0))
			return -1;
	}
	return stream_create(e);
}

/* Destroy what gpu_create made (any part of it). */
void sched_gpu_release(engine *e)
{
	const device *d = e->dev;
	stream_release(e);
	for (uint32_t i = 0; e->slots && i < e->nslots; i++) {
		engine_slot *s = &e->slots[i];
		if (s->queries)
			vkDestroyQueryPool(d->dev, s->queries, NULL);
		gpu_buffer_destroy(d, &s->ts_buf, &s->ts_mem); /* unmaps */
		if (s->pool)
			vkDestroyCommandPool(d->dev, s->pool, NULL);
		scratch_release(&s->scratch, d);
		s->queries = VK_NULL_HANDLE;
		s->ts_map = NULL;
		s->pool = VK_NULL_HANDLE;
		s->cb = VK_NULL_HANDLE;
	}
	gpu_buffer_destroy(d, &e->dummy, &e->dummy_mem);
	for (int c = 0; c < ENGINE_CLASSES; c++) {
		if (e->track[c].timeline)
			vkDestroySemaphore(d->dev, e->track[c].timeline, NULL);
		e->track[c].timeline = VK_NULL_HANDLE;
	}
}

