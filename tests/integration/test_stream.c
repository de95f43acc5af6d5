/* tests/integration/test_stream.c — streamed jobs (daemon/sched/stream.h): a
 * device-local job cut along the batch into row chunks, copies overlapped
 * with kernels (on lavapipe: the same schedule on the one compute queue).
 *
 * Four daemons, every job on the device-local path (--devlocal-min-bytes
 * 1): one unstreamed (--stream-chunk-bytes off), one streaming 1-row chunks
 * (--stream-chunk-bytes 1), the same without resumed dW
 * (VKGRAD_STREAM_SUMS=0: dW after all of X, f32's in quarters, 16-bit's in
 * one step; the others resume dW where its kernel can, stream.h), one
 * streaming chunks of a few rows
 * (--stream-chunk-bytes 600: 600 / (out · element size) rows, e.g. 33 rows
 * of 6 f32 as 25 + 8, 70 rows of 16 f16 as 3 x 18 + 16, 7 rows as one
 * chunk). The same job (same seed) runs on each; the
 * whole region after it must be the same bits on all four, for f32, f16
 * and bf16, every output subset, overwrite and accumulate, forced kernel
 * families (split-K's dX partials are shared by the chunks), and each
 * result within the dtype's tolerance of the float64 reference
 * (VKG_REF_TOL_F32 1e-4, F16 2e-3, BF16 1e-2, normwise; client/ref.h).
 * Each job's trace adds up (stages sum to the round trip, a GPU stage);
 * each streamed job's reply carries its GPU timeline (stream_us), whose
 * times are consistent, an unstreamed one's none. dW cut into row blocks
 * (forced GEMM families, out of several workgroup rows) gives the same bits.
 * Two accumulating jobs in flight at once on one region give the
 * unstreamed pair's bits. Stats show which path ran; bad option values are
 * refused naming the option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "ref.h"
#include "vkgrad.h"

enum { D_PLAIN, D_ROW1, D_ROWS, D_NOSUMS, ND };
static daemon_proc g_d[ND];
static const char *const g_name[ND] = {"unstreamed", "1-row chunks", "600-byte chunks",
				       "1-row chunks, dW unresumed"};
static uint64_t g_queues[ND]; /* each daemon's stream_queues (0: one queue) */

enum { X, DY, W, DW, DB, DX, NT };
enum { O_DW = 1, O_DB = 2, O_DX = 4 };

typedef struct scase {
	const char *dtype; /* f32, f16, bf16 */
	uint64_t B, I, O;
	unsigned outs;
	bool acc;
	const char *variant;
	unsigned seed;
} scase;

static size_t esize(const char *dt)
{
	return strcmp(dt, "f32") == 0 ? 4 : 2;
}

