/* tests/common/rawsock.c — see rawsock.h. Blocking sends, poll()ed reads. */
#include "rawsock.h"

#include "daemon_proc.h"
#include "deadline.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RAWSOCK_MAX_FDS 32 /* more than the daemon takes in one message */

int rawsock_open(rawsock *s, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memset(s, 0, sizeof(*s));
	s->fd = -1;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	s->fd = fd;
	proto_framer_init(&s->fr, RAWSOCK_MAX_FRAME);
	return 0;
}

void rawsock_close(rawsock *s)
{
	if (s->fd >= 0) {
		close(s->fd);
		proto_framer_free(&s->fr);
	}
	s->fd = -1;
}

int rawsock_send(rawsock *s, const void *data, size_t n, const int *fds, unsigned nfds)
{
	union {
		char buf[CMSG_SPACE(RAWSOCK_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	if (nfds > RAWSOCK_MAX_FDS || n == 0)
		return -EINVAL;
	size_t off = 0;
	while (off < n) {
		struct iovec iov = {.iov_base = (char *)data + off, .iov_len = n - off};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (nfds && off == 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.buf;
			mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
			struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_RIGHTS;
			h->cmsg_len = CMSG_LEN(nfds * sizeof(int));
			memcpy(CMSG_DATA(h), fds, nfds * sizeof(int));
		}
		ssize_t k = sendmsg(s->fd, &mh, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)k;
	}
	return 0;
}

int rawsock_send_frame(rawsock *s, const void *body, size_t n, const int *fds, unsigned nfds)
{
	uint8_t *buf = malloc(n + PROTO_FRAME_HDR);
	if (!buf)
		return -ENOMEM;
	proto_frame_put_len(buf, (uint32_t)n);
	memcpy(buf + PROTO_FRAME_HDR, body, n);
	int rc = rawsock_send(s, buf, n + PROTO_FRAME_HDR, fds, nfds);
	free(buf);
	return rc;
}

int rawsock_send_request(rawsock *s, const proto_request *req, const int *fds, unsigned nfds)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	int rc = proto_request_encode(&sb, req);
	if (rc == 0)
		rc = rawsock_send(s, sb.data, sb.size, fds, nfds);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

int rawsock_send_sbuf(rawsock *s, const msgpack_sbuffer *sb, const int *fds, unsigned nfds)
{
	return rawsock_send_frame(s, sb->data, sb->size, fds, nfds);
}

/* Read what is there into the framer, waiting up to `wait` ms for it.
 * Returns 1 (bytes came), 0 (nothing in time), or a negative value. */
static int fill(rawsock *s, int wait)
{
	struct pollfd p = {.fd = s->fd, .events = POLLIN};
	int n = poll(&p, 1, wait);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n == 0)
		return 0;
	uint8_t buf[65536];
	ssize_t k = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (k == 0 || (k < 0 && (errno == ECONNRESET || errno == EPIPE))) {
		s->eof = true;
		return -ECONNRESET;
	}
	if (k < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
	if (proto_framer_push(&s->fr, buf, (size_t)k) != 0)
		return -ENOMEM;
	return 1;
}

/* Wait until the framer holds one whole frame; *body and *len then point into
 * it (valid until the next read). Returns 0 or as rawsock_recv. */
static int next_frame(rawsock *s, const uint8_t **body, uint32_t *len, int timeout_ms)
{
	timeout_ms = deadline_scaled_ms(timeout_ms);
	const int64_t deadline = deadline_now_ms() + timeout_ms;
	for (;;) {
		int got = proto_framer_next(&s->fr, body, len);
		if (got < 0)
			return -EBADMSG;
		if (got == 1)
			return 0;
		if (s->eof)
			return -ECONNRESET;
		int64_t left = deadline - deadline_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		int rc = fill(s, (int)left);
		if (rc < 0)
			return rc;
	}
}

int rawsock_recv(rawsock *s, proto_reply *r, int timeout_ms)
{
	const uint8_t *body;
	uint32_t len;
	int rc = next_frame(s, &body, &len, timeout_ms);
	if (rc)
		return rc;
	proto_err err;
	return proto_reply_decode(body, len, r, &err) == 0 ? 0 : -EBADMSG;
}

int rawsock_recv_body(rawsock *s, uint8_t **body, uint32_t *len, int timeout_ms)
{
	const uint8_t *b;
	int rc = next_frame(s, &b, len, timeout_ms);
	if (rc)
		return rc;
	*body = malloc(*len ? *len : 1);
	if (!*body)
		return -ENOMEM;
	memcpy(*body, b, *len);
	return 0;
}

int rawsock_call(rawsock *s, const proto_request *req, proto_reply *r, int timeout_ms)
{
	int rc = rawsock_send_request(s, req, NULL, 0);
	if (rc)
		return rc;
	rc = rawsock_recv(s, r, timeout_ms);
	if (rc)
		return rc;
	return r->id == req->id ? 0 : -EPROTO;
}

int rawsock_expect_eof(rawsock *s, int timeout_ms)
{
	timeout_ms = deadline_scaled_ms(timeout_ms);
	const int64_t deadline = deadline_now_ms() + timeout_ms;
	for (;;) {
		const uint8_t *body;
		uint32_t len;
		if (proto_framer_next(&s->fr, &body, &len) != 0)
			return -EPROTO;
		if (s->fr.len > 0 && s->eof)
			return -EPROTO; /* a partial frame, then EOF */
		if (s->eof)
			return 0;
		int64_t left = deadline - deadline_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		int rc = fill(s, (int)left);
		if (rc == -ECONNRESET)
			continue;
		if (rc < 0)
			return rc;
	}
}

bool rawsock_daemon_serves(const char *path)
{
	rawsock s;
	if (rawsock_open(&s, path) != 0)
		return false;
	proto_request q = {.op = PROTO_OP_PING, .id = 4242};
	proto_reply *r = malloc(sizeof(*r));
	bool ok = r && rawsock_call(&s, &q, r, 10000) == 0 && r->ok && r->id == 4242;
	free(r);
	rawsock_close(&s);
	return ok;
}

int rawsock_call_stats(rawsock *s, proto_stats *out)
{
	static uint64_t id = 770000;
	proto_request q = {.op = PROTO_OP_STATS, .id = ++id};
	proto_reply *r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	int rc = rawsock_call(s, &q, r, 10000);
	if (rc == 0 && !r->ok)
		rc = -EREMOTEIO;
	if (rc == 0)
		*out = r->stats;
	free(r);
	return rc;
}

int rawsock_stats(const char *path, proto_stats *out)
{
	rawsock s;
	int rc = rawsock_open(&s, path);
	if (rc)
		return rc;
	rc = rawsock_call_stats(&s, out);
	rawsock_close(&s);
	return rc;
}

int rawsock_register(rawsock *s, uint64_t id, int fd, uint64_t size, uint64_t *region,
		     proto_reply *r)
{
	proto_request q = {.op = PROTO_OP_REGISTER, .id = id, .size = size};
	int rc = rawsock_send_request(s, &q, &fd, 1);
	if (rc)
		return rc;
	rc = rawsock_recv(s, r, RAWSOCK_TIMEOUT_MS);
	if (rc)
		return rc;
	if (r->id != id)
		return -EPROTO;
	if (!r->ok)
		return -EREMOTEIO;
	*region = r->region;
	return 0;
}
