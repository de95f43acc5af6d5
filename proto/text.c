/* proto/text.c — see text.h. */
#include "text.h"

#include <stdio.h>
#include <string.h>

size_t proto_text_char(const void *s, size_t n, uint32_t *cp)
{
	const uint8_t *p = s;
	if (n == 0)
		return 0;
	const uint8_t c = p[0];
	size_t len;
	uint32_t v, min;
	if (c < 0x80) {
		if (cp)
			*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, v = c & 0x1fu, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, v = c & 0x0fu, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, v = c & 0x07u, min = 0x10000;
	else
		return 0; /* a continuation byte, C0/C1 (always overlong), F5..FF */
	if (n < len)
		return 0;
	for (size_t k = 1; k < len; k++) {
		if ((p[k] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[k] & 0x3fu);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	if (cp)
		*cp = v;
	return len;
}

bool proto_text_valid(const void *s, size_t n)
{
	const uint8_t *p = s;
	for (size_t i = 0; i < n;) {
		if (p[i] < 0x80) { /* the common case, one byte at a time */
			i++;
			continue;
		}
		size_t k = proto_text_char(p + i, n - i, NULL);
		if (k == 0)
			return false;
		i += k;
	}
	return true;
}

size_t proto_text_truncate(const void *s, size_t n, size_t max)
{
	const uint8_t *p = s;
	if (max >= n)
		return n;
	/* p[max] is the first byte dropped: if it continues a character,
	 * that character starts at most 3 bytes before it */
	size_t k = max;
	for (int back = 0; back < 3 && k > 0 && (p[k] & 0xc0) == 0x80; back++)
		k--;
	if ((p[k] & 0xc0) == 0x80)
		return max; /* stray continuation bytes: no character to keep whole */
	return k;
}

/* The escaped form of the character (or ill-formed byte) at s[0..n), n >= 1,
 * into buf (at least 7 bytes, not NUL-terminated). Returns its length and
 * sets *used to the bytes of s it stands for. */
static size_t piece(const uint8_t *s, size_t n, unsigned flags, char *buf, size_t *used)
{
	uint32_t cp;
	size_t k = proto_text_char(s, n, &cp);
	if (k == 0) {
		*used = 1;
		return (size_t)snprintf(buf, 7, "\\x%02x", s[0]);
	}
	*used = k;
	switch (cp) {
	case '\n': memcpy(buf, "\\n", 2); return 2;
	case '\r': memcpy(buf, "\\r", 2); return 2;
	case '\t': memcpy(buf, "\\t", 2); return 2;
	case '\\':
		if (flags & PROTO_TEXT_KEEP_BACKSLASH)
			break;
		memcpy(buf, "\\\\", 2);
		return 2;
	default:
		if (cp < 0x20 || cp == 0x7f)
			return (size_t)snprintf(buf, 7, "\\x%02x", (unsigned)cp);
		if (cp >= 0x80 && cp <= 0x9f)
			return (size_t)snprintf(buf, 7, "\\u%04x", (unsigned)cp);
		break;
	}
	memcpy(buf, s, k);
	return k;
}

size_t proto_text_escape(char *out, size_t cap, const void *s, size_t n, size_t max_chars,
			 unsigned flags)
{
	static const char more[] = "...";
	const uint8_t *p = s;
	char buf[8];
	if (cap == 0)
		return 0;
	/* does all of it fit? */
	size_t need = 0, chars = 0, used;
	for (size_t i = 0; i < n && chars <= max_chars; i += used, chars++)
		need += piece(p + i, n - i, flags, buf, &used);
	const bool whole = chars <= max_chars && need < cap;
	/* room for the pieces: all of cap, or what "..." leaves of it (a
	 * cap too small for "..." is cut without it) */
	const size_t dots = sizeof(more) - 1;
	const size_t room = whole || cap - 1 < dots ? cap - 1 : cap - 1 - dots;
	size_t o = 0;
	chars = 0;
	for (size_t i = 0; i < n && chars < max_chars; i += used, chars++) {
		size_t m = piece(p + i, n - i, flags, buf, &used);
		if (o + m > room)
			break;
		memcpy(out + o, buf, m);
		o += m;
	}
	if (!whole && cap - 1 - o >= dots) {
		memcpy(out + o, more, dots);
		o += dots;
	}
	out[o] = 0;
	return o;
}
