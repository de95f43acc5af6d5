/* daemon/service.c — see service.h. */
#include "service.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <systemd/sd-daemon.h>

#define STATUS_COALESCE_MS 100

static struct {
	bool notify;              /* $NOTIFY_SOCKET is set: messages go somewhere */
	bool ready;
	bool timers;              /* the handles below are initialised */
	uv_timer_t watchdog;      /* WATCHDOG=1 pings */
	uv_timer_t status;        /* one-shot: the coalesced clients STATUS= */
	uint32_t clients;
	char device[256];
} g;

int service_listen_fd(char *where, size_t n)
{
	/* unset_environment: the variables are for this process only */
	int k = sd_listen_fds(1);
	if (k == 0)
		return -1;
	if (k < 0) {
		log_err("socket activation: sd_listen_fds: %s", strerror(-k));
		return -2;
	}
	int fd = SD_LISTEN_FDS_START;
	if (k != 1) {
		log_err("socket activation: %d sockets passed, expected one (ListenStream= once)", k);
		return -2;
	}
	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_err("socket activation: the passed fd %d is not a listening AF_UNIX stream socket",
			fd);
		return -2;
	}
	/* systemd passes blocking descriptors; the accept loop needs EAGAIN */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
		log_err("socket activation: fcntl: %s", strerror(errno));
		return -2;
	}
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
	    len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0])
		snprintf(where, n, "%.*s (passed by the service manager)",
			 (int)(len - offsetof(struct sockaddr_un, sun_path)), sa.sun_path);
	else
		snprintf(where, n, "fd %d (passed by the service manager)", fd);
	return fd;
}

void service_status(const char *fmt, ...)
{
	if (!getenv("NOTIFY_SOCKET"))
		return;
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sd_notifyf(0, "STATUS=%s", line);
}

static void send_clients_status(void)
{
	sd_notifyf(0, "STATUS=serving on %s; %u client(s)", g.device, (unsigned)g.clients);
}

static void status_cb(uv_timer_t *t)
{
	(void)t;
	send_clients_status();
}

static void watchdog_cb(uv_timer_t *t)
{
	(void)t;
	/* the loop turned: it is not stuck */
	sd_notify(0, "WATCHDOG=1");
}

void service_ready(uv_loop_t *loop, const char *device_name)
{
	g.notify = getenv("NOTIFY_SOCKET") != NULL;
	g.ready = true;
	snprintf(g.device, sizeof(g.device), "%s", device_name);
	uv_timer_init(loop, &g.watchdog);
	uv_timer_init(loop, &g.status);
	g.timers = true;
	if (g.notify)
		sd_notifyf(0, "READY=1\nSTATUS=serving on %s; %u client(s)", g.device,
			   (unsigned)g.clients);
	uint64_t usec = 0;
	int r = sd_watchdog_enabled(0, &usec);
	if (r < 0)
		log_warn("watchdog: %s; not pinging", strerror(-r));
	if (r > 0 && usec > 0) {
		uint64_t ms = usec / 2000;
		if (ms == 0)
			ms = 1;
		log_info("watchdog: pinging every %llu ms (WatchdogSec %.3f s)",
			 (unsigned long long)ms, (double)usec / 1e6);
		sd_notify(0, "WATCHDOG=1");
		uv_timer_start(&g.watchdog, watchdog_cb, ms, ms);
	}
}

void service_clients(uint32_t n)
{
	g.clients = n;
	if (!g.notify || !g.ready || uv_is_active((uv_handle_t *)&g.status))
		return;
	uv_timer_start(&g.status, status_cb, STATUS_COALESCE_MS, 0);
}

void service_stopping(void)
{
	g.ready = false; /* no more clients STATUS= lines */
	if (!g.notify)
		return;
	if (g.timers)
		uv_timer_stop(&g.status);
	sd_notify(0, "STOPPING=1\nSTATUS=shutting down: answering the jobs in flight");
}

void service_close(void)
{
	if (!g.timers)
		return;
	g.timers = false;
	g.ready = false;
	uv_close((uv_handle_t *)&g.watchdog, NULL);
	uv_close((uv_handle_t *)&g.status, NULL);
}
