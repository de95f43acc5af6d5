/* tests/unit/test_job_tensors.c — daemon/sched/engine_job.h: which of a
 * job's tensors are device tensors. job_has_device_tensor (any: the job is
 * not copied to the device-local path) and job_all_device_tensors (every
 * tensor it names: placement.c widens its GEMMs to the 128 tile on a GPU,
 * as for a job copied to device memory), and per slot job_on_device (a
 * device tensor or none: placement.c's test for a dX read through the
 * bus). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine_job.h"
#include "region.h"

static region host_r, dev_r;

/* A backward job naming X, dY, W, dW and dX: the slots in `dev` (bit t)
 * on a device tensor, the others in a region. */
static job backward(unsigned dev)
{
	job j;
	memset(&j, 0, sizeof(j));
	const int named[] = {PROTO_T_X, PROTO_T_DY, PROTO_T_W, PROTO_T_DW, PROTO_T_DX};
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		const int t = named[i];
		j.req.t[t].present = true;
		j.reg[t] = (dev >> t) & 1u ? &dev_r : &host_r;
	}
	return j;
}

static void test_which_are_device_tensors(void **state)
{
	(void)state;
	host_r.device_local = false;
	dev_r.device_local = true;
	const unsigned all = (1u << PROTO_T_X) | (1u << PROTO_T_DY) | (1u << PROTO_T_W) | (1u << PROTO_T_DW) |
			     (1u << PROTO_T_DX);
	job j = backward(0);
	assert_false(job_has_device_tensor(&j));
	assert_false(job_all_device_tensors(&j));
	j = backward(all);
	assert_true(job_has_device_tensor(&j));
	assert_true(job_all_device_tensors(&j));
	/* every one of them in a region in turn: some, not all */
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!((all >> t) & 1u))
			continue;
		j = backward(all & ~(1u << t));
		assert_true(job_has_device_tensor(&j));
		assert_false(job_all_device_tensors(&j));
		for (int u = 0; u < PROTO_T_COUNT; u++)
			assert_true(job_on_device(&j, u) == (u != t));
		j = backward(1u << t);
		assert_true(job_has_device_tensor(&j));
		assert_false(job_all_device_tensors(&j));
	}
	/* a slot the job does not name does not count, whatever it holds */
	j = backward(all);
	j.req.t[PROTO_T_DX].present = false;
	j.reg[PROTO_T_DX] = NULL;
	assert_true(job_all_device_tensors(&j));
	assert_true(job_on_device(&j, PROTO_T_DX));
	j.reg[PROTO_T_DX] = &host_r;
	assert_true(job_on_device(&j, PROTO_T_DX));
	assert_true(job_all_device_tensors(&j));
	/* a job naming nothing has none */
	memset(&j, 0, sizeof(j));
	assert_false(job_has_device_tensor(&j));
	assert_false(job_all_device_tensors(&j));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_which_are_device_tensors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
