/* proto/optim.c — see optim.h. */
#include "optim.h"

#include "mpobj.h"

#include <math.h>
#include <string.h>

const char *proto_optim_key(proto_op op, int k)
{
	switch (k) {
	case PROTO_OPT_PARAM: return "param";
	case PROTO_OPT_GRAD: return "grad";
	case PROTO_OPT_BUF1: return op == PROTO_OP_SGD_STEP ? "momentum_buf" : "m";
	case PROTO_OPT_BUF2: return op == PROTO_OP_ADAM_STEP ? "v" : NULL;
	default: return NULL;
	}
}

void proto_optim_defaults(proto_optim *o)
{
	memset(o, 0, sizeof(*o));
	o->beta1 = 0.9;
	o->beta2 = 0.999;
	o->eps = 1e-8;
}

static _Thread_local proto_optim scratch;
static _Thread_local uint64_t scratch_ids[PROTO_OPT_SLOTS][PROTO_OPTIM_MAX_N];

proto_optim *proto_optim_scratch(void)
{
	return &scratch;
}

static bool key_is(const char *key, uint32_t klen, const char *s)
{
	return s && strlen(s) == klen && memcmp(key, s, klen) == 0;
}

/* A number (an integer or a float) as a double. */
static int get_num(const msgpack_object *v, const char *opn, const char *key, double *out,
		   proto_err *err)
{
	switch (v->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)v->via.u64; return 0;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)v->via.i64; return 0;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: *out = v->via.f64; return 0;
	default:
		return proto_fail(err, PROTO_BAD_REQUEST, "%s: key '%s' must be a number", opn, key);
	}
}

static int get_bool(const msgpack_object *v, const char *opn, const char *key, bool *out,
		    proto_err *err)
{
	if (v->type != MSGPACK_OBJECT_BOOLEAN)
		return proto_fail(err, PROTO_BAD_REQUEST, "%s: key '%s' must be a boolean", opn, key);
	*out = v->via.boolean;
	return 0;
}

/* A tensor id or an array of them into ids (PROTO_OPTIM_MAX_N at most). */
static int get_ids(const msgpack_object *v, const char *opn, const char *key, uint64_t *ids,
		   uint32_t *n, proto_err *err)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		ids[0] = v->via.u64;
		*n = 1;
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_ARRAY)
		return proto_fail(err, PROTO_BAD_REQUEST,
				  "%s: key '%s' must be a tensor id or an array of tensor ids", opn, key);
	const uint32_t len = v->via.array.size;
	if (len == 0)
		return proto_fail(err, PROTO_BAD_REQUEST, "%s: key '%s' is an empty array", opn, key);
	if (len > PROTO_OPTIM_MAX_N)
		return proto_fail(err, PROTO_LIMIT, "%s: key '%s' names %u tensors; at most %u per request",
				  opn, key, len, PROTO_OPTIM_MAX_N);
	for (uint32_t i = 0; i < len; i++) {
		const msgpack_object *e = &v->via.array.ptr[i];
		if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "%s: key '%s'[%u] must be a tensor id (an unsigned integer)", opn,
					  key, i);
		ids[i] = e->via.u64;
	}
	*n = len;
	return 0;
}

