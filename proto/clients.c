/* proto/clients.c — see clients.h. */
#include "clients.h"

#include "frame.h"
#include "mpcheck.h"
#include "mpobj.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void put_str(msgpack_packer *pk, const char *s, size_t n)
{
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void put_key(msgpack_packer *pk, const char *k)
{
	put_str(pk, k, strlen(k));
}

static void put_u(msgpack_packer *pk, const char *k, uint64_t v)
{
	put_key(pk, k);
	msgpack_pack_uint64(pk, v);
}

int proto_clients_encode(msgpack_sbuffer *sb, uint64_t id, const proto_client_info *v, unsigned n)
{
	static const char zero[PROTO_FRAME_HDR] = {0};
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	const size_t at = sb->size;
	msgpack_sbuffer_write(sb, zero, PROTO_FRAME_HDR);
	msgpack_pack_map(&pk, 3);
	put_u(&pk, "id", id);
	put_key(&pk, "ok");
	msgpack_pack_true(&pk);
	put_key(&pk, "clients");
	msgpack_pack_array(&pk, n);
	for (unsigned i = 0; i < n; i++) {
		const proto_client_info *c = &v[i];
		msgpack_pack_map(&pk, 13);
		put_key(&pk, "pid");
		msgpack_pack_int64(&pk, c->pid);
		put_u(&pk, "uid", c->uid);
		put_u(&pk, "gid", c->gid);
		put_key(&pk, "name");
		put_str(&pk, c->name, strnlen(c->name, sizeof(c->name)));
		put_key(&pk, "connected_s");
		msgpack_pack_double(&pk, c->connected_s);
		put_u(&pk, "jobs_done", c->jobs_done);
		put_u(&pk, "jobs_failed", c->jobs_failed);
		put_u(&pk, "inflight", c->inflight);
		put_u(&pk, "gpu_us", c->gpu_us);
		put_u(&pk, "regions", c->regions);
		put_u(&pk, "region_bytes", c->region_bytes);
		put_u(&pk, "tensors", c->tensors);
		put_u(&pk, "device_bytes", c->device_bytes);
	}
	if (!sb->data || sb->size < at + PROTO_FRAME_HDR || sb->size - at - PROTO_FRAME_HDR > UINT32_MAX)
		return -ENOMEM;
	proto_frame_put_len((uint8_t *)sb->data + at, (uint32_t)(sb->size - at - PROTO_FRAME_HDR));
	return 0;
}

static void get_entry(const msgpack_object *m, proto_client_info *c)
{
	const msgpack_object *k, *v;
	memset(c, 0, sizeof(*c));
	MPOBJ_FOR_KV(m, k, v) {
		if (mpobj_key_is(k, "pid")) {
			if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= INT32_MAX)
				c->pid = (int32_t)v->via.u64;
			else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && v->via.i64 >= INT32_MIN)
				c->pid = (int32_t)v->via.i64;
		} else if (mpobj_key_is(k, "uid")) {
			uint64_t x = mpobj_u64(v);
			c->uid = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
		} else if (mpobj_key_is(k, "gid")) {
			uint64_t x = mpobj_u64(v);
			c->gid = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
		} else if (mpobj_key_is(k, "name")) {
			mpobj_copy_str(v, c->name, sizeof(c->name));
		} else if (mpobj_key_is(k, "connected_s")) {
			c->connected_s = mpobj_f64(v);
		} else if (mpobj_key_is(k, "jobs_done")) {
			c->jobs_done = mpobj_u64(v);
		} else if (mpobj_key_is(k, "jobs_failed")) {
			c->jobs_failed = mpobj_u64(v);
		} else if (mpobj_key_is(k, "inflight")) {
			c->inflight = mpobj_u64(v);
		} else if (mpobj_key_is(k, "gpu_us")) {
			c->gpu_us = mpobj_u64(v);
		} else if (mpobj_key_is(k, "regions")) {
			c->regions = mpobj_u64(v);
		} else if (mpobj_key_is(k, "region_bytes")) {
			c->region_bytes = mpobj_u64(v);
		} else if (mpobj_key_is(k, "tensors")) {
			c->tensors = mpobj_u64(v);
		} else if (mpobj_key_is(k, "device_bytes")) {
			c->device_bytes = mpobj_u64(v);
		}
	}
}

int proto_clients_decode(const uint8_t *body, size_t len, proto_client_info **out, unsigned *n,
			 proto_err *err)
{
	*out = NULL;
	*n = 0;
	const char *why = NULL;
	if (proto_mpcheck(body, len, PROTO_MAX_DEPTH, &why) != 0) {
		proto_fail(err, PROTO_BAD_FRAME, "clients reply is not valid msgpack: %s", why);
		return -EBADMSG;
	}
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	int rc = -EBADMSG;
	if (msgpack_unpack_next(&u, (const char *)body, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP) {
		proto_fail(err, PROTO_BAD_FRAME, "clients reply is not a msgpack map");
		goto out;
	}
	const msgpack_object *k, *v, *list = NULL;
	bool ok = false;
	MPOBJ_FOR_KV(&u.data, k, v) {
		if (mpobj_key_is(k, "ok") && v->type == MSGPACK_OBJECT_BOOLEAN)
			ok = v->via.boolean;
		else if (mpobj_key_is(k, "clients") && v->type == MSGPACK_OBJECT_ARRAY)
			list = v;
	}
	if (!ok) {
		proto_reply *r = malloc(sizeof(*r));
		proto_err e2;
		if (r && proto_reply_decode(body, len, r, &e2) == 0)
			*err = r->err;
		else
			proto_fail(err, PROTO_INTERNAL, "clients: the daemon refused");
		free(r);
		rc = -EREMOTE;
		goto out;
	}
	if (!list) {
		proto_fail(err, PROTO_BAD_FRAME, "clients reply lacks the array 'clients'");
		goto out;
	}
	const uint32_t cnt = list->via.array.size;
	if (cnt) {
		*out = calloc(cnt, sizeof(**out));
		if (!*out) {
			proto_fail(err, PROTO_INTERNAL, "clients: out of memory for %u entries", cnt);
			rc = -ENOMEM;
			goto out;
		}
	}
	for (uint32_t i = 0; i < cnt; i++)
		get_entry(&list->via.array.ptr[i], &(*out)[i]);
	*n = cnt;
	rc = 0;
out:
	msgpack_unpacked_destroy(&u);
	return rc;
}
