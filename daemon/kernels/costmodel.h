/* daemon/kernels/costmodel.h — what the plain kernel families cost on this device,
 * measured at start, so that `auto` picks the cheapest (variant.h).
 *
 * placement_init times linear_parameter_backward (generic dW/db),
 * linear_input_backward (generic dX), linear_tiled_gemm and
 * linear_tiled128_gemm (dW/db and dX; tiled128 where the device has it) and
 * linear_splitk_gemm with its reduce pass on the device itself, for every
 * dtype it serves: a few probe shapes (tiny, tall-skinny, wide, long over
 * out), zero tensors in a scratch buffer, GPU timestamps around each part
 * (dW/db, dX) of one job at a time. For each (kernel, dtype) it fits
 *
 *     t = a + g·G + b·W + c·T   (ns, each coefficient >= 0, least squares)
 *
 * where, for one part of a job on that kernel (costmodel_geometry), G is its
 * workgroups (what each costs besides its loop: its set-up, the epilogue's
 * shared-memory reductions and barriers), W the work in
 * workgroup-iterations (workgroups × loop iterations each: what a device
 * whose cores are all busy takes time for), T the loop iterations of one
 * workgroup (the critical path a GPU with idle cores still waits for; left
 * out on a CPU device, whose few threads are busy as soon as there are a
 * few workgroups) and a the fixed cost of the part's dispatches and
 * barriers. On a GPU each probe is the least of 3 runs (a busy host only
 * adds time). All probes go to the device in one submission.
 * Tall-skinny jobs (few workgroups walking a long reduction) weigh T,
 * square and wide ones W; the families differ in both by orders of
 * magnitude from device to device (a 64×64 tile per workgroup costs a CPU
 * device's thread 256 times what the generic kernel's 32 columns do).
 *
 * The probes are sized by the device type: small on a CPU device
 * (lavapipe: about 0.2-0.6 s of its time for all three dtypes on the
 * shared 2-core host, under load), 16-64 times larger on a GPU (thousands
 * of workgroups; tens of ms). The tensor-core kernels (coopmat*)
 * are not modelled; auto takes those by the measured rules in variant.h.
 * The probes' tensors are in device memory (scratch), as on the
 * device-local path; a job reading client memory directly pays what the
 * bus adds (nothing on a CPU device, where all memory is host memory). A model that could not be measured (no
 * timestamps, an allocation failed) is left off and auto falls back to
 * those rules for every family. */
#ifndef VKG_DAEMON_COSTMODEL_H
#define VKG_DAEMON_COSTMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "msg.h"
#include "pipelines.h"

/* t = a + g·G + b·W + c·T for one (kernel, dtype); ok when measured. */
typedef struct costmodel_fit {
	double a, g, b, c;
	bool ok;
} costmodel_fit;

/* One timed part: its workgroups G, workgroup-iterations W, iterations
 * of one workgroup T, and GPU ns. */
typedef struct costmodel_sample {
	double wgs, work, trips, ns;
} costmodel_sample;

/* The model of one device: a fit per kernel (KERN_PARAM, KERN_INPUT,
 * KERN_TILED, KERN_TILED128, KERN_SPLITK; the others stay !ok) and dtype. Plain data,
 * owned by its placement. */
typedef struct costmodel {
	costmodel_fit fit[KERN_COUNT][PROTO_DTYPE_COUNT];
	double probe_ms;   /* host time the probes took */
	uint32_t nprobes;  /* timed parts */
	uint32_t passes;   /* submissions of the probe set (costmodel_measure) */
	double last_gain;  /* the most a probe got faster in the last pass (costmodel_pass_gain) */
	bool unsettled;    /* a CPU device's passes still disagreed (logged) */
} costmodel;

/* Measure m on device d with pipelines pl (dispatches cut at
 * dispatch_max_macs, as the engine's are). Returns 0, or -1 with the
 * reason in err and m all !ok (auto then keeps its fixed rules). Start-up
 * only: it submits to d's compute queue and waits. On a CPU device the
 * probe set is submitted COSTMODEL_CPU_PASSES times and then again, up to
 * COSTMODEL_CPU_MAX_PASSES, while the last pass made some probe more than
 * COSTMODEL_SETTLE_GAIN faster than the passes before it (the host's other
 * work came in bursts); where the last one still did, m->unsettled (the
 * caller logs it, and saves the model all the same: a restart must choose
 * as this start does). */
