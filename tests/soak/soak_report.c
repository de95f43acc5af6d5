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

/* The floor (smallest sample) of each window of `win` samples from
 * s[from..n): owned KiB and descriptors. Returns the number of windows. */
static unsigned floors(const soak_sample *s, unsigned from, unsigned n, unsigned win,
		       double *kb, double *fds, unsigned max)
{
	unsigned w = 0;
	for (unsigned a = from; a + win <= n && w < max; a += win, w++) {
		kb[w] = (double)s[a].owned_kb;
		fds[w] = s[a].fds;
		for (unsigned i = a + 1; i < a + win; i++) {
			if (s[i].owned_kb < kb[w])
				kb[w] = (double)s[i].owned_kb;
			if (s[i].fds < fds[w])
				fds[w] = s[i].fds;
		}
	}
	return w;
}

static void print_series(const char *what, const double *y, unsigned n)
{
	printf("    %s floor per window:", what);
	for (unsigned i = 0; i < n; i++)
		printf(" %.0f", y[i]);
	printf("\n");
}

/* Growth of the floors after the warm-up; true when flat. */
static bool report_growth(const soak_sample *s, unsigned n, double warmup)
{
	unsigned from = 0;
	while (from < n && s[from].t < warmup)
		from++;
	unsigned span = n - from;
	unsigned win = span / 8 < 1 ? 1 : span / 8 > 10 ? 10 : span / 8;
	static double kb[GROWTH_MAX_SAMPLES], fds[GROWTH_MAX_SAMPLES];
	unsigned w = floors(s, from, n, win, kb, fds, GROWTH_MAX_SAMPLES);
	growth_fit fk, ff;
	if (growth_fit_series(kb, w, &fk) != 0 || growth_fit_series(fds, w, &ff) != 0) {
		printf("  growth: only %u windows after the warm-up: cannot judge (FAIL)\n", w);
		return false;
	}
	const double per_min = 60.0 / win;
	bool gk = growth_grows(&fk, SOAK_KB_PER_MIN / per_min);
	bool gf = growth_grows(&ff, SOAK_FDS_PER_MIN / per_min);
	printf("  after the warm-up (%.0f s): %u windows of %u s; the floor of each window:\n",
	       warmup, w, win);
	printf("    owned memory: %.0f -> %.0f KiB, median step %+.0f KiB/min, halves %+.0f KiB/min, "
	       "least squares %+.0f KiB/min (bound %.0f KiB/min): %s\n",
	       fk.first, fk.last, fk.step * per_min, fk.halves * per_min, fk.lsq * per_min,
	       SOAK_KB_PER_MIN, gk ? "GROWS" : "flat");
	printf("    descriptors:  %.0f -> %.0f, median step %+.2f/min, halves %+.2f/min, "
	       "least squares %+.2f/min (bound %.1f/min): %s\n",
	       ff.first, ff.last, ff.step * per_min, ff.halves * per_min, ff.lsq * per_min,
	       SOAK_FDS_PER_MIN, gf ? "GROWS" : "flat");
	print_series("owned KiB", kb, w);
	print_series("descriptors", fds, w);
	return !gk && !gf;
}

bool soak_report(const soak_shared *sh, const soak_sample *s, unsigned n, double seconds,
		 double warmup, bool served, long final_owned_kb, int final_fds)
{
	printf("\n==== soak summary: %.0f s, %u clients\n", seconds, sh->nslots);
	unsigned long bad = report_clients(sh, seconds);
	long rss_max = 0, owned_max = 0;
	int fds_max = 0;
	for (unsigned i = 0; i < n; i++) {
		rss_max = s[i].rss_kb > rss_max ? s[i].rss_kb : rss_max;
		owned_max = s[i].owned_kb > owned_max ? s[i].owned_kb : owned_max;
		fds_max = s[i].fds > fds_max ? s[i].fds : fds_max;
	}
	if (n) {
		printf("  daemon, %u samples (1/s): VmRSS %ld -> %ld KiB (max %ld), owned %ld -> %ld "
		       "KiB (max %ld), descriptors %d -> %d (max %d)\n",
		       n, s[0].rss_kb, s[n - 1].rss_kb, rss_max, s[0].owned_kb, s[n - 1].owned_kb,
		       owned_max, s[0].fds, s[n - 1].fds, fds_max);
		printf("  daemon idle after the clients stopped: owned %ld KiB, %d descriptors "
		       "(stats connection included)\n",
		       final_owned_kb, final_fds);
	}
	bool flat = n > 0 && report_growth(s, n, warmup);
	printf("  daemon %s\n", served ? "served to the end, settled, stopped cleanly (exit 0, no "
					 "validation error)"
				       : "did NOT serve to the end or stop cleanly");
	bool pass = served && flat && bad == 0;
	printf("  unexpected events: %lu\nverdict: %s\n", bad, pass ? "PASS" : "FAIL");
	return pass;
}
