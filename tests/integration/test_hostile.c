/* tests/integration/test_hostile.c — clients that do not play by the
 * rules: wrong descriptors, broken and oversized frames, descriptor floods,
 * connection floods, clients that never read, die mid-flight or hang up
 * while being answered, and a thousand short-lived clients.
 *
 * Each test checks the daemon's answer (the error code, or the dropped
 * connection) and that a NEW connection still gets its ping answered; the
 * per-test teardown then waits until the daemon settled (no client, region
 * or job left), and the last test runs them all again and again: the
 * daemon's descriptors and memory must stop growing once warm
 * (tests/common/leakcheck.h).
 *
 * Cases already covered elsewhere (test_errors.c, with the same growth
 * check): unsealed memfd, pipe as a region, size larger than the file,
 * offset+length wrapping 2^64, length prefixes 0 and max_frame+1,
 * `dd ff ff ff ff`, negative dims, one descriptor too many, a descriptor
 * with ping, the in-flight limit, device loss at submit and at wait.
 *
 * The shared daemon: --max-connections-per-uid 12 --max-outbound-bytes 65536. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "deadline.h"
#include "expect.h"
#include "group.h"
#include "jobcase.h"
#include "leakcheck.h"
#include "rawsock.h"
#include "shm.h"
#include "vkgrad.h"

static daemon_proc g_d;

#define PER_UID 12
#define OUTBOUND 65536

/* ---- helpers ------------------------------------------------------------------ */

/* The daemon closed the connection, with or without a last error frame. */
static void expect_dropped(rawsock *s)
{
	for (int i = 0; i < 4; i++) {
		proto_reply r;
		int rc = rawsock_recv(s, &r, 10000);
		if (rc == -ECONNRESET)
			return;
		if (rc)
			fail_msg("the daemon did not drop the connection: %s", strerror(-rc));
	}
	fail_msg("the daemon kept answering instead of dropping the connection");
}

/* Has the daemon closed its copy of the write end w of pipe (r, w)? Closes
 * ours; then the read end sees EOF once no copy is left. */
static bool daemon_closed_pipe(int p[2], int timeout_ms)
{
	close(p[1]);
	struct pollfd pf = {.fd = p[0], .events = POLLIN};
	bool closed = false;
	if (poll(&pf, 1, timeout_ms) == 1) {
		char b;
		closed = read(p[0], &b, 1) == 0;
	}
	close(p[0]);
	return closed;
}

static void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

/* Append one framed request to sb. */
static void encode(msgpack_sbuffer *sb, const proto_request *q)
{
	assert_int_equal(proto_request_encode(sb, q), 0);
}

/* ---- regions: descriptors that are not sealed memfds ----------------------------- */

static void register_refused(int fd, uint64_t size, const char *needle)
{
	rawsock s;
	expect_open(&s, g_d.sock);
	uint64_t region;
	proto_reply r;
	int rc = rawsock_register(&s, 7, fd, size, &region, &r);
	if (rc != -EREMOTEIO)
		fail_msg("register: rc %d (want a refusal)", rc);
	if (r.err.code != PROTO_BAD_REGION || !strstr(r.err.message, needle))
		fail_msg("got %s \"%s\"; want bad_region naming \"%s\"", proto_code_name(r.err.code),
			 r.err.message, needle);
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

static void test_region_seal_seal_without_shrink(void **state)
{
	(void)state;
	int fd = shm_create(8192, false, 0, NULL);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL), 0);
	register_refused(fd, 8192, "F_SEAL_SHRINK");
	close(fd);
	/* F_SEAL_GROW alone is no better */
	fd = shm_create(8192, false, 0, NULL);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW), 0);
	register_refused(fd, 8192, "F_SEAL_SHRINK");
	close(fd);
}

static void test_region_socket_directory_devnull(void **state)
{
	(void)state;
	int sp[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	register_refused(sp[0], 4096, "regular file");
	/* the daemon let go of its copy: with ours closed, the peer sees EOF */
	close(sp[0]);
	struct pollfd pf = {.fd = sp[1], .events = POLLIN};
	assert_int_equal(poll(&pf, 1, 10000), 1);
	char b;
	assert_int_equal(read(sp[1], &b, 1), 0);
	close(sp[1]);

	int dir = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dir >= 0);
	register_refused(dir, 4096, "regular file");
	close(dir);

	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(null >= 0);
	register_refused(null, 4096, "regular file");
	close(null);
}

