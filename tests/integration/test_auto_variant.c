/* tests/integration/test_auto_variant.c — `auto` against the kernel families
 * it could have forced (issue 25, item 10).
 *
 * auto chooses from a cost model measured on the device at start
 * (daemon/kernels/costmodel.h). Over a small grid of shapes — tall-skinny (the
 * issue's 1048560x2x2 dW/db scaled down, where the fixed rules took
 * split-K's 64 slices of 64x64 tiles for a 2x2 output, 50x slower than
 * generic on lavapipe), square, wide, a long reduction over out, and narrow
 * layers over many rows (issue 37, where auto takes the narrow family) — each
 * f32 job runs forced to every family the device offers (generic, tiled,
 * tiled128, splitk, narrow) and on auto, interleaved, REPS times each after one
 * warm-up; the least of the reply's gpu_us (one job in flight: the batch
 * is that job; the least, since a loaded host only adds time, as the cost
 * model's probes take theirs: make test runs two binaries at once, and a
 * median there once put tiled at 2.3x tiled128 on 160x160x160, where it is
 * 1.5x quiet) of auto must be at most MAX_RATIO times the best forced
 * family's. A ratio with a generous bound, as the issue asks: the times
 * are measured, not asserted. Every result is checked against the float64
 * reference (JC_TOL_F32). The model persists in the cache directory: a
 * daemon started on it later loads it; bad files are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "jobcase.h"
#include "vkgrad.h"

#define REPS 5
#define MAX_RATIO 2.0
#define ATTEMPTS 3 /* measurements of a shape before it counts as over the bound */
#define NVAR 6

static daemon_proc g_d;

typedef struct ashape {
	const char *kind;
	uint64_t batch, in, out;
	unsigned outputs;
} ashape;

static const ashape grid[] = {
	{"tall-skinny", 4096, 2, 2, JC_DW | JC_DB},
	{"tall-skinny", 4096, 16, 8, JC_ALL},
	{"square", 160, 160, 160, JC_ALL},
	{"wide", 16, 384, 256, JC_ALL},
	{"long over out", 2, 8, 4096, JC_DX},
	{"narrow", 65536, 16, 8, JC_ALL}, /* issue 37: a narrow layer over many rows */
	{"narrow", 32768, 3, 5, JC_DW | JC_DB},
};

static const char *const variants[NVAR] = {"auto", "generic", "tiled", "tiled128", "splitk", "narrow"};

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* every kernel through vkg_info_kernel: vkg_info.kernels holds 32 */
static bool offered(const vkg_client *c, const vkg_info *info, const char *variant)
{
	vkg_kernel_info k;
	for (unsigned i = 0; i < info->n_kernels; i++)
		if (vkg_info_kernel(c, i, &k) == 0 && !strcmp(k.variant, variant) &&
		    !strcmp(k.dtype, "f32"))
			return true;
	return false;
}

/* One job of jc forced to variant v; its gpu_us, checked against the
 * reference. Returns 0, or -1 after printing why. */
static int run_once(vkg_client *c, jobcase *jc, void *const map[], const uint64_t reg[], const char *v,
		    uint64_t seed, uint64_t *gpu_us)
{
	char why[320], name[96];
	if (jobcase_fill(jc, map, seed) != 0)
		return -1;
	vkg_job j = jobcase_job(jc, reg);
	j.variant = v;
	vkg_result r;
	vkg_error err;
	if (vkg_linear_backward(c, &j, &r, &err) != 0) {
		fprintf(stderr, "%s %s: %s: %s\n", jobcase_name(jc, name, sizeof(name)), v, err.code,
			err.message);
		return -1;
	}
	if (jobcase_check(jc, map, JC_TOL_F32, why, sizeof(why)) != 0) {
		fprintf(stderr, "%s %s: %s\n", jobcase_name(jc, name, sizeof(name)), v, why);
		return -1;
	}
	*gpu_us = r.gpu_us;
	return 0;
}

