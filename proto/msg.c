/* proto/msg.c — see msg.h. */
#include "msg.h"

#include "frame.h"
#include "mpcheck.h"
#include "text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const code_names[PROTO_CODE_COUNT] = {
	[PROTO_OK] = "ok",
	[PROTO_BAD_FRAME] = "bad_frame",
	[PROTO_BAD_REQUEST] = "bad_request",
	[PROTO_UNKNOWN_OP] = "unknown_op",
	[PROTO_UNSUPPORTED] = "unsupported",
	[PROTO_BAD_REGION] = "bad_region",
	[PROTO_OUT_OF_BOUNDS] = "out_of_bounds",
	[PROTO_OVERLAP] = "overlap",
	[PROTO_LIMIT] = "limit",
	[PROTO_DEVICE_LOST] = "device_lost",
	[PROTO_INTERNAL] = "internal",
};

static const char *const op_names[PROTO_OP_COUNT] = {
	[PROTO_OP_HELLO] = "hello",
	[PROTO_OP_REGISTER] = "register",
	[PROTO_OP_UNREGISTER] = "unregister",
	[PROTO_OP_LINEAR_BACKWARD] = "linear_backward",
	[PROTO_OP_STATS] = "stats",
	[PROTO_OP_PING] = "ping",
};

static const char *const dtype_names[PROTO_DTYPE_COUNT] = {"f32", "f16", "bf16"};
static const char *const variant_names[PROTO_VARIANT_COUNT] = {"auto", "generic", "tiled", "splitk",
								       "coopmat", "tiled128", "coopmat_khr",
								       "coopmat_nv2", "coopmat_khr_f32x3"};

const char *proto_variant_name(proto_variant v)
{
	return (unsigned)v < PROTO_VARIANT_COUNT ? variant_names[v] : "?";
}

int proto_variant_parse(const char *s)
{
	for (int i = 0; i < PROTO_VARIANT_COUNT; i++)
		if (strcmp(s, variant_names[i]) == 0)
			return i;
	return -1;
}

/* The order in which messages list them: from the default to the special */
static const proto_variant variant_order[PROTO_VARIANT_COUNT] = {
	PROTO_VARIANT_AUTO, PROTO_VARIANT_GENERIC, PROTO_VARIANT_TILED,
	PROTO_VARIANT_TILED128, PROTO_VARIANT_SPLITK, PROTO_VARIANT_COOPMAT, PROTO_VARIANT_COOPMAT_KHR,
	PROTO_VARIANT_COOPMAT_NV2, PROTO_VARIANT_COOPMAT_KHR_F32X3,
};

bool proto_variant_fits(proto_variant v, proto_dtype d)
{
	if (v == PROTO_VARIANT_COOPMAT)
		return d == PROTO_F16;
	if (v == PROTO_VARIANT_COOPMAT_KHR || v == PROTO_VARIANT_COOPMAT_NV2)
		return d == PROTO_F16 || d == PROTO_BF16;
	if (v == PROTO_VARIANT_COOPMAT_KHR_F32X3)
		return d == PROTO_F32;
	return true;
}

unsigned proto_variant_list(char *buf, size_t cap, int d,
			    bool (*keep)(void *ctx, proto_variant v), void *ctx)
{
	unsigned n = 0;
	size_t o = 0;
	if (cap)
		buf[0] = 0;
	for (int i = 0; i < PROTO_VARIANT_COUNT; i++) {
		const proto_variant v = variant_order[i];
		if ((d >= 0 && !proto_variant_fits(v, (proto_dtype)d)) || (keep && !keep(ctx, v)))
			continue;
		if (o < cap) {
			int k = snprintf(buf + o, cap - o, "%s%s", n ? ", " : "", variant_names[v]);
			o += k > 0 ? (size_t)k : 0;
		}
		n++;
	}
	return n;
}

/* each name in a proto_stage's name[] width, so proto_stage_copy_name
 * copies a fixed 16 bytes */
static const char stage_names[PROTO_STAGE_COUNT][sizeof(((proto_stage *)0)->name)] = {
	[PROTO_STAGE_REQUEST] = "request",   [PROTO_STAGE_DECODE] = "decode",
	[PROTO_STAGE_QUEUE] = "queue",       [PROTO_STAGE_RECORD] = "record",
	[PROTO_STAGE_SUBMIT] = "submit",     [PROTO_STAGE_LAUNCH] = "launch",
	[PROTO_STAGE_GPU] = "gpu",           [PROTO_STAGE_COMPLETE] = "complete",
	[PROTO_STAGE_GPU_WAIT] = "gpu_wait", [PROTO_STAGE_HANDOFF] = "handoff",
	[PROTO_STAGE_ANSWER] = "answer",     [PROTO_STAGE_WRITE] = "write",
	[PROTO_STAGE_CLIENT_WAKE] = "client_wake",
};
_Static_assert(PROTO_STAGE_COUNT <= PROTO_MAX_STAGES, "every stage fits a trace");

const char *proto_stage_name(proto_stage_id s)
{
	return (unsigned)s < PROTO_STAGE_COUNT ? stage_names[s] : "?";
}

void proto_stage_copy_name(proto_stage *st, proto_stage_id s)
{
	if ((unsigned)s < PROTO_STAGE_COUNT)
		memcpy(st->name, stage_names[s], sizeof(st->name));
	else
		memcpy(st->name, "?", 2);
}

int proto_stage_parse(const char *s, size_t n)
{
	for (int i = 0; i < PROTO_STAGE_COUNT; i++)
		if (strlen(stage_names[i]) == n && memcmp(stage_names[i], s, n) == 0)
			return i;
	return -1;
}

void proto_reply_put_time(uint8_t *end, uint64_t ns)
{
	for (int i = 1; i <= 8; i++, ns >>= 8)
		end[-i] = (uint8_t)ns;
}

const char *const proto_tensor_key[PROTO_T_COUNT] = {"x", "dy", "w", "dw", "db", "dx"};

const char *proto_code_name(proto_code c)
{
	return (unsigned)c < PROTO_CODE_COUNT ? code_names[c] : "internal";
}

