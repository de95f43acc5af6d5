/* tests/unit/test_cli_task.c — client/cli_task.c's float64 references, as
 * `vkgrad bench` and `vkgrad run --check` use them (no daemon: the region
 * is a plain allocation here).
 *
 * The sampled reference (large shapes) must give exactly the values of the
 * full reference at its indices: both sum in the order of the batch rows,
 * so the doubles are compared bit for bit, for every output subset and
 * each dtype. Its check must fail an output with one sampled element
 * wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ref.h"

/* A task with its tensors in a plain allocation, inputs filled. */
static void task_new(cli_task *t, uint64_t b, uint64_t i, uint64_t o, unsigned outs, proto_dtype d)
{
	char why[128];
	assert_int_equal(cli_task_init(t, b, i, o, outs, false, d, why, sizeof(why)), 0);
	t->mem = calloc(1, t->size);
	assert_non_null(t->mem);
	cli_task_fill_inputs(t, 0x1234 + b);
}

static void task_drop(cli_task *t)
{
	free(t->mem);
	t->mem = NULL;
	cli_task_free(t, NULL);
}

static void test_sampled_equals_full(void **state)
{
	(void)state;
	static const uint64_t shapes[][3] = {{4099, 7, 5}, {1000, 3, 1}, {513, 64, 9}, {77, 1, 130}};
	static const unsigned outs[] = {CLI_OUT_ALL, CLI_OUT_DW, CLI_OUT_DB, CLI_OUT_DX, CLI_OUT_DW | CLI_OUT_DB};
	static const proto_dtype dts[] = {PROTO_F32, PROTO_F16, PROTO_BF16};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t u = 0; u < sizeof(outs) / sizeof(outs[0]); u++)
			for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
				cli_task t;
				task_new(&t, shapes[s][0], shapes[s][1], shapes[s][2], outs[u], dts[d]);
				assert_int_equal(cli_task_reference(&t), 0);
				double *full[CLI_NT] = {0};
				for (int k = CLI_DW; k <= CLI_DX; k++) {
					if (!t.present[k])
						continue;
					const size_t n = (size_t)cli_task_elems(&t, k);
					full[k] = malloc(n * sizeof(double));
					assert_non_null(full[k]);
					memcpy(full[k], t.ref[k], n * sizeof(double));
				}
				assert_int_equal(cli_task_reference_sampled(&t, 37, 99), 0);
				for (int k = CLI_DW; k <= CLI_DX; k++) {
					if (!t.present[k])
						continue;
					assert_non_null(t.sample[k]);
					const uint64_t n = cli_task_elems(&t, k);
					/* db: every element; dW, dX: 37 or all of a smaller one */
					assert_int_equal(t.nsample[k], k == CLI_DB ? n : (n < 37 ? n : 37));
					for (size_t j = 0; j < t.nsample[k]; j++) {
						assert_true(t.sample[k][j] < n);
						if (j)
							assert_true(t.sample[k][j - 1] < t.sample[k][j]);
						if (memcmp(&t.ref[k][j], &full[k][t.sample[k][j]], sizeof(double)) != 0)
							fail_msg("%llux%llux%llu outputs %u dtype %d slot %d sample %zu: %.17g != %.17g",
								 (unsigned long long)shapes[s][0], (unsigned long long)shapes[s][1],
								 (unsigned long long)shapes[s][2], outs[u], (int)dts[d], k, j,
								 t.ref[k][j], full[k][t.sample[k][j]]);
					}
					free(full[k]);
				}
				task_drop(&t);
			}
}

/* The outputs set to the reference pass the sampled check; one sampled
 * element of each output off fails it. */
static void test_sampled_check_fails_a_wrong_element(void **state)
{
	(void)state;
	for (int k = CLI_DW; k <= CLI_DX; k++) {
		cli_task t;
		task_new(&t, 3001, 33, 17, CLI_OUT_ALL, PROTO_F32);
		assert_int_equal(cli_task_reference(&t), 0);
		for (int s = CLI_DW; s <= CLI_DX; s++) {
			float *p = cli_task_ptr(&t, s);
			for (uint64_t e = 0; e < cli_task_elems(&t, s); e++)
				p[e] = (float)t.ref[s][e];
		}
		assert_int_equal(cli_task_reference_sampled(&t, 64, 7), 0);
		assert_true(cli_task_check(&t) <= 1e-6);
		float *p = cli_task_ptr(&t, k);
		const uint64_t e = t.sample[k][t.nsample[k] / 2];
		p[e] += 1.0f + fabsf(p[e]);
		assert_true(cli_task_check(&t) > 1e-2);
		assert_true(t.err[k] > 1e-2);
		task_drop(&t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sampled_equals_full),
		cmocka_unit_test(test_sampled_check_fails_a_wrong_element),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
