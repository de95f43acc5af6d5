/* daemon/gpu/pipelines.h — compute pipelines for the registry's kernels and the
 * persistent VkPipelineCache behind them (one file per device and driver). */
#ifndef VKG_DAEMON_PIPELINES_H
#define VKG_DAEMON_PIPELINES_H

#include <stdbool.h>

#include "device.h"
#include "dxs_tile.h"
#include "msg.h"
#include "nv2_tile.h"
#include "t128_tile.h"

/* linear_parameter_backward, linear_input_backward (generic),
 * linear_tiled_gemm (tiled), linear_tiled128_gemm (tiled128: the 128×128
 * tile, where the device offers its 32 KiB of shared memory),
 * linear_splitk_gemm + linear_splitk_reduce
 * (splitk: the two passes of split-K), linear_coopmat_gemm (coopmat: f16
 * on VK_NV_cooperative_matrix, only where device.coopmat), and
 * linear_coopmat_khr_gemm (coopmat_khr: f16 and bf16 on
 * VK_KHR_cooperative_matrix, where device.cmk says so), specialised four
 * times: for dW (A = dYᵀ, along m) and for dX (A = dY, along k), each with
 * the tiling for large layers and the one for small ones (_S); and
 * linear_coopmat_nv2_gemm (coopmat_nv2: f16 and bf16 on
 * VK_NV_cooperative_matrix2's workgroup-scope matrices, where device.cmk
 * says so), for dW and for dX, each with the tiling for large layers
 * (VKGRAD_NV2_TILE or NV2_TILE_DEFAULT) and the one for small ones (_S:
 * NV2_TILE_SMALL_DEFAULT); and the narrow family (narrow: layers of few
 * features over many rows, where the device offers 32 KiB of shared
 * memory): linear_narrow_param + linear_narrow_reduce for dW/db, and
 * linear_narrow_input for dX; and linear_coopmat_khr_splitk_gemm
 * (coopmat_khr_splitk: split-K of the dW/db pass on the tensor cores, f16
 * and bf16 where linear_coopmat_khr_gemm runs and the narrow family's 32
 * KiB of shared memory are, pipelines_cmks_tile; for f32
 * linear_coopmat_khr_f32x3_splitk_gemm, coopmat_khr_f32_splitk, where
 * linear_coopmat_khr_f32x3_gemm runs, 36 KiB), with linear_narrow_reduce
 * adding its slices; and linear_coopmat_khr_splitk_dx_gemm (the same
 * with dX = dY·W beside dW, for out <= 64, f16 and bf16, where
 * linear_coopmat_khr_splitk_gemm runs and its 36 KiB of shared memory
 * are: PIPELINES_CMKS_DX_SHARED). Their interfaces: shaders/iface/kernels.h. */
enum { KERN_PARAM, KERN_INPUT, KERN_TILED, KERN_SPLITK, KERN_REDUCE, KERN_COOPMAT, KERN_TILED128,
       KERN_CMK_DW, KERN_CMK_DX, KERN_CMK_DW_S, KERN_CMK_DX_S, KERN_NV2_DW, KERN_NV2_DX, KERN_NV2_DW_S,
       KERN_NV2_DX_S, KERN_PREP /* linear_forward_prep: linear_forward's transpose and bias */,
       KERN_ACT /* linear_activation: the fused activations (daemon/kernels/activation.c) */,
       KERN_OPTIM /* optim_step: sgd_step and adam_step (daemon/kernels/optim_step.c) */,
       KERN_NARROW /* linear_narrow_param: row blocks' partial dW/db */,
       KERN_NARROW_RED /* linear_narrow_reduce: the blocks added in order */,
       KERN_NARROW_DX /* linear_narrow_input: dX with W in shared memory */,
       KERN_SPLITK128 /* linear_splitk128_gemm: split-K's partials on the 128 tile */,
       KERN_CMK_SPLITK /* linear_coopmat_khr_splitk_gemm (f32: linear_coopmat_khr_f32x3_splitk_gemm): split-K's dW/db partials on the tensor cores */,
       KERN_CMKS_DX /* linear_coopmat_khr_splitk_dx_gemm: KERN_CMK_SPLITK with dX beside dW (out <= 64; f16/bf16) */,
       KERN_TILED128_S /* linear_tiled128_gemm's small tiling (f32, T128_TILE_SMALL): narrow layers' dX */,
       KERN_CMKS_L /* KERN_CMK_SPLITK on 128x128 tiles (f16/bf16: PIPELINES_CMKS_L_TILE): layers of >= 128 features */,
       KERN_CMKS_S /* KERN_CMK_SPLITK on 32x32 tiles (f16/bf16: PIPELINES_CMKS_S_TILE): layers of <= 32 features */,
       KERN_CMKS_DX_S /* KERN_CMKS_DX on 32x32 tiles (PIPELINES_CMKS_S_TILE): layers of <= 32 features */,
       KERN_CMK_DXS /* linear_coopmat_khr_dx_stream (f16/bf16, dxs_tile.h): a narrow layer's dX with W in registers, out <= 64 */,
       KERN_CMK_DXS_M /* the same, out <= 128 (its own tiling) */,
       KERN_CMK_DXS_L /* the same, out <= 256 */,
       KERN_COUNT };

