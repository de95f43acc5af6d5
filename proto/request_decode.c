/* proto/request_decode.c — a request from its bytes (the daemon side of
 * msg.h: proto_request_decode and its decoder). */
#include "msg.h"

#include "frame.h"
#include "mpcheck.h"
#include "mpobj.h"
#include "optim.h"
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- decoding helpers --------------------------------------------------- */

static int get_uint(const msgpack_object *v, const char *key, uint64_t *out, proto_err *err)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*out = v->via.u64;
		return 0;
	}
	if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return proto_fail(err, PROTO_BAD_REQUEST, "key '%s' must be >= 0 (got %lld)", key,
				  (long long)v->via.i64);
	return proto_fail(err, PROTO_BAD_REQUEST, "key '%s' must be an unsigned integer", key);
}

static int get_str(const msgpack_object *v, const char *key, char *out, size_t cap,
		   proto_err *err)
{
	if (v->type != MSGPACK_OBJECT_STR)
		return proto_fail(err, PROTO_BAD_REQUEST, "key '%s' must be a string", key);
	if (v->via.str.size >= cap)
		return proto_fail(err, PROTO_BAD_REQUEST, "key '%s' is longer than %zu bytes", key,
				  cap - 1);
	if (memchr(v->via.str.ptr, 0, v->via.str.size))
		return proto_fail(err, PROTO_BAD_REQUEST, "key '%s' must not contain NUL bytes", key);
	memcpy(out, v->via.str.ptr, v->via.str.size);
	out[v->via.str.size] = 0;
	return 0;
}

/* A job operand: [region, byte_offset], or (allow_tensor) {"tensor": T}. */
static int get_tensor(const msgpack_object *v, const char *key, proto_tensor *t, bool allow_tensor,
		      proto_err *err)
{
	/* a key given twice: the last value alone counts, whatever its form */
	*t = (proto_tensor){0};
	if (allow_tensor && v->type == MSGPACK_OBJECT_MAP) {
		const msgpack_object_map *m = &v->via.map;
		if (m->size != 1 || m->ptr[0].key.type != MSGPACK_OBJECT_STR ||
		    m->ptr[0].key.via.str.size != 6 || memcmp(m->ptr[0].key.via.str.ptr, "tensor", 6) != 0)
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "key '%s' must be [region, byte_offset] or {\"tensor\": id}", key);
		char sub[32];
		snprintf(sub, sizeof(sub), "%s.tensor", key);
		int rc = get_uint(&m->ptr[0].val, sub, &t->tensor, err);
		if (rc)
			return rc;
		t->is_tensor = true;
		t->present = true;
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size != 2)
		return proto_fail(err, PROTO_BAD_REQUEST,
				  allow_tensor ? "key '%s' must be a two-element array [region, byte_offset] "
						 "or {\"tensor\": id}"
					       : "key '%s' must be a two-element array [region, byte_offset]",
				  key);
	static const char *const part[2] = {"[0] (region)", "[1] (byte_offset)"};
	uint64_t *dst[2] = {&t->region, &t->offset};
	for (int i = 0; i < 2; i++) {
		const msgpack_object *e = &v->via.array.ptr[i];
		if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
			*dst[i] = e->via.u64; /* the common case: no name to format */
			continue;
		}
		char sub[32];
		snprintf(sub, sizeof(sub), "%s%s", key, part[i]);
		return get_uint(e, sub, dst[i], err);
	}
	t->present = true;
	return 0;
}