int proto_optim_field(proto_op op, proto_optim *o, const char *key, uint32_t klen,
		      const msgpack_object *v, proto_err *err)
{
	const char *opn = proto_op_name(op);
	if (v->type == MSGPACK_OBJECT_NIL)
		return 0; /* nil: absent */
	for (int k = 0; k < PROTO_OPT_SLOTS; k++) {
		const char *name = proto_optim_key(op, k);
		if (!key_is(key, klen, name))
			continue;
		uint32_t n = 0;
		int rc = get_ids(v, opn, name, scratch_ids[k], &n, err);
		if (rc)
			return rc;
		if (o->has[PROTO_OPT_PARAM] || o->has[PROTO_OPT_GRAD] || o->has[PROTO_OPT_BUF1] ||
		    o->has[PROTO_OPT_BUF2]) {
			if (n != o->n)
				return proto_fail(err, PROTO_BAD_REQUEST,
						  "%s: key '%s' names %u tensors; the other keys %u (one of "
						  "each per parameter)",
						  opn, name, n, o->n);
		}
		o->n = n;
		o->has[k] = true;
		o->ids[k] = scratch_ids[k];
		return 0;
	}
	const bool sgd = op == PROTO_OP_SGD_STEP;
	if (key_is(key, klen, "lr")) {
		o->has_lr = true;
		return get_num(v, opn, "lr", &o->lr, err);
	}
	if (key_is(key, klen, "weight_decay"))
		return get_num(v, opn, "weight_decay", &o->weight_decay, err);
	if (sgd) {
		if (key_is(key, klen, "momentum"))
			return get_num(v, opn, "momentum", &o->momentum, err);
		if (key_is(key, klen, "dampening"))
			return get_num(v, opn, "dampening", &o->dampening, err);
		if (key_is(key, klen, "nesterov"))
			return get_bool(v, opn, "nesterov", &o->nesterov, err);
		if (key_is(key, klen, "first_step"))
			return get_bool(v, opn, "first_step", &o->first_step, err);
		return 0;
	}
	if (key_is(key, klen, "beta1"))
		return get_num(v, opn, "beta1", &o->beta1, err);
	if (key_is(key, klen, "beta2"))
		return get_num(v, opn, "beta2", &o->beta2, err);
	if (key_is(key, klen, "eps"))
		return get_num(v, opn, "eps", &o->eps, err);
	if (key_is(key, klen, "decoupled"))
		return get_bool(v, opn, "decoupled", &o->decoupled, err);
	if (key_is(key, klen, "step")) {
		if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return proto_fail(err, PROTO_BAD_REQUEST, "adam_step: key 'step' must be an unsigned integer");
		o->step = v->via.u64;
		o->has_step = true;
	}
	return 0;
}

static int range(const char *opn, const char *key, double v, double lo, bool lo_open, double hi,
		 bool hi_open, proto_err *err)
{
	const bool ok = isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
	if (ok)
		return 0;
	return proto_fail(err, PROTO_BAD_REQUEST, "%s: key '%s' = %g is outside %s%g, %g%s", opn, key, v,
			  lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
}

int proto_optim_check(proto_op op, proto_optim *o, proto_err *err)
{
	const char *opn = proto_op_name(op);
	const bool sgd = op == PROTO_OP_SGD_STEP;
	const int need[3] = {PROTO_OPT_PARAM, PROTO_OPT_GRAD, sgd ? -1 : PROTO_OPT_BUF1};
	for (int i = 0; i < 3; i++)
		if (need[i] >= 0 && !o->has[need[i]])
			return proto_fail(err, PROTO_BAD_REQUEST, "%s: key '%s' is missing", opn,
					  proto_optim_key(op, need[i]));
	if (!sgd && !o->has[PROTO_OPT_BUF2])
		return proto_fail(err, PROTO_BAD_REQUEST, "adam_step: key 'v' is missing");
	if (!o->has_lr)
		return proto_fail(err, PROTO_BAD_REQUEST, "%s: key 'lr' is missing", opn);
	const double big = 1e30;
	int rc;
	if ((rc = range(opn, "lr", o->lr, 0, false, big, false, err)) ||
	    (rc = range(opn, "weight_decay", o->weight_decay, 0, false, big, false, err)))
		return rc;
	if (sgd) {
		if ((rc = range(opn, "momentum", o->momentum, 0, false, big, false, err)) ||
		    (rc = range(opn, "dampening", o->dampening, -big, false, big, false, err)))
			return rc;
		if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "sgd_step: key 'nesterov' needs 'momentum' > 0 and 'dampening' = 0 "
					  "(as torch.optim.SGD)");
		if (o->momentum > 0 && !o->has[PROTO_OPT_BUF1])
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "sgd_step: key 'momentum_buf' is missing (momentum %g > 0 keeps one "
					  "buffer per parameter)",
					  o->momentum);
		if (o->momentum == 0)
			o->has[PROTO_OPT_BUF1] = false; /* unread: as absent */
		return 0;
	}
	if ((rc = range(opn, "beta1", o->beta1, 0, false, 1, true, err)) ||
	    (rc = range(opn, "beta2", o->beta2, 0, false, 1, true, err)) ||
	    (rc = range(opn, "eps", o->eps, 0, false, big, false, err)))
		return rc;
	if (!o->has_step)
		return proto_fail(err, PROTO_BAD_REQUEST, "adam_step: key 'step' is missing");
	if (o->step < 1)
		return proto_fail(err, PROTO_BAD_REQUEST,
				  "adam_step: key 'step' must be >= 1 (the step count after this step)");
	return 0;
}