/* Is k one of linear_coopmat_khr_splitk_gemm's dW/db pipelines (split-K on
 * the tensor cores without dX: the 64x64 tiling, the 128x128 one, the
 * 32x32 one)? */
static inline bool pipelines_is_cmks(int k)
{
	return k == KERN_CMK_SPLITK || k == KERN_CMKS_L || k == KERN_CMKS_S;
}

/* Is k one of linear_coopmat_khr_splitk_dx_gemm's pipelines (dX beside
 * split-K's dW: the 64x64 tiling, the 32x32 one)? */
static inline bool pipelines_is_cmks_dx(int k)
{
	return k == KERN_CMKS_DX || k == KERN_CMKS_DX_S;
}

/* Is k one of linear_coopmat_khr_dx_stream's pipelines; which class of K
 * (dxs_tile.h: 0 out <= 64, 1 <= 128, 2 <= 256)? */
static inline bool pipelines_is_dxs(int k)
{
	return k >= KERN_CMK_DXS && k <= KERN_CMK_DXS_L;
}
static inline int pipelines_dxs_class(int k)
{
	return k - KERN_CMK_DXS;
}

/* Is k one of linear_coopmat_nv2_gemm's pipelines; does it compute dW? */
static inline bool pipelines_is_nv2(int k)
{
	return k >= KERN_NV2_DW && k <= KERN_NV2_DX_S;
}
static inline bool pipelines_nv2_dw(int k)
{
	return k == KERN_NV2_DW || k == KERN_NV2_DW_S;
}

/* Is k one of linear_coopmat_khr_gemm's pipelines; which tiling (0 large,
 * 1 small); does it compute dW (else dX)? */
static inline bool pipelines_is_cmk(int k)
{
	return k >= KERN_CMK_DW && k <= KERN_CMK_DX_S;
}
static inline int pipelines_cmk_tiling(int k)
{
	return k >= KERN_CMK_DW_S ? 1 : 0;
}
static inline bool pipelines_cmk_dw(int k)
{
	return k == KERN_CMK_DW || k == KERN_CMK_DW_S;
}

/* linear_coopmat_khr_gemm's tiling (its specialization constants): a
 * warps_m × warps_n grid of subgroups per workgroup, each wm × wn of C;
 * reduction steps of bk; depth slices in flight from memory. */
typedef struct pipelines_cmk_tile {
	uint32_t warps_m, warps_n, wm, wn, bk, depth;
} pipelines_cmk_tile;

