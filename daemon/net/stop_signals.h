/* daemon/net/stop_signals.h — SIGTERM and SIGINT as events of the loop,
 * from the process's start to its exit.
 *
 * stop_signals_block() blocks both in the calling thread before any other
 * thread exists (main.c, first thing): every thread started afterwards (the
 * engine's, libuv's, the Vulkan loader's and the driver's) inherits the
 * mask, so neither signal ever takes its default action, ending the process
 * wherever it is. They are read from a signalfd instead:
 *
 *   - while the loop serves, a uv_poll handle hands each one to the
 *     owner's callback (server.c: the first begins the stop, later ones
 *     are logged);
 *   - once the stop's last part began (every job answered, the connections
 *     and handles closed: the loop must be able to end), the poll handle
 *     is closed but the descriptor stays: what comes while the engine is
 *     freed and the pipeline cache saved waits there, and
 *     stop_signals_end() hands it to the callback once more before the
 *     process exits. A signal after that stays pending and blocked and
 *     goes with the process.
 *
 * A signal during start-up waits the same way and begins the stop as soon
 * as the daemon serves. */
#ifndef VKG_DAEMON_STOP_SIGNALS_H
#define VKG_DAEMON_STOP_SIGNALS_H

#include <stdbool.h>

#include <uv.h>

typedef void (*stop_signals_fn)(void *ctx, int signum);

typedef struct stop_signals {
	int fd;              /* the signalfd, or -1 */
	uv_poll_t poll;
	bool polling;        /* poll initialised and not closed */
	stop_signals_fn cb;
	void *ctx;
} stop_signals;

/* Block SIGTERM and SIGINT in the calling thread (and so in every thread it
 * starts from now on). 0, or -1 (errno). */
int stop_signals_block(void);
/* Read them on loop (blocking them here too, where main did not): each one
 * to cb(ctx, signum) on the loop thread. 0, or -1 (logged). */
int stop_signals_open(stop_signals *ss, uv_loop_t *loop, stop_signals_fn cb, void *ctx);
/* Close the poll handle (the loop may end); the descriptor keeps what
 * comes. */
void stop_signals_unpoll(stop_signals *ss);
/* Hand what came since to cb, then close the descriptor. Nothing when the
 * signals were never opened. */
void stop_signals_end(stop_signals *ss);

#endif
