/* daemon/kernels/coopmat_khr.c — see coopmat_khr.h. */
#include "coopmat_khr.h"
#include "vkext.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARP_BLOCK 64 /* C rows and columns per subgroup (shaders/linear_coopmat_khr_gemm.comp) */
#define STEP_K 32     /* the kernel's reduction step */

bool cmk_shape_fits(cmk_shape s)
{
	return s.m && s.n && s.k && WARP_BLOCK % s.m == 0 && WARP_BLOCK % s.n == 0 &&
	       STEP_K % s.k == 0 && s.k % 8 == 0 && s.m % 8 == 0 && s.n % 8 == 0;
}

int cmk_pick(const cmk_shape *s, int n)
{
	int best = -1;
	uint64_t best_work = 0;
	for (int i = 0; i < n; i++) {
		if (!cmk_shape_fits(s[i]))
			continue;
		if (s[i].m == 16 && s[i].n == 16 && s[i].k == 16)
			return i;
		uint64_t w = (uint64_t)s[i].m * s[i].n * s[i].k;
		if (w > best_work)
			best = i, best_work = w;
	}
	return best;
}

/* The shapes the device multiplies at subgroup scope with A = B = `type`
 * and f32 accumulators; at most cap. */
static int shapes_for(const VkCooperativeMatrixPropertiesKHR *cp, uint32_t n, VkComponentTypeKHR type,
		      cmk_shape *out, int cap)
{
	int k = 0;
	for (uint32_t i = 0; i < n && k < cap; i++)
		if (cp[i].AType == type && cp[i].BType == type && cp[i].CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
		    cp[i].ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && cp[i].scope == VK_SCOPE_SUBGROUP_KHR &&
		    !cp[i].saturatingAccumulation)
			out[k++] = (cmk_shape){cp[i].MSize, cp[i].NSize, cp[i].KSize};
	return k;
}

static void lack(cmk_caps *c, int t, const char *what)
{
	if (!c->why[t][0])
		snprintf(c->why[t], sizeof(c->why[t]), "%s", what);
}

/* Each dtype's shape, from the device's list. */
static void pick_shapes(cmk_caps *c, VkInstance inst, VkPhysicalDevice p)
{
	PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
			inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
	uint32_t n = 0;
	VkCooperativeMatrixPropertiesKHR *cp = NULL;
	if (get && get(p, &n, NULL) == VK_SUCCESS && n > 0 && n < 4096 && (cp = calloc(n, sizeof(*cp)))) {
		for (uint32_t i = 0; i < n; i++)
			cp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
		if (get(p, &n, cp) != VK_SUCCESS)
			n = 0;
	} else {
		n = 0;
	}
	static const struct {
		int t;
		VkComponentTypeKHR type;
		const char *msg;
	} want[] = {
		{PROTO_F16, VK_COMPONENT_TYPE_FLOAT16_KHR,
		 "a subgroup cooperative-matrix shape f16 x f16 -> f32 that fits 64x64 blocks and k steps of 32"},
		{PROTO_BF16, VK_COMPONENT_TYPE_BFLOAT16_KHR,
		 "a subgroup cooperative-matrix shape bf16 x bf16 -> f32 that fits 64x64 blocks and k steps of 32"},
	};
	for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
		cmk_shape s[64];
		int k = shapes_for(cp, n, want[w].type, s, 64);
		int i = cmk_pick(s, k);
		if (i < 0)
			lack(c, want[w].t, want[w].msg);
		else
			c->shape[want[w].t] = s[i];
	}
	free(cp);
}

static void nv2_lack(cmk_caps *c, int t, const char *what)
{
	if (!c->nv2_why[t][0])
		snprintf(c->nv2_why[t], sizeof(c->nv2_why[t]), "%s", what);
}

/* linear_coopmat_nv2_gemm per dtype: the workgroup-scope entries of the
 * flexible-dimension list for its types, and the device's limits. */
