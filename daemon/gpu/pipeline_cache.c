/* daemon/gpu/pipeline_cache.c — the pipeline cache file (see pipelines.h):
 * its path per device and driver, a directory it may safely live in, the
 * load that trusts only a regular file whose header names this device,
 * and the atomic save. */
#include "pipelines.h"
#include "pipelines_priv.h"

#include "common/atomic_file.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAX_BYTES (64u << 20)

static int mkdir_p(const char *path)
{
	char tmp[sizeof(((pipelines *)0)->cache_path)];
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = tmp + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(tmp, 0700) && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(tmp, 0700) && errno != EEXIST ? -1 : 0;
}

/* May the cache live in dir? Not where another user could plant or swap
 * files: a directory writable by others (or by a group that is not the
 * daemon's) unless it is sticky and the daemon's own (then only we may
 * remove or rename what is ours in it), nor one owned by another user
 * (root aside). A refusal is logged. */
static bool cache_dir_safe(const char *dir)
{
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		log_warn("cache directory %s: %s; the pipeline cache will not persist", dir,
			 errno ? strerror(errno) : "not a directory");
		return false;
	}
	const uid_t me = geteuid();
	const bool others = (st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getegid());
	const bool sticky_mine = (st.st_mode & S_ISVTX) && st.st_uid == me;
	if ((st.st_uid != me && st.st_uid != 0) || (others && !sticky_mine)) {
		log_warn("cache directory %s (mode %04o, owner uid %u, group %u) may be written by "
			 "others; the pipeline cache is neither read nor saved there (make it 0700, "
			 "or sticky and owned by uid %u)", dir, (unsigned)(st.st_mode & 07777),
			 (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)me);
		return false;
	}
	return true;
}

/* Read the cache file if its header names this device and driver. It is
 * opened without blocking (a FIFO there would block the open until a
 * writer came) and read only when it is a regular file. */
static void *load_cache(const char *path, const device *d, size_t *len)
{
	*len = 0;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno != ENOENT)
			log_warn("pipeline cache %s: %s; starting cold", path, strerror(errno));
		return NULL;
	}
	uint8_t *buf = NULL;
	struct stat st;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > CACHE_MAX_BYTES) {
		log_warn("pipeline cache %s: not a regular file of 1..%u bytes; ignored", path,
			 CACHE_MAX_BYTES);
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (!buf || got != (size_t)st.st_size) {
		log_warn("pipeline cache %s: short read; ignored", path);
		goto bad;
	}
	VkPipelineCacheHeaderVersionOne h;
	if ((size_t)st.st_size < sizeof(h)) {
		log_warn("pipeline cache %s: truncated header; ignored", path);
		goto bad;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.headerSize < sizeof(h) || h.headerSize > (uint32_t)st.st_size ||
	    h.headerVersion != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
	    h.vendorID != d->props.vendorID || h.deviceID != d->props.deviceID ||
	    memcmp(h.pipelineCacheUUID, d->props.pipelineCacheUUID, VK_UUID_SIZE) != 0) {
		log_warn("pipeline cache %s: header is from another device or driver; ignored", path);
		goto bad;
	}
	*len = (size_t)st.st_size;
	goto out;
bad:
	free(buf);
	buf = NULL;
out:
	close(fd);
	return buf;
}

int pipelines_cache_open(pipelines *p, const device *d, const char *cache_dir, char *err, size_t errlen)
{
	void *data = NULL;
	size_t len = 0;
	if (cache_dir && *cache_dir) {
		char uuid[2 * VK_UUID_SIZE + 1];
		for (int i = 0; i < (int)VK_UUID_SIZE; i++)
			sprintf(uuid + 2 * i, "%02x", d->props.pipelineCacheUUID[i]);
		/* never cut: a cut path names some other file */
		int n = snprintf(p->cache_path, sizeof(p->cache_path),
				 "%s/pipelines-%04x-%04x-%08x-%s.bin", cache_dir, d->props.vendorID,
				 d->props.deviceID, d->props.driverVersion, uuid);
		if (n < 0 || (size_t)n + sizeof(".tmp.XXXXXX") > sizeof(p->cache_path)) {
			log_warn("cache directory %s: the cache file's path would be %d bytes, more than "
				 "%zu; the pipeline cache will not persist", cache_dir, n,
				 sizeof(p->cache_path) - sizeof(".tmp.XXXXXX"));
			p->cache_path[0] = 0;
		} else if (mkdir_p(cache_dir) != 0) {
			log_warn("cache directory %s: %s; the pipeline cache will not persist",
				 cache_dir, strerror(errno));
			p->cache_path[0] = 0;
		} else if (!cache_dir_safe(cache_dir)) {
			p->cache_path[0] = 0;
		} else {
			data = load_cache(p->cache_path, d, &len);
		}
	}
	VkPipelineCacheCreateInfo pcci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
		.initialDataSize = len,
		.pInitialData = data,
	};
	VkResult r = vkCreatePipelineCache(d->dev, &pcci, NULL, &p->cache);
	if (r != VK_SUCCESS && data) {
		log_warn("pipeline cache %s rejected by the driver (VkResult %d); starting cold",
			 p->cache_path, r);
		pcci.initialDataSize = 0;
		pcci.pInitialData = NULL;
		r = vkCreatePipelineCache(d->dev, &pcci, NULL, &p->cache);
	}
	free(data);
	if (r != VK_SUCCESS) {
		snprintf(err, errlen, "vkCreatePipelineCache failed (VkResult %d)", r);
		return -1;
	}
	if (len)
		log_info("pipeline cache loaded: %s (%zu bytes)", p->cache_path, len);
	return 0;
}

void pipelines_save(const pipelines *p, const device *d)
{
	if (!p->cache_path[0] || !p->cache)
		return;
	size_t len = 0;
	if (vkGetPipelineCacheData(d->dev, p->cache, &len, NULL) != VK_SUCCESS || len == 0)
		return;
	void *data = malloc(len);
	if (!data)
		return;
	/* a new file of its own (O_EXCL: it follows no symlink, takes nothing
	 * that exists), owner-only, renamed over the cache */
	char err[2 * sizeof(p->cache_path) + 64];
	if (vkGetPipelineCacheData(d->dev, p->cache, &len, data) == VK_SUCCESS) {
		if (atomic_file_write(p->cache_path, data, len, 0600, err, sizeof(err)) == 0)
			log_info("pipeline cache saved: %s (%zu bytes)", p->cache_path, len);
		else
			log_warn("pipeline cache %s not saved: %s", p->cache_path, err);
	}
	free(data);
}
