/* daemon/variant.h — which kernel computes which part of a job.
 *
 * Selection table (AUTO), by shape; a request's `variant` key forces one
 * family for every part of the job:
 *
 *   part        kernel                     when
 *   dW          linear_coopmat_gemm        f16 on a device with cooperative
 *               (+ db by the row-parallel  matrices, out >= 64, in >= 64,
 *               kernel's bias-only pass)   batch >= 256
 *   dW (+ db)   linear_splitk_gemm +       out*in fills fewer than 128 tiles of
 *               linear_splitk_reduce       64x64 and batch >= 4096 (tall-skinny):
 *                                          the batch cut into S slices (below)
 *               linear_tiled_gemm          out >= 32, in >= 64, batch*in >= 2^20
 *               linear_parameter_backward  otherwise (narrow layers: the seed's
 *                                          row-parallel kernel)
 *   db only     linear_parameter_backward  always (one pass over dY)
 *   dX          linear_coopmat_gemm        f16 with cooperative matrices,
 *                                          batch, in, out >= 64
 *               linear_tiled_gemm          batch >= 64, in >= 64, out >= 16,
 *                                          batch*in >= 2^20
 *               linear_input_backward      otherwise
 *
 * Tiled means linear_tiled128_gemm (128x128 tiles) where the output has
 * both sides >= 128 and at least 132 such tiles (forced `tiled`: both
 * sides >= 128 is enough), else linear_tiled_gemm (64x64).
 *
 * Split-K slices: S = min(64, ceil(256 / tiles), batch / 1024) when chosen
 * automatically, S = min(64, max(1, batch / 16)) when forced; each slice
 * covers ceil(batch / S) rows. S depends on the shape only, and the second
 * pass adds the slices in order, so a job gives the same bits every run.
 * Split-K needs S*(out*in + out) f32 of the daemon's scratch; a job whose
 * partials do not fit the scratch cap runs tiled instead (record.c).
 *
 * Measured on the H200 (GPU µs of a full backward, f32, `vkgrad run
 * --variant`): 256x256x16 generic 30 / tiled 79; 4096x1024x16 generic 854 /
 * tiled 1302 / generic dW + tiled dX 681; 8192x4096x32 generic 13138 / tiled
 * 6010; 2048x1024x1024 generic 11471 / tiled 1703. Small problems favour the
 * simple kernels (the 64x64 tile wastes threads), large ones the tiled. */
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
