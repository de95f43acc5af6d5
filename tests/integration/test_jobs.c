/* tests/integration/test_jobs.c — linear_backward numerics against a real
 * daemon: every output subset (dw, db, dx, dw+db, dw+db+dx) over many shapes
 * (dims 1, 31, 33, 257, narrow layers with out <= 16), with and without
 * accumulate, compared with the float64 reference of client/ref.h at
 * JC_TOL_F32 (max_rel_err <= 1e-4), and every byte outside the job's outputs
 * checked unchanged (jobcase.h's canaries). Then tensors at offsets that are
 * multiples of 4 but not of 16, tensors packed 4 bytes apart, regions that
 * end at the last tensor, grids wider than one dispatch, a large narrow
 * layer, batching, the synchronous API, and the staging path of a daemon
 * started with --no-host-import. The last test checks that neither daemon
 * reported a Vulkan validation error (synchronization validation included,
 * see daemon_proc.h). */
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

static daemon_proc g_import; /* default flags: host import where possible */
static daemon_proc g_staged; /* --no-host-import: every region staged */

/* batch × in × out */
static const uint64_t shapes[][3] = {
	{1, 1, 1},     {1, 33, 1},    {31, 1, 7},    {33, 257, 31}, {257, 33, 16},
	{64, 64, 8},   {7, 300, 5},   {128, 31, 257}, {2, 2, 2},    {100, 100, 100},
	{17, 64, 3},   {300, 7, 16},  {1, 1, 257},   {257, 1, 1},   {33, 31, 1},
	{1, 512, 16},  {512, 1, 33},  {16, 16, 16},  {31, 33, 257}, {3, 5, 7},
	{65, 129, 2},  {200, 3, 200}, {1, 257, 33},  {500, 40, 9},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static const unsigned subsets[] = {JC_DW, JC_DB, JC_DX, JC_DW | JC_DB, JC_ALL};
#define NSUBSETS (sizeof(subsets) / sizeof(subsets[0]))

static void close_checked(vkg_client *c)
{
	vkg_error err;
	if (vkg_ping(c, &err) != 0)
		fail_msg("the connection stopped answering: %s: %s", err.code, err.message);
	vkg_close(c);
}

static unsigned run_on(const daemon_proc *d, jobcase *cases, size_t n, unsigned inflight,
		       uint64_t seed, uint64_t *max_batch)
{
	vkg_client *c = expect_client(d->sock);
	unsigned failed = jobcase_run(c, cases, n, inflight, seed, max_batch);
	close_checked(c);
	return failed;
}

/* Every shape, accumulate off then on, for one output subset. Layouts vary
 * a little: w is named without dx for some, outputs sit in a second region
 * for others. */
static void run_subset(unsigned outputs, uint64_t seed)
{
	jobcase cases[2 * NSHAPES];
	size_t n = 0;
	for (int acc = 0; acc < 2; acc++)
		for (size_t i = 0; i < NSHAPES; i++) {
			jobcase *jc = &cases[n++];
			jobcase_init(jc, shapes[i][0], shapes[i][1], shapes[i][2], outputs, acc);
			jc->pass_w = !(outputs & JC_DX) && i % 3 == 0;
			jc->nregions = i % 4 == 1 ? 2 : 1;
			jobcase_layout(jc);
		}
	unsigned failed = run_on(&g_import, cases, n, 6, seed, NULL);
	if (failed)
		fail_msg("%u of %zu cases failed (see above)", failed, n);
}

static void test_outputs_dw(void **state)
{
	(void)state;
	run_subset(JC_DW, 1000);
}

static void test_outputs_db(void **state)
{
	(void)state;
	run_subset(JC_DB, 2000);
}

static void test_outputs_dx(void **state)
{
	(void)state;
	run_subset(JC_DX, 3000);
}

static void test_outputs_dw_db(void **state)
{
	(void)state;
	run_subset(JC_DW | JC_DB, 4000);
}

static void test_outputs_dw_db_dx(void **state)
{
	(void)state;
	run_subset(JC_ALL, 5000);
}

/* Offsets that are multiples of 4 but not of 16 (nor 256): the daemon must
 * bind from an aligned-down offset and pass the rest to the kernel, and the
 * bytes between the aligned offset and the tensor are canaries. */
static const uint64_t skews[] = {4, 20, 36, 132, 260};

static size_t skewed_cases(jobcase *cases, bool tight)
{
	static const uint64_t sk_shapes[][3] = {
		{1, 1, 1}, {31, 33, 7}, {33, 257, 16}, {257, 31, 33}, {5, 3, 2}, {64, 17, 257},
	};
	size_t n = 0;
	for (size_t s = 0; s < NSUBSETS; s++)
		for (size_t i = 0; i < sizeof(sk_shapes) / sizeof(sk_shapes[0]); i++) {
			jobcase *jc = &cases[n];
			jobcase_init(jc, sk_shapes[i][0], sk_shapes[i][1], sk_shapes[i][2], subsets[s],
				     (n % 2) == 1);
			jc->skew = skews[n % (sizeof(skews) / sizeof(skews[0]))];
			jc->nregions = (n % 3 == 2) ? 2 : 1;
			jc->pass_w = n % 5 == 0;
			jc->tight = tight;
			jobcase_layout(jc);
			n++;
		}
	return n;
}

static void test_offsets_not_multiple_of_16(void **state)
{
	(void)state;
	jobcase cases[64];
	size_t n = skewed_cases(cases, false);
	for (size_t i = 0; i < n; i++)
		for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
			assert_int_equal(cases[i].off[t] % 4, 0);
			assert_int_not_equal(cases[i].off[t] % 16, 0);
		}
	unsigned failed = run_on(&g_import, cases, n, 4, 6000, NULL);
	if (failed)
		fail_msg("%u of %zu skewed cases failed (see above)", failed, n);
}

