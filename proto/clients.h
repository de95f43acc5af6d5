/* proto/clients.h — the `clients` op (an addition to protocol v1,
 * proto/README.md): the connections open now, one entry each, the way
 * pw-top lists PipeWire's clients. Request {op: "clients", id}; reply
 * {id, ok: true, clients: [{pid, uid, gid, name, connected_s, jobs_done,
 * jobs_failed, inflight, gpu_us, regions, region_bytes, tensors,
 * device_bytes}, ...]}, the
 * asking connection included. A daemon before the addition answers
 * unknown_op. */
#ifndef VKG_PROTO_CLIENTS_H
#define VKG_PROTO_CLIENTS_H

#include <stdint.h>

#include <msgpack.h>

#include "msg.h"

typedef struct proto_client_info {
	int32_t pid;          /* SO_PEERCRED at connect */
	uint32_t uid, gid;
	char name[64];        /* what its hello said (`client`), raw; "" if none */
	double connected_s;   /* seconds since it connected */
	uint64_t jobs_done, jobs_failed; /* accepted jobs finished / failed */
	uint64_t inflight;    /* jobs queued or running now */
	uint64_t gpu_us;      /* GPU time charged to its jobs (proto/README.md) */
	uint64_t regions, region_bytes; /* registered now */
	uint64_t tensors, device_bytes; /* device tensors held now (addition) */
} proto_client_info;

/* Append one framed reply to sb: n entries of v. 0 or -ENOMEM. */
int proto_clients_encode(msgpack_sbuffer *sb, uint64_t id, const proto_client_info *v, unsigned n);
/* Decode a reply body: *out malloc'd (free() it, NULL when *n is 0), *n
 * entries. An error reply gives -EREMOTE with err set from it; a body
 * that is not a clients reply -EBADMSG. */
int proto_clients_decode(const uint8_t *body, size_t len, proto_client_info **out, unsigned *n,
			 proto_err *err);

#endif
