/* daemon/spin.h — when the loop thread polls instead of sleeping.
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
 * a batch: a CPU device's, or large jobs). Loop thread only. */
#ifndef VKG_DAEMON_SPIN_H
#define VKG_DAEMON_SPIN_H

#include <stdint.h>

#define SPIN_WINDOW 32

typedef struct spin {
	uint64_t max_ns;           /* --spin-us */
	uint64_t after_ns;         /* --loop-spin-us, resolved */
	uint64_t budget_ns;        /* now: poll the GPU this long past a submission */
	uint64_t recent[SPIN_WINDOW]; /* the last batches' submission -> done, ns */
	uint32_t next, n, since;   /* ring position, fill, notes since the last update */
} spin;

void spin_init(spin *s, uint64_t max_ns, uint64_t after_ns);
/* One batch took ns from its submission to its end on the GPU. */
void spin_note(spin *s, uint64_t ns);

#endif