/* ---- dims ------------------------------------------------------------------------- */

/* A valid 8×16×4 job on a fresh region, its dims replaced. */
static void job_with_dims(uint64_t batch, uint64_t in, uint64_t out, proto_code code,
			  const char *needle)
{
	rawsock s;
	expect_open(&s, g_d.sock);
	int fd = shm_create(8192, true, 0, NULL);
	uint64_t region;
	proto_reply r;
	assert_int_equal(rawsock_register(&s, 1, fd, 8192, &region, &r), 0);
	close(fd);
	proto_request q = {.op = PROTO_OP_LINEAR_BACKWARD, .id = 2, .dtype = PROTO_F32,
			   .batch = batch, .in = in, .out = out};
	const uint64_t off[PROTO_T_BACKWARD_COUNT] = {0, 1024, 2048, 4096, 5120, 6144};
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++)
		q.t[t] = (proto_tensor){.present = true, .region = region, .offset = off[t]};
	assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	expect_error(&s, 2, code, needle);
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* batch·in, batch·out, out·in overflow 32 bits, or 64 bits once ×4: each
 * dim is checked against max_dim first, then every tensor's bytes in 64
 * bits against max_tensor_bytes — never a wrapped product. */
static void test_dims_whose_product_overflows(void **state)
{
	(void)state;
	job_with_dims(1ull << 32, 1ull << 32, 4, PROTO_LIMIT, "max_dim");
	job_with_dims(1ull << 62, 16, 1ull << 62, PROTO_LIMIT, "max_dim");
	job_with_dims(UINT64_MAX, UINT64_MAX, UINT64_MAX, PROTO_LIMIT, "max_dim");
	/* every dim within max_dim (2^20 here at most), the product not: X
	 * would be 2^40 floats */
	proto_hello h;
	expect_hello(g_d.sock, &h);
	const uint64_t md = h.limits.max_dim;
	job_with_dims(md, md, 4, PROTO_LIMIT, "max_tensor_bytes");
}

/* Dims as floats, booleans, nil, strings, arrays: bad_request naming the key. */
static void test_non_integer_dims(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	int fd = shm_create(8192, true, 0, NULL);
	uint64_t region;
	proto_reply rr;
	assert_int_equal(rawsock_register(&s, 1, fd, 8192, &region, &rr), 0);
	close(fd);
	for (int kind = 0; kind < 6; kind++) {
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 9);
		pk_str(&pk, "op");
		pk_str(&pk, "linear_backward");
		pk_str(&pk, "id");
		msgpack_pack_uint64(&pk, 10 + (uint64_t)kind);
		pk_str(&pk, "dtype");
		pk_str(&pk, "f32");
		pk_str(&pk, "batch");
		switch (kind) {
		case 0: msgpack_pack_double(&pk, 8.0); break;
		case 1: msgpack_pack_float(&pk, 8.5f); break;
		case 2: msgpack_pack_double(&pk, 0.0 / 0.0); break;
		case 3: msgpack_pack_true(&pk); break;
		case 4: msgpack_pack_array(&pk, 1); msgpack_pack_uint64(&pk, 8); break;
		default: pk_str(&pk, "8"); break;
		}
		pk_str(&pk, "in");
		msgpack_pack_uint64(&pk, 16);
		pk_str(&pk, "out");
		msgpack_pack_uint64(&pk, 4);
		const char *tk[3] = {"x", "dy", "dw"};
		const uint64_t off[3] = {0, 1024, 4096};
		for (int t = 0; t < 3; t++) {
			pk_str(&pk, tk[t]);
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, region);
			msgpack_pack_uint64(&pk, off[t]);
		}
		assert_int_equal(rawsock_send_sbuf(&s, &sb, NULL, 0), 0);
		msgpack_sbuffer_destroy(&sb);
		expect_error(&s, 10 + (uint64_t)kind, PROTO_BAD_REQUEST, "batch");
	}
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* ---- descriptors ------------------------------------------------------------------- */

