/* daemon/ops/ops.c — see ops.h. */
#include "ops.h"
#include "ops_priv.h"
#include "session.h"
#include "optim_ops.h"
#include "tensor_ops.h"
#include "clock.h"

#include "clients.h"
#include "job.h"
#include "kernel_registry.h"
#include "log.h"
#include "server.h"
#include "text.h"
#include "variant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- per-connection state -------------------------------------------------- */

static int ops_open(conn *c)
{
	session *ss = calloc(1, sizeof(*ss));
	if (!ss)
		return -1;
	c->session = ss;
	ss->lane = engine_lane_open(c->srv->eng);
	ss->connected_ns = clock_now_ns();
	return ss->lane ? 0 : -1;
}

static uint32_t ops_owed(const conn *c)
{
	return c->session ? c->session->inflight + c->session->unreg_pending : 0;
}

static void ops_release(conn *c)
{
	if (!c->session)
		return;
	free(c->session->regs);
	free(c->session->tensors);
	free(c->session);
	c->session = NULL;
}

static void ops_close(conn *c)
{
	server *s = c->srv;
	/* queued jobs can no longer be answered: drop them (running ones finish) */
	engine_lane_close(s->eng, c->session->lane);
	c->session->lane = NULL;
	/* the table's references go; regions used by queued or running jobs
	 * live on until those jobs finish */
	for (uint32_t i = 0; i < c->session->nregs; i++) {
		c->session->regs[i]->owner = NULL; /* c's address may be reused */
		region_unref(c->session->regs[i]);
	}
	c->session->nregs = 0;
	c->session->region_bytes = 0;
	tensor_ops_close(c);
}

/* ---- ops --------------------------------------------------------------------- */

static int region_size_cb(void *ctx, uint64_t id, uint64_t *size)
{
	region *r = session_find_region(ctx, id, NULL);
	if (!r)
		return -1;
	*size = r->size;
	return 0;
}

static void op_hello(conn *c, const proto_request *q)
{
	server *s = c->srv;
	proto_reply *r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->id = q->id;
	r->ok = true;
	r->hello.version = PROTO_VERSION;
	snprintf(r->hello.server, sizeof(r->hello.server), "vkgradd %s", VKG_VERSION);
	r->hello.device = s->dev->info;
	r->hello.limits = s->limits;
	for (unsigned i = 0; i < kreg_count && r->hello.n_kernels < PROTO_MAX_KERNELS; i++) {
		int dt = -1;
		for (int t = 0; t < PROTO_DTYPE_COUNT; t++)
			if (strcmp(kreg_entries[i].dtype, proto_dtype_name((proto_dtype)t)) == 0)
				dt = t;
		if (dt < 0 || !pipelines_serves(s->pl, kreg_entries[i].name, (proto_dtype)dt))
			continue; /* only what this device runs */
		proto_kernel_info *k = &r->hello.kernels[r->hello.n_kernels++];
		snprintf(k->name, sizeof(k->name), "%s", kreg_entries[i].name);
		snprintf(k->domain, sizeof(k->domain), "%s", kreg_entries[i].domain);
		snprintf(k->variant, sizeof(k->variant), "%s", kreg_entries[i].variant);
		snprintf(k->dtype, sizeof(k->dtype), "%s", kreg_entries[i].dtype);
		snprintf(k->status, sizeof(k->status), "%s", kreg_entries[i].status);
	}
	if (q->client[0]) {
		snprintf(c->session->name, sizeof(c->session->name), "%s", q->client);
		/* the client's own words: escaped (no line breaks, terminal
		 * escapes or invalid UTF-8 in the log) and bounded */
		char name[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_LOG_CHARS)];
		proto_text_escape(name, sizeof(name), q->client, strlen(q->client),
				  PROTO_TEXT_LOG_CHARS, 0);
		log_msg(c->session->announced ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG,
			"client pid %d says hello as '%s'", (int)c->cred.pid, name);
	}
	conn_reply(c, PROTO_R_HELLO, r);
	free(r);
}

