/* tests/integration/test_forward.c — op linear_forward, Y = X·Wᵀ (+ b)
 * (proto/README.md): every dtype and every kernel family the daemon runs
 * (the ones hello lists for that dtype; auto always) against a float64
 * reference computed from the stored inputs, at the dtype's tolerance
 * (client/ref.h), over shapes on the tiles' edges, with and without the
 * bias, with and without accumulate; on the direct path and on a daemon
 * that runs every job on device-local copies in small dispatches. Every
 * byte outside y must stay as it was.
 *
 * Then the same bounds, overlap and error rules as linear_backward: each
 * bad request is answered with its code, names the key, writes nothing,
 * and the daemon (that connection and a new one) still serves. And the
 * order of one connection's jobs: a backward submitted right after a
 * forward, reading its y as dy, sees the forward's result. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "expect.h"
#include "rawsock.h"
#include "ref.h"
#include "shm.h"
#include "vkgrad.h"

/* g_pieces: every grid in pieces of a few workgroups */
static daemon_proc g_d, g_dl, g_pieces;

#define MAX_DIM 1048576

static const uint64_t shapes[][3] = {
	/* batch, in, out */
	{1, 1, 1},     {3, 5, 7},     {64, 64, 64},   {65, 63, 129}, {130, 70, 200},
	{257, 128, 64}, {17, 300, 3}, {128, 256, 128}, {70, 68, 36}, {2, 1100, 9},
};

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static float rand_unit(uint64_t *s)
{
	return (float)((double)(rng(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* One forward case in a fresh region: x, w, b, y each 256-byte aligned
 * (plus `skew` elements), canary bytes everywhere else. */
typedef struct fcase {
	proto_dtype dt;
	uint64_t batch, in, out;
	bool bias, accumulate;
	uint64_t off_x, off_w, off_b, off_y, size;
} fcase;

static uint64_t place(uint64_t *cursor, uint64_t bytes, uint64_t skew)
{
	const uint64_t at = (*cursor + 255) / 256 * 256 + skew;
	*cursor = at + bytes + 64;
	return at;
}

static void fcase_layout(fcase *fc, uint64_t skew)
{
	const uint64_t es = proto_dtype_size(fc->dt);
	uint64_t cur = 64;
	fc->off_x = place(&cur, fc->batch * fc->in * es, skew * es);
	fc->off_w = place(&cur, fc->out * fc->in * es, 0);
	fc->off_b = place(&cur, fc->out * es, skew * es);
	fc->off_y = place(&cur, fc->batch * fc->out * es, skew * es);
	fc->size = (cur + 4095) / 4096 * 4096;
}

static uint8_t canary(size_t i)
{
	return (uint8_t)(i * 29 + 11);
}

/* Fill fc's tensors (y too when accumulating: its base), run it with
 * `variant`, check y against float64 and every other byte. Returns 0, or -1
 * after printing why; *unsupported set (and 0 returned) when the daemon
 * refused the variant as unsupported. */
static int run_case(vkg_client *c, const fcase *fc, const char *variant, uint64_t seed,
		    bool *unsupported)
{
	vkg_error err;
	uint64_t reg;
	uint8_t *map = vkg_region_create(c, fc->size, &reg, &err);
	assert_non_null(map);
	for (size_t i = 0; i < fc->size; i++)
		map[i] = canary(i);
	const uint64_t nx = fc->batch * fc->in, nw = fc->out * fc->in, ny = fc->batch * fc->out;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(fc->out * 4), *y0 = malloc(ny * 4);
	float *got = malloc(ny * 4);
	double *want = malloc(ny * 8), *base = malloc(ny * 8);
	assert_true(x && w && b && y0 && got && want && base);
	uint64_t s = seed | 1;
	for (uint64_t i = 0; i < nx; i++)
		x[i] = rand_unit(&s);
	for (uint64_t i = 0; i < nw; i++)
		w[i] = rand_unit(&s);
	for (uint64_t i = 0; i < fc->out; i++)
		b[i] = rand_unit(&s);
	for (uint64_t i = 0; i < ny; i++)
		y0[i] = rand_unit(&s);
	vkg_ref_store(fc->dt, map + fc->off_x, x, nx);
	vkg_ref_store(fc->dt, map + fc->off_w, w, nw);
	if (fc->bias)
		vkg_ref_store(fc->dt, map + fc->off_b, b, fc->out);
	if (fc->accumulate)
		vkg_ref_store(fc->dt, map + fc->off_y, y0, ny);
	/* the reference from the stored (rounded) values */
	vkg_ref_load(fc->dt, x, map + fc->off_x, nx);
	vkg_ref_load(fc->dt, w, map + fc->off_w, nw);
	if (fc->bias)
		vkg_ref_load(fc->dt, b, map + fc->off_b, fc->out);
	if (fc->accumulate)
		vkg_ref_load(fc->dt, y0, map + fc->off_y, ny);
	for (uint64_t r = 0; r < fc->batch; r++)
		for (uint64_t o = 0; o < fc->out; o++) {
			double acc = fc->bias ? (double)b[o] : 0.0;
			for (uint64_t i = 0; i < fc->in; i++)
				acc += (double)x[r * fc->in + i] * (double)w[o * fc->in + i];
			want[r * fc->out + o] = acc;
			base[r * fc->out + o] = fc->accumulate ? (double)y0[r * fc->out + o] : 0.0;
		}
	uint8_t *before = malloc(fc->size);
	assert_non_null(before);
	memcpy(before, map, fc->size);

	vkg_forward_job j = vkg_forward_job_init();
	j.dtype = proto_dtype_name(fc->dt);
	j.batch = fc->batch, j.in = fc->in, j.out = fc->out;
	j.x = (vkg_tensor){reg, fc->off_x};
	j.w = (vkg_tensor){reg, fc->off_w};
	if (fc->bias)
		j.b = (vkg_tensor){reg, fc->off_b};
	j.y = (vkg_tensor){reg, fc->off_y};
	j.accumulate = fc->accumulate;
	j.variant = variant;
	vkg_result res;
	int rc = -1;
	*unsupported = false;
	char name[128];
	snprintf(name, sizeof(name), "%s %s %llux%llux%llu%s%s", proto_dtype_name(fc->dt), variant,
		 (unsigned long long)fc->batch, (unsigned long long)fc->in,
		 (unsigned long long)fc->out, fc->bias ? " +b" : "", fc->accumulate ? " acc" : "");
	if (vkg_linear_forward(c, &j, &res, &err) != 0) {
		if (strcmp(err.code, "unsupported") == 0) {
			*unsupported = true;
			rc = 0;
		} else {
			fprintf(stderr, "%s: %s: %s\n", name, err.code, err.message);
		}
		goto out;
	}
	vkg_ref_load(fc->dt, got, map + fc->off_y, ny);
	const double e = vkg_ref_max_rel_err(got, want, base, ny);
	if (!(e <= vkg_ref_tolerance(fc->dt))) {
		fprintf(stderr, "%s: max_rel_err %.3g > %s\n", name, e, vkg_ref_tolerance_text(fc->dt));
		goto out;
	}
	const uint64_t ylo = fc->off_y, yhi = fc->off_y + ny * proto_dtype_size(fc->dt);
	for (uint64_t i = 0; i < fc->size; i++)
		if ((i < ylo || i >= yhi) && map[i] != before[i]) {
			fprintf(stderr, "%s: byte %llu outside y changed\n", name, (unsigned long long)i);
			goto out;
		}
	rc = 0;
out:
	assert_int_equal(vkg_region_destroy(c, reg, map, fc->size, &err), 0);
	free(x), free(w), free(b), free(y0), free(got), free(want), free(base), free(before);
	return rc;
}

static const char *const families[] = {"auto",        "generic",     "tiled",
				       "tiled128",    "splitk",      "splitk128",   "coopmat",
				       "coopmat_khr", "coopmat_nv2", "coopmat_khr_f32x3"};
#define NFAM (sizeof(families) / sizeof(families[0]))

/* Every shape, bias or not, accumulate or not, for dtype dt and every
 * family hello lists for it, on daemon d. */
static void run_dtype_on(const daemon_proc *d, proto_dtype dt)
{
	proto_hello h;
	expect_hello(d->sock, &h);
	vkg_client *c = expect_client(d->sock);
	unsigned failed = 0, n = 0, ran[NFAM] = {0};
	for (size_t f = 0; f < NFAM; f++) {
		if (!expect_hello_lists(&h, families[f], dt))
			continue;
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (unsigned k = 0; k < 4; k++) {
				fcase fc = {.dt = dt, .batch = shapes[s][0], .in = shapes[s][1],
					    .out = shapes[s][2], .bias = k & 1, .accumulate = k & 2};
				fcase_layout(&fc, (s + k) % 3 == 2 ? 1 : 0);
				bool unsup;
				n++;
				if (run_case(c, &fc, families[f], 100 + s * 8 + k, &unsup) != 0)
					failed++;
				else if (unsup) {
					fprintf(stderr, "%s %s: unsupported, yet hello lists it\n",
						proto_dtype_name(dt), families[f]);
					failed++;
				} else
					ran[f]++;
			}
	}
	printf("linear_forward %s on the %s daemon: %u cases, %u failed; per family:",
	       proto_dtype_name(dt), d == &g_dl ? "device-local" : "direct", n, failed);
	for (size_t f = 0; f < NFAM; f++)
		if (ran[f])
			printf(" %s %u", families[f], ran[f]);
	printf("\n");
	vkg_close(c);
	assert_int_equal(failed, 0);
	/* the portable families at least */
	assert_true(ran[0] > 0 && ran[1] > 0 && ran[2] > 0 && ran[4] > 0);
}

static void test_f32(void **state)
{
	(void)state;
	run_dtype_on(&g_d, PROTO_F32);
}

static void test_f16(void **state)
{
	(void)state;
	run_dtype_on(&g_d, PROTO_F16);
}

static void test_bf16(void **state)
{
	(void)state;
	run_dtype_on(&g_d, PROTO_BF16);
}

/* Device-local copies, dispatches cut small: the same results. */
static void test_devlocal(void **state)
{
	(void)state;
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		run_dtype_on(&g_dl, (proto_dtype)dt);
	proto_stats st;
	assert_int_equal(rawsock_stats(g_dl.sock, &st), 0);
	assert_int_equal(st.devlocal_jobs, st.jobs_done);
}

/* A reduction (in) longer than one dispatch's loop bound: split-K for
 * 16-bit, pieces accumulating for f32, under auto and tiled alike. */
static void test_long_in(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	static const char *const v[] = {"auto", "tiled", "generic"};
	unsigned failed = 0;
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		for (int k = 0; k < 3; k++) {
			fcase fc = {.dt = (proto_dtype)dt, .batch = 3, .in = 600000, .out = 2, .bias = true};
			fcase_layout(&fc, 0);
			bool unsup;
			if (run_case(c, &fc, v[k], 77 + (uint64_t)dt, &unsup) != 0 || unsup)
				failed++;
		}
	vkg_close(c);
	assert_int_equal(failed, 0);
}

/* One connection's jobs take effect in order: a backward right behind a
 * forward, dy = the forward's y, both in flight at once, on daemon d. The
 * tensors are packed at offsets that are not 16-byte aligned, so each
 * output's binding shares its neighbour's last bytes. */
static void forward_then_backward_on(const daemon_proc *d)
{
	vkg_client *c = expect_client(d->sock);
	const uint64_t B = 70, I = 65, O = 66;
	vkg_error err;
	const size_t size = 4 * (B * I + O * I + O + B * O + O * I) + 4096;
	uint64_t reg;
	float *m = vkg_region_create(c, size, &reg, &err);
	assert_non_null(m);
	float *x = m, *w = x + B * I, *b = w + O * I, *y = b + O, *dw = y + B * O;
	uint64_t s = 5;
	for (uint64_t i = 0; i < B * I; i++)
		x[i] = rand_unit(&s);
	for (uint64_t i = 0; i < O * I; i++)
		w[i] = rand_unit(&s);
	for (uint64_t i = 0; i < O; i++)
		b[i] = rand_unit(&s);
	for (uint64_t i = 0; i < B * O; i++)
		y[i] = NAN; /* whatever the forward does not write stays NaN */
	vkg_forward_job f = vkg_forward_job_init();
	f.batch = B, f.in = I, f.out = O;
	f.x = (vkg_tensor){reg, 0};
	f.w = (vkg_tensor){reg, (uint64_t)((uint8_t *)w - (uint8_t *)m)};
	f.b = (vkg_tensor){reg, (uint64_t)((uint8_t *)b - (uint8_t *)m)};
	f.y = (vkg_tensor){reg, (uint64_t)((uint8_t *)y - (uint8_t *)m)};
	vkg_job j = vkg_job_init();
	j.batch = B, j.in = I, j.out = O;
	j.x = f.x;
	j.dy = f.y;
	j.dw = (vkg_tensor){reg, (uint64_t)((uint8_t *)dw - (uint8_t *)m)};
	uint64_t h1, h2;
	assert_int_equal(vkg_submit_forward(c, &f, &h1, &err), 0);
	assert_int_equal(vkg_submit(c, &j, &h2, &err), 0);
	vkg_result r;
	assert_int_equal(vkg_wait(c, h1, -1, &r, &err), 0);
	assert_int_equal(vkg_wait(c, h2, -1, &r, &err), 0);
	double *yr = malloc(B * O * 8), *dwr = malloc(O * I * 8);
	assert_true(yr && dwr);
	for (uint64_t r0 = 0; r0 < B; r0++)
		for (uint64_t o = 0; o < O; o++) {
			double a = b[o];
			for (uint64_t i = 0; i < I; i++)
				a += (double)x[r0 * I + i] * w[o * I + i];
			yr[r0 * O + o] = a;
		}
	for (uint64_t o = 0; o < O; o++)
		for (uint64_t i = 0; i < I; i++) {
			double a = 0;
			for (uint64_t r0 = 0; r0 < B; r0++)
				a += yr[r0 * O + o] * x[r0 * I + i];
			dwr[o * I + i] = a;
		}
	const double ey = vkg_ref_max_rel_err(y, yr, NULL, B * O);
	const double ew = vkg_ref_max_rel_err(dw, dwr, NULL, O * I);
	printf("forward then backward on one connection: y %.3g, dW %.3g\n", ey, ew);
	assert_true(ey <= VKG_REF_TOL_F32 && ew <= VKG_REF_TOL_F32);
	free(yr), free(dwr);
	assert_int_equal(vkg_region_destroy(c, reg, m, size, &err), 0);
	vkg_close(c);
}

static void test_forward_then_backward_in_order(void **state)
{
	(void)state;
	forward_then_backward_on(&g_d);
}

/* The same with every kernel's grid in pieces (--dispatch-max-macs 1024):
 * pieces whose bindings meet get a barrier between them, or the validation
 * layer reports a hazard (daemon_proc_stop fails the group). */
static void test_forward_then_backward_in_pieces(void **state)
{
	(void)state;
	forward_then_backward_on(&g_pieces);
	proto_stats st;
	assert_int_equal(rawsock_stats(g_pieces.sock, &st), 0);
	assert_int_equal(st.validation_errors, 0);
}

/* ---- errors: the same rules as linear_backward ------------------------------ */

typedef struct rconn {
	rawsock s;
	uint64_t region;
	uint8_t *map;
	uint8_t *pattern;
} rconn;

#define RSIZE 8192

static void rconn_open(rconn *c)
{
	expect_open(&c->s, g_d.sock);
	void *map;
	int fd = shm_create(RSIZE, true, RSIZE, &map);
	assert_true(fd >= 0);
	proto_reply r;
	assert_int_equal(rawsock_register(&c->s, 1, fd, RSIZE, &c->region, &r), 0);
	close(fd);
	c->map = map;
	c->pattern = malloc(RSIZE);
	assert_non_null(c->pattern);
	for (size_t i = 0; i < RSIZE; i++)
		c->map[i] = c->pattern[i] = canary(i);
}

static void rconn_close(rconn *c)
{
	if (memcmp(c->map, c->pattern, RSIZE) != 0)
		fail_msg("a refused linear_forward wrote into the client's memory");
	rawsock_close(&c->s);
	munmap(c->map, RSIZE);
	free(c->pattern);
}

/* A valid f32 forward 8×16×4: x at 0 (512 B), w at 1024 (256 B), b at
 * 2048 (16 B), y at 4096 (128 B). */
static proto_request fwd_job(const rconn *c, uint64_t id)
{
	proto_request q;
	memset(&q, 0, sizeof(q));
	q.op = PROTO_OP_LINEAR_FORWARD;
	q.id = id;
	q.dtype = PROTO_F32;
	q.batch = 8, q.in = 16, q.out = 4;
	q.t[PROTO_T_X] = (proto_tensor){.present = true, .region = c->region, .offset = 0};
	q.t[PROTO_T_W] = (proto_tensor){.present = true, .region = c->region, .offset = 1024};
	q.t[PROTO_T_B] = (proto_tensor){.present = true, .region = c->region, .offset = 2048};
	q.t[PROTO_T_Y] = (proto_tensor){.present = true, .region = c->region, .offset = 4096};
	return q;
}

/* q is refused with code, its message containing a (and b unless NULL);
 * nothing written; the connection and a new one still serve. */
static void refused(proto_request q, proto_code code, const char *a, const char *b)
{
	rconn c;
	rconn_open(&c);
	for (int t = 0; t < PROTO_T_COUNT; t++)
		if (q.t[t].present && q.t[t].region == 1)
			q.t[t].region = c.region;
	assert_int_equal(rawsock_send_request(&c.s, &q, NULL, 0), 0);
	if (b)
		expect_error(&c.s, q.id, code, a, b);
	else
		expect_error(&c.s, q.id, code, a);
	expect_conn_serves(&c.s);
	rconn_close(&c);
	expect_serves(g_d.sock);
}

static void test_errors(void **state)
{
	(void)state;
	const rconn one = {.region = 1};
	proto_request q;
	/* the valid request itself works (so each case below fails for its one change) */
	{
		rconn c;
		rconn_open(&c);
		proto_request ok = fwd_job(&c, 3);
		proto_reply r;
		assert_int_equal(rawsock_call(&c.s, &ok, &r, 30000), 0);
		assert_true(r.ok);
		rawsock_close(&c.s);
		munmap(c.map, RSIZE);
		free(c.pattern);
	}
	/* keys */
	q = fwd_job(&one, 10), q.t[PROTO_T_Y].present = false;
	refused(q, PROTO_BAD_REQUEST, "linear_forward", "'y' is missing");
	q = fwd_job(&one, 11), q.t[PROTO_T_W].present = false;
	refused(q, PROTO_BAD_REQUEST, "'w' is missing", NULL);
	q = fwd_job(&one, 12), q.t[PROTO_T_X].present = false;
	refused(q, PROTO_BAD_REQUEST, "'x' is missing", NULL);
	/* dims */
	q = fwd_job(&one, 13), q.batch = 0;
	refused(q, PROTO_BAD_REQUEST, "'batch'", ">= 1");
	q = fwd_job(&one, 14), q.in = MAX_DIM + 1;
	refused(q, PROTO_LIMIT, "'in'", "max_dim");
	q = fwd_job(&one, 15), q.out = (1ull << 40);
	refused(q, PROTO_LIMIT, "'out'", "max_dim");
	/* regions and bounds */
	q = fwd_job(&one, 16), q.t[PROTO_T_B].region = 99;
	refused(q, PROTO_BAD_REGION, "tensor 'b'", "region 99");
	q = fwd_job(&one, 17), q.t[PROTO_T_Y].offset = RSIZE - 64;
	refused(q, PROTO_OUT_OF_BOUNDS, "tensor 'y'", "do not lie inside");
	q = fwd_job(&one, 18), q.t[PROTO_T_X].offset = 2;
	refused(q, PROTO_OUT_OF_BOUNDS, "tensor 'x'", "multiple");
	q = fwd_job(&one, 19), q.t[PROTO_T_W].offset = UINT64_MAX - 8;
	refused(q, PROTO_OUT_OF_BOUNDS, "tensor 'w'", NULL);
	/* overlap: y with each input; inputs may share bytes */
	q = fwd_job(&one, 20), q.t[PROTO_T_Y].offset = 256;
	refused(q, PROTO_OVERLAP, "output 'y' overlaps input 'x'", NULL);
	q = fwd_job(&one, 21), q.t[PROTO_T_Y].offset = 1100;
	refused(q, PROTO_OVERLAP, "output 'y' overlaps input 'w'", NULL);
	q = fwd_job(&one, 22), q.t[PROTO_T_Y].offset = 2000;
	refused(q, PROTO_OVERLAP, "output 'y' overlaps input 'b'", NULL);
	/* dtype and variant */
	q = fwd_job(&one, 23), q.variant = PROTO_VARIANT_COOPMAT;
	refused(q, PROTO_UNSUPPORTED, "linear_forward", "coopmat");
	q = fwd_job(&one, 24), q.dtype = PROTO_F16, q.variant = PROTO_VARIANT_COOPMAT_KHR_F32X3;
	refused(q, PROTO_UNSUPPORTED, "coopmat_khr_f32x3", "dtype f32");
}

/* dtype and variant strings the encoder cannot send: raw frames. */
static void raw_refused(const char *dtype, const char *variant, proto_code code, const char *a,
			const char *b)
{
	rconn c;
	rconn_open(&c);
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 9 + (variant != NULL));
#define KS(k, v) (msgpack_pack_str_with_body(&pk, k, strlen(k)), msgpack_pack_str_with_body(&pk, v, strlen(v)))
#define KU(k, v) (msgpack_pack_str_with_body(&pk, k, strlen(k)), msgpack_pack_uint64(&pk, v))
#define KT(k, o) (msgpack_pack_str_with_body(&pk, k, strlen(k)), msgpack_pack_array(&pk, 2), \
		  msgpack_pack_uint64(&pk, c.region), msgpack_pack_uint64(&pk, o))
	KS("op", "linear_forward");
	KU("id", 40);
	KS("dtype", dtype);
	KU("batch", 8);
	KU("in", 16);
	KU("out", 4);
	KT("x", 0);
	KT("w", 1024);
	KT("y", 4096);
	if (variant)
		KS("variant", variant);
#undef KS
#undef KU
#undef KT
	/* rawsock_send_frame adds the length */
	assert_int_equal(rawsock_send_frame(&c.s, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);
	expect_error(&c.s, 40, code, a, b);
	expect_conn_serves(&c.s);
	rconn_close(&c);
	expect_serves(g_d.sock);
}

static void test_dtype_and_variant_strings(void **state)
{
	(void)state;
	raw_refused("f64", NULL, PROTO_UNSUPPORTED, "linear_forward", "'f64'");
	raw_refused("f32", "bogus", PROTO_BAD_REQUEST, "linear_forward", "'variant' = 'bogus'");
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--max-dim", "1048576", NULL};
	static const char *const dl_args[] = {"--devlocal-min-bytes", "1", "--dispatch-max-macs",
					      "100000", NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	static const char *const piece_args[] = {"--dispatch-max-macs", "1024", NULL};
	if (daemon_proc_start(&g_dl, dl_args, NULL) != 0)
		return -1;
	return daemon_proc_start(&g_pieces, piece_args, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	int a = daemon_proc_stop(&g_d), b = daemon_proc_stop(&g_dl), p = daemon_proc_stop(&g_pieces);
	return a == 0 && b == 0 && p == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32),
		cmocka_unit_test(test_f16),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_devlocal),
		cmocka_unit_test(test_long_in),
		cmocka_unit_test(test_forward_then_backward_in_order),
		cmocka_unit_test(test_forward_then_backward_in_pieces),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_dtype_and_variant_strings),
	};
	int rc = cmocka_run_group_tests_name("forward", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
