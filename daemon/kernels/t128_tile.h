/* daemon/kernels/t128_tile.h — the tiling of linear_tiled128_gemm's tunable f32 path
 * (shaders/tiled128_tuned.glsl): VKGRAD_T128_TILE, parsed, checked, and
 * turned into the pipeline's specialization constants.
 *
 * VKGRAD_T128_TILE="BMxBNxTMxTNxBK[xSPLIT[xPAD[xWX]]]": a BM×BN tile of C
 * per workgroup of (BM/TM)·(BN/TN) threads, TM×TN outputs per thread, k
 * steps of BK, the next tile's global loads in SPLIT phases of a step, PAD
 * vec4 of padding per shared row, warps of WX×(32/WX) threads (0: rows of
 * BN/TN threads). Unset: T128_TILE_DEFAULT; "fixed": the fixed 128×128
 * kernel (8×8 per thread). Only f32 takes it;
 * f16 and bf16 keep the fixed kernel. */
#ifndef VKG_DAEMON_T128_TILE_H
#define VKG_DAEMON_T128_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vk_compat.h"

#define T128_TILE_ENV "VKGRAD_T128_TILE"
/* the f32 default: the fastest of a sweep on the H200 (docs/kernels.md) */
#define T128_TILE_DEFAULT "128x128x8x8x16x2x0x8"
/* The small tiling (KERN_TILED128_S, f32): dX of narrow layers (in <= 64,
 * refine_t128_small). The fastest of five 64-wide tilings on the H100
 * (2026-12-06 08:14 UTC, dX forced to tiled128 with VKGRAD_T128_TILE):
 * 308 us at 1,048,576x64x64 against 532 on the default's 128x128 tiles
 * (half of them padding) and 544 on the narrow family; 1,149 / 1,985 /
 * 2,067 at 4,194,304x64x64; 146 / 205 / 161 at 1,048,576x32x16 (64x64x4x4x16
 * 319, 1,239, 131; 64x64x4x8x16 317, 1,169, 139). Created only where the
 * default tiling runs (VKGRAD_T128_TILE unset), so a tiling under test
 * has every tiled128 job. */
#define T128_TILE_SMALL "64x64x8x4x16"
/* the accepted form, as the daemon's refusal gives it (each limit is in
 * the message's first part: t128_tile.c) */
#define T128_TILE_FORM                                                                      \
	"BMxBNxTMxTNxBK[xSPLIT[xPAD[xWX]]], e.g. 128x128x8x8x16 or 128x64x8x4x16x1x0x8 (see " \
	"daemon/kernels/t128_tile.h)"

typedef struct t128_tile {
	bool on; /* false: the fixed kernel */
	uint32_t bm, bn, tm, tn, bk, split, pad, wx;
} t128_tile;

/* The tiling named by `s` (NULL: off). Returns 0, or -1 with err naming
 * VKGRAD_T128_TILE, what is wrong and the accepted form. */
int t128_tile_parse(const char *s, t128_tile *t, char *err, size_t errlen);
/* Threads per workgroup, and its shared memory in bytes. */
uint32_t t128_tile_threads(const t128_tile *t);
uint32_t t128_tile_shared(const t128_tile *t);

/* linear_tiled128_gemm's specialization constants (constant_id 0..12). */
#define T128_SPECS 13
typedef struct t128_spec {
	uint32_t v[T128_SPECS];
	VkSpecializationMapEntry map[T128_SPECS];
	VkSpecializationInfo info;
} t128_spec;
void t128_spec_fill(t128_spec *c, const t128_tile *t);

#endif
