// shaders/narrow_mt8.glsl — linear_narrow_param's f32 path for a whole
// 64×64 tile of dW (both sides 64 wide, 16-byte aligned): the 256 threads
// are 64 8×8 output micro-tiles × 4 row groups instead of 256 4×4 tiles ×
// one group. A thread's tile is rows {4·oq .. +3} ∪ {32 + 4·oq .. +3} and
// columns {4·iq .. +3} ∪ {32 + 4·iq .. +3} (oq, iq < 8): per row it reads
// four vec4 from shared memory for 64 FMAs (the 4×4 tiles: two for 16), and
// the eight threads of a quarter warp read eight consecutive vec4 of X (no
// bank conflicts) and one of dY (a broadcast). db is summed from the
// thread's own loaded registers of dY (its columns are fixed: 4·(t mod 16)
// .. +3), not from shared memory by every micro-tile. The groups, and db's
// 16 threads per column quad, are summed by fixed trees: the same bits
// every run.
//
// Included by linear_narrow_param.comp after its shared arrays (ys4, xs4,
// 1024 vec4 each) and buffers; f32 only.

#define MT8_U 1u   // rows a thread takes at a time
#define MT8_SR 32u // rows per step: two buffers of 512 vec4 in each array

// A step's 32 rows × 64 columns of a row-major matrix (rows S apart) from
// element `base`, 2 vec4 per thread: unit j is vec4 (t + 256·j) of the
// step, row (t + 256·j) / 16, quad t mod 16; rows from nr on are zero.
#define MT8_LOAD(BUFV, v, base, S, nr)                                                 \
	[[unroll]] for (uint j_ = 0u; j_ < 2u; j_++) {                                 \
		const uint u_ = gl_LocalInvocationIndex + j_ * 256u;                   \
		const uint r_ = u_ >> 4, q_ = u_ & 15u;                                \
		v[j_] = r_ < (nr) ? BUFV[((base) + r_ * (S)) / 4u + q_] : vec4(0.0);   \
	}

