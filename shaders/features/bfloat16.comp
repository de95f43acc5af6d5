#version 450
// Feature test (scripts/shader-tools.sh): does the compiler know GL_EXT_bfloat16 (in cooperative matrices too)?
#extension GL_EXT_bfloat16 : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer B { bfloat16_t v[]; };
void main() { coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m; coopMatLoad(m, v, 0, 16, gl_CooperativeMatrixLayoutRowMajor); coopMatStore(m, v, 256, 16, gl_CooperativeMatrixLayoutRowMajor); }
