/* tests/integration/test_tenants.c — sharing the GPU between tenants (engine.h,
 * daemon/sched/): a tiny job's wait beside another connection's flood of
 * large ones, GPU-time shares of two heavy tenants, and a connection's
 * order across job classes (a small job reading what a large job of its
 * connection wrote, accumulations through both classes), and large jobs
 * streaming while another connection's small jobs are about. On lavapipe both
 * classes share its one queue: large jobs there go in slices. Times are
 * compared as ratios with generous bounds, never against a clock. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon_proc.h"
#include "group.h"
#include "rawsock.h"
#include "ref.h"
#include "vkgrad.h"

static daemon_proc g_main;
/* the daemon heavy_open and tiny_open connect to (NULL: g_main's) */
static const char *g_sock;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void fill(float *p, size_t n, unsigned seed)
{
	for (size_t k = 0; k < n; k++)
		p[k] = (float)(((k + seed) * 7) % 17) * 0.0625f - 0.5f;
}

/* One tenant's large dW-only jobs of b x i x o f32, each in its own part
 * of one region: x, dy, dw. */
typedef struct heavy {
	vkg_client *c;
	uint64_t reg;
	float *map;
	size_t bytes, per;
	uint64_t b, i, o;
	uint32_t n;
} heavy;

static void heavy_open(heavy *h, uint64_t b, uint64_t i, uint64_t o, uint32_t n)
{
	vkg_error err;
	*h = (heavy){.b = b, .i = i, .o = o, .n = n};
	h->c = vkg_connect(g_sock ? g_sock : g_main.sock, &err);
	assert_non_null(h->c);
	h->per = b * i + b * o + o * i;
	h->bytes = h->per * n * sizeof(float);
	h->map = vkg_region_create(h->c, h->bytes, &h->reg, &err);
	if (!h->map)
		fail_msg("heavy region: %s: %s", err.code, err.message);
	for (uint32_t k = 0; k < n; k++)
		fill(h->map + k * h->per, h->b * h->i + h->b * h->o, k);
}

static vkg_job heavy_job(const heavy *h, uint32_t k)
{
	const uint64_t base = (uint64_t)k * h->per * sizeof(float);
	vkg_job j = vkg_job_init();
	j.batch = h->b, j.in = h->i, j.out = h->o;
	j.x = (vkg_tensor){h->reg, base};
	j.dy = (vkg_tensor){h->reg, base + h->b * h->i * 4};
	j.dw = (vkg_tensor){h->reg, base + (h->b * h->i + h->b * h->o) * 4};
	return j;
}

/* Every job's dW against float64. */
static void heavy_check(const heavy *h)
{
	double *g = calloc(h->o * h->i, sizeof(double));
	assert_non_null(g);
	for (uint32_t k = 0; k < h->n; k++) {
		const float *p = h->map + k * h->per;
		vkg_ref_linear_backward(h->b, h->i, h->o, p, p + h->b * h->i, NULL, g, NULL, NULL);
		const double e = vkg_ref_max_rel_err(p + h->b * h->i + h->b * h->o, g, NULL, h->o * h->i);
		if (e > vkg_ref_tolerance(PROTO_F32))
			fail_msg("heavy job %u: max_rel_err %.3g (tolerance %s)", k, e,
				 vkg_ref_tolerance_text(PROTO_F32));
	}
	free(g);
}

static void heavy_close(heavy *h)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(h->c, h->reg, h->map, h->bytes, &err), 0);
	vkg_close(h->c);
}

/* A tiny f32 full backward (8 x 16 x 4) on its own connection. */
typedef struct tiny {
	vkg_client *c;
	uint64_t reg;
	float *map;
	size_t bytes;
} tiny;

enum { TB = 8, TI = 16, TO = 4 };

static void tiny_open(tiny *t)
{
	vkg_error err;
	t->c = vkg_connect(g_sock ? g_sock : g_main.sock, &err);
	assert_non_null(t->c);
	t->bytes = (TB * TI + TB * TO + TO * TI + TO * TI + TO + TB * TI) * sizeof(float);
	t->map = vkg_region_create(t->c, t->bytes, &t->reg, &err);
	assert_non_null(t->map);
	fill(t->map, TB * TI + TB * TO + TO * TI, 3);
}

