/* bench/peak_copy.c — see peak_copy.h. */
#include "peak_copy.h"
#include "peak_ref.h"

#include "kiface.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SMS 132 /* a GPU that does not say how many SMs it has: as many as an H200's */

const char *peak_copy_way_name(int w)
{
	return w == PEAK_COPY_DMA ? "dma" : "shader";
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The shader's workgroups for n elements: enough to fill the device (per
 * SM), no more than one trip of the loop needs, and few enough that
 * UNROLL · all invocations stays below 2^32 (the shader's index). */
static uint32_t copy_groups(const peak_vk *v, uint64_t n)
{
	const uint64_t per_group = (uint64_t)VKG_PEAK_COPY_WG * VKG_PEAK_COPY_UNROLL;
	const uint64_t sms = v->sm_count ? v->sm_count : v->cpu ? 2 : DEFAULT_SMS;
	uint64_t g = sms * PEAK_COPY_WGS_PER_SM;
	const uint64_t need = (n + per_group - 1) / per_group;
	const uint64_t wrap = ((1ull << 32) - 1) / per_group;
	const uint64_t cap = v->dev.props.limits.maxComputeWorkGroupCount[0];
	g = g < need ? g : need;
	g = g < wrap ? g : wrap;
	g = g < cap ? g : cap;
	return (uint32_t)(g ? g : 1);
}

typedef struct copy_ctx {
	peak_vk *v;
	peak_buf src, dst;
	peak_pipe pipe;
	uint64_t bytes;
	size_t probe;      /* bytes read back at each end */
	uint8_t *back;
	double *us;
} copy_ctx;

/* One copy of way w, *us its GPU time. */
static int copy_once(copy_ctx *c, int w, const peak_copy_result *out, double *us, char *err, size_t errlen)
{
	if (w == PEAK_COPY_DMA)
		return peak_copy(c->v, &c->src, &c->dst, c->bytes, us, err, errlen);
	peak_buf *bufs[2] = {&c->src, &c->dst};
	const kiface_peak_copy push = {.n = (uint32_t)(c->bytes / 16)};
	return peak_dispatch(c->v, &c->pipe, bufs, &push, out->groups, us, err, errlen);
}

/* Way w: dst zeroed, a warm-up, reps timed, both ends read back. */
static int measure_way(copy_ctx *c, int w, peak_copy_result *out, char *err, size_t errlen)
{
	peak_copy_way *r = &out->way[w];
	double warm;
	if (peak_buf_fill(c->v, &c->dst, 0, err, errlen) != 0 || copy_once(c, w, out, &warm, err, errlen) != 0)
		return -1;
	for (unsigned i = 0; i < out->reps; i++)
		if (copy_once(c, w, out, &c->us[i], err, errlen) != 0)
			return -1;
	qsort(c->us, out->reps, sizeof(double), cmp_double);
	const unsigned n = out->reps;
	r->med_us = n % 2 ? c->us[n / 2] : (c->us[n / 2 - 1] + c->us[n / 2]) / 2;
	r->min_us = c->us[0];
	r->gbps = r->med_us > 0 ? 2.0 * (double)c->bytes / r->med_us / 1e3 : 0;
	r->best_gbps = r->min_us > 0 ? 2.0 * (double)c->bytes / r->min_us / 1e3 : 0;
	r->bad_bytes = 0;
	const uint64_t ends[2] = {0, c->bytes - c->probe};
	for (int e = 0; e < 2; e++) {
		size_t first;
		if (peak_buf_download(c->v, &c->dst, ends[e], c->back, c->probe, err, errlen) != 0)
			return -1;
		r->bad_bytes += peak_copy_check(ends[e], c->back, c->probe, &first);
	}
	r->ok = r->bad_bytes == 0;
	return 0;
}

/* The source's pattern at both ends (the bytes between are never read back). */
static int fill_source(copy_ctx *c, char *err, size_t errlen)
{
	const uint64_t ends[2] = {0, c->bytes - c->probe};
	for (int e = 0; e < 2; e++) {
		peak_copy_pattern(ends[e], c->back, c->probe);
		if (peak_buf_upload(c->v, &c->src, ends[e], c->back, c->probe, err, errlen) != 0)
			return -1;
	}
	return 0;
}

int peak_copy_measure(peak_vk *v, uint64_t bytes, unsigned reps, peak_copy_result *out, char *err,
		      size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!bytes)
		bytes = v->cpu ? PEAK_COPY_CPU_BYTES : PEAK_COPY_GPU_BYTES;
	if (bytes % 16 || bytes < 32 || bytes / 16 > UINT32_MAX) {
		snprintf(err, errlen, "a copy of %" PRIu64 " bytes: the copy takes a multiple of 16 bytes from 32 "
			 "to 16 x (2^32 - 1) (the shader's 16-byte elements counted in 32 bits)", bytes);
		return -1;
	}
	const kreg_entry *e = kreg_find("bench_peak_copy", "f32", "copy");
	if (!e) {
		snprintf(err, errlen, "bench_peak_copy, which this build left out");
		return -1;
	}
	out->bytes = bytes;
	out->reps = reps < 1 ? 1 : reps;
	out->groups = copy_groups(v, bytes / 16);
	copy_ctx c = {.v = v, .bytes = bytes};
	/* each end's probe: up to the staging size, half the buffer at most, whole elements */
	const uint64_t half = bytes / 2;
	c.probe = (size_t)((v->stage_size < half ? v->stage_size : half) & ~(uint64_t)15);
	c.us = calloc(out->reps, sizeof(double));
	c.back = malloc(c.probe);
	int rc = c.us && c.back ? 0 : -1;
	if (rc)
		snprintf(err, errlen, "out of memory");
	if (rc == 0)
		rc = peak_pipe_create(v, &c.pipe, e, VKG_BINDINGS_PEAK_COPY, sizeof(kiface_peak_copy), NULL, err,
				      errlen);
	if (rc == 0)
		rc = peak_buf_create(v, &c.src, bytes, err, errlen);
	if (rc == 0)
		rc = peak_buf_create(v, &c.dst, bytes, err, errlen);
	if (rc == 0)
		rc = fill_source(&c, err, errlen);
	for (int w = 0; w < PEAK_COPY_WAYS && rc == 0; w++)
		rc = measure_way(&c, w, out, err, errlen);
	if (rc == 0) {
		const peak_copy_way *d = &out->way[PEAK_COPY_DMA], *s = &out->way[PEAK_COPY_SHADER];
		out->best = s->gbps > d->gbps ? PEAK_COPY_SHADER : PEAK_COPY_DMA;
		const peak_copy_way *b = &out->way[out->best];
		out->med_us = b->med_us;
		out->min_us = b->min_us;
		out->gbps = b->gbps;
		out->best_gbps = b->best_gbps;
		out->ok = d->ok && s->ok;
	}
	peak_buf_destroy(v, &c.src);
	peak_buf_destroy(v, &c.dst);
	if (c.pipe.pipe || c.pipe.layout || c.pipe.dsl)
		peak_pipe_destroy(v, &c.pipe);
	free(c.us);
	free(c.back);
	return rc;
}
