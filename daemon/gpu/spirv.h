/* daemon/gpu/spirv.h — what a compute kernel's SPIR-V declares of its
 * interface: the storage buffers it binds and the size of its push-constant
 * block. Read from the module's words (no Vulkan), so the daemon can check
 * each kernel against the interface it records dispatches for
 * (shaders/iface/kernels.h) before any pipeline is built. */
#ifndef VKG_DAEMON_SPIRV_H
#define VKG_DAEMON_SPIRV_H

#include <stddef.h>
#include <stdint.h>

typedef struct spirv_iface {
	uint32_t binding_mask; /* bit b: a variable decorated Binding b (set 0) */
	uint32_t push_bytes;   /* the push-constant block (0: none) */
} spirv_iface;

/* Read module words[0..nwords). 0, or -1 with err (not SPIR-V, truncated,
 * a binding outside set 0 or past 31, a push-constant member that is not
 * a 32-bit scalar). */
int spirv_iface_read(const uint32_t *words, size_t nwords, spirv_iface *out, char *err,
		     size_t errlen);

/* Does the module fit a layout of `bindings` storage buffers (0..n-1) and
 * a push-constant range of push_bytes? Every binding it uses must be in
 * the layout and its block must be exactly push_bytes. 0, or -1 with err
 * naming the kernel (`what`) and the mismatch. */
int spirv_iface_check(const uint32_t *words, size_t nwords, uint32_t bindings, uint32_t push_bytes,
		      const char *what, char *err, size_t errlen);

#endif