/* n pipes; their write ends in w[], read ends kept in p[i][0]. */
static void make_pipes(int (*p)[2], int *w, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(pipe2(p[i], O_CLOEXEC), 0);
		w[i] = p[i][1];
	}
}

static void assert_pipes_closed(int (*p)[2], unsigned n, const char *what)
{
	unsigned kept = 0;
	for (unsigned i = 0; i < n; i++)
		kept += !daemon_closed_pipe(p[i], 5000);
	if (kept)
		fail_msg("%s: the daemon kept %u of %u descriptors", what, kept, n);
}

/* register with 1 + k descriptors in one message: k = 2 is answered
 * bad_request (all closed); k = 17 passes the 8 a message may carry, so
 * the connection is dropped (all closed, the kernel discards the rest). */
static void test_descriptors_too_many_with_one_frame(void **state)
{
	(void)state;
	static const unsigned extra[] = {1, 2, 17};
	for (unsigned e = 0; e < 3; e++) {
		unsigned n = 1 + extra[e];
		int p[18][2], fds[18];
		make_pipes(p, fds + 1, n - 1);
		fds[0] = shm_create(4096, true, 0, NULL);
		assert_true(fds[0] >= 0);
		rawsock s;
		expect_open(&s, g_d.sock);
		proto_request q = {.op = PROTO_OP_REGISTER, .id = 20 + e, .size = 4096};
		assert_int_equal(rawsock_send_request(&s, &q, fds, n), 0);
		close(fds[0]);
		if (n <= 8) {
			expect_error(&s, 20 + e, PROTO_BAD_REQUEST, "descriptor");
			expect_conn_serves(&s);
		} else {
			expect_dropped(&s);
		}
		assert_pipes_closed(p, n - 1, extra[e] == 17 ? "17 too many" : "too many");
		rawsock_close(&s);
		expect_serves(g_d.sock);
	}
}

/* Descriptors with frames that take none: each answered bad_request and
 * closed; descriptors held past the per-connection cap (16, while their
 * frame is incomplete) drop the connection. */
