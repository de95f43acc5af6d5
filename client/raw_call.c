/* client/raw_call.c — vkg_call_raw: any request, by its op's name and
 * msgpack args, answered by the reply's whole msgpack body (what the CLI's
 * queries without a call of their own use, such as clients). */
#include "vkgrad_priv.h"

#include "frame.h"
#include "mpcheck.h"
#include "msg.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* The pairs of one msgpack map: their count and where they start. */
static int raw_args_map(const uint8_t *a, size_t n, uint32_t *pairs, size_t *hdr, vkg_error *err)
{
	const char *why = NULL;
	*pairs = 0;
	*hdr = 0;
	if (n == 0)
		return 0;
	if (proto_mpcheck(a, n, PROTO_MAX_DEPTH, &why) != 0)
		return vkg__set_err(err, -EINVAL, "io", "args are not one msgpack object: %s", why);
	if ((a[0] & 0xf0) == 0x80) {
		*pairs = a[0] & 0x0f;
		*hdr = 1;
	} else if (a[0] == 0xde) { /* mpcheck made sure the header is whole */
		*pairs = (uint32_t)a[1] << 8 | a[2];
		*hdr = 3;
	} else if (a[0] == 0xdf) {
		*pairs = (uint32_t)a[1] << 24 | (uint32_t)a[2] << 16 | (uint32_t)a[3] << 8 | a[4];
		*hdr = 5;
	} else {
		return vkg__set_err(err, -EINVAL, "io",
				    "args must be one msgpack map (first byte 0x%02x)", a[0]);
	}
	if (*pairs > UINT32_MAX - 2)
		return vkg__set_err(err, -EINVAL, "io", "args hold too many keys");
	return 0;
}

/* {op, id, args' pairs...} as one frame. */
static int raw_encode(msgpack_sbuffer *sb, const char *op, uint64_t id, const uint8_t *args,
		      size_t args_len, uint32_t pairs, size_t hdr)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	static const char zero[PROTO_FRAME_HDR] = {0};
	msgpack_sbuffer_write(sb, zero, PROTO_FRAME_HDR);
	msgpack_pack_map(&pk, pairs + 2);
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "op", 2);
	msgpack_pack_str(&pk, strlen(op));
	msgpack_pack_str_body(&pk, op, strlen(op));
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "id", 2);
	msgpack_pack_uint64(&pk, id);
	if (args_len > hdr)
		msgpack_sbuffer_write(sb, (const char *)args + hdr, args_len - hdr);
	if (!sb->data || sb->size < PROTO_FRAME_HDR)
		return -ENOMEM;
	if (sb->size - PROTO_FRAME_HDR > UINT32_MAX)
		return -EMSGSIZE;
	proto_frame_put_len((uint8_t *)sb->data, (uint32_t)(sb->size - PROTO_FRAME_HDR));
	return 0;
}

int vkg_call_raw(vkg_client *c, const char *op, const void *args, size_t args_len, void **reply,
		 size_t *reply_len, vkg_error *err)
{
	vkg__clear_err(err);
	*reply = NULL;
	*reply_len = 0;
	if (!op || !*op)
		return vkg__set_err(err, -EINVAL, "io", "op must be a non-empty string");
	uint32_t pairs;
	size_t hdr;
	int rc = raw_args_map(args, args ? args_len : 0, &pairs, &hdr, err);
	if (rc)
		return rc;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	pthread_mutex_lock(&c->lock);
	if (c->dead_rc) {
		rc = vkg__dead_err(c, err);
		goto out;
	}
	const uint64_t t_submit = vkg__now_ns(), id = c->next_id++;
	rc = raw_encode(&sb, op, id, args, args ? args_len : 0, pairs, hdr);
	if (rc) {
		rc = vkg__set_err(err, rc, "io", "encoding the %s request failed: %s", op,
				  strerror(-rc));
		goto out;
	}
	rc = vkg__conn_send_request(c, id, &sb, -1, NULL, true, t_submit, err);
	if (rc)
		goto out;
	vkg_entry *e;
	rc = vkg__conn_wait_own(c, id, &e, err);
	if (rc)
		goto out;
	if (!e->raw) {
		rc = vkg__set_err(err, -ENOMEM, "io", "out of memory keeping a %zu-byte reply",
				  e->raw_len);
		vkg__entry_remove(c, e);
		goto out;
	}
	*reply = e->raw;
	*reply_len = e->raw_len;
	e->raw = NULL;
	rc = vkg__entry_consume(c, e, NULL, NULL, err);
out:
	pthread_mutex_unlock(&c->lock);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}
