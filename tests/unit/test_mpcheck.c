/* tests/unit/test_mpcheck.c — proto/mpcheck.h: the allocation-free msgpack
 * bound check that runs before msgpack-c sees a frame body.
 *
 * Every msgpack type is accepted when well-formed (and then every strict
 * prefix of it is refused, as is any trailing byte); hostile headers, bad type
 * bytes and deep nesting are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "mpcheck.h"

static int check(const void *p, size_t n, unsigned depth, const char **why)
{
	*why = NULL;
	return proto_mpcheck(p, n, depth, why);
}

static void assert_ok(const void *p, size_t n)
{
	const char *why;
	int rc = check(p, n, PROTO_MAX_DEPTH, &why);
	if (rc != 0)
		fail_msg("rejected %zu bytes starting 0x%02x: %s", n, n ? ((const uint8_t *)p)[0] : 0,
			 why ? why : "(no reason)");
}

/* Refused with -EBADMSG and a reason; when want is set, the reason contains it. */
static void assert_bad(const void *p, size_t n, unsigned depth, const char *want)
{
	const char *why;
	int rc = check(p, n, depth, &why);
	if (rc != -EBADMSG)
		fail_msg("%zu bytes starting 0x%02x: got %d, want -EBADMSG", n,
			 n ? ((const uint8_t *)p)[0] : 0, rc);
	assert_non_null(why);
	assert_true(why[0] != 0);
	if (want && !strstr(why, want))
		fail_msg("reason '%s' does not mention '%s'", why, want);
}

/* A well-formed object: accepted; with a byte appended, refused; every
 * strict prefix refused (all of them for small objects, a sample otherwise). */
static void assert_exact(const void *p, size_t n, uint8_t first)
{
	const uint8_t *b = p;
	assert_true(n > 0);
	if (b[0] != first)
		fail_msg("packed type byte 0x%02x, expected 0x%02x", b[0], first);
	assert_ok(p, n);
	uint8_t *more = malloc(n + 1);
	assert_non_null(more);
	memcpy(more, p, n);
	more[n] = 0xc0;
	assert_bad(more, n + 1, PROTO_MAX_DEPTH, "trailing");
	free(more);
	if (n <= 4096) {
		for (size_t k = 0; k < n; k++)
			assert_bad(p, k, PROTO_MAX_DEPTH, NULL);
	} else {
		const size_t cut[] = {0, 1, 2, 3, 5, 9, n / 2, n - 2, n - 1};
		for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++)
			assert_bad(p, cut[i], PROTO_MAX_DEPTH, NULL);
	}
}

typedef void (*pack_fn)(msgpack_packer *pk);

static void exact_packed(pack_fn fn, uint8_t first)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	fn(&pk);
	assert_exact(sb.data, sb.size, first);
	msgpack_sbuffer_destroy(&sb);
}

static void p_nil(msgpack_packer *pk) { msgpack_pack_nil(pk); }
static void p_true(msgpack_packer *pk) { msgpack_pack_true(pk); }
static void p_false(msgpack_packer *pk) { msgpack_pack_false(pk); }
static void p_pfix(msgpack_packer *pk) { msgpack_pack_uint64(pk, 127); }
static void p_nfix(msgpack_packer *pk) { msgpack_pack_int64(pk, -32); }
static void p_u8(msgpack_packer *pk) { msgpack_pack_uint64(pk, 200); }
static void p_u16(msgpack_packer *pk) { msgpack_pack_uint64(pk, 60000); }
static void p_u32(msgpack_packer *pk) { msgpack_pack_uint64(pk, 4000000000u); }
static void p_u64(msgpack_packer *pk) { msgpack_pack_uint64(pk, UINT64_MAX); }
static void p_i8(msgpack_packer *pk) { msgpack_pack_int64(pk, -100); }
static void p_i16(msgpack_packer *pk) { msgpack_pack_int64(pk, -30000); }
static void p_i32(msgpack_packer *pk) { msgpack_pack_int64(pk, -2000000000); }
static void p_i64(msgpack_packer *pk) { msgpack_pack_int64(pk, INT64_MIN); }
static void p_f32(msgpack_packer *pk) { msgpack_pack_float(pk, 1.5f); }
static void p_f64(msgpack_packer *pk) { msgpack_pack_double(pk, -2.25); }

