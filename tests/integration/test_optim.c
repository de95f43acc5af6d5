/* tests/integration/test_optim.c — the optimizer steps on device tensors
 * (proto/README.md, "Optimizer steps"): sgd_step and adam_step through
 * libvkgrad (vkg_sgd_step, vkg_adam_step, their submit forms), several
 * steps each, against the float64 reference (proto/optim.h:
 * proto_optim_ref_sgd / _adam, torch.optim's update rules) applied to the
 * stored values and rounded to each tensor's dtype after each step as the
 * daemon stores them, at the dtype's tolerance:
 *  - SGD without momentum, with momentum and dampening (the first step with
 *    first_step: buf = grad), Nesterov, weight decay;
 *  - Adam and AdamW (decoupled) with weight decay over four steps;
 *  - several parameters per request, shapes with an odd element count (a
 *    16-bit tensor's last word half its own), mixed dtypes (a bf16
 *    parameter with f32 and f16 buffers);
 *  - submitted without waiting between steps and reads: the order holds;
 *  - bad input, each refused with its code and a message naming the key,
 *    no tensor changed, then a step that succeeds: mismatched shapes, N
 *    over the limit, another connection's tensor, a freed one, one tensor
 *    in two roles, arrays of different lengths, missing and out-of-range
 *    hyperparameters, momentum without its buffer, nesterov with
 *    dampening, adam's step 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_proc.h"
#include "expect.h"
#include "optim.h"
#include "ref.h"
#include "vkgrad.h"

static daemon_proc g_d;

#define MAXP 4
#define RSIZE (1 << 20)

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

/* A client, one region for moving tensors' bytes. */
typedef struct ctx {
	vkg_client *c;
	uint64_t reg;
	uint8_t *map;
} ctx;

static void ctx_open(ctx *x)
{
	vkg_error err;
	x->c = expect_client(g_d.sock);
	x->map = vkg_region_create(x->c, RSIZE, &x->reg, &err);
	assert_non_null(x->map);
}

static void ctx_close(ctx *x)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(x->c, x->reg, x->map, RSIZE, &err), 0);
	vkg_close(x->c);
}

/* A tensor of dt holding v (n floats, rounded to dt; v then holds the
 * stored values). */
static uint64_t tensor_of(ctx *x, proto_dtype dt, uint64_t rows, uint64_t cols, float *v)
{
	vkg_error err;
	uint64_t t;
	if (vkg_tensor_new(x->c, proto_dtype_name(dt), rows, cols, &t, &err) != 0)
		fail_msg("tensor_new: %s: %s", err.code, err.message);
	vkg_ref_store(dt, x->map, v, rows * cols);
	vkg_ref_load(dt, v, x->map, rows * cols);
	if (vkg_tensor_write(x->c, t, x->reg, 0, &err) != 0)
		fail_msg("tensor_write: %s: %s", err.code, err.message);
	return t;
}

static void read_back(ctx *x, uint64_t t, proto_dtype dt, uint64_t n, float *out)
{
	vkg_error err;
	if (vkg_tensor_read(x->c, t, x->reg, 0, &err) != 0)
		fail_msg("tensor_read: %s: %s", err.code, err.message);
	vkg_ref_load(dt, out, x->map, n);
}

/* One parameter: its shape, dtypes (param, grad, buf1, buf2) and tensors,
 * with the reference's values (float64, rounded to the dtypes). */
typedef struct par {
	uint64_t rows, cols;
	proto_dtype dt[PROTO_OPT_SLOTS];
	uint64_t id[PROTO_OPT_SLOTS];
	double *ref[PROTO_OPT_SLOTS];
} par;

static double round_to(proto_dtype dt, double v)
{
	float f = (float)v, g;
	uint8_t b[4];
	vkg_ref_store(dt, b, &f, 1);
	vkg_ref_load(dt, &g, b, 1);
	return g;
}

static void par_make(ctx *x, par *p, int nslots, uint64_t seed)
{
	const uint64_t n = p->rows * p->cols;
	float *v = malloc(n * 4);
	assert_non_null(v);
	uint64_t s = seed | 1;
	for (int k = 0; k < nslots; k++) {
		for (uint64_t i = 0; i < n; i++)
			v[i] = k == PROTO_OPT_BUF2 ? fabsf(rand_unit(&s)) * 0.01f : rand_unit(&s);
		p->id[k] = tensor_of(x, p->dt[k], p->rows, p->cols, v);
		p->ref[k] = malloc(n * 8);
		assert_non_null(p->ref[k]);
		for (uint64_t i = 0; i < n; i++)
			p->ref[k][i] = v[i];
	}
	free(v);
}