static void op_ping(conn *c, const proto_request *q)
{
	conn_reply_ok(c, q->id);
}

/* Each module fills its own part. */
static void op_stats(conn *c, const proto_request *q)
{
	const server *s = c->srv;
	proto_reply r = {.id = q->id, .ok = true};
	proto_stats *st = &r.stats;
	st->uptime_s = (double)(clock_now_ns() - s->started_ns) / 1e9;
	st->clients = conn_set_count(&s->conns);
	region_stats(&s->regions, st);
	engine_stats(s->eng, st);
	pipelines_stats(s->pl, st);
	device_stats(s->dev, st);
	usage_stats(&s->usage, st);
	memcpy(st->connections_refused, s->admission.refused, sizeof(st->connections_refused));
	st->device_losses = s->rec.losses;
	st->device_recoveries = s->rec.recovered;
	st->device_recovery_failures = s->rec.attempts_failed;
	st->has_tensors = true;
	st->device_bytes = s->tensors.bytes;
	st->tensors = s->tensors.count;
	st->n_dev_uids = tensor_set_by_uid(&s->tensors, st->dev_uids, PROTO_MAX_UIDS);
	conn_reply(c, PROTO_R_STATS, &r);
}

/* Every open connection, this one included (proto/clients.h). */
static void op_clients(conn *c, const proto_request *q)
{
	server *s = c->srv;
	const uint32_t nconns = conn_set_count(&s->conns);
	proto_client_info *v = calloc(nconns ? nconns : 1, sizeof(*v));
	if (!v) {
		proto_err err;
		proto_fail(&err, PROTO_INTERNAL, "clients: out of memory for %u entries", nconns);
		conn_reply_err(c, q->id, &err);
		return;
	}
	const uint64_t now = clock_now_ns();
	unsigned n = 0;
	for (const conn *o = conn_set_first(&s->conns); o; o = conn_set_next(&s->conns, o)) {
		if (n == nconns)
			break;
		proto_client_info *e = &v[n++];
		e->pid = (int32_t)o->cred.pid;
		e->uid = (uint32_t)o->cred.uid;
		e->gid = (uint32_t)o->cred.gid;
		snprintf(e->name, sizeof(e->name), "%s", o->session->name);
		e->connected_s = (double)(now - o->session->connected_ns) / 1e9;
		e->jobs_done = o->session->jobs_done;
		e->jobs_failed = o->session->jobs_failed;
		e->inflight = o->session->inflight;
		e->gpu_us = o->session->gpu_us;
		e->regions = o->session->nregs;
		e->region_bytes = o->session->region_bytes;
		tensor_ops_usage(o, &e->tensors, &e->device_bytes);
	}
	/* a buffer of its own: rare, and up to max_connections entries */
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	if (proto_clients_encode(&sb, q->id, v, n) == 0)
		conn_send_frame(c, &sb, false, 0);
	msgpack_sbuffer_destroy(&sb);
	free(v);
}

/* The first request of a connection says what it is: one that said hello
 * as a monitor (a metrics scrape) stays at debug level; any other is
 * logged at info level from then on, its connection line first (conn.c
 * logged it at debug). */
static void announce(conn *c, const proto_request *q)
{
	if (q->op == PROTO_OP_HELLO && q->monitor)
		c->session->monitor = true;
	if (c->session->announced || c->session->monitor)
		return;
	c->session->announced = true;
	conn_announce(c);
	log_info("client pid %d uid %u gid %u connected (%u open)", (int)c->cred.pid,
		 (unsigned)c->cred.uid, (unsigned)c->cred.gid, conn_set_count(&c->srv->conns));
}