static void pack_str_n(msgpack_packer *pk, size_t n)
{
	char *s = malloc(n ? n : 1);
	assert_non_null(s);
	memset(s, 'a', n);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
	free(s);
}
static void p_str0(msgpack_packer *pk) { pack_str_n(pk, 0); }
static void p_fixstr(msgpack_packer *pk) { pack_str_n(pk, 31); }
static void p_str8(msgpack_packer *pk) { pack_str_n(pk, 200); }
static void p_str16(msgpack_packer *pk) { pack_str_n(pk, 1000); }
static void p_str32(msgpack_packer *pk) { pack_str_n(pk, 70000); }

static void pack_bin_n(msgpack_packer *pk, size_t n)
{
	uint8_t *s = malloc(n ? n : 1);
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = (uint8_t)(0xc1 + i); /* body bytes that look like type bytes */
	msgpack_pack_bin(pk, n);
	msgpack_pack_bin_body(pk, s, n);
	free(s);
}
static void p_bin0(msgpack_packer *pk) { pack_bin_n(pk, 0); }
static void p_bin8(msgpack_packer *pk) { pack_bin_n(pk, 5); }
static void p_bin16(msgpack_packer *pk) { pack_bin_n(pk, 300); }
static void p_bin32(msgpack_packer *pk) { pack_bin_n(pk, 70000); }

static void pack_ext_n(msgpack_packer *pk, size_t n)
{
	uint8_t *s = malloc(n ? n : 1);
	assert_non_null(s);
	memset(s, 0xdd, n);
	msgpack_pack_ext(pk, n, 7);
	msgpack_pack_ext_body(pk, s, n);
	free(s);
}
static void p_fixext1(msgpack_packer *pk) { pack_ext_n(pk, 1); }
static void p_fixext2(msgpack_packer *pk) { pack_ext_n(pk, 2); }
static void p_fixext4(msgpack_packer *pk) { pack_ext_n(pk, 4); }
static void p_fixext8(msgpack_packer *pk) { pack_ext_n(pk, 8); }
static void p_fixext16(msgpack_packer *pk) { pack_ext_n(pk, 16); }
static void p_ext8(msgpack_packer *pk) { pack_ext_n(pk, 3); }
static void p_ext16(msgpack_packer *pk) { pack_ext_n(pk, 300); }
static void p_ext32(msgpack_packer *pk) { pack_ext_n(pk, 70000); }

static void pack_array_n(msgpack_packer *pk, size_t n)
{
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		msgpack_pack_uint64(pk, i);
}
static void p_arr0(msgpack_packer *pk) { pack_array_n(pk, 0); }
static void p_fixarr(msgpack_packer *pk) { pack_array_n(pk, 15); }
static void p_arr16(msgpack_packer *pk) { pack_array_n(pk, 20); }
static void p_arr32(msgpack_packer *pk) { pack_array_n(pk, 70000); }

static void pack_map_n(msgpack_packer *pk, size_t n)
{
	msgpack_pack_map(pk, n);
	for (size_t i = 0; i < n; i++) {
		msgpack_pack_uint64(pk, i);
		pack_str_n(pk, i % 3);
	}
}
static void p_map0(msgpack_packer *pk) { pack_map_n(pk, 0); }
static void p_fixmap(msgpack_packer *pk) { pack_map_n(pk, 15); }
static void p_map16(msgpack_packer *pk) { pack_map_n(pk, 20); }
static void p_map32(msgpack_packer *pk) { pack_map_n(pk, 70000); }

/* A request-shaped map mixing every kind of value. */
static void p_mixed(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 6);
	pack_str_n(pk, 2);
	pack_array_n(pk, 2);
	pack_str_n(pk, 3);
	msgpack_pack_map(pk, 1);
	msgpack_pack_nil(pk);
	msgpack_pack_array(pk, 2);
	pack_bin_n(pk, 4);
	pack_ext_n(pk, 5);
	msgpack_pack_true(pk);
	msgpack_pack_double(pk, 3.0);
	msgpack_pack_int64(pk, -5);
	pack_map_n(pk, 0);
	pack_array_n(pk, 0);
	p_u64(pk);
	msgpack_pack_float(pk, 0.5f);
	msgpack_pack_false(pk);
}

static void test_scalars_accepted(void **state)
{
	(void)state;
	exact_packed(p_nil, 0xc0);
	exact_packed(p_true, 0xc3);
	exact_packed(p_false, 0xc2);
	exact_packed(p_pfix, 0x7f);
	exact_packed(p_nfix, 0xe0);
	exact_packed(p_u8, 0xcc);
	exact_packed(p_u16, 0xcd);
	exact_packed(p_u32, 0xce);
	exact_packed(p_u64, 0xcf);
	exact_packed(p_i8, 0xd0);
	exact_packed(p_i16, 0xd1);
	exact_packed(p_i32, 0xd2);
	exact_packed(p_i64, 0xd3);
	exact_packed(p_f32, 0xca);
	exact_packed(p_f64, 0xcb);
}

