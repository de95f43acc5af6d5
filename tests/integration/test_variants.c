/* tests/integration/test_variants.c — every kernel family, forced with the
 * request's `variant` key, against the float64 reference at JC_TOL_F32 over
 * shapes on the tiled kernels' edges (tile 64 and 128: 63, 64, 65, 127,
 * 128, 129, 256, 257),
 * split-K's edges (batch below one slice, slices that do not divide the
 * batch, the automatic choice at batch 4096+), single rows and columns,
 * every output subset, with and without accumulate; the automatic choice on
 * the same shapes; an unknown variant name (the
 * message names every variant of the dtype and which the device cannot run;
 * hello names variants as requests do).
 *
 * A second daemon runs every job on the device-local path
 * (--devlocal-min-bytes 1: tensors copied into scratch, computed there,
 * copied back, in copies of at most 100 bytes: --copy-piece-bytes) and
 * cuts kernels into many small dispatches (--dispatch-max-macs); its results must match the reference and be the
 * same bits as the first daemon's, and split-K must give the same bits
 * every run. The second daemon shares the first's cache directory, so it
 * loads the cost model the first measured (daemon/kernels/costmodel.h): auto
 * chooses the same kernels on both, as a restarted daemon does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_proc.h"
#include "expect.h"
#include "jobcase.h"
#include "rawsock.h"
#include "vkgrad.h"

/* g_sl: every job large and in slices of about 1 µs */
static daemon_proc g_d, g_dl, g_sl;

static const uint64_t shapes[][3] = {
	{1, 1, 1},     {1, 64, 64},   {64, 1, 64},   {64, 64, 1},  {63, 63, 63},
	{64, 64, 64},  {65, 65, 65},  {127, 129, 64}, {129, 127, 65}, {128, 64, 128},
	{200, 65, 16}, {70, 130, 17}, {3, 257, 66},
	{17, 3, 100},  {1040, 70, 65}, {4100, 33, 5}, /* split-K: 1 slice, 64 uneven, auto */
	{70, 68, 36},  {1100, 4, 132},                /* in, out multiples of 4: vector loads */
	{300, 130, 129}, {257, 256, 128},             /* several tiles each way */
};

static unsigned run_family_on(const daemon_proc *d, const char *variant)
{
	static const unsigned subsets[] = {JC_DW, JC_DB, JC_DX, JC_DW | JC_DB, JC_ALL};
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	unsigned failed = 0, n = 0;
	char name[96], why[320];
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (unsigned k = 0; k < 5; k++) {
			jobcase jc;
			jobcase_init(&jc, shapes[s][0], shapes[s][1], shapes[s][2], subsets[k],
				     (s + k) % 2 == 1);
			jc.skew = (s % 3 == 2) ? 4 : 0; /* some tensors off the 16-byte grid */
			jobcase_layout(&jc);
			uint64_t reg;
			void *map = vkg_region_create(c, jc.size[0], &reg, &err);
			assert_non_null(map);
			assert_int_equal(jobcase_fill(&jc, &map, 1000 + s * 10 + k), 0);
			vkg_job j = jobcase_job(&jc, &reg);
			j.variant = variant;
			vkg_result r;
			n++;
			if (vkg_linear_backward(c, &j, &r, &err) != 0) {
				fprintf(stderr, "%s %s: %s: %s\n", variant,
					jobcase_name(&jc, name, sizeof(name)), err.code, err.message);
				failed++;
			} else if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)) != 0) {
				fprintf(stderr, "%s %s: %s\n", variant,
					jobcase_name(&jc, name, sizeof(name)), why);
				failed++;
			}
			assert_int_equal(vkg_region_destroy(c, reg, map, jc.size[0], &err), 0);
			jobcase_free(&jc);
		}
	}
	printf("variant %s (%s): %u cases, %u failed (tol %g)\n", variant,
	       d == &g_dl ? "device-local, small dispatches" : d == &g_d ? "direct" : "another daemon", n, failed, JC_TOL_F32);
	vkg_close(c);
	return failed;
}

static unsigned run_family(const char *variant)
{
	return run_family_on(&g_d, variant);
}

static void test_splitk(void **state)
{
	(void)state;
	assert_int_equal(run_family("splitk"), 0);
}

