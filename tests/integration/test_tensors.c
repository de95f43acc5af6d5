/* tests/integration/test_tensors.c — device tensors (proto/README.md,
 * "Device tensors"): tensor_new, tensor_write, tensor_read, tensor_free and
 * {"tensor": T} operands of linear_backward and linear_forward, through
 * libvkgrad (vkg_tensor_*, vkg_device_tensor).
 *
 *  - ordering: writes, a job naming the tensors and reads, submitted back to
 *    back without waiting, give the float64 reference's result (f32 and
 *    bf16, backward and forward, tensors and client memory mixed; client
 *    memory staged, lavapipe's default, and imported in place);
 *  - zeros: a new tensor reads as zeros, also after another client freed a
 *    tensor full of its data;
 *  - isolation and bad input (each followed by a job that succeeds):
 *    another connection's id, a freed id, dtype and shape mismatches, an
 *    output naming an input's tensor, a region too small, misaligned or
 *    unknown for tensor_write / tensor_read, an allocation over each limit
 *    (max_tensor_bytes, max_tensors, max_device_bytes_per_uid,
 *    max_device_bytes), hello's limits;
 *  - a client that disconnects holding tensors (a job on them queued):
 *    the daemon's device bytes return to where they were; `clients` and
 *    `stats` count tensors and bytes meanwhile;
 *  - device loss (VKGRAD_FAULT_INJECT): the op in the lost batch and every
 *    later op naming a tensor from before answer device_lost, tensor_free
 *    of one answers ok, and new tensors work after the recovery.
 * Shapes stay small: lavapipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients.h"
#include "daemon_proc.h"
#include "expect.h"
#include "rawsock.h"
#include "ref.h"
#include "vkgrad.h"

static daemon_proc g_d;

/* ---- helpers ----------------------------------------------------------------- */

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill_rand(float *v, size_t n, uint64_t seed)
{
	uint64_t s = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((double)(rng(&s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static uint64_t tnew(vkg_client *c, const char *dt, uint64_t rows, uint64_t cols)
{
	vkg_error err;
	uint64_t t = 0;
	if (vkg_tensor_new(c, dt, rows, cols, &t, &err) != 0)
		fail_msg("tensor_new %s %llu x %llu: %s: %s", dt, (unsigned long long)rows,
			 (unsigned long long)cols, err.code, err.message);
	assert_true(t != 0);
	return t;
}

/* rc must be VKG_EREMOTE with code and a message holding needle (and needle2) */
static void expect_remote(int rc, const vkg_error *err, const char *code, const char *needle,
			  const char *needle2, const char *what)
{
	if (rc != VKG_EREMOTE || strcmp(err->code, code) != 0)
		fail_msg("%s: rc %d, %s: %s (want %s)", what, rc, err->code, err->message, code);
	if ((needle && !strstr(err->message, needle)) || (needle2 && !strstr(err->message, needle2)))
		fail_msg("%s: message '%s' lacks '%s' / '%s'", what, err->message, needle,
			 needle2 ? needle2 : "");
}

/* One backward problem in a region: inputs x, dy, w (stored as dtype),
 * outputs dw, db, dx; offsets in bytes. */
typedef struct prob {
	proto_dtype dt;
	uint64_t batch, in, out;
	uint64_t region, size;
	uint8_t *map;
	uint64_t off[PROTO_T_COUNT];
	float *x, *dy, *w; /* the stored inputs, as floats */
} prob;

static uint64_t slot_elems(const prob *p, int t)
{
	switch (t) {
	case PROTO_T_X:
	case PROTO_T_DX: return p->batch * p->in;
	case PROTO_T_DY:
	case PROTO_T_Y: return p->batch * p->out;
	case PROTO_T_W:
	case PROTO_T_DW: return p->out * p->in;
	default: return p->out;
	}
}

static void prob_make(vkg_client *c, prob *p, proto_dtype dt, uint64_t batch, uint64_t in,
		      uint64_t out, uint64_t seed)
{
	memset(p, 0, sizeof(*p));
	p->dt = dt;
	p->batch = batch;
	p->in = in;
	p->out = out;
	const unsigned es = proto_dtype_size(dt);
	uint64_t at = 0;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		p->off[t] = at;
		at += (slot_elems(p, t) * es + 255) / 256 * 256;
	}
	p->size = at;
	vkg_error err;
	p->map = vkg_region_create(c, p->size, &p->region, &err);
	if (!p->map)
		fail_msg("region: %s: %s", err.code, err.message);
	memset(p->map, 0x5a, p->size);
	float **in_v[3] = {&p->x, &p->dy, &p->w};
	const int in_t[3] = {PROTO_T_X, PROTO_T_DY, PROTO_T_W};
	for (int i = 0; i < 3; i++) {
		const size_t n = slot_elems(p, in_t[i]);
		float *v = malloc(n * sizeof(float));
		assert_non_null(v);
		fill_rand(v, n, seed + (uint64_t)i);
		vkg_ref_store(dt, p->map + p->off[in_t[i]], v, n);
		vkg_ref_load(dt, v, p->map + p->off[in_t[i]], n); /* what is stored */
		*in_v[i] = v;
	}
	/* b for a forward: dy's first row, stored */
	vkg_ref_store(dt, p->map + p->off[PROTO_T_B], p->dy, p->out);
}

static void prob_free(vkg_client *c, prob *p)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(c, p->region, p->map, p->size, &err), 0);
	free(p->x);
	free(p->dy);
	free(p->w);
}

/* Slot t of p's region, read back as floats, against want (n doubles). */
static void check_slot(const prob *p, int t, const double *want, const char *what)
{
	const size_t n = slot_elems(p, t);
	float *got = malloc(n * sizeof(float));
	assert_non_null(got);
	vkg_ref_load(p->dt, got, p->map + p->off[t], n);
	const double e = vkg_ref_max_rel_err(got, want, NULL, n);
	free(got);
	if (!(e <= vkg_ref_tolerance(p->dt)))
		fail_msg("%s: %s '%s' max rel err %.3g over the %s tolerance %s", what,
			 proto_dtype_name(p->dt), proto_tensor_key[t], e, proto_dtype_name(p->dt),
			 vkg_ref_tolerance_text(p->dt));
}

/* p's backward against the float64 reference (dw, db, dx in the region). */
static void check_backward(const prob *p, const char *what)
{
	double *dw = malloc(p->out * p->in * sizeof(double)), *db = malloc(p->out * sizeof(double)),
	       *dx = malloc(p->batch * p->in * sizeof(double));
	assert_true(dw && db && dx);
	vkg_ref_linear_backward(p->batch, p->in, p->out, p->x, p->dy, p->w, dw, db, dx);
	check_slot(p, PROTO_T_DW, dw, what);
	check_slot(p, PROTO_T_DB, db, what);
	check_slot(p, PROTO_T_DX, dx, what);
	free(dw);
	free(db);
	free(dx);
}

/* Y = X·Wᵀ + b, b being dy's first row (as stored: prob_make) */
static void check_forward(const prob *p, const char *what)
{
	double *y = malloc(p->batch * p->out * sizeof(double));
	assert_non_null(y);
	for (uint64_t r = 0; r < p->batch; r++)
		for (uint64_t o = 0; o < p->out; o++) {
			double acc = p->dy[o];
			for (uint64_t i = 0; i < p->in; i++)
				acc += (double)p->x[r * p->in + i] * (double)p->w[o * p->in + i];
			y[r * p->out + o] = acc;
		}
	check_slot(p, PROTO_T_Y, y, what);
	free(y);
}

/* A job on client memory only that must succeed with the right numbers:
 * "the daemon still serves this connection". */
static void job_ok(vkg_client *c, const char *what)
{
	prob p;
	prob_make(c, &p, PROTO_F32, 9, 7, 5, 4242);
	vkg_job j = vkg_job_init();
	j.batch = p.batch;
	j.in = p.in;
	j.out = p.out;
	j.x = (vkg_tensor){p.region, p.off[PROTO_T_X]};
	j.dy = (vkg_tensor){p.region, p.off[PROTO_T_DY]};
	j.w = (vkg_tensor){p.region, p.off[PROTO_T_W]};
	j.dw = (vkg_tensor){p.region, p.off[PROTO_T_DW]};
	j.db = (vkg_tensor){p.region, p.off[PROTO_T_DB]};
	j.dx = (vkg_tensor){p.region, p.off[PROTO_T_DX]};
	vkg_error err;
	vkg_result res;
	if (vkg_linear_backward(c, &j, &res, &err) != 0)
		fail_msg("%s: the job after it: %s: %s", what, err.code, err.message);
	check_backward(&p, what);
	prob_free(c, &p);
}

static void wait_ok(vkg_client *c, uint64_t h, const char *what)
{
	vkg_error err;
	vkg_result res;
	if (vkg_wait(c, h, 60000, &res, &err) != 0)
		fail_msg("%s: handle %llu: %s: %s", what, (unsigned long long)h, err.code, err.message);
}

/* ---- ordering and numbers --------------------------------------------------- */

/* Tensors for x, dy, w, dw, db, dx; three writes, the job, three reads,
 * all submitted before any wait; then the same job again, accumulating,
 * into the same tensors and read back: dW, db, dX doubled. */
static void pipelined_backward(vkg_client *c, proto_dtype dt, uint64_t batch, uint64_t in,
			       uint64_t out)
{
	const char *dn = proto_dtype_name(dt);
	prob p;
	prob_make(c, &p, dt, batch, in, out, 77 + dt);
	const int slots[6] = {PROTO_T_X, PROTO_T_DY, PROTO_T_W, PROTO_T_DW, PROTO_T_DB, PROTO_T_DX};
	uint64_t T[PROTO_T_COUNT] = {0};
	for (int i = 0; i < 6; i++) {
		const int t = slots[i];
		const uint64_t rows = t == PROTO_T_DB ? 1 : t == PROTO_T_W || t == PROTO_T_DW ? out : batch;
		const uint64_t cols = t == PROTO_T_DY || t == PROTO_T_DB ? out : in;
		T[t] = tnew(c, dn, rows, cols);
	}
	vkg_error err;
	uint64_t h[16];
	unsigned nh = 0;
	for (int i = 0; i < 3; i++)
		assert_int_equal(vkg_submit_tensor_write(c, T[slots[i]], p.region, p.off[slots[i]], &h[nh++], &err), 0);
	vkg_job j;
	VKG_JOB_INIT(&j);
	j.dtype = dn;
	j.batch = batch;
	j.in = in;
	j.out = out;
	j.x = vkg_device_tensor(T[PROTO_T_X]);
	j.dy = vkg_device_tensor(T[PROTO_T_DY]);
	j.w = vkg_device_tensor(T[PROTO_T_W]);
	j.dw = vkg_device_tensor(T[PROTO_T_DW]);
	j.db = vkg_device_tensor(T[PROTO_T_DB]);
	j.dx = vkg_device_tensor(T[PROTO_T_DX]);
	assert_int_equal(vkg_submit(c, &j, &h[nh++], &err), 0);
	for (int i = 3; i < 6; i++)
		assert_int_equal(vkg_submit_tensor_read(c, T[slots[i]], p.region, p.off[slots[i]], &h[nh++], &err), 0);
	for (unsigned i = 0; i < nh; i++)
		wait_ok(c, h[i], "pipelined backward");
	check_backward(&p, "writes, a backward job on tensors and reads, pipelined");
	/* accumulate into the tensors: twice the gradients, read back */
	j.accumulate = true;
	nh = 0;
	assert_int_equal(vkg_submit(c, &j, &h[nh++], &err), 0);
	for (int i = 3; i < 6; i++)
		assert_int_equal(vkg_submit_tensor_read(c, T[slots[i]], p.region, p.off[slots[i]], &h[nh++], &err), 0);
	for (unsigned i = 0; i < nh; i++)
		wait_ok(c, h[i], "accumulating backward");
	/* the reference doubled: 2·dY gives 2·dW, 2·db, 2·dX */
	for (uint64_t i = 0; i < batch * out; i++)
		p.dy[i] *= 2.0f;
	check_backward(&p, "accumulating into tensors");
	for (int i = 0; i < 6; i++)
		assert_int_equal(vkg_tensor_free(c, T[slots[i]], &err), 0);
	prob_free(c, &p);
}

static void test_pipelined_backward(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	pipelined_backward(c, PROTO_F32, 37, 19, 23);
	pipelined_backward(c, PROTO_BF16, 20, 33, 9);
	vkg_close(c);
}

/* The same on a daemon that imports client memory in place (as on a GPU;
 * lavapipe stages it by default): tensor_read writes the client's pages
 * directly. */
static void test_pipelined_imported(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const env[] = {"VKGRAD_CPU_IMPORT=1", NULL};
	if (daemon_proc_start(&d, NULL, env) != 0)
		fail_msg("could not start the daemon");
	vkg_client *c = expect_client(d.sock);
	pipelined_backward(c, PROTO_F32, 29, 40, 16);
	vkg_error err;
	uint64_t rid;
	void *m = vkg_region_create(c, 1 << 16, &rid, &err);
	assert_non_null(m);
	proto_stats st;
	assert_int_equal(rawsock_stats(d.sock, &st), 0);
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
	if (st.host_imports == 0)
		fail_msg("the daemon staged the regions: the imported path was not tested");
}

/* A forward with x in client memory, w, b and y tensors; the
 * backward that follows reads y's tensor as dy, w's as w, and writes dW to
 * client memory and dX to a tensor; then reads. Everything pipelined. */
static void test_pipelined_forward_chain(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	const uint64_t batch = 21, in = 13, out = 11;
	prob p;
	prob_make(c, &p, PROTO_F32, batch, in, out, 99);
	const uint64_t TW = tnew(c, "f32", out, in), TY = tnew(c, "f32", batch, out),
		       TDX = tnew(c, "f32", batch, in), TB = tnew(c, "f32", 1, out);
	vkg_error err;
	uint64_t h[8];
	unsigned nh = 0;
	assert_int_equal(vkg_submit_tensor_write(c, TW, p.region, p.off[PROTO_T_W], &h[nh++], &err), 0);
	assert_int_equal(vkg_submit_tensor_write(c, TB, p.region, p.off[PROTO_T_B], &h[nh++], &err), 0);
	vkg_forward_job f = vkg_forward_job_init();
	f.batch = batch;
	f.in = in;
	f.out = out;
	f.x = (vkg_tensor){p.region, p.off[PROTO_T_X]};
	f.w = vkg_device_tensor(TW);
	f.b = vkg_device_tensor(TB);
	f.y = vkg_device_tensor(TY);
	assert_int_equal(vkg_submit_forward(c, &f, &h[nh++], &err), 0);
	assert_int_equal(vkg_submit_tensor_read(c, TY, p.region, p.off[PROTO_T_Y], &h[nh++], &err), 0);
	vkg_job j = vkg_job_init();
	j.batch = batch;
	j.in = in;
	j.out = out;
	j.x = (vkg_tensor){p.region, p.off[PROTO_T_X]};
	j.dy = vkg_device_tensor(TY);
	j.w = vkg_device_tensor(TW);
	j.dw = (vkg_tensor){p.region, p.off[PROTO_T_DW]};
	j.dx = vkg_device_tensor(TDX);
	assert_int_equal(vkg_submit(c, &j, &h[nh++], &err), 0);
	assert_int_equal(vkg_submit_tensor_read(c, TDX, p.region, p.off[PROTO_T_DX], &h[nh++], &err), 0);
	for (unsigned i = 0; i < nh; i++)
		wait_ok(c, h[i], "forward chain");
	check_forward(&p, "forward onto a tensor, read");
	/* the backward's dy was y: the reference from the stored y */
	float *y = malloc(batch * out * sizeof(float));
	assert_non_null(y);
	vkg_ref_load(PROTO_F32, y, p.map + p.off[PROTO_T_Y], batch * out);
	memcpy(p.dy, y, batch * out * sizeof(float));
	free(y);
	double *dw = malloc(out * in * sizeof(double)), *dx = malloc(batch * in * sizeof(double));
	assert_true(dw && dx);
	vkg_ref_linear_backward(batch, in, out, p.x, p.dy, p.w, dw, NULL, dx);
	check_slot(&p, PROTO_T_DW, dw, "backward from the forward's y tensor: dW");
	check_slot(&p, PROTO_T_DX, dx, "backward from the forward's y tensor: dX");
	free(dw);
	free(dx);
	/* tensor_read of a tensor nothing wrote since tensor_new: zeros */
	const uint64_t TZ = tnew(c, "f32", batch, in);
	memset(p.map + p.off[PROTO_T_DX], 0x7f, batch * in * 4);
	assert_int_equal(vkg_tensor_read(c, TZ, p.region, p.off[PROTO_T_DX], &err), 0);
	for (uint64_t i = 0; i < batch * in * 4; i++)
		if (p.map[p.off[PROTO_T_DX] + i] != 0)
			fail_msg("a new tensor's byte %llu reads %u, not 0", (unsigned long long)i,
				 p.map[p.off[PROTO_T_DX] + i]);
	uint64_t ts[5] = {TW, TY, TDX, TZ, TB};
	for (int i = 0; i < 5; i++)
		assert_int_equal(vkg_tensor_free(c, ts[i], &err), 0);
	prob_free(c, &p);
	vkg_close(c);
}

/* Client A fills a tensor with its data and frees it; client B's new
 * tensor of that size (and a larger one) reads zeros. */
static void test_new_reads_zeros_after_free(void **state)
{
	(void)state;
	vkg_client *a = expect_client(g_d.sock), *b = expect_client(g_d.sock);
	const uint64_t n = 4096; /* f32 elements */
	vkg_error err;
	uint64_t ra, rb;
	uint8_t *ma = vkg_region_create(a, n * 4, &ra, &err), *mb = vkg_region_create(b, 2 * n * 4, &rb, &err);
	assert_true(ma && mb);
	for (uint64_t i = 0; i < n; i++)
		((float *)ma)[i] = 1.0f + (float)i;
	for (int round = 0; round < 4; round++) {
		const uint64_t ta = tnew(a, "f32", 64, 64);
		assert_int_equal(vkg_tensor_write(a, ta, ra, 0, &err), 0);
		assert_int_equal(vkg_tensor_free(a, ta, &err), 0);
	}
	const uint64_t tb = tnew(b, "f32", 64, 64), tb2 = tnew(b, "f32", 2, 4096);
	memset(mb, 0xee, 2 * n * 4);
	assert_int_equal(vkg_tensor_read(b, tb, rb, 0, &err), 0);
	for (uint64_t i = 0; i < n * 4; i++)
		if (mb[i] != 0)
			fail_msg("B's new tensor reads byte %llu = %u: not zero", (unsigned long long)i, mb[i]);
	memset(mb, 0xee, 2 * n * 4);
	assert_int_equal(vkg_tensor_read(b, tb2, rb, 0, &err), 0);
	for (uint64_t i = 0; i < 2 * n * 4; i++)
		if (mb[i] != 0)
			fail_msg("B's larger new tensor reads byte %llu = %u: not zero", (unsigned long long)i, mb[i]);
	job_ok(b, "zeros");
	vkg_close(a);
	vkg_close(b);
}

/* ---- isolation and bad input -------------------------------------------------- */

static void test_bad_tensors(void **state)
{
	(void)state;
	vkg_client *a = expect_client(g_d.sock), *b = expect_client(g_d.sock);
	vkg_error err;
	prob p;
	prob_make(b, &p, PROTO_F32, 8, 6, 4, 5);
	const uint64_t ta = tnew(a, "f32", 8, 6); /* A's: x-shaped */
	const uint64_t tx = tnew(b, "f32", 8, 6), tdy = tnew(b, "f32", 8, 4), tw = tnew(b, "f32", 4, 6),
		       tdw = tnew(b, "f32", 4, 6), th = tnew(b, "f16", 8, 6);
	vkg_job j = vkg_job_init();
	j.batch = 8;
	j.in = 6;
	j.out = 4;
	j.x = vkg_device_tensor(tx);
	j.dy = vkg_device_tensor(tdy);
	j.w = vkg_device_tensor(tw);
	j.dw = vkg_device_tensor(tdw);
	vkg_result res;
	/* another connection's id, as an operand and in each op */
	vkg_job bad = j;
	bad.x = vkg_device_tensor(ta);
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "'x'",
		      "not a tensor of this connection", "another connection's tensor as x");
	job_ok(b, "another connection's tensor");
	expect_remote(vkg_tensor_write(b, ta, p.region, 0, &err), &err, "bad_tensor", "'tensor'", NULL,
		      "tensor_write of another connection's tensor");
	expect_remote(vkg_tensor_read(b, ta, p.region, 0, &err), &err, "bad_tensor", "'tensor'", NULL,
		      "tensor_read of another connection's tensor");
	expect_remote(vkg_tensor_free(b, ta, &err), &err, "bad_tensor", "'tensor'", NULL,
		      "tensor_free of another connection's tensor");
	job_ok(a, "A after B tried A's tensor");
	/* A's tensor untouched by any of it, and still A's */
	assert_int_equal(vkg_tensor_read(a, ta, 0, 0, &err), VKG_EREMOTE); /* (no region 0) */
	assert_string_equal(err.code, "bad_region");
	/* a freed id */
	const uint64_t tf = tnew(b, "f32", 8, 6);
	assert_int_equal(vkg_tensor_free(b, tf, &err), 0);
	bad = j;
	bad.x = vkg_device_tensor(tf);
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "'x'", NULL, "a freed tensor as x");
	expect_remote(vkg_tensor_free(b, tf, &err), &err, "bad_tensor", NULL, NULL, "a second tensor_free");
	expect_remote(vkg_tensor_write(b, tf, p.region, 0, &err), &err, "bad_tensor", NULL, NULL,
		      "tensor_write of a freed tensor");
	job_ok(b, "a freed tensor");
	/* an id never made */
	bad = j;
	bad.dw = vkg_device_tensor(UINT64_MAX / 3);
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "'dw'", NULL, "an unknown tensor as dw");
	/* dtype mismatch: an f16 tensor in an f32 job, an f32 job named f16 */
	bad = j;
	bad.x = vkg_device_tensor(th);
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "dtype f16", "'x'",
		      "an f16 tensor in an f32 job");
	bad = j;
	bad.dtype = "f16";
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "dtype f32", NULL,
		      "f32 tensors in an f16 job");
	job_ok(b, "dtype mismatch");
	/* shape mismatch: w's tensor as dw of a transposed job, x as dy */
	bad = j;
	bad.dy = vkg_device_tensor(tx);
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "'dy'", "8 x 6",
		      "an 8x6 tensor as dy (8x4)");
	bad = j;
	bad.batch = 4; /* x is 8 x 6 */
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "bad_tensor", "4 x 6", NULL,
		      "a job's batch unlike its tensors'");
	vkg_forward_job fb = vkg_forward_job_init();
	fb.batch = 8;
	fb.in = 6;
	fb.out = 4;
	fb.x = vkg_device_tensor(tx);
	fb.w = vkg_device_tensor(tw);
	fb.b = vkg_device_tensor(tdy); /* 8 x 4, not 1 x 4 */
	fb.y = vkg_device_tensor(tdw);
	expect_remote(vkg_linear_forward(b, &fb, &res, &err), &err, "bad_tensor", "'b'", "1 x 4",
		      "an 8x4 tensor as a forward's b");
	job_ok(b, "shape mismatch");
	/* an output that is an input's tensor */
	fb.b = (vkg_tensor){VKG_NONE, 0};
	fb.y = vkg_device_tensor(tdy);
	vkg_forward_job ok = fb;
	assert_int_equal(vkg_linear_forward(b, &ok, &res, &err), 0);
	bad = j;
	bad.dw = vkg_device_tensor(tw);
	expect_remote(vkg_linear_backward(b, &bad, &res, &err), &err, "overlap", "'dw'", "'w'",
		      "dw the same tensor as w");
	job_ok(b, "overlap");
	/* tensor_write / tensor_read regions: too small, misaligned, unknown */
	uint64_t rs;
	void *ms = vkg_region_create(b, 100, &rs, &err); /* tx needs 192 bytes */
	assert_non_null(ms);
	expect_remote(vkg_tensor_write(b, tx, rs, 0, &err), &err, "out_of_bounds", "'src'", "192 bytes",
		      "tensor_write from a region too small");
	expect_remote(vkg_tensor_read(b, tx, rs, 0, &err), &err, "out_of_bounds", "'dst'", NULL,
		      "tensor_read into a region too small");
	expect_remote(vkg_tensor_write(b, tx, p.region, 2, &err), &err, "out_of_bounds", "multiple", NULL,
		      "tensor_write at a misaligned offset");
	expect_remote(vkg_tensor_write(b, tx, p.region, p.size - 100, &err), &err, "out_of_bounds", NULL, NULL,
		      "tensor_write running past the region's end");
	expect_remote(vkg_tensor_read(b, tx, 987654, 0, &err), &err, "bad_region", "987654", NULL,
		      "tensor_read into an unknown region");
	assert_int_equal(vkg_region_destroy(b, rs, ms, 100, &err), 0);
	job_ok(b, "bad regions for tensor_write / tensor_read");
	/* bad tensor_new shapes and dtypes */
	uint64_t t;
	expect_remote(vkg_tensor_new(b, "f32", 0, 4, &t, &err), &err, "bad_request", "'rows'", NULL, "rows 0");
	expect_remote(vkg_tensor_new(b, "f32", UINT64_MAX / 2, 4, &t, &err), &err, "limit", "overflows", NULL,
		      "rows x cols overflowing");
	expect_remote(vkg_tensor_new(b, "f32", 1u << 20, 1u << 20, &t, &err), &err, "limit", "max_tensor_bytes",
		      NULL, "a tensor over max_tensor_bytes");
	job_ok(b, "bad tensor_new");
	/* the good job still runs on the same tensors */
	assert_int_equal(vkg_tensor_write(b, tx, p.region, p.off[PROTO_T_X], &err), 0);
	assert_int_equal(vkg_tensor_write(b, tdy, p.region, p.off[PROTO_T_DY], &err), 0);
	assert_int_equal(vkg_tensor_write(b, tw, p.region, p.off[PROTO_T_W], &err), 0);
	j.db = (vkg_tensor){p.region, p.off[PROTO_T_DB]};
	j.dx = (vkg_tensor){p.region, p.off[PROTO_T_DX]};
	assert_int_equal(vkg_linear_backward(b, &j, &res, &err), 0);
	assert_int_equal(vkg_tensor_read(b, tdw, p.region, p.off[PROTO_T_DW], &err), 0);
	check_backward(&p, "the tensors after every bad request");
	prob_free(b, &p);
	vkg_close(a);
	vkg_close(b);
	expect_serves(g_d.sock);
}

