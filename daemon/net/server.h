/* daemon/net/server.h — the daemon as a whole: the listening socket, the set of
 * connections, the device/pipelines/engine they share, and shutdown. */
#ifndef VKG_DAEMON_SERVER_H
#define VKG_DAEMON_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "admission.h"
#include "config.h"
#include "conn.h"
#include "device.h"
#include "engine.h"
#include "pipelines.h"
#include "queue.h"
#include "recovery.h"
#include "service.h"
#include "tensor.h"
#include "usage.h"


typedef struct server {
	uv_loop_t *loop;
	const config *cfg;
	proto_limits limits;       /* cfg's, clamped to the device */
	device *dev;
	pipelines *pl;
	engine *eng;                /* the scheduler (engine.h: opaque) */
	int listen_fd;
	bool own_socket;           /* we bound it, so we unlink it */
	uv_poll_t listen_poll;
	uv_timer_t accept_timer;   /* re-arms accept after EMFILE/ENFILE */
	uv_signal_t sig_term, sig_int;
	uv_timer_t drain_timer;
	admission admission;       /* who connects (its refusal log's rate limit) */
	const conn_handler *handler; /* what each connection's frames go to (ops.h) */
	conn_set conns;            /* open connections (conn.h: conn.c's alone) */
	proto_decoder dec;         /* every request's decoding (ops_frame): memory kept */
	proto_reply job_reply;     /* a job's reply (ops_job_done), not zeroed per job */
	region_set regions;        /* every live region (device recovery, stats, the
				    * registered-bytes limits) */
	tensor_set tensors;        /* every live device tensor (the device-bytes
				    * limits, stats, device recovery) */
	uint64_t started_ns;
	bool draining;
	uint64_t drain_deadline_ns; /* clock_now_ns: past it the drain closes the
				     * connections that leave replies unread */
	int exit_code;             /* of the process, once the loop ended */
	recovery rec;              /* after a device loss */
	service svc;               /* the service manager's readiness, STATUS=, watchdog */
	usage usage;               /* error replies by code, per-uid jobs (stats) */
} server;

/* Bind the socket and start serving on loop: every connection's frames go
 * to handler, every finished job to done (main.c passes ops.h's, so the
 * server calls nothing of the ops above it). Returns 0 or -1 (logged). */
int server_start(server *s, uv_loop_t *loop, const config *cfg, device *dev, pipelines *pl,
		 const conn_handler *handler, engine_done_fn done);
/* Begin graceful shutdown: stop accepting, finish jobs in flight, answer
 * them, then close every connection and let the loop end. Connections
 * that leave replies unread past --drain-timeout-s are closed. */
void server_stop(server *s);
/* After the loop ended: free what is left. */
void server_destroy(server *s);
/* After the loop's last run (the close callbacks of server_destroy's and
 * engine_destroy's handles): free the memory they needed. */
void server_free(server *s);

#endif
