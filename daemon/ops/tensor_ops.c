/* daemon/ops/tensor_ops.c — see tensor_ops.h. */
#include "tensor_ops.h"

#include "ops_priv.h"
#include "job.h"
#include "log.h"
#include "server.h"
#include "session.h"

#include <stdlib.h>
#include <string.h>

/* ---- the connection's table ------------------------------------------------ */

/* The index of id in c's table (ascending ids), or -1. */
static int64_t find_index(const session *ss, uint64_t id)
{
	uint32_t lo = 0, hi = ss->ntensors;
	while (lo < hi) {
		const uint32_t mid = lo + (hi - lo) / 2;
		const uint64_t m = ss->tensors[mid]->id;
		if (m == id)
			return mid;
		if (m < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static tensor *find(conn *c, uint64_t id)
{
	const int64_t i = find_index(c->session, id);
	return i < 0 ? NULL : c->session->tensors[i];
}

tensor *tensor_ops_find(conn *c, uint64_t id)
{
	return find(c, id);
}

/* Remove the entry at i (the table's reference goes to the caller). */
static tensor *take(session *ss, uint32_t i)
{
	tensor *t = ss->tensors[i];
	memmove(&ss->tensors[i], &ss->tensors[i + 1], (ss->ntensors - i - 1) * sizeof(*ss->tensors));
	ss->ntensors--;
	return t;
}

/* The message for an id that is not c's to use */
static int not_ours(proto_err *err, const char *opn, const char *key, uint64_t id)
{
	return proto_fail(err, PROTO_BAD_TENSOR,
			  "%s: key '%s' = %llu is not a tensor of this connection (unknown, freed, "
			  "or another connection's)",
			  opn, key, (unsigned long long)id);
}

static int lost(proto_err *err, const char *opn, const char *key, uint64_t id)
{
	return proto_fail(err, PROTO_DEVICE_LOST,
			  "%s: key '%s' names tensor %llu, whose contents were lost with the GPU "
			  "(a device loss and recovery since it was made): tensor_free it and make a new one",
			  opn, key, (unsigned long long)id);
}

tensor *tensor_ops_lookup(conn *c, uint64_t id, const char *opn, const char *key, proto_err *err)
{
	tensor *t = find(c, id);
	if (!t) {
		not_ours(err, opn, key, id);
		return NULL;
	}
	if (t->lost) {
		lost(err, opn, key, id);
		return NULL;
	}
	return t;
}

/* ---- ops ----------------------------------------------------------------------- */

void op_tensor_new(conn *c, const proto_request *q)
{
	server *s = c->srv;
	session *ss = c->session;
	const proto_limits *lim = &s->limits;
	proto_err err;
	tensor *t = NULL;
	uint64_t elems, bytes;
	if (engine_lost(s->eng) || !s->dev->dev) {
		proto_fail(&err, PROTO_DEVICE_LOST,
			   "tensor_new: the GPU was lost and is being recreated; retry in a second");
		goto fail;
	}
	if (ss->ntensors >= lim->max_tensors) {
		proto_fail(&err, PROTO_LIMIT, "tensor_new: this connection already has max_tensors = %u tensors",
			   lim->max_tensors);
		goto fail;
	}
	if (__builtin_mul_overflow(q->rows, q->cols, &elems) ||
	    __builtin_mul_overflow(elems, (uint64_t)proto_dtype_size(q->dtype), &bytes)) {
		proto_fail(&err, PROTO_LIMIT, "tensor_new: rows × cols = %llu × %llu overflows 64 bits",
			   (unsigned long long)q->rows, (unsigned long long)q->cols);
		goto fail;
	}
	if (bytes > lim->max_tensor_bytes) {
		proto_fail(&err, PROTO_LIMIT, "tensor_new: %llu bytes exceeds max_tensor_bytes %llu",
			   (unsigned long long)bytes, (unsigned long long)lim->max_tensor_bytes);
		goto fail;
	}
	const uint64_t alloc = (bytes + 3) / 4 * 4; /* tensor.c's */
	const uint64_t uid_bytes = tensor_set_uid_bytes(&s->tensors, c->cred.uid);
	if (uid_bytes + alloc > lim->max_device_bytes_per_uid) {
		proto_fail(&err, PROTO_LIMIT,
			   "tensor_new: %llu bytes would pass max_device_bytes_per_uid %llu "
			   "(uid %u's tensors hold %llu bytes)",
			   (unsigned long long)alloc, (unsigned long long)lim->max_device_bytes_per_uid,
			   (unsigned)c->cred.uid, (unsigned long long)uid_bytes);
		goto fail;
	}
	if (s->tensors.bytes + alloc > lim->max_device_bytes) {
		proto_fail(&err, PROTO_LIMIT,
			   "tensor_new: %llu bytes would pass the daemon's max_device_bytes %llu "
			   "(%llu bytes are held)",
			   (unsigned long long)alloc, (unsigned long long)lim->max_device_bytes,
			   (unsigned long long)s->tensors.bytes);
		goto fail;
	}
	if (ss->ntensors == ss->tensors_cap) {
		const uint32_t cap = ss->tensors_cap ? ss->tensors_cap * 2 : 16;
		tensor **nt = realloc(ss->tensors, cap * sizeof(*nt));
		if (!nt) {
			proto_fail(&err, PROTO_INTERNAL, "tensor_new: out of memory");
			goto fail;
		}
		ss->tensors = nt;
		ss->tensors_cap = cap;
	}
	if (tensor_create(&t, &s->tensors, s->dev, q->dtype, q->rows, q->cols, bytes, c->cred.uid, &err) != 0) {
		log_warn("client pid %d: %s", (int)c->cred.pid, err.message);
		goto fail;
	}
	t->id = ++s->tensors.next_id;
	/* its zero fill, on the lane: the reply goes once it ran */
	proto_request fill = {.op = PROTO_OP_TENSOR_NEW, .id = q->id, .dtype = q->dtype,
			      .rows = q->rows, .cols = q->cols, .tensor = t->id};
	fill.t[PROTO_T_Y] = (proto_tensor){.present = true, .is_tensor = true, .tensor = t->id};
	uint64_t jb[PROTO_T_COUNT] = {[PROTO_T_Y] = t->alloc};
	region *regs[PROTO_T_COUNT] = {[PROTO_T_Y] = &t->reg};
	if (ops_enqueue(c, &fill, jb, regs, &err) != 0) {
		region_unref(&t->reg);
		goto fail;
	}
	ss->tensors[ss->ntensors++] = t; /* the creation's reference */
	log_debug("client pid %d: tensor %llu, %s %llu x %llu (%llu bytes)", (int)c->cred.pid,
		  (unsigned long long)t->id, proto_dtype_name(t->dtype), (unsigned long long)t->rows,
		  (unsigned long long)t->cols, (unsigned long long)t->bytes);
	return;
fail:
	conn_reply_err(c, q->id, &err);
}

void tensor_ops_new_done(conn *c, const proto_request *q, proto_code code)
{
	if (code == PROTO_OK) {
		proto_reply r = {.id = q->id, .ok = true, .tensor = q->tensor};
		conn_reply(c, PROTO_R_TENSOR, &r);
		return;
	}
	/* the client never learns the id: it leaves the table */
	if (c->session) {
		const int64_t i = find_index(c->session, q->tensor);
		if (i >= 0)
			region_unref(&take(c->session, (uint32_t)i)->reg);
	}
}

void op_tensor_copy(conn *c, const proto_request *q)
{
	const bool write = q->op == PROTO_OP_TENSOR_WRITE;
	const char *opn = proto_op_name(q->op), *key = write ? "src" : "dst";
	proto_err err;
	tensor *t = tensor_ops_lookup(c, q->tensor, opn, "tensor", &err);
	if (!t)
		goto fail;
	region *r = ops_find_region(c, q->io.region);
	if (!r) {
		proto_fail(&err, PROTO_BAD_REGION, "%s: key '%s': region %llu is not registered on this connection",
			   opn, key, (unsigned long long)q->io.region);
		goto fail;
	}
	const unsigned es = proto_dtype_size(t->dtype);
	uint64_t end;
	if (q->io.offset % es) {
		proto_fail(&err, PROTO_OUT_OF_BOUNDS,
			   "%s: key '%s': byte_offset %llu is not a multiple of the %s element size %u", opn, key,
			   (unsigned long long)q->io.offset, proto_dtype_name(t->dtype), es);
		goto fail;
	}
	if (__builtin_add_overflow(q->io.offset, t->bytes, &end) || end > r->size) {
		proto_fail(&err, PROTO_OUT_OF_BOUNDS,
			   "%s: key '%s': tensor %llu's %llu bytes at byte_offset %llu do not lie inside "
			   "region %llu of %llu bytes",
			   opn, key, (unsigned long long)t->id, (unsigned long long)t->bytes,
			   (unsigned long long)q->io.offset, (unsigned long long)q->io.region,
			   (unsigned long long)r->size);
		goto fail;
	}
	/* the job: x the source, y the destination (engine_job.h, job_is_copy) */
	proto_request jq = *q;
	jq.dtype = t->dtype;
	const proto_tensor host = {.present = true, .region = q->io.region, .offset = q->io.offset};
	const proto_tensor dev = {.present = true, .is_tensor = true, .tensor = t->id};
	jq.t[PROTO_T_X] = write ? host : dev;
	jq.t[PROTO_T_Y] = write ? dev : host;
	uint64_t jb[PROTO_T_COUNT] = {[PROTO_T_X] = t->bytes, [PROTO_T_Y] = t->bytes};
	region *regs[PROTO_T_COUNT] = {[PROTO_T_X] = write ? r : &t->reg, [PROTO_T_Y] = write ? &t->reg : r};
	if (ops_enqueue(c, &jq, jb, regs, &err) != 0)
		goto fail;
	return;
fail:
	conn_reply_err(c, q->id, &err);
}

void op_tensor_free(conn *c, const proto_request *q)
{
	const int64_t i = find_index(c->session, q->tensor);
	if (i < 0) {
		proto_err err;
		not_ours(&err, "tensor_free", "tensor", q->tensor);
		conn_reply_err(c, q->id, &err);
		return;
	}
	/* jobs already queued keep their references: the memory goes with
	 * the last of them */
	region_unref(&take(c->session, (uint32_t)i)->reg);
	conn_reply_ok(c, q->id);
}

int tensor_ops_operands(conn *c, const proto_request *q, region *regs[PROTO_T_COUNT], proto_err *err)
{
	const char *opn = proto_op_name(q->op);
	for (int s = 0; s < PROTO_T_COUNT; s++) {
		const proto_tensor *p = &q->t[s];
		if (!p->present || !p->is_tensor)
			continue;
		const char *key = proto_tensor_key[s];
		tensor *t = tensor_ops_lookup(c, p->tensor, opn, key, err);
		if (!t)
			return -(int)err->code;
		if (t->dtype != q->dtype)
			return proto_fail(err, PROTO_BAD_TENSOR,
					  "%s: key '%s' names tensor %llu of dtype %s; the job's dtype is %s", opn,
					  key, (unsigned long long)t->id, proto_dtype_name(t->dtype),
					  proto_dtype_name(q->dtype));
		uint64_t rows, cols;
		proto_slot_shape(q, s, &rows, &cols);
		if (t->rows != rows || t->cols != cols)
			return proto_fail(err, PROTO_BAD_TENSOR,
					  "%s: key '%s' names tensor %llu of %llu x %llu; the operand is %llu x %llu",
					  opn, key, (unsigned long long)t->id, (unsigned long long)t->rows,
					  (unsigned long long)t->cols, (unsigned long long)rows,
					  (unsigned long long)cols);
		regs[s] = &t->reg;
	}
	/* an output that is the same tensor as another slot */
	for (int a = 0; a < PROTO_T_COUNT; a++) {
		if (!q->t[a].present || !q->t[a].is_tensor || !proto_slot_is_output(q->op, a))
			continue;
		for (int b = 0; b < PROTO_T_COUNT; b++)
			if (b != a && q->t[b].present && q->t[b].is_tensor && q->t[b].tensor == q->t[a].tensor)
				return proto_fail(err, PROTO_OVERLAP, "%s: output '%s' is tensor %llu, which '%s' names too",
						  opn, proto_tensor_key[a], (unsigned long long)q->t[a].tensor,
						  proto_tensor_key[b]);
	}
	return 0;
}

void tensor_ops_close(conn *c)
{
	session *ss = c->session;
	for (uint32_t i = 0; i < ss->ntensors; i++)
		region_unref(&ss->tensors[i]->reg);
	ss->ntensors = 0;
}

void tensor_ops_usage(const conn *c, uint64_t *tensors, uint64_t *device_bytes)
{
	const session *ss = c->session;
	uint64_t b = 0;
	for (uint32_t i = 0; i < ss->ntensors; i++)
		b += ss->tensors[i]->alloc;
	*tensors = ss->ntensors;
	*device_bytes = b;
}
