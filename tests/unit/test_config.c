/* tests/unit/test_config.c — the registered-bytes limits (daemon/config.h):
 * what `auto` comes to for a given host and device, and the flags that
 * set them; the streamed-job options' values; the environment
 * (config_read_env): each variable's switch on exactly the values the
 * daemon acts on; the device-tensor limits (config_device_budget). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void device_budget(const config *c, uint64_t heap, uint64_t want_total, uint64_t want_uid)
{
	uint64_t total = 0, uid = 0;
	config_device_budget(c, heap, &total, &uid);
	assert_int_equal(total, want_total);
	assert_int_equal(uid, want_uid);
}

/* Device tensors: --max-device-bytes, --max-device-bytes-per-uid (auto:
 * half of the device-local heap, one uid half of that), --max-tensors;
 * the same keys in a config file. */
static void test_device_tensor_limits(void **state)
{
	(void)state;
	config c;
	config_defaults(&c);
	assert_int_equal(c.limits.max_tensors, CONFIG_MAX_TENSORS_DEFAULT);
	device_budget(&c, 80 * GiB, 40 * GiB, 20 * GiB);
	device_budget(&c, 3 * GiB + 12345, 1536 * MiB, 768 * MiB); /* MiB-rounded */
	device_budget(&c, 0, 1 * GiB, 512 * MiB);                  /* heap unknown */
	device_budget(&c, 1024, 1 * MiB, 512 * 1024);              /* at least a MiB */
	assert_int_equal(parse2(&c, "--max-device-bytes", "1048576"), 0);
	device_budget(&c, 80 * GiB, 1 * MiB, 512 * 1024);
	assert_int_equal(parse2(&c, "--max-device-bytes-per-uid", "65536"), 0);
	device_budget(&c, 80 * GiB, 1 * MiB, 65536);
	assert_int_equal(parse2(&c, "--max-device-bytes", "auto"), 0);
	assert_int_equal(parse2(&c, "--max-device-bytes-per-uid", "auto"), 0);
	device_budget(&c, 80 * GiB, 40 * GiB, 20 * GiB);
	assert_int_equal(parse2(&c, "--max-device-bytes", "100"), -1);
	assert_int_equal(parse2(&c, "--max-tensors", "0"), -1);
	assert_int_equal(parse2(&c, "--max-tensors", "12"), 0);
	assert_int_equal(c.limits.max_tensors, 12);
	/* as config keys */
	char path[] = "/tmp/vkgrad-test-config-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	fputs("max-tensors = 7\nmax-device-bytes = 2097152\nmax-device-bytes-per-uid = 8192\n", f);
	fclose(f);
	config_defaults(&c);
	assert_int_equal(parse2(&c, "--config", path), 0);
	unlink(path);
	assert_int_equal(c.limits.max_tensors, 7);
	device_budget(&c, 80 * GiB, 2 * MiB, 8192);
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

/* An N|auto|off byte count (parse_auto): auto by default; a number, off
 * and auto taken; 0 and a suffix refused, the setting unchanged. */
static void expect_bytes_auto_off(const char *opt, size_t field)
{
	config c;
	config_defaults(&c);
	uint64_t *v = (uint64_t *)((char *)&c + field);
	assert_int_equal(*v, CONFIG_AUTO);
	assert_int_equal(parse2(&c, opt, "65536"), 0);
	assert_int_equal(*v, 65536);
	assert_int_equal(parse2(&c, opt, "off"), 0);
	assert_int_equal(*v, CONFIG_OFF);
	assert_int_equal(parse2(&c, opt, "auto"), 0);
	assert_int_equal(*v, CONFIG_AUTO);
	assert_int_equal(parse2(&c, opt, "0"), -1);
	assert_int_equal(parse2(&c, opt, "1M"), -1);
	assert_int_equal(*v, CONFIG_AUTO);
}

/* --copy-piece-bytes and --stream-shared-min-bytes N|auto|off */
static void test_copy_piece_and_shared_stream_options(void **state)
{
	(void)state;
	expect_bytes_auto_off("--copy-piece-bytes", offsetof(config, copy_piece_bytes));
	expect_bytes_auto_off("--stream-shared-min-bytes", offsetof(config, stream_shared_min_bytes));
}

/* --submit-thread on|off: on by default; anything else refused, the
 * setting unchanged */
static void test_submit_thread_option(void **state)
{
	(void)state;
	config c;
	config_defaults(&c);
	assert_true(c.submit_thread);
	assert_int_equal(parse2(&c, "--submit-thread", "off"), 0);
	assert_false(c.submit_thread);
	assert_int_equal(parse2(&c, "--submit-thread", "1"), -1);
	assert_int_equal(parse2(&c, "--submit-thread", "onn"), -1);
	assert_int_equal(parse2(&c, "--submit-thread", ""), -1);
	assert_false(c.submit_thread);
	assert_int_equal(parse2(&c, "--submit-thread", "on"), 0);
	assert_true(c.submit_thread);
}

/* every variable config_read_env reads */
static const char *const env_names[] = {
	"XDG_RUNTIME_DIR", "CACHE_DIRECTORY", "XDG_CACHE_HOME", "HOME", "JOURNAL_STREAM", "NOTIFY_SOCKET",
	"VKGRAD_VALIDATION", "VKGRAD_KEEP_DRIVERS", "VKGRAD_NO_TRANSFER_QUEUE", "VKGRAD_CPU_IMPORT",
	"VKGRAD_FAULT_SHARED_16K", "VKGRAD_FAULT_NO_STORAGE16", "VKGRAD_NO_COOPMAT", "VKGRAD_NO_COOPMAT_KHR",
	"VKGRAD_NO_COOPMAT_NV2", "VKGRAD_NO_CALIBRATION", "VKGRAD_CMK_TILE", "VKGRAD_CMK_TILE_SMALL",
	"VKGRAD_CMK_SMALL_BELOW", "VKGRAD_T128_TILE", "VKGRAD_NV2_TILE", "VKGRAD_STREAM_SUMS",
	"VKGRAD_STREAM_TIMESTAMPS", "VKGRAD_FAULT_INJECT",
};

static void env_clear(void)
{
	for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
		assert_int_equal(unsetenv(env_names[i]), 0);
}

/* config_read_env with only `name` set to `value` */
static config_env env_with(const char *name, const char *value)
{
	env_clear();
	assert_int_equal(setenv(name, value, 1), 0);
	config_env e;
	config_read_env(&e);
	return e;
}

static void test_env(void **state)
{
	(void)state;
	env_clear();
	config_env e, zero;
	memset(&zero, 0, sizeof(zero));
	config_read_env(&e);
	assert_memory_equal(&e, &zero, sizeof(e)); /* nothing set: every switch off, every string NULL */
	/* switches that are on when set, whatever the value */
	assert_true(env_with("JOURNAL_STREAM", "8:1234").journal_stream);
	assert_true(env_with("NOTIFY_SOCKET", "/run/systemd/notify").notify_socket);
	assert_true(env_with("VKGRAD_FAULT_SHARED_16K", "").fault_shared_16k);
	assert_true(env_with("VKGRAD_FAULT_NO_STORAGE16", "0").fault_no_storage16);
	assert_true(env_with("VKGRAD_NO_COOPMAT", "1").no_coopmat);
	assert_true(env_with("VKGRAD_NO_COOPMAT_KHR", "1").no_coopmat_khr);
	assert_true(env_with("VKGRAD_NO_COOPMAT_NV2", "1").no_coopmat_nv2);
	assert_true(env_with("VKGRAD_NO_CALIBRATION", "1").no_calibration);
	/* exactly "1" */
	assert_true(env_with("VKGRAD_VALIDATION", "1").validation);
	assert_false(env_with("VKGRAD_VALIDATION", "0").validation);
	assert_false(env_with("VKGRAD_VALIDATION", "yes").validation);
	assert_true(env_with("VKGRAD_CPU_IMPORT", "1").cpu_import);
	assert_false(env_with("VKGRAD_CPU_IMPORT", "true").cpu_import);
	/* set, not empty, not "0" */
	assert_true(env_with("VKGRAD_NO_TRANSFER_QUEUE", "1").no_transfer_queue);
	assert_true(env_with("VKGRAD_NO_TRANSFER_QUEUE", "yes").no_transfer_queue);
	assert_false(env_with("VKGRAD_NO_TRANSFER_QUEUE", "0").no_transfer_queue);
	assert_false(env_with("VKGRAD_NO_TRANSFER_QUEUE", "").no_transfer_queue);
	/* exactly "0" turns these off */
	assert_true(env_with("VKGRAD_STREAM_SUMS", "0").stream_no_sums);
	assert_false(env_with("VKGRAD_STREAM_SUMS", "1").stream_no_sums);
	assert_true(env_with("VKGRAD_STREAM_TIMESTAMPS", "0").stream_no_timestamps);
	assert_false(env_with("VKGRAD_STREAM_TIMESTAMPS", "").stream_no_timestamps);
	/* values, as they are */
	assert_string_equal(env_with("VKGRAD_FAULT_INJECT", "submit:3,unsealed").fault_inject, "submit:3,unsealed");
	assert_string_equal(env_with("VKGRAD_KEEP_DRIVERS", "a.so:b.so").keep_drivers, "a.so:b.so");
	assert_string_equal(env_with("VKGRAD_CMK_TILE", "2x2x64x64x32x1").cmk_tile, "2x2x64x64x32x1");
	assert_string_equal(env_with("VKGRAD_CMK_TILE_SMALL", "4x4x32x32x32x1").cmk_tile_small, "4x4x32x32x32x1");
	assert_string_equal(env_with("VKGRAD_CMK_SMALL_BELOW", "0").cmk_small_below, "0");
	assert_string_equal(env_with("VKGRAD_T128_TILE", "fixed").t128_tile, "fixed");
	assert_string_equal(env_with("VKGRAD_NV2_TILE", "x").nv2_tile, "x");
	/* config_defaults reads it too: the socket's and the cache's defaults */
	env_clear();
	assert_int_equal(setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1), 0);
	assert_int_equal(setenv("HOME", "/home/u", 1), 0);
	assert_int_equal(setenv("VKGRAD_STREAM_SUMS", "0", 1), 0);
	config c;
	config_defaults(&c);
	assert_string_equal(c.socket_path, "/run/user/1000/vkgrad.sock");
	assert_string_equal(c.cache_dir, "/home/u/.cache/vkgrad");
	assert_string_equal(c.env.home, "/home/u");
	assert_true(c.env.stream_no_sums);
	env_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_budget),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_device_tensor_limits),
		cmocka_unit_test(test_stream_options),
		cmocka_unit_test(test_copy_piece_and_shared_stream_options),
		cmocka_unit_test(test_submit_thread_option),
		cmocka_unit_test(test_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
