/* daemon/sched/stream.h — streamed jobs: a large device-local job's copies
 * overlapped with its kernels.
 *
 * A job on the device-local path (engine.h job.devlocal) with at least
 * stream_min tensor bytes runs alone in its batch, cut along the batch into
 * n chunks of `rows` rows (about stream_chunk bytes of dY each), on three
 * roles, each a queue with its own timeline semaphore:
 *
 *   upload:   W (acc.: dW, db) | dY_0 (+dX_0) | ... | dY_n-1 (+dX_n-1) | X
 *   compute:  head | dX_0 = dY_0·W | ... | dX_n-1 | dW block 0 | ... | block m-1 (+db) | tail
 *   download:        dX_0         | ... | dX_n-1 | dW block 0 | ... | block m-1, db
 *
 * Chunks of equal rows. Each dX chunk runs as soon as its dY chunk is in
 * (after the kernel step before it: a barrier, see record_dx_chunk) and
 * goes back at once; X comes in while they run; dW/db wait for all of X
 * and dY: f32 in row blocks of a quarter of dW each (whole-batch
 * workgroups, a wave or more each, each going back while the next
 * computes); 16-bit, and where dW's kernel cannot be cut (split-K, the
 * narrow kernel), in one step, then all of it back (stream_dw_block_rows).
 * That measured the faster on the H200 (a second schedule, a small first
 * chunk and dW in blocks of half a chunk's bytes without barriers between
 * them, measured slower and was deleted: docs/performance.md). Upload and
 * download are the device's transfer-only queues (device.h xfer_up,
 * xfer_down) where it has them, else the compute queue (the same schedule,
 * nothing overlapped: what CI runs on lavapipe).
 *
 * Resumed dW (the default where it applies, stream_place; VKGRAD_STREAM_SUMS=0
 * turns it off): where dW's kernel can resume a reduction from f32 running
 * sums (linear_tiled_gemm, linear_coopmat_nv2_gemm: VKG_FLAG_SUMS_IN/OUT),
 * X comes in chunk by chunk with dY and dW/db are computed chunk by chunk:
 *
 *   upload:   W (acc.: dW, db) | dY_0, X_0 (+dX_0) | ... | dY_n-1, X_n-1 (+dX_n-1)
 *   compute:  head | dX_0, dW/db sums over chunk 0 | ... | dX_n-1, dW/db chunk n-1: written
 *   download:        dX_0                           | ... | dX_n-1, dW (row blocks), db
 *
 * Chunks of equal rows; each
 * kernel step after everything before it (a barrier: a dW step resumes the
 * sums the chunk before left; for a dX step see record_dx_chunk). The
 * last chunk's dW/db runs in row blocks of about a quarter of dW, each
 * downloaded while the next computes. What follows the last upload is one
 * chunk's kernels and part of dW's download, not all of dW's GEMM. The sums (f32, out·in + out, in the slot's scratch)
 * carry each accumulator from one chunk's dispatch to the next; the last chunk's epilogue is the unchunked one's. Chunks are whole
 * k steps of the kernel (coopmat_nv2: BK rows), so every output is the same
 * multiply-adds on the same f32 values in the same order: the same bits.
 *
 * Chunk boundaries fall on rows whose bytes start on 4 bytes in dY, X and
 * dX (16-bit rows of odd length: every second row), so no 32-bit word is
 * written by the steps of two chunks that run at once.
 *
 * Same bits as unstreamed: every chunk's dX kernels are the whole job's plan
 * (not re-chosen for the chunk's shape) over the same rows of the same
 * device copies, and a GEMM's output element depends only on its row of dY
 * and on W, summed over `out` in the same order whatever rows the dispatch
 * covers; dW/db are the unstreamed job's kernels over the whole batch, a
 * row block being those kernels' own workgroups for its rows
 * (record_job_param_part). Accumulating, outputs are copied in first and
 * the kernels add to them, as unstreamed.
 *
 * Timeline: where the device has timestamps (on the transfer family too,
 * else on the compute queue alone) and hostQueryReset, every step writes
 * two timestamps (top of pipe: its queue reached it, its wait over; bottom
 * of pipe: its commands done) into the slot's query pool, reset on the host
 * when the batch is recorded (VKGRAD_STREAM_TIMESTAMPS=0: none); stream_timeline() turns them into the reply's
 * stream_us (proto/README.md) and, at debug level, one log line per step.
 *
 * Ordering with everything else: the head (compute queue, after earlier
 * batches by a barrier) comes first; the uploads wait for it when an
 * earlier batch still running touches one of the job's regions, and start
 * at once otherwise (its scratch is its slot's, idle since the slot's last
 * batch finished); the tail
 * waits for the last download and signals the engine's timeline value, so
 * that timeline is only ever signalled by the compute queue, in submission
 * order. Submissions go queue by queue in an order where each waits only on
 * values already submitted, so a failure part way leaves nothing waiting on
 * what was never submitted. */
