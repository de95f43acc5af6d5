/* daemon/gpu/region.c — see region.h. */
#include "region.h"

#include "buffer.h"
#include "log.h"
#include "memguard.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

bool region_fault_unsealed;

/* set's list of live regions; a zero-initialised set is empty (region.h):
 * its head is made on first use. */
static queue_node *set_live(region_set *set)
{
	if (!set->live.next)
		queue_init(&set->live);
	return &set->live;
}

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* The region's buffer: storage, copied to and from by the engine and by
 * the transfer queue (stream.h). */
static gpu_buffer_info buffer_info(const char *what, VkDeviceSize size)
{
	return (gpu_buffer_info){
		.what = what,
		.size = size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.shared = true,
	};
}

/* Import the client's pages in place. Returns 0, or -1 (caller falls back). */
static int import_host(region *r, const device *d)
{
	if ((uintptr_t)r->map % d->import_align || r->map_len % d->import_align)
		return -1;
	VkMemoryHostPointerPropertiesEXT hp = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT,
	};
	if (d->get_host_pointer_props(d->dev,
				      VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
				      r->map, &hp) != VK_SUCCESS)
		return -1;
	const gpu_host_import imp = {.ptr = r->map, .len = r->map_len,
				     .type_bits = hp.memoryTypeBits};
	gpu_buffer_info bi = buffer_info("imported region", r->map_len);
	/* coherent memory, so outputs are visible in the client's mapping once
	 * the batch's host barrier and semaphore signal have passed */
	bi.required = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	bi.import = &imp;
	char err[160];
	if (gpu_buffer_create(d, &bi, &r->buf, &r->mem, NULL, err, sizeof(err)) != VK_SUCCESS) {
		log_debug("region of %llu bytes: %s; staged instead", (unsigned long long)r->size, err);
		return -1;
	}
	return 0;
}

/* A device buffer mirroring the region, copied in and out by the engine. */
static int make_staging(region *r, const device *d)
{
	gpu_buffer_info bi = buffer_info("staging", r->size);
	bi.required = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	bi.preferred = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
	bi.map = true;
	void *p = NULL;
	char err[160];
	if (gpu_buffer_create(d, &bi, &r->buf, &r->mem, &p, err, sizeof(err)) != VK_SUCCESS) {
		log_debug("region of %llu bytes: %s", (unsigned long long)r->size, err);
		return -1;
	}
	r->stage = p;
	r->staged = true;
	return 0;
}

/* What may be registered: shmem (tmpfs) files, i.e. memfds. A hole in a
 * shmem file reads as zeros and is filled on the first write, so a file
 * sealed against shrinking cannot make the daemon fault — except when the
 * kernel refuses a sparse memfd a page (strict overcommit accounting),
 * which the guarded copies (memguard.h) turn into a failed job.
 *
 * hugetlbfs (memfd_create with MFD_HUGETLB) is refused. Its pages come
 * from a pool the administrator sets aside (vm.nr_hugepages) that any
 * user can drain: punch a hole in the file, take the freed huge pages,
 * and every touch of the hole raises SIGBUS. The daemon's own copies are
 * guarded, but where the device reads the client's memory itself (a
 * region imported on a CPU device: the driver's threads), and for every
 * job of the region from then on, nothing good can come of it; huge pages
 * would only save TLB and IOMMU entries. Other file systems cannot carry
 * the seal; they are refused here with a clearer message. */
static int check_fs(int fd, proto_err *err)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return proto_fail(err, PROTO_BAD_REGION, "register: fstatfs on the descriptor failed: %s",
				  strerror(errno));
	if (sf.f_type == HUGETLBFS_MAGIC)
		return proto_fail(err, PROTO_BAD_REGION,
				  "register: the file is on hugetlbfs (MFD_HUGETLB): refused, since a hole "
				  "punched in it faults (SIGBUS) once its huge pages are taken; use a "
				  "memfd without MFD_HUGETLB");
	if (sf.f_type != TMPFS_MAGIC)
		return proto_fail(err, PROTO_BAD_REGION,
				  "register: the file is not shared memory (file system magic 0x%llx); "
				  "a memfd (memfd_create) is expected",
				  (unsigned long long)sf.f_type);
	return 0;
}

/* The live region of owner over the file (dev, ino), or NULL. A walk of
 * every live region: registrations are rare, and bounded by the limits. */
static const region *find_file(region_set *set, const void *owner, dev_t dev, ino_t ino)
{
	const queue_node *n;
	queue_foreach(n, set_live(set)) {
		const region *r = queue_data(n, region, live);
		if (r->owner == owner && r->file_dev == dev && r->file_ino == ino)
			return r;
	}
	return NULL;
}

