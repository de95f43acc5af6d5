/* tests/common/jsonl.c — see jsonl.h. */
#include "jsonl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static const char *value(const char *p);

static const char *string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (; *p && *p != '"'; p++) {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				p += 4;
			} else if (!*p || !strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
	}
	return *p == '"' ? p + 1 : NULL;
}

static const char *digits(const char *p)
{
	if (!isdigit((unsigned char)*p))
		return NULL;
	while (isdigit((unsigned char)*p))
		p++;
	return p;
}

static const char *number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (!(p = digits(p)))
		return NULL;
	if (*p == '.' && !(p = digits(p + 1)))
		return NULL;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(p = digits(p)))
			return NULL;
	}
	return p;
}

/* Object or array: brackets, members "key": value when keyed. */
static const char *seq(const char *p, char open, char close, bool keyed)
{
	if (*p++ != open)
		return NULL;
	p = ws(p);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (keyed) {
			if (!(p = string(ws(p))))
				return NULL;
			p = ws(p);
			if (*p++ != ':')
				return NULL;
		}
		if (!(p = value(ws(p))))
			return NULL;
		p = ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *value(const char *p)
{
	p = ws(p);
	switch (*p) {
	case '{': return seq(p, '{', '}', true);
	case '[': return seq(p, '[', ']', false);
	case '"': return string(p);
	case 't': return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
	case 'f': return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
	case 'n': return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
	default: return number(p);
	}
}

bool jsonl_is_object(const char *line)
{
	const char *p = ws(line);
	const char *end = *p == '{' ? value(p) : NULL;
	return end && !*ws(end);
}

const char *jsonl_get(const char *line, const char *key, char *out, size_t n)
{
	if (!jsonl_is_object(line) || n == 0)
		return NULL;
	const char *p = ws(line) + 1;
	const size_t klen = strlen(key);
	for (;;) {
		p = ws(p);
		if (*p != '"')
			return NULL;
		const char *ks = p + 1, *ke = string(p);
		p = ws(ws(ke) + 1); /* past ':' */
		const char *ve = value(p);
		if ((size_t)(ke - 1 - ks) == klen && memcmp(ks, key, klen) == 0) {
			size_t len = (size_t)(ve - p) < n - 1 ? (size_t)(ve - p) : n - 1;
			memcpy(out, p, len);
			out[len] = 0;
			return out;
		}
		p = ws(ve);
		if (*p != ',')
			return NULL;
		p++;
	}
}

bool jsonl_num(const char *line, const char *key, double *v)
{
	char buf[64];
	if (!jsonl_get(line, key, buf, sizeof(buf)))
		return false;
	const char *end = number(buf);
	if (!end || *end)
		return false;
	*v = strtod(buf, NULL);
	return true;
}
