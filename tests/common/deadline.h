/* tests/common/deadline.h — the clock of tests that wait for a condition:
 * poll it, sleep a little, give up at a generous deadline. No test waits a
 * fixed time in place of a condition, and none asserts a speed. */
#ifndef VKG_TEST_DEADLINE_H
#define VKG_TEST_DEADLINE_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds / microseconds. */
int64_t deadline_now_ms(void);
int64_t deadline_now_us(void);
/* Sleep ms milliseconds (a polling interval, never a synchronisation). */
void deadline_sleep_ms(unsigned ms);
/* A timeout for the daemon: ms, ten times longer under
 * VKGRAD_TEST_DAEMON_WRAPPER (daemon_proc_slow()). */
int deadline_scaled_ms(int ms);

#endif