/* `vkgrad <args>` against g_d: its stdout (malloc'd), exit status 0. */
static char *cli_out(const char *args)
{
	const char *b = getenv("BUILD");
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s/vkgrad --socket %s %s", b && *b ? b : "build", g_d.sock, args);
	fflush(NULL);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap = 1 << 20, len = 0, got;
	char *out = malloc(cap);
	assert_non_null(out);
	while (len + 1 < cap && (got = fread(out + len, 1, cap - 1 - len, p)) > 0)
		len += got;
	out[len] = 0;
	const int st = pclose(p);
	if (st != 0)
		fail_msg("%s: exit status %d:\n%s", cmd, st, out);
	return out;
}

/* Device bytes of the daemon (stats), waiting up to 30 s for `want` when
 * want != UINT64_MAX. */
static uint64_t device_bytes(const char *sock, uint64_t want)
{
	proto_stats st;
	for (int i = 0; i < 3000; i++) {
		assert_int_equal(rawsock_stats(sock, &st), 0);
		assert_true(st.has_tensors);
		if (want == UINT64_MAX || st.device_bytes == want)
			return st.device_bytes;
		usleep(10000);
	}
	fail_msg("device_bytes stays %llu, not %llu", (unsigned long long)st.device_bytes,
		 (unsigned long long)want);
	return 0;
}

