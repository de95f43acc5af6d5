// shaders/narrow.glsl — the narrow kernels' block loads (linear_narrow_param,
// linear_narrow_input; interfaces in shaders/iface/kernels.h).
//
// A block is NR rows × nc columns (nc <= 64) of a row-major matrix whose
// rows are S elements apart, starting at element `base`. The 256 threads
// take it as one flattened run of NR·nc elements, NARROW_EPT each, in units
// of VW consecutive elements (16 bytes: 4 f32 or 8 f16/bf16): thread t's
// unit j starts at element (t + 256·j)·VW. Where the block is whole rows
// (nc == S) the run is contiguous in memory, so every load of a warp is one
// coalesced stretch whatever the row length (a layer of 5 features as well
// as one of 64); where it is not, units stay within a row when nc and S are
// multiples of VW. A unit is one 16-byte load when `vec` says its vectors
// are aligned (the caller's test) and it lies wholly before `nvalid`;
// otherwise VW scalar loads, zero past nvalid. NARROW_LOAD fills a
// thread's registers (issued early: the loads are in flight while the
// previous block is multiplied), NARROW_PUT stores them to shared memory
// through PUT(row, column, value), zeros from nvalid up to NR·nc.
//
// Needs dtype.glsl and GL_EXT_control_flow_attributes; define NARROW_EPT
// (elements per thread: NR·nc <= 256·NARROW_EPT) first.

#if defined(VKG_DTYPE_F16) || defined(VKG_DTYPE_BF16)
#define VW 8u
#define VTYPE uvec4
#else
#define VW 4u
#define VTYPE vec4
#endif
#define NU (NARROW_EPT / VW) // units per thread

// Lane k of a 16-byte vector, widened to f32.
float vlane(VTYPE w, uint k)
{
#if defined(VKG_DTYPE_F16)
	return unpackHalf2x16(w[k >> 1])[k & 1u];
#elif defined(VKG_DTYPE_BF16)
	return uintBitsToFloat((k & 1u) == 0u ? w[k >> 1] << 16 : w[k >> 1] & 0xffff0000u);
#else
	return w[k];
#endif
}

#define NARROW_LOAD(BUF, BUFV, v, base, S, nc, nvalid, vec) NARROW_LOAD_N(NU, BUF, BUFV, v, base, S, nc, nvalid, vec)
// NARROW_LOAD of `nu` units per thread (nu <= NU; v holds nu·VW elements)
#define NARROW_LOAD_N(nu, BUF, BUFV, v, base, S, nc, nvalid, vec)                             \
	[[unroll]] for (uint j_ = 0u; j_ < (nu); j_++) {                                       \
		const uint e0_ = (gl_LocalInvocationIndex + j_ * 256u) * VW;                   \
		uint r_ = e0_ / (nc), c_ = e0_ - r_ * (nc);                                   \
		if ((vec) && e0_ + VW <= (nvalid)) {                                           \
			const VTYPE w_ = BUFV[((base) + r_ * (S) + c_) / VW];                  \
			[[unroll]] for (uint k_ = 0u; k_ < VW; k_++)                           \
				v[j_ * VW + k_] = vlane(w_, k_);                               \
		} else {                                                                       \
			[[unroll]] for (uint k_ = 0u; k_ < VW; k_++) {                         \
				v[j_ * VW + k_] = e0_ + k_ < (nvalid) ? LOAD(BUF[(base) + r_ * (S) + c_]) : 0.0; \
				if (++c_ == (nc)) {                                            \
					c_ = 0u;                                               \
					r_++;                                                  \
				}                                                              \
			}                                                                      \
		}                                                                              \
	}

// One unit of NARROW_PUT element by element: the VW values of unit j_,
// starting at element e0_ (row r_, column c_), those before nblock.
#define NARROW_PUT_UNIT(v, nc, nblock, PUT)                                                   \
	[[unroll]] for (uint k_ = 0u; k_ < VW; k_++) {                                         \
		if (e0_ + k_ < (nblock))                                                       \
			PUT(r_, c_, v[j_ * VW + k_]);                                          \
		if (++c_ == (nc)) {                                                            \
			c_ = 0u;                                                               \
			r_++;                                                                  \
		}                                                                              \
	}

#define NARROW_PUT(v, nc, nblock, PUT)                                                        \
	[[unroll]] for (uint j_ = 0u; j_ < NU; j_++) {                                         \
		const uint e0_ = (gl_LocalInvocationIndex + j_ * 256u) * VW;                   \
		uint r_ = e0_ / (nc), c_ = e0_ - r_ * (nc);                                   \
		NARROW_PUT_UNIT(v, nc, nblock, PUT)                                            \
	}

// NARROW_PUT where rows of the shared block are vec4s (PUT4(row, column,
// vec4), column a multiple of 4): a unit that starts on a multiple of 4
// and lies within one row is stored 16 bytes at a time (consecutive
// threads, consecutive vec4: no bank conflicts), others element by
// element as NARROW_PUT.
#define NARROW_PUT_V(v, nc, nblock, PUT, PUT4) NARROW_PUT_V_N(NU, v, nc, nblock, PUT, PUT4)
// NARROW_PUT_V of `nu` units per thread (as NARROW_LOAD_N)
#define NARROW_PUT_V_N(nu, v, nc, nblock, PUT, PUT4)                                          \
	[[unroll]] for (uint j_ = 0u; j_ < (nu); j_++) {                                       \
		const uint e0_ = (gl_LocalInvocationIndex + j_ * 256u) * VW;                   \
		uint r_ = e0_ / (nc), c_ = e0_ - r_ * (nc);                                   \
		if ((c_ & 3u) == 0u && c_ + VW <= (nc) && e0_ + VW <= (nblock)) {              \
			[[unroll]] for (uint q_ = 0u; q_ < VW / 4u; q_++)                      \
				PUT4(r_, c_ + 4u * q_, vec4(v[j_ * VW + 4u * q_], v[j_ * VW + 4u * q_ + 1u], \
							    v[j_ * VW + 4u * q_ + 2u], v[j_ * VW + 4u * q_ + 3u])); \
		} else {                                                                       \
			NARROW_PUT_UNIT(v, nc, nblock, PUT)                                    \
		}                                                                              \
	}

// The least power of two >= n (n <= 256).
uint narrow_pow2(uint n)
{
	return n <= 1u ? 1u : 1u << (findMSB(n - 1u) + 1);
}