void narrow_param_mt8(uint i0, uint o0, uint r_begin, uint r_end, uint blk, bool want_db)
{
	const uint tid = gl_LocalInvocationIndex;
	const uint m = tid & 63u, g = tid >> 6;
	const uint oq = m >> 3, iq = m & 7u;
	const uint steps = (r_end - r_begin + MT8_SR - 1u) / MT8_SR;

	vec4 c0[8], c1[8]; // row a of the tile: columns 4·iq.. (c0), 32 + 4·iq.. (c1)
	[[unroll]] for (uint a = 0u; a < 8u; a++) {
		c0[a] = vec4(0.0);
		c1[a] = vec4(0.0);
	}
	vec4 bs = vec4(0.0); // db of columns 4·(tid mod 16) .. +3
	vec4 ry[2], rx[2];
	// double-buffered: step s multiplies buffer s mod 2 while step s + 1's
	// rows go to the other (read last in step s − 1, before this step's
	// barrier) and step s + 2's are in flight: one barrier a step
	uint row = r_begin;
	if (steps > 0u) {
		const uint nr = min(MT8_SR, r_end - row);
		MT8_LOAD(dyv4, ry, pc.dy_off + row * pc.n_out + o0, pc.n_out, nr)
		MT8_LOAD(xv4, rx, pc.x_off + row * pc.n_in + i0, pc.n_in, nr)
		[[unroll]] for (uint j = 0u; j < 2u; j++) {
			ys4[tid + j * 256u] = ry[j];
			xs4[tid + j * 256u] = rx[j];
			bs += ry[j];
		}
	}
	if (steps > 1u) {
		row += MT8_SR;
		const uint nr = min(MT8_SR, r_end - row);
		MT8_LOAD(dyv4, ry, pc.dy_off + row * pc.n_out + o0, pc.n_out, nr)
		MT8_LOAD(xv4, rx, pc.x_off + row * pc.n_in + i0, pc.n_in, nr)
	}
	for (uint s = 0u; s < steps; s++) {
		barrier();
		const uint cur = (s & 1u) * 512u;
		for (uint r = g * MT8_U; r < MT8_SR; r += 4u * MT8_U) {
			vec4 y0[MT8_U], y1[MT8_U], x0[MT8_U], x1[MT8_U];
			[[unroll]] for (uint u = 0u; u < MT8_U; u++) {
				const uint b = cur + (r + u) * 16u;
				y0[u] = ys4[b + oq];
				y1[u] = ys4[b + 8u + oq];
				x0[u] = xs4[b + iq];
				x1[u] = xs4[b + 8u + iq];
			}
			[[unroll]] for (uint u = 0u; u < MT8_U; u++) {
				[[unroll]] for (uint a = 0u; a < 4u; a++) {
					c0[a] += y0[u][a] * x0[u];
					c1[a] += y0[u][a] * x1[u];
					c0[4u + a] += y1[u][a] * x0[u];
					c1[4u + a] += y1[u][a] * x1[u];
				}
			}
		}
		if (s + 1u < steps) {
			const uint nxt = 512u - cur;
			[[unroll]] for (uint j = 0u; j < 2u; j++) {
				ys4[nxt + tid + j * 256u] = ry[j];
				xs4[nxt + tid + j * 256u] = rx[j];
				bs += ry[j];
			}
			if (s + 2u < steps) {
				row += MT8_SR;
				const uint nr = min(MT8_SR, r_end - row);
				MT8_LOAD(dyv4, ry, pc.dy_off + row * pc.n_out + o0, pc.n_out, nr)
				MT8_LOAD(xv4, rx, pc.x_off + row * pc.n_in + i0, pc.n_in, nr)
			}
		}
	}

	// the row groups' sums by a fixed tree: 3 and 2 onto 1 and 0, then 1
	// onto 0 (16 vec4 a thread: 2048 in ys4 and xs4 for two groups)
	barrier();
	if (g >= 2u) {
		const uint b = (tid - 128u) * 16u;
		[[unroll]] for (uint a = 0u; a < 8u; a++) {
			if (b < 1024u) {
				ys4[b + a] = c0[a];
				ys4[b + 8u + a] = c1[a];
			} else {
				xs4[b - 1024u + a] = c0[a];
				xs4[b - 1024u + 8u + a] = c1[a];
			}
		}
	}
	barrier();
	if (g < 2u) {
		const uint b = tid * 16u;
		[[unroll]] for (uint a = 0u; a < 8u; a++) {
			if (b < 1024u) {
				c0[a] += ys4[b + a];
				c1[a] += ys4[b + 8u + a];
			} else {
				c0[a] += xs4[b - 1024u + a];
				c1[a] += xs4[b - 1024u + 8u + a];
			}
		}
	}
	barrier();
	if (g == 1u) {
		const uint b = m * 16u;
		[[unroll]] for (uint a = 0u; a < 8u; a++) {
			ys4[b + a] = c0[a];
			ys4[b + 8u + a] = c1[a];
		}
	}
	xs4[tid] = bs;
	barrier();
	const uint base = pc.p_off + blk * pc.stride;
	if (g == 0u) {
		const uint b = m * 16u;
		[[unroll]] for (uint a = 0u; a < 8u; a++) {
			c0[a] += ys4[b + a];
			c1[a] += ys4[b + 8u + a];
			const uint o = o0 + (a < 4u ? 4u * oq + a : 32u + 4u * oq + a - 4u);
			[[unroll]] for (uint c = 0u; c < 4u; c++) {
				part[base + o * pc.n_in + i0 + 4u * iq + c] = c0[a][c];
				part[base + o * pc.n_in + i0 + 32u + 4u * iq + c] = c1[a][c];
			}
		}
	}
	// db: column quad q's 16 threads (q, q + 16, ..) in order
	if (want_db && tid < 16u) {
		vec4 v = xs4[tid];
		for (uint k = 1u; k < 16u; k++)
			v += xs4[tid + 16u * k];
		[[unroll]] for (uint a = 0u; a < 4u; a++)
			part[base + pc.stride - pc.n_out + o0 + 4u * tid + a] = v[a];
	}
}