static void test_disconnect_frees(void **state)
{
	(void)state;
	const uint64_t before = device_bytes(g_d.sock, UINT64_MAX);
	proto_stats st0;
	assert_int_equal(rawsock_stats(g_d.sock, &st0), 0);
	vkg_client *c = expect_client(g_d.sock);
	prob p;
	prob_make(c, &p, PROTO_F32, 64, 48, 32, 3);
	const uint64_t tx = tnew(c, "f32", 64, 48), tdy = tnew(c, "f32", 64, 32), tw = tnew(c, "f32", 32, 48),
		       tdw = tnew(c, "f32", 32, 48);
	const uint64_t held = (64 * 48 + 64 * 32 + 2 * 32 * 48) * 4;
	assert_int_equal(device_bytes(g_d.sock, UINT64_MAX), before + held);
	/* `clients` counts them for this connection */
	rawsock s;
	expect_open(&s, g_d.sock);
	proto_request q = {.op = PROTO_OP_CLIENTS, .id = 5};
	assert_int_equal(rawsock_send_request(&s, &q, NULL, 0), 0);
	uint8_t *body;
	uint32_t len;
	assert_int_equal(rawsock_recv_body(&s, &body, &len, 10000), 0);
	proto_client_info *v;
	unsigned n;
	proto_err perr;
	assert_int_equal(proto_clients_decode(body, len, &v, &n, &perr), 0);
	bool found = false;
	for (unsigned i = 0; i < n; i++)
		found |= v[i].tensors == 4 && v[i].device_bytes == held;
	free(v);
	free(body);
	rawsock_close(&s);
	assert_true(found);
	/* stats: per-uid bytes */
	proto_stats st;
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	assert_int_equal(st.tensors, st0.tensors + 4);
	bool uid_ok = false;
	for (unsigned i = 0; i < st.n_dev_uids; i++)
		uid_ok |= st.dev_uids[i].uid == (uint32_t)getuid() && st.dev_uids[i].bytes >= held;
	assert_true(uid_ok);
	/* the CLI's text and Prometheus forms, and its clients table */
	char want[128];
	char *out = cli_out("stats");
	snprintf(want, sizeof(want), "device_bytes uid %u", (unsigned)getuid());
	if (!strstr(out, want) || !strstr(out, "host_read_bytes") || !strstr(out, "tensors"))
		fail_msg("vkgrad stats lacks the tensor lines:\n%s", out);
	free(out);
	out = cli_out("stats --prometheus");
	/* (every tensor is this uid's: the tests' clients are all this process) */
	snprintf(want, sizeof(want), ",uid=\"%u\"} %llu", (unsigned)getuid(),
		 (unsigned long long)st.device_bytes);
	const char *fam = strstr(out, "\nvkgrad_device_bytes{");
	if (!fam || !strstr(fam, want) || !strstr(out, "vkgrad_host_write_bytes_total{") ||
	    !strstr(out, "vkgrad_tensors{"))
		fail_msg("vkgrad stats --prometheus lacks the tensor families:\n%s", out);
	free(out);
	out = cli_out("clients");
	if (!strstr(out, "TENSORS") || !strstr(out, "DEV_BYTES"))
		fail_msg("vkgrad clients lacks the tensor columns:\n%s", out);
	free(out);
	/* queue work on them and go without waiting or freeing */
	vkg_error err;
	uint64_t h;
	assert_int_equal(vkg_submit_tensor_write(c, tx, p.region, p.off[PROTO_T_X], &h, &err), 0);
	assert_int_equal(vkg_submit_tensor_write(c, tdy, p.region, p.off[PROTO_T_DY], &h, &err), 0);
	vkg_job j = vkg_job_init();
	j.batch = 64;
	j.in = 48;
	j.out = 32;
	j.x = vkg_device_tensor(tx);
	j.dy = vkg_device_tensor(tdy);
	j.w = vkg_device_tensor(tw);
	j.dw = vkg_device_tensor(tdw);
	assert_int_equal(vkg_submit(c, &j, &h, &err), 0);
	vkg_close(c); /* (unmaps p's region) */
	free(p.x);
	free(p.dy);
	free(p.w);
	device_bytes(g_d.sock, before);
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	assert_int_equal(st.tensors, st0.tensors);
	expect_serves(g_d.sock);
}