/* linear_coopmat_khr_splitk_gemm's tiling (KERN_CMK_SPLITK), for the
 * narrow dW of long layers (64x64 and smaller: issue 37): 2x2 subgroups of
 * 32x32, a 64x64 tile of C per workgroup of 128 threads, so a 64x64 dW
 * keeps all four subgroups busy; k steps of 32 rows. f16/bf16: one step in
 * flight from memory while one is multiplied (PIPELINES_CMKS_TILE); the
 * fused dX kernel (KERN_CMKS_DX) and f32's three bf16 products
 * (coopmat_khr_f32_splitk): two (PIPELINES_CMKS_DX_TILE). H100,
 * 2026-12-06 10:03 UTC (device tensors, 8 in flight, bf16 dW+db forced
 * coopmat_khr_splitk, one daemon per tiling in one call): one step in
 * flight 109 us against two's 154 at 1,048,576x64x64, 81 / 129 at
 * 1,048,576x32x16, 284 / 461 at 1,048,576x128x128, 270 / 442 at
 * 262,144x256x256. (Also measured there: 128x128 tiles, 2x2 subgroups of
 * 64x64, one step: 210, 190, 248, 221; 4x4 of 32x32: 225, 214, 285, 256;
 * 32x32 tiles, 2x2 of 16x16, two steps: 196, 64, 703, 691; 16x32, 1x2 of
 * 16x16: 672, 102, 2,765, 2,702.) So layers of at least 128 features on
 * both sides take the 128x128 tiling (KERN_CMKS_L, PIPELINES_CMKS_L_TILE)
 * and layers of at most 32 on both sides the 32x32 one (KERN_CMKS_S,
 * PIPELINES_CMKS_S_TILE): pipelines_cmks_for. The fused dX kernel and f32
 * were not measured with one step then, so they keep two. All take k steps
 * of 32 (PIPELINES_CMKS_BK): the slices' whole trips (KSHAPE_CMKS_STEP).
 * H100, 2026-12-06 23:27-23:34 UTC (bf16, auto, one daemon per setting in
 * one call; docs/performance.md, thirteenth run): the fused dX kernel with
 * one step in flight took 211.5 us against two's 212 at 1,048,576x64x64's
 * full backward (745 / 740 at 4,194,304x64x64), so it keeps two; the 32x32
 * tiles (KERN_CMKS_S and KERN_CMKS_DX_S) with one step took 90.0 us
 * against two's 101.5 at 1,048,576x32x16's full backward, 314 / 353 at
 * 4,194,304x32x16 (dW+db 62.5 / 64.5 and 207 / 209.5; 64 and 76
 * registers for the two pipelines against 73 and 84), so they take one;
 * the 128x128 tiles with two steps, or as 4x4 subgroups of 32x32, or 2x4
 * of 64x32, were slower than these (dW+db 264, 288, 354 us against 254.5
 * at 1,048,576x128x128). */
#define PIPELINES_CMKS_TILE ((pipelines_cmk_tile){2, 2, 32, 32, 32, 1})
#define PIPELINES_CMKS_DX_TILE ((pipelines_cmk_tile){2, 2, 32, 32, 32, 2})
#define PIPELINES_CMKS_L_TILE ((pipelines_cmk_tile){2, 2, 64, 64, 32, 1})
#define PIPELINES_CMKS_S_TILE ((pipelines_cmk_tile){2, 2, 16, 16, 32, 1})
/* the reduction step of all of them (their C tile: pipelines_cmks_side) */
#define PIPELINES_CMKS_BK 32u
/* the layers KERN_CMKS_L and KERN_CMKS_S take (in and out both) */
#define PIPELINES_CMKS_L_MIN_FEATURES 128u
#define PIPELINES_CMKS_S_MAX_FEATURES 32u

/* The tiling of KERN_CMK_SPLITK, KERN_CMKS_L, KERN_CMKS_S, KERN_CMKS_DX_S
 * (f16/bf16, dtype t), or KERN_CMKS_DX and f32's KERN_CMK_SPLITK (k). */
static inline pipelines_cmk_tile pipelines_cmks_tile(int k, proto_dtype t)
{
	if (k == KERN_CMKS_L)
		return PIPELINES_CMKS_L_TILE;
	if (k == KERN_CMKS_S || k == KERN_CMKS_DX_S)
		return PIPELINES_CMKS_S_TILE;
	return k == KERN_CMK_SPLITK && t != PROTO_F32 ? PIPELINES_CMKS_TILE : PIPELINES_CMKS_DX_TILE;
}

