/* daemon/gpu/device.c — see device.h. */
#include "device.h"
#include "device_priv.h"
#include "vkext.h"

#include "log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
					       VkDebugUtilsMessageTypeFlagsEXT type,
					       const VkDebugUtilsMessengerCallbackDataEXT *data,
					       void *user)
{
	(void)type;
	device *d = user;
	if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
		atomic_fetch_add(&d->validation_errors, 1);
		log_err("vulkan validation: %s", data->pMessage);
	} else if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
		log_warn("vulkan validation: %s", data->pMessage);
	}
	return VK_FALSE;
}

/* Both the device's time domain and CLOCK_MONOTONIC calibrateable? */
static bool calibrateable(VkInstance inst, VkPhysicalDevice p)
{
	if (!vkext_has(p, VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME))
		return false;
	PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT f =
		(PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT)vkGetInstanceProcAddr(
			inst, "vkGetPhysicalDeviceCalibrateableTimeDomainsEXT");
	VkTimeDomainEXT dom[8];
	uint32_t n = 8;
	if (!f || f(p, &n, dom) < 0)
		return false;
	bool dev = false, mono = false;
	for (uint32_t i = 0; i < n; i++) {
		dev |= dom[i] == VK_TIME_DOMAIN_DEVICE_EXT;
		mono |= dom[i] == VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT;
	}
	return dev && mono;
}

/* Does the device multiply 16x16x16 f16 matrices into f32 at subgroup
 * scope (what linear_coopmat_gemm is written for)? */
static bool coopmat_shape_ok(VkPhysicalDevice p, VkInstance inst)
{
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
			inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
	uint32_t n = 0;
	if (!get || get(p, &n, NULL) != VK_SUCCESS || n == 0)
		return false;
	VkCooperativeMatrixPropertiesNV *cp = calloc(n, sizeof(*cp));
	if (!cp)
		return false;
	for (uint32_t i = 0; i < n; i++)
		cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
	bool ok = false;
	if (get(p, &n, cp) == VK_SUCCESS)
		for (uint32_t i = 0; i < n; i++)
			ok |= cp[i].MSize == 16 && cp[i].NSize == 16 && cp[i].KSize == 16 &&
			      cp[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV &&
			      cp[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
			      cp[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV &&
			      cp[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
			      cp[i].scope == VK_SCOPE_SUBGROUP_NV;
	free(cp);
	return ok;
}

static uint32_t subgroup_size(VkPhysicalDevice p)
{
	VkPhysicalDeviceSubgroupProperties sp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sp};
	vkGetPhysicalDeviceProperties2(p, &p2);
	return sp.subgroupSize;
}

static bool has_layer(const char *name)
{
	uint32_t n = 0;
	vkEnumerateInstanceLayerProperties(&n, NULL);
	VkLayerProperties *l = calloc(n ? n : 1, sizeof(*l));
	if (!l)
		return false;
	vkEnumerateInstanceLayerProperties(&n, l);
	bool found = false;
	for (uint32_t i = 0; i < n && !found; i++)
		found = strcmp(l[i].layerName, name) == 0;
	free(l);
	return found;
}

/* The instance (1.3 where the loader has it, creation feedback is core
 * there; 1.2 at least, for timeline semaphores) and, with validation, the
 * debug messenger. *api: the version asked for. */
static int device_instance(device *d, bool validation, uint32_t *api, char *err, size_t errlen)
{
	const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
	const char *iext[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
	if (validation && !has_layer(layers[0])) {
		snprintf(err, errlen, "validation requested but VK_LAYER_KHRONOS_validation is not installed");
		return -1;
	}
	uint32_t loader = VK_API_VERSION_1_0;
	vkEnumerateInstanceVersion(&loader);
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "vkgradd",
		.applicationVersion = 1,
		.pEngineName = "vkgrad",
		.apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo ici = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
		.enabledLayerCount = validation ? 1 : 0,
		.ppEnabledLayerNames = layers,
		.enabledExtensionCount = validation ? 1 : 0,
		.ppEnabledExtensionNames = iext,
	};
	VkResult r = vkCreateInstance(&ici, NULL, &d->instance);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "vkCreateInstance failed (VkResult %d)", r);
		return -1;
	}
	if (validation) {
		PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)
			vkGetInstanceProcAddr(d->instance, "vkCreateDebugUtilsMessengerEXT");
		VkDebugUtilsMessengerCreateInfoEXT mci = {
			.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
			.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
					   VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
			.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
				       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
				       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
			.pfnUserCallback = debug_cb,
			.pUserData = d,
		};
		if (create)
			create(d->instance, &mci, NULL, &d->messenger);
		log_info("Khronos validation layer enabled");
	}
	*api = app.apiVersion;
	return 0;
}

