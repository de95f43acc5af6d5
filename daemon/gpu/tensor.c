/* daemon/gpu/tensor.c — see tensor.h. */
#include "tensor.h"

#include "buffer.h"

#include <stdio.h>
#include <stdlib.h>

uint64_t tensor_fault_alloc_at;
static uint64_t allocs;

static queue_node *set_live(tensor_set *set)
{
	if (!set->live.next)
		queue_init(&set->live);
	return &set->live;
}

/* The buffer and memory gone (a lost device's, or the tensor's end). */
static void drop_memory(tensor *t)
{
	gpu_buffer_destroy(t->reg.dev, &t->reg.buf, &t->reg.mem);
	t->set->bytes -= t->alloc;
	t->alloc = 0;
}

/* region_unref's last reference (region.destroy). */
static void tensor_destroy(region *r)
{
	tensor *t = tensor_of(r);
	drop_memory(t);
	queue_remove(&t->live);
	t->set->count--;
	free(t);
}

int tensor_create(tensor **out, tensor_set *set, const device *d, proto_dtype dt, uint64_t rows,
		  uint64_t cols, uint64_t bytes, uid_t uid, proto_err *err)
{
	*out = NULL;
	tensor *t = calloc(1, sizeof(*t));
	if (!t)
		return proto_fail(err, PROTO_INTERNAL, "tensor_new: out of memory");
	/* whole 32-bit words: the zero fill (vkCmdFillBuffer) writes words */
	const uint64_t alloc = (bytes + 3) / 4 * 4;
	const gpu_buffer_info bi = {
		.what = "device tensor",
		.size = alloc,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.shared = true,
		.required = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
	};
	char why[200];
	VkResult vr;
	if (++allocs == tensor_fault_alloc_at) {
		vr = VK_ERROR_OUT_OF_DEVICE_MEMORY;
		snprintf(why, sizeof(why), "fault injection: allocating %llu bytes for the device tensor "
			 "failed (VkResult %d)", (unsigned long long)alloc, vr);
	} else {
		vr = gpu_buffer_create(d, &bi, &t->reg.buf, &t->reg.mem, NULL, why, sizeof(why));
	}
	if (vr != VK_SUCCESS) {
		free(t);
		if (vr == VK_ERROR_OUT_OF_DEVICE_MEMORY || vr == VK_ERROR_OUT_OF_HOST_MEMORY)
			return proto_fail(err, PROTO_LIMIT,
					  "tensor_new: the device has no memory for %llu bytes: %s",
					  (unsigned long long)bytes, why);
		return proto_fail(err, PROTO_INTERNAL, "tensor_new: %s", why);
	}
	t->reg.refs = 1;
	t->reg.size = bytes;
	t->reg.dev = d;
	t->reg.uid = uid;
	t->reg.device_local = true;
	t->reg.destroy = tensor_destroy;
	t->dtype = dt;
	t->rows = rows;
	t->cols = cols;
	t->bytes = bytes;
	t->alloc = alloc;
	t->uid = uid;
	t->set = set;
	queue_insert_head(set_live(set), &t->live);
	set->count++;
	set->bytes += alloc;
	*out = t;
	return 0;
}

uint64_t tensor_set_uid_bytes(const tensor_set *set, uid_t uid)
{
	uint64_t n = 0;
	if (!set->live.next)
		return 0;
	const queue_node *q;
	queue_foreach(q, &set->live) {
		const tensor *t = queue_data(q, tensor, live);
		if (t->uid == uid)
			n += t->alloc;
	}
	return n;
}

unsigned tensor_set_by_uid(const tensor_set *set, proto_uid_bytes *out, unsigned max)
{
	unsigned n = 0;
	if (!set->live.next || max == 0)
		return 0;
	const queue_node *q;
	queue_foreach(q, &set->live) {
		const tensor *t = queue_data(q, tensor, live);
		if (!t->alloc)
			continue;
		uint32_t uid = (uint32_t)t->uid;
		unsigned i = 0;
		while (i < n && out[i].uid != uid)
			i++;
		if (i == n) {
			if (n == max - 1 && uid != PROTO_UID_OTHER) {
				/* the last entry gathers the rest */
				uid = PROTO_UID_OTHER;
				i = 0;
				while (i < n && out[i].uid != uid)
					i++;
			}
			if (i == n)
				out[n++] = (proto_uid_bytes){.uid = uid, .bytes = 0};
		}
		out[i].bytes += t->alloc;
	}
	return n;
}

void tensor_set_lose_all(tensor_set *set)
{
	if (!set->live.next)
		return;
	queue_node *q;
	queue_foreach(q, &set->live) {
		tensor *t = queue_data(q, tensor, live);
		if (t->lost)
			continue;
		drop_memory(t);
		t->lost = true;
	}
}
