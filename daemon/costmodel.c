/* daemon/costmodel.c — see costmodel.h. */
#include "costmodel.h"

#include "engine_job.h"
#include "log.h"
#include "record.h"
#include "scratch.h"
#include "variant.h"

#include "kernel_registry.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One probe shape; split-K runs it with `slices` slices. */
typedef struct probe_shape {
	uint64_t batch, in, out;
	uint32_t slices;
} probe_shape;

/* The parts probed: a kernel on dW/db or on dX. */
typedef struct probe_part {
	int kern;
	bool for_dx;
} probe_part;
static const probe_part parts[] = {
	{KERN_PARAM, false}, {KERN_TILED, false}, {KERN_SPLITK, false}, {KERN_TILED128, false},
	{KERN_INPUT, true},  {KERN_TILED, true},  {KERN_TILED128, true},
};
#define NPARTS (sizeof(parts) / sizeof(parts[0]))

/* Each part runs on three kinds of shape, each kind grown (its work 4x
 * at a time: n = 1, 4, 16, ... for long, 1, 2, 4, ... for wide) until the
 * part takes at least MIN_NS and PROBE_GROW times the tiny shape's time
 * (so that its work, not its fixed cost, is measured) — or 1.5 times it,
 * past MAX_NS — or n reaches the kind's cap:
 *   tiny  16 x 16 x 16
 *   long  one workgroup walking a reduction of 16·n rows (dW: batch; dX:
 *         out)
 *   wide  (n·32)^2 outputs of dW (batch 16·S) or of dX (out 16): many
 *         workgroups, one or two iterations each
 * On a GPU the wide shapes must pass one wave of workgroups before their
 * work shows: a higher MIN_NS there. */
#define PROBE_GROW 2.5
#define CPU_MIN_NS 5.0e5
#define CPU_MAX_NS 2.0e6
#define GPU_MIN_NS 2.0e5
#define GPU_MAX_NS 2.0e6
#define CPU_CAP_LONG 256  /* 4096 rows */
#define GPU_CAP_LONG 4096 /* 65536 rows */
#define CPU_CAP_WIDE 16   /* 512 x 512 */
#define GPU_CAP_WIDE 64   /* 2048 x 2048 */
#define PROBE_SLICES 4
#define MAX_FIT 32 /* samples per kernel (linear_tiled_gemm: dW's and dX's) */
#define CPU_REPS 2
#define GPU_REPS 3
#define MAX_REPS 3

static probe_shape shape_of(const probe_part *pp, int kind, uint64_t n)
{
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
	bool zeroed;
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
	at += scratch_round(variant_splitk_elems(&j->req, s->slices) * 4);
	return at;
}

/* One submission: part pp of job j `reps` times, a barrier between, each
 * between two timestamps; the least of their GPU ns (a busy host only
 * ever adds time, and a pipeline's first run may pay for more). */
