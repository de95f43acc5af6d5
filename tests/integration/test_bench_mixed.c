/* tests/integration/test_bench_mixed.c — `vkgrad bench --scenario mixed`
 * ($BUILD/vkgrad) in cheap forms: against the group's daemon, two tiny
 * clients and a small heavy client for 1 s per phase, whose JSON lines must
 * parse, come in order (tiny_alone, heavy_alone, beside, summary), carry
 * each phase's numbers (null where a phase has no such client), count jobs
 * by the documented rules, and give ratios that are the phases' own; the
 * default heavy shape scaled down on the CPU device, with a private daemon
 * the bench starts itself; a heavy client the daemon's limits cannot take
 * (exit 3, the daemon serving afterwards); and every usage error (exit 2,
 * naming the option). Speed is never asserted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon_proc.h"
#include "group.h"
#include "jsonl.h"
#include "vkgrad.h"

static daemon_proc g_d;

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && *b ? b : "build";
}

/* Run cmd through the shell; its stdout in out (stderr goes to the test's
 * log unless cmd redirects it). Returns the exit status, or -1. */
static int run_cmd(const char *cmd, char *out, size_t n)
{
	fflush(NULL);
	printf("$ %s\n", cmd);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	size_t len = 0;
	out[0] = 0;
	char buf[4096];
	size_t got;
	while ((got = fread(buf, 1, sizeof(buf), p)) > 0)
		if (len + 1 < n) {
			size_t take = got < n - 1 - len ? got : n - 1 - len;
			memcpy(out + len, buf, take);
			len += take;
			out[len] = 0;
		}
	int st = pclose(p);
	fputs(out, stdout);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The lines of out that start with '{' (each must be one JSON object), in
 * order, into json[]; the others into text[]. */
static void split_lines(char *out, char **json, unsigned *nj, char **text, unsigned *nt,
			unsigned max)
{
	*nj = *nt = 0;
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (*l == '{') {
			if (!jsonl_is_object(l))
				fail_msg("not one JSON object: %s", l);
			assert_true(*nj < max);
			json[(*nj)++] = l;
		} else {
			assert_true(*nt < max);
			text[(*nt)++] = l;
		}
	}
}

static double num(const char *line, const char *key)
{
	double v;
	if (!jsonl_num(line, key, &v))
		fail_msg("%s is not a number in %s", key, line);
	return v;
}

static void expect_null(const char *line, const char *key)
{
	char v[64];
	assert_non_null(jsonl_get(line, key, v, sizeof(v)));
	assert_string_equal(v, "null");
}

static void expect_str(const char *line, const char *key, const char *want)
{
	char v[256];
	if (!jsonl_get(line, key, v, sizeof(v)))
		fail_msg("no %s in %s", key, line);
	assert_string_equal(v, want);
}

/* a within 1% (plus the rounding of printed values) of b */
static void expect_near(double a, double b)
{
	if (!(fabs(a - b) <= 0.01 * fabs(b) + 2e-3))
		fail_msg("%g is not %g", a, b);
}