/* The C tile's side (rows = columns) of split-K pipeline k
 * (pipelines_is_cmks or pipelines_is_cmks_dx). */
static inline uint32_t pipelines_cmks_side(int k)
{
	const pipelines_cmk_tile t = pipelines_cmks_tile(k, PROTO_BF16);
	return t.warps_m * t.wm;
}

/* Which split-K dW/db pipeline a layer of `in` × `out` features takes
 * (the tilings above): KERN_CMKS_L, KERN_CMKS_S or KERN_CMK_SPLITK. in is
 * 1 where dW is not asked for (db alone: one column). */
static inline int pipelines_cmks_for(uint64_t in, uint64_t out)
{
	if (in >= PIPELINES_CMKS_L_MIN_FEATURES && out >= PIPELINES_CMKS_L_MIN_FEATURES)
		return KERN_CMKS_L;
	if (in <= PIPELINES_CMKS_S_MAX_FEATURES && out <= PIPELINES_CMKS_S_MAX_FEATURES)
		return KERN_CMKS_S;
	return KERN_CMK_SPLITK;
}

/* linear_coopmat_khr_f32x3_gemm (f32 on KERN_CMK_DW/DX, the large tiling
 * only): k steps of 16, one slice in flight, so that its hi and lo tiles
 * (twice linear_coopmat_khr_gemm's) fit 48 KiB of shared memory. */
#define PIPELINES_F32X3_BK 16u

/* Shared memory the narrow kernels take (shaders/linear_narrow_*.comp: two
 * blocks of 1024 vec4). */
#define PIPELINES_NARROW_SHARED_BYTES 32768u

typedef struct pipelines {
	VkPipelineCache cache;
	char cache_path[640]; /* "" when no cache directory is usable; holds a
			       * directory of CONFIG_CACHE_DIR_MAX bytes */
	VkDescriptorSetLayout dsl[KERN_COUNT];
	VkPipelineLayout layout[KERN_COUNT];
	VkPipeline pipe[KERN_COUNT][PROTO_DTYPE_COUNT]; /* per storage dtype */
	bool dtype_ok[PROTO_DTYPE_COUNT]; /* pipelines exist for this dtype */
	pipelines_cmk_tile cmk_tile[2];   /* KERN_CMK_*: the large and the small tiling, */
	uint32_t cmk_bm[2], cmk_bn[2];    /* their C tile (bm × bn) per workgroup */
	uint64_t cmk_small_below;         /* a GEMM with fewer large tiles takes the small tiling */
	t128_tile t128; /* KERN_TILED128 for f32: VKGRAD_T128_TILE's tiling, or off (the fixed kernel) */
	t128_tile t128_small; /* KERN_TILED128_S (f32): T128_TILE_SMALL where the default tiling runs, else off */
	nv2_tile nv2[PROTO_DTYPE_COUNT]; /* KERN_NV2_DW/DX per dtype: VKGRAD_NV2_TILE's tiling, or the default */
	nv2_tile nv2_small[PROTO_DTYPE_COUNT]; /* KERN_NV2_*_S per dtype: NV2_TILE_SMALL_DEFAULT */
	dxs_tile dxs[DXS_CLASSES]; /* KERN_CMK_DXS, _M, _L: VKGRAD_DXS_TILE's (dxs_tile_choose; unset: off) */
	bool nv2_small_ok[PROTO_DTYPE_COUNT];  /* ... where it fits the device */
	char cmk_why[PROTO_DTYPE_COUNT][256]; /* no KERN_CMK_* pipeline for a dtype: why */
	char nv2_why[PROTO_DTYPE_COUNT][256]; /* no KERN_NV2_* pipeline for a dtype: why */
	char cmks_why[PROTO_DTYPE_COUNT][320]; /* no KERN_CMK_SPLITK pipeline for a dtype: why */
	unsigned built;       /* pipelines created */
	unsigned cache_hits;  /* of those, found in the cache (creation feedback) */
	double build_ms;
} pipelines;