/* A transfer-only queue family (copies, nothing else), the one with
 * the most queues: its first two queues copy in and out at once. None where
 * the device has none or VKGRAD_NO_TRANSFER_QUEUE is set (debugging). */
static void pick_transfer(device *d, const config_env *env)
{
	d->xfer_family = UINT32_MAX;
	d->xfer_queues = 0;
	d->xfer_up = d->xfer_down = VK_NULL_HANDLE;
	if (env->no_transfer_queue)
		return;
	VkQueueFamilyProperties q[16];
	const uint32_t n = device_queue_families(d->phys, q);
	for (uint32_t i = 0; i < n; i++) {
		const VkQueueFlags f = q[i].queueFlags;
		/* copies alone (sparse binding and protected memory aside): not a
		 * video or optical-flow family that also copies */
		const VkQueueFlags only = VK_QUEUE_TRANSFER_BIT | VK_QUEUE_SPARSE_BINDING_BIT |
					  VK_QUEUE_PROTECTED_BIT;
		if (i == d->queue_family || !(f & VK_QUEUE_TRANSFER_BIT) || (f & ~only) ||
		    q[i].queueCount == 0)
			continue;
		if (d->xfer_family == UINT32_MAX || q[i].queueCount > q[d->xfer_family].queueCount)
			d->xfer_family = i;
	}
	if (d->xfer_family == UINT32_MAX)
		return;
	d->xfer_queues = q[d->xfer_family].queueCount >= 2 ? 2 : 1;
	d->share_families[0] = d->queue_family;
	d->share_families[1] = d->xfer_family;
}

void device_buffer_sharing(const device *d, VkBufferCreateInfo *bci)
{
	if (d->xfer_queues) {
		bci->sharingMode = VK_SHARING_MODE_CONCURRENT;
		bci->queueFamilyIndexCount = 2;
		bci->pQueueFamilyIndices = d->share_families;
	} else {
		bci->sharingMode = VK_SHARING_MODE_EXCLUSIVE;
		bci->queueFamilyIndexCount = 0;
		bci->pQueueFamilyIndices = NULL;
	}
}

/* The picked device's properties, limits and memory types, its driver
 * (into *drv), and whether client memory is imported (d->host_import);
 * returns whether import was turned off because the device is a CPU. */
static bool device_properties(device *d, uint32_t api, const config_env *env,
			      VkPhysicalDeviceDriverProperties *drv)
{
	vkGetPhysicalDeviceProperties(d->phys, &d->props);
	vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem);
	d->api_version = d->props.apiVersion < api ? d->props.apiVersion : api;

	*drv = (VkPhysicalDeviceDriverProperties){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT hostp = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT,
		.pNext = drv,
	};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
					  .pNext = &hostp};
	d->host_import = vkext_has(d->phys, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	/* A CPU device reads imported client memory from the driver's own
	 * threads, where no SIGBUS guard reaches (memguard.h): one page lost
	 * from a client's file would kill the daemon. There the staging copies
	 * (guarded, on the loop thread) are the only way; they cost a memcpy
	 * of each job's tensors, small next to a CPU's GEMM (README).
	 * VKGRAD_CPU_IMPORT=1 imports anyway: tests of the import path. */
	const bool cpu_staged = d->host_import && d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU &&
			  !env->cpu_import;
	if (cpu_staged)
		d->host_import = false;
	if (!d->host_import)
		hostp.pNext = NULL, p2.pNext = drv;
	vkGetPhysicalDeviceProperties2(d->phys, &p2);
	d->import_align = d->host_import ? hostp.minImportedHostPointerAlignment : 0;
	if (env->fault_shared_16k) {
		/* debug switch: the least shared memory Vulkan allows a device */
		log_warn("VKGRAD_FAULT_SHARED_16K: maxComputeSharedMemorySize taken as 16384");
		d->props.limits.maxComputeSharedMemorySize = 16384;
	}

	return cpu_staged;
}

/* After vkCreateDevice: the queues, the entry points the daemon calls, the
 * timestamps the compute queue gives; 0, or -1 with err. */
