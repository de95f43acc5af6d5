/* tests/common/expect.h — cmocka checks shared by the integration tests:
 * each fails the running test with a message saying what went wrong. */
#ifndef VKG_TEST_EXPECT_H
#define VKG_TEST_EXPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon_proc.h"
#include "rawsock.h"
#include "vkgrad.h"

/* Wait for the next reply on s: an error with `code`, id `id`, whose
 * message contains every one of the NULL-terminated needles (NULL: none). */
void expect_error_v(rawsock *s, uint64_t id, proto_code code, const char *const *needles);
/* The same with the needles as arguments: expect_error(s, id, code, "a", "b"). */
#define expect_error(s, id, code, ...) \
	expect_error_v((s), (id), (code), (const char *const[]){__VA_ARGS__, NULL})
/* After bad_frame: the error with id 0 whose message contains needle, then
 * the daemon closes s; a new connection to path still gets ping answered. */
void expect_bad_frame(rawsock *s, const char *path, const char *needle);
/* Connect s to the daemon at path. */
void expect_open(rawsock *s, const char *path);
/* A libvkgrad client of the daemon at path (vkg_connect), or fail. */
vkg_client *expect_client(const char *path);
/* Wait up to 30 s until stats on path shows `regions` live regions and
 * `clients` connections (the stats connection counts itself); returns the
 * stats, or fails saying what it shows. */
proto_stats expect_settled(const char *path, uint64_t regions, uint64_t clients);
/* No Vulkan validation error since `before` (d's stats count); otherwise
 * print the first ones from d's log and fail, naming `what`. */
void expect_validation_clean(const daemon_proc *d, uint64_t before, const char *what);
/* A new connection to path answers ping (the daemon still serves). */
void expect_serves(const char *path);
/* Say hello (version 1, id 1) on a new connection to path: the reply must
 * come and be ok; its hello into out. */
void expect_hello(const char *path, proto_hello *out);
/* Does hello h list a kernel of `variant` for dtype dt? ("auto": always) */
bool expect_hello_lists(const proto_hello *h, const char *variant, proto_dtype dt);
/* The connection s itself still answers ping (ids from 900001 up). */
void expect_conn_serves(rawsock *s);
/* A 4x4x4 dW job of `dtype` with `variant` on a fresh 4096-byte region is
 * refused with `code`, its message containing `needle` and `needle2` (NULL:
 * not checked), and no byte of the region is written. */
void expect_refused_untouched(vkg_client *c, const char *dtype, const char *variant,
			      const char *code, const char *needle, const char *needle2);

#endif
