/* daemon/kernels/dxs_tile.h — the tiling of linear_coopmat_khr_dx_stream
 * (shaders/linear_coopmat_khr_dx_stream.comp: a narrow layer's 16-bit dX =
 * dY·W with W in registers, dY streamed through shared memory), its
 * specialization constants, and which GEMMs it takes.
 *
 * On by default (its test ran to its end on the H100 on 2026-12-07:
 * docs/performance.md, sixteenth run). Unset or VKGRAD_DXS_TILE=on: the
 * three classes' tilings below; "NWxTKxRTxSTRIPS[xAHEAD]": NW subgroups of
 * 32 per workgroup, each 16 columns of dX with W's K × 16 block held as
 * TK 16×16 matrices (the reduction K = out at most 16·TK), strips of
 * 16·RT rows, STRIPS of them per workgroup: a tile of 16·RT·STRIPS rows ×
 * 16·NW columns; AHEAD (1 or 2, unset 1) strips' loads in flight while
 * one is multiplied; for every class, or three of them joined by commas,
 * one per class; "off": no such pipeline (auto's dX stays on
 * coopmat_khr).
 *
 * Three pipelines, one per class of K (out): up to 64, up to 128, up to
 * 256 (DXS_CLASS_MAX_K), each with its own tiling (DXS_TILE_DEFAULTS,
 * measured: docs/kernels.md) by default, or all three the
 * one it names. A GEMM takes the first class that holds its K and whose tiling
 * takes it (dxs_tile_takes). */
#ifndef VKG_DAEMON_DXS_TILE_H
#define VKG_DAEMON_DXS_TILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DXS_TILE_ENV "VKGRAD_DXS_TILE"
/* the classes: K at most 64, 128, 256; their default tilings (H100,
 * 2026-12-07: docs/performance.md, fifteenth, seventeenth and eighteenth
 * runs; the largest on 16 subgroups since the staging holds 16-bit
 * blocks) */
#define DXS_CLASSES 3
#define DXS_CLASS_MAX_K {64u, 128u, 256u}
#define DXS_TILE_DEFAULTS {"4x8x2x16", "8x8x2x16", "16x16x2x16"}
#define DXS_TILE_FORM                                                                   \
	"on, off, or NWxTKxRTxSTRIPS[xAHEAD] (NW 1-32, TK 1-16, RT 1-4, STRIPS 1-64, AHEAD 1-2), " \
	"or three joined by commas (out <= 64, 128, 256)"
#define DXS_SPECS 6 /* NW, TK, RT, STRIPS, the workgroup's threads, AHEAD */

typedef struct dxs_tile {
	bool on;
	uint32_t nw, tk, rt, strips, ahead;
} dxs_tile;

/* The tiling named by s ("off": t->on false). Returns 0, or -1 with err
 * naming VKGRAD_DXS_TILE, what is wrong and the accepted form. */
int dxs_tile_parse(const char *s, dxs_tile *t, char *err, size_t errlen);

/* Class c's tiling for VKGRAD_DXS_TILE's value v: NULL (unset) or "on"
 * the class's default (DXS_TILE_DEFAULTS), "off" off, three tilings
 * joined by commas the c-th's, else dxs_tile_parse's. */
int dxs_tile_choose(const char *v, int c, dxs_tile *t, char *err, size_t errlen);

/* Its tile of dX per workgroup: rows (bm) and columns (bn). */
static inline uint32_t dxs_tile_bm(const dxs_tile *t)
{
	return 16u * t->rt * t->strips;
}
static inline uint32_t dxs_tile_bn(const dxs_tile *t)
{
	return 16u * t->nw;
}

/* Shared memory it takes (two stages of a strip of A, 16·RT rows of
 * 16·TK elements, and each subgroup's staging of a 16×16 block of the
 * storage type, rows padded by 16 bytes) and its workgroup's threads. */
static inline uint32_t dxs_tile_shared(const dxs_tile *t)
{
	return (2u * 16u * t->rt * (2u * t->tk + 1u) + t->nw * 16u * (16u / 8u + 1u)) * 16u;
}
static inline uint32_t dxs_tile_threads(const dxs_tile *t)
{
	return 32u * t->nw;
}

/* Can it take the GEMM C (m × n) = A (m × k, row-major) · B (k × n,
 * row-major), every load and store whole: k and n multiples of 16, k at
 * most 16·TK, m a multiple of its strips' 16·RT rows? (The offsets are
 * checked where the job is recorded: dxs_tile_aligned.) */
bool dxs_tile_takes(const dxs_tile *t, uint64_t m, uint64_t n, uint64_t k);

/* Are A's, B's and C's element offsets multiples of 8 (16 bytes)? */
static inline bool dxs_tile_aligned(uint64_t a_off, uint64_t b_off, uint64_t c_off)
{
	return a_off % 8 == 0 && b_off % 8 == 0 && c_off % 8 == 0;
}

/* Its specialization constants (constant_id 0..5), in order. */
void dxs_tile_specs(const dxs_tile *t, uint32_t v[DXS_SPECS]);

#endif
