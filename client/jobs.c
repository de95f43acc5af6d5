/* client/jobs.c — jobs: a linear layer's forward and backward, run
 * synchronously or submitted for a handle, and the handle's end: polled,
 * waited for, or the next finished one of any. */
#include "vkgrad_priv.h"
#include "vkgrad_full.h"

#include "msg.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>

vkg_job vkg_full_job_init(void)
{
	vkg_job j;
	memset(&j, 0, sizeof(j));
	j.x.region = j.dy.region = j.w.region = VKG_NONE;
	j.dw.region = j.db.region = j.dx.region = VKG_NONE;
	j.y.region = j.z.region = VKG_NONE;
	return j;
}

vkg_job_0_1 vkg_job_init(void)
{
	const vkg_job full = vkg_full_job_init();
	vkg_job_0_1 j;
	_Static_assert(sizeof(j) == VKG_JOB_SIZE_0_1, "vkg_job_0_1 is vkg_job's 0.1 part");
	memcpy(&j, &full, sizeof(j));
	return j;
}

/* Key `activation` (NULL: none) into req. */
static int job_activation(const char *activation, proto_request *req, vkg_error *err)
{
	if (!activation)
		return 0;
	const int a = proto_activation_parse(activation, strlen(activation));
	if (a < 0)
		return vkg__set_err(err, -EINVAL, "io", "activation '%s' is not one of none, relu, gelu",
				    activation);
	req->activation = (proto_activation)a;
	return 0;
}

/* A job's dtype, variant and shape into req (op set by the caller). */
static int job_common(const char *dtype, const char *variant, uint64_t batch, uint64_t in,
		      uint64_t out, bool accumulate, proto_request *req, vkg_error *err)
{
	const char *dt = dtype ? dtype : "f32";
	int d = -1;
	for (int i = 0; i < PROTO_DTYPE_COUNT; i++)
		if (strcmp(dt, proto_dtype_name((proto_dtype)i)) == 0)
			d = i;
	if (d < 0)
		return vkg__set_err(err, -EINVAL, "io", "dtype '%s' is not one of f32, f16, bf16",
				    dt);
	req->dtype = (proto_dtype)d;
	req->batch = batch;
	req->in = in;
	req->out = out;
	req->accumulate = accumulate;
	if (variant) {
		int v = proto_variant_parse(variant);
		if (v < 0) {
			char names[192];
			proto_variant_list(names, sizeof(names), -1, NULL, NULL);
			return vkg__set_err(err, -EINVAL, "io", "variant '%s' is not one of %s",
					    variant, names);
		}
		req->variant = (proto_variant)v;
	}
	return 0;
}

/* The tensors of t (NULL: not one of the op's) into req. */
static void job_tensors(const vkg_tensor *const t[PROTO_T_COUNT], proto_request *req)
{
	for (int i = 0; i < PROTO_T_COUNT; i++) {
		req->t[i].present = t[i] && t[i]->region != VKG_NONE;
		if (req->t[i].present && t[i]->region == VKG_DEVICE_TENSOR) {
			/* a device tensor: its id in offset (vkg_device_tensor) */
			req->t[i].is_tensor = true;
			req->t[i].tensor = t[i]->offset;
			continue;
		}
		req->t[i].region = t[i] ? t[i]->region : 0;
		req->t[i].offset = t[i] ? t[i]->offset : 0;
	}
}

static int job_to_request(const vkg_job *job, proto_request *req, vkg_error *err)
{
	memset(req, 0, sizeof(*req));
	req->op = PROTO_OP_LINEAR_BACKWARD;
	int rc = job_common(job->dtype, job->variant, job->batch, job->in, job->out, job->accumulate,
			    req, err);
	if (rc)
		return rc;
	const vkg_tensor *t[PROTO_T_COUNT] = {
		[PROTO_T_X] = &job->x,	 [PROTO_T_DY] = &job->dy, [PROTO_T_W] = &job->w,
		[PROTO_T_DW] = &job->dw, [PROTO_T_DB] = &job->db, [PROTO_T_DX] = &job->dx,
		[PROTO_T_Y] = &job->y,	 [PROTO_T_Z] = &job->z,
	};
	job_tensors(t, req);
	return job_activation(job->activation, req, err);
}

vkg_forward_job vkg_forward_job_init(void)
{
	vkg_forward_job j;
	memset(&j, 0, sizeof(j));
	j.x.region = j.w.region = j.b.region = j.y.region = j.z.region = VKG_NONE;
	return j;
}

static int forward_to_request(const vkg_forward_job *job, proto_request *req, vkg_error *err)
{
	memset(req, 0, sizeof(*req));
	req->op = PROTO_OP_LINEAR_FORWARD;
	int rc = job_common(job->dtype, job->variant, job->batch, job->in, job->out, job->accumulate,
			    req, err);
	if (rc)
		return rc;
	const vkg_tensor *t[PROTO_T_COUNT] = {
		[PROTO_T_X] = &job->x, [PROTO_T_W] = &job->w, [PROTO_T_B] = &job->b, [PROTO_T_Y] = &job->y,
		[PROTO_T_Z] = &job->z,
	};
	job_tensors(t, req);
	return job_activation(job->activation, req, err);
}

