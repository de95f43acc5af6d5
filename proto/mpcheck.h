/* proto/mpcheck.h — bound a msgpack body before msgpack-c unpacks it.
 *
 * msgpack-c allocates count × sizeof(msgpack_object) as soon as it reads an
 * array or map header, before any element arrives (the 5 bytes dd ff ff ff ff
 * ask for ~96 GB; msgpack-c issues #985/#1013). This walker checks, without
 * allocating, that the body is exactly one well-formed object, that every
 * container's element count fits in the bytes left, that every str/bin/ext
 * length fits, and that nesting stays within max_depth.
 */
#ifndef VKG_PROTO_MPCHECK_H
#define VKG_PROTO_MPCHECK_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAX_DEPTH 16

/* Returns 0 when the body is one bounded msgpack object, else -EBADMSG and
 * a static reason in *why. */
int proto_mpcheck(const uint8_t *p, size_t n, unsigned max_depth, const char **why);

#endif
