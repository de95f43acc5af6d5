/* daemon/kernels/variant.h — which kernel computes which part of a job.
 *
 * Selection table (AUTO), by shape; a request's `variant` key forces one
 * family for every part of the job:
 *
 *   part   kernel                      when
 *   dW+db  linear_coopmat_khr_splitk_  where dW/db took coopmat_khr_splitk
 *   +dX    dx_gemm + linear_narrow_    (below) and dX is asked for too, with
 *          reduce (split-K, fused db   out <= 64, in >= 64 and the device
 *          and dX: one pass over dY)   has it (variant_cmks_dx_fits, below);
 *                                      on its 32x32 tiles where in, out <= 32
 *                                      and dX would go to the narrow family
 *                                      (refine.h: refine_cmks_tiling)
 *   dW+db  linear_coopmat_khr_splitk_  f16 or bf16 on a device with
 *          gemm + linear_narrow_reduce VK_KHR_cooperative_matrix for it, batch
 *          (split-K, fused db)         >= 16384, in, out <= 1024, at most
 *                                      16 tiles of 64x64; not where the
 *                                      job's dX goes to the narrow family
 *                                      (variant_cmks_fits, below); on
 *                                      128x128 tiles where in, out >= 128,
 *                                      on 32x32 ones where in, out <= 32
 *                                      (refine.h: refine_cmks_tiling)
 *          the narrow family           batch >= 16384, in, out <= 256
 *                                      (variant_narrow_fits, below)
 *          linear_coopmat_khr_gemm     f16 or bf16 on a device with
 *          (fused db)                  VK_KHR_cooperative_matrix for it,
 *                                      out, in >= 64, batch >= 256
 *          linear_coopmat_gemm (fused  f16 on a device with VK_NV_cooperative_matrix,
 *          db)                         out, in >= 64, batch >= 256
 *          linear_tiled_gemm (fused    out > 32, in >= 64, batch*in >= 2^20
 *          db)                         ("tiled" below)
 *          linear_parameter_backward   otherwise ("narrow": the seed's
 *                                      row-parallel kernel)
 *          linear_splitk_gemm +        batch >= 4096 and either narrow, or
 *          linear_splitk_reduce        tiled with fewer than 256 tiles of 64x64:
 *                                      S slices, below
 *   db     linear_parameter_backward   always, when dW is not asked for
 *   dX     linear_coopmat_khr_gemm     f16/bf16 with VK_KHR_cooperative_matrix:
 *                                      a narrow layer (or one whose dW is on
 *                                      coopmat_khr_splitk) of in >= 64
 *                                      (variant_cmk_dx_narrow, below), or
 *                                      batch, in, out >= 64
 *          the narrow family           batch >= 65536, in, out <= 256
 *                                      (variant_narrow_dx_fits, below)
 *          linear_coopmat_gemm         f16 with VK_NV_cooperative_matrix, batch, in,
 *                                      out >= 64
 *          linear_tiled_gemm           batch, in >= 64, batch*in >= 2^20
 *          linear_input_backward       otherwise
 *
 * f32: linear_coopmat_khr_f32x3_gemm (the f32 pipelines of KERN_CMK_DW/DX,
 * large tiling only; each f32 operand as two bf16 pieces, three products)
 * runs only when forced (`coopmat_khr_f32x3`): auto may take it only where
 * its max_rel_err is measured <= 1e-5 on every tested shape, which it has
 * not been yet (its per-product bound is 3*2^-16). Its split-K build,
 * linear_coopmat_khr_f32x3_splitk_gemm (f32's KERN_CMK_SPLITK, variant
 * `coopmat_khr_f32_splitk`), is forced only too: slower than the narrow
 * family on the H200 (see the split-K section below).
 *
 * The passes below (refine_*) are in refine.h: placement.c runs them
 * after variant_choose, given what the device has.
 *
 * linear_coopmat_nv2_gemm (VK_NV_cooperative_matrix2): `auto` takes it,
 * where the device has it, for a GEMM of at least REFINE_NV2_MIN_TILES of
 * its tiles (refine_nv2_large()), then with its small layers' tiling for
 * one of at least REFINE_NV2_SMALL_MIN_TILES of those tiles
 * (refine_nv2_small()); smaller GEMMs keep coopmat_khr, and so does a
 * narrow layer's dX (variant_cmk_dx_narrow: on the H200, 2026-12-06
 * 03:56 UTC, bf16 1,048,576x64x64 full backward 734 us with dX on
 * coopmat_nv2 against 417 on coopmat_khr; 2,443 / 728 at 262,144x256x256,
 * 1,397 / 820 at 1,048,576x128x128). On the
 * H200 with its default tiling (nv2_tile.h), 8192x4096x4096 bf16 ran 2,014
 * µs against coopmat_khr's 2,611, 2048x1024x1024 68 against 61
 * (measurements/h200-2026-12-03/nv2-sweep). Between the two coopmat_khr
 * tilings refine_cmk_tiling() picks.
 *
 * Then, for a job placed on the device-local path or (on a GPU) on
 * device tensors only (placement.c), refine_widen(): a tiled GEMM (dW: m = out, n = in, k = batch; dX: m =
 * batch, n = in, k = out) with at least 512 tiles of 128x128 and k >= 1024
 * runs on linear_tiled128_gemm instead.
 *
 * And on a device that is not a CPU device, refine_splitk128(): a
 * mid-size f32 GEMM with fewer than 264 tiles of 128x128, k >= 1024 and
 * at least 2^26 multiply-adds runs split-K on the 128 tile
 * (linear_splitk128_gemm + linear_splitk_reduce); last, refine_short():
 * a short layer (at most 1,024 rows and 65,536 weights) runs on the seed
 * kernels.
 *
 * Split-K slices: narrow dW S = min(64, batch / 64); tiled dW S = min(64,
 * ceil(1024 / tiles), batch / 256); forced S = min(64, max(1, batch / 16));
 * each slice covers ceil(batch / S) rows. S depends on the shape only, and
 * the second pass adds the slices in order, so a job gives the same bits
 * every run. Split-K needs S*(out*in + out) f32 of the daemon's scratch
 * within one storage-buffer binding; a job whose partials do not fit gets
 * fewer slices, or runs tiled (placement.c).
 *
 * Loop bound: no kernel's loop runs more than KSHAPE_MAX_LOOP_TRIPS
 * iterations in one dispatch, on any device. llvmpipe (lavapipe) ends a
 * shader invocation's loops after 65,535 iterations in all (one counter
 * per invocation, shared by every loop in it) without an error, so a longer
 * reduction silently dropped terms (issue 13). dispatch.c cuts a reduction
 * longer than kshape_max_k() of its kernel into pieces, one dispatch (per
 * grid piece) each, the pieces after the first accumulating into what the
 * earlier ones wrote, after a barrier:
 *   - f32: the pieces accumulate in the f32 output itself, one f32 rounding
 *     per piece (at most 4 pieces for max_dim 2^20): well within 1e-4.
 *   - f16/bf16: accumulating in the 16-bit output would round the running
 *     sum once per piece, so such a job goes split-K instead (dW/db, and dX:
 *     the same GEMM kernel over out with A = dY, B = W), with
 *     ceil(K / kshape_max_k(split-K)) slices, whatever the forced family:
 *     f32 partials (long slices cut into pieces accumulating in f32 there)
 *     and the output rounded once. Only when scratch cannot hold those
 *     partials (placement.c: past the cap or one binding, or the
 *     allocation failed) does it run cut in place, rounded once per piece
 *     (at most 4 pieces at max_dim 2^20 for the 8-row kernels, 2 for the
 *     others), an error of up to that many half-ulps of the partial sums.
 *   Auto never widens a 16-bit tiled GEMM to the 128 tile (8 rows per
 *   iteration) where that would cut a reduction the 64 tile does in one.
 *
 * Measured on the H200 (kernel µs of a full backward, f32, tensors in
 * device memory, `vkgrad bench --kernels`, 2026-12-02, after the GEMM
 * epilogues stopped indexing their accumulators by a rolled loop counter):
 * 4096x1024x16 seed kernels 58 / split-K(64) + tiled dX 47; 8192x4096x32
 * seed 927 / split-K(64) + tiled dX 314 (with dX on the 128 tile, K = 32:
 * 414); 2048x1024x1024 tiled 383 / split-K 542 / seed 1795;
 * 8192x4096x4096 tiled 22165 / tiled128 20943 (17984 with its f32
 * reduction step of 16); f16 and bf16 plain
 * 8192x4096x4096 tiled ~24200 / tiled128 ~19400, 2048x1024x1024 tiled 415
 * / tiled128 468; f16 coopmat 8192x4096x4096 10098, 2048x1024x1024 124.
 * 2026-12-03 (measurements/h200-2026-12-03/): coopmat_khr 8192x4096x4096
 * f16 2484 / bf16 2492 against coopmat (f16) 5816; 2048x1024x1024 f16 84
 * against 105.5 with the large tiling, 61 with the small one (85 large). */