static void op_register(conn *c, const proto_request *q, int fd)
{
	server *s = c->srv;
	proto_err err;
	region *r = NULL;
	if (engine_lost(s->eng) || !s->dev->dev) {
		/* no objects on a lost device: recovery.c makes them for the
		 * regions it knows, once the device is back */
		close(fd);
		proto_fail(&err, PROTO_DEVICE_LOST,
			   "register: the GPU was lost and is being recreated; retry in a second");
		goto fail;
	}
	if (c->session->nregs >= s->limits.max_regions) {
		close(fd);
		proto_fail(&err, PROTO_LIMIT, "register: this connection already has max_regions = %u regions",
			   s->limits.max_regions);
		goto fail;
	}
	if (q->size > s->limits.max_region_bytes) {
		close(fd);
		proto_fail(&err, PROTO_LIMIT, "register: key 'size' = %llu exceeds max_region_bytes %llu",
			   (unsigned long long)q->size, (unsigned long long)s->limits.max_region_bytes);
		goto fail;
	}
	/* bytes count until their region is really gone: registered, or
	 * unregistered (or of a closed connection) while jobs still use it */
	uint64_t uid_bytes = region_set_uid_bytes(&s->regions, c->cred.uid);
	if (uid_bytes + q->size > s->limits.max_region_bytes_per_uid) {
		close(fd);
		proto_fail(&err, PROTO_LIMIT,
			   "register: key 'size' = %llu would pass max_region_bytes_per_uid %llu "
			   "(uid %u's connections hold %llu bytes)",
			   (unsigned long long)q->size, (unsigned long long)s->limits.max_region_bytes_per_uid,
			   (unsigned)c->cred.uid, (unsigned long long)uid_bytes);
		goto fail;
	}
	if (s->regions.bytes + q->size > s->limits.max_total_region_bytes) {
		close(fd);
		proto_fail(&err, PROTO_LIMIT,
			   "register: key 'size' = %llu would pass the daemon's max_total_region_bytes %llu "
			   "(%llu bytes are held)",
			   (unsigned long long)q->size, (unsigned long long)s->limits.max_total_region_bytes,
			   (unsigned long long)s->regions.bytes);
		goto fail;
	}
	if (c->session->nregs == c->session->regs_cap) {
		uint32_t cap = c->session->regs_cap ? c->session->regs_cap * 2 : 8;
		region **nr = realloc(c->session->regs, cap * sizeof(*nr));
		if (!nr) {
			close(fd);
			proto_fail(&err, PROTO_INTERNAL, "register: out of memory");
			goto fail;
		}
		c->session->regs = nr;
		c->session->regs_cap = cap;
	}
	if (region_create(&r, &s->regions, s->dev, fd, q->size, !s->cfg->no_host_import, c, &err) != 0)
		goto fail;
	r->id = ++c->session->next_region;
	r->uid = c->cred.uid;
	c->session->regs[c->session->nregs++] = r;
	c->session->region_bytes += r->size;
	log_debug("client pid %d: region %llu, %llu bytes, %s", (int)c->cred.pid,
		  (unsigned long long)r->id, (unsigned long long)r->size,
		  r->staged ? "staged" : "imported");
	proto_reply rep = {.id = q->id, .ok = true, .region = r->id};
	conn_reply(c, PROTO_R_REGISTER, &rep);
	return;
fail:
	conn_reply_err(c, q->id, &err);
}

static void unregister_done(void *ctx, uint64_t id)
{
	conn *c = ctx;
	c->session->unreg_pending--;
	conn_reply_ok(c, id); /* no-op when the connection closed meanwhile */
	conn_unref(c);
}

static void op_unregister(conn *c, const proto_request *q)
{
	uint32_t i;
	region *r = session_find_region(c, q->region, &i);
	if (!r) {
		proto_err err;
		proto_fail(&err, PROTO_BAD_REGION,
			   "unregister: key 'region' = %llu is not registered on this connection",
			   (unsigned long long)q->region);
		conn_reply_err(c, q->id, &err);
		return;
	}
	c->session->regs[i] = c->session->regs[--c->session->nregs];
	c->session->region_bytes -= r->size;
	/* its bytes still count (max_total_region_bytes, the per-uid limit)
	 * until the last job using it ends and the region is gone */
	conn_ref(c);
	c->session->unreg_pending++;
	r->on_release = unregister_done;
	r->release_ctx = c;
	r->release_arg = q->id;
	region_unref(r); /* replies now, or when the last job using it ends */
}