/* New gradients (slot grad) in the tensor and the reference. */
static void par_new_grad(ctx *x, par *p, uint64_t seed)
{
	const uint64_t n = p->rows * p->cols;
	float *v = malloc(n * 4);
	assert_non_null(v);
	uint64_t s = seed | 1;
	for (uint64_t i = 0; i < n; i++)
		v[i] = rand_unit(&s);
	vkg_ref_store(p->dt[PROTO_OPT_GRAD], x->map, v, n);
	vkg_ref_load(p->dt[PROTO_OPT_GRAD], v, x->map, n);
	vkg_error err;
	assert_int_equal(vkg_tensor_write(x->c, p->id[PROTO_OPT_GRAD], x->reg, 0, &err), 0);
	for (uint64_t i = 0; i < n; i++)
		p->ref[PROTO_OPT_GRAD][i] = v[i];
	free(v);
}

/* The reference's step on p (o's hyperparameters), each stored value
 * rounded to its dtype. */
static void par_ref_step(par *p, const proto_optim *o, bool adam)
{
	const uint64_t n = p->rows * p->cols;
	for (uint64_t i = 0; i < n; i++) {
		double pv = p->ref[PROTO_OPT_PARAM][i], b1 = p->ref[PROTO_OPT_BUF1] ? p->ref[PROTO_OPT_BUF1][i] : 0;
		double b2 = p->ref[PROTO_OPT_BUF2] ? p->ref[PROTO_OPT_BUF2][i] : 0;
		if (adam)
			proto_optim_ref_adam(o, &pv, p->ref[PROTO_OPT_GRAD][i], &b1, &b2);
		else
			proto_optim_ref_sgd(o, &pv, p->ref[PROTO_OPT_GRAD][i], &b1);
		p->ref[PROTO_OPT_PARAM][i] = round_to(p->dt[PROTO_OPT_PARAM], pv);
		if (p->ref[PROTO_OPT_BUF1])
			p->ref[PROTO_OPT_BUF1][i] = round_to(p->dt[PROTO_OPT_BUF1], b1);
		if (p->ref[PROTO_OPT_BUF2])
			p->ref[PROTO_OPT_BUF2][i] = round_to(p->dt[PROTO_OPT_BUF2], b2);
	}
}

/* Every tensor of p (but the gradient) against the reference. */
static void par_check(ctx *x, const par *p, const char *what)
{
	const uint64_t n = p->rows * p->cols;
	float *got = malloc(n * 4);
	assert_non_null(got);
	for (int k = 0; k < PROTO_OPT_SLOTS; k++) {
		if (k == PROTO_OPT_GRAD || !p->ref[k])
			continue;
		read_back(x, p->id[k], p->dt[k], n, got);
		const double e = vkg_ref_max_rel_err(got, p->ref[k], NULL, n);
		/* (f32: 1e-4, room for a few f32 roundings per step where
		 * terms cancel in a tensor of one element) */
		const double tol = vkg_ref_tolerance(p->dt[k]);
		if (!(e <= tol))
			fail_msg("%s: slot %d (%s %llux%llu) max_rel_err %.3g > %.1g", what, k,
				 proto_dtype_name(p->dt[k]), (unsigned long long)p->rows,
				 (unsigned long long)p->cols, e, tol);
	}
	free(got);
}

static void par_free(par *p)
{
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		free(p->ref[k]);
}

static const uint64_t shapes[MAXP][2] = {{1, 1}, {7, 5}, {33, 65}, {4, 300}};

/* An SGD run: np parameters, `steps` steps (new gradients each), the
 * first with first_step when momentum is on; pipelined: each step's
 * gradient writes and the step are submitted, only the reads wait. */
