/* tests/integration/test_activation.c — the fused activations
 * (proto/README.md, key `activation`): linear_forward's y = act(X·Wᵀ + b)
 * with its optional output z, and linear_backward's dZ = dY ⊙ act'(y or z)
 * feeding dW, db and dX, for relu and gelu (torch's tanh form), every
 * dtype and every kernel family hello lists for it (auto always), against
 * a float64 reference (client/ref.h) at the dtype's tolerance: on the
 * direct path, on a daemon that runs every job on device-local copies in
 * small dispatches, and with reductions long enough for split-K and for
 * pieces at the loop bound. Every byte outside the job's outputs must stay
 * as it was.
 *
 * The reference follows the documented rounding: a forward's z is stored
 * in the job's dtype (it is the GEMM's Y) and y = act(stored z); a
 * backward's dZ is rounded to the dtype once, then the GEMMs run on it (as
 * torch computes both in that dtype).
 *
 * Then the order of one connection's jobs (a forward with relu and the
 * backward reading its y, pipelined), and bad input: an unknown
 * activation, one that is not a string, a missing y or z, an activation
 * in a forward with accumulate (a backward adds: half the backward cases
 * above accumulate onto values already there), z overlapping y, z out of bounds, y in an unknown
 * region, and a dZ larger than the daemon's scratch: each refused with its
 * code and a message naming the key, nothing written, and a job after it
 * succeeds. */
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
#include "job.h"
#include "rawsock.h"
#include "ref.h"
#include "shm.h"
#include "vkgrad.h"

/* g_d: direct; g_dl: device-local copies, dispatches in small pieces;
 * g_small: scratch too small for any dZ */
static daemon_proc g_d, g_dl, g_small;

