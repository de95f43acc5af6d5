/* daemon/conn.c — see conn.h. Where a frame becomes a job: conn_dispatch(). */
#include "conn.h"

#include "job.h"
#include "kernel_registry.h"
#include "log.h"
#include "peer.h"
#include "server.h"
#include "service.h"
#include "text.h"
#include "variant.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONN_READ_CHUNK 65536

static void conn_poll_cb(uv_poll_t *h, int status, int events);

/* ---- lifetime ------------------------------------------------------------- */

void conn_ref(conn *c)
{
	c->refs++;
}

static void conn_free(conn *c)
{
	proto_framer_free(&c->fr);
	outq_free(&c->out);
	free(c->regs);
	free(c);
}

static void poll_closed_cb(uv_handle_t *h)
{
	conn *c = h->data;
	close(c->fd);
	c->fd = -1;
	conn_unref(c);
}

void conn_unref(conn *c)
{
	if (--c->refs == 0)
		conn_free(c);
}

static void drop_fds(conn *c)
{
	for (unsigned i = 0; i < c->nfds; i++)
		close(c->fds[i]);
	c->nfds = 0;
}

void conn_close(conn *c, const char *why)
{
	if (!c->open)
		return;
	c->open = false;
	server *s = c->srv;
	log_info("client pid %d uid %u: connection closed (%s)", (int)c->cred.pid,
		 (unsigned)c->cred.uid, why);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	service_clients(s->nconns);
	drop_fds(c);
	outq_shut(&c->out); /* nothing more is written: the socket may close */
	/* queued jobs can no longer be answered: drop them (running ones finish) */
	engine_lane_close(&s->eng, c->lane);
	c->lane = NULL;
	/* the table's references go; regions used by queued or running jobs
	 * live on until those jobs finish */
	for (uint32_t i = 0; i < c->nregs; i++) {
		s->total_region_bytes -= c->regs[i]->size;
		c->regs[i]->owner = NULL; /* c's address may be reused */
		region_unref(c->regs[i]);
	}
	c->nregs = 0;
	c->region_bytes = 0;
	uv_poll_stop(&c->poll);
	/* poll_closed_cb drops the list's reference */
	uv_close((uv_handle_t *)&c->poll, poll_closed_cb);
}

/* Say why, in one error frame, to a peer that is not taken, and close it.
 * Its socket is fresh, so the frame fits the send buffer; if it does not,
 * the close alone says enough. */
static void refuse(int fd, const proto_err *err)
{
	proto_reply r = {.id = 0, .ok = false, .err = *err};
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	if (proto_reply_encode(&sb, PROTO_R_ERROR, &r) == 0 && sb.data) {
		ssize_t n = send(fd, sb.data, sb.size, MSG_NOSIGNAL | MSG_DONTWAIT);
		(void)n;
	}
	msgpack_sbuffer_destroy(&sb);
	close(fd);
}

/* Connections of uid open now. A linear walk: at most max_connections of
 * them, once per accepted connection. */
static uint32_t conns_of_uid(const server *s, uid_t uid)
{
	uint32_t n = 0;
	for (const conn *c = s->conns; c; c = c->next)
		n += c->cred.uid == uid;
	return n;
}

