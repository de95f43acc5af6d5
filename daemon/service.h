/* daemon/service.h — the daemon's side of the service manager's protocol
 * (systemd, sd_notify(3)): the listening socket it may pass (socket
 * activation), readiness, STATUS= lines, the watchdog, and STOPPING=1.
 *
 * Every function is a cheap no-op when the daemon does not run under a
 * service manager ($NOTIFY_SOCKET, $LISTEN_FDS, $WATCHDOG_USEC unset), so
 * the same binary serves in the foreground, in tests and as a unit. One
 * daemon per process: the state is the module's own. Loop thread only. */
#ifndef VKG_DAEMON_SERVICE_H
#define VKG_DAEMON_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/* The listening socket passed by the service manager (sd_listen_fds(1)),
 * made non-blocking and close-on-exec, with its path written into
 * where[n] for the logs. Returns the fd; -1 when none was passed (bind the
 * configured socket instead); -2 when what was passed is not one listening
 * AF_UNIX stream socket (logged; the daemon must not start). */
int service_listen_fd(char *where, size_t n);

/* STATUS=… while starting (printf format). */
void service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Everything is up (device open, pipelines built, socket listening):
 * READY=1 with the first STATUS= line, and start the watchdog pings
 * (WATCHDOG=1 every half of $WATCHDOG_USEC) from a timer on loop. */
void service_ready(uv_loop_t *loop, const char *device_name);

/* The number of connected clients changed: STATUS= says so, coalesced to
 * at most one message per 100 ms so a burst of connections costs one. */
void service_clients(uint32_t n);

/* Shutdown began: STOPPING=1. The watchdog keeps pinging while the jobs in
 * flight drain. */
void service_stopping(void);

/* Close the module's loop handles (timers); the loop can then end. */
void service_close(void);

#endif
