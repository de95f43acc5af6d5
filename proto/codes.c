/* proto/codes.c — the wire names of the error codes (msg.h proto_code) and
 * of the ops (proto_op), both ways, and errors as values (proto_fail,
 * proto_err_append): below the rest of proto/, which names codes and ops
 * and fails through it (msg.c's replies, opstats.c's per-code counts,
 * optim.c's checks, the decoders); it calls only text.c. */
#include "msg.h"

#include "text.h"

#include <stdarg.h>
#include <stdio.h>
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
	[PROTO_BAD_TENSOR] = "bad_tensor",
};

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

static const char *const op_names[PROTO_OP_COUNT] = {
	[PROTO_OP_HELLO] = "hello",
	[PROTO_OP_REGISTER] = "register",
	[PROTO_OP_UNREGISTER] = "unregister",
	[PROTO_OP_LINEAR_BACKWARD] = "linear_backward",
	[PROTO_OP_STATS] = "stats",
	[PROTO_OP_PING] = "ping",
	[PROTO_OP_CLIENTS] = "clients",
	[PROTO_OP_LINEAR_FORWARD] = "linear_forward",
	[PROTO_OP_TENSOR_NEW] = "tensor_new",
	[PROTO_OP_TENSOR_WRITE] = "tensor_write",
	[PROTO_OP_TENSOR_READ] = "tensor_read",
	[PROTO_OP_TENSOR_FREE] = "tensor_free",
	[PROTO_OP_SGD_STEP] = "sgd_step",
	[PROTO_OP_ADAM_STEP] = "adam_step",
};

const char *proto_op_name(proto_op op)
{
	return (unsigned)op < PROTO_OP_COUNT ? op_names[op] : "?";
}

int proto_op_parse(const char *s, size_t n)
{
	for (int i = 0; i < PROTO_OP_COUNT; i++)
		if (strlen(op_names[i]) == n && memcmp(op_names[i], s, n) == 0)
			return i;
	return -1;
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
