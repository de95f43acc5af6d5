/* tests/soak/soak_main.c — the soak's driver: start one daemon, fork the
 * clients, sample the daemon every second and at quiet points until the
 * time is up, stop the clients, let the daemon settle, stop it, report
 * (soak.h). */
#include "soak.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "deadline.h"
#include "leakcheck.h"
#include "rawsock.h"

/* The clients: two small, one of each other kind. */
static const soak_kind mix[] = {SOAK_SMALL, SOAK_SMALL, SOAK_LARGE, SOAK_CHURN, SOAK_HOSTILE,
				SOAK_KILLER};
#define NMIX (sizeof(mix) / sizeof(mix[0]))

static double env_seconds(const char *name, double dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return dflt;
	char *end;
	double x = strtod(v, &end);
	if (*end || x <= 0) {
		fprintf(stderr, "soak: %s=%s is not a positive number of seconds\n", name, v);
		exit(2);
	}
	return x;
}

static unsigned long total_ops(const soak_shared *sh)
{
	unsigned long n = 0;
	for (unsigned i = 0; i < sh->nslots; i++)
		n += atomic_load(&sh->slot[i].ops);
	return n;
}

static void print_progress(const soak_shared *sh, const soak_sample *s)
{
	unsigned long failed = 0;
	for (unsigned i = 0; i < sh->nslots; i++)
		failed += atomic_load(&sh->slot[i].failed);
	printf("soak: t=%4.0f s  VmRSS %7ld KiB  owned %7ld KiB  fds %3d  operations %lu  "
	       "unexpected %lu\n",
	       s->t, s->rss_kb, s->owned_kb, s->fds, s->ops, failed);
	fflush(stdout);
}

/* A quiet point: every client paused (holding nothing), the daemon settled,
 * then sampled; the clients go on. Returns false when that failed. */
static bool quiet_point(daemon_proc *d, soak_shared *sh, double t, soak_sample *out)
{
	atomic_store(&sh->pause, 1);
	const int64_t until = deadline_now_ms() + 120000;
	bool ok = true;
	while (ok && atomic_load(&sh->paused) < (int)sh->nslots) {
		ok = deadline_now_ms() < until;
		deadline_sleep_ms(5);
	}
	if (!ok)
		fprintf(stderr, "soak: the clients did not pause within 120 s\n");
	leakcheck_sample ls;
	ok = ok && leakcheck_settle(d, 60000) == 0 && leakcheck_sample_daemon(d, &ls) == 0;
	if (ok)
		*out = (soak_sample){.t = t, .rss_kb = daemon_proc_rss_kb(d), .owned_kb = ls.kb,
				     .fds = ls.fds, .ops = total_ops(sh)};
	atomic_store(&sh->pause, 0);
	return ok;
}

/* Sample every second, with a quiet point every ser->quiet_every seconds,
 * until `seconds` passed, the daemon died or did not settle. Returns
 * false in those last two cases. */
static bool sample_run(daemon_proc *d, soak_shared *sh, soak_series *ser, unsigned max,
		       double seconds)
{
	const int64_t t0 = deadline_now_ms();
	double next_quiet = ser->quiet_every;
	for (unsigned k = 1; ser->nbusy < max; k++) {
		int64_t wait = t0 + (int64_t)k * 1000 - deadline_now_ms();
		if (wait > 0)
			deadline_sleep_ms((unsigned)wait); /* the sampling period */
		int st;
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			fprintf(stderr, "soak: the daemon died (wait status 0x%x)\n", st);
			d->pid = 0;
			return false;
		}
		soak_sample *x = &ser->busy[ser->nbusy];
		x->t = (double)(deadline_now_ms() - t0) / 1000.0;
		x->rss_kb = daemon_proc_rss_kb(d);
		x->owned_kb = daemon_proc_owned_kb(d);
		x->fds = daemon_proc_fd_count(d);
		x->ops = total_ops(sh);
		if (x->rss_kb >= 0 && x->owned_kb >= 0 && x->fds >= 0)
			ser->nbusy++;
		if (k % 10 == 0)
			print_progress(sh, x);
		if (x->t >= seconds)
			break;
		if (x->t >= next_quiet && ser->nquiet < max) {
			soak_sample *q = &ser->quiet[ser->nquiet];
			if (!quiet_point(d, sh, x->t, q))
				return false;
			ser->nquiet++;
			printf("soak: t=%4.0f s  quiet point: owned %7ld KiB  fds %3d\n", q->t,
			       q->owned_kb, q->fds);
			next_quiet += ser->quiet_every;
		}
	}
	return true;
}