#ifndef VKG_DAEMON_VARIANT_H
#define VKG_DAEMON_VARIANT_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"
#include "kshape.h"
#include "msg.h"
#include "pipelines.h"
#include "plan.h" /* variant_plan, variant_dx_fused */

typedef struct costmodel costmodel;

/* Can this device run jobs of dtype d forced to variant v? (the dtype
 * served, and for coopmat, coopmat_khr, coopmat_nv2 and tiled128 their
 * pipelines built) */
bool variant_available(const pipelines *pl, proto_variant v, proto_dtype d);
/* The same question with its answer's reason, the one place that decides
 * it: false when it can; true when it cannot, with why (a sentence naming
 * the dtype or variant, what it needs and what device dev offers) written
 * into why[n]. why NULL: no sentence, and dev may be NULL. */
bool variant_refused(const pipelines *pl, const device *dev, proto_variant v, proto_dtype d,
		     char *why, size_t n);


/* What the device runs for q's dtype, as bits of `caps`:
 * VARIANT_HAS_COOPMAT linear_coopmat_gemm, VARIANT_HAS_CMK
 * linear_coopmat_khr_gemm. */
#define VARIANT_HAS_COOPMAT 1u
#define VARIANT_HAS_CMK 2u
#define VARIANT_HAS_NV2 4u /* linear_coopmat_nv2_gemm: only when forced */
/* linear_coopmat_khr_f32x3_gemm (f32's KERN_CMK_DW/DX): only when forced;
 * placement.c never gives f32 VARIANT_HAS_CMK, so auto keeps f32 off the
 * tensor cores */
