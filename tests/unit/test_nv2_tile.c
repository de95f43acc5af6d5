/* tests/unit/test_nv2_tile.c — daemon/kernels/nv2_tile.h: VKGRAD_NV2_TILE parsed
 * (good values, malformed ones, values out of the kernel's ranges), fitted
 * to a device's workgroup-scope shapes (granularities, workgroup sizes,
 * limits: each refusal names the variable, the value, the reason and what
 * the device lists), and turned into specialization constants. No GPU:
 * the device's lists are written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "nv2_tile.h"

static void expect_tile(const char *s, uint32_t bm, uint32_t bn, uint32_t bk, uint32_t threads,
			uint32_t unclamp, uint32_t unroll, uint32_t db_apart)
{
	nv2_tile t;
	char err[512] = "";
	if (nv2_tile_parse(s, &t, err, sizeof(err)) != 0)
		fail_msg("'%s' refused: %s", s, err);
	assert_int_equal(t.bm, bm);
	assert_int_equal(t.bn, bn);
	assert_int_equal(t.bk, bk);
	assert_int_equal(t.threads, threads);
	assert_int_equal(t.unclamp, unclamp);
	assert_int_equal(t.unroll, unroll);
	assert_int_equal(t.db_apart, db_apart);
}

static void test_parse_good(void **state)
{
	(void)state;
	expect_tile("128x128x32x256", 128, 128, 32, 256, 0, 1, 0);
	expect_tile(NV2_TILE_DEFAULT, 128, 256, 64, 0, 1, 8, 1);
	expect_tile(NV2_TILE_SMALL_DEFAULT, 128, 128, 64, 0, 1, 8, 0);
	expect_tile("128x256x64x256x1", 128, 256, 64, 256, 1, 1, 0);
	expect_tile("256x128x32x512x1x8", 256, 128, 32, 512, 1, 8, 0);
	expect_tile("16x16x16x32x0x2", 16, 16, 16, 32, 0, 2, 0);
	expect_tile("64x64x128x0x1x4", 64, 64, 128, 0, 1, 4, 0);
	expect_tile("128x256x64x256x1x8x1", 128, 256, 64, 256, 1, 8, 1);
	expect_tile("128x128x32x0x0x1x1", 128, 128, 32, 0, 0, 1, 1);
}

static void expect_refused(const char *s, const char *fault)
{
	nv2_tile t;
	char err[512] = "", want[128];
	memset(&t, 0x55, sizeof(t));
	if (nv2_tile_parse(s, &t, err, sizeof(err)) == 0)
		fail_msg("'%s' accepted", s ? s : "(null)");
	snprintf(want, sizeof(want), "VKGRAD_NV2_TILE='%s'", s ? s : "");
	if (!strstr(err, want) || !strstr(err, fault) ||
	    !strstr(err, "the accepted form is BMxBNxBKxTHREADS[xUNCLAMP[xUNROLL[xDBAPART]]]"))
		fail_msg("'%s': wanted '%s' and '%s' in: %s", s ? s : "(null)", want, fault, err);
	assert_int_equal(t.bm, 0); /* nothing half-filled */
	assert_int_equal(t.unroll, 0);
}

static void test_parse_malformed(void **state)
{
	(void)state;
	expect_refused(NULL, "not a list of numbers");
	expect_refused("", "not a list of numbers");
	expect_refused("big", "not a list of numbers");
	expect_refused("128x128x32", "fewer than 4 numbers");
	expect_refused("128x128x32x256x1x2x1x0", "more than 7 numbers");
	expect_refused("128x128x32x256 ", "not a list of numbers");
	expect_refused("128x128x32x256x", "not a list of numbers");
	expect_refused("128x128x-32x256", "not a list of numbers");
	expect_refused("128,128,32,256", "not a list of numbers");
	expect_refused("128x128x32x99999", "a number above 4096");
}

