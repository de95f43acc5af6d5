/* daemon/net/conn.h — one client connection, the transport: bytes and
 * descriptors in through recvmsg, whole frames out of the framer (each
 * with the descriptors that came with it) handed to the connection's
 * handler, replies queued out (corked while the engine answers a batch)
 * and written when the socket takes them. Who is taken at all is
 * admission.h's; what a frame asks for is the handler's (ops.h).
 *
 * What the ops keep per connection (its regions table, its engine lane,
 * the jobs and unregisters it waits for) is the handler's own
 * (conn.session); the transport asks the handler how many replies are
 * still owed, to know when a half-closed peer has every reply. */
#ifndef VKG_DAEMON_CONN_H
#define VKG_DAEMON_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <msgpack.h>
#include <uv.h>

#include "engine.h"
#include "frame.h"
#include "outq.h"
#include "queue.h"
#include "region.h"

typedef struct server server;
typedef struct conn conn;

#define CONN_MAX_FDS 16 /* descriptors held at once, waiting for their frame */
#define CONN_CMSG_FDS 8 /* descriptors accepted in one recvmsg */
#define CONN_FRAME_FDS 2 /* descriptors a frame hands on (more are closed) */
#define CONN_REPLY_BUF_KEEP 65536 /* reply buffer bytes kept between replies (conn_reply_timed) */
/* Frames one connection has handled per loop turn at most: the rest of
 * what it sent waits in its framer (and socket) for the next turn, after
 * every other connection had its turn (conn.c: the backlog). */
#define CONN_TURN_FRAMES 32

/* The open connections, which the server holds and conn.c alone changes:
 * the list, the corked replies, the backlog of frames left over from a
 * turn, and the reply buffer every reply is encoded in. */
typedef struct conn_set {
	queue_node all;            /* open connections (conn.node), newest first */
	uint32_t n;
	bool cork;                 /* replies are queued, written at uncork */
	queue_node dirty;          /* connections with replies queued while corked
				    * (conn.dirty_node), latest first */
	queue_node backlog;        /* connections whose frames wait for their next
				    * turn (conn.backlog_node), oldest first */
	uv_idle_t backlog_idle;    /* active while the backlog is not empty */
	msgpack_sbuffer reply_sb;  /* every reply's encoding (conn_reply_timed): memory kept */
} conn_set;

/* What a connection does with what it receives (ops.c provides it). */
typedef struct conn_handler {
	/* c was taken: set up the per-connection state. 0, or -1 to drop c. */
	int (*open)(conn *c);
	/* One whole frame body. fds[] holds the first min(nfds,
	 * CONN_FRAME_FDS) descriptors that came with it (the rest were
	 * closed): the handler owns them. Returns false when c must stop
	 * reading (a protocol error: see conn_close_after_replies). */
	bool (*frame)(conn *c, const uint8_t *body, uint32_t len, int *fds, unsigned nfds);
	/* c is closing: drop what it queued (its jobs running go on). */
	void (*close)(conn *c);
	/* Replies c is still owed (jobs, unregisters): a half-closed peer is
	 * closed once none is owed and every reply is written. */
	uint32_t (*owed)(const conn *c);
	/* c's last reference went: free the per-connection state. */
	void (*release)(conn *c);
} conn_handler;

struct conn {
	queue_node node;       /* on the server's list of open connections */
	server *srv;
	const conn_handler *h;
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
	bool rd_eof;           /* the peer half-closed (shutdown SHUT_WR): no more
				* reading; closed once every reply is out */
	queue_node dirty_node; /* on the server's corked list, while dirty */
	bool dirty;
	queue_node backlog_node; /* on the server's backlog, while backlogged */
	bool backlogged;       /* whole frames wait in fr for the next turn */
	bool announced;        /* logged at info level (conn_announce), so its close is too */
	struct session *session; /* the handler's per-connection state (ops:
				  * daemon/ops/session.h); never looked into here */
};

/* Take an accepted socket, served by h. A peer the allow lists refuse, or
 * one past max_connections or max_connections_per_uid, gets one {id: 0,
 * ok: false, error: {code: limit, message: why}} frame and is closed
 * (admission.h: the refusal is logged, at most one warning a second).
 * Returns 0, or -1 (fd closed). */
int conn_open(server *s, int fd, const conn_handler *h);
/* Start closing: stop I/O, let the handler release its state. */
void conn_close(conn *c, const char *why);
void conn_ref(conn *c);
void conn_unref(conn *c);

/* Queue one framed reply (sb holds prefix + body) and write it, or leave
 * it for the uncork. timed: a job reply whose trace takes the write time,
 * t_encoded when it was encoded (outq.h). A connection that closed drops
 * it; one above max_outbound_bytes is closed. */
void conn_send_frame(conn *c, msgpack_sbuffer *sb, bool timed, uint64_t t_encoded);
/* Encode r as kind and send it. */
void conn_reply(conn *c, proto_reply_kind kind, const proto_reply *r);
/* conn_reply with a trace's send time (conn_send_frame's timed). */
void conn_reply_timed(conn *c, proto_reply_kind kind, const proto_reply *r, bool timed,
		      uint64_t t_encoded);
void conn_reply_ok(conn *c, uint64_t id);
/* {id, ok: false, error: err} (logged at debug level). */
void conn_reply_err(conn *c, uint64_t id, const proto_err *err);
/* A protocol error was answered: read nothing more, close once the
 * replies queued are written. */
void conn_close_after_replies(conn *c);
/* The handler announced c at info level: its close is logged there too. */
void conn_announce(conn *c);
/* Reply bytes queued and not yet written. */
size_t conn_out_pending(const conn *c);

/* The server's set of connections (s->conns), empty, with its backlog's
 * idle handle, started with the first connection that has frames left
 * over from its turn (conn.c). */
void conn_set_init(server *s);
/* Shutting down: close the set's loop handle (before the loop's last run). */
void conn_set_close(conn_set *cs);
/* After the loop ended: free the kept reply buffer. */
void conn_set_destroy(conn_set *cs);
/* Open connections: how many, and a walk over them, newest first (the
 * next of c is taken before c may be closed). */
uint32_t conn_set_count(const conn_set *cs);
conn *conn_set_first(conn_set *cs);
conn *conn_set_next(conn_set *cs, const conn *c);

/* engine_events.replies: cork (queue replies) or uncork (write every queued
 * reply, one send per connection). */
void conn_replies_cork(void *srv, bool begin);

#endif
