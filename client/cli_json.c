/* client/cli_json.c — a reply's msgpack body as JSON (`info --json`,
 * `stats --json`, `clients --json`): every key the daemon sent, so what a
 * newer daemon adds shows up without a change here. Strings are escaped as
 * JSON wants (control characters as \u00XX, invalid UTF-8 bytes as
 * U+FFFD), binary as null, NaN and infinities as null. The reply's `id`
 * and `ok` are left out; `socket` (the daemon's path) comes first. */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\') {
			fputc('\\', f), fputc(ch, f), i++;
		} else if (ch < 0x20 || ch == 0x7f) {
			fprintf(f, "\\u%04x", ch), i++;
		} else if (ch < 0x80) {
			fputc(ch, f), i++;
		} else {
			/* one UTF-8 sequence, checked; else U+FFFD */
			size_t len = ch >= 0xf0 && ch < 0xf5 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
			bool ok = len && i + len <= n;
			for (size_t k = 1; ok && k < len; k++)
				ok = ((unsigned char)s[i + k] & 0xc0) == 0x80;
			if (ok && len == 3 && ch == 0xe0)
				ok = (unsigned char)s[i + 1] >= 0xa0;
			if (ok && len == 3 && ch == 0xed)
				ok = (unsigned char)s[i + 1] < 0xa0;
			if (ok && len == 4 && ch == 0xf0)
				ok = (unsigned char)s[i + 1] >= 0x90;
			if (ok && len == 4 && ch == 0xf4)
				ok = (unsigned char)s[i + 1] < 0x90;
			if (ok) {
				fwrite(s + i, 1, len, f);
				i += len;
			} else {
				fputs("\\ufffd", f);
				i++;
			}
		}
	}
	fputc('"', f);
}

static void json_obj(FILE *f, const msgpack_object *o, bool top, const char *socket)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: fputs("null", f); break;
	case MSGPACK_OBJECT_BOOLEAN: fputs(o->via.boolean ? "true" : "false", f); break;
	case MSGPACK_OBJECT_POSITIVE_INTEGER: fprintf(f, "%" PRIu64, o->via.u64); break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: fprintf(f, "%" PRId64, o->via.i64); break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		if (isfinite(o->via.f64))
			fprintf(f, "%.17g", o->via.f64);
		else
			fputs("null", f);
		break;
	case MSGPACK_OBJECT_STR: json_str(f, o->via.str.ptr, o->via.str.size); break;
	case MSGPACK_OBJECT_ARRAY:
		fputc('[', f);
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			if (i)
				fputs(", ", f);
			json_obj(f, &o->via.array.ptr[i], false, NULL);
		}
		fputc(']', f);
		break;
	case MSGPACK_OBJECT_MAP: {
		fputc('{', f);
		bool first = true;
		if (socket) {
			fputs("\"socket\": ", f);
			json_str(f, socket, strlen(socket));
			first = false;
		}
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			if (k->type != MSGPACK_OBJECT_STR)
				continue; /* JSON keys are strings */
			if (top && ((k->via.str.size == 2 && !memcmp(k->via.str.ptr, "id", 2)) ||
				    (k->via.str.size == 2 && !memcmp(k->via.str.ptr, "ok", 2))))
				continue;
			if (!first)
				fputs(", ", f);
			first = false;
			json_str(f, k->via.str.ptr, k->via.str.size);
			fputs(": ", f);
			json_obj(f, &o->via.map.ptr[i].val, false, NULL);
		}
		fputc('}', f);
		break;
	}
	default: fputs("null", f); break;
	}
}

int cli_print_json(const void *body, size_t len, const char *socket)
{
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	if (msgpack_unpack_next(&u, body, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP) {
		msgpack_unpacked_destroy(&u);
		cli_errf("vkgrad: the reply is not a msgpack map\n");
		return CLI_EXIT_DAEMON;
	}
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f) {
		msgpack_unpacked_destroy(&u);
		cli_errf("vkgrad: out of memory\n");
		return CLI_EXIT_DAEMON;
	}
	json_obj(f, &u.data, true, socket);
	fputc('\n', f);
	fclose(f);
	msgpack_unpacked_destroy(&u);
	fwrite(buf, 1, n, stdout);
	fflush(stdout);
	free(buf);
	return CLI_EXIT_OK;
}
