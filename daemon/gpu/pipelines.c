/* daemon/gpu/pipelines.c — see pipelines.h. */
#include "pipelines.h"
#include "pipelines_priv.h"

#include "kernel_registry.h"
#include "kiface.h"
#include "spirv.h"
#include "log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TILED128_SHARED_BYTES 32768u /* shaders/linear_tiled128_gemm.comp, f32 */

/* Each kernel's interface (shaders/iface/kernels.h, kiface.h): the storage
 * buffers its layout binds and its push-constant block. */
static const struct {
	const char *name, *variant;
	uint32_t bindings;
	uint32_t push_bytes;
} kern_desc[KERN_COUNT] = {
#define GEMM(name, variant) {name, variant, VKG_BINDINGS_GEMM, sizeof(kiface_gemm)}
#define GEMM_SUMS(name, variant) {name, variant, VKG_BINDINGS_GEMM_SUMS, sizeof(kiface_gemm)}
	[KERN_PARAM] = {"linear_parameter_backward", "generic", VKG_BINDINGS_PARAM, sizeof(kiface_param)},
	[KERN_INPUT] = {"linear_input_backward", "generic", VKG_BINDINGS_INPUT, sizeof(kiface_input)},
	[KERN_TILED] = GEMM_SUMS("linear_tiled_gemm", "tiled"),
	[KERN_SPLITK] = GEMM_SUMS("linear_splitk_gemm", "splitk"),
	[KERN_REDUCE] = {"linear_splitk_reduce", "splitk", VKG_BINDINGS_REDUCE, sizeof(kiface_reduce)},
	[KERN_COOPMAT] = GEMM("linear_coopmat_gemm", "coopmat"),
	[KERN_TILED128] = GEMM("linear_tiled128_gemm", "tiled128"),
	[KERN_CMK_DW] = GEMM("linear_coopmat_khr_gemm", "coopmat_khr"),
	[KERN_CMK_DX] = GEMM("linear_coopmat_khr_gemm", "coopmat_khr"),
	[KERN_CMK_DW_S] = GEMM("linear_coopmat_khr_gemm", "coopmat_khr"),
	[KERN_CMK_DX_S] = GEMM("linear_coopmat_khr_gemm", "coopmat_khr"),
	[KERN_NV2_DW] = GEMM_SUMS("linear_coopmat_nv2_gemm", "coopmat_nv2"),
	[KERN_NV2_DX] = GEMM_SUMS("linear_coopmat_nv2_gemm", "coopmat_nv2"),
	[KERN_NV2_DW_S] = GEMM_SUMS("linear_coopmat_nv2_gemm", "coopmat_nv2"),
	[KERN_NV2_DX_S] = GEMM_SUMS("linear_coopmat_nv2_gemm", "coopmat_nv2"),
	[KERN_PREP] = {"linear_forward_prep", "generic", VKG_BINDINGS_PREP, sizeof(kiface_prep)},
	[KERN_ACT] = {"linear_activation", "generic", VKG_BINDINGS_ACT, sizeof(kiface_act)},
	[KERN_OPTIM] = {"optim_step", "generic", VKG_BINDINGS_OPTIM, sizeof(kiface_optim)},
	[KERN_NARROW] = {"linear_narrow_param", "narrow", VKG_BINDINGS_NARROW, sizeof(kiface_narrow)},
	[KERN_NARROW_RED] = {"linear_narrow_reduce", "narrow", VKG_BINDINGS_REDUCE, sizeof(kiface_reduce)},
	[KERN_NARROW_DX] = {"linear_narrow_input", "narrow", VKG_BINDINGS_NARROW_DX, sizeof(kiface_narrow_dx)},
	[KERN_SPLITK128] = GEMM("linear_splitk128_gemm", "splitk128"),
	[KERN_CMK_SPLITK] = {"linear_coopmat_khr_splitk_gemm", "coopmat_khr_splitk", VKG_BINDINGS_GEMM,
			     sizeof(kiface_gemm_split)},
	[KERN_CMKS_DX] = {"linear_coopmat_khr_splitk_dx_gemm", "coopmat_khr_splitk", VKG_BINDINGS_GEMM_SPLIT_DX,
			  sizeof(kiface_gemm_split_dx)},
	[KERN_TILED128_S] = GEMM("linear_tiled128_gemm", "tiled128"),
	[KERN_CMKS_L] = {"linear_coopmat_khr_splitk_gemm", "coopmat_khr_splitk", VKG_BINDINGS_GEMM,
			 sizeof(kiface_gemm_split)},
	[KERN_CMKS_S] = {"linear_coopmat_khr_splitk_gemm", "coopmat_khr_splitk", VKG_BINDINGS_GEMM,
			 sizeof(kiface_gemm_split)},
	[KERN_CMKS_DX_S] = {"linear_coopmat_khr_splitk_dx_gemm", "coopmat_khr_splitk", VKG_BINDINGS_GEMM_SPLIT_DX,
			    sizeof(kiface_gemm_split_dx)},
	[KERN_CMK_DXS] = GEMM("linear_coopmat_khr_dx_stream", "coopmat_khr"),
	[KERN_CMK_DXS_M] = GEMM("linear_coopmat_khr_dx_stream", "coopmat_khr"),
	[KERN_CMK_DXS_L] = GEMM("linear_coopmat_khr_dx_stream", "coopmat_khr"),
#undef GEMM
#undef GEMM_SUMS
};

uint32_t pipelines_bindings(int k)
{
	return kern_desc[k].bindings;
}

uint32_t pipelines_cmk_shared(pipelines_cmk_tile t, cmk_shape s, bool a_kmajor)
{
	return pipelines_cmk_shared_pieces(t, s, a_kmajor, 1);
}