static bool str_is(const msgpack_object *o, const char *s)
{
	size_t n = strlen(s);
	return o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

/* A client's string for an error message: escaped, at most `chars`
 * characters (proto/text.h). */
static const char *echo(const msgpack_object *o, char *buf, size_t cap, size_t chars)
{
	proto_text_escape(buf, cap, o->via.str.ptr, o->via.str.size, chars, 0);
	return buf;
}

/* linear_backward's dtype (a string) and variant (a string or NULL). An
 * unknown dtype is a valid request that vkgradd cannot serve
 * (`unsupported`, PROTOCOL.md); an unknown variant is bad_request, naming
 * the variants of that dtype. */
static int decode_dtype_variant(const msgpack_object *dtype, const msgpack_object *variant,
				proto_request *req, proto_err *err)
{
	const char *opn = proto_op_name(req->op);
	char got[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_ECHO_NAME)];
	int d = -1;
	for (int i = 0; i < PROTO_DTYPE_COUNT; i++)
		if (str_is(dtype, proto_dtype_name((proto_dtype)i)))
			d = i;
	if (d < 0)
		return proto_fail(err, PROTO_UNSUPPORTED,
				  "%s: dtype '%s' is not served here (vkgradd serves "
				  "f32, f16, bf16; hello lists the kernels of each dtype this device runs)",
				  opn, echo(dtype, got, sizeof(got), PROTO_TEXT_ECHO_NAME));
	req->dtype = (proto_dtype)d;
	if (!variant)
		return 0;
	/* a known name that does not fit the dtype (coopmat with f32) is
	 * the daemon's to refuse: `unsupported`, saying what it needs */
	for (int i = 0; i < PROTO_VARIANT_COUNT; i++)
		if (str_is(variant, proto_variant_name((proto_variant)i))) {
			req->variant = (proto_variant)i;
			return 0;
		}
	char names[160], others[128] = "";
	proto_variant_list(names, sizeof(names), d, NULL, NULL);
	/* the known names that do not fit d, with what they need: for f32
	 * " (coopmat is f16 only; coopmat_khr, coopmat_khr_splitk, coopmat_nv2
	 * are f16 and bf16 only)", for f16 " (coopmat_khr_f32x3,
	 * coopmat_khr_f32_splitk are f32 only)", for bf16 " (coopmat is f16
	 * only; coopmat_khr_f32x3, coopmat_khr_f32_splitk are f32 only)" */
	const char *sep = " (";
	if (!proto_variant_fits(PROTO_VARIANT_COOPMAT, req->dtype)) {
		snprintf(others, sizeof(others), " (coopmat is f16 only");
		sep = "; ";
	}
	if (!proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR, req->dtype))
		snprintf(others + strlen(others), sizeof(others) - strlen(others),
			 "%scoopmat_khr, coopmat_khr_splitk, coopmat_nv2 are f16 and bf16 only", sep);
	else if (!proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32X3, req->dtype))
		snprintf(others + strlen(others), sizeof(others) - strlen(others),
			 "%scoopmat_khr_f32x3, coopmat_khr_f32_splitk are f32 only", sep);
	if (others[0])
		snprintf(others + strlen(others), sizeof(others) - strlen(others), ")");
	req->variant_unknown = true;
	return proto_fail(err, PROTO_BAD_REQUEST,
			  "%s: key 'variant' = '%s' is not one of %s for dtype %s%s", opn,
			  echo(variant, got, sizeof(got), PROTO_TEXT_ECHO_NAME), names,
			  proto_dtype_name((proto_dtype)d), others);
}

/* Is tensor slot t one of op's keys? (linear_backward: x, dy, w, dw, db,
 * dx, and y, z, which only an activation reads (decode_fields clears the
 * one it does not); linear_forward: x, w, b, y, z) */
static bool op_has_tensor(proto_op op, int t)
{
	if (op == PROTO_OP_LINEAR_FORWARD)
		return t == PROTO_T_X || t == PROTO_T_W || t == PROTO_T_B || t == PROTO_T_Y ||
		       t == PROTO_T_Z;
	return t != PROTO_T_B;
}

/* Key `activation` (a string, nil: absent) into req. */
static int get_activation(const msgpack_object *v, proto_request *req, proto_err *err)
{
	const char *opn = proto_op_name(req->op);
	if (v->type == MSGPACK_OBJECT_NIL)
		return 0;
	if (v->type != MSGPACK_OBJECT_STR)
		return proto_fail(err, PROTO_BAD_REQUEST, "%s: key 'activation' must be a string", opn);
	const int a = proto_activation_parse(v->via.str.ptr, v->via.str.size);
	if (a < 0) {
		char got[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_ECHO_NAME)];
		return proto_fail(err, PROTO_BAD_REQUEST,
				  "%s: key 'activation' = '%s' is not one of none, relu, gelu", opn,
				  echo(v, got, sizeof(got), PROTO_TEXT_ECHO_NAME));
	}
	req->activation = (proto_activation)a;
	return 0;
}

/* The activation's own checks, once every key is in: no accumulation
 * with one in a forward; a backward's relu needs y, its gelu z (the other of the two
 * is an unknown key, ignored, as both are without an activation: so is a
 * malformed one, yz_err[0] for y and [1] for z when yz_bad has bit 1 or
 * 2, which only counts where the activation reads it). */