proto_code proto_code_from_name(const char *s, size_t n)
{
	for (int i = 0; i < PROTO_CODE_COUNT; i++)
		if (strlen(code_names[i]) == n && memcmp(code_names[i], s, n) == 0)
			return (proto_code)i;
	return PROTO_INTERNAL;
}

const char *proto_op_name(proto_op op)
{
	return (unsigned)op < PROTO_OP_COUNT ? op_names[op] : "?";
}

const char *proto_dtype_name(proto_dtype d)
{
	return (unsigned)d < PROTO_DTYPE_COUNT ? dtype_names[d] : "?";
}

unsigned proto_dtype_size(proto_dtype d)
{
	return d == PROTO_F32 ? 4 : 2;
}

/* vsnprintf into err->message from byte `at`, cut on a character boundary
 * when it does not fit. */
static void err_vprint(proto_err *err, size_t at, const char *fmt, va_list ap)
{
	/* room for the bytes past the cut too: where it falls inside a
	 * character, its first byte is found from them */
	char tmp[sizeof(err->message) + 8];
	const size_t room = sizeof(err->message) - 1 - at;
	if (at >= sizeof(err->message) - 1)
		return;
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	size_t len = n < 0 ? 0 : (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1;
	len = proto_text_truncate(tmp, len, room);
	memcpy(err->message + at, tmp, len);
	err->message[at + len] = 0;
}

int proto_fail(proto_err *err, proto_code code, const char *fmt, ...)
{
	va_list ap;
	err->code = code;
	va_start(ap, fmt);
	err_vprint(err, 0, fmt, ap);
	va_end(ap);
	return -(int)code;
}

int proto_err_append(proto_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vprint(err, strlen(err->message), fmt, ap);
	va_end(ap);
	return -(int)err->code;
}

/* ---- decoding helpers --------------------------------------------------- */

static bool key_is(const msgpack_object *k, const char *s)
{
	size_t n = strlen(s);
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	       memcmp(k->via.str.ptr, s, n) == 0;
}

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

static int get_tensor(const msgpack_object *v, const char *key, proto_tensor *t, proto_err *err)
{
	if (v->type != MSGPACK_OBJECT_ARRAY || v->via.array.size != 2)
		return proto_fail(err, PROTO_BAD_REQUEST,
				  "key '%s' must be a two-element array [region, byte_offset]", key);
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
	char got[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_ECHO_NAME)];
	int d = -1;
	for (int i = 0; i < PROTO_DTYPE_COUNT; i++)
		if (str_is(dtype, dtype_names[i]))
			d = i;
	if (d < 0)
		return proto_fail(err, PROTO_UNSUPPORTED,
				  "linear_backward: dtype '%s' is not served here (vkgradd serves "
				  "f32, f16, bf16; hello lists the kernels of each dtype this device runs)",
				  echo(dtype, got, sizeof(got), PROTO_TEXT_ECHO_NAME));
	req->dtype = (proto_dtype)d;
	if (!variant)
		return 0;
	/* a known name that does not fit the dtype (coopmat with f32) is
	 * the daemon's to refuse: `unsupported`, saying what it needs */
	for (int i = 0; i < PROTO_VARIANT_COUNT; i++)
		if (str_is(variant, variant_names[i])) {
			req->variant = (proto_variant)i;
			return 0;
		}
	char names[128], others[96] = "";
	proto_variant_list(names, sizeof(names), d, NULL, NULL);
	/* the known names that do not fit d, with what they need: for f32
	 * " (coopmat is f16 only; coopmat_khr, coopmat_nv2 are f16 and bf16
	 * only)", for f16 " (coopmat_khr_f32x3 is f32 only)", for bf16
	 * " (coopmat is f16 only; coopmat_khr_f32x3 is f32 only)" */
	const char *sep = " (";
	if (!proto_variant_fits(PROTO_VARIANT_COOPMAT, req->dtype)) {
		snprintf(others, sizeof(others), " (coopmat is f16 only");
		sep = "; ";
	}
	if (!proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR, req->dtype))
		snprintf(others + strlen(others), sizeof(others) - strlen(others),
			 "%scoopmat_khr, coopmat_nv2 are f16 and bf16 only", sep);
	else if (!proto_variant_fits(PROTO_VARIANT_COOPMAT_KHR_F32X3, req->dtype))
		snprintf(others + strlen(others), sizeof(others) - strlen(others),
			 "%scoopmat_khr_f32x3 is f32 only", sep);
	if (others[0])
		snprintf(others + strlen(others), sizeof(others) - strlen(others), ")");
	req->variant_unknown = true;
	return proto_fail(err, PROTO_BAD_REQUEST,
			  "linear_backward: key 'variant' = '%s' is not one of %s for dtype %s%s",
			  echo(variant, got, sizeof(got), PROTO_TEXT_ECHO_NAME), names,
			  dtype_names[d], others);
}

/* The request keys decode knows, found with one comparison each. */
typedef enum req_key {
	K_OTHER, K_OP, K_ID, K_VERSION, K_CLIENT, K_SIZE, K_REGION, K_DTYPE, K_BATCH, K_IN,
	K_OUT, K_VARIANT, K_ACCUMULATE, K_TENSOR /* + PROTO_T_* */
} req_key;

#define KEY_EQ(c, lit) (memcmp((c), (lit), sizeof(lit) - 1) == 0)

