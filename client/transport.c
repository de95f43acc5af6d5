/* client/transport.c — libvkgrad's wire: one socket per client; requests
 * are msgpack frames from proto/msg.h, replies are matched to requests by
 * id through a table, because the daemon may answer out of order. Here:
 * the errors a call reports, that reply table, sending (a descriptor rides
 * along as SCM_RIGHTS), receiving, and waiting for one reply. The client's
 * struct is vkgrad_priv.h's; connecting is connection.c's. */
#include "vkgrad_priv.h"

#include "frame.h"
#include "msg.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------- */

int vkg__set_err(vkg_error *err, int rc, const char *code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		snprintf(err->code, sizeof(err->code), "%s", code);
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return rc;
}

void vkg__clear_err(vkg_error *err)
{
	if (err)
		err->code[0] = err->message[0] = 0;
}

/* Mark the connection unusable; the first reason wins. */
__attribute__((format(printf, 3, 4))) static void conn_dead(vkg_client *c, int rc,
							    const char *fmt, ...)
{
	if (c->dead_rc)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->dead_msg, sizeof(c->dead_msg), fmt, ap);
	va_end(ap);
	c->dead_rc = rc;
}

/* The daemon's code when it said why it closed (bad_frame, limit). */
int vkg__dead_err(const vkg_client *c, vkg_error *err)
{
	return vkg__set_err(err, c->dead_rc, c->fatal[0] ? proto_code_name(c->fatal_code) : "io",
			    "%s", c->dead_msg);
}

/* ---- reply table -------------------------------------------------------- */

vkg_entry *vkg__entry_find(vkg_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_entries; i++)
		if (c->entries[i].id == id)
			return &c->entries[i];
	return NULL;
}

static vkg_entry *entry_add(vkg_client *c, uint64_t id, proto_reply *full)
{
	if (c->n_entries == c->cap_entries) {
		size_t cap = c->cap_entries ? c->cap_entries * 2 : 16;
		vkg_entry *ne = realloc(c->entries, cap * sizeof(*ne));
		if (!ne)
			return NULL;
		c->entries = ne;
		c->cap_entries = cap;
	}
	vkg_entry *e = &c->entries[c->n_entries++];
	memset(e, 0, sizeof(*e));
	e->id = id;
	e->full = full;
	return e;
}

/* Order of the table does not matter: swap the last one in. A raw reply
 * body not handed out yet goes with the entry. */
void vkg__entry_remove(vkg_client *c, vkg_entry *e)
{
	size_t i = (size_t)(e - c->entries);
	free(e->raw);
	c->entries[i] = c->entries[--c->n_entries];
}

/* Copy a finished entry out to the caller's structures, then drop it. */
int vkg__entry_consume(vkg_client *c, vkg_entry *e, vkg_result *res, uint64_t *region,
		       vkg_error *err)
{
	int rc = 0;
	if (e->ok) {
		if (res) {
			res->queued_us = e->queued_us;
			res->gpu_us = e->gpu_us;
			res->batch_jobs = e->batch_jobs;
			res->kernel_us = e->kernel_us;
		}
		vkg__trace_keep(e);
		vkg__stream_keep(e);
		if (region)
			*region = e->region;
	} else {
		rc = vkg__set_err(err, VKG_EREMOTE, proto_code_name(e->code), "%s", e->message);
	}
	vkg__entry_remove(c, e);
	return rc;
}

/* ---- receiving ---------------------------------------------------------- */

static void dispatch_frame(vkg_client *c, const uint8_t *body, uint32_t len, uint64_t t_seen)
{
	proto_reply *r = &c->scratch;
	proto_err perr;
	if (proto_reply_decode(body, len, r, &perr) != 0) {
		conn_dead(c, -EPROTO, "daemon sent an undecodable reply: %s", perr.message);
		return;
	}
	vkg_entry *e = vkg__entry_find(c, r->id);
	if (!e || e->done) {
		/* id 0 carries a protocol error; the daemon closes right after. */
		if (r->id == 0 && !r->ok) {
			snprintf(c->fatal, sizeof(c->fatal), "%s: %.180s", proto_code_name(r->err.code),
				 r->err.message);
			c->fatal_code = r->err.code;
		}
		return;
	}
	e->done = true;
	e->ok = r->ok;
	e->code = r->err.code;
	snprintf(e->message, sizeof(e->message), "%s", r->err.message);
	e->region = r->region;
	e->tensor = r->tensor;
	e->queued_us = r->queued_us;
	e->gpu_us = r->gpu_us;
	e->batch_jobs = r->batch_jobs;
	e->kernel_us = r->has_kernel_us ? r->kernel_us : 0;
	e->t_seen_ns = t_seen;
	e->trace = r->trace;
	e->stream.n = r->stream.n; /* (the fields only when there are any: most replies have none) */
	if (r->stream.n)
		memcpy(e->stream.f, r->stream.f, r->stream.n * sizeof(r->stream.f[0]));
	if (e->full)
		memcpy(e->full, r, sizeof(*r));
	if (e->want_raw && (e->raw = malloc(len ? len : 1)) != NULL) {
		memcpy(e->raw, body, len);
		e->raw_len = len;
	}
}

