/* tests/integration/test_multiclient.c — several clients at once, and the
 * ordering promises of one connection.
 *
 *  - N client processes (fork) each run jobs of different shapes with
 *    several in flight and check every result;
 *  - pipelined dependent jobs on one connection: A writes dW, B reads it as
 *    W, C accumulates into it, D reads the sum, all sent without waiting;
 *    the results must equal running them one after another (on the import
 *    daemon and on a --no-host-import one), with no validation error
 *    (synchronization validation reports a missing barrier);
 *  - independent jobs packed 4 bytes apart in one region, sent together;
 *  - unregister while the region's jobs are in flight: the reply comes after
 *    every one of those jobs' replies, and the jobs succeed;
 *  - the first, second and fourth again on a daemon whose loop polls the GPU
 *    and its sockets instead of sleeping (spin.h), so batches are seen done
 *    by the loop as well as by the completion thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "deadline.h"
#include "expect.h"
#include "jobcase.h"
#include "rawsock.h"
#include "ref.h"
#include "shm.h"
#include "vkgrad.h"

static daemon_proc g_import, g_staged, g_polling;

/* ---- many client processes ----------------------------------------------------- */

#define NCHILDREN 6
#define CHILD_JOBS 10

static void child_cases(int idx, jobcase *cases)
{
	static const uint64_t dims[] = {1, 7, 16, 31, 33, 64, 100, 129, 257};
	static const unsigned subsets[] = {JC_DW, JC_DB, JC_DX, JC_DW | JC_DB, JC_ALL};
	for (int i = 0; i < CHILD_JOBS; i++) {
		unsigned k = (unsigned)(idx * 7 + i * 3);
		jobcase_init(&cases[i], dims[k % 9], dims[(k / 2 + 3) % 9], dims[(k / 3 + 5) % 9],
			     subsets[(unsigned)(idx + i) % 5], (idx + i) % 2);
	}
}

/* Submit everything at once, then collect with vkg_poll_any and poll() on
 * vkg_fd: the event-loop style of using the library. */
static unsigned run_poll_any(vkg_client *c, jobcase *cases, int n, uint64_t seed)
{
	uint64_t region[CHILD_JOBS], handle[CHILD_JOBS];
	void *map[CHILD_JOBS];
	vkg_error err;
	unsigned failed = 0;
	for (int i = 0; i < n; i++) {
		map[i] = vkg_region_create(c, cases[i].size[0], &region[i], &err);
		if (!map[i] || jobcase_fill(&cases[i], &map[i], seed + (uint64_t)i) != 0)
			return (unsigned)n;
		vkg_job j = jobcase_job(&cases[i], &region[i]);
		if (vkg_submit(c, &j, &handle[i], &err) != 0) {
			fprintf(stderr, "child: submit: %s: %s\n", err.code, err.message);
			return (unsigned)n;
		}
	}
	int left = n;
	const int64_t deadline = deadline_now_ms() + 120000;
	while (left > 0) {
		uint64_t h;
		vkg_result res;
		int rc = vkg_poll_any(c, &h, &res, &err);
		if (rc == -EAGAIN) {
			if (deadline_now_ms() > deadline)
				return failed + (unsigned)left;
			struct pollfd p = {.fd = vkg_fd(c), .events = POLLIN};
			poll(&p, 1, 1000);
			continue;
		}
		int i = 0;
		while (i < n && handle[i] != h)
			i++;
		if (i == n) {
			fprintf(stderr, "child: vkg_poll_any reported unknown handle %llu (rc %d)\n",
				(unsigned long long)h, rc);
			return (unsigned)n;
		}
		char why[320], name[96];
		if (rc != 0) {
			fprintf(stderr, "child: job %s failed: %s: %s\n",
				jobcase_name(&cases[i], name, sizeof(name)), err.code, err.message);
			failed++;
		} else if (jobcase_check(&cases[i], &map[i], JC_TOL_F32, why, sizeof(why)) != 0) {
			fprintf(stderr, "child: job %s: %s\n",
				jobcase_name(&cases[i], name, sizeof(name)), why);
			failed++;
		}
		handle[i] = UINT64_MAX;
		vkg_region_destroy(c, region[i], map[i], cases[i].size[0], NULL);
		jobcase_free(&cases[i]);
		left--;
	}
	return failed;
}

