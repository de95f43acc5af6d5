/* daemon/ops/session.c — a connection's session as every op file uses it:
 * its regions by id, and a checked job into its lane. Below ops.c,
 * tensor_ops.c and optim_ops.c, calling none of them, so the ops' calls run
 * one way (ops.c on top). */
#include "ops_priv.h"
#include "session.h"

#include "engine.h"
#include "server.h"

region *session_find_region(conn *c, uint64_t id, uint32_t *index)
{
	for (uint32_t i = 0; i < c->session->nregs; i++)
		if (c->session->regs[i]->id == id) {
			if (index)
				*index = i;
			return c->session->regs[i];
		}
	return NULL;
}

int session_enqueue(conn *c, const proto_request *q, const uint64_t bytes[PROTO_T_COUNT],
		    region *const regs[PROTO_T_COUNT], proto_err *err)
{
	server *s = c->srv;
	if (c->session->inflight >= s->limits.max_inflight)
		return proto_fail(err, PROTO_LIMIT,
				  "%s: this connection has max_inflight = %u jobs queued or running",
				  proto_op_name(q->op), s->limits.max_inflight);
	job *j = engine_job_new(s->eng, c, q, bytes, regs, c->rx_ns);
	if (!j)
		return proto_fail(err, PROTO_INTERNAL, "%s: out of memory", proto_op_name(q->op));
	conn_ref(c);
	c->session->inflight++;
	engine_enqueue(s->eng, c->session->lane, j);
	engine_pump(s->eng);
	return 0;
}