/* One tiny job, synchronous; its round trip in µs. Checks its dW. */
static uint64_t tiny_run(tiny *t)
{
	vkg_job j = vkg_job_init();
	j.batch = TB, j.in = TI, j.out = TO;
	uint64_t off = 0;
	j.x = (vkg_tensor){t->reg, off}, off += TB * TI * 4;
	j.dy = (vkg_tensor){t->reg, off}, off += TB * TO * 4;
	j.w = (vkg_tensor){t->reg, off}, off += TO * TI * 4;
	j.dw = (vkg_tensor){t->reg, off}, off += TO * TI * 4;
	j.db = (vkg_tensor){t->reg, off}, off += TO * 4;
	j.dx = (vkg_tensor){t->reg, off};
	vkg_result r;
	vkg_error err;
	const uint64_t t0 = now_us();
	if (vkg_linear_backward(t->c, &j, &r, &err) != 0)
		fail_msg("tiny job: %s: %s", err.code, err.message);
	const uint64_t us = now_us() - t0;
	double g[TO * TI];
	vkg_ref_linear_backward(TB, TI, TO, t->map, t->map + TB * TI, NULL, g, NULL, NULL);
	const double e = vkg_ref_max_rel_err(t->map + TB * TI + TB * TO + TO * TI, g, NULL, TO * TI);
	if (e > vkg_ref_tolerance(PROTO_F32))
		fail_msg("tiny job's dW: max_rel_err %.3g", e);
	return us;
}

static uint64_t tiny_median(tiny *t, int n)
{
	uint64_t v[16];
	assert_true(n <= 16);
	for (int k = 0; k < n; k++)
		v[k] = tiny_run(t);
	qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
	return v[n / 2];
}

static void tiny_close(tiny *t)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(t->c, t->reg, t->map, t->bytes, &err), 0);
	vkg_close(t->c);
}

/* A connection floods 512x512x64 f32 dW-only jobs (each about 0.1-0.2 s of
 * lavapipe: one batch of 8 of them was 1.5 s before job classes); another
 * connection's tiny job then waits at most about a slice, not for whole
 * batches. The goal is 20x; the bound here is generous for a
 * shared CI machine (before job classes it was about 1,900x). A slice on
 * lavapipe is itself some 60 tiny jobs long, and a loaded make test
 * stretches it (8-11x alone here, 26-51x beside another test binary,
 * 61.6x once in a fresh clone's make test, 2026-12-06), so the test fails
 * only where the tiny job waited both over RATIO times its time alone and
 * over half of one large job's own time, measured just before the flood:
 * waiting for whole batches, or for whole jobs, is past both. */
static void test_tiny_job_beside_a_flood(void **state)
{
	(void)state;
	enum { N = 12, RATIO = 60 };
	tiny t;
	tiny_open(&t);
	tiny_run(&t); /* warm */
	const uint64_t alone = tiny_median(&t, 7);
	heavy h;
	heavy_open(&h, 512, 512, 64, N);
	uint64_t hd[N];
	vkg_error err;
	vkg_result r;
	/* one large job alone (job 0; the flood writes the same dW again) */
	const uint64_t t0 = now_us();
	vkg_job j0 = heavy_job(&h, 0);
	assert_int_equal(vkg_submit(h.c, &j0, &hd[0], &err), 0);
	if (vkg_wait(h.c, hd[0], 600000, &r, &err) != 0)
		fail_msg("the large job alone: %s: %s", err.code, err.message);
	const uint64_t one = now_us() - t0;
	for (uint32_t k = 0; k < N; k++) {
		vkg_job j = heavy_job(&h, k);
		assert_int_equal(vkg_submit(h.c, &j, &hd[k], &err), 0);
	}
	usleep(100000); /* the flood reached the daemon and runs */
	const uint64_t beside = tiny_median(&t, 7);
	vkg_trace tr;
	if (vkg_trace_last(&tr) == 0) {
		printf("the last tiny job beside the flood:");
		for (unsigned k = 0; k < tr.n_stages; k++)
			printf(" %s %llu us", tr.stages[k].name, (unsigned long long)(tr.stages[k].ns / 1000));
		printf("\n");
	}
	for (uint32_t k = 0; k < N; k++)
		if (vkg_wait(h.c, hd[k], 600000, &r, &err) != 0)
			fail_msg("heavy job %u: %s: %s", k, err.code, err.message);
	heavy_check(&h);
	heavy_close(&h);
	tiny_close(&t);
	printf("tiny job p50 alone %llu us, beside a flood of %d large jobs %llu us (%.1fx, bound %dx); "
	       "one large job alone %llu us (bound half of it)\n",
	       (unsigned long long)alone, N, (unsigned long long)beside,
	       (double)beside / (double)(alone ? alone : 1), RATIO, (unsigned long long)one);
	if (beside > RATIO * (alone > 200 ? alone : 200) && beside > one / 2)
		fail_msg("the tiny job waited %llu us beside the flood, %llu us alone (over %dx) and one large "
			 "job took %llu us alone (over half of it)",
			 (unsigned long long)beside, (unsigned long long)alone, RATIO, (unsigned long long)one);
}

