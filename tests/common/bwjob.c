/* tests/common/bwjob.c — see bwjob.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwjob.h"
#include "ref.h"
#include "vkgrad.h"

enum { X = BWJOB_T_X, DY = BWJOB_T_DY, W = BWJOB_T_W, DW = BWJOB_T_DW, DB = BWJOB_T_DB, DX = BWJOB_T_DX,
       NT = BWJOB_NT };

const char *const bwjob_dtype[3] = {"f32", "f16", "bf16"};
const double bwjob_tol[3] = {VKG_REF_TOL_F32, VKG_REF_TOL_F16, VKG_REF_TOL_BF16};

static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(*s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* The normwise error of each output against vkg_ref_linear_backward. */
static void check_normwise(const bwjob_result *r, bwjob_outcome *oc, const void *ctx)
{
	(void)ctx;
	double *ref[NT] = {0};
	for (int t = DW; t < NT; t++)
		if (r->present[t]) {
			ref[t] = calloc(r->n[t], sizeof(double));
			assert_non_null(ref[t]);
		}
	vkg_ref_linear_backward(r->B, r->I, r->O, r->val[X], r->val[DY], r->val[W], ref[DW], ref[DB], ref[DX]);
	for (int t = DW; t < NT; t++) {
		if (!r->present[t])
			continue;
		double *based = r->acc ? malloc(r->n[t] * sizeof(double)) : NULL;
		if (based)
			for (uint64_t i = 0; i < r->n[t]; i++)
				based[i] = r->val[t][i];
		const double e = vkg_ref_max_rel_err(r->got[t], ref[t], based, r->n[t]);
		oc->err = e > oc->err || isnan(e) ? e : oc->err;
		free(based);
		free(ref[t]);
	}
}

bwjob_outcome bwjob_run(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			const char *variant, uint64_t seed, uint64_t skew, bool keep)
{
	return bwjob_run_checked(sock, dt, B, I, O, outs, acc, variant, seed, skew, keep, check_normwise, NULL);
}

bwjob_outcome bwjob_run_checked(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
				bool acc, const char *variant, uint64_t seed, uint64_t skew, bool keep,
				bwjob_checker check, const void *ctx)
{
	bwjob_outcome oc = {0};
	const size_t es = dt == 0 ? 4 : 2;
	const uint64_t n[NT] = {B * I, B * O, O * I, O * I, O, B * I};
	const bool present[NT] = {true, true, (outs & BWJOB_DX) != 0, (outs & BWJOB_DW) != 0, (outs & BWJOB_DB) != 0,
				  (outs & BWJOB_DX) != 0};
	size_t off[NT], size = 0;
	for (int t = 0; t < NT; t++) {
		off[t] = size + skew;
		size += (skew + n[t] * es + 255) / 256 * 256 + 256;
	}
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	assert_non_null(c);
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, size, &reg, &err);
	assert_non_null(m);
	for (size_t i = 0; i < size; i++) /* canaries: a position-dependent pattern */
		m[i] = (uint8_t)(0xa5u ^ (i * 131u) ^ (i >> 8));
	float *val[NT];
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int t = 0; t < NT; t++) {
		val[t] = malloc((n[t] ? n[t] : 1) * sizeof(float));
		assert_non_null(val[t]);
		if (!present[t] && t > W)
			continue; /* (its bytes stay canaries) */
		for (uint64_t i = 0; i < n[t]; i++)
			val[t][i] = (t <= W || acc) ? rnd(&s) : NAN; /* an overwrite must not read it */
		vkg_ref_store((proto_dtype)dt, m + off[t], val[t], n[t]);
		vkg_ref_load((proto_dtype)dt, val[t], m + off[t], n[t]); /* the stored values */
	}
	uint8_t *before = malloc(size);
	assert_non_null(before);
	memcpy(before, m, size);
	const vkg_job j = bwjob_region_job(bwjob_dtype[dt], variant, B, I, O, acc, reg, off, present);
	vkg_result r;
	if (vkg_linear_backward(c, &j, &r, &err) != 0) {
		oc.rc = -1;
		snprintf(oc.code, sizeof(oc.code), "%s", err.code);
		snprintf(oc.message, sizeof(oc.message), "%s", err.message);
	} else {
		float *got[NT] = {0};
		for (int t = DW; t < NT; t++)
			if (present[t]) {
				got[t] = malloc(n[t] * sizeof(float));
				assert_non_null(got[t]);
				vkg_ref_load((proto_dtype)dt, got[t], m + off[t], n[t]);
			}
		const bwjob_result res = {.B = B, .I = I, .O = O, .acc = acc,
					  .present = {present[0], present[1], present[2], present[3], present[4],
						      present[5]},
					  .n = {n[0], n[1], n[2], n[3], n[4], n[5]}, .val = val, .got = got};
		check(&res, &oc, ctx);
		for (int t = DW; t < NT; t++)
			free(got[t]);
	}
	/* every byte but the outputs' (the daemon's outputs only where the job
	 * succeeded) as before */
	for (size_t i = 0; i < size && !oc.why[0]; i++) {
		bool out = false;
		for (int t = DW; t < NT && oc.rc == 0; t++)
			out |= present[t] && i >= off[t] && i < off[t] + n[t] * es;
		if (!out && m[i] != before[i])
			snprintf(oc.why, sizeof(oc.why), "byte %zu of %zu (outside the outputs) changed", i, size);
	}
	if (keep) {
		oc.bytes = malloc(size);
		assert_non_null(oc.bytes);
		memcpy(oc.bytes, m, size);
		oc.nbytes = size;
	}
	free(before);
	for (int t = 0; t < NT; t++)
		free(val[t]);
	assert_int_equal(vkg_region_destroy(c, reg, m, size, &err), 0);
	vkg_close(c);
	return oc;
}

