/* client/cli_task.c — one linear_backward job of the CLI: its region, its
 * deterministic inputs (stored as f32, f16 or bf16) and its check against the
 * float64 reference, full or sampled. */
#include "cli.h"

#include "ref.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Offsets are 256-aligned, comfortably above any device's storage-buffer
 * offset alignment, so the layout also suits a daemon that binds ranges. */
#define CLI_ALIGN 256u

static const char *const slot_name[CLI_NT] = {"x", "dy", "w", "dw", "db", "dx"};

uint64_t cli_task_elems(const cli_task *t, int slot)
{
	switch (slot) {
	case CLI_X:
	case CLI_DX: return t->batch * t->in;
	case CLI_DY: return t->batch * t->out;
	case CLI_W:
	case CLI_DW: return t->out * t->in;
	case CLI_DB: return t->out;
	default: return 0;
	}
}

uint64_t cli_task_bytes(const cli_task *t, int slot)
{
	return cli_task_elems(t, slot) * proto_dtype_size(t->dtype);
}

void *cli_task_ptr(const cli_task *t, int slot)
{
	return t->mem && t->present[slot] ? t->mem + t->off[slot] : NULL;
}

int cli_task_init(cli_task *t, uint64_t batch, uint64_t in, uint64_t out, unsigned outputs,
		  bool accumulate, proto_dtype dtype, char *why, size_t why_len)
{
	memset(t, 0, sizeof(*t));
	t->batch = batch;
	t->in = in;
	t->out = out;
	t->outputs = outputs;
	t->accumulate = accumulate;
	t->dtype = dtype;
	const unsigned esize = proto_dtype_size(dtype);
	t->present[CLI_X] = t->present[CLI_DY] = true;
	t->present[CLI_W] = t->present[CLI_DX] = (outputs & CLI_OUT_DX) != 0;
	t->present[CLI_DW] = (outputs & CLI_OUT_DW) != 0;
	t->present[CLI_DB] = (outputs & CLI_OUT_DB) != 0;
	uint64_t pos = 0;
	for (int s = 0; s < CLI_NT; s++) {
		if (!t->present[s])
			continue;
		uint64_t a = (s == CLI_DB) ? 1 : (s == CLI_W || s == CLI_DW) ? out : batch;
		uint64_t b = (s == CLI_DY || s == CLI_DB) ? out : in;
		uint64_t n, bytes;
		if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, esize, &bytes) ||
		    __builtin_add_overflow(pos, bytes, &pos) || pos > (uint64_t)SIZE_MAX / 2) {
			snprintf(why, why_len, "tensor %s of %llu×%llu×%llu is too large", slot_name[s],
				 (unsigned long long)batch, (unsigned long long)in,
				 (unsigned long long)out);
			return -1;
		}
		t->off[s] = (size_t)(pos - bytes);
		pos = (pos + CLI_ALIGN - 1) / CLI_ALIGN * CLI_ALIGN;
	}
	t->size = (size_t)pos;
	return 0;
}

int cli_task_map(cli_task *t, vkg_client *c, vkg_error *err)
{
	void *p = vkg_region_create(c, t->size, &t->region, err);
	if (!p)
		return -1;
	t->mem = p;
	return 0;
}

/* splitmix64: tiny, fast and the same on every platform. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_slot(cli_task *t, int slot, uint64_t seed)
{
	uint8_t *p = cli_task_ptr(t, slot);
	if (!p)
		return;
	uint64_t s = seed * 0x100000001b3ull + (uint64_t)slot * 0x2545f4914f6cdd1dull;
	const uint64_t n = cli_task_elems(t, slot);
	const unsigned esize = proto_dtype_size(t->dtype);
	/* k / 2^23 for a random 24-bit k - 2^23: exact in f32, in [-1, 1);
	 * rounded to the dtype in chunks (the f32 values are the same in every
	 * dtype, so a seed means the same inputs up to rounding) */
	float chunk[1024];
	for (uint64_t i = 0; i < n;) {
		size_t m = n - i < 1024 ? (size_t)(n - i) : 1024;
		for (size_t k = 0; k < m; k++)
			chunk[k] = (float)((int64_t)(rng_next(&s) >> 40) - 8388608) * 0x1p-23f;
		vkg_ref_store(t->dtype, p + i * esize, chunk, m);
		i += m;
	}
}

void cli_task_fill_inputs(cli_task *t, uint64_t seed)
{
	fill_slot(t, CLI_X, seed);
	fill_slot(t, CLI_DY, seed);
	fill_slot(t, CLI_W, seed);
}

void cli_task_fill_outputs(cli_task *t, uint64_t seed)
{
	fill_slot(t, CLI_DW, seed);
	fill_slot(t, CLI_DB, seed);
	fill_slot(t, CLI_DX, seed);
}

void cli_task_poison_outputs(cli_task *t)
{
	for (int s = CLI_DW; s <= CLI_DX; s++)
		if (t->mem && t->present[s])
			memset(cli_task_ptr(t, s), 0xff, (size_t)cli_task_bytes(t, s));
}

