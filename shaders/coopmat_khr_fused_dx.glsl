// shaders/coopmat_khr_fused_dx.glsl — dX = dY·W beside dW in the split-K
// pass on the tensor cores (linear_coopmat_khr_splitk_dx_gemm:
// coopmat_khr_gemm.glsl built with VKG_PARTIAL and VKG_FUSED_DX). Valid
// for out <= BM (one row tile of dW: the A stage holds all of out). The
// workgroup of slice s and column tile j (columns n0 .. n0 + BN - 1 of
// in) streams the slice's rows of dY through its shared stages for dW; for
// those same rows it also computes dX[rows, n0 ..] = dY[rows, 0:out] ·
// W[0:out, n0 ..]: A' = the stage's A part read row-major ([k][m] is row =
// batch row, m = out contiguous), B' = W's tile, loaded into shared memory
// once (load_w). Summed over all of out in f32 and rounded once on the
// store; each element of dX belongs to one slice and one column tile, so
// exactly one workgroup writes it (no atomics, the same bits every run).
// Needs what coopmat_khr_gemm.glsl defines (the tiling constants, SH_W,
// SH_X, XROWS, XTM, narrow1 / widen1 / unpack2 / pack2, the W and dX
// bindings) and coopmat_khr_partial.glsl (pc, CMK_PK, slice_row0).

// Eight elements of W from row o (out), column gn (in); zero outside W.
uvec4 load_w8(uint o, uint gn, bool vec)
{
	if (vec)
		return (o < pc.M && gn < pc.N) ? w8[(pc.w_off + o * pc.N + gn) / 8u] : uvec4(0u);
	uint h[8];
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		h[e] = (o < pc.M && gn + e < pc.N) ? uint(w[pc.w_off + o * pc.N + gn + e]) : 0u;
	return uvec4(h[0] | (h[1] << 16), h[2] | (h[3] << 16), h[4] | (h[5] << 16), h[6] | (h[7] << 16));
}

// W's tile (rows 0 .. BM - 1 of out, columns n0 .. n0 + BN - 1 of in) into
// sh[SH_W ..] as [o][n], zero past out and in; every thread a share of the
// BM·BN/8 vectors. Read after the workgroup's next barrier.
void load_w(uint n0, bool vec)
{
	for (uint v = gl_LocalInvocationID.x; v < BM * BN / 8u; v += NT) {
		const uint o = v / (BN / 8u), n = (v % (BN / 8u)) * 8u;
		sh[SH_W + o * BSTR + n / 8u] = load_w8(o, n0 + n, vec);
	}
}

// Eight f32 values of dX row `row` of the slice (0 .. CMK_PK - 1), from
// column gn: rounded once (accumulate: onto the old values) and written,
// as one uvec4 where xvec (N and dx_off multiples of 8, gn a multiple of
// 8), else one by one. Rows past the slice (the stage's zero padding; the
// next slice's rows) and columns past in are not written.
void store_dx8(uint row, uint gn, vec4 lo, vec4 hi, bool accum, bool xvec)
{
	if (row >= CMK_PK || gn >= pc.N)
		return;
	const uint at = pc.dx_off + (slice_row0 + row) * pc.N + gn;
	if (xvec) {
		if (accum) {
			const uvec4 o = dx8[at / 8u];
			lo += vec4(unpack2(o.x), unpack2(o.y));
			hi += vec4(unpack2(o.z), unpack2(o.w));
		}
		dx8[at / 8u] = uvec4(pack2(lo.x, lo.y), pack2(lo.z, lo.w), pack2(hi.x, hi.y), pack2(hi.z, hi.w));
		return;
	}
	const float v[8] = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
	[[unroll]] for (uint e = 0u; e < 8u; e++)
		if (gn + e < pc.N) {
			const float o = accum ? widen1(uint(dx[at + e])) : 0.0;
			dx[at + e] = uint16_t(narrow1(v[e] + o));
		}
}

coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator> xacc[XTM * TN];

// Step ks's rows of dX (the BK rows of stage `base`, rows ks·BK .. of the
// slice) for column tile n0: subgroup (wi, wj) of the WARPS_M × WARPS_N
// grid takes rows wi·XROWS .. + XROWS - 1 of the step and columns wj·WN ..
// + WN - 1 of the tile, sums over out in CM_K steps (the A stage's
// columns and the W tile's rows past out are zeros; steps wholly past out
// are skipped: pc.M is uniform), stages each CM_M-row band of its f32 sums
// in its own part of sh[SH_X ..] (the epilogue's layout) and stores it.
// Reads stage `base` and W's tile, writes only its own staging: the
// caller's barrier after it orders it before the next store into `base`.
// (Storing a bf16 copy of the accumulators straight to dX, no staging, was
// slower on the H100 — 284 against 212 us for 1,048,576x64x64's full
// backward — and its conversion was not round-to-nearest-even: max_rel_err
// 4.4e-3 against 2.6e-3; docs/performance.md, twelfth run.)
void fused_dx(uint base, uint ks, uint n0, bool accum, bool xvec)
{
	const uint warp = gl_SubgroupID;
	const uint xm = (warp / WARPS_N) * XROWS, wn = (warp % WARPS_N) * WN;
	[[unroll]] for (uint i = 0u; i < XTM * TN; i++)
		xacc[i] = coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>(0.0);
	[[unroll]] for (uint kk = 0u; kk < BM; kk += CM_K) {
		if (kk >= pc.M)
			break;
		coopmat<ETYPE, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA> fa[XTM];
		coopmat<ETYPE, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB> fb[TN];
		[[unroll]] for (uint i = 0u; i < XTM; i++)
			coopMatLoad(fa[i], sh, base + (xm + i * CM_M) * ASTR_KM + kk / 8u, ASTR_KM,
				    gl_CooperativeMatrixLayoutRowMajor);
		[[unroll]] for (uint j = 0u; j < TN; j++)
			coopMatLoad(fb[j], sh, SH_W + kk * BSTR + (wn + j * CM_N) / 8u, BSTR,
				    gl_CooperativeMatrixLayoutRowMajor);
		[[unroll]] for (uint i = 0u; i < XTM; i++)
			[[unroll]] for (uint j = 0u; j < TN; j++)
				xacc[i * TN + j] = coopMatMulAdd(fa[i], fb[j], xacc[i * TN + j]);
	}
	const uint lane = gl_SubgroupInvocationID;
	const uint xbase = SH_X + warp * CM_M * ESTR;
	[[unroll]] for (uint i = 0u; i < XTM; i++) {
		[[unroll]] for (uint j = 0u; j < TN; j++)
			coopMatStore(xacc[i * TN + j], sh, xbase + j * CM_N / 4u, ESTR,
				     gl_CooperativeMatrixLayoutRowMajor);
		subgroupMemoryBarrierShared();
		subgroupBarrier();
		// CM_M rows of WN values, eight at a time, spread over the lanes
		[[unroll]] for (uint q = 0u; q < CM_M * WN / 8u / 32u; q++) {
			const uint v = lane + 32u * q;
			const uint r = v / (WN / 8u), c8i = v % (WN / 8u);
			const uint e = xbase + r * ESTR + c8i * 2u;
			store_dx8(ks * BK + xm + i * CM_M + r, n0 + wn + c8i * 8u, uintBitsToFloat(sh[e]),
				  uintBitsToFloat(sh[e + 1u]), accum, xvec);
		}
		subgroupBarrier();
	}
}