static int check_activation(proto_request *req, unsigned yz_bad, const proto_err yz_err[2],
			    proto_err *err)
{
	const char *opn = proto_op_name(req->op);
	/* a forward's y = act(z) cannot add to y; a backward's dZ feeds
	 * GEMMs that add to dW, db and dX like any others */
	if (req->op == PROTO_OP_LINEAR_FORWARD && req->activation != PROTO_ACT_NONE && req->accumulate)
		return proto_fail(err, PROTO_BAD_REQUEST,
				  "%s: key 'activation' = '%s' cannot go with 'accumulate': true", opn,
				  proto_activation_name(req->activation));
	if (req->op != PROTO_OP_LINEAR_BACKWARD)
		return 0;
	const int need = req->activation == PROTO_ACT_RELU ? PROTO_T_Y
			 : req->activation == PROTO_ACT_GELU ? PROTO_T_Z
							     : -1;
	for (int t = PROTO_T_Y; t <= PROTO_T_Z; t++)
		if (t != need)
			req->t[t] = (proto_tensor){0};
	if (need >= 0 && (yz_bad & (1u << (need - PROTO_T_Y)))) {
		*err = yz_err[need - PROTO_T_Y];
		return -(int)err->code;
	}
	if (need >= 0 && !req->t[need].present)
		return proto_fail(err, PROTO_BAD_REQUEST,
				  "linear_backward: key '%s' is missing (activation '%s' reads %s)",
				  proto_tensor_key[need], proto_activation_name(req->activation),
				  need == PROTO_T_Y ? "the forward's output y" : "the pre-activation z");
	return 0;
}

/* The request keys decode knows, found with one comparison each. */
typedef enum req_key {
	K_OTHER, K_OP, K_ID, K_VERSION, K_CLIENT, K_SIZE, K_REGION, K_DTYPE, K_BATCH, K_IN,
	K_OUT, K_VARIANT, K_ACCUMULATE, K_MONITOR, K_ROWS, K_COLS, K_TENSOR_ID, K_SRC, K_DST,
	K_ACTIVATION, K_TENSOR /* + PROTO_T_* */
} req_key;

#define KEY_EQ(c, lit) (memcmp((c), (lit), sizeof(lit) - 1) == 0)

static int key_id(const msgpack_object *k)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return K_OTHER;
	const char *c = k->via.str.ptr;
	switch (k->via.str.size) {
	case 1:
		return c[0] == 'x'   ? K_TENSOR + PROTO_T_X
		       : c[0] == 'w' ? K_TENSOR + PROTO_T_W
		       : c[0] == 'b' ? K_TENSOR + PROTO_T_B
		       : c[0] == 'y' ? K_TENSOR + PROTO_T_Y
		       : c[0] == 'z' ? K_TENSOR + PROTO_T_Z
				     : K_OTHER;
	case 2:
		if (c[0] == 'd')
			return c[1] == 'y'   ? K_TENSOR + PROTO_T_DY
			       : c[1] == 'w' ? K_TENSOR + PROTO_T_DW
			       : c[1] == 'b' ? K_TENSOR + PROTO_T_DB
			       : c[1] == 'x' ? K_TENSOR + PROTO_T_DX
					     : K_OTHER;
		return KEY_EQ(c, "op") ? K_OP : KEY_EQ(c, "id") ? K_ID : KEY_EQ(c, "in") ? K_IN : K_OTHER;
	case 3:
		return KEY_EQ(c, "out")   ? K_OUT
		       : KEY_EQ(c, "src") ? K_SRC
		       : KEY_EQ(c, "dst") ? K_DST
					  : K_OTHER;
	case 4:
		return KEY_EQ(c, "size")   ? K_SIZE
		       : KEY_EQ(c, "rows") ? K_ROWS
		       : KEY_EQ(c, "cols") ? K_COLS
					   : K_OTHER;
	case 5: return KEY_EQ(c, "dtype") ? K_DTYPE : KEY_EQ(c, "batch") ? K_BATCH : K_OTHER;
	case 6:
		return KEY_EQ(c, "client")   ? K_CLIENT
		       : KEY_EQ(c, "region") ? K_REGION
		       : KEY_EQ(c, "tensor") ? K_TENSOR_ID
					     : K_OTHER;
	case 7:
		return KEY_EQ(c, "version")   ? K_VERSION
		       : KEY_EQ(c, "variant") ? K_VARIANT
		       : KEY_EQ(c, "monitor") ? K_MONITOR
					      : K_OTHER;
	case 10:
		return KEY_EQ(c, "accumulate")	 ? K_ACCUMULATE
		       : KEY_EQ(c, "activation") ? K_ACTIVATION
						 : K_OTHER;
	default: return K_OTHER;
	}
}

