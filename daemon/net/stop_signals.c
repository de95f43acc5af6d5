/* daemon/net/stop_signals.c — see stop_signals.h. */
#include "stop_signals.h"

#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void stop_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
}

int stop_signals_block(void)
{
	sigset_t set;
	stop_set(&set);
	const int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (rc != 0) {
		errno = rc;
		return -1;
	}
	return 0;
}

/* Every signal waiting in the descriptor to the callback. */
static void read_all(stop_signals *ss)
{
	struct signalfd_siginfo si;
	while (read(ss->fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		ss->cb(ss->ctx, (int)si.ssi_signo);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
	(void)status;
	(void)events;
	read_all(h->data);
}

int stop_signals_open(stop_signals *ss, uv_loop_t *loop, stop_signals_fn cb, void *ctx)
{
	memset(ss, 0, sizeof(*ss));
	ss->fd = -1;
	ss->cb = cb;
	ss->ctx = ctx;
	sigset_t set;
	stop_set(&set);
	if (stop_signals_block() != 0) {
		log_err("blocking SIGTERM and SIGINT: %s", strerror(errno));
		return -1;
	}
	ss->fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ss->fd < 0) {
		log_err("signalfd: %s", strerror(errno));
		return -1;
	}
	if (uv_poll_init(loop, &ss->poll, ss->fd) != 0) {
		log_err("uv_poll_init on the signalfd failed");
		close(ss->fd);
		ss->fd = -1;
		return -1;
	}
	ss->poll.data = ss;
	ss->polling = true;
	uv_poll_start(&ss->poll, UV_READABLE, poll_cb);
	return 0;
}

void stop_signals_unpoll(stop_signals *ss)
{
	if (!ss->polling)
		return;
	ss->polling = false;
	uv_close((uv_handle_t *)&ss->poll, NULL);
}

void stop_signals_end(stop_signals *ss)
{
	if (ss->fd < 0)
		return;
	read_all(ss);
	close(ss->fd);
	ss->fd = -1;
}
