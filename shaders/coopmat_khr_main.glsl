// shaders/coopmat_khr_main.glsl — the main() of the cooperative-matrix
// GEMMs (coopmat_khr_gemm.glsl: f16/bf16; coopmat_khr_f32x3_gemm.glsl: f32
// as three bf16 products), plain and split-K (VKG_PARTIAL): the tile's
// slices of the reduction through two shared stages, the next slice's loads
// in flight while the current one is multiplied, then db's sums and the
// staged epilogue. The including file defines what differs: multiply()
// (one product or three), LOAD_SLICE / STORE_SLICE (16-bit vectors, or f32
// split into hi and lo), store_bias, store_c8, partial_setup and CMK_PK /
// CMK_C_OFF (VKG_PARTIAL), and the tiling constants; with VKG_FUSED_DX
// (split-K with dX beside dW) also load_w (W's tile into shared memory)
// and fused_dx (each step's rows of dX).
void main()
{
	const uint warp = gl_SubgroupID;
	const uint wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
#if defined(VKG_PARTIAL)
	const uint m0 = partial_setup() * BM;
#else
	const uint m0 = (pc.m_base + gl_WorkGroupID.y) * BM;
#endif
	const uint n0 = (pc.n_base + gl_WorkGroupID.x) * BN;
	const bool want_d = (pc.flags & VKG_FLAG_WRITE_D) != 0u && n0 == 0u && A_KMAJOR != 0u;
	const bool vec = (pc.flags & VKG_FLAG_VEC_LOADS) != 0u;
	const bool accum = (pc.flags & VKG_FLAG_ACCUMULATE) != 0u;

	[[unroll]] for (uint i = 0u; i < TM * TN; i++)
		acc[i] = coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>(0.0);
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		part[e] = 0.0;

	const uint nk = (CMK_PK + BK - 1u) / BK;
	LOAD_SLICE(ra0, rb0, 0u);
	STORE_SLICE(ra0, rb0, 0u);
#if defined(VKG_FUSED_DX)
	const bool xvec = (pc.dx_flags & VKG_FLAG_VEC_LOADS) != 0u;
	const bool xaccum = (pc.dx_flags & VKG_FLAG_ACCUMULATE) != 0u;
	load_w(n0, xvec); // (read after the barrier below)
#endif
	if (DEPTH == 2u && nk > 1u)
		LOAD_SLICE(ra1, rb1, BK);
	barrier();
	// Step kt multiplies stage kt % 2 and then stores slice kt + 1 into the
	// other stage (last read in step kt - 1, before the barrier). DEPTH 1:
	// slice kt + 1 is loaded (set 0) at the start of step kt; DEPTH 2: it was
	// loaded in step kt - 1 (set (kt + 1) % 2), and step kt loads slice kt + 2
	// into set kt % 2. Two steps per trip, so the sets are named statically.
	for (uint kt = 0u; kt < nk; kt += 2u) {
		[[unroll]] for (uint h = 0u; h < 2u; h++) {
			const uint ks = kt + h;
			if (ks >= nk)
				continue; // (uniform: the workgroup skips it together)
			const bool more = ks + 1u < nk;
			if (DEPTH == 1u && more)
				LOAD_SLICE(ra0, rb0, (ks + 1u) * BK);
			if (DEPTH == 2u && ks + 2u < nk) {
				if (h == 0u)
					LOAD_SLICE(ra0, rb0, (ks + 2u) * BK)
				else
					LOAD_SLICE(ra1, rb1, (ks + 2u) * BK)
			}
			const uint base = h * STAGE;
			multiply(base, wm, wn);
#if defined(VKG_FUSED_DX)
			// dX of the stage's rows, before the barrier below (after it
			// step ks + 1 stores slice ks + 2 into this stage)
			fused_dx(base, ks, n0, xaccum, xvec);
#endif
			if (more) {
				if (DEPTH == 1u || h == 1u)
					STORE_SLICE(ra0, rb0, STAGE - base)
				else
					STORE_SLICE(ra1, rb1, STAGE - base)
			}
			barrier();
		}
	}
	// (the loop ended with a barrier: every subgroup is done with the stages)

	if (want_d)
		store_bias(part, m0, accum);
	if ((pc.flags & VKG_FLAG_WRITE_C) == 0u)
		return;
	if (want_d)
		barrier(); // the partial sums sat where the staging goes
	const bool cvec = vec && pc.N % 8u == 0u && CMK_C_OFF % 8u == 0u;
	const uint lane = gl_SubgroupInvocationID;
	const uint ebase = warp * CM_M * ESTR;
	[[unroll]] for (uint i = 0u; i < TM; i++) {
		[[unroll]] for (uint j = 0u; j < TN; j++)
			coopMatStore(acc[i * TN + j], sh, ebase + j * CM_N / 4u, ESTR,
				     gl_CooperativeMatrixLayoutRowMajor);
		subgroupMemoryBarrierShared();
		subgroupBarrier();
		// CM_M rows of WN values, eight at a time, spread over the lanes
		[[unroll]] for (uint q = 0u; q < CM_M * WN / 8u / 32u; q++) {
			const uint v = lane + 32u * q;
			const uint r = v / (WN / 8u), c8i = v % (WN / 8u);
			const uint e = ebase + r * ESTR + c8i * 2u;
			store_c8(m0 + wm + i * CM_M + r, n0 + wn + c8i * 8u, uintBitsToFloat(sh[e]),
				 uintBitsToFloat(sh[e + 1u]), accum, cvec);
		}
		subgroupBarrier();
	}
}
