/* tests/unit/test_frame.c — proto/frame.h: length-prefixed frame reassembly.
 *
 * Every chunking of a byte stream must yield the same frames; bad lengths are
 * refused before their body is buffered; the buffer stays bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

#define MAX_FRAME PROTO_MIN_MAX_FRAME

/* A stream of frames plus the bodies it should decode to. */
typedef struct stream {
	uint8_t *bytes;
	size_t len;
	unsigned n;
	uint32_t body_len[8];
	size_t body_at[8]; /* offset of each body inside bytes */
} stream;

static uint8_t pattern(unsigned frame, size_t i)
{
	return (uint8_t)(frame * 131u + i * 7u + (i >> 8));
}

static void stream_add(stream *s, uint32_t n)
{
	assert_true(s->n < 8);
	s->bytes = realloc(s->bytes, s->len + PROTO_FRAME_HDR + n);
	assert_non_null(s->bytes);
	proto_frame_put_len(s->bytes + s->len, n);
	s->body_at[s->n] = s->len + PROTO_FRAME_HDR;
	s->body_len[s->n] = n;
	for (size_t i = 0; i < n; i++)
		s->bytes[s->len + PROTO_FRAME_HDR + i] = pattern(s->n, i);
	s->len += PROTO_FRAME_HDR + n;
	s->n++;
}

static void stream_free(stream *s)
{
	free(s->bytes);
	memset(s, 0, sizeof(*s));
}

/* What came out of the framer, copied (bodies die at the next push). */
typedef struct got {
	unsigned n;
	uint32_t len[8];
	uint8_t *body[8];
} got;

static void got_free(got *g)
{
	for (unsigned i = 0; i < g->n; i++)
		free(g->body[i]);
	memset(g, 0, sizeof(*g));
}

/* Take every whole frame now buffered; returns how many. */
static unsigned drain(proto_framer *f, got *g)
{
	unsigned k = 0;
	for (;;) {
		const uint8_t *body = NULL;
		uint32_t len = 0;
		int rc = proto_framer_next(f, &body, &len);
		assert_true(rc == 0 || rc == 1);
		if (rc == 0)
			return k;
		assert_non_null(body);
		assert_true(g->n < 8);
		g->len[g->n] = len;
		g->body[g->n] = malloc(len);
		assert_non_null(g->body[g->n]);
		memcpy(g->body[g->n], body, len);
		g->n++;
		k++;
	}
}

static void assert_same(const stream *s, const got *g)
{
	assert_int_equal(g->n, s->n);
	for (unsigned i = 0; i < s->n; i++) {
		assert_int_equal(g->len[i], s->body_len[i]);
		assert_memory_equal(g->body[i], s->bytes + s->body_at[i], s->body_len[i]);
	}
}

/* Three frames: tiny, medium, and one larger than the framer's first buffer. */
static void three_frames(stream *s)
{
	memset(s, 0, sizeof(*s));
	stream_add(s, 1);
	stream_add(s, 300);
	stream_add(s, 5000);
}

static void test_put_len_big_endian(void **state)
{
	(void)state;
	uint8_t b[4];
	proto_frame_put_len(b, 0x01020304u);
	assert_int_equal(b[0], 0x01);
	assert_int_equal(b[1], 0x02);
	assert_int_equal(b[2], 0x03);
	assert_int_equal(b[3], 0x04);
	proto_frame_put_len(b, 0xFFFFFFFFu);
	assert_int_equal(b[0] & b[1] & b[2] & b[3], 0xFF);
}

static void test_empty_framer_has_nothing(void **state)
{
	(void)state;
	proto_framer f;
	proto_framer_init(&f, MAX_FRAME);
	const uint8_t *body = NULL;
	uint32_t len = 0;
	assert_int_equal(proto_framer_next(&f, &body, &len), 0);
	assert_int_equal(proto_framer_push(&f, "", 0), 0);
	assert_int_equal(proto_framer_next(&f, &body, &len), 0);
	proto_framer_free(&f);
	proto_framer_free(&f); /* idempotent */
	proto_framer_free(NULL);
}

/* Split the stream into two pushes at every position. */
static void test_split_at_every_byte(void **state)
{
	(void)state;
	stream s;
	three_frames(&s);
	for (size_t cut = 0; cut <= s.len; cut++) {
		proto_framer f;
		got g = {0};
		proto_framer_init(&f, MAX_FRAME);
		assert_int_equal(proto_framer_push(&f, s.bytes, cut), 0);
		drain(&f, &g);
		assert_int_equal(proto_framer_push(&f, s.bytes + cut, s.len - cut), 0);
		drain(&f, &g);
		assert_same(&s, &g);
		assert_int_equal(f.len, 0); /* nothing left over */
		got_free(&g);
		proto_framer_free(&f);
	}
	stream_free(&s);
}

/* Split into three pushes at every pair of positions around the frame
 * boundaries (the header of the second frame straddling chunks). */
