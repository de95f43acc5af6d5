/* daemon/kernels/kernel_registry.c — lookups over the generated table. */
#include "kernel_registry.h"

#include <string.h>

const kreg_entry *kreg_find(const char *name, const char *dtype, const char *variant)
{
	for (unsigned i = 0; i < kreg_count; i++) {
		const kreg_entry *e = &kreg_entries[i];
		if (strcmp(e->name, name) == 0 && (!dtype || strcmp(e->dtype, dtype) == 0) &&
		    (!variant || strcmp(e->variant, variant) == 0))
			return e;
	}
	return NULL;
}

void kreg_print(FILE *f)
{
	for (unsigned i = 0; i < kreg_count; i++)
		fprintf(f, "%s %s %s %s\n", kreg_entries[i].name, kreg_entries[i].variant, kreg_entries[i].dtype,
			kreg_entries[i].status);
}