static int child_main(int idx, const char *sock)
{
	vkg_error err;
	vkg_client *c = vkg_connect(sock, &err);
	if (!c) {
		fprintf(stderr, "child %d: connect: %s\n", idx, err.message);
		return 1;
	}
	jobcase cases[CHILD_JOBS];
	child_cases(idx, cases);
	unsigned failed;
	if (idx % 2 == 0)
		failed = jobcase_run(c, cases, CHILD_JOBS, 3, (uint64_t)idx * 100, NULL);
	else
		failed = run_poll_any(c, cases, CHILD_JOBS, (uint64_t)idx * 100);
	if (vkg_ping(c, &err) != 0)
		failed++;
	vkg_close(c);
	if (failed)
		fprintf(stderr, "child %d: %u job(s) failed\n", idx, failed);
	return failed ? 1 : 0;
}

static void concurrent_clients(const daemon_proc *d)
{
	pid_t pids[NCHILDREN];
	fflush(NULL);
	for (int i = 0; i < NCHILDREN; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(child_main(i, d->sock));
	}
	/* meanwhile the daemon keeps answering others */
	assert_true(rawsock_daemon_serves(d->sock));
	int bad = 0;
	const int64_t deadline = deadline_now_ms() + 180000;
	for (int i = 0; i < NCHILDREN; i++) {
		int st = 0;
		pid_t p;
		while ((p = waitpid(pids[i], &st, WNOHANG)) == 0 && deadline_now_ms() < deadline)
			deadline_sleep_ms(10);
		if (p != pids[i]) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], &st, 0);
			fprintf(stderr, "child %d did not finish in time\n", i);
			bad++;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "child %d: exit status 0x%x\n", i, st);
			bad++;
		}
	}
	assert_int_equal(bad, 0);
	/* every child's regions are gone once its connection closed */
	proto_stats st = expect_settled(d->sock, 0, 1);
	assert_true(st.jobs_done >= NCHILDREN * CHILD_JOBS);
}

static void test_concurrent_client_processes(void **state)
{
	(void)state;
	concurrent_clients(&g_import);
}

/* The same on a daemon whose loop polls the GPU and its sockets (spin.h)
 * through a lavapipe batch's whole run: batches are then seen done and
 * answered by the loop itself as well as through the completion thread,
 * and every promise above must hold all the same. */
static void test_concurrent_client_processes_polling(void **state)
{
	(void)state;
	concurrent_clients(&g_polling);
}

/* ---- pipelined dependent jobs ---------------------------------------------------- */

/* A slot in a hand-made layout: region r, byte offset, floats. */
typedef struct pslot {
	unsigned r;
	uint64_t off, n;
} pslot;

typedef struct playout {
	uint64_t cursor[2];
} playout;

static pslot place(playout *l, unsigned r, uint64_t n)
{
	pslot s = {r, l->cursor[r] + 64, n};
	l->cursor[r] = (s.off + n * 4 + 255) / 256 * 256 + 4; /* next one 4 past a multiple of 256 */
	return s;
}

static float *at(void *const map[], pslot s)
{
	return (float *)((uint8_t *)map[s.r] + s.off);
}

static void fill_rand(float *p, uint64_t n, uint64_t *seed)
{
	for (uint64_t i = 0; i < n; i++) {
		*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (float)((double)(*seed >> 11) / 9007199254740992.0 * 2.0 - 1.0);
	}
}

static vkg_tensor tens(const uint64_t region[], pslot s)
{
	return (vkg_tensor){region[s.r], s.off};
}

static void check_close(const char *what, const float *got, const double *want,
			const double *base, uint64_t n)
{
	double e = vkg_ref_max_rel_err(got, want, base, n);
	if (!(e <= JC_TOL_F32))
		fail_msg("%s: max_rel_err %.3g > %.1g", what, e, JC_TOL_F32);
}

static double *dalloc(uint64_t n)
{
	double *p = calloc(n, sizeof(double));
	assert_non_null(p);
	return p;
}