/* A built request (rc 0 from its builder), waited for into res. */
static int call_built(vkg_client *c, int rc, proto_request *req, vkg_result *res, vkg_error *err)
{
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = vkg__conn_call(c, req, -1, NULL, res, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* A built request (rc 0 from its builder), sent; its handle in *handle. */
static int submit_built(vkg_client *c, int rc, proto_request *req, uint64_t *handle,
			vkg_error *err)
{
	if (rc)
		return rc;
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	rc = vkg__conn_request(c, req, -1, NULL, &id, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && handle)
		*handle = id;
	return rc;
}

int vkg_linear_forward(vkg_client *c, const vkg_forward_job *job, vkg_result *res, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req;
	return call_built(c, forward_to_request(job, &req, err), &req, res, err);
}

int vkg_submit_forward(vkg_client *c, const vkg_forward_job *job, uint64_t *handle, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req;
	return submit_built(c, forward_to_request(job, &req, err), &req, handle, err);
}

int vkg_full_linear_backward(vkg_client *c, const vkg_job *job, vkg_result *res, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req;
	return call_built(c, job_to_request(job, &req, err), &req, res, err);
}

int vkg_full_submit(vkg_client *c, const vkg_job *job, uint64_t *handle, vkg_error *err)
{
	vkg__clear_err(err);
	proto_request req;
	return submit_built(c, job_to_request(job, &req, err), &req, handle, err);
}

/* 0.1's entry points: the caller's job is 0.1's size */
static vkg_job job_0_1(const vkg_job *job)
{
	vkg_job j = vkg_full_job_init();
	memcpy(&j, job, VKG_JOB_SIZE_0_1);
	return j;
}

int vkg_linear_backward(vkg_client *c, const vkg_job *job, vkg_result *res, vkg_error *err)
{
	const vkg_job j = job_0_1(job);
	return vkg_full_linear_backward(c, &j, res, err);
}

int vkg_submit(vkg_client *c, const vkg_job *job, uint64_t *handle, vkg_error *err)
{
	const vkg_job j = job_0_1(job);
	return vkg_full_submit(c, &j, handle, err);
}

int vkg_poll(vkg_client *c, uint64_t handle, vkg_result *res, vkg_error *err)
{
	vkg__clear_err(err);
	pthread_mutex_lock(&c->lock);
	vkg_entry *e;
	int rc = vkg__conn_wait(c, handle, 0, &e, err);
	if (rc == 0)
		rc = vkg__entry_consume(c, e, res, NULL, err);
	else if (rc == -ETIMEDOUT)
		rc = vkg__set_err(err, -EAGAIN, "io", "job %llu is still running",
				  (unsigned long long)handle);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* vkg_poll_any with the lock held. */
static int poll_any_locked(vkg_client *c, uint64_t *handle, vkg_result *res, vkg_error *err)
{
	vkg__conn_drain(c);
	int rc = -EAGAIN;
	for (size_t i = 0; i < c->n_entries; i++) {
		if (!c->entries[i].done)
			continue;
		if (handle)
			*handle = c->entries[i].id;
		rc = vkg__entry_consume(c, &c->entries[i], res, NULL, err);
		goto out;
	}
	if (c->n_entries == 0) {
		rc = c->dead_rc ? vkg__dead_err(c, err)
				: vkg__set_err(err, -ENOENT, "io", "no job is outstanding");
	} else if (c->dead_rc) {
		/* report the dead connection once per outstanding handle */
		if (handle)
			*handle = c->entries[0].id;
		vkg__entry_remove(c, &c->entries[0]);
		rc = vkg__dead_err(c, err);
	} else {
		vkg__set_err(err, -EAGAIN, "io", "no job has finished yet");
	}
out:
	return rc;
}

int vkg_poll_any(vkg_client *c, uint64_t *handle, vkg_result *res, vkg_error *err)
{
	vkg__clear_err(err);
	pthread_mutex_lock(&c->lock);
	int rc = poll_any_locked(c, handle, res, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_wait_any(vkg_client *c, uint64_t *handle, int timeout_ms, vkg_result *res,
		 vkg_error *err)
{
	vkg__clear_err(err);
	pthread_mutex_lock(&c->lock);
	const int64_t deadline = timeout_ms >= 0 ? vkg__now_ms() + timeout_ms : 0;
	uint64_t spin = (uint64_t)c->spin_us * 1000;
	if (timeout_ms >= 0 && spin > (uint64_t)timeout_ms * 1000000)
		spin = (uint64_t)timeout_ms * 1000000;
	const uint64_t spin_until = vkg__now_ns() + spin;
	int rc;
	while ((rc = poll_any_locked(c, handle, res, err)) == -EAGAIN) {
		if (spin && vkg__now_ns() < spin_until) {
			vkg__cpu_relax();
			continue;
		}
		int wait = -1;
		if (timeout_ms >= 0) {
			const int64_t left = deadline - vkg__now_ms();
			if (left <= 0) {
				rc = vkg__set_err(err, -ETIMEDOUT, "io",
						  "no job finished within %d ms", timeout_ms);
				break;
			}
			wait = left > INT_MAX ? INT_MAX : (int)left;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, wait) < 0 && errno != EINTR) {
			rc = vkg__set_err(err, -errno, "io", "poll: %s", strerror(errno));
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_wait(vkg_client *c, uint64_t handle, int timeout_ms, vkg_result *res, vkg_error *err)
{
	vkg__clear_err(err);
	pthread_mutex_lock(&c->lock);
	vkg_entry *e;
	int rc = vkg__conn_wait(c, handle, timeout_ms, &e, err);
	if (rc == 0)
		rc = vkg__entry_consume(c, e, res, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