int cli_task_snapshot(cli_task *t)
{
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		if (!t->present[s] || !t->accumulate)
			continue;
		uint64_t n = cli_task_elems(t, s);
		if (!t->base[s] && !(t->base[s] = malloc(n * sizeof(double))))
			return -ENOMEM;
		const void *p = cli_task_ptr(t, s);
		for (uint64_t i = 0; i < n; i++)
			t->base[s][i] = vkg_ref_load_one(t->dtype, p, i);
	}
	return 0;
}

/* The tensor as floats: the mapping itself for f32, else a widened copy
 * (*copy set, for the caller to free). NULL when out of memory. */
static const float *as_floats(const cli_task *t, int slot, float **copy)
{
	*copy = NULL;
	const void *p = cli_task_ptr(t, slot);
	if (!p || t->dtype == PROTO_F32)
		return p;
	const uint64_t n = cli_task_elems(t, slot);
	if (!(*copy = malloc((n ? n : 1) * sizeof(float))))
		return NULL;
	vkg_ref_load(t->dtype, *copy, p, (size_t)n);
	return *copy;
}

static void drop_reference(cli_task *t)
{
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		free(t->ref[s]);
		free(t->sample[s]);
		t->ref[s] = NULL;
		t->sample[s] = NULL;
		t->nsample[s] = 0;
	}
}

int cli_task_reference(cli_task *t)
{
	for (int s = CLI_DW; s <= CLI_DX; s++)
		if (t->sample[s]) {
			drop_reference(t); /* a sampled one, replaced by the full one */
			break;
		}
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		if (!t->present[s] || t->ref[s])
			continue;
		if (!(t->ref[s] = malloc(cli_task_elems(t, s) * sizeof(double))))
			return -ENOMEM;
	}
	/* the reference sees exactly the stored (rounded) inputs */
	float *copy[3];
	const float *x = as_floats(t, CLI_X, &copy[0]);
	const float *dy = as_floats(t, CLI_DY, &copy[1]);
	const float *w = as_floats(t, CLI_W, &copy[2]);
	int rc = 0;
	if (!x || !dy || (t->present[CLI_W] && !w))
		rc = -ENOMEM;
	else
		vkg_ref_linear_backward(t->batch, t->in, t->out, x, dy, w, t->ref[CLI_DW],
					t->ref[CLI_DB], t->ref[CLI_DX]);
	for (int i = 0; i < 3; i++)
		free(copy[i]);
	return rc;
}

/* n distinct indices in [0, total), sorted (memory order for the loads),
 * all of them when total <= n. NULL when out of memory. */
static uint64_t *pick_indices(uint64_t total, size_t *n, uint64_t seed)
{
	if (total <= *n) {
		*n = (size_t)total;
		uint64_t *v = malloc((*n ? *n : 1) * sizeof(*v));
		for (size_t i = 0; v && i < *n; i++)
			v[i] = i;
		return v;
	}
	uint64_t *v = malloc(*n * sizeof(*v));
	if (!v)
		return NULL;
	uint64_t s = seed;
	/* n is tiny against total: draw, and redraw the rare repeat */
	for (size_t i = 0; i < *n;) {
		uint64_t k = rng_next(&s) % total;
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = v[j] == k;
		if (!seen)
			v[i++] = k;
	}
	for (size_t i = 1; i < *n; i++) /* insertion sort: n is a few hundred */
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			uint64_t tmp = v[j];
			v[j] = v[j - 1];
			v[j - 1] = tmp;
		}
	return v;
}

int cli_task_reference_sampled(cli_task *t, size_t n, uint64_t seed)
{
	drop_reference(t);
	const proto_dtype d = t->dtype;
	const void *x = cli_task_ptr(t, CLI_X), *dy = cli_task_ptr(t, CLI_DY),
		   *w = cli_task_ptr(t, CLI_W);
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		if (!t->present[s])
			continue;
		size_t m = s == CLI_DB ? (size_t)t->out : n; /* db: every element */
		if (!(t->sample[s] = pick_indices(cli_task_elems(t, s), &m, seed + (uint64_t)s)) ||
		    !(t->ref[s] = malloc((m ? m : 1) * sizeof(double)))) {
			drop_reference(t);
			return -ENOMEM;
		}
		t->nsample[s] = m;
		if (s == CLI_DX) { /* dx[b][i] = sum_o dy[b][o] w[o][i]: out terms each */
			for (size_t k = 0; k < m; k++) {
				const uint64_t b = t->sample[s][k] / t->in, i = t->sample[s][k] % t->in;
				double acc = 0;
				for (uint64_t o = 0; o < t->out; o++)
					acc += vkg_ref_load_one(d, dy, b * t->out + o) *
					       vkg_ref_load_one(d, w, o * t->in + i);
				t->ref[s][k] = acc;
			}
		}
	}
	/* dW's samples (dw[o][i] = sum_b dy[b][o] x[b][i]) and db (db[o] =
	 * sum_b dy[b][o]) in one pass over the batch, row after row: each sum
	 * in the order of the full reference, the rows read once in memory
	 * order (a pass per sample read every row's cache lines again: about
	 * 10 s per 1M-row shape) */
	double *rw = t->present[CLI_DW] ? t->ref[CLI_DW] : NULL, *rb = t->present[CLI_DB] ? t->ref[CLI_DB] : NULL;
	const size_t nw = rw ? t->nsample[CLI_DW] : 0, nb = rb ? t->nsample[CLI_DB] : 0;
	uint64_t *col = malloc((nw ? nw : 1) * 2 * sizeof(*col)); /* dW sample k: dy's column, x's */
	if (!col) {
		drop_reference(t);
		return -ENOMEM;
	}
	for (size_t k = 0; k < nw; k++) {
		rw[k] = 0;
		col[2 * k] = t->sample[CLI_DW][k] / t->in;
		col[2 * k + 1] = t->sample[CLI_DW][k] % t->in;
	}
	for (size_t k = 0; k < nb; k++)
		rb[k] = 0;
	const float *xf = x, *dyf = dy; /* f32: the loads without a conversion */
	for (uint64_t b = 0; b < t->batch && (nw || nb); b++) {
		if (d == PROTO_F32)
			for (size_t k = 0; k < nw; k++)
				rw[k] += (double)dyf[b * t->out + col[2 * k]] * (double)xf[b * t->in + col[2 * k + 1]];
		else
			for (size_t k = 0; k < nw; k++)
				rw[k] += vkg_ref_load_one(d, dy, b * t->out + col[2 * k]) *
					 vkg_ref_load_one(d, x, b * t->in + col[2 * k + 1]);
		for (size_t k = 0; k < nb; k++)
			rb[k] += vkg_ref_load_one(d, dy, b * t->out + t->sample[CLI_DB][k]);
	}
	free(col);
	return 0;
}