int region_create(region **out, region_set *set, const device *d, int fd, uint64_t size,
		  bool allow_import, const void *owner, proto_err *err)
{
	region *r = NULL;
	struct stat st;
	int rc;
	*out = NULL;
	if (fstat(fd, &st) != 0) {
		rc = proto_fail(err, PROTO_BAD_REGION, "register: fstat on the descriptor failed: %s",
				strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = proto_fail(err, PROTO_BAD_REGION,
				"register: the descriptor is not a regular file (memfd expected)");
		goto out;
	}
	rc = check_fs(fd, err);
	if (rc != 0)
		goto out;
	int seals = fcntl(fd, F_GET_SEALS);
	if ((seals < 0 || !(seals & F_SEAL_SHRINK)) && !region_fault_unsealed) {
		rc = proto_fail(err, PROTO_BAD_REGION,
				"register: the file does not carry F_SEAL_SHRINK (seal it with fcntl F_ADD_SEALS)");
		goto out;
	}
	if ((uint64_t)st.st_size < size) {
		rc = proto_fail(err, PROTO_BAD_REGION,
				"register: key 'size' = %llu is larger than the file (%lld bytes)",
				(unsigned long long)size, (long long)st.st_size);
		goto out;
	}
	const region *twin = owner ? find_file(set, owner, st.st_dev, st.st_ino) : NULL;
	if (twin) {
		rc = proto_fail(err, PROTO_BAD_REGION,
				"register: this file is already registered on this connection as region %llu%s",
				(unsigned long long)twin->id,
				twin->on_release ? " (unregistered, but jobs still use it: wait for the "
						   "unregister reply)" : "");
		goto out;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		rc = proto_fail(err, PROTO_INTERNAL, "register: out of memory");
		goto out;
	}
	r->size = size;
	r->refs = 1;
	r->dev = d;
	r->file_dev = st.st_dev;
	r->file_ino = st.st_ino;
	r->owner = owner;
	r->uid = (uid_t)-1; /* the caller says whose (ops.c) */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t align = d->host_import && d->import_align > page ? d->import_align : page;
	r->map_len = round_up(size, align);
	/* Only the file's own pages may ever be touched; with map_len rounded
	 * past the last page of the file, import could pin pages beyond EOF, so
	 * then the region is staged instead. */
	bool import_ok = allow_import && d->host_import &&
			 r->map_len <= round_up((size_t)st.st_size, page);
	if (!import_ok)
		r->map_len = round_up(size, page);
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		rc = proto_fail(err, PROTO_BAD_REGION, "register: mmap of %zu bytes failed: %s",
				r->map_len, strerror(errno));
		goto fail;
	}
	if (!(import_ok && import_host(r, d) == 0) && make_staging(r, d) != 0) {
		rc = proto_fail(err, PROTO_LIMIT,
				"register: the device could not map or stage %llu bytes",
				(unsigned long long)size);
		goto fail;
	}
	r->set = set;
	queue_insert_head(set_live(set), &r->live);
	set->count++;
	set->bytes += size;
	if (r->staged)
		set->staged++;
	else
		set->imports++;
	*out = r;
	rc = 0;
	goto out;
fail:
	if (r->map)
		munmap(r->map, r->map_len);
	free(r);
out:
	close(fd);
	return rc;
}

int region_stage_copy(region *r, uint64_t off, uint64_t n, bool in, const char *what,
		      proto_err *err)
{
	const void *at = NULL;
	int rc = in ? memguard_copy(r->stage + off, r->map + off, n, &at)
		    : memguard_copy(r->map + off, r->stage + off, n, &at);
	if (rc == 0)
		return 0;
	if (rc != -EFAULT)
		return proto_fail(err, PROTO_INTERNAL, "copying '%s' of region %llu: %s",
				  what, (unsigned long long)r->id, strerror(-rc));
	const uint8_t *a = at;
	bool client = a >= r->map && a < r->map + r->map_len;
	return proto_fail(err, PROTO_BAD_REGION,
			  "region %llu faulted (SIGBUS) at byte %llu while the daemon "
			  "%s '%s': its file lost pages under the mapping (a hole that cannot be "
			  "filled, or a truncation)",
			  (unsigned long long)r->id,
			  (unsigned long long)(client ? (uint64_t)(a - r->map) : off),
			  in ? "read" : "wrote", what);
}

/* Drop the Vulkan objects (none after a device loss that is not yet
 * repaired); `staged` stays, it says how to make them again. */
static void gpu_release(region *r)
{
	const device *d = r->dev;
	if (r->stage)
		vkUnmapMemory(d->dev, r->mem);
	gpu_buffer_destroy(d, &r->buf, &r->mem);
	r->stage = NULL;
}

void region_gpu_release_all(region_set *set)
{
	queue_node *n;
	queue_foreach(n, set_live(set))
		gpu_release(queue_data(n, region, live));
}

int region_gpu_restore_all(region_set *set, const device *d, char *err, size_t errlen)
{
	queue_node *n;
	queue_foreach(n, set_live(set)) {
		region *r = queue_data(n, region, live);
		if (r->buf)
			continue;
		r->dev = d;
		if (!r->staged && import_host(r, d) == 0)
			continue;
		bool was_imported = !r->staged;
		if (make_staging(r, d) != 0) {
			snprintf(err, errlen, "region of %llu bytes could not be %s again",
				 (unsigned long long)r->size, was_imported ? "imported or staged" : "staged");
			return -1;
		}
		if (was_imported) {
			/* the new device refused the import: copies from now on */
			set->imports--;
			set->staged++;
		}
	}
	return 0;
}

void region_ref(region *r)
{
	assert(r->refs > 0); /* a reference is taken only from a live one */
	r->refs++;
}

void region_unref(region *r)
{
	if (!r)
		return;
	assert(r->refs > 0);
	if (--r->refs > 0)
		return;
	if (r->destroy) {
		r->destroy(r);
		return;
	}
	gpu_release(r);
	region_set *set = r->set;
	queue_remove(&r->live);
	munmap(r->map, r->map_len);
	set->count--;
	set->bytes -= r->size;
	if (r->staged)
		set->staged--;
	else
		set->imports--;
	if (r->on_release)
		r->on_release(r->release_ctx, r->release_arg);
	free(r);
}

uint64_t region_set_uid_bytes(region_set *set, uid_t uid)
{
	uint64_t n = 0;
	const queue_node *q;
	queue_foreach(q, set_live(set)) {
		const region *r = queue_data(q, region, live);
		if (r->uid == uid)
			n += r->size;
	}
	return n;
}

void region_stats(const region_set *set, proto_stats *st)
{
	st->regions = set->count;
	st->region_bytes = set->bytes;
	st->host_imports = set->imports;
	st->staged_regions = set->staged;
}
