/* daemon/kernels/costmodel.c — see costmodel.h: the probes, the geometry
 * and the fit (the saved file: costmodel_file.c). */
#include "costmodel.h"

#include "engine_job.h"
#include "log.h"
#include "record.h"
#include "scratch.h"
#include "kshape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One probe shape; split-K runs it with `slices` slices. */
typedef struct probe_shape {
	uint64_t batch, in, out;
	uint32_t slices;
} probe_shape;

/* The parts probed: a kernel on dW/db or on dX, with the sizes n of its
 * long and wide shapes (shape_of) on a CPU device, chosen so that each
 * takes a few ms on lavapipe, its work well above its fixed cost. A GPU
 * runs them GPU_LONG and GPU_WIDE times larger (its wide shapes must pass
 * one wave of workgroups before their work shows). */
typedef struct probe_part {
	int kern;
	bool for_dx;
	uint64_t n_long[2], n_wide[2];
	uint64_t n_long_16bit; /* the 16-bit dtypes' one long shape, 0: n_long[1] */
} probe_part;
static const probe_part parts[] = {
	{KERN_PARAM, false, {64, 256}, {2, 4}, 0}, {KERN_TILED, false, {4, 8}, {4, 8}, 0},
	/* split-K: the 16-bit dtypes' long shape long enough that their three
	 * samples tell its cost per workgroup-iteration from its fixed cost
	 * (at 128 rows the f16 fit gave the iterations 0 ns, and auto took 64
	 * slices for 1048576x1x1 dW/db at 5 ms estimated: 13 s on lavapipe);
	 * f32's five samples keep the short ones (with 512 and 2048 rows its
	 * fit put split-K below tiled128 for 160x160x160, 2-7x slower) */
	{KERN_SPLITK, false, {4, 8}, {4, 8}, 128}, {KERN_TILED128, false, {4, 8}, {4, 8}, 0},
	{KERN_INPUT, true, {16, 32}, {2, 4}, 0},   {KERN_TILED, true, {4, 8}, {4, 8}, 0},
	{KERN_TILED128, true, {4, 8}, {4, 8}, 0},
	{KERN_NARROW, false, {256, 1024}, {2, 4}, 0},
	{KERN_NARROW_DX, true, {256, 1024}, {2, 4}, 0},
};
#define NPARTS (sizeof(parts) / sizeof(parts[0]))

/* Each part runs on three kinds of shape:
 *   tiny  16 x 16 x 16
 *   long  one workgroup walking a reduction of 16·n rows (dW: batch; dX:
 *         out)
 *   wide  (n·32)^2 outputs of dW (batch 16·S) or of dX (out 16): many
 *         workgroups, one or two iterations each
 * f32 at both sizes of each kind, f16 and bf16 at the larger only (three
 * samples: a, g and b). Every probe of every dtype is recorded into one
 * command buffer and submitted once: a busy host then delays the probes
 * by one wake-up, not by one per probe. */
#define GPU_LONG 64
#define GPU_WIDE 16
#define PROBE_SLICES 4
#define MAX_FIT 32 /* samples per kernel (linear_tiled_gemm: dW's and dX's) */
#define CPU_REPS 1 /* (many samples per kernel; a CPU device is slow) */
#define GPU_REPS 3
/* Submissions of the whole probe set on a CPU device (costmodel.h:
 * COSTMODEL_CPU_PASSES, then more while they disagree), each probe's least
 * time kept: the host's other work takes its cores in bursts, and a burst
 * over part of the set (one kernel's probes and not another's) makes the
 * fit rank them wrong. On lavapipe (2 cores, 2026-12-06; 1,024x512x64 f32
 * dW, where the rules' generic runs about 3x slower than the model's usual
 * pick, split-K or tiled128, and test_tenants once failed for it), starts
 * that kept generic: one pass 4 of 66 (idle or beside 150 ms bursts of two
 * busy loops) and 1 of 6 beside 3 s of them; two passes 0 of 66 and 1 of
 * 8 (docs/performance.md). One pass took about 160 ms idle, two 290, the
 * three to five of costmodel.h 413-676. A GPU keeps one (its reps sit in
 * one command buffer). */
