/* daemon/net/outq.c — see outq.h. */
#include "outq.h"
#include "clock.h"


#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void outq_init(outq *q, int fd, metrics *m)
{
	memset(q, 0, sizeof(*q));
	q->fd = fd;
	q->m = m;
	q->clock = clock_now_ns;
}

void outq_free(outq *q)
{
	free(q->buf);
	free(q->patch);
	q->buf = NULL;
	q->patch = NULL;
}

void outq_shut(outq *q)
{
	q->shut = true;
	q->off = q->len = 0;
	q->npatch = 0;
}

static int grow(outq *q, size_t n, bool timed)
{
	if (q->len + n > q->cap) {
		size_t cap = q->cap ? q->cap : 4096;
		while (cap < q->len + n)
			cap *= 2;
		uint8_t *nb = realloc(q->buf, cap);
		if (!nb)
			return -ENOMEM;
		q->buf = nb;
		q->cap = cap;
	}
	if (timed && q->npatch == q->patch_cap) {
		uint32_t cap = q->patch_cap ? q->patch_cap * 2 : 16;
		outq_patch *np = realloc(q->patch, cap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		q->patch = np;
		q->patch_cap = cap;
	}
	return 0;
}

/* Reclaim the bytes already written: move what is pending to the front
 * (and the timed replies' offsets with it) once the written part is at
 * least as large as the pending part, or when the append would otherwise
 * grow the buffer. Each byte is moved at most about once per byte written
 * before it, so a slow reader's buffer stays about max_pending large,
 * whatever its reading pattern. */
static void compact(outq *q, size_t n)
{
	if (q->off == 0)
		return;
	size_t pending = q->len - q->off;
	if (pending && q->off < pending && q->len + n <= q->cap)
		return;
	if (pending)
		memmove(q->buf, q->buf + q->off, pending);
	for (uint32_t i = 0; i < q->npatch; i++)
		q->patch[i].at -= q->off;
	q->off = 0;
	q->len = pending;
}

/* An empty queue gives back a buffer grown past OUTQ_KEEP_BYTES (a burst's,
 * or a slow reader's that caught up). */
static void trim(outq *q)
{
	if (q->off != q->len)
		return;
	q->off = q->len = 0;
	if (q->cap > OUTQ_KEEP_BYTES) {
		free(q->buf);
		q->buf = NULL;
		q->cap = 0;
	}
}

int outq_append(outq *q, const void *p, size_t n, bool timed, uint64_t t_encoded,
		uint64_t max_pending)
{
	if (q->shut)
		return -EPIPE;
	if (q->len - q->off + n > max_pending)
		return -ENOBUFS;
	compact(q, n);
	timed = timed && n >= 8;
	int rc = grow(q, n, timed);
	if (rc != 0)
		return rc;
	memcpy(q->buf + q->len, p, n);
	q->len += n;
	if (timed)
		q->patch[q->npatch++] = (outq_patch){.at = q->len - 8, .t_encoded = t_encoded};
	return 0;
}

/* The write time into every timed reply no byte of which is written yet
 * (all those still listed: a partly written one left the list). */
static void stamp(outq *q, uint64_t now)
{
	for (uint32_t i = 0; i < q->npatch; i++)
		proto_reply_put_time(q->buf + q->patch[i].at + 8, now);
}

/* Replies whose time (their last 8 bytes) began to go out leave the list,
 * their WRITE stage observed; one whose time is wholly unwritten stays and
 * takes the next flush's time, so each reply carries one reading. */
static void unlist_written(outq *q, uint64_t now)
{
	uint32_t k = 0;
	while (k < q->npatch && q->patch[k].at < q->off) {
		if (q->m) {
			uint64_t st[PROTO_STAGE_COUNT] = {0};
			st[PROTO_STAGE_WRITE] = now > q->patch[k].t_encoded ? now - q->patch[k].t_encoded : 0;
			metrics_stages(q->m, st, 1u << PROTO_STAGE_WRITE);
		}
		k++;
	}
	if (k) {
		memmove(q->patch, q->patch + k, (q->npatch - k) * sizeof(*q->patch));
		q->npatch -= k;
	}
}

int outq_flush(outq *q)
{
	int rc = 0;
	if (q->shut || q->err)
		return q->shut ? 0 : -q->err;
	uint64_t now = 0;
	if (q->npatch) {
		now = q->clock();
		stamp(q, now);
	}
	while (q->off < q->len) {
		ssize_t n = send(q->fd, q->buf + q->off, q->len - q->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			rc = 1;
			break;
		}
		if (n < 0) {
			q->err = errno;
			rc = -q->err;
			break;
		}
		q->off += (size_t)n;
	}
	unlist_written(q, now);
	trim(q);
	return rc;
}

size_t outq_pending(const outq *q)
{
	return q->len - q->off;
}
