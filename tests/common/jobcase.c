/* tests/common/jobcase.c — see jobcase.h. */
#include "jobcase.h"

#include "ref.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JC_WAIT_MS 120000

static const char *const slot_name[PROTO_T_BACKWARD_COUNT] = {"x", "dy", "w", "dw", "db", "dx"};

static bool is_output(int t)
{
	return t == PROTO_T_DW || t == PROTO_T_DB || t == PROTO_T_DX;
}

static uint64_t slot_elems(const jobcase *jc, int t)
{
	switch (t) {
	case PROTO_T_X:
	case PROTO_T_DX: return jc->batch * jc->in;
	case PROTO_T_DY: return jc->batch * jc->out;
	case PROTO_T_W:
	case PROTO_T_DW: return jc->out * jc->in;
	default: return jc->out; /* db */
	}
}

bool jobcase_names(const jobcase *jc, int t)
{
	switch (t) {
	case PROTO_T_X:
	case PROTO_T_DY: return true;
	case PROTO_T_W: return (jc->outputs & JC_DX) || jc->pass_w;
	case PROTO_T_DW: return jc->outputs & JC_DW;
	case PROTO_T_DB: return jc->outputs & JC_DB;
	default: return jc->outputs & JC_DX;
	}
}

void jobcase_init(jobcase *jc, uint64_t batch, uint64_t in, uint64_t out, unsigned outputs,
		  bool accumulate)
{
	memset(jc, 0, sizeof(*jc));
	jc->batch = batch;
	jc->in = in;
	jc->out = out;
	jc->outputs = outputs;
	jc->accumulate = accumulate;
	jc->nregions = 1;
	jobcase_layout(jc);
}

void jobcase_layout(jobcase *jc)
{
	uint64_t cursor[2] = {JC_GAP, JC_GAP}; /* where the next slot may start */
	bool first[2] = {true, true};
	jc->size[0] = jc->size[1] = 0;
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
		unsigned r = (jc->nregions == 2 && is_output(t)) ? 1 : 0;
		uint64_t off;
		if (jc->packed)
			off = first[r] ? cursor[r] + jc->skew : cursor[r];
		else
			off = (cursor[r] + 255) / 256 * 256 +
			      (jc->skew ? jc->skew + 4u * (unsigned)(t % 3) : 0);
		jc->reg[t] = r;
		jc->off[t] = off;
		jc->nbytes[t] = slot_elems(jc, t) * 4u;
		cursor[r] = off + jc->nbytes[t] + (jc->packed ? 4 : JC_GAP);
		first[r] = false;
		jc->size[r] = off + jc->nbytes[t] + (jc->tight ? 0 : JC_GAP);
	}
}

void jobcase_free(jobcase *jc)
{
	for (int r = 0; r < 2; r++) {
		free(jc->before[r]);
		jc->before[r] = NULL;
	}
}

const char *jobcase_name(const jobcase *jc, char *buf, size_t n)
{
	char outs[16] = "";
	if (jc->outputs & JC_DW)
		strcat(outs, "+dw");
	if (jc->outputs & JC_DB)
		strcat(outs, "+db");
	if (jc->outputs & JC_DX)
		strcat(outs, "+dx");
	snprintf(buf, n, "%llux%llux%llu %s%s%s%s%s", (unsigned long long)jc->batch,
		 (unsigned long long)jc->in, (unsigned long long)jc->out, outs[0] ? outs + 1 : "none",
		 jc->accumulate ? " acc" : "", jc->pass_w ? " +w" : "", jc->nregions == 2 ? " 2reg" : "",
		 jc->tight ? " tight" : "");
	if (jc->packed) {
		size_t l = strlen(buf);
		snprintf(buf + l, n - l, " packed");
	}
	if (jc->skew) {
		size_t l = strlen(buf);
		snprintf(buf + l, n - l, " skew=%llu", (unsigned long long)jc->skew);
	}
	return buf;
}