#define MAX_PROBES (PROTO_DTYPE_COUNT * NPARTS * 5)
#define MAX_QUERIES (2 * GPU_REPS * MAX_PROBES)

/* One probe: part, dtype, kind and size. */
typedef struct probe {
	const probe_part *pp;
	proto_dtype dt;
	int kind;
	uint64_t n;
} probe;

static bool is_narrow(int kern)
{
	return kern == KERN_NARROW || kern == KERN_NARROW_DX;
}

/* Is kernel k one a dtype may lack and still be modelled (tiled128: 32
 * KiB of shared memory; the narrow family likewise)? */
static bool optional_part(int kern)
{
	return kern == KERN_TILED128 || is_narrow(kern);
}

static probe_shape shape_of(const probe_part *pp, int kind, uint64_t n)
{
	/* the narrow family: its own shapes, many rows of few features (long:
	 * 16·n rows of 2x2, as the others'; wide: 1024·n rows of 8n x 8n);
	 * its blocks are the shape's (kshape_narrow_blocks) */
	if (is_narrow(pp->kern) && kind == 2)
		return (probe_shape){1024 * n, 8 * n, 8 * n, 0};
	if (is_narrow(pp->kern))
		return kind == 0 ? (probe_shape){16, 16, 16, 0} : (probe_shape){16 * n, 2, 2, 0};
	/* split-K's long shape in one slice: one workgroup, its critical
	 * path alone (as for the other kernels) */
	const uint32_t S = pp->kern == KERN_SPLITK && kind != 1 ? PROBE_SLICES : 1;
	if (kind == 0)
		return (probe_shape){16, 16, 16, S};
	if (kind == 1)
		return pp->for_dx ? (probe_shape){2, 2, 16 * n, S} : (probe_shape){16 * n, 2, 2, S};
	return pp->for_dx ? (probe_shape){32 * n, 32 * n, 16, S} : (probe_shape){16 * S, 32 * n, 32 * n, S};
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the geometry: what one part of a job is, for the fit ----------------------- */

#define TILE VKG_TILE_TILED
#define WIDE_TILE VKG_TILE_TILED128

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

costmodel_geom costmodel_geometry(const proto_request *q, bool for_dx, int k, uint32_t slices)
{
	const bool dw = q->t[PROTO_T_DW].present;
	const uint64_t n = dw ? q->in : 1; /* dW's columns: one for db alone */
	uint64_t wgs = 0, trips = 0, extra = 0;
	if (k == KERN_PARAM && !for_dx) {
		wgs = (dw ? ceil_div(q->in, VKG_PARAM_COLS) : 1) * q->out;
		trips = ceil_div(q->batch, VKG_PARAM_STRIPES);
	} else if (k == KERN_INPUT && for_dx) {
		wgs = ceil_div(q->in, VKG_INPUT_TILE) * ceil_div(q->batch, VKG_INPUT_TILE);
		trips = ceil_div(q->out, 16);
	} else if (k == KERN_TILED) {
		wgs = for_dx ? ceil_div(q->in, TILE) * ceil_div(q->batch, TILE) : ceil_div(n, TILE) * ceil_div(q->out, TILE);
		trips = ceil_div(for_dx ? q->out : q->batch, 16);
	} else if (k == KERN_TILED128) {
		const uint64_t per = q->dtype == PROTO_F32 ? 16 : 8; /* rows per iteration */
		wgs = for_dx ? ceil_div(q->in, WIDE_TILE) * ceil_div(q->batch, WIDE_TILE)
			     : ceil_div(n, WIDE_TILE) * ceil_div(q->out, WIDE_TILE);
		trips = ceil_div(for_dx ? q->out : q->batch, per);
	} else if (k == KERN_NARROW && !for_dx) {
		/* work: per tile, a step's loads and barriers (one per
		 * step of kshape_narrow_step_rows) and its multiply-adds
		 * (o·i / 1024 per 64 rows: a 64x64 tile's 64 rows 4); the reduce
		 * pass one per 256 partials read */
		const uint64_t blocks = slices ? slices : kshape_narrow_blocks(q);
		const uint64_t rows = kshape_narrow_rows(q, (uint32_t)blocks);
		const uint64_t o4 = ceil_div(min_u64(q->out, VKG_NARROW_TILE), 4) * 4;
		const uint64_t i4 = dw ? ceil_div(min_u64(q->in, VKG_NARROW_TILE), 4) * 4 : 4;
		const uint64_t sr = kshape_narrow_step_rows(q);
		wgs = blocks * kshape_narrow_tiles(q);
		trips = ceil_div(rows, sr);
		const double tiles = (double)kshape_narrow_tiles(q);
		const double steps = tiles * (double)blocks * (double)trips;
		const double fma = tiles * (double)q->batch / VKG_NARROW_STEP * (double)(o4 * i4) / 1024.0;
		const double red = (double)blocks * (double)kshape_narrow_stride(q) / 256.0;
		return (costmodel_geom){.wgs = (double)wgs + (double)ceil_div(kshape_narrow_stride(q), VKG_NARROW_RED_COLS),
				      .work = steps + fma + red,
				      .trips = (double)trips};
	} else if (k == KERN_NARROW_DX && for_dx) {
		uint32_t tiles;
		const uint64_t groups = kshape_narrow_dx_groups(q, &tiles);
		/* elements loaded and stored plus a sixteenth of the
		 * multiply-adds, per 4096; and one per chunk of out of each
		 * row tile (its loads and barriers); the multiply-adds over in
		 * rounded up to the 8-wide micro-tiles */
		const uint64_t i8 = ceil_div(q->in, 8) * 8;
		const uint64_t tr = kshape_narrow_dx_tile_rows(q->in);
		const uint64_t rowtiles = ceil_div(q->batch, tr) * ceil_div(q->in, VKG_NARROW_TILE) *
					  ceil_div(q->out, 4096 / tr);
		const double el = (double)q->batch * (double)(q->out + q->in) +
				  (double)q->batch * (double)q->out * (double)i8 / 16.0;
		return (costmodel_geom){.wgs = (double)(groups * ceil_div(q->in, VKG_NARROW_TILE)),
				      .work = el / 4096.0 + (double)rowtiles,
				      .trips = (double)tiles * (double)(q->out + 1)};
	} else if (k == KERN_SPLITK && slices >= 1) {
		const uint64_t tiles = for_dx ? ceil_div(q->in, TILE) * ceil_div(q->batch, TILE)
					      : ceil_div(n, TILE) * ceil_div(q->out, TILE);
		wgs = slices * tiles;
		trips = ceil_div(ceil_div(for_dx ? q->out : q->batch, slices), 16);
		extra = slices * tiles; /* the reduce pass: each slice's tiles read once */
	}
	return (costmodel_geom){.wgs = (double)(wgs + extra), .work = (double)(wgs * trips + extra),
			      .trips = (double)trips};
}

/* ---- the fit ------------------------------------------------------------------ */

/* Solve the n×n system (n <= 4) a·x = b by Gaussian elimination with
 * partial pivoting; -1 when singular. */
static int solve(double a[4][4], double b[4], unsigned n, double x[4])
{
	for (unsigned c = 0; c < n; c++) {
		unsigned p = c;
		for (unsigned r = c + 1; r < n; r++)
			if (fabs(a[r][c]) > fabs(a[p][c]))
				p = r;
		if (fabs(a[p][c]) < 1e-300)
			return -1;
		for (unsigned k = 0; k < n; k++) {
			double t = a[c][k];
			a[c][k] = a[p][k], a[p][k] = t;
		}
		double t = b[c];
		b[c] = b[p], b[p] = t;
		for (unsigned r = c + 1; r < n; r++) {
			const double f = a[r][c] / a[c][c];
			for (unsigned k = c; k < n; k++)
				a[r][k] -= f * a[c][k];
			b[r] -= f * b[c];
		}
	}
	for (unsigned c = n; c-- > 0;) {
		double s = b[c];
		for (unsigned k = c + 1; k < n; k++)
			s -= a[c][k] * x[k];
		x[c] = s / a[c][c];
	}
	return 0;
}

/* Relative least squares (each sample weighted by 1/t, so a 50 µs part
 * counts as much as a 50 ms one: what matters is the ratio between
 * families) over every subset of the terms a, g·G, b·W (and c·T with
 * critical_path), keeping the best with no negative coefficient. */
costmodel_fit costmodel_fit_samples(const costmodel_sample *smp, unsigned n, bool critical_path)
{
	costmodel_fit best = {0};
	double best_err = INFINITY;
	const unsigned nterms = critical_path ? 4 : 3;
	for (unsigned mask = 1; mask < (1u << nterms) && n > 0; mask++) {
		unsigned idx[4], m = 0;
		for (unsigned k = 0; k < nterms; k++)
			if (mask & (1u << k))
				idx[m++] = k;
		if (m > n)
			continue;
		double ata[4][4] = {{0}}, atb[4] = {0}, x[4] = {0};
		for (unsigned i = 0; i < n; i++) {
			const double f[4] = {1.0, smp[i].wgs, smp[i].work, smp[i].trips};
			const double wt = smp[i].ns > 0 ? 1.0 / smp[i].ns : 1.0;
			for (unsigned r = 0; r < m; r++) {
				for (unsigned c = 0; c < m; c++)
					ata[r][c] += f[idx[r]] * f[idx[c]] * wt * wt;
				atb[r] += f[idx[r]] * smp[i].ns * wt * wt;
			}
		}
		if (solve(ata, atb, m, x) != 0)
			continue;
		double coef[4] = {0};
		bool neg = false;
		for (unsigned r = 0; r < m; r++) {
			coef[idx[r]] = x[r];
			neg |= x[r] < 0;
		}
		if (neg)
			continue;
		const costmodel_fit f = {.a = coef[0], .g = coef[1], .b = coef[2], .c = coef[3], .ok = true};
		double err = 0;
		for (unsigned i = 0; i < n; i++) {
			const double p = f.a + f.g * smp[i].wgs + f.b * smp[i].work + f.c * smp[i].trips;
			const double e = smp[i].ns > 0 ? (p - smp[i].ns) / smp[i].ns : p - smp[i].ns;
			err += e * e;
		}
		if (err < best_err * (1 - 1e-12)) {
			best_err = err;
			best = f;
		}
	}
	return best;
}

const char *costmodel_kernel_name(int k)
{
	switch (k) {
	case KERN_PARAM: return "linear_parameter_backward";
	case KERN_INPUT: return "linear_input_backward";
	case KERN_TILED: return "linear_tiled_gemm";
	case KERN_SPLITK: return "linear_splitk_gemm";
	case KERN_TILED128: return "linear_tiled128_gemm";
	case KERN_NARROW: return "linear_narrow_param";
	case KERN_NARROW_DX: return "linear_narrow_input";
	default: return "(not modelled)";
	}
}

double costmodel_ns(const costmodel *m, int k, proto_dtype dt, double wgs, double work, double trips)
{
	if (!m || k < 0 || k >= KERN_COUNT || (unsigned)dt >= PROTO_DTYPE_COUNT || !m->fit[k][dt].ok)
		return -1.0;
	const costmodel_fit *f = &m->fit[k][dt];
	return f->a + f->g * wgs + f->b * work + f->c * trips;
}

/* ---- the probes ------------------------------------------------------------------ */

typedef struct prober {
	const device *d;
	recorder *rc;
	scratch buf, dummy;
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkQueryPool qp;
	VkFence fence;
} prober;

/* Tensor t's elements in a job of shape s. */
static uint64_t tensor_elems(const probe_shape *s, int t)
{
	switch (t) {
	case PROTO_T_X:
	case PROTO_T_DX: return s->batch * s->in;
	case PROTO_T_DY: return s->batch * s->out;
	case PROTO_T_W:
	case PROTO_T_DW: return s->out * s->in;
	case PROTO_T_DB: return s->out;
	default: return 0;
	}
}

/* A job of shape s, dtype dt, every tensor present, laid out in scratch
 * (split-K's partials after them); returns the bytes it spans. */
static uint64_t probe_job(job *j, const probe_shape *s, proto_dtype dt)
{
	memset(j, 0, sizeof(*j));
	j->req.batch = s->batch, j->req.in = s->in, j->req.out = s->out;
	j->req.dtype = dt;
	j->req.variant = PROTO_VARIANT_AUTO;
	uint64_t at = 0;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		j->req.t[t].present = true;
		j->bytes[t] = tensor_elems(s, t) * proto_dtype_size(dt);
		j->soff[t] = at;
		at += scratch_round(j->bytes[t]);
	}
	j->devlocal = true;
	j->splitk_off = at;
	const uint64_t blocks = kshape_narrow_blocks(&j->req);
	const uint64_t sk = kshape_splitk_elems(&j->req, s->slices), nw = kshape_narrow_elems(&j->req, (uint32_t)blocks);
	at += scratch_round((sk > nw ? sk : nw) * 4);
	return at;
}

