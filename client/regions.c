/* client/regions.c — regions: shared memory the daemon's jobs read and
 * write. vkg_region_create makes a sealed memfd, maps it here and
 * registers it (the client keeps the mapping until destroy or close);
 * vkg_region_register_fd registers the caller's own descriptor. */
#include "vkgrad_priv.h"

#include "msg.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int maps_add(vkg_client *c, uint64_t region, void *ptr, size_t size)
{
	if (c->n_maps == c->cap_maps) {
		size_t cap = c->cap_maps ? c->cap_maps * 2 : 8;
		vkg_mapping *nm = realloc(c->maps, cap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		c->maps = nm;
		c->cap_maps = cap;
	}
	c->maps[c->n_maps++] = (vkg_mapping){region, ptr, size};
	return 0;
}

void *vkg_region_create(vkg_client *c, size_t size, uint64_t *region, vkg_error *err)
{
	vkg__clear_err(err);
	int rc, e;
	if (size == 0) {
		vkg__set_err(err, -EINVAL, "io", "region size must be at least 1 byte");
		errno = EINVAL;
		return NULL;
	}
	int fd = memfd_create("vkgrad-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		e = errno;
		vkg__set_err(err, -e, "io", "memfd_create: %s", strerror(e));
		goto error;
	}
	if (ftruncate(fd, (off_t)size) < 0) {
		e = errno;
		vkg__set_err(err, -e, "io", "ftruncate memfd to %zu bytes: %s", size, strerror(e));
		goto error_close;
	}
	/* The daemon refuses a region that could shrink under the GPU. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
		e = errno;
		vkg__set_err(err, -e, "io", "sealing memfd (F_SEAL_SHRINK): %s", strerror(e));
		goto error_close;
	}
	void *ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ptr == MAP_FAILED) {
		e = errno;
		vkg__set_err(err, -e, "io", "mmap of %zu bytes: %s", size, strerror(e));
		goto error_close;
	}
	proto_request req = {.op = PROTO_OP_REGISTER, .size = size};
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	rc = vkg__conn_call(c, &req, fd, NULL, NULL, &id, err);
	if (rc == 0 && maps_add(c, id, ptr, size) != 0)
		rc = vkg__set_err(err, -ENOMEM, "io", "out of memory");
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		/* a remote error is not an errno; callers read err instead */
		e = rc == VKG_EREMOTE ? EIO : -rc;
		goto error_unmap;
	}
	/* The daemon holds its own reference now; the mapping keeps ours. */
	close(fd);
	if (region)
		*region = id;
	return ptr;

error_unmap:
	munmap(ptr, size);
error_close:
	close(fd);
error:
	errno = e;
	return NULL;
}

int vkg_region_register_fd(vkg_client *c, int fd, size_t size, uint64_t *region, vkg_error *err)
{
	vkg__clear_err(err);
	if (size == 0)
		return vkg__set_err(err, -EINVAL, "io", "region size must be at least 1 byte");
	if (fd < 0)
		return vkg__set_err(err, -EBADF, "io", "region descriptor %d is not open", fd);
	proto_request req = {.op = PROTO_OP_REGISTER, .size = size};
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_call(c, &req, fd, NULL, NULL, &id, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && region)
		*region = id;
	return rc;
}

int vkg_region_destroy(vkg_client *c, uint64_t region, void *ptr, size_t size, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req = {.op = PROTO_OP_UNREGISTER, .region = region};
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_call(c, &req, -1, NULL, NULL, NULL, err);
	/* Unmap even when the daemon refused: the mapping is ours alone, and a
	 * caller has no better way to release it. */
	for (size_t i = 0; i < c->n_maps; i++) {
		if (c->maps[i].region == region && c->maps[i].ptr == ptr) {
			c->maps[i] = c->maps[--c->n_maps];
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (ptr)
		munmap(ptr, size);
	return rc;
}
