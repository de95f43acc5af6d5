/* proto/optim.h — the optimizer steps on device tensors (additions,
 * proto/README.md "Optimizer steps"): sgd_step and adam_step, as
 * torch.optim.SGD, Adam and AdamW step them, f32 math, many
 * parameter/gradient pairs per request. The request's keys (decoded into
 * a proto_optim that proto_request.optim points to), their checks, the
 * encoding, and the float64 reference the tests compare with. No I/O. */
#ifndef VKG_PROTO_OPTIM_H
#define VKG_PROTO_OPTIM_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

/* Pairs (param, grad, and their buffers) in one request: 1 ..
 * PROTO_OPTIM_MAX_N (`limit` past it). */
#define PROTO_OPTIM_MAX_N 256

/* The tensor-id keys of a step, in this order: param, grad, then the
 * buffers (sgd_step: momentum_buf; adam_step: m, v). */
enum { PROTO_OPT_PARAM, PROTO_OPT_GRAD, PROTO_OPT_BUF1, PROTO_OPT_BUF2, PROTO_OPT_SLOTS };

typedef struct proto_optim {
	/* ids[k][0 .. n-1]: the tensors of key k (has[k]: the key was given) */
	uint32_t n;
	bool has[PROTO_OPT_SLOTS];
	const uint64_t *ids[PROTO_OPT_SLOTS];
	/* hyperparameters (torch's names; the defaults torch's) */
	double lr, momentum, dampening, weight_decay; /* sgd_step (weight_decay: both) */
	bool nesterov, first_step;                    /* sgd_step */
	double beta1, beta2, eps;                     /* adam_step */
	uint64_t step;                                /* adam_step: the count after this step, >= 1 */
	bool decoupled;                               /* adam_step: AdamW */
	bool has_lr, has_step;
} proto_optim;

/* The wire key of slot k of op (PROTO_OPT_BUF1 is sgd_step's
 * "momentum_buf", adam_step's "m"; BUF2 adam_step's "v"; NULL: none). */
const char *proto_optim_key(proto_op op, int k);

/* Defaults into o (torch's: momentum 0, dampening 0, weight_decay 0,
 * betas 0.9 and 0.999, eps 1e-8). */
void proto_optim_defaults(proto_optim *o);

/* One key of a sgd_step / adam_step map into o (the decoder's, valid until
 * the next request decoded on this thread); unknown keys are ignored.
 * 0, or a negative code with err (bad_request naming the key, limit for
 * more than PROTO_OPTIM_MAX_N ids). */
int proto_optim_field(proto_op op, proto_optim *o, const char *key, uint32_t klen,
		      const msgpack_object *v, proto_err *err);

/* Once every key is in: the required keys present, every array of one
 * length n, the values in torch's ranges (lr, momentum, dampening,
 * weight_decay, eps >= 0 and finite; betas in [0, 1); nesterov needs
 * momentum > 0 and dampening 0; momentum > 0 needs momentum_buf; step >=
 * 1). 0, or a negative code with err. */
int proto_optim_check(proto_op op, proto_optim *o, proto_err *err);

/* The decoder's proto_optim for this thread (proto_request_decode points
 * req->optim at it). */
proto_optim *proto_optim_scratch(void);

/* Pack o's keys (after op and id) into pk; how many keys that is. */
unsigned proto_optim_count(proto_op op, const proto_optim *o);
void proto_optim_pack(msgpack_packer *pk, proto_op op, const proto_optim *o);

/* ---- the step in float64 (the tests' reference) ----------------------------
 * One element: p, g and the buffers updated in place as torch.optim does
 * (SGD: weight decay, momentum buffer (first_step: buf = g), dampening,
 * nesterov; Adam/AdamW: bias corrections of `step`). */
void proto_optim_ref_sgd(const proto_optim *o, double *p, double g, double *buf);
void proto_optim_ref_adam(const proto_optim *o, double *p, double g, double *m, double *v);

#endif