/* Probe pr's part into the command buffer `reps` times, a barrier before
 * each, each between two timestamps from query q0 on. */
static void record_probe(prober *pr, job *j, const probe_part *pp, unsigned reps, uint32_t q0)
{
	const device *d = pr->d;
	const VkDeviceSize align = d->props.limits.minStorageBufferOffsetAlignment;
	const record_target tg = {.pool = pr->pool, .cb = pr->cb, .queries = pr->qp, .scratch = pr->buf.buf,
				  .dummy = pr->dummy.buf, .dummy_piece = align < 16 ? 16 : align};
	record_counts counts = {0};
	for (unsigned r = 0; r < reps; r++) {
		record_barrier_all(pr->cb);
		vkCmdWriteTimestamp(pr->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pr->qp, q0 + 2 * r);
		record_job_kernels(pr->rc, &tg, pr->cb, j, !pp->for_dx, pp->for_dx, &counts);
		vkCmdWriteTimestamp(pr->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pr->qp, q0 + 2 * r + 1);
	}
}

static void prober_free(prober *pr)
{
	const device *d = pr->d;
	if (pr->fence)
		vkDestroyFence(d->dev, pr->fence, NULL);
	if (pr->qp)
		vkDestroyQueryPool(d->dev, pr->qp, NULL);
	if (pr->pool)
		vkDestroyCommandPool(d->dev, pr->pool, NULL);
	scratch_release(&pr->buf, d);
	scratch_release(&pr->dummy, d);
	record_free(pr->rc);
}

