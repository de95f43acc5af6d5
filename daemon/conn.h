/* daemon/conn.h — one client connection: bytes and descriptors in through
 * recvmsg, frames out of the framer, requests dispatched to ops, replies
 * queued out. The connection owns its regions table. */
#ifndef VKG_DAEMON_CONN_H
#define VKG_DAEMON_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "engine.h"
#include "frame.h"
#include "outq.h"
#include "region.h"

typedef struct server server;
typedef struct conn conn;

#define CONN_MAX_FDS 16 /* descriptors held at once, waiting for their frame */
#define CONN_CMSG_FDS 8 /* descriptors accepted in one recvmsg */

struct conn {
	conn *prev, *next;     /* server's list */
	server *srv;
	int fd;
	uv_poll_t poll;
	int poll_events;       /* what poll watches now (UV_READABLE, UV_WRITABLE) */
	unsigned refs;         /* the server's list + one per job + pending unregisters */
	bool open;             /* false once closing started */
	bool close_after_flush;
	bool want_write;
	struct ucred cred;
	proto_framer fr;
	uint64_t rx_pos;       /* stream bytes received */
	uint64_t frame_pos;    /* stream offset of the next frame to dispatch */
	int fds[CONN_MAX_FDS]; /* received descriptors, oldest first */
	uint64_t fd_frame[CONN_MAX_FDS]; /* stream offset of the frame each came with */
	unsigned nfds;
	outq out;              /* replies not yet written */
	uint64_t rx_ns;        /* when the last read brought bytes (a frame's arrival) */
	region **regs;         /* regions table, by insertion */
	uint32_t nregs, regs_cap;
	uint64_t next_region;
	uint64_t region_bytes;
	uint32_t inflight;     /* queued + running jobs */
	uint32_t unreg_pending; /* unregister replies not sent yet */
	bool rd_eof;           /* the peer half-closed (shutdown SHUT_WR): no more
				* reading; closed once every reply is out */
	engine_lane *lane;     /* this connection's queue in the engine */
	conn *dirty_next;      /* server's corked list, while dirty */
	bool dirty;
};

/* Take an accepted socket. A peer the allow lists refuse is closed; one
 * past max_connections or max_connections_per_uid gets one
 * {id: 0, ok: false, error: {code: limit}} frame first. Returns 0, or -1
 * (fd closed). */
int conn_open(server *s, int fd);
/* Start closing: stop I/O, release the regions table. */
void conn_close(conn *c, const char *why);
void conn_ref(conn *c);
/* engine replies_cb: cork (queue replies) or uncork (write every queued
 * reply, one send per connection). */
void conn_replies_cork(void *srv, bool begin);
void conn_unref(conn *c);

/* engine_done_fn for the engine: replies to the job's connection. */
void conn_job_done(job *j, proto_code code, const char *msg, uint64_t queued_us,
		   uint64_t gpu_us, uint32_t batch_jobs);

#endif
