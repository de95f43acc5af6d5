/* daemon/gpu/vkext.c — see vkext.h. */
#include "vkext.h"

#include <stdlib.h>
#include <string.h>

bool vkext_has(VkPhysicalDevice p, const char *name)
{
	uint32_t n = 0;
	if (vkEnumerateDeviceExtensionProperties(p, NULL, &n, NULL) != VK_SUCCESS)
		return false;
	VkExtensionProperties *e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return false;
	if (vkEnumerateDeviceExtensionProperties(p, NULL, &n, e) < 0) {
		free(e);
		return false;
	}
	bool found = false;
	for (uint32_t i = 0; i < n && !found; i++)
		found = strcmp(e[i].extensionName, name) == 0;
	free(e);
	return found;
}