static float to_float(const char *dt, const uint8_t *p)
{
	if (esize(dt) == 4) {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	uint16_t v;
	memcpy(&v, p, 2);
	return strcmp(dt, "bf16") == 0 ? vkg_ref_bf16_to_float(v) : vkg_ref_f16_to_float(v);
}

static void from_float(const char *dt, float f, uint8_t *p)
{
	if (esize(dt) == 4) {
		memcpy(p, &f, 4);
		return;
	}
	uint16_t v = strcmp(dt, "bf16") == 0 ? vkg_ref_bf16_from_float(f) : vkg_ref_f16_from_float(f);
	memcpy(p, &v, 2);
}

static double tol(const char *dt)
{
	return esize(dt) == 4 ? VKG_REF_TOL_F32 : strcmp(dt, "bf16") == 0 ? VKG_REF_TOL_BF16 : VKG_REF_TOL_F16;
}

/* Case k's job in region `reg` at its offsets (case_layout). */
static vkg_job case_job(const scase *k, uint64_t reg, const size_t off[NT])
{
	const bool present[NT] = {true, true, (k->outs & O_DX) != 0,
				  (k->outs & O_DW) != 0, (k->outs & O_DB) != 0, (k->outs & O_DX) != 0};
	vkg_job j = vkg_job_init();
	j.dtype = k->dtype;
	j.variant = k->variant;
	j.batch = k->B, j.in = k->I, j.out = k->O;
	j.accumulate = k->acc;
	vkg_tensor *slot[NT] = {&j.x, &j.dy, &j.w, &j.dw, &j.db, &j.dx};
	for (int t = 0; t < NT; t++)
		if (present[t])
			*slot[t] = (vkg_tensor){reg, off[t]};
	return j;
}

/* Case k's tensors' offsets (each off the 16-byte grid, a multiple of 4)
 * and the region's size. */
static size_t case_layout(const scase *k, size_t off[NT])
{
	const size_t es = esize(k->dtype);
	const uint64_t n[NT] = {k->B * k->I, k->B * k->O, k->O * k->I, k->O * k->I, k->O, k->B * k->I};
	size_t sz = 0;
	for (int t = 0; t < NT; t++) {
		off[t] = sz + 4 * (size_t)t;
		sz += (n[t] * es + 255) / 256 * 256 + 256;
	}
	return sz;
}

/* Field `name` of timeline tl, or -1 when it is not there. */
static int64_t tl_field(const vkg_stream_timeline *tl, const char *name)
{
	for (unsigned i = 0; i < tl->n; i++)
		if (strcmp(tl->f[i].name, name) == 0)
			return (int64_t)tl->f[i].us;
	return -1;
}

/* The timeline of the job daemon d just answered: none unstreamed; else
 * every time within the span, kernels between their first start and last
 * end, the tail after the last kernel, dW's start where dW/db ran; on one
 * queue, no kernel step before its upload's end (clock_skew_us 0). Each
 * field is rounded to a µs on its own: 2 µs of slack. */
static void check_timeline(int d, const scase *k)
{
	vkg_stream_timeline tl;
	const int rc = vkg_stream_last(&tl);
	if (d == D_PLAIN) {
		if (rc != -ENOENT)
			fail_msg("%s: a stream timeline (rc %d, %u fields) for a job that did not stream", g_name[d],
				 rc, tl.n);
		return;
	}
	if (rc != 0)
		fail_msg("%s: %s %llux%llux%llu: no stream timeline (rc %d)", g_name[d], k->dtype,
			 (unsigned long long)k->B, (unsigned long long)k->I, (unsigned long long)k->O, rc);
	static const char *const need[] = {"span_us", "head_us", "upload_us", "w_upload_us", "upload_end_us",
					   "first_compute_start_us", "compute_us", "compute_idle_us",
					   "compute_end_us", "download_us", "download_end_us", "tail_us",
					   "clock_skew_us"};
	int64_t v[sizeof(need) / sizeof(need[0])];
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if ((v[i] = tl_field(&tl, need[i])) < 0)
			fail_msg("%s: the timeline lacks %s", g_name[d], need[i]);
	const int64_t span = v[0], first = v[5], busy = v[6], cend = v[8], dend = v[10], tail = v[11];
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (v[i] > span + 2)
			fail_msg("%s: %s %lld us past the span %lld us", g_name[d], need[i], (long long)v[i],
				 (long long)span);
	if (first > cend || busy > cend - first + 2 || tail > dend - cend + 2 || tail + 2 < dend - cend ||
	    (dend > cend ? dend : cend) > span + 2 || (dend > cend ? dend : cend) + 2 < span)
		fail_msg("%s: inconsistent timeline: kernels %lld..%lld us busy %lld, downloads end %lld, "
			 "tail %lld, span %lld", g_name[d], (long long)first, (long long)cend, (long long)busy,
			 (long long)dend, (long long)tail, (long long)span);
	const int64_t dw = tl_field(&tl, "dw_start_us");
	if ((dw >= 0) != ((k->outs & (O_DW | O_DB)) != 0) || (dw >= 0 && (dw + 2 < first || dw > cend + 2)))
		fail_msg("%s: dw_start_us %lld (outs %u), kernels %lld..%lld us", g_name[d], (long long)dw, k->outs,
			 (long long)first, (long long)cend);
	if (g_queues[d] == 0 && v[12] != 0)
		fail_msg("%s: clock_skew_us %lld on one queue", g_name[d], (long long)v[12]);
}

/* Run case k on daemon d: fill a region from its seed (inputs in [-1, 1),
 * outputs random when accumulating, NaN otherwise), run it, check the
 * outputs against the float64 reference. Returns the region's bytes after
 * the job (malloc'ed, *size set), or NULL after printing why. */
static uint8_t *run_case(int d, const scase *k, size_t *size)
{
	const size_t es = esize(k->dtype);
	const uint64_t n[NT] = {k->B * k->I, k->B * k->O, k->O * k->I, k->O * k->I, k->O, k->B * k->I};
	const bool present[NT] = {true, true, (k->outs & O_DX) != 0,
				  (k->outs & O_DW) != 0, (k->outs & O_DB) != 0, (k->outs & O_DX) != 0};
	size_t off[NT];
	const size_t sz = case_layout(k, off);
	vkg_error err;
	vkg_client *c = vkg_connect(g_d[d].sock, &err);
	assert_non_null(c);
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, sz, &reg, &err);
	assert_non_null(m);
	memset(m, 0x5a, sz);
	float *val[NT];
	srand(k->seed);
	for (int t = 0; t < NT; t++) {
		val[t] = calloc(n[t] ? n[t] : 1, sizeof(float));
		assert_non_null(val[t]);
		for (uint64_t i = 0; i < n[t]; i++) {
			const float f = (t <= W || k->acc) ? (float)rand() / (float)RAND_MAX * 2.0f - 1.0f : NAN;
			from_float(k->dtype, f, m + off[t] + i * es);
			val[t][i] = to_float(k->dtype, m + off[t] + i * es);
		}
	}
	vkg_job j = case_job(k, reg, off);
	vkg_result r;
	uint8_t *out = NULL;
	if (vkg_linear_backward(c, &j, &r, &err) != 0) {
		fprintf(stderr, "%s: %s %llux%llux%llu outs %u%s %s: %s: %s\n", g_name[d], k->dtype,
			(unsigned long long)k->B, (unsigned long long)k->I, (unsigned long long)k->O,
			k->outs, k->acc ? " acc" : "", k->variant, err.code, err.message);
		goto done;
	}
	/* its trace adds up as any job's: the stages sum to the round trip,
	 * the GPU's time measured from the head's and tail's timestamps */
	vkg_trace tr;
	assert_int_equal(vkg_trace_last(&tr), 0);
	uint64_t sum = 0, gpu = 0;
	for (unsigned i = 0; i < tr.n_stages; i++) {
		sum += tr.stages[i].ns;
		if (strcmp(tr.stages[i].name, "gpu") == 0)
			gpu = tr.stages[i].ns;
	}
	if (!tr.complete || sum != tr.t_seen_ns - tr.t_submit_ns || gpu == 0)
		fail_msg("%s: trace: complete %d, stages sum %llu ns, round trip %llu ns, gpu %llu ns",
			 g_name[d], tr.complete, (unsigned long long)sum,
			 (unsigned long long)(tr.t_seen_ns - tr.t_submit_ns), (unsigned long long)gpu);
	check_timeline(d, k);
	double *ref[NT] = {0};
	for (int t = DW; t < NT; t++)
		ref[t] = calloc(n[t], sizeof(double));
	vkg_ref_linear_backward(k->B, k->I, k->O, val[X], val[DY], val[W], ref[DW], ref[DB], ref[DX]);
	double worst = 0;
	for (int t = DW; t < NT; t++) {
		if (present[t]) {
			float *got = calloc(n[t], sizeof(float));
			double *base = k->acc ? calloc(n[t], sizeof(double)) : NULL;
			assert_non_null(got);
			for (uint64_t i = 0; i < n[t]; i++) {
				got[i] = to_float(k->dtype, m + off[t] + i * es);
				if (base)
					base[i] = val[t][i];
			}
			const double e = vkg_ref_max_rel_err(got, ref[t], base, n[t]);
			worst = e > worst ? e : worst;
			free(got);
			free(base);
		}
		free(ref[t]);
	}
	if (!(worst <= tol(k->dtype))) {
		fprintf(stderr, "%s: %s %llux%llux%llu outs %u%s %s: error %g over tolerance %g\n",
			g_name[d], k->dtype, (unsigned long long)k->B, (unsigned long long)k->I,
			(unsigned long long)k->O, k->outs, k->acc ? " acc" : "", k->variant, worst,
			tol(k->dtype));
		goto done;
	}
	out = malloc(sz);
	assert_non_null(out);
	memcpy(out, m, sz);
	*size = sz;
done:
	for (int t = 0; t < NT; t++)
		free(val[t]);
	assert_int_equal(vkg_region_destroy(c, reg, m, sz, &err), 0);
	vkg_close(c);
	return out;
}