static int device_created(device *d, char *err, size_t errlen)
{
	vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
	d->small_queue = d->queue;
	if (d->compute_queues > 1)
		vkGetDeviceQueue(d->dev, d->queue_family, 1, &d->small_queue);
	if (d->xfer_queues) {
		vkGetDeviceQueue(d->dev, d->xfer_family, 0, &d->xfer_up);
		vkGetDeviceQueue(d->dev, d->xfer_family, d->xfer_queues - 1, &d->xfer_down);
	}
	d->cmd_push_descriptor_set = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
		d->dev, "vkCmdPushDescriptorSetKHR");
	if (d->host_import)
		d->get_host_pointer_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)
			vkGetDeviceProcAddr(d->dev, "vkGetMemoryHostPointerPropertiesEXT");
	if (d->exec_stats) {
		d->get_exec_props = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
			d->dev, "vkGetPipelineExecutablePropertiesKHR");
		d->get_exec_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
			d->dev, "vkGetPipelineExecutableStatisticsKHR");
		d->exec_stats = d->get_exec_props && d->get_exec_stats;
	}
	if (!d->cmd_push_descriptor_set || (d->host_import && !d->get_host_pointer_props)) {
		snprintf(err, errlen, "device entry points missing");
		return -1;
	}
	VkQueueFamilyProperties qf[16];
	device_queue_families(d->phys, qf);
	d->timestamps = qf[d->queue_family].timestampValidBits > 0 && d->props.limits.timestampPeriod > 0;
	d->timestamp_period = d->props.limits.timestampPeriod;
	const uint32_t vb = qf[d->queue_family].timestampValidBits;
	d->timestamp_mask = vb >= 64 ? UINT64_MAX : (1ull << vb) - 1;
	/* the transfer queues' timestamps, where they have as many valid bits
	 * (one mask for a streamed job's whole timeline) */
	d->xfer_timestamps = d->timestamps && d->xfer_queues &&
			     qf[d->xfer_family].timestampValidBits == vb;
	if (d->calibrated)
		d->get_calibrated = (PFN_vkGetCalibratedTimestampsEXT)vkGetDeviceProcAddr(
			d->dev, "vkGetCalibratedTimestampsEXT");
	d->calibrated = d->calibrated && d->timestamps && d->get_calibrated;
	if (d->xfer_queues)
		log_info("transfer queue family %u: %u queue(s) for streamed jobs' copies (%s)",
			 d->xfer_family, d->xfer_queues,
			 d->xfer_queues == 2 ? "uploads and downloads at once" : "uploads and downloads share it");
	else
		log_info("no transfer-only queue: streamed jobs' copies run on the compute queue");
	log_info("GPU timestamps: %s", !d->timestamps ? "none (a job's trace has no GPU stages)"
				       : d->calibrated ? "on the host's clock (VK_EXT_calibrated_timestamps)"
						       : "durations only (no calibration to CLOCK_MONOTONIC)");
	return 0;
}

/* The logical device with every feature and extension the kernels may
 * use, its queue and entry points, and whether it has timestamps. */