/* Two tenants keep large jobs in flight, one job twice the other's size:
 * shared by GPU time, each gets about half of it, so the one with jobs
 * half the size finishes about twice as many. Shares of GPU time (each
 * answer's gpu_us over its batch's jobs, summed per tenant over the same
 * span) within 2x of each other; the multiply-adds are printed beside.
 * GPU time, not multiply-adds: the kernels the daemon picks for the two
 * shapes need not be equally fast. On lavapipe the daemon measures its
 * cost model at start, and a start under load (make test runs two test
 * binaries at once) once made it pick a kernel three times slower for one
 * tenant's shape: its 38 jobs took 73 ms each against the estimate's 22,
 * so it got half the GPU time but a fifth of the multiply-adds (shares
 * 0.22 : 0.78, 1 failure in 55 runs, 2026-12-06). Both must be large jobs: on
 * lavapipe the smaller tenant's jobs of 256x512x64 took about 7 ms, near
 * the CPU's small-job bound (5 ms of estimated time). In 3 of 22 runs
 * (2026-12-06) that tenant finished 348-860 jobs where it usually
 * finishes about 400, and the other's share fell to 0.19-0.28: taken, it
 * seems, as small jobs, ahead of the other tenant. At twice those sizes
 * the daemon's stats counted no small job in 41 runs. */
