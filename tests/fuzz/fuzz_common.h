/* tests/fuzz/fuzz_common.h — what both libFuzzer targets check about one
 * request body: proto_request_decode's contract, a re-encode round trip, and
 * proto_job_check against an independent 128-bit oracle over a fake region
 * table. Header-only (static functions) so each target stays one translation
 * unit plus proto/.
 *
 * A broken invariant aborts with a message naming it: libFuzzer reports the
 * abort as a crash and saves the input.
 */
#ifndef VKG_FUZZ_COMMON_H
#define VKG_FUZZ_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "frame.h"
#include "job.h"
#include "msg.h"
#include "text.h"

#define FUZZ_ASSERT(cond)                                                              \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__,     \
				__LINE__, #cond);                                      \
			abort();                                                       \
		}                                                                      \
	} while (0)

#define FUZZ_MAX_REGIONS 4

/* Regions 1..n of the calling connection, as the daemon numbers them. */
typedef struct fuzz_regions {
	unsigned n;
	uint64_t size[FUZZ_MAX_REGIONS];
} fuzz_regions;

static int fuzz_region_size(void *ctx, uint64_t region, uint64_t *size)
{
	const fuzz_regions *rt = ctx;
	if (region < 1 || region > rt->n)
		return -1;
	*size = rt->size[region - 1];
	return 0;
}

/* The daemon's defaults, except max_tensor_bytes kept small (128 MiB) so
 * that the limit itself is reachable by the fuzzer. */
static proto_limits fuzz_limits(void)
{
	return (proto_limits){
		.max_frame = PROTO_MIN_MAX_FRAME,
		.max_regions = 64,
		.max_region_bytes = 4ull << 30,
		.max_inflight = 64,
		.max_dim = 1u << 20,
		.max_tensor_bytes = 1u << 27,
	};
}

/* A message is NUL-terminated and valid UTF-8 whatever the request held
 * (it goes into a reply as is, and into the log). */
static bool fuzz_msg_ok(const proto_err *err)
{
	const char *end = memchr(err->message, 0, sizeof(err->message));
	return end && proto_text_valid(err->message, (size_t)(end - err->message));
}

/* ---- proto_job_check oracle ------------------------------------------------ */

typedef unsigned __int128 fuzz_u128;

/* (a linear_backward's y and z are inputs: its activation's) */
static bool fuzz_is_output(const proto_request *q, int t)
{
	if (t == PROTO_T_Y || t == PROTO_T_Z)
		return q->op == PROTO_OP_LINEAR_FORWARD;
	return t == PROTO_T_DW || t == PROTO_T_DB || t == PROTO_T_DX;
}

/* Bytes of tensor t in 128 bits: the product of two dims (each < 2^64)
 * fits; times the element size it saturates instead of wrapping. */
static fuzz_u128 fuzz_tensor_bytes(const proto_request *q, int t)
{
	const fuzz_u128 es = proto_dtype_size(q->dtype);
	fuzz_u128 elems;
	switch (t) {
	case PROTO_T_X:
	case PROTO_T_DX: elems = (fuzz_u128)q->batch * q->in; break;
	case PROTO_T_DY:
	case PROTO_T_Y:
	case PROTO_T_Z: elems = (fuzz_u128)q->batch * q->out; break;
	case PROTO_T_W:
	case PROTO_T_DW: elems = (fuzz_u128)q->out * q->in; break;
	default: elems = q->out; break; /* db, b */
	}
	return elems > ~(fuzz_u128)0 / es ? ~(fuzz_u128)0 : elems * es;
}

/* Whether the request is valid by the rules of proto/README.md §linear_backward
 * (checks 3–7), computed without proto/job.c. */
static bool fuzz_job_valid(const proto_request *q, const proto_limits *lim,
			   const fuzz_regions *rt)
{
	const uint64_t d[3] = {q->batch, q->in, q->out};
	for (int i = 0; i < 3; i++)
		if (d[i] < 1 || d[i] > lim->max_dim)
			return false;
	const unsigned es = proto_dtype_size(q->dtype);
	fuzz_u128 nb[PROTO_T_COUNT] = {0};
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!q->t[t].present)
			continue;
		uint64_t rsize;
		nb[t] = fuzz_tensor_bytes(q, t);
		if (nb[t] > lim->max_tensor_bytes)
			return false;
		if (q->t[t].is_tensor)
			continue; /* a device tensor: the daemon checks it (tensor_ops.c) */
		if (fuzz_region_size((void *)rt, q->t[t].region, &rsize) != 0)
			return false;
		if (q->t[t].offset % es != 0 || (fuzz_u128)q->t[t].offset + nb[t] > rsize)
			return false;
	}
	for (int a = 0; a < PROTO_T_COUNT; a++) {
		for (int b = 0; b < PROTO_T_COUNT; b++) {
			if (a == b || !q->t[a].present || !q->t[b].present)
				continue;
			if (!fuzz_is_output(q, a) && !fuzz_is_output(q, b))
				continue; /* two inputs may share bytes */
			if (q->t[a].is_tensor || q->t[b].is_tensor)
				continue; /* tensors are no region's bytes */
			if (q->t[a].region != q->t[b].region)
				continue;
			const fuzz_u128 a0 = q->t[a].offset, b0 = q->t[b].offset;
			if (a0 < b0 + nb[b] && b0 < a0 + nb[a])
				return false;
		}
	}
	return true;
}

