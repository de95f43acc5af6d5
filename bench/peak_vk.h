/* bench/peak_vk.h — the little Vulkan `vkgrad bench --peak` needs on top of
 * the daemon's device (daemon/device.c: the same choice of device, the same
 * features and cooperative-matrix query): device-local buffers with one
 * host staging buffer, a pipeline from a registry entry with its
 * specialization constants (its SPIR-V checked against the interface, as
 * daemon/pipelines.c does), and one dispatch timed by GPU timestamps. */
#ifndef VKG_BENCH_PEAK_VK_H
#define VKG_BENCH_PEAK_VK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "kernel_registry.h"

#define PEAK_MAX_BINDINGS 4

typedef struct peak_buf {
	VkBuffer buf;
	VkDeviceMemory mem;
	VkDeviceSize size;
} peak_buf;

typedef struct peak_vk {
	device dev;
	bool dev_open;
	uint32_t sm_count;   /* VK_NV_shader_sm_builtins' shaderSMCount, 0 when unknown */
	uint32_t subgroup;   /* the subgroup size */
	bool cpu;            /* a CPU device (lavapipe) */
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkQueryPool qp;
	VkFence fence;
	VkBuffer stage_buf;  /* host-visible, for uploads and read-backs */
	VkDeviceMemory stage_mem;
	VkDeviceSize stage_size;
	void *stage_map;
} peak_vk;

typedef struct peak_pipe {
	VkDescriptorSetLayout dsl;
	VkPipelineLayout layout;
	VkPipeline pipe;
	uint32_t bindings, push_bytes;
	int64_t registers;   /* the driver's register count statistic, -1 when none */
} peak_pipe;

/* Open the daemon's default device (VKGRAD_VALIDATION=1: with the
 * validation layer), the command buffer, two timestamps, a staging buffer
 * of stage_size bytes. 0, or -1 with err. */
int peak_vk_open(peak_vk *v, VkDeviceSize stage_size, char *err, size_t errlen);
void peak_vk_close(peak_vk *v);

/* A device-local storage buffer. 0, or -1 with err. */
int peak_buf_create(peak_vk *v, peak_buf *b, VkDeviceSize size, char *err, size_t errlen);
void peak_buf_destroy(peak_vk *v, peak_buf *b);
/* Copy len bytes (<= the staging size) from host memory into b at off / out
 * of b at off into host memory, waiting for the copy. 0, or -1 with err. */
int peak_buf_upload(peak_vk *v, peak_buf *b, VkDeviceSize off, const void *p, size_t len, char *err,
		    size_t errlen);
int peak_buf_download(peak_vk *v, peak_buf *b, VkDeviceSize off, void *p, size_t len, char *err,
		      size_t errlen);
/* Every 32-bit word of b set to `word` (vkCmdFillBuffer), waiting for it.
 * 0, or -1 with err. */
int peak_buf_fill(peak_vk *v, peak_buf *b, uint32_t word, char *err, size_t errlen);
/* peak_buf_create of len bytes, then peak_buf_upload of p into it. */
int peak_buf_from(peak_vk *v, peak_buf *b, const void *p, size_t len, char *err, size_t errlen);

/* A compute pipeline of registry entry e with `bindings` storage buffers and
 * push_bytes of push constants (checked against e's SPIR-V). 0, or -1. */
int peak_pipe_create(peak_vk *v, peak_pipe *p, const kreg_entry *e, uint32_t bindings, uint32_t push_bytes,
		     const VkSpecializationInfo *spec, char *err, size_t errlen);
void peak_pipe_destroy(peak_vk *v, peak_pipe *p);

/* One dispatch of `groups` workgroups with bufs[0..p->bindings) bound and
 * push (p->push_bytes) pushed; *gpu_us from the timestamps around it. 0, or
 * -1 with err. */
int peak_dispatch(peak_vk *v, const peak_pipe *p, peak_buf *const *bufs, const void *push, uint32_t groups,
		  double *gpu_us, char *err, size_t errlen);

/* vkCmdCopyBuffer of the first `bytes` of src into dst, device memory to
 * device memory; *gpu_us from the timestamps around it. 0, or -1 with err. */
int peak_copy(peak_vk *v, peak_buf *src, peak_buf *dst, VkDeviceSize bytes, double *gpu_us, char *err,
	      size_t errlen);

#endif