static void test_str_bin_accepted(void **state)
{
	(void)state;
	exact_packed(p_str0, 0xa0);
	exact_packed(p_fixstr, 0xbf);
	exact_packed(p_str8, 0xd9);
	exact_packed(p_str16, 0xda);
	exact_packed(p_str32, 0xdb);
	exact_packed(p_bin0, 0xc4);
	exact_packed(p_bin8, 0xc4);
	exact_packed(p_bin16, 0xc5);
	exact_packed(p_bin32, 0xc6);
}

static void test_ext_accepted(void **state)
{
	(void)state;
	exact_packed(p_fixext1, 0xd4);
	exact_packed(p_fixext2, 0xd5);
	exact_packed(p_fixext4, 0xd6);
	exact_packed(p_fixext8, 0xd7);
	exact_packed(p_fixext16, 0xd8);
	exact_packed(p_ext8, 0xc7);
	exact_packed(p_ext16, 0xc8);
	exact_packed(p_ext32, 0xc9);
}

static void test_containers_accepted(void **state)
{
	(void)state;
	exact_packed(p_arr0, 0x90);
	exact_packed(p_fixarr, 0x9f);
	exact_packed(p_arr16, 0xdc);
	exact_packed(p_arr32, 0xdd);
	exact_packed(p_map0, 0x80);
	exact_packed(p_fixmap, 0x8f);
	exact_packed(p_map16, 0xde);
	exact_packed(p_map32, 0xdf);
	exact_packed(p_mixed, 0x86);
}

/* Hand-written encodings msgpack-c would not choose but that are valid. */
static void test_non_minimal_encodings_accepted(void **state)
{
	(void)state;
	const uint8_t str8_short[] = {0xd9, 0x01, 'x'};
	const uint8_t str32_empty[] = {0xdb, 0, 0, 0, 0};
	const uint8_t arr16_one[] = {0xdc, 0x00, 0x01, 0x05};
	const uint8_t map32_one[] = {0xdf, 0, 0, 0, 1, 0xa1, 'k', 0xc0};
	const uint8_t ext32_one[] = {0xc9, 0, 0, 0, 1, 0x01, 0xff};
	assert_exact(str8_short, sizeof(str8_short), 0xd9);
	assert_exact(str32_empty, sizeof(str32_empty), 0xdb);
	assert_exact(arr16_one, sizeof(arr16_one), 0xdc);
	assert_exact(map32_one, sizeof(map32_one), 0xdf);
	assert_exact(ext32_one, sizeof(ext32_one), 0xc9);
}

static void test_huge_container_headers_rejected(void **state)
{
	(void)state;
	const uint8_t arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	const uint8_t map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
	const uint8_t map16[] = {0xde, 0xff, 0xff, 0x01, 0x02};
	/* 3 elements declared, 2 present: one byte short */
	const uint8_t arr_short[] = {0x93, 0x01, 0x02};
	/* a map of 2 pairs holding 3 objects */
	const uint8_t map_short[] = {0x82, 0x01, 0x02, 0x03};
	/* nested: the inner header is the hostile one */
	const uint8_t nested[] = {0x91, 0xdd, 0xff, 0xff, 0xff, 0xff};
	assert_bad(arr, sizeof(arr), PROTO_MAX_DEPTH, "count");
	assert_bad(map, sizeof(map), PROTO_MAX_DEPTH, "count");
	assert_bad(map16, sizeof(map16), PROTO_MAX_DEPTH, "count");
	assert_bad(arr_short, sizeof(arr_short), PROTO_MAX_DEPTH, NULL);
	assert_bad(map_short, sizeof(map_short), PROTO_MAX_DEPTH, NULL);
	assert_bad(nested, sizeof(nested), PROTO_MAX_DEPTH, "count");
}