static int device_create(device *d, const config_env *env, char *err, size_t errlen)
{
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
	};
	VkPhysicalDeviceVulkan11Features f11 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
		.pNext = &f12,
	};
	VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
	};
	const bool has_cm = vkext_has(d->phys, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
	if (has_cm)
		f12.pNext = &fcm;
	/* the compiler's statistics per pipeline, only wanted at debug level */
	VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fex = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
		.pNext = f12.pNext,
	};
	const bool has_ex = log_level() >= LOG_LEVEL_DEBUG &&
			    vkext_has(d->phys, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
	if (has_ex)
		f12.pNext = &fex;
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
	vkGetPhysicalDeviceFeatures2(d->phys, &f2);
	if (!f12.timelineSemaphore) {
		snprintf(err, errlen, "%s lacks timeline semaphores", d->props.deviceName);
		return -1;
	}
	VkPhysicalDeviceVulkan12Features en12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.timelineSemaphore = VK_TRUE,
		/* streamed jobs reset their per-step timestamps on the host
		 * (stream.c): their uploads may start before the compute queue
		 * could reset them */
		.hostQueryReset = f12.hostQueryReset,
	};
	d->host_query_reset = f12.hostQueryReset;
	/* 16-bit storage lets the f16/bf16 kernels load and store their tensors */
	d->storage16 = f11.storageBuffer16BitAccess;
	if (env->fault_no_storage16) {
		/* debug switch: behave like a device without 16-bit storage */
		log_warn("VKGRAD_FAULT_NO_STORAGE16: f16 and bf16 disabled");
		d->storage16 = false;
	}
	d->coopmat = has_cm && fcm.cooperativeMatrix && f12.shaderFloat16 && f12.vulkanMemoryModel &&
		     f11.storageBuffer16BitAccess && coopmat_shape_ok(d->phys, d->instance) &&
		     subgroup_size(d->phys) == 32 && !env->no_coopmat;
	cmk_query(&d->cmk, d->instance, d->phys, d->storage16, subgroup_size(d->phys), d->api_version, env);
	VkPhysicalDeviceCooperativeMatrixFeaturesNV encm = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
		.cooperativeMatrix = VK_TRUE,
	};
	if (d->coopmat) {
		en12.shaderFloat16 = VK_TRUE;
		en12.vulkanMemoryModel = VK_TRUE;
		en12.pNext = &encm;
	}
	d->exec_stats = has_ex && fex.pipelineExecutableInfo;
	VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR enex = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
		.pNext = en12.pNext,
		.pipelineExecutableInfo = VK_TRUE,
	};
	if (d->exec_stats)
		en12.pNext = &enex;
	const char *dext[12] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
	uint32_t ndext = 1;
	void *next = en12.pNext;
	cmk_enable(&d->cmk, &next, dext, &ndext, &en12);
	en12.pNext = next;
	VkPhysicalDeviceVulkan11Features en11 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
		.pNext = &en12,
		.storageBuffer16BitAccess = f11.storageBuffer16BitAccess,
	};
	static const float prio[2] = {1.0f, 1.0f};
	pick_transfer(d, env);
	{
		VkQueueFamilyProperties qf[16];
		device_queue_families(d->phys, qf);
		d->compute_queues = qf[d->queue_family].queueCount >= 2 ? 2 : 1;
	}
	VkDeviceQueueCreateInfo qci[2] = {{
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = d->queue_family,
		.queueCount = d->compute_queues,
		.pQueuePriorities = prio,
	}, {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = d->xfer_family,
		.queueCount = d->xfer_queues,
		.pQueuePriorities = prio,
	}};
	/* VKGRAD_NO_CALIBRATION: debug switch, traces as on a device without it */
	d->calibrated = calibrateable(d->instance, d->phys) && !env->no_calibration;
	if (d->calibrated)
		dext[ndext++] = VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME;
	if (d->exec_stats)
		dext[ndext++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
	if (d->coopmat)
		dext[ndext++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
	if (d->host_import) {
		dext[ndext++] = VK_KHR_EXTERNAL_MEMORY_EXTENSION_NAME;
		dext[ndext++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	}
	VkDeviceCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = &en11,
		.queueCreateInfoCount = d->xfer_queues ? 2 : 1,
		.pQueueCreateInfos = qci,
		.enabledExtensionCount = ndext,
		.ppEnabledExtensionNames = dext,
	};
	VkResult r = vkCreateDevice(d->phys, &dci, NULL, &d->dev);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "vkCreateDevice(%s) failed (VkResult %d)", d->props.deviceName, r);
		return -1;
	}
	return device_created(d, err, errlen);
}