#define VARIANT_HAS_F32X3 8u
/* the narrow family (linear_narrow_param + linear_narrow_reduce,
 * linear_narrow_input): auto takes it where variant_narrow_fits */
#define VARIANT_HAS_NARROW 16u
/* linear_coopmat_khr_splitk_gemm + linear_narrow_reduce (split-K of dW/db
 * on the tensor cores): auto takes it where variant_cmks_fits (f16/bf16).
 * For f32 this bit means linear_coopmat_khr_f32x3_splitk_gemm, which only
 * `coopmat_khr_f32_splitk` forces (variant_cmks_fits excludes f32). */
#define VARIANT_HAS_CMKS 32u
/* linear_coopmat_khr_splitk_dx_gemm (KERN_CMKS_DX: dX beside split-K's dW,
 * f16/bf16): auto takes it where variant_cmks_dx_fits */
#define VARIANT_HAS_CMKS_DX 64u
variant_plan variant_choose(const proto_request *q, unsigned caps);

/* The same with a measured cost model (costmodel.h; NULL: none): where
 * auto's rules above pick a plain family (generic, tiled, split-K: no
 * tensor-core kernel) for a part (dW/db, dX), the model's estimates of the
 * plain families for that part (generic, tiled, tiled128 where the device
 * has it — for f16/bf16 only where it walks the reduction in one dispatch
 * — and for dW split-K at 2, 4, ... 64 slices of at least 16 rows) decide
 * instead when one is at least VARIANT_MODEL_MARGIN times cheaper than the
 * rules' pick. Close calls keep the rules' pick,
 * so a noisy measurement does not flip the choice of jobs where it hardly
 * matters. On lavapipe the rules took split-K (64 slices of 64x64 tiles)
 * for 1048560x2x2 dW/db, 50x slower than generic: the model picks generic.
 * The plan depends on the shape and the model only, so one daemon gives a
 * job the same bits every time; a restart measures again and may choose
 * another family (within the dtype's tolerance either way). */
