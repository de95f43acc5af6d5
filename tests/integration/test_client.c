/* tests/integration/test_client.c — libvkgrad's calls for bindings, against
 * a real daemon: vkg_region_register_fd (memory the caller maps itself, a
 * job on it checked against the float64 reference, unregistering without
 * unmapping, the daemon's refusals), vkg_call_raw (any op, the reply body
 * back, the daemon's error codes, bad arguments refused locally), and the
 * code of a connection the daemon closed after saying why (bad_frame
 * rather than "io"). After every refusal the same connection still serves
 * where the daemon did not close it, and a new one does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <msgpack.h>

#include "daemon_proc.h"
#include "expect.h"
#include "group.h"
#include "msg.h"
#include "ref.h"
#include "shm.h"
#include "vkgrad.h"

static daemon_proc g_d;

static void assert_serves(vkg_client *c)
{
	vkg_error err;
	if (c && vkg_ping(c, &err) != 0)
		fail_msg("ping on the same connection: %s: %s", err.code, err.message);
	vkg_client *c2 = expect_client(g_d.sock);
	if (vkg_ping(c2, &err) != 0)
		fail_msg("ping on a new connection: %s: %s", err.code, err.message);
	vkg_close(c2);
}

/* ---- vkg_region_register_fd ---------------------------------------------- */

static void test_register_fd_job_and_unregister_keeps_mapping(void **state)
{
	(void)state;
	enum { B = 37, I = 19, O = 23 };
	const size_t xo = 0, dyo = 4 * B * I, dwo = dyo + 4 * B * O, size = dwo + 4 * O * I;
	void *map = NULL;
	int fd = shm_create(size, true, size, &map);
	assert_true(fd >= 0);
	float *x = (float *)((char *)map + xo), *dy = (float *)((char *)map + dyo);
	float *dw = (float *)((char *)map + dwo);
	for (int i = 0; i < B * I; i++)
		x[i] = (float)((i * 37 % 101) - 50) / 50.0f;
	for (int i = 0; i < B * O; i++)
		dy[i] = (float)((i * 53 % 97) - 48) / 48.0f;

	vkg_client *c = expect_client(g_d.sock);
	vkg_error err;
	uint64_t region = 0;
	if (vkg_region_register_fd(c, fd, size, &region, &err) != 0)
		fail_msg("register_fd: %s: %s", err.code, err.message);
	assert_true(region >= 1);
	close(fd); /* the caller's descriptor: the daemon has its own */
	vkg_job j = vkg_job_init();
	j.batch = B, j.in = I, j.out = O;
	j.x = (vkg_tensor){region, xo};
	j.dy = (vkg_tensor){region, dyo};
	j.dw = (vkg_tensor){region, dwo};
	if (vkg_linear_backward(c, &j, NULL, &err) != 0)
		fail_msg("job: %s: %s", err.code, err.message);
	double want[O * I];
	vkg_ref_linear_backward(B, I, O, x, dy, NULL, want, NULL, NULL);
	const double e = vkg_ref_max_rel_err(dw, want, NULL, O * I);
	printf("dw max rel err %.2g (tolerance 1e-4)\n", e);
	assert_true(e <= 1e-4);
	/* ptr NULL: unregister only; the mapping stays the caller's */
	assert_int_equal(vkg_region_destroy(c, region, NULL, 0, &err), 0);
	dw[0] = 42.0f;
	/* the region is gone on the daemon's side */
	assert_int_equal(vkg_linear_backward(c, &j, NULL, &err), VKG_EREMOTE);
	assert_string_equal(err.code, "bad_region");
	vkg_close(c);
	/* vkg_close did not unmap it either */
	assert_true(dw[0] == 42.0f);
	munmap(map, size);
	assert_serves(NULL);
}

static void test_register_fd_refusals(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	vkg_error err;
	uint64_t region;
	/* an unsealed memfd: the daemon refuses it */
	void *map = NULL;
	int fd = shm_create(4096, false, 4096, &map);
	assert_true(fd >= 0);
	assert_int_equal(vkg_region_register_fd(c, fd, 4096, &region, &err), VKG_EREMOTE);
	assert_string_equal(err.code, "bad_region");
	close(fd);
	munmap(map, 4096);
	/* a size past the file's: refused too */
	fd = shm_create(4096, true, 4096, &map);
	assert_true(fd >= 0);
	assert_int_equal(vkg_region_register_fd(c, fd, 8192, &region, &err), VKG_EREMOTE);
	assert_string_equal(err.code, "bad_region");
	close(fd);
	munmap(map, 4096);
	/* refused locally: no descriptor, no size */
	assert_int_equal(vkg_region_register_fd(c, -1, 4096, &region, &err), -EBADF);
	assert_string_equal(err.code, "io");
	assert_int_equal(vkg_region_register_fd(c, 0, 0, &region, &err), -EINVAL);
	assert_serves(c);
	vkg_close(c);
}

/* ---- vkg_call_raw ------------------------------------------------------------ */

/* {key: value} with one unsigned value, packed. */
static void pack_u(msgpack_sbuffer *sb, const char *key, uint64_t v)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str(&pk, strlen(key));
	msgpack_pack_str_body(&pk, key, strlen(key));
	msgpack_pack_uint64(&pk, v);
}

