/* bench/peak_vk.c — see peak_vk.h. */
#include "peak_vk.h"
#include "vkext.h"

#include "buffer.h"
#include "log.h"
#include "spirv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FENCE_TIMEOUT_NS (600ull * 1000000000ull) /* a lavapipe dispatch can take long */

/* The SM count (where the driver tells) and the subgroup size. */
static void query_shape(peak_vk *v)
{
	VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
	VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
						 .pNext = vkext_has(v->dev.phys, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)
								  ? &sm
								  : NULL};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
	vkGetPhysicalDeviceProperties2(v->dev.phys, &p2);
	v->sm_count = sm.shaderSMCount;
	v->subgroup = sg.subgroupSize;
	v->cpu = v->dev.props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

int peak_vk_open(peak_vk *v, VkDeviceSize stage_size, char *err, size_t errlen)
{
	memset(v, 0, sizeof(*v));
	/* at debug level device_open enables the driver's pipeline statistics
	 * (the register counts); the daemon's log quiet otherwise */
	config_env env; /* as vkgradd reads it */
	config_read_env(&env);
	log_init(LOG_LEVEL_DEBUG, env.journal_stream);
	device_keep_drivers(env.keep_drivers); /* make test-asan: the drivers' leaks keep their names */
	const int rc = device_open(&v->dev, "", &env, err, errlen);
	log_init(LOG_LEVEL_WARN, env.journal_stream);
	if (rc != 0)
		return -1;
	v->dev_open = true;
	query_shape(v);
	if (!v->dev.timestamps) {
		snprintf(err, errlen, "the device's compute queue has no timestamps");
		goto fail;
	}
	VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
					.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
					.queueFamilyIndex = v->dev.queue_family};
	VkQueryPoolCreateInfo qpci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
				      .queryType = VK_QUERY_TYPE_TIMESTAMP,
				      .queryCount = 2};
	VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	if (vkCreateCommandPool(v->dev.dev, &cpci, NULL, &v->pool) != VK_SUCCESS ||
	    vkCreateQueryPool(v->dev.dev, &qpci, NULL, &v->qp) != VK_SUCCESS ||
	    vkCreateFence(v->dev.dev, &fci, NULL, &v->fence) != VK_SUCCESS) {
		snprintf(err, errlen, "creating a command pool, query pool or fence failed");
		goto fail;
	}
	VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
					    .commandPool = v->pool,
					    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
					    .commandBufferCount = 1};
	if (vkAllocateCommandBuffers(v->dev.dev, &cbai, &v->cb) != VK_SUCCESS) {
		snprintf(err, errlen, "vkAllocateCommandBuffers failed");
		goto fail;
	}
	const gpu_buffer_info stage = {
		.what = "staging",
		.size = stage_size,
		.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.shared = true,
		.required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
		.map = true,
	};
	if (gpu_buffer_create(&v->dev, &stage, &v->stage_buf, &v->stage_mem, &v->stage_map, err,
			      errlen) != VK_SUCCESS)
		goto fail;
	v->stage_size = stage_size;
	return 0;
fail:
	peak_vk_close(v);
	return -1;
}

void peak_vk_close(peak_vk *v)
{
	if (!v->dev_open)
		return;
	VkDevice d = v->dev.dev;
	if (d) {
		vkDeviceWaitIdle(d);
		gpu_buffer_destroy(&v->dev, &v->stage_buf, &v->stage_mem);
		if (v->fence)
			vkDestroyFence(d, v->fence, NULL);
		if (v->qp)
			vkDestroyQueryPool(d, v->qp, NULL);
		if (v->pool)
			vkDestroyCommandPool(d, v->pool, NULL);
	}
	device_close(&v->dev);
	memset(v, 0, sizeof(*v));
}