static float *to_float(const double *a, const double *b, uint64_t n)
{
	float *f = malloc(n * sizeof(float));
	assert_non_null(f);
	for (uint64_t i = 0; i < n; i++)
		f[i] = (float)(a[i] + (b ? b[i] : 0));
	return f;
}

/* A: dW,db = f(xA, dyA)         (dW, db in region 1)
 * B: dxB = dyB · dW             (reads A's output)
 * C: dW,db += f(xC, dyC)        (accumulates; must wait for B's read)
 * D: dxD = dyD · dW             (reads A + C)
 * E: dW += f(xE, dyE)           (accumulates again)
 * F: dxF (accumulate) += dyF · dW   (reads A + C + E into a pre-filled dx)
 * all submitted back to back, then awaited. */
enum { IN = 65, OUT = 31, BA = 40, BB = 23, BC = 57, BD = 9, BE = 33, BF = 17 };

/* One connection's pipeline, submitted (pipe_start) and then awaited and
 * checked (pipe_finish): several connections' pipelines can be in the
 * daemon at once, so that one batch holds the jobs of all of them. */
typedef struct pipe_run {
	pslot xA, dyA, xB, dyB, dxB, xC, dyC, xD, dyD, dxD, xE, dyE, xF, dyF, dxF, dW, db;
	size_t size[2];
	vkg_client *c;
	uint64_t region[2], h[6];
	void *map[2];
	uint8_t *before[2];
} pipe_run;

/* the slots under their short names */
#define PIPE_NAMES(p)                                                                            \
	const pslot xA = (p)->xA, dyA = (p)->dyA, xB = (p)->xB, dyB = (p)->dyB, dxB = (p)->dxB;  \
	const pslot xC = (p)->xC, dyC = (p)->dyC, xD = (p)->xD, dyD = (p)->dyD, dxD = (p)->dxD;  \
	const pslot xE = (p)->xE, dyE = (p)->dyE, xF = (p)->xF, dyF = (p)->dyF, dxF = (p)->dxF;  \
	const pslot dW = (p)->dW, db = (p)->db

static void pipe_start(const daemon_proc *d, pipe_run *p, uint64_t seed)
{
	playout l = {{0, 0}};
	p->xA = place(&l, 0, BA * IN), p->dyA = place(&l, 0, BA * OUT);
	p->xB = place(&l, 0, BB * IN), p->dyB = place(&l, 0, BB * OUT), p->dxB = place(&l, 0, BB * IN);
	p->xC = place(&l, 0, BC * IN), p->dyC = place(&l, 0, BC * OUT);
	p->xD = place(&l, 0, BD * IN), p->dyD = place(&l, 0, BD * OUT), p->dxD = place(&l, 0, BD * IN);
	p->xE = place(&l, 0, BE * IN), p->dyE = place(&l, 0, BE * OUT);
	p->xF = place(&l, 0, BF * IN), p->dyF = place(&l, 0, BF * OUT), p->dxF = place(&l, 0, BF * IN);
	p->dW = place(&l, 1, OUT * IN), p->db = place(&l, 1, OUT);
	p->size[0] = l.cursor[0] + 64, p->size[1] = l.cursor[1] + 64;
	PIPE_NAMES(p);
	size_t *size = p->size;
	void **map = p->map;
	uint64_t *region = p->region;
	uint8_t **before = p->before;
	vkg_error err;
	vkg_client *c = p->c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	for (int r = 0; r < 2; r++) {
		map[r] = vkg_region_create(c, size[r], &region[r], &err);
		if (!map[r])
			fail_msg("region: %s: %s", err.code, err.message);
		memset(map[r], 0x5a, size[r]);
	}
	pslot ins[] = {xA, dyA, xB, dyB, xC, dyC, xD, dyD, xE, dyE, xF, dyF, dxF};
	for (size_t i = 0; i < sizeof(ins) / sizeof(ins[0]); i++)
		fill_rand(at(map, ins[i]), ins[i].n, &seed);
	/* dW and db start as garbage A overwrites; dxB, dxD too */
	for (int r = 0; r < 2; r++) {
		before[r] = malloc(size[r]);
		assert_non_null(before[r]);
		memcpy(before[r], map[r], size[r]);
	}

	vkg_job j[6];
	for (int i = 0; i < 6; i++) {
		j[i] = vkg_job_init();
		j[i].in = IN;
		j[i].out = OUT;
	}
	j[0].batch = BA, j[0].x = tens(region, xA), j[0].dy = tens(region, dyA);
	j[0].dw = tens(region, dW), j[0].db = tens(region, db);
	j[1].batch = BB, j[1].x = tens(region, xB), j[1].dy = tens(region, dyB);
	j[1].w = tens(region, dW), j[1].dx = tens(region, dxB);
	j[2].batch = BC, j[2].x = tens(region, xC), j[2].dy = tens(region, dyC);
	j[2].dw = tens(region, dW), j[2].db = tens(region, db), j[2].accumulate = true;
	j[3].batch = BD, j[3].x = tens(region, xD), j[3].dy = tens(region, dyD);
	j[3].w = tens(region, dW), j[3].dx = tens(region, dxD);
	j[4].batch = BE, j[4].x = tens(region, xE), j[4].dy = tens(region, dyE);
	j[4].dw = tens(region, dW), j[4].accumulate = true;
	j[5].batch = BF, j[5].x = tens(region, xF), j[5].dy = tens(region, dyF);
	j[5].w = tens(region, dW), j[5].dx = tens(region, dxF), j[5].accumulate = true;
	for (int i = 0; i < 6; i++)
		if (vkg_submit(c, &j[i], &p->h[i], &err) != 0)
			fail_msg("submit %c: %s: %s", 'A' + i, err.code, err.message);
}