static int key_id(const msgpack_object *k)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return K_OTHER;
	const char *c = k->via.str.ptr;
	switch (k->via.str.size) {
	case 1: return c[0] == 'x' ? K_TENSOR + PROTO_T_X : c[0] == 'w' ? K_TENSOR + PROTO_T_W : K_OTHER;
	case 2:
		if (c[0] == 'd')
			return c[1] == 'y'   ? K_TENSOR + PROTO_T_DY
			       : c[1] == 'w' ? K_TENSOR + PROTO_T_DW
			       : c[1] == 'b' ? K_TENSOR + PROTO_T_DB
			       : c[1] == 'x' ? K_TENSOR + PROTO_T_DX
					     : K_OTHER;
		return KEY_EQ(c, "op") ? K_OP : KEY_EQ(c, "id") ? K_ID : KEY_EQ(c, "in") ? K_IN : K_OTHER;
	case 3: return KEY_EQ(c, "out") ? K_OUT : K_OTHER;
	case 4: return KEY_EQ(c, "size") ? K_SIZE : K_OTHER;
	case 5: return KEY_EQ(c, "dtype") ? K_DTYPE : KEY_EQ(c, "batch") ? K_BATCH : K_OTHER;
	case 6: return KEY_EQ(c, "client") ? K_CLIENT : KEY_EQ(c, "region") ? K_REGION : K_OTHER;
	case 7: return KEY_EQ(c, "version") ? K_VERSION : KEY_EQ(c, "variant") ? K_VARIANT : K_OTHER;
	case 10: return KEY_EQ(c, "accumulate") ? K_ACCUMULATE : K_OTHER;
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
	const msgpack_object *dtype = NULL, *variant = NULL; /* strings */
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
			} else if (k >= K_TENSOR) {
				const int t = k - K_TENSOR;
				/* nil means "not asked for", like an absent key */
				if (v->type != MSGPACK_OBJECT_NIL)
					rc = get_tensor(v, proto_tensor_key[t], &req->t[t], err);
			}
			break;
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
		return decode_dtype_variant(dtype, variant, req, err);
	}
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
	int found = -1;
	for (int i = 0; i < PROTO_OP_COUNT; i++)
		if (strlen(op_names[i]) == op->via.str.size &&
		    memcmp(op_names[i], op->via.str.ptr, op->via.str.size) == 0)
			found = i;
	if (found < 0) {
		char name[PROTO_TEXT_ESCAPED_CAP(PROTO_TEXT_ECHO_OP)];
		return proto_fail(err, PROTO_UNKNOWN_OP, "unknown op '%s'",
				  echo(op, name, sizeof(name), PROTO_TEXT_ECHO_OP));
	}
	req->op = (proto_op)found;
	return decode_fields(m, ids, req, err);
}

/* ---- the direct way: a map of scalars and short arrays ---------------------
 * Every request vkgrad's clients send is one map whose keys are strings and
 * whose values are unsigned integers, strings, booleans, nil or
 * [region, byte_offset] pairs. fast_unpack reads such a frame straight into
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

typedef struct fast_frame {
	const uint8_t *p, *end;
	uint32_t nel;
	msgpack_object_kv kv[FAST_KEYS];
	msgpack_object el[FAST_ELEMS];
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

/* A value: a scalar, or an array of scalars. */
static bool fast_value(fast_frame *f, msgpack_object *o)
{
	if (f->p >= f->end)
		return false;
	const uint8_t t = *f->p++;
	uint64_t n;
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

/* ---- encoding helpers --------------------------------------------------- */

static void pk_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pk_kv_u(msgpack_packer *pk, const char *k, uint64_t v)
{
	pk_str(pk, k);
	msgpack_pack_uint64(pk, v);
}

static void pk_kv_s(msgpack_packer *pk, const char *k, const char *v)
{
	pk_str(pk, k);
	pk_str(pk, v);
}

/* A string value of a reply: strict UTF-8 whatever it holds, so that a
 * client decoding strictly never fails on it. Client text is escaped where
 * it enters a message already; this catches anything else (a driver's
 * device name), escaping what is not UTF-8. */
static void pk_kv_text(msgpack_packer *pk, const char *k, const char *v)
{
	size_t n = strlen(v);
	pk_str(pk, k);
	if (proto_text_valid(v, n)) {
		msgpack_pack_str(pk, n);
		msgpack_pack_str_body(pk, v, n);
		return;
	}
	char buf[PROTO_TEXT_ESCAPED_CAP(256)];
	size_t m = proto_text_escape(buf, sizeof(buf), v, n, 256, PROTO_TEXT_KEEP_BACKSLASH);
	msgpack_pack_str(pk, m);
	msgpack_pack_str_body(pk, buf, m);
}

static void pk_kv_d(msgpack_packer *pk, const char *k, double v)
{
	pk_str(pk, k);
	msgpack_pack_double(pk, v);
}

void proto_sbuffer_reuse(msgpack_sbuffer *sb, size_t keep)
{
	if (sb->alloc > keep) {
		msgpack_sbuffer_destroy(sb);
		msgpack_sbuffer_init(sb);
	}
	sb->size = 0;
}

/* Reserve the 4-byte length; returns the offset of the prefix. */
static size_t frame_begin(msgpack_sbuffer *sb)
{
	static const char zero[PROTO_FRAME_HDR] = {0};
	size_t at = sb->size;
	msgpack_sbuffer_write(sb, zero, PROTO_FRAME_HDR);
	return at;
}

static int frame_end(msgpack_sbuffer *sb, size_t at)
{
	if (!sb->data || sb->size < at + PROTO_FRAME_HDR)
		return -ENOMEM;
	size_t n = sb->size - at - PROTO_FRAME_HDR;
	if (n > UINT32_MAX)
		return -EMSGSIZE;
	proto_frame_put_len((uint8_t *)sb->data + at, (uint32_t)n);
	return 0;
}

int proto_request_encode(msgpack_sbuffer *sb, const proto_request *req)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	size_t at = frame_begin(sb);
	unsigned n = 2;
	switch (req->op) {
	case PROTO_OP_HELLO: n += 1 + (req->client[0] != 0); break;
	case PROTO_OP_REGISTER: n += 1; break;
	case PROTO_OP_UNREGISTER: n += 1; break;
	case PROTO_OP_LINEAR_BACKWARD:
		n += 5 + (req->variant != PROTO_VARIANT_AUTO);
		for (int t = 0; t < PROTO_T_COUNT; t++)
			n += req->t[t].present;
		break;
	default: break;
	}
	msgpack_pack_map(&pk, n);
	pk_kv_s(&pk, "op", proto_op_name(req->op));
	pk_kv_u(&pk, "id", req->id);
	switch (req->op) {
	case PROTO_OP_HELLO:
		pk_kv_u(&pk, "version", req->version);
		if (req->client[0])
			pk_kv_s(&pk, "client", req->client);
		break;
	case PROTO_OP_REGISTER:
		pk_kv_u(&pk, "size", req->size);
		break;
	case PROTO_OP_UNREGISTER:
		pk_kv_u(&pk, "region", req->region);
		break;
	case PROTO_OP_LINEAR_BACKWARD:
		pk_kv_s(&pk, "dtype", proto_dtype_name(req->dtype));
		pk_kv_u(&pk, "batch", req->batch);
		pk_kv_u(&pk, "in", req->in);
		pk_kv_u(&pk, "out", req->out);
		for (int t = 0; t < PROTO_T_COUNT; t++) {
			if (!req->t[t].present)
				continue;
			pk_str(&pk, proto_tensor_key[t]);
			msgpack_pack_array(&pk, 2);
			msgpack_pack_uint64(&pk, req->t[t].region);
			msgpack_pack_uint64(&pk, req->t[t].offset);
		}
		if (req->variant != PROTO_VARIANT_AUTO)
			pk_kv_s(&pk, "variant", proto_variant_name(req->variant));
		pk_str(&pk, "accumulate");
		if (req->accumulate)
			msgpack_pack_true(&pk);
		else
			msgpack_pack_false(&pk);
		break;
	default:
		break;
	}
	return frame_end(sb, at);
}