const char *bwjob_outs_name(unsigned o)
{
	static const char *const nm[8] = {"", "dw", "db", "dw,db", "dx", "dw,dx", "db,dx", "dw,db,dx"};
	return nm[o & 7];
}

/* A job that must succeed within tolerance, touching nothing else; 0 or 1
 * (printed) */
unsigned bwjob_check(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
		     const char *variant, uint64_t seed, uint64_t skew)
{
	return bwjob_check_checked(sock, dt, B, I, O, outs, acc, variant, seed, skew, check_normwise, NULL);
}

unsigned bwjob_check_checked(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
			     bool acc, const char *variant, uint64_t seed, uint64_t skew, bwjob_checker check,
			     const void *ctx)
{
	bwjob_outcome oc =
		bwjob_run_checked(sock, dt, B, I, O, outs, acc, variant, seed, skew, false, check, ctx);
	char what[128];
	snprintf(what, sizeof(what), "%s %llux%llux%llu %s%s skew %llu", bwjob_dtype[dt], (unsigned long long)B,
		 (unsigned long long)I, (unsigned long long)O, bwjob_outs_name(outs), acc ? " acc" : "",
		 (unsigned long long)skew);
	if (oc.rc != 0) {
		fprintf(stderr, "%s: %s: %s\n", what, oc.code, oc.message);
		return 1;
	}
	if (!(oc.err <= bwjob_tol[dt]) || oc.bound[0] || oc.why[0]) {
		fprintf(stderr, "%s: max_rel_err %.3g (tol %.0e)%s%s%s%s\n", what, oc.err, bwjob_tol[dt],
			oc.bound[0] ? "; " : "", oc.bound, oc.why[0] ? "; " : "", oc.why);
		return 1;
	}
	return 0;
}

vkg_job bwjob_region_job(const char *dtype, const char *variant, uint64_t B, uint64_t I, uint64_t O, bool acc,
			 uint64_t reg, const size_t off[BWJOB_NT], const bool present[BWJOB_NT])
{
	vkg_job j = vkg_job_init();
	j.dtype = dtype;
	j.variant = variant;
	j.batch = B, j.in = I, j.out = O;
	j.accumulate = acc;
	vkg_tensor *slot[BWJOB_NT] = {&j.x, &j.dy, &j.w, &j.dw, &j.db, &j.dx};
	for (int t = 0; t < BWJOB_NT; t++)
		if (present[t])
			slot[t]->region = reg, slot[t]->offset = off[t];
	return j;
}