static void pipe_finish(pipe_run *p)
{
	PIPE_NAMES(p);
	size_t *size = p->size;
	void **map = p->map;
	uint64_t *region = p->region, *h = p->h;
	uint8_t **before = p->before;
	vkg_client *c = p->c;
	vkg_error err;
	for (int i = 5; i >= 0; i--) /* any order: replies are matched by id */
		if (vkg_wait(c, h[i], 120000, NULL, &err) != 0)
			fail_msg("job %c: %s: %s", 'A' + i, err.code, err.message);

	/* the same, one after another, in float64 (W rounded to f32 where a job
	 * reads what an earlier one wrote, as the GPU does) */
	const float *bf[2] = {(const float *)before[0], (const float *)before[1]};
#define B(s) ((const float *)((const uint8_t *)bf[(s).r] + (s).off))
	double *wA = dalloc(OUT * IN), *bA = dalloc(OUT), *wC = dalloc(OUT * IN), *bC = dalloc(OUT);
	double *wE = dalloc(OUT * IN), *gB = dalloc(BB * IN), *gD = dalloc(BD * IN);
	double *gF = dalloc(BF * IN), *wAC = dalloc(OUT * IN), *baseF = dalloc(BF * IN);
	vkg_ref_linear_backward(BA, IN, OUT, B(xA), B(dyA), NULL, wA, bA, NULL);
	float *fA = to_float(wA, NULL, OUT * IN);
	vkg_ref_linear_backward(BB, IN, OUT, B(xB), B(dyB), fA, NULL, NULL, gB);
	vkg_ref_linear_backward(BC, IN, OUT, B(xC), B(dyC), NULL, wC, bC, NULL);
	float *fAC = to_float(wA, wC, OUT * IN);
	vkg_ref_linear_backward(BD, IN, OUT, B(xD), B(dyD), fAC, NULL, NULL, gD);
	vkg_ref_linear_backward(BE, IN, OUT, B(xE), B(dyE), NULL, wE, NULL, NULL);
	for (uint64_t i = 0; i < OUT * IN; i++)
		wAC[i] = wA[i] + wC[i];
	float *fACE = to_float(wAC, wE, OUT * IN);
	vkg_ref_linear_backward(BF, IN, OUT, B(xF), B(dyF), fACE, NULL, NULL, gF);
	for (uint64_t i = 0; i < BF * IN; i++)
		baseF[i] = B(dxF)[i];
#undef B
	check_close("B's dx (reads A's dW)", at(map, dxB), gB, NULL, BB * IN);
	check_close("D's dx (reads A+C's dW)", at(map, dxD), gD, NULL, BD * IN);
	check_close("F's dx (accumulates, reads A+C+E's dW)", at(map, dxF), gF, baseF, BF * IN);
	check_close("final dW (A, then += C, then += E)", at(map, dW), wAC, wE, OUT * IN);
	check_close("final db (A, then += C)", at(map, db), bA, bC, OUT);

	/* nothing else changed: compare everything but the outputs */
	pslot outs[] = {dxB, dxD, dxF, dW, db};
	for (int r = 0; r < 2; r++)
		for (uint64_t p = 0; p < size[r]; p++) {
			bool in_out = false;
			for (size_t k = 0; k < 5; k++)
				in_out |= outs[k].r == (unsigned)r && p >= outs[k].off &&
					  p < outs[k].off + outs[k].n * 4;
			if (!in_out && ((uint8_t *)map[r])[p] != before[r][p])
				fail_msg("region %d byte %llu changed outside the outputs", r,
					 (unsigned long long)p);
		}
	free(wA), free(bA), free(wC), free(bC), free(wE), free(gB), free(gD), free(gF);
	free(wAC), free(baseF), free(fA), free(fAC), free(fACE);
	for (int r = 0; r < 2; r++) {
		free(before[r]);
		assert_int_equal(vkg_region_destroy(c, region[r], map[r], size[r], &err), 0);
	}
	vkg_close(c);
}

