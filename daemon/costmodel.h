/* daemon/costmodel.h — what the plain kernel families cost on this device,
 * measured at start, so that `auto` picks the cheapest (variant.h).
 *
 * placement_init times linear_parameter_backward (generic dW/db),
 * linear_input_backward (generic dX), linear_tiled_gemm (dW/db and dX) and
 * linear_splitk_gemm with its reduce pass on the device itself, for every
 * dtype it serves: a few probe shapes (tiny, tall-skinny, wide, long over
 * out), zero tensors in a scratch buffer, GPU timestamps around each part
 * (dW/db, dX) of one job at a time. For each (kernel, dtype) it fits
 *
 *     t = a + b·W + c·T   (ns, each coefficient >= 0, least squares)
 *
 * where, for one part of a job on that kernel (variant_geometry), W is the
 * work in workgroup-iterations (workgroups × loop iterations each: what a
 * device whose cores are all busy takes time for), T the loop iterations of
 * one workgroup (the critical path a device with idle cores still waits
 * for) and a the fixed cost of the part's dispatches and barriers.
 * Tall-skinny jobs (few workgroups walking a long reduction) weigh T,
 * square and wide ones W; the families differ in both by orders of
 * magnitude from device to device (a 64×64 tile per workgroup costs a CPU
 * device's thread 256 times what the generic kernel's 32 columns do).
 *
 * The probes are sized by the device type: tiny on a CPU device (lavapipe:
 * about 0.1-0.3 s for all three dtypes), a few thousand workgroups on a GPU
 * (bounded by COSTMODEL_GPU_BUDGET_MS of GPU time). The tensor-core
 * kernels (coopmat*, tiled128) are not modelled; auto takes those by the
 * measured rules in variant.h. A model that could not be measured (no
 * timestamps, an allocation failed) is left off and auto falls back to
 * those rules for every family. */
#ifndef VKG_DAEMON_COSTMODEL_H
#define VKG_DAEMON_COSTMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "msg.h"
#include "pipelines.h"

/* t = a + b·W + c·T for one (kernel, dtype); ok when measured. */
typedef struct costmodel_fit {
	double a, b, c;
	bool ok;
} costmodel_fit;

/* The model of one device: a fit per kernel (KERN_PARAM, KERN_INPUT,
 * KERN_TILED, KERN_SPLITK; the others stay !ok) and dtype. Plain data,
 * owned by its placement. */
typedef struct costmodel {
	costmodel_fit fit[KERN_COUNT][PROTO_DTYPE_COUNT];
	double probe_ms;   /* host time the probes took */
	uint32_t nprobes;  /* timed parts */
} costmodel;

#define COSTMODEL_GPU_BUDGET_MS 200.0

/* Measure m on device d with pipelines pl (dispatches cut at
 * dispatch_max_macs, as the engine's are). Returns 0, or -1 with the
 * reason in err and m all !ok (auto then keeps its fixed rules). Start-up
 * only: it submits to d's compute queue and waits. */
int costmodel_measure(costmodel *m, const device *d, const pipelines *pl, uint64_t dispatch_max_macs,
		      char *err, size_t errlen);

/* The estimated time (ns) of `trips`-iteration workgroups doing `work`
 * workgroup-iterations on kernel k for dtype dt; a negative value when
 * (k, dt) has no fit. */
double costmodel_ns(const costmodel *m, int k, proto_dtype dt, double work, double trips);

/* The name of modelled kernel k (KERN_PARAM ...), for logs. */
const char *costmodel_kernel_name(int k);

/* Fit t = a + b·W + c·T, coefficients >= 0, to n samples (w[i], tr[i],
 * t[i]) by least squares over every subset of the three terms. Returns
 * the fit (ok false when n is 0). */
costmodel_fit costmodel_fit_samples(const double *w, const double *tr, const double *t, unsigned n);

#endif
