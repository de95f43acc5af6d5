/* daemon/sched/fair.c — see fair.h. */
#include "fair.h"

void fair_init(fair_class *c)
{
	queue_init(&c->active);
	c->n = 0;
	c->clock = 0;
}

void fair_lane_init(fair_lane *l)
{
	l->node.next = l->node.prev = NULL;
	l->vtime = 0;
	l->active = false;
}

void fair_activate(fair_class *c, fair_lane *l)
{
	if (l->active)
		return;
	if (l->vtime < c->clock)
		l->vtime = c->clock;
	queue_insert_tail(&c->active, &l->node);
	l->active = true;
	c->n++;
}

void fair_deactivate(fair_class *c, fair_lane *l)
{
	if (!l->active)
		return;
	queue_remove(&l->node);
	l->active = false;
	c->n--;
}

fair_lane *fair_pick(fair_class *c, bool (*ok)(fair_lane *l, void *ctx), void *ctx)
{
	fair_lane *best = NULL;
	const queue_node *n;
	queue_foreach(n, &c->active) {
		fair_lane *l = queue_data(n, fair_lane, node);
		if ((!best || l->vtime < best->vtime) && (!ok || ok(l, ctx)))
			best = l;
	}
	return best;
}

void fair_charge(fair_class *c, fair_lane *l, double ns)
{
	if (l->vtime > c->clock)
		c->clock = l->vtime;
	l->vtime += ns;
	if (l->active) {
		queue_remove(&l->node);
		queue_insert_tail(&c->active, &l->node);
	}
}

void fair_correct(fair_lane *l, double est_ns, double actual_ns)
{
	l->vtime += actual_ns - est_ns;
}
