/* tests/common/expect.c — see expect.h. */
#include "expect.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deadline.h"

void expect_error_v(rawsock *s, uint64_t id, proto_code code, const char *const *needles)
{
	proto_reply r;
	int rc = rawsock_recv(s, &r, RAWSOCK_TIMEOUT_MS);
	if (rc)
		fail_msg("no reply (want %s): %s", proto_code_name(code), strerror(-rc));
	if (r.ok)
		fail_msg("request %llu succeeded; want error %s", (unsigned long long)id,
			 proto_code_name(code));
	if (r.err.code != code || r.id != id)
		fail_msg("got error %s id %llu (\"%s\"); want %s id %llu",
			 proto_code_name(r.err.code), (unsigned long long)r.id, r.err.message,
			 proto_code_name(code), (unsigned long long)id);
	for (unsigned i = 0; needles && needles[i]; i++)
		if (!strstr(r.err.message, needles[i]))
			fail_msg("%s message \"%s\" does not mention \"%s\"", proto_code_name(code),
				 r.err.message, needles[i]);
}

void expect_bad_frame(rawsock *s, const char *path, const char *needle)
{
	expect_error(s, 0, PROTO_BAD_FRAME, needle);
	int rc = rawsock_expect_eof(s, 10000);
	if (rc)
		fail_msg("after bad_frame the connection was not closed (%s)",
			 rc == -EPROTO ? "more data came" : strerror(-rc));
	expect_serves(path);
}

void expect_open(rawsock *s, const char *path)
{
	int rc = rawsock_open(s, path);
	if (rc)
		fail_msg("connect %s: %s", path, strerror(-rc));
}

vkg_client *expect_client(const char *path)
{
	vkg_error err;
	vkg_client *c = vkg_connect(path, &err);
	if (!c)
		fail_msg("connect %s: %s: %s", path, err.code, err.message);
	return c;
}

proto_stats expect_settled(const char *path, uint64_t regions, uint64_t clients)
{
	proto_stats st;
	const int64_t until = deadline_now_ms() + deadline_scaled_ms(30000);
	for (;;) {
		assert_int_equal(rawsock_stats(path, &st), 0);
		if (st.regions == regions && st.clients == clients)
			return st;
		if (deadline_now_ms() > until)
			fail_msg("stats: %llu regions, %llu clients; want %llu and %llu",
				 (unsigned long long)st.regions, (unsigned long long)st.clients,
				 (unsigned long long)regions, (unsigned long long)clients);
		deadline_sleep_ms(10);
	}
}

void expect_validation_clean(const daemon_proc *d, uint64_t before, const char *what)
{
	uint64_t n = 0;
	assert_int_equal(daemon_proc_validation_count(d, &n), 0);
	if (n != before) {
		daemon_proc_print_validation_errors(d, 3);
		fail_msg("%s: %llu Vulkan validation error(s) (the first above)", what,
			 (unsigned long long)(n - before));
	}
}

void expect_serves(const char *path)
{
	if (!rawsock_daemon_serves(path))
		fail_msg("the daemon no longer answers ping on a new connection");
}

void expect_hello(const char *path, proto_hello *out)
{
	rawsock s;
	expect_open(&s, path);
	proto_request q = {.op = PROTO_OP_HELLO, .id = 1, .version = 1};
	proto_reply *r = malloc(sizeof(*r)); /* large: stats' histograms */
	if (!r) {
		rawsock_close(&s);
		fail_msg("hello: out of memory");
	}
	int rc = rawsock_call(&s, &q, r, RAWSOCK_TIMEOUT_MS);
	rawsock_close(&s);
	bool ok = rc == 0 && r->ok;
	char why[sizeof(r->err.message) + 32];
	snprintf(why, sizeof(why), "%s %s", rc ? strerror(-rc) : proto_code_name(r->err.code),
		 rc ? "" : r->err.message);
	if (ok)
		*out = r->hello;
	free(r);
	if (!ok)
		fail_msg("hello: %s (want an ok reply)", why);
}

void expect_conn_serves(rawsock *s)
{
	static uint64_t id = 900000;
	proto_request q = {.op = PROTO_OP_PING, .id = ++id};
	proto_reply r;
	int rc = rawsock_call(s, &q, &r, RAWSOCK_TIMEOUT_MS);
	if (rc || !r.ok)
		fail_msg("the connection stopped answering ping (rc %d)", rc);
}

void expect_refused_untouched(vkg_client *c, const char *dtype, const char *variant,
			      const char *code, const char *needle, const char *needle2)
{
	vkg_error err;
	uint64_t reg;
	void *m = vkg_region_create(c, 4096, &reg, &err);
	if (!m)
		fail_msg("region: %s: %s", err.code, err.message);
	vkg_job j = vkg_job_init();
	j.dtype = dtype;
	j.variant = variant;
	j.batch = j.in = j.out = 4;
	j.x = (vkg_tensor){reg, 0};
	j.dy = (vkg_tensor){reg, 256};
	j.dw = (vkg_tensor){reg, 512};
	memset(m, 0x5a, 4096);
	vkg_result r;
	assert_int_equal(vkg_linear_backward(c, &j, &r, &err), VKG_EREMOTE);
	assert_string_equal(err.code, code);
	if (!strstr(err.message, needle) || (needle2 && !strstr(err.message, needle2)))
		fail_msg("message lacks '%s'%s%s: %s", needle, needle2 ? " or " : "",
			 needle2 ? needle2 : "", err.message);
	for (int i = 0; i < 4096; i++)
		if (((uint8_t *)m)[i] != 0x5a)
			fail_msg("byte %d of the region written by a refused job", i);
	assert_int_equal(vkg_region_destroy(c, reg, m, 4096, &err), 0);
}

bool expect_hello_lists(const proto_hello *h, const char *variant, proto_dtype dt)
{
	if (strcmp(variant, "auto") == 0)
		return true;
	for (unsigned i = 0; i < h->n_kernels; i++)
		if (strcmp(h->kernels[i].variant, variant) == 0 &&
		    strcmp(h->kernels[i].dtype, proto_dtype_name(dt)) == 0)
			return true;
	return false;
}