/* The daemon's cost model (its debug lines, placement.c), to stdout. */
static void print_model(void)
{
	FILE *f = fopen(g_d.log, "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "cost model f32"))
			printf("    %s", line);
	fclose(f);
}

/* A fresh daemon (a new cache directory: its cost model measured again)
 * in place of g_d, and c and shape jc's region on it again. */
static void restart_fresh(vkg_client **c, const jobcase *jc, uint64_t *reg, void **map)
{
	vkg_error err;
	assert_int_equal(vkg_region_destroy(*c, reg[0], map[0], jc->size[0], &err), 0);
	vkg_close(*c);
	assert_int_equal(daemon_proc_stop(&g_d), 0);
	assert_int_equal(daemon_proc_start(&g_d, NULL, NULL), 0);
	*c = vkg_connect(g_d.sock, &err);
	assert_non_null(*c);
	map[0] = vkg_region_create(*c, jc->size[0], &reg[0], &err);
	assert_non_null(map[0]);
}

static void test_auto_within_twice_the_best_forced(void **state)
{
	(void)state;
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_auto_variant", &info, &err), 0);
	bool have[NVAR];
	for (int v = 0; v < NVAR; v++)
		have[v] = v == 0 || offered(c, &info, variants[v]);
	unsigned bad = 0, failed = 0;
	printf("%-13s %-16s %9s %9s %9s %9s %9s %9s  %s\n", "shape", "B x I x O", "auto", "generic", "tiled",
	       "tiled128", "splitk", "narrow", "auto/best");
	for (size_t s = 0; s < sizeof(grid) / sizeof(grid[0]); s++) {
		const ashape *g = &grid[s];
		jobcase jc;
		jobcase_init(&jc, g->batch, g->in, g->out, g->outputs, false);
		jobcase_layout(&jc);
		uint64_t reg[1];
		void *map[1] = {vkg_region_create(c, jc.size[0], &reg[0], &err)};
		assert_non_null(map[0]);
		/* a shape over the bound is measured again, up to ATTEMPTS times in
		 * all, each time on a fresh daemon that measures its cost model
		 * anew: a wrong model or pick is over it every time, a model or
		 * a job measured during a load spike once */
		for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
			if (failed)
				break;
			if (attempt > 0)
				restart_fresh(&c, &jc, reg, map);
			uint64_t t[NVAR][REPS + 1];
			for (int r = 0; r <= REPS && !failed; r++) /* round 0: warm-up */
				for (int v = 0; v < NVAR && !failed; v++)
					if (have[v] && run_once(c, &jc, map, reg, variants[v], s * 100 + (uint64_t)r,
								&t[v][r]) != 0)
						failed++;
			double least[NVAR] = {0}, best = 0;
			for (int v = 0; v < NVAR && !failed; v++) {
				if (!have[v])
					continue;
				qsort(&t[v][1], REPS, sizeof(uint64_t), cmp_u64);
				least[v] = (double)t[v][1]; /* the least */
				if (v > 0 && (best == 0 || least[v] < best))
					best = least[v];
			}
			if (!failed) {
				const double ratio = best > 0 ? least[0] / best : 1.0;
				char dims[48];
				snprintf(dims, sizeof(dims), "%llux%llux%llu", (unsigned long long)g->batch,
					 (unsigned long long)g->in, (unsigned long long)g->out);
				printf("%-13s %-16s", g->kind, dims);
				for (int v = 0; v < NVAR; v++)
					if (have[v])
						printf(" %9.0f", least[v]);
					else
						printf(" %9s", "-");
				printf("  %.2f%s\n", ratio, ratio > MAX_RATIO ? "  <- more than 2x the best" : "");
				if (ratio <= MAX_RATIO)
					break;
				if (attempt == ATTEMPTS - 1)
					bad++;
			}
		}
		assert_int_equal(vkg_region_destroy(c, reg[0], map[0], jc.size[0], &err), 0);
		jobcase_free(&jc);
	}
	printf("(least gpu_us of %d jobs each, f32, one in flight)\n", REPS);
	if (bad)
		print_model();
	vkg_close(c);
	assert_int_equal(failed, 0);
	assert_int_equal(bad, 0);
}

/* The model file in g_d's cache directory (costmodel-*.txt) into path,
 * "" when there is none. */
static void find_model_file(char *path, size_t n)
{
	DIR *dir = opendir(g_d.cache);
	assert_non_null(dir);
	path[0] = 0;
	for (struct dirent *e; (e = readdir(dir));)
		if (!strncmp(e->d_name, "costmodel-", 10) && strstr(e->d_name, ".txt") &&
		    !strstr(e->d_name, ".txt."))
			snprintf(path, n, "%s/%s", g_d.cache, e->d_name);
	closedir(dir);
}

/* Daemon d on g_d's cache directory with extra environment env (or
 * NULL), started, its log holding `want`. */
