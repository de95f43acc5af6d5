/* daemon/sched/stream_chunk.c — how a streamed job is cut (stream.h): the
 * settings resolved, whether a job streams, its rows per chunk, the room
 * for its resumed dW's sums, its row blocks of dW, and the job as one
 * chunk's rows, for the recording in stream.c. */
#include "stream.h"
#include "stream_priv.h"

#include "clock.h"
#include "sched/internal.h"
#include "log.h"
#include "record.h"

void stream_init(engine *e)
{
	const config *cfg = e->cfg;
	const device *d = e->dev;
	e->stream_chunk = cfg->stream_chunk_bytes;
	e->stream_chunk_auto = e->stream_chunk == CONFIG_AUTO && d->xfer_queues;
	if (e->stream_chunk == CONFIG_AUTO)
		e->stream_chunk = d->xfer_queues ? CONFIG_STREAM_AUTO_CHUNK : CONFIG_OFF;
	e->stream_min = cfg->stream_min_bytes == CONFIG_AUTO ? CONFIG_STREAM_AUTO_MIN : cfg->stream_min_bytes;
	/* auto: every large job on the device-local path (placement.h), where
	 * a transfer-only queue takes its copies off the compute queue;
	 * without one a streamed job's copies stay there (no gain) */
	if (cfg->stream_shared_min_bytes != CONFIG_AUTO)
		e->stream_shared_min = cfg->stream_shared_min_bytes;
	else
		e->stream_shared_min = d->xfer_queues ? 1 : CONFIG_OFF;
	if (e->stream_chunk != CONFIG_OFF && e->stream_shared_min != CONFIG_OFF)
		log_info("while another connection's small jobs are about (queued in the last %llu ms), "
			 "large device-local jobs of >= %llu tensor bytes stream too: their copies on the "
			 "transfer queues, not on the compute queue beside the small jobs",
			 (unsigned long long)(CONFIG_STREAM_SHARED_WINDOW_NS / 1000000),
			 (unsigned long long)e->stream_shared_min);
	if (e->stream_chunk == CONFIG_OFF)
		log_info("streamed jobs off%s", cfg->stream_chunk_bytes == CONFIG_AUTO
							  ? " (no transfer-only queue to overlap copies on)" : "");
	else
		log_info("streamed jobs: device-local jobs of >= %llu tensor bytes in chunks of ~%llu "
			 "bytes of dY%s, copies on %s",
			 (unsigned long long)e->stream_min, (unsigned long long)e->stream_chunk,
			 e->stream_chunk_auto ? " (f32; f16/bf16 half of it: the same rows, at least 1,024 and an eighth of the batch)" : "",
			 d->xfer_queues == 2 ? "two transfer queues (in and out at once)"
			 : d->xfer_queues ? "one transfer queue" : "the compute queue (no overlap)");
}

bool stream_wants(const engine *e, const job *j)
{
	/* (linear_forward, and a backward with an activation, run unstreamed:
	 * their kernels are record.c's alone) */
	if (!e->stream || !j->devlocal || j->req.op == PROTO_OP_LINEAR_FORWARD ||
	    j->req.activation != PROTO_ACT_NONE || e->stream_chunk == CONFIG_OFF)
		return false;
	const uint64_t b = job_bytes(j);
	/* a large job's copies on the compute queue hold up the small
	 * queue's batches for as long as each copy runs (docs/performance.md,
	 * "Mixed tenants"): on the transfer queues while others' small jobs
	 * are about, whole on the compute queue (faster) while not */
	return b >= e->stream_min ||
	       (j->cls == ENGINE_LARGE && e->stream_shared_min != CONFIG_OFF && b >= e->stream_shared_min &&
		sched_others_small(e, j->lane, clock_now_ns()));
}

/* The rows every chunk boundary falls on a multiple of: a chunk's rows of
 * dY, X and dX then start on 4 bytes, so no 32-bit word holds the rows of
 * two chunks. The steps of two chunks run at once (one chunk's upload or
 * download beside the other's kernels), and a
 * copy or a store that writes a word of another chunk's rows (16-bit
 * elements, an odd row length) could race with them: on the H200 two
 * accumulating f16 jobs of 45x19x12 in 1-row chunks once gave other bits
 * than unstreamed (test_stream). */
static uint64_t row_align(const job *j)
{
	const proto_request *q = &j->req;
	const uint64_t es = proto_dtype_size(q->dtype);
	uint64_t r = 1;
	while ((r * q->in * es) % 4 || (r * q->out * es) % 4)
		r++; /* (at most 4) */
	return r;
}

/* rows rounded up to a multiple of m (m >= 1) */
static uint64_t round_up(uint64_t rows, uint64_t m)
{
	return (rows + m - 1) / m * m;
}

/* Bytes of dY per chunk of j: --stream-chunk-bytes, or under auto
 * CONFIG_STREAM_AUTO_CHUNK_ELEMS elements (16 MiB of f32, 8 MiB of 16-bit). */
static uint64_t chunk_bytes(const engine *e, const job *j)
{
	return e->stream_chunk_auto ? CONFIG_STREAM_AUTO_CHUNK_ELEMS * proto_dtype_size(j->req.dtype)
				    : e->stream_chunk;
}