int conn_open(server *s, int fd)
{
	conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -1;
	}
	c->srv = s;
	c->fd = fd;
	outq_init(&c->out, fd, &s->eng.metrics);
	c->refs = 1;
	c->open = true;
	socklen_t len = sizeof(c->cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) != 0) {
		c->cred.pid = 0;
		c->cred.uid = c->cred.gid = (uid_t)-1;
	}
	char why[160];
	if (!peer_allowed(s->cfg, fd, &c->cred, why, sizeof(why))) {
		log_warn("refusing client pid %d uid %u gid %u: %s", (int)c->cred.pid,
			 (unsigned)c->cred.uid, (unsigned)c->cred.gid, why);
		close(fd);
		conn_free(c);
		return -1;
	}
	proto_err err = {0};
	if (s->nconns >= s->limits.max_connections)
		proto_fail(&err, PROTO_LIMIT, "connection refused: max_connections = %u reached",
			   s->limits.max_connections);
	else if (conns_of_uid(s, c->cred.uid) >= s->limits.max_connections_per_uid)
		proto_fail(&err, PROTO_LIMIT,
			   "connection refused: uid %u has max_connections_per_uid = %u open",
			   (unsigned)c->cred.uid, s->limits.max_connections_per_uid);
	if (err.code != PROTO_OK) {
		/* a flood must not flood the log too: one warning a second */
		static uint64_t last_ns, quiet;
		uint64_t now = engine_now_ns();
		if (now - last_ns >= 1000000000ull) {
			if (quiet)
				log_warn("refusing client pid %d uid %u: %s (and %llu more since the "
					 "last warning, logged at debug level)", (int)c->cred.pid,
					 (unsigned)c->cred.uid, err.message, (unsigned long long)quiet);
			else
				log_warn("refusing client pid %d uid %u: %s", (int)c->cred.pid,
					 (unsigned)c->cred.uid, err.message);
			last_ns = now;
			quiet = 0;
		} else {
			quiet++;
			log_debug("refusing client pid %d uid %u: %s", (int)c->cred.pid,
				  (unsigned)c->cred.uid, err.message);
		}
		refuse(fd, &err);
		conn_free(c);
		return -1;
	}
	proto_framer_init(&c->fr, s->limits.max_frame);
	c->lane = engine_lane_open(&s->eng);
	if (!c->lane || uv_poll_init(s->loop, &c->poll, fd) != 0) {
		close(fd);
		free(c->lane);
		conn_free(c);
		return -1;
	}
	c->poll.data = c;
	c->poll_events = UV_READABLE;
	uv_poll_start(&c->poll, UV_READABLE, conn_poll_cb);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	service_clients(s->nconns);
	log_info("client pid %d uid %u gid %u connected (%u open)", (int)c->cred.pid,
		 (unsigned)c->cred.uid, (unsigned)c->cred.gid, s->nconns);
	return 0;
}

/* ---- output ---------------------------------------------------------------- */

static void update_poll(conn *c)
{
	if (!c->open)
		return;
	int ev = (c->close_after_flush || c->rd_eof ? 0 : UV_READABLE) |
		 (c->want_write ? UV_WRITABLE : 0);
	/* only on a change: libuv's uv_poll_start takes the descriptor out of
	 * epoll and puts it back (two epoll_ctl calls) even for the same events */
	if (ev == c->poll_events)
		return;
	c->poll_events = ev;
	uv_poll_start(&c->poll, ev, conn_poll_cb);
}

/* A half-closed peer has every reply it asked for: close. */
static void finish_half_closed(conn *c)
{
	if (c->open && c->rd_eof && c->inflight == 0 && c->unreg_pending == 0 &&
	    outq_pending(&c->out) == 0)
		conn_close(c, "peer half-closed; every reply sent");
}

static void flush_out(conn *c)
{
	int rc = outq_flush(&c->out);
	if (rc < 0) {
		conn_close(c, strerror(-rc));
		return;
	}
	bool want = rc > 0;
	if (!want && c->close_after_flush) {
		conn_close(c, "protocol error");
		return;
	}
	if (!want && c->rd_eof) {
		finish_half_closed(c);
		if (!c->open)
			return;
	}
	if (want != c->want_write) {
		c->want_write = want;
		update_poll(c);
	}
}

/* Queue one framed reply (sb holds prefix + body) and try to write it.
 * timed: a job reply whose trace takes the write time (outq.h). */
