/* daemon/net/service.h — the daemon's side of the service manager's protocol
 * (systemd, sd_notify(3)): the listening socket it may pass (socket
 * activation), readiness, STATUS= lines, the watchdog, and STOPPING=1.
 *
 * Every function is a cheap no-op when the daemon does not run under a
 * service manager ($NOTIFY_SOCKET, $LISTEN_FDS, $WATCHDOG_USEC unset), so
 * the same binary serves in the foreground, in tests and as a unit.
 * Readiness, the clients line and the watchdog keep their state in a
 * `service` the server owns (zero-initialised: not ready yet); the
 * socket and the starting STATUS= lines need none. Loop thread only. */
#ifndef VKG_DAEMON_SERVICE_H
#define VKG_DAEMON_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define SERVICE_DEVICE_CHARS 256

typedef struct service {
	bool notify;              /* $NOTIFY_SOCKET is set: messages go somewhere */
	bool ready;
	bool timers;              /* the handles below are initialised */
	uv_timer_t watchdog;      /* WATCHDOG=1 pings */
	uv_timer_t status;        /* one-shot: the coalesced clients STATUS= */
	uint32_t clients;
	char device[SERVICE_DEVICE_CHARS];
} service;

/* The listening socket passed by the service manager (sd_listen_fds(1)),
 * made non-blocking and close-on-exec, with its path written into
 * where[n] for the logs. Returns the fd; -1 when none was passed (bind the
 * configured socket instead); -2 when what was passed is not one listening
 * AF_UNIX stream socket (logged; the daemon must not start). */
int service_listen_fd(char *where, size_t n);

/* Whether $NOTIFY_SOCKET is set (config_env notify_socket): until this
 * says so, no STATUS=, READY=1 or STOPPING=1 message is sent. */
void service_init(bool notify);

/* STATUS=… while starting (printf format). */
void service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Everything is up (device open, pipelines built, socket listening):
 * READY=1 with the first STATUS= line, and start the watchdog pings
 * (WATCHDOG=1 every half of $WATCHDOG_USEC) from a timer on loop. */
void service_ready(service *sv, uv_loop_t *loop, const char *device_name);

/* The number of connected clients changed: STATUS= says so, coalesced to
 * at most one message per 100 ms so a burst of connections costs one. */
void service_clients(service *sv, uint32_t n);

/* Shutdown began: STOPPING=1. The watchdog keeps pinging while the jobs in
 * flight drain. */
void service_stopping(service *sv);

/* Close sv's loop handles (timers); the loop can then end. */
void service_close(service *sv);

#endif