static void fuzz_job_check_with(const proto_request *q, const fuzz_regions *rt,
				const proto_limits *lim)
{
	uint64_t bytes[PROTO_T_COUNT];
	proto_err err;
	memset(bytes, 0xa5, sizeof(bytes));
	const int rc = proto_job_check(q, lim, fuzz_region_size, (void *)rt, bytes, &err);
	FUZZ_ASSERT((rc == 0) == fuzz_job_valid(q, lim, rt));
	if (rc != 0) {
		FUZZ_ASSERT(rc == -(int)err.code);
		FUZZ_ASSERT(err.code == PROTO_BAD_REQUEST || err.code == PROTO_LIMIT ||
			    err.code == PROTO_BAD_REGION || err.code == PROTO_OUT_OF_BOUNDS ||
			    err.code == PROTO_OVERLAP);
		FUZZ_ASSERT(fuzz_msg_ok(&err));
		return;
	}
	const uint64_t es = proto_dtype_size(q->dtype);
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!q->t[t].present) {
			FUZZ_ASSERT(bytes[t] == 0);
			continue;
		}
		FUZZ_ASSERT((fuzz_u128)bytes[t] == fuzz_tensor_bytes(q, t));
		FUZZ_ASSERT(proto_tensor_elems(q, t) * es == bytes[t]);
	}
}

/* With the daemon's limits, and with none (max_dim and max_tensor_bytes at
 * 2^64 - 1), where only the 64-bit overflow checks stand between huge dims
 * and a wrapped size. */
static void fuzz_job_check(const proto_request *q, const fuzz_regions *rt)
{
	proto_limits lim = fuzz_limits();
	fuzz_job_check_with(q, rt, &lim);
	lim.max_dim = UINT64_MAX;
	lim.max_tensor_bytes = UINT64_MAX;
	fuzz_job_check_with(q, rt, &lim);
}

/* ---- request decode + round trip ---------------------------------------- */

static bool fuzz_request_equal(const proto_request *a, const proto_request *b)
{
	if (a->op != b->op || a->id != b->id)
		return false;
	switch (a->op) {
	case PROTO_OP_HELLO:
		return a->version == b->version && strcmp(a->client, b->client) == 0;
	case PROTO_OP_REGISTER:
		return a->size == b->size;
	case PROTO_OP_UNREGISTER:
		return a->region == b->region;
	case PROTO_OP_LINEAR_BACKWARD:
	case PROTO_OP_LINEAR_FORWARD:
		if (a->dtype != b->dtype || a->batch != b->batch || a->in != b->in ||
		    a->out != b->out || a->accumulate != b->accumulate)
			return false;
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			if (a->t[t].present != b->t[t].present)
				return false;
			if (a->t[t].present && (a->t[t].region != b->t[t].region ||
						a->t[t].offset != b->t[t].offset ||
						a->t[t].is_tensor != b->t[t].is_tensor ||
						a->t[t].tensor != b->t[t].tensor))
				return false;
		}
		return true;
	case PROTO_OP_TENSOR_NEW:
		return a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols;
	case PROTO_OP_TENSOR_WRITE:
	case PROTO_OP_TENSOR_READ:
		return a->tensor == b->tensor && a->io.region == b->io.region &&
		       a->io.offset == b->io.offset;
	case PROTO_OP_TENSOR_FREE:
		return a->tensor == b->tensor;
	default:
		return true;
	}
}

/* proto_request_encode's frame must carry its own length and decode back to
 * the same request; encoding that again must give the same bytes. */