static void test_call_raw_ok_and_remote_errors(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	vkg_error err;
	void *body = NULL;
	size_t len = 0;
	static proto_reply r;
	proto_err perr;
	/* hello with a key: the whole reply comes back */
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	pack_u(&sb, "version", 1);
	assert_int_equal(vkg_call_raw(c, "hello", sb.data, sb.size, &body, &len, &err), 0);
	msgpack_sbuffer_destroy(&sb);
	assert_int_equal(proto_reply_decode(body, len, &r, &perr), 0);
	assert_true(r.ok);
	assert_int_equal(r.hello.version, 1);
	assert_true(strncmp(r.hello.server, "vkgradd ", 8) == 0);
	free(body);
	/* stats: histograms included */
	assert_int_equal(vkg_call_raw(c, "stats", NULL, 0, &body, &len, &err), 0);
	assert_int_equal(proto_reply_decode(body, len, &r, &perr), 0);
	assert_int_equal(r.stats.n_hist, 3);
	assert_string_equal(r.stats.hist[0].name, "job_latency");
	free(body);
	/* the daemon's errors: code and message, and the body too */
	assert_int_equal(vkg_call_raw(c, "frobnicate", NULL, 0, &body, &len, &err), VKG_EREMOTE);
	assert_string_equal(err.code, "unknown_op");
	assert_non_null(strstr(err.message, "frobnicate"));
	assert_int_equal(proto_reply_decode(body, len, &r, &perr), 0);
	assert_false(r.ok);
	assert_int_equal(r.err.code, PROTO_UNKNOWN_OP);
	free(body);
	msgpack_sbuffer_init(&sb);
	pack_u(&sb, "version", 2);
	assert_int_equal(vkg_call_raw(c, "hello", sb.data, sb.size, &body, &len, &err), VKG_EREMOTE);
	msgpack_sbuffer_destroy(&sb);
	assert_string_equal(err.code, "unsupported");
	free(body);
	msgpack_sbuffer_init(&sb);
	pack_u(&sb, "region", 99);
	assert_int_equal(vkg_call_raw(c, "unregister", sb.data, sb.size, &body, &len, &err),
			 VKG_EREMOTE);
	msgpack_sbuffer_destroy(&sb);
	assert_string_equal(err.code, "bad_region");
	free(body);
	assert_serves(c);
	vkg_close(c);
}

static void test_call_raw_bad_arguments_stay_local(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	vkg_error err;
	void *body = (void *)1;
	size_t len = 1;
	const uint8_t array[] = {0x91, 0x01};    /* [1]: not a map */
	const uint8_t truncated[] = {0x81, 0xa1}; /* {"?...: cut short */
	assert_int_equal(vkg_call_raw(c, "ping", array, sizeof(array), &body, &len, &err), -EINVAL);
	assert_null(body);
	assert_int_equal(len, 0);
	assert_string_equal(err.code, "io");
	assert_non_null(strstr(err.message, "map"));
	assert_int_equal(vkg_call_raw(c, "ping", truncated, sizeof(truncated), &body, &len, &err),
			 -EINVAL);
	assert_int_equal(vkg_call_raw(c, "", NULL, 0, &body, &len, &err), -EINVAL);
	assert_serves(c);
	vkg_close(c);
}

/* A frame over max_frame: the daemon answers id 0 with bad_frame and
 * closes; the library reports that code (not "io"), on this call and the
 * next. */
static void test_closed_after_bad_frame_reports_its_code(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	vkg_error err;
	void *body = NULL;
	size_t len = 0;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	msgpack_pack_str(&pk, 3);
	msgpack_pack_str_body(&pk, "pad", 3);
	static char pad[70000];
	msgpack_pack_bin(&pk, sizeof(pad));
	msgpack_pack_bin_body(&pk, pad, sizeof(pad));
	int rc = vkg_call_raw(c, "ping", sb.data, sb.size, &body, &len, &err);
	msgpack_sbuffer_destroy(&sb);
	printf("rc %d, %s: %s\n", rc, err.code, err.message);
	assert_int_equal(rc, -ECONNRESET);
	assert_string_equal(err.code, "bad_frame");
	assert_non_null(strstr(err.message, "max_frame"));
	assert_null(body);
	assert_int_equal(vkg_ping(c, &err), -ECONNRESET);
	assert_string_equal(err.code, "bad_frame");
	vkg_close(c);
	assert_serves(NULL);
}

static void test_no_validation_errors(void **state)
{
	(void)state;
	expect_validation_clean(&g_d, 0, "the shared daemon");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_register_fd_job_and_unregister_keeps_mapping),
		cmocka_unit_test(test_register_fd_refusals),
		cmocka_unit_test(test_call_raw_ok_and_remote_errors),
		cmocka_unit_test(test_call_raw_bad_arguments_stay_local),
		cmocka_unit_test(test_closed_after_bad_frame_reports_its_code),
		cmocka_unit_test(test_no_validation_errors),
	};
	return group_run_plain("client", tests, &g_d);
}