/* Case k on every daemon: within tolerance everywhere, the same bits. */
static unsigned run_everywhere(const scase *k)
{
	uint8_t *b[ND];
	size_t sz[ND] = {0};
	unsigned bad = 0;
	for (int d = 0; d < ND; d++)
		bad += (b[d] = run_case(d, k, &sz[d])) == NULL;
	for (int d = 1; d < ND && !bad; d++)
		if (memcmp(b[0], b[d], sz[0]) != 0) {
			size_t i = 0;
			while (b[0][i] == b[d][i])
				i++;
			fprintf(stderr, "%s %llux%llux%llu outs %u%s %s: %s differs from unstreamed at byte %zu\n",
				k->dtype, (unsigned long long)k->B, (unsigned long long)k->I,
				(unsigned long long)k->O, k->outs, k->acc ? " acc" : "", k->variant, g_name[d], i);
			bad++;
		}
	for (int d = 0; d < ND; d++)
		free(b[d]);
	return bad;
}

static const uint64_t shapes[][3] = {
	{7, 5, 3},    /* 600-byte chunks: one chunk */
	{1, 9, 4},    /* one row */
	{33, 17, 6},  /* 600-byte chunks: f32 25 + 8 rows */
	{70, 65, 16}, /* past one tile each way; f32 7 x 9 + 7 rows, f16 3 x 18 + 16 */
};

