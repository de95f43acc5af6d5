/* tests/unit/test_text.c — proto/text.h: strict UTF-8, escaping, truncation
 * on character boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "text.h"

typedef struct {
	const char *s;
	size_t n; /* 0: strlen(s) */
} bytes;

#define B(lit) ((bytes){lit, sizeof(lit) - 1})

static bool valid(bytes b)
{
	return proto_text_valid(b.s, b.n);
}

static void test_valid_characters(void **state)
{
	(void)state;
	/* the edges of each length */
	static const bytes ok[] = {
		B(""), B("ascii only"), B("\x00"), B("\x7f"),
		B("\xc2\x80"), B("\xdf\xbf"),                 /* U+0080, U+07FF */
		B("\xe0\xa0\x80"), B("\xef\xbf\xbf"),         /* U+0800, U+FFFF */
		B("\xed\x9f\xbf"), B("\xee\x80\x80"),         /* around the surrogates */
		B("\xf0\x90\x80\x80"), B("\xf4\x8f\xbf\xbf"), /* U+10000, U+10FFFF */
		B("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!valid(ok[i]))
			fail_msg("valid case %zu judged invalid", i);
	uint32_t cp;
	assert_int_equal(proto_text_char("\xf4\x8f\xbf\xbf", 4, &cp), 4);
	assert_int_equal(cp, 0x10ffff);
	assert_int_equal(proto_text_char("\xe2\x82\xac!", 4, &cp), 3);
	assert_int_equal(cp, 0x20ac);
	assert_int_equal(proto_text_char("A", 1, &cp), 1);
	assert_int_equal(cp, 'A');
	assert_int_equal(proto_text_char("A", 0, &cp), 0);
}

static void test_overlongs(void **state)
{
	(void)state;
	static const bytes bad[] = {
		B("\xc0\x80"), B("\xc0\xaf"), B("\xc1\xbf"),   /* 2-byte forms of ASCII */
		B("\xe0\x80\x80"), B("\xe0\x9f\xbf"),          /* 3-byte forms below U+0800 */
		B("\xf0\x80\x80\x80"), B("\xf0\x8f\xbf\xbf"),  /* 4-byte forms below U+10000 */
		B("\xf8\x88\x80\x80\x80"), B("\xfc\x84\x80\x80\x80\x80"), /* 5 and 6 bytes */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (valid(bad[i]))
			fail_msg("overlong case %zu judged valid", i);
		assert_int_equal(proto_text_char(bad[i].s, bad[i].n, NULL), 0);
	}
}

static void test_surrogates(void **state)
{
	(void)state;
	static const bytes bad[] = {
		B("\xed\xa0\x80"), B("\xed\xaf\xbf"), B("\xed\xb0\x80"), B("\xed\xbf\xbf"),
		B("\xed\xa0\xbd\xed\xb8\x80"), /* a CESU-8 pair */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (valid(bad[i]))
			fail_msg("surrogate case %zu judged valid", i);
}

static void test_above_10ffff(void **state)
{
	(void)state;
	static const bytes bad[] = {
		B("\xf4\x90\x80\x80"), B("\xf5\x80\x80\x80"), B("\xf7\xbf\xbf\xbf"),
		B("\xfe"), B("\xff"), B("a\xff" "b"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (valid(bad[i]))
			fail_msg("case %zu above U+10FFFF judged valid", i);
}

static void test_truncated_and_stray(void **state)
{
	(void)state;
	static const bytes bad[] = {
		B("\xc3"), B("\xe2\x82"), B("\xf0\x9f\x98"), B("x\xe2\x82"),
		B("\xe2\x82" "a"), B("\xf0\x9f" "ab"),         /* cut by an ASCII byte */
		B("\x80"), B("\xbf"), B("a\x80" "b"), B("\xc3\xa9\xa9"), /* stray continuations */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (valid(bad[i]))
			fail_msg("truncated case %zu judged valid", i);
	/* a valid prefix does not make the whole valid, nor a valid tail */
	assert_false(proto_text_valid("ok\xe2\x82\xac\xe2", 6));
	assert_true(proto_text_valid("ok\xe2\x82\xac\xe2", 5));
}

static void test_truncate_on_boundaries(void **state)
{
	(void)state;
	/* "aé€😀": 1 + 2 + 3 + 4 bytes; boundaries at 0, 1, 3, 6, 10 */
	static const char s[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
	static const size_t want[11] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10};
	for (size_t max = 0; max <= 10; max++) {
		size_t k = proto_text_truncate(s, 10, max);
		if (k != want[max])
			fail_msg("truncate to %zu bytes: %zu, want %zu", max, k, want[max]);
		assert_true(proto_text_valid(s, k));
	}
	assert_int_equal(proto_text_truncate(s, 10, 99), 10);
	/* stray continuation bytes: cut where asked */
	assert_int_equal(proto_text_truncate("\x80\x80\x80\x80\x80", 5, 4), 4);
}

/* escape(s) with room for everything */
static const char *esc(bytes b, unsigned flags)
{
	static char out[256];
	size_t n = proto_text_escape(out, sizeof(out), b.s, b.n, 64, flags);
	assert_int_equal(n, strlen(out));
	assert_true(proto_text_valid(out, n));
	return out;
}

static void test_escape(void **state)
{
	(void)state;
	assert_string_equal(esc(B("plain"), 0), "plain");
	assert_string_equal(esc(B(""), 0), "");
	assert_string_equal(esc(B("caf\xc3\xa9 \xe2\x82\xac\xf0\x9f\x98\x80"), 0),
			    "caf\xc3\xa9 \xe2\x82\xac\xf0\x9f\x98\x80");
	/* controls: never a line break or terminal escape in the output */
	assert_string_equal(esc(B("a\nb\rc\td"), 0), "a\\nb\\rc\\td");
	assert_string_equal(esc(B("\n<0>forged"), 0), "\\n<0>forged");
	assert_string_equal(esc(B("\x1b[31m\x07\x7f\x00"), 0), "\\x1b[31m\\x07\\x7f\\x00");
	assert_string_equal(esc(B("\xc2\x85\xc2\x9b"), 0), "\\u0085\\u009b"); /* NEL, CSI */
	assert_string_equal(esc(B("\xc2\xa0"), 0), "\xc2\xa0"); /* U+00A0 is not C1 */
	/* invalid bytes, one escape per byte */
	assert_string_equal(esc(B("bad\xff\xfeop"), 0), "bad\\xff\\xfeop");
	assert_string_equal(esc(B("\xc0\xaf"), 0), "\\xc0\\xaf");
	assert_string_equal(esc(B("\xed\xa0\x80"), 0), "\\xed\\xa0\\x80");
	assert_string_equal(esc(B("\xf4\x90\x80\x80"), 0), "\\xf4\\x90\\x80\\x80");
	assert_string_equal(esc(B("cut\xe2\x82"), 0), "cut\\xe2\\x82");
	assert_string_equal(esc(B("\xe2\x82" "a"), 0), "\\xe2\\x82a");
	/* backslash: doubled, so that a literal "\xff" reads differently
	 * from an escaped byte, unless the text is escaped already */
	assert_string_equal(esc(B("\\xff"), 0), "\\\\xff");
	assert_string_equal(esc(B("\\xff\n"), PROTO_TEXT_KEEP_BACKSLASH), "\\xff\\n");
}

static void test_escape_bounds(void **state)
{
	(void)state;
	char out[64];
	/* max_chars counts characters of the input, not bytes */
	assert_int_equal(proto_text_escape(out, sizeof(out), "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 9, 2, 0), 9);
	assert_string_equal(out, "\xe2\x82\xac\xe2\x82\xac...");
	assert_int_equal(proto_text_escape(out, sizeof(out), "abc", 3, 3, 0), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(proto_text_escape(out, sizeof(out), "abcd", 4, 3, 0), 6);
	assert_string_equal(out, "abc...");
	/* an ill-formed byte counts as one character */
	proto_text_escape(out, sizeof(out), "\xff\xff\xff", 3, 2, 0);
	assert_string_equal(out, "\\xff\\xff...");
	proto_text_escape(out, sizeof(out), "abc", 3, 0, 0);
	assert_string_equal(out, "...");
	/* exactly fitting output needs no "..." */
	proto_text_escape(out, 6, "abcde", 5, 99, 0);
	assert_string_equal(out, "abcde");
	/* one more byte does: the cut never splits a character or escape */
	proto_text_escape(out, 6, "abcdef", 6, 99, 0);
	assert_string_equal(out, "ab...");
	static const char euros[] = "a\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac";
	proto_text_escape(out, 7, euros, 10, 99, 0);
	assert_string_equal(out, "a...");
	proto_text_escape(out, 8, euros, 10, 99, 0);
	assert_string_equal(out, "a\xe2\x82\xac...");
	proto_text_escape(out, 11, euros, 10, 99, 0);
	assert_string_equal(out, euros);
	proto_text_escape(out, 9, "a\n\n\xff", 4, 99, 0);
	assert_string_equal(out, "a\\n\\n...");
	proto_text_escape(out, 10, "a\n\n\xff", 4, 99, 0);
	assert_string_equal(out, "a\\n\\n\\xff");
	/* caps too small for "..." */
	assert_int_equal(proto_text_escape(out, 1, "abc", 3, 99, 0), 0);
	assert_string_equal(out, "");
	assert_int_equal(proto_text_escape(out, 3, "abc", 3, 99, 0), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(proto_text_escape(out, 3, "\xff", 1, 99, 0), 0);
	assert_string_equal(out, "");
	/* every cut of every cap gives valid UTF-8 no longer than cap - 1 */
	static const char mix[] = "a\xc3\xa9\n\xe2\x82\xac\xff\xf0\x9f\x98\x80\xc2\x85\\z";
	for (size_t cap = 1; cap < sizeof(out); cap++)
		for (size_t mc = 0; mc < 14; mc++) {
			size_t n = proto_text_escape(out, cap, mix, sizeof(mix) - 1, mc, 0);
			assert_true(n < cap);
			assert_int_equal(n, strlen(out));
			if (!proto_text_valid(out, n))
				fail_msg("cap %zu, max_chars %zu: invalid output", cap, mc);
			assert_null(strchr(out, '\n'));
		}
	/* the stated worst case fits PROTO_TEXT_ESCAPED_CAP */
	char big[PROTO_TEXT_ESCAPED_CAP(8)];
	proto_text_escape(big, sizeof(big), "\xc2\x85\xc2\x85\xc2\x85\xc2\x85\xc2\x85\xc2\x85\xc2\x85\xc2\x85"
			  "\xc2\x85", 18, 8, 0);
	assert_string_equal(big, "\\u0085\\u0085\\u0085\\u0085\\u0085\\u0085\\u0085\\u0085...");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_characters),
		cmocka_unit_test(test_overlongs),
		cmocka_unit_test(test_surrogates),
		cmocka_unit_test(test_above_10ffff),
		cmocka_unit_test(test_truncated_and_stray),
		cmocka_unit_test(test_truncate_on_boundaries),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_escape_bounds),
	};
	return cmocka_run_group_tests_name("text", tests, NULL, NULL);
}