uint32_t pipelines_cmk_shared_pieces(pipelines_cmk_tile t, cmk_shape s, bool a_kmajor, uint32_t pieces)
{
	const uint32_t nt = 32 * t.warps_m * t.warps_n, bm = t.warps_m * t.wm, bn = t.warps_n * t.wn;
	const uint32_t bk = t.bk;
	if (!t.warps_m || !t.warps_n || nt > 1024 || !s.m || !s.n || !s.k || t.wm % s.m || t.wn % s.n ||
	    t.wm % 8 || t.wn % 8 || !bk || bk % s.k || bk % 8 || s.n % 4 || (bm * bk / 8) % nt ||
	    bm * bk / 8 < nt || (bn * bk / 8) % nt || bn * bk / 8 < nt || nt % (bm / 8) ||
	    (s.m * t.wn / 8) % 32 || (t.depth != 1 && t.depth != 2))
		return 0;
	/* in uvec4 (16 bytes), as the shader's STAGE, EPI and SH */
	const uint32_t a_stage = a_kmajor ? bk * ((bm + 8) / 8) : bm * ((bk + 8) / 8);
	const uint32_t stage = pieces * (a_stage + bk * ((bn + 8) / 8));
	const uint32_t epi = t.warps_m * t.warps_n * s.m * (t.wn / 4 + 1);
	return 16 * (2 * stage > epi ? 2 * stage : epi);
}

uint32_t pipelines_cmks_dx_shared(pipelines_cmk_tile t, cmk_shape s)
{
	const uint32_t two = pipelines_cmk_shared(t, s, true); /* (16 · max(2 stages, EPI)) */
	const uint32_t bm = t.warps_m * t.wm, bn = t.warps_n * t.wn, bk = t.bk;
	if (!two || (bk / t.warps_m) % s.m || bk / t.warps_m < s.m || bk % t.warps_m || bm % s.k)
		return 0;
	/* in uvec4: the two stages (A k-major), W's tile, EPI (as the shader) */
	const uint32_t stage = bk * ((bm + 8) / 8) + bk * ((bn + 8) / 8);
	const uint32_t epi = t.warps_m * t.warps_n * s.m * (t.wn / 4 + 1);
	return 16 * (2 * stage + bm * ((bn + 8) / 8) + epi);
}

/* The tilings, measured on the H200 (measurements/h200-2026-12-03/run2:
 * full backward, µs, f16 / bf16 alike):
 *   large: 2×2 subgroups of 64×64 (128×128 per workgroup of 128 threads, 239
 *          registers: two workgroups per SM), k steps of 32, one slice in
 *          flight: 8192x4096x4096 2607, 2048x1024x1024 85
 *   small: 4×4 subgroups of 32×32 (128×128 per workgroup of 512 threads, 98
 *          registers), k steps of 32: 3666 and 61
 * (k steps of 16 with two slices in flight: 3994 and 108; 2×4 of 64×64: 3887
 * and 118.) VKGRAD_CMK_TILE / VKGRAD_CMK_TILE_SMALL = "WMxWNxwmxwnxBKxDEPTH"
 * replace them, for measuring others. */
static pipelines_cmk_tile cmk_tile_choice(const config_env *env, int which)
{
	pipelines_cmk_tile t = which ? (pipelines_cmk_tile){4, 4, 32, 32, 32, 1}
				     : (pipelines_cmk_tile){2, 2, 64, 64, 32, 1};
	const char *name = which ? "VKGRAD_CMK_TILE_SMALL" : "VKGRAD_CMK_TILE";
	const char *v = which ? env->cmk_tile_small : env->cmk_tile;
	pipelines_cmk_tile e;
	if (v && sscanf(v, "%ux%ux%ux%ux%ux%u", &e.warps_m, &e.warps_n, &e.wm, &e.wn, &e.bk, &e.depth) == 6) {
		log_warn("%s: linear_coopmat_khr_gemm with %ux%u subgroups of %ux%u, k steps of %u, %u in "
			 "flight", name, e.warps_m, e.warps_n, e.wm, e.wn, e.bk, e.depth);
		t = e;
	}
	return t;
}

/* Fewer tiles of the large tiling than one wave of it on the H200 (132
 * SMs × 2): the small one, whose 16 subgroups per workgroup hide more
 * latency. VKGRAD_CMK_SMALL_BELOW=N replaces the 256 (0: never small). */
static uint64_t cmk_small_below(const config_env *env)
{
	const char *v = env->cmk_small_below;
	char *end = NULL;
	unsigned long long n = v ? strtoull(v, &end, 10) : 0;
	if (v && end && end != v && !*end) {
		log_warn("VKGRAD_CMK_SMALL_BELOW: the small tiling below %llu tiles", n);
		return n;
	}
	return 256;
}

/* linear_tiled128_gemm's f32 tiling (linear_splitk128_gemm's too: the same
 * body): VKGRAD_T128_TILE (t128_tile.h), else
 * T128_TILE_DEFAULT where the device holds it; "fixed": the fixed kernel.
 * A value that is malformed, or that the device cannot run, stops the
 * daemon: 0, or -1 with err naming it. */
