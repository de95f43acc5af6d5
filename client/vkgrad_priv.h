/* client/vkgrad_priv.h — what libvkgrad's files share (client/: the
 * connection, its transport, traces, queries, regions, jobs and the raw
 * call): the client's struct, its reply table and the transport's calls.
 * Not installed and not exported (the shared library's version script
 * keeps only vkgrad.h's functions); vkgrad.h is the interface. Functions
 * shared between the files start with vkg__; the rest stay static. */
#ifndef VKGRAD_PRIV_H
#define VKGRAD_PRIV_H

#include "vkgrad.h"
#include "vkgrad_full.h"

#include "frame.h"
#include "msg.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Replies such as hello can be larger than any request the daemon accepts. */
#define VKG_CLIENT_MAX_FRAME (16u << 20)

/* One request whose reply has not been claimed yet. */
typedef struct vkg_entry {
	uint64_t id;
	bool done;
	bool ok;
	proto_code code;
	char message[256];
	uint64_t region;
	uint64_t tensor;   /* tensor_new's reply */
	uint64_t queued_us, gpu_us, batch_jobs, kernel_us; /* kernel_us 0: not sent */
	uint64_t t_submit_ns, t_seen_ns; /* CLOCK_MONOTONIC: request about to go, reply decoded */
	proto_trace trace;               /* the daemon's part, when the reply had one */
	proto_stream_tl stream;          /* a streamed job's timeline (n 0: none) */
	proto_reply *full; /* sync calls needing the whole reply (hello, stats) */
	bool want_raw;     /* vkg_call_raw: keep the reply's body */
	uint8_t *raw;      /* malloc'd copy of it, handed to the caller */
	size_t raw_len;
} vkg_entry;

/* A mapping made by vkg_region_create, unmapped by destroy or close. */
typedef struct vkg_mapping {
	uint64_t region;
	void *ptr;
	size_t size;
} vkg_mapping;

struct vkg_client {
	pthread_mutex_t lock;
	int fd;
	uint64_t next_id;
	proto_framer rx;
	proto_reply scratch; /* large: kept here rather than on the stack */

	vkg_entry *entries;
	size_t n_entries, cap_entries;
	vkg_mapping *maps;
	size_t n_maps, cap_maps;

	/* Once the connection is unusable every later call reports this. */
	int dead_rc;
	char dead_msg[256];
	char fatal[200]; /* the daemon's id-0 error, sent just before it closes */
	proto_code fatal_code;
	unsigned spin_us;  /* vkg_set_wait_spin */
	/* the last hello's kernels, all of them (vkg_info_kernel) */
	unsigned n_kernels;
	vkg_kernel_info kernels[VKG_FULL_MAX_KERNELS];
};

/* ---- errors (transport.c) ----------------------------------------------- */

/* Fill err (when given) with code and the formatted message; returns rc. */
__attribute__((format(printf, 4, 5))) int vkg__set_err(vkg_error *err, int rc, const char *code,
						       const char *fmt, ...);
void vkg__clear_err(vkg_error *err);
/* The daemon's code when it said why it closed (bad_frame, limit). */
int vkg__dead_err(const vkg_client *c, vkg_error *err);

/* ---- reply table (transport.c) ------------------------------------------ */

vkg_entry *vkg__entry_find(vkg_client *c, uint64_t id);
/* Drop e from the table, with a raw reply body not handed out yet. */
void vkg__entry_remove(vkg_client *c, vkg_entry *e);
/* Copy a finished entry out to the caller's structures, then drop it. */
int vkg__entry_consume(vkg_client *c, vkg_entry *e, vkg_result *res, uint64_t *region,
		       vkg_error *err);

/* ---- traces (trace.c) --------------------------------------------------- */

/* Keep a finished job's trace for vkg_trace_last (this thread's). */
void vkg__trace_keep(const vkg_entry *e);
/* Keep a finished job's stream timeline for vkg_stream_last (n 0: none). */
void vkg__stream_keep(const vkg_entry *e);

/* ---- transport (transport.c) -------------------------------------------- */

/* Read whatever has arrived, without blocking; problems mark the
 * connection dead (callers check dead_rc). */
void vkg__conn_drain(vkg_client *c);
/* File a pending entry for id and send its encoded frame. */
int vkg__conn_send_request(vkg_client *c, uint64_t id, const msgpack_sbuffer *sb, int fd,
			   proto_reply *full, bool want_raw, uint64_t t_submit, vkg_error *err);
/* Encode req with a fresh id, file a pending entry for it and send it. */
int vkg__conn_request(vkg_client *c, proto_request *req, int fd, proto_reply *full,
		      uint64_t *id_out, vkg_error *err);
/* Block until the entry for id is done (returned in *out), the time runs out
 * (-ETIMEDOUT, entry kept) or the connection dies (entry dropped). */
int vkg__conn_wait(vkg_client *c, uint64_t id, int timeout_ms, vkg_entry **out, vkg_error *err);
/* vkg__conn_wait without a time limit for a caller that waits on its own
 * request: on failure its entry is dropped too (a local poll failure would
 * leave it), so that a late reply never lands in memory the caller freed. */
int vkg__conn_wait_own(vkg_client *c, uint64_t id, vkg_entry **out, vkg_error *err);
/* Send a request and wait for its reply: the synchronous ops. */
int vkg__conn_call(vkg_client *c, proto_request *req, int fd, proto_reply *full, vkg_result *res,
		   uint64_t *region, vkg_error *err);

/* ---- clocks ------------------------------------------------------------- */

/* CLOCK_MONOTONIC in ns and in ms; the pause of a spinning wait. */
static inline uint64_t vkg__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int64_t vkg__now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void vkg__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
