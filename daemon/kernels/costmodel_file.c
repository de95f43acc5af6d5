/* daemon/kernels/costmodel_file.c — a measured cost model in the cache
 * directory (costmodel.h: costmodel_load, costmodel_save): one key line
 * naming what it must match, then a "fit" line per kernel and dtype. */
#include "costmodel.h"

#include "kernel_registry.h"
#include "kshape.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAX 8192 /* bytes: a model is about 2 KiB */

/* What a saved model must match: its format (2: with the narrow family's
 * fits, split-K's 16-bit long probe), the daemon's version, the kernels
 * (a hash of every registered SPIR-V module), the loop bound, and the
 * device and driver. */
static void model_key(const device *d, char *key, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over the kernels */
	for (unsigned i = 0; i < kreg_count; i++) {
		const unsigned char *b = (const unsigned char *)kreg_entries[i].spirv;
		for (size_t k = 0; k < kreg_entries[i].spirv_size; k++)
			h = (h ^ b[k]) * 1099511628211ull;
	}
	char uuid[2 * VK_UUID_SIZE + 1];
	for (int i = 0; i < (int)VK_UUID_SIZE; i++)
		snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
	snprintf(key, n, "vkgrad-costmodel 2 %s kernels %016llx trips %u device %04x %04x %08x %s", VKG_VERSION,
		 (unsigned long long)h, kshape_loop_trips(), d->props.vendorID, d->props.deviceID,
		 d->props.driverVersion, uuid);
}

/* dir/costmodel-VVVV-DDDD.txt into path; -1 when it does not fit. */
static int model_path(const device *d, const char *dir, char *path, size_t n)
{
	const int w = snprintf(path, n, "%s/costmodel-%04x-%04x.txt", dir, d->props.vendorID, d->props.deviceID);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

int costmodel_load(costmodel *m, const device *d, const char *dir, char *err, size_t errlen)
{
	char path[4096], key[256];
	memset(m, 0, sizeof(*m));
	if (model_path(d, dir, path, sizeof(path)) != 0) {
		snprintf(err, errlen, "the cache directory's path is too long");
		return -1;
	}
	/* not a FIFO or a device, not through a symlink, bounded */
	const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	char buf[FILE_MAX + 1];
	ssize_t len = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= FILE_MAX)
		len = read(fd, buf, FILE_MAX);
	close(fd);
	if (len < 0) {
		snprintf(err, errlen, "%s: not a regular file of at most %d bytes", path, FILE_MAX);
		return -1;
	}
	buf[len] = 0;
	model_key(d, key, sizeof(key));
	char *nl = strchr(buf, '\n');
	if (!nl || (size_t)(nl - buf) != strlen(key) || strncmp(buf, key, strlen(key)) != 0) {
		snprintf(err, errlen, "%s: made for another device, driver, daemon or loop bound", path);
		return -1;
	}
	for (char *line = nl + 1, *next; *line; line = next) {
		next = strchr(line, '\n');
		if (!next) {
			snprintf(err, errlen, "%s: a line without its end", path);
			goto bad;
		}
		*next++ = 0;
		int k, dt;
		costmodel_fit f = {.ok = true};
		if (sscanf(line, "fit %d %d %lf %lf %lf %lf", &k, &dt, &f.a, &f.g, &f.b, &f.c) != 6 || k < 0 ||
		    k >= KERN_COUNT || dt < 0 || dt >= PROTO_DTYPE_COUNT || !isfinite(f.a) || !isfinite(f.g) ||
		    !isfinite(f.b) || !isfinite(f.c) || f.a < 0 || f.g < 0 || f.b < 0 || f.c < 0) {
			snprintf(err, errlen, "%s: malformed line '%.60s'", path, line);
			goto bad;
		}
		m->fit[k][dt] = f;
	}
	return 0;
bad:
	memset(m, 0, sizeof(*m));
	return -1;
}

int costmodel_save(const costmodel *m, const device *d, const char *dir, char *err, size_t errlen)
{
	char path[4096], tmp[4096 + 16], key[256];
	if (model_path(d, dir, path, sizeof(path)) != 0 ||
	    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "the cache directory's path is too long");
		return -1;
	}
	/* a new file of its own (mkstemp: O_EXCL), renamed over the old */
	const int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	model_key(d, key, sizeof(key));
	fprintf(f, "%s\n", key);
	for (int k = 0; k < KERN_COUNT; k++)
		for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
			if (m->fit[k][dt].ok)
				fprintf(f, "fit %d %d %.17g %.17g %.17g %.17g\n", k, dt, m->fit[k][dt].a,
					m->fit[k][dt].g, m->fit[k][dt].b, m->fit[k][dt].c);
	const bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}
