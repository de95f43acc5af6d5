/* bench/cli_daemon.c — a private vkgradd for one command: its own socket
 * and pipeline cache in a temporary directory, started, waited for, stopped
 * and checked. */
#include "cli_bench.h"

#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int rm_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)type;
	(void)f;
	remove(path);
	return 0;
}

void cli_rmtree(const char *dir)
{
	if (dir && *dir)
		nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

int cli_daemon_default_binary(char *buf, size_t len)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	if ((size_t)snprintf(buf, len, "%s/vkgradd", self) >= len)
		return -1;
	return 0;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void print_log_tail(const char *log, unsigned lines)
{
	FILE *f = fopen(log, "r");
	if (!f)
		return;
	char *ring[64] = {0};
	if (lines > 64)
		lines = 64;
	unsigned n = 0;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		free(ring[n % lines]);
		ring[n % lines] = strdup(line);
		n++;
	}
	fclose(f);
	cli_errf("--- last lines of %s ---\n", log);
	for (unsigned i = n > lines ? n - lines : 0; i < n; i++)
		if (ring[i % lines])
			cli_errf("  %s", ring[i % lines]);
	for (unsigned i = 0; i < lines; i++)
		free(ring[i]);
}

/* Reap the daemon if it exited; returns its wait status or -1. */
static int reap_nohang(cli_daemon *d)
{
	int st;
	pid_t p = waitpid(d->pid, &st, WNOHANG);
	if (p == d->pid) {
		d->pid = 0;
		return st;
	}
	return -1;
}

static void status_text(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "wait status %d", st);
}

int cli_daemon_start(cli_daemon *d, const char *binary, const char *const *args, int timeout_ms,
		     char *why, size_t why_len)
{
	memset(d, 0, sizeof(*d));
	const char *tmp = getenv("TMPDIR");
	snprintf(d->dir, sizeof(d->dir), "%s/vkgrad-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(d->dir)) {
		snprintf(why, why_len, "mkdtemp %s: %s", d->dir, strerror(errno));
		d->dir[0] = 0;
		return -1;
	}
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	char cache[300];
	snprintf(cache, sizeof(cache), "%s/cache", d->dir);
	/* argv built before the fork: the child only execs */
	const char *argv[24] = {binary, "--socket", d->sock, "--cache-dir", cache};
	size_t argc = 5;
	for (size_t i = 0; args && args[i]; i++) {
		if (argc + 1 >= sizeof(argv) / sizeof(argv[0])) {
			snprintf(why, why_len, "too many daemon arguments");
			goto fail_dir;
		}
		argv[argc++] = args[i];
	}
	argv[argc] = NULL;
	if (access(binary, X_OK) != 0) {
		snprintf(why, why_len, "daemon binary %s: %s (build it, or pass --daemon PATH)",
			 binary, strerror(errno));
		goto fail_dir;
	}
	int logfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (logfd < 0) {
		snprintf(why, why_len, "%s: %s", d->log, strerror(errno));
		goto fail_dir;
	}
	const pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork: %s", strerror(errno));
		close(logfd);
		goto fail_dir;
	}
	if (pid == 0) {
		/* the daemon dies with us should we crash */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			dup2(null, STDIN_FILENO);
		dup2(logfd, STDOUT_FILENO);
		dup2(logfd, STDERR_FILENO);
		execv(binary, (char *const *)argv);
		dprintf(STDERR_FILENO, "exec %s: %s\n", binary, strerror(errno));
		_exit(127);
	}
	close(logfd);
	d->pid = pid;

	/* ready once it answers ping; the first start compiles the pipelines */
	for (int waited = 0;; waited += 20) {
		vkg_client *c = vkg_connect(d->sock, NULL);
		if (c) {
			int rc = vkg_ping(c, NULL);
			vkg_close(c);
			if (rc == 0)
				return 0;
		}
		int st = reap_nohang(d);
		if (st != -1) {
			char s[96];
			status_text(st, s, sizeof(s));
			snprintf(why, why_len, "the daemon %s ended (%s) before it answered", binary, s);
			print_log_tail(d->log, 20);
			goto fail_dir;
		}
		if (waited >= timeout_ms) {
			snprintf(why, why_len, "the daemon did not answer on %s within %d ms", d->sock,
				 timeout_ms);
			print_log_tail(d->log, 20);
			kill(d->pid, SIGKILL);
			waitpid(d->pid, NULL, 0);
			d->pid = 0;
			goto fail_dir;
		}
		sleep_ms(20);
	}
fail_dir:
	cli_rmtree(d->dir);
	d->dir[0] = 0;
	return -1;
}

int cli_daemon_stop(cli_daemon *d, int timeout_ms, char *why, size_t why_len)
{
	int rc = 0;
	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		int st = -1;
		for (int waited = 0; (st = reap_nohang(d)) == -1; waited += 10) {
			if (waited >= timeout_ms) {
				kill(d->pid, SIGKILL);
				waitpid(d->pid, NULL, 0);
				d->pid = 0;
				snprintf(why, why_len, "the daemon did not exit within %d ms of SIGTERM "
					 "(killed); log kept in %s", timeout_ms, d->log);
				return -1;
			}
			sleep_ms(10);
		}
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			char s[96];
			status_text(st, s, sizeof(s));
			snprintf(why, why_len, "the daemon stopped with %s; log kept in %s", s, d->log);
			print_log_tail(d->log, 20);
			rc = -1;
		}
	}
	if (rc == 0)
		cli_rmtree(d->dir);
	d->dir[0] = 0;
	return rc;
}