static void run_pipeline(const daemon_proc *d)
{
	pipe_run p;
	pipe_start(d, &p, 99);
	pipe_finish(&p);
}

/* Four connections' pipelines in the daemon at once (each submitted
 * without waiting, then all awaited): one batch holds jobs of several
 * connections, whose recording interleaves them (record.c); each
 * connection's chain must still see its own order. */
static void run_pipelines_together(const daemon_proc *d)
{
	enum { NP = 4 };
	pipe_run p[NP];
	for (int i = 0; i < NP; i++)
		pipe_start(d, &p[i], 99 + (uint64_t)i);
	for (int i = 0; i < NP; i++)
		pipe_finish(&p[i]);
}

static void test_pipelines_of_four_connections_together(void **state)
{
	(void)state;
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_import, &v0), 0);
	run_pipelines_together(&g_import);
	expect_validation_clean(&g_import, v0, "four connections' pipelines together");
}

static void test_pipelined_dependent_jobs(void **state)
{
	(void)state;
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_import, &v0), 0);
	run_pipeline(&g_import);
	expect_validation_clean(&g_import, v0, "pipelined dependent jobs");
}

static void test_pipelined_dependent_jobs_polling(void **state)
{
	(void)state;
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_polling, &v0), 0);
	run_pipeline(&g_polling);
	expect_validation_clean(&g_polling, v0, "pipelined dependent jobs (polling)");
}

static void test_pipelined_dependent_jobs_staged(void **state)
{
	(void)state;
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_staged, &v0), 0);
	run_pipeline(&g_staged);
	expect_validation_clean(&g_staged, v0, "pipelined dependent jobs (staged)");
}

/* ---- independent jobs packed into one region --------------------------------------- */

/* Many jobs whose tensors lie back to back in ONE region, 4 bytes apart (so
 * at offsets that are multiples of 4 but mostly not of 16), all sent at
 * once so they share batches. None depends on another: the engine may run
 * them without barriers, but must not let one job's writes reach another's
 * bytes (the 4-byte gaps are canaries), and every result must be right. */
