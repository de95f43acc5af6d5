/* tests/common/deadline.c — see deadline.h. */
#include "deadline.h"

#include <time.h>

#include "daemon_proc.h"

int64_t deadline_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t deadline_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void deadline_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

int deadline_scaled_ms(int ms)
{
	return daemon_proc_slow() ? 10 * ms : ms;
}