static void run_dtype(const char *dt)
{
	static const unsigned subsets[] = {O_DW, O_DB, O_DX, O_DW | O_DB, O_DW | O_DX, O_DB | O_DX,
					   O_DW | O_DB | O_DX};
	unsigned bad = 0, n = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t o = 0; o < 7; o++)
			for (int acc = 0; acc < 2; acc++) {
				scase k = {dt, shapes[s][0], shapes[s][1], shapes[s][2], subsets[o], acc != 0,
					   "auto", (unsigned)(100 + s * 20 + o * 2 + (unsigned)acc)};
				bad += run_everywhere(&k);
				n++;
			}
	printf("%s: %u cases on %d daemons, %u failed\n", dt, n, ND, bad);
	assert_int_equal(bad, 0);
}

static void test_same_bits_f32(void **state)
{
	(void)state;
	run_dtype("f32");
}

static void test_same_bits_f16(void **state)
{
	(void)state;
	run_dtype("f16");
}

static void test_same_bits_bf16(void **state)
{
	(void)state;
	run_dtype("bf16");
}

/* Forced kernel families: split-K for dX shares its partials among the
 * chunks; the chunks' plan is the whole job's, never re-chosen. */
static void test_same_bits_every_family(void **state)
{
	(void)state;
	static const char *const fam[] = {"splitk", "tiled", "tiled128", "generic"};
	static const char *const dts[] = {"f32", "f16", "bf16"};
	static const uint64_t shp[][3] = {{37, 33, 70}, {130, 9, 65}};
	unsigned bad = 0, n = 0;
	for (int f = 0; f < 4; f++)
		for (int t = 0; t < 3; t++)
			for (int s = 0; s < 2; s++) {
				scase k = {dts[t], shp[s][0], shp[s][1], shp[s][2], O_DW | O_DB | O_DX, s == 1,
					   fam[f], (unsigned)(500 + f * 10 + t * 2 + s)};
				bad += run_everywhere(&k);
				n++;
			}
	printf("forced families: %u cases, %u failed\n", n, bad);
	assert_int_equal(bad, 0);
}

/* Daemon d's stats. */
static vkg_stats stats_of(int d)
{
	vkg_error err;
	vkg_client *c = vkg_connect(g_d[d].sock, &err);
	assert_non_null(c);
	vkg_stats st;
	assert_int_equal(vkg_stats_get(c, &st, &err), 0);
	vkg_close(c);
	return st;
}

/* dW's row blocks where it does not resume, f32 (stream_chunk.c
 * stream_last_block_rows): a quarter of its o rows rounded up to the kernel's tm
 * rows per workgroup row, so this many dW steps. */
static uint64_t quarter_blocks(uint64_t o, uint64_t tm)
{
	uint64_t br = ((o + 3) / 4 + tm - 1) / tm * tm;
	br = br < o ? br : o;
	return (o + br - 1) / br;
}