/* linear_backward and linear_forward: one path, the messages naming the op */
static void op_linear_job(conn *c, const proto_request *q)
{
	server *s = c->srv;
	const char *opn = proto_op_name(q->op);
	proto_err err;
	uint64_t bytes[PROTO_T_COUNT];
	char why[256];
	if (variant_refused(s->pl, s->dev, q->variant, q->dtype, why, sizeof(why))) {
		proto_fail(&err, PROTO_UNSUPPORTED, "%s: %s", opn, why);
		goto fail;
	}
	if (c->session->inflight >= s->limits.max_inflight) {
		proto_fail(&err, PROTO_LIMIT,
			   "%s: this connection has max_inflight = %u jobs queued or running", opn,
			   s->limits.max_inflight);
		goto fail;
	}
	if (proto_job_check(q, &s->limits, region_size_cb, c, bytes, &err) != 0)
		goto fail;
	region *regs[PROTO_T_COUNT] = {0};
	for (int t = 0; t < PROTO_T_COUNT; t++)
		if (q->t[t].present && !q->t[t].is_tensor)
			regs[t] = session_find_region(c, q->t[t].region, NULL);
	/* {"tensor": T} operands: the connection's device tensors */
	if (tensor_ops_operands(c, q, regs, &err) != 0)
		goto fail;
	if (session_enqueue(c, q, bytes, regs, &err) != 0)
		goto fail;
	return;
fail:
	conn_reply_err(c, q->id, &err);
}

void ops_job_done(void *ctx, job *j, proto_code code, const char *msg, uint64_t queued_us,
		  uint64_t gpu_us, uint32_t batch_jobs)
{
	(void)ctx;
	conn *c = j->owner;
	c->session->inflight--; /* before the reply: its flush may finish a half-closed c */
	const uint64_t charged = code == PROTO_OK ? usage_job_gpu_us(j->kernel_us, j->has_kernel_us,
								       gpu_us, batch_jobs)
						  : 0;
	usage_job(&c->srv->usage, c->cred.uid, code, charged);
	c->session->gpu_us += charged;
	if (code == PROTO_OK)
		c->session->jobs_done++;
	else
		c->session->jobs_failed++;
	if (j->group) {
		/* one parameter of an optimizer step: the group answers once */
		optim_job_done(c, j, code, msg, queued_us, gpu_us, batch_jobs);
	} else if (j->req.op == PROTO_OP_TENSOR_NEW) {
		/* a new tensor's zero fill: the reply names the tensor */
		tensor_ops_new_done(c, &j->req, code);
		if (code != PROTO_OK) {
			proto_err err;
			proto_fail(&err, code, "tensor_new: %s", msg);
			conn_reply_err(c, j->req.id, &err);
		}
	} else if (code == PROTO_OK) {
		/* the server's, zero but for what a job reply encodes, all of
		 * which is set here: a proto_reply is 8 KiB (hello, stats) */
		proto_reply *r = &c->srv->job_reply;
		r->id = j->req.id;
		r->ok = true;
		r->queued_us = queued_us;
		r->gpu_us = gpu_us;
		r->batch_jobs = batch_jobs;
		r->kernel_us = j->kernel_us;
		r->has_kernel_us = j->has_kernel_us;
		r->stream.n = 0;
		if (j->stream_tl)
			r->stream = *j->stream_tl;
		const uint64_t t_enc = clock_now_ns();
		engine_job_trace(j, t_enc, &r->trace);
		conn_reply_timed(c, PROTO_R_JOB, r, r->trace.present, t_enc);
	} else {
		proto_err err;
		proto_fail(&err, code, "%s: %s", proto_op_name(j->req.op), msg);
		conn_reply_err(c, j->req.id, &err);
	}
	conn_unref(c);
}

