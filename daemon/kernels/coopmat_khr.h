/* daemon/kernels/coopmat_khr.h — what a device offers linear_coopmat_khr_gemm
 * (VK_KHR_cooperative_matrix, and VK_KHR_shader_bfloat16 for bf16): per
 * storage dtype, whether it can run, on which matrix shape (taken from
 * vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR), and if not, why; the
 * same for linear_coopmat_nv2_gemm (VK_NV_cooperative_matrix2 on top of
 * it: workgroup-scope matrices, with the workgroup-scope entries of
 * vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV that
 * its tiling is checked against: nv2_tile.h); plus the extensions and
 * features to enable for them. */
#ifndef VKG_DAEMON_COOPMAT_KHR_H
#define VKG_DAEMON_COOPMAT_KHR_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "msg.h"
#include "nv2_tile.h"
#include "vk_compat.h"

#include "shaders/iface/kernels.h"

typedef struct cmk_shape {
	uint32_t m, n, k; /* one cooperative matrix product: (m×k)·(k×n) */
} cmk_shape;

typedef struct cmk_caps {
	bool ok[PROTO_DTYPE_COUNT];
	cmk_shape shape[PROTO_DTYPE_COUNT];
	char why[PROTO_DTYPE_COUNT][192]; /* !ok: what the device lacks, for `unsupported` */
	/* linear_coopmat_nv2_gemm: what the device offers its workgroup-scope
	 * matrices per dtype (the tiling is fitted to it: pipelines.c) */
	bool nv2_ok[PROTO_DTYPE_COUNT];
	nv2_offer nv2[PROTO_DTYPE_COUNT];
	char nv2_why[PROTO_DTYPE_COUNT][192];
	/* to enable at device creation (cmk_enable) */
	bool use_cm, use_bf16, use_f16_arith, use_memory_model, use_nv2;
	VkPhysicalDeviceCooperativeMatrixFeaturesKHR en_cm;
	VkPhysicalDeviceShaderBfloat16FeaturesKHR en_bf16;
	VkPhysicalDeviceCooperativeMatrix2FeaturesNV en_nv2;
} cmk_caps;

/* Fill c for physical device p. `storage16`: 16-bit storage buffers are
 * available; `subgroup`: the subgroup size (the kernel is written for 32).
 * env->no_coopmat_khr (VKGRAD_NO_COOPMAT_KHR set) makes it offer nothing,
 * env->no_coopmat_nv2 (VKGRAD_NO_COOPMAT_NV2 set) no coopmat_nv2 (switches
 * for measuring without them). */
void cmk_query(cmk_caps *c, VkInstance inst, VkPhysicalDevice p, bool storage16, uint32_t subgroup,
	       uint32_t api_version, const config_env *env);

/* Does the matrix shape s fit the kernel's 64×64 subgroup blocks and its
 * reduction step of 32? (exposed for the unit tests) */
bool cmk_shape_fits(cmk_shape s);

/* The best of n shapes that fit (16×16×16 first, else the most work per
 * product); returns its index, or -1. */
int cmk_pick(const cmk_shape *s, int n);

/* Chain what c needs into a device's create-info feature chain (*next) and
 * its extension list (ext, *next_ext < cap). */
void cmk_enable(cmk_caps *c, void **next, const char **ext, uint32_t *n_ext,
		VkPhysicalDeviceVulkan12Features *en12);

#endif