/* The limits, on a daemon of its own: hello reports them, and each
 * refusal names its limit and value; a job succeeds after each. */
static void test_limits(void **state)
{
	(void)state;
	daemon_proc d = {0};
	const char *const args[] = {"--max-device-bytes", "65536", "--max-device-bytes-per-uid", "32768",
				    "--max-tensors", "4", NULL};
	/* the first allocation fails as the device's would (out of memory) */
	const char *const env[] = {"VKGRAD_FAULT_INJECT=tensor_alloc:1", NULL};
	if (daemon_proc_start(&d, args, env) != 0)
		fail_msg("could not start the daemon");
	proto_hello h;
	expect_hello(d.sock, &h);
	assert_int_equal(h.limits.max_device_bytes, 65536);
	assert_int_equal(h.limits.max_device_bytes_per_uid, 32768);
	assert_int_equal(h.limits.max_tensors, 4);
	vkg_client *c = expect_client(d.sock), *c2 = expect_client(d.sock);
	vkg_error err;
	uint64_t t[5];
	expect_remote(vkg_tensor_new(c, "f32", 8, 8, &t[0], &err), &err, "limit", "no memory for 256 bytes",
		      "VkResult", "a failed allocation");
	job_ok(c, "a failed allocation");
	assert_int_equal(device_bytes(d.sock, UINT64_MAX), 0);
	/* per uid: 16 KiB + 16 KiB fit, 4 more bytes do not (c2 is the same uid) */
	t[0] = tnew(c, "f32", 64, 64);
	t[1] = tnew(c2, "f32", 64, 64);
	expect_remote(vkg_tensor_new(c, "f32", 1, 1, &t[2], &err), &err, "limit", "max_device_bytes_per_uid",
		      "32768", "past max_device_bytes_per_uid");
	job_ok(c, "past max_device_bytes_per_uid");
	assert_int_equal(vkg_tensor_free(c2, t[1], &err), 0);
	/* per connection: max_tensors */
	t[1] = tnew(c, "f16", 1, 2);
	t[2] = tnew(c, "bf16", 3, 1);
	t[3] = tnew(c, "f32", 2, 2);
	expect_remote(vkg_tensor_new(c, "f32", 1, 1, &t[4], &err), &err, "limit", "max_tensors", "4",
		      "past max_tensors");
	job_ok(c, "past max_tensors");
	uint64_t tc2 = tnew(c2, "f32", 1, 1); /* another connection's count is its own */
	assert_int_equal(vkg_tensor_free(c2, tc2, &err), 0);
	vkg_close(c2);
	vkg_close(c);
	device_bytes(d.sock, 0);
	assert_int_equal(daemon_proc_stop(&d), 0);
	/* all users: a daemon whose per-uid limit is above its total */
	daemon_proc d2 = {0};
	const char *const args2[] = {"--max-device-bytes", "32768", "--max-device-bytes-per-uid", "1048576", NULL};
	if (daemon_proc_start(&d2, args2, NULL) != 0)
		fail_msg("could not start the second daemon");
	c = expect_client(d2.sock);
	t[0] = tnew(c, "f32", 64, 64);
	expect_remote(vkg_tensor_new(c, "f32", 64, 65, &t[1], &err), &err, "limit", "max_device_bytes 32768",
		      "16384 bytes are held", "past max_device_bytes");
	job_ok(c, "past max_device_bytes");
	t[1] = tnew(c, "f32", 64, 64); /* exactly the rest fits */
	vkg_close(c);
	device_bytes(d2.sock, 0);
	assert_int_equal(daemon_proc_stop(&d2), 0);
}

