/* daemon/kernels/record_priv.h — the recorder's insides, shared by its
 * files: record.c (the batch and its hazards: job order, conflict
 * tracking, barriers, device-local copies, timestamps), dispatch.c (the
 * dispatches: bindings, push descriptors, the kernels of a job's units,
 * grids and reductions cut into bounded pieces, slices), activation.c
 * (the fused activations' pass) and optim_step.c (the optimizer steps).
 * Nothing outside them includes it. Loop thread only. */
#ifndef VKG_DAEMON_RECORD_PRIV_H
#define VKG_DAEMON_RECORD_PRIV_H

#include "record.h"

#include "job.h"
#include "kiface.h"

typedef struct rec rec;

/* What dispatch.c asks of the batch it records into, record.c's (set by
 * record_new): dispatch.c reaches up only through these, so the calls run
 * one way, record.c (the batch) on top of dispatch.c (its dispatches). */
typedef struct record_ops {
	/* A barrier inside a job's kernels (between the pieces of a cut
	 * reduction, or the two passes of split-K and of the narrow family):
	 * everything recorded before it is ordered before everything after,
	 * so the batch's conflict tracking starts afresh. */
	void (*barrier_inside)(const rec *r);
	/* Do two of j's tensors in one region, one read and one written, have
	 * bound ranges that overlap? Their bytes never do (proto_job_check),
	 * but a binding starts at its offset aligned down (dispatch.c's
	 * grid_bind_tensor), so an output right behind an input shares the input's
	 * last aligned bytes. Dispatches of one kernel that bind both then need
	 * a barrier between them, or the second reads bytes the first wrote
	 * (as far as ranges tell). */
	bool (*bound_overlap)(const struct recorder *rc, const job *j);
} record_ops;

/* The conflict tracking's entries (record.c). */
typedef struct record_touch record_touch;
typedef struct record_region record_region;
typedef struct record_lane record_lane;

struct recorder {
	record_ops ops; /* record.c's, for dispatch.c */
	const device *dev;
	const pipelines *pl;
	uint64_t dispatch_max_macs;
	uint64_t copy_piece; /* bytes per copy command, 0: whole tensors */
	/* conflict tracking: a barrier starts a new epoch, which forgets every
	 * range; a range that could not be remembered makes the next dispatch
	 * take a barrier regardless */
	uint64_t epoch;
	bool untracked;
	/* the ranges of the epoch, for all regions together: the array only
	 * grows (geometrically) and is reused epoch after epoch, so steady
	 * state allocates nothing per job */
	record_touch *touch;
	uint32_t ntouch, touch_cap;
	/* the batch's regions: open addressing keyed by region pointer over
	 * the first mask + 1 entries, sized per batch to at least twice the
	 * regions its jobs can name, entries of earlier batches free (not
	 * cleared: a new batch only counts up `batch`); allocated once for a
	 * full batch (max_batch_jobs · PROTO_T_COUNT regions) */
	record_region *tab;
	uint32_t mask, used, tab_len;
	uint64_t batch; /* the batch being recorded, counted from 1 */
	/* the order jobs are recorded in (interleave_owners): per lane (a
	 * connection), how many of its jobs came before, over an open
	 * addressing table like tab's; then a counting sort by that rank */
	record_lane *lanes;
	uint32_t lane_mask;
	uint32_t *rank, *order, *start; /* max_batch_jobs (+ 1 for start) */
	uint32_t max_jobs;
	record_counts counts; /* the batch being recorded */
	/* a slice (record_target.slice_len): the dispatch pieces whose first
	 * multiply-add, counted over the batch in recording order, falls in
	 * [slice_from, slice_from + slice_len) are recorded, the others
	 * skipped; slice_pos counts as the recording goes */
	uint64_t slice_from, slice_len, slice_pos;
	/* what the command buffer has bound now (forgotten at each recording's
	 * start), so a bind or push that changes nothing is not recorded: the
	 * compute pipeline, and set 0's push descriptors with the layout they
	 * were pushed with (a push with another layout replaces them) */
	VkPipeline bound_pipe;
	VkPipelineLayout set_layout;
	uint32_t set_n;
	VkDescriptorBufferInfo set_info[VKG_BINDINGS_MAX];
};

typedef struct binding {
	VkDescriptorBufferInfo info;
	uint32_t elem_off;
} binding;

/* What one job's recording needs to know. */
typedef struct rec {
	recorder *rc;
	const record_target *tg;
	VkCommandBuffer cb;
	job *j;
	uint64_t piece; /* the job's position among all slots' jobs (dummy pieces) */
	/* workgroup rows [gy0, gy1) of the grid alone (gy1 0: all); set for a
	 * row block of dW's GEMM (record_job_param_part) */
	uint64_t gy0, gy1;
	/* VKG_FLAG_SUMS_IN / _OUT for dW's GEMM: a batch chunk of a reduction
	 * resumed in the job's running sums (record_job_param_part) */
	uint32_t sums;
	/* linear_input_backward reads W transposed (VKG_FLAG_B_TRANS): a
	 * linear_forward's generic kernel (dispatch_forward) */
	bool b_trans;
} rec;