int peak_buf_create(peak_vk *v, peak_buf *b, VkDeviceSize size, char *err, size_t errlen)
{
	memset(b, 0, sizeof(*b));
	b->size = size;
	const gpu_buffer_info bi = {
		.what = "device-local",
		.size = size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.shared = true,
		.required = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
	};
	return gpu_buffer_create(&v->dev, &bi, &b->buf, &b->mem, NULL, err, errlen) == VK_SUCCESS ? 0 : -1;
}

void peak_buf_destroy(peak_vk *v, peak_buf *b)
{
	gpu_buffer_destroy(&v->dev, &b->buf, &b->mem);
	memset(b, 0, sizeof(*b));
}

static int begin(peak_vk *v, char *err, size_t errlen)
{
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	if (vkResetCommandBuffer(v->cb, 0) != VK_SUCCESS || vkBeginCommandBuffer(v->cb, &bi) != VK_SUCCESS) {
		snprintf(err, errlen, "vkBeginCommandBuffer failed");
		return -1;
	}
	return 0;
}

/* End, submit, wait. */
static int submit_wait(peak_vk *v, char *err, size_t errlen)
{
	if (vkEndCommandBuffer(v->cb) != VK_SUCCESS) {
		snprintf(err, errlen, "vkEndCommandBuffer failed");
		return -1;
	}
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &v->cb};
	VkResult r = vkResetFences(v->dev.dev, 1, &v->fence);
	if (r == VK_SUCCESS)
		r = vkQueueSubmit(v->dev.queue, 1, &si, v->fence);
	if (r == VK_SUCCESS)
		r = vkWaitForFences(v->dev.dev, 1, &v->fence, VK_TRUE, FENCE_TIMEOUT_NS);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "submit or wait failed (VkResult %d)", r);
		return -1;
	}
	return 0;
}

/* The end of a timed command buffer: the second timestamp, submit, wait,
 * and *gpu_us from the two timestamps (queries 0 and 1). */
static int timed_end(peak_vk *v, double *gpu_us, char *err, size_t errlen)
{
	vkCmdWriteTimestamp(v->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, v->qp, 1);
	if (submit_wait(v, err, errlen) != 0)
		return -1;
	uint64_t ts[2];
	VkResult r = vkGetQueryPoolResults(v->dev.dev, v->qp, 0, 2, sizeof(ts), ts, sizeof(ts[0]),
					   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "vkGetQueryPoolResults failed (VkResult %d)", r);
		return -1;
	}
	*gpu_us = (double)((ts[1] - ts[0]) & v->dev.timestamp_mask) * v->dev.timestamp_period / 1e3;
	return 0;
}

