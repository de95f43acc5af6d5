/* daemon/kernels/refine.h — what the device changes in auto's plan.
 *
 * variant_choose (variant.h) makes a job's plan by its rules and, where
 * there is one, a cost model. Then placement.c refines it for the device
 * the job runs on, in this order, each pass given only what it needs of
 * the device (its pipelines' tiles, whether a pipeline exists, whether it
 * is a GPU): refine_nv2_large / refine_nv2_small (coopmat_nv2 for large
 * 16-bit GEMMs), refine_cmk_tiling (coopmat_khr's small tiling),
 * refine_cmk_dx_stream (a narrow layer's 16-bit dX with W in registers),
 * refine_cmks_tiling (coopmat_khr_splitk's 128x128 and 32x32 tilings, and
 * dX beside dW on the latter), and on a GPU refine_splitk128 (mid-size f32
 * GEMMs on split-K's 128 tile), refine_narrow_short, refine_t128_small,
 * refine_host_dx (where dY or dX is read through the bus) and last
 * refine_short (short layers on the seed kernels); refine_widen runs
 * where the job's tensors sit in device memory. A pass changes only what
 * its rule names and leaves a plan it does not apply to as it was (a
 * forced variant's plan too, but where it says otherwise). Each rule's
 * measurements are beside it. */
#ifndef VKG_DAEMON_REFINE_H
#define VKG_DAEMON_REFINE_H

#include <stdbool.h>
#include <stdint.h>

#include "dxs_tile.h"
#include "variant.h"

/* auto, f16/bf16: coopmat_nv2 (tiles of bm × bn) instead of coopmat_khr for
 * each of q's GEMMs (dW: m = out, n = in; dX: m = batch, n = in) with at
 * least min_tiles tiles and a reduction its loop bound takes in one
 * dispatch. bm = 0: the device has none. */
#define REFINE_NV2_MIN_TILES 256 /* about two waves: one 256-thread workgroup per SM, 132 SMs */
void refine_nv2_large(variant_plan *p, const proto_request *q, uint32_t bm, uint32_t bn, uint64_t min_tiles);

/* Then, for each GEMM still on coopmat_khr: coopmat_nv2 with the small
 * layers' tiling (tiles of bm × bn: NV2_TILE_SMALL_DEFAULT; bm = 0: the
 * device has none) where that gives at least min_tiles tiles, all whole
 * (m and n multiples of bm and bn). On the H200, same run
 * (measurements/h200-2026-12-03-s5/small): 2048x1024x1024 (dW 64 tiles of
 * 128x128, dX 128) 47 µs with it against coopmat_khr's 61 / 62 (f16 /
 * bf16), 4096x1024x1024 90 / 88 against 107 / 106; with edge tiles, whose
 * workgroups clamp every load, 1536x1000x1040 72.5 / 70 against 63 / 64:
 * hence whole tiles only. */
#define REFINE_NV2_SMALL_MIN_TILES 64
void refine_nv2_small(variant_plan *p, const proto_request *q, uint32_t bm, uint32_t bn, uint64_t min_tiles);

/* linear_coopmat_khr_gemm's tiling for q's GEMMs (dW: m = out, n = in; dX:
 * m = batch, n = in): the small one (KERN_CMK_*_S) where a GEMM has fewer
 * than small_below tiles of bm × bn (the large tiling's). */
void refine_cmk_tiling(variant_plan *p, const proto_request *q, uint64_t small_below, uint32_t bm,
			uint32_t bn);

/* auto, f16/bf16: a dX still on coopmat_khr (KERN_CMK_DX or its small
 * tiling) to linear_coopmat_khr_dx_stream: the pipeline of the first class
 * of K (dxs_tile.h: out <= 64, 128, 256; KERN_CMK_DXS + class) that holds
 * out and whose tiling (tiles[class]; NULL: the device has no such
 * pipeline) takes the GEMM (dxs_tile_takes: m = batch, n = in, k = out;
 * whole 16-wide blocks, whole strips). A GEMM it does not take as
 * recorded (a streamed job's chunk of rows) and tensors off its 16-byte
 * grid go back to coopmat_khr when the job is recorded (dispatch.c). On the H100
 * (2026-12-07, bf16 dX alone, device tensors, 8 in flight): 300 us
 * against coopmat_khr's 369 at 1,048,576x128x128, 259.5 / 274 at
 * 262,144x256x256, 129 / 264 at 1,048,576x64x64 (docs/performance.md,
 * fifteenth run). */