static void pack_hello(msgpack_packer *pk, const proto_hello *h)
{
	pk_kv_u(pk, "version", h->version);
	pk_kv_text(pk, "server", h->server);
	pk_str(pk, "device");
	msgpack_pack_map(pk, 6);
	pk_kv_text(pk, "name", h->device.name);
	pk_kv_u(pk, "vendor_id", h->device.vendor_id);
	pk_kv_u(pk, "device_id", h->device.device_id);
	pk_kv_text(pk, "driver", h->device.driver);
	pk_kv_text(pk, "api", h->device.api);
	pk_kv_text(pk, "type", h->device.type);
	pk_str(pk, "limits");
	msgpack_pack_map(pk, 13);
	pk_kv_u(pk, "max_frame", h->limits.max_frame);
	pk_kv_u(pk, "max_regions", h->limits.max_regions);
	pk_kv_u(pk, "max_region_bytes", h->limits.max_region_bytes);
	pk_kv_u(pk, "max_inflight", h->limits.max_inflight);
	pk_kv_u(pk, "max_dim", h->limits.max_dim);
	pk_kv_u(pk, "max_tensor_bytes", h->limits.max_tensor_bytes);
	pk_kv_u(pk, "max_total_region_bytes", h->limits.max_total_region_bytes);
	pk_kv_u(pk, "max_region_bytes_per_uid", h->limits.max_region_bytes_per_uid);
	pk_kv_u(pk, "max_connections", h->limits.max_connections);
	pk_kv_u(pk, "max_connections_per_uid", h->limits.max_connections_per_uid);
	pk_kv_u(pk, "max_fds_per_message", h->limits.max_fds_per_message);
	pk_kv_u(pk, "max_fds_held", h->limits.max_fds_held);
	pk_kv_u(pk, "max_outbound_bytes", h->limits.max_outbound_bytes);
	pk_str(pk, "kernels");
	msgpack_pack_array(pk, h->n_kernels);
	for (unsigned i = 0; i < h->n_kernels; i++) {
		const proto_kernel_info *k = &h->kernels[i];
		msgpack_pack_map(pk, 5);
		pk_kv_text(pk, "name", k->name);
		pk_kv_text(pk, "domain", k->domain);
		pk_kv_text(pk, "variant", k->variant);
		pk_kv_text(pk, "dtype", k->dtype);
		pk_kv_text(pk, "status", k->status);
	}
}

static void pack_stats(msgpack_packer *pk, const proto_stats *s)
{
	pk_kv_d(pk, "uptime_s", s->uptime_s);
	pk_kv_u(pk, "clients", s->clients);
	pk_kv_u(pk, "regions", s->regions);
	pk_kv_u(pk, "region_bytes", s->region_bytes);
	pk_kv_u(pk, "jobs_done", s->jobs_done);
	pk_kv_u(pk, "jobs_failed", s->jobs_failed);
	pk_kv_u(pk, "batches", s->batches);
	pk_kv_d(pk, "jobs_per_batch_avg", s->jobs_per_batch_avg);
	pk_kv_u(pk, "pipelines", s->pipelines);
	pk_kv_u(pk, "pipeline_cache_hits", s->pipeline_cache_hits);
	pk_kv_u(pk, "jobs_queued", s->jobs_queued);
	pk_kv_u(pk, "jobs_running", s->jobs_running);
	pk_kv_u(pk, "host_imports", s->host_imports);
	pk_kv_u(pk, "staged_regions", s->staged_regions);
	pk_kv_u(pk, "validation_errors", s->validation_errors);
	pk_kv_u(pk, "devlocal_min_bytes", s->devlocal_min_bytes);
	pk_kv_u(pk, "devlocal_min_bytes_16bit", s->devlocal_min_bytes_16bit);
	pk_kv_u(pk, "devlocal_jobs", s->devlocal_jobs);
	pk_kv_u(pk, "devlocal_copy_bytes", s->devlocal_copy_bytes);
	pk_kv_u(pk, "splitk_jobs", s->splitk_jobs);
	pk_kv_u(pk, "dispatches", s->dispatches);
	pk_kv_u(pk, "scratch_bytes", s->scratch_bytes);
	pk_kv_u(pk, "scratch_failures", s->scratch_failures);
	pk_kv_u(pk, "stream_chunk_bytes", s->stream_chunk_bytes);
	pk_kv_u(pk, "stream_min_bytes", s->stream_min_bytes);
	pk_kv_u(pk, "stream_queues", s->stream_queues);
	pk_kv_u(pk, "stream_jobs", s->stream_jobs);
	pk_kv_u(pk, "stream_chunks", s->stream_chunks);
	pk_kv_u(pk, "stream_dw_blocks", s->stream_dw_blocks);
	pk_kv_u(pk, "spin_budget_us", s->spin_budget_us);
	pk_kv_u(pk, "spin_us", s->spin_us);
	pk_kv_u(pk, "spin_hits", s->spin_hits);
	pk_kv_u(pk, "blocking_waits", s->blocking_waits);
	if (s->n_stages) {
		pk_str(pk, "stages");
		msgpack_pack_map(pk, s->n_stages);
		for (unsigned i = 0; i < s->n_stages; i++) {
			const proto_stage_stat *st = &s->stages[i];
			pk_str(pk, st->name);
			msgpack_pack_map(pk, 3);
			pk_kv_d(pk, "p50_us", st->p50_us);
			pk_kv_d(pk, "p99_us", st->p99_us);
			pk_kv_u(pk, "count", st->count);
		}
	}
	if (s->n_hist == 0)
		return;
	pk_str(pk, "histograms");
	msgpack_pack_map(pk, s->n_hist);
	for (unsigned i = 0; i < s->n_hist; i++) {
		const proto_histogram *h = &s->hist[i];
		pk_str(pk, h->name);
		msgpack_pack_map(pk, 4);
		pk_str(pk, "le_us");
		msgpack_pack_array(pk, h->n_le);
		for (unsigned b = 0; b < h->n_le; b++)
			msgpack_pack_uint64(pk, h->le_us[b]);
		pk_str(pk, "counts");
		msgpack_pack_array(pk, h->n_le + 1);
		for (unsigned b = 0; b <= h->n_le; b++)
			msgpack_pack_uint64(pk, h->counts[b]);
		pk_kv_u(pk, "sum_us", h->sum_us);
		pk_kv_u(pk, "count", h->count);
	}
}

