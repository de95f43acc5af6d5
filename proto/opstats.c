/* proto/opstats.c — see opstats.h. */
#include "opstats.h"

#include "mpobj.h"

#include <string.h>

static const char *const refusal_names[PROTO_REFUSED_COUNT] = {
	[PROTO_REFUSED_ALLOW_LIST] = "allow_list",
	[PROTO_REFUSED_MAX_CONNECTIONS] = "max_connections",
	[PROTO_REFUSED_MAX_CONNECTIONS_PER_UID] = "max_connections_per_uid",
};

const char *proto_refusal_name(proto_refusal r)
{
	return (unsigned)r < PROTO_REFUSED_COUNT ? refusal_names[r] : "?";
}

static void put_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void put_u(msgpack_packer *pk, const char *k, uint64_t v)
{
	put_str(pk, k);
	msgpack_pack_uint64(pk, v);
}

/* {code: n} for every code but ok */
static void put_by_code(msgpack_packer *pk, const char *key, const uint64_t *v)
{
	put_str(pk, key);
	msgpack_pack_map(pk, PROTO_CODE_COUNT - 1);
	for (int c = 1; c < PROTO_CODE_COUNT; c++)
		put_u(pk, proto_code_name((proto_code)c), v[c]);
}

unsigned proto_opstats_keys(const proto_stats *s)
{
	return s->has_counters ? 8 : 0;
}

void proto_opstats_pack(msgpack_packer *pk, const proto_stats *s)
{
	if (!s->has_counters)
		return;
	put_by_code(pk, "jobs_failed_by_code", s->jobs_failed_by_code);
	put_by_code(pk, "requests_rejected_by_code", s->requests_rejected_by_code);
	put_str(pk, "connections_refused");
	msgpack_pack_map(pk, PROTO_REFUSED_COUNT);
	for (int r = 0; r < PROTO_REFUSED_COUNT; r++)
		put_u(pk, refusal_names[r], s->connections_refused[r]);
	put_u(pk, "device_losses", s->device_losses);
	put_u(pk, "device_recoveries", s->device_recoveries);
	put_u(pk, "device_recovery_failures", s->device_recovery_failures);
	put_str(pk, "started_unix_s");
	msgpack_pack_double(pk, s->started_unix_s);
	put_str(pk, "uids");
	unsigned n = s->n_uids < PROTO_MAX_UIDS ? s->n_uids : PROTO_MAX_UIDS;
	msgpack_pack_array(pk, n);
	for (unsigned i = 0; i < n; i++) {
		const proto_uid_stat *u = &s->uids[i];
		msgpack_pack_map(pk, 4);
		put_u(pk, "uid", u->uid);
		put_u(pk, "jobs_done", u->jobs_done);
		put_u(pk, "jobs_failed", u->jobs_failed);
		put_u(pk, "gpu_us", u->gpu_us);
	}
}

/* {code: n}: known codes only (a newer daemon's are dropped) */
static void get_by_code(const msgpack_object *m, uint64_t *out)
{
	const msgpack_object *k, *v;
	MPOBJ_FOR_KV(m, k, v) {
		if (k->type != MSGPACK_OBJECT_STR)
			continue;
		for (int c = 1; c < PROTO_CODE_COUNT; c++)
			if (mpobj_key_is(k, proto_code_name((proto_code)c)))
				out[c] = mpobj_u64(v);
	}
}

bool proto_opstats_unpack_kv(const msgpack_object *k, const msgpack_object *v, proto_stats *s)
{
	const msgpack_object *k2, *v2;
	if (mpobj_key_is(k, "jobs_failed_by_code")) {
		get_by_code(v, s->jobs_failed_by_code);
	} else if (mpobj_key_is(k, "requests_rejected_by_code")) {
		get_by_code(v, s->requests_rejected_by_code);
	} else if (mpobj_key_is(k, "connections_refused")) {
		MPOBJ_FOR_KV(v, k2, v2)
			for (int r = 0; r < PROTO_REFUSED_COUNT; r++)
				if (mpobj_key_is(k2, refusal_names[r]))
					s->connections_refused[r] = mpobj_u64(v2);
	} else if (mpobj_key_is(k, "device_losses")) {
		s->device_losses = mpobj_u64(v);
	} else if (mpobj_key_is(k, "device_recoveries")) {
		s->device_recoveries = mpobj_u64(v);
	} else if (mpobj_key_is(k, "device_recovery_failures")) {
		s->device_recovery_failures = mpobj_u64(v);
	} else if (mpobj_key_is(k, "started_unix_s")) {
		s->started_unix_s = mpobj_f64(v);
	} else if (mpobj_key_is(k, "uids")) {
		s->n_uids = 0;
		if (v->type != MSGPACK_OBJECT_ARRAY)
			return true;
		for (uint32_t i = 0; i < v->via.array.size && s->n_uids < PROTO_MAX_UIDS; i++) {
			const msgpack_object *e = &v->via.array.ptr[i];
			if (e->type != MSGPACK_OBJECT_MAP)
				continue;
			proto_uid_stat *u = &s->uids[s->n_uids++];
			memset(u, 0, sizeof(*u));
			MPOBJ_FOR_KV(e, k2, v2) {
				if (mpobj_key_is(k2, "uid")) {
					uint64_t x = mpobj_u64(v2);
					u->uid = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
				} else if (mpobj_key_is(k2, "jobs_done")) {
					u->jobs_done = mpobj_u64(v2);
				} else if (mpobj_key_is(k2, "jobs_failed")) {
					u->jobs_failed = mpobj_u64(v2);
				} else if (mpobj_key_is(k2, "gpu_us")) {
					u->gpu_us = mpobj_u64(v2);
				}
			}
		}
	} else {
		return false;
	}
	s->has_counters = true;
	return true;
}
