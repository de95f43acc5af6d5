/* proto/mpobj.h — small readers of unpacked msgpack objects shared by
 * request_decode.c and reply_decode.c (internal to proto/). */
#ifndef VKG_PROTO_MPOBJ_H
#define VKG_PROTO_MPOBJ_H

#include <msgpack.h>
#include <stdbool.h>
#include <string.h>

/* Is k the string s? */
static inline bool mpobj_key_is(const msgpack_object *k, const char *s)
{
	const size_t n = strlen(s);
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, s, n) == 0;
}

#endif