/* Decode the op-specific keys; the map has already yielded op and id. */
/* ids: key_id of the first KEY_IDS keys (decode_map found them). */
#define KEY_IDS 32
static int decode_fields(const msgpack_object_map *m, const uint8_t ids[KEY_IDS],
			 proto_request *req, proto_err *err)
{
	bool have_version = false, have_size = false, have_region = false;
	bool have_batch = false, have_in = false, have_out = false;
	bool have_rows = false, have_cols = false, have_tensor = false;
	const msgpack_object *dtype = NULL, *variant = NULL; /* strings */
	unsigned yz_bad = 0; /* a backward's malformed y (1), z (2): check_activation */
	proto_err yz_err[2];
	int rc = 0;
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *v = &m->ptr[i].val;
		const int k = i < KEY_IDS ? ids[i] : key_id(&m->ptr[i].key);
		if (k == K_OP || k == K_ID)
			continue;
		switch (req->op) {
		case PROTO_OP_HELLO:
			if (k == K_VERSION)
				rc = get_uint(v, "version", &req->version, err), have_version = true;
			else if (k == K_CLIENT)
				rc = get_str(v, "client", req->client, sizeof(req->client), err);
			else if (k == K_MONITOR && v->type == MSGPACK_OBJECT_BOOLEAN)
				req->monitor = v->via.boolean;
			else if (k == K_MONITOR && v->type != MSGPACK_OBJECT_NIL)
				rc = proto_fail(err, PROTO_BAD_REQUEST, "hello: key 'monitor' must be a boolean");
			break;
		case PROTO_OP_REGISTER:
			if (k == K_SIZE)
				rc = get_uint(v, "size", &req->size, err), have_size = true;
			break;
		case PROTO_OP_UNREGISTER:
			if (k == K_REGION)
				rc = get_uint(v, "region", &req->region, err), have_region = true;
			break;
		case PROTO_OP_LINEAR_BACKWARD:
		case PROTO_OP_LINEAR_FORWARD:
			if (k == K_DTYPE) {
				/* any string is a dtype: one not served is
				 * `unsupported` below, once the keys are in */
				if (v->type == MSGPACK_OBJECT_STR)
					dtype = v;
				else
					rc = proto_fail(err, PROTO_BAD_REQUEST,
							"key 'dtype' must be a string");
			} else if (k == K_BATCH) {
				rc = get_uint(v, "batch", &req->batch, err), have_batch = true;
			} else if (k == K_IN) {
				rc = get_uint(v, "in", &req->in, err), have_in = true;
			} else if (k == K_OUT) {
				rc = get_uint(v, "out", &req->out, err), have_out = true;
			} else if (k == K_VARIANT) {
				/* which names fit depends on the dtype: below */
				if (v->type == MSGPACK_OBJECT_STR)
					variant = v;
				else if (v->type != MSGPACK_OBJECT_NIL)
					rc = proto_fail(err, PROTO_BAD_REQUEST,
							"key 'variant' must be a string");
			} else if (k == K_ACCUMULATE) {
				if (v->type == MSGPACK_OBJECT_BOOLEAN)
					req->accumulate = v->via.boolean;
				else if (v->type != MSGPACK_OBJECT_NIL)
					rc = proto_fail(err, PROTO_BAD_REQUEST,
							"key 'accumulate' must be a boolean");
			} else if (k == K_ACTIVATION) {
				rc = get_activation(v, req, err);
			} else if (k >= K_TENSOR) {
				const int t = k - K_TENSOR;
				/* each op's own tensor keys; another op's are
				 * unknown keys here, ignored (x and w are both's) */
				if (!op_has_tensor(req->op, t))
					break;
				/* nil means "not asked for", like an absent key */
				if (v->type == MSGPACK_OBJECT_NIL)
					break;
				if (req->op == PROTO_OP_LINEAR_BACKWARD && (t == PROTO_T_Y || t == PROTO_T_Z)) {
					if (get_tensor(v, proto_tensor_key[t], &req->t[t], true,
						       &yz_err[t - PROTO_T_Y]) != 0)
						yz_bad |= 1u << (t - PROTO_T_Y);
					break;
				}
				rc = get_tensor(v, proto_tensor_key[t], &req->t[t], true, err);
			}
			break;
		case PROTO_OP_TENSOR_NEW:
			if (k == K_DTYPE) {
				if (v->type == MSGPACK_OBJECT_STR)
					dtype = v;
				else
					rc = proto_fail(err, PROTO_BAD_REQUEST,
							"tensor_new: key 'dtype' must be a string");
			} else if (k == K_ROWS) {
				rc = get_uint(v, "rows", &req->rows, err), have_rows = true;
			} else if (k == K_COLS) {
				rc = get_uint(v, "cols", &req->cols, err), have_cols = true;
			}
			break;
		case PROTO_OP_TENSOR_WRITE:
		case PROTO_OP_TENSOR_READ:
			if (k == (req->op == PROTO_OP_TENSOR_WRITE ? K_SRC : K_DST)) {
				rc = get_tensor(v, req->op == PROTO_OP_TENSOR_WRITE ? "src" : "dst", &req->io,
						false, err);
				break;
			}
			__attribute__((fallthrough)); /* `tensor` */
		case PROTO_OP_TENSOR_FREE:
			if (k == K_TENSOR_ID)
				rc = get_uint(v, "tensor", &req->tensor, err), have_tensor = true;
			break;
		case PROTO_OP_SGD_STEP:
		case PROTO_OP_ADAM_STEP: {
			/* proto/optim.c's keys (not in key_id's table) */
			const msgpack_object *key = &m->ptr[i].key;
			if (key->type == MSGPACK_OBJECT_STR)
				rc = proto_optim_field(req->op, req->optim, key->via.str.ptr, key->via.str.size,
						       v, err);
			break;
		}
		default:
			break; /* unknown keys are ignored: additions stay compatible */
		}
		if (rc)
			return rc;
	}
	switch (req->op) {
	case PROTO_OP_HELLO:
		if (!have_version)
			return proto_fail(err, PROTO_BAD_REQUEST, "hello: key 'version' is missing");
		if (req->version != PROTO_VERSION)
			return proto_fail(err, PROTO_UNSUPPORTED,
					  "hello: version %llu is not spoken here (only %d)",
					  (unsigned long long)req->version, PROTO_VERSION);
		break;
	case PROTO_OP_REGISTER:
		if (!have_size)
			return proto_fail(err, PROTO_BAD_REQUEST, "register: key 'size' is missing");
		if (req->size == 0)
			return proto_fail(err, PROTO_BAD_REQUEST, "register: key 'size' must be >= 1");
		break;
	case PROTO_OP_UNREGISTER:
		if (!have_region)
			return proto_fail(err, PROTO_BAD_REQUEST, "unregister: key 'region' is missing");
		break;
	case PROTO_OP_LINEAR_BACKWARD: {
		if (!dtype)
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "linear_backward: key 'dtype' is missing");
		if (!have_batch || !have_in || !have_out)
			return proto_fail(err, PROTO_BAD_REQUEST, "linear_backward: key '%s' is missing",
					  !have_batch ? "batch" : !have_in ? "in" : "out");
		if (!req->t[PROTO_T_X].present || !req->t[PROTO_T_DY].present)
			return proto_fail(err, PROTO_BAD_REQUEST, "linear_backward: key '%s' is missing",
					  !req->t[PROTO_T_X].present ? "x" : "dy");
		if (!req->t[PROTO_T_DW].present && !req->t[PROTO_T_DB].present &&
		    !req->t[PROTO_T_DX].present)
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "linear_backward: name at least one output of dw, db, dx");
		if (req->t[PROTO_T_DX].present && !req->t[PROTO_T_W].present)
			return proto_fail(err, PROTO_BAD_REQUEST,
					  "linear_backward: key 'w' is required when 'dx' is asked for");
		if (check_activation(req, yz_bad, yz_err, err) != 0)
			return -(int)err->code;
		return decode_dtype_variant(dtype, variant, req, err);
	}
	case PROTO_OP_LINEAR_FORWARD: {
		if (!dtype)
			return proto_fail(err, PROTO_BAD_REQUEST, "linear_forward: key 'dtype' is missing");
		if (!have_batch || !have_in || !have_out)
			return proto_fail(err, PROTO_BAD_REQUEST, "linear_forward: key '%s' is missing",
					  !have_batch ? "batch" : !have_in ? "in" : "out");
		const int need[3] = {PROTO_T_X, PROTO_T_W, PROTO_T_Y};
		for (int i = 0; i < 3; i++)
			if (!req->t[need[i]].present)
				return proto_fail(err, PROTO_BAD_REQUEST, "linear_forward: key '%s' is missing",
						  proto_tensor_key[need[i]]);
		if (check_activation(req, 0, NULL, err) != 0)
			return -(int)err->code;
		return decode_dtype_variant(dtype, variant, req, err);
	}
	case PROTO_OP_TENSOR_NEW: {
		if (!dtype || !have_rows || !have_cols)
			return proto_fail(err, PROTO_BAD_REQUEST, "tensor_new: key '%s' is missing",
					  !dtype ? "dtype" : !have_rows ? "rows" : "cols");
		if (req->rows == 0 || req->cols == 0)
			return proto_fail(err, PROTO_BAD_REQUEST, "tensor_new: key '%s' must be >= 1",
					  req->rows == 0 ? "rows" : "cols");
		return decode_dtype_variant(dtype, NULL, req, err);
	}
	case PROTO_OP_TENSOR_WRITE:
	case PROTO_OP_TENSOR_READ:
		if (!req->io.present)
			return proto_fail(err, PROTO_BAD_REQUEST, "%s: key '%s' is missing",
					  proto_op_name(req->op), req->op == PROTO_OP_TENSOR_WRITE ? "src" : "dst");
		__attribute__((fallthrough));
	case PROTO_OP_TENSOR_FREE:
		if (!have_tensor)
			return proto_fail(err, PROTO_BAD_REQUEST, "%s: key 'tensor' is missing",
					  proto_op_name(req->op));
		break;
	case PROTO_OP_SGD_STEP:
	case PROTO_OP_ADAM_STEP:
		return proto_optim_check(req->op, req->optim, err);
	default:
		break;
	}
	return 0;
}