static void sgd_run(const vkg_sgd_args *a0, const proto_dtype dts[PROTO_OPT_SLOTS], int np, int steps,
		    const char *what)
{
	ctx x;
	ctx_open(&x);
	par p[MAXP];
	memset(p, 0, sizeof(p));
	const bool mom = a0->momentum != 0;
	for (int i = 0; i < np; i++) {
		p[i].rows = shapes[i][0], p[i].cols = shapes[i][1];
		memcpy(p[i].dt, dts, sizeof(p[i].dt));
		par_make(&x, &p[i], mom ? 3 : 2, 11 + (uint64_t)i);
	}
	uint64_t ids[PROTO_OPT_SLOTS][MAXP];
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		for (int i = 0; i < np; i++)
			ids[k][i] = p[i].id[k];
	vkg_error err;
	for (int s = 0; s < steps; s++) {
		if (s)
			for (int i = 0; i < np; i++)
				par_new_grad(&x, &p[i], 100 + (uint64_t)(s * 10 + i));
		vkg_sgd_args a = *a0;
		a.first_step = mom && s == 0;
		uint64_t h;
		if (vkg_submit_sgd_step(x.c, (size_t)np, ids[0], ids[1], mom ? ids[2] : NULL, &a, &h, &err) != 0 ||
		    vkg_wait(x.c, h, 60000, NULL, &err) != 0)
			fail_msg("%s step %d: %s: %s", what, s, err.code, err.message);
		proto_optim o;
		proto_optim_defaults(&o);
		o.lr = a.lr, o.momentum = a.momentum, o.dampening = a.dampening;
		o.weight_decay = a.weight_decay, o.nesterov = a.nesterov, o.first_step = a.first_step;
		for (int i = 0; i < np; i++)
			par_ref_step(&p[i], &o, false);
	}
	for (int i = 0; i < np; i++) {
		par_check(&x, &p[i], what);
		par_free(&p[i]);
	}
	ctx_close(&x);
}

static const proto_dtype all_f32[PROTO_OPT_SLOTS] = {PROTO_F32, PROTO_F32, PROTO_F32, PROTO_F32};
static const proto_dtype mixed[PROTO_OPT_SLOTS] = {PROTO_BF16, PROTO_F32, PROTO_F16, PROTO_F32};
static const proto_dtype all_f16[PROTO_OPT_SLOTS] = {PROTO_F16, PROTO_F16, PROTO_F16, PROTO_F16};
static const proto_dtype all_bf16[PROTO_OPT_SLOTS] = {PROTO_BF16, PROTO_BF16, PROTO_BF16, PROTO_BF16};

static void test_sgd(void **state)
{
	(void)state;
	vkg_sgd_args a = vkg_sgd_args_init(0.1);
	sgd_run(&a, all_f32, 4, 3, "sgd");
	sgd_run(&a, all_bf16, 3, 2, "sgd bf16");
	a.momentum = 0.9, a.dampening = 0.1;
	sgd_run(&a, all_f32, 4, 4, "sgd momentum dampening");
	sgd_run(&a, mixed, 3, 3, "sgd momentum, bf16 param, f16 buffer");
	a.dampening = 0, a.nesterov = true;
	sgd_run(&a, all_f32, 3, 4, "sgd nesterov");
	a.weight_decay = 0.01;
	sgd_run(&a, all_f32, 3, 3, "sgd nesterov weight decay");
	sgd_run(&a, all_f16, 3, 3, "sgd nesterov weight decay f16");
	a = vkg_sgd_args_init(0.05);
	a.weight_decay = 0.1;
	sgd_run(&a, all_f32, 2, 2, "sgd weight decay");
}

static void adam_run(double lr, double wd, bool decoupled, const proto_dtype dts[PROTO_OPT_SLOTS], int np,
		     int steps, const char *what)
{
	ctx x;
	ctx_open(&x);
	par p[MAXP];
	memset(p, 0, sizeof(p));
	for (int i = 0; i < np; i++) {
		p[i].rows = shapes[i][0], p[i].cols = shapes[i][1];
		memcpy(p[i].dt, dts, sizeof(p[i].dt));
		par_make(&x, &p[i], 4, 31 + (uint64_t)i);
	}
	uint64_t ids[PROTO_OPT_SLOTS][MAXP];
	for (int k = 0; k < PROTO_OPT_SLOTS; k++)
		for (int i = 0; i < np; i++)
			ids[k][i] = p[i].id[k];
	vkg_error err;
	for (int s = 0; s < steps; s++) {
		if (s)
			for (int i = 0; i < np; i++)
				par_new_grad(&x, &p[i], 200 + (uint64_t)(s * 10 + i));
		vkg_adam_args a = vkg_adam_args_init(lr, (uint64_t)s + 1);
		a.weight_decay = wd, a.decoupled = decoupled;
		if (vkg_adam_step(x.c, (size_t)np, ids[0], ids[1], ids[2], ids[3], &a, NULL, &err) != 0)
			fail_msg("%s step %d: %s: %s", what, s, err.code, err.message);
		proto_optim o;
		proto_optim_defaults(&o);
		o.lr = lr, o.weight_decay = wd, o.decoupled = decoupled, o.step = (uint64_t)s + 1;
		for (int i = 0; i < np; i++)
			par_ref_step(&p[i], &o, true);
	}
	for (int i = 0; i < np; i++) {
		par_check(&x, &p[i], what);
		par_free(&p[i]);
	}
	ctx_close(&x);
}