/* The last tensor of each region ends exactly at the region's end: bounds
 * are inclusive of the last byte, and no rounding may read or write past it. */
static void test_tensor_ends_at_region_end(void **state)
{
	(void)state;
	jobcase cases[64];
	size_t n = 0;
	for (size_t s = 0; s < NSUBSETS; s++)
		for (int k = 0; k < 4; k++) {
			const uint64_t *sh = shapes[(s * 4 + (size_t)k) % NSHAPES];
			jobcase *jc = &cases[n];
			jobcase_init(jc, sh[0], sh[1], sh[2], subsets[s], k % 2);
			jc->tight = true;
			jc->nregions = k >= 2 ? 2 : 1;
			jc->skew = k == 3 ? 4 : 0;
			jobcase_layout(jc);
			n++;
		}
	n += skewed_cases(cases + n, true) / 3; /* a third of the skewed set, tight */
	unsigned failed = run_on(&g_import, cases, n, 4, 7000, NULL);
	if (failed)
		fail_msg("%u of %zu tight cases failed (see above)", failed, n);
}

/* out above 65535 (a dispatch's y limit on most devices, lavapipe's too):
 * the parameter kernel's grid is split into several dispatches. Slow on
 * lavapipe (about a second each), so three cases cover the subsets. */
static void test_wide_out_split_dispatch(void **state)
{
	(void)state;
	jobcase cases[3];
	jobcase_init(&cases[0], 1, 1, 70000, JC_DB, false);
	jobcase_init(&cases[1], 3, 2, 66000, JC_DW, true);
	jobcase_init(&cases[2], 2, 40, 65537, JC_ALL, true);
	cases[2].skew = 4;
	jobcase_layout(&cases[2]);
	unsigned failed = run_on(&g_import, cases, 3, 3, 8000, NULL);
	if (failed)
		fail_msg("%u of 3 wide cases failed (see above)", failed);
}

/* A large narrow layer, once: 4096 × 1024 × 16, all outputs, accumulating. */
static void test_large_narrow_layer(void **state)
{
	(void)state;
	jobcase jc;
	jobcase_init(&jc, 4096, 1024, 16, JC_ALL, true);
	jc.skew = 4;
	jobcase_layout(&jc);
	unsigned failed = run_on(&g_import, &jc, 1, 1, 9000, NULL);
	assert_int_equal(failed, 0);
}