static void pk_key(msgpack_packer *pk, const char *k)
{
	msgpack_pack_str_with_body(pk, k, strlen(k));
}

static void pk_num(msgpack_packer *pk, const char *k, double v)
{
	pk_key(pk, k);
	msgpack_pack_double(pk, v);
}

static void pk_bool(msgpack_packer *pk, const char *k, bool v)
{
	pk_key(pk, k);
	if (v)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

unsigned proto_optim_count(proto_op op, const proto_optim *o)
{
	unsigned n = 0;
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		n += o->has[k] && proto_optim_key(op, k);
	return n + (op == PROTO_OP_SGD_STEP ? 6 : 7);
}

void proto_optim_pack(msgpack_packer *pk, proto_op op, const proto_optim *o)
{
	for (int k = 0; k < PROTO_OPT_SLOTS; k++) {
		if (!o->has[k] || !proto_optim_key(op, k))
			continue;
		pk_key(pk, proto_optim_key(op, k));
		msgpack_pack_array(pk, o->n);
		for (uint32_t i = 0; i < o->n; i++)
			msgpack_pack_uint64(pk, o->ids[k][i]);
	}
	pk_num(pk, "lr", o->lr);
	pk_num(pk, "weight_decay", o->weight_decay);
	if (op == PROTO_OP_SGD_STEP) {
		pk_num(pk, "momentum", o->momentum);
		pk_num(pk, "dampening", o->dampening);
		pk_bool(pk, "nesterov", o->nesterov);
		pk_bool(pk, "first_step", o->first_step);
		return;
	}
	pk_num(pk, "beta1", o->beta1);
	pk_num(pk, "beta2", o->beta2);
	pk_num(pk, "eps", o->eps);
	pk_bool(pk, "decoupled", o->decoupled);
	pk_key(pk, "step");
	msgpack_pack_uint64(pk, o->step);
}

void proto_optim_ref_sgd(const proto_optim *o, double *p, double g, double *buf)
{
	if (o->weight_decay != 0)
		g += o->weight_decay * *p;
	if (o->momentum != 0) {
		*buf = o->first_step ? g : o->momentum * *buf + (1 - o->dampening) * g;
		g = o->nesterov ? g + o->momentum * *buf : *buf;
	}
	*p -= o->lr * g;
}

void proto_optim_ref_adam(const proto_optim *o, double *p, double g, double *m, double *v)
{
	if (o->decoupled)
		*p *= 1 - o->lr * o->weight_decay;
	else if (o->weight_decay != 0)
		g += o->weight_decay * *p;
	*m = o->beta1 * *m + (1 - o->beta1) * g;
	*v = o->beta2 * *v + (1 - o->beta2) * g * g;
	const double bc1 = 1 - pow(o->beta1, (double)o->step), bc2 = 1 - pow(o->beta2, (double)o->step);
	*p -= o->lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + o->eps);
}
