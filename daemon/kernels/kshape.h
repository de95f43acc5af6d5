/* daemon/kernels/kshape.h — the kernels' shapes: how much work one part of a
 * job is for each kernel, apart from which kernel runs it (variant.h) or
 * what it costs (costmodel.h). The loop bound every kernel keeps, the
 * longest reduction each walks in one dispatch, split-K's and the narrow
 * family's partials, the narrow family's blocks, steps and tiles. Plain
 * arithmetic on the request's shape and the loop bound: variant.c,
 * costmodel.c, placement.c and dispatch.c all read it, it reads none of
 * them. */
#ifndef VKG_DAEMON_KSHAPE_H
#define VKG_DAEMON_KSHAPE_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

/* Iterations of any kernel's loops in one dispatch, on every device (see
 * "Loop bound" in variant.h): at most KSHAPE_LOOP_TRIPS_MAX, well under
 * llvmpipe's 65,535, leaving room for the kernels' short fixed loops (the
 * seed kernel's 3-step tree). A daemon's --loop-trips may lower it
 * (kshape_set_loop_trips, once at start, by placement_init), so that
 * tests reach the cut reductions at small shapes; one setting per
 * process. */
#define KSHAPE_LOOP_TRIPS_MAX 32768u
#define KSHAPE_MAX_LOOP_TRIPS (kshape_loop_trips())
uint32_t kshape_loop_trips(void);
/* trips in [1, KSHAPE_LOOP_TRIPS_MAX]; anything else sets the maximum */
void kshape_set_loop_trips(uint32_t trips);

/* The longest reduction (elements of k) kernel `kern` walks in one dispatch
 * within KSHAPE_MAX_LOOP_TRIPS: KSHAPE_MAX_LOOP_TRIPS times the elements
 * its loop takes per iteration (seed dW: 8 stripes; dX, tiled, split-K: 16;
 * tiled128, splitk128: 16 for f32, 8 for f16/bf16; coopmat, coopmat_nv2: 32;
 * coopmat_khr: two k steps of BK, at least KSHAPE_CMK_MIN_BK, per
 * iteration; coopmat_khr_splitk: KSHAPE_CMKS_STEP per slice and iteration — dispatch.c cuts by its pipelines' actual BK, 32 by default). A
 * kernel missing from kshape.c's list counts as one element per
 * iteration. */
#define KSHAPE_CMK_MIN_BK 16u
uint64_t kshape_max_k(int kern, proto_dtype dt);

/* f32 scratch elements split-K needs for q's dW/db with `slices` slices. */
uint64_t kshape_splitk_elems(const proto_request *q, uint32_t slices);
/* The same for q's dX (split over out) with `slices` slices. */
uint64_t kshape_splitk_dx_elems(const proto_request *q, uint32_t slices);

/* ---- split-K on the 128 tile (linear_splitk128_gemm) --------------------- */
/* Its slices are whole multiples of this many elements of the reduction
 * (the f32 kernel's k step; twice the 16-bit one's), so every slice but the
 * last walks whole steps and its vector loads stay aligned. */
#define KSHAPE_S128_STEP 16u
/* Length of each slice (the last may be shorter) of a reduction of K
 * elements cut into about `slices`: ceil(K / slices) rounded up to
 * KSHAPE_S128_STEP. */
uint64_t kshape_s128_len(uint64_t K, uint32_t slices);
/* The slices that length makes (ceil(K / kshape_s128_len)), none empty: at
 * most `slices`, and unchanged when applied again. */
uint32_t kshape_s128_slices(uint64_t K, uint32_t slices);

/* ---- split-K on the tensor cores (linear_coopmat_khr_splitk_gemm) ------- */
/* Its slices are whole multiples of this many rows of the batch: one trip
 * of its loop (two k steps of 32, PIPELINES_CMKS_BK), so every slice but
 * the last walks whole trips. kshape_max_k(KERN_CMK_SPLITK) is this times
 * the loop bound: the longest slice one workgroup may walk. */
#define KSHAPE_CMKS_STEP 64u
/* Length of each slice (the last may be shorter) of a batch of K rows cut
 * into about `slices`: ceil(K / slices) rounded up to KSHAPE_CMKS_STEP. */
uint64_t kshape_cmks_len(uint64_t K, uint32_t slices);
/* The slices that length makes (ceil(K / kshape_cmks_len)), none empty: at
 * most `slices`, and unchanged when applied again. */
uint32_t kshape_cmks_slices(uint64_t K, uint32_t slices);

/* ---- the narrow family's shapes (variant.h: when it runs) ---------------- */
#define KSHAPE_NARROW_WGS 512     /* stage one's workgroups aimed for (blocks × tiles): ~4 per SM on an H100 */
/* rows per block at least: each block costs its workgroups a tree of the
 * row groups and a store of its partials (on lavapipe, blocks of 256 rows
 * made 32768x3x5 dW+db 2-4x the seed kernel's time; B >= 2^19 keeps
 * KSHAPE_NARROW_WGS workgroups either way) */
#define KSHAPE_NARROW_MIN_ROWS 1024
#define KSHAPE_NARROW_DX_WGS 1024 /* dX's workgroups aimed for (row groups × column tiles) */
/* Rows per block at most: a quarter of the loop bound (each step of 64
 * rows is 64 / row groups inner trips), at least one step. */
uint64_t kshape_narrow_max_rows(void);
/* Rows of one step of linear_narrow_param through shared memory for q's
 * first (widest) tile: 1024 / the least power of two >= its wider side in
 * quads (64 for a 64-wide tile, 1024 for one of 1-4 features). */
uint64_t kshape_narrow_step_rows(const proto_request *q);
/* Workgroups of one block: 64x64 tiles of dW (one column of them for db
 * alone). */
uint64_t kshape_narrow_tiles(const proto_request *q);
/* Blocks for q (a function of the shape and the loop bound alone): about
 * KSHAPE_NARROW_WGS workgroups, blocks of at least KSHAPE_NARROW_MIN_ROWS
 * rows and at most kshape_narrow_max_rows, every block a whole number of
 * 64-row steps and none empty. */
uint32_t kshape_narrow_blocks(const proto_request *q);
/* The fewest blocks the loop bound allows (placement lowers the blocks no
 * further when the partials must shrink). */
uint32_t kshape_narrow_min_blocks(const proto_request *q);
/* Rows of each block (the last may have fewer) with `blocks` blocks. */
uint64_t kshape_narrow_rows(const proto_request *q, uint32_t blocks);
/* linear_narrow_input: rows of one row tile, the same for every column
 * tile (2048 / P, P the least power of two >= ceil(min(64, in) / 8): the
 * columns of 8×8 micro-tiles; 256 rows for a 64-wide layer, 2048 for one of
 * up to 8 features), and the row groups (gl_WorkGroupID.y) with *tiles row
 * tiles each. */
uint64_t kshape_narrow_dx_tile_rows(uint64_t in);
/* f32 partials of q's dW/db on the narrow family with `blocks` blocks:
 * each block out·in (dW asked for) then out (db), its stride. */
uint64_t kshape_narrow_elems(const proto_request *q, uint32_t blocks);
uint64_t kshape_narrow_stride(const proto_request *q);
uint64_t kshape_narrow_dx_groups(const proto_request *q, uint32_t *tiles);

#endif
