/* daemon/kernels/record.h — the batch recorder: one batch of placed jobs into its
 * submission slot's command buffer. It owns what recording a batch needs
 * beyond the jobs themselves: the bindings (tensors, scratch, dummy
 * pieces), the barriers and the conflict tracking that places them (which
 * byte ranges of which region the batch touched since its last barrier,
 * kept per region in a table sized for a full batch and reused batch after
 * batch), dispatches cut to bounded pieces, the timestamps. It counts what
 * it recorded; the engine adds the counts up. The batch and its hazards
 * are record.c's, the dispatches dispatch.c's. Loop thread only. */
#ifndef VKG_DAEMON_RECORD_H
#define VKG_DAEMON_RECORD_H

#include <stdint.h>

#include "device.h"
#include "engine_job.h"
#include "pipelines.h"

typedef struct recorder recorder;

/* Where one batch is recorded: its submission slot's objects and jobs. */
typedef struct record_target {
	VkCommandPool pool;      /* reset, then cb recorded */
	VkCommandBuffer cb;
	VkQueryPool queries;     /* the batch's two timestamps, two per GEMM job (assign_queries) */
	VkBuffer ts_buf;         /* the timestamps copied there (device->timestamps) */
	VkBuffer scratch;        /* devlocal copies and split-K partials (placement.h) */
	VkBuffer dummy;          /* bound for outputs a job does not ask for */
	VkDeviceSize dummy_piece; /* bytes of one piece of it */
	uint64_t first_piece;    /* the slot's first job position (3 dummy pieces each) */
	job *const *jobs;        /* placed; record_batch sets each GEMM job's ts_index, ts_direct */
	uint32_t njobs;
	/* 0: the whole batch. Else one slice of it: only the dispatch pieces
	 * whose first multiply-add (counted over the batch's dispatches in
	 * recording order) lies in [slice_from, slice_from + slice_len), the
	 * pieces cut no longer than slice_len. The same batch recorded again
	 * with the next slice_from (record_counts.slice_next) continues it:
	 * its pieces and their order do not depend on slice_from. Only for
	 * batches without device-local jobs (their copies are not sliced). */
	uint64_t slice_from, slice_len;
} record_target;

/* What one batch recorded. */
typedef struct record_counts {
	uint64_t dispatches;     /* vkCmdDispatch calls */
	uint64_t copy_bytes;     /* device-local copies in and out */
	uint32_t nqueries;       /* timestamp queries used */
	bool slice_more;         /* a slice: pieces are left after it ... */
	uint64_t slice_next;     /* ... the first starting here (the next slice_from) */
} record_counts;

/* A recorder for batches of at most max_batch_jobs jobs on d with pl,
 * dispatches cut at dispatch_max_macs multiply-adds. NULL when out of
 * memory. */
recorder *record_new(const device *d, const pipelines *pl, uint64_t dispatch_max_macs,
		     uint32_t max_batch_jobs);
/* NULL is fine. */
void record_free(recorder *rc);
/* Device-local copies (record_batch's) in vkCmdCopyBuffer pieces of at
 * most `bytes` each (0: a tensor in one). */
void record_set_copy_piece(recorder *rc, uint64_t bytes);

/* Record t's jobs (already placed) into t->cb: timestamps around them, a
 * barrier after earlier batches when this one touches a region they still
 * use, each job's work with barriers only where ranges conflict, the
 * host-visibility barrier at the end. Fills *counts. VK_SUCCESS, or what
 * vkBeginCommandBuffer / vkEndCommandBuffer returned (the command buffer
 * is then not to be submitted). */
VkResult record_batch(recorder *rc, const record_target *t, record_counts *counts);

/* Everything before in cb (shader and transfer writes) visible to
 * everything after: a full compute/transfer memory barrier. */
void record_barrier_all(VkCommandBuffer cb);

/* The kernels of job j, the only job of t's batch, whose tensors are on the
 * device-local path (j->soff in t->scratch, any element offset), into cb
 * (not t->cb): dW/db when `param`, dX when `input`, by j->plan as it stands
 * (stream.c records a job's row chunks with the whole job's plan, so each
 * output element is computed exactly as unchunked). Barriers only inside
 * the kernels (split-K, cut reductions); the caller orders the rest. Adds
 * the dispatches to counts->dispatches. */
void record_job_kernels(recorder *rc, const record_target *tg, VkCommandBuffer cb, job *j,
			bool param, bool input, record_counts *counts);

/* Rows of dW one workgroup row of job j's dW/db kernel covers, where that
 * kernel is a GEMM that can be recorded in row blocks
 * (record_job_param_part): linear_tiled_gemm, tiled128, coopmat,
 * coopmat_khr, coopmat_nv2. 0 for split-K and the narrow kernel. */
uint64_t record_param_block_rows(const recorder *rc, const job *j);

/* Rows a batch chunk of job j's dW/db must be a multiple of (all but the
 * last) for record_job_param_part's sums, or 0 where its dW kernel cannot resume
 * a reduction: dW asked for, on linear_tiled_gemm (1) or
 * linear_coopmat_nv2_gemm (its BK times its UNROLL), the batch within one
 * dispatch's loop bound. */
uint64_t record_param_resume_granule(const recorder *rc, const job *j);

/* dW's (and fused db's) kernels of job j into cb, as record_job_kernels
 * with `param`, and:
 *  - rows > 0: for dW's rows [row0, row0 + rows) alone (row0 a multiple of
 *    record_param_block_rows, the block rounded up to whole workgroup
 *    rows). Each element is computed as by the whole dispatch (a
 *    workgroup's tile does not depend on which dispatch carries it), so
 *    the blocks together give the unblocked bits.
 *  - sums: j is one batch chunk of a job (batch = the chunk's rows, dY's
 *    and X's offsets at its first row, sums_off the job's running sums,
 *    f32 (out·in + out) in scratch); with VKG_FLAG_SUMS_IN the sums start
 *    from what the chunk before left, with VKG_FLAG_SUMS_OUT they are left
 *    for the next chunk instead of written to dW and db. Chunks in order on
 *    granule multiples (record_param_resume_granule) give the unchunked
 *    bits (shaders/iface/kernels.h). */
void record_job_param_part(recorder *rc, const record_target *tg, VkCommandBuffer cb, job *j,
			   uint32_t sums, uint64_t row0, uint64_t rows, record_counts *counts);

#endif
