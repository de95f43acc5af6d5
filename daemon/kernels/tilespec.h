/* daemon/kernels/tilespec.h — the numbers of a tiling knob ("128x64x8x4x16"), as
 * VKGRAD_T128_TILE (t128_tile.h) and VKGRAD_NV2_TILE (nv2_tile.h) take
 * them. */
#ifndef VKG_DAEMON_TILESPEC_H
#define VKG_DAEMON_TILESPEC_H

#include <stddef.h>
#include <stdint.h>

/* Reads min..max numbers of at most 4096 joined by 'x' from s into v
 * (v[n..] left as they are). Returns how many, or 0 with fault (the
 * reason, e.g. "fewer than 5 numbers") filled. */
unsigned tilespec_numbers(const char *s, uint32_t *v, unsigned min, unsigned max, char *fault,
			  size_t faultlen);

#endif