/* dW's row blocks: dW of 200 and 300 rows on the forced GEMM families
 * (tiled: 64-row workgroups, 3 or 4 blocks; tiled128: 128 rows, 2 or 3
 * blocks), each downloaded after its own kernels; with dX (chunks) and
 * without, overwrite and accumulate: the unstreamed bits everywhere. The
 * daemon without resumed dW ran exactly f32's quarters and one step per
 * 16-bit job; the others more (tiled resumes: a dW step per chunk, then
 * the last chunk's quarters; tiled128 as without). */
static void test_same_bits_dw_blocks(void **state)
{
	(void)state;
	static const char *const fam[] = {"tiled", "tiled128"};
	static const char *const dts[] = {"f32", "f16", "bf16"};
	static const uint64_t shp[][3] = {{40, 20, 300}, {70, 65, 200}};
	uint64_t before[ND];
	for (int d = 0; d < ND; d++)
		before[d] = stats_of(d).stream_dw_blocks;
	unsigned bad = 0, n = 0;
	uint64_t nosums_want = 0; /* f32's dW in quarters (tiled: 3 or 4 blocks, tiled128: 2 or 3), 16-bit's in one */
	for (int f = 0; f < 2; f++)
		for (int t = 0; t < 3; t++)
			for (int s = 0; s < 2; s++)
				for (int acc = 0; acc < 2; acc++) {
					const unsigned outs = acc ? O_DW | O_DB : O_DW | O_DB | O_DX;
					scase k = {dts[t], shp[s][0], shp[s][1], shp[s][2], s ? outs : O_DW | O_DB | O_DX,
						   acc != 0, fam[f], (unsigned)(700 + f * 20 + t * 4 + s * 2 + acc)};
					bad += run_everywhere(&k);
					n++;
					nosums_want += t == 0 ? quarter_blocks(k.O, f ? 128 : 64) : 1;
				}
	printf("dW row blocks: %u cases, %u failed\n", n, bad);
	assert_int_equal(bad, 0);
	for (int d = 0; d < ND; d++) {
		const uint64_t blocks = stats_of(d).stream_dw_blocks - before[d];
		printf("%s: %llu dW steps for %u jobs\n", g_name[d], (unsigned long long)blocks, n);
		if (d == D_PLAIN)
			assert_int_equal(blocks, 0);
		else if (d == D_NOSUMS)
			assert_int_equal(blocks, nosums_want);
		else
			assert_true(blocks > nosums_want);
	}
}

/* Does daemon d serve kernels of `variant` for dtype dt? (hello's list) */
static bool has_variant(int d, const char *variant, const char *dt)
{
	vkg_error err;
	vkg_client *c = vkg_connect(g_d[d].sock, &err);
	assert_non_null(c);
	vkg_info info;
	assert_int_equal(vkg_hello(c, "test_stream", &info, &err), 0);
	bool found = false;
	vkg_kernel_info k; /* every one: vkg_info.kernels holds 32 */
	for (unsigned i = 0; i < info.n_kernels && !found; i++)
		found = vkg_info_kernel(c, i, &k) == 0 && strcmp(k.variant, variant) == 0 &&
			strstr(k.dtype, dt);
	vkg_close(c);
	return found;
}

/* dW resumed chunk by chunk (stream.h): on the kernels that resume (tiled;
 * coopmat_nv2 where the device has it), X comes in with dY and dW/db are
 * summed chunk by chunk in f32, the last chunk writing them: the unstreamed
 * bits for every dtype, with and without dX and db, overwrite and
 * accumulate, batches of one row, of an odd count, and past one tile and
 * the nv2 tile's BK. The 1-row daemon ran exactly one dW step per chunk of
 * every tiled job (a row, or two where 16-bit rows would not start on 4
 * bytes) and one per row block of the last chunk's (3 for 130 rows of dW),
 * the one without resumed dW (VKGRAD_STREAM_SUMS=0) f32's quarters and one
 * step per 16-bit job; coopmat_nv2's
 * 1,100-row jobs 3 steps or more each. On lavapipe (one queue, everything in order) this
 * checks the sums and the chunking, not the barriers or the ordering of
 * the queues: those only a GPU with transfer queues can miss, and then
 * only by chance (scripts/device-run.sh check runs this on the H200). */