#define VARIANT_MODEL_MARGIN 1.5
variant_plan variant_choose_costed(const proto_request *q, unsigned caps, const costmodel *cm);


/* The GPU time (ns) model cm estimates for q's kernels by plan p: the sum
 * over its parts (dW/db, dX). 0 when there is no model or a part's kernel
 * has no fit (tensor-core kernels, tiled128): "unknown". For schedulers
 * that want a job's expected GPU time before it runs. */
uint64_t variant_estimate_ns(const costmodel *cm, const variant_plan *p, const proto_request *q);

/* Split-K on the 128 tile (KERN_SPLITK128): its numbers, which refine.h's
 * refine_splitk128 (where and how auto takes it) and the forced variant's
 * slices (variant_s128_slices) share. */
#define VARIANT_NARROW_S128_MIN_FEATURES 128
/* ... except dW/db of f32 layers up to this wide both ways over at least
 * VARIANT_NARROW_MT8_MIN_BATCH rows (refine_splitk128): H100, 2026-12-06
 * 16:22 UTC, 1,048,576x128x128 f32 dW+db, the narrow family's 8x8 path
 * 1,327 us against auto's splitk128 1,395 (at 256 both ways 1,311 against
 * 910: those go). Below 2^20 rows not measured. */
#define VARIANT_NARROW_MT8_MAX_FEATURES 128
#define VARIANT_NARROW_MT8_MIN_BATCH (1u << 20)
#define VARIANT_S128_WAVE 264 /* workgroups of one wave: 2 per SM on 132 SMs (not tuned) */
#define VARIANT_S128_MIN_K 1024  /* the reduction at least this (unmeasured) */
#define VARIANT_S128_MIN_ROWS 256 /* a slice at least this long (unmeasured) */
/* ... and the GEMM at least this many multiply-adds (m·n·k): on the H100
 * grid (2026-12-06 09:41 UTC, full backward, f32) 1,024x257x129's dW
 * (34 M) on it took auto to 69 us against the seed kernels' 43 (forced
 * splitk128 59); 1,024x1024x1024 (1,074 M) auto 147 against the best's
 * 140, 16,384x257x129 (543 M) 195 against 204. The bound, 2^26, lies
 * between (2,048x256x256, 134 M, keeps it: not measured). */
#define VARIANT_S128_MIN_MACS (1ull << 26)
/* A GEMM of one 128x128 tile (a layer of at most 128 features both ways:
 * its dW) over a reduction of at least VARIANT_S128_ONE_TILE_WAVES waves
 * of slices of VARIANT_S128_ONE_TILE_MIN_ROWS takes that many waves, not
 * one. H100, 2026-12-06 14:15 UTC, one call, resident, 8 in flight, f32:
 * 1,048,576x128x128 dW+db 1,385 us on two waves (528 slices of 1,986
 * rows) against 1,593 on one (cuBLAS 1,054 in the same call), full
 * backward 2,306 / 2,537; three half-waves (396) 1,450. Two waves for
 * every GEMM: 262,144x256x256 dW+db (4 tiles) 919 / 910 and
 * 2,048x1024x1024's full backward (64 tiles) 268 / 252, so those keep
 * one. Shorter one-tile reductions were not measured. */
#define VARIANT_S128_ONE_TILE_WAVES 2
#define VARIANT_S128_ONE_TILE_MIN_ROWS 1024
/* The slices of split-K on the 128 tile for an m x n GEMM over k: one
 * wave's worth (floor(VARIANT_S128_WAVE / tiles); a long one-tile GEMM
 * VARIANT_S128_ONE_TILE_WAVES waves), at least `least`, then at most
 * that wave and k / min_rows (see refine.h: refine_splitk128); >= 1. */
uint32_t variant_s128_slices(uint64_t m, uint64_t n, uint64_t k, uint64_t min_rows, uint32_t least);
/* `splitk` forced: q's slices, of at least 16 rows, at most 64. */
uint32_t variant_forced_splitk_slices(const proto_request *q);