/* ---- a job reply, written directly ------------------------------------------
 * The reply the daemon sends most, once per job: written straight into sb
 * in one reservation, keys as precomputed msgpack strings, instead of ~40
 * small writes through msgpack-c's packer. The bytes are exactly what the
 * packer writes (the smallest encoding of each uint, fixstr keys, fixmap
 * or map16 headers); tests/unit/test_msg.c test_reply_job_bytes checks them
 * against the packer. */

/* the most a job reply takes: header, map, 9 keys with uint64 values or
 * map headers, a map16 of PROTO_MAX_STAGES stages with names of up to 15
 * characters, one of PROTO_MAX_STREAM_FIELDS fields of up to 31 */
#define JOB_REPLY_MAX                                                                        \
	(PROTO_FRAME_HDR + 1 + 9 * (12 + 9) + 3 + PROTO_MAX_STAGES * (16 + 9) + 3 +             \
	 PROTO_MAX_STREAM_FIELDS * (32 + 9))

/* sb with room for n more bytes (grown as msgpack_sbuffer_write grows it),
 * or NULL */
static uint8_t *sb_reserve(msgpack_sbuffer *sb, size_t n)
{
	if (sb->alloc - sb->size < n) {
		size_t na = sb->alloc ? sb->alloc * 2 : MSGPACK_SBUFFER_INIT_SIZE;
		while (na < sb->size + n)
			na *= 2;
		char *d = realloc(sb->data, na);
		if (!d)
			return NULL;
		sb->data = d;
		sb->alloc = na;
	}
	return (uint8_t *)sb->data + sb->size;
}

static uint8_t *put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
	return p + bytes;
}

/* msgpack_pack_uint64's encoding */
static uint8_t *put_uint(uint8_t *p, uint64_t v)
{
	if (v < 128) {
		*p++ = (uint8_t)v;
		return p;
	}
	if (v < 256) {
		*p++ = 0xcc;
		*p++ = (uint8_t)v;
		return p;
	}
	if (v < 65536) {
		*p++ = 0xcd;
		return put_be(p, v, 2);
	}
	if (v <= UINT32_MAX) {
		*p++ = 0xce;
		return put_be(p, v, 4);
	}
	*p++ = 0xcf;
	return put_be(p, v, 8);
}

/* a str header for n < 256 bytes, as msgpack_pack_str writes it */
static uint8_t *put_str_hdr(uint8_t *p, size_t n)
{
	if (n < 32) {
		*p++ = (uint8_t)(0xa0 | n);
	} else {
		*p++ = 0xd9;
		*p++ = (uint8_t)n;
	}
	return p;
}

/* a map header for n < 65536 entries, as msgpack_pack_map writes it */
static uint8_t *put_map_hdr(uint8_t *p, unsigned n)
{
	if (n < 16) {
		*p++ = (uint8_t)(0x80 | n);
		return p;
	}
	*p++ = 0xde;
	return put_be(p, n, 2);
}

/* a key: its fixstr header and bytes, from a literal "\xa<n>name" */
#define PUT_KEY(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) + sizeof(lit) - 1)