static void test_same_bits_dw_sums(void **state)
{
	(void)state;
	static const char *const fam[] = {"tiled", "coopmat_nv2"};
	static const char *const dts[] = {"f32", "f16", "bf16"};
	static const unsigned outs[] = {O_DW, O_DW | O_DB, O_DW | O_DB | O_DX, O_DW | O_DX};
	/* (the last shape for coopmat_nv2 alone, whose chunks are whole trips
	 * of its unrolled loop: 512 rows with its default tiling) */
	static const uint64_t shp[][3] = {{2, 24, 40}, {67, 70, 33}, {150, 64, 130}, {1100, 64, 136}};
	unsigned bad = 0, n = 0;
	for (int f = 0; f < 2; f++) {
		uint64_t before[ND], rows = 0, nosums_want = 0;
		unsigned jobs = 0;
		for (int d = 0; d < ND; d++)
			before[d] = stats_of(d).stream_dw_blocks;
		for (int t = 0; t < 3; t++) {
			if (f == 1 && !has_variant(D_PLAIN, fam[f], dts[t])) {
				printf("%s %s: not on this device, skipped\n", fam[f], dts[t]);
				continue;
			}
			for (int s = 0; s < (f == 1 ? 4 : 3); s++)
				for (int o = 0; o < 4; o++) {
					const bool acc = (o + s) % 2 == 1;
					scase k = {dts[t], shp[s][0], shp[s][1], shp[s][2], outs[o], acc, fam[f],
						   (unsigned)(900 + f * 40 + t * 12 + s * 4 + o)};
					const uint64_t at = s == 3 ? stats_of(D_ROW1).stream_dw_blocks : 0;
					bad += run_everywhere(&k);
					/* 1,100 rows on coopmat_nv2: resumed over 3 chunks or
					 * more (its default 512 rows each), each a dW step;
					 * unresumed, one step (16-bit) */
					if (s == 3 && stats_of(D_ROW1).stream_dw_blocks - at < 3)
						fail_msg("coopmat_nv2 %s 1100x64x136 outs %u: %llu dW steps, want 3 or more "
							 "(resumed)", k.dtype, k.outs,
							 (unsigned long long)(stats_of(D_ROW1).stream_dw_blocks - at));
					jobs++;
					/* unresumed: f32's dW in quarters (coopmat_nv2
					 * has no f32), 16-bit dW in one step */
					nosums_want += t == 0 ? quarter_blocks(k.O, f == 1 ? 128 : 64) : 1;
					/* (1-row chunks: 2 rows where a row of 16-bit dY or X
					 * is not a multiple of 4 bytes, stream.c row_align) */
					const uint64_t a = esize(k.dtype) == 2 && (k.I % 2 || k.O % 2) ? 2 : 1;
					/* the last chunk's dW in row blocks of a quarter
					 * of dW rounded up to the tiled kernel's 64 rows */
					uint64_t br = ((k.O + 3) / 4 + 63) / 64 * 64;
					br = br < k.O ? br : k.O;
					rows += (k.B + a - 1) / a - 1 + (k.O + br - 1) / br;
				}
		}
		n += jobs;
		const uint64_t row1 = stats_of(D_ROW1).stream_dw_blocks - before[D_ROW1];
		const uint64_t nosums = stats_of(D_NOSUMS).stream_dw_blocks - before[D_NOSUMS];
		printf("%s: %s: %llu dW steps, %llu expected; %s: %llu for %u jobs\n", fam[f],
		       g_name[D_ROW1], (unsigned long long)row1, (unsigned long long)rows, g_name[D_NOSUMS],
		       (unsigned long long)nosums, jobs);
		assert_int_equal(stats_of(D_PLAIN).stream_dw_blocks - before[D_PLAIN], 0);
		assert_int_equal(nosums, nosums_want);
		if (f == 0)
			assert_int_equal(row1, rows);
	}
	printf("resumed dW: %u cases, %u failed\n", n, bad);
	assert_int_equal(bad, 0);
}

/* Case k twice at once on daemon d, both accumulating into the same outputs
 * of one region (the second's copies in must wait for the first's copies
 * out): the region's bytes afterwards. */
