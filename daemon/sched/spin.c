/* daemon/sched/spin.c — see spin.h. */
#include "spin.h"

#include <stdlib.h>
#include <string.h>

#define SPIN_UPDATE_EVERY 8 /* batches between two budget updates */
#define SPIN_SLACK_NS 5000u

void spin_init(spin *s, uint64_t max_ns, uint64_t after_ns)
{
	memset(s, 0, sizeof(*s));
	s->max_ns = max_ns;
	s->after_ns = after_ns;
	s->budget_ns = max_ns; /* until batches say otherwise */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void update(spin *s)
{
	uint64_t v[SPIN_WINDOW];
	memcpy(v, s->recent, s->n * sizeof(v[0]));
	qsort(v, s->n, sizeof(v[0]), cmp_u64);
	const uint64_t p75 = v[(s->n * 3 + 3) / 4 - 1];
	if (p75 > s->max_ns) {
		s->budget_ns = 0;
		return;
	}
	const uint64_t b = p75 + p75 / 2 + SPIN_SLACK_NS;
	s->budget_ns = b < s->max_ns ? b : s->max_ns;
}

void spin_note(spin *s, uint64_t ns)
{
	if (s->max_ns == 0)
		return;
	s->recent[s->next] = ns;
	s->next = (s->next + 1) % SPIN_WINDOW;
	if (s->n < SPIN_WINDOW)
		s->n++;
	/* every batch at first, then every few: a sort of 32 values each time */
	if (s->n < SPIN_WINDOW || ++s->since >= SPIN_UPDATE_EVERY) {
		s->since = 0;
		update(s);
	}
}

static spin_kind *kind_find(const spin *s, uint64_t key)
{
	for (uint32_t i = 0; i < SPIN_KINDS; i++)
		if (s->kinds[i].key == key)
			return (spin_kind *)&s->kinds[i];
	return NULL;
}

void spin_learn(spin *s, uint64_t key, uint64_t ns)
{
	if (s->max_ns == 0 || key == 0)
		return;
	spin_kind *k = kind_find(s, key);
	if (!k) {
		k = &s->kinds[s->kinds_next];
		s->kinds_next = (s->kinds_next + 1) % SPIN_KINDS;
		k->key = key;
	}
	/* 0: the batch ended before its submission returned (a CPU device can
	 * run it inside vkQueueSubmit). The kind is still known: kept as 1 ns,
	 * so that past a budget of 0 its next batch's end is expected at once
	 * (the loop's first poll sees it) rather than not at all */
	k->ns = ns ? ns : 1;
}

uint64_t spin_expect(const spin *s, uint64_t key)
{
	if (s->max_ns == 0 || key == 0)
		return 0;
	const spin_kind *k = kind_find(s, key);
	return k && k->ns > s->budget_ns ? k->ns : 0;
}

uint64_t spin_lead(uint64_t expect_ns)
{
	const uint64_t lead = SPIN_LEAD_MIN_NS + expect_ns / 32;
	return lead < SPIN_LEAD_MAX_NS ? lead : SPIN_LEAD_MAX_NS;
}
