/* daemon/net/conn.c — see conn.h. Where bytes become frames: take_bytes(). */
#include "conn.h"
#include "clock.h"

#include "admission.h"
#include "log.h"
#include "server.h"
#include "service.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONN_READ_CHUNK 65536

static void conn_poll_cb(uv_poll_t *h, int status, int events);
static void backlog_remove(conn *c);

/* ---- lifetime ------------------------------------------------------------- */

void conn_ref(conn *c)
{
	c->refs++;
}

static void conn_free(conn *c)
{
	proto_framer_free(&c->fr);
	outq_free(&c->out);
	if (c->h->release)
		c->h->release(c);
	free(c);
}

static void poll_closed_cb(uv_handle_t *h)
{
	conn *c = h->data;
	close(c->fd);
	c->fd = -1;
	conn_unref(c);
}

void conn_unref(conn *c)
{
	if (--c->refs == 0)
		conn_free(c);
}

static void drop_fds(conn *c)
{
	for (unsigned i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
}

void conn_announce(conn *c)
{
	c->announced = true;
}

void conn_close(conn *c, const char *why)
{
	if (!c->open)
		return;
	c->open = false;
	server *s = c->srv;
	/* at info level only for a connection announced there (ops.c) */
	log_msg(c->announced ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG,
		"client pid %d uid %u: connection closed (%s)", (int)c->cred.pid,
		(unsigned)c->cred.uid, why);
	queue_remove(&c->node);
	s->conns.n--;
	service_clients(&s->svc, s->conns.n);
	drop_fds(c);
	backlog_remove(c);
	outq_shut(&c->out); /* nothing more is written: the socket may close */
	c->h->close(c);
	uv_poll_stop(&c->poll);
	/* poll_closed_cb drops the list's reference */
	uv_close((uv_handle_t *)&c->poll, poll_closed_cb);
}

/* Say why, in one error frame, to a peer that is not taken, and close it.
 * Its socket is fresh, so the frame fits the send buffer; if it does not,
 * the close alone says enough. */
static void refuse(int fd, const proto_err *err)
{
	proto_reply r = {.id = 0, .ok = false, .err = *err};
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	if (proto_reply_encode(&sb, PROTO_R_ERROR, &r) == 0 && sb.data) {
		ssize_t n = send(fd, sb.data, sb.size, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)n;
	}
	msgpack_sbuffer_destroy(&sb);
	close(fd);
}

/* Connections of uid open now. A linear walk: at most max_connections of
 * them, once per accepted connection. */
static uint32_t conns_of_uid(const server *s, uid_t uid)
{
	uint32_t n = 0;
	const queue_node *q;
	queue_foreach(q, &s->conns.all)
		n += queue_data(q, conn, node)->cred.uid == uid;
	return n;
}

int conn_open(server *s, int fd, const conn_handler *h)
{
	conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -1;
	}
	c->srv = s;
	c->h = h;
	c->fd = fd;
	outq_init(&c->out, fd, engine_metrics(s->eng));
	c->refs = 1;
	c->open = true;
	socklen_t len = sizeof(c->cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) != 0) {
		c->cred.pid = 0;
		c->cred.uid = c->cred.gid = (uid_t)-1;
	}
	proto_err err;
	switch (admission_check(&s->admission, fd, &c->cred, s->conns.n, conns_of_uid(s, c->cred.uid),
				clock_now_ns(), &err)) {
	case ADMISSION_TAKE:
		break;
	case ADMISSION_DENY:
	case ADMISSION_LIMIT:
		refuse(fd, &err);
		conn_free(c);
		return -1;
	}
	proto_framer_init(&c->fr, s->limits.max_frame);
	if (h->open(c) != 0) {
		close(fd);
		conn_free(c);
		return -1;
	}
	if (uv_poll_init(s->loop, &c->poll, fd) != 0) {
		close(fd);
		h->close(c);
		conn_free(c);
		return -1;
	}
	c->poll.data = c;
	c->poll_events = UV_READABLE;
	uv_poll_start(&c->poll, UV_READABLE, conn_poll_cb);
	queue_insert_head(&s->conns.all, &c->node);
	s->conns.n++;
	service_clients(&s->svc, s->conns.n);
	/* info level once it asks for something (ops.c), so that a
	 * connection that only looks (a metrics scrape) stays at debug */
	log_debug("client pid %d uid %u gid %u connected (%u open)", (int)c->cred.pid,
		 (unsigned)c->cred.uid, (unsigned)c->cred.gid, s->conns.n);
	return 0;
}