static int t128_choice(pipelines *p, const device *d, const config_env *env, char *err, size_t errlen)
{
	const char *v = env->t128_tile;
	const bool dflt = v == NULL;
	if (dflt)
		v = T128_TILE_DEFAULT;
	memset(&p->t128, 0, sizeof(p->t128));
	memset(&p->t128_small, 0, sizeof(p->t128_small));
	if (strcmp(v, "fixed") == 0) {
		log_info("%s=fixed: linear_tiled128_gemm and linear_splitk128_gemm (f32) run the fixed "
			 "128x128 kernel", T128_TILE_ENV);
		return 0;
	}
	if (t128_tile_parse(v, &p->t128, err, errlen) != 0)
		return -1;
	const t128_tile *t = &p->t128;
	const uint32_t nt = t128_tile_threads(t), sh = t128_tile_shared(t);
	const VkPhysicalDeviceLimits *l = &d->props.limits;
	if (nt > l->maxComputeWorkGroupInvocations || nt > l->maxComputeWorkGroupSize[0] ||
	    sh > l->maxComputeSharedMemorySize) {
		if (dflt) { /* the default does not fit this device: the fixed kernel */
			log_info("linear_tiled128_gemm (f32): the default tiling %s does not fit this "
				 "device; the fixed kernel", T128_TILE_DEFAULT);
			memset(&p->t128, 0, sizeof(p->t128));
			return 0;
		}
		snprintf(err, errlen, "%s='%.40s': %u threads and %u bytes of shared memory per workgroup; "
			 "the device offers %u threads and %u bytes", T128_TILE_ENV, v, nt, sh,
			 l->maxComputeWorkGroupInvocations < l->maxComputeWorkGroupSize[0]
				 ? l->maxComputeWorkGroupInvocations : l->maxComputeWorkGroupSize[0],
			 l->maxComputeSharedMemorySize);
		memset(&p->t128, 0, sizeof(p->t128));
		return -1;
	}
	/* the small tiling beside the default (a constant: it parses and is
	 * smaller than the default in threads and shared memory) */
	if (dflt && t128_tile_parse(T128_TILE_SMALL, &p->t128_small, err, errlen) != 0)
		return -1;
	if (dflt)
		log_info("small tiling: linear_tiled128_gemm (f32) with %ux%u tiles, %ux%u per thread (%u "
			 "threads), k steps of %u: dX of layers of up to %u inputs",
			 p->t128_small.bm, p->t128_small.bn, p->t128_small.tm, p->t128_small.tn,
			 t128_tile_threads(&p->t128_small), p->t128_small.bk, p->t128_small.bn);
	log_msg(dflt ? LOG_LEVEL_INFO : LOG_LEVEL_WARN,
		"%s: linear_tiled128_gemm (f32) with %ux%u tiles, %ux%u per thread (%u threads), "
		"k steps of %u, loads in %u phase(s), padding %u, warps %u wide; %u bytes of shared memory",
		dflt ? "default tiling" : T128_TILE_ENV, t->bm, t->bn, t->tm, t->tn, nt, t->bk, t->split,
		t->pad, t->wx, sh);
	return 0;
}

/* The small layers' tiling for dtype dt (NV2_TILE_SMALL_DEFAULT) where
 * it fits the device (p->nv2_small_ok[dt]); where it does not, small
 * layers keep coopmat_khr (refine_nv2_small). */
static void nv2_small_choice(pipelines *p, const device *d, int dt)
{
	char why[640];
	const char *dn = proto_dtype_name((proto_dtype)dt);
	p->nv2_small_ok[dt] = nv2_tile_parse(NV2_TILE_SMALL_DEFAULT, &p->nv2_small[dt], why, sizeof(why)) == 0 &&
			      nv2_tile_fit(&p->nv2_small[dt], &d->cmk.nv2[dt], "the small layers' tiling",
					   NV2_TILE_SMALL_DEFAULT, dn, why, sizeof(why)) == 0;
	if (!p->nv2_small_ok[dt]) {
		log_info("linear_coopmat_nv2_gemm (%s) small layers' tiling not served: %s", dn, why);
		return;
	}
	const nv2_tile *x = &p->nv2_small[dt];
	log_info("small layers' tiling: linear_coopmat_nv2_gemm (%s) with %ux%u tiles, k steps of %u, %u threads",
		 dn, x->bm, x->bn, x->bk, x->threads);
}

/* linear_coopmat_nv2_gemm's tiling per dtype that nv2_ok says can run:
 * VKGRAD_NV2_TILE (nv2_tile.h), else NV2_TILE_DEFAULT, fitted to the
 * device's workgroup-scope shapes for that dtype. A malformed value, or
 * one the device cannot run for a dtype it otherwise serves, stops the
 * daemon: -1 with err. Where the default does not fit, that dtype is not
 * served (nv2_ok false, p->nv2_why says why). */
static int nv2_choice(pipelines *p, const device *d, const config_env *env, bool *nv2_ok, char *err,
		      size_t errlen)
{
	const char *v = env->nv2_tile;
	const bool dflt = v == NULL;
	const char *name = dflt ? "the default tiling" : NV2_TILE_ENV, *val = dflt ? NV2_TILE_DEFAULT : v;
	nv2_tile t;
	if (nv2_tile_parse(val, &t, err, errlen) != 0)
		return -1;
	bool any = false;
	for (int dt = PROTO_F16; dt <= PROTO_BF16; dt++) {
		if (!nv2_ok[dt])
			continue;
		const char *dn = proto_dtype_name((proto_dtype)dt);
		char why[640], offer[NV2_OFFER_TEXT];
		nv2_offer_text(&d->cmk.nv2[dt], offer, sizeof(offer));
		log_info("VK_NV_cooperative_matrix2 for %s: %s", dn, offer);
		p->nv2[dt] = t;
		if (nv2_tile_fit(&p->nv2[dt], &d->cmk.nv2[dt], name, val, dn, why, sizeof(why)) != 0) {
			if (!dflt) {
				snprintf(err, errlen, "%s", why);
				return -1;
			}
			snprintf(p->nv2_why[dt], sizeof(p->nv2_why[dt]), "a workgroup-scope shape for %.220s", why);
			log_info("linear_coopmat_nv2_gemm (%s) not served: it needs %s", dn, p->nv2_why[dt]);
			nv2_ok[dt] = false;
			continue;
		}
		any = true;
		const nv2_tile *x = &p->nv2[dt];
		log_msg(dflt ? LOG_LEVEL_INFO : LOG_LEVEL_WARN,
			"%s: linear_coopmat_nv2_gemm (%s) with %ux%u tiles, k steps of %u, %u threads, "
			"%s, %u k step(s) per trip; db through %u columns %s", dflt ? "default tiling" : NV2_TILE_ENV,
			dn, x->bm, x->bn, x->bk, x->threads,
			x->unclamp ? "unclamped loads inside C" : "clamped loads everywhere", x->unroll, x->dbn,
			x->db_apart ? "in workgroups of its own" : "by C's first column of tiles");
		nv2_small_choice(p, d, dt);
	}
	if (!dflt && !any)
		log_warn("%s='%.40s': this device serves linear_coopmat_nv2_gemm for no dtype; ignored",
			 NV2_TILE_ENV, v);
	return 0;
}

