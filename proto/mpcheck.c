/* proto/mpcheck.c — see mpcheck.h. */
#include "mpcheck.h"

#include <errno.h>

static uint64_t be(const uint8_t *p, unsigned k)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < k; i++)
		v = v << 8 | p[i];
	return v;
}

int proto_mpcheck(const uint8_t *p, size_t n, unsigned max_depth, const char **why)
{
	/* pending[d] = objects still to read at depth d */
	uint64_t pending[PROTO_MAX_DEPTH + 1];
	unsigned depth = 0;
	size_t i = 0;
	static const char *s_trunc = "truncated msgpack object";
	if (max_depth > PROTO_MAX_DEPTH)
		max_depth = PROTO_MAX_DEPTH;
	pending[0] = 1;
	while (depth > 0 || pending[0] > 0) {
		if (pending[depth] == 0) {
			depth--;
			continue;
		}
		pending[depth]--;
		if (i >= n) {
			*why = s_trunc;
			return -EBADMSG;
		}
		uint8_t t = p[i++];
		uint64_t skip = 0;   /* payload bytes after the header */
		uint64_t items = 0;  /* child objects for containers */
		int container = 0;
		unsigned hdr = 0;    /* big-endian length bytes to read */
		if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
			/* fixint, nil, bool */
		} else if (t <= 0x8f) {
			items = 2u * (t & 0x0f); container = 1;
		} else if (t <= 0x9f) {
			items = t & 0x0f; container = 1;
		} else if (t <= 0xbf) {
			skip = t & 0x1f;
		} else {
			switch (t) {
			case 0xc4: case 0xd9: hdr = 1; break; /* bin8, str8 */
			case 0xc5: case 0xda: hdr = 2; break;
			case 0xc6: case 0xdb: hdr = 4; break;
			case 0xc7: hdr = 1; skip = 1; break; /* ext8: len, type */
			case 0xc8: hdr = 2; skip = 1; break;
			case 0xc9: hdr = 4; skip = 1; break;
			case 0xca: skip = 4; break;
			case 0xcb: skip = 8; break;
			case 0xcc: case 0xd0: skip = 1; break;
			case 0xcd: case 0xd1: skip = 2; break;
			case 0xce: case 0xd2: skip = 4; break;
			case 0xcf: case 0xd3: skip = 8; break;
			case 0xd4: skip = 2; break; /* fixext: type + data */
			case 0xd5: skip = 3; break;
			case 0xd6: skip = 5; break;
			case 0xd7: skip = 9; break;
			case 0xd8: skip = 17; break;
			case 0xdc: hdr = 2; container = 1; break;
			case 0xdd: hdr = 4; container = 1; break;
			case 0xde: hdr = 2; container = 2; break;
			case 0xdf: hdr = 4; container = 2; break;
			default:
				*why = "invalid msgpack type byte 0xc1";
				return -EBADMSG;
			}
		}
		if (hdr) {
			if (n - i < hdr) {
				*why = s_trunc;
				return -EBADMSG;
			}
			uint64_t v = be(p + i, hdr);
			i += hdr;
			if (container)
				items = container == 2 ? 2 * v : v;
			else
				skip += v;
		}
		if (skip > n - i) {
			*why = "msgpack length runs past the end of the frame";
			return -EBADMSG;
		}
		i += (size_t)skip;
		if (container) {
			/* every child takes at least one byte */
			if (items > n - i) {
				*why = "msgpack container count exceeds the bytes in the frame";
				return -EBADMSG;
			}
			if (items > 0) {
				if (depth + 1 > max_depth) {
					*why = "msgpack nesting too deep";
					return -EBADMSG;
				}
				pending[++depth] = items;
			}
		}
	}
	if (i != n) {
		*why = "trailing bytes after the msgpack object";
		return -EBADMSG;
	}
	return 0;
}