static int prober_init(prober *pr, const device *d, const pipelines *pl, uint64_t dispatch_max_macs,
		       uint64_t bytes, char *err, size_t errlen)
{
	memset(pr, 0, sizeof(*pr));
	pr->d = d;
	pr->rc = record_new(d, pl, dispatch_max_macs, 1);
	if (!pr->rc) {
		snprintf(err, errlen, "out of memory for its recorder");
		return -1;
	}
	if (scratch_reserve(&pr->buf, d, bytes, err, errlen) != 0 ||
	    scratch_reserve(&pr->dummy, d, 3 * 256, err, errlen) != 0)
		return -1;
	const VkCommandPoolCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
					      .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
					      .queueFamilyIndex = d->queue_family};
	const VkQueryPoolCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
					   .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = MAX_QUERIES};
	const VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	if (vkCreateCommandPool(d->dev, &cpci, NULL, &pr->pool) != VK_SUCCESS ||
	    vkCreateQueryPool(d->dev, &qci, NULL, &pr->qp) != VK_SUCCESS ||
	    vkCreateFence(d->dev, &fci, NULL, &pr->fence) != VK_SUCCESS) {
		snprintf(err, errlen, "creating its command pool, query pool or fence failed");
		return -1;
	}
	const VkCommandBufferAllocateInfo cbai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
						  .commandPool = pr->pool,
						  .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
						  .commandBufferCount = 1};
	if (vkAllocateCommandBuffers(d->dev, &cbai, &pr->cb) != VK_SUCCESS) {
		snprintf(err, errlen, "allocating its command buffer failed");
		return -1;
	}
	return 0;
}