static void test_split_twice_around_boundaries(void **state)
{
	(void)state;
	stream s;
	three_frames(&s);
	const size_t b1 = s.body_at[1] - PROTO_FRAME_HDR;
	for (size_t c1 = b1 - 3; c1 <= b1 + PROTO_FRAME_HDR + 2; c1++) {
		for (size_t c2 = c1; c2 <= c1 + 8; c2++) {
			proto_framer f;
			got g = {0};
			proto_framer_init(&f, MAX_FRAME);
			assert_int_equal(proto_framer_push(&f, s.bytes, c1), 0);
			drain(&f, &g);
			assert_int_equal(proto_framer_push(&f, s.bytes + c1, c2 - c1), 0);
			drain(&f, &g);
			assert_int_equal(proto_framer_push(&f, s.bytes + c2, s.len - c2), 0);
			drain(&f, &g);
			assert_same(&s, &g);
			got_free(&g);
			proto_framer_free(&f);
		}
	}
	stream_free(&s);
}

static void test_one_byte_chunks(void **state)
{
	(void)state;
	stream s;
	three_frames(&s);
	proto_framer f;
	got g = {0};
	proto_framer_init(&f, MAX_FRAME);
	for (size_t i = 0; i < s.len; i++) {
		assert_int_equal(proto_framer_push(&f, s.bytes + i, 1), 0);
		unsigned k = drain(&f, &g);
		/* a frame comes out exactly when its last byte arrives */
		bool last_byte = false;
		for (unsigned j = 0; j < s.n; j++)
			if (i + 1 == s.body_at[j] + s.body_len[j])
				last_byte = true;
		assert_int_equal(k, last_byte ? 1 : 0);
	}
	assert_same(&s, &g);
	got_free(&g);
	proto_framer_free(&f);
	stream_free(&s);
}

static void test_several_frames_in_one_push(void **state)
{
	(void)state;
	stream s;
	three_frames(&s);
	proto_framer f;
	got g = {0};
	proto_framer_init(&f, MAX_FRAME);
	assert_int_equal(proto_framer_push(&f, s.bytes, s.len), 0);
	assert_int_equal(drain(&f, &g), 3);
	assert_same(&s, &g);
	got_free(&g);

	/* The same stream twice plus half a header: 6 frames, then 0. */
	uint8_t *two = malloc(2 * s.len + 2);
	assert_non_null(two);
	memcpy(two, s.bytes, s.len);
	memcpy(two + s.len, s.bytes, s.len);
	memcpy(two + 2 * s.len, s.bytes, 2);
	assert_int_equal(proto_framer_push(&f, two, 2 * s.len + 2), 0);
	assert_int_equal(drain(&f, &g), 6);
	for (unsigned i = 0; i < 6; i++) {
		assert_int_equal(g.len[i], s.body_len[i % 3]);
		assert_memory_equal(g.body[i], s.bytes + s.body_at[i % 3], g.len[i]);
	}
	got_free(&g);
	assert_int_equal(f.len, 2);
	assert_int_equal(drain(&f, &g), 0);
	free(two);
	proto_framer_free(&f);
	stream_free(&s);
}

/* The body pointer stays valid after next() until the next push, even when
 * that next() emptied the buffer. */
static void test_body_valid_until_next_push(void **state)
{
	(void)state;
	stream s;
	three_frames(&s);
	proto_framer f;
	proto_framer_init(&f, MAX_FRAME);
	assert_int_equal(proto_framer_push(&f, s.bytes, s.len), 0);
	const uint8_t *b[3];
	uint32_t l[3];
	for (int i = 0; i < 3; i++)
		assert_int_equal(proto_framer_next(&f, &b[i], &l[i]), 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(l[i], s.body_len[i]);
		assert_memory_equal(b[i], s.bytes + s.body_at[i], l[i]);
	}
	proto_framer_free(&f);
	stream_free(&s);
}

static int next_rc(proto_framer *f)
{
	const uint8_t *body = NULL;
	uint32_t len = 0;
	return proto_framer_next(f, &body, &len);
}

static void test_length_zero_rejected(void **state)
{
	(void)state;
	proto_framer f;
	proto_framer_init(&f, MAX_FRAME);
	const uint8_t z[4] = {0, 0, 0, 0};
	assert_int_equal(proto_framer_push(&f, z, 3), 0);
	assert_int_equal(next_rc(&f), 0); /* header not complete yet */
	assert_int_equal(proto_framer_push(&f, z + 3, 1), 0);
	assert_int_equal(next_rc(&f), -EMSGSIZE);
	assert_int_equal(next_rc(&f), -EMSGSIZE); /* and stays so */
	proto_framer_free(&f);
}

static void test_length_max_plus_one_rejected(void **state)
{
	(void)state;
	proto_framer f;
	proto_framer_init(&f, MAX_FRAME);
	uint8_t h[4];
	proto_frame_put_len(h, MAX_FRAME + 1);
	assert_int_equal(proto_framer_push(&f, h, 4), 0);
	/* refused on the header alone, before any body byte */
	assert_int_equal(next_rc(&f), -EMSGSIZE);
	proto_framer_free(&f);

	/* after a good frame in the same push */
	stream s = {0};
	stream_add(&s, 10);
	proto_framer_init(&f, MAX_FRAME);
	assert_int_equal(proto_framer_push(&f, s.bytes, s.len), 0);
	assert_int_equal(proto_framer_push(&f, h, 4), 0);
	assert_int_equal(next_rc(&f), 1);
	assert_int_equal(next_rc(&f), -EMSGSIZE);
	proto_framer_free(&f);
	stream_free(&s);
}

