/* tests/common/daemon_proc.c — see daemon_proc.h. */
#include "daemon_proc.h"

#include "deadline.h"
#include "rawsock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Start-up on lavapipe builds its pipelines (3-5 s) and, without a saved
 * cost model, times the kernels (4 s idle); on a 2-core machine running
 * two test binaries and two busy loops the timing alone took over 55 s.
 * A daemon that never listens is still caught, later. */
#define START_TIMEOUT_MS 180000
#define STOP_TIMEOUT_MS 60000
#define MAX_ARGS 48

int daemon_proc_failures;

bool daemon_proc_slow(void)
{
	const char *w = getenv("VKGRAD_TEST_DAEMON_WRAPPER");
	return w && *w;
}

const char *daemon_proc_binary(void)
{
	static char path[PATH_MAX];
	const char *b = getenv("BUILD");
	snprintf(path, sizeof(path), "%s/vkgradd", b && *b ? b : "build");
	return path;
}


int daemon_proc_init(daemon_proc *d)
{
	memset(d, 0, sizeof(*d));
	/* /tmp rather than $TMPDIR: the socket path must fit sun_path */
	snprintf(d->dir, sizeof(d->dir), "/tmp/vkgrad-it.XXXXXX");
	if (!mkdtemp(d->dir))
		return -errno;
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	snprintf(d->cache, sizeof(d->cache), "%s/cache", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	return 0;
}

/* In the child: never returns. */
static void exec_daemon(const char *const *argv, const char *log, const char *const *env)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
	}
	/* the log format we scan is the plain one; no injected faults unless asked */
	unsetenv("JOURNAL_STREAM");
	unsetenv("VKGRAD_FAULT_INJECT");
	unsetenv("VKGRAD_CPU_IMPORT");
	/* not under a service manager: no socket activation, no sd_notify */
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDNAMES");
	unsetenv("NOTIFY_SOCKET");
	/* VKGRAD_TEST_VALIDATION=0 (make test-valgrind): no layer, whose
	 * own allocations and time-outs under valgrind are not ours */
	const char *val = getenv("VKGRAD_TEST_VALIDATION");
	setenv("VKGRAD_VALIDATION", val && strcmp(val, "0") == 0 ? "0" : "1", 1);
	/* synchronization validation too: a missing barrier between dependent
	 * dispatches is a hazard error even where the device (lavapipe runs
	 * dispatches one after another) would not show it */
	const char *sync = getenv("VKGRAD_TEST_SYNC_VALIDATION");
	if (!sync || strcmp(sync, "0") != 0)
		setenv("VK_LAYER_ENABLES",
		       "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT", 0);
	for (unsigned i = 0; env && env[i]; i++)
		putenv((char *)env[i]);
	execvp(argv[0], (char *const *)argv); /* a wrapper is found on $PATH */
	fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static bool can_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Copy file `from` (at most 16 KiB: a cost model is at most 8) to `to`;
 * on any failure `to` is left out. */
static void copy_small_file(const char *from, const char *to)
{
	char buf[16384];
	FILE *in = fopen(from, "rb");
	if (!in)
		return;
	const size_t got = fread(buf, 1, sizeof(buf), in);
	const bool whole = feof(in) && !ferror(in);
	fclose(in);
	FILE *out = whole ? fopen(to, "wb") : NULL;
	if (!out)
		return;
	const bool ok = fwrite(buf, 1, got, out) == got;
	if (fclose(out) != 0 || !ok)
		unlink(to);
}

/* A daemon's own cache directory, not made yet, made holding a copy of
 * the cost models of VKGRAD_TEST_MODEL_DIR (tests/run.sh measures one per
 * run), so the daemon loads one instead of timing the kernels again. A
 * directory made before (a daemon restarted on it) is left as it is; a
 * model not copied is measured by the daemon. */