static void run_packed(const daemon_proc *d)
{
	enum { K = 24 };
	static const uint64_t shp[][3] = {{1, 1, 1}, {3, 5, 7}, {31, 33, 2}, {17, 4, 16},
					  {2, 65, 9}, {33, 1, 31}, {8, 8, 8}, {5, 40, 3}};
	struct pjob {
		uint64_t b, i, o;
		bool acc;
		pslot t[PROTO_T_BACKWARD_COUNT];
	} jobs[K];
	uint64_t cursor = 4;
	for (int k = 0; k < K; k++) {
		struct pjob *p = &jobs[k];
		p->b = shp[k % 8][0], p->i = shp[k % 8][1], p->o = shp[k % 8][2];
		p->acc = k % 3 == 1;
		const uint64_t n[PROTO_T_BACKWARD_COUNT] = {p->b * p->i, p->b * p->o, p->o * p->i,
						   p->o * p->i, p->o, p->b * p->i};
		for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
			p->t[t] = (pslot){0, cursor, n[t]};
			cursor += n[t] * 4 + 4;
		}
	}
	size_t size = cursor;
	vkg_error err;
	vkg_client *c = vkg_connect(d->sock, &err);
	assert_non_null(c);
	uint64_t region;
	void *map = vkg_region_create(c, size, &region, &err);
	if (!map)
		fail_msg("region: %s: %s", err.code, err.message);
	uint8_t *m = map;
	for (size_t i = 0; i < size; i++)
		m[i] = (uint8_t)(i * 13 + 5);
	uint64_t seed = 7;
	for (int k = 0; k < K; k++)
		for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++)
			if (t < PROTO_T_DW || jobs[k].acc)
				fill_rand(at(&map, jobs[k].t[t]), jobs[k].t[t].n, &seed);
	uint8_t *before = malloc(size);
	assert_non_null(before);
	memcpy(before, map, size);
	uint64_t h[K];
	for (int k = 0; k < K; k++) {
		struct pjob *p = &jobs[k];
		vkg_job j = vkg_job_init();
		j.batch = p->b, j.in = p->i, j.out = p->o, j.accumulate = p->acc;
		j.x = tens(&region, p->t[PROTO_T_X]), j.dy = tens(&region, p->t[PROTO_T_DY]);
		j.w = tens(&region, p->t[PROTO_T_W]), j.dw = tens(&region, p->t[PROTO_T_DW]);
		j.db = tens(&region, p->t[PROTO_T_DB]), j.dx = tens(&region, p->t[PROTO_T_DX]);
		if (vkg_submit(c, &j, &h[k], &err) != 0)
			fail_msg("submit %d: %s: %s", k, err.code, err.message);
	}
	uint64_t max_batch = 0;
	for (int k = 0; k < K; k++) {
		vkg_result res;
		if (vkg_wait(c, h[k], 120000, &res, &err) != 0)
			fail_msg("job %d: %s: %s", k, err.code, err.message);
		if (res.batch_jobs > max_batch)
			max_batch = res.batch_jobs;
	}
	const void *bm = before;
	for (int k = 0; k < K; k++) {
		struct pjob *p = &jobs[k];
		const uint64_t no[3] = {p->o * p->i, p->o, p->b * p->i};
		double *want[3], *base[3];
		for (int q = 0; q < 3; q++) {
			want[q] = dalloc(no[q]);
			base[q] = dalloc(no[q]);
			const float *bp = (const float *)((const uint8_t *)bm + p->t[PROTO_T_DW + q].off);
			for (uint64_t i = 0; p->acc && i < no[q]; i++)
				base[q][i] = bp[i];
		}
#define BF(slot) ((const float *)((const uint8_t *)bm + p->t[slot].off))
		vkg_ref_linear_backward(p->b, p->i, p->o, BF(PROTO_T_X), BF(PROTO_T_DY), BF(PROTO_T_W),
					want[0], want[1], want[2]);
#undef BF
		for (int q = 0; q < 3; q++) {
			char what[64];
			snprintf(what, sizeof(what), "packed job %d (%llux%llux%llu%s) output %s", k,
				 (unsigned long long)p->b, (unsigned long long)p->i,
				 (unsigned long long)p->o, p->acc ? " acc" : "",
				 q == 0 ? "dw" : q == 1 ? "db" : "dx");
			check_close(what, at(&map, p->t[PROTO_T_DW + q]), want[q], base[q], no[q]);
			free(want[q]);
			free(base[q]);
		}
	}
	/* inputs and the 4-byte gaps unchanged */
	for (int k = 0; k < K; k++) {
		for (int t = 0; t < PROTO_T_BACKWARD_COUNT; t++) {
			uint64_t lo = jobs[k].t[t].off - 4, hi = jobs[k].t[t].off;
			if (t < PROTO_T_DW)
				hi += jobs[k].t[t].n * 4;
			if (memcmp(m + lo, before + lo, hi - lo) != 0)
				fail_msg("packed job %d: bytes [%llu, %llu) (%s and the gap before it) changed",
					 k, (unsigned long long)lo, (unsigned long long)hi,
					 t < PROTO_T_DW ? "an input" : "an output");
		}
	}
	assert_int_equal(memcmp(m + size - 4, before + size - 4, 4), 0);
	if (max_batch < 2)
		print_message("note: the packed jobs never shared a batch (max %llu)\n",
			      (unsigned long long)max_batch);
	free(before);
	assert_int_equal(vkg_region_destroy(c, region, map, size, &err), 0);
	vkg_close(c);
}