static void test_two_heavy_tenants_share_gpu_time(void **state)
{
	(void)state;
	enum { N = 8, SECONDS = 6 };
	heavy a, b;
	heavy_open(&a, 1024, 512, 64, N); /* 2x b's jobs */
	heavy_open(&b, 512, 512, 64, N);
	uint64_t ha[N], hb[N];
	vkg_error err;
	vkg_result r;
	for (uint32_t k = 0; k < N; k++) {
		vkg_job ja = heavy_job(&a, k), jb = heavy_job(&b, k);
		assert_int_equal(vkg_submit(a.c, &ja, &ha[k], &err), 0);
		assert_int_equal(vkg_submit(b.c, &jb, &hb[k], &err), 0);
	}
	/* both keep N in flight: each answer is followed by the same job again */
	uint64_t done_a = 0, done_b = 0;
	double gpu_a = 0, gpu_b = 0; /* us of GPU time, a batch's shared by its jobs */
	const uint64_t end = now_us() + SECONDS * 1000000ull;
	while (now_us() < end) {
		for (int side = 0; side < 2; side++) {
			heavy *h = side ? &b : &a;
			uint64_t *hd = side ? hb : ha;
			for (uint32_t k = 0; k < N; k++) {
				int pr = vkg_poll(h->c, hd[k], &r, &err);
				if (pr == -EAGAIN)
					continue;
				if (pr != 0)
					fail_msg("poll: %s: %s", err.code, err.message);
				*(side ? &done_b : &done_a) += 1;
				*(side ? &gpu_b : &gpu_a) += (double)r.gpu_us / (double)(r.batch_jobs ? r.batch_jobs : 1);
				vkg_job j = heavy_job(h, k);
				assert_int_equal(vkg_submit(h->c, &j, &hd[k], &err), 0);
			}
		}
		usleep(2000);
	}
	for (uint32_t k = 0; k < N; k++) {
		assert_int_equal(vkg_wait(a.c, ha[k], 600000, &r, &err), 0);
		assert_int_equal(vkg_wait(b.c, hb[k], 600000, &r, &err), 0);
	}
	heavy_check(&a);
	heavy_check(&b);
	const double macs_a = (double)done_a * 1024 * 512 * 64, macs_b = (double)done_b * 512 * 512 * 64;
	printf("in %d s: tenant A %llu jobs (%.3g multiply-adds, %.0f ms of GPU time), tenant B (half-size "
	       "jobs) %llu jobs (%.3g, %.0f ms): GPU-time shares %.2f : %.2f, multiply-add shares %.2f : %.2f\n",
	       SECONDS, (unsigned long long)done_a, macs_a, gpu_a / 1e3, (unsigned long long)done_b, macs_b,
	       gpu_b / 1e3, gpu_a / (gpu_a + gpu_b + 1e-9), gpu_b / (gpu_a + gpu_b + 1e-9),
	       macs_a / (macs_a + macs_b), macs_b / (macs_a + macs_b));
	heavy_close(&a);
	heavy_close(&b);
	if (done_a == 0 || done_b == 0 || gpu_a <= 0 || gpu_b <= 0)
		fail_msg("a tenant got no GPU time: %llu and %llu jobs, %.0f and %.0f us", (unsigned long long)done_a,
			 (unsigned long long)done_b, gpu_a, gpu_b);
	if (gpu_a > 2 * gpu_b || gpu_b > 2 * gpu_a)
		fail_msg("GPU-time shares not within 2x: %.0f against %.0f us", gpu_a, gpu_b);
}

/* One connection: a large job writes dW; a small job then reads four rows
 * of it as its x. The small job runs on the other class's track, and must
 * see the large job's output (dW starts as NaN: a small job that ran first
 * would read NaN). Then accumulations into one dB through both classes, in
 * turns, add up exactly (integer-valued data). */