/* Specialization constants of linear_coopmat_khr_gemm (its constant_id 0..10). */
#define CMK_SPECS 11
typedef struct cmk_spec {
	uint32_t v[CMK_SPECS];
	VkSpecializationMapEntry map[CMK_SPECS];
	VkSpecializationInfo info;
} cmk_spec;

static void cmk_spec_fill(cmk_spec *c, cmk_shape s, bool a_kmajor, pipelines_cmk_tile t)
{
	const uint32_t v[CMK_SPECS] = {s.m, s.n, s.k, a_kmajor ? 1u : 0u, t.warps_m, t.warps_n, t.wm, t.wn,
				       32 * t.warps_m * t.warps_n, t.bk, t.depth};
	for (uint32_t i = 0; i < CMK_SPECS; i++) {
		c->v[i] = v[i];
		c->map[i] = (VkSpecializationMapEntry){i, i * 4, 4};
	}
	c->info = (VkSpecializationInfo){CMK_SPECS, c->map, sizeof(c->v), c->v};
}

/* linear_coopmat_khr_dx_stream's constants (dxs_tile_specs), in a
 * cmk_spec's room */
_Static_assert(DXS_SPECS <= CMK_SPECS, "dx_stream's constants fit a cmk_spec");
static void dxs_spec_fill(cmk_spec *c, const dxs_tile *t)
{
	dxs_tile_specs(t, c->v);
	for (uint32_t i = 0; i < DXS_SPECS; i++)
		c->map[i] = (VkSpecializationMapEntry){i, i * 4, 4};
	c->info = (VkSpecializationInfo){DXS_SPECS, c->map, DXS_SPECS * sizeof(uint32_t), c->v};
}

/* Can linear_coopmat_khr_dx_stream's pipeline k (pipelines_is_dxs) run
 * for dtype t: f16/bf16 where KERN_CMK_* can (cmk_ok), its tiling on, the
 * device's matrices for t 16x16x16, its workgroup and shared memory within
 * the device's limits, the kernel built? */
static bool dxs_usable(const pipelines *p, const device *d, int k, int t, bool cmk_ok)
{
	const dxs_tile *x = &p->dxs[pipelines_dxs_class(k)];
	const cmk_shape s = d->cmk.shape[t];
	return cmk_ok && t != PROTO_F32 && x->on && s.m == 16 && s.n == 16 && s.k == 16 &&
	       dxs_tile_threads(x) <= d->props.limits.maxComputeWorkGroupInvocations &&
	       dxs_tile_threads(x) <= d->props.limits.maxComputeWorkGroupSize[0] &&
	       dxs_tile_shared(x) <= d->props.limits.maxComputeSharedMemorySize &&
	       kreg_find(kern_desc[KERN_CMK_DXS].name, proto_dtype_name((proto_dtype)t), kern_desc[KERN_CMK_DXS].variant);
}

/* f32's pipelines that are another registry kernel than kern_desc names:
 * KERN_CMK_DW/DX (and their small tilings) are linear_coopmat_khr_f32x3_gemm
 * (coopmat_khr_f32x3), KERN_CMK_SPLITK is
 * linear_coopmat_khr_f32x3_splitk_gemm (coopmat_khr_f32_splitk). NULL for
 * the others. */
typedef struct kern_id {
	const char *name, *variant;
} kern_id;

static const kern_id *f32_twin(int k)
{
	static const kern_id cmk = {"linear_coopmat_khr_f32x3_gemm", "coopmat_khr_f32x3"},
			     cmks = {"linear_coopmat_khr_f32x3_splitk_gemm", "coopmat_khr_f32_splitk"};
	return k == KERN_CMK_SPLITK ? &cmks : pipelines_is_cmk(k) ? &cmk : NULL;
}

/* The registry kernel and variant of pipeline k for dtype t. */
static const char *kern_name(int k, int t)
{
	const kern_id *tw = t == PROTO_F32 ? f32_twin(k) : NULL;
	return tw ? tw->name : kern_desc[k].name;
}

static const char *kern_variant(int k, int t)
{
	const kern_id *tw = t == PROTO_F32 ? f32_twin(k) : NULL;
	return tw ? tw->variant : kern_desc[k].variant;
}

/* A pipeline's name in the log: the registry name (kern_name), and for
 * linear_coopmat_khr_gemm / linear_coopmat_nv2_gemm which of their four,
 * for linear_tiled128_gemm's small tiling that it is. */
static const char *kern_label(int k, int t)
{
	static const char *const cmk[8] = {"linear_coopmat_khr_gemm (dW)", "linear_coopmat_khr_gemm (dX)",
					   "linear_coopmat_khr_gemm (dW, small)",
					   "linear_coopmat_khr_gemm (dX, small)",
					   "linear_coopmat_nv2_gemm (dW)", "linear_coopmat_nv2_gemm (dX)",
					   "linear_coopmat_nv2_gemm (dW, small)",
					   "linear_coopmat_nv2_gemm (dX, small)"};
	if (k == KERN_TILED128_S)
		return "linear_tiled128_gemm (small tiling)";
	if (k == KERN_CMKS_L)
		return "linear_coopmat_khr_splitk_gemm (128x128 tiles)";
	if (k == KERN_CMKS_S)
		return "linear_coopmat_khr_splitk_gemm (32x32 tiles)";
	if (k == KERN_CMKS_DX_S)
		return "linear_coopmat_khr_splitk_dx_gemm (32x32 tiles)";
	if (pipelines_is_dxs(k)) {
		static const char *const dxs[DXS_CLASSES] = {"linear_coopmat_khr_dx_stream (out <= 64)",
							     "linear_coopmat_khr_dx_stream (out <= 128)",
							     "linear_coopmat_khr_dx_stream (out <= 256)"};
		return dxs[pipelines_dxs_class(k)];
	}
	return pipelines_is_cmk(k) || pipelines_is_nv2(k) ? cmk[k - KERN_CMK_DW] : kern_name(k, t);
}

