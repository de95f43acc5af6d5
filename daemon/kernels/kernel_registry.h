/* daemon/kernels/kernel_registry.h — the kernels built into this daemon.
 *
 * The table is generated at build time (shaders/gen_registry.sh) from each
 * shader's "// @kernel kernel_name=... domain=... variant=... dtype=...
 * status=..." line and its SPIR-V, compiled by glslc and embedded here. */
#ifndef VKG_DAEMON_KERNEL_REGISTRY_H
#define VKG_DAEMON_KERNEL_REGISTRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct kreg_entry {
	const char *name, *domain, *variant, *dtype, *status;
	const uint32_t *spirv;
	size_t spirv_size; /* bytes */
} kreg_entry;

extern const kreg_entry kreg_entries[];
extern const unsigned kreg_count;

/* The entry named `name` with the given dtype and variant (NULL: any), or NULL. */
const kreg_entry *kreg_find(const char *name, const char *dtype, const char *variant);

/* One line per entry: "name variant dtype status" (vkgradd --list-kernels). */
void kreg_print(FILE *f);

#endif
