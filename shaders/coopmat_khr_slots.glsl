// shaders/coopmat_khr_slots.glsl — where the cooperative-matrix GEMMs'
// (coopmat_khr_gemm.glsl, coopmat_khr_f32x3_gemm.glsl) threads put the
// vectors of 8 they load: vector q of this thread's share of a slice is A
// element (m, k) of the tile, B element (k, n), and its index in shared
// memory (a stage's A part, then its B part at A_STAGE). Needs NT, BM, BN,
// BK, ASTR_KM, ASTR_MK, BSTR, A_STAGE and A_KMAJOR.
void a_slot(uint q, out uint m, out uint k, out uint at)
{
	const uint v = gl_LocalInvocationID.x + q * NT;
	if (A_KMAJOR != 0u) {
		k = v / (BM / 8u);
		m = (v % (BM / 8u)) * 8u;
		at = k * ASTR_KM + m / 8u;
	} else {
		m = v / (BK / 8u);
		k = (v % (BK / 8u)) * 8u;
		at = m * ASTR_MK + k / 8u;
	}
}

void b_slot(uint q, out uint k, out uint n, out uint at)
{
	const uint v = gl_LocalInvocationID.x + q * NT;
	k = v / (BN / 8u);
	n = (v % (BN / 8u)) * 8u;
	at = A_STAGE + k * BSTR + n / 8u;
}