static void shared_cache_daemon(daemon_proc *d, const char *want, const char *const *env)
{
	/* (--cost-model: a GPU measures it only when asked, a CPU device always) */
	const char *const args[] = {"--cache-dir", g_d.cache, "--cost-model", NULL};
	assert_int_equal(daemon_proc_start(d, args, env), 0);
	if (!daemon_proc_log_contains(d, want)) {
		daemon_proc_print_log_tail(d, 30);
		fail_msg("the daemon's log lacks '%s'", want);
	}
}

/* A daemon on g_d's cache directory: started, its log holding `want`,
 * a checked job served, stopped. */
static void start_on_shared_cache(const char *want)
{
	daemon_proc d = {0};
	shared_cache_daemon(&d, want, NULL);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	jobcase jc;
	jobcase_init(&jc, 300, 40, 24, JC_ALL, false);
	assert_int_equal(jobcase_run(c, &jc, 1, 1, 5, NULL), 0);
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

/* The model is saved in the cache directory and a daemon started on it
 * later loads it (the same choices, so the same bits, and no probes); a
 * file that is garbage, from another device or daemon, or not a regular
 * file (a FIFO would block the read) is refused with its reason, the
 * daemon measures again and serves. */
static void test_model_saved_then_loaded_and_bad_files_refused(void **state)
{
	(void)state;
	char path[512];
	find_model_file(path, sizeof(path));
	if (!path[0]) { /* g_d on a GPU, without --cost-model: none saved yet */
		start_on_shared_cache("kernel parts timed in");
		find_model_file(path, sizeof(path));
	}
	assert_true(path[0] != 0);
	start_on_shared_cache("cost model: loaded from the cache directory");
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("not a cost model\nfit 0 0 1 2 3 4\n", f);
	fclose(f);
	start_on_shared_cache("made for another device, driver, daemon or loop bound): measuring");
	/* the last daemon saved a good one again: spoil one line of it */
	f = fopen(path, "a");
	assert_non_null(f);
	fputs("fit 99 0 1 2 3 4\n", f);
	fclose(f);
	start_on_shared_cache("malformed line 'fit 99 0 1 2 3 4'");
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0600), 0);
	start_on_shared_cache("not a regular file of at most 8192 bytes): measuring");
	unlink(path);
}

/* A model saved by a daemon that had tiled128 and the narrow family,
 * loaded by one that lacks them (VKGRAD_FAULT_SHARED_16K: 16 KiB of shared
 * memory, their 32 KiB pipelines not made): their fits are left out, so
 * auto never picks a kernel without a pipeline. Before, a job auto put on
 * tiled128 there recorded a dispatch of no pipeline, and lavapipe crashed
 * the daemon (65x65x65 dW, found when test daemons began sharing one
 * model). Every job is checked against float64, and the daemon must stop
 * cleanly after them. */
static void test_model_of_kernels_this_daemon_lacks(void **state)
{
	(void)state;
	start_on_shared_cache("cost model: "); /* a model there, measured or loaded */
	char path[512];
	find_model_file(path, sizeof(path));
	assert_true(path[0] != 0);
	daemon_proc d = {0};
	static const char *const env[] = {"VKGRAD_FAULT_SHARED_16K=1", NULL};
	shared_cache_daemon(&d, "fits are for kernels this daemon has no pipeline for", env);
	vkg_error err;
	vkg_client *c = vkg_connect(d.sock, &err);
	assert_non_null(c);
	static const uint64_t shapes[][3] = {{65, 65, 65}, {160, 160, 160}, {4096, 64, 64}, {300, 40, 24}};
	for (unsigned s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		static const unsigned outs[] = {JC_DW, JC_DX, JC_ALL};
		for (unsigned o = 0; o < 3; o++) {
			jobcase jc;
			jobcase_init(&jc, shapes[s][0], shapes[s][1], shapes[s][2], outs[o], false);
			assert_int_equal(jobcase_run(c, &jc, 1, 1, 1, NULL), 0);
		}
	}
	vkg_close(c);
	assert_int_equal(daemon_proc_stop(&d), 0);
}

static int group_setup(void **state)
{
	(void)state;
	/* (at log level debug: its cost model in the log, for a failure's report) */
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
		cmocka_unit_test(test_auto_within_twice_the_best_forced),
		cmocka_unit_test(test_model_saved_then_loaded_and_bad_files_refused),
		cmocka_unit_test(test_model_of_kernels_this_daemon_lacks),
	};
	int rc = cmocka_run_group_tests_name("auto_variant", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}