static probe_shape probe_shape_of(const probe *pb, bool cpu)
{
	const uint64_t scale = pb->kind == 1 ? (cpu ? 1 : GPU_LONG) : pb->kind == 2 ? (cpu ? 1 : GPU_WIDE) : 1;
	if (is_narrow(pb->pp->kern) && pb->kind == 2) { /* more rows on a GPU, the features kept */
		probe_shape s = shape_of(pb->pp, pb->kind, pb->n);
		s.batch *= scale;
		return s;
	}
	return shape_of(pb->pp, pb->kind, pb->n * scale);
}

/* Does pl have what part pp needs to run in dtype dt: every plain
 * kernel of dt (the optional ones aside), and pp's own pipelines? */
static bool part_served(const pipelines *pl, int dt, const probe_part *pp)
{
	bool all = pl->dtype_ok[dt] && pl->pipe[KERN_REDUCE][dt];
	for (unsigned p = 0; p < NPARTS; p++)
		all = all && (optional_part(parts[p].kern) || pl->pipe[parts[p].kern][dt]);
	return all && pl->pipe[pp->kern][dt] && (pp->kern != KERN_NARROW || pl->pipe[KERN_NARROW_RED][dt]);
}

/* The probes of every dtype the device serves every plain kernel of
 * (tiled128 where it has it) into list; their count. */