static void barrier(peak_vk *v, VkPipelineStageFlags src, VkAccessFlags sa, VkPipelineStageFlags dst,
		    VkAccessFlags da)
{
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = sa, .dstAccessMask = da};
	vkCmdPipelineBarrier(v->cb, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

int peak_buf_from(peak_vk *v, peak_buf *b, const void *p, size_t len, char *err, size_t errlen)
{
	if (peak_buf_create(v, b, len, err, errlen) != 0)
		return -1;
	return peak_buf_upload(v, b, 0, p, len, err, errlen);
}

int peak_buf_upload(peak_vk *v, peak_buf *b, VkDeviceSize off, const void *p, size_t len, char *err,
		    size_t errlen)
{
	if (len > v->stage_size || off > b->size || len > b->size - off) {
		snprintf(err, errlen, "upload of %zu bytes at %llu exceeds the staging buffer or the target", len,
			 (unsigned long long)off);
		return -1;
	}
	memcpy(v->stage_map, p, len);
	if (begin(v, err, errlen) != 0)
		return -1;
	/* what ran before on b (a dispatch or a copy) done before this write */
	barrier(v, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_TRANSFER_WRITE_BIT);
	VkBufferCopy bc = {.dstOffset = off, .size = len};
	vkCmdCopyBuffer(v->cb, v->stage_buf, b->buf, 1, &bc);
	barrier(v, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
		VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
			VK_ACCESS_TRANSFER_WRITE_BIT);
	return submit_wait(v, err, errlen);
}

int peak_buf_fill(peak_vk *v, peak_buf *b, uint32_t word, char *err, size_t errlen)
{
	if (begin(v, err, errlen) != 0)
		return -1;
	barrier(v, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_TRANSFER_WRITE_BIT);
	vkCmdFillBuffer(v->cb, b->buf, 0, VK_WHOLE_SIZE, word);
	barrier(v, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
		VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
			VK_ACCESS_TRANSFER_WRITE_BIT);
	return submit_wait(v, err, errlen);
}

int peak_buf_download(peak_vk *v, peak_buf *b, VkDeviceSize off, void *p, size_t len, char *err,
		      size_t errlen)
{
	if (off > b->size || len > b->size - off) {
		snprintf(err, errlen, "download past the end of the buffer");
		return -1;
	}
	for (size_t done = 0; done < len;) {
		const size_t n = len - done < v->stage_size ? len - done : (size_t)v->stage_size;
		if (begin(v, err, errlen) != 0)
			return -1;
		/* a dispatch's or a copy's writes to b visible to this read */
		barrier(v, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
			VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
			VK_ACCESS_TRANSFER_READ_BIT);
		VkBufferCopy bc = {.srcOffset = off + done, .size = n};
		vkCmdCopyBuffer(v->cb, b->buf, v->stage_buf, 1, &bc);
		barrier(v, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
			VK_ACCESS_HOST_READ_BIT);
		if (submit_wait(v, err, errlen) != 0)
			return -1;
		memcpy((char *)p + done, v->stage_map, n);
		done += n;
	}
	return 0;
}

/* The driver's register count (a statistic named like "register"), -1. */
static int64_t registers_of(peak_vk *v, VkPipeline p)
{
	if (!v->dev.exec_stats)
		return -1;
	VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p};
	VkPipelineExecutableStatisticKHR st[32];
	uint32_t ns = 32;
	for (uint32_t i = 0; i < ns; i++)
		st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
	VkResult r = v->dev.get_exec_stats(v->dev.dev, &ei, &ns, st);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE)
		return -1;
	for (uint32_t i = 0; i < ns; i++) {
		if (!strcasestr(st[i].name, "register"))
			continue;
		if (st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR)
			return (int64_t)st[i].value.u64;
		if (st[i].format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR)
			return st[i].value.i64;
	}
	return -1;
}

int peak_pipe_create(peak_vk *v, peak_pipe *p, const kreg_entry *e, uint32_t bindings, uint32_t push_bytes,
		     const VkSpecializationInfo *spec, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->bindings = bindings;
	p->push_bytes = push_bytes;
	p->registers = -1;
	if (bindings > PEAK_MAX_BINDINGS ||
	    spirv_iface_check(e->spirv, e->spirv_size / 4, bindings, push_bytes, e->name, err, errlen) != 0)
		return -1;
	VkDevice d = v->dev.dev;
	VkDescriptorSetLayoutBinding b[PEAK_MAX_BINDINGS];
	for (uint32_t i = 0; i < bindings; i++)
		b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
						      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
						      .descriptorCount = 1,
						      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
	VkDescriptorSetLayoutCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
					       .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
					       .bindingCount = bindings,
					       .pBindings = b};
	VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
	VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
					 .codeSize = e->spirv_size,
					 .pCode = e->spirv};
	VkShaderModule module = VK_NULL_HANDLE;
	if (vkCreateDescriptorSetLayout(d, &dci, NULL, &p->dsl) != VK_SUCCESS)
		goto fail;
	VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
					   .setLayoutCount = 1,
					   .pSetLayouts = &p->dsl,
					   .pushConstantRangeCount = 1,
					   .pPushConstantRanges = &pcr};
	if (vkCreatePipelineLayout(d, &plci, NULL, &p->layout) != VK_SUCCESS ||
	    vkCreateShaderModule(d, &smci, NULL, &module) != VK_SUCCESS)
		goto fail;
	VkComputePipelineCreateInfo cpci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.flags = v->dev.exec_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
		.stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
			  .module = module,
			  .pName = "main",
			  .pSpecializationInfo = spec},
		.layout = p->layout,
	};
	VkResult r = vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &cpci, NULL, &p->pipe);
	vkDestroyShaderModule(d, module, NULL);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "vkCreateComputePipelines (%s %s) failed (VkResult %d)", e->name, e->dtype, r);
		peak_pipe_destroy(v, p);
		return -1;
	}
	p->registers = registers_of(v, p->pipe);
	return 0;