static const uint64_t shapes[][3] = {
	/* batch, in, out */
	{1, 1, 1}, {65, 63, 129}, {17, 200, 3},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

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

static uint8_t canary(size_t i)
{
	return (uint8_t)(i * 29 + 11);
}

/* A value rounded to dtype dt (stored and loaded back). */
static double round_to(proto_dtype dt, double v)
{
	float f = (float)v, g;
	uint8_t buf[4];
	vkg_ref_store(dt, buf, &f, 1);
	vkg_ref_load(dt, &g, buf, 1);
	return g;
}

/* The error of got against want as vkg_ref_max_rel_err, measured against
 * at least 1/100 of `scale` (the magnitude of the terms: the tensor before
 * its activation, or the gradients with |dY| in place of dZ), so that an
 * element whose act' (or act) nearly cancels — gelu' crosses 0 near
 * -0.75 — is held to f32's absolute accuracy there, not to a relative one
 * no f32 evaluation has. */
static double err_floor(const float *got, const double *want, double scale, uint64_t n)
{
	double d = 0, m = scale / 100;
	for (uint64_t i = 0; i < n; i++) {
		if (!isfinite(got[i]))
			return INFINITY;
		d = fmax(d, fabs(got[i] - want[i]));
		m = fmax(m, fabs(want[i]));
	}
	return m > 0 ? d / m : d;
}

static double max_abs(const double *v, uint64_t n)
{
	double m = 0;
	for (uint64_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

typedef struct layout {
	uint64_t off[PROTO_T_COUNT];
	uint64_t size;
} layout;

/* Slots `mask` of a batch × in × out job placed one after another, each
 * 256-byte aligned plus `skew` elements, canaries between them. */
static void place_all(layout *l, const proto_request *shape, unsigned mask, uint64_t skew)
{
	const uint64_t es = proto_dtype_size(shape->dtype);
	uint64_t cur = 64;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		if (!(mask & (1u << t)))
			continue;
		const uint64_t at = (cur + 255) / 256 * 256 + (t % 2 ? skew * es : 0);
		l->off[t] = at;
		cur = at + proto_tensor_elems(shape, t) * es + 64;
	}
	l->size = (cur + 4095) / 4096 * 4096;
}

static const char *const families[] = {"auto",        "generic",     "tiled",
				       "tiled128",    "splitk",      "coopmat",
				       "coopmat_khr", "coopmat_nv2", "coopmat_khr_f32x3", "narrow"};
#define NFAM (sizeof(families) / sizeof(families[0]))

typedef struct acase {
	proto_dtype dt;
	proto_activation act;
	uint64_t batch, in, out;
	bool bias, want_z; /* forward */
	bool accumulate;   /* backward: dW, db and dX added to what is there */
	uint64_t skew;
	const char *variant;
} acase;

static void case_name(char *buf, size_t n, const char *dir, const acase *a)
{
	snprintf(buf, n, "%s %s %s %s %llux%llux%llu%s%s", dir, proto_dtype_name(a->dt),
		 proto_activation_name(a->act), a->variant, (unsigned long long)a->batch,
		 (unsigned long long)a->in, (unsigned long long)a->out, a->bias ? " +b" : "",
		 a->want_z ? " +z" : "");
}

/* Every byte of map outside the slots `outs` (bytes nb[t] at l->off[t]) as
 * in before. */
static int untouched_but(const uint8_t *map, const uint8_t *before, const layout *l,
			 const uint64_t *nb, unsigned outs, const char *name)
{
	for (uint64_t i = 0; i < l->size; i++) {
		bool out = false;
		for (int t = 0; t < PROTO_T_COUNT; t++)
			if ((outs & (1u << t)) && i >= l->off[t] && i < l->off[t] + nb[t])
				out = true;
		if (!out && map[i] != before[i]) {
			fprintf(stderr, "%s: byte %llu outside the outputs changed\n", name,
				(unsigned long long)i);
			return -1;
		}
	}
	return 0;
}

/* One forward case: -1 after printing why, else 0 (*unsup: the daemon
 * said unsupported). */
static int run_forward(vkg_client *c, const acase *a, uint64_t seed, bool *unsup)
{
	proto_request sh = {.dtype = a->dt, .batch = a->batch, .in = a->in, .out = a->out};
	const unsigned mask = (1u << PROTO_T_X) | (1u << PROTO_T_W) | (1u << PROTO_T_B) |
			      (1u << PROTO_T_Y) | (1u << PROTO_T_Z);
	layout l;
	place_all(&l, &sh, mask, a->skew);
	vkg_error err;
	uint64_t reg;
	uint8_t *map = vkg_region_create(c, l.size, &reg, &err);
	assert_non_null(map);
	for (size_t i = 0; i < l.size; i++)
		map[i] = canary(i);
	const uint64_t nx = a->batch * a->in, nw = a->out * a->in, ny = a->batch * a->out;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc(a->out * 4), *got = malloc(ny * 4);
	double *z = malloc(ny * 8), *y = malloc(ny * 8);
	uint8_t *before = malloc(l.size);
	assert_true(x && w && b && got && z && y && before);
	uint64_t s = seed | 1;
	for (uint64_t i = 0; i < nx; i++)
		x[i] = rand_unit(&s) * 2;
	for (uint64_t i = 0; i < nw; i++)
		w[i] = rand_unit(&s);
	for (uint64_t i = 0; i < a->out; i++)
		b[i] = rand_unit(&s);
	vkg_ref_store(a->dt, map + l.off[PROTO_T_X], x, nx);
	vkg_ref_store(a->dt, map + l.off[PROTO_T_W], w, nw);
	vkg_ref_store(a->dt, map + l.off[PROTO_T_B], b, a->out);
	vkg_ref_load(a->dt, x, map + l.off[PROTO_T_X], nx);
	vkg_ref_load(a->dt, w, map + l.off[PROTO_T_W], nw);
	vkg_ref_load(a->dt, b, map + l.off[PROTO_T_B], a->out);
	for (uint64_t r = 0; r < a->batch; r++)
		for (uint64_t o = 0; o < a->out; o++) {
			double acc = a->bias ? (double)b[o] : 0.0;
			for (uint64_t i = 0; i < a->in; i++)
				acc += (double)x[r * a->in + i] * (double)w[o * a->in + i];
			z[r * a->out + o] = acc;
			y[r * a->out + o] = vkg_ref_act(a->act, round_to(a->dt, acc));
		}
	memcpy(before, map, l.size);
	vkg_forward_job j = vkg_forward_job_init();
	j.dtype = proto_dtype_name(a->dt);
	j.batch = a->batch, j.in = a->in, j.out = a->out;
	j.x = (vkg_tensor){reg, l.off[PROTO_T_X]};
	j.w = (vkg_tensor){reg, l.off[PROTO_T_W]};
	if (a->bias)
		j.b = (vkg_tensor){reg, l.off[PROTO_T_B]};
	j.y = (vkg_tensor){reg, l.off[PROTO_T_Y]};
	if (a->want_z)
		j.z = (vkg_tensor){reg, l.off[PROTO_T_Z]};
	j.variant = a->variant;
	j.activation = proto_activation_name(a->act);
	char name[160];
	case_name(name, sizeof(name), "forward", a);
	vkg_result res;
	int rc = -1;
	*unsup = false;
	if (vkg_linear_forward(c, &j, &res, &err) != 0) {
		if (strcmp(err.code, "unsupported") == 0)
			*unsup = true, rc = 0;
		else
			fprintf(stderr, "%s: %s: %s\n", name, err.code, err.message);
		goto out;
	}
	vkg_ref_load(a->dt, got, map + l.off[PROTO_T_Y], ny);
	double e = err_floor(got, y, max_abs(z, ny), ny);
	if (!(e <= vkg_ref_tolerance(a->dt))) {
		fprintf(stderr, "%s: y max_rel_err %.3g > %s\n", name, e, vkg_ref_tolerance_text(a->dt));
		goto out;
	}
	if (a->want_z) {
		vkg_ref_load(a->dt, got, map + l.off[PROTO_T_Z], ny);
		e = vkg_ref_max_rel_err(got, z, NULL, ny);
		if (!(e <= vkg_ref_tolerance(a->dt))) {
			fprintf(stderr, "%s: z max_rel_err %.3g > %s\n", name, e,
				vkg_ref_tolerance_text(a->dt));
			goto out;
		}
	}
	uint64_t nb[PROTO_T_COUNT] = {0};
	nb[PROTO_T_Y] = nb[PROTO_T_Z] = ny * proto_dtype_size(a->dt);
	rc = untouched_but(map, before, &l, nb,
			   (1u << PROTO_T_Y) | (a->want_z ? 1u << PROTO_T_Z : 0u), name);
out:
	assert_int_equal(vkg_region_destroy(c, reg, map, l.size, &err), 0);
	free(x), free(w), free(b), free(got), free(z), free(y), free(before);
	return rc;
}

/* One backward case (dw, db, dx all asked for), as run_forward. */
static int run_backward(vkg_client *c, const acase *a, uint64_t seed, bool *unsup)
{
	proto_request sh = {.dtype = a->dt, .batch = a->batch, .in = a->in, .out = a->out};
	const int src = a->act == PROTO_ACT_RELU ? PROTO_T_Y : PROTO_T_Z;
	const unsigned outs = (1u << PROTO_T_DW) | (1u << PROTO_T_DB) | (1u << PROTO_T_DX);
	const unsigned mask = (1u << PROTO_T_X) | (1u << PROTO_T_DY) | (1u << PROTO_T_W) | outs |
			      (1u << src);
	layout l;
	place_all(&l, &sh, mask, a->skew);
	vkg_error err;
	uint64_t reg;
	uint8_t *map = vkg_region_create(c, l.size, &reg, &err);
	assert_non_null(map);
	for (size_t i = 0; i < l.size; i++)
		map[i] = canary(i);
	const uint64_t nx = a->batch * a->in, nw = a->out * a->in, ny = a->batch * a->out;
	float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *v = malloc(ny * 4);
	float *dz = malloc(ny * 4), *got = malloc((nx > nw ? nx : nw) * 4);
	double *dw = malloc(nw * 8), *db = malloc(a->out * 8), *dx = malloc(nx * 8);
	double *aw = malloc(nw * 8), *ab = malloc(a->out * 8), *ax = malloc(nx * 8);
	float *adz = malloc(ny * 4), *axx = malloc(nx * 4), *aww = malloc(nw * 4);
	uint8_t *before = malloc(l.size);
	assert_true(x && w && dy && v && dz && got && dw && db && dx && before && aw && ab && ax && adz &&
		    axx && aww);
	uint64_t s = seed | 1;
	for (uint64_t i = 0; i < nx; i++)
		x[i] = rand_unit(&s);
	for (uint64_t i = 0; i < nw; i++)
		w[i] = rand_unit(&s);
	for (uint64_t i = 0; i < ny; i++)
		dy[i] = rand_unit(&s);
	/* relu: y = relu(z), about half zeros; gelu: z over [-4, 4) */
	for (uint64_t i = 0; i < ny; i++) {
		const float zz = rand_unit(&s) * 4;
		v[i] = a->act == PROTO_ACT_RELU ? (zz > 0 ? zz : 0) : zz;
	}
	vkg_ref_store(a->dt, map + l.off[PROTO_T_X], x, nx);
	vkg_ref_store(a->dt, map + l.off[PROTO_T_W], w, nw);
	vkg_ref_store(a->dt, map + l.off[PROTO_T_DY], dy, ny);
	vkg_ref_store(a->dt, map + l.off[src], v, ny);
	vkg_ref_load(a->dt, x, map + l.off[PROTO_T_X], nx);
	vkg_ref_load(a->dt, w, map + l.off[PROTO_T_W], nw);
	vkg_ref_load(a->dt, dy, map + l.off[PROTO_T_DY], ny);
	vkg_ref_load(a->dt, v, map + l.off[src], ny);
	for (uint64_t i = 0; i < ny; i++)
		dz[i] = (float)round_to(a->dt, (double)dy[i] * vkg_ref_act_grad(a->act, v[i]));
	vkg_ref_linear_backward(a->batch, a->in, a->out, x, dz, w, dw, db, dx);
	/* the terms' magnitude: |dY|, |X|, |W| (err_floor) */
	for (uint64_t i = 0; i < ny; i++)
		adz[i] = fabsf(dy[i]);
	for (uint64_t i = 0; i < nx; i++)
		axx[i] = fabsf(x[i]);
	for (uint64_t i = 0; i < nw; i++)
		aww[i] = fabsf(w[i]);
	vkg_ref_linear_backward(a->batch, a->in, a->out, axx, adz, aww, aw, ab, ax);
	if (a->accumulate) {
		/* outputs hold values first, which the job adds to: the
		 * reference adds them too (as stored, rounded to the dtype) */
		const struct {
			int t;
			double *want, *mag;
			uint64_t n;
		} acc[3] = {{PROTO_T_DW, dw, aw, nw}, {PROTO_T_DB, db, ab, a->out}, {PROTO_T_DX, dx, ax, nx}};
		for (int k = 0; k < 3; k++) {
			for (uint64_t i = 0; i < acc[k].n; i++)
				got[i] = rand_unit(&s);
			vkg_ref_store(a->dt, map + l.off[acc[k].t], got, acc[k].n);
			vkg_ref_load(a->dt, got, map + l.off[acc[k].t], acc[k].n);
			for (uint64_t i = 0; i < acc[k].n; i++) {
				acc[k].want[i] += got[i];
				acc[k].mag[i] += fabs((double)got[i]);
			}
		}
	}
	memcpy(before, map, l.size);
	vkg_job j;
	VKG_JOB_INIT(&j);
	j.dtype = proto_dtype_name(a->dt);
	j.batch = a->batch, j.in = a->in, j.out = a->out;
	j.x = (vkg_tensor){reg, l.off[PROTO_T_X]};
	j.dy = (vkg_tensor){reg, l.off[PROTO_T_DY]};
	j.w = (vkg_tensor){reg, l.off[PROTO_T_W]};
	j.dw = (vkg_tensor){reg, l.off[PROTO_T_DW]};
	j.db = (vkg_tensor){reg, l.off[PROTO_T_DB]};
	j.dx = (vkg_tensor){reg, l.off[PROTO_T_DX]};
	if (src == PROTO_T_Y)
		j.y = (vkg_tensor){reg, l.off[PROTO_T_Y]};
	else
		j.z = (vkg_tensor){reg, l.off[PROTO_T_Z]};
	j.variant = a->variant;
	j.activation = proto_activation_name(a->act);
	j.accumulate = a->accumulate;
	char name[160];
	case_name(name, sizeof(name), a->accumulate ? "backward +=" : "backward", a);
	vkg_result res;
	int rc = -1;
	*unsup = false;
	if (vkg_linear_backward(c, &j, &res, &err) != 0) {
		if (strcmp(err.code, "unsupported") == 0)
			*unsup = true, rc = 0;
		else
			fprintf(stderr, "%s: %s: %s\n", name, err.code, err.message);
		goto out;
	}
	const struct {
		int t;
		const double *want, *mag;
		uint64_t n;
	} chk[3] = {{PROTO_T_DW, dw, aw, nw}, {PROTO_T_DB, db, ab, a->out}, {PROTO_T_DX, dx, ax, nx}};
	uint64_t nb[PROTO_T_COUNT] = {0};
	for (int k = 0; k < 3; k++) {
		vkg_ref_load(a->dt, got, map + l.off[chk[k].t], chk[k].n);
		const double e = err_floor(got, chk[k].want, max_abs(chk[k].mag, chk[k].n), chk[k].n);
		nb[chk[k].t] = chk[k].n * proto_dtype_size(a->dt);
		if (!(e <= vkg_ref_tolerance(a->dt))) {
			fprintf(stderr, "%s: %s max_rel_err %.3g > %s\n", name, proto_tensor_key[chk[k].t],
				e, vkg_ref_tolerance_text(a->dt));
			goto out;
		}
	}
	rc = untouched_but(map, before, &l, nb, outs, name);
out:
	assert_int_equal(vkg_region_destroy(c, reg, map, l.size, &err), 0);
	free(x), free(w), free(dy), free(v), free(dz), free(got), free(dw), free(db), free(dx);
	free(aw), free(ab), free(ax), free(adz), free(axx), free(aww), free(before);
	return rc;
}

/* Every family hello lists for dt, every shape, relu and gelu, forward
 * (bias and z on and off) and backward, on daemon d. */
static void run_dtype_on(const daemon_proc *d, proto_dtype dt)
{
	proto_hello h;
	expect_hello(d->sock, &h);
	vkg_client *c = expect_client(d->sock);
	unsigned failed = 0, n = 0, ran[NFAM] = {0};
	for (size_t f = 0; f < NFAM; f++) {
		if (!expect_hello_lists(&h, families[f], dt))
			continue;
		for (size_t si = 0; si < NSHAPES; si++)
			for (unsigned k = 0; k < 4; k++) {
				acase a = {.dt = dt, .act = k & 1 ? PROTO_ACT_GELU : PROTO_ACT_RELU,
					   .batch = shapes[si][0], .in = shapes[si][1], .out = shapes[si][2],
					   .bias = k & 2, .want_z = (k + si) & 1, .accumulate = k & 2,
					   .skew = (si + k) % 3 == 2,
					   .variant = families[f]};
				bool unsup;
				const uint64_t seed = 1000 + f * 97 + si * 8 + k;
				n += 2;
				int rf = run_forward(c, &a, seed, &unsup);
				if (rf != 0 || unsup)
					failed++;
				else
					ran[f]++;
				int rb = run_backward(c, &a, seed + 5, &unsup);
				if (rb != 0 || unsup)
					failed++;
				else
					ran[f]++;
			}
	}
	printf("activations %s on the %s daemon: %u cases, %u failed; per family:",
	       proto_dtype_name(dt), d == &g_dl ? "device-local" : "direct", n, failed);
	for (size_t f = 0; f < NFAM; f++)
		if (ran[f])
			printf(" %s %u", families[f], ran[f]);
	printf("\n");
	vkg_close(c);
	assert_int_equal(failed, 0);
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

static void test_devlocal(void **state)
{
	(void)state;
	proto_stats st0;
	assert_int_equal(rawsock_stats(g_dl.sock, &st0), 0);
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		run_dtype_on(&g_dl, (proto_dtype)dt);
	proto_stats st;
	assert_int_equal(rawsock_stats(g_dl.sock, &st), 0);
	assert_int_equal(st.devlocal_jobs - st0.devlocal_jobs, st.jobs_done - st0.jobs_done);
	expect_validation_clean(&g_dl, 0, "activations on device-local copies");
}

/* Reductions long enough for split-K (16-bit under auto) and for pieces at
 * the loop bound: a forward over in = 600000, a backward over batch
 * (dW) and out (dX) of 300000. */
static void test_long(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	proto_stats st0;
	assert_int_equal(rawsock_stats(g_d.sock, &st0), 0);
	/* auto: split-K for 16-bit, pieces at the loop bound for f32 */
	static const char *const v[] = {"auto", "splitk"};
	unsigned failed = 0;
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		for (int k = 0; k < 2; k++) {
			bool unsup;
			acase f = {.dt = (proto_dtype)dt, .act = PROTO_ACT_GELU, .batch = 3, .in = 600000,
				   .out = 2, .bias = true, .want_z = true, .variant = v[k]};
			if (run_forward(c, &f, 300 + (uint64_t)dt, &unsup) != 0 || unsup)
				failed++;
			acase b = {.dt = (proto_dtype)dt, .act = k == 1 ? PROTO_ACT_RELU : PROTO_ACT_GELU,
				   .batch = 300000, .in = 2, .out = 3, .variant = v[k]};
			if (run_backward(c, &b, 400 + (uint64_t)dt, &unsup) != 0 || unsup)
				failed++;
			acase x = {.dt = (proto_dtype)dt, .act = PROTO_ACT_RELU, .batch = 2, .in = 3,
				   .out = 300000, .variant = v[k]};
			if (run_backward(c, &x, 500 + (uint64_t)dt, &unsup) != 0 || unsup)
				failed++;
		}
	vkg_close(c);
	proto_stats st;
	assert_int_equal(rawsock_stats(g_d.sock, &st), 0);
	assert_true(st.splitk_jobs > st0.splitk_jobs);
	assert_int_equal(failed, 0);
}

/* One connection's jobs in order: a forward with relu writing y and z, the
 * backward reading that y (relu) right behind it, and one reading that z
 * (gelu of the same z: a different derivative), all three in flight. */
static void test_forward_then_backward(void **state)
{
	(void)state;
	vkg_client *c = expect_client(g_d.sock);
	const uint64_t B = 33, I = 17, O = 19;
	vkg_error err;
	const size_t nfl = B * I + O * I + O + 3 * B * O + 2 * (O * I + O);
	const size_t size = 4 * nfl + 4096;
	uint64_t reg;
	float *m = vkg_region_create(c, size, &reg, &err);
	assert_non_null(m);
	float *x = m, *w = x + B * I, *b = w + O * I, *y = b + O, *z = y + B * O, *dy = z + B * O;
	float *dw1 = dy + B * O, *db1 = dw1 + O * I, *dw2 = db1 + O, *db2 = dw2 + O * I;
	uint64_t s = 9;
	for (uint64_t i = 0; i < B * I; i++)
		x[i] = rand_unit(&s);
	for (uint64_t i = 0; i < O * I; i++)
		w[i] = rand_unit(&s);
	for (uint64_t i = 0; i < O; i++)
		b[i] = rand_unit(&s);
	for (uint64_t i = 0; i < B * O; i++)
		y[i] = z[i] = NAN, dy[i] = rand_unit(&s);
#define OFF(p) ((uint64_t)((uint8_t *)(p) - (uint8_t *)m))
	vkg_forward_job f = vkg_forward_job_init();
	f.batch = B, f.in = I, f.out = O;
	f.x = (vkg_tensor){reg, OFF(x)}, f.w = (vkg_tensor){reg, OFF(w)};
	f.b = (vkg_tensor){reg, OFF(b)}, f.y = (vkg_tensor){reg, OFF(y)};
	f.z = (vkg_tensor){reg, OFF(z)};
	f.activation = "relu";
	vkg_job j1, j2;
	VKG_JOB_INIT(&j1);
	j1.batch = B, j1.in = I, j1.out = O;
	j1.x = f.x, j1.dy = (vkg_tensor){reg, OFF(dy)};
	j1.dw = (vkg_tensor){reg, OFF(dw1)}, j1.db = (vkg_tensor){reg, OFF(db1)};
	j1.activation = "relu", j1.y = f.y;
	j2 = j1;
	j2.dw = (vkg_tensor){reg, OFF(dw2)}, j2.db = (vkg_tensor){reg, OFF(db2)};
	j2.activation = "gelu", j2.y = (vkg_tensor){VKG_NONE, 0}, j2.z = f.z;
#undef OFF
	uint64_t h[3];
	assert_int_equal(vkg_submit_forward(c, &f, &h[0], &err), 0);
	assert_int_equal(vkg_submit(c, &j1, &h[1], &err), 0);
	assert_int_equal(vkg_submit(c, &j2, &h[2], &err), 0);
	for (int i = 0; i < 3; i++)
		if (vkg_wait(c, h[i], 60000, NULL, &err) != 0)
			fail_msg("job %d: %s: %s", i, err.code, err.message);
	/* the reference from the inputs */
	double *zz = malloc(B * O * 8), *dz = malloc(B * O * 8), *want = malloc((O * I + O) * 8);
	float *dzf = malloc(B * O * 4);
	assert_true(zz && dz && want && dzf);
	for (uint64_t r = 0; r < B; r++)
		for (uint64_t o = 0; o < O; o++) {
			double acc = b[o];
			for (uint64_t i = 0; i < I; i++)
				acc += (double)x[r * I + i] * w[o * I + i];
			zz[r * O + o] = acc;
		}
	for (int act = 0; act < 2; act++) {
		for (uint64_t i = 0; i < B * O; i++) {
			const double zf = (float)zz[i];
			dzf[i] = (float)(dy[i] * (act == 0 ? vkg_ref_act_grad(PROTO_ACT_RELU, zf > 0 ? zf : 0)
							   : vkg_ref_act_grad(PROTO_ACT_GELU, zf)));
		}
		vkg_ref_linear_backward(B, I, O, x, dzf, NULL, want, want + O * I, NULL);
		const float *gw = act == 0 ? dw1 : dw2, *gb = act == 0 ? db1 : db2;
		assert_true(vkg_ref_max_rel_err(gw, want, NULL, O * I) <= VKG_REF_TOL_F32);
		assert_true(vkg_ref_max_rel_err(gb, want + O * I, NULL, O) <= VKG_REF_TOL_F32);
	}
	for (uint64_t i = 0; i < B * O; i++) {
		assert_true(fabs(z[i] - zz[i]) <= 1e-4 * (1 + fabs(zz[i])));
		assert_true(y[i] == (z[i] > 0 ? z[i] : 0));
	}
	free(zz), free(dz), free(want), free(dzf);
	assert_int_equal(vkg_region_destroy(c, reg, m, size, &err), 0);
	vkg_close(c);
}

/* ---- bad input ------------------------------------------------------------ */

#define RSIZE 16384

/* A valid f32 4×8×6 job on a fresh region of canaries: x at 0, w at 1024,
 * b at 2048, y at 3072, z at 4096, dy at 5120, dw at 6144, db at 7168, dx
 * at 8192. */
typedef struct bad {
	vkg_client *c;
	uint64_t reg;
	uint8_t *map, pattern[RSIZE];
} bad;

static void bad_open(bad *b, const daemon_proc *d)
{
	vkg_error err;
	b->c = expect_client(d->sock);
	b->map = vkg_region_create(b->c, RSIZE, &b->reg, &err);
	assert_non_null(b->map);
	for (size_t i = 0; i < RSIZE; i++)
		b->map[i] = b->pattern[i] = canary(i);
}

static vkg_forward_job bad_fwd(const bad *b)
{
	vkg_forward_job f = vkg_forward_job_init();
	f.batch = 4, f.in = 8, f.out = 6;
	f.x = (vkg_tensor){b->reg, 0}, f.w = (vkg_tensor){b->reg, 1024};
	f.b = (vkg_tensor){b->reg, 2048}, f.y = (vkg_tensor){b->reg, 3072};
	f.z = (vkg_tensor){b->reg, 4096};
	f.activation = "gelu";
	return f;
}

static vkg_job bad_bwd(const bad *b)
{
	vkg_job j;
	VKG_JOB_INIT(&j);
	j.batch = 4, j.in = 8, j.out = 6;
	j.x = (vkg_tensor){b->reg, 0}, j.w = (vkg_tensor){b->reg, 1024};
	j.y = (vkg_tensor){b->reg, 3072}, j.z = (vkg_tensor){b->reg, 4096};
	j.dy = (vkg_tensor){b->reg, 5120}, j.dw = (vkg_tensor){b->reg, 6144};
	j.db = (vkg_tensor){b->reg, 7168}, j.dx = (vkg_tensor){b->reg, 8192};
	j.activation = "relu";
	return j;
}

/* The last call failed with code, its message containing n1 and n2 (NULL:
 * not checked); nothing was written; then a plain job on the same
 * connection succeeds. */
static void bad_check(bad *b, int rc, const vkg_error *err, const char *code, const char *n1,
		      const char *n2)
{
	assert_int_not_equal(rc, 0);
	if (strcmp(err->code, code) != 0 || !strstr(err->message, n1) || (n2 && !strstr(err->message, n2)))
		fail_msg("want %s with '%s' '%s'; got %s: %s", code, n1, n2 ? n2 : "", err->code,
			 err->message);
	if (memcmp(b->map, b->pattern, RSIZE) != 0)
		fail_msg("a refused job wrote into the client's memory (%s)", n1);
	vkg_job ok;
	VKG_JOB_INIT(&ok);
	ok.batch = 4, ok.in = 8, ok.out = 6;
	ok.x = (vkg_tensor){b->reg, 0}, ok.dy = (vkg_tensor){b->reg, 5120};
	ok.dw = (vkg_tensor){b->reg, 6144};
	vkg_error e2;
	if (vkg_linear_backward(b->c, &ok, NULL, &e2) != 0)
		fail_msg("a job after the refusal failed: %s: %s", e2.code, e2.message);
	memcpy(b->pattern, b->map, RSIZE); /* (that job wrote dw) */
}

static void bad_close(bad *b)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(b->c, b->reg, b->map, RSIZE, &err), 0);
	vkg_close(b->c);
}

static void test_errors(void **state)
{
	(void)state;
	bad b;
	bad_open(&b, &g_d);
	vkg_error err;
	vkg_forward_job f;
	vkg_job j;
	/* the valid ones work */
	f = bad_fwd(&b);
	assert_int_equal(vkg_linear_forward(b.c, &f, NULL, &err), 0);
	j = bad_bwd(&b);
	assert_int_equal(vkg_linear_backward(b.c, &j, NULL, &err), 0);
	memcpy(b.pattern, b.map, RSIZE);
	/* an unknown activation: libvkgrad refuses it before sending */
	f = bad_fwd(&b), f.activation = "swish";
	bad_check(&b, vkg_linear_forward(b.c, &f, NULL, &err), &err, "io", "activation 'swish'", NULL);
	/* relu without y, gelu without z */
	j = bad_bwd(&b), j.y.region = VKG_NONE;
	bad_check(&b, vkg_linear_backward(b.c, &j, NULL, &err), &err, "bad_request", "key 'y' is missing",
		  "relu");
	j = bad_bwd(&b), j.activation = "gelu", j.z.region = VKG_NONE;
	bad_check(&b, vkg_linear_backward(b.c, &j, NULL, &err), &err, "bad_request", "key 'z' is missing",
		  "gelu");
	/* with accumulate */
	f = bad_fwd(&b), f.accumulate = true;
	bad_check(&b, vkg_linear_forward(b.c, &f, NULL, &err), &err, "bad_request", "'activation'",
		  "accumulate");
	/* (a backward takes accumulate with an activation: run_backward) */
	/* z overlapping y, z out of bounds, z overlapping an input */
	f = bad_fwd(&b), f.z.offset = 3072 + 8;
	bad_check(&b, vkg_linear_forward(b.c, &f, NULL, &err), &err, "overlap", "'z'", "'y'");
	f = bad_fwd(&b), f.z.offset = RSIZE - 8;
	bad_check(&b, vkg_linear_forward(b.c, &f, NULL, &err), &err, "out_of_bounds", "tensor 'z'", NULL);
	f = bad_fwd(&b), f.z.offset = 1024;
	bad_check(&b, vkg_linear_forward(b.c, &f, NULL, &err), &err, "overlap", "output 'z'", "'w'");
	/* a backward's y in an unknown region; its y is an input: it may
	 * share bytes with dy (no overlap), but not with an output */
	j = bad_bwd(&b), j.y.region = 77;
	bad_check(&b, vkg_linear_backward(b.c, &j, NULL, &err), &err, "bad_region", "tensor 'y'",
		  "region 77");
	j = bad_bwd(&b), j.y.offset = 6144;
	bad_check(&b, vkg_linear_backward(b.c, &j, NULL, &err), &err, "overlap", "output 'dw'",
		  "input 'y'");
	j = bad_bwd(&b), j.y.offset = 5120; /* y = dy's bytes: allowed */
	assert_int_equal(vkg_linear_backward(b.c, &j, NULL, &err), 0);
	memcpy(b.pattern, b.map, RSIZE);
	/* without an activation a backward's y and z are unknown keys, ignored
	 * (as before the addition): even an unknown region */
	j = bad_bwd(&b), j.activation = NULL, j.y.region = 77, j.z.region = 78;
	assert_int_equal(vkg_linear_backward(b.c, &j, NULL, &err), 0);
	memcpy(b.pattern, b.map, RSIZE);
	bad_close(&b);

	/* raw frames the encoder cannot send: activation not a string, or an
	 * unknown name (the daemon's own message) */
	for (int k = 0; k < 2; k++) {
		rawsock s;
		expect_open(&s, g_d.sock);
		void *map;
		int fd = shm_create(RSIZE, true, RSIZE, &map);
		assert_true(fd >= 0);
		uint64_t region;
		proto_reply r;
		assert_int_equal(rawsock_register(&s, 1, fd, RSIZE, &region, &r), 0);
		close(fd);
		msgpack_sbuffer sb;
		msgpack_sbuffer_init(&sb);
		msgpack_packer pk;
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 10);
#define KS(k, v) (msgpack_pack_str_with_body(&pk, k, strlen(k)), msgpack_pack_str_with_body(&pk, v, strlen(v)))
#define KU(k, v) (msgpack_pack_str_with_body(&pk, k, strlen(k)), msgpack_pack_uint64(&pk, v))
#define KT(k, o) (msgpack_pack_str_with_body(&pk, k, strlen(k)), msgpack_pack_array(&pk, 2), \
		  msgpack_pack_uint64(&pk, region), msgpack_pack_uint64(&pk, o))
		KS("op", "linear_forward");
		KU("id", 50);
		KS("dtype", "f32");
		KU("batch", 4);
		KU("in", 8);
		KU("out", 6);
		KT("x", 0);
		KT("w", 1024);
		KT("y", 3072);
		if (k == 0)
			KU("activation", 1);
		else
			KS("activation", "softplus");
#undef KS
#undef KU
#undef KT
		assert_int_equal(rawsock_send_frame(&s, sb.data, sb.size, NULL, 0), 0);
		msgpack_sbuffer_destroy(&sb);
		if (k == 0)
			expect_error(&s, 50, PROTO_BAD_REQUEST, "'activation' must be a string");
		else
			expect_error(&s, 50, PROTO_BAD_REQUEST, "'activation' = 'softplus'", "none, relu, gelu");
		expect_conn_serves(&s);
		rawsock_close(&s);
		munmap(map, RSIZE);
	}
	expect_serves(g_d.sock);
}