static void send_sbuf_at(conn *c, msgpack_sbuffer *sb, bool timed, uint64_t t_encoded)
{
	if (!c->open || !sb->data)
		return;
	int rc = outq_append(&c->out, sb->data, sb->size, timed, t_encoded,
			     c->srv->cfg->max_outbound_bytes);
	if (rc == -ENOBUFS) {
		log_warn("client pid %d: %zu reply bytes unread, above max_outbound_bytes %llu; dropping it",
			 (int)c->cred.pid, outq_pending(&c->out),
			 (unsigned long long)c->srv->cfg->max_outbound_bytes);
		conn_close(c, "not reading its replies");
		return;
	}
	if (rc != 0) {
		conn_close(c, rc == -ENOMEM ? "out of memory" : strerror(-rc));
		return;
	}
	if (c->srv->cork) {
		if (!c->dirty) {
			c->dirty = true;
			c->dirty_next = c->srv->dirty;
			c->srv->dirty = c;
			conn_ref(c);
		}
		return;
	}
	flush_out(c);
}

static void send_sbuf(conn *c, msgpack_sbuffer *sb)
{
	send_sbuf_at(c, sb, false, 0);
}

void conn_replies_cork(void *srv, bool begin)
{
	server *s = srv;
	s->cork = begin;
	if (begin)
		return;
	while (s->dirty) {
		conn *c = s->dirty;
		s->dirty = c->dirty_next;
		c->dirty = false;
		c->dirty_next = NULL;
		if (c->open)
			flush_out(c);
		conn_unref(c);
	}
}

static void reply(conn *c, proto_reply_kind kind, const proto_reply *r)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	if (proto_reply_encode(&sb, kind, r) == 0)
		send_sbuf(c, &sb);
	msgpack_sbuffer_destroy(&sb);
}

static void reply_ok(conn *c, uint64_t id)
{
	proto_reply r = {.id = id, .ok = true};
	reply(c, PROTO_R_PLAIN, &r);
}

static void reply_err(conn *c, uint64_t id, const proto_err *err)
{
	proto_reply r = {.id = id, .ok = false, .err = *err};
	log_debug("client pid %d: request %llu failed: %s: %s", (int)c->cred.pid,
		  (unsigned long long)id, proto_code_name(err->code), err->message);
	reply(c, PROTO_R_ERROR, &r);
}

/* ---- ops ----------------------------------------------------------------- */

static region *find_region(conn *c, uint64_t id, uint32_t *index)
{
	for (uint32_t i = 0; i < c->nregs; i++)
		if (c->regs[i]->id == id) {
			if (index)
				*index = i;
			return c->regs[i];
		}
	return NULL;
}

static int region_size_cb(void *ctx, uint64_t id, uint64_t *size)
{
	region *r = find_region(ctx, id, NULL);
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
		/* the client's own words: escaped (no line breaks, terminal
		 * escapes or invalid UTF-8 in the log) and bounded */
		char name[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_LOG_CHARS)];
		proto_text_escape(name, sizeof(name), q->client, strlen(q->client),
				  PROTO_TEXT_LOG_CHARS, 0);
		log_info("client pid %d says hello as '%s'", (int)c->cred.pid, name);
	}
	reply(c, PROTO_R_HELLO, r);
	free(r);
}

static void op_stats(conn *c, const proto_request *q)
{
	server *s = c->srv;
	const engine *e = &s->eng;
	proto_reply r = {.id = q->id, .ok = true};
	proto_stats *st = &r.stats;
	st->uptime_s = (double)(engine_now_ns() - s->started_ns) / 1e9;
	st->clients = s->nconns;
	st->regions = region_count;
	st->region_bytes = region_bytes;
	st->jobs_done = e->jobs_done;
	st->jobs_failed = e->jobs_failed;
	st->batches = e->batches;
	st->jobs_per_batch_avg = e->batches ? (double)e->jobs_in_batches / (double)e->batches : 0;
	st->pipelines = s->pl->built;
	st->pipeline_cache_hits = s->pl->cache_hits;
	st->jobs_queued = e->queued;
	st->jobs_running = e->running;
	st->host_imports = region_imports;
	st->staged_regions = region_staged;
	st->validation_errors = atomic_load(&s->dev->validation_errors);
	st->devlocal_min_bytes = e->devlocal_min[PROTO_F32] == CONFIG_OFF ? 0 : e->devlocal_min[PROTO_F32];
	st->devlocal_min_bytes_16bit = e->devlocal_min[PROTO_F16] == CONFIG_OFF ? 0 : e->devlocal_min[PROTO_F16];
	st->devlocal_jobs = e->devlocal_jobs;
	st->devlocal_copy_bytes = e->devlocal_copy_bytes;
	st->splitk_jobs = e->splitk_jobs;
	st->dispatches = e->dispatches;
	for (uint32_t i = 0; i < e->nslots; i++)
		st->scratch_bytes += e->slots[i].scratch.size;
	st->scratch_failures = e->scratch_failures;
	metrics_export(&e->metrics, st);
	st->spin_budget_us = e->spin.budget_ns / 1000;
	st->spin_us = atomic_load(&e->spin_ns) / 1000;
	st->spin_hits = atomic_load(&e->spin_hits);
	st->blocking_waits = atomic_load(&e->blocking_waits);
	reply(c, PROTO_R_STATS, &r);
}

