/* daemon/gpu/pipelines_priv.h — what pipelines.c (the pipelines' creation)
 * shares with pipeline_cache.c (the cache file) and pipeline_exec_stats.c
 * (the compiler's statistics). Not for other modules: pipelines.h is the
 * interface. */
#ifndef VKG_DAEMON_PIPELINES_PRIV_H
#define VKG_DAEMON_PIPELINES_PRIV_H

#include <stddef.h>

#include <vulkan/vulkan.h>

#include "device.h"
#include "pipelines.h"

/* ---- pipeline_cache.c ---- */
/* p->cache_path for cache_dir (NULL or "": none), left "" where the file
 * could not persist (a path too long, a directory that cannot be made or
 * that others could write); p->cache, seeded from that file where its
 * header names this device and driver (one the driver rejects: a cold
 * cache). 0, or -1 with err when vkCreatePipelineCache fails. */
int pipelines_cache_open(pipelines *p, const device *d, const char *cache_dir, char *err, size_t errlen);

/* ---- pipeline_exec_stats.c ---- */
/* One debug line with what the compiler says of pipeline p (registers,
 * spills, shared memory... whatever the driver reports), for each of its
 * executables; d->exec_stats must be set. */
void pipelines_log_exec_stats(const device *d, VkPipeline p, const char *name, const char *dtype);

#endif