int costmodel_measure(costmodel *m, const device *d, const pipelines *pl, uint64_t dispatch_max_macs,
		      char *err, size_t errlen);

/* On lavapipe (2 cores, idle, 2026-12-06, 99 probes, 8 starts): the
 * first pass runs each kernel's first probe 3-10x slower (the pipeline's
 * first dispatch), so the second always gains; the third made some probe
 * 1.15-2.6x faster than the two before it (two starts of 8 over 1.5x), a
 * fourth at most 1.11x. So three passes, then more while the last gained
 * over 1.5x, at most five. */
#define COSTMODEL_CPU_PASSES 3
#define COSTMODEL_CPU_MAX_PASSES 5
#define COSTMODEL_SETTLE_GAIN 1.5
/* probes shorter than this are left out of the gain: their noise is the
 * host's wake-up, not a burst over one kernel */
#define COSTMODEL_SETTLE_MIN_NS 200000.0

/* The most a pass made a probe faster: the largest before[i] / pass[i]
 * over the n probes whose time in this pass is at least min_ns (1 where
 * none got faster or none is that long; INFINITY where before[i] is, the
 * first pass). */
double costmodel_pass_gain(const double *before, const double *pass, unsigned n, double min_ns);
/* Does a measurement that has submitted `done` passes, the last gaining
 * `gain`, submit another? A GPU: one pass. A CPU device:
 * COSTMODEL_CPU_PASSES, then while gain > COSTMODEL_SETTLE_GAIN, up to
 * COSTMODEL_CPU_MAX_PASSES. */
bool costmodel_more_passes(unsigned done, double gain, bool cpu);

/* The estimated time (ns) of `wgs` workgroups of `trips` iterations doing
 * `work` workgroup-iterations on kernel k for dtype dt; a negative value
 * when (k, dt) has no fit. */
double costmodel_ns(const costmodel *m, int k, proto_dtype dt, double wgs, double work, double trips);

/* One part of a job on one kernel, as the cost model counts it: `wgs`
 * workgroups (split-K: of its slices, plus one per 64x64 tile of each
 * slice for its reduce pass), `work` workgroup-iterations in all (workgroups × loop iterations of each; for
 * split-K plus one per 64x64 tile of each slice for its reduce pass) and
 * `trips`, the loop iterations of one workgroup (the critical path). k is
 * KERN_PARAM, KERN_INPUT, KERN_TILED, KERN_TILED128 (its default 128x128
 * tile) or KERN_SPLITK (slices S); another gives work 0. */
typedef struct costmodel_geom {
	double wgs, work, trips;
} costmodel_geom;
costmodel_geom costmodel_geometry(const proto_request *q, bool for_dx, int k, uint32_t slices);

/* The model saved in cache directory `dir` (costmodel-VVVV-DDDD.txt, by
 * vendor and device ID) for d: loaded only when it was made by this
 * daemon version, with these kernels (a hash of their SPIR-V), at this
 * loop bound, on this device and driver (pipelineCacheUUID); a FIFO, a
 * symlink, anything but a regular file of at most 8 KiB, or a malformed
 * line is refused. So a restarted daemon chooses as before (the same bits
 * for the same job), and skips the probes. 0, or -1 with the reason in err
 * and m all !ok. */
int costmodel_load(costmodel *m, const device *d, const char *dir, char *err, size_t errlen);
/* Leave out of m (loaded) the fits of kernels that pl cannot run, as
 * costmodel_measure would not have timed them: a model saved by a daemon
 * that had them (another device limit, a pipeline whose creation failed
 * here) must not make auto pick a kernel without a pipeline. Returns how
 * many fits it left out. */
unsigned costmodel_keep_served(costmodel *m, const pipelines *pl);
/* Save m there: a new file made by mkstemp in dir, renamed over the old.
 * 0, or -1 with the reason in err. */
int costmodel_save(const costmodel *m, const device *d, const char *dir, char *err, size_t errlen);

/* The name of modelled kernel k (KERN_PARAM ...), for logs. */
const char *costmodel_kernel_name(int k);

/* Fit t = a + g·G + b·W (+ c·T with critical_path), coefficients >= 0,
 * to samples smp[0..n) by relative least squares over every subset of the
 * terms. Returns the fit (ok false when n is 0). */
costmodel_fit costmodel_fit_samples(const costmodel_sample *smp, unsigned n, bool critical_path);

#endif