/* ---- the narrow family -------------------------------------------------
 * For layers of few features over many rows (16-256 features, 2^16-2^24
 * rows: neural fields, radiance caches, per-pixel MLPs), bound by one
 * pass over X and dY. dW/db: the batch cut into row blocks, each block ×
 * 64x64 tile of dW one workgroup of linear_narrow_param writing f32
 * partials to the slot's scratch (the split-K layout: `slices` blocks of
 * out·in + out), then linear_narrow_reduce adding the blocks in order:
 * the same bits every run. dX: linear_narrow_input, W's chunk in shared
 * memory while the rows stream past. `auto` takes it (dW/db and dX), where
 * the device has it, for batch >= VARIANT_NARROW_MIN_BATCH and in, out <=
 * VARIANT_NARROW_MAX_FEATURES, ahead of the tensor-core kernels; with a
 * cost model, the model may move a part to another plain family that it
 * finds VARIANT_MODEL_MARGIN times cheaper (and a part the rules gave to a
 * plain family to narrow, for batch >= VARIANT_NARROW_MODEL_MIN_BATCH and
 * in, out <= VARIANT_NARROW_MAX_FEATURES). The batch bound is from the
 * H200's grid (below); the feature bound is not measured on a GPU
 * (docs/performance.md: `scripts/device-run.sh narrow`, its grid step). */
/* The narrow family's dX (linear_narrow_input) from VARIANT_NARROW_DX_MIN_BATCH
 * rows, its dW/db from VARIANT_NARROW_MIN_BATCH. Its dX row tiles are
 * 2048/P rows (P = in/8 rounded up to a power of two, at most 8), so a
 * short batch gives it few workgroups (16,384x64x64: 64). On the H200
 * (2026-12-06 04:00 UTC, the grid, full backward) 16,384 rows on the
 * narrow family took 736 us at 16,384x64x64 f32 against splitk128's 278,
 * 892 / 149 at 16,384x33x17, and bf16 1,035 / 181; from 262,144 rows it
 * was the best plain family on every f32 shape of the grid. Its dW/db
 * alone is fast from few rows: on the H100 (04:26 UTC) 32,768x3x5 f32
 * dW+db took 39 us on it against split-K's 132, which auto took with
 * both bounds at 65,536 (test_auto_variant's 2x bound failed there).
 * Between 16,384 and 262,144 rows the dX bound is not measured. */
/* Also a layer of up to VARIANT_NARROW_WIDE_MAX_IN inputs onto at most
 * VARIANT_NARROW_WIDE_MAX_OUT outputs: H100, 2026-12-06 08:31 UTC, f32
 * full backward of 262,144x1024x16, 1,879 us against split-K's 2,141
 * (auto's plan before); bf16 keeps coopmat_khr_splitk's fused plan there
 * (656 us; unfused 878, narrow 1,802). */
#define VARIANT_NARROW_WIDE_MAX_IN 1024
#define VARIANT_NARROW_WIDE_MAX_OUT 16
#define VARIANT_NARROW_MIN_BATCH 16384
#define VARIANT_NARROW_DX_MIN_BATCH 65536
#define VARIANT_NARROW_MAX_FEATURES 256
#define VARIANT_NARROW_MODEL_MIN_BATCH 1024 /* with a cost model: from here on */
bool variant_narrow_fits(const proto_request *q);
/* ... and its dX too (batch >= VARIANT_NARROW_DX_MIN_BATCH) */
bool variant_narrow_dx_fits(const proto_request *q);
/* (its shapes: blocks, rows, tiles, partials: kshape.h) */

