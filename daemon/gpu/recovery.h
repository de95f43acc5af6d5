/* daemon/gpu/recovery.h — bringing the GPU back after VK_ERROR_DEVICE_LOST.
 *
 * When a submission or a wait reports device loss, the engine answers the
 * jobs of the failed batch with device_lost, stops submitting, and lets
 * the batches still in flight finish (on a really lost device their waits
 * fail too, in finite time). Queued jobs stay queued. Once nothing runs,
 * the engine calls the recovery, on the loop thread, outside any
 * connection's callback:
 *
 *   1. stop the engine's threads and wait for the device to be idle (the
 *      driver may still hold a finished submission's semaphores), then
 *      drop every object of the old device: the engine's (timeline,
 *      dummy buffer, command pools, queries), every live region's buffer
 *      and memory (the client's mapping stays), the pipelines and cache;
 *   2. close the device and the instance, open them again with the same
 *      choice (--device) and the same environment (validation layer and
 *      switches: config_env, read once at start); it must be the
 *      same device and driver (vendor, device id, driver version,
 *      pipelineCacheUUID): the limits hello reported depend on it;
 *   3. build the pipelines (from the cache file), the engine's objects
 *      (the timeline resumes at its last value), and import or stage every
 *      live region again, connection ownership and ids unchanged;
 *   4. resume: the queued jobs run.
 *
 * All of it runs in one loop callback, so no request sees a half-made
 * device. If an attempt fails, everything it made is dropped; a second
 * attempt follows RECOVERY_RETRY_MS later (queued jobs keep waiting,
 * `register` answers device_lost meanwhile). If that fails too, the queued
 * jobs are answered device_lost and the daemon shuts down with exit status
 * 1, for the service manager to restart it (Restart=on-failure). A loss
 * during shutdown answers the queued jobs device_lost instead. */
#ifndef VKG_DAEMON_RECOVERY_H
#define VKG_DAEMON_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>
#include <vulkan/vulkan.h>

#include "msg.h"

#define RECOVERY_ATTEMPTS 2     /* failed attempts in a row before exiting */
#define RECOVERY_RETRY_MS 1000  /* between them: let a driver reset the GPU */

typedef struct server server;

typedef struct recovery {
	uv_timer_t retry;
	bool timer_open;
	unsigned failed;          /* attempts failed in a row */
	uint64_t recovered;       /* successful recoveries */
	uint64_t losses;          /* device losses reported by the engine (stats) */
	uint64_t attempts_failed; /* recovery attempts that failed, ever (stats) */
	/* the device that must come back, and what hello says meanwhile */
	uint32_t vendor_id, device_id, driver_version;
	uint8_t cache_uuid[VK_UUID_SIZE];
	char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
	proto_device_info info;
	bool dtype_ok[PROTO_DTYPE_COUNT]; /* what jobs may ask for meanwhile */
	void (*give_up)(server *s);       /* no GPU came back: shut down */
} recovery;

/* Remember the open device (before any job runs). give_up is
 * called (on the loop thread) once the last attempt failed, after the
 * queued jobs were answered and s->exit_code set to 1: the owner shuts the
 * daemon down (server.c passes server_stop, so recovery.c calls nothing of
 * server.c). */
void recovery_init(server *s, void (*give_up)(server *s));
/* engine_events.lost (ctx: the server): the lost device runs nothing any
 * more; recreate it, or, while shutting down, answer the queued jobs. */
void recovery_lost(void *ctx);
/* Shutdown began: a recovery waiting for its second attempt gives up and
 * the queued jobs are answered device_lost (nothing else would run them). */
void recovery_stop(server *s);
/* Close the timer handle (the loop then ends). */
void recovery_close(server *s);

#endif
