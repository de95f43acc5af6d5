/* tests/unit/test_peak_copy.c — bench/peak_copy.c and
 * shaders/bench_peak_copy.comp on the default device (lavapipe in CI), with
 * the validation layer: both ways of the copy line copy every byte and
 * their checks pass, copy_gbps is the larger way; the shader copies exactly
 * n elements whatever n and however many loop trips (one workgroup for
 * many trips, a ragged end, nothing past n); its check sees a copy cut
 * short by one element; a size the shader cannot count is refused by name.
 * Sizes are small (about 1 MiB) to keep lavapipe fast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiface.h"
#include "peak_copy.h"
#include "peak_ref.h"
#include "peak_vk.h"

#define STAGE (4u << 20)

static peak_vk g_v;

static int setup(void **state)
{
	(void)state;
	const char *val = getenv("VKGRAD_VALIDATION");
	setenv("VKGRAD_VALIDATION", val && strcmp(val, "0") == 0 ? "0" : "1", 1);
	char err[512] = "";
	if (peak_vk_open(&g_v, STAGE, err, sizeof(err)) != 0) {
		fprintf(stderr, "peak_vk_open: %s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	const unsigned verr = atomic_load(&g_v.dev.validation_errors);
	peak_vk_close(&g_v);
	return verr ? -1 : 0;
}

static void no_validation_errors(void)
{
	assert_int_equal(atomic_load(&g_v.dev.validation_errors), 0);
}

/* Both ways on an odd number of elements: ok, each way's numbers sane,
 * copy_gbps the larger, its gpu_us that way's. */
static void test_measure_both_ways(void **state)
{
	(void)state;
	peak_copy_result c;
	char err[512] = "";
	const uint64_t bytes = (1u << 20) + 3 * 16;
	if (peak_copy_measure(&g_v, bytes, 2, &c, err, sizeof(err)) != 0)
		fail_msg("peak_copy_measure: %s", err);
	assert_int_equal(c.bytes, bytes);
	assert_int_equal(c.reps, 2);
	assert_true(c.groups >= 1);
	for (int w = 0; w < PEAK_COPY_WAYS; w++) {
		const peak_copy_way *y = &c.way[w];
		if (!y->ok)
			fail_msg("%s copy: %zu bytes read back wrong", peak_copy_way_name(w), y->bad_bytes);
		assert_true(y->med_us > 0 && y->min_us > 0 && y->min_us <= y->med_us);
		assert_true(y->gbps > 0 && y->best_gbps >= y->gbps);
		assert_true(c.gbps >= y->gbps);
		/* 2 x bytes / the median, in GB/s */
		const double want = 2.0 * (double)bytes / y->med_us / 1e3;
		assert_true(y->gbps > want * 0.999999 && y->gbps < want * 1.000001);
	}
	assert_true(c.ok);
	assert_true(c.best == PEAK_COPY_DMA || c.best == PEAK_COPY_SHADER);
	assert_true(c.gbps == c.way[c.best].gbps && c.med_us == c.way[c.best].med_us);
	assert_true(c.best_gbps == c.way[c.best].best_gbps);
	assert_string_equal(peak_copy_way_name(PEAK_COPY_DMA), "dma");
	assert_string_equal(peak_copy_way_name(PEAK_COPY_SHADER), "shader");
	no_validation_errors();
}

/* The shader run by hand into a zeroed destination with n elements of
 * `total`, on `groups` workgroups; the destination read back whole. */
static void shader_copy(uint32_t total, uint32_t n, uint32_t groups, uint8_t *back)
{
	const kreg_entry *e = kreg_find("bench_peak_copy", "f32", "copy");
	assert_non_null(e);
	const size_t bytes = (size_t)total * 16;
	assert_true(bytes <= STAGE);
	peak_pipe p;
	peak_buf src = {0}, dst = {0};
	char err[512] = "";
	assert_int_equal(peak_pipe_create(&g_v, &p, e, VKG_BINDINGS_PEAK_COPY, sizeof(kiface_peak_copy), NULL,
					  err, sizeof(err)),
			 0);
	uint8_t *pat = malloc(bytes);
	assert_non_null(pat);
	peak_copy_pattern(0, pat, bytes);
	assert_int_equal(peak_buf_from(&g_v, &src, pat, bytes, err, sizeof(err)), 0);
	assert_int_equal(peak_buf_create(&g_v, &dst, bytes, err, sizeof(err)), 0);
	assert_int_equal(peak_buf_fill(&g_v, &dst, 0, err, sizeof(err)), 0);
	peak_buf *bufs[2] = {&src, &dst};
	const kiface_peak_copy push = {.n = n};
	double us = 0;
	if (peak_dispatch(&g_v, &p, bufs, &push, groups, &us, err, sizeof(err)) != 0)
		fail_msg("peak_dispatch: %s", err);
	assert_int_equal(peak_buf_download(&g_v, &dst, 0, back, bytes, err, sizeof(err)), 0);
	peak_buf_destroy(&g_v, &src);
	peak_buf_destroy(&g_v, &dst);
	peak_pipe_destroy(&g_v, &p);
	free(pat);
}

/* One workgroup for 65,539 elements: 64 trips of the grid-stride loop and
 * a ragged last one; every byte where it belongs. Then n one short of the
 * buffer: the check of the buffer's end sees the missing element, the
 * element itself still holds the fill, nothing else differs. */
static void test_shader_copies_exactly_n(void **state)
{
	(void)state;
	const uint32_t total = 65536 + 3;
	const size_t bytes = (size_t)total * 16;
	uint8_t *back = malloc(bytes);
	assert_non_null(back);
	size_t first = 0;
	shader_copy(total, total, 1, back);
	assert_int_equal(peak_copy_check(0, back, bytes, &first), 0);
	/* several workgroups, fewer invocations than elements */
	shader_copy(total, total, 7, back);
	assert_int_equal(peak_copy_check(0, back, bytes, &first), 0);
	/* one element short */
	shader_copy(total, total - 1, 3, back);
	const size_t bad = peak_copy_check(0, back, bytes, &first);
	assert_true(bad >= 1 && bad <= 16);
	assert_true(first >= bytes - 16);
	for (size_t i = bytes - 16; i < bytes; i++)
		assert_int_equal(back[i], 0);
	assert_int_equal(peak_copy_check(0, back, bytes - 16, &first), 0);
	/* no elements: the fill everywhere */
	shader_copy(total, 0, 2, back);
	assert_true(peak_copy_check(0, back, bytes, &first) > bytes - bytes / 64);
	free(back);
	no_validation_errors();
}

/* Sizes the copy cannot take: refused, naming the rule. */
static void test_bad_sizes_refused(void **state)
{
	(void)state;
	static const uint64_t bad[] = {17, 16, 1000008, 16ull << 32};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		peak_copy_result c;
		char err[512] = "";
		assert_int_equal(peak_copy_measure(&g_v, bad[i], 1, &c, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "multiple of 16 bytes from 32"));
		assert_false(c.ok);
	}
	/* the device still copies */
	peak_copy_result c;
	char err[512] = "";
	assert_int_equal(peak_copy_measure(&g_v, 4096, 1, &c, err, sizeof(err)), 0);
	assert_true(c.ok);
	no_validation_errors();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_measure_both_ways),
		cmocka_unit_test(test_shader_copies_exactly_n),
		cmocka_unit_test(test_bad_sizes_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