/* A dZ that does not fit the daemon's scratch: `limit`, naming the
 * activation and the cap, nothing written; a plain job and a forward with
 * an activation (no scratch needed) still run. */
static void test_no_scratch(void **state)
{
	(void)state;
	bad b;
	bad_open(&b, &g_small);
	vkg_error err;
	vkg_job j = bad_bwd(&b);
	j.batch = 40; /* dy 40×6 f32 = 960 bytes; the cap is 512 */
	j.dy.offset = 9216, j.dx.region = VKG_NONE, j.x.offset = 12288;
	j.y.offset = 10240;
	bad_check(&b, vkg_linear_backward(b.c, &j, NULL, &err), &err, "limit", "activation 'relu'",
		  "scratch");
	vkg_forward_job f = bad_fwd(&b);
	assert_int_equal(vkg_linear_forward(b.c, &f, NULL, &err), 0);
	bad_close(&b);
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const args[] = {"--max-dim", "1048576", NULL};
	static const char *const dl_args[] = {"--devlocal-min-bytes", "1", "--dispatch-max-macs",
					      "100000", "--no-cost-model", NULL};
	static const char *const small_args[] = {"--scratch-max-bytes", "512", "--no-cost-model", NULL};
	if (daemon_proc_start(&g_d, args, NULL) != 0)
		return -1;
	if (daemon_proc_start(&g_dl, dl_args, NULL) != 0)
		return -1;
	return daemon_proc_start(&g_small, small_args, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	int a = daemon_proc_stop(&g_d), b = daemon_proc_stop(&g_dl), s = daemon_proc_stop(&g_small);
	return a == 0 && b == 0 && s == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32),
		cmocka_unit_test(test_f16),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_devlocal),
		cmocka_unit_test(test_long),
		cmocka_unit_test(test_forward_then_backward),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_no_scratch),
	};
	int rc = cmocka_run_group_tests_name("activation", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
