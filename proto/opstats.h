/* proto/opstats.h — the operators' additions to the `stats` reply
 * (proto/README.md, "stats: counters for operators"): failures and
 * rejections by error code, refused connections by reason, device losses
 * and recoveries, the start time, per-uid jobs and GPU time. msg.c packs
 * them after the older keys; reply_decode.c hands every key it does not
 * know to proto_opstats_unpack_kv. Internal to proto/. */
#ifndef VKG_PROTO_OPSTATS_H
#define VKG_PROTO_OPSTATS_H

#include <stdbool.h>

#include <msgpack.h>

#include "msg.h"

/* Keys proto_opstats_pack writes (0 unless s->has_counters). */
unsigned proto_opstats_keys(const proto_stats *s);
void proto_opstats_pack(msgpack_packer *pk, const proto_stats *s);
/* One key/value of a stats reply: true when it was one of these. */
bool proto_opstats_unpack_kv(const msgpack_object *k, const msgpack_object *v, proto_stats *s);

#endif