static unsigned probe_list(const pipelines *pl, probe *list)
{
	unsigned n = 0;
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++) {
		for (unsigned p = 0; p < NPARTS; p++) {
			const probe_part *pp = &parts[p];
			if (!part_served(pl, dt, pp))
				continue;
			list[n++] = (probe){pp, (proto_dtype)dt, 0, 1};
			for (int i = dt == PROTO_F32 ? 0 : 1; i < 2; i++) {
				list[n++] = (probe){pp, (proto_dtype)dt, 1,
						    dt != PROTO_F32 && pp->n_long_16bit ? pp->n_long_16bit : pp->n_long[i]};
				list[n++] = (probe){pp, (proto_dtype)dt, 2, pp->n_wide[i]};
			}
		}
	}
	return n;
}

unsigned costmodel_keep_served(costmodel *m, const pipelines *pl)
{
	bool served[KERN_COUNT][PROTO_DTYPE_COUNT] = {{false}};
	for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
		for (unsigned p = 0; p < NPARTS; p++)
			served[parts[p].kern][dt] = served[parts[p].kern][dt] || part_served(pl, dt, &parts[p]);
	unsigned dropped = 0;
	for (int k = 0; k < KERN_COUNT; k++)
		for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
			if (m->fit[k][dt].ok && !served[k][dt]) {
				m->fit[k][dt].ok = false;
				dropped++;
			}
	return dropped;
}

/* One submission of pr's recorded probes (np of them, `reps` each): each
 * probe's least time over its reps into pass[]. Returns 0, or -1 with err. */
