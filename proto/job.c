/* proto/job.c — see job.h. */
#include "job.h"

static bool is_output(int t)
{
	return t == PROTO_T_DW || t == PROTO_T_DB || t == PROTO_T_DX || t == PROTO_T_Y;
}

uint64_t proto_tensor_elems(const proto_request *req, int t)
{
	switch (t) {
	case PROTO_T_X:
	case PROTO_T_DX: return req->batch * req->in;
	case PROTO_T_DY:
	case PROTO_T_Y: return req->batch * req->out;
	case PROTO_T_B: return req->out;
	case PROTO_T_W:
	case PROTO_T_DW: return req->out * req->in;
	case PROTO_T_DB: return req->out;
	default: return 0;
	}
}

static uint64_t dim_a(const proto_request *req, int t)
{
	return (t == PROTO_T_W || t == PROTO_T_DW || t == PROTO_T_DB || t == PROTO_T_B) ? req->out
											  : req->batch;
}

static uint64_t dim_b(const proto_request *req, int t)
{
	return t == PROTO_T_DY || t == PROTO_T_Y ? req->out
	       : t == PROTO_T_DB || t == PROTO_T_B ? 1
						   : req->in;
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
		/* batch is bounded by the byte limits alone (X and dY are
		 * batch rows each, both within max_tensor_bytes); max_dim bounds
		 * the features, in and out */
		if (i > 0 && dv[i] > lim->max_dim)
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
		uint64_t elems, nb, end, rsize;
		if (__builtin_mul_overflow(dim_a(req, t), dim_b(req, t), &elems) ||
		    __builtin_mul_overflow(elems, (uint64_t)es, &nb))
			return proto_fail(err, PROTO_LIMIT,
					  "tensor '%s': size overflows 64 bits for these dims", key);
		if (nb > lim->max_tensor_bytes)
			return proto_fail(err, PROTO_LIMIT,
					  "tensor '%s': %llu bytes exceeds max_tensor_bytes %llu", key,
					  (unsigned long long)nb,
					  (unsigned long long)lim->max_tensor_bytes);
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
		if (!req->t[a].present || !is_output(a))
			continue;
		for (int b = 0; b < PROTO_T_COUNT; b++) {
			if (b == a || !req->t[b].present || (is_output(b) && b < a))
				continue;
			const proto_tensor *ta = &req->t[a], *tb = &req->t[b];
			if (ta->region != tb->region)
				continue;
			/* both ends are in-bounds, so no overflow here */
			if (ta->offset < tb->offset + bytes[b] && tb->offset < ta->offset + bytes[a])
				return proto_fail(err, PROTO_OVERLAP,
						  "output '%s' overlaps %s '%s' in region %llu",
						  proto_tensor_key[a], is_output(b) ? "output" : "input",
						  proto_tensor_key[b], (unsigned long long)ta->region);
		}
	}
	return 0;
}