/* The synchronous call, one job at a time; jobs_done counts each. */
static void test_sync_api_and_jobs_done(void **state)
{
	(void)state;
	proto_stats before, after;
	assert_int_equal(rawsock_stats(g_import.sock, &before), 0);
	vkg_client *c = expect_client(g_import.sock);
	unsigned done = 0;
	for (size_t s = 0; s < NSUBSETS; s++) {
		for (size_t i = 0; i < 4; i++) {
			const uint64_t *sh = shapes[(s * 5 + i * 3) % NSHAPES];
			jobcase jc;
			jobcase_init(&jc, sh[0], sh[1], sh[2], subsets[s], i % 2);
			uint64_t region;
			vkg_error err;
			void *map = vkg_region_create(c, jc.size[0], &region, &err);
			if (!map)
				fail_msg("region: %s: %s", err.code, err.message);
			assert_int_equal(jobcase_fill(&jc, &map, 10000 + s * 10 + i), 0);
			vkg_job j = jobcase_job(&jc, &region);
			vkg_result res = {0};
			if (vkg_linear_backward(c, &j, &res, &err) != 0)
				fail_msg("job: %s: %s", err.code, err.message);
			assert_true(res.batch_jobs >= 1);
			char why[320], name[96];
			if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)) != 0)
				fail_msg("%s: %s", jobcase_name(&jc, name, sizeof(name)), why);
			assert_int_equal(vkg_region_destroy(c, region, map, jc.size[0], &err), 0);
			jobcase_free(&jc);
			done++;
		}
	}
	close_checked(c);
	assert_int_equal(rawsock_stats(g_import.sock, &after), 0);
	assert_true(after.jobs_done >= before.jobs_done + done);
	assert_int_equal(after.jobs_failed, before.jobs_failed);
}

/* Many small jobs in flight on one connection: the engine batches them
 * (some reply reports batch_jobs > 1) and every one is still right. */
static void test_many_small_jobs_in_flight(void **state)
{
	(void)state;
	enum { N = 96 };
	jobcase *cases = calloc(N, sizeof(*cases));
	assert_non_null(cases);
	for (size_t i = 0; i < N; i++) {
		const uint64_t *sh = shapes[i % NSHAPES];
		jobcase_init(&cases[i], sh[0] % 64 + 1, sh[1] % 64 + 1, sh[2] % 32 + 1,
			     subsets[i % NSUBSETS], i % 3 == 0);
	}
	uint64_t max_batch = 0;
	unsigned failed = run_on(&g_import, cases, N, 48, 11000, &max_batch);
	free(cases);
	if (failed)
		fail_msg("%u of %d small cases failed (see above)", failed, N);
	/* Whether these share batches depends on the device's speed (each job
	 * registers its region first; on the H200 every job finished before the
	 * next arrived): test_engine.c pins batching down deterministically. */
	printf("largest batch_jobs seen: %llu\n", (unsigned long long)max_batch);
}

/* Register one region on d and report how stats counts it while it lives
 * (host_imports and staged_regions are gauges of the live regions): the
 * increase of each while the region lives. */
static void count_live_region(const daemon_proc *d, size_t size, uint64_t *imports,
			      uint64_t *staged)
{
	proto_stats st0, st;
	assert_int_equal(rawsock_stats(d->sock, &st0), 0);
	vkg_client *c = expect_client(d->sock);
	vkg_error err;
	uint64_t region;
	void *map = vkg_region_create(c, size, &region, &err);
	if (!map)
		fail_msg("region: %s: %s", err.code, err.message);
	assert_int_equal(rawsock_stats(d->sock, &st), 0);
	assert_int_equal(st.regions, st0.regions + 1);
	*imports = st.host_imports - st0.host_imports;
	*staged = st.staged_regions - st0.staged_regions;
	assert_int_equal(vkg_region_destroy(c, region, map, size, &err), 0);
	assert_int_equal(rawsock_stats(d->sock, &st), 0);
	assert_int_equal(st.regions, st0.regions);
	assert_int_equal(st.host_imports, st0.host_imports);
	assert_int_equal(st.staged_regions, st0.staged_regions);
	close_checked(c);
}

/* The same kinds of cases on the staging daemon: results equal, and its
 * regions are staged, never imported. */
