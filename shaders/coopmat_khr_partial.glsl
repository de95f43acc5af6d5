// shaders/coopmat_khr_partial.glsl — the push constants of the
// cooperative-matrix GEMMs (coopmat_khr_gemm.glsl, coopmat_khr_f32x3_gemm.glsl)
// and, built with VKG_PARTIAL (split-K), where a workgroup's slice of the
// reduction lies: the CMK_* names the loads, stores and main() read.
#if defined(VKG_PARTIAL)
#if defined(VKG_FUSED_DX)
// (linear_coopmat_khr_splitk_dx_gemm: three words more, for dX)
layout(push_constant) uniform Params { VKG_PC_GEMM_SPLIT_DX(uint) } pc;
#else
layout(push_constant) uniform Params { VKG_PC_GEMM_SPLIT(uint) } pc;
#endif

// This workgroup's slice of the reduction (partial_setup): its length, where
// it starts in A and B, where its partial sums go. The loads and stores
// below read these through the CMK_* names (without VKG_PARTIAL: the push
// constants themselves).
uint slice_k, slice_a_off, slice_b_off, slice_c_off, slice_d_off;
#define CMK_PK slice_k
#define CMK_A_OFF slice_a_off
#define CMK_B_OFF slice_b_off
#define CMK_C_OFF slice_c_off
#define CMK_D_OFF slice_d_off
#if defined(VKG_FUSED_DX)
uint slice_row0; // the slice's first row of the reduction (dX's first row)
#endif

// Workgroup row r = m_base + gl_WorkGroupID.y is slice r / m_tiles, row tile
// r % m_tiles. Slice s covers rows s·slice_len .. of the reduction, at most
// slice_len of them and none past K (the daemon makes every slice start
// inside K; one that did not would have no rows and write zeros). Its C
// partials start at c_off + s·M·N, its row sums at d_off + s·M
// (split-K's layout, which linear_splitk_reduce and linear_narrow_reduce
// both read). Returns the row tile.
uint partial_setup()
{
	const uint r = pc.m_base + gl_WorkGroupID.y;
	const uint s = r / pc.m_tiles;
	const uint k0 = s * pc.slice_len;
	slice_k = k0 < pc.K ? min(pc.slice_len, pc.K - k0) : 0u;
	slice_a_off = pc.a_off + k0 * pc.sak;
	slice_b_off = pc.b_off + k0 * pc.N;
	slice_c_off = pc.c_off + s * pc.M * pc.N;
	slice_d_off = pc.d_off + s * pc.M;
#if defined(VKG_FUSED_DX)
	slice_row0 = k0;
#endif
	return r % pc.m_tiles;
}
#else
layout(push_constant) uniform Params { VKG_PC_GEMM(uint) } pc;
#define CMK_PK pc.K
#define CMK_A_OFF pc.a_off
#define CMK_B_OFF pc.b_off
#define CMK_C_OFF pc.c_off
#define CMK_D_OFF pc.d_off
#endif
