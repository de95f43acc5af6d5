/* tests/integration/test_client_text.c — text that comes from a client and goes
 * back out, in replies or in the log (issue 13, faults 3 and 4).
 *
 * Replies: every string of every reply (keys and values, at any depth) must
 * be strict UTF-8, checked by a validator of this file's own (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF, no truncated sequence),
 * whatever the request's strings held: op names with a multi-byte
 * character across the 40-byte echo limit, invalid bytes in op, dtype and
 * variant strings. Echoes are escaped (`\xff`), never dropped silently.
 *
 * The log: the daemon runs as under systemd (JOURNAL_STREAM set: each line
 * starts with "<N>", the priority journald reads) at --log-level debug, so
 * that failed requests are logged too. A hello `client` name and an op
 * name holding "\n<0>forged", CR, ESC and raw bytes must not start a line
 * of their own, and the whole log must stay valid UTF-8. After each case
 * the daemon still serves, on the same connection and a new one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_proc.h"
#include "expect.h"
#include "rawsock.h"

static daemon_proc g_d;

/* ---- a strict UTF-8 validator, independent of proto/text.c ---------------------- */

/* Is s[0..n) strict UTF-8? On failure *bad is the offset of the first
 * byte that does not start a well-formed character. */
static bool utf8_strict(const uint8_t *s, size_t n, size_t *bad)
{
	size_t i = 0;
	while (i < n) {
		const uint8_t c = s[i];
		unsigned len;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			goto fail; /* a continuation byte, or F8..FF */
		}
		if (n - i < len)
			goto fail;
		for (unsigned k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				goto fail;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			goto fail;
		i += len;
	}
	return true;
fail:
	if (bad)
		*bad = i;
	return false;
}

/* The validator itself, on known answers, before it judges the daemon. */
static void test_validator_knows_utf8(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		bool ok;
	} cases[] = {
		{"", true}, {"plain", true}, {"\xc3\xa9", true}, {"\xe2\x82\xac", true},
		{"\xf0\x9f\x98\x80", true}, {"\xf4\x8f\xbf\xbf", true}, {"\xef\xbf\xbf", true},
		{"\xc0\x80", false}, {"\xc1\xbf", false}, {"\xe0\x9f\xbf", false},
		{"\xf0\x8f\xbf\xbf", false}, {"\xed\xa0\x80", false}, {"\xed\xbf\xbf", false},
		{"\xf4\x90\x80\x80", false}, {"\xf5\x80\x80\x80", false}, {"\xff", false},
		{"\x80", false}, {"\xc3", false}, {"\xe2\x82", false}, {"a\xe2\x82" "b", false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (utf8_strict((const uint8_t *)cases[i].s, strlen(cases[i].s), NULL) != cases[i].ok)
			fail_msg("validator: case %zu judged %s", i, cases[i].ok ? "invalid" : "valid");
}

/* Every str object under o is strict UTF-8; otherwise fail naming where. */
static void assert_strings_utf8(const msgpack_object *o, const char *where)
{
	size_t bad = 0;
	switch (o->type) {
	case MSGPACK_OBJECT_STR:
		if (!utf8_strict((const uint8_t *)o->via.str.ptr, o->via.str.size, &bad)) {
			fprintf(stderr, "string of %u bytes:", o->via.str.size);
			for (uint32_t i = 0; i < o->via.str.size; i++)
				fprintf(stderr, " %02x", (uint8_t)o->via.str.ptr[i]);
			fprintf(stderr, "\n");
			fail_msg("%s: a reply string is not valid UTF-8 (byte %zu of %u)", where, bad,
				 o->via.str.size);
		}
		break;
	case MSGPACK_OBJECT_ARRAY:
		for (uint32_t i = 0; i < o->via.array.size; i++)
			assert_strings_utf8(&o->via.array.ptr[i], where);
		break;
	case MSGPACK_OBJECT_MAP:
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			assert_strings_utf8(&o->via.map.ptr[i].key, where);
			assert_strings_utf8(&o->via.map.ptr[i].val, where);
		}
		break;
	default:
		break;
	}
}

