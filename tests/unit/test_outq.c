/* tests/unit/test_outq.c — daemon/net/outq.h over a socketpair: replies leave
 * whole and in order; a traced reply carries the time of the send that
 * wrote it, also when the socket takes a flush only in part (a reply whose
 * time was not yet written gets the next flush's, one whose time began to
 * go out keeps its value); each written traced reply counts once in the
 * WRITE stage window; the bound on unwritten bytes, a shut queue and a
 * peer that is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "clock.h"
#include "frame.h"
#include "outq.h"

static int g_sv[2];
static metrics g_m;

static int setup(void **state)
{
	(void)state;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, g_sv) != 0)
		return -1;
	metrics_init(&g_m);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(g_sv[0]);
	close(g_sv[1]);
	return 0;
}

/* One framed job reply with a trace, `pad` bytes of stage names making it
 * longer; its id is `id`. */
static void traced_reply(msgpack_sbuffer *sb, uint64_t id, unsigned stages)
{
	static proto_reply r;
	memset(&r, 0, sizeof(r));
	r.id = id;
	r.ok = true;
	r.trace.present = true;
	r.trace.t_recv_ns = 1;
	for (unsigned i = 0; i < stages && i < PROTO_MAX_STAGES; i++) {
		snprintf(r.trace.st[i].name, 16, "stage%u", i);
		r.trace.st[i].ns = i;
	}
	r.trace.n = stages;
	msgpack_sbuffer_init(sb);
	assert_int_equal(proto_reply_encode(sb, PROTO_R_JOB, &r), 0);
}

/* Read every whole frame available (non-blocking) into out[] (ids and
 * write times); returns how many. */
static unsigned read_replies(proto_framer *fr, uint64_t *ids, uint64_t *times, unsigned max)
{
	uint8_t buf[65536];
	unsigned n = 0;
	for (;;) {
		ssize_t got = recv(g_sv[1], buf, sizeof(buf), MSG_DONTWAIT);
		if (got <= 0)
			break;
		assert_int_equal(proto_framer_push(fr, buf, (size_t)got), 0);
	}
	const uint8_t *body;
	uint32_t len;
	static proto_reply r;
	while (proto_framer_next(fr, &body, &len) == 1) {
		proto_err err;
		assert_int_equal(proto_reply_decode(body, len, &r, &err), 0);
		assert_true(r.trace.present);
		assert_true(n < max);
		ids[n] = r.id;
		times[n++] = r.trace.t_reply_ns;
	}
	return n;
}

static uint64_t write_count(void)
{
	return g_m.stage[PROTO_STAGE_WRITE].total;
}

static void test_whole_flush_stamps_each_reply(void **state)
{
	(void)state;
	outq q;
	outq_init(&q, g_sv[0], &g_m);
	for (uint64_t id = 1; id <= 3; id++) {
		msgpack_sbuffer sb;
		traced_reply(&sb, id, 3);
		assert_int_equal(outq_append(&q, sb.data, sb.size, true, 0, 1 << 20), 0);
		msgpack_sbuffer_destroy(&sb);
	}
	const uint64_t t0 = clock_now_ns();
	assert_int_equal(outq_flush(&q), 0);
	const uint64_t t1 = clock_now_ns();
	assert_int_equal(outq_pending(&q), 0);
	proto_framer fr;
	proto_framer_init(&fr, 1 << 20);
	uint64_t ids[8], times[8];
	assert_int_equal(read_replies(&fr, ids, times, 8), 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ids[i], (uint64_t)i + 1);
		assert_true(times[i] >= t0 && times[i] <= t1);
	}
	assert_int_equal(write_count(), 3);
	proto_framer_free(&fr);
	outq_free(&q);
}

/* A clock whose readings differ in every byte, so a time made of two
 * readings' bytes is none of them. */
static uint64_t g_ticks;
static uint64_t fake_clock(void)
{
	return ++g_ticks * 0x0101010101010101ull;
}

/* A socket that takes a few KiB at a time: many flushes, each writing part
 * of the queue, often ending inside a reply's time. Every reply still
 * decodes; its time is exactly one flush's reading (never torn),
 * non-decreasing along the stream, and each counts once. */
static void test_partial_flushes_never_tear_a_time(void **state)
{
	(void)state;
	int small = 4096;
	assert_int_equal(setsockopt(g_sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	outq q;
	outq_init(&q, g_sv[0], &g_m);
	q.clock = fake_clock;
	g_ticks = 0;
	const uint64_t before = write_count();
	enum { N = 3000 };
	for (uint64_t id = 1; id <= N; id++) {
		msgpack_sbuffer sb;
		traced_reply(&sb, id, (unsigned)(id % 3));
		assert_int_equal(outq_append(&q, sb.data, sb.size, true, 0, 1 << 22), 0);
		msgpack_sbuffer_destroy(&sb);
	}
	proto_framer fr;
	proto_framer_init(&fr, 1 << 20);
	static uint64_t ids[N], times[N];
	unsigned got = 0, flushes = 0;
	int rc = 1;
	while (rc == 1 || got < N) {
		assert_true(flushes < 100000);
		rc = outq_flush(&q);
		flushes++;
		assert_true(rc == 0 || rc == 1);
		got += read_replies(&fr, ids + got, times + got, N - got);
	}
	printf("%u replies in %u flushes\n", N, flushes);
	assert_true(flushes > 20); /* it did take many */
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(ids[i], i + 1);
		const uint64_t k = times[i] / 0x0101010101010101ull;
		if (times[i] % 0x0101010101010101ull || k == 0 || k > g_ticks)
			fail_msg("reply %u: time %#llx is no flush's reading (torn)", i + 1,
				 (unsigned long long)times[i]);
		if (i)
			assert_true(times[i] >= times[i - 1]);
	}
	assert_int_equal(write_count() - before, N);
	proto_framer_free(&fr);
	outq_free(&q);
}

static void test_bound_shut_and_gone_peer(void **state)
{
	(void)state;
	outq q;
	outq_init(&q, g_sv[0], &g_m);
	static const uint8_t frame[16] = {0, 0, 0, 12};
	assert_int_equal(outq_append(&q, frame, 16, false, 0, 20), 0);
	/* 16 unwritten + 16 > 20: refused, nothing appended */
	assert_int_equal(outq_append(&q, frame, 16, false, 0, 20), -ENOBUFS);
	assert_int_equal(outq_pending(&q), 16);
	assert_int_equal(outq_flush(&q), 0);
	assert_int_equal(outq_append(&q, frame, 16, false, 0, 20), 0);
	/* shut: dropped, the socket untouched, later appends refused */
	outq_shut(&q);
	assert_int_equal(outq_pending(&q), 0);
	assert_int_equal(outq_append(&q, frame, 16, false, 0, 20), -EPIPE);
	assert_int_equal(outq_flush(&q), 0);
	outq_free(&q);
	/* the peer gone: the send's error, kept */
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	outq_init(&q, sv[0], NULL);
	assert_int_equal(outq_append(&q, frame, 16, false, 0, 20), 0);
	assert_int_equal(outq_flush(&q), -EPIPE);
	assert_int_equal(outq_flush(&q), -EPIPE);
	assert_int_equal(q.err, EPIPE);
	outq_free(&q);
	close(sv[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_flush_stamps_each_reply),
		cmocka_unit_test(test_partial_flushes_never_tear_a_time),
		cmocka_unit_test(test_bound_shut_and_gone_peer),
	};
	return cmocka_run_group_tests_name("outq", tests, setup, teardown);
}
