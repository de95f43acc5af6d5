/* tests/common/daemon_proc.h — a private vkgradd for one test binary or test.
 *
 * Each daemon gets a fresh mkdtemp directory holding its socket, its own
 * pipeline cache directory and its log (stderr). It runs $BUILD/vkgradd
 * (BUILD defaults to "build") with VKGRAD_VALIDATION=1, so the Khronos
 * validation layer counts every misuse of Vulkan. The layer's
 * synchronization validation is on too (VK_LAYER_ENABLES, unless the
 * environment already sets that variable, or VKGRAD_TEST_SYNC_VALIDATION=0),
 * so a missing barrier counts as an error even on a device that would not
 * show it. The daemon dies with the test process (PR_SET_PDEATHSIG).
 *
 * VKGRAD_TEST_DAEMON_WRAPPER="valgrind --leak-check=full ..." runs each
 * daemon that daemon_proc_start starts under that command (words split on
 * blanks; `make test-valgrind`); start, stop and reply timeouts are then
 * ten times longer (daemon_proc_slow()) and tests/common/leakcheck.h skips
 * its growth checks.
 * VKGRAD_TEST_VALIDATION=0 leaves the validation layer out.
 * VKGRAD_TEST_MODEL_DIR=DIR (set by tests/run.sh): a directory holding a
 * cost model (costmodel-*.txt) measured once for the run; a daemon's own
 * cache directory starts with a copy, so the daemon loads it instead of
 * timing the kernels at every start (where it does not fit, as with
 * another loop bound, the daemon measures as before). */
#ifndef VKG_TEST_DAEMON_PROC_H
#define VKG_TEST_DAEMON_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct daemon_proc {
	pid_t pid;       /* 0 when not running */
	char dir[64];    /* private directory */
	char sock[96];   /* dir/sock */
	char cache[96];  /* dir/cache */
	char log[96];    /* dir/daemon.log */
} daemon_proc;

/* Failures found by daemon_proc_stop(); main() adds them to its exit status
 * because cmocka 1.1 reports a failed group teardown but still returns 0. */
extern int daemon_proc_failures;

/* Make the private directory and fill the paths. Returns 0 or -errno. */
int daemon_proc_init(daemon_proc *d);
/* Start the daemon on d's socket with extra command-line arguments `args`
 * and extra environment entries `env` ("NAME=value"), both NULL-terminated
 * lists or NULL, then wait up to 180 s until connect() to the socket works.
 * Calls daemon_proc_init first when d->dir is empty. Returns 0, or -1 after
 * printing why and the log's tail. */
int daemon_proc_start(daemon_proc *d, const char *const *args, const char *const *env);
/* Stop the daemon and check it: while it runs, `stats` must report
 * validation_errors == 0; then SIGTERM, and within 60 s it must exit with
 * status 0 and its log must hold no validation error. Returns 0, or -1 after
 * printing what went wrong and the log's tail (and counting a failure in
 * daemon_proc_failures). The directory is removed when everything passed. */
int daemon_proc_stop(daemon_proc *d);
/* Remove the private directory (daemon_proc_stop does so when it passed). */
void daemon_proc_cleanup(daemon_proc *d);
/* SIGKILL and reap, for cleanup after a failed test; no checks. */
void daemon_proc_kill(daemon_proc *d);
/* Wait up to timeout_ms for the daemon to exit by itself; returns its wait
 * status, or -1 on timeout. */
int daemon_proc_wait(daemon_proc *d, int timeout_ms);

/* validation_errors from the daemon's stats. Returns 0 or a negative value. */
int daemon_proc_validation_count(const daemon_proc *d, uint64_t *n);
/* Print the first `max` validation error lines of the log (shortened). */
void daemon_proc_print_validation_errors(const daemon_proc *d, unsigned max);
/* How many validation errors the log reports, one line each (-1: no log). */
int daemon_proc_log_validation_errors(const daemon_proc *d);
/* Does the log contain `needle`? */
bool daemon_proc_log_contains(const daemon_proc *d, const char *needle);
/* Print the last `lines` lines of the log to stderr. */
void daemon_proc_print_log_tail(const daemon_proc *d, unsigned lines);

/* ---- what the daemon holds: /proc/PID ---------------------------------- */

/* Open descriptors (entries of /proc/PID/fd), or -1. */
int daemon_proc_fd_count(const daemon_proc *d);
/* Resident set size in KiB (VmRSS of /proc/PID/status), or -1. */
long daemon_proc_rss_kb(const daemon_proc *d);
/* Memory the daemon owns, in KiB: RssAnon + RssShmem (what a leak grows;
 * file-backed pages come and go as the kernel likes), or -1. */
long daemon_proc_owned_kb(const daemon_proc *d);

/* Where each of the daemon's descriptors points, to stderr. */
void daemon_proc_print_fds(const daemon_proc *d);
/* True under VKGRAD_TEST_DAEMON_WRAPPER: the daemon is much slower. */
bool daemon_proc_slow(void);

/* Path of the daemon binary: $BUILD/vkgradd (static buffer). */
const char *daemon_proc_binary(void);
/* Run the daemon binary with argv[1..] = args (NULL-terminated), stderr to
 * `log` (NULL: /dev/null), and wait up to timeout_ms for it to exit.
 * Returns the wait status, or -1 (it was killed after the timeout). */
int daemon_proc_run(const char *const *args, const char *log, int timeout_ms);
/* The same with env (NAME=value strings, NULL-terminated; NULL: none) set
 * in the daemon's environment. */
int daemon_proc_run_env(const char *const *args, const char *const *env, const char *log, int timeout_ms);
/* Run a daemon on d's socket and cache with env, expected to refuse to
 * start: its wait status (-1: killed after 60 s), its log in text (at most
 * cap - 1 bytes, NUL-terminated). */
int daemon_proc_refusal(const daemon_proc *d, const char *const *env, char *text, size_t cap);
/* daemon_proc_refusal with the environment variable knob=value alone: true
 * when the daemon exited with a non-zero status and its log (text) names
 * knob='value'; the wait status in *ws either way. */
bool daemon_proc_knob_refused(const daemon_proc *d, const char *knob, const char *value, int *ws, char *text,
			      size_t cap);

#endif
