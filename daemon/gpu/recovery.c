/* daemon/gpu/recovery.c — see recovery.h. */
#include "recovery.h"
#include "clock.h"

#include "log.h"
#include "region.h"
#include "server.h"
#include "service.h"

#include <stdio.h>
#include <string.h>

static void remember_device(recovery *rc, const device *d, const pipelines *pl)
{
	memcpy(rc->dtype_ok, pl->dtype_ok, sizeof(rc->dtype_ok));
	rc->vendor_id = d->props.vendorID;
	rc->device_id = d->props.deviceID;
	rc->driver_version = d->props.driverVersion;
	memcpy(rc->cache_uuid, d->props.pipelineCacheUUID, VK_UUID_SIZE);
	memcpy(rc->device_name, d->props.deviceName, sizeof(rc->device_name));
	rc->info = d->info;
}

static bool same_device(const recovery *rc, const device *d)
{
	return d->props.vendorID == rc->vendor_id && d->props.deviceID == rc->device_id &&
	       d->props.driverVersion == rc->driver_version &&
	       memcmp(d->props.pipelineCacheUUID, rc->cache_uuid, VK_UUID_SIZE) == 0 &&
	       strncmp(d->props.deviceName, rc->device_name, sizeof(rc->device_name)) == 0;
}

/* Drop everything made on the device, then the device. Each step copes
 * with what an earlier (partial) attempt left. */
static void teardown(server *s)
{
	engine_gpu_release(s->eng);
	region_gpu_release_all(&s->regions);
	/* device tensors are not made again: their contents went with the
	 * device (an op naming one answers device_lost) */
	tensor_set_lose_all(&s->tensors);
	pipelines_destroy(s->pl, s->dev);
	device_close(s->dev);
}

static int attempt(server *s, char *err, size_t n)
{
	recovery *rc = &s->rec;
	device *d = s->dev;
	unsigned verr = atomic_load(&d->validation_errors);
	teardown(s);
	uint64_t left;
	if (engine_fault_recreate(s->eng, &left)) {
		snprintf(err, n, "fault injection: recreation fails (%llu more to fail)",
			 (unsigned long long)left);
		goto fail;
	}
	int rc_open = device_open(d, s->cfg->device, &s->cfg->env, err, n);
	/* device_open starts from zero: keep counting the layer's errors */
	atomic_fetch_add(&d->validation_errors, verr);
	verr = 0;
	if (rc_open != 0)
		goto fail;
	if (!same_device(rc, d)) {
		snprintf(err, n, "a different device or driver came back (%.100s, was %.100s)",
			 d->props.deviceName, rc->device_name);
		goto fail;
	}
	if (pipelines_init(s->pl, d, s->cfg->cache_dir, &s->cfg->env, err, n) != 0)
		goto fail;
	if (engine_gpu_restore(s->eng, err, n) != 0)
		goto fail;
	if (region_gpu_restore_all(&s->regions, d, err, n) != 0)
		goto fail;
	return 0;
fail:
	verr += atomic_load(&d->validation_errors);
	teardown(s);
	/* hello goes on describing the device we wait for, and jobs for it
	 * are taken (they wait) rather than refused as unsupported */
	d->info = rc->info;
	memcpy(s->pl->dtype_ok, rc->dtype_ok, sizeof(rc->dtype_ok));
	atomic_store(&d->validation_errors, verr);
	return -1;
}

static void retry_cb(uv_timer_t *t);

static void try_recover(server *s)
{
	recovery *rc = &s->rec;
	char err[256] = "";
	uint64_t t0 = clock_now_ns();
	service_status("recreating the GPU after a device loss");
	if (attempt(s, err, sizeof(err)) == 0) {
		rc->failed = 0;
		rc->recovered++;
		log_notice("device recreated after a device loss in %.0f ms: %s; %llu region(s) restored "
			   "(%llu imported, %llu staged), %u queued job(s) resume",
			   (double)(clock_now_ns() - t0) / 1e6, s->dev->props.deviceName,
			   (unsigned long long)s->regions.count, (unsigned long long)s->regions.imports,
			   (unsigned long long)s->regions.staged, engine_queued(s->eng));
		service_clients(&s->svc, conn_set_count(&s->conns)); /* back to the usual STATUS= line */
		engine_resume(s->eng);
		return;
	}
	rc->failed++;
	rc->attempts_failed++;
	log_err("recreating the device failed (attempt %u of %d): %s", rc->failed, RECOVERY_ATTEMPTS,
		err);
	if (rc->failed < RECOVERY_ATTEMPTS) {
		uv_timer_start(&rc->retry, retry_cb, RECOVERY_RETRY_MS, 0);
		return;
	}
	log_err("no usable GPU after %d attempts: shutting down with exit status 1 "
		"(the service manager restarts the daemon)", RECOVERY_ATTEMPTS);
	service_status("the GPU was lost and could not be recreated");
	engine_shut_down(s->eng, "the GPU was lost and could not be recreated; the daemon exits");
	rc->give_up(s);
}

static void retry_cb(uv_timer_t *t)
{
	server *s = t->data;
	if (!s->draining)
		try_recover(s);
}

void recovery_lost(void *ctx)
{
	server *s = ctx;
	s->rec.losses++;
	if (s->draining) {
		engine_shut_down(s->eng, "the GPU was lost while the daemon shuts down");
		return;
	}
	try_recover(s);
}

void recovery_init(server *s, void (*give_up)(server *s))
{
	recovery *rc = &s->rec;
	memset(rc, 0, sizeof(*rc));
	rc->give_up = give_up;
	remember_device(rc, s->dev, s->pl);
	uv_timer_init(s->loop, &rc->retry);
	rc->retry.data = s;
	rc->timer_open = true;
}

void recovery_stop(server *s)
{
	if (s->rec.timer_open)
		uv_timer_stop(&s->rec.retry);
	if (engine_lost(s->eng) && engine_running(s->eng) == 0)
		engine_shut_down(s->eng, "the GPU was lost and the daemon is shutting down");
}

void recovery_close(server *s)
{
	if (!s->rec.timer_open)
		return;
	s->rec.timer_open = false;
	uv_close((uv_handle_t *)&s->rec.retry, NULL);
}
