// shaders/partial.glsl — C's element type for the GEMM bodies that write
// either the tensors or partial sums (tiled_gemm.glsl, tiled128_gemm.glsl):
// with VKG_PARTIAL, one slice's f32 partials into the daemon's scratch
// (linear_splitk_reduce adds the slices up); else the job's dtype.
#extension GL_EXT_control_flow_attributes : require
#include "iface/kernels.h"
#include "dtype.glsl"

#ifdef VKG_PARTIAL
#define CTYPE float
#define CLOAD(v) (v)
#define CSTORE(f) (f)
#else
#define CTYPE STYPE
#define CLOAD(v) LOAD(v)
#define CSTORE(f) STORE(f)
#endif
