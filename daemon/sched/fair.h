/* daemon/sched/fair.h — sharing one job class among lanes by GPU time.
 *
 * Start-time fair queuing over lanes (one per connection): each lane has
 * a virtual time, the GPU ns its jobs were charged; the next job comes
 * from the active lane with the least virtual time that can give one now,
 * ties in order of activation (a lane served moves behind its equals). A
 * job is charged its estimate when taken and corrected by what it really
 * took when it finishes, so two lanes that keep the class busy get about
 * the same GPU time whatever their jobs' sizes. A lane that becomes
 * active starts at the class's clock (the virtual time of the last job
 * taken) unless it is ahead already: idle time banks no credit. No GPU
 * here: tests/unit/test_fair.c drives it alone. */
#ifndef VKG_DAEMON_SCHED_FAIR_H
#define VKG_DAEMON_SCHED_FAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "queue.h"

typedef struct fair_lane {
	queue_node node; /* on its class's active list while active */
	double vtime;    /* ns charged, on the class's virtual clock */
	bool active;
} fair_lane;

typedef struct fair_class {
	queue_node active; /* active lanes, in order of activation or last service */
	uint32_t n;
	double clock;      /* the virtual time of the last job taken */
} fair_class;

void fair_init(fair_class *c);
void fair_lane_init(fair_lane *l);
/* l has a job for c (no-op when active already). */
void fair_activate(fair_class *c, fair_lane *l);
/* l has no job for c any more (no-op when not active). */
void fair_deactivate(fair_class *c, fair_lane *l);
/* The active lane with the least virtual time for which ok(l, ctx) holds
 * (ok NULL: any), or NULL. */
fair_lane *fair_pick(fair_class *c, bool (*ok)(fair_lane *l, void *ctx), void *ctx);
/* A job of estimated cost ns was taken from l (active in c): the class's
 * clock moves to l's virtual time, l's goes up by ns and l goes behind
 * the lanes of equal time. */
void fair_charge(fair_class *c, fair_lane *l, double ns);
/* l's job charged est_ns took actual_ns. */
void fair_correct(fair_lane *l, double est_ns, double actual_ns);

#endif
