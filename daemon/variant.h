/* daemon/variant.h — which kernel computes which part of a job.
 *
 * Selection table (AUTO), by shape; a request's `variant` key forces one
 * family for every part of the job:
 *
 *   part   kernel                      when
 *   dW     linear_coopmat_gemm         f16 on a device with cooperative matrices,
 *          (db: the seed's bias pass)  out, in >= 64, batch >= 256
 *   dW+db  linear_tiled_gemm (fused    out > 32, in >= 64, batch*in >= 2^20
 *          db)
 *          linear_parameter_backward   otherwise (narrow layers: the seed's
 *                                      row-parallel kernel)
 *          linear_splitk_gemm +        instead of either, when it would launch
 *          linear_splitk_reduce        fewer than 256 workgroups and batch >= 4096
 *                                      (tall-skinny): S slices, below
 *   db     linear_parameter_backward   always, when dW is not asked for
 *   dX     linear_coopmat_gemm         f16 with cooperative matrices, batch, in,
 *                                      out >= 64
 *          linear_tiled_gemm           batch, in, out >= 64, batch*in >= 2^20
 *          linear_input_backward       otherwise
 *
 * (A 128x128-tile form with 8x8 outputs per thread was tried and measured
 * 5-10x slower than the 64x64 one on the H200 — 235 ms vs 24.7 ms for
 * 8192x4096x4096 — so there is none.)
 *
 * Split-K slices: S = min(64, ceil(1024 / tiles), batch / 256) (tiles: of
 * 64x64 in the dW output) when chosen automatically, S = min(64, max(1,
 * batch / 16)) when forced; each slice covers ceil(batch / S) rows. S
 * depends on the shape only, and the second pass adds the slices in order,
 * so a job gives the same bits every run. Split-K needs S*(out*in + out) f32
 * of the daemon's scratch within one storage-buffer binding; a job whose
 * partials do not fit gets fewer slices, or runs tiled (engine.c).
 *
 * Measured on the H200 (kernel µs of a full backward, f32, tensors in
 * device memory, `vkgrad bench --kernels`, 2026-12-02): 4096x1024x16
 * generic 58 / split-K(64) 116 / tiled 398; 8192x4096x32
 * generic 932 / split-K(64) 1207 / tiled 1352; 2048x1024x1024 generic 1803
 * / tiled 380; 8192x4096x4096 tiled 21939; f16 coopmat 2048x1024x1024 349,
 * 8192x4096x4096 20857 (plain tiled 24878), 8192x4096x32 1335 vs generic
 * 1006. Narrow layers are the seed kernels' (many small workgroups, no
 * 64-row tile mostly empty), wide ones the tiled or tensor-core GEMMs. */
#ifndef VKG_DAEMON_VARIANT_H
#define VKG_DAEMON_VARIANT_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

typedef struct variant_plan {
	int param;       /* KERN_* computing dW and/or db, or -1 */
	int input;       /* KERN_* computing dX, or -1 */
	uint32_t slices; /* split-K slices when param is KERN_SPLITK, else 1 */
} variant_plan;

/* coopmat: the device runs linear_coopmat_gemm for q's dtype. */
variant_plan variant_choose(const proto_request *q, bool coopmat);

/* f32 scratch elements split-K needs for q's dW/db with `slices` slices. */
uint64_t variant_splitk_elems(const proto_request *q, uint32_t slices);

#endif