/* Tell the clients to stop and reap them (SIGKILL after 120 s). */
static void stop_clients(soak_shared *sh, const pid_t *pids, unsigned n)
{
	atomic_store(&sh->stop, 1);
	const int64_t until = deadline_now_ms() + 120000;
	for (unsigned i = 0; i < n; i++) {
		int st;
		while (waitpid(pids[i], &st, WNOHANG) == 0) {
			if (deadline_now_ms() > until) {
				fprintf(stderr, "soak: client %u (%s) did not stop; killed\n", i,
					soak_kind_name[sh->slot[i].kind]);
				kill(pids[i], SIGKILL);
				waitpid(pids[i], &st, 0);
				break;
			}
			deadline_sleep_ms(20);
		}
	}
}

int main(void)
{
	const double seconds = env_seconds("SOAK_SECONDS", 600);
	double warm = seconds / 4 < 60 ? seconds / 4 : 60;
	warm = env_seconds("SOAK_WARMUP_SECONDS", warm);
	if (warm >= seconds) {
		fprintf(stderr, "soak: the warm-up (%.0f s) must be shorter than the run (%.0f s)\n",
			warm, seconds);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	const char *val = getenv("VKGRAD_TEST_VALIDATION");
	if (!val || !*val)
		setenv("VKGRAD_TEST_VALIDATION", "0", 1);
	daemon_proc d;
	memset(&d, 0, sizeof(d));
	static const char *const args[] = {"--log-level", "info", NULL};
	if (daemon_proc_start(&d, args, NULL) != 0)
		return 1;
	printf("soak: %.0f s (warm-up %.0f s) against one vkgradd (pid %d), validation layer %s; "
	       "log %s\n",
	       seconds, warm, (int)d.pid,
	       strcmp(getenv("VKGRAD_TEST_VALIDATION"), "0") ? "on" : "off", d.log);
	soak_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			       -1, 0);
	if (sh == MAP_FAILED) {
		perror("soak: mmap");
		daemon_proc_kill(&d);
		return 1;
	}
	snprintf(sh->sock, sizeof(sh->sock), "%s", d.sock);
	sh->nslots = NMIX;
	pid_t pids[NMIX];
	fflush(NULL);
	for (unsigned i = 0; i < NMIX; i++) {
		sh->slot[i].kind = mix[i];
		pids[i] = fork();
		if (pids[i] == 0)
			soak_client_run(sh, &sh->slot[i], i + 1);
		if (pids[i] < 0) {
			perror("soak: fork");
			stop_clients(sh, pids, i);
			daemon_proc_kill(&d);
			return 1;
		}
	}
	const unsigned max = (unsigned)seconds + 16;
	soak_series ser = {.busy = calloc(max, sizeof(soak_sample)),
			   .quiet = calloc(max, sizeof(soak_sample))};
	double qe = (seconds - warm) / 9;
	ser.quiet_every = qe < 5 ? 5 : qe > 30 ? 30 : qe;
	bool alive = ser.busy && ser.quiet && sample_run(&d, sh, &ser, max, seconds);
	stop_clients(sh, pids, NMIX);
	bool served = alive && leakcheck_settle(&d, 60000) == 0 && rawsock_daemon_serves(d.sock);
	if (d.pid > 0 && daemon_proc_stop(&d) != 0)
		served = false;
	bool pass = soak_report(sh, &ser, seconds, warm, served);
	if (!pass && d.dir[0])
		fprintf(stderr, "soak: the daemon's directory is kept: %s\n", d.dir);
	free(ser.busy);
	free(ser.quiet);
	return pass ? 0 : 1;
}
