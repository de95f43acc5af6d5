/* tests/common/leakcheck.h — leaks found by growth, not by a threshold:
 * run the same work against one daemon again and again, and require that
 * what the daemon holds stops growing once it is warm.
 *
 * After each cycle the daemon is first let settle (leakcheck_settle), then
 * sampled: its open descriptors (/proc/PID/fd) and the memory it owns,
 * RssAnon + RssShmem of /proc/PID/status in KiB (file-backed pages are
 * left out: the kernel drops and refaults those as it likes, a leak shows in
 * anonymous or shared memory). `warmup` cycles run unsampled (what the first
 * ones allocate for good: compiled pipelines, driver and validation-layer
 * caches, malloc arenas), then `cycles` sampled ones; each series is judged
 * by tests/common/growth.h (both robust slopes above the bound: growth).
 * Nothing compares with a baseline taken once, so a cold driver cache that
 * compiles during the first cycles costs only memory that stays flat after.
 *
 * Bounds per cycle: LEAKCHECK_KB_PER_CYCLE KiB (the work of one cycle must
 * be chosen so that a leak worth finding exceeds it: repeat small
 * operations inside a cycle), LEAKCHECK_FDS_PER_CYCLE descriptors (one
 * descriptor lost per cycle is growth). Memory can only show a leak once
 * it outgrows the free memory malloc already holds: a daemon patched to
 * lose 16 KiB per registered region grew 520 KiB per test_errors cycle and
 * failed; one that lost a dup()ed descriptor per region grew 32 per cycle
 * and failed, the tests that registered named.
 *
 * Under VKGRAD_TEST_DAEMON_WRAPPER (valgrind) the check is skipped: memcheck
 * finds leaks there, and cycles would take hours. In an AddressSanitizer
 * build memory is not judged (its quarantine holds freed memory; LeakSanitizer
 * checks at exit), descriptors are. VKGRAD_TEST_LEAK_CYCLES=N overrides the
 * number of sampled cycles (>= 4). */
#ifndef VKG_TEST_LEAKCHECK_H
#define VKG_TEST_LEAKCHECK_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "daemon_proc.h"

#define LEAKCHECK_KB_PER_CYCLE 256.0
#define LEAKCHECK_FDS_PER_CYCLE 0.5

/* The environment entry for a daemon whose memory is judged: glibc's malloc
 * then gives the free memory at the top of a heap back to the system once
 * more than 128 KiB lie there. By default that threshold adapts: it rises
 * to twice the largest block malloc had mmap()ed and freed so far (up to
 * 64 MiB), and the top of the heap keeps what the busiest moment of a cycle
 * used — a sample then measures the cycle's peak, not what is still held.
 * Seen in test_hostile (malloc_stats() called in the daemon through gdb
 * after each of 30 cycles): malloc's bytes in use were 41513 KiB after
 * every cycle, while the main heap's size was 8224 or 10244 KiB depending
 * on how many of test_sigkill_client_with_100_jobs's jobs were in flight at
 * its kill; the samples jumped between 53756 and 54656 KiB, and a new peak
 * in each of a few cycles looked like growth (a loaded run: 55476 55980
 * 55584 56532 56532, median step +252 KiB/cycle against the bound of 256).
 * With this entry the same 30 cycles sampled 51184 KiB each; a daemon
 * patched to lose 384 bytes per registered region grew +412 KiB at every
 * cycle and failed. What a leak adds to, memory in use, is not changed. */
#define LEAKCHECK_MALLOC_ENV "GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072"

typedef struct leakcheck_opts {
	unsigned warmup;        /* unsampled cycles first (0: 1; a fresh daemon: 2) */
	unsigned cycles;        /* sampled cycles (0: 5; at least GROWTH_MIN_SAMPLES) */
	double kb_per_cycle;    /* memory bound (0: LEAKCHECK_KB_PER_CYCLE) */
	double fds_per_cycle;   /* descriptor bound (0: LEAKCHECK_FDS_PER_CYCLE) */
} leakcheck_opts;

/* What the daemon holds now. */
typedef struct leakcheck_sample {
	int fds;  /* open descriptors */
	long kb;  /* RssAnon + RssShmem, KiB */
} leakcheck_sample;

/* Sample d's process. Returns 0 or -1 (it is gone). */
int leakcheck_sample_daemon(const daemon_proc *d, leakcheck_sample *s);
/* Wait up to timeout_ms (ten times longer under a wrapper) until the daemon
 * is idle: stats reports one client (the one asking), no region, no job
 * queued or running, and its descriptor count held still for 50 ms.
 * Returns 0, or -1 after printing what it still holds. */
int leakcheck_settle(const daemon_proc *d, int timeout_ms);

typedef void (*leakcheck_cycle_fn)(void *arg);
/* Run fn(arg) warmup + cycles times against d (fn may fail the running
 * cmocka test), settle and sample after each, print both series, and fail
 * the running test, naming `what`, if either grows. */
void leakcheck_expect_flat(const daemon_proc *d, const char *what, leakcheck_cycle_fn fn,
			   void *arg, const leakcheck_opts *o);
/* The cycle as a test group's: every test of tests[0..n) whose teardown is
 * `teardown`, except `self` (the caller), run in order, the daemon settled
 * after each. On growth, the tests after which descriptors or memory rose
 * between the first and the last sampled cycle are printed too. Tests in
 * the cycle must not skip() (it would skip the caller). */
void leakcheck_expect_flat_tests(const daemon_proc *d, const struct CMUnitTest *tests, size_t n,
				 CMUnitTestFunction self, CMFixtureFunction teardown,
				 const leakcheck_opts *o);

#endif