/* Bytes registered now by the open connections of uid: a walk over at
 * most max_connections of them, once per register. */
static uint64_t uid_region_bytes(const server *s, uid_t uid)
{
	uint64_t n = 0;
	for (const conn *c = s->conns; c; c = c->next)
		if (c->cred.uid == uid)
			n += c->region_bytes;
	return n;
}

static void op_register(conn *c, const proto_request *q, int fd)
{
	server *s = c->srv;
	proto_err err;
	region *r = NULL;
	if (s->eng.lost || !s->dev->dev) {
		/* no objects on a lost device: recovery.c makes them for the
		 * regions it knows, once the device is back */
		close(fd);
		proto_fail(&err, PROTO_DEVICE_LOST,
			   "register: the GPU was lost and is being recreated; retry in a second");
		goto fail;
	}
	if (c->nregs >= s->limits.max_regions) {
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
	uint64_t uid_bytes = uid_region_bytes(s, c->cred.uid);
	if (uid_bytes + q->size > s->limits.max_region_bytes_per_uid) {
		close(fd);
		proto_fail(&err, PROTO_LIMIT,
			   "register: key 'size' = %llu would pass max_region_bytes_per_uid %llu "
			   "(uid %u's connections hold %llu bytes)",
			   (unsigned long long)q->size, (unsigned long long)s->limits.max_region_bytes_per_uid,
			   (unsigned)c->cred.uid, (unsigned long long)uid_bytes);
		goto fail;
	}
	if (s->total_region_bytes + q->size > s->limits.max_total_region_bytes) {
		close(fd);
		proto_fail(&err, PROTO_LIMIT,
			   "register: key 'size' = %llu would pass the daemon's max_total_region_bytes %llu",
			   (unsigned long long)q->size, (unsigned long long)s->limits.max_total_region_bytes);
		goto fail;
	}
	if (c->nregs == c->regs_cap) {
		uint32_t cap = c->regs_cap ? c->regs_cap * 2 : 8;
		region **nr = realloc(c->regs, cap * sizeof(*nr));
		if (!nr) {
			close(fd);
			proto_fail(&err, PROTO_INTERNAL, "register: out of memory");
			goto fail;
		}
		c->regs = nr;
		c->regs_cap = cap;
	}
	if (region_create(&r, s->dev, fd, q->size, !s->cfg->no_host_import, c, &err) != 0)
		goto fail;
	r->id = ++c->next_region;
	c->regs[c->nregs++] = r;
	c->region_bytes += r->size;
	s->total_region_bytes += r->size;
	log_debug("client pid %d: region %llu, %llu bytes, %s", (int)c->cred.pid,
		  (unsigned long long)r->id, (unsigned long long)r->size,
		  r->staged ? "staged" : "imported");
	proto_reply rep = {.id = q->id, .ok = true, .region = r->id};
	reply(c, PROTO_R_REGISTER, &rep);
	return;
fail:
	reply_err(c, q->id, &err);
}

static void unregister_done(void *ctx, uint64_t id)
{
	conn *c = ctx;
	c->unreg_pending--;
	reply_ok(c, id); /* no-op when the connection closed meanwhile */
	conn_unref(c);
}

static void op_unregister(conn *c, const proto_request *q)
{
	uint32_t i;
	region *r = find_region(c, q->region, &i);
	if (!r) {
		proto_err err;
		proto_fail(&err, PROTO_BAD_REGION,
			   "unregister: key 'region' = %llu is not registered on this connection",
			   (unsigned long long)q->region);
		reply_err(c, q->id, &err);
		return;
	}
	c->regs[i] = c->regs[--c->nregs];
	c->region_bytes -= r->size;
	c->srv->total_region_bytes -= r->size;
	conn_ref(c);
	c->unreg_pending++;
	r->on_release = unregister_done;
	r->release_ctx = c;
	r->release_arg = q->id;
	region_unref(r); /* replies now, or when the last job using it ends */
}

static void op_linear_backward(conn *c, const proto_request *q)
{
	server *s = c->srv;
	proto_err err;
	uint64_t bytes[PROTO_T_COUNT];
	if (!s->pl->dtype_ok[q->dtype]) {
		proto_fail(&err, PROTO_UNSUPPORTED,
			   "linear_backward: dtype '%s' is not served on this device (it lacks 16-bit storage)",
			   proto_dtype_name(q->dtype));
		goto fail;
	}
	if (q->variant == PROTO_VARIANT_COOPMAT && !s->pl->pipe[KERN_COOPMAT][q->dtype]) {
		proto_fail(&err, PROTO_UNSUPPORTED,
			   "linear_backward: variant 'coopmat' needs dtype f16 on a device with "
			   "VK_NV_cooperative_matrix (16x16x16 f16 -> f32); this job is %s on %s%s",
			   proto_dtype_name(q->dtype), s->dev->info.name,
			   s->dev->coopmat ? "" : ", which lacks it");
		goto fail;
	}
	if (q->variant == PROTO_VARIANT_COOPMAT_KHR &&
	    (q->dtype == PROTO_F32 || !s->pl->pipe[KERN_CMK_DW][q->dtype])) {
		/* (f32's KERN_CMK_* pipelines are coopmat_khr_f32x3's) */
		proto_fail(&err, PROTO_UNSUPPORTED,
			   "linear_backward: variant 'coopmat_khr' needs %s; this job is %s on %s",
			   q->dtype == PROTO_F32 ? "dtype f16 or bf16 (it multiplies 16-bit operands)"
						 : s->pl->cmk_why[q->dtype],
			   proto_dtype_name(q->dtype), s->dev->info.name);
		goto fail;
	}
	if (q->variant == PROTO_VARIANT_COOPMAT_KHR_F32X3 &&
	    (q->dtype != PROTO_F32 || !s->pl->pipe[KERN_CMK_DW][q->dtype] ||
	     !s->pl->pipe[KERN_CMK_DX][q->dtype])) {
		proto_fail(&err, PROTO_UNSUPPORTED,
			   "linear_backward: variant 'coopmat_khr_f32x3' needs %s; this job is %s on %s",
			   q->dtype != PROTO_F32 ? "dtype f32" : s->pl->cmk_why[q->dtype],
			   proto_dtype_name(q->dtype), s->dev->info.name);
		goto fail;
	}
		if (q->variant == PROTO_VARIANT_COOPMAT_NV2 &&
	    (!s->pl->pipe[KERN_NV2_DW][q->dtype] || !s->pl->pipe[KERN_NV2_DX][q->dtype])) {
		proto_fail(&err, PROTO_UNSUPPORTED,
			   "linear_backward: variant 'coopmat_nv2' needs %s; this job is %s on %s",
			   s->pl->nv2_why[q->dtype], proto_dtype_name(q->dtype), s->dev->info.name);
		goto fail;
	}
	if (q->variant == PROTO_VARIANT_TILED128 && !s->pl->pipe[KERN_TILED128][q->dtype]) {
		proto_fail(&err, PROTO_UNSUPPORTED,
			   "linear_backward: variant 'tiled128' needs 32768 bytes of shared memory per "
			   "workgroup; %s offers maxComputeSharedMemorySize = %u",
			   s->dev->info.name, s->dev->props.limits.maxComputeSharedMemorySize);
		goto fail;
	}
	if (c->inflight >= s->limits.max_inflight) {
		proto_fail(&err, PROTO_LIMIT,
			   "linear_backward: this connection has max_inflight = %u jobs queued or running",
			   s->limits.max_inflight);
		goto fail;
	}
	if (proto_job_check(q, &s->limits, region_size_cb, c, bytes, &err) != 0)
		goto fail;
	region *regs[PROTO_T_COUNT] = {0};
	for (int t = 0; t < PROTO_T_COUNT; t++)
		if (q->t[t].present)
			regs[t] = find_region(c, q->t[t].region, NULL);
	job *j = engine_job_new(c, q, bytes, regs, c->rx_ns);
	if (!j) {
		proto_fail(&err, PROTO_INTERNAL, "linear_backward: out of memory");
		goto fail;
	}
	conn_ref(c);
	c->inflight++;
	engine_enqueue(&s->eng, c->lane, j);
	engine_pump(&s->eng);
	return;
fail:
	reply_err(c, q->id, &err);
}

void conn_job_done(job *j, proto_code code, const char *msg, uint64_t queued_us,
		   uint64_t gpu_us, uint32_t batch_jobs)
{
	conn *c = j->owner;
	c->inflight--; /* before the reply: its flush may finish a half-closed c */
	if (code == PROTO_OK) {
		proto_reply r = {.id = j->req.id, .ok = true, .queued_us = queued_us,
				 .gpu_us = gpu_us, .batch_jobs = batch_jobs,
				 .kernel_us = j->kernel_us, .has_kernel_us = j->has_kernel_us};
		const uint64_t t_enc = engine_now_ns();
		engine_job_trace(j, t_enc, &r.trace);
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		if (proto_reply_encode(&sb, PROTO_R_JOB, &r) == 0)
			send_sbuf_at(c, &sb, r.trace.present, t_enc);
		msgpack_sbuffer_destroy(&sb);
	} else {
		proto_err err;
		proto_fail(&err, code, "linear_backward: %s", msg);
		reply_err(c, j->req.id, &err);
	}
	conn_unref(c);
}

/* ---- input ------------------------------------------------------------------ */

/* Descriptors are kept with the stream offset of the frame they came with
 * (conn_read works that out exactly); a frame takes its own. */
static void fd_pop(conn *c, unsigned i)
{
	c->nfds--;
	memmove(c->fds + i, c->fds + i + 1, (c->nfds - i) * sizeof(int));
	memmove(c->fd_frame + i, c->fd_frame + i + 1, (c->nfds - i) * sizeof(uint64_t));
}

/* Move the descriptors of the frame starting at fs into out[] (at most
 * `max`, the rest closed) and close any left over from earlier frames.
 * Returns how many came with the frame. */
static unsigned take_fds(conn *c, uint64_t fs, int *out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < c->nfds;) {
		if (c->fd_frame[i] > fs) {
			i++;
			continue;
		}
		if (c->fd_frame[i] == fs && n < max)
			out[n] = c->fds[i];
		else
			close(c->fds[i]);
		n += c->fd_frame[i] == fs;
		fd_pop(c, i);
	}
	return n;
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
	char names[128];
	if (proto_variant_list(names, sizeof(names), q->dtype, cannot_run_cb, &r) == 0)
		proto_err_append(err, "; this device runs all of them");
	else
		proto_err_append(err, "; this device cannot run %s", names);
}