static void test_packed_independent_jobs_one_region(void **state)
{
	(void)state;
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_import, &v0), 0);
	run_packed(&g_import);
	expect_validation_clean(&g_import, v0, "independent jobs packed into one region");
}

static void test_packed_independent_jobs_one_region_staged(void **state)
{
	(void)state;
	uint64_t v0 = 0;
	assert_int_equal(daemon_proc_validation_count(&g_staged, &v0), 0);
	run_packed(&g_staged);
	expect_validation_clean(&g_staged, v0, "independent jobs packed into one region (staged)");
}

/* ---- unregister while jobs are in flight ----------------------------------------- */

static void unregister_after_jobs(const daemon_proc *d)
{
	enum { NJOBS = 4 };
	jobcase jc;
	jobcase_init(&jc, 256, 256, 256, JC_ALL, false);
	void *map;
	int fd = shm_create(jc.size[0], true, jc.size[0], &map);
	assert_true(fd >= 0);
	assert_int_equal(jobcase_fill(&jc, &map, 4242), 0);
	rawsock s;
	assert_int_equal(rawsock_open(&s, d->sock), 0);
	proto_reply r;
	uint64_t region;
	assert_int_equal(rawsock_register(&s, 1, fd, jc.size[0], &region, &r), 0);
	close(fd);

	/* NJOBS identical jobs (overwriting: the result is that of one), the
	 * unregister, and a job naming the region after it: one write */
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	for (int i = 0; i < NJOBS; i++) {
		proto_request q = jobcase_request(&jc, &region, 10 + (uint64_t)i);
		assert_int_equal(proto_request_encode(&sb, &q), 0);
	}
	proto_request un = {.op = PROTO_OP_UNREGISTER, .id = 100, .region = region};
	assert_int_equal(proto_request_encode(&sb, &un), 0);
	proto_request late = jobcase_request(&jc, &region, 200);
	assert_int_equal(proto_request_encode(&sb, &late), 0);
	assert_int_equal(rawsock_send(&s, sb.data, sb.size, NULL, 0), 0);
	msgpack_sbuffer_destroy(&sb);

	int jobs_seen = 0;
	bool un_seen = false, late_seen = false;
	for (int k = 0; k < NJOBS + 2; k++) {
		assert_int_equal(rawsock_recv(&s, &r, RAWSOCK_TIMEOUT_MS), 0);
		if (r.id >= 10 && r.id < 10 + NJOBS) {
			if (!r.ok)
				fail_msg("job %llu failed: %s: %s", (unsigned long long)r.id,
					 proto_code_name(r.err.code), r.err.message);
			if (un_seen)
				fail_msg("job %llu's reply came after the unregister reply",
					 (unsigned long long)r.id);
			jobs_seen++;
		} else if (r.id == 100) {
			assert_true(r.ok);
			if (jobs_seen != NJOBS)
				fail_msg("unregister answered after only %d of %d jobs using the region",
					 jobs_seen, NJOBS);
			un_seen = true;
		} else if (r.id == 200) {
			/* the id is gone from the table at once */
			assert_false(r.ok);
			assert_int_equal(r.err.code, PROTO_BAD_REGION);
			late_seen = true;
		} else {
			fail_msg("unexpected reply id %llu", (unsigned long long)r.id);
		}
	}
	assert_true(un_seen && late_seen);
	char why[320];
	if (jobcase_check(&jc, &map, JC_TOL_F32, why, sizeof(why)) != 0)
		fail_msg("after unregister: %s", why);
	/* the daemon let go of the region */
	proto_request ping = {.op = PROTO_OP_PING, .id = 300};
	assert_int_equal(rawsock_call(&s, &ping, &r, RAWSOCK_TIMEOUT_MS), 0);
	proto_stats st;
	assert_int_equal(rawsock_stats(d->sock, &st), 0);
	assert_int_equal(st.regions, 0);
	rawsock_close(&s);
	munmap(map, jc.size[0]);
	jobcase_free(&jc);
}

