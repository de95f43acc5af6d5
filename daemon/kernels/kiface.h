/* daemon/kernels/kiface.h — the kernels' interfaces as C types: one struct per
 * push-constant block, made from the same field lists the shaders' blocks
 * are (shaders/iface/kernels.h), so dispatch.c fills fields by name. The
 * sizes are checked here at compile time and against each compiled kernel
 * when the pipelines are built (pipelines.c, spirv.c). */
#ifndef VKG_DAEMON_KIFACE_H
#define VKG_DAEMON_KIFACE_H

#include <stddef.h>
#include <stdint.h>

#include "shaders/iface/kernels.h"

typedef struct kiface_param { VKG_PC_PARAM(uint32_t) } kiface_param;
typedef struct kiface_input { VKG_PC_INPUT(uint32_t) } kiface_input;
typedef struct kiface_gemm { VKG_PC_GEMM(uint32_t) } kiface_gemm;
typedef struct kiface_gemm_split { VKG_PC_GEMM_SPLIT(uint32_t) } kiface_gemm_split;
typedef struct kiface_gemm_split_dx { VKG_PC_GEMM_SPLIT_DX(uint32_t) } kiface_gemm_split_dx;
typedef struct kiface_reduce { VKG_PC_REDUCE(uint32_t) } kiface_reduce;
typedef struct kiface_prep { VKG_PC_PREP(uint32_t) } kiface_prep;
typedef struct kiface_act { VKG_PC_ACT(uint32_t) } kiface_act;
typedef struct kiface_optim { VKG_PC_OPTIM(uint32_t) } kiface_optim;
typedef struct kiface_narrow { VKG_PC_NARROW(uint32_t) } kiface_narrow;
typedef struct kiface_narrow_dx { VKG_PC_NARROW_DX(uint32_t) } kiface_narrow_dx;
/* `vkgrad bench --peak`'s microkernels (bench/cli_bench_peak.c) */
typedef struct kiface_peak_fma { VKG_PC_PEAK_FMA(uint32_t) } kiface_peak_fma;
typedef struct kiface_peak_mma { VKG_PC_PEAK_MMA(uint32_t) } kiface_peak_mma;
typedef struct kiface_peak_nv2 { VKG_PC_PEAK_NV2(uint32_t) } kiface_peak_nv2;
typedef struct kiface_peak_copy { VKG_PC_PEAK_COPY(uint32_t) } kiface_peak_copy;

/* 32-bit words, no padding, within the 128 bytes every Vulkan device
 * offers (maxPushConstantsSize); the counts pin the layouts the shaders
 * were written for, so a change to a list is a deliberate one. */
_Static_assert(sizeof(kiface_param) == 10 * sizeof(uint32_t), "linear_parameter_backward push constants");
_Static_assert(sizeof(kiface_input) == 10 * sizeof(uint32_t), "linear_input_backward push constants");
_Static_assert(sizeof(kiface_gemm) == 12 * sizeof(uint32_t), "GEMM kernels' push constants");
_Static_assert(sizeof(kiface_gemm_split) == 14 * sizeof(uint32_t), "linear_coopmat_khr_splitk_gemm push constants");
_Static_assert(sizeof(kiface_gemm_split_dx) == 17 * sizeof(uint32_t), "linear_coopmat_khr_splitk_dx_gemm push constants");
/* (dispatch.c fills its first words as a kiface_gemm_split) */
_Static_assert(offsetof(kiface_gemm_split_dx, w_off) == sizeof(kiface_gemm_split),
	       "linear_coopmat_khr_splitk_dx_gemm's words begin as the split-K GEMM's");
_Static_assert(sizeof(kiface_reduce) == 7 * sizeof(uint32_t), "linear_splitk_reduce push constants");
_Static_assert(sizeof(kiface_prep) == 7 * sizeof(uint32_t), "linear_forward_prep push constants");
_Static_assert(sizeof(kiface_act) == 7 * sizeof(uint32_t), "linear_activation push constants");
_Static_assert(sizeof(kiface_optim) == 12 * sizeof(uint32_t), "optim_step push constants");
_Static_assert(sizeof(kiface_narrow) == 11 * sizeof(uint32_t), "linear_narrow_param push constants");
_Static_assert(sizeof(kiface_narrow_dx) == 11 * sizeof(uint32_t), "linear_narrow_input push constants");
_Static_assert(sizeof(kiface_peak_fma) == 4 * sizeof(uint32_t), "bench_peak_fma push constants");
_Static_assert(sizeof(kiface_peak_mma) == 1 * sizeof(uint32_t), "bench_peak_mma push constants");
_Static_assert(sizeof(kiface_peak_nv2) == 2 * sizeof(uint32_t), "bench_peak_nv2 push constants");
_Static_assert(sizeof(kiface_peak_copy) == 1 * sizeof(uint32_t), "bench_peak_copy push constants");
_Static_assert(sizeof(kiface_gemm) <= 128 && sizeof(kiface_param) <= 128 &&
		       sizeof(kiface_input) <= 128 && sizeof(kiface_reduce) <= 128 &&
		       sizeof(kiface_gemm_split_dx) <= 128,
	       "push constants beyond the guaranteed maxPushConstantsSize");

#endif