static int submit_pass(prober *pr, const device *d, unsigned reps, unsigned np, double *pass, char *err,
		       size_t errlen)
{
	const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
				 .pCommandBuffers = &pr->cb};
	if (vkResetFences(d->dev, 1, &pr->fence) != VK_SUCCESS || vkQueueSubmit(d->queue, 1, &si, pr->fence) != VK_SUCCESS ||
	    vkWaitForFences(d->dev, 1, &pr->fence, VK_TRUE, 120ull * 1000000000ull) != VK_SUCCESS) {
		snprintf(err, errlen, "the probes' submission failed or took over 120 s");
		return -1;
	}
	static uint64_t ts[MAX_QUERIES];
	if (vkGetQueryPoolResults(d->dev, pr->qp, 0, 2 * reps * np, sizeof(ts[0]) * 2 * reps * np, ts, sizeof(ts[0]),
				  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS) {
		snprintf(err, errlen, "reading the probes' timestamps failed");
		return -1;
	}
	for (unsigned i = 0; i < np; i++) {
		pass[i] = INFINITY;
		for (unsigned r = 0; r < reps; r++) {
			const uint64_t *q = ts + 2 * reps * i + 2 * r;
			pass[i] = fmin(pass[i], (double)((q[1] - q[0]) & d->timestamp_mask) * d->timestamp_period);
		}
	}
	return 0;
}

double costmodel_pass_gain(const double *before, const double *pass, unsigned n, double min_ns)
{
	double gain = 1;
	for (unsigned i = 0; i < n; i++)
		if (pass[i] >= min_ns && before[i] / pass[i] > gain)
			gain = before[i] / pass[i];
	return gain;
}

bool costmodel_more_passes(unsigned done, double gain, bool cpu)
{
	if (!cpu)
		return done < 1;
	return done < COSTMODEL_CPU_PASSES || (done < COSTMODEL_CPU_MAX_PASSES && gain > COSTMODEL_SETTLE_GAIN);
}

/* Submit the probe set whose times `least` holds (INFINITY before the
 * first) while costmodel_more_passes says so, each probe keeping its least
 * time (a busy host only adds time); m gets the passes, the last one's
 * gain and whether the passes settled. */
static int submit_passes(costmodel *m, prober *pr, const device *d, bool cpu, unsigned reps, unsigned np,
			 double *least, char *err, size_t errlen)
{
	static double pass[MAX_PROBES];
	m->last_gain = INFINITY;
	for (m->passes = 0; costmodel_more_passes(m->passes, m->last_gain, cpu); m->passes++) {
		if (submit_pass(pr, d, reps, np, pass, err, errlen) != 0)
			return -1;
		m->last_gain = costmodel_pass_gain(least, pass, np, COSTMODEL_SETTLE_MIN_NS);
		for (unsigned i = 0; i < np; i++)
			least[i] = fmin(least[i], pass[i]);
	}
	m->unsettled = cpu && m->last_gain > COSTMODEL_SETTLE_GAIN;
	return 0;
}

