/* daemon/sched/spin.h — when the loop thread polls instead of sleeping.
 *
 * Waking a sleeping thread costs microseconds to tens of them (futex,
 * eventfd, epoll, an idle core's C-state), and a small job's whole round
 * trip on a GPU is a few tens. So the loop, rather than sleep in epoll,
 * keeps polling (epoll with a zero timeout, and the GPU's timeline
 * semaphore) for a bounded time:
 *  - after a submission, while the batch may finish soon: up to the spin
 *    budget past its submission. It sees the batch done within a loop
 *    iteration and answers at once, with no wake-up of the completion
 *    thread and no hop back to the loop (engine.c);
 *  - after socket activity (a request read), for after_ns: a synchronous
 *    client's next request is read without waking the loop.
 * Past both, the loop blocks in epoll as before and the completion thread's
 * blocking wait reports the batch. An idle daemon never polls.
 *
 * The spin budget is tuned per device from what its batches take: the
 * recent batches' time from submission to the GPU's end (calibrated
 * timestamps; else to the completion being seen). When most of them (the
 * 75th percentile) finish within the configured maximum, the budget is
 * half as much again (plus 5 µs), at most the maximum; otherwise it is 0
 * and the loop does not poll the GPU at all (spinning would seldom catch
 * a batch: a CPU device's, or large jobs).
 *
 * Past the budget, a batch of one job of a kind seen before (the same
 * shape, dtype, outputs and kernels: engine.c's key) has an expected end:
 * what the last batch of that kind took from its submission to the GPU's
 * end. The completion thread then waits only until a lead before it
 * (spin_lead) and wakes the loop, which polls from there until the batch
 * is seen or the lead past the expected end has passed. Training repeats
 * the same jobs step after step, so the loop is already polling when a
 * large job ends: no blocking wait's wake-up and no hop from the
 * completion thread to the loop after the GPU's end (on the H200 those
 * took ~100 and ~30 µs of an 8192x4096x4096 job). The polling is bounded
 * by two leads per such batch. Loop thread only. */
#ifndef VKG_DAEMON_SPIN_H
#define VKG_DAEMON_SPIN_H

#include <stdint.h>

#define SPIN_WINDOW 32
/* kinds of single-job batches whose time is kept (the most recent) */
#define SPIN_KINDS 64
/* spin_lead's least lead, and its most */
#define SPIN_LEAD_MIN_NS 100000ull
#define SPIN_LEAD_MAX_NS 1000000ull

typedef struct spin_kind {
	uint64_t key;              /* 0: empty */
	uint64_t ns;               /* its last batch: submission -> GPU end */
} spin_kind;

typedef struct spin {
	uint64_t max_ns;           /* --spin-us */
	uint64_t after_ns;         /* --loop-spin-us, resolved */
	uint64_t budget_ns;        /* now: poll the GPU this long past a submission */
	uint64_t recent[SPIN_WINDOW]; /* the last batches' submission -> done, ns */
	uint32_t next, n, since;   /* ring position, fill, notes since the last update */
	spin_kind kinds[SPIN_KINDS];
	uint32_t kinds_next;       /* the entry a new kind replaces (round robin) */
} spin;

void spin_init(spin *s, uint64_t max_ns, uint64_t after_ns);
/* One batch took ns from its submission to its end on the GPU. */
void spin_note(spin *s, uint64_t ns);
/* A batch of one job of kind key (not 0) took ns from its submission to
 * its end on the GPU (0: it ended before the submission returned; kept as
 * 1 ns). Nothing with a maximum of 0. */
void spin_learn(spin *s, uint64_t key, uint64_t ns);
/* The expected time, submission -> GPU end, of a single-job batch of kind
 * key: its last batch's, where that is longer than the budget (within it
 * the loop polls anyway); 0: none (an unknown kind, or a maximum of 0). */
uint64_t spin_expect(const spin *s, uint64_t key);
/* How long before an expected end the loop starts polling, and past it
 * stops: 100 µs plus 1/32 of it, at most 1 ms. */
uint64_t spin_lead(uint64_t expect_ns);

#endif
