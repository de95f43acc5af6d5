/* daemon/kernels/optim_step.c — an optimizer step's job (sgd_step,
 * adam_step: daemon/ops/optim_ops.c makes one job per parameter) as
 * optim_step's dispatches (shaders/optim_step.comp): its tensors bound
 * whole, as 32-bit words, each with its own dtype; the hyperparameters,
 * and Adam's bias corrections of `step` computed here in double, as f32
 * push constants. */
#include "record_priv.h"

#include "optim.h"
#include "tensor.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static uint32_t f32_bits(double v)
{
	const float f = (float)v;
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static uint32_t opt_dtype(const region *r)
{
	tensor *t = tensor_of((region *)r);
	const proto_dtype d = t ? t->dtype : PROTO_F32;
	return d == PROTO_F16 ? VKG_OPT_F16 : d == PROTO_BF16 ? VKG_OPT_BF16 : VKG_OPT_F32;
}

void dispatch_optim(const rec *r)
{
	const job *j = r->j;
	const proto_optim *o = j->req.optim;
	assert(o && j->reg[PROTO_T_W] && j->reg[PROTO_T_X]);
	/* slots: param, grad, buffer 1, buffer 2 (engine_job.h job_is_optim) */
	const int slot[VKG_BINDINGS_OPTIM] = {PROTO_T_W, PROTO_T_X, PROTO_T_DW, PROTO_T_DX};
	binding b[VKG_BINDINGS_OPTIM];
	uint32_t dtypes = 0;
	for (int k = 0; k < VKG_BINDINGS_OPTIM; k++) {
		const region *g = j->reg[slot[k]];
		if (!g) {
			b[k] = dispatch_bind_dummy(r, (uint64_t)(k - 2));
			continue;
		}
		/* the whole buffer: whole words, a 16-bit tensor's last one too */
		b[k] = (binding){.info = {.buffer = g->buf, .offset = 0, .range = VK_WHOLE_SIZE}};
		dtypes |= opt_dtype(g) << (2 * k);
	}
	const bool sgd = j->req.op == PROTO_OP_SGD_STEP;
	const uint64_t n = j->req.rows * j->req.cols;
	kiface_optim pc = {
		.n = (uint32_t)n,
		.kind = sgd ? VKG_OPT_SGD : VKG_OPT_ADAM,
		.dtypes = dtypes,
		.lr = f32_bits(o->lr),
		.wd = f32_bits(o->weight_decay),
	};
	if (sgd) {
		pc.c1 = f32_bits(o->momentum);
		pc.c2 = f32_bits(o->dampening);
		pc.flags = (o->momentum != 0 ? VKG_OPT_MOMENTUM : 0u) | (o->nesterov ? VKG_OPT_NESTEROV : 0u) |
			   (o->first_step ? VKG_OPT_FIRST : 0u);
	} else {
		const double bc1 = 1 - pow(o->beta1, (double)o->step), bc2 = 1 - pow(o->beta2, (double)o->step);
		pc.c1 = f32_bits(o->beta1);
		pc.c2 = f32_bits(o->beta2);
		pc.eps = f32_bits(o->eps);
		pc.step_size = f32_bits(o->lr / bc1);
		pc.inv_sqrt_bc2 = f32_bits(1 / sqrt(bc2));
		pc.flags = o->decoupled ? VKG_OPT_DECOUPLED : 0u;
	}
	dispatch_kernel(r, KERN_OPTIM, b, VKG_BINDINGS_OPTIM);
	const uint64_t pairs = (n + 1) / 2;
	dispatch_grid(r, KERN_OPTIM, &pc, sizeof(pc), &pc.base, VKG_OPTIM_WG,
		      (pairs + VKG_OPTIM_WG - 1) / VKG_OPTIM_WG, VKG_OPTIM_WG);
}
