/* tests/unit/test_spirv.c — daemon/gpu/spirv.h: each built kernel's SPIR-V
 * declares exactly the interface shaders/iface/kernels.h gives it (the
 * bindings its layout has, the push-constant block dispatch.c pushes), and
 * a kernel that does not fit, or words that are not SPIR-V, are refused
 * with a message naming the mismatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "kernel_registry.h"
#include "kiface.h"
#include "spirv.h"

/* What the daemon binds and pushes for each kernel (pipelines.c kern_desc),
 * spelled out from the interface header once more. */
static const struct {
	const char *name;
	uint32_t bindings, push_bytes;
} want[] = {
	{"linear_parameter_backward", VKG_BINDINGS_PARAM, sizeof(kiface_param)},
	{"linear_input_backward", VKG_BINDINGS_INPUT, sizeof(kiface_input)},
	{"linear_splitk_reduce", VKG_BINDINGS_REDUCE, sizeof(kiface_reduce)},
	{"linear_tiled_gemm", VKG_BINDINGS_GEMM_SUMS, sizeof(kiface_gemm)},
	{"linear_splitk_gemm", VKG_BINDINGS_GEMM_SUMS, sizeof(kiface_gemm)},
	{"linear_tiled128_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm)},
	{"linear_splitk128_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm)},
	{"linear_coopmat_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm)},
	{"linear_coopmat_khr_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm)},
	{"linear_coopmat_khr_dx_stream", VKG_BINDINGS_GEMM, sizeof(kiface_gemm)},
	{"linear_coopmat_nv2_gemm", VKG_BINDINGS_GEMM_SUMS, sizeof(kiface_gemm)},
	{"linear_coopmat_khr_f32x3_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm)},
	{"linear_coopmat_khr_splitk_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm_split)},
	{"linear_coopmat_khr_f32x3_splitk_gemm", VKG_BINDINGS_GEMM, sizeof(kiface_gemm_split)},
	{"linear_coopmat_khr_splitk_dx_gemm", VKG_BINDINGS_GEMM_SPLIT_DX, sizeof(kiface_gemm_split_dx)},
	{"linear_forward_prep", VKG_BINDINGS_PREP, sizeof(kiface_prep)},
	{"linear_activation", VKG_BINDINGS_ACT, sizeof(kiface_act)},
	{"optim_step", VKG_BINDINGS_OPTIM, sizeof(kiface_optim)},
	{"linear_narrow_param", VKG_BINDINGS_NARROW, sizeof(kiface_narrow)},
	{"linear_narrow_reduce", VKG_BINDINGS_REDUCE, sizeof(kiface_reduce)},
	{"linear_narrow_input", VKG_BINDINGS_NARROW_DX, sizeof(kiface_narrow_dx)},
	/* `vkgrad bench --peak` only (bench/peak_vk.c checks them the same way) */
	{"bench_peak_fma", VKG_BINDINGS_PEAK_FMA, sizeof(kiface_peak_fma)},
	{"bench_peak_mma", VKG_BINDINGS_PEAK_MMA, sizeof(kiface_peak_mma)},
	{"bench_peak_nv2", VKG_BINDINGS_PEAK_NV2, sizeof(kiface_peak_nv2)},
	{"bench_peak_copy", VKG_BINDINGS_PEAK_COPY, sizeof(kiface_peak_copy)},
};
#define NWANT (sizeof(want) / sizeof(want[0]))

static int want_of(const char *name)
{
	for (size_t i = 0; i < NWANT; i++)
		if (strcmp(want[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void test_every_kernel_matches_its_interface(void **state)
{
	(void)state;
	unsigned checked = 0;
	for (unsigned i = 0; i < kreg_count; i++) {
		const kreg_entry *e = &kreg_entries[i];
		const int w = want_of(e->name);
		if (w < 0)
			fail_msg("kernel %s has no interface in shaders/iface/kernels.h", e->name);
		spirv_iface f;
		char err[256] = "";
		if (spirv_iface_read(e->spirv, e->spirv_size / 4, &f, err, sizeof(err)) != 0)
			fail_msg("%s (%s): %s", e->name, e->dtype, err);
		/* no more than the recorder's push-descriptor arrays hold
		 * (grid.c: the fused dX kernel's sixth binding once tripped
		 * its assert on the H100) */
		if (want[w].bindings > VKG_BINDINGS_MAX)
			fail_msg("%s: %u bindings, more than VKG_BINDINGS_MAX %u", e->name, want[w].bindings,
				 VKG_BINDINGS_MAX);
		/* every binding of the layout used, none beyond it */
		if (f.binding_mask != (1u << want[w].bindings) - 1)
			fail_msg("%s (%s): bindings 0x%x, want %u", e->name, e->dtype, f.binding_mask,
				 want[w].bindings);
		if (f.push_bytes != want[w].push_bytes)
			fail_msg("%s (%s): %u push-constant bytes, want %u", e->name, e->dtype,
				 f.push_bytes, want[w].push_bytes);
		assert_int_equal(spirv_iface_check(e->spirv, e->spirv_size / 4, want[w].bindings,
						   want[w].push_bytes, e->name, err, sizeof(err)),
				 0);
		checked++;
	}
	assert_int_equal(checked, kreg_count);
}

static const kreg_entry *gemm(void)
{
	const kreg_entry *e = kreg_find("linear_tiled_gemm", "f32", NULL);
	assert_non_null(e);
	return e;
}

static void test_push_size_mismatch_refused(void **state)
{
	(void)state;
	const kreg_entry *e = gemm();
	char err[256] = "";
	assert_int_equal(spirv_iface_check(e->spirv, e->spirv_size / 4, VKG_BINDINGS_GEMM_SUMS,
					   sizeof(kiface_gemm) - 4, "linear_tiled_gemm", err,
					   sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "linear_tiled_gemm has 48 bytes of push constants, the daemon pushes 44"));
	assert_int_equal(spirv_iface_check(e->spirv, e->spirv_size / 4, VKG_BINDINGS_GEMM_SUMS,
					   sizeof(kiface_param), "x", err, sizeof(err)),
			 -1);
}

static void test_binding_beyond_layout_refused(void **state)
{
	(void)state;
	const kreg_entry *e = gemm();
	char err[256] = "";
	assert_int_equal(spirv_iface_check(e->spirv, e->spirv_size / 4, VKG_BINDINGS_GEMM_SUMS - 1,
					   sizeof(kiface_gemm), "linear_tiled_gemm", err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "binds storage buffers 0x1f, its layout has 4"));
}

static void test_not_spirv_refused(void **state)
{
	(void)state;
	spirv_iface f;
	char err[256] = "";
	const uint32_t junk[8] = {0x12345678, 1, 2, 3, 4, 5, 6, 7};
	assert_int_equal(spirv_iface_read(junk, 8, &f, err, sizeof(err)), -1);
	assert_string_equal(err, "not a SPIR-V module");
	assert_int_equal(spirv_iface_read(NULL, 0, &f, err, sizeof(err)), -1);
	assert_int_equal(spirv_iface_read(gemm()->spirv, 4, &f, err, sizeof(err)), -1);
	/* an instruction whose word count runs past the end */
	const kreg_entry *e = gemm();
	const size_t n = e->spirv_size / 4;
	uint32_t *w = malloc(e->spirv_size);
	assert_non_null(w);
	memcpy(w, e->spirv, e->spirv_size);
	w[5] = (w[5] & 0xffff) | (0xffffu << 16);
	assert_int_equal(spirv_iface_read(w, n, &f, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "runs past"));
	/* a zero word count */
	memcpy(w, e->spirv, e->spirv_size);
	w[5] &= 0xffff;
	assert_int_equal(spirv_iface_read(w, n, &f, err, sizeof(err)), -1);
	/* cut in the middle: still refused or read within bounds (ASan) */
	for (size_t cut = 5; cut < n; cut += 97)
		(void)spirv_iface_read(e->spirv, cut, &f, err, sizeof(err));
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_kernel_matches_its_interface),
		cmocka_unit_test(test_push_size_mismatch_refused),
		cmocka_unit_test(test_binding_beyond_layout_refused),
		cmocka_unit_test(test_not_spirv_refused),
	};
	return cmocka_run_group_tests_name("spirv", tests, NULL, NULL);
}