/* Receive the next reply, check all its strings, decode it into *r. */
static void recv_utf8(rawsock *s, proto_reply *r, const char *where)
{
	uint8_t *body;
	uint32_t len;
	int rc = rawsock_recv_body(s, &body, &len, RAWSOCK_TIMEOUT_MS);
	if (rc)
		fail_msg("%s: no reply: %s", where, strerror(-rc));
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	assert_int_equal(msgpack_unpack_next(&u, (const char *)body, len, &off), MSGPACK_UNPACK_SUCCESS);
	assert_strings_utf8(&u.data, where);
	msgpack_unpacked_destroy(&u);
	proto_err err;
	assert_int_equal(proto_reply_decode(body, len, r, &err), 0);
	free(body);
}

/* ---- requests with arbitrary byte strings ---------------------------------------- */

typedef struct bstr {
	const char *p;
	size_t n;
} bstr;

static void pk_bstr(msgpack_packer *pk, bstr s)
{
	msgpack_pack_str(pk, s.n);
	msgpack_pack_str_body(pk, s.p, s.n);
}

static bstr cstr(const char *s)
{
	return (bstr){s, strlen(s)};
}

/* {op, id} with op's bytes as given. */
static void send_op(rawsock *s, bstr op, uint64_t id)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	pk_bstr(&pk, cstr("op"));
	pk_bstr(&pk, op);
	pk_bstr(&pk, cstr("id"));
	msgpack_pack_uint64(&pk, id);
	assert_int_equal(rawsock_send_sbuf(s, &sb, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
}

/* A 4x4x4 db job on region 1 (never reached: the string keys fail first)
 * with the given dtype and, when variant.p, variant. */
static void send_job(rawsock *s, uint64_t id, bstr dtype, bstr variant)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 9 + (variant.p != NULL));
	pk_bstr(&pk, cstr("op"));
	pk_bstr(&pk, cstr("linear_backward"));
	pk_bstr(&pk, cstr("id"));
	msgpack_pack_uint64(&pk, id);
	pk_bstr(&pk, cstr("dtype"));
	pk_bstr(&pk, dtype);
	static const char *const dims[] = {"batch", "in", "out"};
	for (int i = 0; i < 3; i++) {
		pk_bstr(&pk, cstr(dims[i]));
		msgpack_pack_uint64(&pk, 4);
	}
	static const char *const tensors[] = {"x", "dy", "db"};
	for (int i = 0; i < 3; i++) {
		pk_bstr(&pk, cstr(tensors[i]));
		msgpack_pack_array(&pk, 2);
		msgpack_pack_uint64(&pk, 1);
		msgpack_pack_uint64(&pk, 256 * (uint64_t)i);
	}
	if (variant.p) {
		pk_bstr(&pk, cstr("variant"));
		pk_bstr(&pk, variant);
	}
	assert_int_equal(rawsock_send_sbuf(s, &sb, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
}

/* The next reply is error `code` for `id`, all strings valid UTF-8, the
 * message containing `needle` (NULL: not checked). */
static void expect_utf8_error(rawsock *s, uint64_t id, proto_code code, const char *needle,
			      const char *where)
{
	proto_reply r;
	recv_utf8(s, &r, where);
	if (r.ok || r.id != id || r.err.code != code)
		fail_msg("%s: got %s id %llu (\"%s\"); want error %s id %llu", where,
			 r.ok ? "ok" : proto_code_name(r.err.code), (unsigned long long)r.id,
			 r.err.message, proto_code_name(code), (unsigned long long)id);
	if (needle && !strstr(r.err.message, needle))
		fail_msg("%s: message \"%s\" does not contain \"%s\"", where, r.err.message, needle);
}

/* ---- faults 3: replies --------------------------------------------------------------- */

/* The daemon echoed at most 40 bytes of an unknown op name, splitting
 * whatever character straddled byte 40. Every character length, at every
 * position around the cut. */
static void test_unknown_op_cut_on_a_character_boundary(void **state)
{
	(void)state;
	static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
	rawsock s;
	expect_open(&s, g_d.sock);
	uint64_t id = 100;
	for (int c = 0; c < 3; c++) {
		for (size_t lead = 34; lead <= 41; lead++) {
			char op[64], where[64];
			memset(op, 'a', lead);
			const size_t cl = strlen(chars[c]);
			memcpy(op + lead, chars[c], cl);
			memcpy(op + lead + cl, "zz", 2);
			snprintf(where, sizeof(where), "unknown op: %zu bytes then a %zu-byte character",
				 lead, cl);
			send_op(&s, (bstr){op, lead + cl + 2}, ++id);
			expect_utf8_error(&s, id, PROTO_UNKNOWN_OP, "unknown op 'aaaaaaaaaa", where);
		}
	}
	/* a short name is echoed whole */
	send_op(&s, cstr("caf\xc3\xa9"), ++id);
	expect_utf8_error(&s, id, PROTO_UNKNOWN_OP, "unknown op 'caf\xc3\xa9'", "short op");
	expect_conn_serves(&s);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

/* Bytes that are not UTF-8 in strings the daemon echoes come back escaped
 * as \xHH; the rest of the string is kept. */
static void test_invalid_bytes_echoed_escaped(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	static const struct {
		bstr op;
		const char *echo;
	} ops[] = {
		{{"bad\xff\xfeop", 7}, "bad\\xff\\xfeop"},
		{{"over\xc0\xaflong", 10}, "over\\xc0\\xaflong"},
		{{"surr\xed\xa0\x80ogate", 12}, "surr\\xed\\xa0\\x80ogate"},
		{{"big\xf4\x90\x80\x80", 7}, "big\\xf4\\x90\\x80\\x80"},
		{{"cut\xe2\x82", 5}, "cut\\xe2\\x82"},
		{{"nul\0byte", 8}, "nul\\x00byte"},
	};
	uint64_t id = 200;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		send_op(&s, ops[i].op, ++id);
		expect_utf8_error(&s, id, PROTO_UNKNOWN_OP, ops[i].echo, ops[i].echo);
	}
	/* dtype and variant are echoed too */
	send_job(&s, ++id, (bstr){"f\xff" "64", 4}, (bstr){NULL, 0});
	expect_utf8_error(&s, id, PROTO_UNSUPPORTED, "'f\\xff64'", "dtype with a raw byte");
	send_job(&s, ++id, cstr("f32"), (bstr){"fa\xffst\xc3", 6});
	expect_utf8_error(&s, id, PROTO_BAD_REQUEST, "'fa\\xffst\\xc3'", "variant with raw bytes");
	/* a long variant is cut, on a character boundary, and says so */
	char lv[200];
	for (size_t i = 0; i + 3 <= sizeof(lv); i += 3)
		memcpy(lv + i, "\xe2\x82\xac", 3);
	send_job(&s, ++id, cstr("f32"), (bstr){lv, 199});
	expect_utf8_error(&s, id, PROTO_BAD_REQUEST, "\xe2\x82\xac\xe2\x82\xac...'", "long variant");
	expect_conn_serves(&s);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

/* ---- fault 4: the log -------------------------------------------------------------- */

/* The log's bytes (NUL-terminated; *n without the NUL). */
static char *read_log(size_t *n)
{
	FILE *f = fopen(g_d.log, "rb");
	assert_non_null(f);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	assert_non_null(buf);
	size_t k;
	while ((k = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += k;
		if (cap - len - 1 == 0) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	fclose(f);
	buf[len] = 0;
	*n = len;
	return buf;
}

/* No line of the log starts with what a client wrote (`forged`), each line
 * holding `forged` also holds `context` (the daemon's own words around the
 * escaped text), and the whole log is valid UTF-8. Returns how many lines
 * hold `forged`. */
static unsigned check_log(const char *forged, const char *context)
{
	size_t n, bad = 0;
	char *log = read_log(&n);
	if (!utf8_strict((const uint8_t *)log, n, &bad)) {
		daemon_proc_print_log_tail(&g_d, 20);
		fail_msg("the daemon log is not valid UTF-8 at byte %zu of %zu", bad, n);
	}
	unsigned hits = 0;
	for (char *line = log, *end; line < log + n; line = end + 1) {
		end = strchr(line, '\n');
		if (!end)
			end = log + n;
		*end = 0;
		if (strncmp(line, "<0>", 3) == 0)
			fail_msg("a client forged a log line of priority 0: \"%s\"", line);
		if (strstr(line, forged)) {
			hits++;
			if (!strstr(line, context))
				fail_msg("a client's text starts a log line of its own: \"%s\"", line);
			/* journald reads "<N>" at the start of a line only */
			if (line[0] != '<' || line[1] < '3' || line[1] > '7' || line[2] != '>')
				fail_msg("log line without the daemon's priority prefix: \"%s\"", line);
		}
	}
	free(log);
	return hits;
}

static void test_hello_client_name_cannot_forge_log_lines(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	/* 63 bytes: the longest name hello takes */
	static const char name[] = "x\n<0>forged-hello\r<1>cr\x1b[31mred\x7f\xff\xfe\xc3(\t\xe2\x82\xac\x01" "end";
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	pk_bstr(&pk, cstr("op"));
	pk_bstr(&pk, cstr("hello"));
	pk_bstr(&pk, cstr("id"));
	msgpack_pack_uint64(&pk, 300);
	pk_bstr(&pk, cstr("version"));
	msgpack_pack_uint64(&pk, 1);
	pk_bstr(&pk, cstr("client"));
	pk_bstr(&pk, (bstr){name, sizeof(name) - 1});
	assert_int_equal(rawsock_send_sbuf(&s, &sb, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	proto_reply *r = malloc(sizeof(*r));
	assert_non_null(r);
	recv_utf8(&s, r, "hello");
	assert_true(r->ok);
	free(r);
	/* the ping's reply comes after the hello was handled, and logged */
	expect_conn_serves(&s);
	if (check_log("forged-hello", "says hello as") != 1)
		fail_msg("the hello line is not in the log once");
	/* the name, escaped, in one piece */
	if (!daemon_proc_log_contains(&g_d, "'x\\n<0>forged-hello\\r<1>cr\\x1b[31mred\\x7f\\xff\\xfe\\xc3(\\t"
					     "\xe2\x82\xac\\x01end'"))
		fail_msg("the log does not hold the client name escaped as expected");
	/* an op name is logged too (debug: a failed request) */
	send_op(&s, cstr("op\n<0>forged-op\r\x1b]0;title\x07\xff"), 301);
	expect_utf8_error(&s, 301, PROTO_UNKNOWN_OP, "forged-op", "forged op");
	expect_conn_serves(&s);
	if (check_log("forged-op", "unknown op") != 1)
		fail_msg("the failed request's line is not in the log once");
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--log-level", "debug", NULL};
	/* as under systemd: "<N>" priority prefixes on every line */
	static const char *const env[] = {"JOURNAL_STREAM=8:4242", NULL};
	return daemon_proc_start(&g_d, args, env);
}

static int group_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_validator_knows_utf8),
		cmocka_unit_test(test_unknown_op_cut_on_a_character_boundary),
		cmocka_unit_test(test_invalid_bytes_echoed_escaped),
		cmocka_unit_test(test_hello_client_name_cannot_forge_log_lines),
	};
	int rc = cmocka_run_group_tests_name("client_text", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