/* ---- filling --------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static float rand_unit(uint64_t *s)
{
	return (float)((double)(splitmix(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static uint8_t canary(uint64_t pos)
{
	return (uint8_t)(0xA5u ^ (uint8_t)(pos * 31u) ^ (uint8_t)(pos >> 8));
}

int jobcase_fill(jobcase *jc, void *const map[], uint64_t seed)
{
	uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
	for (unsigned r = 0; r < jc->nregions; r++) {
		uint8_t *m = map[r];
		for (size_t i = 0; i < jc->size[r]; i++)
			m[i] = canary(i);
	}
	const uint32_t nan_bits = 0xffc0deadu; /* a quiet NaN */
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
		if (is_output(t) && !jobcase_names(jc, t))
			continue; /* stays canary: nothing may touch it */
		float *p = (float *)((uint8_t *)map[jc->reg[t]] + jc->off[t]);
		uint64_t n = jc->nbytes[t] / 4;
		if (is_output(t) && !jc->accumulate) {
			for (uint64_t i = 0; i < n; i++)
				memcpy(&p[i], &nan_bits, 4);
		} else {
			for (uint64_t i = 0; i < n; i++)
				p[i] = rand_unit(&s);
		}
	}
	for (unsigned r = 0; r < jc->nregions; r++) {
		free(jc->before[r]);
		jc->before[r] = malloc(jc->size[r] ? jc->size[r] : 1);
		if (!jc->before[r])
			return -ENOMEM;
		memcpy(jc->before[r], map[r], jc->size[r]);
	}
	return 0;
}

vkg_job jobcase_job(const jobcase *jc, const uint64_t region[])
{
	vkg_job j = vkg_job_init();
	j.dtype = "f32";
	j.batch = jc->batch;
	j.in = jc->in;
	j.out = jc->out;
	j.accumulate = jc->accumulate;
	vkg_tensor *slot[PROTO_T_BACKWARD_COUNT] = {&j.x, &j.dy, &j.w, &j.dw, &j.db, &j.dx};
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++)
		if (jobcase_names(jc, t))
			*slot[t] = (vkg_tensor){region[jc->reg[t]], jc->off[t]};
	return j;
}

proto_request jobcase_request(const jobcase *jc, const uint64_t region[], uint64_t id)
{
	proto_request q;
	memset(&q, 0, sizeof(q));
	q.op = PROTO_OP_LINEAR_BACKWARD;
	q.id = id;
	q.dtype = PROTO_F32;
	q.batch = jc->batch;
	q.in = jc->in;
	q.out = jc->out;
	q.accumulate = jc->accumulate;
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++)
		if (jobcase_names(jc, t))
			q.t[t] = (proto_tensor){.present = true, .region = region[jc->reg[t]],
						.offset = jc->off[t]};
	return q;
}

/* ---- checking --------------------------------------------------------------- */

static const float *before_slot(const jobcase *jc, int t)
{
	return (const float *)(jc->before[jc->reg[t]] + jc->off[t]);
}

/* The float64 reference of output slot t, without the base. */
static double *reference(const jobcase *jc, int t)
{
	uint64_t n = jc->nbytes[t] / 4;
	double *want = malloc((n ? n : 1) * sizeof(double));
	if (!want)
		return NULL;
	vkg_ref_linear_backward(jc->batch, jc->in, jc->out, before_slot(jc, PROTO_T_X),
				before_slot(jc, PROTO_T_DY), before_slot(jc, PROTO_T_W),
				t == PROTO_T_DW ? want : NULL, t == PROTO_T_DB ? want : NULL,
				t == PROTO_T_DX ? want : NULL);
	return want;
}

static double *base_of(const jobcase *jc, int t)
{
	if (!jc->accumulate)
		return NULL;
	uint64_t n = jc->nbytes[t] / 4;
	double *b = malloc((n ? n : 1) * sizeof(double));
	if (!b)
		return NULL;
	const float *p = before_slot(jc, t);
	for (uint64_t i = 0; i < n; i++)
		b[i] = p[i];
	return b;
}

