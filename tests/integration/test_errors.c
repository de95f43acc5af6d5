/* tests/integration/test_errors.c — every error code of the protocol,
 * provoked by a real bad request against a real daemon.
 *
 * Each case checks the code, the id, that the message names the offending
 * key or limit, that the daemon wrote nothing into the client's memory where
 * a region is involved, and that the daemon still serves: a NEW connection
 * answers ping (and, unless the error was bad_frame, the same one too).
 * After bad_frame the daemon must close that connection (EOF).
 *
 * The shared daemon runs with --max-dim 4096 --max-regions 4
 * --max-inflight 2; device_lost uses daemons started with
 * VKGRAD_FAULT_INJECT. The code `internal` ("anything else") has no
 * request that provokes it on purpose and is not covered here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "deadline.h"
#include "expect.h"
#include "group.h"
#include "jobcase.h"
#include "leakcheck.h"
#include "lregion.h"
#include "rawsock.h"
#include "shm.h"

static daemon_proc g_d;

/* Heavy jobs: 384³; 96³ under valgrind (make test-valgrind), where lavapipe
 * is ~60 times slower. */
#define BIG ((uint64_t)(daemon_proc_slow() ? 96 : 384))

#define MAX_DIM 4096
#define MAX_REGIONS 4
#define MAX_INFLIGHT 2

/* ---- helpers ---------------------------------------------------------------- */

/* Wait up to 30 s until stats reports `n` live regions, daemon-wide. */
static void wait_regions(uint64_t n)
{
	proto_stats st;
	const int64_t until = deadline_now_ms() + 30000;
	for (;;) {
		assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
		if (st.regions == n)
			return;
		if (deadline_now_ms() > until)
			break;
		deadline_sleep_ms(10);
	}
	fail_msg("stats reports %llu live regions, want %llu", (unsigned long long)st.regions,
		 (unsigned long long)n);
}

/* A connection with one registered region of `size` bytes filled with a
 * pattern, mapped at *map. */
typedef struct rconn {
	rawsock s;
	uint64_t region;
	void *map;
	size_t size;
	uint8_t *pattern;
} rconn;

static void rconn_open(rconn *c, size_t size)
{
	expect_open(&c->s, g_d.sock);
	c->size = size;
	int fd = shm_create(size, true, size, &c->map);
	assert_true(fd >= 0);
	proto_reply r;
	int rc = rawsock_register(&c->s, 1, fd, size, &c->region, &r);
	if (rc)
		fail_msg("register: rc %d: %s", rc, r.err.message);
	close(fd);
	c->pattern = malloc(size);
	assert_non_null(c->pattern);
	for (size_t i = 0; i < size; i++)
		c->pattern[i] = (uint8_t)(i * 7 + 3);
	memcpy(c->map, c->pattern, size);
}

/* Nothing was written into the region. */
static void rconn_assert_untouched(const rconn *c)
{
	if (memcmp(c->map, c->pattern, c->size) != 0)
		fail_msg("a failed request wrote into the client's memory");
}

static void rconn_close(rconn *c)
{
	rawsock_close(&c->s);
	munmap(c->map, c->size);
	free(c->pattern);
}

/* A valid f32 job 8×16×4 in c's region: x at 0, dy at 1024, w at 2048,
 * dw at 4096, db at 5120, dx at 6144 (region of 8192 bytes). */
static proto_request small_job(const rconn *c, uint64_t id)
{
	proto_request q;
	memset(&q, 0, sizeof(q));
	q.op = PROTO_OP_LINEAR_BACKWARD;
	q.id = id;
	q.dtype = PROTO_F32;
	q.batch = 8, q.in = 16, q.out = 4;
	const uint64_t off[PROTO_T_BACKWARD_COUNT] = {0, 1024, 2048, 4096, 5120, 6144};
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++)
		q.t[t] = (proto_tensor){.present = true, .region = c->region, .offset = off[t]};
	return q;
}

/* Send q on c and expect one error. */
static void job_error(rconn *c, proto_request q, proto_code code, const char *a, const char *b)
{
	assert_int_equal(rawsock_send_request(&c->s, &q, NULL, 0), 0);
	if (b)
		expect_error(&c->s, q.id, code, a, b);
	else
		expect_error(&c->s, q.id, code, a);
	rconn_assert_untouched(c);
	expect_conn_serves(&c->s);
	expect_serves(g_d.sock);
}

/* ---- a tiny msgpack map builder for malformed requests ------------------------- */

typedef enum { V_U, V_I, V_S, V_T, V_B, V_NIL, V_ARR3 } vtype;

typedef struct kv {
	const char *key;
	vtype type;
	uint64_t u;  /* V_U, V_T's region, V_B */
	int64_t i;   /* V_I */
	const char *s;
	uint64_t u2; /* V_T's offset */
} kv;

static void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

static void send_map(rawsock *s, const kv *kvs, size_t n)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, n);
	for (size_t k = 0; k < n; k++) {
		pk_str(&pk, kvs[k].key);
		switch (kvs[k].type) {
		case V_U: msgpack_pack_uint64(&pk, kvs[k].u); break;
		case V_I: msgpack_pack_int64(&pk, kvs[k].i); break;
		case V_S: pk_str(&pk, kvs[k].s); break;
		case V_T:
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, kvs[k].u);
			msgpack_pack_uint64(&pk, kvs[k].u2);
			break;
		case V_B:
			if (kvs[k].u)
				msgpack_pack_true(&pk);
			else
				msgpack_pack_false(&pk);
			break;
		case V_NIL: msgpack_pack_nil(&pk); break;
		case V_ARR3:
			msgpack_pack_array(&pk, 3);
			msgpack_pack_uint64(&pk, kvs[k].u);
			msgpack_pack_uint64(&pk, 0);
			msgpack_pack_uint64(&pk, 0);
			break;
		}
	}
	assert_int_equal(rawsock_send_sbuf(s, &sb, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
}

/* The keys of small_job() as kv pairs. */
static size_t job_kvs(kv *out, uint64_t region, uint64_t id)
{
	size_t n = 0;
	out[n++] = (kv){"op", V_S, .s = "linear_backward"};
	out[n++] = (kv){"id", V_U, .u = id};
	out[n++] = (kv){"dtype", V_S, .s = "f32"};
	out[n++] = (kv){"batch", V_U, .u = 8};
	out[n++] = (kv){"in", V_U, .u = 16};
	out[n++] = (kv){"out", V_U, .u = 4};
	out[n++] = (kv){"x", V_T, .u = region, .u2 = 0};
	out[n++] = (kv){"dy", V_T, .u = region, .u2 = 1024};
	out[n++] = (kv){"w", V_T, .u = region, .u2 = 2048};
	out[n++] = (kv){"dw", V_T, .u = region, .u2 = 4096};
	out[n++] = (kv){"db", V_T, .u = region, .u2 = 5120};
	out[n++] = (kv){"dx", V_T, .u = region, .u2 = 6144};
	out[n++] = (kv){"accumulate", V_B, .u = 0};
	return n;
}

static kv *find_kv(kv *kvs, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kvs[i].key, key))
			return &kvs[i];
	fail_msg("no key %s", key);
	return NULL;
}

