/* daemon/gpu/region.h — a client's shared-memory region: the memfd checked,
 * mapped and made visible to the GPU, either imported in place
 * (VK_EXT_external_memory_host) or mirrored by a staging buffer that the
 * engine copies in before and out after each job.
 *
 * Regions are reference-counted: the owning connection's table holds one
 * reference and every queued or running job holds one. The mapping, the
 * buffer and the memory go away with the last reference, on the loop
 * thread; then the release callback (set by `unregister`) runs.
 *
 * Every live region is also on its daemon's region_set (the server owns
 * one; a benchmark in-process its own), so that after a device loss its
 * Vulkan objects can be dropped before the old device goes and made again
 * on the new one (region_gpu_release_all/restore_all), and so that stats
 * can count them; a region's `buf` is VK_NULL_HANDLE in between. */
#ifndef VKG_DAEMON_REGION_H
#define VKG_DAEMON_REGION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "device.h"
#include "msg.h"
#include "queue.h"

typedef struct region region;
typedef void (*region_release_fn)(void *ctx, uint64_t arg);

/* The live regions of one daemon, and their counts for stats. Loop thread
 * only. Zero-initialised is empty; it must outlive its regions. */
typedef struct region_set {
	queue_node live;           /* its regions (region.live), newest first */
	uint64_t count, bytes;     /* live regions, and their declared bytes */
	uint64_t imports, staged;  /* of them: imported in place, mirrored */
} region_set;

struct region {
	uint64_t id;
	unsigned refs;
	uint64_t size;     /* declared by the client */
	uint8_t *map;      /* the client's memory, MAP_SHARED */
	size_t map_len;
	VkBuffer buf;
	VkDeviceMemory mem;
	bool staged;       /* buf is a staging mirror, not the client's pages */
	uint8_t *stage;    /* mapped staging memory when staged */
	unsigned inflight; /* submitted batches still running that use it */
	uint64_t submit_mark, finish_mark; /* engine: dedupe per batch (timeline value) */
	const device *dev;
	/* the file (a connection may hold one file once) and the connection
	 * that registered it (opaque; NULL once that connection closed) */
	dev_t file_dev;
	ino_t file_ino;
	const void *owner;
	uid_t uid;         /* the registering peer's (region_set_uid_bytes) */
	region_set *set;   /* the set it is live on */
	queue_node live;   /* on set's list, for device recovery */
	region_release_fn on_release;
	void *release_ctx;
	uint64_t release_arg;
	/* addition: a device tensor (tensor.h) — device-local memory, no
	 * mapping, not on a region_set; never staged. Its last region_unref
	 * calls destroy (which frees it) instead of the mapping's teardown. */
	bool device_local;
	void (*destroy)(region *r);
};

/* Take ownership of fd (closed in every case), check it, map it and make it
 * GPU-visible, live on set. Returns 0 and *out, or a negative proto code
 * with err.
 * `owner` (the registering connection, or NULL: no check) may hold each
 * file once: a file it already holds, through any descriptor, in a live
 * region (registered, or unregistered while jobs still use it) is refused
 * with bad_region naming that region. Two ids of one file would be two
 * staging mirrors, or two conflict trackers, of the same bytes: nothing
 * would order the jobs of one connection that write them through
 * different ids, and accumulations would be lost. */
int region_create(region **out, region_set *set, const device *d, int fd, uint64_t size,
		  bool allow_import, const void *owner, proto_err *err);
void region_ref(region *r);
/* Drop a reference; the last one frees everything and calls on_release
 * (a device tensor's: its destroy hook). */
void region_unref(region *r);

/* A staged region's bytes [off, off + n): the client's memory into the
 * staging mirror (in) or back (!in), through a guarded copy (memguard.h).
 * `what` names the tensor. Returns 0, or a negative proto code with err:
 * bad_region when the client's pages faulted (SIGBUS: its file lost them),
 * saying where; the caller fails that one job. Part of the range may have
 * been copied. */
int region_stage_copy(region *r, uint64_t off, uint64_t n, bool in, const char *what,
		      proto_err *err);

/* After a device loss: destroy the buffer and memory of every region of
 * set (the mapping of the client's memory stays), before the device goes.
 * No job may be running. Safe to call again. */
void region_gpu_release_all(region_set *set);
/* On the recreated device d (the same struct, reopened): import each live
 * region again where it was imported, falling back to a staging mirror as
 * at registration, or stage it again. Returns 0, or -1 with err (the
 * regions restored so far keep their objects; region_gpu_release_all
 * undoes them). */
int region_gpu_restore_all(region_set *set, const device *d, char *err, size_t errlen);

/* Fault injection (VKGRAD_FAULT_INJECT=unsealed, tests): register
 * accepts a file without F_SEAL_SHRINK, so that a test can take pages
 * away under the daemon's mapping by truncating it: the SIGBUS a hole in
 * a file of another file system, or a page the kernel refuses to a
 * sparse memfd, would raise. */
extern bool region_fault_unsealed;

/* Bytes of the live regions of set that peer uid registered: those in a
 * connection's table, and those unregistered or left by a closed
 * connection while jobs still use them. A walk of the live regions, once
 * per register (region_create walks them too). */
uint64_t region_set_uid_bytes(region_set *set, uid_t uid);

/* set's part of stats: regions, region_bytes, host_imports,
 * staged_regions. */
void region_stats(const region_set *set, proto_stats *st);

#endif
