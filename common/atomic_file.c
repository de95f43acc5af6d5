/* common/atomic_file.c — see atomic_file.h. */
#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_SUFFIX ".tmp.XXXXXX"

/* All of buf to fd: 0 or -errno. */
static int write_all(int fd, const char *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, buf + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		off += (size_t)w;
	}
	return 0;
}

int atomic_file_write(const char *path, const void *buf, size_t len, mode_t mode, char *err,
		      size_t errlen)
{
	const size_t n = strlen(path) + sizeof(TMP_SUFFIX);
	char *tmp = malloc(n);
	if (!tmp) {
		snprintf(err, errlen, "writing %s: out of memory", path);
		return -ENOMEM;
	}
	snprintf(tmp, n, "%s" TMP_SUFFIX, path);
	int rc = 0;
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "creating %s: %s", tmp, strerror(-rc));
		goto out;
	}
	const char *step = "writing";
	rc = write_all(fd, buf, len);
	if (rc == 0) {
		step = "setting the mode of";
		rc = fchmod(fd, mode) != 0 ? -errno : 0;
	}
	if (rc == 0) {
		step = "syncing";
		rc = fsync(fd) != 0 ? -errno : 0;
	}
	if (close(fd) != 0 && rc == 0) {
		step = "closing";
		rc = -errno;
	}
	if (rc == 0 && rename(tmp, path) != 0) {
		rc = -errno;
		snprintf(err, errlen, "renaming %s to %s: %s", tmp, path, strerror(-rc));
	} else if (rc != 0) {
		snprintf(err, errlen, "%s %s: %s", step, tmp, strerror(-rc));
	}
	if (rc != 0)
		unlink(tmp);
out:
	free(tmp);
	return rc;
}