static size_t drop_kv(kv *kvs, size_t n, const char *key)
{
	kv *k = find_kv(kvs, n, key);
	memmove(k, k + 1, (size_t)(kvs + n - k - 1) * sizeof(*k));
	return n - 1;
}

/* Send small_job's map with one key's value replaced by *v (or the key
 * dropped when v is NULL) and expect error `code` naming `needle`. */
static void job_variant(rconn *c, uint64_t id, const char *key, const kv *v, proto_code code,
			const char *needle)
{
	kv kvs[16];
	size_t n = job_kvs(kvs, c->region, id);
	if (v) {
		kv *k = find_kv(kvs, n, key);
		*k = *v;
		k->key = key;
	} else {
		n = drop_kv(kvs, n, key);
	}
	send_map(&c->s, kvs, n);
	expect_error(&c->s, id, code, needle);
	rconn_assert_untouched(c);
	expect_conn_serves(&c->s);
}

/* ---- bad_frame ------------------------------------------------------------------ */

static void test_bad_frame_zero_length(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	assert_int_equal(rawsock_send(&s, "\0\0\0\0", 4, NULL, 0), 0);
	expect_bad_frame(&s, g_d.sock, "length");
	rawsock_close(&s);
}

static void test_bad_frame_length_above_max_frame(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	uint8_t hdr[4];
	proto_frame_put_len(hdr, 65536 + 1);
	assert_int_equal(rawsock_send(&s, hdr, 4, NULL, 0), 0);
	expect_bad_frame(&s, g_d.sock, "max_frame");
	rawsock_close(&s);
}

static void test_bad_frame_body_is_array(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	const uint8_t body[] = {0x92, 0x01, 0x02}; /* [1, 2] */
	assert_int_equal(rawsock_send_frame(&s, body, sizeof(body), NULL, 0), 0);
	expect_bad_frame(&s, g_d.sock, "map");
	rawsock_close(&s);
}

static void test_bad_frame_map_without_id(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	kv m[] = {{"op", V_S, .s = "ping"}};
	send_map(&s, m, 1);
	expect_bad_frame(&s, g_d.sock, "id");
	rawsock_close(&s);
}

static void test_bad_frame_id_not_unsigned(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	kv m[] = {{"op", V_S, .s = "ping"}, {"id", V_I, .i = -1}};
	send_map(&s, m, 2);
	expect_bad_frame(&s, g_d.sock, "id");
	rawsock_close(&s);
}

static void test_bad_frame_map_without_op(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	kv m[] = {{"id", V_U, .u = 5}};
	send_map(&s, m, 1);
	expect_bad_frame(&s, g_d.sock, "op");
	rawsock_close(&s);
}

static void test_bad_frame_truncated_msgpack(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	/* array32 header claiming 2^32-1 elements, then nothing */
	const uint8_t body[] = {0xdd, 0xff, 0xff, 0xff, 0xff};
	assert_int_equal(rawsock_send_frame(&s, body, sizeof(body), NULL, 0), 0);
	expect_bad_frame(&s, g_d.sock, "msgpack");
	rawsock_close(&s);
}