/* ---- split-K on the tensor cores (coopmat_khr_splitk) --------------------
 * dW (+ fused db) of narrow, long f16/bf16 layers on
 * linear_coopmat_khr_splitk_gemm: the batch cut into S slices, each slice
 * × 64x64 tile of dW one workgroup of one grid (PIPELINES_CMKS_TILE),
 * writing f32 partials in split-K's layout, then linear_narrow_reduce adds
 * the slices in order (16 lanes per element, a fixed tree: the same bits
 * every run, each output rounded once).
 * The narrow family's FMA loop ran 1,048,576x64x64 bf16 dW+db in 657 us on
 * an H100 against cuBLAS's 258 (issue 37); only the tensor cores reach the
 * memory floor (~85 us). `auto` takes it, where the device has it (f16 and
 * bf16 on VK_KHR_cooperative_matrix; never on lavapipe, which lacks it),
 * for a job asking for dW (db alone stays with the narrow family) with
 * batch >= VARIANT_CMKS_MIN_BATCH and in, out <= VARIANT_CMKS_MAX_FEATURES,
 * ahead of the narrow family. dX: see VARIANT_CMK_DX_MIN_FEATURES. Slices (variant_cmks_slices): S = max(1, floor(VARIANT_CMKS_WAVE /
 * tiles)) with tiles = ceil(out / 64) · ceil(in / 64) (1 for db alone), at
 * most batch / min_rows (auto: VARIANT_CMKS_MIN_ROWS; forced:
 * KSHAPE_CMKS_STEP), at least what the loop bound needs (slices of at most
 * kshape_max_k(KERN_CMK_SPLITK) rows), then kshape_cmks_slices (whole
 * 64-row trips, none empty). 1,048,576x64x64: 1 tile, 528 aimed for, 2,048
 * rows per slice, 512 slices = 512 workgroups of 128 threads; partials 512
 * · (4096 + 64) f32 = 8.5 MB against 256 MiB of dY and X. Forced
 * (`variant: "coopmat_khr_splitk"`, f16/bf16): dW/db on it whatever the
 * shape, dX on coopmat_khr. Measured on the H100 (2026-12-06, bf16 dW+db,
 * docs/performance.md): 161 us at 1,048,576x64x64 against the narrow
 * family's 717 and cuBLAS's 251; 551 / 2,702 / 638 at 4,194,304x64x64;
 * 448 / 2,632 / 259 at 262,144x256x256. The constants below were not
 * tuned (no other values were tried): they follow the shape of the problem (4 workgroups of 128 threads per
 * SM of a 132-SM H100/H200 — its registers and 18 KiB of shared memory
 * allow more — with 16 KiB each in flight from memory; slices long enough
 * that the partials' write and the reduce stay a few percent of the
 * inputs' bytes), to be measured (docs/performance.md).
 *
 * f32: coopmat_khr_f32_splitk (linear_coopmat_khr_f32x3_splitk_gemm,
 * f32's KERN_CMK_SPLITK, where linear_coopmat_khr_f32x3_gemm runs): the
 * same grid, slices, partials and linear_narrow_reduce, each f32 operand
 * as hi + lo bf16 and three products per k step (coopmat_khr_f32x3's
 * numerics, tests/unit/test_f32x3_numerics.c); 36 KiB of shared memory
 * (the hi and lo tiles). FORCED ONLY (`variant:
 * "coopmat_khr_f32_splitk"`, f32; dX then on coopmat_khr_f32x3), and auto
 * does not take it (variant_cmks_fits excludes f32): on the H200
 * (2026-12-06 03:55 UTC) it was correct (test_f32x3_splitk 5 of 5,
 * max_rel_err <= 3.6e-5) but slower than the narrow family on every line
 * of the set, 777 against 610 us at 1,048,576x64x64 f32 dW+db (cuBLAS
 * 419). f16/bf16 forced to it: `unsupported` (they have
 * coopmat_khr_splitk). */
/* A narrow layer's f16/bf16 dX (auto, where the device has coopmat_khr and
 * the narrow family would take it, or dW/db went to coopmat_khr_splitk):
 * coopmat_khr's dX when in is at least VARIANT_CMK_DX_MIN_FEATURES (until
 * 2026-12-06 out had to be too), else the narrow family's.
 * Measured on the H100 (2026-12-06 02:14 UTC, build a7ee949, bf16, the full
 * backward with dW/db on coopmat_khr_splitk): dX on coopmat_khr against
 * dX on narrow, the job's kernels 429 against 683 us at 1,048,576x64x64,
 * 1,547 / 2,563 at 4,194,304x64x64, 829 / 2,630 at 1,048,576x128x128,
 * 718 / 2,537 at 262,144x256x256; but 355 / 267 at 1,048,576x32x16,
 * where the 128-wide tensor-core tiles are mostly padding. */
