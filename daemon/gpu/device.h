/* daemon/gpu/device.h — the one Vulkan device the daemon owns: instance, chosen
 * physical device, logical device, compute queue, and what it can do. */
#ifndef VKG_DAEMON_DEVICE_H
#define VKG_DAEMON_DEVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include <vulkan/vulkan.h>

#include "config.h"
#include "coopmat_khr.h"
#include "msg.h"

typedef struct device {
	VkInstance instance;
	VkDebugUtilsMessengerEXT messenger;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t queue_family;
	/* small jobs' queue (engine.h): the compute family's second queue where
	 * it has one (compute_queues 2), else the same as queue */
	VkQueue small_queue;
	uint32_t compute_queues;
	/* a transfer-only queue family, for copies overlapped with kernels
	 * (stream.h): xfer_family is UINT32_MAX where there is none
	 * (VKGRAD_NO_TRANSFER_QUEUE=1 too). xfer_up takes uploads, xfer_down
	 * downloads: its queues 0 and 1, the same queue where it has one.
	 * Buffers both families use are created concurrent
	 * (device_buffer_sharing). */
	uint32_t xfer_family;
	uint32_t xfer_queues;      /* queues taken from it: 1 or 2 */
	VkQueue xfer_up, xfer_down;
	uint32_t share_families[2];
	VkPhysicalDeviceProperties props;
	uint32_t api_version;      /* what we may use: min(instance, device) */
	VkPhysicalDeviceMemoryProperties mem;
	proto_device_info info;
	bool host_import;          /* VK_EXT_external_memory_host enabled */
	bool storage16;            /* storageBuffer16BitAccess: f16/bf16 tensors */
	bool coopmat;              /* VK_NV_cooperative_matrix with 16x16x16 f16 -> f32,
				      shaderFloat16, the Vulkan memory model and
				      32-wide subgroups: linear_coopmat_gemm runs */
	cmk_caps cmk;              /* VK_KHR_cooperative_matrix per dtype: where
				      linear_coopmat_khr_gemm runs, on which shape */
	VkDeviceSize import_align; /* minImportedHostPointerAlignment */
	float timestamp_period;    /* ns per tick */
	bool timestamps;
	uint64_t timestamp_mask;   /* the valid bits of a timestamp */
	bool xfer_timestamps;      /* the transfer family writes timestamps, as
				      many valid bits as the compute family's */
	bool host_query_reset;     /* hostQueryReset enabled (vkResetQueryPool) */
	/* VK_EXT_calibrated_timestamps with the device's and CLOCK_MONOTONIC's
	 * domains: GPU timestamps can be put on the host's clock (the stages
	 * launch and complete of a job's trace) */
	bool calibrated;
	PFN_vkGetCalibratedTimestampsEXT get_calibrated;
	bool exec_stats;           /* VK_KHR_pipeline_executable_properties enabled:
				      the compiler's statistics of each pipeline
				      (registers, spills...) are logged at debug level */
	PFN_vkGetPipelineExecutablePropertiesKHR get_exec_props;
	PFN_vkGetPipelineExecutableStatisticsKHR get_exec_stats;
	PFN_vkCmdPushDescriptorSetKHR cmd_push_descriptor_set;
	PFN_vkGetMemoryHostPointerPropertiesEXT get_host_pointer_props;
	atomic_uint validation_errors; /* messages of severity error from the layer */
	bool validation;           /* opened with the validation layer */
} device;

/* Open the device picked by `want` ("" = first discrete GPU, else integrated,
 * else virtual, else CPU; a number = index; else a deviceUUID, whole or its
 * first 8+ characters, or a name substring). With
 * env->validation, the Khronos validation layer is enabled and its errors are
 * logged and counted; env's device switches apply (config.h config_env).
 * Returns 0, or -1 with a message in err. */
int device_open(device *d, const char *want, const config_env *env, char *err, size_t errlen);
void device_close(device *d);
/* Lower the limits one job may use to what the device can run: one tensor
 * must fit one storage-buffer binding (plus the offset remainder), and a
 * dispatch's x groups bound a dimension. What every connection gets (the
 * server) and the in-process benchmark alike. */
void device_clamp_limits(const device *d, proto_limits *l);
/* `vkgradd --list-devices`: every Vulkan device with its index, name, type,
 * driver, device-local memory, ids, UUID, PCI address (where the driver
 * tells) and whether vkgradd can use it, marking the default. 0, or -1 with
 * a message in err. */
int device_list(FILE *out, char *err, size_t errlen);

/* libs, VKGRAD_KEEP_DRIVERS=lib1.so:lib2.so (config_env keep_drivers;
 * NULL: none), keeps those libraries (the Vulkan
 * driver, layers) mapped until exit: the loader unloads them at
 * vkDestroyInstance, after which a leak report (make test-asan) could not
 * name their frames for its suppressions. A debugging aid only; call it
 * before the first device is opened (vkgradd's main, `vkgrad bench --peak`). */
void device_keep_drivers(const char *libs);

/* Set bci's sharing mode: concurrent between the compute and the transfer
 * family where the device has a transfer queue (no ownership transfers
 * between them), exclusive otherwise. */
void device_buffer_sharing(const device *d, VkBufferCreateInfo *bci);

/* Index of a memory type in `bits` having all `flags`, or -1. */
int device_memory_type(const device *d, uint32_t bits, VkMemoryPropertyFlags flags);

/* The device's part of stats: validation_errors (the layer's error
 * messages since the daemon started, across device recreations). */
void device_stats(const device *d, proto_stats *st);

#endif