static void test_descriptors_with_non_register_frames(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	proto_request qs[4] = {
		{.op = PROTO_OP_HELLO, .id = 31, .version = 1},
		{.op = PROTO_OP_STATS, .id = 32},
		{.op = PROTO_OP_UNREGISTER, .id = 33, .region = 1},
		{.op = PROTO_OP_PING, .id = 34},
	};
	for (int i = 0; i < 4; i++) {
		int p[3][2], w[3];
		make_pipes(p, w, 3);
		assert_int_equal(rawsock_send_request(&s, &qs[i], w, 3), 0);
		expect_error(&s, qs[i].id, PROTO_BAD_REQUEST, "descriptor");
		assert_pipes_closed(p, 3, proto_op_name(qs[i].op));
	}
	expect_conn_serves(&s);
	rawsock_close(&s);

	/* a frame header, then 3 messages of 6 descriptors each and 1 byte of
	 * body: 18 held for one incomplete frame, above max_fds_held 16 */
	expect_open(&s, g_d.sock);
	uint8_t hdr[4];
	proto_frame_put_len(hdr, 100);
	assert_int_equal(rawsock_send(&s, hdr, 4, NULL, 0), 0);
	int p[18][2], w[18];
	make_pipes(p, w, 18);
	int rc = 0;
	for (int k = 0; k < 3 && rc == 0; k++) {
		rc = rawsock_send(&s, "\x80", 1, w + 6 * k, 6);
		usleep(20000);
	}
	expect_dropped(&s);
	assert_pipes_closed(p, 18, "held past max_fds_held");
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* ---- frames ----------------------------------------------------------------------- */

static void test_frame_length_ffffffff(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	assert_int_equal(rawsock_send(&s, "\xff\xff\xff\xff", 4, NULL, 0), 0);
	expect_bad_frame(&s, g_d.sock, "max_frame");
	rawsock_close(&s);
}

/* {op: "ping", id: 1, pad: [[[...nil...]]]} nested 10,000 deep: refused at
 * depth 16 before msgpack-c sees it. */
static void test_frame_10000_nested_arrays(void **state)
{
	(void)state;
	enum { DEPTH = 10000 };
	uint8_t *body = malloc(DEPTH + 64);
	assert_non_null(body);
	size_t n = 0;
	const uint8_t head[] = {0x83, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g', 0xa2, 'i', 'd', 0x01,
				0xa3, 'p', 'a', 'd'};
	memcpy(body, head, sizeof(head));
	n = sizeof(head);
	memset(body + n, 0x91, DEPTH); /* fixarray of 1 */
	n += DEPTH;
	body[n++] = 0xc0;
	rawsock s;
	expect_open(&s, g_d.sock);
	assert_int_equal(rawsock_send_frame(&s, body, n, NULL, 0), 0);
	free(body);
	expect_bad_frame(&s, g_d.sock, "nesting");
	rawsock_close(&s);
	/* and as the whole body */
	body = malloc(DEPTH + 1);
	memset(body, 0x91, DEPTH);
	body[DEPTH] = 0xc0;
	expect_open(&s, g_d.sock);
	assert_int_equal(rawsock_send_frame(&s, body, DEPTH + 1, NULL, 0), 0);
	free(body);
	expect_bad_frame(&s, g_d.sock, "msgpack");
	rawsock_close(&s);
}

/* {op: "ping", id: 1, pad: X} where X claims more bytes than the frame has. */
static void test_frame_truncated_str_bin_ext(void **state)
{
	(void)state;
	static const struct {
		const char *what;
		uint8_t b[8];
		size_t n;
	} cases[] = {
		{"str8", {0xd9, 0x20, 'a', 'b'}, 4},
		{"str16", {0xda, 0x01, 0x00, 'a'}, 4},
		{"str32", {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}, 6},
		{"fixstr", {0xbf, 'a', 'b'}, 3},
		{"bin8", {0xc4, 0x10, 0x00}, 3},
		{"bin16", {0xc5, 0x10, 0x00, 0x00}, 4},
		{"bin32", {0xc6, 0x7f, 0xff, 0xff, 0xff}, 5},
		{"ext8", {0xc7, 0x10, 0x01, 0x00}, 4},
		{"ext16", {0xc8, 0x01, 0x00, 0x01}, 4},
		{"ext32", {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01}, 6},
		{"fixext16", {0xd8, 0x01, 0x00, 0x00}, 4},
	};
	const uint8_t head[] = {0x83, 0xa2, 'o', 'p', 0xa4, 'p', 'i', 'n', 'g', 0xa2, 'i', 'd', 0x01,
				0xa3, 'p', 'a', 'd'};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t body[64];
		memcpy(body, head, sizeof(head));
		memcpy(body + sizeof(head), cases[i].b, cases[i].n);
		rawsock s;
		expect_open(&s, g_d.sock);
		assert_int_equal(rawsock_send_frame(&s, body, sizeof(head) + cases[i].n, NULL, 0), 0);
		proto_reply r;
		int rc = rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS);
		if (rc || r.ok || r.err.code != PROTO_BAD_FRAME)
			fail_msg("truncated %s: rc %d, %s (want bad_frame)", cases[i].what, rc,
				 rc ? "-" : r.ok ? "ok" : proto_code_name(r.err.code));
		assert_int_equal(rawsock_expect_eof(&s, 10000), 0);
		rawsock_close(&s);
	}
	expect_serves(g_d.sock);
}

/* A hello dribbled one byte per write, its last byte merged with a whole
 * ping and half of another; then the rest of that one; then a register
 * (carrying its descriptor: it starts its write) merged with one more
 * ping. Five replies, all right, in order. */