/* Can KERN_NV2_* run for dtype t? If not, why (into p->nv2_why[t]). */
static bool nv2_usable(pipelines *p, const device *d, int t)
{
	if (!d->cmk.nv2_ok[t]) {
		snprintf(p->nv2_why[t], sizeof(p->nv2_why[t]), "%s", d->cmk.nv2_why[t]);
		return false;
	}
	if (!kreg_find("linear_coopmat_nv2_gemm", proto_dtype_name((proto_dtype)t), "coopmat_nv2")) {
		snprintf(p->nv2_why[t], sizeof(p->nv2_why[t]), "a daemon built with it; this one is not (no "
			 "shader compiler with GL_NV_cooperative_matrix2 at build time)");
		return false;
	}
	return true;
}

/* Can KERN_CMK_* run for dtype t? If not, why (into p->cmk_why[t]). */
static bool cmk_usable(pipelines *p, const device *d, int t)
{
	char *why = p->cmk_why[t];
	const size_t wl = sizeof(p->cmk_why[t]);
	if (!d->cmk.ok[t]) {
		snprintf(why, wl, "%s", d->cmk.why[t]);
		return false;
	}
	if (!kreg_find(kern_name(KERN_CMK_DW, t), proto_dtype_name((proto_dtype)t), kern_variant(KERN_CMK_DW, t))) {
		snprintf(why, wl, "a daemon built with it; this one is not (no shader compiler with "
			 "GL_KHR_cooperative_matrix%s at build time)", t != PROTO_F16 ? " and GL_EXT_bfloat16" : "");
		return false;
	}
	uint32_t need = 0;
	/* f32: the large tiling only, hi and lo tiles (pipelines_cmk_tile_for) */
	for (int km = 0; km < (t == PROTO_F32 ? 2 : 4); km++) {
		const int k = KERN_CMK_DW + km;
		uint32_t b = pipelines_cmk_shared_pieces(pipelines_cmk_tile_for(p, k, (proto_dtype)t),
							 d->cmk.shape[t], pipelines_cmk_dw(k), t == PROTO_F32 ? 2 : 1);
		if (!b) {
			snprintf(why, wl, "a tiling that suits the %ux%ux%u matrices (VKGRAD_CMK_TILE)",
				 d->cmk.shape[t].m, d->cmk.shape[t].n, d->cmk.shape[t].k);
			return false;
		}
		need = b > need ? b : need;
	}
	if (need > d->props.limits.maxComputeSharedMemorySize) {
		snprintf(why, wl, "%u bytes of shared memory per workgroup; the device offers %u", need,
			 d->props.limits.maxComputeSharedMemorySize);
		return false;
	}
	return true;
}

/* Can KERN_CMK_SPLITK run for dtype t (where KERN_CMK_* can: cmk_ok; f32:
 * linear_coopmat_khr_f32x3_splitk_gemm where linear_coopmat_khr_f32x3_gemm
 * can)? If not, why (into p->cmks_why[t]). */
static bool cmks_usable(pipelines *p, const device *d, int t, bool cmk_ok)
{
	char *why = p->cmks_why[t];
	const size_t wl = sizeof(p->cmks_why[t]);
	if (!cmk_ok) {
		snprintf(why, wl, "%s", p->cmk_why[t]);
		return false;
	}
	if (!kreg_find(kern_name(KERN_CMK_SPLITK, t), proto_dtype_name((proto_dtype)t),
		       kern_variant(KERN_CMK_SPLITK, t))) {
		snprintf(why, wl, "a daemon built with it; this one is not (no shader compiler with "
			 "GL_KHR_cooperative_matrix%s at build time)", t != PROTO_F16 ? " and GL_EXT_bfloat16" : "");
		return false;
	}
	const cmk_shape s = d->cmk.shape[t];
	/* (f32: the hi and lo pieces side by side, twice the tiles) */
	uint32_t b = pipelines_cmk_shared_pieces(pipelines_cmks_tile(KERN_CMK_SPLITK, (proto_dtype)t), s, true,
						 t == PROTO_F32 ? 2 : 1);
	if (!b) {
		snprintf(why, wl, "cooperative matrices that fit its 32x32 blocks and k steps of 32; the device's "
			 "%ux%ux%u do not", s.m, s.n, s.k);
		return false;
	}
	/* (its slices are added by linear_narrow_reduce, built where the
	 * narrow family's 32 KiB are) */
	if (b < PIPELINES_NARROW_SHARED_BYTES)
		b = PIPELINES_NARROW_SHARED_BYTES;
	if (b > d->props.limits.maxComputeSharedMemorySize) {
		snprintf(why, wl, "%u bytes of shared memory per workgroup; the device offers "
			 "maxComputeSharedMemorySize = %u", b, d->props.limits.maxComputeSharedMemorySize);
		return false;
	}
	return true;
}

/* Can KERN_CMKS_L or KERN_CMKS_S (k) run for dtype t: f16/bf16 where
 * KERN_CMK_SPLITK can (cmks_ok), its tiling fitting the device's matrices
 * and shared memory? Where not, auto keeps such layers on KERN_CMK_SPLITK
 * (refine_cmks_tiling): nothing to say. */
static bool cmks_tiling_usable(const device *d, int k, int t, bool cmks_ok)
{
	if (!cmks_ok || t == PROTO_F32)
		return false;
	const uint32_t b = pipelines_cmk_shared(pipelines_cmks_tile(k, (proto_dtype)t), d->cmk.shape[t], true);
	return b && b <= d->props.limits.maxComputeSharedMemorySize;
}

/* KERN_CMKS_DX_S: where KERN_CMKS_DX runs (cmks_dx_ok) and its 32x32
 * tiling fits the device's matrices and shared memory. */
static bool cmks_dx_s_usable(const device *d, int t, bool cmks_dx_ok)
{
	if (!cmks_dx_ok)
		return false;
	const uint32_t b = pipelines_cmks_dx_shared(PIPELINES_CMKS_S_TILE, d->cmk.shape[t]);
	return b && b <= d->props.limits.maxComputeSharedMemorySize;
}

