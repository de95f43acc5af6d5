/* proto/job.c — see job.h. */
#include "job.h"

/* Which dimension a slot's rows or cols are. */
enum { DIM_ONE, DIM_BATCH, DIM_IN, DIM_OUT };

/* Each slot's shape and role; a new slot is one more entry here. */
static const struct slot_info {
	uint8_t rows, cols;
	bool output;
} slot_info[PROTO_T_COUNT] = {
	[PROTO_T_X] = {DIM_BATCH, DIM_IN, false},  [PROTO_T_DY] = {DIM_BATCH, DIM_OUT, false},
	[PROTO_T_W] = {DIM_OUT, DIM_IN, false},    [PROTO_T_DW] = {DIM_OUT, DIM_IN, true},
	[PROTO_T_DB] = {DIM_ONE, DIM_OUT, true},   [PROTO_T_DX] = {DIM_BATCH, DIM_IN, true},
	[PROTO_T_B] = {DIM_ONE, DIM_OUT, false},   [PROTO_T_Y] = {DIM_BATCH, DIM_OUT, true},
	[PROTO_T_Z] = {DIM_BATCH, DIM_OUT, true},
};

static uint64_t dim(const proto_request *req, uint8_t d)
{
	return d == DIM_BATCH ? req->batch : d == DIM_IN ? req->in : d == DIM_OUT ? req->out : 1;
}

void proto_slot_shape(const proto_request *req, int t, uint64_t *rows, uint64_t *cols)
{
	*rows = (unsigned)t < PROTO_T_COUNT ? dim(req, slot_info[t].rows) : 0;
	*cols = (unsigned)t < PROTO_T_COUNT ? dim(req, slot_info[t].cols) : 0;
}

bool proto_slot_is_output(proto_op op, int t)
{
	/* y and z: a linear_backward's inputs (its activation's: y for relu,
	 * z for gelu), every other op's outputs (linear_forward's; a tensor
	 * op's destination, daemon/ops/tensor_ops.c) */
	if (t == PROTO_T_Y || t == PROTO_T_Z)
		return op != PROTO_OP_LINEAR_BACKWARD;
	/* an optimizer step's jobs (daemon/ops/optim.c): x the gradient,
	 * read; w the parameter, dw and dx its buffers, updated in place */
	if (op == PROTO_OP_SGD_STEP || op == PROTO_OP_ADAM_STEP)
		return t == PROTO_T_W || t == PROTO_T_DW || t == PROTO_T_DX;
	return (unsigned)t < PROTO_T_COUNT && slot_info[t].output;
}

uint64_t proto_tensor_elems(const proto_request *req, int t)
{
	uint64_t r, c;
	proto_slot_shape(req, t, &r, &c);
	return r * c;
}

void proto_forward_as_input(const proto_request *f, proto_request *b)
{
	*b = *f;
	b->op = PROTO_OP_LINEAR_BACKWARD;
	b->in = f->out;
	b->out = f->in;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		b->t[t] = (proto_tensor){0};
	b->t[PROTO_T_DY] = f->t[PROTO_T_X];
	b->t[PROTO_T_W] = f->t[PROTO_T_W];
	b->t[PROTO_T_DX] = f->t[PROTO_T_Y];
	b->accumulate = f->accumulate || f->t[PROTO_T_B].present;
	b->activation = PROTO_ACT_NONE; /* a pass of its own after the GEMM (dispatch.c) */
}

int proto_job_check(const proto_request *req, const proto_limits *lim,
		    proto_region_size_fn region_size, void *ctx,
		    uint64_t bytes[PROTO_T_COUNT], proto_err *err)
{
	const char *dn[3] = {"batch", "in", "out"};
	const uint64_t dv[3] = {req->batch, req->in, req->out};
	for (int i = 0; i < 3; i++) {
		if (dv[i] == 0)
			return proto_fail(err, PROTO_BAD_REQUEST, "key '%s' must be >= 1", dn[i]);
		if (dv[i] > lim->max_dim)
			return proto_fail(err, PROTO_LIMIT, "key '%s' = %llu exceeds max_dim %llu",
					  dn[i], (unsigned long long)dv[i],
					  (unsigned long long)lim->max_dim);
	}
	const unsigned es = proto_dtype_size(req->dtype);
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		const proto_tensor *tp = &req->t[t];
		bytes[t] = 0;
		if (!tp->present)
			continue;
		const char *key = proto_tensor_key[t];
		uint64_t elems, nb, end, rsize, rows, cols;
		proto_slot_shape(req, t, &rows, &cols);
		if (__builtin_mul_overflow(rows, cols, &elems) ||
		    __builtin_mul_overflow(elems, (uint64_t)es, &nb))
			return proto_fail(err, PROTO_LIMIT,
					  "tensor '%s': size overflows 64 bits for these dims", key);
		if (nb > lim->max_tensor_bytes)
			return proto_fail(err, PROTO_LIMIT,
					  "tensor '%s': %llu bytes exceeds max_tensor_bytes %llu", key,
					  (unsigned long long)nb,
					  (unsigned long long)lim->max_tensor_bytes);
		if (tp->is_tensor) {
			bytes[t] = nb; /* a device tensor: the daemon checks it */
			continue;
		}
		if (region_size(ctx, tp->region, &rsize) != 0)
			return proto_fail(err, PROTO_BAD_REGION,
					  "tensor '%s': region %llu is not registered on this connection",
					  key, (unsigned long long)tp->region);
		if (tp->offset % es)
			return proto_fail(err, PROTO_OUT_OF_BOUNDS,
					  "tensor '%s': byte_offset %llu is not a multiple of the %s element size %u",
					  key, (unsigned long long)tp->offset, proto_dtype_name(req->dtype), es);
		if (__builtin_add_overflow(tp->offset, nb, &end) || end > rsize)
			return proto_fail(err, PROTO_OUT_OF_BOUNDS,
					  "tensor '%s': bytes [%llu, +%llu) do not lie inside region %llu of %llu bytes",
					  key, (unsigned long long)tp->offset, (unsigned long long)nb,
					  (unsigned long long)tp->region, (unsigned long long)rsize);
		bytes[t] = nb;
	}
	for (int a = 0; a < PROTO_T_COUNT; a++) {
		if (!req->t[a].present || !proto_slot_is_output(req->op, a))
			continue;
		for (int b = 0; b < PROTO_T_COUNT; b++) {
			const bool b_out = proto_slot_is_output(req->op, b);
			if (b == a || !req->t[b].present || (b_out && b < a))
				continue;
			const proto_tensor *ta = &req->t[a], *tb = &req->t[b];
			if (ta->is_tensor || tb->is_tensor || ta->region != tb->region)
				continue;
			/* both ends are in-bounds, so no overflow here */
			if (ta->offset < tb->offset + bytes[b] && tb->offset < ta->offset + bytes[a])
				return proto_fail(err, PROTO_OVERLAP,
						  "output '%s' overlaps %s '%s' in region %llu",
						  proto_tensor_key[a], b_out ? "output" : "input",
						  proto_tensor_key[b], (unsigned long long)ta->region);
		}
	}
	return 0;
}