#ifndef VKG_DAEMON_STREAM_H
#define VKG_DAEMON_STREAM_H

#include <stdbool.h>

#include "engine.h"
#include "record.h"

/* chunks of one job at most (larger chunks than asked beyond that) */
#define STREAM_MAX_CHUNKS 1024u
/* row blocks of dW at most: quarters (stream_last_block_rows) */
#define STREAM_MAX_DW_BLOCKS 4u
/* steps of one job at most: the head; W, the chunks and X up; a kernel
 * step per chunk and per dW block; a download per chunk and per block;
 * with resumed dW (stream_place) a dW step per chunk instead of the blocks */
#define STREAM_MAX_STEPS (4u * (STREAM_MAX_CHUNKS + 1u) + 2u * STREAM_MAX_DW_BLOCKS + 3u)
/* the slot's queries the steps' timestamps start at (after the batch's
 * two and the job's two) */
#define STREAM_TS_FIRST 4u

/* Resolve e->stream_chunk and e->stream_min from the config and the device
 * (auto: on where the device has a transfer-only queue) and log them. */
void stream_init(engine *e);
/* The Vulkan objects of streaming on e->dev (semaphores, each slot's
 * command pools), from the engine's gpu_create: 0, or -1 (stream_release
 * cleans up). Nothing is made while streaming is off. */
int stream_create(engine *e);
void stream_release(engine *e);
/* Timestamp queries a slot's pool needs for a streamed batch with every
 * step timed: STREAM_TS_FIRST + two per step; 0 where streaming is off or
 * the steps cannot be timed (no timestamps, no hostQueryReset). */
uint32_t stream_queries(const engine *e);
/* Rows of j's batch per chunk: about a chunk of dY (--stream-chunk-bytes;
 * auto: CONFIG_STREAM_AUTO_CHUNK_ELEMS elements, so the same rows for every
 * dtype, f16/bf16 at least CONFIG_STREAM_AUTO_MIN_ROWS_16BIT rows and an
 * eighth of the batch: config.h), at most STREAM_MAX_CHUNKS chunks, whole rows on 4 bytes in
 * every tensor. */
uint64_t stream_chunk_rows(const engine *e, const job *j);
/* Does j, placed on the device-local path, stream? (placement.c) */
bool stream_wants(const engine *e, const job *j);
/* For j, placed (taking scratch up to `used`) and streamed: room for its
 * dW's running sums, so that dW and db are computed chunk by chunk as X
 * and dY come in (j->sums, the schedule above), where its dW kernel can
 * resume (record_param_resume_granule), the job has more than one chunk
 * and the sums fit the slot's scratch and one binding. Returns the scratch
 * bytes that takes (0: none, j->sums false). VKGRAD_STREAM_SUMS=0: never. */
uint64_t stream_place(engine *e, job *j, uint64_t used);
/* Record slot si's batch, one streamed job (tg: the slot's objects, as
 * record_batch takes them), into the slot's stream command buffers and
 * tg->cb (the tail); fills *counts as record_batch does. VK_SUCCESS, or
 * what vkBeginCommandBuffer / vkEndCommandBuffer / allocation returned. */
VkResult stream_record(engine *e, uint32_t si, const record_target *tg, record_counts *counts);
/* Submit what stream_record recorded, the tail signalling s->value on the
 * engine's timeline. VK_SUCCESS or the first failing vkQueueSubmit's result
 * (what was submitted before it runs to its end). */
VkResult stream_submit(engine *e, uint32_t si);

/* Streamed job j of slot si, its batch done: its timeline from the steps'
 * timestamps (the reply's stream_us, j->stream_tl), each step on the log
 * at debug level. Nothing where the steps were not timed. */
void stream_timeline(engine *e, uint32_t si, job *j);

#endif