static void test_bad_frame_trailing_bytes(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	/* {op: "ping", id: 1} then a nil: two objects, not one map */
	const uint8_t body[] = {0x82, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g', 0xa2, 'i', 'd', 0x01, 0xc0};
	assert_int_equal(rawsock_send_frame(&s, body, sizeof(body), NULL, 0), 0);
	expect_bad_frame(&s, g_d.sock, "msgpack");
	rawsock_close(&s);
}

/* Requests before the bad frame in the same write are answered first; the
 * one after it never is. */
static void test_bad_frame_after_good_requests(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	proto_request p1 = {.op = PROTO_OP_PING, .id = 1}, p2 = {.op = PROTO_OP_PING, .id = 2};
	assert_int_equal(proto_request_encode(&sb, &p1), 0);
	msgpack_sbuffer_write(&sb, "\0\0\0\0", 4);
	assert_int_equal(proto_request_encode(&sb, &p2), 0);
	assert_int_equal(rawsock_send(&s, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	proto_reply r;
	assert_int_equal(rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	assert_int_equal(r.id, 1);
	expect_bad_frame(&s, g_d.sock, "length");
	rawsock_close(&s);
}

/* A body of exactly max_frame bytes is fine (unknown keys are ignored);
 * one byte more is bad_frame. */
static void test_frame_of_exactly_max_frame(void **state)
{
	(void)state;
	for (int extra = 0; extra < 2; extra++) {
		rawsock s;
		expect_open(&s, g_d.sock);
		/* {op: "ping", id: 8, pad: str16 of n bytes}: 20 + n bytes */
		size_t n = 65536 - 20 + (size_t)extra;
		char *pad = malloc(n);
		assert_non_null(pad);
		memset(pad, 'p', n);
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 3);
		pk_str(&pk, "op");
		pk_str(&pk, "ping");
		pk_str(&pk, "id");
		msgpack_pack_uint64(&pk, 8);
		pk_str(&pk, "pad");
		msgpack_pack_str(&pk, n);
		msgpack_pack_str_body(&pk, pad, n);
		free(pad);
		assert_int_equal(sb.size, 65536 + (size_t)extra);
		/* one byte over: the daemon may answer and close on the length
		 * alone, before the rest of the frame is sent (EPIPE here; seen
		 * in a loaded make test's growth cycles) */
		const int sent = rawsock_send_sbuf(&s, &sb, NULL, 0);
		if (!(sent == 0 || (extra && (sent == -EPIPE || sent == -ECONNRESET))))
			fail_msg("frame of %zu bytes: send: %s", sb.size, strerror(-sent));
		msgpack_sbuffer_destroy(&sb);
		if (extra) {
			expect_bad_frame(&s, g_d.sock, "max_frame");
		} else {
			proto_reply r;
			assert_int_equal(rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS), 0);
			if (!r.ok)
				fail_msg("a frame of exactly max_frame bytes: %s: %s",
					 proto_code_name(r.err.code), r.err.message);
			assert_int_equal(r.id, 8);
		}
		rawsock_close(&s);
	}
}

/* A frame dribbled a byte at a time is still one frame. */
static void test_frame_in_single_bytes_is_fine(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	proto_request q = {.op = PROTO_OP_HELLO, .id = 3, .version = 1};
	assert_int_equal(proto_request_encode(&sb, &q), 0);
	for (size_t i = 0; i < sb.size; i++) {
		assert_int_equal(rawsock_send(&s, sb.data + i, 1, NULL, 0), 0);
		usleep(1000);
	}
	msgpack_sbuffer_destroy(&sb);
	proto_reply r;
	assert_int_equal(rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	assert_int_equal(r.id, 3);
	rawsock_close(&s);
}

/* ---- bad_request ---------------------------------------------------------------- */

static void test_bad_request_missing_keys(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	job_variant(&c, 11, "batch", NULL, PROTO_BAD_REQUEST, "batch");
	job_variant(&c, 12, "dtype", NULL, PROTO_BAD_REQUEST, "dtype");
	job_variant(&c, 13, "x", NULL, PROTO_BAD_REQUEST, "'x'");
	job_variant(&c, 14, "dy", NULL, PROTO_BAD_REQUEST, "dy");
	job_variant(&c, 15, "w", NULL, PROTO_BAD_REQUEST, "'w'"); /* dx needs w */
	kv reg[] = {{"op", V_S, .s = "register"}, {"id", V_U, .u = 16}};
	send_map(&c.s, reg, 2);
	expect_error(&c.s, 16, PROTO_BAD_REQUEST, "size");
	kv unreg[] = {{"op", V_S, .s = "unregister"}, {"id", V_U, .u = 17}};
	send_map(&c.s, unreg, 2);
	expect_error(&c.s, 17, PROTO_BAD_REQUEST, "region");
	kv hello[] = {{"op", V_S, .s = "hello"}, {"id", V_U, .u = 18}};
	send_map(&c.s, hello, 2);
	expect_error(&c.s, 18, PROTO_BAD_REQUEST, "version");
	/* a job with no output at all */
	kv kvs[16];
	size_t n = job_kvs(kvs, c.region, 19);
	n = drop_kv(kvs, n, "dw");
	n = drop_kv(kvs, n, "db");
	n = drop_kv(kvs, n, "dx");
	send_map(&c.s, kvs, n);
	expect_error(&c.s, 19, PROTO_BAD_REQUEST, "output");
	rconn_assert_untouched(&c);
	expect_conn_serves(&c.s);
	expect_serves(g_d.sock);
	rconn_close(&c);
}

static void test_bad_request_wrong_types(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	kv v;
	v = (kv){.type = V_S, .s = "eight"};
	job_variant(&c, 21, "batch", &v, PROTO_BAD_REQUEST, "batch");
	v = (kv){.type = V_S, .s = "nope"};
	job_variant(&c, 22, "x", &v, PROTO_BAD_REQUEST, "'x'");
	v = (kv){.type = V_ARR3, .u = c.region};
	job_variant(&c, 23, "dy", &v, PROTO_BAD_REQUEST, "dy");
	v = (kv){.type = V_U, .u = 1};
	job_variant(&c, 24, "accumulate", &v, PROTO_BAD_REQUEST, "accumulate");
	/* a dtype that is not a string is malformed; an unknown name is
	 * `unsupported` (test_unsupported_version_and_dtype) */
	v = (kv){.type = V_U, .u = 32};
	job_variant(&c, 25, "dtype", &v, PROTO_BAD_REQUEST, "dtype");
	v = (kv){.type = V_ARR3, .u = 1};
	job_variant(&c, 26, "dtype", &v, PROTO_BAD_REQUEST, "dtype");
	kv hello[] = {{"op", V_S, .s = "hello"}, {"id", V_U, .u = 27}, {"version", V_S, .s = "1"}};
	send_map(&c.s, hello, 3);
	expect_error(&c.s, 27, PROTO_BAD_REQUEST, "version");
	char longname[200];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	kv hello2[] = {{"op", V_S, .s = "hello"}, {"id", V_U, .u = 28}, {"version", V_U, .u = 1},
		       {"client", V_S, .s = longname}};
	send_map(&c.s, hello2, 4);
	expect_error(&c.s, 28, PROTO_BAD_REQUEST, "client");
	kv reg[] = {{"op", V_S, .s = "register"}, {"id", V_U, .u = 29}, {"size", V_S, .s = "4096"}};
	send_map(&c.s, reg, 3);
	expect_error(&c.s, 29, PROTO_BAD_REQUEST, "size");
	rconn_assert_untouched(&c);
	expect_conn_serves(&c.s);
	expect_serves(g_d.sock);
	rconn_close(&c);
}

static void test_bad_request_negative_or_zero_dims(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	kv v = {.type = V_I, .i = -3};
	job_variant(&c, 31, "in", &v, PROTO_BAD_REQUEST, "'in'");
	v = (kv){.type = V_I, .i = -1};
	job_variant(&c, 32, "batch", &v, PROTO_BAD_REQUEST, "batch");
	v = (kv){.type = V_U, .u = 0};
	job_variant(&c, 33, "out", &v, PROTO_BAD_REQUEST, "'out'");
	/* a negative offset inside a tensor array */
	kv kvs[16];
	size_t n = job_kvs(kvs, c.region, 34);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, n);
	for (size_t k = 0; k < n; k++) {
		pk_str(&pk, kvs[k].key);
		if (!strcmp(kvs[k].key, "dw")) {
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, c.region);
			msgpack_pack_int64(&pk, -4096);
		} else if (kvs[k].type == V_T) {
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, kvs[k].u);
			msgpack_pack_uint64(&pk, kvs[k].u2);
		} else if (kvs[k].type == V_S) {
			pk_str(&pk, kvs[k].s);
		} else if (kvs[k].type == V_B) {
			msgpack_pack_false(&pk);
		} else {
			msgpack_pack_uint64(&pk, kvs[k].u);
		}
	}
	assert_int_equal(rawsock_send_sbuf(&c.s, &sb, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	expect_error(&c.s, 34, PROTO_BAD_REQUEST, "dw");
	kv reg[] = {{"op", V_S, .s = "register"}, {"id", V_U, .u = 35}, {"size", V_I, .i = -4096}};
	send_map(&c.s, reg, 3);
	expect_error(&c.s, 35, PROTO_BAD_REQUEST, "size");
	rconn_assert_untouched(&c);
	expect_conn_serves(&c.s);
	expect_serves(g_d.sock);
	rconn_close(&c);
}

/* The daemon closed its copy of a pipe's write end: once ours is closed
 * too, the read end reports EOF. */
static bool peer_closed(int rfd, int timeout_ms)
{
	struct pollfd p = {.fd = rfd, .events = POLLIN};
	if (poll(&p, 1, timeout_ms) != 1)
		return false;
	char b;
	return read(rfd, &b, 1) == 0;
}

static void test_bad_request_register_without_fd(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	proto_request q = {.op = PROTO_OP_REGISTER, .id = 41, .size = 4096};
	assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	expect_error(&s, 41, PROTO_BAD_REQUEST, "descriptor");
	expect_conn_serves(&s);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

static void test_bad_request_fd_with_ping(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	proto_request q = {.op = PROTO_OP_PING, .id = 42};
	assert_int_equal(rawsock_send_request(&s, &q, &p[1], 1), 0);
	expect_error(&s, 42, PROTO_BAD_REQUEST, "descriptor");
	close(p[1]);
	if (!peer_closed(p[0], 10000))
		fail_msg("the daemon kept the descriptor that came with a ping");
	close(p[0]);
	expect_conn_serves(&s);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

static void test_bad_request_register_with_two_fds(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	int fd = shm_create(4096, true, 0, NULL);
	assert_true(fd >= 0);
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int fds[2] = {fd, p[1]};
	proto_request q = {.op = PROTO_OP_REGISTER, .id = 43, .size = 4096};
	assert_int_equal(rawsock_send_request(&s, &q, fds, 2), 0);
	expect_error(&s, 43, PROTO_BAD_REQUEST, "descriptor");
	close(p[1]);
	if (!peer_closed(p[0], 10000))
		fail_msg("the daemon kept a descriptor of a refused register");
	close(p[0]);
	/* and no region came of it (earlier tests' connections may still be
	 * closing: wait for the count to settle) */
	wait_regions(0);
	/* the same memfd alone registers fine */
	uint64_t region;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 44, fd, 4096, &region, &r), 0);
	close(fd);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

/* Regression: the daemon gave a register frame that came without a
 * descriptor the descriptor of the NEXT register frame when both arrived in
 * one read (the kernel hands a read's descriptors over with its last
 * message, so they belong to the last frame that starts in the read, not to
 * the first). Two frames sent back to back by separate sendmsg calls: the
 * first must get bad_request, the second its own descriptor. */
static void test_bad_request_fd_goes_to_its_own_frame(void **state)
{
	(void)state;
	for (int k = 0; k < 5; k++) {
		rawsock s;
		expect_open(&s, g_d.sock);
		int fd = shm_create(4096, true, 0, NULL);
		assert_true(fd >= 0);
		proto_request a = {.op = PROTO_OP_REGISTER, .id = 45, .size = 4096};
		proto_request b = {.op = PROTO_OP_REGISTER, .id = 46, .size = 4096};
		assert_int_equal(rawsock_send_request(&s, &a, NULL, 0), 0);
		assert_int_equal(rawsock_send_request(&s, &b, &fd, 1), 0);
		close(fd);
		proto_reply r[2];
		assert_int_equal(rawsock_recv(&s, &r[0], RAWSOCK_TIMEOUT_MS), 0);
		assert_int_equal(rawsock_recv(&s, &r[1], RAWSOCK_TIMEOUT_MS), 0);
		for (int i = 0; i < 2; i++) {
			if (r[i].id == 45 && r[i].ok)
				fail_msg("round %d: register 45 sent without a descriptor succeeded "
					 "(it took the descriptor of register 46)", k);
			if (r[i].id == 45 && r[i].err.code != PROTO_BAD_REQUEST)
				fail_msg("register 45: %s, want bad_request", proto_code_name(r[i].err.code));
			if (r[i].id == 46 && !r[i].ok)
				fail_msg("round %d: register 46 lost its descriptor: %s: %s", k,
					 proto_code_name(r[i].err.code), r[i].err.message);
		}
		assert_true((r[0].id == 45 && r[1].id == 46) || (r[0].id == 46 && r[1].id == 45));
		rawsock_close(&s);
	}
	expect_serves(g_d.sock);
}

/* ---- unknown_op, unsupported ------------------------------------------------------- */

static void test_unknown_op(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	kv m[] = {{"op", V_S, .s = "frobnicate"}, {"id", V_U, .u = 51}};
	send_map(&s, m, 2);
	expect_error(&s, 51, PROTO_UNKNOWN_OP, "frobnicate");
	kv m2[] = {{"op", V_S, .s = "PING"}, {"id", V_U, .u = 52}};
	send_map(&s, m2, 2);
	expect_error(&s, 52, PROTO_UNKNOWN_OP, "PING");
	expect_conn_serves(&s);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

static void test_unsupported_version_and_dtype(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	proto_request h = {.op = PROTO_OP_HELLO, .id = 61, .version = 2};
	assert_int_equal(rawsock_send_request(&c.s, &h, NULL, 0), 0);
	expect_error(&c.s, 61, PROTO_UNSUPPORTED, "version");
	/* a dtype string this daemon does not know is `unsupported` (PROTO-
	 * COL.md: "not here", not "malformed"), naming it and the served ones;
	 * one the device cannot serve: test_dtypes.c
	 * (test_dtype_unsupported_without_16bit_storage) */
	static const char *const unknown[] = {"f64", "f8", "F32", ""};
	for (unsigned i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "dtype '%s'", unknown[i]);
		kv v = {.type = V_S, .s = unknown[i]};
		job_variant(&c, 65 + i, "dtype", &v, PROTO_UNSUPPORTED, quoted);
	}
	/* a long one is echoed cut to 16 characters */
	kv lv = {.type = V_S, .s = "float32-but-longer-than-any-dtype"};
	job_variant(&c, 69, "dtype", &lv, PROTO_UNSUPPORTED, "'float32-but-long...'");
	kv v = {.type = V_S, .s = "f8"};
	job_variant(&c, 70, "dtype", &v, PROTO_UNSUPPORTED, "f32, f16, bf16");
	/* version 1 still fine afterwards */
	h.version = 1, h.id = 64;
	proto_reply r;
	assert_int_equal(rawsock_call(&c.s, &h, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	expect_serves(g_d.sock);
	rconn_close(&c);
}

/* ---- bad_region -------------------------------------------------------------------- */

static void test_bad_region_unknown_id(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	proto_request q = small_job(&c, 71);
	q.t[PROTO_T_DY].region = 999;
	job_error(&c, q, PROTO_BAD_REGION, "dy", "999");
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 72, .region = 999};
	assert_int_equal(rawsock_send_request(&c.s, &u, NULL, 0), 0);
	expect_error(&c.s, 72, PROTO_BAD_REGION, "region");
	rconn_close(&c);
}

static void test_bad_region_of_another_connection(void **state)
{
	(void)state;
	rconn a, b;
	rconn_open(&a, 8192); /* region 1 on a */
	/* a second region on a: its id is one b does not have */
	int fd = shm_create(8192, true, 0, NULL);
	assert_true(fd >= 0);
	uint64_t a2;
	proto_reply r;
	assert_int_equal(rawsock_register(&a.s, 2, fd, 8192, &a2, &r), 0);
	close(fd);
	rconn_open(&b, 8192);
	assert_int_not_equal(a2, b.region);
	proto_request q = small_job(&b, 73);
	q.t[PROTO_T_X].region = a2;
	job_error(&b, q, PROTO_BAD_REGION, "'x'", NULL);
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 74, .region = a2};
	assert_int_equal(rawsock_send_request(&b.s, &u, NULL, 0), 0);
	expect_error(&b.s, 74, PROTO_BAD_REGION, "region");
	/* still a's: a may unregister it */
	u.id = 75;
	assert_int_equal(rawsock_call(&a.s, &u, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	/* and only once */
	u.id = 76;
	assert_int_equal(rawsock_send_request(&a.s, &u, NULL, 0), 0);
	expect_error(&a.s, 76, PROTO_BAD_REGION, "region");
	rconn_close(&a);
	rconn_close(&b);
	expect_serves(g_d.sock);
}

static void register_refused(int fd, uint64_t size, uint64_t id, const char *needle)
{
	rawsock s;
	expect_open(&s, g_d.sock);
	uint64_t region;
	proto_reply r;
	int rc = rawsock_register(&s, id, fd, size, &region, &r);
	if (rc != -EREMOTEIO)
		fail_msg("register of a bad descriptor: rc %d (want a refusal)", rc);
	if (r.err.code != PROTO_BAD_REGION)
		fail_msg("got %s (\"%s\"), want bad_region", proto_code_name(r.err.code),
			 r.err.message);
	if (!strstr(r.err.message, needle))
		fail_msg("message \"%s\" does not mention \"%s\"", r.err.message, needle);
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

static void test_bad_region_pipe_fd(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	register_refused(p[0], 4096, 81, "regular file");
	close(p[0]);
	close(p[1]);
}

static void test_bad_region_unsealed_memfd(void **state)
{
	(void)state;
	int fd = shm_create(4096, false, 0, NULL);
	assert_true(fd >= 0);
	register_refused(fd, 4096, 82, "F_SEAL_SHRINK");
	close(fd);
}

/* Sealed against writing too: the daemon cannot map it read-write. */
static void test_bad_region_write_sealed_memfd(void **state)
{
	(void)state;
	int fd = shm_create(4096, true, 0, NULL);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
	register_refused(fd, 4096, 84, "register");
	close(fd);
}

static void test_bad_region_size_larger_than_file(void **state)
{
	(void)state;
	int fd = shm_create(4096, true, 0, NULL);
	assert_true(fd >= 0);
	register_refused(fd, 8192, 83, "size");
	close(fd);
}

/* ---- out_of_bounds ----------------------------------------------------------------- */

static void test_out_of_bounds_offset_past_end(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	proto_request q = small_job(&c, 91);
	q.t[PROTO_T_X].offset = 8192;
	job_error(&c, q, PROTO_OUT_OF_BOUNDS, "'x'", NULL);
	q = small_job(&c, 92); /* dx: 8·16·4 = 512 bytes; 4 past the end */
	q.t[PROTO_T_DX].offset = 8192 - 512 + 4;
	job_error(&c, q, PROTO_OUT_OF_BOUNDS, "dx", NULL);
	q = small_job(&c, 93); /* ends exactly at the end: fine */
	q.t[PROTO_T_DX].offset = 8192 - 512;
	proto_reply r;
	assert_int_equal(rawsock_call(&c.s, &q, &r, RAWSOCK_TIMEOUT_MS), 0);
	if (!r.ok)
		fail_msg("a tensor ending at the region's end was refused: %s", r.err.message);
	rconn_close(&c);
}

static void test_out_of_bounds_offset_wraps_2_64(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	proto_request q = small_job(&c, 94);
	q.t[PROTO_T_DY].offset = UINT64_MAX - 3; /* a multiple of 4; + 128 bytes wraps */
	job_error(&c, q, PROTO_OUT_OF_BOUNDS, "dy", NULL);
	q = small_job(&c, 95);
	q.t[PROTO_T_DW].offset = UINT64_MAX - 255 - 3; /* dw is 256 bytes: ends at 2^64 - 4 + ... */
	job_error(&c, q, PROTO_OUT_OF_BOUNDS, "dw", NULL);
	rconn_close(&c);
}

static void test_out_of_bounds_misaligned_offset(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	proto_request q = small_job(&c, 96);
	q.t[PROTO_T_W].offset = 2048 + 2;
	job_error(&c, q, PROTO_OUT_OF_BOUNDS, "'w'", NULL);
	q = small_job(&c, 97);
	q.t[PROTO_T_DB].offset = 5120 + 1;
	job_error(&c, q, PROTO_OUT_OF_BOUNDS, "db", NULL);
	rconn_close(&c);
}

/* ---- overlap ------------------------------------------------------------------------ */

static void test_overlap(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	proto_request q = small_job(&c, 101);
	q.t[PROTO_T_DW].offset = 4; /* inside x [0, 512) */
	job_error(&c, q, PROTO_OVERLAP, "dw", "'x'");
	q = small_job(&c, 102);
	q.t[PROTO_T_DW].offset = 6144 + 508; /* last float of dx [6144, 6656) */
	job_error(&c, q, PROTO_OVERLAP, "dw", "dx");
	q = small_job(&c, 103);
	q.t[PROTO_T_DB].offset = 1024 + 112; /* inside dy [1024, 1152) */
	job_error(&c, q, PROTO_OVERLAP, "db", "dy");
	q = small_job(&c, 104);
	q.t[PROTO_T_DX].offset = 2048; /* dx on w */
	job_error(&c, q, PROTO_OVERLAP, "dx", "'w'");
	/* touching is not overlapping: dw right after x */
	q = small_job(&c, 105);
	q.t[PROTO_T_DW].offset = 512;
	proto_reply r;
	assert_int_equal(rawsock_call(&c.s, &q, &r, RAWSOCK_TIMEOUT_MS), 0);
	if (!r.ok)
		fail_msg("adjacent tensors were refused: %s: %s", proto_code_name(r.err.code),
			 r.err.message);
	rconn_close(&c);
	/* the same offsets in different regions do not overlap */
	rconn a;
	rconn_open(&a, 8192);
	int fd = shm_create(8192, true, 0, NULL);
	uint64_t r2;
	assert_int_equal(rawsock_register(&a.s, 2, fd, 8192, &r2, &r), 0);
	close(fd);
	q = small_job(&a, 106);
	q.t[PROTO_T_DW] = (proto_tensor){.present = true, .region = r2, .offset = 0};
	assert_int_equal(rawsock_call(&a.s, &q, &r, RAWSOCK_TIMEOUT_MS), 0);
	if (!r.ok)
		fail_msg("equal offsets in different regions were refused: %s", r.err.message);
	rconn_close(&a);
}

/* ---- limit -------------------------------------------------------------------------- */

static void test_limit_max_dim(void **state)
{
	(void)state;
	rconn c;
	rconn_open(&c, 8192);
	/* batch is bounded by the bytes alone: X of 2^40 rows of 16 f32 */
	proto_request q = small_job(&c, 111);
	q.batch = 1ull << 40;
	job_error(&c, q, PROTO_LIMIT, "tensor 'x'", "max_tensor_bytes");
	q = small_job(&c, 112);
	q.in = MAX_DIM + 1;
	job_error(&c, q, PROTO_LIMIT, "'in'", "4096");
	q = small_job(&c, 113);
	q.out = 1u << 30;
	job_error(&c, q, PROTO_LIMIT, "'out'", "max_dim");
	rconn_close(&c);
	/* max_dim itself is allowed (1 × 4096 × 1), and a batch past it (4 ×
	 * 4096 + 3 rows; 16 outputs, so that db's largest element is not one
	 * sum of 16,387 terms that happens to cancel to near 0, where f32
	 * summation's error is larger than 1e-4 of it): max_dim bounds in and
	 * out alone */
	jobcase jc;
	vkg_error err;
	vkg_client *cl = vkg_connect(g_d.sock, &err);
	assert_non_null(cl);
	jobcase_init(&jc, 1, MAX_DIM, 1, JC_ALL, false);
	assert_int_equal(jobcase_run(cl, &jc, 1, 1, 5, NULL), 0);
	jobcase_free(&jc);
	jobcase_init(&jc, 4 * MAX_DIM + 3, 1, 16, JC_ALL, false);
	assert_int_equal(jobcase_run(cl, &jc, 1, 1, 5, NULL), 0);
	vkg_close(cl);
}

static void test_limit_max_regions(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	/* one file per region: a connection may hold a file once */
	int fds[MAX_REGIONS + 1];
	for (int i = 0; i <= MAX_REGIONS; i++) {
		fds[i] = shm_create(4096, true, 0, NULL);
		assert_true(fds[i] >= 0);
	}
	int fd = fds[MAX_REGIONS];
	uint64_t region[MAX_REGIONS];
	proto_reply r;
	for (int i = 0; i < MAX_REGIONS; i++)
		assert_int_equal(rawsock_register(&s, 1 + (uint64_t)i, fds[i], 4096, &region[i], &r), 0);
	int rc = rawsock_register(&s, 10, fd, 4096, &region[0], &r);
	if (rc != -EREMOTEIO || r.err.code != PROTO_LIMIT)
		fail_msg("register %d of max_regions %d: rc %d, %s", MAX_REGIONS + 1, MAX_REGIONS, rc,
			 proto_code_name(r.err.code));
	if (!strstr(r.err.message, "max_regions"))
		fail_msg("message \"%s\" does not name max_regions", r.err.message);
	/* another connection has its own allowance */
	rawsock s2;
	expect_open(&s2, g_d.sock);
	uint64_t other;
	assert_int_equal(rawsock_register(&s2, 1, fd, 4096, &other, &r), 0);
	rawsock_close(&s2);
	/* after an unregister there is room again */
	proto_request u = {.op = PROTO_OP_UNREGISTER, .id = 11, .region = region[2]};
	assert_int_equal(rawsock_call(&s, &u, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_true(r.ok);
	assert_int_equal(rawsock_register(&s, 12, fd, 4096, &region[2], &r), 0);
	for (int i = 0; i <= MAX_REGIONS; i++)
		close(fds[i]);
	expect_conn_serves(&s);
	expect_serves(g_d.sock);
	rawsock_close(&s);
}

static void test_limit_max_region_bytes(void **state)
{
	(void)state;
	/* the daemon's default max_region_bytes is 4 GiB: ask for more (the
	 * limit is checked before the file's size) */
	int fd = shm_create(4096, true, 0, NULL);
	assert_true(fd >= 0);
	rawsock s;
	expect_open(&s, g_d.sock);
	uint64_t region;
	proto_reply r;
	int rc = rawsock_register(&s, 1, fd, 5ull << 30, &region, &r);
	close(fd);
	if (rc != -EREMOTEIO || r.err.code != PROTO_LIMIT)
		fail_msg("a 5 GiB register: rc %d, %s (want limit)", rc, proto_code_name(r.err.code));
	assert_non_null(strstr(r.err.message, "size"));
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* --max-inflight 2: eight jobs sent in one write, the first two heavy so
 * the rest arrive while they run; some get `limit` (naming max_inflight),
 * the others succeed with right numbers, and refused ones wrote nothing.
 * Job k uses region k % 4 (the daemon allows 4); a region's jobs are
 * identical overwrites, so one or two of them succeeding gives one result. */
static void test_limit_max_inflight(void **state)
{
	(void)state;
	enum { NJOBS = 2 * MAX_REGIONS };
	jobcase jc[MAX_REGIONS];
	uint64_t region[MAX_REGIONS];
	void *map[MAX_REGIONS];
	rawsock s;
	expect_open(&s, g_d.sock);
	for (int i = 0; i < MAX_REGIONS; i++) {
		if (i < 2)
			jobcase_init(&jc[i], BIG, BIG, BIG, JC_ALL, false);
		else
			jobcase_init(&jc[i], 64, 33, 31, JC_ALL, false);
		int fd = shm_create(jc[i].size[0], true, jc[i].size[0], &map[i]);
		assert_true(fd >= 0);
		proto_reply r;
		assert_int_equal(rawsock_register(&s, 1 + (uint64_t)i, fd, jc[i].size[0], &region[i], &r), 0);
		close(fd);
		assert_int_equal(jobcase_fill(&jc[i], &map[i], 500 + (uint64_t)i), 0);
	}
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	for (int k = 0; k < NJOBS; k++) {
		int i = k % MAX_REGIONS;
		proto_request q = jobcase_request(&jc[i], &region[i], 10 + (uint64_t)k);
		assert_int_equal(proto_request_encode(&sb, &q), 0);
	}
	assert_int_equal(rawsock_send(&s, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	int ok = 0, limited = 0;
	bool region_ok[MAX_REGIONS] = {false};
	for (int k = 0; k < NJOBS; k++) {
		proto_reply r;
		assert_int_equal(rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS), 0);
		assert_true(r.id >= 10 && r.id < 10 + NJOBS);
		if (r.ok) {
			ok++;
			region_ok[(r.id - 10) % MAX_REGIONS] = true;
			continue;
		}
		if (r.err.code != PROTO_LIMIT)
			fail_msg("job %llu: %s: %s (want ok or limit)", (unsigned long long)r.id,
				 proto_code_name(r.err.code), r.err.message);
		if (!strstr(r.err.message, "max_inflight"))
			fail_msg("limit message \"%s\" does not name max_inflight", r.err.message);
		limited++;
	}
	if (limited == 0)
		fail_msg("%d jobs sent at once with --max-inflight %d: none got limit", NJOBS,
			 MAX_INFLIGHT);
	assert_true(ok >= MAX_INFLIGHT);
	for (int i = 0; i < MAX_REGIONS; i++) {
		char why[320], name[96];
		int rc = region_ok[i] ? jobcase_check(&jc[i], &map[i], JC_TOL_F32, why, sizeof(why))
				      : jobcase_check_untouched(&jc[i], &map[i], why, sizeof(why));
		if (rc)
			fail_msg("%s (%s): %s", jobcase_name(&jc[i], name, sizeof(name)),
				 region_ok[i] ? "succeeded" : "refused", why);
		munmap(map[i], jc[i].size[0]);
		jobcase_free(&jc[i]);
	}
	/* once those finished, the allowance is back */
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* ---- device_lost ---------------------------------------------------------------------- */

/* On a daemon whose `fault` (VKGRAD_FAULT_INJECT) makes the 2nd batch fail:
 * region A is registered and used before the loss; the job on B gets
 * device_lost; the job on C, sent right behind it, succeeds (in a batch of
 * its own that ran, or queued until the device was recreated); after the
 * recreation a job on A (registered BEFORE the loss), one on B and one on
 * a new region D succeed with right numbers. */
static void device_lost_with(const char *fault, const char *const *args)
{
	daemon_proc d = {0};
	const char *const env[] = {fault, NULL};
	if (daemon_proc_start(&d, args, env) != 0)
		fail_msg("could not start the daemon with %s", fault);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	lregion a, b, cc, dd;
	lregion_make(c, &a, 33, 47, 17, true, 701);
	lregion_make(c, &b, 17, 9, 33, false, 702);
	lregion_make(c, &cc, 64, 31, 16, false, 703);
	lregion_job_ok(c, &a, "job 1, before the loss");
	vkg_job jb = jobcase_job(&b.jc, &b.id), jcc = jobcase_job(&cc.jc, &cc.id);
	uint64_t hb, hc;
	assert_int_equal(vkg_submit(c, &jb, &hb, &err), 0);
	assert_int_equal(vkg_submit(c, &jcc, &hc, &err), 0);
	vkg_result res;
	int rc = vkg_wait(c, hb, 60000, &res, &err);
	if (rc != VKG_EREMOTE || strcmp(err.code, "device_lost") != 0)
		fail_msg("%s: job 2: rc %d %s (want device_lost)", fault, rc, err.code);
	assert_non_null(strstr(err.message, "GPU"));
	if (vkg_wait(c, hc, 60000, &res, &err) != 0)
		fail_msg("%s: job 3, sent behind the lost one: %s: %s", fault, err.code, err.message);
	char why[320];
	if (jobcase_check(&cc.jc, &cc.map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("%s: job 3: %s", fault, why);
	/* after the recreation: regions from before the loss, and a new one */
	memcpy(a.map, a.jc.before[0], a.jc.size[0]); /* accumulates: start over */
	lregion_job_ok(c, &a, "job 4 on region A, registered before the loss");
	assert_int_equal(jobcase_fill(&b.jc, &b.map, 704), 0);
	lregion_job_ok(c, &b, "job 5 on region B, whose job was lost");
	lregion_make(c, &dd, 5, 130, 7, false, 705);
	lregion_job_ok(c, &dd, "job 6 on region D, registered after the loss");
	proto_stats st;
	assert_int_equal(rawsock_stats(d.sock, &st), 0);
	assert_int_equal(st.jobs_failed, 1);
	assert_int_equal(st.jobs_done, 5);
	assert_int_equal(st.regions, 4);
	assert_int_equal(st.host_imports + st.staged_regions, 4);
	lregion_free(c, &a);
	lregion_free(c, &b);
	lregion_free(c, &cc);
	lregion_free(c, &dd);
	assert_int_equal(vkg_ping(c, &err), 0);
	vkg_close(c);
	assert_true(rawsock_daemon_serves(d.sock));
	assert_true(daemon_proc_log_contains(&d, "fault injection"));
	assert_true(daemon_proc_log_contains(&d, "device recreated after a device loss"));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static void test_device_lost_on_wait(void **state)
{
	(void)state;
	device_lost_with("VKGRAD_FAULT_INJECT=wait:2", NULL);
}

static void test_device_lost_on_submit(void **state)
{
	(void)state;
	device_lost_with("VKGRAD_FAULT_INJECT=submit:2", NULL);
}

/* A connection's job of one class whose submission fails, then its next
 * job of the other class: the second must not wait for the first's
 * timeline value, which nothing signals (it was given back). Job 1 teaches
 * the generic kernels' rate, so job 2 (generic, small) is a small job;
 * job 3 (tiled, a kind not measured yet) is a large one, on the other
 * track. Before the fix job 3 never finished. */
static void test_device_lost_on_submit_then_other_class(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const env[] = {"VKGRAD_FAULT_INJECT=submit:2", NULL};
	assert_int_equal(daemon_proc_start(&d, NULL, env), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	lregion a, b, cc;
	lregion_make(c, &a, 33, 47, 17, false, 711);
	lregion_make(c, &b, 17, 9, 33, false, 712);
	lregion_make(c, &cc, 64, 31, 16, false, 713);
	vkg_job ja = jobcase_job(&a.jc, &a.id), jb = jobcase_job(&b.jc, &b.id),
		jc3 = jobcase_job(&cc.jc, &cc.id);
	ja.variant = jb.variant = "generic";
	jc3.variant = "tiled";
	vkg_result res;
	assert_int_equal(vkg_linear_backward(c, &ja, &res, &err), 0); /* submission 1 */
	char why[320];
	if (jobcase_check(&a.jc, &a.map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("job 1: %s", why);
	int rc = vkg_linear_backward(c, &jb, &res, &err); /* submission 2: lost */
	if (rc != VKG_EREMOTE || strcmp(err.code, "device_lost") != 0)
		fail_msg("job 2: rc %d %s (want device_lost)", rc, err.code);
	uint64_t h;
	assert_int_equal(vkg_submit(c, &jc3, &h, &err), 0);
	if (vkg_wait(c, h, 30000, &res, &err) != 0)
		fail_msg("job 3, of the other class after the failed submission: %s: %s", err.code,
			 err.message);
	if (jobcase_check(&cc.jc, &cc.map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("job 3: %s", why);
	proto_stats st;
	assert_int_equal(rawsock_stats(d.sock, &st), 0);
	printf("classes: %llu small and %llu large jobs; job 3 finished\n",
	       (unsigned long long)st.sched_small_jobs, (unsigned long long)st.sched_large_jobs);
	assert_true(st.sched_small_jobs >= 1 && st.sched_large_jobs >= 1);
	lregion_free(c, &a);
	lregion_free(c, &b);
	lregion_free(c, &cc);
	vkg_close(c);
	assert_true(rawsock_daemon_serves(d.sock));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* The same with every region staged (copies, not imports) */
static void test_device_lost_on_wait_staged(void **state)
{
	(void)state;
	static const char *const args[] = {"--no-host-import", NULL};
	device_lost_with("VKGRAD_FAULT_INJECT=wait:2", args);
}

/* The same with every job on the device-local path: the slots' scratch
 * buffers go with the lost device and are made again on the new one */
static void test_device_lost_on_wait_devlocal(void **state)
{
	(void)state;
	static const char *const args[] = {"--devlocal-min-bytes", "1", NULL};
	device_lost_with("VKGRAD_FAULT_INJECT=wait:2", args);
}

/* The same with every job streamed in 1-row chunks (stream.h): the loss
 * reported while a streamed job's batch is the one waited for; its
 * semaphores and command pools go with the device and come back */
static void test_device_lost_on_wait_streamed(void **state)
{
	(void)state;
	static const char *const args[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "1",
					   "--stream-min-bytes", "1", NULL};
	device_lost_with("VKGRAD_FAULT_INJECT=wait:2", args);
}

/* ... and its submission failing (nothing of it submitted) */
static void test_device_lost_on_submit_streamed(void **state)
{
	(void)state;
	static const char *const args[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "1",
					   "--stream-min-bytes", "1", NULL};
	device_lost_with("VKGRAD_FAULT_INJECT=submit:2", args);
}

/* The first recreation fails: jobs sent meanwhile wait, the second attempt
 * (a second later) succeeds and runs them, on a region from before. */
static void test_device_lost_recreated_on_second_attempt(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const env[] = {"VKGRAD_FAULT_INJECT=wait:2,recreate:1", NULL};
	assert_int_equal(daemon_proc_start(&d, NULL, env), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	lregion a;
	lregion_make(c, &a, 33, 47, 17, false, 711);
	lregion_job_ok(c, &a, "job 1");
	vkg_job j = jobcase_job(&a.jc, &a.id);
	vkg_result res;
	int rc = vkg_linear_backward(c, &j, &res, &err);
	if (rc != VKG_EREMOTE || strcmp(err.code, "device_lost") != 0)
		fail_msg("job 2: rc %d %s (want device_lost)", rc, err.code);
	assert_int_equal(jobcase_fill(&a.jc, &a.map, 712), 0);
	lregion_job_ok(c, &a, "job 3, sent while the device was being recreated");
	lregion_free(c, &a);
	vkg_close(c);
	assert_true(daemon_proc_log_contains(&d, "recreating the device failed (attempt 1 of 2)"));
	assert_true(daemon_proc_log_contains(&d, "device recreated after a device loss"));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* Both recreations fail: the job waiting for the device is answered
 * device_lost and the daemon exits with status 1 (systemd restarts it). */
static void test_device_lost_for_good_exits_1(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const env[] = {"VKGRAD_FAULT_INJECT=wait:2,recreate:2", NULL};
	assert_int_equal(daemon_proc_start(&d, NULL, env), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	lregion a;
	lregion_make(c, &a, 33, 47, 17, false, 721);
	lregion_job_ok(c, &a, "job 1");
	vkg_job j = jobcase_job(&a.jc, &a.id);
	vkg_result res;
	for (int i = 2; i <= 3; i++) {
		int rc = vkg_linear_backward(c, &j, &res, &err);
		if (rc != VKG_EREMOTE || strcmp(err.code, "device_lost") != 0)
			fail_msg("job %d: rc %d %s (want device_lost)", i, rc, err.code);
	}
	assert_non_null(strstr(err.message, "could not be recreated"));
	vkg_close(c);
	jobcase_free(&a.jc);
	munmap(a.map, a.jc.size[0]);
	int ws = daemon_proc_wait(&d, 60000);
	if (ws == -1) {
		daemon_proc_kill(&d);
		fail_msg("the daemon did not exit after losing the device for good");
	}
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 1) {
		daemon_proc_print_log_tail(&d, 30);
		fail_msg("the daemon ended with wait status 0x%x (want exit status 1)", ws);
	}
	assert_true(daemon_proc_log_contains(&d, "no usable GPU after 2 attempts"));
	assert_int_equal(daemon_proc_log_validation_errors(&d), 0);
	daemon_proc_cleanup(&d);
}

/* ---- setup ------------------------------------------------------------------------------ */

/* After each test: the shared daemon settles (no client, region or job
 * left) before the next one starts. */
static int settled(void **state)
{
	(void)state;
	return group_daemon_settle(&g_d);
}

/* Last: no Vulkan validation error so far (the teardown checks again). */
static void test_no_validation_errors(void **state)
{
	(void)state;
	expect_validation_clean(&g_d, 0, "the shared daemon");
}

/* The group's tests on the shared daemon (those whose teardown is
 * `settled`), again and again, the daemon restarted without the validation
 * layer: its descriptors and memory stop growing once warm
 * (tests/common/group.h, leakcheck.h). */
static const struct CMUnitTest *g_tests;
static size_t g_ntests;
static void test_no_growth_over_repeated_cycles(void **state)
{
	(void)state;
	group_daemon_expect_flat(&g_d, g_tests, g_ntests, test_no_growth_over_repeated_cycles,
				 settled);
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--max-dim", "4096", "--max-regions", "4",
					   "--max-inflight", "2", NULL};
	/* warm up: a job */
	jobcase jc;
	jobcase_init(&jc, 33, 65, 17, JC_ALL, true);
	int rc = group_daemon_start(&g_d, args, &jc, 1);
	jobcase_free(&jc);
	return rc;
}

static int group_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d);
}

/* T: a test on the shared daemon (settled after it, part of the growth
 * cycles); OWN: a test with daemons of its own. */
#define T(f) cmocka_unit_test_teardown(f, settled)
#define OWN(f) cmocka_unit_test(f)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_bad_frame_zero_length),
		T(test_bad_frame_length_above_max_frame),
		T(test_bad_frame_body_is_array),
		T(test_bad_frame_map_without_id),
		T(test_bad_frame_id_not_unsigned),
		T(test_bad_frame_map_without_op),
		T(test_bad_frame_truncated_msgpack),
		T(test_bad_frame_trailing_bytes),
		T(test_bad_frame_after_good_requests),
		T(test_frame_of_exactly_max_frame),
		T(test_frame_in_single_bytes_is_fine),
		T(test_bad_request_missing_keys),
		T(test_bad_request_wrong_types),
		T(test_bad_request_negative_or_zero_dims),
		T(test_bad_request_register_without_fd),
		T(test_bad_request_fd_with_ping),
		T(test_bad_request_register_with_two_fds),
		T(test_bad_request_fd_goes_to_its_own_frame),
		T(test_unknown_op),
		T(test_unsupported_version_and_dtype),
		T(test_bad_region_unknown_id),
		T(test_bad_region_of_another_connection),
		T(test_bad_region_pipe_fd),
		T(test_bad_region_unsealed_memfd),
		T(test_bad_region_write_sealed_memfd),
		T(test_bad_region_size_larger_than_file),
		T(test_out_of_bounds_offset_past_end),
		T(test_out_of_bounds_offset_wraps_2_64),
		T(test_out_of_bounds_misaligned_offset),
		T(test_overlap),
		T(test_limit_max_dim),
		T(test_limit_max_regions),
		T(test_limit_max_region_bytes),
		T(test_limit_max_inflight),
		OWN(test_device_lost_on_wait),
		OWN(test_device_lost_on_submit),
		OWN(test_device_lost_on_submit_then_other_class),
		OWN(test_device_lost_on_wait_staged),
		OWN(test_device_lost_on_wait_devlocal),
		OWN(test_device_lost_on_wait_streamed),
		OWN(test_device_lost_on_submit_streamed),
		OWN(test_device_lost_recreated_on_second_attempt),
		OWN(test_device_lost_for_good_exits_1),
		T(test_no_validation_errors),
		T(test_no_growth_over_repeated_cycles),
	};
	g_tests = tests;
	g_ntests = sizeof(tests) / sizeof(tests[0]);
	int rc = cmocka_run_group_tests_name("errors", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
