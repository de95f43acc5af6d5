/* tests/common/rawsock.h — a bare protocol connection for tests: send any
 * bytes (well-formed or not, with descriptors or not), read reply frames one
 * at a time with a timeout, and notice when the daemon closes the connection.
 * Everything the client library would refuse to send can be sent here. */
#ifndef VKG_TEST_RAWSOCK_H
#define VKG_TEST_RAWSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "frame.h"
#include "msg.h"

/* Reply frames up to this size are accepted (hello is the largest). */
#define RAWSOCK_MAX_FRAME (1u << 20)
/* Default wait for one reply, in ms: generous for lavapipe under load. */
#define RAWSOCK_TIMEOUT_MS 60000

typedef struct rawsock {
	int fd;
	proto_framer fr; /* reply bytes not yet consumed */
	bool eof;        /* the daemon closed its end */
} rawsock;

/* Connect to the daemon at path. Returns 0 or -errno. */
int rawsock_open(rawsock *s, const char *path);
/* Close the connection (NULL-safe on a never-opened fd of -1). */
void rawsock_close(rawsock *s);

/* Send n >= 1 bytes as one sendmsg (looping on short writes); when nfds > 0 the
 * descriptors ride as SCM_RIGHTS on the first byte. Returns 0 or -errno. */
int rawsock_send(rawsock *s, const void *data, size_t n, const int *fds, unsigned nfds);
/* Send body with a correct 4-byte big-endian length prefix in front. */
int rawsock_send_frame(rawsock *s, const void *body, size_t n, const int *fds, unsigned nfds);
/* Encode req with proto_request_encode and send it. */
int rawsock_send_request(rawsock *s, const proto_request *req, const int *fds, unsigned nfds);
/* Send the body a packer wrote into sb (no prefix yet), framed. */
int rawsock_send_sbuf(rawsock *s, const msgpack_sbuffer *sb, const int *fds, unsigned nfds);

/* Timeouts below are ten times longer under VKGRAD_TEST_DAEMON_WRAPPER. */

/* Wait up to timeout_ms for one reply frame and decode it into *r.
 * Returns 0, -ETIMEDOUT, -ECONNRESET when the daemon closed the connection
 * (s->eof is then set), or -EBADMSG for a frame that does not decode. */
int rawsock_recv(rawsock *s, proto_reply *r, int timeout_ms);
/* Wait like rawsock_recv for one reply frame and hand over its body,
 * undecoded: *body (malloc'ed, the caller frees it) of *len bytes. */
int rawsock_recv_body(rawsock *s, uint8_t **body, uint32_t *len, int timeout_ms);
/* Send req and wait for the next reply, which must carry req->id.
 * Returns 0 (r filled, ok or not), a rawsock_recv error, or -EPROTO when a
 * reply with another id came. */
int rawsock_call(rawsock *s, const proto_request *req, proto_reply *r, int timeout_ms);
/* Wait for the daemon to close the connection without sending anything
 * more. Returns 0 on EOF, -ETIMEDOUT, or -EPROTO when a frame came instead. */
int rawsock_expect_eof(rawsock *s, int timeout_ms);

/* "The daemon still serves": a NEW connection to path answers a ping with
 * ok and the right id within 10 s. */
bool rawsock_daemon_serves(const char *path);
/* Fetch `stats` over a new connection. Returns 0 or a negative value. */
int rawsock_stats(const char *path, proto_stats *out);
/* Fetch `stats` over the open connection s (ids from 770001 up). */
int rawsock_call_stats(rawsock *s, proto_stats *out);

/* Register region `fd` of `size` bytes on s (fd is sent, not closed).
 * Returns 0 with *region set; the daemon's error leaves r->err filled and
 * returns -EREMOTEIO; transport errors as rawsock_recv. */
int rawsock_register(rawsock *s, uint64_t id, int fd, uint64_t size, uint64_t *region,
		     proto_reply *r);

#endif