int costmodel_measure(costmodel *m, const device *d, const pipelines *pl, uint64_t dispatch_max_macs,
		      char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	if (!d->timestamps) {
		snprintf(err, errlen, "the device has no timestamps on its compute queue");
		return -1;
	}
	const bool cpu = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	const unsigned reps = cpu ? CPU_REPS : GPU_REPS;
	static probe list[MAX_PROBES]; /* start-up only, one thread */
	const unsigned np = probe_list(pl, list);
	if (np == 0) {
		snprintf(err, errlen, "no dtype has every plain kernel");
		return -1;
	}
	uint64_t bytes = 0;
	job j;
	for (unsigned i = 0; i < np; i++) {
		const probe_shape sh = probe_shape_of(&list[i], cpu);
		const uint64_t b = probe_job(&j, &sh, list[i].dt);
		bytes = b > bytes ? b : bytes;
	}
	const uint64_t t0 = now_ns();
	prober pr;
	int rc = prober_init(&pr, d, pl, dispatch_max_macs, bytes, err, errlen);
	/* (submitted once per pass: not one-time) */
	const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
	if (rc == 0 && vkBeginCommandBuffer(pr.cb, &bi) != VK_SUCCESS) {
		snprintf(err, errlen, "vkBeginCommandBuffer failed");
		rc = -1;
	}
	if (rc == 0) {
		vkCmdResetQueryPool(pr.cb, pr.qp, 0, 2 * reps * np);
		vkCmdFillBuffer(pr.cb, pr.buf.buf, 0, VK_WHOLE_SIZE, 0);
		for (unsigned i = 0; i < np; i++) {
			const probe_shape sh = probe_shape_of(&list[i], cpu);
			const probe_part *pp = list[i].pp;
			probe_job(&j, &sh, list[i].dt);
			j.plan = (variant_plan){.param = pp->for_dx ? -1 : pp->kern, .input = pp->for_dx ? pp->kern : -1,
						.slices = pp->kern == KERN_NARROW ? kshape_narrow_blocks(&j.req) : sh.slices,
						.min_slices = 1, .dx_slices = 1};
			record_probe(&pr, &j, pp, reps, 2 * reps * i);
		}
		if (vkEndCommandBuffer(pr.cb) != VK_SUCCESS) {
			snprintf(err, errlen, "vkEndCommandBuffer failed");
			rc = -1;
		}
	}
	/* each probe's least time over its reps and the passes: a busy host
	 * only adds time */
	static double least[MAX_PROBES];
	for (unsigned i = 0; i < np; i++)
		least[i] = INFINITY;
	if (rc == 0)
		rc = submit_passes(m, &pr, d, cpu, reps, np, least, err, errlen);
	/* per dtype and kernel (linear_tiled_gemm's dW and dX parts together) */
	static costmodel_sample smp[PROTO_DTYPE_COUNT][KERN_COUNT][MAX_FIT];
	unsigned ns_n[PROTO_DTYPE_COUNT][KERN_COUNT] = {{0}};
	for (unsigned i = 0; i < np && rc == 0; i++) {
		const probe *pb = &list[i];
		const probe_shape sh = probe_shape_of(pb, cpu);
		probe_job(&j, &sh, pb->dt);
		const double ns = least[i];
		const costmodel_geom g = costmodel_geometry(&j.req, pb->pp->for_dx, pb->pp->kern,
							pb->pp->kern == KERN_NARROW ? kshape_narrow_blocks(&j.req) : sh.slices);
		unsigned *k = &ns_n[pb->dt][pb->pp->kern];
		if (*k < MAX_FIT)
			smp[pb->dt][pb->pp->kern][(*k)++] =
				(costmodel_sample){.wgs = g.wgs, .work = g.work, .trips = g.trips, .ns = ns > 1 ? ns : 1};
		m->nprobes++;
		log_debug("cost probe %s %s %s %llux%llux%llu: %.0f us (%.0f workgroups, %.0f "
			  "workgroup-iterations, %.0f iterations)",
			  costmodel_kernel_name(pb->pp->kern), pb->pp->for_dx ? "dX" : "dW", proto_dtype_name(pb->dt),
			  (unsigned long long)sh.batch, (unsigned long long)sh.in, (unsigned long long)sh.out,
			  ns / 1e3, g.wgs, g.work, g.trips);
	}
	/* the critical path (c·T) only on a GPU: a CPU device runs a handful
	 * of workgroups at once, so one walking alone costs what its work does */
	for (int dt = 0; dt < PROTO_DTYPE_COUNT && rc == 0; dt++)
		for (int k = 0; k < KERN_COUNT; k++)
			if (ns_n[dt][k])
				m->fit[k][dt] = costmodel_fit_samples(smp[dt][k], ns_n[dt][k], !cpu);
	prober_free(&pr);
	m->probe_ms = (double)(now_ns() - t0) / 1e6;
	if (rc != 0) {
		const double ms = m->probe_ms;
		memset(m, 0, sizeof(*m));
		m->probe_ms = ms;
	}
	return rc;
}