/* Since the H200 run of 2026-12-06 (03:56 UTC, build 22656bc; the narrow
 * set and the grid, full backward, docs/performance.md):
 *  - out below 64 no longer keeps dX off coopmat_khr (only in does):
 *    262,144x1024x16 bf16 took 885 us with dW/db on coopmat_khr_splitk and
 *    dX on coopmat_khr, against 2,879 by the rules then;
 *  - a dX on the narrow family takes dW/db there too: dW/db on
 *    coopmat_khr_splitk beside the narrow family's dX took 882 us at
 *    1,048,576x32x16 bf16 against 304 with both on narrow (1,057 / 197 at
 *    4,194,304x1x1, 1,432 / 338 at 4,194,304x3x5), though dW+db alone on
 *    coopmat_khr_splitk took 136 against 175. Why the pair is slow was
 *    not found.
 *    Measured again on the H100 (2026-12-06 10:18 UTC, build 5d78384, one
 *    k step in flight on coopmat_khr_splitk, device tensors, 8 in flight,
 *    every shape's first line warmed): that pair took 217 us at
 *    1,048,576x32x16 bf16 against 295 with both on narrow, 730 / 1,020 at
 *    4,194,304x32x16. (Those H200 lines were auto's, each the first of
 *    its shape: measured at an idle clock, docs/performance.md, fifth
 *    run.) So only a layer of fewer than
 *    VARIANT_CMKS_BESIDE_NARROW_MIN_WEIGHTS weights (in·out) keeps dW/db
 *    on the narrow family beside its dX: there coopmat_khr_splitk's 64x64
 *    tile is nearly all padding (4,194,304x1x1 and x3x5 not measured
 *    again).
 * The dX rule: variant_cmk_dx_narrow(q, caps, dW's kernel). */
#define VARIANT_CMK_DX_MIN_FEATURES 64
#define VARIANT_CMKS_BESIDE_NARROW_MIN_WEIGHTS 256
bool variant_cmk_dx_narrow(const proto_request *q, unsigned caps, int param);
/* ---- dX beside dW in the split-K pass (KERN_CMKS_DX) ----------------------
 * linear_coopmat_khr_splitk_dx_gemm: linear_coopmat_khr_splitk_gemm whose
 * workgroups (slice × 64-wide column tile of in) also write dX = dY·W for
 * their slice's rows and column tile, from the dY rows already in their
 * shared stage and W's tile held in shared memory, summed over all of out
 * in f32 and rounded once; each dX element written by one workgroup (the
 * same bits every run). Traffic X + dY + dX instead of X + 2·dY + dX, one
 * launch less. Valid for out <= VARIANT_CMKS_DX_MAX_OUT (= the one 64-row
 * tile of dW: each workgroup's stage holds all of out), in <= 1024,
 * f16/bf16. `auto` takes it (variant_cmks_dx_fits) where dW/db went to
 * coopmat_khr_splitk (choose_param_auto), dX is asked for, out <= 64,
 * in >= VARIANT_CMK_DX_MIN_FEATURES and the device has its pipeline (and coopmat_khr's, which a streamed job's
 * dX chunks run on: dispatch.c runs a fused plan's units one at a time
 * unfused); the plan is then param = input = KERN_CMKS_DX (the dX unit is
 * the dW unit's, variant_dx_fused; placement gives split-K up as a whole:
 * dW then tiled, dX on coopmat_khr). Forced `coopmat_khr_splitk` keeps
 * the unfused plan (dX on coopmat_khr), to compare against.
 * Measured on the H100 (2026-12-06 04:36 UTC, build 2deeb76, bf16 full
 * backward, docs/performance.md): 214 us at 1,048,576x64x64 against 427
 * unfused and cuBLAS's 353 (0.67 of copy_gbps); 751 / 1,544 / 1,025 at
 * 4,194,304x64x64 (0.76). But 899 at 1,048,576x32x16, against 353
 * unfused: in below 64 keeps the narrow family (variant_cmk_dx_narrow),
 * as cmks's dW beside the narrow dX was slow there too (882 on the
 * H200). Those two were auto's lines, the first of their shape, and
 * later runs showed the first line of a shape measured at a low SM
 * clock (docs/performance.md, fifth run): the fused kernel there is
 * unmeasured rather than slow. With the GPU kept busy (8 jobs in flight)
 * that shape's full backward took 309 us on the narrow family and 346
 * unfused. tests/integration/test_cmks_dx.c passed 6 of 6 on that H100
 * (64 fused jobs against float64). */
