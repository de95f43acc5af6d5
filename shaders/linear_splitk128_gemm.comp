#version 450
#extension GL_GOOGLE_include_directive : require
// @kernel kernel_name=linear_splitk128_gemm domain=linear_backward variant=splitk128 dtype=f32,f16,bf16 status=experimental
//
// Split-K on the 128×128 tile, first pass: linear_tiled128_gemm's fixed
// kernel (8×8 outputs per thread, double-buffered shared memory) over one
// slice of the reduction (the daemon offsets A and B to the slice's first
// k and sets K to its length), writing f32 partial sums of C (dW, with db
// fused as in the tiled kernels, or dX) into slice s of the daemon's
// scratch, in linear_splitk_gemm's layout: the second pass is
// linear_splitk_reduce, the slices added in a fixed order (no atomics).
// For mid-size GEMMs (2048×1024×1024) whose 128×128 tiles are too few to
// fill the GPU: the slices multiply the workgroups. Its f32 build carries
// linear_tiled128_gemm's tunable path too, specialised as that kernel is
// (VKGRAD_T128_TILE; on by default, 128×128 tiles): its C tile is that
// tiling's.
#define VKG_PARTIAL
#include "tiled128_gemm.glsl"
