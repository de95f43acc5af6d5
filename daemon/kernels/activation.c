/* daemon/kernels/activation.c — the fused activations (proto/README.md,
 * `activation`): linear_activation's pass (shaders/linear_activation.comp)
 * beside the GEMMs. A linear_forward's y = act(z) runs over Y once its GEMM
 * wrote z there (bias included), z copied to the z slot first when asked
 * for; a linear_backward's dZ = dY ⊙ act'(y or z) goes into the job's dZ
 * area in the slot's scratch (placement.c, j->dz_off), which its dW, db and
 * dX kernels then read in dY's place. One pass of its own, not an epilogue
 * in each of the GEMM families: docs/kernels.md says why. */
#include "record_priv.h"

#include <assert.h>

static uint32_t act_code(proto_activation a)
{
	return a == PROTO_ACT_RELU ? VKG_ACT_RELU : a == PROTO_ACT_GELU ? VKG_ACT_GELU : 0u;
}

static void act_dispatch(const rec *r, const binding b[VKG_BINDINGS_ACT], kiface_act *pc)
{
	dispatch_kernel(r, KERN_ACT, b, VKG_BINDINGS_ACT);
	dispatch_grid(r, KERN_ACT, pc, sizeof(*pc), &pc->base, VKG_ACT_WG,
		      (pc->n + VKG_ACT_WG - 1) / VKG_ACT_WG, VKG_ACT_WG);
}

void activation_forward(const rec *r)
{
	const proto_request *q = &r->j->req;
	const bool z = q->t[PROTO_T_Z].present;
	const binding b[VKG_BINDINGS_ACT] = {
		dispatch_bind(r, PROTO_T_Y),
		z ? dispatch_bind(r, PROTO_T_Z) : dispatch_bind_dummy(r, 0),
		dispatch_bind_dummy(r, 1),
	};
	kiface_act pc = {.n = (uint32_t)(q->batch * q->out), .a_off = b[0].elem_off,
			 .b_off = b[1].elem_off, .c_off = 0, .act = act_code(q->activation),
			 .flags = VKG_FLAG_ACT_FORWARD | (z ? VKG_FLAG_WRITE_C : 0u)};
	act_dispatch(r, b, &pc);
}

void activation_view(const job *j, job *view)
{
	*view = *j;
	view->reg[PROTO_T_DY] = NULL;
	view->soff[PROTO_T_DY] = j->dz_off;
	view->req.activation = PROTO_ACT_NONE;
	for (int t = PROTO_T_Y; t <= PROTO_T_Z; t++) {
		view->req.t[t] = (proto_tensor){0};
		view->reg[t] = NULL;
		view->bytes[t] = 0;
	}
}

void activation_backward(const rec *r)
{
	const job *j = r->j;
	const proto_request *q = &j->req;
	const int src = q->activation == PROTO_ACT_RELU ? PROTO_T_Y : PROTO_T_Z;
	assert(q->activation != PROTO_ACT_NONE && q->t[src].present);
	job dz;
	activation_view(j, &dz);
	rec zr = *r;
	zr.j = &dz;
	const binding b[VKG_BINDINGS_ACT] = {
		dispatch_bind(r, PROTO_T_DY),
		dispatch_bind(r, src),
		dispatch_bind(&zr, PROTO_T_DY),
	};
	kiface_act pc = {.n = (uint32_t)(q->batch * q->out), .a_off = b[0].elem_off,
			 .b_off = b[1].elem_off, .c_off = b[2].elem_off, .act = act_code(q->activation),
			 .flags = 0};
	act_dispatch(r, b, &pc);
}
