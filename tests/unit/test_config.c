/* tests/unit/test_config.c — the registered-bytes limits (daemon/config.h):
 * what `auto` comes to for a given host and device, and the flags that
 * set them; the streamed-job options' values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "config.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

static void budget(const config *c, uint64_t ram, uint64_t heap, uint64_t want_total,
		   uint64_t want_uid)
{
	uint64_t total = 0, uid = 0;
	config_region_budget(c, ram, heap, &total, &uid);
	assert_int_equal(total, want_total);
	assert_int_equal(uid, want_uid);
}

static void test_auto_budget(void **state)
{
	(void)state;
	config c;
	config_defaults(&c);
	/* half of the host's memory, one uid half of that */
	budget(&c, 24 * GiB, 0, 12 * GiB, 6 * GiB);
	/* the staging heap is smaller: it bounds the total */
	budget(&c, 2048 * GiB, 139 * GiB, 139 * GiB, 139 * GiB / 2);
	budget(&c, 64 * GiB, 8 * GiB, 8 * GiB, 4 * GiB);
	/* rounded down to MiB */
	budget(&c, 3 * GiB + 12345, 0, 1536 * MiB, 768 * MiB);
	/* host memory unknown: 64 GiB, bounded by the heap all the same */
	budget(&c, 0, 0, 64 * GiB, 32 * GiB);
	budget(&c, 0, 16 * GiB, 16 * GiB, 8 * GiB);
	/* a tiny host still gets a MiB */
	budget(&c, 1 * MiB, 0, 1 * MiB, 512 * 1024);
}

static void test_flags(void **state)
{
	(void)state;
	config c;
	config_defaults(&c);
	char a0[] = "vkgradd", a1[] = "--max-total-region-bytes", a2[] = "1048576",
	     a3[] = "--max-region-bytes-per-uid", a4[] = "65536";
	char *argv[] = {a0, a1, a2, a3, a4, NULL};
	assert_int_equal(config_parse_args(&c, 5, argv), 0);
	/* explicit values win over host and device */
	budget(&c, 24 * GiB, 8 * GiB, 1 * MiB, 65536);
	/* only the total set: one uid gets half of it */
	config_defaults(&c);
	char *argv2[] = {a0, a1, a2, NULL};
	assert_int_equal(config_parse_args(&c, 3, argv2), 0);
	budget(&c, 24 * GiB, 0, 1 * MiB, 512 * 1024);
	/* `auto` spelled out */
	char b2[] = "auto", b4[] = "auto";
	char *argv3[] = {a0, a1, b2, a3, b4, NULL};
	assert_int_equal(config_parse_args(&c, 5, argv3), 0);
	budget(&c, 24 * GiB, 0, 12 * GiB, 6 * GiB);
	/* below the smallest region: refused */
	char c4[] = "100";
	char *argv4[] = {a0, a3, c4, NULL};
	assert_int_equal(config_parse_args(&c, 3, argv4), -1);
}

/* --stream-chunk-bytes N|auto|off and --stream-min-bytes N|auto */
static int parse2(config *c, const char *opt, const char *val)
{
	char a0[] = "vkgradd", a1[64], a2[64];
	snprintf(a1, sizeof(a1), "%s", opt);
	snprintf(a2, sizeof(a2), "%s", val);
	char *argv[] = {a0, a1, a2, NULL};
	return config_parse_args(c, 3, argv);
}

static void test_stream_options(void **state)
{
	(void)state;
	config c;
	config_defaults(&c);
	assert_int_equal(c.stream_chunk_bytes, CONFIG_AUTO);
	assert_int_equal(c.stream_min_bytes, CONFIG_AUTO);
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "8388608"), 0);
	assert_int_equal(c.stream_chunk_bytes, 8388608);
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "off"), 0);
	assert_int_equal(c.stream_chunk_bytes, CONFIG_OFF);
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "auto"), 0);
	assert_int_equal(c.stream_chunk_bytes, CONFIG_AUTO);
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "1"), 0);
	assert_int_equal(c.stream_chunk_bytes, 1);
	assert_int_equal(parse2(&c, "--stream-min-bytes", "0x100000"), 0);
	assert_int_equal(c.stream_min_bytes, 1 * MiB);
	/* refused, the setting unchanged: 0, beyond 2^40, junk, off for the threshold */
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "0"), -1);
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "1099511627777"), -1);
	assert_int_equal(parse2(&c, "--stream-chunk-bytes", "16M"), -1);
	assert_int_equal(c.stream_chunk_bytes, 1);
	assert_int_equal(parse2(&c, "--stream-min-bytes", "off"), -1);
	assert_int_equal(c.stream_min_bytes, 1 * MiB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_budget),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_stream_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
