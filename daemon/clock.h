/* clock — the daemon's one clock: CLOCK_MONOTONIC in nanoseconds, for
 * every stage time, deadline and rate the daemon measures. */
#ifndef VKGRAD_CLOCK_H
#define VKGRAD_CLOCK_H

#include <stdint.h>

uint64_t clock_now_ns(void);

#endif
