#version 450
#extension GL_GOOGLE_include_directive : require
// @kernel kernel_name=linear_tiled128_gemm domain=linear_backward variant=tiled128 dtype=f32,f16,bf16 status=experimental
//
// linear_tiled_gemm with a 128×128 tile of C per workgroup of 256 threads
// (8×8 outputs each): half the loads per multiply-add of the 64×64 tile, for
// problems with enough 128×128 tiles to fill the GPU. Same push constants,
// same fused db. See tiled_gemm.glsl.
#define TILE 128
#include "tiled_gemm.glsl"