static void seed_cache(const char *cache)
{
	const char *src = getenv("VKGRAD_TEST_MODEL_DIR");
	if (!src || !*src || mkdir(cache, 0700) != 0)
		return;
	DIR *dir = opendir(src);
	if (!dir)
		return;
	for (struct dirent *e; (e = readdir(dir));) {
		const size_t len = strlen(e->d_name);
		if (strncmp(e->d_name, "costmodel-", 10) || len < 4 || strcmp(e->d_name + len - 4, ".txt"))
			continue;
		char from[PATH_MAX], to[PATH_MAX];
		snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", cache, e->d_name);
		copy_small_file(from, to);
	}
	closedir(dir);
}

int daemon_proc_start(daemon_proc *d, const char *const *args, const char *const *env)
{
	if (!d->dir[0] && daemon_proc_init(d) != 0) {
		fprintf(stderr, "daemon_proc: mkdtemp: %s\n", strerror(errno));
		return -1;
	}
	const char *argv[MAX_ARGS];
	unsigned n = 0;
	/* VKGRAD_TEST_DAEMON_WRAPPER: its words first (static: they outlive
	 * the fork, and one daemon starts at a time) */
	static char wrap[512];
	const char *w = getenv("VKGRAD_TEST_DAEMON_WRAPPER");
	if (w && *w) {
		snprintf(wrap, sizeof(wrap), "%s", w);
		for (char *save = NULL, *t = strtok_r(wrap, " \t", &save); t && n < MAX_ARGS / 2;
		     t = strtok_r(NULL, " \t", &save))
			argv[n++] = t;
	}
	const unsigned bin = n;
	seed_cache(d->cache);
	argv[n++] = daemon_proc_binary();
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--cache-dir";
	argv[n++] = d->cache;
	argv[n++] = "--log-level";
	argv[n++] = "debug";
	for (unsigned i = 0; args && args[i] && n < MAX_ARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	if (access(argv[bin], X_OK) != 0) {
		fprintf(stderr, "daemon_proc: %s is not executable (run make; BUILD=%s)\n", argv[bin],
			getenv("BUILD") ? getenv("BUILD") : "");
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "daemon_proc: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0)
		exec_daemon(argv, d->log, env);
	d->pid = pid;
	const int64_t deadline = deadline_now_ms() + deadline_scaled_ms(START_TIMEOUT_MS);
	for (;;) {
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			d->pid = 0;
			fprintf(stderr, "daemon_proc: vkgradd exited during start-up (status 0x%x)\n", st);
			daemon_proc_print_log_tail(d, 30);
			return -1;
		}
		if (can_connect(d->sock))
			return 0;
		if (deadline_now_ms() > deadline) {
			fprintf(stderr, "daemon_proc: %s not accepting after %d s\n", d->sock,
				deadline_scaled_ms(START_TIMEOUT_MS) / 1000);
			daemon_proc_print_log_tail(d, 30);
			daemon_proc_kill(d);
			return -1;
		}
		deadline_sleep_ms(10);
	}
}

int daemon_proc_wait(daemon_proc *d, int timeout_ms)
{
	if (d->pid <= 0)
		return -1;
	const int64_t deadline = deadline_now_ms() + timeout_ms;
	for (;;) {
		int st;
		pid_t p = waitpid(d->pid, &st, WNOHANG);
		if (p == d->pid) {
			d->pid = 0;
			return st;
		}
		if (p < 0 && errno == ECHILD) {
			d->pid = 0;
			return -1;
		}
		if (deadline_now_ms() > deadline)
			return -1;
		deadline_sleep_ms(5);
	}
}

void daemon_proc_kill(daemon_proc *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
	}
	d->pid = 0;
}

/* Remove a directory tree (the daemon's directory: a few files and the
 * cache directory). */
static void remove_tree(const char *path)
{
	DIR *dir = opendir(path);
	if (dir) {
		struct dirent *e;
		while ((e = readdir(dir))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char p[PATH_MAX];
			struct stat st;
			snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
				remove_tree(p);
			else
				unlink(p);
		}
		closedir(dir);
	}
	rmdir(path);
}