static int encode_job(msgpack_sbuffer *sb, const proto_reply *r)
{
	uint8_t *const p0 = sb_reserve(sb, JOB_REPLY_MAX);
	if (!p0)
		return -ENOMEM;
	uint8_t *p = p0 + PROTO_FRAME_HDR;
	*p++ = (uint8_t)(0x80 | (5 + r->has_kernel_us + (r->stream.n > 0) + 3 * r->trace.present));
	p = PUT_KEY(p, "\xa2id");
	p = put_uint(p, r->id);
	p = PUT_KEY(p, "\xa2ok\xc3");
	p = PUT_KEY(p, "\xa9queued_us");
	p = put_uint(p, r->queued_us);
	p = PUT_KEY(p, "\xa6gpu_us");
	p = put_uint(p, r->gpu_us);
	p = PUT_KEY(p, "\xaa" "batch_jobs");
	p = put_uint(p, r->batch_jobs);
	/* only when measured: a client must not mistake 0 for a time */
	if (r->has_kernel_us) {
		p = PUT_KEY(p, "\xa9kernel_us");
		p = put_uint(p, r->kernel_us);
	}
	/* a streamed job's timeline, before the trace (t_reply_ns stays last) */
	if (r->stream.n > 0) {
		const proto_stream_tl *st = &r->stream;
		const unsigned n = st->n < PROTO_MAX_STREAM_FIELDS ? st->n : PROTO_MAX_STREAM_FIELDS;
		p = PUT_KEY(p, "\xa9stream_us");
		p = put_map_hdr(p, n);
		for (unsigned i = 0; i < n; i++) {
			const size_t len = strnlen(st->f[i].name, sizeof(st->f[i].name) - 1);
			p = put_str_hdr(p, len);
			memcpy(p, st->f[i].name, len);
			p += len;
			p = put_uint(p, st->f[i].us);
		}
	}
	if (r->trace.present) {
		const proto_trace *t = &r->trace;
		const unsigned n = t->n < PROTO_MAX_STAGES ? t->n : PROTO_MAX_STAGES;
		p = PUT_KEY(p, "\xa9t_recv_ns");
		p = put_uint(p, t->t_recv_ns);
		p = PUT_KEY(p, "\xa9stages_ns");
		p = put_map_hdr(p, n);
		for (unsigned i = 0; i < n; i++) {
			const char *nm = t->st[i].name;
			size_t len = 0;
			while (len < sizeof(t->st[i].name) - 1 && nm[len])
				len++;
			*p++ = (uint8_t)(0xa0 | len);
			memcpy(p, nm, len);
			p += len;
			p = put_uint(p, t->st[i].ns);
		}
		/* last and fixed-width: the daemon fills in the write time in
		 * place (proto_reply_put_time) */
		p = PUT_KEY(p, "\xaa" "t_reply_ns\xcf");
		p = put_be(p, t->t_reply_ns, 8);
	}
	const size_t body = (size_t)(p - p0) - PROTO_FRAME_HDR;
	proto_frame_put_len(p0, (uint32_t)body);
	sb->size += (size_t)(p - p0);
	return 0;
}

int proto_reply_encode(msgpack_sbuffer *sb, proto_reply_kind kind, const proto_reply *r)
{
	if (kind == PROTO_R_JOB)
		return encode_job(sb, r);
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	size_t at = frame_begin(sb);
	unsigned extra = 0;
	switch (kind) {
	case PROTO_R_PLAIN: extra = 0; break;
	case PROTO_R_HELLO: extra = 5; break;
	case PROTO_R_REGISTER: extra = 1; break;
	case PROTO_R_JOB: break; /* encode_job */
	case PROTO_R_STATS: extra = 33 + (r->stats.n_stages > 0) + (r->stats.n_hist > 0); break;
	case PROTO_R_ERROR: extra = 1; break;
	}
	msgpack_pack_map(&pk, 2 + extra);
	pk_kv_u(&pk, "id", r->id);
	pk_str(&pk, "ok");
	if (kind == PROTO_R_ERROR)
		msgpack_pack_false(&pk);
	else
		msgpack_pack_true(&pk);
	switch (kind) {
	case PROTO_R_PLAIN: break;
	case PROTO_R_HELLO: pack_hello(&pk, &r->hello); break;
	case PROTO_R_REGISTER: pk_kv_u(&pk, "region", r->region); break;
	case PROTO_R_JOB: break; /* encode_job */
	case PROTO_R_STATS: pack_stats(&pk, &r->stats); break;
	case PROTO_R_ERROR:
		pk_str(&pk, "error");
		msgpack_pack_map(&pk, 2);
		pk_kv_s(&pk, "code", proto_code_name(r->err.code));
		pk_kv_text(&pk, "message", r->err.message);
		break;
	}
	return frame_end(sb, at);
}

/* ---- reply decoding (client side) --------------------------------------- */

static void copy_str(const msgpack_object *v, char *out, size_t cap)
{
	if (v->type != MSGPACK_OBJECT_STR || cap == 0)
		return;
	size_t n = v->via.str.size < cap - 1 ? v->via.str.size : cap - 1;
	memcpy(out, v->via.str.ptr, n);
	out[n] = 0;
}

static uint64_t as_u64(const msgpack_object *v)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return v->via.u64;
	if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32) {
		/* converting a double outside [0, 2^64) is undefined: clamp
		 * (NaN fails the first test and reads as 0) */
		if (!(v->via.f64 > 0))
			return 0;
		if (v->via.f64 >= 18446744073709551616.0)
			return UINT64_MAX;
		return (uint64_t)v->via.f64;
	}
	return 0;
}

static double as_f64(const msgpack_object *v)
{
	if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
		return v->via.f64;
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return (double)v->via.u64;
	return 0;
}

#define FOR_KV(mapobj, kp, vp)                                                               \
	for (uint32_t _i = 0; (mapobj)->type == MSGPACK_OBJECT_MAP &&                        \
			      _i < (mapobj)->via.map.size &&                                 \
			      ((kp) = &(mapobj)->via.map.ptr[_i].key,                        \
			       (vp) = &(mapobj)->via.map.ptr[_i].val, 1);                    \
	     _i++)

