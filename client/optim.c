/* client/optim.c — the optimizer steps on device tensors (vkgrad.h,
 * vkg_sgd_step / vkg_adam_step and their submit forms; proto/optim.h). */
#include "vkgrad_priv.h"

#include "optim.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* o from the caller's arrays (n of each; a NULL array: the key absent). */
static int optim_of(proto_optim *o, size_t n, const uint64_t *const ids[PROTO_OPT_SLOTS],
		    vkg_error *err)
{
	if (n == 0 || n > UINT32_MAX)
		return vkg__set_err(err, -EINVAL, "io", "n = %zu: a step names 1 to %u parameters", n,
				    PROTO_OPTIM_MAX_N);
	if (!ids[PROTO_OPT_PARAM] || !ids[PROTO_OPT_GRAD])
		return vkg__set_err(err, -EINVAL, "io", "param and grad are required");
	o->n = (uint32_t)n;
	for (int k = 0; k < PROTO_OPT_SLOTS; k++) {
		o->has[k] = ids[k] != NULL;
		o->ids[k] = ids[k];
	}
	return 0;
}

/* Send (handle) or run (res) the request for o. */
static int optim_go(vkg_client *c, proto_op op, proto_optim *o, vkg_result *res, uint64_t *handle,
		    bool wait, vkg_error *err)
{
	proto_request req;
	memset(&req, 0, sizeof(req));
	req.op = op;
	req.optim = o;
	pthread_mutex_lock(&c->lock);
	int rc;
	if (wait) {
		rc = vkg__conn_call(c, &req, -1, NULL, res, NULL, err);
	} else {
		uint64_t id = 0;
		rc = vkg__conn_request(c, &req, -1, NULL, &id, err);
		if (rc == 0 && handle)
			*handle = id;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int sgd(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
	       const uint64_t *momentum_buf, const vkg_sgd_args *a, vkg_result *res, uint64_t *handle,
	       bool wait, vkg_error *err)
{
	vkg__clear_err(err);
	if (!a)
		return vkg__set_err(err, -EINVAL, "io", "sgd_step: no arguments (vkg_sgd_args)");
	proto_optim o;
	proto_optim_defaults(&o);
	const uint64_t *ids[PROTO_OPT_SLOTS] = {param, grad, momentum_buf, NULL};
	int rc = optim_of(&o, n, ids, err);
	if (rc)
		return rc;
	o.lr = a->lr, o.momentum = a->momentum, o.dampening = a->dampening;
	o.weight_decay = a->weight_decay, o.nesterov = a->nesterov, o.first_step = a->first_step;
	return optim_go(c, PROTO_OP_SGD_STEP, &o, res, handle, wait, err);
}

static int adam(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
		const uint64_t *m, const uint64_t *v, const vkg_adam_args *a, vkg_result *res,
		uint64_t *handle, bool wait, vkg_error *err)
{
	vkg__clear_err(err);
	if (!a)
		return vkg__set_err(err, -EINVAL, "io", "adam_step: no arguments (vkg_adam_args)");
	proto_optim o;
	proto_optim_defaults(&o);
	const uint64_t *ids[PROTO_OPT_SLOTS] = {param, grad, m, v};
	int rc = optim_of(&o, n, ids, err);
	if (rc)
		return rc;
	o.lr = a->lr, o.beta1 = a->beta1, o.beta2 = a->beta2, o.eps = a->eps;
	o.weight_decay = a->weight_decay, o.step = a->step, o.decoupled = a->decoupled;
	o.has_lr = o.has_step = true;
	return optim_go(c, PROTO_OP_ADAM_STEP, &o, res, handle, wait, err);
}

vkg_sgd_args vkg_sgd_args_init(double lr)
{
	vkg_sgd_args a;
	memset(&a, 0, sizeof(a));
	a.lr = lr;
	return a;
}

vkg_adam_args vkg_adam_args_init(double lr, uint64_t step)
{
	vkg_adam_args a;
	memset(&a, 0, sizeof(a));
	a.lr = lr;
	a.step = step;
	a.beta1 = 0.9;
	a.beta2 = 0.999;
	a.eps = 1e-8;
	return a;
}

int vkg_sgd_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
		 const uint64_t *momentum_buf, const vkg_sgd_args *args, vkg_result *res, vkg_error *err)
{
	return sgd(c, n, param, grad, momentum_buf, args, res, NULL, true, err);
}

int vkg_submit_sgd_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
			const uint64_t *momentum_buf, const vkg_sgd_args *args, uint64_t *handle,
			vkg_error *err)
{
	return sgd(c, n, param, grad, momentum_buf, args, NULL, handle, false, err);
}

int vkg_adam_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
		  const uint64_t *m, const uint64_t *v, const vkg_adam_args *args, vkg_result *res,
		  vkg_error *err)
{
	return adam(c, n, param, grad, m, v, args, res, NULL, true, err);
}

int vkg_submit_adam_step(vkg_client *c, size_t n, const uint64_t *param, const uint64_t *grad,
			 const uint64_t *m, const uint64_t *v, const vkg_adam_args *args,
			 uint64_t *handle, vkg_error *err)
{
	return adam(c, n, param, grad, m, v, args, NULL, handle, false, err);
}
