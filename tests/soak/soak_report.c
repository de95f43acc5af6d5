/* tests/soak/soak_report.c — the soak's summary and verdict (soak.h). */
#include "soak.h"

#include <stdio.h>
#include <string.h>

#include "growth.h"

/* Codes a hostile client expects; anything else is unexpected. */
static bool hostile_expected(const char *code)
{
	static const char *const ok[] = {"bad_frame", "bad_request", "eof", "truncated-then-closed",
					 "hung-up-mid-reply"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strcmp(code, ok[i]) == 0)
			return true;
	return false;
}

/* Per kind: operations, checked results, unexpected events, codes seen.
 * Returns the number of unexpected events. */
static unsigned long report_clients(const soak_shared *sh, double seconds)
{
	unsigned long bad = 0;
	for (int k = 0; k < SOAK_KIND_COUNT; k++) {
		unsigned long ops = 0, checked = 0, failed = 0, unexpected_codes = 0;
		unsigned clients = 0;
		char codes[512] = "";
		size_t len = 0;
		for (unsigned i = 0; i < sh->nslots; i++) {
			const soak_slot *sl = &sh->slot[i];
			if ((int)sl->kind != k)
				continue;
			clients++;
			ops += atomic_load(&sl->ops);
			checked += atomic_load(&sl->checked);
			failed += atomic_load(&sl->failed);
			for (int c = 0; c < SOAK_CODES && sl->codes[c].code[0]; c++) {
				unsigned long n = atomic_load(&sl->codes[c].n);
				if (k == SOAK_HOSTILE && !hostile_expected(sl->codes[c].code))
					unexpected_codes += n;
				if (len < sizeof(codes) - 1)
					len += (size_t)snprintf(codes + len, sizeof(codes) - len, " %s %lu",
								sl->codes[c].code, n);
			}
			if (sl->last_failure[0])
				printf("    last unexpected (%s): %s\n", soak_kind_name[k], sl->last_failure);
		}
		printf("  %-8s x%u  %8lu %-15s (%.1f/s), %lu checked against the reference, "
		       "%lu unexpected%s%s\n",
		       soak_kind_name[k], clients, ops, soak_kind_unit[k], (double)ops / seconds, checked,
		       failed + unexpected_codes, codes[0] ? "; by code:" : "", codes);
		bad += failed + unexpected_codes;
	}
	return bad;
}

static void print_series(const char *what, const soak_sample *q, unsigned n, bool kb)
{
	printf("    %s at each quiet point:", what);
	for (unsigned i = 0; i < n; i++)
		printf(" %ld", kb ? q[i].owned_kb : (long)q[i].fds);
	printf("\n");
}

/* The busy samples: first, last, largest, and the least-squares slope of
 * owned memory after the warm-up (shown, not judged: the work in flight
 * swings it). */
static void report_busy(const soak_series *ser, double warmup)
{
	const soak_sample *s = ser->busy;
	unsigned n = ser->nbusy;
	if (!n)
		return;
	long rss_max = 0, owned_max = 0;
	int fds_max = 0;
	double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
	for (unsigned i = 0; i < n; i++) {
		rss_max = s[i].rss_kb > rss_max ? s[i].rss_kb : rss_max;
		owned_max = s[i].owned_kb > owned_max ? s[i].owned_kb : owned_max;
		fds_max = s[i].fds > fds_max ? s[i].fds : fds_max;
		if (s[i].t < warmup)
			continue;
		m++;
		sx += s[i].t;
		sy += (double)s[i].owned_kb;
		sxx += s[i].t * s[i].t;
		sxy += s[i].t * (double)s[i].owned_kb;
	}
	double lsq = m > 2 ? (m * sxy - sx * sy) / (m * sxx - sx * sx) * 60.0 : 0;
	printf("  daemon, %u samples while busy (1/s): VmRSS %ld -> %ld KiB (max %ld), owned %ld "
	       "-> %ld KiB (max %ld; after the warm-up %+.0f KiB/min by least squares), "
	       "descriptors %d -> %d (max %d)\n",
	       n, s[0].rss_kb, s[n - 1].rss_kb, rss_max, s[0].owned_kb, s[n - 1].owned_kb, owned_max,
	       lsq, s[0].fds, s[n - 1].fds, fds_max);
}

/* Growth across the quiet points after the warm-up; true when flat. */
static bool report_growth(const soak_series *ser, double warmup)
{
	unsigned from = 0;
	while (from < ser->nquiet && ser->quiet[from].t < warmup)
		from++;
	const soak_sample *q = ser->quiet + from;
	unsigned n = ser->nquiet - from;
	static double kb[GROWTH_MAX_SAMPLES], fds[GROWTH_MAX_SAMPLES];
	for (unsigned i = 0; i < n && i < GROWTH_MAX_SAMPLES; i++) {
		kb[i] = (double)q[i].owned_kb;
		fds[i] = q[i].fds;
	}
	growth_fit fk, ff;
	if (growth_fit_series(kb, n, &fk) != 0 || growth_fit_series(fds, n, &ff) != 0) {
		printf("  growth: %u quiet points after the warm-up: too few to judge (FAIL)\n", n);
		return false;
	}
	const double per_min = 60.0 / ser->quiet_every;
	bool gk = growth_grows(&fk, SOAK_KB_PER_MIN / per_min);
	bool gf = growth_grows(&ff, SOAK_FDS_PER_MIN / per_min);
	printf("  quiet points after the warm-up (%.0f s): %u, one every %.0f s (clients paused, "
	       "daemon settled; its stats connection counted):\n",
	       warmup, n, ser->quiet_every);
	printf("    owned memory: %.0f -> %.0f KiB, median step %+.0f KiB/min, halves %+.0f KiB/min, "
	       "least squares %+.0f KiB/min (bound %.0f KiB/min): %s\n",
	       fk.first, fk.last, fk.step * per_min, fk.halves * per_min, fk.lsq * per_min,
	       SOAK_KB_PER_MIN, gk ? "GROWS" : "flat");
	printf("    descriptors:  %.0f -> %.0f, median step %+.2f/min, halves %+.2f/min, "
	       "least squares %+.2f/min (bound %.1f/min): %s\n",
	       ff.first, ff.last, ff.step * per_min, ff.halves * per_min, ff.lsq * per_min,
	       SOAK_FDS_PER_MIN, gf ? "GROWS" : "flat");
	print_series("owned KiB", q, n, true);
	print_series("descriptors", q, n, false);
	return !gk && !gf;
}

bool soak_report(const soak_shared *sh, const soak_series *ser, double seconds, double warmup,
		 bool served)
{
	printf("\n==== soak summary: %.0f s, %u clients\n", seconds, sh->nslots);
	unsigned long bad = report_clients(sh, seconds);
	report_busy(ser, warmup);
	bool flat = report_growth(ser, warmup);
	printf("  daemon %s\n", served ? "served to the end, settled, stopped cleanly (exit 0, no "
					 "validation error)"
				       : "did NOT serve to the end, settle, or stop cleanly");
	bool pass = served && flat && bad == 0;
	printf("  unexpected events: %lu\nverdict: %s\n", bad, pass ? "PASS" : "FAIL");
	return pass;
}