/* d->info (what hello reports) and the log lines naming the device. */
static void device_describe(device *d, int pick, const VkPhysicalDeviceDriverProperties *drv,
			    bool cpu_staged)
{
	proto_device_info *in = &d->info;
	snprintf(in->name, sizeof(in->name), "%.127s", d->props.deviceName);
	in->vendor_id = d->props.vendorID;
	in->device_id = d->props.deviceID;
	snprintf(in->driver, sizeof(in->driver), "%.60s %.60s", drv->driverName, drv->driverInfo);
	snprintf(in->api, sizeof(in->api), "%u.%u.%u", VK_API_VERSION_MAJOR(d->props.apiVersion),
		 VK_API_VERSION_MINOR(d->props.apiVersion), VK_API_VERSION_PATCH(d->props.apiVersion));
	snprintf(in->type, sizeof(in->type), "%s", device_type_name(d->props.deviceType));
	char used[2][40];
	for (int t = PROTO_F16; t <= PROTO_BF16; t++)
		if (d->cmk.ok[t])
			snprintf(used[t - PROTO_F16], sizeof(used[0]), "%s %ux%ux%u", proto_dtype_name((proto_dtype)t),
				 d->cmk.shape[t].m, d->cmk.shape[t].n, d->cmk.shape[t].k);
		else
			snprintf(used[t - PROTO_F16], sizeof(used[0]), "%s no", proto_dtype_name((proto_dtype)t));
	log_info("matrix extensions: VK_KHR_cooperative_matrix %s (used: %s, %s), VK_NV_cooperative_matrix %s "
		 "(used: %s), VK_NV_cooperative_matrix2 %s (used: f16 %s, bf16 %s; %u workgroup-scope shapes), "
		 "VK_KHR_shader_bfloat16 %s",
		 vkext_has(d->phys, "VK_KHR_cooperative_matrix") ? "yes" : "no", used[0], used[1],
		 vkext_has(d->phys, "VK_NV_cooperative_matrix") ? "yes" : "no", d->coopmat ? "yes" : "no",
		 vkext_has(d->phys, "VK_NV_cooperative_matrix2") ? "yes" : "no",
		 d->cmk.nv2_ok[PROTO_F16] ? "yes" : "no", d->cmk.nv2_ok[PROTO_BF16] ? "yes" : "no",
		 d->cmk.nv2[PROTO_F16].n, vkext_has(d->phys, "VK_KHR_shader_bfloat16") ? "yes" : "no");
	log_notice("using device %d: %s (%s, %s, Vulkan %s), host-memory import %s", pick, in->name,
		   in->type, in->driver, in->api,
		   d->host_import ? "available"
		   : cpu_staged ? "off on a CPU device (its threads would read client memory "
				  "unguarded): staging copies"
				: "unavailable: staging copies");
}

int device_open(device *d, const char *want, const config_env *env, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	d->validation = env->validation;
	uint32_t api;
	if (device_instance(d, env->validation, &api, err, errlen) != 0)
		return -1;
	int pick;
	if (device_pick(d, want, &pick, err, errlen) != 0)
		goto fail;
	VkPhysicalDeviceDriverProperties drv;
	const bool cpu_staged = device_properties(d, api, env, &drv);
	if (device_create(d, env, err, errlen) != 0)
		goto fail;
	device_describe(d, pick, &drv, cpu_staged);
	return 0;
fail:
	device_close(d);
	return -1;
}

void device_close(device *d)
{
	if (d->dev) {
		vkDeviceWaitIdle(d->dev);
		vkDestroyDevice(d->dev, NULL);
	}
	if (d->messenger) {
		PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)
			vkGetInstanceProcAddr(d->instance, "vkDestroyDebugUtilsMessengerEXT");
		if (destroy)
			destroy(d->instance, d->messenger, NULL);
	}
	if (d->instance)
		vkDestroyInstance(d->instance, NULL);
	d->dev = NULL;
	d->instance = NULL;
	d->messenger = VK_NULL_HANDLE;
}

void device_keep_drivers(const char *v)
{
	char buf[512];
	if (!v || strlen(v) >= sizeof(buf))
		return;
	strcpy(buf, v);
	for (char *save = NULL, *lib = strtok_r(buf, ":", &save); lib; lib = strtok_r(NULL, ":", &save))
		if (!dlopen(lib, RTLD_LAZY | RTLD_NODELETE))
			log_debug("VKGRAD_KEEP_DRIVERS: %s not loaded: %s", lib, dlerror());
}

int device_memory_type(const device *d, uint32_t bits, VkMemoryPropertyFlags flags)
{
	for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
		if ((bits & (1u << i)) && (d->mem.memoryTypes[i].propertyFlags & flags) == flags)
			return (int)i;
	return -1;
}

void device_clamp_limits(const device *d, proto_limits *l)
{
	uint64_t range = d->props.limits.maxStorageBufferRange;
	uint64_t slack = d->props.limits.minStorageBufferOffsetAlignment;
	if (l->max_tensor_bytes > range - slack)
		l->max_tensor_bytes = range - slack;
	uint64_t gx = (uint64_t)d->props.limits.maxComputeWorkGroupCount[0] * 16;
	if (l->max_dim > gx)
		l->max_dim = gx;
}

void device_stats(const device *d, proto_stats *st)
{
	st->validation_errors = atomic_load(&d->validation_errors);
}