static uint8_t *run_twice(int d, const scase *k, size_t *size)
{
	size_t off[NT];
	const size_t sz = case_layout(k, off), es = esize(k->dtype);
	vkg_error err;
	vkg_client *c = vkg_connect(g_d[d].sock, &err);
	assert_non_null(c);
	uint64_t reg;
	uint8_t *m = vkg_region_create(c, sz, &reg, &err);
	assert_non_null(m);
	memset(m, 0x5a, sz);
	srand(k->seed);
	for (size_t i = 0; i + es <= sz; i += es)
		from_float(k->dtype, (float)rand() / (float)RAND_MAX * 2.0f - 1.0f, m + i);
	vkg_job j = case_job(k, reg, off);
	uint64_t h[2];
	vkg_result r;
	for (int i = 0; i < 2; i++)
		assert_int_equal(vkg_submit(c, &j, &h[i], &err), 0);
	for (int i = 0; i < 2; i++)
		if (vkg_wait(c, h[i], 60000, &r, &err) != 0)
			fail_msg("%s: job %d of two: %s: %s", g_name[d], i + 1, err.code, err.message);
	uint8_t *out = malloc(sz);
	assert_non_null(out);
	memcpy(out, m, sz);
	*size = sz;
	assert_int_equal(vkg_region_destroy(c, reg, m, sz, &err), 0);
	vkg_close(c);
	return out;
}

/* Two streamed jobs in flight at once (two submission slots), the second
 * accumulating onto what the first writes: the same bits as the
 * unstreamed daemon's pair, which its barriers order. */
static void test_two_in_flight_same_outputs(void **state)
{
	(void)state;
	static const char *const dts[] = {"f32", "f16", "bf16"};
	for (int t = 0; t < 3; t++) {
		const scase k = {dts[t], 45, 19, 12, O_DW | O_DB | O_DX, true, "auto", 900u + (unsigned)t};
		size_t sz[ND];
		uint8_t *b[ND];
		for (int d = 0; d < ND; d++)
			b[d] = run_twice(d, &k, &sz[d]);
		size_t off[NT];
		case_layout(&k, off);
		unsigned bad = 0;
		for (int d = 1; d < ND; d++) {
			size_t i = 0, ndiff = 0, first = 0;
			for (i = 0; i < sz[0]; i++)
				if (b[0][i] != b[d][i] && ndiff++ == 0)
					first = i;
			if (ndiff == 0)
				continue;
			int tn = NT - 1; /* the tensor holding the first differing byte (X, dY, W, dW, db, dX) */
			while (tn > 0 && off[tn] > first)
				tn--;
			fprintf(stderr, "%s: two accumulating jobs in flight: %s differs from unstreamed in %zu "
				"bytes, the first at byte %zu (tensor %d, element %zu)\n", dts[t], g_name[d], ndiff,
				first, tn, (first - off[tn]) / esize(k.dtype));
			bad++;
		}
		if (bad)
			fail_msg("%s: two accumulating jobs in flight: %u daemons differ from unstreamed", dts[t], bad);
		for (int d = 0; d < ND; d++)
			free(b[d]);
	}
}

static void expect_stats(int d, bool streams)
{
	const vkg_stats st = stats_of(d);
	printf("%s: jobs_done %llu, devlocal_jobs %llu, stream_jobs %llu, stream_chunks %llu, "
	       "stream_chunk_bytes %llu, stream_queues %llu\n", g_name[d],
	       (unsigned long long)st.jobs_done, (unsigned long long)st.devlocal_jobs,
	       (unsigned long long)st.stream_jobs, (unsigned long long)st.stream_chunks,
	       (unsigned long long)st.stream_chunk_bytes, (unsigned long long)st.stream_queues);
	assert_true(st.jobs_done > 0);
	assert_int_equal(st.devlocal_jobs, st.jobs_done);
	assert_int_equal(st.stream_jobs, streams ? st.jobs_done : 0);
	assert_int_equal(st.stream_chunk_bytes, streams ? (d == D_ROWS ? 600 : 1) : 0);
	if (streams)
		assert_true(st.stream_chunks > st.stream_jobs); /* most jobs: several chunks */
	assert_int_equal(st.scratch_failures, 0);
}

static void test_stats_say_which_path(void **state)
{
	(void)state;
	expect_stats(D_PLAIN, false);
	expect_stats(D_ROW1, true);
	expect_stats(D_ROWS, true);
	expect_stats(D_NOSUMS, true);
}