void proto_decoder_init(proto_decoder *d)
{
	memset(d, 0, sizeof(*d));
	d->ready = msgpack_zone_init(&d->zone, MSGPACK_ZONE_CHUNK_SIZE);
}

void proto_decoder_free(proto_decoder *d)
{
	if (d->ready)
		msgpack_zone_destroy(&d->zone);
	d->ready = false;
}

/* The decoded map m (its objects in the zone) into req. */
static int decode_map(const msgpack_object_map *m, proto_request *req, uint64_t *id_out,
		      proto_err *err)
{
	const msgpack_object *op = NULL, *id = NULL;
	uint8_t ids[KEY_IDS];
	for (uint32_t i = 0; i < m->size; i++) {
		const int k = key_id(&m->ptr[i].key);
		if (i < KEY_IDS)
			ids[i] = (uint8_t)k;
		if (k == K_OP)
			op = &m->ptr[i].val;
		else if (k == K_ID)
			id = &m->ptr[i].val;
	}
	if (!id || id->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return proto_fail(err, PROTO_BAD_FRAME,
				  "request map needs key 'id' as an unsigned integer");
	if (!op || op->type != MSGPACK_OBJECT_STR)
		return proto_fail(err, PROTO_BAD_FRAME, "request map needs key 'op' as a string");
	req->id = *id_out = id->via.u64;
	const int found = proto_op_parse(op->via.str.ptr, op->via.str.size);
	if (found < 0) {
		char name[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_ECHO_OP)];
		return proto_fail(err, PROTO_UNKNOWN_OP, "unknown op '%s'",
				  echo(op, name, sizeof(name), PROTO_TEXT_ECHO_OP));
	}
	req->op = (proto_op)found;
	if (req->op == PROTO_OP_SGD_STEP || req->op == PROTO_OP_ADAM_STEP) {
		req->optim = proto_optim_scratch();
		proto_optim_defaults(req->optim);
	}
	return decode_fields(m, ids, req, err);
}

