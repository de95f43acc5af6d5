/* daemon/net/service.c — see service.h. */
#include "service.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <systemd/sd-daemon.h>

#define STATUS_COALESCE_MS 100

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

static bool g_notify; /* service_init */

void service_init(bool notify)
{
	g_notify = notify;
}

void service_status(const char *fmt, ...)
{
	if (!g_notify)
		return;
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	sd_notifyf(0, "STATUS=%s", line);
}

static void status_cb(uv_timer_t *t)
{
	const service *sv = t->data;
	sd_notifyf(0, "STATUS=serving on %s; %u client(s)", sv->device, (unsigned)sv->clients);
}

static void watchdog_cb(uv_timer_t *t)
{
	(void)t;
	/* the loop turned: it is not stuck */
	sd_notify(0, "WATCHDOG=1");
}

void service_ready(service *sv, uv_loop_t *loop, const char *device_name)
{
	sv->notify = g_notify;
	sv->ready = true;
	snprintf(sv->device, sizeof(sv->device), "%s", device_name);
	uv_timer_init(loop, &sv->watchdog);
	uv_timer_init(loop, &sv->status);
	sv->status.data = sv;
	sv->timers = true;
	if (sv->notify)
		sd_notifyf(0, "READY=1\nSTATUS=serving on %s; %u client(s)", sv->device,
			   (unsigned)sv->clients);
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
		uv_timer_start(&sv->watchdog, watchdog_cb, ms, ms);
	}
}

void service_clients(service *sv, uint32_t n)
{
	sv->clients = n;
	if (!sv->notify || !sv->ready || uv_is_active((uv_handle_t *)&sv->status))
		return;
	uv_timer_start(&sv->status, status_cb, STATUS_COALESCE_MS, 0);
}

void service_stopping(service *sv)
{
	sv->ready = false; /* no more clients STATUS= lines */
	if (!sv->notify)
		return;
	if (sv->timers)
		uv_timer_stop(&sv->status);
	sd_notify(0, "STOPPING=1\nSTATUS=shutting down: answering the jobs in flight");
}

void service_close(service *sv)
{
	if (!sv->timers)
		return;
	sv->timers = false;
	sv->ready = false;
	uv_close((uv_handle_t *)&sv->watchdog, NULL);
	uv_close((uv_handle_t *)&sv->status, NULL);
}
