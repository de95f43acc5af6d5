/* client/cli_task.c — one linear_backward job of the CLI: its region, its
 * deterministic inputs and its check against the float64 reference. */
#include "cli.h"

#include "ref.h"

#include <errno.h>
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

float *cli_task_ptr(const cli_task *t, int slot)
{
	return t->mem && t->present[slot] ? (float *)(t->mem + t->off[slot]) : NULL;
}

int cli_task_init(cli_task *t, uint64_t batch, uint64_t in, uint64_t out, unsigned outputs,
		  bool accumulate, char *why, size_t why_len)
{
	memset(t, 0, sizeof(*t));
	t->batch = batch;
	t->in = in;
	t->out = out;
	t->outputs = outputs;
	t->accumulate = accumulate;
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
		if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, 4u, &bytes) ||
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
	float *p = cli_task_ptr(t, slot);
	if (!p)
		return;
	uint64_t s = seed * 0x100000001b3ull + (uint64_t)slot * 0x2545f4914f6cdd1dull;
	uint64_t n = cli_task_elems(t, slot);
	/* k / 2^23 for a random 24-bit k - 2^23: exact in f32, in [-1, 1). */
	for (uint64_t i = 0; i < n; i++)
		p[i] = (float)((int64_t)(rng_next(&s) >> 40) - 8388608) * 0x1p-23f;
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

int cli_task_snapshot(cli_task *t)
{
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		if (!t->present[s] || !t->accumulate)
			continue;
		uint64_t n = cli_task_elems(t, s);
		if (!t->base[s] && !(t->base[s] = malloc(n * sizeof(double))))
			return -ENOMEM;
		const float *p = cli_task_ptr(t, s);
		for (uint64_t i = 0; i < n; i++)
			t->base[s][i] = p[i];
	}
	return 0;
}

int cli_task_reference(cli_task *t)
{
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		if (!t->present[s] || t->ref[s])
			continue;
		if (!(t->ref[s] = malloc(cli_task_elems(t, s) * sizeof(double))))
			return -ENOMEM;
	}
	vkg_ref_linear_backward(t->batch, t->in, t->out, cli_task_ptr(t, CLI_X),
				cli_task_ptr(t, CLI_DY), cli_task_ptr(t, CLI_W), t->ref[CLI_DW],
				t->ref[CLI_DB], t->ref[CLI_DX]);
	return 0;
}

double cli_task_check(cli_task *t)
{
	double worst = 0;
	for (int s = CLI_DW; s <= CLI_DX; s++) {
		t->err[s] = 0;
		if (!t->present[s] || !t->ref[s])
			continue;
		t->err[s] = vkg_ref_max_rel_err(cli_task_ptr(t, s), t->ref[s],
						t->accumulate ? t->base[s] : NULL,
						cli_task_elems(t, s));
		/* written so that a NaN error also counts as the worst */
		if (!(t->err[s] <= worst))
			worst = t->err[s];
	}
	return worst;
}

vkg_job cli_task_job(const cli_task *t)
{
	vkg_job j = vkg_job_init();
	j.dtype = "f32";
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
	for (int s = 0; s < CLI_NT; s++) {
		free(t->ref[s]);
		free(t->base[s]);
		t->ref[s] = t->base[s] = NULL;
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