/* ---- the direct way: a map of scalars and short arrays ---------------------
 * Every request vkgrad's clients send is one map whose keys are strings and
 * whose values are unsigned integers, strings, booleans, nil,
 * [region, byte_offset] pairs or {"tensor": T} operands (maps of one
 * scalar key and value). fast_unpack reads such a frame straight into
 * msgpack_objects on the stack, the very objects msgpack_unpack makes
 * (strings pointing into the frame, a signed encoding of a value >= 0 a
 * positive integer), and decode_map takes them from there, so every check
 * and message is the same. Anything else — a float, bin, ext, a map or an
 * array as a key or inside an array, more than FAST_KEYS keys or FAST_ELEMS
 * array elements, a malformed or truncated byte, trailing bytes — makes it
 * give up, and the frame goes the general way, which words every
 * malformation (proto_mpcheck) and decodes everything else. */
#define FAST_KEYS 32
#define FAST_ELEMS 32
#define FAST_MAPS 16 /* one-entry maps as values: {"tensor": T} operands */

typedef struct fast_frame {
	const uint8_t *p, *end;
	uint32_t nel, nmap;
	msgpack_object_kv kv[FAST_KEYS];
	msgpack_object el[FAST_ELEMS];
	msgpack_object_kv mkv[FAST_MAPS];
} fast_frame;