/* vkgradd with args: exits 2, its stderr naming the option and the value. */
static void expect_refused(const char *opt, const char *val, const char *want)
{
	char cmd[512];
	const char *b = getenv("BUILD");
	snprintf(cmd, sizeof(cmd), "%s/vkgradd --%s '%s' --socket /nonexistent/x 2>&1", b ? b : "build",
		 opt, val);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char out[4096] = "";
	size_t got = fread(out, 1, sizeof(out) - 1, p);
	out[got] = 0;
	int ws = pclose(p);
	if (!WIFEXITED(ws) || WEXITSTATUS(ws) == 0 || !strstr(out, want))
		fail_msg("--%s '%s': status 0x%x, output \"%s\", want \"%s\"", opt, val, ws, out, want);
}

static void test_bad_values_refused(void **state)
{
	(void)state;
	expect_refused("stream-chunk-bytes", "0",
		       "--stream-chunk-bytes: '0' is not auto, off or a byte count in [1, 1099511627776]");
	expect_refused("stream-chunk-bytes", "12x",
		       "--stream-chunk-bytes: '12x' is not auto, off or a byte count");
	expect_refused("stream-chunk-bytes", "-5", "--stream-chunk-bytes: '-5'");
	expect_refused("stream-min-bytes", "off",
		       "--stream-min-bytes: 'off' is not auto or a byte count in [1, 1099511627776]");
	expect_refused("stream-min-bytes", "2199023255552", "--stream-min-bytes: '2199023255552'");
	/* the same key in a config file: the file and line named */
	char conf[] = "/tmp/vkgrad-stream-conf.XXXXXX";
	const int fd = mkstemp(conf);
	assert_true(fd >= 0);
	static const char text[] = "# streaming\nstream-min-bytes = 1\nstream-chunk-bytes = banana\n";
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	char want[160];
	snprintf(want, sizeof(want), "%s:3: --stream-chunk-bytes: 'banana' is not auto, off or a byte count",
		 conf);
	expect_refused("config", conf, want);
	unlink(conf);
	/* the daemons still serve */
	for (int d = 0; d < ND; d++) {
		vkg_error err;
		vkg_client *c = vkg_connect(g_d[d].sock, &err);
		assert_non_null(c);
		assert_int_equal(vkg_ping(c, &err), 0);
		vkg_close(c);
	}
}

static int group_setup(void **state)
{
	(void)state;
	static const char *const plain[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "off", NULL};
	static const char *const row1[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "1",
					   "--stream-min-bytes", "1", NULL};
	static const char *const rows[] = {"--devlocal-min-bytes", "1", "--stream-chunk-bytes", "600",
					   "--stream-min-bytes", "1", NULL};
	/* D_NOSUMS runs without resumed dW, the others with it (the default),
	 * which takes over dW where its kernel resumes */
	static const char *const nosums_env[] = {"VKGRAD_STREAM_SUMS=0", NULL};
	const char *const *args[ND] = {plain, row1, rows, row1};
	for (int d = 0; d < ND; d++) {
		/* the first daemon's cache directory for the others: the cost
		 * model it measured and saved there (daemon/kernels/costmodel.h), so auto
		 * chooses the same kernels on all four and the bits compare */
		const char *a[16];
		int n = 0;
		for (int i = 0; args[d][i] && n < 12; i++)
			a[n++] = args[d][i];
		if (d > 0) {
			a[n++] = "--cache-dir";
			a[n++] = g_d[0].cache;
		}
		a[n] = NULL;
		if (daemon_proc_start(&g_d[d], a, d == D_NOSUMS ? nosums_env : NULL) != 0)
			return -1;
		g_queues[d] = stats_of(d).stream_queues;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int rc = 0;
	for (int d = 0; d < ND; d++)
		rc |= daemon_proc_stop(&g_d[d]);
	return rc == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_bits_f32),
		cmocka_unit_test(test_same_bits_f16),
		cmocka_unit_test(test_same_bits_bf16),
		cmocka_unit_test(test_same_bits_every_family),
		cmocka_unit_test(test_same_bits_dw_blocks),
		cmocka_unit_test(test_same_bits_dw_sums),
		cmocka_unit_test(test_two_in_flight_same_outputs),
		cmocka_unit_test(test_stats_say_which_path),
		cmocka_unit_test(test_bad_values_refused),
	};
	int rc = cmocka_run_group_tests_name("stream", tests, group_setup, group_teardown);
	return rc || daemon_proc_failures ? 1 : 0;
}