/* Can KERN_CMKS_DX run for dtype t (f16/bf16 where KERN_CMK_SPLITK can:
 * cmks_ok)? If not, why (into why[wl]; "" where its sibling is not served
 * either, which says why already). */
static bool cmks_dx_usable(const device *d, int t, bool cmks_ok, char *why, size_t wl)
{
	why[0] = 0;
	if (!cmks_ok || t == PROTO_F32)
		return false;
	if (!kreg_find(kern_desc[KERN_CMKS_DX].name, proto_dtype_name((proto_dtype)t), kern_desc[KERN_CMKS_DX].variant)) {
		snprintf(why, wl, "a daemon built with it; this one is not");
		return false;
	}
	const cmk_shape s = d->cmk.shape[t];
	const uint32_t b = pipelines_cmks_dx_shared(PIPELINES_CMKS_DX_TILE, s);
	if (!b) {
		snprintf(why, wl, "cooperative matrices that fit its 16-row bands of dX; the device's %ux%ux%u do not",
			 s.m, s.n, s.k);
		return false;
	}
	if (b > d->props.limits.maxComputeSharedMemorySize) {
		snprintf(why, wl, "%u bytes of shared memory per workgroup; the device offers "
			 "maxComputeSharedMemorySize = %u", b, d->props.limits.maxComputeSharedMemorySize);
		return false;
	}
	return true;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct build_job {
	const device *dev;
	const VkSpecializationInfo *spec;
	VkPipelineCache cache;
	VkShaderModule module;
	VkPipelineLayout layout;
	VkPipeline *out;
	VkResult result;
	bool hit;
	bool started;
	pthread_t thread;
} build_job;

static void *build_one(void *arg)
{
	build_job *b = arg;
	VkPipelineCreationFeedback fb = {0};
	VkPipelineCreationFeedbackCreateInfo fci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
		.pPipelineCreationFeedback = &fb,
	};
	VkComputePipelineCreateInfo cpci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.flags = b->dev->exec_stats ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0,
		/* creation feedback is core in 1.3; on 1.2 devices there are no hits to count */
		.pNext = b->dev->api_version >= VK_API_VERSION_1_3 ? &fci : NULL,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = b->module,
			.pName = "main",
			.pSpecializationInfo = b->spec,
		},
		.layout = b->layout,
	};
	b->result = vkCreateComputePipelines(b->dev->dev, b->cache, 1, &cpci, NULL, b->out);
	b->hit = (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
		 (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
	return NULL;
}

/* Layouts and shader modules of every pipeline the device gets (serially:
 * cheap), as build jobs (specs: their specialization constants). 0, or -1
 * with err. */
static int prepare_jobs(pipelines *p, const device *d, const bool *cmk_ok, const bool *nv2_ok,
			const bool *cmks_ok, const bool *cmks_dx_ok, build_job *jobs, cmk_spec *specs, nv2_spec *nv2s, t128_spec *t128s,
			char *err, size_t errlen)
{
	int rc = 0;
	for (int k = 0; k < KERN_COUNT && rc == 0; k++) {
		VkDescriptorSetLayoutBinding b[8];
		for (uint32_t i = 0; i < kern_desc[k].bindings; i++)
			b[i] = (VkDescriptorSetLayoutBinding){
				.binding = i,
				.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
				.descriptorCount = 1,
				.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
			};
		VkDescriptorSetLayoutCreateInfo dci = {
			.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
			.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
			.bindingCount = kern_desc[k].bindings,
			.pBindings = b,
		};
		VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, kern_desc[k].push_bytes};
		VkPipelineLayoutCreateInfo plci = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
			.setLayoutCount = 1,
			.pSetLayouts = &p->dsl[k],
			.pushConstantRangeCount = 1,
			.pPushConstantRanges = &pcr,
		};
		if (vkCreateDescriptorSetLayout(d->dev, &dci, NULL, &p->dsl[k]) != VK_SUCCESS ||
		    vkCreatePipelineLayout(d->dev, &plci, NULL, &p->layout[k]) != VK_SUCCESS) {
			snprintf(err, errlen, "creating the layout of pipeline %s failed", kern_desc[k].name);
			rc = -1;
			break;
		}
		/* one pipeline per storage dtype the device can serve; the
		 * cooperative-matrix kernel only for f16 where the device has it */
		for (int t = 0; t < PROTO_DTYPE_COUNT && rc == 0; t++) {
			if (!p->dtype_ok[t])
				continue;
			if (k == KERN_COOPMAT && (!d->coopmat || t != PROTO_F16))
				continue;
			/* its double-buffered tiles take 32 KiB (f32); Vulkan promises 16
			 * (split-K's 128 tile: the same body) */
			if ((k == KERN_TILED128 || k == KERN_SPLITK128) &&
			    d->props.limits.maxComputeSharedMemorySize < TILED128_SHARED_BYTES)
				continue;
			if (k == KERN_TILED128_S && !pipelines_t128_for(p, k, (proto_dtype)t))
				continue;
			/* the narrow kernels' two 16 KiB blocks */
			if ((k == KERN_NARROW || k == KERN_NARROW_RED || k == KERN_NARROW_DX) &&
			    d->props.limits.maxComputeSharedMemorySize < PIPELINES_NARROW_SHARED_BYTES)
				continue;
			if ((pipelines_is_cmk(k) && !cmk_ok[t]) || (pipelines_is_nv2(k) && !nv2_ok[t]) ||
			    (k == KERN_CMK_SPLITK && !cmks_ok[t]) || (k == KERN_CMKS_DX && !cmks_dx_ok[t]))
				continue;
			if ((k == KERN_CMKS_L || k == KERN_CMKS_S) && !cmks_tiling_usable(d, k, t, cmks_ok[t]))
				continue;
			if (k == KERN_CMKS_DX_S && !cmks_dx_s_usable(d, t, cmks_dx_ok[t]))
				continue;
			if (pipelines_is_dxs(k) && !dxs_usable(p, d, k, t, cmk_ok[t]))
				continue;
			if (k >= KERN_NV2_DW_S && k <= KERN_NV2_DX_S && !p->nv2_small_ok[t])
				continue;
			/* f32 (coopmat_khr_f32x3): the large tiling only */
			if (pipelines_is_cmk(k) && t == PROTO_F32 && pipelines_cmk_tiling(k) != 0)
				continue;
			build_job *bj = &jobs[k * PROTO_DTYPE_COUNT + t];
			if (pipelines_is_nv2(k)) {
				nv2_spec *ns = &nv2s[(k - KERN_NV2_DW) * PROTO_DTYPE_COUNT + t];
				nv2_spec_fill(ns, pipelines_nv2_tile(p, k, (proto_dtype)t), pipelines_nv2_dw(k));
				bj->spec = &ns->info;
			}
			/* (split-K's 128 tile: the same body, the same tiling) */
			const t128_tile *tt = pipelines_is_t128(k) ? pipelines_t128_for(p, k, (proto_dtype)t) : NULL;
			if (tt) {
				t128_spec *ts = &t128s[k == KERN_TILED128_S];
				t128_spec_fill(ts, tt);
				bj->spec = &ts->info;
			}
			if (pipelines_is_cmk(k)) {
				cmk_spec *cs = &specs[k * PROTO_DTYPE_COUNT + t];
				cmk_spec_fill(cs, d->cmk.shape[t], pipelines_cmk_dw(k),
					      pipelines_cmk_tile_for(p, k, (proto_dtype)t));
				bj->spec = &cs->info;
			}
			if (pipelines_is_cmks(k) || pipelines_is_cmks_dx(k)) { /* dW only: A along m */
				cmk_spec *cs = &specs[k * PROTO_DTYPE_COUNT + t];
				cmk_spec_fill(cs, d->cmk.shape[t], true, pipelines_cmks_tile(k, (proto_dtype)t));
				bj->spec = &cs->info;
			}
			if (pipelines_is_dxs(k)) {
				cmk_spec *cs = &specs[k * PROTO_DTYPE_COUNT + t];
				dxs_spec_fill(cs, &p->dxs[pipelines_dxs_class(k)]);
				bj->spec = &cs->info;
			}
			const kreg_entry *e = kreg_find(kern_name(k, t), proto_dtype_name((proto_dtype)t),
							kern_variant(k, t));
			VkShaderModuleCreateInfo smci = {
				.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
				.codeSize = e ? e->spirv_size : 0,
				.pCode = e ? e->spirv : NULL,
			};
			if (!e || vkCreateShaderModule(d->dev, &smci, NULL, &bj->module) != VK_SUCCESS) {
				snprintf(err, errlen, "kernel %s (%s) missing or not loadable", kern_desc[k].name,
					 proto_dtype_name((proto_dtype)t));
				rc = -1;
				break;
			}
			/* the kernel's own interface against what dispatch.c pushes and binds */
			if (spirv_iface_check(e->spirv, e->spirv_size / 4, kern_desc[k].bindings,
					      kern_desc[k].push_bytes, kern_desc[k].name, err, errlen) != 0) {
				rc = -1;
				break;
			}
			bj->dev = d;
			bj->cache = p->cache;
			bj->layout = p->layout[k];
			bj->out = &p->pipe[k][t];
		}
	}
	return rc;
}

