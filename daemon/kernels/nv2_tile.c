/* daemon/kernels/nv2_tile.c — see nv2_tile.h. */
#include "nv2_tile.h"
#include "tilespec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What is wrong with t on its own (before the device), or NULL. */
static const char *nv2_tile_fault(const nv2_tile *t)
{
	if (!t->bm || !t->bn || t->bm > 256 || t->bn > 256 || t->bm % 16 || t->bn % 16)
		return "BM and BN must be multiples of 16 from 16 to 256";
	if (t->bk < NV2_TILE_MIN_BK || t->bk > 128 || t->bk % 16)
		return "BK must be a multiple of 16 from 16 to 128";
	if (t->threads && (t->threads % 32 || t->threads > 1024))
		return "THREADS must be 0 (the device's choice) or a multiple of 32 up to 1024";
	if (t->unclamp > 1)
		return "UNCLAMP must be 0 or 1";
	if (t->unroll != 1 && t->unroll != 2 && t->unroll != 4 && t->unroll != 8)
		return "UNROLL must be 1, 2, 4 or 8";
	if (t->db_apart > 1)
		return "DBAPART must be 0 or 1";
	return NULL;
}

int nv2_tile_parse(const char *s, nv2_tile *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	uint32_t v[7] = {0, 0, 0, 0, 0, 1, 0};
	char why[64];
	const char *fault = NULL;
	if (tilespec_numbers(s, v, 4, 7, why, sizeof(why)) == 0) {
		fault = why;
	} else {
		*t = (nv2_tile){v[0], v[1], v[2], v[3], v[4], v[5], v[6], 0};
		fault = nv2_tile_fault(t);
	}
	if (fault) {
		snprintf(err, errlen, "%s='%.40s': %s; the accepted form is %s", NV2_TILE_ENV, s ? s : "",
			 fault, NV2_TILE_FORM);
		memset(t, 0, sizeof(*t));
		return -1;
	}
	return 0;
}

void nv2_offer_text(const nv2_offer *o, char *out, size_t len)
{
	size_t at = 0;
	int w = snprintf(out, len, "granularities MxNxK@threads:");
	at += w > 0 ? (size_t)w : 0;
	for (uint32_t i = 0; i < o->n && at < len; i++) {
		w = snprintf(out + at, len - at, "%s %ux%ux%u@%u", i ? "," : "", o->flex[i].mg, o->flex[i].ng,
			     o->flex[i].kg, o->flex[i].threads);
		at += w > 0 ? (size_t)w : 0;
	}
	if (at < len)
		snprintf(out + at, len - at, "%s; workgroups up to %u, dimensions up to %u", o->n ? "" : " none",
			 o->max_threads && o->max_threads < o->wg_max ? o->max_threads : o->wg_max, o->max_dim);
}

static bool divides(const nv2_flex *f, const nv2_tile *t)
{
	return f->mg && f->ng && f->kg && t->bm % f->mg == 0 && t->bn % f->ng == 0 && t->bk % f->kg == 0;
}

/* THREADS 0 takes 256 where an entry that fits has it, else the most. */
static uint32_t nv2_rank(uint32_t threads)
{
	return threads == 256 ? UINT32_MAX : threads;
}

/* The entry of o that t runs on, or -1; *why: what failed. */
static int nv2_tile_entry(const nv2_tile *t, const nv2_offer *o, const char **why)
{
	int best = -1;
	bool any_div = false;
	for (uint32_t i = 0; i < o->n; i++) {
		const nv2_flex *f = &o->flex[i];
		if (!divides(f, t))
			continue;
		any_div = true;
		const bool better = best < 0 || nv2_rank(f->threads) > nv2_rank(o->flex[best].threads);
		if (t->threads ? f->threads == t->threads : better)
			best = (int)i;
	}
	if (best < 0)
		*why = !o->n	  ? "the device lists no workgroup-scope shape for this dtype"
		       : any_div ? "the device lists no workgroup of THREADS invocations for a shape "
				   "whose granularities divide BM, BN and BK"
				 : "no granularity the device lists divides BM, BN and BK";
	return best;
}

int nv2_tile_fit(nv2_tile *t, const nv2_offer *o, const char *name, const char *value, const char *dtype,
		 char *err, size_t errlen)
{
	const char *why = NULL;
	const int e = nv2_tile_entry(t, o, &why);
	const uint32_t threads = e >= 0 ? o->flex[e].threads : 0;
	const uint32_t dim = t->bm > t->bn ? (t->bm > t->bk ? t->bm : t->bk) : (t->bn > t->bk ? t->bn : t->bk);
	if (e >= 0 && (threads > o->wg_max || (o->max_threads && threads > o->max_threads)))
		why = "its workgroup is larger than the device allows";
	else if (e >= 0 && o->max_dim && dim > o->max_dim)
		why = "BM, BN or BK is above the device's largest flexible dimension";
	if (why) {
		char list[NV2_OFFER_TEXT];
		nv2_offer_text(o, list, sizeof(list));
		snprintf(err, errlen, "%s='%.40s' for %s: %s (the device lists %s)", name, value, dtype, why, list);
		return -1;
	}
	const uint32_t g = o->flex[e].ng;
	t->threads = threads;
	t->dbn = (16 + g - 1) / g * g;
	return 0;
}

void nv2_spec_fill(nv2_spec *c, const nv2_tile *t, bool a_kmajor)
{
	const uint32_t v[NV2_SPECS] = {t->threads, t->bm,     t->bn,     t->bk,      a_kmajor ? 1u : 0u,
				       t->dbn,     t->unclamp, t->unroll, t->db_apart};
	for (uint32_t i = 0; i < NV2_SPECS; i++) {
		c->v[i] = v[i];
		c->map[i] = (VkSpecializationMapEntry){i, i * 4, 4};
	}
	c->info = (VkSpecializationInfo){NV2_SPECS, c->map, sizeof(c->v), c->v};
}
