#version 450
// Feature test (scripts/shader-tools.sh): does the compiler know GL_KHR_cooperative_matrix?
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer B { float16_t v[]; };
void main() { coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m; coopMatLoad(m, v, 0, 16, gl_CooperativeMatrixLayoutRowMajor); coopMatStore(m, v, 256, 16, gl_CooperativeMatrixLayoutRowMajor); }
