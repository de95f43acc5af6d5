/* proto/frame.h — length-prefixed frame reassembly (no I/O).
 *
 * A frame is a 4-byte big-endian length N then N bytes of body. The framer
 * accepts bytes in any chunking and hands back whole bodies. The length is
 * checked against max_frame before a frame is handed out, and the buffer
 * never holds more than max_frame + 4 plus the chunk being pushed, so a
 * hostile length never causes an allocation of that size.
 */
#ifndef VKG_PROTO_FRAME_H
#define VKG_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_FRAME_HDR 4u
#define PROTO_MIN_MAX_FRAME 65536u

typedef struct proto_framer {
	uint8_t *buf;       /* owned; holds unconsumed bytes */
	size_t len;         /* bytes held */
	size_t cap;         /* allocated */
	size_t head;        /* start of unconsumed bytes in buf */
	uint32_t max_frame; /* largest body accepted */
} proto_framer;

void proto_framer_init(proto_framer *f, uint32_t max_frame);
void proto_framer_free(proto_framer *f);

/* Append n bytes. Returns 0, or -ENOMEM. The buffer never grows beyond
 * max_frame + PROTO_FRAME_HDR plus the chunk being appended. */
int proto_framer_push(proto_framer *f, const void *data, size_t n);

/* Take the next whole frame. Returns 1 and sets *body and *len (valid until the
 * next push or next call), 0 when no whole frame is buffered yet, or
 * -EMSGSIZE when the length prefix is 0 or above max_frame (the stream is
 * then unusable). */
int proto_framer_next(proto_framer *f, const uint8_t **body, uint32_t *len);

/* Bytes still missing from the frame being assembled: the rest of its
 * header while that is incomplete, else the rest of its body. 0 when a
 * whole frame is buffered or the length prefix is invalid. */
size_t proto_framer_need(const proto_framer *f);

/* Write the 4-byte big-endian length prefix of a body of n bytes. */
void proto_frame_put_len(uint8_t out[PROTO_FRAME_HDR], uint32_t n);

#endif
