/* daemon/gpu/device_select.c — which physical device (see device.h): the
 * usable ones (Vulkan 1.2+, a compute queue family, push descriptors), the
 * default among them, the one --device names, and --list-devices. */
#include "device.h"
#include "device_priv.h"
#include "vkext.h"

#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *device_type_name(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
	default: return "other";
	}
}

static int type_rank(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
	default: return 4;
	}
}

/* Vulkan's deviceUUID as 8-4-4-4-12 hex digits (out: 37 bytes). */
static void uuid_string(VkPhysicalDevice p, char *out)
{
	VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id};
	vkGetPhysicalDeviceProperties2(p, &p2);
	char *o = out;
	for (unsigned i = 0; i < VK_UUID_SIZE; i++) {
		o += sprintf(o, "%02x", id.deviceUUID[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			*o++ = '-';
	}
	*o = 0;
}

/* `want` names this UUID: all of it, or its first 8 or more characters. */
static bool uuid_matches(const char *uuid, const char *want)
{
	size_t n = strlen(want);
	return n >= 8 && n <= 36 && strncasecmp(uuid, want, n) == 0;
}

/* The first (up to) 16 queue families of p into q; returns their count. */
uint32_t device_queue_families(VkPhysicalDevice p, VkQueueFamilyProperties q[16])
{
	uint32_t n = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(p, &n, NULL);
	if (n > 16)
		n = 16;
	vkGetPhysicalDeviceQueueFamilyProperties(p, &n, q);
	return n;
}

/* A device we can use: Vulkan 1.2+, a compute queue, push descriptors. */
static bool usable(VkPhysicalDevice p, uint32_t *qfam)
{
	VkPhysicalDeviceProperties pr;
	vkGetPhysicalDeviceProperties(p, &pr);
	if (pr.apiVersion < VK_API_VERSION_1_2 || !vkext_has(p, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
		return false;
	VkQueueFamilyProperties q[16];
	const uint32_t n = device_queue_families(p, q);
	/* prefer a compute family, the first one with compute otherwise */
	int best = -1;
	for (uint32_t i = 0; i < n; i++) {
		if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
			continue;
		if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
			best = (int)i;
		if (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
			break;
	}
	if (best < 0)
		return false;
	*qfam = (uint32_t)best;
	return true;
}

/* The device `want` names (an index, a UUID, or text of its name; NULL or
 * empty: the first of the best type), with a compute queue family. */
int device_pick(device *d, const char *want, int *picked, char *err, size_t errlen)
{
	uint32_t n = 0;
	vkEnumeratePhysicalDevices(d->instance, &n, NULL);
	VkPhysicalDevice phys[16];
	if (n > 16)
		n = 16;
	vkEnumeratePhysicalDevices(d->instance, &n, phys);
	int pick = -1, pick_rank = 99;
	uint32_t pick_q = 0;
	char *end = NULL;
	long idx = want && *want ? strtol(want, &end, 10) : -1;
	bool by_index = want && *want && end && *end == 0;
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties pr;
		vkGetPhysicalDeviceProperties(phys[i], &pr);
		uint32_t q;
		bool ok = usable(phys[i], &q);
		log_info("device %u: %s (%s)%s", i, pr.deviceName, device_type_name(pr.deviceType),
			 ok ? "" : " — unusable: needs Vulkan 1.2, compute, VK_KHR_push_descriptor");
		if (!ok)
			continue;
		char uuid[37];
		uuid_string(phys[i], uuid);
		if (by_index) {
			if ((long)i == idx)
				pick = (int)i, pick_q = q;
		} else if (want && *want) {
			/* a UUID wins over a name that merely contains the text */
			if (uuid_matches(uuid, want) || (pick < 0 && strstr(pr.deviceName, want)))
				pick = (int)i, pick_q = q;
		} else if (type_rank(pr.deviceType) < pick_rank) {
			pick = (int)i, pick_q = q, pick_rank = type_rank(pr.deviceType);
		}
	}
	if (pick < 0) {
		snprintf(err, errlen, "no usable Vulkan device%s%s%s", want && *want ? " matches '" : "",
			 want && *want ? want : "", want && *want ? "'" : "");
		return -1;
	}
	d->phys = phys[pick];
	d->queue_family = pick_q;
	*picked = pick;
	return 0;
}

/* ---- --list-devices ------------------------------------------------------ */

static void list_one(FILE *out, VkPhysicalDevice p, uint32_t i, bool is_default)
{
	VkPhysicalDeviceProperties pr;
	vkGetPhysicalDeviceProperties(p, &pr);
	VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
	VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT, .pNext = &drv};
	const bool has_pci = vkext_has(p, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
					  .pNext = has_pci ? (void *)&pci : (void *)&drv};
	vkGetPhysicalDeviceProperties2(p, &p2);
	VkPhysicalDeviceMemoryProperties mem;
	vkGetPhysicalDeviceMemoryProperties(p, &mem);
	uint64_t local = 0;
	for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
		if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
			local += mem.memoryHeaps[h].size;
	char uuid[37];
	uuid_string(p, uuid);
	uint32_t q;
	const bool ok = usable(p, &q);
	fprintf(out, "%u: %s (%s%s)\n", i, pr.deviceName, device_type_name(pr.deviceType),
		is_default ? ", the default" : "");
	fprintf(out, "    driver  %s %s, Vulkan %u.%u.%u\n", drv.driverName, drv.driverInfo,
		VK_API_VERSION_MAJOR(pr.apiVersion), VK_API_VERSION_MINOR(pr.apiVersion),
		VK_API_VERSION_PATCH(pr.apiVersion));
	fprintf(out, "    memory  %.1f GiB device-local\n", (double)local / (double)(1ull << 30));
	fprintf(out, "    ids     vendor 0x%04x device 0x%04x\n", pr.vendorID, pr.deviceID);
	fprintf(out, "    uuid    %s\n", uuid);
	if (has_pci)
		fprintf(out, "    pci     %04x:%02x:%02x.%x\n", pci.pciDomain, pci.pciBus, pci.pciDevice,
			pci.pciFunction);
	/* the queue families: a transfer-only one is what copies could overlap
	 * compute on (issue 15) */
	VkQueueFamilyProperties qf[16];
	const uint32_t nq = device_queue_families(p, qf);
	for (uint32_t f = 0; f < nq; f++) {
		const VkQueueFlags fl = qf[f].queueFlags;
		fprintf(out, "    queues  family %u: %u x%s%s%s%s, timestamps %u bits\n", f, qf[f].queueCount,
			fl & VK_QUEUE_GRAPHICS_BIT ? " graphics" : "", fl & VK_QUEUE_COMPUTE_BIT ? " compute" : "",
			fl & VK_QUEUE_TRANSFER_BIT ? " transfer" : "",
			fl & VK_QUEUE_SPARSE_BINDING_BIT ? " sparse" : "", qf[f].timestampValidBits);
	}
	if (ok)
		fprintf(out, "    usable  yes: vkgradd --device %u (or --device %.8s); unit vkgradd@%u.socket\n",
			i, uuid, i);
	else
		fprintf(out, "    usable  no: needs Vulkan 1.2, a compute queue and VK_KHR_push_descriptor\n");
}

int device_list(FILE *out, char *err, size_t errlen)
{
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
				 .pApplicationName = "vkgradd",
				 .apiVersion = VK_API_VERSION_1_2};
	VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
				    .pApplicationInfo = &app};
	VkInstance inst;
	VkResult r = vkCreateInstance(&ici, NULL, &inst);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "vkCreateInstance failed (VkResult %d)", r);
		return -1;
	}
	uint32_t n = 0;
	vkEnumeratePhysicalDevices(inst, &n, NULL);
	VkPhysicalDevice phys[16];
	if (n > 16)
		n = 16;
	vkEnumeratePhysicalDevices(inst, &n, phys);
	/* the one device_open takes without --device */
	int def = -1, def_rank = 99;
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties pr;
		uint32_t q;
		vkGetPhysicalDeviceProperties(phys[i], &pr);
		if (usable(phys[i], &q) && type_rank(pr.deviceType) < def_rank)
			def = (int)i, def_rank = type_rank(pr.deviceType);
	}
	fprintf(out, "%u Vulkan device(s); --device takes the index, the UUID (or its first 8+\n"
		"characters) or a part of the name\n", n);
	for (uint32_t i = 0; i < n; i++)
		list_one(out, phys[i], i, (int)i == def);
	vkDestroyInstance(inst, NULL);
	return 0;
}