/* ---- output ---------------------------------------------------------------- */

static void update_poll(conn *c)
{
	if (!c->open)
		return;
	int ev = (c->close_after_flush || c->rd_eof || c->backlogged ? 0 : UV_READABLE) |
		 (c->want_write ? UV_WRITABLE : 0);
	/* only on a change: libuv's uv_poll_start takes the descriptor out of
	 * epoll and puts it back (two epoll_ctl calls) even for the same events */
	if (ev == c->poll_events)
		return;
	c->poll_events = ev;
	uv_poll_start(&c->poll, ev, conn_poll_cb);
}

/* A half-closed peer has every reply it asked for: close. */
static void finish_half_closed(conn *c)
{
	if (c->open && c->rd_eof && c->h->owed(c) == 0 && outq_pending(&c->out) == 0)
		conn_close(c, "peer half-closed; every reply sent");
}

static void flush_out(conn *c)
{
	int rc = outq_flush(&c->out);
	if (rc < 0) {
		conn_close(c, strerror(-rc));
		return;
	}
	bool want = rc > 0;
	if (!want && c->close_after_flush) {
		conn_close(c, "protocol error");
		return;
	}
	if (!want && c->rd_eof) {
		finish_half_closed(c);
		if (!c->open)
			return;
	}
	if (want != c->want_write) {
		c->want_write = want;
		update_poll(c);
	}
}

/* Queue one framed reply (sb holds prefix + body) and try to write it.
 * timed: a job reply whose trace takes the write time (outq.h). */
void conn_send_frame(conn *c, msgpack_sbuffer *sb, bool timed, uint64_t t_encoded)
{
	if (!c->open || !sb->data)
		return;
	int rc = outq_append(&c->out, sb->data, sb->size, timed, t_encoded,
			     c->srv->cfg->max_outbound_bytes);
	if (rc == -ENOBUFS) {
		log_warn("client pid %d: %zu reply bytes unread, above max_outbound_bytes %llu; dropping it",
			 (int)c->cred.pid, outq_pending(&c->out),
			 (unsigned long long)c->srv->cfg->max_outbound_bytes);
		conn_close(c, "not reading its replies");
		return;
	}
	if (rc != 0) {
		conn_close(c, rc == -ENOMEM ? "out of memory" : strerror(-rc));
		return;
	}
	if (c->srv->conns.cork) {
		if (!c->dirty) {
			c->dirty = true;
			queue_insert_head(&c->srv->conns.dirty, &c->dirty_node);
			conn_ref(c);
		}
		return;
	}
	flush_out(c);
}

void conn_replies_cork(void *srv, bool begin)
{
	server *s = srv;
	s->conns.cork = begin;
	if (begin)
		return;
	for (queue_node *q; (q = queue_first(&s->conns.dirty));) {
		conn *c = queue_data(q, conn, dirty_node);
		queue_remove(q);
		c->dirty = false;
		if (c->open)
			flush_out(c);
		conn_unref(c);
	}
}

/* Replies are encoded in the server's kept buffer (no malloc per reply),
 * taken out of the server while in use: a reply sent meanwhile (by a
 * close the send caused) gets a buffer of its own. */
void conn_reply_timed(conn *c, proto_reply_kind kind, const proto_reply *r, bool timed,
		      uint64_t t_encoded)
{
	server *s = c->srv;
	msgpack_sbuffer sb = s->conns.reply_sb;
	s->conns.reply_sb = (msgpack_sbuffer){0};
	if (proto_reply_encode(&sb, kind, r) == 0)
		conn_send_frame(c, &sb, timed, t_encoded);
	proto_sbuffer_reuse(&sb, CONN_REPLY_BUF_KEEP);
	if (s->conns.reply_sb.data)
		msgpack_sbuffer_destroy(&sb);
	else
		s->conns.reply_sb = sb;
}

void conn_reply(conn *c, proto_reply_kind kind, const proto_reply *r)
{
	conn_reply_timed(c, kind, r, false, 0);
}

void conn_reply_ok(conn *c, uint64_t id)
{
	proto_reply r = {.id = id, .ok = true};
	conn_reply(c, PROTO_R_PLAIN, &r);
}