static void unpack_hello(const msgpack_object *m, proto_hello *h)
{
	const msgpack_object *k, *v, *k2, *v2;
	FOR_KV(m, k, v) {
		if (key_is(k, "version"))
			h->version = as_u64(v);
		else if (key_is(k, "server"))
			copy_str(v, h->server, sizeof(h->server));
		else if (key_is(k, "device")) {
			FOR_KV(v, k2, v2) {
				if (key_is(k2, "name")) copy_str(v2, h->device.name, sizeof(h->device.name));
				else if (key_is(k2, "vendor_id")) h->device.vendor_id = (uint32_t)as_u64(v2);
				else if (key_is(k2, "device_id")) h->device.device_id = (uint32_t)as_u64(v2);
				else if (key_is(k2, "driver")) copy_str(v2, h->device.driver, sizeof(h->device.driver));
				else if (key_is(k2, "api")) copy_str(v2, h->device.api, sizeof(h->device.api));
				else if (key_is(k2, "type")) copy_str(v2, h->device.type, sizeof(h->device.type));
			}
		} else if (key_is(k, "limits")) {
			FOR_KV(v, k2, v2) {
				if (key_is(k2, "max_frame")) h->limits.max_frame = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_regions")) h->limits.max_regions = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_region_bytes")) h->limits.max_region_bytes = as_u64(v2);
				else if (key_is(k2, "max_inflight")) h->limits.max_inflight = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_dim")) h->limits.max_dim = as_u64(v2);
				else if (key_is(k2, "max_tensor_bytes")) h->limits.max_tensor_bytes = as_u64(v2);
				else if (key_is(k2, "max_total_region_bytes")) h->limits.max_total_region_bytes = as_u64(v2);
				else if (key_is(k2, "max_region_bytes_per_uid")) h->limits.max_region_bytes_per_uid = as_u64(v2);
				else if (key_is(k2, "max_connections")) h->limits.max_connections = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_connections_per_uid")) h->limits.max_connections_per_uid = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_fds_per_message")) h->limits.max_fds_per_message = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_fds_held")) h->limits.max_fds_held = (uint32_t)as_u64(v2);
				else if (key_is(k2, "max_outbound_bytes")) h->limits.max_outbound_bytes = as_u64(v2);
			}
		} else if (key_is(k, "kernels") && v->type == MSGPACK_OBJECT_ARRAY) {
			for (uint32_t i = 0; i < v->via.array.size && h->n_kernels < PROTO_MAX_KERNELS; i++) {
				proto_kernel_info *ki = &h->kernels[h->n_kernels++];
				const msgpack_object *e = &v->via.array.ptr[i];
				FOR_KV(e, k2, v2) {
					if (key_is(k2, "name")) copy_str(v2, ki->name, sizeof(ki->name));
					else if (key_is(k2, "domain")) copy_str(v2, ki->domain, sizeof(ki->domain));
					else if (key_is(k2, "variant")) copy_str(v2, ki->variant, sizeof(ki->variant));
					else if (key_is(k2, "dtype")) copy_str(v2, ki->dtype, sizeof(ki->dtype));
					else if (key_is(k2, "status")) copy_str(v2, ki->status, sizeof(ki->status));
				}
			}
		}
	}
}

/* One histogram; a malformed one (bounds not rising, counts not one more
 * than bounds, too many) is dropped whole. */
static void unpack_histogram(const msgpack_object *name, const msgpack_object *m, proto_stats *s)
{
	if (s->n_hist >= PROTO_MAX_HIST || name->type != MSGPACK_OBJECT_STR)
		return;
	proto_histogram *h = &s->hist[s->n_hist];
	memset(h, 0, sizeof(*h));
	const msgpack_object *k, *v;
	const msgpack_object *le = NULL, *counts = NULL;
	FOR_KV(m, k, v) {
		if (key_is(k, "le_us") && v->type == MSGPACK_OBJECT_ARRAY) le = v;
		else if (key_is(k, "counts") && v->type == MSGPACK_OBJECT_ARRAY) counts = v;
		else if (key_is(k, "sum_us")) h->sum_us = as_u64(v);
		else if (key_is(k, "count")) h->count = as_u64(v);
	}
	if (!le || !counts || le->via.array.size > PROTO_HIST_MAX_LE ||
	    counts->via.array.size != le->via.array.size + 1)
		return;
	h->n_le = le->via.array.size;
	for (unsigned b = 0; b < h->n_le; b++) {
		h->le_us[b] = as_u64(&le->via.array.ptr[b]);
		if (b > 0 && h->le_us[b] <= h->le_us[b - 1])
			return;
	}
	for (unsigned b = 0; b <= h->n_le; b++)
		h->counts[b] = as_u64(&counts->via.array.ptr[b]);
	copy_str(name, h->name, sizeof(h->name));
	s->n_hist++;
}

/* One stage of stats' `stages`; a name too long or past the table is dropped. */
static void unpack_stage_stat(const msgpack_object *name, const msgpack_object *m, proto_stats *s)
{
	if (s->n_stages >= PROTO_MAX_STAGES || name->type != MSGPACK_OBJECT_STR ||
	    name->via.str.size == 0 || name->via.str.size >= sizeof(s->stages[0].name) ||
	    m->type != MSGPACK_OBJECT_MAP)
		return;
	proto_stage_stat *st = &s->stages[s->n_stages++];
	memset(st, 0, sizeof(*st));
	copy_str(name, st->name, sizeof(st->name));
	const msgpack_object *k, *v;
	FOR_KV(m, k, v) {
		if (key_is(k, "p50_us")) st->p50_us = as_f64(v);
		else if (key_is(k, "p99_us")) st->p99_us = as_f64(v);
		else if (key_is(k, "count")) st->count = as_u64(v);
	}
}

/* A reply's stages_ns: name -> ns, in the daemon's order. */
static void unpack_trace_stages(const msgpack_object *m, proto_trace *t)
{
	const msgpack_object *k, *v;
	t->n = 0;
	FOR_KV(m, k, v) {
		if (t->n >= PROTO_MAX_STAGES || k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
		    k->via.str.size >= sizeof(t->st[0].name))
			continue;
		copy_str(k, t->st[t->n].name, sizeof(t->st[0].name));
		t->st[t->n++].ns = as_u64(v);
	}
}

/* A reply's stream_us: name -> µs. */
static void unpack_stream(const msgpack_object *m, proto_stream_tl *t)
{
	const msgpack_object *k, *v;
	t->n = 0;
	FOR_KV(m, k, v) {
		if (t->n >= PROTO_MAX_STREAM_FIELDS || k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
		    k->via.str.size >= sizeof(t->f[0].name))
			continue;
		copy_str(k, t->f[t->n].name, sizeof(t->f[0].name));
		t->f[t->n++].us = as_u64(v);
	}
}