int pipelines_init(pipelines *p, const device *d, const char *cache_dir, const config_env *env, char *err,
		   size_t errlen)
{
	memset(p, 0, sizeof(*p));
	double t0 = now_ms();
	if (pipelines_cache_open(p, d, cache_dir, err, errlen) != 0)
		return -1;

	/* layouts and modules serially (cheap), pipelines in parallel: the
	 * compile is the slow part and VkPipelineCache is internally synchronised */
	enum { NJ = KERN_COUNT * PROTO_DTYPE_COUNT };
	build_job jobs[NJ];
	cmk_spec specs[NJ];
	memset(jobs, 0, sizeof(jobs));
	for (int i = 0; i < 2; i++) {
		p->cmk_tile[i] = cmk_tile_choice(env, i);
		p->cmk_bm[i] = p->cmk_tile[i].warps_m * p->cmk_tile[i].wm;
		p->cmk_bn[i] = p->cmk_tile[i].warps_n * p->cmk_tile[i].wn;
	}
	p->cmk_small_below = cmk_small_below(env);
	bool cmk_ok[PROTO_DTYPE_COUNT], nv2_ok[PROTO_DTYPE_COUNT], cmks_ok[PROTO_DTYPE_COUNT];
	bool cmks_dx_ok[PROTO_DTYPE_COUNT];
	for (int t = 0; t < PROTO_DTYPE_COUNT; t++) {
		p->dtype_ok[t] = t == PROTO_F32 || d->storage16;
		cmk_ok[t] = cmk_usable(p, d, t);
		if (!cmk_ok[t])
			log_info("%s (%s) not served: it needs %s", kern_name(KERN_CMK_DW, t),
				 proto_dtype_name((proto_dtype)t), p->cmk_why[t]);
		cmks_ok[t] = cmks_usable(p, d, t, cmk_ok[t]);
		if (!cmks_ok[t] && cmk_ok[t])
			log_info("%s (%s) not served: it needs %s", kern_name(KERN_CMK_SPLITK, t),
				 proto_dtype_name((proto_dtype)t), p->cmks_why[t]);
		char why[200];
		cmks_dx_ok[t] = cmks_dx_usable(d, t, cmks_ok[t], why, sizeof(why));
		if (!cmks_dx_ok[t] && why[0])
			log_info("%s (%s) not served: it needs %s", kern_desc[KERN_CMKS_DX].name,
				 proto_dtype_name((proto_dtype)t), why);
		nv2_ok[t] = nv2_usable(p, d, t);
		if (!nv2_ok[t] && t != PROTO_F32)
			log_info("linear_coopmat_nv2_gemm (%s) not served: it needs %s",
				 proto_dtype_name((proto_dtype)t), p->nv2_why[t]);
	}
	t128_spec t128s[2]; /* KERN_TILED128's (and KERN_SPLITK128's), KERN_TILED128_S's */
	nv2_spec nv2s[4 * PROTO_DTYPE_COUNT];
	int rc = 0;
	for (int c = 0; c < DXS_CLASSES && rc == 0; c++)
		rc = dxs_tile_choose(env->dxs_tile, c, &p->dxs[c], err, errlen);
	if (rc == 0 && env->dxs_tile)
		log_warn("%s=%s: linear_coopmat_khr_dx_stream %s", DXS_TILE_ENV, env->dxs_tile,
			 !p->dxs[0].on ? "off"
			 : strcmp(env->dxs_tile, "on") == 0 ? "on, each class of out on its own tiling"
							     : "with that tiling for every out");
	if (rc == 0)
		rc = t128_choice(p, d, env, err, errlen);
	if (rc == 0)
		rc = nv2_choice(p, d, env, nv2_ok, err, errlen);
	if (rc == 0)
		rc = prepare_jobs(p, d, cmk_ok, nv2_ok, cmks_ok, cmks_dx_ok, jobs, specs, nv2s, t128s, err, errlen);
	for (int i = 0; i < NJ && rc == 0; i++)
		if (jobs[i].module)
			jobs[i].started = pthread_create(&jobs[i].thread, NULL, build_one, &jobs[i]) == 0;
	for (int i = 0; i < NJ; i++) {
		if (!jobs[i].module)
			continue;
		if (jobs[i].started)
			pthread_join(jobs[i].thread, NULL);
		else if (rc == 0)
			build_one(&jobs[i]); /* no thread: build it here */
		vkDestroyShaderModule(d->dev, jobs[i].module, NULL);
		if (rc == 0 && jobs[i].result != VK_SUCCESS && pipelines_is_nv2(i / PROTO_DTYPE_COUNT)) {
			/* the optional NV kernel: the daemon goes on without it */
			const int t = i % PROTO_DTYPE_COUNT;
			snprintf(p->nv2_why[t], sizeof(p->nv2_why[t]),
				 "a pipeline the driver creates; it failed (VkResult %d)", jobs[i].result);
			log_warn("linear_coopmat_nv2_gemm (%s): creating its pipeline failed (VkResult %d); not served",
				 proto_dtype_name((proto_dtype)t), jobs[i].result);
			*jobs[i].out = VK_NULL_HANDLE;
			/* dW and dX of a tiling go together (dW's job comes first) */
			const int k = i / PROTO_DTYPE_COUNT, dwk = k - 1;
			if (!pipelines_nv2_dw(k) && p->pipe[dwk][t]) {
				vkDestroyPipeline(d->dev, p->pipe[dwk][t], NULL);
				p->pipe[dwk][t] = VK_NULL_HANDLE;
			}
			continue;
		}
		const int jk = i / PROTO_DTYPE_COUNT;
		if (rc == 0 && jobs[i].result != VK_SUCCESS && (pipelines_is_cmks(jk) || pipelines_is_cmks_dx(jk))) {
			/* optional too: dW/db keep their other kernels without
			 * split-K's, dX its own pass without the fused one */
			const int t = i % PROTO_DTYPE_COUNT;
			if (jk == KERN_CMK_SPLITK)
				snprintf(p->cmks_why[t], sizeof(p->cmks_why[t]),
					 "a pipeline the driver creates; it failed (VkResult %d)", jobs[i].result);
			log_warn("%s (%s): creating its pipeline failed (VkResult %d); not served", kern_name(jk, t),
				 proto_dtype_name((proto_dtype)t), jobs[i].result);
			*jobs[i].out = VK_NULL_HANDLE;
			continue;
		}
		if (rc == 0 && jobs[i].result != VK_SUCCESS) {
			snprintf(err, errlen, "creating pipeline %s failed (VkResult %d)",
				 kern_desc[i / PROTO_DTYPE_COUNT].name, jobs[i].result);
			rc = -1;
		}
		if (rc == 0) {
			p->built++;
			if (jobs[i].hit)
				p->cache_hits++;
			if (d->exec_stats)
				pipelines_log_exec_stats(d, *jobs[i].out, kern_label(i / PROTO_DTYPE_COUNT, i % PROTO_DTYPE_COUNT),
							 proto_dtype_name((proto_dtype)(i % PROTO_DTYPE_COUNT)));
		}
	}
	if (rc != 0)
		return -1;
	p->build_ms = now_ms() - t0;
	log_info("pipelines: %u built, %u from the cache, %.1f ms", p->built, p->cache_hits,
		 p->build_ms);
	if (p->cache_hits < p->built)
		pipelines_save(p, d);
	return 0;
}

bool pipelines_serves(const pipelines *p, const char *name, proto_dtype t)
{
	for (int k = 0; k < KERN_COUNT; k++)
		if ((unsigned)t < PROTO_DTYPE_COUNT && strcmp(kern_name(k, t), name) == 0)
			return p->pipe[k][t] != VK_NULL_HANDLE;
	return false;
}

void pipelines_destroy(pipelines *p, const device *d)
{
	for (int k = 0; k < KERN_COUNT; k++) {
		for (int t = 0; t < PROTO_DTYPE_COUNT; t++)
			if (p->pipe[k][t])
				vkDestroyPipeline(d->dev, p->pipe[k][t], NULL);
		if (p->layout[k])
			vkDestroyPipelineLayout(d->dev, p->layout[k], NULL);
		if (p->dsl[k])
			vkDestroyDescriptorSetLayout(d->dev, p->dsl[k], NULL);
	}
	if (p->cache)
		vkDestroyPipelineCache(d->dev, p->cache, NULL);
	memset(p, 0, sizeof(*p));
}

void pipelines_stats(const pipelines *pl, proto_stats *st)
{
	st->pipelines = pl->built;
	st->pipeline_cache_hits = pl->cache_hits;
}
