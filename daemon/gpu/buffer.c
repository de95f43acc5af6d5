/* daemon/gpu/buffer.c — see buffer.h. */
#include "buffer.h"

#include <stdio.h>

int gpu_memory_type(const device *d, uint32_t bits, VkMemoryPropertyFlags required,
		    VkMemoryPropertyFlags preferred, VkMemoryPropertyFlags avoided)
{
	const VkMemoryPropertyFlags want = required | preferred;
	if (avoided)
		for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++) {
			VkMemoryPropertyFlags f = d->mem.memoryTypes[i].propertyFlags;
			if ((bits & (1u << i)) && (f & want) == want && !(f & avoided))
				return (int)i;
		}
	int mt = device_memory_type(d, bits, want);
	return mt >= 0 || !preferred ? mt : device_memory_type(d, bits, required);
}

VkResult gpu_buffer_create(const device *d, const gpu_buffer_info *info, VkBuffer *buf,
			   VkDeviceMemory *mem, void **map, char *err, size_t errlen)
{
	const gpu_host_import *imp = info->import;
	*buf = VK_NULL_HANDLE;
	*mem = VK_NULL_HANDLE;
	if (map)
		*map = NULL;
	VkExternalMemoryBufferCreateInfo ebci = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = imp ? &ebci : NULL,
		.size = info->size,
		.usage = info->usage,
	};
	if (info->shared)
		device_buffer_sharing(d, &bci);
	VkResult r = vkCreateBuffer(d->dev, &bci, NULL, buf);
	if (r != VK_SUCCESS) {
		*buf = VK_NULL_HANDLE;
		snprintf(err, errlen, "creating a %llu-byte %s buffer failed (VkResult %d)",
			 (unsigned long long)info->size, info->what, r);
		return r;
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->dev, *buf, &req);
	const uint32_t bits = req.memoryTypeBits & (imp ? imp->type_bits : ~0u);
	const int mt = gpu_memory_type(d, bits, info->required, info->preferred, info->avoided);
	if (mt < 0) {
		r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
		snprintf(err, errlen, "no memory type with flags 0x%x for the %s buffer (VkResult %d)",
			 (unsigned)info->required, info->what, r);
		goto fail;
	}
	if (imp && req.size > imp->len) {
		r = VK_ERROR_INVALID_EXTERNAL_HANDLE;
		snprintf(err, errlen, "the %s buffer needs %llu bytes, more than the %llu imported "
			 "(VkResult %d)", info->what, (unsigned long long)req.size,
			 (unsigned long long)imp->len, r);
		goto fail;
	}
	VkImportMemoryHostPointerInfoEXT himp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = imp ? imp->ptr : NULL,
	};
	VkMemoryAllocateInfo mai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = imp ? &himp : NULL,
		.allocationSize = imp ? imp->len : req.size,
		.memoryTypeIndex = (uint32_t)mt,
	};
	r = vkAllocateMemory(d->dev, &mai, NULL, mem);
	if (r != VK_SUCCESS) {
		*mem = VK_NULL_HANDLE;
		snprintf(err, errlen, "%s %llu bytes of memory (type %d) for the %s buffer failed "
			 "(VkResult %d)", imp ? "importing" : "allocating",
			 (unsigned long long)mai.allocationSize, mt, info->what, r);
		goto fail;
	}
	r = vkBindBufferMemory(d->dev, *buf, *mem, 0);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "binding the %s buffer to its memory failed (VkResult %d)",
			 info->what, r);
		goto fail;
	}
	if (info->map) {
		r = vkMapMemory(d->dev, *mem, 0, VK_WHOLE_SIZE, 0, map);
		if (r != VK_SUCCESS) {
			*map = NULL;
			snprintf(err, errlen, "mapping the %s buffer's memory failed (VkResult %d)",
				 info->what, r);
			goto fail;
		}
	}
	return VK_SUCCESS;
fail:
	gpu_buffer_destroy(d, buf, mem);
	return r;
}

void gpu_buffer_destroy(const device *d, VkBuffer *buf, VkDeviceMemory *mem)
{
	if (*buf)
		vkDestroyBuffer(d->dev, *buf, NULL);
	if (*mem)
		vkFreeMemory(d->dev, *mem, NULL);
	*buf = VK_NULL_HANDLE;
	*mem = VK_NULL_HANDLE;
}