static void test_parse_out_of_range(void **state)
{
	(void)state;
	expect_refused("120x128x32x256", "BM and BN must be multiples of 16 from 16 to 256");
	expect_refused("128x0x32x256", "BM and BN must be");
	expect_refused("512x128x32x256", "BM and BN must be");
	expect_refused("128x128x8x256", "BK must be a multiple of 16 from 16 to 128");
	expect_refused("128x128x40x256", "BK must be");
	expect_refused("128x128x256x256", "BK must be");
	expect_refused("128x128x32x100", "THREADS must be 0");
	expect_refused("128x128x32x2048", "THREADS must be 0");
	expect_refused("128x128x32x256x2", "UNCLAMP must be 0 or 1");
	expect_refused("128x128x32x256x1x3", "UNROLL must be 1, 2, 4 or 8");
	expect_refused("128x128x32x256x1x0", "UNROLL must be");
	expect_refused("128x128x32x256x1x16", "UNROLL must be");
	expect_refused("128x128x32x256x1x2x2", "DBAPART must be 0 or 1");
}

/* a device that lists 16x16x16 at 128 and 256 invocations and 32x32x32 at
 * 512, workgroups up to 1024 (as Vulkan limits), no further limits */
static nv2_offer offer(void)
{
	nv2_offer o = {.flex = {{16, 16, 16, 128}, {16, 16, 16, 256}, {32, 32, 32, 512}},
		       .n = 3,
		       .max_threads = 0,
		       .max_dim = 0,
		       .wg_max = 1024};
	return o;
}

static int fit(const char *s, nv2_offer o, nv2_tile *t, char *err, size_t errlen)
{
	char perr[512];
	if (nv2_tile_parse(s, t, perr, sizeof(perr)) != 0)
		fail_msg("'%s' refused by the parser: %s", s, perr);
	return nv2_tile_fit(t, &o, NV2_TILE_ENV, s, "bf16", err, errlen);
}

static void expect_fit(const char *s, nv2_offer o, uint32_t threads, uint32_t dbn)
{
	nv2_tile t;
	char err[1024] = "";
	if (fit(s, o, &t, err, sizeof(err)) != 0)
		fail_msg("'%s' does not fit: %s", s, err);
	assert_int_equal(t.threads, threads);
	assert_int_equal(t.dbn, dbn);
}

static void expect_misfit(const char *s, nv2_offer o, const char *reason)
{
	nv2_tile t;
	char err[1024] = "", want[128];
	if (fit(s, o, &t, err, sizeof(err)) == 0)
		fail_msg("'%s' fits (%u threads); wanted: %s", s, t.threads, reason);
	snprintf(want, sizeof(want), "VKGRAD_NV2_TILE='%s' for bf16: ", s);
	if (!strstr(err, want) || !strstr(err, reason) || !strstr(err, "the device lists granularities"))
		fail_msg("'%s': wanted '%s' and '%s' in: %s", s, want, reason, err);
}

static void test_fit_granularity_and_threads(void **state)
{
	(void)state;
	const nv2_offer o = offer();
	/* THREADS 0: 256 where an entry that divides the tile has it */
	expect_fit(NV2_TILE_DEFAULT, o, 256, 16);
	expect_fit("128x256x64x0x1x2", o, 256, 16);
	expect_fit("128x128x32x128", o, 128, 16);
	expect_fit("256x128x64x512", o, 512, 32); /* 32x32x32: db through 32 columns */
	expect_fit("64x64x32x0", o, 256, 16);
	/* only the 16-granular entries divide 48: THREADS 0 takes 256 of them */
	expect_fit("48x64x16x0", o, 256, 16);
	/* 512 is listed only for 32x32x32, which 48 rows break */
	expect_misfit("48x64x32x512", o, "no workgroup of THREADS invocations");
	expect_misfit("128x128x32x64", o, "no workgroup of THREADS invocations");
	expect_misfit("128x128x32x1024", o, "no workgroup of THREADS invocations");
	/* granularities: K steps of 16 on a device of 32 alone */
	nv2_offer k32 = o;
	k32.flex[0] = (nv2_flex){16, 16, 32, 256};
	k32.n = 1;
	expect_misfit("128x128x16x256", k32, "no granularity the device lists divides BM, BN and BK");
	expect_misfit("128x128x16x0", k32, "no granularity");
	expect_fit("128x128x64x0", k32, 256, 16);
	/* an N granularity of 24 (made up): db through 24 columns, BN a multiple */
	nv2_offer n24 = o;
	n24.flex[0] = (nv2_flex){16, 24, 16, 256};
	n24.n = 1;
	expect_misfit("128x128x32x256", n24, "no granularity");
	expect_fit("128x144x32x256", n24, 256, 24);
	/* no entry at all */
	nv2_offer none = o;
	none.n = 0;
	expect_misfit("128x128x32x0", none, "lists no workgroup-scope shape for this dtype");
}