void conn_reply_err(conn *c, uint64_t id, const proto_err *err)
{
	proto_reply r = {.id = id, .ok = false, .err = *err};
	usage_error(&c->srv->usage, err->code);
	log_debug("client pid %d: request %llu failed: %s: %s", (int)c->cred.pid,
		  (unsigned long long)id, proto_code_name(err->code), err->message);
	conn_reply(c, PROTO_R_ERROR, &r);
}

void conn_close_after_replies(conn *c)
{
	c->close_after_flush = true;
	flush_out(c);
}

size_t conn_out_pending(const conn *c)
{
	return outq_pending(&c->out);
}

/* ---- input ------------------------------------------------------------------ */

/* Descriptors are kept with the stream offset of the frame they came with
 * (conn_read works that out exactly); a frame takes its own. */
static void fd_pop(conn *c, unsigned i)
{
	c->nfds--;
	memmove(c->fds + i, c->fds + i + 1, (c->nfds - i) * sizeof(int));
	memmove(c->fd_frame + i, c->fd_frame + i + 1, (c->nfds - i) * sizeof(uint64_t));
}

/* Move the descriptors of the frame starting at fs into out[] (at most
 * `max`, the rest closed) and close any left over from earlier frames.
 * Returns how many came with the frame. */
static unsigned take_fds(conn *c, uint64_t fs, int *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < c->nfds;) {
		if (c->fd_frame[i] > fs) {
			i++;
			continue;
		}
		if (c->fd_frame[i] == fs && n < max)
			out[n] = c->fds[i];
		else
			close(c->fds[i]);
		n += c->fd_frame[i] == fs;
		fd_pop(c, i);
	}
	return n;
}

/* Receive up to `len` bytes with their descriptors into buf. Returns the
 * byte count (0: peer closed), -EAGAIN, or another negative errno; *nfds
 * descriptors in fds[]. On MSG_CTRUNC or foreign control messages every
 * received descriptor is closed and -EBADMSG returned. */