static void test_devlocal_and_small_dispatches(void **state)
{
	(void)state;
	static const char *const families[] = {"auto", "generic", "tiled", "tiled128", "splitk"};
	for (int i = 0; i < 5; i++)
		assert_int_equal(run_family_on(&g_dl, families[i]), 0);
	/* stats say which path the jobs took */
	vkg_error err;
	vkg_client *c = vkg_connect(g_dl.sock, &err);
	assert_non_null(c);
	vkg_stats st;
	assert_int_equal(vkg_stats_get(c, &st, &err), 0);
	vkg_close(c);
	printf("device-local daemon: devlocal_min_bytes %llu, devlocal_jobs %llu of %llu, "
	       "splitk_jobs %llu, dispatches %llu, scratch_bytes %llu\n",
	       (unsigned long long)st.devlocal_min_bytes, (unsigned long long)st.devlocal_jobs,
	       (unsigned long long)st.jobs_done, (unsigned long long)st.splitk_jobs,
	       (unsigned long long)st.dispatches, (unsigned long long)st.scratch_bytes);
	assert_int_equal(st.devlocal_min_bytes, 1);
	assert_int_equal(st.devlocal_min_bytes_16bit, 1);
	assert_int_equal(st.devlocal_jobs, st.jobs_done);
	assert_true(st.splitk_jobs >= 64); /* the 16 shapes x 4 subsets with dW or db, forced */
	assert_true(st.dispatches > 4 * st.jobs_done); /* small dispatches: many per job */
	assert_true(st.scratch_bytes > 0);
	assert_int_equal(st.scratch_failures, 0);
}

/* Run one full-backward job (accumulating onto the filled outputs) on
 * daemon d and copy the region's bytes out. */
static uint8_t *run_bytes(const daemon_proc *d, const uint64_t *shp, const char *variant)
{
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	jobcase jc;
	jobcase_init(&jc, shp[0], shp[1], shp[2], JC_ALL, true);
	jobcase_layout(&jc);
	uint64_t reg;
	void *map = vkg_region_create(c, jc.size[0], &reg, &err);
	assert_non_null(map);
	assert_int_equal(jobcase_fill(&jc, &map, 77), 0);
	vkg_job j = jobcase_job(&jc, &reg);
	j.variant = variant;
	vkg_result r;
	assert_int_equal(vkg_linear_backward(c, &j, &r, &err), 0);
	char why[320];
	assert_int_equal(jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)), 0);
	uint8_t *out = malloc(jc.size[0]);
	assert_non_null(out);
	memcpy(out, map, jc.size[0]);
	assert_int_equal(vkg_region_destroy(c, reg, map, jc.size[0], &err), 0);
	jobcase_free(&jc);
	vkg_close(c);
	return out;
}

static void test_same_bits_every_path_and_run(void **state)
{
	(void)state;
	static const uint64_t shp[][3] = {{1040, 70, 65}, {4100, 33, 5}, {129, 127, 65}};
	static const char *const families[] = {"splitk", "tiled", "tiled128", "generic", "auto", "splitk128"};
	for (size_t s = 0; s < 3; s++)
		for (int f = 0; f < 6; f++) {
			jobcase jc;
			jobcase_init(&jc, shp[s][0], shp[s][1], shp[s][2], JC_ALL, true);
			jobcase_layout(&jc);
			const size_t n = jc.size[0];
			jobcase_free(&jc);
			uint8_t *a = run_bytes(&g_d, shp[s], families[f]);
			uint8_t *b = run_bytes(&g_d, shp[s], families[f]);
			uint8_t *c = run_bytes(&g_dl, shp[s], families[f]);
			uint8_t *d = run_bytes(&g_sl, shp[s], families[f]);
			if (memcmp(a, b, n) || memcmp(a, c, n) || memcmp(a, d, n))
				fprintf(stderr, "%s %llux%llux%llu: bits differ (%s)\n", families[f],
					(unsigned long long)shp[s][0], (unsigned long long)shp[s][1],
					(unsigned long long)shp[s][2],
					memcmp(a, b, n)	  ? "two runs on one daemon"
					: memcmp(a, c, n) ? "direct vs device-local"
							  : "whole vs in slices");
			assert_memory_equal(a, b, n);
			assert_memory_equal(a, c, n);
			assert_memory_equal(a, d, n);
			free(a);
			free(b);
			free(c);
			free(d);
		}
	/* the sliced daemon did slice (else the comparison above proves nothing) */
	proto_stats st;
	assert_int_equal(rawsock_stats(g_sl.sock, &st), 0);
	printf("sliced daemon: %llu slices for %llu jobs\n", (unsigned long long)st.sched_slices,
	       (unsigned long long)st.jobs_done);
	assert_true(st.sched_slices > st.jobs_done);
}

static void test_tiled(void **state)
{
	(void)state;
	assert_int_equal(run_family("tiled"), 0);
}

static void test_tiled128(void **state)
{
	(void)state;
	assert_int_equal(run_family("tiled128"), 0);
}

static void test_generic(void **state)
{
	(void)state;
	assert_int_equal(run_family("generic"), 0);
}

static void test_auto(void **state)
{
	(void)state;
	assert_int_equal(run_family("auto"), 0);
}