double cli_task_check(cli_task *t)
{
	double worst = 0;
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		t->err[s] = 0;
		if (!t->present[s] || !t->ref[s])
			continue;
		const void *p = cli_task_ptr(t, s);
		const double *base = t->accumulate ? t->base[s] : NULL;
		if (t->sample[s]) {
			/* the same normwise error, over the sampled elements */
			double max_diff = 0, max_ref = 0;
			for (size_t k = 0; k < t->nsample[s]; k++) {
				const uint64_t e = t->sample[s][k];
				const double want = t->ref[s][k] + (base ? base[e] : 0.0);
				const double got = vkg_ref_load_one(t->dtype, p, e);
				if (!isfinite(got)) {
					max_diff = INFINITY;
					break;
				}
				if (fabs(got - want) > max_diff)
					max_diff = fabs(got - want);
				if (fabs(want) > max_ref)
					max_ref = fabs(want);
			}
			t->err[s] = max_ref > 0 ? max_diff / max_ref : max_diff;
		} else {
			float *copy;
			const float *got = as_floats(t, s, &copy);
			t->err[s] = got ? vkg_ref_max_rel_err(got, t->ref[s], base, cli_task_elems(t, s))
					: INFINITY; /* out of memory: cannot vouch for it */
			free(copy);
		}
		/* written so that a NaN error also counts as the worst */
		if (!(t->err[s] <= worst))
			worst = t->err[s];
	}
	return worst;
}

vkg_job cli_task_job(const cli_task *t)
{
	vkg_job j = vkg_job_init();
	j.dtype = proto_dtype_name(t->dtype);
	j.batch = t->batch;
	j.in = t->in;
	j.out = t->out;
	j.accumulate = t->accumulate;
	j.variant = t->variant;
	vkg_tensor *slot[CLI_NT] = {&j.x, &j.dy, &j.w, &j.dw, &j.db, &j.dx};
	for (int s = 0; s < CLI_NT; s++)
		if (t->present[s])
			*slot[s] = (vkg_tensor){.region = t->region, .offset = t->off[s]};
	return j;
}

void cli_task_free(cli_task *t, vkg_client *c)
{
	if (t->mem && c)
		vkg_region_destroy(c, t->region, t->mem, t->size, NULL);
	t->mem = NULL;
	drop_reference(t);
	for (int s = 0; s < CLI_NT; s++) {
		free(t->base[s]);
		t->base[s] = NULL;
	}
}

int cli_outputs_parse(const char *s, unsigned *mask)
{
	*mask = 0;
	const char *p = s;
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n == 2 && memcmp(p, "dw", 2) == 0)
			*mask |= CLI_OUT_DW;
		else if (n == 2 && memcmp(p, "db", 2) == 0)
			*mask |= CLI_OUT_DB;
		else if (n == 2 && memcmp(p, "dx", 2) == 0)
			*mask |= CLI_OUT_DX;
		else
			return -1;
		p += n;
		if (*p == ',')
			p++;
	}
	return *mask ? 0 : -1;
}

const char *cli_outputs_name(unsigned mask, char buf[16])
{
	buf[0] = 0;
	if (mask & CLI_OUT_DW)
		strcat(buf, "dw,");
	if (mask & CLI_OUT_DB)
		strcat(buf, "db,");
	if (mask & CLI_OUT_DX)
		strcat(buf, "dx,");
	size_t n = strlen(buf);
	if (n)
		buf[n - 1] = 0;
	return buf;
}