/* One whole frame body at stream offsets [fs, fe). Returns false when the
 * connection must stop reading (protocol error). */
static bool conn_dispatch(conn *c, const uint8_t *body, uint32_t len, uint64_t fs, uint64_t fe)
{
	proto_request q;
	proto_err err;
	uint64_t id = 0;
	int fds[2];
	unsigned nfd = take_fds(c, fs, fds, 2);
	(void)fe;
	int rc = proto_request_decode(body, len, &q, &id, &err);
	if (rc != 0 && err.code == PROTO_BAD_FRAME) {
		for (unsigned i = 0; i < nfd && i < 2; i++)
			close(fds[i]);
		reply_err(c, 0, &err);
		log_info("client pid %d: protocol error: %s", (int)c->cred.pid, err.message);
		c->close_after_flush = true;
		flush_out(c);
		return false;
	}
	int fd = -1;
	if (rc == 0 && q.op == PROTO_OP_REGISTER && nfd == 1) {
		fd = fds[0];
	} else {
		for (unsigned i = 0; i < nfd && i < 2; i++)
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
	if (rc != 0) {
		if (q.variant_unknown)
			explain_variants(c, &q, &err);
		reply_err(c, id, &err);
		return true;
	}
	switch (q.op) {
	case PROTO_OP_HELLO: op_hello(c, &q); break;
	case PROTO_OP_REGISTER: op_register(c, &q, fd); break;
	case PROTO_OP_UNREGISTER: op_unregister(c, &q); break;
	case PROTO_OP_LINEAR_BACKWARD: op_linear_backward(c, &q); break;
	case PROTO_OP_STATS: op_stats(c, &q); break;
	case PROTO_OP_PING: reply_ok(c, q.id); break;
	default: break;
	}
	return true;
}

/* Receive up to `len` bytes with their descriptors into buf. Returns the
 * byte count (0: peer closed), -EAGAIN, or another negative errno; *nfds
 * descriptors in fds[]. On MSG_CTRUNC or foreign control messages every
 * received descriptor is closed and -EBADMSG returned. */
static ssize_t recv_piece(conn *c, uint8_t *buf, size_t len, int flags, int *fds, unsigned *nfds)
{
	union {
		char b[CMSG_SPACE(CONN_CMSG_FDS * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			    .msg_controllen = sizeof(cm.b)};
	*nfds = 0;
	ssize_t n = recvmsg(c->fd, &mh, flags | MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	bool bad = (mh.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) {
			bad = true;
			continue;
		}
		size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			if (*nfds < CONN_CMSG_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd), bad = true;
		}
	}
	if (bad) {
		for (unsigned i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EBADMSG;
	}
	return n;
}

/* Hand n received bytes (and the descriptors that came with them) to the
 * framer and dispatch every whole frame. Returns false when c stopped
 * reading or closed. The caller holds a reference. */
static bool take_bytes(conn *c, const uint8_t *buf, size_t n, const int *fds, unsigned nfds)
{
	if (c->nfds + nfds > CONN_MAX_FDS) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		conn_close(c, "too many descriptors held");
		return false;
	}
	/* the framer holds at most the current partial frame, which starts
	 * at frame_pos: that is the frame these bytes' first byte belongs to */
	for (unsigned i = 0; i < nfds; i++) {
		c->fds[c->nfds] = fds[i];
		c->fd_frame[c->nfds++] = c->frame_pos;
	}
	c->rx_pos += n;
	if (proto_framer_push(&c->fr, buf, n) != 0) {
		conn_close(c, "out of memory");
		return false;
	}
	for (;;) {
		const uint8_t *body;
		uint32_t len;
		int rc = proto_framer_next(&c->fr, &body, &len);
		if (rc == 0)
			return true;
		if (rc < 0) {
			proto_err err;
			proto_fail(&err, PROTO_BAD_FRAME,
				   "frame length is 0 or above max_frame %u; closing",
				   c->srv->limits.max_frame);
			drop_fds(c);
			reply_err(c, 0, &err);
			c->close_after_flush = true;
			flush_out(c);
			return false;
		}
		uint64_t fs = c->frame_pos, fe = fs + PROTO_FRAME_HDR + len;
		c->frame_pos = fe;
		if (!conn_dispatch(c, body, len, fs, fe) || !c->open)
			return false;
	}
}

/* The peer sends nothing more (EOF). One that closed its socket reads
 * nothing either: close now, dropping its queued jobs. One that only shut
 * down its sending side (shutdown SHUT_WR; the socket then reports no
 * POLLHUP) still reads: stop reading, answer every request it sent, then
 * close (finish_half_closed). A partial frame left is dropped. */
static void conn_peer_eof(conn *c)
{
	/* no events asked: poll reports only POLLHUP / POLLERR (a full
	 * send buffer must not pass for a closed peer) */
	struct pollfd p = {.fd = c->fd, .events = 0};
	int n = poll(&p, 1, 0);
	if (n < 0 || (n == 1 && (p.revents & (POLLHUP | POLLERR)))) {
		conn_close(c, "peer closed");
		return;
	}
	c->rd_eof = true;
	drop_fds(c); /* their frames can no longer come */
	log_debug("client pid %d half-closed: %u job(s) and %u unregister(s) to answer, then close",
		  (int)c->cred.pid, c->inflight, c->unreg_pending);
	finish_half_closed(c);
	update_poll(c);
}

/* Descriptors ride with the last sendmsg() chunk of a read: Linux ends a
 * read with the first chunk that carries descriptors, but merges the chunks
 * before it. So a plain read cannot tell which frame a descriptor came with
 * when several frames share the read. Peek first: with no descriptors in
 * sight (the usual case) consume the peeked bytes in one go; otherwise
 * consume them frame by frame, never reading across a frame boundary, so
 * the read that returns the descriptors names their frame exactly. */
static void conn_read(conn *c)
{
	uint8_t buf[CONN_READ_CHUNK];
	int fds[CONN_CMSG_FDS];
	unsigned nfds;
	ssize_t n = recv_piece(c, buf, sizeof(buf), MSG_PEEK, fds, &nfds);
	bool with_fds = nfds > 0 || n == -EBADMSG;
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]); /* peeked copies */
	if (n == -EBADMSG) {
		/* a consuming read gets the same trouble: take it from there */
		n = sizeof(buf);
	} else if (n < 0) {
		if (n != -EAGAIN)
			conn_close(c, strerror((int)-n));
		return;
	} else if (n == 0) {
		conn_peer_eof(c);
		return;
	}
	conn_ref(c); /* a dispatch may close c */
	engine_activity(&c->srv->eng); /* its next request may come soon: poll a while */
	size_t total = (size_t)n, done = 0;
	while (done < total && c->open && !c->close_after_flush) {
		size_t want = total - done;
		if (with_fds) {
			size_t need = proto_framer_need(&c->fr);
			if (need && need < want)
				want = need;
		}
		ssize_t m = recv_piece(c, buf, want, 0, fds, &nfds);
		if (m == -EAGAIN)
			break;
		if (m == 0) {
			conn_peer_eof(c);
			break;
		}
		if (m < 0) {
			conn_close(c, m == -EBADMSG ? "too many descriptors in one message"
				   : strerror((int)-m));
			break;
		}
		done += (size_t)m;
		c->rx_ns = engine_now_ns(); /* the frames this read completes arrived */
		if (!take_bytes(c, buf, (size_t)m, fds, nfds))
			break;
	}
	if (c->open)
		update_poll(c);
	conn_unref(c);
}

static void conn_poll_cb(uv_poll_t *h, int status, int events)
{
	conn *c = h->data;
	if (status < 0) {
		/* libuv reports POLLERR as UV_EBADF: name the socket's own error
		 * (a peer that hung up on unread replies: ECONNRESET) */
		int e = 0;
		socklen_t len = sizeof(e);
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e)
			conn_close(c, strerror(e));
		else
			conn_close(c, uv_strerror(status));
		return;
	}
	if (c->open && (events & UV_WRITABLE))
		flush_out(c);
	if (c->open && (events & UV_READABLE) && !c->close_after_flush && !c->rd_eof &&
	    !c->srv->draining)
		conn_read(c);
}