static void test_order_across_classes(void **state)
{
	(void)state;
	const uint64_t B = 512, I = 512, O = 64; /* large: ~17 M multiply-adds */
	vkg_error err;
	vkg_client *c = vkg_connect(g_main.sock, &err);
	assert_non_null(c);
	const size_t lf = B * I + B * O + O * I; /* x, dy, dw */
	const size_t sf = 4 * I + 4 * 4 + 4 * I; /* small: x = dw's rows, dy, dw */
	const size_t bytes = (lf + sf + 2 * O) * sizeof(float);
	uint64_t reg;
	float *m = vkg_region_create(c, bytes, &reg, &err);
	assert_non_null(m);
	fill(m, B * I + B * O, 5);
	for (size_t k = 0; k < O * I; k++)
		m[B * I + B * O + k] = NAN;
	float *sdy = m + lf, *sdw = sdy + 16;
	fill(sdy, 16, 9);
	vkg_job lj = vkg_job_init();
	lj.batch = B, lj.in = I, lj.out = O;
	lj.x = (vkg_tensor){reg, 0};
	lj.dy = (vkg_tensor){reg, B * I * 4};
	lj.dw = (vkg_tensor){reg, (B * I + B * O) * 4};
	vkg_job sj = vkg_job_init();
	sj.batch = 4, sj.in = I, sj.out = 4;
	sj.x = lj.dw; /* the large job's first 4 rows of dW */
	sj.dy = (vkg_tensor){reg, lf * 4};
	sj.dw = (vkg_tensor){reg, (lf + 16) * 4};
	uint64_t h1, h2;
	vkg_result r;
	assert_int_equal(vkg_submit(c, &lj, &h1, &err), 0);
	assert_int_equal(vkg_submit(c, &sj, &h2, &err), 0);
	if (vkg_wait(c, h1, 600000, &r, &err) != 0 || vkg_wait(c, h2, 600000, &r, &err) != 0)
		fail_msg("jobs: %s: %s", err.code, err.message);
	double *g = calloc(O * I, sizeof(double));
	assert_non_null(g);
	vkg_ref_linear_backward(B, I, O, m, m + B * I, NULL, g, NULL, NULL);
	double e = vkg_ref_max_rel_err(m + B * I + B * O, g, NULL, O * I);
	if (e > vkg_ref_tolerance(PROTO_F32))
		fail_msg("large job: max_rel_err %.3g", e);
	double gs[4 * I];
	vkg_ref_linear_backward(4, I, 4, m + B * I + B * O, sdy, NULL, gs, NULL, NULL);
	e = vkg_ref_max_rel_err(sdw, gs, NULL, 4 * I);
	if (!(e <= vkg_ref_tolerance(PROTO_F32)))
		fail_msg("the small job did not see the large job's dW: max_rel_err %.3g", e);

	/* accumulations into one db, alternating a large and a small job:
	 * db += sum of dy rows; dy integer-valued, so sums are exact */
	float *db = sdw + 4 * I;
	for (size_t k = 0; k < B * O; k++)
		m[B * I + k] = (float)((k % 5) - 2);
	for (size_t k = 0; k < O; k++)
		db[k] = 0;
	vkg_job la = vkg_job_init(), sa = vkg_job_init();
	la.batch = B, la.in = I, la.out = O, la.accumulate = true;
	la.x = lj.x, la.dy = lj.dy, la.db = (vkg_tensor){reg, (size_t)((char *)db - (char *)m)};
	sa.batch = 2, sa.in = 1, sa.out = O, sa.accumulate = true;
	sa.x = lj.x, sa.dy = lj.dy, sa.db = la.db;
	la.dw = lj.dw; /* large: a dW too, so it is large */
	enum { ROUNDS = 3 };
	uint64_t hs[2 * ROUNDS];
	for (int k = 0; k < ROUNDS; k++) {
		assert_int_equal(vkg_submit(c, &la, &hs[2 * k], &err), 0);
		assert_int_equal(vkg_submit(c, &sa, &hs[2 * k + 1], &err), 0);
	}
	for (int k = 0; k < 2 * ROUNDS; k++)
		if (vkg_wait(c, hs[k], 600000, &r, &err) != 0)
			fail_msg("accumulating job %d: %s: %s", k, err.code, err.message);
	for (size_t o = 0; o < O; o++) {
		double want = 0;
		for (size_t b = 0; b < B; b++)
			want += (double)m[B * I + b * O + o] * (b < 2 ? ROUNDS * 2 : ROUNDS);
		if ((double)db[o] != want)
			fail_msg("db[%zu] = %g after %d rounds, want %g (an accumulation lost)", o,
				 (double)db[o], ROUNDS, want);
	}
	free(g);
	assert_int_equal(vkg_region_destroy(c, reg, m, bytes, &err), 0);
	vkg_close(c);
}

/* One heavy job (k) of h, synchronous; did it stream? (The jobs here are
 * under --stream-min-bytes: whenever one streams, stats count it as
 * streamed beside others' small jobs too.) Its dW is checked against
 * float64 with the others at the end. */
static bool heavy_streamed(const heavy *h, const char *sock, uint32_t k)
{
	proto_stats a, b;
	assert_int_equal(rawsock_stats(sock, &a), 0);
	vkg_job j = heavy_job(h, k);
	vkg_result r;
	vkg_error err;
	if (vkg_linear_backward(h->c, &j, &r, &err) != 0)
		fail_msg("heavy job %u: %s: %s", k, err.code, err.message);
	assert_int_equal(rawsock_stats(sock, &b), 0);
	assert_int_equal(b.stream_shared_jobs - a.stream_shared_jobs, b.stream_jobs - a.stream_jobs);
	return b.stream_jobs - a.stream_jobs == 1;
}