static void test_adam(void **state)
{
	(void)state;
	adam_run(0.01, 0, false, all_f32, 4, 4, "adam");
	adam_run(0.01, 0.05, false, all_f32, 3, 4, "adam weight decay");
	adam_run(0.01, 0.05, true, all_f32, 3, 4, "adamw");
	adam_run(0.01, 0.05, true, mixed, 3, 3, "adamw bf16 param, f16 m, f32 v");
	adam_run(0.01, 0, false, all_bf16, 2, 3, "adam bf16");
}

/* ---- bad input ---------------------------------------------------------------- */

/* A raw request (msgpack keys after op and id) answered with code, its
 * message containing needle. */
static void raw_refused(vkg_client *c, const char *op, const char *code, const char *needle,
			void (*keys)(msgpack_packer *pk, void *ctx), void *kctx, unsigned nkeys)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, nkeys);
	keys(&pk, kctx);
	void *reply = NULL;
	size_t rlen = 0;
	vkg_error err;
	const int rc = vkg_call_raw(c, op, sb.data, sb.size, &reply, &rlen, &err);
	free(reply);
	msgpack_sbuffer_destroy(&sb);
	if (rc == 0 || strcmp(err.code, code) != 0 || !strstr(err.message, needle))
		fail_msg("%s: want %s '%s'; got rc %d %s: %s", op, code, needle, rc, err.code, err.message);
}

typedef struct rawk {
	const uint64_t *p, *g;
	unsigned np, ng;
	bool lr;
	double lrv;
} rawk;

static void pk_ids(msgpack_packer *pk, const char *k, const uint64_t *v, unsigned n)
{
	msgpack_pack_str_with_body(pk, k, strlen(k));
	msgpack_pack_array(pk, n);
	for (unsigned i = 0; i < n; i++)
		msgpack_pack_uint64(pk, v[i]);
}

static void keys_sgd(msgpack_packer *pk, void *c)
{
	const rawk *k = c;
	pk_ids(pk, "param", k->p, k->np);
	pk_ids(pk, "grad", k->g, k->ng);
	if (k->lr) {
		msgpack_pack_str_with_body(pk, "lr", 2);
		msgpack_pack_double(pk, k->lrv);
	}
}