static bool fast_be(fast_frame *f, unsigned k, uint64_t *v)
{
	if ((size_t)(f->end - f->p) < k)
		return false;
	uint64_t x = 0;
	for (unsigned i = 0; i < k; i++)
		x = x << 8 | f->p[i];
	f->p += k;
	*v = x;
	return true;
}

static void fast_int(msgpack_object *o, int64_t v)
{
	if (v >= 0) {
		o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
		o->via.u64 = (uint64_t)v;
	} else {
		o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
		o->via.i64 = v;
	}
}

/* One scalar into o: t is its first byte, already read. false: not a
 * scalar the direct way reads (an array is fast_value's). */
static inline bool fast_scalar(fast_frame *f, uint8_t t, msgpack_object *o)
{
	uint64_t v;
	if (t <= 0x7f) {
		o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
		o->via.u64 = t;
		return true;
	}
	if (t >= 0xa0 && t <= 0xbf) {
		v = t & 0x1f;
		goto str;
	}
	if (t >= 0xe0) {
		fast_int(o, (int8_t)t);
		return true;
	}
	switch (t) {
	case 0xc0: o->type = MSGPACK_OBJECT_NIL; return true;
	case 0xc2:
	case 0xc3:
		o->type = MSGPACK_OBJECT_BOOLEAN;
		o->via.boolean = t == 0xc3;
		return true;
	case 0xcc:
	case 0xcd:
	case 0xce:
	case 0xcf:
		if (!fast_be(f, 1u << (t - 0xcc), &v))
			return false;
		o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
		o->via.u64 = v;
		return true;
	case 0xd0: return fast_be(f, 1, &v) && (fast_int(o, (int8_t)v), true);
	case 0xd1: return fast_be(f, 2, &v) && (fast_int(o, (int16_t)v), true);
	case 0xd2: return fast_be(f, 4, &v) && (fast_int(o, (int32_t)v), true);
	case 0xd3: return fast_be(f, 8, &v) && (fast_int(o, (int64_t)v), true);
	case 0xd9:
	case 0xda:
	case 0xdb:
		if (!fast_be(f, 1u << (t - 0xd9), &v))
			return false;
		goto str;
	default: return false; /* array, map, float, bin, ext, 0xc1 */
	}
str:
	if (v > (uint64_t)(f->end - f->p))
		return false;
	o->type = MSGPACK_OBJECT_STR;
	o->via.str.size = (uint32_t)v;
	o->via.str.ptr = (const char *)f->p;
	f->p += v;
	return true;
}

/* The next scalar (a key, an array's element) into o. */
static inline bool fast_next_scalar(fast_frame *f, msgpack_object *o)
{
	return f->p < f->end && fast_scalar(f, *f->p++, o);
}

/* A value: a scalar, an array of scalars, or a map of one scalar key
 * and value (a fixmap of one entry; any other map goes the general way). */