void refine_cmk_dx_stream(variant_plan *p, const proto_request *q, const dxs_tile *const tiles[DXS_CLASSES]);

/* linear_coopmat_khr_splitk_gemm's tiling for a 16-bit dW/db on split-K's
 * tensor cores (KERN_CMK_SPLITK, auto or forced `coopmat_khr_splitk`):
 * pipelines_cmks_for's (daemon/gpu/pipelines.h), where the device has
 * that pipeline (has_l: KERN_CMKS_L, has_s: KERN_CMKS_S) — the 128x128
 * tiles for layers of >= 128 features on both sides, the 32x32 ones for
 * layers of <= 32 — with its slices again for its tile count
 * (variant_cmks_slices_side: 528 / tiles, 64-row trips). Measured on the
 * H100 (2026-12-06 10:03 UTC, bf16 dW+db, device tensors, 8 in flight):
 * 248 us against 284 at 1,048,576x128x128, 221 / 270 at 262,144x256x256
 * (128x128 tiles); 64 / 81 at 1,048,576x32x16 (32x32 tiles); both were
 * slower at 1,048,576x64x64 (210 and 196 against 109). The fused dX
 * plan (KERN_CMKS_DX) and f32 keep the 64x64 tile. Where auto's plan for
 * such a small layer has dX on the narrow family (variant.c: 16-bit dW/db
 * on this family beside the narrow dX) and the device has has_dx_s, dX
 * goes beside dW on the 32x32 tiles instead (param = input =
 * KERN_CMKS_DX_S: linear_coopmat_khr_splitk_dx_gemm on them, one pass
 * over dY). */
void refine_cmks_tiling(variant_plan *p, const proto_request *q, bool has_l, bool has_s, bool has_dx_s);


/* linear_tiled128_gemm's small tiling (KERN_TILED128_S, T128_TILE_SMALL:
 * 64x64 tiles) for an f32 dX (m = batch, n = in, k = out) of in <=
 * REFINE_T128_SMALL_MAX_IN, where the pipeline exists (the default tiling
 * runs):
 *  - `tiled128` forced: its dX there, on every device (the 128 tile would
 *    be half padding or more);
 *  - auto on a GPU (gpu true; placement.c): the narrow family's dX
 *    (KERN_NARROW_DX) of in >= REFINE_T128_SMALL_MIN_IN, in a job without
 *    dW or db (dX alone; a linear_forward's GEMM) or beside the narrow
 *    family's dW/db (KERN_NARROW), then recorded after a barrier behind
 *    them (the plan's `apart`). H100, 2026-12-06 08:31 UTC, resident, 8
 *    in flight, f32 dX alone: 309 us against the narrow family's 547 at
 *    1,048,576x64x64, 1,243 / 2,078 at 4,194,304x64x64. Beside the
 *    narrow family's dW/db with no barrier between the two kernels of a
 *    job, the full backward got slower: 1,214 against 1,086 (all on the
 *    narrow family) at 1,048,576x64x64, 4,706 / 4,121 at 4,194,304x64x64,
 *    though dW/db alone took 536 and 2,035 and dX alone 310 and 1,154
 *    (13:51 UTC: the two kernels side by side). With the barrier (13:51,
 *    same call): 848 and 3,196; 309 against 319 at 1,048,576x32x16. dW/db
 *    on another family keep their dX (not measured). Narrower layers
 *    (1-31 features) and linear_forward were not measured.
 * On lavapipe auto keeps its rules (forced jobs run the kernel there). */
#define REFINE_T128_SMALL_MIN_IN 32
#define REFINE_T128_SMALL_MAX_IN 64
void refine_t128_small(variant_plan *p, const proto_request *q, bool gpu);

