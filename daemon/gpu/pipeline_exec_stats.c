/* daemon/gpu/pipeline_exec_stats.c — what the compiler says of each pipeline
 * (VK_KHR_pipeline_executable_properties), logged at debug level. */
#include "pipelines_priv.h"

#include "log.h"

#include <stdio.h>

/* One debug line with what the compiler says of pipeline p (registers,
 * spills, shared memory... whatever the driver reports), for each of its
 * executables. */
void pipelines_log_exec_stats(const device *d, VkPipeline p, const char *name, const char *dtype)
{
	VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p};
	VkPipelineExecutablePropertiesKHR props[4];
	uint32_t n = 4;
	for (uint32_t i = 0; i < n; i++)
		props[i] = (VkPipelineExecutablePropertiesKHR){
			.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
	VkResult r = d->get_exec_props(d->dev, &pi, &n, props);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE)
		return;
	for (uint32_t e = 0; e < n; e++) {
		VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
						  .pipeline = p, .executableIndex = e};
		VkPipelineExecutableStatisticKHR st[32];
		uint32_t ns = 32;
		for (uint32_t i = 0; i < ns; i++)
			st[i] = (VkPipelineExecutableStatisticKHR){
				.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
		r = d->get_exec_stats(d->dev, &ei, &ns, st);
		if (r != VK_SUCCESS && r != VK_INCOMPLETE)
			continue;
		char line[2048];
		size_t at = 0;
		for (uint32_t i = 0; i < ns && at < sizeof(line); i++) {
			const VkPipelineExecutableStatisticKHR *s = &st[i];
			int w;
			switch (s->format) {
			case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
				w = snprintf(line + at, sizeof(line) - at, "; %s=%s", s->name, s->value.b32 ? "yes" : "no");
				break;
			case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
				w = snprintf(line + at, sizeof(line) - at, "; %s=%lld", s->name, (long long)s->value.i64);
				break;
			case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
				w = snprintf(line + at, sizeof(line) - at, "; %s=%llu", s->name,
					     (unsigned long long)s->value.u64);
				break;
			default:
				w = snprintf(line + at, sizeof(line) - at, "; %s=%g", s->name, s->value.f64);
				break;
			}
			if (w < 0)
				break;
			at += (size_t)w;
		}
		line[sizeof(line) - 1] = 0;
		log_debug("pipeline %s %s, executable %s (subgroup %u)%s", name, dtype, props[e].name,
			  props[e].subgroupSize, at ? line : "; no statistics");
	}
}