fail:
	if (module)
		vkDestroyShaderModule(d, module, NULL);
	snprintf(err, errlen, "creating the layout or module of %s (%s) failed", e->name, e->dtype);
	peak_pipe_destroy(v, p);
	return -1;
}

void peak_pipe_destroy(peak_vk *v, peak_pipe *p)
{
	VkDevice d = v->dev.dev;
	if (p->pipe)
		vkDestroyPipeline(d, p->pipe, NULL);
	if (p->layout)
		vkDestroyPipelineLayout(d, p->layout, NULL);
	if (p->dsl)
		vkDestroyDescriptorSetLayout(d, p->dsl, NULL);
	memset(p, 0, sizeof(*p));
}

int peak_dispatch(peak_vk *v, const peak_pipe *p, peak_buf *const *bufs, const void *push, uint32_t groups,
		  double *gpu_us, char *err, size_t errlen)
{
	if (groups == 0 || groups > v->dev.props.limits.maxComputeWorkGroupCount[0]) {
		snprintf(err, errlen, "%u workgroups: the device takes 1..%u", groups,
			 v->dev.props.limits.maxComputeWorkGroupCount[0]);
		return -1;
	}
	if (begin(v, err, errlen) != 0)
		return -1;
	VkDescriptorBufferInfo bi[PEAK_MAX_BINDINGS];
	VkWriteDescriptorSet w[PEAK_MAX_BINDINGS];
	for (uint32_t i = 0; i < p->bindings; i++) {
		bi[i] = (VkDescriptorBufferInfo){.buffer = bufs[i]->buf, .range = VK_WHOLE_SIZE};
		w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
					      .dstBinding = i,
					      .descriptorCount = 1,
					      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
					      .pBufferInfo = &bi[i]};
	}
	vkCmdResetQueryPool(v->cb, v->qp, 0, 2);
	vkCmdBindPipeline(v->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
	v->dev.cmd_push_descriptor_set(v->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, p->bindings, w);
	vkCmdPushConstants(v->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes, push);
	/* the previous dispatch (same buffers) done before this one starts */
	barrier(v, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
		VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
	vkCmdWriteTimestamp(v->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, v->qp, 0);
	vkCmdDispatch(v->cb, groups, 1, 1);
	return timed_end(v, gpu_us, err, errlen);
}

int peak_copy(peak_vk *v, peak_buf *src, peak_buf *dst, VkDeviceSize bytes, double *gpu_us, char *err,
	      size_t errlen)
{
	if (bytes == 0 || bytes > src->size || bytes > dst->size) {
		snprintf(err, errlen, "a copy of %llu bytes between buffers of %llu and %llu",
			 (unsigned long long)bytes, (unsigned long long)src->size, (unsigned long long)dst->size);
		return -1;
	}
	if (begin(v, err, errlen) != 0)
		return -1;
	vkCmdResetQueryPool(v->cb, v->qp, 0, 2);
	/* the previous copy (same buffers) done before this one starts */
	barrier(v, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
		VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
	vkCmdWriteTimestamp(v->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, v->qp, 0);
	const VkBufferCopy region = {.srcOffset = 0, .dstOffset = 0, .size = bytes};
	vkCmdCopyBuffer(v->cb, src->buf, dst->buf, 1, &region);
	return timed_end(v, gpu_us, err, errlen);
}
