/* bench/peak_copy.c — see peak_copy.h. */
#include "peak_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int peak_copy_measure(peak_vk *v, uint64_t bytes, unsigned reps, peak_copy_result *out, char *err,
		      size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!bytes)
		bytes = v->cpu ? PEAK_COPY_CPU_BYTES : PEAK_COPY_GPU_BYTES;
	if (reps < 1)
		reps = 1;
	peak_buf src = {0}, dst = {0};
	double *us = calloc(reps, sizeof(double));
	const size_t probe = v->stage_size < bytes ? (size_t)v->stage_size : (size_t)bytes;
	uint8_t *pat = malloc(probe), *back = malloc(probe);
	int rc = us && pat && back ? 0 : -1;
	if (rc)
		snprintf(err, errlen, "out of memory");
	if (rc == 0)
		rc = peak_buf_create(v, &src, bytes, err, errlen);
	if (rc == 0)
		rc = peak_buf_create(v, &dst, bytes, err, errlen);
	if (rc == 0) {
		for (size_t i = 0; i < probe; i++)
			pat[i] = (uint8_t)(i * 131u + (i >> 11));
		rc = peak_buf_upload(v, &src, pat, probe, err, errlen);
	}
	double warm;
	if (rc == 0)
		rc = peak_copy(v, &src, &dst, bytes, &warm, err, errlen);
	for (unsigned r = 0; r < reps && rc == 0; r++)
		rc = peak_copy(v, &src, &dst, bytes, &us[r], err, errlen);
	if (rc == 0)
		rc = peak_buf_download(v, &dst, 0, back, probe, err, errlen);
	if (rc == 0) {
		qsort(us, reps, sizeof(double), cmp_double);
		out->bytes = bytes;
		out->reps = reps;
		out->med_us = reps % 2 ? us[reps / 2] : (us[reps / 2 - 1] + us[reps / 2]) / 2;
		out->min_us = us[0];
		out->gbps = out->med_us > 0 ? 2.0 * (double)bytes / out->med_us / 1e3 : 0;
		out->best_gbps = out->min_us > 0 ? 2.0 * (double)bytes / out->min_us / 1e3 : 0;
		out->ok = memcmp(pat, back, probe) == 0;
	}
	peak_buf_destroy(v, &src);
	peak_buf_destroy(v, &dst);
	free(us);
	free(pat);
	free(back);
	return rc;
}
