/* tests/unit/test_kernel_registry.c — daemon/kernels/kernel_registry.h: the table
 * generated at build time from the shaders/ .comp files and their SPIR-V.
 *
 * What the table must hold is read here again, independently of
 * shaders/gen_registry.sh, from each shader's "// @kernel" line in
 * VKG_TEST_SHADER_DIR, for the dtypes the Makefile builds
 * (VKG_TEST_DTYPES): exactly one entry per shader and dtype that the
 * shader lists, and exactly one kernel name per shader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kernel_registry.h"
#include "msg.h"

#ifndef VKG_TEST_SHADER_DIR
#error "VKG_TEST_SHADER_DIR (the Makefile passes it) names the shaders/ folder"
#endif
#ifndef VKG_TEST_DTYPES
#error "VKG_TEST_DTYPES (the Makefile passes it) lists the dtypes built"
#endif

#define SPIRV_MAGIC 0x07230203u

static const char *const expected[] = {"linear_parameter_backward", "linear_input_backward"};

/* One registry entry the shaders ask for. */
typedef struct want {
	char name[48], domain[24], variant[24], dtype[8], status[16];
} want;

enum { MAX_WANT = 256 };

/* The value of key in a "// @kernel k=v k=v ..." line, into out. */
static bool meta_get(const char *meta, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);
	for (const char *p = meta; (p = strstr(p, key)); p += kl) {
		if ((p != meta && p[-1] != ' ') || p[kl] != '=')
			continue;
		const char *v = p + kl + 1;
		size_t len = strcspn(v, " \n");
		if (len == 0 || len >= n)
			return false;
		memcpy(out, v, len);
		out[len] = 0;
		return true;
	}
	return false;
}

/* Is dt one of the comma- (or blank-) separated words in list? */
static bool in_list(const char *list, const char *dt, const char *seps)
{
	size_t l = strlen(dt);
	for (const char *p = list; *p; p += strcspn(p, seps), p += strspn(p, seps))
		if (strncmp(p, dt, l) == 0 && (p[l] == 0 || strchr(seps, p[l])))
			return true;
	return false;
}

/* Every entry the shaders ask for; *kernels gets the number of shaders. */
static unsigned shader_wants(want *w, unsigned *kernels)
{
	DIR *d = opendir(VKG_TEST_SHADER_DIR);
	if (!d)
		fail_msg("cannot open %s", VKG_TEST_SHADER_DIR);
	unsigned n = 0;
	*kernels = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".comp") != 0)
			continue;
		char path[512], line[512], dtypes[64];
		snprintf(path, sizeof(path), "%s/%s", VKG_TEST_SHADER_DIR, e->d_name);
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		bool found = false;
		while (!found && fgets(line, sizeof(line), f))
			found = strncmp(line, "// @kernel ", 11) == 0;
		fclose(f);
		if (!found)
			fail_msg("%s has no '// @kernel' line", path);
		want base;
		const char *meta = line + 11;
		if (!meta_get(meta, "kernel_name", base.name, sizeof(base.name)) ||
		    !meta_get(meta, "domain", base.domain, sizeof(base.domain)) ||
		    !meta_get(meta, "variant", base.variant, sizeof(base.variant)) ||
		    !meta_get(meta, "dtype", dtypes, sizeof(dtypes)) ||
		    !meta_get(meta, "status", base.status, sizeof(base.status)))
			fail_msg("%s: metadata incomplete: %s", path, meta);
		(*kernels)++;
		static const char *const all[] = {"f32", "f16", "bf16"};
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
			if (!in_list(dtypes, all[i], ",") || !in_list(VKG_TEST_DTYPES, all[i], " "))
				continue;
			assert_true(n < MAX_WANT);
			w[n] = base;
			snprintf(w[n].dtype, sizeof(w[n].dtype), "%s", all[i]);
			n++;
		}
	}
	closedir(d);
	return n;
}

/* Exactly the entries the shaders ask for: the counts of entries and of
 * kernel names equal, and each asked-for entry is there as written. */
static void test_counts_match_the_shaders(void **state)
{
	(void)state;
	static want w[MAX_WANT];
	unsigned kernels;
	unsigned n = shader_wants(w, &kernels);
	printf("shaders in %s: %u kernels, %u (kernel, dtype) entries for dtypes '%s'\n",
	       VKG_TEST_SHADER_DIR, kernels, n, VKG_TEST_DTYPES);
	assert_true(kernels >= 2);
	assert_int_equal(kreg_count, n);
	unsigned names = 0;
	for (unsigned i = 0; i < kreg_count; i++) {
		bool first = true;
		for (unsigned j = 0; j < i && first; j++)
			first = strcmp(kreg_entries[i].name, kreg_entries[j].name) != 0;
		names += first;
	}
	assert_int_equal(names, kernels);
	for (unsigned i = 0; i < n; i++) {
		const kreg_entry *e = kreg_find(w[i].name, w[i].dtype, w[i].variant);
		if (!e)
			fail_msg("%s (%s, %s) is not in the registry", w[i].name, w[i].dtype,
				 w[i].variant);
		assert_string_equal(e->domain, w[i].domain);
		assert_string_equal(e->status, w[i].status);
	}
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
		/* one name per variant: what hello lists, a request may force
		 * (bench_peak: `vkgrad bench --peak`'s microkernels, which no
		 * request reaches and hello never lists) */
		if (strcmp(e->domain, "bench_peak") == 0) {
			assert_int_equal(proto_variant_parse(e->variant), -1);
			continue;
		}
		/* linear_forward: linear_forward_prep, the one kernel of its own
		 * (its GEMMs are linear_backward's) */
		if (strcmp(e->domain, "linear_forward") == 0)
			assert_string_equal(e->name, "linear_forward_prep");
		else if (strcmp(e->domain, "linear_activation") == 0)
			assert_string_equal(e->name, "linear_activation"); /* the fused activations */
		else if (strcmp(e->domain, "optim") == 0)
			assert_string_equal(e->name, "optim_step"); /* sgd_step, adam_step */
		else
			assert_string_equal(e->domain, "linear_backward");
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
		cmocka_unit_test(test_counts_match_the_shaders),
		cmocka_unit_test(test_expected_kernels),
		cmocka_unit_test(test_every_entry_valid),
		cmocka_unit_test(test_no_duplicates),
		cmocka_unit_test(test_find_misses),
	};
	return cmocka_run_group_tests_name("kernel_registry", tests, NULL, NULL);
}
