#version 450
// @target vulkan1.3
// Feature test (scripts/shader-tools.sh): does the compiler know GL_NV_cooperative_matrix2 (workgroup-scope matrices, tensor layouts)?
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer B { float16_t v[]; };
void main() { tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> l = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV); l = setTensorLayoutDimensionNV(l, 64, 64); coopmat<float16_t, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseA> m; coopMatLoadTensorNV(m, v, 0, sliceTensorLayoutNV(l, 0, 64, 0, 64)); coopMatStoreTensorNV(m, v, 0, sliceTensorLayoutNV(l, 0, 64, 0, 64)); }