static void test_fit_limits(void **state)
{
	(void)state;
	nv2_offer o = offer();
	o.max_threads = 256; /* cooperativeMatrixWorkgroupScopeMaxWorkgroupSize */
	expect_fit("128x128x32x256", o, 256, 16);
	expect_misfit("256x128x64x512", o, "its workgroup is larger than the device allows");
	o = offer();
	o.wg_max = 256; /* maxComputeWorkGroupInvocations */
	expect_misfit("256x128x64x512", o, "larger than the device allows");
	o = offer();
	o.max_dim = 128; /* cooperativeMatrixFlexibleDimensionsMaxDimension */
	expect_fit("128x128x128x256", o, 256, 16);
	expect_misfit("256x128x32x256", o, "above the device's largest flexible dimension");
	expect_misfit("128x256x32x256", o, "largest flexible dimension");
	/* what the device lists is in the refusal */
	nv2_tile t;
	char err[1024];
	assert_int_not_equal(fit("256x128x32x256", o, &t, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "16x16x16@128, 16x16x16@256, 32x32x32@512"));
	assert_non_null(strstr(err, "workgroups up to 1024, dimensions up to 128"));
}

/* The H200's list for f16 and for bf16 (driver 580.159.04, read on the
 * machine 2026-12-03, docs/kernels.md):
 * workgroups of 32 and 64 at 16x16x16, 128 at 32x16x16, 256 at 32x32x16;
 * cooperativeMatrixWorkgroupScopeMaxWorkgroupSize 256, flexible dimensions
 * up to 1024. */
static void test_fit_h200(void **state)
{
	(void)state;
	const nv2_offer o = {.flex = {{16, 16, 16, 32}, {16, 16, 16, 64}, {32, 16, 16, 128}, {32, 32, 16, 256}},
			     .n = 4,
			     .max_threads = 256,
			     .max_dim = 1024,
			     .wg_max = 1024};
	/* the default: 256 threads, db through 32 columns */
	expect_fit(NV2_TILE_DEFAULT, o, 256, 32);
	expect_fit(NV2_TILE_SMALL_DEFAULT, o, 256, 32); /* the small layers' */
	expect_fit("128x256x64x256x1x8", o, 256, 32); /* llama.cpp's large coopmat2 tile */
	expect_fit("128x128x32x128x1x4", o, 128, 16);
	expect_fit("64x64x64x128x1x8", o, 128, 16);
	expect_fit("64x64x32x64", o, 64, 16);
	/* 48 rows: only the 16-granular entries (32 and 64 threads) */
	expect_fit("48x64x32x0", o, 64, 16);
	expect_misfit("48x64x32x256", o, "no workgroup of THREADS invocations");
	expect_misfit("128x128x32x512", o, "no workgroup of THREADS invocations");
	expect_misfit("128x128x32x1024", o, "no workgroup of THREADS invocations");
}

static void test_spec(void **state)
{
	(void)state;
	nv2_tile t;
	char err[512];
	assert_int_equal(fit("128x256x64x0x1x4x1", offer(), &t, err, sizeof(err)), 0);
	nv2_spec c;
	nv2_spec_fill(&c, &t, true);
	const uint32_t want[NV2_SPECS] = {256, 128, 256, 64, 1, 16, 1, 4, 1};
	for (uint32_t i = 0; i < NV2_SPECS; i++) {
		assert_int_equal(c.v[i], want[i]);
		assert_int_equal(c.map[i].constantID, i);
		assert_int_equal(c.map[i].offset, 4 * i);
		assert_int_equal(c.map[i].size, 4);
	}
	assert_int_equal(c.info.mapEntryCount, NV2_SPECS);
	assert_int_equal(c.info.dataSize, 4 * NV2_SPECS);
	assert_ptr_equal(c.info.pData, c.v);
	nv2_spec_fill(&c, &t, false);
	assert_int_equal(c.v[4], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_parse_out_of_range),
		cmocka_unit_test(test_fit_granularity_and_threads),
		cmocka_unit_test(test_fit_limits),
		cmocka_unit_test(test_fit_h200),
		cmocka_unit_test(test_spec),
	};
	return cmocka_run_group_tests_name("nv2_tile", tests, NULL, NULL);
}