static void unpack_stats_kv(const msgpack_object *k, const msgpack_object *v, proto_stats *s)
{
	if (key_is(k, "uptime_s")) s->uptime_s = as_f64(v);
	else if (key_is(k, "clients")) s->clients = as_u64(v);
	else if (key_is(k, "regions")) s->regions = as_u64(v);
	else if (key_is(k, "region_bytes")) s->region_bytes = as_u64(v);
	else if (key_is(k, "jobs_done")) s->jobs_done = as_u64(v);
	else if (key_is(k, "jobs_failed")) s->jobs_failed = as_u64(v);
	else if (key_is(k, "batches")) s->batches = as_u64(v);
	else if (key_is(k, "jobs_per_batch_avg")) s->jobs_per_batch_avg = as_f64(v);
	else if (key_is(k, "pipelines")) s->pipelines = as_u64(v);
	else if (key_is(k, "pipeline_cache_hits")) s->pipeline_cache_hits = as_u64(v);
	else if (key_is(k, "jobs_queued")) s->jobs_queued = as_u64(v);
	else if (key_is(k, "jobs_running")) s->jobs_running = as_u64(v);
	else if (key_is(k, "host_imports")) s->host_imports = as_u64(v);
	else if (key_is(k, "staged_regions")) s->staged_regions = as_u64(v);
	else if (key_is(k, "validation_errors")) s->validation_errors = as_u64(v);
	else if (key_is(k, "devlocal_min_bytes")) s->devlocal_min_bytes = as_u64(v);
	else if (key_is(k, "devlocal_min_bytes_16bit")) s->devlocal_min_bytes_16bit = as_u64(v);
	else if (key_is(k, "devlocal_jobs")) s->devlocal_jobs = as_u64(v);
	else if (key_is(k, "devlocal_copy_bytes")) s->devlocal_copy_bytes = as_u64(v);
	else if (key_is(k, "splitk_jobs")) s->splitk_jobs = as_u64(v);
	else if (key_is(k, "dispatches")) s->dispatches = as_u64(v);
	else if (key_is(k, "scratch_bytes")) s->scratch_bytes = as_u64(v);
	else if (key_is(k, "scratch_failures")) s->scratch_failures = as_u64(v);
	else if (key_is(k, "stream_chunk_bytes")) s->stream_chunk_bytes = as_u64(v);
	else if (key_is(k, "stream_min_bytes")) s->stream_min_bytes = as_u64(v);
	else if (key_is(k, "stream_queues")) s->stream_queues = as_u64(v);
	else if (key_is(k, "stream_jobs")) s->stream_jobs = as_u64(v);
	else if (key_is(k, "stream_chunks")) s->stream_chunks = as_u64(v);
	else if (key_is(k, "stream_dw_blocks")) s->stream_dw_blocks = as_u64(v);
	else if (key_is(k, "spin_budget_us")) s->spin_budget_us = as_u64(v);
	else if (key_is(k, "spin_us")) s->spin_us = as_u64(v);
	else if (key_is(k, "spin_hits")) s->spin_hits = as_u64(v);
	else if (key_is(k, "blocking_waits")) s->blocking_waits = as_u64(v);
	else if (key_is(k, "stages")) {
		const msgpack_object *k2, *v2;
		s->n_stages = 0;
		FOR_KV(v, k2, v2)
			unpack_stage_stat(k2, v2, s);
	} else if (key_is(k, "histograms")) {
		const msgpack_object *k2, *v2;
		FOR_KV(v, k2, v2)
			unpack_histogram(k2, v2, s);
	}
}

int proto_reply_decode(const uint8_t *body, size_t len, proto_reply *r, proto_err *err)
{
	const char *why = NULL;
	memset(r, 0, sizeof(*r));
	if (proto_mpcheck(body, len, PROTO_MAX_DEPTH, &why) != 0) {
		proto_fail(err, PROTO_BAD_FRAME, "reply is not valid msgpack: %s", why);
		return -EBADMSG;
	}
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	int rc = 0;
	if (msgpack_unpack_next(&u, (const char *)body, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP) {
		proto_fail(err, PROTO_BAD_FRAME, "reply is not a msgpack map");
		rc = -EBADMSG;
		goto out;
	}
	bool have_id = false, have_ok = false;
	unsigned have_trace = 0;
	const msgpack_object *k, *v, *k2, *v2;
	FOR_KV(&u.data, k, v) {
		if (key_is(k, "id")) {
			r->id = as_u64(v);
			have_id = true;
		} else if (key_is(k, "ok") && v->type == MSGPACK_OBJECT_BOOLEAN) {
			r->ok = v->via.boolean;
			have_ok = true;
		} else if (key_is(k, "error")) {
			FOR_KV(v, k2, v2) {
				if (key_is(k2, "code") && v2->type == MSGPACK_OBJECT_STR)
					r->err.code = proto_code_from_name(v2->via.str.ptr, v2->via.str.size);
				else if (key_is(k2, "message"))
					copy_str(v2, r->err.message, sizeof(r->err.message));
			}
		} else if (key_is(k, "region")) {
			r->region = as_u64(v);
		} else if (key_is(k, "queued_us")) {
			r->queued_us = as_u64(v);
		} else if (key_is(k, "gpu_us")) {
			r->gpu_us = as_u64(v);
		} else if (key_is(k, "batch_jobs")) {
			r->batch_jobs = as_u64(v);
		} else if (key_is(k, "kernel_us")) {
			r->kernel_us = as_u64(v);
			r->has_kernel_us = true;
		} else if (key_is(k, "t_recv_ns")) {
			r->trace.t_recv_ns = as_u64(v);
			have_trace |= 1;
		} else if (key_is(k, "t_reply_ns")) {
			r->trace.t_reply_ns = as_u64(v);
			have_trace |= 2;
		} else if (key_is(k, "stream_us") && v->type == MSGPACK_OBJECT_MAP) {
			unpack_stream(v, &r->stream);
		} else if (key_is(k, "stages_ns") && v->type == MSGPACK_OBJECT_MAP) {
			unpack_trace_stages(v, &r->trace);
			have_trace |= 4;
		} else {
			unpack_stats_kv(k, v, &r->stats);
		}
	}
	unpack_hello(&u.data, &r->hello);
	/* a trace counts only whole: both times and the stages */
	r->trace.present = have_trace == 7;
	if (!have_id || !have_ok) {
		proto_fail(err, PROTO_BAD_FRAME, "reply lacks 'id' or 'ok'");
		rc = -EBADMSG;
	} else if (!r->ok && r->err.code == PROTO_OK) {
		r->err.code = PROTO_INTERNAL;
	}
out:
	msgpack_unpacked_destroy(&u);
	return rc;
}
