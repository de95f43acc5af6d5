/* daemon/kernels/t128_tile.c — see t128_tile.h. */
#include "t128_tile.h"
#include "tilespec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t t128_tile_threads(const t128_tile *t)
{
	return (t->bm / t->tm) * (t->bn / t->tn);
}

uint32_t t128_tile_shared(const t128_tile *t)
{
	/* two buffers of BK rows of As (BM/4 + PAD vec4) and Bs (BN/4 + PAD) */
	return 2u * t->bk * (t->bm / 4 + t->pad + t->bn / 4 + t->pad) * 16u;
}

static bool one_of(uint32_t v, const uint32_t *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

/* What is wrong with t, or NULL. */
static const char *t128_tile_fault(const t128_tile *t)
{
	static const uint32_t tms[] = {4, 8, 12, 16}, bks[] = {4, 8, 16, 32}, splits[] = {1, 2, 4},
			      wxs[] = {0, 1, 2, 4, 8, 16, 32};
	if (!one_of(t->tm, tms, 4) || !one_of(t->tn, tms, 4))
		return "TM and TN must be 4, 8, 12 or 16";
	if (!t->bm || !t->bn || t->bm > 256 || t->bn > 256 || t->bm % t->tm || t->bn % t->tn)
		return "BM and BN must be at most 256 and multiples of TM and TN";
	const uint32_t nt = t128_tile_threads(t);
	if (nt % 32 || nt > 1024 || nt < t->bm)
		return "the threads, (BM/TM)*(BN/TN), must be a multiple of 32, at least BM and at most 1024";
	if (!one_of(t->bk, bks, 4))
		return "BK must be 4, 8, 16 or 32";
	if ((t->bm * t->bk) % (4 * nt) || (t->bn * t->bk) % (4 * nt))
		return "BM*BK and BN*BK must be multiples of 4 * threads (whole vec4 loads per thread)";
	const uint32_t loads = (t->bm * t->bk + t->bn * t->bk) / (4 * nt);
	if (!one_of(t->split, splits, 3) || t->bk % t->split || loads % t->split)
		return "SPLIT must be 1, 2 or 4 and divide BK and the vec4 loads per thread";
	if (t->pad > 1)
		return "PAD must be 0 or 1";
	if (!one_of(t->wx, wxs, 7) || (t->wx && ((t->bn / t->tn) % t->wx || (t->bm / t->tm) % (32 / t->wx))))
		return "WX must be 0, 1, 2, 4, 8, 16 or 32, divide BN/TN, and 32/WX divide BM/TM";
	return NULL;
}

int t128_tile_parse(const char *s, t128_tile *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (!s)
		return 0;
	uint32_t v[8] = {0, 0, 0, 0, 0, 1, 0, 0};
	char why[64];
	const char *fault = NULL;
	if (tilespec_numbers(s, v, 5, 8, why, sizeof(why)) == 0) {
		fault = why;
	} else {
		*t = (t128_tile){true, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
		fault = t128_tile_fault(t);
	}
	if (fault) {
		snprintf(err, errlen, "%s='%.40s': %s; the accepted form is %s", T128_TILE_ENV, s, fault,
			 T128_TILE_FORM);
		memset(t, 0, sizeof(*t));
		return -1;
	}
	return 0;
}

void t128_spec_fill(t128_spec *c, const t128_tile *t)
{
	const uint32_t ar = t->bm / 4 + t->pad, br = t->bn / 4 + t->pad;
	const uint32_t v[T128_SPECS] = {1, t128_tile_threads(t), 1, 2 * t->bk * ar, 2 * t->bk * br,
					t->bm, t->bn, t->tm, t->tn, t->bk, t->split, t->pad, t->wx};
	for (uint32_t i = 0; i < T128_SPECS; i++) {
		c->v[i] = v[i];
		c->map[i] = (VkSpecializationMapEntry){i, i * 4, 4};
	}
	c->info = (VkSpecializationInfo){T128_SPECS, c->map, sizeof(c->v), c->v};
}