static void fuzz_roundtrip(const proto_request *q)
{
	msgpack_sbuffer sb1, sb2;
	msgpack_sbuffer_init(&sb1);
	msgpack_sbuffer_init(&sb2);
	FUZZ_ASSERT(proto_request_encode(&sb1, q) == 0);
	FUZZ_ASSERT(sb1.size > PROTO_FRAME_HDR);
	const uint8_t *p = (const uint8_t *)sb1.data;
	const uint32_t n = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	FUZZ_ASSERT(n == sb1.size - PROTO_FRAME_HDR);
	proto_request q2;
	proto_err err;
	uint64_t id2;
	const int rc = proto_request_decode(p + PROTO_FRAME_HDR, n, &q2, &id2, &err);
	if (rc != 0)
		fprintf(stderr, "re-decode failed: %s\n", err.message);
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(id2 == q->id);
	FUZZ_ASSERT(fuzz_request_equal(q, &q2));
	FUZZ_ASSERT(proto_request_encode(&sb2, &q2) == 0);
	FUZZ_ASSERT(sb2.size == sb1.size && memcmp(sb1.data, sb2.data, sb1.size) == 0);
	msgpack_sbuffer_destroy(&sb1);
	msgpack_sbuffer_destroy(&sb2);
}

/* Decode one request body as the daemon does and check everything above.
 * Returns the proto_err code (PROTO_OK on success); PROTO_BAD_FRAME is the
 * one after which the daemon closes the connection. */
static proto_code fuzz_request(const uint8_t *body, size_t len, const fuzz_regions *rt)
{
	proto_request q;
	proto_err err;
	uint64_t id = 0xdeadbeef;
	err.code = PROTO_OK;
	const int rc = proto_request_decode(body, len, &q, &id, &err);
	if (rc != 0) {
		FUZZ_ASSERT(rc == -(int)err.code);
		FUZZ_ASSERT(err.code == PROTO_BAD_FRAME || err.code == PROTO_BAD_REQUEST ||
			    err.code == PROTO_UNKNOWN_OP || err.code == PROTO_UNSUPPORTED);
		FUZZ_ASSERT(fuzz_msg_ok(&err));
		/* the error reply goes to id 0 exactly when the frame is unusable */
		FUZZ_ASSERT(err.code == PROTO_BAD_FRAME ? id == 0 : id == q.id);
		return err.code;
	}
	FUZZ_ASSERT(id == q.id);
	FUZZ_ASSERT((unsigned)q.op < PROTO_OP_COUNT);
	switch (q.op) {
	case PROTO_OP_HELLO:
		FUZZ_ASSERT(q.version == PROTO_VERSION);
		FUZZ_ASSERT(memchr(q.client, 0, sizeof(q.client)) != NULL);
		break;
	case PROTO_OP_REGISTER:
		FUZZ_ASSERT(q.size >= 1);
		break;
	case PROTO_OP_LINEAR_BACKWARD:
		FUZZ_ASSERT((unsigned)q.dtype < PROTO_DTYPE_COUNT);
		FUZZ_ASSERT(q.t[PROTO_T_X].present && q.t[PROTO_T_DY].present);
		FUZZ_ASSERT(q.t[PROTO_T_DW].present || q.t[PROTO_T_DB].present ||
			    q.t[PROTO_T_DX].present);
		FUZZ_ASSERT(!q.t[PROTO_T_DX].present || q.t[PROTO_T_W].present);
		FUZZ_ASSERT(!q.t[PROTO_T_B].present);
		/* y only for relu, z only for gelu, each then present */
		FUZZ_ASSERT(q.t[PROTO_T_Y].present == (q.activation == PROTO_ACT_RELU));
		FUZZ_ASSERT(q.t[PROTO_T_Z].present == (q.activation == PROTO_ACT_GELU));
		/* (a backward may accumulate with an activation) */
		break;
	case PROTO_OP_LINEAR_FORWARD:
		FUZZ_ASSERT((unsigned)q.dtype < PROTO_DTYPE_COUNT);
		FUZZ_ASSERT(q.t[PROTO_T_X].present && q.t[PROTO_T_W].present && q.t[PROTO_T_Y].present);
		FUZZ_ASSERT(!q.t[PROTO_T_DY].present && !q.t[PROTO_T_DW].present &&
			    !q.t[PROTO_T_DB].present && !q.t[PROTO_T_DX].present);
		FUZZ_ASSERT(q.activation == PROTO_ACT_NONE || !q.accumulate);
		break;
	default:
		break;
	}
	fuzz_roundtrip(&q);
	if (q.op == PROTO_OP_LINEAR_BACKWARD || q.op == PROTO_OP_LINEAR_FORWARD)
		fuzz_job_check(&q, rt);
	return PROTO_OK;
}

#endif