unsigned bwjob_same_bits_checked(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs,
				 bool acc, const char *variant, uint64_t seed, uint64_t skew, bwjob_checker check,
				 const void *ctx)
{
	bwjob_outcome a = bwjob_run_checked(sock, dt, B, I, O, outs, acc, variant, seed, skew, true, check, ctx);
	bwjob_outcome b = bwjob_run_checked(sock, dt, B, I, O, outs, acc, variant, seed, skew, true, check, ctx);
	char what[160];
	snprintf(what, sizeof(what), "%s %llux%llux%llu %s%s on %s", bwjob_dtype[dt], (unsigned long long)B,
		 (unsigned long long)I, (unsigned long long)O, bwjob_outs_name(outs), acc ? " acc" : "",
		 variant ? variant : "auto");
	unsigned failed = 1;
	if (a.rc != 0 || b.rc != 0)
		fprintf(stderr, "%s: %s: %s\n", what, a.rc ? a.code : b.code, a.rc ? a.message : b.message);
	else if (!(a.err <= bwjob_tol[dt]) || a.bound[0] || a.why[0])
		fprintf(stderr, "%s: max_rel_err %.3g (tol %.0e)%s%s%s%s\n", what, a.err, bwjob_tol[dt],
			a.bound[0] ? "; " : "", a.bound, a.why[0] ? "; " : "", a.why);
	else if (a.nbytes != b.nbytes || memcmp(a.bytes, b.bytes, a.nbytes) != 0)
		fprintf(stderr, "%s: two runs gave different bytes\n", what);
	else
		failed = 0;
	free(a.bytes);
	free(b.bytes);
	return failed;
}

unsigned bwjob_same_bits(const char *sock, int dt, uint64_t B, uint64_t I, uint64_t O, unsigned outs, bool acc,
			 const char *variant, uint64_t seed, uint64_t skew)
{
	return bwjob_same_bits_checked(sock, dt, B, I, O, outs, acc, variant, seed, skew, check_normwise, NULL);
}

int bwjob_offered(const char *sock, const char *client, const char *kernel, const char *variant,
		  unsigned dtypes, bool offered[3], char *device, size_t n)
{
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	vkg_info info;
	if (!c)
		return -1;
	if (vkg_hello(c, client, &info, &err) != 0) {
		vkg_close(c);
		return -1;
	}
	snprintf(device, n, "%s", info.device_name);
	offered[0] = offered[1] = offered[2] = false;
	int rc = 0;
	for (unsigned i = 0; i < info.n_kernels && rc == 0; i++) {
		vkg_kernel_info k;
		if (vkg_info_kernel(c, i, &k) != 0) {
			rc = -1;
			break;
		}
		if (strcmp(k.name, kernel) != 0)
			continue;
		int dt = 0;
		while (dt < 3 && strcmp(k.dtype, bwjob_dtype[dt]) != 0)
			dt++;
		if (strcmp(k.variant, variant) != 0 || dt == 3 || !(dtypes & (1u << dt)))
			rc = -1;
		else
			offered[dt] = true;
	}
	vkg_close(c);
	return rc;
}

int bwjob_offered_16bit(const char *sock, const char *client, const char *kernel, const char *variant,
			bool offered[3], char *device, size_t n)
{
	if (bwjob_offered(sock, client, kernel, variant, BWJOB_16BIT_ONLY, offered, device, n) != 0)
		return -1;
	printf("%s on %s: f16 %s, bf16 %s\n", kernel, device, offered[PROTO_F16] ? "offered" : "absent",
	       offered[PROTO_BF16] ? "offered" : "absent");
	return 0;
}