static void test_errors(void **state)
{
	(void)state;
	ctx x, y;
	ctx_open(&x);
	ctx_open(&y);
	par p = {.rows = 3, .cols = 2, .dt = {PROTO_F32, PROTO_F32, PROTO_F32, PROTO_F32}};
	par_make(&x, &p, 4, 7);
	float v[6] = {1, 2, 3, 4, 5, 6};
	vkg_error err;
	const uint64_t wrong_shape = tensor_of(&x, PROTO_F32, 2, 3, v);
	const uint64_t theirs = tensor_of(&y, PROTO_F32, 3, 2, v);
	const uint64_t freed = tensor_of(&x, PROTO_F32, 3, 2, v);
	assert_int_equal(vkg_tensor_free(x.c, freed, &err), 0);
	const uint64_t *P = &p.id[0], *G = &p.id[1], *M = &p.id[2], *V = &p.id[3];
	vkg_sgd_args s = vkg_sgd_args_init(0.1);
	vkg_adam_args a = vkg_adam_args_init(0.1, 1);
	/* each refused, then a step that succeeds (the reference follows it) */
	struct {
		const char *code, *needle;
	} want[] = {
		{"bad_tensor", "'grad'[0]"},    /* mismatched shape */
		{"bad_tensor", "'grad'[0]"},    /* another connection's */
		{"bad_tensor", "'m'[0]"},       /* freed */
		{"overlap", "same tensor"},     /* grad = param */
		{"limit", "at most 256"},       /* N = 257 */
		{"bad_request", "'lr'"},        /* negative lr */
		{"bad_request", "'momentum_buf' is missing"},
		{"bad_request", "'nesterov'"},  /* with dampening */
		{"bad_request", "'step'"},      /* adam's step 0 */
		{"bad_request", "'beta1'"},     /* beta1 = 1 */
	};
	uint64_t many[257];
	for (int i = 0; i < 257; i++)
		many[i] = p.id[0];
	for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
		int rc = 0;
		vkg_sgd_args sw = s;
		vkg_adam_args aw = a;
		switch (w) {
		case 0: rc = vkg_sgd_step(x.c, 1, P, &wrong_shape, NULL, &s, NULL, &err); break;
		case 1: rc = vkg_sgd_step(x.c, 1, P, &theirs, NULL, &s, NULL, &err); break;
		case 2: rc = vkg_adam_step(x.c, 1, P, G, &freed, V, &a, NULL, &err); break;
		case 3: rc = vkg_adam_step(x.c, 1, P, P, M, V, &a, NULL, &err); break;
		case 4: rc = vkg_sgd_step(x.c, 257, many, many, NULL, &s, NULL, &err); break;
		case 5: sw.lr = -1; rc = vkg_sgd_step(x.c, 1, P, G, NULL, &sw, NULL, &err); break;
		case 6: sw.momentum = 0.9; rc = vkg_sgd_step(x.c, 1, P, G, NULL, &sw, NULL, &err); break;
		case 7:
			sw.momentum = 0.9, sw.dampening = 0.5, sw.nesterov = true;
			rc = vkg_sgd_step(x.c, 1, P, G, M, &sw, NULL, &err);
			break;
		case 8: aw.step = 0; rc = vkg_adam_step(x.c, 1, P, G, M, V, &aw, NULL, &err); break;
		case 9: aw.beta1 = 1; rc = vkg_adam_step(x.c, 1, P, G, M, V, &aw, NULL, &err); break;
		}
		if (rc == 0 || strcmp(err.code, want[w].code) != 0 || !strstr(err.message, want[w].needle))
			fail_msg("case %zu: want %s '%s'; got rc %d %s: %s", w, want[w].code, want[w].needle, rc,
				 err.code, err.message);
		/* nothing changed; a step succeeds */
		par_check(&x, &p, "after a refused step");
		a.step = w + 1;
		if (vkg_adam_step(x.c, 1, P, G, M, V, &a, NULL, &err) != 0)
			fail_msg("the step after case %zu: %s: %s", w, err.code, err.message);
		proto_optim o;
		proto_optim_defaults(&o);
		o.lr = a.lr, o.step = a.step;
		par_ref_step(&p, &o, true);
		par_check(&x, &p, "the step after a refusal");
	}
	/* keys the library always sends right: raw requests */
	const uint64_t two[2] = {p.id[0], p.id[0]};
	rawk k1 = {P, two, 1, 2, true, 0.1};
	raw_refused(x.c, "sgd_step", "bad_request", "the other keys 1", keys_sgd, &k1, 3);
	rawk k2 = {P, G, 1, 1, false, 0};
	raw_refused(x.c, "sgd_step", "bad_request", "key 'lr' is missing", keys_sgd, &k2, 2);
	rawk k3 = {P, G, 1, 1, true, NAN};
	raw_refused(x.c, "sgd_step", "bad_request", "'lr'", keys_sgd, &k3, 3);
	par_check(&x, &p, "after the raw refusals");
	assert_int_equal(vkg_sgd_step(x.c, 1, P, G, NULL, &s, NULL, &err), 0);
	proto_optim o;
	proto_optim_defaults(&o);
	o.lr = 0.1;
	par_ref_step(&p, &o, false);
	par_check(&x, &p, "the last step");
	par_free(&p);
	ctx_close(&y);
	ctx_close(&x);
	expect_serves(g_d.sock);
}

static int group_setup(void **state)
{
	(void)state;
	return daemon_proc_start(&g_d, NULL, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return daemon_proc_stop(&g_d) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sgd),
		cmocka_unit_test(test_adam),
		cmocka_unit_test(test_errors),
	};
	int rc = cmocka_run_group_tests_name("optim", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
