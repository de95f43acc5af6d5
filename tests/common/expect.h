/* tests/common/expect.h — cmocka checks shared by the integration tests:
 * each fails the running test with a message saying what went wrong. */
#ifndef VKG_TEST_EXPECT_H
#define VKG_TEST_EXPECT_H

#include "rawsock.h"
#include "vkgrad.h"

/* Connect s to the daemon at path. */
void expect_open(rawsock *s, const char *path);
/* A new connection to path answers ping (the daemon still serves). */
void expect_serves(const char *path);
/* The connection s itself still answers ping (ids from 900001 up). */
void expect_conn_serves(rawsock *s);
/* A 4x4x4 dW job of `dtype` with `variant` on a fresh 4096-byte region is
 * refused with `code`, its message containing `needle` and `needle2` (NULL:
 * not checked), and no byte of the region is written. */
void expect_refused_untouched(vkg_client *c, const char *dtype, const char *variant,
			      const char *code, const char *needle, const char *needle2);

#endif