float *jobcase_expected(const jobcase *jc, int t)
{
	uint64_t n = jc->nbytes[t] / 4;
	double *want = reference(jc, t), *base = base_of(jc, t);
	float *e = malloc((n ? n : 1) * sizeof(float));
	if (!want || !e || (jc->accumulate && !base)) {
		free(e);
		e = NULL;
	} else {
		for (uint64_t i = 0; i < n; i++)
			e[i] = (float)(want[i] + (base ? base[i] : 0.0));
	}
	free(want);
	free(base);
	return e;
}

/* Where byte pos of region r lies, for messages. */
static void locate(const jobcase *jc, unsigned r, uint64_t pos, char *buf, size_t n)
{
	for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
		if (jc->reg[t] != r)
			continue;
		if (pos >= jc->off[t] && pos < jc->off[t] + jc->nbytes[t]) {
			snprintf(buf, n, "inside %s slot '%s' (byte %llu of it)",
				 jobcase_names(jc, t) ? "input" : "unrequested", slot_name[t],
				 (unsigned long long)(pos - jc->off[t]));
			return;
		}
	}
	snprintf(buf, n, "in a canary gap");
}

static int diff_range(const jobcase *jc, void *const map[], unsigned r, uint64_t from,
		      uint64_t to, char *why, size_t n)
{
	const uint8_t *m = map[r], *b = jc->before[r];
	if (to <= from || memcmp(m + from, b + from, to - from) == 0)
		return 0;
	uint64_t i = from;
	while (m[i] == b[i])
		i++;
	char where[96];
	locate(jc, r, i, where, sizeof(where));
	snprintf(why, n,
		 "region %u byte %llu changed (0x%02x, was 0x%02x), %s: the daemon wrote "
		 "outside the job's outputs",
		 r, (unsigned long long)i, m[i], b[i], where);
	return -1;
}

/* Every byte of every region equals the filled one, except inside the
 * asked outputs when skip_outputs (slots lie in slot order in a region). */
static int compare_bytes(const jobcase *jc, void *const map[], bool skip_outputs, char *why,
			 size_t n)
{
	for (unsigned r = 0; r < jc->nregions; r++) {
		uint64_t pos = 0;
		for (int t = 0; skip_outputs && t < PROTO_T_BACKWARD_COUNT; t++) {
			if (!is_output(t) || !jobcase_names(jc, t) || jc->reg[t] != r)
				continue;
			if (diff_range(jc, map, r, pos, jc->off[t], why, n))
				return -1;
			pos = jc->off[t] + jc->nbytes[t];
		}
		if (diff_range(jc, map, r, pos, jc->size[r], why, n))
			return -1;
	}
	return 0;
}

int jobcase_check(const jobcase *jc, void *const map[], double tol, char *why, size_t n)
{
	for (int t = PROTO_T_DW; t <= PROTO_T_DX; t++) {
		if (!jobcase_names(jc, t))
			continue;
		uint64_t cnt = jc->nbytes[t] / 4;
		double *want = reference(jc, t), *base = base_of(jc, t);
		if (!want || (jc->accumulate && !base)) {
			free(want);
			free(base);
			snprintf(why, n, "out of memory");
			return -1;
		}
		const float *got = (const float *)((const uint8_t *)map[jc->reg[t]] + jc->off[t]);
		double err = vkg_ref_max_rel_err(got, want, base, cnt);
		if (!(err <= tol)) {
			/* the first element that is off by more than tol of the scale */
			double scale = 0;
			for (uint64_t i = 0; i < cnt; i++)
				scale = fmax(scale, fabs(want[i] + (base ? base[i] : 0)));
			uint64_t bad = 0;
			for (uint64_t i = 0; i < cnt; i++) {
				double tgt = want[i] + (base ? base[i] : 0);
				if (!(fabs(got[i] - tgt) <= tol * (scale > 0 ? scale : 1))) {
					bad = i;
					break;
				}
			}
			snprintf(why, n,
				 "output '%s': max_rel_err %.3g > %.1g; first bad element %llu: got %.9g, want %.9g",
				 slot_name[t], err, tol, (unsigned long long)bad, got[bad],
				 want[bad] + (base ? base[bad] : 0));
			free(want);
			free(base);
			return -1;
		}
		free(want);
		free(base);
	}
	return compare_bytes(jc, map, true, why, n);
}