static void nv2_collect(cmk_caps *c, VkInstance inst, VkPhysicalDevice p)
{
	PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV get =
		(PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)vkGetInstanceProcAddr(
			inst, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
	uint32_t n = 0;
	VkCooperativeMatrixFlexibleDimensionsPropertiesNV *fp = NULL;
	if (get && get(p, &n, NULL) == VK_SUCCESS && n > 0 && n < 4096 && (fp = calloc(n, sizeof(*fp)))) {
		for (uint32_t i = 0; i < n; i++)
			fp[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
		if (get(p, &n, fp) != VK_SUCCESS)
			n = 0;
	} else {
		n = 0;
	}
	VkPhysicalDeviceCooperativeMatrix2PropertiesNV cp = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
	VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &cp};
	vkGetPhysicalDeviceProperties2(p, &p2);
	const VkPhysicalDeviceLimits *l = &p2.properties.limits;
	for (int t = PROTO_F16; t <= PROTO_BF16; t++) {
		const VkComponentTypeKHR ty = t == PROTO_F16 ? VK_COMPONENT_TYPE_FLOAT16_KHR
							     : VK_COMPONENT_TYPE_BFLOAT16_KHR;
		nv2_offer *o = &c->nv2[t];
		o->max_threads = cp.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
		o->max_dim = cp.cooperativeMatrixFlexibleDimensionsMaxDimension;
		o->wg_max = l->maxComputeWorkGroupInvocations < l->maxComputeWorkGroupSize[0]
				    ? l->maxComputeWorkGroupInvocations : l->maxComputeWorkGroupSize[0];
		for (uint32_t i = 0; i < n && o->n < NV2_FLEX_MAX; i++) {
			const VkCooperativeMatrixFlexibleDimensionsPropertiesNV *f = &fp[i];
			if (f->AType != ty || f->BType != ty || f->CType != VK_COMPONENT_TYPE_FLOAT32_KHR ||
			    f->ResultType != VK_COMPONENT_TYPE_FLOAT32_KHR || f->scope != VK_SCOPE_WORKGROUP_KHR ||
			    f->saturatingAccumulation || !f->MGranularity || !f->NGranularity || !f->KGranularity ||
			    !f->workgroupInvocations)
				continue;
			o->flex[o->n++] = (nv2_flex){f->MGranularity, f->NGranularity, f->KGranularity,
						     f->workgroupInvocations};
		}
		if (!o->n)
			nv2_lack(c, t, t == PROTO_F16 ? "a workgroup-scope f16 x f16 -> f32 shape"
						      : "a workgroup-scope bf16 x bf16 -> f32 shape");
	}
	free(fp);
}

/* VK_NV_cooperative_matrix2 for linear_coopmat_nv2_gemm, on top of what
 * linear_coopmat_khr_gemm needs; `off`: VKGRAD_NO_COOPMAT_NV2 is set. */
static void nv2_query(cmk_caps *c, VkInstance inst, VkPhysicalDevice p, uint32_t api_version, bool off)
{
	const bool ext = vkext_has(p, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
	VkPhysicalDeviceCooperativeMatrix2FeaturesNV f = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
	if (ext)
		vkGetPhysicalDeviceFeatures2(p, &f2);
	for (int t = PROTO_F16; t <= PROTO_BF16; t++) {
		if (!c->ok[t])
			nv2_lack(c, t, c->why[t]);
		if (!ext)
			nv2_lack(c, t, "VK_NV_cooperative_matrix2");
		if (!f.cooperativeMatrixWorkgroupScope || !f.cooperativeMatrixFlexibleDimensions ||
		    !f.cooperativeMatrixTensorAddressing)
			nv2_lack(c, t, "VK_NV_cooperative_matrix2 with workgroup scope, flexible dimensions and "
				       "tensor addressing");
		if (api_version < VK_API_VERSION_1_3)
			nv2_lack(c, t, "Vulkan 1.3 (its shader is SPIR-V 1.6)");
	}
	/* its bf16 build rounds each element to nearest before converting
	 * (coopMatPerElementNV: the driver's conversion cuts toward zero) */
	if (!f.cooperativeMatrixPerElementOperations)
		nv2_lack(c, PROTO_BF16, "VK_NV_cooperative_matrix2 with per-element operations");
	if (off) {
		nv2_lack(c, PROTO_F16, "VK_NV_cooperative_matrix2, switched off by VKGRAD_NO_COOPMAT_NV2");
		nv2_lack(c, PROTO_BF16, "VK_NV_cooperative_matrix2, switched off by VKGRAD_NO_COOPMAT_NV2");
	}
	if (ext && f.cooperativeMatrixFlexibleDimensions)
		nv2_collect(c, inst, p);
	for (int t = PROTO_F16; t <= PROTO_BF16; t++)
		c->nv2_ok[t] = !c->nv2_why[t][0];
	c->use_nv2 = c->nv2_ok[PROTO_F16] || c->nv2_ok[PROTO_BF16];
	if (c->use_nv2) {
		c->en_nv2 = f; /* every feature the device has */
		c->en_nv2.pNext = NULL;
	}
}

void cmk_query(cmk_caps *c, VkInstance inst, VkPhysicalDevice p, bool storage16, uint32_t subgroup,
	       uint32_t api_version, const config_env *env)
{
	memset(c, 0, sizeof(*c));
	nv2_lack(c, PROTO_F32, "dtype f16 or bf16 (it multiplies 16-bit operands)");
	if (env->no_coopmat_khr) {
		for (int t = PROTO_F32; t <= PROTO_BF16; t++) {
			lack(c, t, "VK_KHR_cooperative_matrix, switched off by VKGRAD_NO_COOPMAT_KHR");
			nv2_lack(c, t, c->why[t]);
		}
		return;
	}
	const bool ext_cm = vkext_has(p, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
	const bool ext_bf = vkext_has(p, VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME);
	VkPhysicalDeviceShaderBfloat16FeaturesKHR fbf = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcm = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
		.pNext = ext_bf ? &fbf : NULL};
	VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
						.pNext = ext_cm ? &fcm : NULL};
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12};
	vkGetPhysicalDeviceFeatures2(p, &f2);
	for (int t = PROTO_F16; t <= PROTO_BF16; t++) {
		if (!ext_cm || !fcm.cooperativeMatrix)
			lack(c, t, "VK_KHR_cooperative_matrix");
		if (!storage16)
			lack(c, t, "16-bit storage buffers (storageBuffer16BitAccess)");
		if (!f12.vulkanMemoryModel)
			lack(c, t, "the Vulkan memory model (vulkanMemoryModel)");
		if (subgroup != 32)
			lack(c, t, "32-wide subgroups (the kernel's tiling)");
	}
	if (!f12.shaderFloat16)
		lack(c, PROTO_F16, "f16 arithmetic in shaders (shaderFloat16)");
	if (!ext_bf || !fbf.shaderBFloat16Type || !fbf.shaderBFloat16CooperativeMatrix)
		lack(c, PROTO_BF16, "VK_KHR_shader_bfloat16 with shaderBFloat16CooperativeMatrix");
	if (ext_cm && fcm.cooperativeMatrix)
		pick_shapes(c, inst, p);
	/* f32 (linear_coopmat_khr_f32x3_gemm): bf16 pieces of each operand on
	 * the bf16 matrices, with their shape */
	if (c->why[PROTO_BF16][0])
		lack(c, PROTO_F32, c->why[PROTO_BF16]);
	else
		c->shape[PROTO_F32] = c->shape[PROTO_BF16];
	for (int t = PROTO_F32; t <= PROTO_BF16; t++)
		c->ok[t] = !c->why[t][0];
	nv2_query(c, inst, p, api_version, env->no_coopmat_nv2);
	c->use_cm = c->ok[PROTO_F16] || c->ok[PROTO_BF16];
	c->use_bf16 = c->ok[PROTO_BF16];
	/* (the bf16 build of linear_coopmat_nv2_gemm declares Float16 too) */
	c->use_f16_arith = c->ok[PROTO_F16] || c->use_nv2;
	c->use_memory_model = c->use_cm;
}

void cmk_enable(cmk_caps *c, void **next, const char **ext, uint32_t *n_ext,
		VkPhysicalDeviceVulkan12Features *en12)
{
	if (!c->use_cm)
		return;
	c->en_cm = (VkPhysicalDeviceCooperativeMatrixFeaturesKHR){
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
		.pNext = *next,
		.cooperativeMatrix = VK_TRUE,
	};
	*next = &c->en_cm;
	ext[(*n_ext)++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
	if (c->use_bf16) {
		c->en_bf16 = (VkPhysicalDeviceShaderBfloat16FeaturesKHR){
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR,
			.pNext = *next,
			.shaderBFloat16Type = VK_TRUE,
			.shaderBFloat16CooperativeMatrix = VK_TRUE,
		};
		*next = &c->en_bf16;
		ext[(*n_ext)++] = VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME;
	}
	if (c->use_nv2) {
		c->en_nv2.pNext = *next;
		*next = &c->en_nv2;
		ext[(*n_ext)++] = VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME;
	}
	if (c->use_f16_arith)
		en12->shaderFloat16 = VK_TRUE;
	if (c->use_memory_model)
		en12->vulkanMemoryModel = VK_TRUE;
}