/* Tensor slots each kernel binds. */
#define UNIT_PARAM ((1u << PROTO_T_X) | (1u << PROTO_T_DY) | (1u << PROTO_T_DW) | (1u << PROTO_T_DB))
#define UNIT_INPUT ((1u << PROTO_T_DY) | (1u << PROTO_T_W) | (1u << PROTO_T_DX))
/* both in one pass: a plan with dX beside dW (variant_dx_fused) */
#define UNIT_BOTH (UNIT_PARAM | UNIT_INPUT)

/* dispatch.c (record.c's parts it needs: recorder.ops) */

/* The kernel one unit (UNIT_PARAM: dW/db, UNIT_INPUT: dX; UNIT_BOTH: the
 * two in one pass, where the plan has dX beside dW) of the job starts
 * with: its plan's split-K or GEMM kernel, else the plain
 * linear_parameter_backward / linear_input_backward. A plan with dX
 * beside dW (KERN_CMKS_DX) recorded one unit at a time (a streamed job's
 * dW pass and dX chunks) runs them unfused: KERN_CMK_SPLITK and
 * KERN_CMK_DX. */
int dispatch_unit_kernel(const job *j, unsigned mask);

/* The kernels of one unit (dW/db, or dX) of the job. Barriers only inside
 * them (recorder.ops.barrier_inside); the caller orders the rest. */
void dispatch_unit(const rec *r, unsigned mask);

/* A linear_forward job's kernels (proto_forward_as_input: the dX GEMM of
 * a backward with in and out swapped, dY' = X, W' = Wᵀ, dX' = Y): W
 * transposed into its scratch (j->wt; else the generic kernel reads W
 * transposed) and the bias written into Y's rows, a barrier, then the GEMM
 * by j->plan, accumulating onto the bias; with an activation (or z) a
 * barrier and activation_forward. The caller orders the rest. */
void dispatch_forward(const rec *r);

/* A linear_backward job's units, dW/db (param) and dX (input); with an
 * activation first dZ (activation_backward) and a barrier, the units then
 * reading dZ as dY. The caller orders the rest. */
void dispatch_backward_units(const rec *r, bool param, bool input);

/* grid.c (below dispatch.c, activation.c and optim_step.c) */

/* Nothing bound: a command buffer's start. */
void grid_forget_bound(recorder *rc);
/* Tensor t's binding: the client's buffer from its offset aligned down (the
 * remainder in elem_off), or scratch for a device-local job or a slot with
 * reg NULL; a dummy piece (0..2); split-K's or narrow's partials; the
 * running sums of a streamed dW. */
binding grid_bind_tensor(const rec *r, int t);
binding grid_bind_dummy(const rec *r, uint64_t which);
binding grid_bind_partials(const rec *r, bool for_dx);
binding grid_bind_sums(const rec *r);
/* Pipeline k bound, and its n bindings pushed, each only when it changes. */
void grid_bind_pipe(const rec *r, int k);
void grid_push_set(const rec *r, int k, const binding *b, uint32_t n);
void grid_kernel(const rec *r, int k, const binding *b, uint32_t n);
/* A gx × gy grid of kernel k, cut into pieces of at most the recorder's
 * dispatch_max_macs (wg_macs a workgroup), each piece's first workgroup ×
 * scale into *xbase / *ybase of the push constants pc; grid_row: one row. */
void grid_split(const rec *r, int k, const void *pc, uint32_t pc_bytes, uint32_t *ybase,
		uint32_t yscale, uint32_t *xbase, uint32_t xscale, uint64_t gx, uint64_t gy,
		uint64_t wg_macs);
void grid_row(const rec *r, int k, const void *pc, uint32_t pc_bytes, uint32_t *xbase,
	      uint32_t xscale, uint64_t gx, uint64_t wg_macs);

/* activation.c */

/* linear_forward's y = act(z) over Y (after the GEMM and a barrier), in
 * place, z copied into the z slot first when asked for. */
void activation_forward(const rec *r);
/* linear_backward's dZ = dY ⊙ act'(y or z) into j->dz_off in scratch. */
void activation_backward(const rec *r);
/* j's view for the kernels after activation_backward: dY's slot is dZ in
 * scratch (reg NULL, soff dz_off), y and z gone. */
void activation_view(const job *j, job *view);

/* optim_step.c */

/* An optimizer step's job (job_is_optim): optim_step over its parameter. */
void dispatch_optim(const rec *r);

#endif
