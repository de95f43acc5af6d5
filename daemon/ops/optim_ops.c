/* daemon/ops/optim_ops.c — see optim_ops.h. */
#include "optim_ops.h"

#include "engine.h"
#include "ops.h"
#include "optim.h"
#include "server.h"
#include "session.h"
#include "tensor_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request's jobs: the hyperparameters they read (req.optim points
 * here), how many are still to end, the first failure. */
typedef struct optim_group {
	proto_optim o; /* ids cleared: the jobs hold their tensors */
	uint32_t left;
	proto_code code;
	char msg[200];
} optim_group;

/* The job slot each key's tensor takes (engine_job.h job_is_optim). */
static const int slot_of[PROTO_OPT_SLOTS] = {PROTO_T_W, PROTO_T_X, PROTO_T_DW, PROTO_T_DX};

/* Key k's i-th tensor of c, checked: 0 and *out, or a negative code. */
static int lookup(conn *c, const proto_request *q, int k, uint32_t i, tensor **out, proto_err *err)
{
	const char *opn = proto_op_name(q->op), *key = proto_optim_key(q->op, k);
	const uint64_t id = q->optim->ids[k][i];
	tensor *t = tensor_ops_find(c, id);
	if (!t)
		return proto_fail(err, PROTO_BAD_TENSOR,
				  "%s: key '%s'[%u] = %llu is not a tensor of this connection (unknown, "
				  "freed, or another connection's)",
				  opn, key, i, (unsigned long long)id);
	if (t->lost)
		return proto_fail(err, PROTO_DEVICE_LOST,
				  "%s: key '%s'[%u] names tensor %llu, whose contents were lost with the GPU "
				  "(a device loss and recovery since it was made): tensor_free it and make a new one",
				  opn, key, i, (unsigned long long)id);
	*out = t;
	return 0;
}

/* Parameter i's tensors (ts[k], NULL where key k is absent), checked
 * against each other. */
static int check_pair(conn *c, const proto_request *q, uint32_t i, tensor *ts[PROTO_OPT_SLOTS],
		      proto_err *err)
{
	const char *opn = proto_op_name(q->op);
	for (int k = 0; k < PROTO_OPT_SLOTS; k++) {
		ts[k] = NULL;
		if (!q->optim->has[k])
			continue;
		int rc = lookup(c, q, k, i, &ts[k], err);
		if (rc)
			return rc;
	}
	const tensor *p = ts[PROTO_OPT_PARAM];
	for (int k = 1; k < PROTO_OPT_SLOTS; k++) {
		const tensor *t = ts[k];
		if (!t)
			continue;
		if (t->rows != p->rows || t->cols != p->cols)
			return proto_fail(err, PROTO_BAD_TENSOR,
					  "%s: key '%s'[%u] names tensor %llu of %llu x %llu; its param, tensor "
					  "%llu, is %llu x %llu",
					  opn, proto_optim_key(q->op, k), i, (unsigned long long)t->id,
					  (unsigned long long)t->rows, (unsigned long long)t->cols,
					  (unsigned long long)p->id, (unsigned long long)p->rows,
					  (unsigned long long)p->cols);
	}
	/* one tensor in two roles: a written one (param, buffers) may be no
	 * other's */
	for (int a = 0; a < PROTO_OPT_SLOTS; a++)
		for (int b = a + 1; b < PROTO_OPT_SLOTS; b++)
			if (ts[a] && ts[b] && ts[a] == ts[b])
				return proto_fail(err, PROTO_OVERLAP,
						  "%s: keys '%s'[%u] and '%s'[%u] name the same tensor %llu", opn,
						  proto_optim_key(q->op, a), i, proto_optim_key(q->op, b), i,
						  (unsigned long long)ts[a]->id);
	return 0;
}

