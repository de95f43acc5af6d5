/* proto/frame.c — see frame.h. */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void proto_framer_init(proto_framer *f, uint32_t max_frame)
{
	memset(f, 0, sizeof(*f));
	f->max_frame = max_frame;
}

void proto_framer_free(proto_framer *f)
{
	if (!f)
		return;
	free(f->buf);
	f->buf = NULL;
	f->len = f->cap = f->head = 0;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void proto_frame_put_len(uint8_t out[PROTO_FRAME_HDR], uint32_t n)
{
	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
}

int proto_framer_push(proto_framer *f, const void *data, size_t n)
{
	if (n == 0)
		return 0;
	/* Compact consumed bytes first so the buffer stays bounded. */
	if (f->head > 0) {
		memmove(f->buf, f->buf + f->head, f->len);
		f->head = 0;
	}
	if (f->len + n > f->cap) {
		/* Double for amortised growth, but never past one whole frame plus
		 * this chunk (frame.h's bound): doubling alone would reach
		 * 2 × max_frame for a stream of maximum-size frames. */
		const size_t need = f->len + n;
		const size_t bound = (size_t)f->max_frame + PROTO_FRAME_HDR + n;
		size_t cap = f->cap ? f->cap : 4096;
		while (cap < need)
			cap *= 2;
		if (cap > bound)
			cap = need > bound ? need : bound;
		uint8_t *nb = realloc(f->buf, cap);
		if (!nb)
			return -ENOMEM;
		f->buf = nb;
		f->cap = cap;
	}
	memcpy(f->buf + f->len, data, n);
	f->len += n;
	return 0;
}

int proto_framer_next(proto_framer *f, const uint8_t **body, uint32_t *len)
{
	if (f->len < PROTO_FRAME_HDR)
		return 0;
	const uint8_t *p = f->buf + f->head;
	uint32_t n = get_be32(p);
	if (n == 0 || n > f->max_frame)
		return -EMSGSIZE;
	if (f->len - PROTO_FRAME_HDR < n)
		return 0;
	*body = p + PROTO_FRAME_HDR;
	*len = n;
	f->head += PROTO_FRAME_HDR + n;
	f->len -= PROTO_FRAME_HDR + n;
	if (f->len == 0)
		f->head = 0; /* body stays valid: nothing is moved until the next push */
	return 1;
}

size_t proto_framer_need(const proto_framer *f)
{
	if (f->len < PROTO_FRAME_HDR)
		return PROTO_FRAME_HDR - f->len;
	uint32_t n = get_be32(f->buf + f->head);
	if (n == 0 || n > f->max_frame || f->len - PROTO_FRAME_HDR >= n)
		return 0;
	return PROTO_FRAME_HDR + n - f->len;
}
