/* proto/codes.c — the error codes' wire names (msg.h proto_code), both
 * ways: below everything else of proto/, which names codes through it
 * (msg.c's replies, opstats.c's per-code counts, reply_decode.c). */
#include "msg.h"

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
