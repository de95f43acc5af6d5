/* client/queries.c — what a client asks about the daemon: hello (its
 * device, limits and kernels; vkg_info_kernel reads every kernel of the
 * last one), stats, ping. The calls fill this library's whole structs;
 * abi.c copies as much as the caller's holds. */
#include "vkgrad_priv.h"

#include "msg.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vkg_info_kernel(const vkg_client *c, unsigned i, vkg_kernel_info *out)
{
	if (i >= c->n_kernels)
		return -ENOENT;
	*out = c->kernels[i];
	return 0;
}

int vkg_full_hello(vkg_client *c, const char *client_name, vkg_info *out, vkg_error *err)
{
	vkg__clear_err(err);
	proto_reply *full = malloc(sizeof(*full));
	if (!full)
		return vkg__set_err(err, -ENOMEM, "io", "out of memory");
	proto_request req = {.op = PROTO_OP_HELLO, .version = PROTO_VERSION};
	if (client_name)
		snprintf(req.client, sizeof(req.client), "%s", client_name);
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_call(c, &req, -1, full, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && out) {
		const proto_hello *h = &full->hello;
		memset(out, 0, sizeof(*out));
		snprintf(out->server, sizeof(out->server), "%s", h->server);
		snprintf(out->device_name, sizeof(out->device_name), "%s", h->device.name);
		snprintf(out->driver, sizeof(out->driver), "%s", h->device.driver);
		snprintf(out->api, sizeof(out->api), "%s", h->device.api);
		snprintf(out->device_type, sizeof(out->device_type), "%s", h->device.type);
		out->vendor_id = h->device.vendor_id;
		out->device_id = h->device.device_id;
		out->max_frame = h->limits.max_frame;
		out->max_regions = h->limits.max_regions;
		out->max_inflight = h->limits.max_inflight;
		out->max_region_bytes = h->limits.max_region_bytes;
		out->max_dim = h->limits.max_dim;
		out->max_tensor_bytes = h->limits.max_tensor_bytes;
		out->n_kernels = h->n_kernels;
		out->protocol_version = h->version;
		out->max_total_region_bytes = h->limits.max_total_region_bytes;
		out->max_region_bytes_per_uid = h->limits.max_region_bytes_per_uid;
		out->max_connections = h->limits.max_connections;
		out->max_connections_per_uid = h->limits.max_connections_per_uid;
		out->max_device_bytes = h->limits.max_device_bytes;
		out->max_device_bytes_per_uid = h->limits.max_device_bytes_per_uid;
		out->max_tensors = h->limits.max_tensors;
		/* every kernel, for vkg_info_kernel (the struct holds 32) */
		c->n_kernels = 0;
		for (unsigned i = 0; i < h->n_kernels && i < VKG_FULL_MAX_KERNELS; i++) {
			const proto_kernel_info *k = &h->kernels[i];
			vkg_kernel_info *o = &c->kernels[c->n_kernels++];
			snprintf(o->name, sizeof(o->name), "%s", k->name);
			snprintf(o->domain, sizeof(o->domain), "%s", k->domain);
			snprintf(o->variant, sizeof(o->variant), "%s", k->variant);
			snprintf(o->dtype, sizeof(o->dtype), "%s", k->dtype);
			snprintf(o->status, sizeof(o->status), "%s", k->status);
		}
		for (unsigned i = 0; i < h->n_kernels && i < 32; i++) {
			const proto_kernel_info *k = &h->kernels[i];
			vkg_kernel_info *o = &out->kernels[i];
			snprintf(o->name, sizeof(o->name), "%s", k->name);
			snprintf(o->domain, sizeof(o->domain), "%s", k->domain);
			snprintf(o->variant, sizeof(o->variant), "%s", k->variant);
			snprintf(o->dtype, sizeof(o->dtype), "%s", k->dtype);
			snprintf(o->status, sizeof(o->status), "%s", k->status);
		}
	}
	free(full);
	return rc;
}

int vkg_full_stats(vkg_client *c, vkg_stats *out, vkg_error *err)
{
	vkg__clear_err(err);
	proto_reply *full = malloc(sizeof(*full));
	if (!full)
		return vkg__set_err(err, -ENOMEM, "io", "out of memory");
	proto_request req = {.op = PROTO_OP_STATS};
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_call(c, &req, -1, full, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && out) {
		const proto_stats *s = &full->stats;
		*out = (vkg_stats){
			.uptime_s = s->uptime_s,
			.jobs_per_batch_avg = s->jobs_per_batch_avg,
			.clients = s->clients,
			.regions = s->regions,
			.region_bytes = s->region_bytes,
			.jobs_done = s->jobs_done,
			.jobs_failed = s->jobs_failed,
			.batches = s->batches,
			.pipelines = s->pipelines,
			.pipeline_cache_hits = s->pipeline_cache_hits,
			.jobs_queued = s->jobs_queued,
			.jobs_running = s->jobs_running,
			.host_imports = s->host_imports,
			.staged_regions = s->staged_regions,
			.validation_errors = s->validation_errors,
			.devlocal_min_bytes = s->devlocal_min_bytes,
			.devlocal_min_bytes_16bit = s->devlocal_min_bytes_16bit,
			.devlocal_jobs = s->devlocal_jobs,
			.devlocal_copy_bytes = s->devlocal_copy_bytes,
			.splitk_jobs = s->splitk_jobs,
			.dispatches = s->dispatches,
			.scratch_bytes = s->scratch_bytes,
			.scratch_failures = s->scratch_failures,
			.stream_chunk_bytes = s->stream_chunk_bytes,
			.stream_min_bytes = s->stream_min_bytes,
			.stream_queues = s->stream_queues,
			.stream_jobs = s->stream_jobs,
			.stream_chunks = s->stream_chunks,
			.stream_dw_blocks = s->stream_dw_blocks,
			.stream_shared_jobs = s->stream_shared_jobs,
			.started_unix_s = s->started_unix_s,
			.device_losses = s->device_losses,
			.device_recoveries = s->device_recoveries,
			.tensors = s->tensors,
			.device_bytes = s->device_bytes,
			.host_read_bytes = s->host_read_bytes,
			.host_write_bytes = s->host_write_bytes,
		};
		for (int k = 0; k < PROTO_CODE_COUNT; k++)
			out->requests_rejected += s->requests_rejected_by_code[k];
		for (int k = 0; k < PROTO_REFUSED_COUNT; k++)
			out->connections_refused += s->connections_refused[k];
	}
	free(full);
	return rc;
}

int vkg_ping(vkg_client *c, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req = {.op = PROTO_OP_PING};
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_call(c, &req, -1, NULL, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