static void test_length_all_ones_rejected_without_allocating(void **state)
{
	(void)state;
	proto_framer f;
	proto_framer_init(&f, MAX_FRAME);
	const uint8_t h[8] = {0xFF, 0xFF, 0xFF, 0xFF, 'a', 'b', 'c', 'd'};
	assert_int_equal(proto_framer_push(&f, h, sizeof(h)), 0);
	assert_int_equal(next_rc(&f), -EMSGSIZE);
	assert_true(f.cap <= 4096);
	assert_true(f.cap >= f.len);
	proto_framer_free(&f);
}

static void test_exactly_max_frame_accepted(void **state)
{
	(void)state;
	stream s = {0};
	stream_add(&s, MAX_FRAME);
	stream_add(&s, 2);
	proto_framer f;
	got g = {0};
	proto_framer_init(&f, MAX_FRAME);
	/* in uneven chunks */
	for (size_t at = 0; at < s.len;) {
		size_t n = s.len - at < 1000 ? s.len - at : 1000;
		assert_int_equal(proto_framer_push(&f, s.bytes + at, n), 0);
		drain(&f, &g);
		at += n;
	}
	assert_same(&s, &g);
	got_free(&g);
	proto_framer_free(&f);

	/* and in one push */
	proto_framer_init(&f, MAX_FRAME);
	assert_int_equal(proto_framer_push(&f, s.bytes, s.len), 0);
	assert_int_equal(drain(&f, &g), 2);
	assert_same(&s, &g);
	got_free(&g);
	proto_framer_free(&f);
	stream_free(&s);
}

static void test_small_max_frame(void **state)
{
	(void)state;
	proto_framer f;
	proto_framer_init(&f, 16);
	stream s = {0};
	stream_add(&s, 16);
	stream_add(&s, 17);
	assert_int_equal(proto_framer_push(&f, s.bytes, s.len), 0);
	const uint8_t *body;
	uint32_t len;
	assert_int_equal(proto_framer_next(&f, &body, &len), 1);
	assert_int_equal(len, 16);
	assert_int_equal(proto_framer_next(&f, &body, &len), -EMSGSIZE);
	proto_framer_free(&f);
	stream_free(&s);
}

/* A long stream of maximum and odd-sized frames, pushed in chunks of several
 * sizes and drained after each push: the buffer never grows beyond
 * max_frame + header + chunk (frame.h's promise). */
static void test_buffer_bounded(void **state)
{
	(void)state;
	static const size_t chunks[] = {1, 3, 4096, 1000, 65536, 65536 + 7, 200000};
	stream s = {0};
	stream_add(&s, MAX_FRAME);
	stream_add(&s, MAX_FRAME - 1);
	stream_add(&s, 3);
	stream_add(&s, MAX_FRAME);
	stream_add(&s, 40000);
	stream_add(&s, MAX_FRAME);
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		const size_t chunk = chunks[c];
		proto_framer f;
		got g = {0};
		proto_framer_init(&f, MAX_FRAME);
		for (size_t at = 0; at < s.len;) {
			size_t n = s.len - at < chunk ? s.len - at : chunk;
			assert_int_equal(proto_framer_push(&f, s.bytes + at, n), 0);
			drain(&f, &g);
			at += n;
			if (f.cap > (size_t)MAX_FRAME + PROTO_FRAME_HDR + chunk)
				fail_msg("chunk %zu: cap %zu exceeds max_frame+4+chunk = %zu", chunk,
					 f.cap, (size_t)MAX_FRAME + PROTO_FRAME_HDR + chunk);
			/* what is left is less than one whole frame */
			assert_true(f.len < (size_t)MAX_FRAME + PROTO_FRAME_HDR);
		}
		assert_same(&s, &g);
		got_free(&g);
		proto_framer_free(&f);
	}
	stream_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_len_big_endian),
		cmocka_unit_test(test_empty_framer_has_nothing),
		cmocka_unit_test(test_split_at_every_byte),
		cmocka_unit_test(test_split_twice_around_boundaries),
		cmocka_unit_test(test_one_byte_chunks),
		cmocka_unit_test(test_several_frames_in_one_push),
		cmocka_unit_test(test_body_valid_until_next_push),
		cmocka_unit_test(test_length_zero_rejected),
		cmocka_unit_test(test_length_max_plus_one_rejected),
		cmocka_unit_test(test_length_all_ones_rejected_without_allocating),
		cmocka_unit_test(test_exactly_max_frame_accepted),
		cmocka_unit_test(test_small_max_frame),
		cmocka_unit_test(test_buffer_bounded),
	};
	return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
