/* tests/integration/test_nv2_knob.c — VKGRAD_NV2_TILE at daemon start
 * (daemon/kernels/nv2_tile.h; its parsing and fitting are unit-tested in
 * tests/unit/test_nv2_tile.c).
 *
 * A malformed value, or one outside the kernel's ranges, stops the daemon
 * at start on any device, its log naming the variable, the value, what is
 * wrong and the accepted form; the same directory then serves. A good
 * value: on a device without linear_coopmat_nv2_gemm (lavapipe) the log
 * says it is ignored, on one with it the log names the tiling taken; either
 * way the daemon serves a job checked against float64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "jobcase.h"
#include "vkgrad.h"

/* One f32 full backward (dW, db, dX) at shape 33x65x17, accumulate, checked
 * against the float64 reference. */
static void serves_a_job(const daemon_proc *d)
{
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	jobcase jc;
	jobcase_init(&jc, 33, 65, 17, JC_ALL, true);
	assert_int_equal(jobcase_run(c, &jc, 1, 1, 77, NULL), 0); /* fills, runs, checks, frees */
	vkg_close(c);
}

static void test_bad_values_refused(void **state)
{
	(void)state;
	static const struct {
		const char *value, *fault;
	} bad[] = {
		{"", "not a list of numbers"},
		{"fast", "not a list of numbers"},
		{"128x128x32", "fewer than 4 numbers"},
		{"128x128x32x256x1x2x1x0", "more than 7 numbers"},
		{"128x128x32x256 ", "not a list of numbers"},
		{"128x128x32x99999", "a number above 4096"},
		{"100x128x32x256", "BM and BN must be multiples of 16 from 16 to 256"},
		{"128x512x32x256", "BM and BN must be"},
		{"128x128x8x256", "BK must be a multiple of 16 from 16 to 128"},
		{"128x128x32x100", "THREADS must be 0"},
		{"128x128x32x256x2", "UNCLAMP must be 0 or 1"},
		{"128x128x32x256x1x3", "UNROLL must be 1, 2, 4 or 8"},
		{"128x128x32x256x1x2x3", "DBAPART must be 0 or 1"},
	};
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_init(&d), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		static char text[1 << 16];
		int ws;
		if (!daemon_proc_knob_refused(&d, "VKGRAD_NV2_TILE", bad[i].value, &ws, text, sizeof(text)) ||
		    !strstr(text, bad[i].fault) ||
		    !strstr(text, "the accepted form is BMxBNxBKxTHREADS[xUNCLAMP[xUNROLL[xDBAPART]]]"))
			fail_msg("VKGRAD_NV2_TILE='%s': wait status %d, log:\n%s", bad[i].value, ws, text);
	}
	/* the same directory then serves */
	assert_int_equal(daemon_proc_start(&d, NULL, NULL), 0);
	serves_a_job(&d);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static void test_good_value(void **state)
{
	(void)state;
	static const char *const env[] = {"VKGRAD_NV2_TILE=128x256x64x256x1x8x1", NULL};
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	assert_int_equal(daemon_proc_start(&d, NULL, env), 0);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_nv2_knob", &info, &err), 0);
	bool nv2 = false;
	vkg_kernel_info k; /* every one: vkg_info.kernels holds 32 */
	for (unsigned i = 0; i < info.n_kernels; i++)
		nv2 |= vkg_info_kernel(c, i, &k) == 0 && strcmp(k.name, "linear_coopmat_nv2_gemm") == 0;
	vkg_close(c);
	if (nv2) {
		printf("linear_coopmat_nv2_gemm served: the log must name the tiling\n");
		assert_true(daemon_proc_log_contains(&d, "VKGRAD_NV2_TILE: linear_coopmat_nv2_gemm"));
		assert_true(daemon_proc_log_contains(&d, "with 128x256 tiles, k steps of 64, 256 threads, "
						      "unclamped loads inside C, 8 k step(s) per trip; db "
						      "through 32 columns in workgroups of its own"));
	} else {
		printf("no linear_coopmat_nv2_gemm here: the value must be ignored, said so\n");
		assert_true(daemon_proc_log_contains(
			&d, "VKGRAD_NV2_TILE='128x256x64x256x1x8x1': this device serves linear_coopmat_nv2_gemm "
			    "for no dtype; ignored"));
	}
	serves_a_job(&d);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_values_refused),
		cmocka_unit_test(test_good_value),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	return rc + daemon_proc_failures;
}
