/* proto/mpobj.h — small readers of unpacked msgpack objects shared by
 * request_decode.c and reply_decode.c (internal to proto/). */
#ifndef VKG_PROTO_MPOBJ_H
#define VKG_PROTO_MPOBJ_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Is k the string s? */
static inline bool mpobj_key_is(const msgpack_object *k, const char *s)
{
	const size_t n = strlen(s);
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && memcmp(k->via.str.ptr, s, n) == 0;
}

/* A number as uint64 (a negative or NaN one reads 0, a larger one clamps),
 * a number as double, a string copied (cut, NUL-terminated), a map walked:
 * for the additions' decoders (opstats.c, clients.c). */
static inline uint64_t mpobj_u64(const msgpack_object *v)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return v->via.u64;
	if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32) {
		if (!(v->via.f64 > 0))
			return 0;
		if (v->via.f64 >= 18446744073709551616.0)
			return UINT64_MAX;
		return (uint64_t)v->via.f64;
	}
	return 0;
}

static inline double mpobj_f64(const msgpack_object *v)
{
	if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
		return v->via.f64;
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		return (double)v->via.u64;
	if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		return (double)v->via.i64;
	return 0;
}

static inline void mpobj_copy_str(const msgpack_object *v, char *out, size_t cap)
{
	if (v->type != MSGPACK_OBJECT_STR || cap == 0)
		return;
	size_t n = v->via.str.size < cap - 1 ? v->via.str.size : cap - 1;
	memcpy(out, v->via.str.ptr, n);
	out[n] = 0;
}

#define MPOBJ_FOR_KV(mapobj, kp, vp)                                                         \
	for (uint32_t _j = 0; (mapobj)->type == MSGPACK_OBJECT_MAP &&                        \
			      _j < (mapobj)->via.map.size &&                                 \
			      ((kp) = &(mapobj)->via.map.ptr[_j].key,                        \
			       (vp) = &(mapobj)->via.map.ptr[_j].val, 1);                    \
	     _j++)

#endif
