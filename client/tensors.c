/* client/tensors.c — device tensors (vkgrad.h, "device tensors"): made,
 * written, read and freed, synchronously or for a handle. Their place
 * as a job's operand (VKG_DEVICE_TENSOR) is jobs.c's. */
#include "vkgrad_priv.h"

#include "msg.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

int vkg_tensor_new(vkg_client *c, const char *dtype, uint64_t rows, uint64_t cols,
		   uint64_t *tensor, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req;
	memset(&req, 0, sizeof(req));
	req.op = PROTO_OP_TENSOR_NEW;
	const char *dt = dtype ? dtype : "f32";
	int d = -1;
	for (int i = 0; i < PROTO_DTYPE_COUNT; i++)
		if (strcmp(dt, proto_dtype_name((proto_dtype)i)) == 0)
			d = i;
	if (d < 0)
		return vkg__set_err(err, -EINVAL, "io", "dtype '%s' is not one of f32, f16, bf16", dt);
	req.dtype = (proto_dtype)d;
	req.rows = rows;
	req.cols = cols;
	pthread_mutex_lock(&c->lock);
	uint64_t id;
	int rc = vkg__conn_request(c, &req, -1, NULL, &id, err);
	vkg_entry *e = NULL;
	if (rc == 0)
		rc = vkg__conn_wait_own(c, id, &e, err);
	if (rc == 0) {
		const uint64_t t = e->tensor;
		rc = vkg__entry_consume(c, e, NULL, NULL, err);
		if (rc == 0 && tensor)
			*tensor = t;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* tensor_write, tensor_read or tensor_free sent; *handle its id */
static int tensor_send(vkg_client *c, proto_op op, uint64_t tensor, uint64_t region,
		       uint64_t offset, uint64_t *handle, vkg_error *err)
{
	proto_request req;
	memset(&req, 0, sizeof(req));
	req.op = op;
	req.tensor = tensor;
	req.io = (proto_tensor){.present = true, .region = region, .offset = offset};
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_request(c, &req, -1, NULL, &id, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && handle)
		*handle = id;
	return rc;
}

static int tensor_call(vkg_client *c, proto_op op, uint64_t tensor, uint64_t region,
		       uint64_t offset, vkg_error *err)
{
	proto_request req;
	memset(&req, 0, sizeof(req));
	req.op = op;
	req.tensor = tensor;
	req.io = (proto_tensor){.present = true, .region = region, .offset = offset};
	pthread_mutex_lock(&c->lock);
	int rc = vkg__conn_call(c, &req, -1, NULL, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_tensor_write(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
		     vkg_error *err)
{
	vkg__clear_err(err);
	return tensor_call(c, PROTO_OP_TENSOR_WRITE, tensor, region, offset, err);
}

int vkg_tensor_read(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
		    vkg_error *err)
{
	vkg__clear_err(err);
	return tensor_call(c, PROTO_OP_TENSOR_READ, tensor, region, offset, err);
}

int vkg_tensor_free(vkg_client *c, uint64_t tensor, vkg_error *err)
{
	vkg__clear_err(err);
	return tensor_call(c, PROTO_OP_TENSOR_FREE, tensor, 0, 0, err);
}

int vkg_submit_tensor_write(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
			    uint64_t *handle, vkg_error *err)
{
	vkg__clear_err(err);
	return tensor_send(c, PROTO_OP_TENSOR_WRITE, tensor, region, offset, handle, err);
}

int vkg_submit_tensor_read(vkg_client *c, uint64_t tensor, uint64_t region, uint64_t offset,
			   uint64_t *handle, vkg_error *err)
{
	vkg__clear_err(err);
	return tensor_send(c, PROTO_OP_TENSOR_READ, tensor, region, offset, handle, err);
}

int vkg_submit_tensor_free(vkg_client *c, uint64_t tensor, uint64_t *handle, vkg_error *err)
{
	vkg__clear_err(err);
	return tensor_send(c, PROTO_OP_TENSOR_FREE, tensor, 0, 0, handle, err);
}