/* Storage buffers kernel k's layout binds (shaders/iface/kernels.h:
 * VKG_BINDINGS_*). */
uint32_t pipelines_bindings(int k);

/* The tiling pipeline k (one of KERN_CMK_*) runs with for dtype t. */
static inline pipelines_cmk_tile pipelines_cmk_tile_for(const pipelines *p, int k, proto_dtype t)
{
	pipelines_cmk_tile x = p->cmk_tile[pipelines_cmk_tiling(k)];
	if (t == PROTO_F32)
		x.bk = PIPELINES_F32X3_BK, x.depth = 1;
	return x;
}

/* The tiling nv2 pipeline k (one of KERN_NV2_*) runs with for dtype t. */
static inline const nv2_tile *pipelines_nv2_tile(const pipelines *p, int k, proto_dtype t)
{
	return k >= KERN_NV2_DW_S ? &p->nv2_small[t] : &p->nv2[t];
}

/* Is k one of linear_tiled128_gemm's bodies (tiled128, split-K on the
 * 128 tile, the small tiling)? */
static inline bool pipelines_is_t128(int k)
{
	return k == KERN_TILED128 || k == KERN_SPLITK128 || k == KERN_TILED128_S;
}

/* The tunable path's tiling pipeline k (pipelines_is_t128) runs with for
 * dtype t: the small tiling for KERN_TILED128_S, VKGRAD_T128_TILE's (or
 * the default) for the others, in f32 only; NULL where the fixed 128x128
 * kernel runs (f16, bf16, VKGRAD_T128_TILE=fixed), and for
 * KERN_TILED128_S where it is not built. */
static inline const t128_tile *pipelines_t128_for(const pipelines *p, int k, proto_dtype t)
{
	const t128_tile *tt = k == KERN_TILED128_S ? &p->t128_small : &p->t128;
	return t == PROTO_F32 && tt->on ? tt : NULL;
}

/* Load the cache file (a bad or foreign one is logged and ignored), build
 * every pipeline, the kernels' tilings replaced where env says so
 * (VKGRAD_CMK_TILE, VKGRAD_CMK_TILE_SMALL, VKGRAD_CMK_SMALL_BELOW,
 * VKGRAD_T128_TILE, VKGRAD_NV2_TILE: config_env). Returns 0, or -1 with err. */
int pipelines_init(pipelines *p, const device *d, const char *cache_dir, const config_env *env, char *err,
		   size_t errlen);
/* Is there a pipeline of kernel `name` (registry name) for dtype t? */
bool pipelines_serves(const pipelines *p, const char *name, proto_dtype t);

/* Shared memory (bytes) linear_coopmat_khr_gemm takes with tiling t, for
 * dW (a_kmajor) or dX; 0 when t is not a tiling it can run with matrix
 * shape s (see the shader). */
uint32_t pipelines_cmk_shared(pipelines_cmk_tile t, cmk_shape s, bool a_kmajor);
/* The same with `pieces` copies of the stage tiles (2: the hi and lo bf16
 * pieces of linear_coopmat_khr_f32x3_gemm). */
uint32_t pipelines_cmk_shared_pieces(pipelines_cmk_tile t, cmk_shape s, bool a_kmajor, uint32_t pieces);
/* linear_coopmat_khr_splitk_dx_gemm (KERN_CMKS_DX): the same tiling; its
 * shared memory for matrices of shape s, in bytes (the two stages, W's
 * BM × BN tile, the dX staging: shaders/coopmat_khr_gemm.glsl SH), or 0
 * where the tiling does not suit s (each k step's rows split over the
 * subgroups in whole CM_M bands; out's BM in whole CM_K steps). */
uint32_t pipelines_cmks_dx_shared(pipelines_cmk_tile t, cmk_shape s);

/* Save the cache atomically (temp file, fsync, rename); failures are logged. */
void pipelines_save(const pipelines *p, const device *d);
void pipelines_destroy(pipelines *p, const device *d);

/* The pipelines' part of stats: pipelines, pipeline_cache_hits. */
void pipelines_stats(const pipelines *pl, proto_stats *st);

#endif