static void test_frame_bytewise_merged_with_next(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	proto_request q[5] = {
		{.op = PROTO_OP_HELLO, .id = 41, .version = 1},
		{.op = PROTO_OP_PING, .id = 42},
		{.op = PROTO_OP_PING, .id = 43},
		{.op = PROTO_OP_REGISTER, .id = 44, .size = 4096},
		{.op = PROTO_OP_PING, .id = 45},
	};
	msgpack_sbuffer f[5];
	for (int i = 0; i < 5; i++) {
		msgpack_sbuffer_init(&f[i]);
		encode(&f[i], &q[i]);
	}
	for (size_t i = 0; i + 1 < f[0].size; i++) {
		assert_int_equal(rawsock_send(&s, f[0].data + i, 1, NULL, 0), 0);
		usleep(300);
	}
	msgpack_sbuffer m;
	msgpack_sbuffer_init(&m);
	size_t half = f[2].size / 2;
	msgpack_sbuffer_write(&m, f[0].data + f[0].size - 1, 1);
	msgpack_sbuffer_write(&m, f[1].data, f[1].size);
	msgpack_sbuffer_write(&m, f[2].data, half);
	assert_int_equal(rawsock_send(&s, m.data, m.size, NULL, 0), 0);
	usleep(2000);
	assert_int_equal(rawsock_send(&s, f[2].data + half, f[2].size - half, NULL, 0), 0);
	msgpack_sbuffer_clear(&m);
	msgpack_sbuffer_write(&m, f[3].data, f[3].size);
	msgpack_sbuffer_write(&m, f[4].data, f[4].size);
	int fd = shm_create(4096, true, 0, NULL);
	assert_true(fd >= 0);
	assert_int_equal(rawsock_send(&s, m.data, m.size, &fd, 1), 0);
	close(fd);
	msgpack_sbuffer_destroy(&m);
	for (int i = 0; i < 5; i++)
		msgpack_sbuffer_destroy(&f[i]);
	proto_reply *r = malloc(sizeof(*r));
	assert_non_null(r);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(rawsock_recv(&s, r, RAWSOCK_TIMEOUT_MS), 0);
		if (!r->ok || r->id != q[i].id)
			fail_msg("reply %d: id %llu %s %s (want id %llu ok)", i, (unsigned long long)r->id,
				 r->ok ? "ok" : proto_code_name(r->err.code), r->ok ? "" : r->err.message,
				 (unsigned long long)q[i].id);
	}
	free(r);
	expect_conn_serves(&s);
	rawsock_close(&s);
	expect_serves(g_d.sock);
}

/* ---- clients that do not read, die, or hang up ------------------------------------- */

/* 3000 hellos (~1.4 KiB of reply each) sent and not one reply read until
 * the daemon hung up (POLLRDHUP, which needs no read): the daemon drops
 * the connection once 64 KiB of replies wait in it (beyond what the socket
 * holds) instead of buffering 4 MB. Then what reached the socket is read:
 * fewer than 3000 replies, then EOF. */
static void test_client_never_reads_replies(void **state)
{
	(void)state;
	rawsock s;
	expect_open(&s, g_d.sock);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	for (uint64_t i = 0; i < 3000; i++) {
		proto_request q = {.op = PROTO_OP_HELLO, .id = 1 + i, .version = 1};
		encode(&sb, &q);
	}
	/* the send may fail half-way: the daemon hangs up on us */
	int rc = rawsock_send(&s, sb.data, sb.size, NULL, 0);
	msgpack_sbuffer_destroy(&sb);
	if (rc != 0 && rc != -EPIPE && rc != -ECONNRESET)
		fail_msg("send: %s", strerror(-rc));
	struct pollfd pf = {.fd = s.fd, .events = POLLRDHUP};
	if (poll(&pf, 1, 60000) != 1 || !(pf.revents & (POLLRDHUP | POLLHUP)))
		fail_msg("the daemon did not hang up on a client that reads nothing");
	proto_reply *r = malloc(sizeof(*r));
	assert_non_null(r);
	unsigned got = 0;
	for (;;) {
		rc = rawsock_recv(&s, r, 20000);
		if (rc != 0)
			break;
		got++;
	}
	free(r);
	rawsock_close(&s);
	if (rc != -ECONNRESET)
		fail_msg("after %u replies: %s (want the connection dropped)", got, strerror(-rc));
	if (got >= 3000)
		fail_msg("all 3000 replies came: the slow reader was not dropped");
	expect_serves(g_d.sock);
	assert_true(daemon_proc_log_contains(&g_d, "not reading its replies"));
}