/* --stream-shared-min-bytes: a large job on the device-local path streams
 * (its copies on the transfer queues, away from the queue small jobs
 * share the SMs with) only while another connection's small jobs are
 * about: not alone, not beside small jobs of its own connection, yes
 * within a second of another's, and no longer once that second passed.
 * Every result matches float64, and the job streamed gives the same bits
 * as the same job unstreamed. (Lavapipe has no transfer queue: its
 * streamed jobs copy on the compute queue, the same steps in order.) */
static void test_large_jobs_stream_beside_others_small_ones(void **state)
{
	(void)state;
	daemon_proc d = {0};
	/* (lavapipe has no transfer-only queue: auto would be off here) */
	static const char *const args[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "65536",
					   "--stream-shared-min-bytes", "1", NULL};
	assert_int_equal(daemon_proc_start(&d, args, NULL), 0);
	g_sock = d.sock;
	heavy h;
	heavy_open(&h, 512, 512, 64, 4);
	tiny own = {0}, other = {0};
	assert_false(heavy_streamed(&h, d.sock, 0)); /* alone */
	/* small jobs of its own connection: a second region on h's client */
	own.c = h.c;
	vkg_error err;
	own.bytes = (TB * TI + TB * TO + TO * TI + TO * TI + TO + TB * TI) * sizeof(float);
	own.map = vkg_region_create(own.c, own.bytes, &own.reg, &err);
	assert_non_null(own.map);
	fill(own.map, TB * TI + TB * TO + TO * TI, 3);
	for (int k = 0; k < 3; k++) /* (the first of a kind is large until measured) */
		tiny_run(&own);
	proto_stats st;
	assert_int_equal(rawsock_stats(d.sock, &st), 0);
	assert_true(st.sched_small_jobs > 0);
	assert_false(heavy_streamed(&h, d.sock, 1));
	tiny_open(&other);
	for (int k = 0; k < 3; k++)
		tiny_run(&other);
	assert_true(heavy_streamed(&h, d.sock, 2));
	sleep(2); /* past CONFIG_STREAM_SHARED_WINDOW_NS */
	assert_false(heavy_streamed(&h, d.sock, 3));
	heavy_check(&h);
	/* a tenant's results do not depend on its neighbours: job 2 again,
	 * unstreamed now, gives the bits it gave streamed */
	const size_t dw_bytes = h.o * h.i * sizeof(float);
	const float *dw2 = h.map + 2 * h.per + h.b * h.i + h.b * h.o;
	float *was = malloc(dw_bytes);
	assert_non_null(was);
	memcpy(was, dw2, dw_bytes);
	assert_false(heavy_streamed(&h, d.sock, 2));
	if (memcmp(was, dw2, dw_bytes) != 0)
		fail_msg("job 2's dW unstreamed differs from its dW streamed beside another's small jobs");
	free(was);
	assert_int_equal(vkg_region_destroy(own.c, own.reg, own.map, own.bytes, &err), 0);
	tiny_close(&other);
	heavy_close(&h);
	g_sock = NULL;
	assert_true(rawsock_daemon_serves(d.sock));
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* The classes show in stats: small jobs (the tiny one), large ones and
 * their slices (this daemon's device has one queue: lavapipe). */
static void test_stats_show_the_classes(void **state)
{
	(void)state;
	proto_stats st;
	assert_int_equal(rawsock_stats(g_main.sock, &st), 0);
	printf("stats: %llu small jobs, %llu large jobs in %llu slices\n",
	       (unsigned long long)st.sched_small_jobs, (unsigned long long)st.sched_large_jobs,
	       (unsigned long long)st.sched_slices);
	assert_true(st.sched_small_jobs > 0);
	assert_true(st.sched_large_jobs > 0);
	assert_true(st.sched_slices > st.sched_large_jobs); /* some were sliced */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny_job_beside_a_flood),
		cmocka_unit_test(test_two_heavy_tenants_share_gpu_time),
		cmocka_unit_test(test_order_across_classes),
		cmocka_unit_test(test_stats_show_the_classes),
		cmocka_unit_test(test_large_jobs_stream_beside_others_small_ones),
	};
	return group_run_plain("tenants", tests, &g_main);
}