/* ---- device loss ------------------------------------------------------------ */

static void test_device_lost(void **state)
{
	(void)state;
	daemon_proc d = {0};
	/* batches: 1-3 the tensors' fills, 4 the write, 5 the job (lost) */
	const char *const env[] = {"VKGRAD_FAULT_INJECT=wait:5", NULL};
	if (daemon_proc_start(&d, NULL, env) != 0)
		fail_msg("could not start the daemon");
	vkg_client *c = expect_client(d.sock);
	vkg_error err;
	vkg_result res;
	prob p;
	prob_make(c, &p, PROTO_F32, 8, 6, 4, 11);
	const uint64_t tx = tnew(c, "f32", 8, 6), tw = tnew(c, "f32", 4, 6), tdw = tnew(c, "f32", 4, 6);
	assert_int_equal(vkg_tensor_write(c, tx, p.region, p.off[PROTO_T_X], &err), 0);
	vkg_job j = vkg_job_init();
	j.batch = 8;
	j.in = 6;
	j.out = 4;
	j.x = vkg_device_tensor(tx);
	j.dy = (vkg_tensor){p.region, p.off[PROTO_T_DY]};
	j.w = vkg_device_tensor(tw);
	j.dw = vkg_device_tensor(tdw);
	expect_remote(vkg_linear_backward(c, &j, &res, &err), &err, "device_lost", "GPU", NULL,
		      "the job in the lost batch");
	/* after the recovery: every tensor from before is gone */
	int rc = -1;
	for (int i = 0; i < 3000 && rc != 0; i++) {
		rc = vkg_ping(c, &err);
		proto_stats st;
		assert_int_equal(rawsock_stats(d.sock, &st), 0);
		if (st.device_recoveries >= 1)
			break;
		usleep(10000);
	}
	expect_remote(vkg_linear_backward(c, &j, &res, &err), &err, "device_lost", "lost with the GPU", NULL,
		      "a job naming tensors from before the loss");
	expect_remote(vkg_tensor_write(c, tx, p.region, p.off[PROTO_T_X], &err), &err, "device_lost", NULL,
		      NULL, "tensor_write of a tensor from before the loss");
	expect_remote(vkg_tensor_read(c, tdw, p.region, p.off[PROTO_T_DW], &err), &err, "device_lost", NULL,
		      NULL, "tensor_read of a tensor from before the loss");
	assert_int_equal(device_bytes(d.sock, UINT64_MAX), 0);
	assert_int_equal(vkg_tensor_free(c, tx, &err), 0);
	assert_int_equal(vkg_tensor_free(c, tw, &err), 0);
	assert_int_equal(vkg_tensor_free(c, tdw, &err), 0);
	job_ok(c, "after the loss");
	/* new tensors work */
	const uint64_t nx = tnew(c, "f32", 8, 6), nw = tnew(c, "f32", 4, 6), ndx = tnew(c, "f32", 8, 6);
	uint64_t h[6];
	unsigned nh = 0;
	assert_int_equal(vkg_submit_tensor_write(c, nx, p.region, p.off[PROTO_T_X], &h[nh++], &err), 0);
	assert_int_equal(vkg_submit_tensor_write(c, nw, p.region, p.off[PROTO_T_W], &h[nh++], &err), 0);
	j.x = vkg_device_tensor(nx);
	j.w = vkg_device_tensor(nw);
	j.dw = (vkg_tensor){p.region, p.off[PROTO_T_DW]};
	j.db = (vkg_tensor){p.region, p.off[PROTO_T_DB]};
	j.dx = vkg_device_tensor(ndx);
	assert_int_equal(vkg_submit(c, &j, &h[nh++], &err), 0);
	assert_int_equal(vkg_submit_tensor_read(c, ndx, p.region, p.off[PROTO_T_DX], &h[nh++], &err), 0);
	for (unsigned i = 0; i < nh; i++)
		wait_ok(c, h[i], "new tensors after the recovery");
	check_backward(&p, "new tensors after the recovery");
	prob_free(c, &p);
	vkg_close(c);
	assert_true(daemon_proc_log_contains(&d, "device recreated after a device loss"));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static int setup(void **state)
{
	(void)state;
	return daemon_proc_start(&g_d, NULL, NULL);
}

static int teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipelined_backward),
		cmocka_unit_test(test_pipelined_imported),
		cmocka_unit_test(test_pipelined_forward_chain),
		cmocka_unit_test(test_new_reads_zeros_after_free),
		cmocka_unit_test(test_bad_tensors),
		cmocka_unit_test(test_disconnect_frees),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_device_lost),
	};
	int rc = cmocka_run_group_tests(tests, setup, teardown);
	return rc + daemon_proc_failures;
}