/* Send a 4x4x4 db job of `dtype` forcing `variant` on a new connection
 * to d and expect bad_request with exactly `want` as its message. */
static void expect_variant_message(const daemon_proc *d, const char *dtype, const char *variant,
				   const char *want)
{
	rawsock s;
	assert_int_equal(rawsock_open(&s, d->sock), 0);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	const char *keys[] = {"op", "id", "dtype", "batch", "in", "out", "x", "dy", "db", "variant"};
	msgpack_pack_map(&pk, 10);
	for (int i = 0; i < 10; i++) {
		msgpack_pack_str(&pk, strlen(keys[i]));
		msgpack_pack_str_body(&pk, keys[i], strlen(keys[i]));
		switch (i) {
		case 0: msgpack_pack_str(&pk, 15); msgpack_pack_str_body(&pk, "linear_backward", 15); break;
		case 1: msgpack_pack_uint64(&pk, 7); break;
		case 2: msgpack_pack_str(&pk, strlen(dtype)); msgpack_pack_str_body(&pk, dtype, strlen(dtype)); break;
		case 3: case 4: case 5: msgpack_pack_uint64(&pk, 4); break;
		case 6: case 7: case 8:
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, 1);
			msgpack_pack_uint64(&pk, 0);
			break;
		case 9: msgpack_pack_str(&pk, strlen(variant)); msgpack_pack_str_body(&pk, variant, strlen(variant)); break;
		}
	}
	assert_int_equal(rawsock_send_sbuf(&s, &sb, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	proto_reply r;
	assert_int_equal(rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS), 0);
	assert_int_equal(r.id, 7);
	assert_false(r.ok);
	if (r.err.code != PROTO_BAD_REQUEST || strcmp(r.err.message, want) != 0)
		fail_msg("variant '%s', dtype %s: got %s \"%s\"\n  want bad_request \"%s\"", variant,
			 dtype, proto_code_name(r.err.code), r.err.message, want);
	rawsock_close(&s);
	assert_true(rawsock_daemon_serves(d->sock));
}

/* A variant has one name everywhere: each kernel hello lists names a
 * variant that a request may force. */
static void expect_hello_variants_parse(const daemon_proc *d)
{
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_variants", &info, &err), 0);
	assert_true(info.n_kernels >= 5);
	for (unsigned i = 0; i < info.n_kernels; i++) {
		vkg_kernel_info k; /* every one: vkg_info.kernels holds 32 */
		assert_int_equal(vkg_info_kernel(c, i, &k), 0);
		if (proto_variant_parse(k.variant) < 0)
			fail_msg("hello lists kernel %s as variant '%s', which a request cannot name",
				 k.name, k.variant);
	}
	vkg_close(c);
}

/* An unknown variant is bad_request naming every variant of the request's
 * dtype, and which of them this device (lavapipe: no cooperative matrices)
 * cannot run. */
static void test_unknown_variant_is_bad_request(void **state)
{
	(void)state;
	expect_hello_variants_parse(&g_d);
	expect_variant_message(&g_d, "f32", "fast!",
			       "linear_backward: key 'variant' = 'fast!' is not one of auto, generic, "
			       "tiled, tiled128, splitk, splitk128, narrow, coopmat_khr_f32x3, coopmat_khr_f32_splitk for "
			       "dtype f32 (coopmat is f16 only; coopmat_khr, coopmat_khr_splitk, coopmat_nv2 are f16 and bf16 "
			       "only); this device cannot run coopmat_khr_f32x3, coopmat_khr_f32_splitk");
	expect_variant_message(&g_d, "bf16", "tiled64",
			       "linear_backward: key 'variant' = 'tiled64' is not one of auto, generic, "
			       "tiled, tiled128, splitk, splitk128, narrow, coopmat_khr, coopmat_khr_splitk, coopmat_nv2 for "
			       "dtype bf16 (coopmat is f16 only; coopmat_khr_f32x3, coopmat_khr_f32_splitk are f32 only); "
			       "this device cannot run coopmat_khr, coopmat_khr_splitk, coopmat_nv2");
	expect_variant_message(&g_d, "f16", "",
			       "linear_backward: key 'variant' = '' is not one of auto, generic, "
			       "tiled, tiled128, splitk, splitk128, narrow, coopmat, coopmat_khr, coopmat_khr_splitk, "
			       "coopmat_nv2 for dtype f16 (coopmat_khr_f32x3, coopmat_khr_f32_splitk are f32 only); this "
			       "device cannot run coopmat, coopmat_khr, coopmat_khr_splitk, coopmat_nv2");
}

/* A device with only the 16 KiB of shared memory Vulkan promises cannot run
 * the 128x128 kernel nor the narrow family (32 KiB each): hello does not list it, forcing it is
 * `unsupported` naming the limit, nothing is written, and auto jobs still
 * run (VKGRAD_FAULT_SHARED_16K makes lavapipe report 16384). */