static bool has_text_line(char **text, unsigned nt, const char *prefix)
{
	for (unsigned i = 0; i < nt; i++)
		if (strncmp(text[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

/* ---- the lines of a small run ------------------------------------------------------ */

#define SECONDS 1.0

static void check_tiny(const char *l, bool present)
{
	if (!present) {
		static const char *const k[] = {"tiny_jobs", "tiny_p50_us", "tiny_p99_us",
						"tiny_jobs_per_s", "tiny_stages_us"};
		for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
			expect_null(l, k[i]);
		return;
	}
	const double jobs = num(l, "tiny_jobs"), p50 = num(l, "tiny_p50_us"),
		     p99 = num(l, "tiny_p99_us"), rate = num(l, "tiny_jobs_per_s");
	assert_true(jobs >= 2); /* each of the 2 clients at least one job */
	assert_true(p50 > 0 && p99 >= p50);
	/* every job submitted before the end counts: the last one ends after
	 * it, so the rate is at most jobs / seconds */
	assert_true(rate > 0 && rate <= jobs / SECONDS * 1.001);
	char st[512];
	assert_non_null(jsonl_get(l, "tiny_stages_us", st, sizeof(st)));
	assert_non_null(strstr(st, "\"queue\":"));
	assert_non_null(strstr(st, "\"client_wake\":"));
}

static void check_heavy(const char *l, bool present)
{
	if (!present) {
		expect_null(l, "heavy_jobs");
		expect_null(l, "heavy_jobs_per_s");
		expect_null(l, "heavy_p50_us");
		return;
	}
	const double jobs = num(l, "heavy_jobs"), rate = num(l, "heavy_jobs_per_s");
	assert_true(jobs >= 1);
	/* only jobs that ended within the phase count, over the time to the
	 * last of them: at least jobs / seconds (the release skew is ms) */
	assert_true(rate >= jobs / (SECONDS + 0.25));
	assert_true(num(l, "heavy_p50_us") > 0);
}

static void test_mixed_lines(void **state)
{
	(void)state;
	char cmd[1024], out[32768], *json[16], *text[64];
	unsigned nj, nt;
	snprintf(cmd, sizeof(cmd), "%s/vkgrad --socket %s bench --scenario mixed --tiny-clients 2 "
		 "--heavy-shape 128x128x64 --heavy-dtype f32 --heavy-inflight 2 --seconds 1",
		 build_dir(), g_d.sock);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	split_lines(out, json, &nj, text, &nt, 64);
	assert_int_equal(nj, 4);
	static const char *const phase[] = {"\"tiny_alone\"", "\"heavy_alone\"", "\"beside\"",
					    "\"summary\""};
	for (unsigned i = 0; i < 4; i++) {
		expect_str(json[i], "bench", "\"mixed\"");
		expect_str(json[i], "phase", phase[i]);
		expect_str(json[i], "heavy_shape", "[128,128,64]");
		char dev[160];
		assert_non_null(jsonl_get(json[i], "device", dev, sizeof(dev)));
		assert_true(dev[0] == '"' && strlen(dev) > 2);
	}
	for (unsigned i = 0; i < 3; i++) {
		expect_str(json[i], "tiny_clients", "2");
		expect_str(json[i], "tiny_shape", "[32,64,8]");
		expect_str(json[i], "heavy_dtype", "\"f32\"");
		expect_str(json[i], "heavy_inflight", "2");
		expect_str(json[i], "seconds", "1");
		check_tiny(json[i], i != 1);
		check_heavy(json[i], i != 0);
	}
	/* the summary's ratios are the phases' own */
	const char *s = json[3];
	expect_near(num(s, "tiny_p50_ratio"), num(json[2], "tiny_p50_us") / num(json[0], "tiny_p50_us"));
	expect_near(num(s, "tiny_p99_ratio"), num(json[2], "tiny_p99_us") / num(json[0], "tiny_p99_us"));
	expect_near(num(s, "tiny_jobs_per_s_ratio"),
		    num(json[2], "tiny_jobs_per_s") / num(json[0], "tiny_jobs_per_s"));
	expect_near(num(s, "heavy_jobs_per_s_ratio"),
		    num(json[2], "heavy_jobs_per_s") / num(json[1], "heavy_jobs_per_s"));
	expect_null(s, "heavy_scaled_from"); /* 4.2 MFLOP: under the CPU cap */
	expect_str(s, "check", "\"ok\"");
	assert_true(num(s, "max_rel_err") <= 1e-4);
	/* the table: a row per phase, the ratios, the check */
	assert_true(has_text_line(text, nt, "tiny_alone "));
	assert_true(has_text_line(text, nt, "heavy_alone "));
	assert_true(has_text_line(text, nt, "beside "));
	assert_true(has_text_line(text, nt, "ratio beside/alone: tiny p50 "));
	assert_true(has_text_line(text, nt, "check: every client's last result matched"));
}

/* The default heavy shape (8192x4096x4096 bf16) on the CPU device: halved
 * until it is within the default cap, and said so; the bench's own daemon
 * (no --socket) started and stopped cleanly; --json prints nothing else. */
static void test_mixed_scaled_private_daemon(void **state)
{
	(void)state;
	char cmd[1024], out[32768], *json[16], *text[64];
	unsigned nj, nt;
	vkg_error err;
	vkg_info info;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	assert_int_equal(vkg_hello(c, "test_bench_mixed", &info, &err), 0);
	vkg_close(c);
	if (strcmp(info.device_type, "cpu") != 0)
		skip(); /* the cap is a CPU device's default */
	snprintf(cmd, sizeof(cmd), "%s/vkgrad bench --scenario mixed --tiny-clients 1 "
		 "--heavy-inflight 1 --seconds 1 --json", build_dir());
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	split_lines(out, json, &nj, text, &nt, 64);
	assert_int_equal(nt, 0);
	assert_int_equal(nj, 4);
	const char *s = json[3];
	expect_str(s, "phase", "\"summary\"");
	expect_str(s, "heavy_scaled_from", "[8192,4096,4096]");
	expect_str(s, "heavy_shape", "[256,128,128]"); /* halved 5 times: 16.8 MFLOP */
	expect_str(s, "heavy_max_gflop", "0.02");
	expect_str(s, "check", "\"ok\"");
	expect_str(json[1], "heavy_dtype", "\"bf16\"");
	expect_str(json[1], "heavy_shape", "[256,128,128]");

	/* the table says so too; --heavy-max-gflop 0 would lift the cap, which
	 * the limit test below uses */
	snprintf(cmd, sizeof(cmd), "%s/vkgrad --socket %s bench --scenario mixed --tiny-clients 1 "
		 "--heavy-inflight 1 --seconds 0.2 --heavy-shape 512x256x256 --heavy-dtype f16",
		 build_dir(), g_d.sock);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "heavy shape scaled down from 512x256x256 to stay within "
				    "0.02 GFLOP per job"));
	assert_non_null(strstr(out, "\"heavy_shape\":[256,128,128]"));
}

/* A heavy client the daemon's limits cannot take: its region above
 * max_region_bytes (4 GiB by default). Exit 3 naming the limit, before any
 * region is made; the daemon serves afterwards. */
static void test_mixed_limit(void **state)
{
	(void)state;
	char cmd[1024], out[8192];
	snprintf(cmd, sizeof(cmd), "%s/vkgrad --socket %s bench --scenario mixed --heavy-shape "
		 "65536x16384x1 --heavy-dtype f32 --heavy-max-gflop 0 --seconds 1 2>&1",
		 build_dir(), g_d.sock);
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 3);
	assert_non_null(strstr(out, "max_region_bytes"));
	vkg_error err;
	vkg_client *c = vkg_connect(g_d.sock, &err);
	assert_non_null(c);
	assert_int_equal(vkg_ping(c, &err), 0);
	vkg_close(c);
}

static void test_mixed_usage(void **state)
{
	(void)state;
	static const struct {
		const char *args, *names;
	} bad[] = {
		{"--tiny-clients 0", "--tiny-clients"},
		{"--tiny-clients 257", "--tiny-clients"},
		{"--tiny-clients x", "--tiny-clients"},
		{"--heavy-shape 256x256", "--heavy-shape"},
		{"--heavy-shape 0x1x1", "--heavy-shape"},
		{"--heavy-shape 1x2x3x4", "--heavy-shape"},
		{"--heavy-shape 4294967296x1x1", "--heavy-shape"},
		{"--heavy-dtype f64", "--heavy-dtype"},
		{"--heavy-inflight 0", "--heavy-inflight"},
		{"--heavy-inflight 65", "--heavy-inflight"},
		{"--seconds 0", "--seconds"},
		{"--seconds -1", "--seconds"},
		{"--seconds 3601", "--seconds"},
		{"--seconds 1s", "--seconds"},
		{"--seconds nan", "--seconds"},
		{"--seconds", "--seconds"},
		{"--heavy-max-gflop -1", "--heavy-max-gflop"},
		{"--clients 4", "'--clients'"},
		{"--scenario narrow", "--scenario narrow"},
		{"extra", "unexpected argument 'extra'"},
		{"--socket /nonexistent --daemon /bin/true", "--daemon"},
	};
	char cmd[1024], out[8192];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd), "%s/vkgrad bench --scenario mixed %s 2>&1", build_dir(),
			 bad[i].args);
		assert_int_equal(run_cmd(cmd, out, sizeof(out)), 2);
		if (!strstr(out, bad[i].names))
			fail_msg("'%s': the message does not name %s", bad[i].args, bad[i].names);
	}
	/* --scenario=mixed is the same mode */
	snprintf(cmd, sizeof(cmd), "%s/vkgrad bench --scenario=mixed --heavy-inflight 0 2>&1",
		 build_dir());
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "--heavy-inflight"));
	snprintf(cmd, sizeof(cmd), "%s/vkgrad bench --scenario mixed --help", build_dir());
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "--heavy-inflight K"));
	/* the other bench's help names the scenario */
	snprintf(cmd, sizeof(cmd), "%s/vkgrad bench --help", build_dir());
	assert_int_equal(run_cmd(cmd, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "mixed"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mixed_usage),
		cmocka_unit_test(test_mixed_lines),
		cmocka_unit_test(test_mixed_scaled_private_daemon),
		cmocka_unit_test(test_mixed_limit),
	};
	return group_run_plain("bench_mixed", tests, &g_d);
}