uint64_t stream_chunk_rows(const engine *e, const job *j)
{
	const proto_request *q = &j->req;
	uint64_t rows = chunk_bytes(e, j) / (q->out * proto_dtype_size(q->dtype));
	if (e->stream_chunk_auto && proto_dtype_size(q->dtype) < 4) {
		const uint64_t eighth = (q->batch + CONFIG_STREAM_AUTO_CHUNKS_16BIT - 1) /
					CONFIG_STREAM_AUTO_CHUNKS_16BIT;
		if (rows < CONFIG_STREAM_AUTO_MIN_ROWS_16BIT)
			rows = CONFIG_STREAM_AUTO_MIN_ROWS_16BIT;
		if (rows < eighth)
			rows = eighth;
	}
	const uint64_t least = (q->batch + STREAM_MAX_CHUNKS - 1) / STREAM_MAX_CHUNKS;
	if (rows < least)
		rows = least;
	return round_up(rows ? rows : 1, row_align(j));
}

/* Rows a resumed chunk of j is a multiple of: its dW kernel's granule
 * (record_param_resume_granule) and row_align, or 0 where dW cannot resume. */
static uint64_t sums_granule(const engine *e, const job *j)
{
	/* (either track's recorder: these read its settings alone) */
	const uint64_t g = record_param_resume_granule(e->track[ENGINE_LARGE].rec, j), al = row_align(j);
	return g % al ? g * al : g; /* (al is 1, 2 or 4) */
}

/* Rows per chunk of a job whose dW resumes (j->sums): stream_chunk_rows'
 * rows rounded up to its granule g (sums_granule); the whole batch where
 * that is one chunk. */
static uint64_t sums_rows(const engine *e, const job *j, uint64_t g)
{
	const uint64_t rows = round_up(stream_chunk_rows(e, j), g);
	return rows < j->req.batch ? rows : j->req.batch;
}

uint64_t stream_sums_rows(const engine *e, const job *j)
{
	return sums_rows(e, j, sums_granule(e, j));
}

uint64_t stream_place(engine *e, job *j, uint64_t used)
{
	const proto_request *q = &j->req;
	j->sums = false;
	if (!j->streamed || e->stream->no_sums)
		return 0;
	const uint64_t g = sums_granule(e, j);
	const uint64_t bytes = (q->out * q->in + q->out) * 4;
	if (g == 0 || sums_rows(e, j, g) >= q->batch || bytes > e->dev->props.limits.maxStorageBufferRange ||
	    used + scratch_round(bytes) > e->place.scratch_cap)
		return 0;
	j->sums = true;
	j->sums_off = used;
	return scratch_round(bytes);
}

/* The job as its rows [r0, r0+rows) for dX: dY's and dX's rows alone. */
void stream_chunk_job(const job *j, job *c, uint64_t es, uint64_t r0, uint64_t rows)
{
	*c = *j;
	c->req.batch = rows;
	c->req.t[PROTO_T_DW].present = c->req.t[PROTO_T_DB].present = false;
	c->soff[PROTO_T_DY] += r0 * j->req.out * es;
	c->bytes[PROTO_T_DY] = rows * j->req.out * es;
	c->soff[PROTO_T_DX] += r0 * j->req.in * es;
	c->bytes[PROTO_T_DX] = rows * j->req.in * es;
}

/* The job's rows [r0, r0+rows) for dW/db: dY's and X's rows alone, its
 * running sums the whole job's. */
void stream_chunk_param_job(const job *j, job *c, uint64_t es, uint64_t r0, uint64_t rows)
{
	*c = *j;
	c->req.batch = rows;
	c->req.t[PROTO_T_DX].present = false;
	c->soff[PROTO_T_DY] += r0 * j->req.out * es;
	c->bytes[PROTO_T_DY] = rows * j->req.out * es;
	c->soff[PROTO_T_X] += r0 * j->req.in * es;
	c->bytes[PROTO_T_X] = rows * j->req.in * es;
}

/* Rows per chunk: stream_chunk_rows; the whole batch when dX is not asked for
 * (nothing to overlap). */
uint64_t stream_job_rows(const engine *e, const job *j)
{
	return j->req.t[PROTO_T_DX].present ? stream_chunk_rows(e, j) : j->req.batch;
}

/* Rows of dW per block of the last resumed chunk's dW/db step, and of an
 * unresumed job's f32 dW (each block downloaded while the next computes):
 * about a quarter of dW, whole workgroup rows of its kernel. With one workgroup per SM a quarter of 8192x4096x4096's dW
 * (1,024 rows of 128x256 tiles: 128 workgroups) is one wave of the H200's
 * 132 SMs, as a quarter of the unblocked step's four. */
uint64_t stream_last_block_rows(const engine *e, const job *j)
{
	const uint64_t out = j->req.out, tm = record_param_block_rows(e->track[ENGINE_LARGE].rec, j);
	const uint64_t rows = round_up((out + 3) / 4, tm);
	return rows < out ? rows : out;
}

/* Rows of dW per row block of an unresumed job: f32, a quarter of dW
 * (stream_last_block_rows: each block a wave or more of whole-batch workgroups,
 * three of the four downloads beside kernels); 16-bit, all of it; all of
 * them (one block) where dW is not asked for or its kernel cannot be cut
 * (record_param_block_rows 0). Quarters for f32 alone: its 64 MiB of
 * 8192x4096x4096 went back in 1.3 ms after the last kernel; the quarters
 * gave 18,688 / 18,888 µs end to end against 19,331 / 19,234; bf16 on
 * coopmat_nv2, resumed dW off, took 6,892 in quarters against 6,563 in one
 * step (measurements/h200-2026-12-03-s5). */
uint64_t stream_dw_block_rows(const engine *e, const job *j)
{
	const proto_request *q = &j->req;
	if (!q->t[PROTO_T_DW].present || record_param_block_rows(e->track[ENGINE_LARGE].rec, j) == 0)
		return q->out;
	return proto_dtype_size(q->dtype) == 4 ? stream_last_block_rows(e, j) : q->out;
}
