/* daemon/sched/stream_priv.h — what stream.c (recording, submission),
 * stream_chunk.c (how a job is cut) and stream_timeline.c (the job's GPU
 * timeline from its steps' timestamps) share: the roles, a slot's steps and
 * their timestamp marks, the stream itself, a job's chunks and dW blocks.
 * Not for other modules: stream.h is the interface. */
#ifndef VKG_DAEMON_STREAM_PRIV_H
#define VKG_DAEMON_STREAM_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "engine_priv.h"

enum { ROLE_UP, ROLE_COMP, ROLE_DOWN, ROLES };

/* One submission of a role: its command buffer, the value of another
 * role's semaphore it waits for (wait_role < 0: none) and the value it
 * signals on its own role's semaphore. */
typedef struct stream_step {
	VkCommandBuffer cb;
	int wait_role;
	uint64_t wait, signal;
} stream_step;

/* A slot's command buffers and steps of one role. */
typedef struct stream_cmds {
	VkCommandPool pool;
	VkCommandBuffer *cb; /* allocated from pool; reused batch after batch */
	uint32_t ncb;
	stream_step *step;   /* recorded for the slot's batch; step[i].cb = cb[i] */
	uint32_t nstep, cap;
} stream_cmds;

/* What a step does, for its two timestamps (the job's timeline). */
enum { MARK_HEAD, MARK_UP_W, MARK_UP_CHUNK, MARK_UP_X, MARK_DX, MARK_DW, MARK_DW_CHUNK, MARK_DOWN_DX,
       MARK_DOWN_DW };

/* One timed step: its role, what it does (MARK_*), which chunk or block,
 * and its timestamps' queries (q: begin, q + 1: end) in the slot's pool. */
typedef struct stream_mark {
	uint8_t role, what;
	uint32_t index;
	uint32_t q;
} stream_mark;

/* A slot's timed steps, recorded with its batch. */
typedef struct stream_marks {
	stream_mark *m;
	uint32_t n, cap;
} stream_marks;

struct stream {
	VkSemaphore sem[ROLES];
	uint64_t value[ROLES]; /* last value given out per role */
	VkQueue queue[ROLES];
	stream_cmds *cmds;     /* [slot * ROLES + role] */
	stream_marks *marks;   /* [slot] */
	uint32_t nslots;
	bool no_sums;          /* VKGRAD_STREAM_SUMS=0: dW never chunked (stream_place) */
	bool timed;            /* each step timed (stream_queries) */
	/* one vkQueueSubmit's batches, reused */
	VkSubmitInfo *si;
	VkTimelineSemaphoreSubmitInfo *tsi;
	uint32_t nsi;
};

/* How a streamed job is cut (stream_chunk.c). Rows per chunk of j:
 * stream_chunk_rows, or the whole batch when dX is not asked for (nothing
 * to overlap); of j whose dW resumes (j->sums): stream_chunk_rows rounded up
 * to its dW kernel's granule. */
uint64_t stream_job_rows(const engine *e, const job *j);
uint64_t stream_sums_rows(const engine *e, const job *j);
/* Rows of dW per row block: of the last resumed chunk's dW/db step (and of
 * an unresumed job's f32 dW), about a quarter of dW in whole workgroup
 * rows (so at most STREAM_MAX_DW_BLOCKS blocks); of an unresumed job,
 * those quarters for f32, all of dW for 16-bit or where dW cannot be cut. */
uint64_t stream_last_block_rows(const engine *e, const job *j);
uint64_t stream_dw_block_rows(const engine *e, const job *j);
/* *c: j as its rows [r0, r0+rows) (es: element size), for dX (dY's and
 * dX's rows alone) or for dW/db (dY's and X's rows, the running sums the
 * whole job's). */
void stream_chunk_job(const job *j, job *c, uint64_t es, uint64_t r0, uint64_t rows);
void stream_chunk_param_job(const job *j, job *c, uint64_t es, uint64_t r0, uint64_t rows);

#endif
