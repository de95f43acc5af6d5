/* tests/common/shm.c — see shm.h. */
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

int shm_create(size_t file_size, bool seal, size_t map_size, void **map)
{
	int e;
	int fd = memfd_create("vkgrad-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)file_size) != 0)
		goto fail;
	if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
		goto fail;
	if (map) {
		void *p = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED)
			goto fail;
		*map = p;
	}
	return fd;
fail:
	e = errno;
	close(fd);
	return -e;
}