/* Bytes waiting in our receive queue (replies the daemon managed to write). */
static int queued_to_us(int fd)
{
	int n = 0;
	return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* Wait until the queue stops growing for 30 ms (at most 2 s); its size. */
static int queued_settled(int fd)
{
	int last = queued_to_us(fd);
	for (int i = 0; i < 66; i++) {
		usleep(30000);
		int n = queued_to_us(fd);
		if (n == last)
			break;
		last = n;
	}
	return last;
}

/* A client sends hellos (~1.4 KiB of reply each) eight at a time, reading
 * nothing, until its receive queue stops growing: the socket is full and
 * the daemon holds the rest of a reply (well below max_outbound_bytes).
 * Then eight more, and it hangs up (after reading part of a reply, every
 * other round) with replies unread. The daemon learns it in the middle of
 * its replies (the socket's ECONNRESET, or EPIPE from its next write): it
 * drops that connection, gets no SIGPIPE, keeps nothing. */
static void test_close_while_reply_is_written(void **state)
{
	(void)state;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	for (uint64_t i = 0; i < 8; i++) {
		proto_request q = {.op = PROTO_OP_HELLO, .id = 1 + i, .version = 1};
		encode(&sb, &q);
	}
	for (int round = 0; round < 4; round++) {
		rawsock s;
		expect_open(&s, g_d.sock);
		int last = -1, n = 0;
		for (int k = 0; k < 500; k++) {
			assert_int_equal(rawsock_send(&s, sb.data, sb.size, NULL, 0), 0);
			n = queued_settled(s.fd);
			if (n == last)
				break;
			last = n;
		}
		if (n != last)
			fail_msg("round %d: the socket never filled up (%d bytes queued)", round, n);
		assert_int_equal(rawsock_send(&s, sb.data, sb.size, NULL, 0), 0);
		if (round % 2) {
			char b[1000];
			(void)!recv(s.fd, b, sizeof(b), 0); /* part of a reply */
		}
		rawsock_close(&s);
	}
	msgpack_sbuffer_destroy(&sb);
	expect_serves(g_d.sock);
	/* the daemon saw it as its write's error, or as the socket's */
	if (!daemon_proc_log_contains(&g_d, "connection closed (Broken pipe)") &&
	    !daemon_proc_log_contains(&g_d, "connection closed (Connection reset by peer)"))
		fail_msg("no reply write failed: the test did not hang up mid-reply");
}

/* A child registers a region, sends 100 jobs and a ping (its reply proves
 * the daemon read them all) and is killed with SIGKILL while they are
 * queued and running. Others keep being served, correctly; the region and
 * every job go (stats), the daemon settles (teardown); that its descriptors
 * and memory do not grow, test_no_growth_over_repeated_cycles checks. */
static void test_sigkill_client_with_100_jobs(void **state)
{
	(void)state;
	proto_stats before;
	assert_int_equal(rawsock_stats(g_d.sock, &before), 0);
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		vkg_error err;
		vkg_client *c = vkg_connect(g_d.sock, &err);
		if (!c)
			_exit(1);
		jobcase jc[4];
		uint64_t region[4];
		for (int k = 0; k < 4; k++) {
			jobcase_init(&jc[k], 160, 160, 160, JC_ALL, true);
			void *map = vkg_region_create(c, jc[k].size[0], &region[k], &err);
			if (!map || jobcase_fill(&jc[k], &map, (uint64_t)k) != 0)
				_exit(1);
		}
		for (int i = 0; i < 100; i++) {
			vkg_job j = jobcase_job(&jc[i % 4], &region[i % 4]);
			uint64_t h;
			if (vkg_submit(c, &j, &h, &err) != 0)
				_exit(2);
		}
		if (vkg_ping(c, &err) != 0)
			_exit(3);
		if (write(ready[1], "r", 1) != 1)
			_exit(4);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char b;
	if (read(ready[0], &b, 1) != 1) {
		int st;
		waitpid(pid, &st, 0);
		fail_msg("the child failed before the kill (status 0x%x)", st);
	}
	close(ready[0]);
	proto_stats mid;
	assert_int_equal(rawsock_stats(g_d.sock, &mid), 0);
	if (mid.jobs_queued + mid.jobs_running == 0)
		fail_msg("the child's 100 jobs finished before the kill; make them bigger");
	kill(pid, SIGKILL);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	expect_serves(g_d.sock);
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	jobcase jc[2];
	jobcase_init(&jc[0], 33, 65, 17, JC_ALL, true);
	jobcase_init(&jc[1], 64, 31, 33, JC_DX, false);
	assert_int_equal(jobcase_run(c, jc, 2, 2, 4321, NULL), 0);
	vkg_close(c);
	/* every job of the dead client finished or was dropped, its regions went */
	proto_stats after;
	const int64_t until = deadline_now_ms() + 30000;
	do {
		assert_int_equal(rawsock_stats(g_d.sock, &after), 0);
		if (after.regions == before.regions && after.jobs_queued + after.jobs_running == 0 &&
		    after.clients == 1)
			break;
		usleep(10000);
	} while (deadline_now_ms() < until);
	assert_int_equal(after.regions, before.regions);
	assert_int_equal(after.jobs_queued + after.jobs_running, 0);
	assert_int_equal(after.jobs_done + after.jobs_failed,
			 before.jobs_done + before.jobs_failed + 100 + 2);
}

/* ---- connections ------------------------------------------------------------------- */

/* PER_UID connections of our uid are served; each further one gets one
 * `limit` frame (id 0) and is closed, 300 times in a burst; another uid is
 * not affected (when we can be another uid). Closing one makes room. */
static void test_connection_flood_past_per_uid_cap(void **state)
{
	(void)state;
	rawsock held[PER_UID];
	for (int i = 0; i < PER_UID; i++) {
		expect_open(&held[i], g_d.sock);
		expect_conn_serves(&held[i]);
	}
	/* the burst: connect all first, then read each refusal */
	enum { FLOOD = 300 };
	rawsock *extra = calloc(FLOOD, sizeof(*extra));
	assert_non_null(extra);
	for (int i = 0; i < FLOOD; i++)
		expect_open(&extra[i], g_d.sock);
	for (int i = 0; i < FLOOD; i++) {
		proto_reply r;
		int rc = rawsock_recv(&extra[i], &r, 20000);
		if (rc != 0 || r.ok || r.err.code != PROTO_LIMIT || r.id != 0 ||
		    !strstr(r.err.message, "max_connections_per_uid"))
			fail_msg("connection %d past the cap: rc %d %s", PER_UID + i, rc,
				 rc ? "" : r.ok ? "ok" : r.err.message);
		assert_int_equal(rawsock_expect_eof(&extra[i], 10000), 0);
		rawsock_close(&extra[i]);
	}
	free(extra);
	/* those held are still served */
	for (int i = 0; i < PER_UID; i++)
		expect_conn_serves(&held[i]);
	if (geteuid() == 0) {
		/* another uid has its own allowance (let it reach the socket) */
		assert_int_equal(chmod(g_d.dir, 0711), 0);
		assert_int_equal(chmod(g_d.sock, 0666), 0);
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
				_exit(3);
			_exit(rawsock_daemon_serves(g_d.sock) ? 0 : 1);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		chmod(g_d.sock, 0660);
		chmod(g_d.dir, 0700);
		if (!(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3)))
			fail_msg("uid 65534 was not served while uid 0 was at its cap (status 0x%x)", st);
	}
	/* one closed: room for one */
	rawsock_close(&held[0]);
	const int64_t until = deadline_now_ms() + 10000;
	while (!rawsock_daemon_serves(g_d.sock))
		if (deadline_now_ms() > until)
			fail_msg("no room after closing one of %d connections", PER_UID);
	for (int i = 1; i < PER_UID; i++)
		rawsock_close(&held[i]);
	expect_serves(g_d.sock);
}