static bool fast_value(fast_frame *f, msgpack_object *o)
{
	if (f->p >= f->end)
		return false;
	const uint8_t t = *f->p++;
	uint64_t n;
	if (t == 0x81) {
		if (f->nmap >= FAST_MAPS)
			return false;
		msgpack_object_kv *kv = &f->mkv[f->nmap++];
		if (!fast_next_scalar(f, &kv->key) || !fast_next_scalar(f, &kv->val))
			return false;
		o->type = MSGPACK_OBJECT_MAP;
		o->via.map.size = 1;
		o->via.map.ptr = kv;
		return true;
	}
	if (t >= 0x90 && t <= 0x9f)
		n = t & 0x0f;
	else if (t == 0xdc || t == 0xdd) {
		if (!fast_be(f, t == 0xdc ? 2 : 4, &n))
			return false;
	} else
		return fast_scalar(f, t, o);
	if (n > FAST_ELEMS - f->nel)
		return false;
	o->type = MSGPACK_OBJECT_ARRAY;
	o->via.array.size = (uint32_t)n;
	o->via.array.ptr = n ? &f->el[f->nel] : NULL;
	f->nel += (uint32_t)n;
	for (uint64_t i = 0; i < n; i++)
		if (!fast_next_scalar(f, &o->via.array.ptr[i]))
			return false;
	return true;
}

/* The frame as a map in f->kv, or false: the general way. */
static bool fast_unpack(fast_frame *f, const uint8_t *body, size_t len, msgpack_object_map *m)
{
	f->p = body;
	f->end = body + len;
	f->nel = 0;
	f->nmap = 0;
	uint64_t n;
	if (len == 0)
		return false;
	const uint8_t t = *f->p++;
	if (t >= 0x80 && t <= 0x8f)
		n = t & 0x0f;
	else if (t == 0xde || t == 0xdf) {
		if (!fast_be(f, t == 0xde ? 2 : 4, &n))
			return false;
	} else
		return false;
	if (n > FAST_KEYS)
		return false;
	for (uint64_t i = 0; i < n; i++)
		if (!fast_next_scalar(f, &f->kv[i].key) || !fast_value(f, &f->kv[i].val))
			return false;
	if (f->p != f->end)
		return false;
	m->size = (uint32_t)n;
	m->ptr = n ? f->kv : NULL;
	return true;
}

int proto_request_decode_with(proto_decoder *d, const uint8_t *body, size_t len,
			      proto_request *req, uint64_t *id_out, proto_err *err)
{
	const char *why = NULL;
	memset(req, 0, sizeof(*req));
	*id_out = 0;
	if (!d->general_only) {
		fast_frame f;
		msgpack_object_map m;
		if (fast_unpack(&f, body, len, &m))
			return decode_map(&m, req, id_out, err);
	}
	d->general++;
	if (proto_mpcheck(body, len, PROTO_MAX_DEPTH, &why) != 0)
		return proto_fail(err, PROTO_BAD_FRAME, "frame body is not valid msgpack: %s", why);
	if (!d->ready && !(d->ready = msgpack_zone_init(&d->zone, MSGPACK_ZONE_CHUNK_SIZE)))
		return proto_fail(err, PROTO_BAD_FRAME, "out of memory decoding the frame");
	void *first = d->zone.chunk_list.head;
	msgpack_object o;
	size_t off = 0;
	int rc;
	/* msgpack_unpack (the caller's zone) where msgpack_unpack_next would
	 * make and free a zone per frame; trailing bytes were refused above */
	msgpack_unpack_return ur = msgpack_unpack((const char *)body, len, &off, &d->zone, &o);
	if (ur != MSGPACK_UNPACK_SUCCESS && ur != MSGPACK_UNPACK_EXTRA_BYTES)
		rc = proto_fail(err, PROTO_BAD_FRAME, "frame body is not valid msgpack");
	else if (o.type != MSGPACK_OBJECT_MAP)
		rc = proto_fail(err, PROTO_BAD_FRAME, "frame body must be a msgpack map");
	else
		rc = decode_map(&o.via.map, req, id_out, err);
	/* req holds copies only: the zone is emptied for the next frame */
	if (d->zone.chunk_list.head == first) {
		msgpack_zone_clear(&d->zone);
	} else {
		msgpack_zone_destroy(&d->zone);
		d->ready = msgpack_zone_init(&d->zone, MSGPACK_ZONE_CHUNK_SIZE);
		d->rebuilds++;
	}
	return rc;
}

int proto_request_decode(const uint8_t *body, size_t len, proto_request *req,
			 uint64_t *id_out, proto_err *err)
{
	proto_decoder d;
	proto_decoder_init(&d);
	int rc = proto_request_decode_with(&d, body, len, req, id_out, err);
	proto_decoder_free(&d);
	return rc;
}