void op_optim_step(conn *c, const proto_request *q)
{
	server *s = c->srv;
	session *ss = c->session;
	const char *opn = proto_op_name(q->op);
	const proto_optim *o = q->optim;
	proto_err err;
	if (ss->inflight > 0 && ss->inflight + o->n > s->limits.max_inflight) {
		proto_fail(&err, PROTO_LIMIT,
			   "%s: %u parameters are %u jobs; with the %u queued or running this connection "
			   "would pass max_inflight = %u",
			   opn, o->n, o->n, ss->inflight, s->limits.max_inflight);
		goto fail;
	}
	/* every check first: a refused request queues nothing */
	tensor *ts[PROTO_OPT_SLOTS];
	for (uint32_t i = 0; i < o->n; i++)
		if (check_pair(c, q, i, ts, &err) != 0)
			goto fail;
	optim_group *g = calloc(1, sizeof(*g));
	job **jobs = calloc(o->n, sizeof(*jobs));
	if (!g || !jobs) {
		free(g);
		free(jobs);
		proto_fail(&err, PROTO_INTERNAL, "%s: out of memory", opn);
		goto fail;
	}
	g->o = *o;
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		g->o.ids[k] = NULL;
	for (uint32_t i = 0; i < o->n; i++) {
		check_pair(c, q, i, ts, &err); /* (passed above: the same tensors) */
		proto_request jq = {.op = q->op, .id = q->id, .dtype = ts[PROTO_OPT_PARAM]->dtype,
				    .rows = ts[PROTO_OPT_PARAM]->rows, .cols = ts[PROTO_OPT_PARAM]->cols,
				    .optim = &g->o};
		uint64_t bytes[PROTO_T_COUNT] = {0};
		region *regs[PROTO_T_COUNT] = {0};
		for (int k = 0; k < PROTO_OPT_SLOTS; k++) {
			if (!ts[k])
				continue;
			const int t = slot_of[k];
			jq.t[t] = (proto_tensor){.present = true, .is_tensor = true, .tensor = ts[k]->id};
			bytes[t] = ts[k]->bytes;
			regs[t] = &ts[k]->reg;
		}
		jobs[i] = engine_job_new(s->eng, c, &jq, bytes, regs, c->rx_ns);
		if (!jobs[i]) {
			for (uint32_t k = 0; k < i; k++)
				job_free(jobs[k]);
			free(jobs);
			free(g);
			proto_fail(&err, PROTO_INTERNAL, "%s: out of memory", opn);
			goto fail;
		}
		jobs[i]->group = g;
	}
	g->left = o->n;
	for (uint32_t i = 0; i < o->n; i++) {
		conn_ref(c);
		ss->inflight++;
		engine_enqueue(s->eng, ss->lane, jobs[i]);
	}
	free(jobs);
	engine_pump(s->eng);
	return;
fail:
	conn_reply_err(c, q->id, &err);
}

void optim_job_done(conn *c, job *j, proto_code code, const char *msg, uint64_t queued_us,
		    uint64_t gpu_us, uint32_t batch_jobs)
{
	optim_group *g = j->group;
	j->group = NULL;
	if (code != PROTO_OK && g->code == PROTO_OK) {
		g->code = code;
		snprintf(g->msg, sizeof(g->msg), "%s", msg ? msg : "");
	}
	if (--g->left > 0)
		return;
	if (g->code == PROTO_OK) {
		proto_reply *r = &c->srv->job_reply;
		r->id = j->req.id;
		r->ok = true;
		r->queued_us = queued_us;
		r->gpu_us = gpu_us;
		r->batch_jobs = batch_jobs;
		r->kernel_us = 0;
		r->has_kernel_us = false;
		r->stream.n = 0;
		r->trace.present = false;
		conn_reply(c, PROTO_R_JOB, r);
	} else {
		proto_err err;
		proto_fail(&err, g->code, "%s: %s", proto_op_name(j->req.op), g->msg);
		conn_reply_err(c, j->req.id, &err);
	}
	free(g);
}