static int stop_fail(daemon_proc *d)
{
	daemon_proc_print_log_tail(d, 40);
	fprintf(stderr, "daemon_proc: log kept in %s\n", d->log);
	daemon_proc_failures++;
	return -1;
}

/* Under a wrapper (valgrind): its summary lines from the log, to stdout. */
static void print_wrapper_summary(const daemon_proc *d)
{
	static const char *const keys[] = {"ERROR SUMMARY", "definitely lost", "indirectly lost",
					   "possibly lost", "in use at exit"};
	FILE *f = fopen(d->log, "r");
	if (!f)
		return;
	char line[1024];
	while (fgets(line, sizeof(line), f))
		for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			if (line[0] == '=' && strstr(line, keys[i])) {
				printf("daemon_proc: %s", line);
				break;
			}
	fclose(f);
	fflush(stdout);
}

int daemon_proc_stop(daemon_proc *d)
{
	if (d->pid <= 0) {
		fprintf(stderr, "daemon_proc: daemon on %s is not running (already exited?)\n", d->sock);
		return stop_fail(d);
	}
	bool bad = false;
	proto_stats st;
	int rc = rawsock_stats(d->sock, &st);
	if (rc != 0) {
		fprintf(stderr, "daemon_proc: stats before stopping failed (%s)\n", strerror(-rc));
		bad = true;
	} else if (st.validation_errors != 0) {
		fprintf(stderr, "daemon_proc: stats reports validation_errors = %llu (want 0)\n",
			(unsigned long long)st.validation_errors);
		bad = true;
	}
	kill(d->pid, SIGTERM);
	int ws = daemon_proc_wait(d, deadline_scaled_ms(STOP_TIMEOUT_MS));
	if (ws == -1) {
		fprintf(stderr, "daemon_proc: no exit %d s after SIGTERM; killing it\n",
			deadline_scaled_ms(STOP_TIMEOUT_MS) / 1000);
		daemon_proc_kill(d);
		return stop_fail(d);
	}
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
		if (WIFSIGNALED(ws))
			fprintf(stderr, "daemon_proc: vkgradd died of signal %d\n", WTERMSIG(ws));
		else
			fprintf(stderr, "daemon_proc: vkgradd exited with status %d (want 0)\n",
				WEXITSTATUS(ws));
		bad = true;
	}
	if (daemon_proc_slow())
		print_wrapper_summary(d);
	int ve = daemon_proc_log_validation_errors(d);
	if (ve != 0) {
		fprintf(stderr, "daemon_proc: the log holds %d validation error line(s); the first:\n",
			ve);
		daemon_proc_print_validation_errors(d, 3);
		bad = true;
	}
	if (bad)
		return stop_fail(d);
	daemon_proc_cleanup(d);
	return 0;
}

void daemon_proc_cleanup(daemon_proc *d)
{
	if (d->dir[0])
		remove_tree(d->dir);
	d->dir[0] = 0;
}

int daemon_proc_log_validation_errors(const daemon_proc *d)
{
	FILE *f = fopen(d->log, "r");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "error: vulkan validation"))
			n++;
	fclose(f);
	return n;
}

int daemon_proc_validation_count(const daemon_proc *d, uint64_t *n)
{
	proto_stats st;
	int rc = rawsock_stats(d->sock, &st);
	if (rc == 0)
		*n = st.validation_errors;
	return rc;
}

void daemon_proc_print_validation_errors(const daemon_proc *d, unsigned max)
{
	FILE *f = fopen(d->log, "r");
	if (!f)
		return;
	char line[4096];
	unsigned n = 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		if (!strstr(line, "error: vulkan validation"))
			continue;
		line[strcspn(line, "\n")] = 0;
		fprintf(stderr, "%.700s%s\n", line, strlen(line) > 700 ? " ..." : "");
		n++;
	}
	fclose(f);
}