int jobcase_check_untouched(const jobcase *jc, void *const map[], char *why, size_t n)
{
	return compare_bytes(jc, map, false, why, n);
}

/* ---- running ------------------------------------------------------------------ */

typedef struct jc_live {
	size_t index;
	uint64_t handle;
	uint64_t region[2];
	void *map[2];
} jc_live;

static void release(vkg_client *c, const jobcase *jc, jc_live *l)
{
	for (unsigned r = 0; r < jc->nregions; r++)
		if (l->map[r])
			vkg_region_destroy(c, l->region[r], l->map[r], jc->size[r], NULL);
	memset(l->map, 0, sizeof(l->map));
}

static unsigned finish(vkg_client *c, jobcase *cases, jc_live *l, uint64_t *max_batch)
{
	jobcase *jc = &cases[l->index];
	char name[96], why[320];
	vkg_result res;
	vkg_error err;
	unsigned failed = 0;
	int rc = vkg_wait(c, l->handle, JC_WAIT_MS, &res, &err);
	if (rc != 0) {
		fprintf(stderr, "case %zu (%s): job failed: %d %s: %s\n", l->index,
			jobcase_name(jc, name, sizeof(name)), rc, err.code, err.message);
		failed = 1;
	} else {
		if (max_batch && res.batch_jobs > *max_batch)
			*max_batch = res.batch_jobs;
		if (jobcase_check(jc, l->map, JC_TOL_F32, why, sizeof(why)) != 0) {
			fprintf(stderr, "case %zu (%s): %s\n", l->index,
				jobcase_name(jc, name, sizeof(name)), why);
			failed = 1;
		}
	}
	release(c, jc, l);
	jobcase_free(jc);
	return failed;
}

unsigned jobcase_run(vkg_client *c, jobcase *cases, size_t n, unsigned inflight, uint64_t seed,
		     uint64_t *max_batch_jobs)
{
	if (inflight == 0)
		inflight = 1;
	jc_live *live = calloc(inflight, sizeof(*live));
	if (!live)
		return (unsigned)n;
	unsigned failed = 0, head = 0, count = 0;
	char name[96];
	vkg_error err;
	if (max_batch_jobs)
		*max_batch_jobs = 0;
	for (size_t i = 0; i < n; i++) {
		if (count == inflight) {
			failed += finish(c, cases, &live[head], max_batch_jobs);
			head = (head + 1) % inflight;
			count--;
		}
		jobcase *jc = &cases[i];
		jc_live *l = &live[(head + count) % inflight];
		memset(l, 0, sizeof(*l));
		l->index = i;
		bool ok = true;
		for (unsigned r = 0; r < jc->nregions && ok; r++) {
			l->map[r] = vkg_region_create(c, jc->size[r], &l->region[r], &err);
			ok = l->map[r] != NULL;
		}
		if (ok && jobcase_fill(jc, l->map, seed + i) != 0) {
			snprintf(err.code, sizeof(err.code), "test");
			snprintf(err.message, sizeof(err.message), "out of memory");
			ok = false;
		}
		if (ok) {
			vkg_job j = jobcase_job(jc, l->region);
			ok = vkg_submit(c, &j, &l->handle, &err) == 0;
		}
		if (!ok) {
			fprintf(stderr, "case %zu (%s): setup or submit failed: %s: %s\n", i,
				jobcase_name(jc, name, sizeof(name)), err.code, err.message);
			release(c, jc, l);
			jobcase_free(jc);
			failed++;
			continue;
		}
		count++;
	}
	while (count) {
		failed += finish(c, cases, &live[head], max_batch_jobs);
		head = (head + 1) % inflight;
		count--;
	}
	free(live);
	return failed;
}
