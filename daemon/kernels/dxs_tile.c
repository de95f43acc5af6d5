/* daemon/kernels/dxs_tile.c — see dxs_tile.h. */
#include "dxs_tile.h"
#include "tilespec.h"

#include <stdio.h>
#include <string.h>

/* What is wrong with the tiling s (NULL: nothing; t then holds it). */
static const char *tile_fault(const char *s, dxs_tile *t, char *why, size_t whylen)
{
	uint32_t v[5] = {0, 0, 0, 0, 1};
	if (tilespec_numbers(s, v, 4, 5, why, whylen) == 0)
		return why;
	if (v[0] < 1 || v[0] > 32)
		return "NW must be 1 to 32";
	if (v[1] < 1 || v[1] > 16)
		return "TK must be 1 to 16";
	if (v[2] < 1 || v[2] > 4)
		return "RT must be 1 to 4";
	if (v[3] < 1 || v[3] > 64)
		return "STRIPS must be 1 to 64";
	if (v[4] < 1 || v[4] > 2)
		return "AHEAD must be 1 or 2";
	*t = (dxs_tile){true, v[0], v[1], v[2], v[3], v[4]};
	return NULL;
}

int dxs_tile_parse(const char *s, dxs_tile *t, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (s && strcmp(s, "off") == 0)
		return 0;
	char why[64];
	const char *fault = tile_fault(s, t, why, sizeof(why));
	if (fault)
		snprintf(err, errlen, "%s='%.40s': %s; the accepted form is %s", DXS_TILE_ENV, s ? s : "", fault,
			 DXS_TILE_FORM);
	return fault ? -1 : 0;
}

/* The c-th (0 .. DXS_CLASSES - 1) of the DXS_CLASSES tilings joined by
 * commas in v, into one (NULL: not such a list, or the item too long). */
static const char *class_item(const char *v, int c, char *one, size_t len)
{
	const char *p = v;
	int n = 0;
	for (const char *q = v; *q; q++)
		n += *q == ',';
	if (n != DXS_CLASSES - 1)
		return NULL;
	for (int i = 0; i < c; i++)
		p = strchr(p, ',') + 1;
	const char *e = strchr(p, ',');
	const size_t k = e ? (size_t)(e - p) : strlen(p);
	if (k >= len)
		return NULL;
	memcpy(one, p, k);
	one[k] = 0;
	return one;
}

int dxs_tile_choose(const char *v, int c, dxs_tile *t, char *err, size_t errlen)
{
	static const char *const dflt[DXS_CLASSES] = DXS_TILE_DEFAULTS;
	memset(t, 0, sizeof(*t));
	if (c < 0 || c >= DXS_CLASSES)
		return 0; /* (no such class: off) */
	if (!v || !strchr(v, ','))
		return dxs_tile_parse(!v || strcmp(v, "on") == 0 ? dflt[c] : v, t, err, errlen);
	/* one per class: the c-th, named with the whole value if wrong */
	char one[32], why[64];
	const char *item = class_item(v, c, one, sizeof(one)), *fault = "not 3 tilings joined by commas";
	if (item && strcmp(item, "off") == 0)
		return 0;
	if (item)
		fault = tile_fault(strcmp(item, "on") == 0 ? dflt[c] : item, t, why, sizeof(why));
	if (!fault)
		return 0;
	snprintf(err, errlen, "%s='%.60s': tiling %d of %d: %s; the accepted form is %s", DXS_TILE_ENV, v, c + 1,
		 DXS_CLASSES, fault, DXS_TILE_FORM);
	return -1;
}

bool dxs_tile_takes(const dxs_tile *t, uint64_t m, uint64_t n, uint64_t k)
{
	return t->on && m && n && k && k % 16 == 0 && k <= 16ull * t->tk && n % 16 == 0 &&
	       m % (16ull * t->rt) == 0;
}

void dxs_tile_specs(const dxs_tile *t, uint32_t v[DXS_SPECS])
{
	v[0] = t->nw, v[1] = t->tk, v[2] = t->rt, v[3] = t->strips, v[4] = dxs_tile_threads(t);
	v[5] = t->ahead;
}
