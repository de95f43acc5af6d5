/* daemon/gpu/spirv.c — a kernel's interface read from its SPIR-V words
 * (spirv.h). Only the instructions that say it: Binding and DescriptorSet
 * decorations, the push-constant variable, its pointer and struct types,
 * and the struct's member offsets. */
#include "spirv.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

enum {
	SPV_MAGIC = 0x07230203,
	OP_TYPE_INT = 21,
	OP_TYPE_STRUCT = 30,
	OP_TYPE_POINTER = 32,
	OP_VARIABLE = 59,
	OP_DECORATE = 71,
	OP_MEMBER_DECORATE = 72,
	DEC_BINDING = 33,
	DEC_DESCRIPTOR_SET = 34,
	DEC_OFFSET = 35,
	SC_PUSH_CONSTANT = 9,
};

/* One pass over the instructions; fn sees each (opcode, operands, count).
 * -1 when an instruction runs past the end or has no words. */
typedef struct spv_walk {
	const uint32_t *w;
	size_t n, pos;
} spv_walk;

static bool spv_next(spv_walk *s, uint32_t *op, const uint32_t **arg, uint32_t *nargs, int *bad)
{
	if (s->pos >= s->n)
		return false;
	const uint32_t count = s->w[s->pos] >> 16;
	if (count == 0 || count > s->n - s->pos) {
		*bad = 1;
		return false;
	}
	*op = s->w[s->pos] & 0xffff;
	*arg = s->w + s->pos + 1;
	*nargs = count - 1;
	s->pos += count;
	return true;
}

int spirv_iface_read(const uint32_t *words, size_t nwords, spirv_iface *out, char *err,
		     size_t errlen)
{
	*out = (spirv_iface){0};
	if (!words || nwords < 5 || words[0] != SPV_MAGIC) {
		snprintf(err, errlen, "not a SPIR-V module");
		return -1;
	}
	const uint32_t bound = words[3];
	if (bound == 0 || bound > (1u << 22)) {
		snprintf(err, errlen, "SPIR-V id bound %u out of range", bound);
		return -1;
	}
	/* per id: its binding (+1, 0 none), descriptor set (+1), pointee of a
	 * push-constant pointer type (+1), and whether it is a 32-bit int type */
	uint32_t *binding = calloc(bound, sizeof(*binding));
	uint32_t *set = calloc(bound, sizeof(*set));
	uint32_t *pc_ptr = calloc(bound, sizeof(*pc_ptr));
	bool *int32 = calloc(bound, sizeof(*int32));
	int rc = -1, bad = 0;
	if (!binding || !set || !pc_ptr || !int32) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	uint32_t block = 0; /* the push-constant struct type id */
	uint32_t op, nargs;
	const uint32_t *a;
	spv_walk s = {words, nwords, 5};
	/* types come before variables, decorations before both */
	while (spv_next(&s, &op, &a, &nargs, &bad)) {
		if (op == OP_DECORATE && nargs >= 3 && a[0] < bound) {
			if (a[1] == DEC_BINDING)
				binding[a[0]] = a[2] + 1;
			else if (a[1] == DEC_DESCRIPTOR_SET)
				set[a[0]] = a[2] + 1;
		} else if (op == OP_TYPE_INT && nargs >= 2 && a[0] < bound) {
			int32[a[0]] = a[1] == 32;
		} else if (op == OP_TYPE_POINTER && nargs >= 3 && a[0] < bound && a[1] == SC_PUSH_CONSTANT) {
			pc_ptr[a[0]] = a[2] + 1;
		} else if (op == OP_VARIABLE && nargs >= 3 && a[0] < bound && a[2] == SC_PUSH_CONSTANT) {
			/* result type, result id, storage class */
			block = pc_ptr[a[0]] ? pc_ptr[a[0]] - 1 : 0;
		}
	}
	if (bad) {
		snprintf(err, errlen, "SPIR-V instruction runs past the module's end");
		goto out;
	}
	for (uint32_t id = 0; id < bound; id++) {
		if (!binding[id])
			continue;
		if (set[id] != 1 || binding[id] - 1 > 31) {
			snprintf(err, errlen, "binding %u of set %d: the daemon binds set 0, bindings 0..31",
				 binding[id] - 1, (int)set[id] - 1);
			goto out;
		}
		out->binding_mask |= 1u << (binding[id] - 1);
	}
	if (block) {
		/* the block's size: its members are 32-bit scalars (kiface.h), so
		 * the largest member offset + 4 */
		s = (spv_walk){words, nwords, 5};
		while (spv_next(&s, &op, &a, &nargs, &bad)) {
			if (op == OP_TYPE_STRUCT && nargs >= 1 && a[0] == block) {
				for (uint32_t m = 1; m < nargs; m++)
					if (a[m] >= bound || !int32[a[m]]) {
						snprintf(err, errlen,
							 "push-constant member %u is not a 32-bit integer", m - 1);
						goto out;
					}
			} else if (op == OP_MEMBER_DECORATE && nargs >= 4 && a[0] == block &&
				   a[2] == DEC_OFFSET && a[3] + 4 > out->push_bytes) {
				out->push_bytes = a[3] + 4;
			}
		}
	}
	rc = 0;
out:
	free(binding);
	free(set);
	free(pc_ptr);
	free(int32);
	return rc;
}

int spirv_iface_check(const uint32_t *words, size_t nwords, uint32_t bindings, uint32_t push_bytes,
		      const char *what, char *err, size_t errlen)
{
	spirv_iface f;
	char why[160];
	if (spirv_iface_read(words, nwords, &f, why, sizeof(why)) != 0) {
		snprintf(err, errlen, "kernel %s: %s", what, why);
		return -1;
	}
	const uint32_t layout = bindings >= 32 ? UINT32_MAX : (1u << bindings) - 1;
	if (f.binding_mask & ~layout) {
		snprintf(err, errlen,
			 "kernel %s binds storage buffers 0x%x, its layout has %u (shaders/iface/kernels.h)",
			 what, f.binding_mask, bindings);
		return -1;
	}
	if (f.push_bytes != push_bytes) {
		snprintf(err, errlen,
			 "kernel %s has %u bytes of push constants, the daemon pushes %u "
			 "(shaders/iface/kernels.h)",
			 what, f.push_bytes, push_bytes);
		return -1;
	}
	return 0;
}