/* ---- many short-lived clients -------------------------------------------------------- */

/* connect, register, one job, disconnect — 1000 times. Every 100th job's
 * numbers are checked; all of them must succeed. */
static void test_1000_connect_register_job_disconnect(void **state)
{
	(void)state;
	const int rounds = daemon_proc_slow() ? 50 : 1000;
	proto_stats before, after;
	assert_int_equal(rawsock_stats(g_d.sock, &before), 0);
	const int64_t t0 = deadline_now_ms();
	jobcase jc;
	jobcase_init(&jc, 4, 8, 4, JC_ALL, false);
	void *map;
	int fd = shm_create(jc.size[0], true, jc.size[0], &map);
	assert_true(fd >= 0);
	for (int i = 0; i < rounds; i++) {
		rawsock s;
		expect_open(&s, g_d.sock);
		uint64_t region;
		proto_reply r;
		int rc = rawsock_register(&s, 1, fd, jc.size[0], &region, &r);
		if (rc)
			fail_msg("round %d: register: rc %d %s", i, rc, rc == -EREMOTEIO ? r.err.message : "");
		if (i % 100 == 0)
			assert_int_equal(jobcase_fill(&jc, &map, (uint64_t)i), 0);
		proto_request q = jobcase_request(&jc, &region, 2);
		rc = rawsock_call(&s, &q, &r, RAWSOCK_TIMEOUT_MS);
		if (rc || !r.ok)
			fail_msg("round %d: job: rc %d %s", i, rc, rc ? "" : r.err.message);
		if (i % 100 == 0) {
			char why[320];
			if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)))
				fail_msg("round %d: %s", i, why);
		}
		rawsock_close(&s);
	}
	close(fd);
	munmap(map, jc.size[0]);
	jobcase_free(&jc);
	assert_int_equal(rawsock_stats(g_d.sock, &after), 0);
	assert_int_equal(after.jobs_done, before.jobs_done + (uint64_t)rounds);
	printf("%d cycles in %lld ms\n", rounds, (long long)(deadline_now_ms() - t0));
	expect_serves(g_d.sock);
}

