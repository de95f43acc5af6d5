/* daemon/ops/session.h — one connection as the ops see it: its regions
 * table, its queue in the engine, what it said in hello and what its jobs
 * did. ops.c creates it when the connection opens (conn.session) and frees
 * it at the connection's last reference; the transport never looks inside. */
#ifndef VKG_DAEMON_SESSION_H
#define VKG_DAEMON_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "region.h"
#include "tensor.h"

typedef struct session {
	region **regs;         /* regions table, by insertion */
	uint32_t nregs, regs_cap;
	uint64_t next_region;
	uint64_t region_bytes; /* bytes of the regions in regs (the `clients` op;
				* the limits count region_set's, which keep an
				* unregistered region's bytes while jobs use it) */
	/* its device tensors (tensor_ops.h), by id ascending (ids only grow):
	 * one reference each; lost ones stay until tensor_free */
	tensor **tensors;
	uint32_t ntensors, tensors_cap;
	uint32_t inflight;     /* queued + running jobs */
	uint32_t unreg_pending; /* unregister replies not sent yet */
	engine_lane *lane;     /* this connection's queue in the engine */
	bool announced;        /* logged at info level, so its close is too */
	bool monitor;          /* said hello as a monitor: stays at debug level */
	char name[64];         /* its hello's `client`, raw (the `clients` op) */
	uint64_t connected_ns;
	uint64_t jobs_done, jobs_failed, gpu_us; /* its accepted jobs (usage.h) */
} session;

#endif
