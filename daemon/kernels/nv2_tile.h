/* daemon/kernels/nv2_tile.h — the tiling of linear_coopmat_nv2_gemm
 * (shaders/linear_coopmat_nv2_gemm.comp): VKGRAD_NV2_TILE, parsed, checked
 * against the device's workgroup-scope entries of
 * vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV, and
 * turned into the pipeline's specialization constants.
 *
 * VKGRAD_NV2_TILE="BMxBNxBKxTHREADS[xUNCLAMP[xUNROLL[xDBAPART]]]": a BM×BN tile of C
 * per workgroup of THREADS invocations (0: the device's choice, 256 where it
 * lists that for granularities dividing the tile, else the most), k steps of BK; UNCLAMP 1: workgroups whose tile lies wholly
 * inside C read A and B through plain (unclamped) tensor layouts with
 * 16-byte-aligned strides, the clamped ones only for the last partial k
 * step and for edge tiles; UNROLL (1, 2, 4 or 8): k steps per trip of that
 * unclamped loop; DBAPART 1: db (dW's row sums) in workgroups of its own,
 * one column past C's tiles, instead of in C's first column of tiles
 * (whose workgroups then carry no row-sum accumulator: fewer registers for
 * all of them, as every workgroup is compiled for the fused case). Unset:
 * NV2_TILE_DEFAULT. The shader declares no shared memory of
 * its own; the driver reserves what its workgroup-scope matrices need,
 * within the device's maxComputeSharedMemorySize. How the defaults were
 * chosen: docs/kernels.md. */
#ifndef VKG_DAEMON_NV2_TILE_H
#define VKG_DAEMON_NV2_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vk_compat.h"

#define NV2_TILE_ENV "VKGRAD_NV2_TILE"
/* the default: the fastest of a sweep on the H200 (docs/kernels.md) */
#define NV2_TILE_DEFAULT "128x256x64x0x1x8x1"
/* the tiling for GEMMs too small for the default's tiles to fill the GPU
 * (refine_nv2_small): the same sweep's best at 2048x1024x1024 */
#define NV2_TILE_SMALL_DEFAULT "128x128x64x0x1x8x0"
#define NV2_TILE_FORM                                                                          \
	"BMxBNxBKxTHREADS[xUNCLAMP[xUNROLL[xDBAPART]]], e.g. 128x128x32x256 or 128x256x64x256x1x8x1 " \
	"(see daemon/kernels/nv2_tile.h)"
/* the smallest k step it takes (kshape_max_k's bound holds for any) */
#define NV2_TILE_MIN_BK 16u
/* workgroup-scope entries kept per dtype */
#define NV2_FLEX_MAX 16

/* One workgroup-scope entry of the device's flexible-dimensions list for
 * a dtype (A = B = it, f32 accumulators): the tile's dimensions must be
 * multiples of the granularities, the workgroup exactly `threads`. */
typedef struct nv2_flex {
	uint32_t mg, ng, kg, threads;
} nv2_flex;

/* What the device offers workgroup-scope matrices of one dtype. */
typedef struct nv2_offer {
	nv2_flex flex[NV2_FLEX_MAX];
	uint32_t n;
	uint32_t max_threads; /* cooperativeMatrixWorkgroupScopeMaxWorkgroupSize (0: not given) */
	uint32_t max_dim;     /* cooperativeMatrixFlexibleDimensionsMaxDimension (0: not given) */
	uint32_t wg_max;      /* maxComputeWorkGroupInvocations and maxComputeWorkGroupSize[0] */
} nv2_offer;

typedef struct nv2_tile {
	uint32_t bm, bn, bk, threads, unclamp, unroll, db_apart;
	uint32_t dbn; /* columns of the row-sum product (db): 16 rounded up to the N granularity */
} nv2_tile;

/* What o lists, as text (for the log and for refusals). */
#define NV2_OFFER_TEXT (40 + NV2_FLEX_MAX * 24 + 64)
void nv2_offer_text(const nv2_offer *o, char *out, size_t len);

/* The tiling named by s (its THREADS may be 0). Returns 0, or -1 with err
 * naming VKGRAD_NV2_TILE, what is wrong and the accepted form. */
int nv2_tile_parse(const char *s, nv2_tile *t, char *err, size_t errlen);

/* Fit t to what the device offers for one dtype (`dtype`: its name, for
 * err): an entry whose granularities divide BM, BN and BK and whose
 * workgroup is THREADS (THREADS 0: 256 where listed, else the largest that
 * fits), within the device's limits. Fills t->threads and t->dbn. Returns
 * 0, or -1 with err naming `name` (the variable, or "the default tiling"),
 * the value and the reason. */
int nv2_tile_fit(nv2_tile *t, const nv2_offer *o, const char *name, const char *value, const char *dtype,
		 char *err, size_t errlen);

/* linear_coopmat_nv2_gemm's specialization constants (constant_id 0..8:
 * THREADS, BM, BN, BK, A_KMAJOR, DBN, UNCLAMP, UNROLL, DB_APART). */
#define NV2_SPECS 9
typedef struct nv2_spec {
	uint32_t v[NV2_SPECS];
	VkSpecializationMapEntry map[NV2_SPECS];
	VkSpecializationInfo info;
} nv2_spec;
void nv2_spec_fill(nv2_spec *c, const nv2_tile *t, bool a_kmajor);

#endif