/* Read whatever has arrived and file every whole frame in the table; with
 * `block`, wait for something to arrive first (one recv instead of a poll
 * and a recv). A read shorter than the buffer took all there was: no empty
 * read after it to find that out. Problems mark the connection dead;
 * callers check dead_rc. */
static void conn_drain_wait(vkg_client *c, bool block)
{
	uint8_t buf[65536];
	int flags = block ? 0 : MSG_DONTWAIT;
	while (!c->dead_rc) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), flags);
		if (n == 0) {
			if (c->fatal[0])
				conn_dead(c, -ECONNRESET, "daemon closed the connection after: %s",
					  c->fatal);
			else
				conn_dead(c, -ECONNRESET, "daemon closed the connection");
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECONNRESET)
				conn_dead(c, -ECONNRESET, "daemon closed the connection (reset)%s%s",
					  c->fatal[0] ? " after: " : "", c->fatal);
			else if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_dead(c, -errno, "receive from daemon: %s", strerror(errno));
			break;
		}
		if (proto_framer_push(&c->rx, buf, (size_t)n) != 0) {
			conn_dead(c, -ENOMEM, "out of memory buffering a reply");
			break;
		}
		/* Consume frames after each chunk so the framer stays small. */
		const uint8_t *body;
		uint32_t len;
		int got = 0;
		const uint64_t t_seen = vkg__now_ns();
		while (!c->dead_rc && (got = proto_framer_next(&c->rx, &body, &len)) == 1)
			dispatch_frame(c, body, len, t_seen);
		if (got < 0)
			conn_dead(c, -EPROTO, "daemon sent a frame with a bad length (0 or over %u bytes)",
				  VKG_CLIENT_MAX_FRAME);
		if ((size_t)n < sizeof(buf))
			break;
		flags = MSG_DONTWAIT;
	}
}

/* Read whatever has arrived, without blocking. */
void vkg__conn_drain(vkg_client *c)
{
	conn_drain_wait(c, false);
}

/* ---- sending ------------------------------------------------------------ */

/* Send one whole frame; fd >= 0 rides as SCM_RIGHTS on the frame's first
 * byte. While the socket is full we keep reading replies, so that neither
 * side can block the other with full buffers. */
static int conn_send(vkg_client *c, const char *data, size_t len, int fd, vkg_error *err)
{
	size_t off = 0;
	while (off < len) {
		if (c->dead_rc)
			return vkg__dead_err(c, err);
		struct iovec iov = {.iov_base = (void *)(data + off), .iov_len = len - off};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} cm;
		if (fd >= 0 && off == 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.buf;
			mh.msg_controllen = sizeof(cm.buf);
			struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
			ch->cmsg_level = SOL_SOCKET;
			ch->cmsg_type = SCM_RIGHTS;
			ch->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(ch), &fd, sizeof(int));
		}
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = c->fd, .events = POLLOUT | POLLIN};
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return vkg__set_err(err, -errno, "io", "poll: %s", strerror(errno));
			if (p.revents & (POLLIN | POLLHUP | POLLERR))
				vkg__conn_drain(c);
			continue;
		}
		int e = errno;
		/* The daemon may have said why before closing: read that first. */
		vkg__conn_drain(c);
		if (e == EPIPE || e == ECONNRESET)
			conn_dead(c, -ECONNRESET, "daemon closed the connection%s%s",
				  c->fatal[0] ? " after: " : "", c->fatal);
		else
			conn_dead(c, -e, "send to daemon: %s", strerror(e));
		return vkg__dead_err(c, err);
	}
	return 0;
}

/* File a pending entry for id and send its encoded frame. */
int vkg__conn_send_request(vkg_client *c, uint64_t id, const msgpack_sbuffer *sb, int fd,
			   proto_reply *full, bool want_raw, uint64_t t_submit, vkg_error *err)
{
	vkg_entry *e = entry_add(c, id, full);
	if (!e)
		return vkg__set_err(err, -ENOMEM, "io", "out of memory");
	e->want_raw = want_raw;
	e->t_submit_ns = t_submit;
	int rc = conn_send(c, sb->data, sb->size, fd, err);
	if (rc && (e = vkg__entry_find(c, id)) != NULL)
		vkg__entry_remove(c, e);
	return rc;
}