static void test_tiled128_unsupported_with_16k_shared_memory(void **state)
{
	(void)state;
	daemon_proc d = {0};
	static const char *const env[] = {"VKGRAD_FAULT_SHARED_16K=1", NULL};
	static const char *const args[] = {"--devlocal-min-bytes", "1", NULL};
	assert_int_equal(daemon_proc_start(&d, args, env), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_variants", &info, &err), 0);
	vkg_kernel_info k; /* every one: vkg_info.kernels holds 32 */
	for (unsigned i = 0; i < info.n_kernels; i++) {
		assert_int_equal(vkg_info_kernel(c, i, &k), 0);
		assert_string_not_equal(k.name, "linear_tiled128_gemm");
	}
	expect_refused_untouched(c, NULL, "tiled128", "unsupported", "tiled128",
				 "maxComputeSharedMemorySize = 16384");
	/* the narrow family (32 KiB) likewise */
	for (unsigned i = 0; i < info.n_kernels; i++) {
		assert_int_equal(vkg_info_kernel(c, i, &k), 0);
		assert_string_not_equal(k.variant, "narrow");
	}
	expect_refused_untouched(c, NULL, "narrow", "unsupported", "narrow",
				 "maxComputeSharedMemorySize = 16384");
	/* split-K on the 128 tile (the same 32 KiB body) likewise */
	for (unsigned i = 0; i < info.n_kernels; i++) {
		assert_int_equal(vkg_info_kernel(c, i, &k), 0);
		assert_string_not_equal(k.name, "linear_splitk128_gemm");
	}
	expect_refused_untouched(c, NULL, "splitk128", "unsupported", "splitk128",
				 "maxComputeSharedMemorySize = 16384");
	vkg_close(c);
	expect_variant_message(&d, "f16", "Tiled",
			       "linear_backward: key 'variant' = 'Tiled' is not one of auto, generic, "
			       "tiled, tiled128, splitk, splitk128, narrow, coopmat, coopmat_khr, coopmat_khr_splitk, "
			       "coopmat_nv2 for dtype f16 (coopmat_khr_f32x3, coopmat_khr_f32_splitk are f32 only); this "
			       "device cannot run tiled128, splitk128, narrow, coopmat, coopmat_khr, coopmat_khr_splitk, "
			       "coopmat_nv2");
	expect_variant_message(&d, "f32", "Tiled",
			       "linear_backward: key 'variant' = 'Tiled' is not one of auto, generic, "
			       "tiled, tiled128, splitk, splitk128, narrow, coopmat_khr_f32x3, coopmat_khr_f32_splitk for "
			       "dtype f32 (coopmat is f16 only; coopmat_khr, coopmat_khr_splitk, coopmat_nv2 are f16 and bf16 "
			       "only); this device cannot run tiled128, splitk128, narrow, coopmat_khr_f32x3, "
			       "coopmat_khr_f32_splitk");
	expect_hello_variants_parse(&d);
	/* the other families still serve, on the device-local path too */
	assert_int_equal(run_family_on(&d, "auto"), 0);
	assert_true(rawsock_daemon_serves(d.sock));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static int group_setup(void **state)
{
	(void)state;
	if (daemon_proc_start(&g_d, NULL, NULL) != 0)
		return -1;
	/* g_d's cache directory: the cost model g_d measured and saved there,
	 * so auto chooses the same kernels on both (test_same_bits_every_path_and_run) */
	const char *const dl_args[] = {"--devlocal-min-bytes", "1", "--dispatch-max-macs", "100000",
				       "--copy-piece-bytes", "100", "--cache-dir", g_d.cache, NULL};
	if (daemon_proc_start(&g_dl, dl_args, NULL) != 0)
		return -1;
	const char *const sl_args[] = {"--small-job-us", "1", "--slice-us", "1", "--cache-dir", g_d.cache, NULL};
	return daemon_proc_start(&g_sl, sl_args, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	int a = daemon_proc_stop(&g_d), b = daemon_proc_stop(&g_dl), c = daemon_proc_stop(&g_sl);
	return a == 0 && b == 0 && c == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiled),
		cmocka_unit_test(test_tiled128),
		cmocka_unit_test(test_tiled128_unsupported_with_16k_shared_memory),
		cmocka_unit_test(test_generic),
		cmocka_unit_test(test_auto),
		cmocka_unit_test(test_splitk),
		cmocka_unit_test(test_devlocal_and_small_dispatches),
		cmocka_unit_test(test_same_bits_every_path_and_run),
		cmocka_unit_test(test_unknown_variant_is_bad_request),
	};
	int rc = cmocka_run_group_tests_name("variants", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