bool daemon_proc_log_contains(const daemon_proc *d, const char *needle)
{
	FILE *f = fopen(d->log, "r");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

void daemon_proc_print_log_tail(const daemon_proc *d, unsigned lines)
{
	FILE *f = fopen(d->log, "r");
	if (!f) {
		fprintf(stderr, "daemon_proc: no log at %s\n", d->log);
		return;
	}
	/* a ring of the last `lines` lines */
	char (*ring)[512] = calloc(lines ? lines : 1, sizeof(*ring));
	unsigned count = 0;
	char line[512];
	while (ring && lines && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			/* a long line: keep its start, skip the rest */
			int c;
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			line[len - 1] = '\n';
		}
		snprintf(ring[count % lines], sizeof(ring[0]), "%s", line);
		count++;
	}
	fclose(f);
	fprintf(stderr, "---- last lines of %s ----\n", d->log);
	unsigned first = count > lines ? count - lines : 0;
	for (unsigned i = first; ring && i < count; i++)
		fputs(ring[i % lines], stderr);
	fprintf(stderr, "---- end of log ----\n");
	free(ring);
}

int daemon_proc_run(const char *const *args, const char *log, int timeout_ms)
{
	return daemon_proc_run_env(args, NULL, log, timeout_ms);
}

int daemon_proc_run_env(const char *const *args, const char *const *env, const char *log, int timeout_ms)
{
	const char *argv[MAX_ARGS];
	unsigned n = 0;
	argv[n++] = daemon_proc_binary();
	for (unsigned i = 0; args && args[i] && n < MAX_ARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0)
		exec_daemon(argv, log, env);
	daemon_proc d = {.pid = pid};
	int st = daemon_proc_wait(&d, timeout_ms);
	if (st == -1)
		daemon_proc_kill(&d);
	return st;
}

int daemon_proc_refusal(const daemon_proc *d, const char *const *env, char *text, size_t cap)
{
	char log[160];
	snprintf(log, sizeof(log), "%s/refusal.log", d->dir);
	const char *args[] = {"--socket", d->sock, "--cache-dir", d->cache, NULL};
	const int ws = daemon_proc_run_env(args, env, log, 60000);
	text[0] = 0;
	FILE *f = fopen(log, "r");
	if (f) {
		const size_t len = fread(text, 1, cap - 1, f);
		text[len] = 0;
		fclose(f);
	}
	unlink(log);
	return ws;
}

bool daemon_proc_knob_refused(const daemon_proc *d, const char *knob, const char *value, int *ws, char *text,
			      size_t cap)
{
	char env[160], want[160];
	snprintf(env, sizeof(env), "%s=%s", knob, value);
	const char *const envs[] = {env, NULL};
	*ws = daemon_proc_refusal(d, envs, text, cap);
	snprintf(want, sizeof(want), "%s='%s'", knob, value);
	return *ws != -1 && WIFEXITED(*ws) && WEXITSTATUS(*ws) != 0 && strstr(text, want);
}

/* ---- /proc/PID --------------------------------------------------------------- */

int daemon_proc_fd_count(const daemon_proc *d)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)d->pid);
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* The value of "field: N kB" in /proc/PID/status, or -1. */
static long status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t len = strlen(field);
	long kb = -1;
	while (kb < 0 && fgets(line, sizeof(line), f))
		if (strncmp(line, field, len) != 0 || line[len] != ':' ||
		    sscanf(line + len + 1, " %ld kB", &kb) != 1)
			kb = -1;
	fclose(f);
	return kb;
}

long daemon_proc_rss_kb(const daemon_proc *d)
{
	return status_kb(d->pid, "VmRSS");
}

long daemon_proc_owned_kb(const daemon_proc *d)
{
	long anon = status_kb(d->pid, "RssAnon"), shmem = status_kb(d->pid, "RssShmem");
	return anon < 0 || shmem < 0 ? -1 : anon + shmem;
}

void daemon_proc_print_fds(const daemon_proc *d)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)d->pid);
	DIR *dir = opendir(path);
	if (!dir)
		return;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		char link[PATH_MAX], target[PATH_MAX];
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		fprintf(stderr, "  fd %s -> %s\n", e->d_name, target);
	}
	closedir(dir);
}
