/* tests/unit/test_kernel_registry.c — daemon/kernel_registry.h: the table
 * generated at build time from the shaders/ .comp files and their SPIR-V. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "kernel_registry.h"
#include "msg.h"

#define SPIRV_MAGIC 0x07230203u

static const char *const expected[] = {"linear_parameter_backward", "linear_input_backward"};

static void test_count(void **state)
{
	(void)state;
	assert_true(kreg_count >= 2);
}

static void test_expected_kernels(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		const kreg_entry *e = kreg_find(expected[i], "f32", "generic");
		if (!e)
			fail_msg("kernel %s (f32, generic) is not in the registry", expected[i]);
		assert_string_equal(e->name, expected[i]);
		assert_string_equal(e->domain, "linear_backward");
		assert_string_equal(e->variant, "generic");
		assert_string_equal(e->dtype, "f32");
		assert_string_equal(e->status, "experimental");
		/* the entry is one of the table's, not a copy */
		assert_true(e >= kreg_entries && e < kreg_entries + kreg_count);
		/* NULL dtype / variant match any */
		assert_non_null(kreg_find(expected[i], NULL, NULL));
		assert_non_null(kreg_find(expected[i], "f32", NULL));
		assert_non_null(kreg_find(expected[i], NULL, "generic"));
	}
}

static void test_every_entry_valid(void **state)
{
	(void)state;
	for (unsigned i = 0; i < kreg_count; i++) {
		const kreg_entry *e = &kreg_entries[i];
		assert_non_null(e->name);
		assert_non_null(e->domain);
		assert_non_null(e->variant);
		assert_non_null(e->dtype);
		assert_non_null(e->status);
		assert_true(e->name[0] && e->domain[0] && e->variant[0] && e->dtype[0] &&
			    e->status[0]);
		assert_non_null(e->spirv);
		if (e->spirv_size < 20 || e->spirv_size % 4 != 0)
			fail_msg("%s: SPIR-V size %zu is not a multiple of 4 words >= 5", e->name,
				 e->spirv_size);
		if (e->spirv[0] != SPIRV_MAGIC)
			fail_msg("%s: SPIR-V magic 0x%08x", e->name, e->spirv[0]);
		/* header word 1: version 1.x; word 4: schema 0 */
		assert_int_equal(e->spirv[1] >> 16, 1);
		assert_int_equal(e->spirv[4], 0);
		/* the kernel fits what hello reports (proto_kernel_info sizes) */
		assert_true(strlen(e->name) < 48);
		assert_true(strlen(e->domain) < 24);
		assert_true(strlen(e->variant) < 24);
		assert_true(strlen(e->dtype) < 8);
		assert_true(strlen(e->status) < 16);
		/* one name per variant: what hello lists, a request may force */
		int v = proto_variant_parse(e->variant);
		if (v < 0 || v == PROTO_VARIANT_AUTO)
			fail_msg("%s: variant '%s' is not a name a request may force", e->name,
				 e->variant);
		/* kreg_find returns the first entry of that name/dtype/variant */
		const kreg_entry *f = kreg_find(e->name, e->dtype, e->variant);
		assert_non_null(f);
		assert_true(f <= e);
	}
}

static void test_no_duplicates(void **state)
{
	(void)state;
	for (unsigned i = 0; i < kreg_count; i++)
		for (unsigned j = i + 1; j < kreg_count; j++)
			if (strcmp(kreg_entries[i].name, kreg_entries[j].name) == 0 &&
			    strcmp(kreg_entries[i].dtype, kreg_entries[j].dtype) == 0 &&
			    strcmp(kreg_entries[i].variant, kreg_entries[j].variant) == 0)
				fail_msg("duplicate kernel %s/%s/%s", kreg_entries[i].name,
					 kreg_entries[i].dtype, kreg_entries[i].variant);
}

static void test_find_misses(void **state)
{
	(void)state;
	assert_null(kreg_find("linear_parameter_backward", "f64", NULL));
	assert_null(kreg_find("linear_parameter_backward", "f32", "no_such_variant"));
	assert_null(kreg_find("linear_input_backward", "", NULL));
	assert_null(kreg_find("no_such_kernel", NULL, NULL));
	assert_null(kreg_find("", NULL, NULL));
	/* names match whole, not by prefix */
	assert_null(kreg_find("linear_input", NULL, NULL));
	assert_null(kreg_find("linear_input_backward_x", NULL, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count),
		cmocka_unit_test(test_expected_kernels),
		cmocka_unit_test(test_every_entry_valid),
		cmocka_unit_test(test_no_duplicates),
		cmocka_unit_test(test_find_misses),
	};
	return cmocka_run_group_tests_name("kernel_registry", tests, NULL, NULL);
}
