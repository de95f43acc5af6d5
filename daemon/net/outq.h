/* daemon/net/outq.h — a connection's outbound bytes: replies encoded and not
 * yet written to its socket.
 *
 * Replies are appended whole and written in order, as much as the socket
 * takes (MSG_DONTWAIT); what it does not take waits for the next flush. A
 * reply appended `timed` carries a trace whose last 8 bytes are its write
 * time (proto_reply_put_time): each flush puts its own clock reading into
 * every such reply whose time is still wholly unwritten, just before the
 * send, and once the send took the first byte of a reply's time, observes
 * the WRITE stage (encoded -> written) of that reply in the metrics. So
 * each reply carries one reading: that of the send that began writing it.
 *
 * Written bytes are reclaimed (outq.c: compact): the buffer holds what is
 * pending and about as much again at most, so a reader that keeps a
 * backlog below max_pending costs about 2 x max_pending, however long it
 * reads; an emptied buffer above OUTQ_KEEP_BYTES is freed.
 *
 * Loop thread only. Once shut (the connection is closing), appends and
 * flushes do nothing and the socket is not touched again, so its owner
 * may close it. */
#ifndef VKG_DAEMON_OUTQ_H
#define VKG_DAEMON_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

#define OUTQ_KEEP_BYTES (256u << 10) /* buffer kept while empty */

typedef struct outq_patch {
	size_t at;           /* offset of the reply's last 8 bytes in buf */
	uint64_t t_encoded;  /* when the reply was encoded */
} outq_patch;

typedef struct outq {
	int fd;
	bool shut;
	int err;             /* a send's errno (not EAGAIN): the owner closes */
	uint8_t *buf;
	size_t off, len, cap; /* written up to off, appended up to len */
	outq_patch *patch;   /* timed replies not yet (partly) written, by offset */
	uint32_t npatch, patch_cap;
	metrics *m;          /* where WRITE stages go; may be NULL */
	uint64_t (*clock)(void); /* clock_now_ns (a test may put another) */
} outq;

void outq_init(outq *q, int fd, metrics *m);
void outq_free(outq *q);
/* No more appends or writes; the socket is its owner's to close. */
void outq_shut(outq *q);

/* Append one framed reply. timed: its last 8 bytes take the write time
 * (t_encoded: when it was encoded). Returns 0, -ENOBUFS when the unwritten
 * bytes would pass max_pending (nothing appended), -ENOMEM, or -EPIPE once
 * shut. */
int outq_append(outq *q, const void *p, size_t n, bool timed, uint64_t t_encoded,
		uint64_t max_pending);
/* Write what is pending. Returns 0 when nothing is left, 1 when the socket
 * is full (wait for it to be writable), or -errno (also kept in q->err). */
int outq_flush(outq *q);
/* Bytes appended and not written yet. */
size_t outq_pending(const outq *q);

#endif