/* ---- hello reports every limit ---------------------------------------------------------- */

static void test_hello_reports_every_limit(void **state)
{
	(void)state;
	proto_hello h;
	expect_hello(g_d.sock, &h);
	const proto_limits *l = &h.limits;
	assert_int_equal(l->max_connections_per_uid, PER_UID);
	assert_int_equal(l->max_outbound_bytes, OUTBOUND);
	assert_int_equal(l->max_connections, 2048);
	/* derived from the host's memory (test_regions checks how) */
	assert_true(l->max_total_region_bytes >= 1u << 20);
	assert_int_equal(l->max_region_bytes_per_uid, l->max_total_region_bytes / 2);
	assert_int_equal(l->max_fds_per_message, 8);
	assert_int_equal(l->max_fds_held, 16);
	assert_int_equal(l->max_frame, 65536);
}

/* ---- setup ------------------------------------------------------------------------------ */

/* After each test: the shared daemon settles before the next one. */
static int settled(void **state)
{
	(void)state;
	return group_daemon_settle(&g_d);
}

/* The group's tests again and again, the daemon restarted without the
 * validation layer: descriptors and memory stop growing once warm
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
	static const char *const args[] = {"--max-connections-per-uid", "12",
					   "--max-outbound-bytes", "65536", NULL};
	/* warm up: a few of each kind of work */
	jobcase jc[3];
	jobcase_init(&jc[0], 33, 65, 17, JC_ALL, true);
	jobcase_init(&jc[1], 160, 160, 160, JC_ALL, true);
	jobcase_init(&jc[2], 4, 8, 4, JC_ALL, false);
	int rc = group_daemon_start(&g_d, args, jc, 3);
	for (int i = 0; i < 3; i++)
		jobcase_free(&jc[i]);
	return rc;
}

static int group_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d);
}

#define T(f) cmocka_unit_test_teardown(f, settled)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_hello_reports_every_limit),
		T(test_region_seal_seal_without_shrink),
		T(test_region_socket_directory_devnull),
		T(test_dims_whose_product_overflows),
		T(test_non_integer_dims),
		T(test_descriptors_too_many_with_one_frame),
		T(test_descriptors_with_non_register_frames),
		T(test_frame_length_ffffffff),
		T(test_frame_10000_nested_arrays),
		T(test_frame_truncated_str_bin_ext),
		T(test_frame_bytewise_merged_with_next),
		T(test_client_never_reads_replies),
		T(test_close_while_reply_is_written),
		T(test_sigkill_client_with_100_jobs),
		T(test_connection_flood_past_per_uid_cap),
		T(test_1000_connect_register_job_disconnect),
		T(test_no_growth_over_repeated_cycles),
	};
	g_tests = tests;
	g_ntests = sizeof(tests) / sizeof(tests[0]);
	int rc = cmocka_run_group_tests_name("hostile", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