/* Encode req with a fresh id, file a pending entry for it and send it. */
int vkg__conn_request(vkg_client *c, proto_request *req, int fd, proto_reply *full,
		      uint64_t *id_out, vkg_error *err)
{
	if (c->dead_rc)
		return vkg__dead_err(c, err);
	const uint64_t t_submit = vkg__now_ns();
	req->id = c->next_id++;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	int rc = proto_request_encode(&sb, req);
	if (rc) {
		rc = vkg__set_err(err, rc, "io", "encoding the %s request failed: %s",
				  proto_op_name(req->op), strerror(-rc));
		goto out;
	}
	rc = vkg__conn_send_request(c, req->id, &sb, fd, full, false, t_submit, err);
	if (rc == 0)
		*id_out = req->id;
out:
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

/* ---- waiting ------------------------------------------------------------ */

/* Read without sleeping for up to c->spin_us µs (at most timeout_ms when
 * that is not -1) until the entry for id is done, gone, or the connection
 * dead; the caller then looks at the entry as usual. */
static void conn_spin(vkg_client *c, uint64_t id, int timeout_ms)
{
	uint64_t budget = (uint64_t)c->spin_us * 1000;
	if (timeout_ms >= 0 && budget > (uint64_t)timeout_ms * 1000000)
		budget = (uint64_t)timeout_ms * 1000000;
	if (!budget)
		return;
	const uint64_t until = vkg__now_ns() + budget;
	do {
		vkg__conn_drain(c);
		const vkg_entry *e = vkg__entry_find(c, id);
		if (!e || e->done || c->dead_rc)
			return;
		vkg__cpu_relax();
	} while (vkg__now_ns() < until);
}

/* Block until the entry for id is done (returned in *out), the time runs out
 * (-ETIMEDOUT, entry kept) or the connection dies (entry dropped). */
int vkg__conn_wait(vkg_client *c, uint64_t id, int timeout_ms, vkg_entry **out, vkg_error *err)
{
	const int64_t deadline = timeout_ms >= 0 ? vkg__now_ms() + timeout_ms : 0;
	conn_spin(c, id, timeout_ms);
	for (bool first = true;; first = false) {
		/* without a time limit the read itself waits (one syscall, not a
		 * poll and a read); the table may hold the reply already */
		if (timeout_ms >= 0)
			vkg__conn_drain(c);
		else if (!first)
			conn_drain_wait(c, true);
		vkg_entry *e = vkg__entry_find(c, id);
		if (!e)
			return vkg__set_err(err, -ENOENT, "io",
					    "no outstanding request with handle %llu (never "
					    "submitted, or already reported)",
					    (unsigned long long)id);
		if (e->done) {
			*out = e;
			return 0;
		}
		if (c->dead_rc) {
			vkg__entry_remove(c, e);
			return vkg__dead_err(c, err);
		}
		if (timeout_ms < 0)
			continue;
		int64_t left = deadline - vkg__now_ms();
		if (left <= 0)
			return vkg__set_err(err, -ETIMEDOUT, "io",
					    "request %llu not finished within %d ms",
					    (unsigned long long)id, timeout_ms);
		int wait = left > INT_MAX ? INT_MAX : (int)left;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return vkg__set_err(err, -errno, "io", "poll: %s", strerror(errno));
	}
}

int vkg__conn_wait_own(vkg_client *c, uint64_t id, vkg_entry **out, vkg_error *err)
{
	int rc = vkg__conn_wait(c, id, -1, out, err);
	if (rc) {
		vkg_entry *e = vkg__entry_find(c, id);
		if (e)
			vkg__entry_remove(c, e);
	}
	return rc;
}

/* Send a request and wait for its reply: the synchronous ops. */
int vkg__conn_call(vkg_client *c, proto_request *req, int fd, proto_reply *full, vkg_result *res,
		   uint64_t *region, vkg_error *err)
{
	uint64_t id;
	int rc = vkg__conn_request(c, req, fd, full, &id, err);
	if (rc)
		return rc;
	vkg_entry *e;
	rc = vkg__conn_wait_own(c, id, &e, err); /* (never into a freed `full`) */
	if (rc)
		return rc;
	return vkg__entry_consume(c, e, res, region, err);
}