static int probe_run(prober *pr, job *j, const probe_part *pp, unsigned reps, double *ns)
{
	const device *d = pr->d;
	if (vkResetCommandPool(d->dev, pr->pool, 0) != VK_SUCCESS)
		return -1;
	const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
					     .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	if (vkBeginCommandBuffer(pr->cb, &bi) != VK_SUCCESS)
		return -1;
	vkCmdResetQueryPool(pr->cb, pr->qp, 0, 2 * reps);
	record_barrier_all(pr->cb); /* after the last probe's kernels */
	if (!pr->zeroed) {
		vkCmdFillBuffer(pr->cb, pr->buf.buf, 0, VK_WHOLE_SIZE, 0);
		record_barrier_all(pr->cb);
		pr->zeroed = true;
	}
	const VkDeviceSize align = d->props.limits.minStorageBufferOffsetAlignment;
	const record_target tg = {.pool = pr->pool, .cb = pr->cb, .queries = pr->qp, .scratch = pr->buf.buf,
				  .dummy = pr->dummy.buf, .dummy_piece = align < 16 ? 16 : align};
	record_counts counts = {0};
	for (unsigned r = 0; r < reps; r++) {
		if (r)
			record_barrier_all(pr->cb);
		vkCmdWriteTimestamp(pr->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pr->qp, 2 * r);
		record_job_kernels(pr->rc, &tg, pr->cb, j, !pp->for_dx, pp->for_dx, &counts);
		vkCmdWriteTimestamp(pr->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pr->qp, 2 * r + 1);
	}
	if (vkEndCommandBuffer(pr->cb) != VK_SUCCESS)
		return -1;
	const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
				 .pCommandBuffers = &pr->cb};
	if (vkResetFences(d->dev, 1, &pr->fence) != VK_SUCCESS ||
	    vkQueueSubmit(d->queue, 1, &si, pr->fence) != VK_SUCCESS ||
	    vkWaitForFences(d->dev, 1, &pr->fence, VK_TRUE, 30ull * 1000000000ull) != VK_SUCCESS)
		return -1;
	uint64_t ts[2 * MAX_REPS];
	if (vkGetQueryPoolResults(d->dev, pr->qp, 0, 2 * reps, sizeof(ts[0]) * 2 * reps, ts, sizeof(ts[0]),
				  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
		return -1;
	*ns = INFINITY;
	for (unsigned r = 0; r < reps; r++)
		*ns = fmin(*ns, (double)((ts[2 * r + 1] - ts[2 * r]) & d->timestamp_mask) * d->timestamp_period);
	return 0;
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
					   .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2 * MAX_REPS};
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

/* Time part pp of dtype dt on its shapes (shape_of), appending the
 * samples to smp[*n..MAX_FIT). With `fixed` (the sizes f32's probes of
 * this part ended at, per kind) only those sizes run; else each kind grows
 * as above and the size it ended at goes to ended[kind]. */
static int probe_one_part(prober *pr, const probe_part *pp, proto_dtype dt, bool cpu, costmodel *m,
			  const uint64_t *fixed, uint64_t *ended, costmodel_sample *smp, unsigned *n)
{
	double tiny = 0;
	job j;
	for (int kind = 0; kind < 3; kind++) {
		const uint64_t cap = kind == 0 ? 1 : kind == 1 ? (cpu ? CPU_CAP_LONG : GPU_CAP_LONG)
							   : (cpu ? CPU_CAP_WIDE : GPU_CAP_WIDE);
		for (uint64_t sz = fixed ? fixed[kind] : 1; sz <= cap && *n < MAX_FIT; sz *= kind == 2 ? 2 : 4) {
			const probe_shape sh = shape_of(pp, kind, sz);
			probe_job(&j, &sh, dt);
			j.plan = (variant_plan){.param = pp->for_dx ? -1 : pp->kern, .input = pp->for_dx ? pp->kern : -1,
						.slices = sh.slices, .min_slices = 1, .dx_slices = 1};
			double ns;
			if (probe_run(pr, &j, pp, cpu ? CPU_REPS : GPU_REPS, &ns) != 0)
				return -1;
			if (kind == 0)
				tiny = ns;
			const variant_geom g = variant_geometry(&j.req, pp->for_dx, pp->kern, sh.slices);
			smp[*n] = (costmodel_sample){.wgs = g.wgs, .work = g.work, .trips = g.trips,
						     .ns = ns > 1 ? ns : 1};
			(*n)++;
			m->nprobes++;
			log_debug("cost probe %s %s %s %llux%llux%llu: %.0f us (%.0f workgroups, %.0f "
				  "workgroup-iterations, %.0f iterations)",
				  costmodel_kernel_name(pp->kern), pp->for_dx ? "dX" : "dW", proto_dtype_name(dt),
				  (unsigned long long)sh.batch, (unsigned long long)sh.in,
				  (unsigned long long)sh.out, ns / 1e3, g.wgs, g.work, g.trips);
			if (ended)
				ended[kind] = sz;
			if (fixed || (kind > 0 && ns >= 1.5 * tiny &&
				      (ns >= PROBE_GROW * tiny || ns >= (cpu ? CPU_MAX_NS : GPU_MAX_NS)) &&
				      ns >= (cpu ? CPU_MIN_NS : GPU_MIN_NS)))
				break;
		}
	}
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
	uint64_t bytes = 0;
	job j;
	for (unsigned p = 0; p < NPARTS; p++)
		for (int kind = 1; kind < 3; kind++) {
			const probe_shape sh = shape_of(&parts[p], kind, kind == 1 ? (cpu ? CPU_CAP_LONG : GPU_CAP_LONG)
								      : (cpu ? CPU_CAP_WIDE : GPU_CAP_WIDE));
			const uint64_t b = probe_job(&j, &sh, PROTO_F32);
			bytes = b > bytes ? b : bytes;
		}
	const uint64_t t0 = now_ns();
	prober pr;
	int rc = prober_init(&pr, d, pl, dispatch_max_macs, bytes, err, errlen);
	/* the sizes the first dtype's probes grew to, per part and kind: the
	 * others run only those (three samples: a, g and b) */
	uint64_t grown[NPARTS][3] = {{0}};
	for (int dt = 0; dt < PROTO_DTYPE_COUNT && rc == 0; dt++) {
		/* every plain kernel but tiled128, which needs 32 KiB of shared
		 * memory: probed where the device has it */
		bool all = pl->dtype_ok[dt] && pl->pipe[KERN_REDUCE][dt];
		for (unsigned p = 0; p < NPARTS; p++)
			all = all && (parts[p].kern == KERN_TILED128 || pl->pipe[parts[p].kern][dt]);
		/* per kernel (linear_tiled_gemm's dW and dX parts together) */
		costmodel_sample smp[KERN_COUNT][MAX_FIT];
		unsigned n[KERN_COUNT] = {0};
		for (unsigned p = 0; p < NPARTS && all && rc == 0; p++)
			if (pl->pipe[parts[p].kern][dt] &&
			    probe_one_part(&pr, &parts[p], (proto_dtype)dt, cpu, m,
					   grown[p][0] ? grown[p] : NULL, grown[p][0] ? NULL : grown[p],
					   smp[parts[p].kern], &n[parts[p].kern]) != 0) {
				snprintf(err, errlen, "a probe's submission failed");
				rc = -1;
			}
		/* the critical path (c·T) only on a GPU: a CPU device runs a
		 * handful of workgroups at once, so one walking alone costs what
		 * its work does */
		for (int k = 0; k < KERN_COUNT && rc == 0; k++)
			if (n[k])
				m->fit[k][dt] = costmodel_fit_samples(smp[k], n[k], !cpu);
	}
	prober_free(&pr);
	m->probe_ms = (double)(now_ns() - t0) / 1e6;
	if (rc != 0) {
		const double ms = m->probe_ms;
		memset(m, 0, sizeof(*m));
		m->probe_ms = ms;
	}
	return rc;
}

/* ---- the file in the cache directory ------------------------------------------- */

#define FILE_MAX 8192 /* bytes: a model is about 2 KiB */

/* What a saved model must match: the daemon's version, the kernels
 * (a hash of every registered SPIR-V module), the loop bound, and the
 * device and driver. */
static void model_key(const device *d, char *key, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over the kernels */
	for (unsigned i = 0; i < kreg_count; i++) {
		const unsigned char *b = (const unsigned char *)kreg_entries[i].spirv;
		for (size_t k = 0; k < kreg_entries[i].spirv_size; k++)
			h = (h ^ b[k]) * 1099511628211ull;
	}
	char uuid[2 * VK_UUID_SIZE + 1];
	for (int i = 0; i < (int)VK_UUID_SIZE; i++)
		snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
	snprintf(key, n, "vkgrad-costmodel 1 %s kernels %016llx trips %u device %04x %04x %08x %s", VKG_VERSION,
		 (unsigned long long)h, variant_loop_trips(), d->props.vendorID, d->props.deviceID,
		 d->props.driverVersion, uuid);
}

/* dir/costmodel-VVVV-DDDD.txt into path; -1 when it does not fit. */
static int model_path(const device *d, const char *dir, char *path, size_t n)
{
	const int w = snprintf(path, n, "%s/costmodel-%04x-%04x.txt", dir, d->props.vendorID, d->props.deviceID);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

int costmodel_load(costmodel *m, const device *d, const char *dir, char *err, size_t errlen)
{
	char path[4096], key[256];
	memset(m, 0, sizeof(*m));
	if (model_path(d, dir, path, sizeof(path)) != 0) {
		snprintf(err, errlen, "the cache directory's path is too long");
		return -1;
	}
	/* not a FIFO or a device, not through a symlink, bounded */
	const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	char buf[FILE_MAX + 1];
	ssize_t len = -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= FILE_MAX)
		len = read(fd, buf, FILE_MAX);
	close(fd);
	if (len < 0) {
		snprintf(err, errlen, "%s: not a regular file of at most %d bytes", path, FILE_MAX);
		return -1;
	}
	buf[len] = 0;
	model_key(d, key, sizeof(key));
	char *nl = strchr(buf, '\n');
	if (!nl || (size_t)(nl - buf) != strlen(key) || strncmp(buf, key, strlen(key)) != 0) {
		snprintf(err, errlen, "%s: made for another device, driver, daemon or loop bound", path);
		return -1;
	}
	for (char *line = nl + 1, *next; *line; line = next) {
		next = strchr(line, '\n');
		if (!next) {
			snprintf(err, errlen, "%s: a line without its end", path);
			goto bad;
		}
		*next++ = 0;
		int k, dt;
		costmodel_fit f = {.ok = true};
		if (sscanf(line, "fit %d %d %lf %lf %lf %lf", &k, &dt, &f.a, &f.g, &f.b, &f.c) != 6 || k < 0 ||
		    k >= KERN_COUNT || dt < 0 || dt >= PROTO_DTYPE_COUNT || !isfinite(f.a) || !isfinite(f.g) ||
		    !isfinite(f.b) || !isfinite(f.c) || f.a < 0 || f.g < 0 || f.b < 0 || f.c < 0) {
			snprintf(err, errlen, "%s: malformed line '%.60s'", path, line);
			goto bad;
		}
		m->fit[k][dt] = f;
	}
	return 0;
bad:
	memset(m, 0, sizeof(*m));
	return -1;
}

int costmodel_save(const costmodel *m, const device *d, const char *dir, char *err, size_t errlen)
{
	char path[4096], tmp[4096 + 16], key[256];
	if (model_path(d, dir, path, sizeof(path)) != 0 ||
	    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "the cache directory's path is too long");
		return -1;
	}
	/* a new file of its own (mkstemp: O_EXCL), renamed over the old */
	const int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	model_key(d, key, sizeof(key));
	fprintf(f, "%s\n", key);
	for (int k = 0; k < KERN_COUNT; k++)
		for (int dt = 0; dt < PROTO_DTYPE_COUNT; dt++)
			if (m->fit[k][dt].ok)
				fprintf(f, "fit %d %d %.17g %.17g %.17g %.17g\n", k, dt, m->fit[k][dt].a,
					m->fit[k][dt].g, m->fit[k][dt].b, m->fit[k][dt].c);
	const bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}