/* ---- short layers ------------------------------------------------------
 * On a GPU (placement.c), the last of auto's passes: a job of at most
 * REFINE_SHORT_MAX_BATCH rows, in and out at most
 * REFINE_SHORT_MAX_FEATURES and W of at most REFINE_SHORT_MAX_WEIGHTS
 * elements (in·out), every dtype, runs on the seed kernels (generic: dW/db
 * on linear_parameter_backward, dX on linear_input_backward). The H100
 * grid of 2026-12-06 09:41 UTC (`bench --kernels --shapes grid
 * --settle-ms 1000`, full backward, one job in flight): at 1,024 rows
 * generic was the best family, or tied with it, on every such shape (1x1,
 * 3x5, 64x64, 257x129; f32 and bf16: 11-43 us), while auto took 17 us
 * against generic's 13 at 1,024x64x64 bf16 (coopmat_khr_splitk) and 69
 * against 43 at 1,024x257x129 f32 (splitk128). At 16,384 rows generic
 * took 108-128 us where the best took 14-50, so the bound stays at 1,024
 * rows; wider layers (1,024x1024x1024) are the matrix kernels'. A CPU
 * device (lavapipe) keeps the rules' pick. */
#define REFINE_SHORT_MAX_BATCH 1024
#define REFINE_SHORT_MAX_FEATURES 512
#define REFINE_SHORT_MAX_WEIGHTS 65536
void refine_short(variant_plan *p, const proto_request *q);

/* On a GPU (placement.c), auto's f32 dW/db that the rules gave the narrow
 * family over fewer than VARIANT_NARROW_DX_MIN_BATCH rows, of in >=
 * REFINE_NARROW_SHORT_MIN_IN and out >= REFINE_NARROW_SHORT_MIN_OUT: the
 * plan of `splitk` forced instead (dW/db split-K on the 64 tile in
 * min(64, batch / 16) slices, dX on the tiled kernel). The narrow family's
 * blocks are too few there: H100, 2026-12-06 08:31 UTC, full backward,
 * auto measured after a forced line: 72.2 us against split-K's 42.5 at
 * 16,384x33x17, 97.2 against 47.0 at 16,384x64x64; at 16,384x1x1 the
 * narrow family was the faster (14.3 against 38.3), and earlier
 * 32,768x3x5 dW+db (39 against 132), so narrow layers keep it. */
#define REFINE_NARROW_SHORT_MIN_IN 32
#define REFINE_NARROW_SHORT_MIN_OUT 16
void refine_narrow_short(variant_plan *p, const proto_request *q);

/* On a GPU (placement.c), auto's dX on the narrow family
 * (linear_narrow_input, KERN_NARROW_DX) of a job whose dY or dX stays in
 * host memory (a client's region read through the bus: the job is under
 * the device-local path's bytes and not all its tensors are device
 * tensors): the seed's dX kernel (KERN_INPUT) instead. Through the bus
 * the narrow kernel is 5-11x slower: H100, 2026-12-07 08:49 UTC, f32 dX
 * alone from a region (`bench --kernels --outputs dx`, kernel µs): 559
 * against the seed's 106 at 65,536x16x8, 1,496 / 138 at 262,144x3x5,
 * 2,369 / 677 at 65,536x64x64 (the seed kernel within 7 % of the best
 * family on each; tiled 115, 234, 710); with the tensors copied to
 * device memory (131,072x64x64: 64 MiB) narrow took 591, the seed 648.
 * test_auto_variant's 65,536x16x8 full backward had auto at 2.1x the
 * best (narrow's 666 against split-K's 335, whose dX is tiled). */
void refine_host_dx(variant_plan *p, const proto_request *q);

/* For a job whose tensors are in device memory (the device-local path),
 * when the variant is auto: a GEMM by linear_tiled_gemm becomes
 * linear_tiled128_gemm where it has at least 512 tiles of 128x128 and a
 * reduction of at least 1024. */
void refine_widen(variant_plan *p, const proto_request *q);