static ssize_t recv_piece(conn *c, uint8_t *buf, size_t len, int flags, int *fds, unsigned *nfds)
{
	union {
		char b[CMSG_SPACE(CONN_CMSG_FDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			    .msg_controllen = sizeof(cm.b)};
	*nfds = 0;
	ssize_t n = recvmsg(c->fd, &mh, flags | MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	bool bad = (mh.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) {
			bad = true;
			continue;
		}
		size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			if (*nfds < CONN_CMSG_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd), bad = true;
		}
	}
	if (bad) {
		for (unsigned i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EBADMSG;
	}
	return n;
}

/* What dispatch() left. */
typedef enum dispatch_rc {
	DISPATCH_DONE,    /* no whole frame left in the framer */
	DISPATCH_MORE,    /* the turn's budget is spent; whole frames wait */
	DISPATCH_STOP,    /* c stopped reading or closed */
} dispatch_rc;

/* Dispatch the whole frames in c's framer, at most *budget of them
 * (counted down). The caller holds a reference. */
static dispatch_rc dispatch(conn *c, unsigned *budget)
{
	for (;;) {
		if (*budget == 0)
			return proto_framer_need(&c->fr) == 0 ? DISPATCH_MORE : DISPATCH_DONE;
		const uint8_t *body;
		uint32_t len;
		int rc = proto_framer_next(&c->fr, &body, &len);
		if (rc == 0)
			return DISPATCH_DONE;
		if (rc < 0) {
			proto_err err;
			proto_fail(&err, PROTO_BAD_FRAME,
				   "frame length is 0 or above max_frame %u; closing",
				   c->srv->limits.max_frame);
			drop_fds(c);
			conn_reply_err(c, 0, &err);
			conn_close_after_replies(c);
			return DISPATCH_STOP;
		}
		(*budget)--;
		uint64_t fs = c->frame_pos;
		c->frame_pos = fs + PROTO_FRAME_HDR + len;
		int fds[CONN_FRAME_FDS];
		unsigned nfd = take_fds(c, fs, fds, CONN_FRAME_FDS);
		if (!c->h->frame(c, body, len, fds, nfd) || !c->open)
			return DISPATCH_STOP;
	}
}

/* Hand n received bytes (and the descriptors that came with them) to the
 * framer and dispatch whole frames within the turn's budget. The caller
 * holds a reference. Bytes are read only while the framer holds no whole
 * frame (a backlogged connection is not read), so the frame these bytes'
 * first byte belongs to is the one at frame_pos. */
static dispatch_rc take_bytes(conn *c, const uint8_t *buf, size_t n, const int *fds, unsigned nfds,
			      unsigned *budget)
{
	if (c->nfds + nfds > CONN_MAX_FDS) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		conn_close(c, "too many descriptors held");
		return DISPATCH_STOP;
	}
	for (unsigned i = 0; i < nfds; i++) {
		c->fds[c->nfds] = fds[i];
		c->fd_frame[c->nfds++] = c->frame_pos;
	}
	c->rx_pos += n;
	if (proto_framer_push(&c->fr, buf, n) != 0) {
		conn_close(c, "out of memory");
		return DISPATCH_STOP;
	}
	return dispatch(c, budget);
}

/* ---- the backlog: frames left over from a connection's turn --------------------- */

static void backlog_cb(uv_idle_t *h);

void conn_set_init(server *s)
{
	conn_set *cs = &s->conns;
	memset(cs, 0, sizeof(*cs));
	queue_init(&cs->all);
	queue_init(&cs->dirty);
	queue_init(&cs->backlog);
	uv_idle_init(s->loop, &cs->backlog_idle);
	cs->backlog_idle.data = s;
}

void conn_set_close(conn_set *cs)
{
	uv_close((uv_handle_t *)&cs->backlog_idle, NULL);
}

void conn_set_destroy(conn_set *cs)
{
	msgpack_sbuffer_destroy(&cs->reply_sb);
}

uint32_t conn_set_count(const conn_set *cs)
{
	return cs->n;
}

conn *conn_set_first(conn_set *cs)
{
	queue_node *q = queue_first(&cs->all);
	return q ? queue_data(q, conn, node) : NULL;
}

conn *conn_set_next(conn_set *cs, const conn *c)
{
	return c->node.next == &cs->all ? NULL : queue_data(c->node.next, conn, node);
}

/* c has whole frames left after its turn: stop reading it (update_poll)
 * and give it another turn on the next loop iteration, after everyone
 * else (the loop does not sleep while the backlog's idle handle runs). */
static void backlog_add(conn *c)
{
	if (c->backlogged || !c->open)
		return;
	server *s = c->srv;
	c->backlogged = true;
	conn_ref(c);
	if (queue_empty(&s->conns.backlog))
		uv_idle_start(&s->conns.backlog_idle, backlog_cb);
	queue_insert_tail(&s->conns.backlog, &c->backlog_node);
}

static void backlog_remove(conn *c)
{
	if (!c->backlogged)
		return;
	queue_remove(&c->backlog_node);
	c->backlogged = false;
	if (queue_empty(&c->srv->conns.backlog))
		uv_idle_stop(&c->srv->conns.backlog_idle);
	conn_unref(c); /* never the last: the server's list holds one until the poll closed */
}

/* One more turn for each connection on the backlog (those added meanwhile
 * wait for the next one). While shutting down no new frame is handled. */
static void backlog_cb(uv_idle_t *h)
{
	server *s = h->data;
	queue_node turn;
	queue_init(&turn);
	while (!queue_empty(&s->conns.backlog)) {
		queue_node *q = queue_first(&s->conns.backlog);
		queue_remove(q);
		queue_insert_tail(&turn, q);
	}
	uv_idle_stop(&s->conns.backlog_idle);
	for (queue_node *q; (q = queue_first(&turn));) {
		conn *c = queue_data(q, conn, backlog_node);
		queue_remove(q);
		c->backlogged = false;
		if (c->open && !c->close_after_flush && !s->draining) {
			unsigned budget = CONN_TURN_FRAMES;
			if (dispatch(c, &budget) == DISPATCH_MORE)
				backlog_add(c);
			update_poll(c);
		}
		conn_unref(c);
	}
}

/* The peer sends nothing more (EOF). One that closed its socket reads
 * nothing either: close now, dropping its queued jobs. One that only shut
 * down its sending side (shutdown SHUT_WR; the socket then reports no
 * POLLHUP) still reads: stop reading, answer every request it sent, then
 * close (finish_half_closed). A partial frame left is dropped. */
static void conn_peer_eof(conn *c)
{
	/* no events asked: poll reports only POLLHUP / POLLERR (a full
	 * send buffer must not pass for a closed peer) */
	struct pollfd p = {.fd = c->fd, .events = 0};
	int n = poll(&p, 1, 0);
	if (n < 0 || (n == 1 && (p.revents & (POLLHUP | POLLERR)))) {
		conn_close(c, "peer closed");
		return;
	}
	c->rd_eof = true;
	drop_fds(c); /* their frames can no longer come */
	log_debug("client pid %d half-closed: %u repl(ies) to send, then close", (int)c->cred.pid,
		  c->h->owed(c));
	finish_half_closed(c);
	update_poll(c);
}

/* The socket polled readable, yet a read finds nothing: an urgent byte
 * (send MSG_OOB) waits there, which a plain read never returns (and a
 * peek never drops), so the socket would poll readable forever and spin
 * the loop. No request is urgent: take the byte, answer bad_frame, and
 * close, as for any other byte that is not part of a frame. */
static void urgent_check(conn *c)
{
	char b;
	if (recv(c->fd, &b, 1, MSG_OOB | MSG_DONTWAIT) != 1)
		return;
	proto_err err;
	proto_fail(&err, PROTO_BAD_FRAME,
		   "urgent data (MSG_OOB) is not part of the protocol; closing");
	log_info("client pid %d: protocol error: %s", (int)c->cred.pid, err.message);
	drop_fds(c);
	conn_reply_err(c, 0, &err);
	conn_close_after_replies(c);
}

/* Descriptors ride with the last sendmsg() chunk of a read: Linux ends a
 * read with the first chunk that carries descriptors, but merges the chunks
 * before it. So a plain read cannot tell which frame a descriptor came with
 * when several frames share the read. Peek first: with no descriptors in
 * sight (the usual case) consume the peeked bytes in one go; otherwise
 * consume them frame by frame, never reading across a frame boundary, so
 * the read that returns the descriptors names their frame exactly. */
static void conn_read(conn *c)
{
	uint8_t buf[CONN_READ_CHUNK];
	int fds[CONN_CMSG_FDS];
	unsigned nfds;
	ssize_t n = recv_piece(c, buf, sizeof(buf), MSG_PEEK, fds, &nfds);
	bool with_fds = nfds > 0 || n == -EBADMSG;
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]); /* peeked copies */
	if (n == -EBADMSG) {
		/* a consuming read gets the same trouble: take it from there */
		n = sizeof(buf);
	} else if (n < 0) {
		if (n == -EAGAIN)
			urgent_check(c);
		else
			conn_close(c, strerror((int)-n));
		return;
	} else if (n == 0) {
		conn_peer_eof(c);
		return;
	}
	conn_ref(c); /* a dispatch may close c */
	engine_activity(c->srv->eng); /* its next request may come soon: poll a while */
	size_t total = (size_t)n, done = 0;
	unsigned budget = CONN_TURN_FRAMES;
	while (done < total && c->open && !c->close_after_flush) {
		size_t want = total - done;
		if (with_fds) {
			size_t need = proto_framer_need(&c->fr);
			if (need && need < want)
				want = need;
		}
		ssize_t m = recv_piece(c, buf, want, 0, fds, &nfds);
		if (m == -EAGAIN)
			break;
		if (m == 0) {
			conn_peer_eof(c);
			break;
		}
		if (m < 0) {
			conn_close(c, m == -EBADMSG ? "too many descriptors in one message"
				   : strerror((int)-m));
			break;
		}
		done += (size_t)m;
		c->rx_ns = clock_now_ns(); /* the frames this read completes arrived */
		dispatch_rc rc = take_bytes(c, buf, (size_t)m, fds, nfds, &budget);
		if (rc == DISPATCH_MORE)
			backlog_add(c); /* the rest of the peeked bytes stay in the socket */
		if (rc != DISPATCH_DONE)
			break;
	}
	if (c->open)
		update_poll(c);
	conn_unref(c);
}

static void conn_poll_cb(uv_poll_t *h, int status, int events)
{
	conn *c = h->data;
	if (status < 0) {
		/* libuv reports POLLERR as UV_EBADF: name the socket's own error
		 * (a peer that hung up on unread replies: ECONNRESET) */
		int e = 0;
		socklen_t len = sizeof(e);
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e)
			conn_close(c, strerror(e));
		else
			conn_close(c, uv_strerror(status));
		return;
	}
	if (c->open && (events & UV_WRITABLE))
		flush_out(c);
	if (c->open && (events & UV_READABLE) && !c->close_after_flush && !c->rd_eof &&
	    !c->backlogged && !c->srv->draining)
		conn_read(c);
}