static void test_unregister_replies_after_inflight_jobs(void **state)
{
	(void)state;
	unregister_after_jobs(&g_import);
}

static void test_unregister_replies_after_inflight_jobs_staged(void **state)
{
	(void)state;
	unregister_after_jobs(&g_staged);
}

static void test_unregister_replies_after_inflight_jobs_polling(void **state)
{
	(void)state;
	unregister_after_jobs(&g_polling);
}

/* The polling daemon did poll (its loop spent time polling) and saw
 * batches done itself, and every batch was seen done once, by the loop or
 * by the completion thread. */
static void test_polling_daemon_polled(void **state)
{
	(void)state;
	proto_stats st = expect_settled(g_polling.sock, 0, 1);
	printf("polling daemon: spin budget %llu us, %llu us polled, %llu batches seen by the "
	       "loop, %llu by the completion thread, %llu batches\n",
	       (unsigned long long)st.spin_budget_us, (unsigned long long)st.spin_us,
	       (unsigned long long)st.spin_hits, (unsigned long long)st.blocking_waits,
	       (unsigned long long)st.batches);
	assert_true(st.spin_us > 0);
	assert_true(st.spin_hits > 0);
	assert_true(st.spin_hits + st.blocking_waits >= st.batches);
}

/* ---- setup ------------------------------------------------------------------------ */

/* Last: no Vulkan validation error so far (the teardown checks again). */
static void test_no_validation_errors(void **state)
{
	(void)state;
	expect_validation_clean(&g_import, 0, "default daemon");
	expect_validation_clean(&g_staged, 0, "--no-host-import daemon");
	expect_validation_clean(&g_polling, 0, "polling daemon");
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const staged_args[] = {"--no-host-import", NULL};
	/* imports on a CPU device too (lavapipe), so the import path is tested */
	static const char *const import_env[] = {"VKGRAD_CPU_IMPORT=1", NULL};
	if (daemon_proc_start(&g_import, NULL, import_env) != 0)
		return -1;
	if (daemon_proc_start(&g_staged, staged_args, NULL) != 0) {
		daemon_proc_kill(&g_import);
		return -1;
	}
	/* polls past lavapipe batches (the budget adapts, up to 100 ms) and
	 * for 2 ms after each request; its completion thread reports each
	 * batch 20 ms late, so the loop sees most of them done first and the
	 * thread finds them seen */
	static const char *const polling_args[] = {"--spin-us", "100000", "--loop-spin-us", "2000",
						   NULL};
	static const char *const polling_env[] = {"VKGRAD_CPU_IMPORT=1",
						  "VKGRAD_FAULT_INJECT=late_wait:20", NULL};
	if (daemon_proc_start(&g_polling, polling_args, polling_env) != 0) {
		daemon_proc_kill(&g_import);
		daemon_proc_kill(&g_staged);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int a = daemon_proc_stop(&g_import);
	int b = daemon_proc_stop(&g_staged);
	int c = daemon_proc_stop(&g_polling);
	return a || b || c ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_client_processes),
		cmocka_unit_test(test_pipelined_dependent_jobs),
		cmocka_unit_test(test_pipelined_dependent_jobs_staged),
		cmocka_unit_test(test_packed_independent_jobs_one_region),
		cmocka_unit_test(test_packed_independent_jobs_one_region_staged),
		cmocka_unit_test(test_pipelines_of_four_connections_together),
		cmocka_unit_test(test_unregister_replies_after_inflight_jobs),
		cmocka_unit_test(test_unregister_replies_after_inflight_jobs_staged),
		cmocka_unit_test(test_concurrent_client_processes_polling),
		cmocka_unit_test(test_pipelined_dependent_jobs_polling),
		cmocka_unit_test(test_unregister_replies_after_inflight_jobs_polling),
		cmocka_unit_test(test_polling_daemon_polled),
		cmocka_unit_test(test_no_validation_errors),
	};
	int rc = cmocka_run_group_tests_name("multiclient", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