/* Split-K on the 128 tile (linear_splitk128_gemm + linear_splitk_reduce,
 * KERN_SPLITK128), for mid-size f32 GEMMs whose 128x128 tiles are too few
 * to fill a GPU (issue 37: 2048x1024x1024 has 64 tiles for dW, 128 for
 * dX, on 132 SMs). placement.c applies it on devices that are not CPU
 * devices (on lavapipe auto is as before; the cost model does not know
 * this kernel), where the pipeline exists, when the variant is auto and
 * the dtype f32: a GEMM (dW: m = out, n = in, k = batch, the rules' pick
 * generic, tiled or split-K on the 64 tile; dX: m = batch, n = in, k =
 * out, the rules' pick generic or tiled) with m, n >= 128, fewer than
 * VARIANT_S128_WAVE tiles of 128x128 and k >= VARIANT_S128_MIN_K is cut
 * into S = min(max(2, floor(VARIANT_S128_WAVE / tiles)), k /
 * VARIANT_S128_MIN_ROWS, VARIANT_S128_WAVE) slices, each kshape_s128_len long (whole
 * 16-row steps; kshape_s128_slices: none empty), when S >= 2 (and, where
 * the rules took split-K on the 64 tile, tiles x S >= 132: half a wave,
 * else their many small workgroups stay; 8192x256x256 would have 128 of
 * the 128 tile against their 512): as many
 * workgroups as fit one wave (tiles x S <= 264) rather than just past it,
 * where a second wave would run almost empty (2048x1024x1024: dW 4 slices
 * = 256 workgroups, where ceil(264 / 64) = 5 would make 320: one full
 * wave and one a fifth full at two per SM, 2.4 waves at one per SM; dX 2
 * slices = 256). The four numbers are not tuned by timing (one shape
 * measured: on the H100 2,048x1,024x1,024 f32 took 258 us on it, 363 on
 * tiled128, 388 on tiled; docs/performance.md): they follow the shape of the problem (two 256-thread workgroups per SM of a
 * 132-SM H100/H200: the tunable path's 127 registers on the H200 allow
 * two, the fixed kernel's 152 one, and 256 workgroups are two full waves
 * of that; slices long enough that the partials' write and the reduce
 * pass stay small against the slice's multiply-adds), not a timing.
 * Forced (`variant: "splitk128"`, any dtype) both parts run on it,
 * max(1, floor(VARIANT_S128_WAVE / tiles)) slices of at least
 * KSHAPE_S128_STEP rows.
 * The slices were at most 64 (split-K's cap on the 64 tile) until the H100
 * run of 2026-12-06 08:08 UTC: a 128x128 dW over 1,048,576 rows then had
 * 64 workgroups, a quarter of a wave; with 264 slices splitk128 forced took
 * 1,594 us for its f32 dW+db, 911 for 262,144x256x256 (66 slices of 4
 * tiles; narrow 2,034 and 2,032, cuBLAS 1,036 and 852 the session before).
 *
 * Narrow f32 layers (the narrow family's rules: batch >=
 * VARIANT_NARROW_MIN_BATCH, in, out <= VARIANT_NARROW_MAX_FEATURES) of at
 * least VARIANT_NARROW_S128_MIN_FEATURES in and out leave the narrow
 * family here too: dW/db to split-K on the 128 tile as above, dX (m =
 * batch, k = out) to tiled128. The same run, f32 dX: tiled128 985 us
 * against narrow 1,962 at 1,048,576x128x128, 936 / 1,852 at
 * 262,144x256x256; at 64 features the two were within 3 % (533 / 546 at
 * 1,048,576x64x64) and the 128 tile would pad dW's 64x64 four times
 * (splitk128 1,609 against narrow 539), so 64 stays on the narrow family.
 * Since the family's f32 8x8 path (shaders/narrow_mt8.glsl), dW/db of up
 * to VARIANT_NARROW_MT8_MAX_FEATURES both ways over at least
 * VARIANT_NARROW_MT8_MIN_BATCH rows stay on it (variant.h); their dX
 * still goes to tiled128. */
void refine_splitk128(variant_plan *p, const proto_request *q);

#endif