static void test_truncated_lengths_rejected(void **state)
{
	(void)state;
	/* declared length longer than what follows */
	const uint8_t str8[] = {0xd9, 0x05, 'a', 'b'};
	const uint8_t str16[] = {0xda, 0x00, 0x05, 'a', 'b', 'c', 'd'};
	const uint8_t str32[] = {0xdb, 0x00, 0x00, 0x00, 0x05, 'a'};
	const uint8_t str32_huge[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'};
	const uint8_t fixstr[] = {0xa5, 'a', 'b'};
	const uint8_t bin8[] = {0xc4, 0x03, 0x00};
	const uint8_t bin16[] = {0xc5, 0x01, 0x00, 0x00};
	const uint8_t bin32[] = {0xc6, 0x7f, 0xff, 0xff, 0xff, 0x00};
	const uint8_t ext8[] = {0xc7, 0x02, 0x01, 0x00};   /* type present, 1 of 2 data */
	const uint8_t ext8_notype[] = {0xc7, 0x00};        /* length 0 but no type byte */
	const uint8_t ext16[] = {0xc8, 0x00, 0x04, 0x01, 0x00};
	const uint8_t ext32[] = {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01};
	const uint8_t fixext4[] = {0xd6, 0x01, 0x00, 0x00};
	const uint8_t fixext16[] = {0xd8, 0x01};
	/* the length header itself cut */
	const uint8_t str16_hdr[] = {0xda, 0x00};
	const uint8_t str32_hdr[] = {0xdb, 0x00, 0x00, 0x00};
	const uint8_t bin8_hdr[] = {0xc4};
	const uint8_t arr32_hdr[] = {0xdd, 0x00, 0x00};
	const uint8_t u64_cut[] = {0xcf, 0, 0, 0, 0, 0, 0, 0};
	const uint8_t f64_cut[] = {0xcb, 0, 0};
	assert_bad(str8, sizeof(str8), PROTO_MAX_DEPTH, "past the end");
	assert_bad(str16, sizeof(str16), PROTO_MAX_DEPTH, "past the end");
	assert_bad(str32, sizeof(str32), PROTO_MAX_DEPTH, "past the end");
	assert_bad(str32_huge, sizeof(str32_huge), PROTO_MAX_DEPTH, "past the end");
	assert_bad(fixstr, sizeof(fixstr), PROTO_MAX_DEPTH, "past the end");
	assert_bad(bin8, sizeof(bin8), PROTO_MAX_DEPTH, "past the end");
	assert_bad(bin16, sizeof(bin16), PROTO_MAX_DEPTH, "past the end");
	assert_bad(bin32, sizeof(bin32), PROTO_MAX_DEPTH, "past the end");
	assert_bad(ext8, sizeof(ext8), PROTO_MAX_DEPTH, "past the end");
	assert_bad(ext8_notype, sizeof(ext8_notype), PROTO_MAX_DEPTH, "past the end");
	assert_bad(ext16, sizeof(ext16), PROTO_MAX_DEPTH, "past the end");
	assert_bad(ext32, sizeof(ext32), PROTO_MAX_DEPTH, "past the end");
	assert_bad(fixext4, sizeof(fixext4), PROTO_MAX_DEPTH, "past the end");
	assert_bad(fixext16, sizeof(fixext16), PROTO_MAX_DEPTH, "past the end");
	assert_bad(str16_hdr, sizeof(str16_hdr), PROTO_MAX_DEPTH, "truncated");
	assert_bad(str32_hdr, sizeof(str32_hdr), PROTO_MAX_DEPTH, "truncated");
	assert_bad(bin8_hdr, sizeof(bin8_hdr), PROTO_MAX_DEPTH, "truncated");
	assert_bad(arr32_hdr, sizeof(arr32_hdr), PROTO_MAX_DEPTH, "truncated");
	assert_bad(u64_cut, sizeof(u64_cut), PROTO_MAX_DEPTH, "past the end");
	assert_bad(f64_cut, sizeof(f64_cut), PROTO_MAX_DEPTH, "past the end");
	/* a truncated string as a map value */
	const uint8_t in_map[] = {0x81, 0xa2, 'o', 'p', 0xd9, 0x10, 'p', 'i', 'n', 'g'};
	assert_bad(in_map, sizeof(in_map), PROTO_MAX_DEPTH, "past the end");
}

static void test_type_c1_rejected(void **state)
{
	(void)state;
	const uint8_t alone[] = {0xc1};
	const uint8_t in_array[] = {0x92, 0x01, 0xc1};
	const uint8_t as_key[] = {0x81, 0xc1, 0x01};
	assert_bad(alone, sizeof(alone), PROTO_MAX_DEPTH, "0xc1");
	assert_bad(in_array, sizeof(in_array), PROTO_MAX_DEPTH, "0xc1");
	assert_bad(as_key, sizeof(as_key), PROTO_MAX_DEPTH, "0xc1");
	/* 0xc1 inside a str or bin body is just a byte */
	const uint8_t in_str[] = {0xa1, 0xc1};
	assert_ok(in_str, sizeof(in_str));
}

static void test_trailing_bytes_rejected(void **state)
{
	(void)state;
	const uint8_t two_ints[] = {0x01, 0x02};
	const uint8_t two_maps[] = {0x80, 0x80};
	const uint8_t map_then_nil[] = {0x81, 0xa1, 'a', 0x01, 0xc0};
	assert_bad(two_ints, sizeof(two_ints), PROTO_MAX_DEPTH, "trailing");
	assert_bad(two_maps, sizeof(two_maps), PROTO_MAX_DEPTH, "trailing");
	assert_bad(map_then_nil, sizeof(map_then_nil), PROTO_MAX_DEPTH, "trailing");
}

static void test_empty_input_rejected(void **state)
{
	(void)state;
	const uint8_t one[] = {0x01};
	assert_bad(one, 0, PROTO_MAX_DEPTH, "truncated");
	assert_bad(NULL, 0, PROTO_MAX_DEPTH, "truncated");
}

/* depth arrays 0x91 ... 0x91 then one element */
static uint8_t *nested(size_t depth, size_t *len)
{
	uint8_t *b = malloc(depth + 1);
	assert_non_null(b);
	memset(b, 0x91, depth);
	b[depth] = 0x2a;
	*len = depth + 1;
	return b;
}

static void test_nesting_10000_rejected(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = nested(10000, &n);
	assert_bad(b, n, PROTO_MAX_DEPTH, "deep");
	/* and with the inner element missing */
	assert_bad(b, n - 1, PROTO_MAX_DEPTH, NULL);
	free(b);
	/* the same with one-pair maps: 0x81 0x00 0x81 0x00 ... */
	uint8_t *m = malloc(2 * 10000 + 1);
	assert_non_null(m);
	for (size_t i = 0; i < 10000; i++) {
		m[2 * i] = 0x81;
		m[2 * i + 1] = 0x00;
	}
	m[2 * 10000] = 0xc0;
	assert_bad(m, 2 * 10000 + 1, PROTO_MAX_DEPTH, "deep");
	free(m);
}

static void test_depth_limit_exact(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = nested(PROTO_MAX_DEPTH, &n);
	assert_ok(b, n);
	free(b);
	b = nested(PROTO_MAX_DEPTH + 1, &n);
	assert_bad(b, n, PROTO_MAX_DEPTH, "deep");
	free(b);

	/* a smaller max_depth is honoured */
	b = nested(3, &n);
	const char *why;
	assert_int_equal(check(b, n, 3, &why), 0);
	assert_bad(b, n, 2, "deep");
	free(b);

	/* a max_depth above PROTO_MAX_DEPTH is capped to it */
	b = nested(PROTO_MAX_DEPTH + 1, &n);
	assert_bad(b, n, 1000, "deep");
	free(b);

	/* depth counts nesting, not siblings: 1000 arrays side by side at depth 2 */
	uint8_t *w = malloc(3 + 2 * 1000);
	assert_non_null(w);
	w[0] = 0xdc;
	w[1] = 1000 >> 8;
	w[2] = 1000 & 0xff;
	for (size_t i = 0; i < 1000; i++) {
		w[3 + 2 * i] = 0x91;
		w[3 + 2 * i + 1] = 0x07;
	}
	assert_int_equal(check(w, 3 + 2 * 1000, 2, &why), 0);
	assert_bad(w, 3 + 2 * 1000, 1, "deep");
	free(w);

	/* empty containers at the limit do not descend */
	uint8_t e[PROTO_MAX_DEPTH + 1];
	memset(e, 0x91, PROTO_MAX_DEPTH);
	e[PROTO_MAX_DEPTH] = 0x90;
	assert_ok(e, sizeof(e));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scalars_accepted),
		cmocka_unit_test(test_str_bin_accepted),
		cmocka_unit_test(test_ext_accepted),
		cmocka_unit_test(test_containers_accepted),
		cmocka_unit_test(test_non_minimal_encodings_accepted),
		cmocka_unit_test(test_huge_container_headers_rejected),
		cmocka_unit_test(test_truncated_lengths_rejected),
		cmocka_unit_test(test_type_c1_rejected),
		cmocka_unit_test(test_trailing_bytes_rejected),
		cmocka_unit_test(test_empty_input_rejected),
		cmocka_unit_test(test_nesting_10000_rejected),
		cmocka_unit_test(test_depth_limit_exact),
	};
	return cmocka_run_group_tests_name("mpcheck", tests, NULL, NULL);
}