#define VARIANT_CMKS_DX_MAX_OUT 64 /* = pipelines_cmks_side(KERN_CMKS_DX) */
bool variant_cmks_dx_fits(const proto_request *q, unsigned caps, int param);
/* Workgroups aimed for: 4 per SM on 132 SMs. H100, 2026-12-06 18:27 UTC,
 * one call, bf16 auto, dW+db / full backward us at 1,048,576x64x64 (512
 * slices: the fused dX kernel for the full one): 528 114 / 212, 264 139 /
 * 208, 396 121 / 279, 792 132 / 222; at 4,194,304x64x64 528 390 / 739.5,
 * 264 497 / 740.5, 396 415 / 998.5, 792 443 / 758 (docs/performance.md,
 * twelfth run). */
#define VARIANT_CMKS_WAVE 528
#define VARIANT_CMKS_MIN_BATCH 16384   /* auto: batch at least this (not measured) */
/* ... or at least VARIANT_CMKS_SHORT_MIN_BATCH rows of a layer of at least
 * VARIANT_CMKS_SHORT_MIN_FEATURES in and out (within the tiles above), dX
 * then unfused (variant_cmks_dx_fits: the fused kernel from
 * VARIANT_CMKS_MIN_BATCH only), as `coopmat_khr_splitk` forced runs it.
 * H100, 2026-12-06, bf16 full backward: 1,024x64x64 12.5 us forced
 * against auto's 29.7 on coopmat_khr's small tiling (08:31 UTC, auto
 * measured after a forced line); 1,024x257x129 40 against coopmat_khr's
 * 60 (08:25 grid, neither line the shape's first). Layers of few features
 * keep the plain kernels there (1,024x1x1: generic 11, split-K on the
 * tensor cores 17). */
#define VARIANT_CMKS_SHORT_MIN_BATCH 1024
#define VARIANT_CMKS_SHORT_MIN_FEATURES 64
/* auto: in and out at most 1024 and at most 16 tiles of 64x64. H200,
 * 2026-12-06, full backward bf16: 262,144x1024x16 (16 tiles) 885 us
 * against the narrow family's 1,867; 16,384x257x129 (15) 182, the best
 * of every family; 16,384x1024x1024 (256) 711 against coopmat_khr's 411. */
#define VARIANT_CMKS_MAX_FEATURES 1024
#define VARIANT_CMKS_MAX_TILES 16
/* auto: slices at least this long. Was 1,024 (not measured), 16 slices
 * for 16,384 rows; at 64 (as forced) the H100 (2026-12-06 08:31 UTC,
 * resident, 8 in flight, bf16 full backward) took 15.0 us against 64.0 at
 * 16,384x1x1, 23.2 / 70.7 at 16,384x33x17, 15.2 / 47.0 at 16,384x64x64;
 * 73.5 against 65.5 at 262,144x64x64 (512 slices against 256; the forced
 * variants' best there 129.5). */
#define VARIANT_CMKS_MIN_ROWS 64
bool variant_cmks_fits(const proto_request *q);
/* q's slices (see above), slices of at least min_rows rows; >= 1. */
uint32_t variant_cmks_slices(const proto_request *q, uint64_t min_rows);
/* The same on tiles of side t × t (variant_cmks_slices: t = 64). */
uint32_t variant_cmks_slices_side(const proto_request *q, uint64_t min_rows, uint64_t t);
/* The fewest slices q's batch may have on it: slices within the loop
 * bound (kshape_max_k(KERN_CMK_SPLITK)); placement gives it up below. */
uint32_t variant_cmks_min_slices(const proto_request *q);

#endif