static void test_staging_path(void **state)
{
	(void)state;
	jobcase cases[128];
	size_t n = 0;
	for (size_t s = 0; s < NSUBSETS; s++)
		for (size_t i = 0; i < 10; i++) {
			const uint64_t *sh = shapes[(i * 7 + s) % NSHAPES];
			jobcase *jc = &cases[n];
			jobcase_init(jc, sh[0], sh[1], sh[2], subsets[s], (i + s) % 2);
			jc->nregions = i % 3 == 0 ? 2 : 1;
			jc->tight = i % 4 == 3;
			jc->skew = i % 5 == 4 ? 20 : 0;
			jobcase_layout(jc);
			n++;
		}
	n += skewed_cases(cases + n, false);
	unsigned failed = run_on(&g_staged, cases, n, 6, 12000, NULL);
	if (failed)
		fail_msg("%u of %zu staged cases failed (see above)", failed, n);
	uint64_t imports, staged;
	count_live_region(&g_staged, 3 * 4096, &imports, &staged);
	assert_int_equal(imports, 0);
	assert_int_equal(staged, 1);
}

/* When the device can import host memory (the daemon logs so), the default
 * daemon imports a page-multiple region: the tests above then covered the
 * import path, not only staging. */
static void test_import_path_used(void **state)
{
	(void)state;
	if (!daemon_proc_log_contains(&g_import, "host-memory import available"))
		skip();
	uint64_t imports, staged;
	count_live_region(&g_import, 16 * 4096, &imports, &staged);
	assert_int_equal(imports, 1);
	assert_int_equal(staged, 0);
}

/* Tensors back to back, 4 bytes apart, at offsets that are multiples of 4
 * but mostly not of 16, one job at a time: right results, canaries intact,
 * and no validation error (the bound ranges of neighbouring tensors must
 * not make one job's dispatches look like a hazard to the layer). */
static void test_packed_layout(void **state)
{
	(void)state;
	static const uint64_t pk_shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {31, 33, 2}, {17, 4, 16},
						{33, 31, 9}, {2, 65, 1}};
	jobcase cases[2 * NSUBSETS * 6];
	size_t n = 0;
	for (int nreg = 1; nreg <= 2; nreg++)
		for (size_t s = 0; s < NSUBSETS; s++)
			for (size_t i = 0; i < 6; i++) {
				jobcase *jc = &cases[n];
				jobcase_init(jc, pk_shapes[i][0], pk_shapes[i][1], pk_shapes[i][2],
					     subsets[s], (n % 2) == 1);
				jc->packed = true;
				jc->nregions = (unsigned)nreg;
				jc->skew = 4 * (n % 4);
				jc->pass_w = true;
				jobcase_layout(jc);
				n++;
			}
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_import, &v0), 0);
	unsigned failed = run_on(&g_import, cases, n, 1, 13000, NULL);
	if (failed)
		fail_msg("%u of %zu packed cases failed (see above)", failed, n);
	expect_validation_clean(&g_import, v0, "jobs with packed tensors");
}

/* Last: neither daemon reported a Vulkan validation error so far (the
 * group teardown checks again, through shutdown). */
static void test_no_validation_errors(void **state)
{
	(void)state;
	expect_validation_clean(&g_import, 0, "default daemon");
	expect_validation_clean(&g_staged, 0, "--no-host-import daemon");
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const staged_args[] = {"--no-host-import", NULL};
	/* imports on a CPU device too (lavapipe), so the import path is tested */
	static const char *const import_env[] = {"VKGRAD_CPU_IMPORT=1", NULL};
	if (daemon_proc_start(&g_import, NULL, import_env) != 0)
		return -1;
	if (daemon_proc_start(&g_staged, staged_args, NULL) != 0) {
		daemon_proc_kill(&g_import);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int a = daemon_proc_stop(&g_import);
	int b = daemon_proc_stop(&g_staged);
	return a || b ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outputs_dw),
		cmocka_unit_test(test_outputs_db),
		cmocka_unit_test(test_outputs_dx),
		cmocka_unit_test(test_outputs_dw_db),
		cmocka_unit_test(test_outputs_dw_db_dx),
		cmocka_unit_test(test_offsets_not_multiple_of_16),
		cmocka_unit_test(test_tensor_ends_at_region_end),
		cmocka_unit_test(test_packed_layout),
		cmocka_unit_test(test_wide_out_split_dispatch),
		cmocka_unit_test(test_large_narrow_layer),
		cmocka_unit_test(test_sync_api_and_jobs_done),
		cmocka_unit_test(test_many_small_jobs_in_flight),
		cmocka_unit_test(test_staging_path),
		cmocka_unit_test(test_import_path_used),
		cmocka_unit_test(test_no_validation_errors),
	};
	int rc = cmocka_run_group_tests_name("jobs", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