typedef struct runs_ctx {
	const pipelines *pl;
	proto_dtype d;
} runs_ctx;

static bool cannot_run_cb(void *ctx, proto_variant v)
{
	const runs_ctx *r = ctx;
	return !variant_available(r->pl, v, r->d);
}

/* An unknown variant's message names the variants of the request's dtype
 * (proto_request_decode); add which of them this device cannot run. */
static void explain_variants(conn *c, const proto_request *q, proto_err *err)
{
	runs_ctx r = {c->srv->pl, q->dtype};
	char names[192];
	if (proto_variant_list(names, sizeof(names), q->dtype, cannot_run_cb, &r) == 0)
		proto_err_append(err, "; this device runs all of them");
	else
		proto_err_append(err, "; this device cannot run %s", names);
}

/* conn_handler frame: decode, check the descriptors the op takes, run it. */
static bool ops_frame(conn *c, const uint8_t *body, uint32_t len, int *fds, unsigned nfd)
{
	proto_request q;
	proto_err err;
	uint64_t id = 0;
	int rc = proto_request_decode_with(&c->srv->dec, body, len, &q, &id, &err);
	if (rc != 0 && err.code == PROTO_BAD_FRAME) {
		for (unsigned i = 0; i < nfd && i < CONN_FRAME_FDS; i++)
			close(fds[i]);
		conn_reply_err(c, 0, &err);
		log_info("client pid %d: protocol error: %s", (int)c->cred.pid, err.message);
		conn_close_after_replies(c);
		return false;
	}
	int fd = -1;
	if (rc == 0 && q.op == PROTO_OP_REGISTER && nfd == 1) {
		fd = fds[0];
	} else {
		for (unsigned i = 0; i < nfd && i < CONN_FRAME_FDS; i++)
			close(fds[i]);
		if (rc == 0 && q.op == PROTO_OP_REGISTER)
			rc = proto_fail(&err, PROTO_BAD_REQUEST,
					"register: exactly one descriptor must be attached (SCM_RIGHTS) to the frame; %u came (closed)",
					nfd);
		else if (rc == 0 && nfd)
			rc = proto_fail(&err, PROTO_BAD_REQUEST,
					"%s: %u descriptor(s) came with a frame that takes none; closed",
					proto_op_name(q.op), nfd);
	}
	if (rc == 0)
		announce(c, &q);
	if (rc != 0) {
		if (q.variant_unknown)
			explain_variants(c, &q, &err);
		conn_reply_err(c, id, &err);
		return true;
	}
	switch (q.op) {
	case PROTO_OP_HELLO: op_hello(c, &q); break;
	case PROTO_OP_REGISTER: op_register(c, &q, fd); break;
	case PROTO_OP_UNREGISTER: op_unregister(c, &q); break;
	case PROTO_OP_LINEAR_BACKWARD:
	case PROTO_OP_LINEAR_FORWARD: op_linear_job(c, &q); break;
	case PROTO_OP_STATS: op_stats(c, &q); break;
	case PROTO_OP_PING: op_ping(c, &q); break;
	case PROTO_OP_CLIENTS: op_clients(c, &q); break;
	case PROTO_OP_TENSOR_NEW: op_tensor_new(c, &q); break;
	case PROTO_OP_TENSOR_WRITE:
	case PROTO_OP_TENSOR_READ: op_tensor_copy(c, &q); break;
	case PROTO_OP_TENSOR_FREE: op_tensor_free(c, &q); break;
	case PROTO_OP_SGD_STEP:
	case PROTO_OP_ADAM_STEP: op_optim_step(c, &q); break;
	default: break;
	}
	return true;
}

const conn_handler ops_handler = {
	.open = ops_open,
	.frame = ops_frame,
	.close = ops_close,
	.owed = ops_owed,
	.release = ops_release,
};
