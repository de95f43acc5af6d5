/* daemon/gpu/tensor.h — a device tensor (proto/README.md, "Device
 * tensors"): rows × cols elements of one dtype in device-local memory,
 * owned by one connection, named by jobs as an operand and by the tensor
 * ops. Its memory never holds another client's bytes when it is handed
 * out: the connection's first use is a zero fill (tensor_ops.c queues it
 * on the connection's lane before any job can name the tensor).
 *
 * A tensor IS a region (its first member) whose buffer is device-local:
 * region.device_local, no mapping, never staged or imported. Jobs hold
 * it through their reg[] slots with offset 0, so the recorder's conflict
 * tracking, binding and reference counting treat it as any region. The
 * connection's table holds one reference, every queued or running job one;
 * the last region_unref frees the memory (tensor_destroy, through the
 * region's destroy hook) and takes its bytes off the set.
 *
 * Every live tensor is on its daemon's tensor_set, which counts bytes (all,
 * per uid) against --max-device-bytes and --max-device-bytes-per-uid. After
 * a device loss, tensor_set_lose_all drops every tensor's memory: each
 * stays, `lost`, until its references go (an op naming it answers
 * device_lost; a queued job naming it too). Loop thread only. */
#ifndef VKG_DAEMON_TENSOR_H
#define VKG_DAEMON_TENSOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "device.h"
#include "msg.h"
#include "queue.h"
#include "region.h"

/* The live tensors of one daemon. Zero-initialised is empty; it must
 * outlive its tensors. */
typedef struct tensor_set {
	queue_node live;     /* tensor.live, newest first */
	uint64_t count;      /* live tensors (lost ones included) */
	uint64_t bytes;      /* device bytes they hold (lost ones hold none) */
	uint64_t next_id;    /* the last id handed out (ids are the daemon's) */
} tensor_set;

typedef struct tensor {
	region reg;          /* first: a job's reg[t] points here (device_local) */
	uint64_t id;         /* the connection's id for it (tensor_ops.c sets it) */
	proto_dtype dtype;
	uint64_t rows, cols;
	uint64_t bytes;      /* rows × cols × element size */
	uint64_t alloc;      /* device bytes held (bytes, rounded up; 0 once lost) */
	uid_t uid;           /* the creating peer's (the per-uid limit) */
	bool lost;           /* its memory went with a lost device */
	tensor_set *set;
	queue_node live;     /* on set's list */
} tensor;

/* The region r as the tensor it is, or NULL when r is a client region. */
static inline tensor *tensor_of(region *r)
{
	return r && r->device_local ? (tensor *)r : NULL;
}

/* A tensor of rows × cols elements of dtype dt (bytes: the caller checked
 * the product against its limits) in device-local memory of d, owned by
 * uid, live on set with one reference (the caller's). Its contents are
 * undefined until the zero fill runs. Returns 0 and *out, or a negative
 * proto code with err: `limit` when the device has no memory for it
 * (naming the bytes and the Vulkan result), `internal` otherwise. */
int tensor_create(tensor **out, tensor_set *set, const device *d, proto_dtype dt, uint64_t rows,
		  uint64_t cols, uint64_t bytes, uid_t uid, proto_err *err);

/* Fault injection (VKGRAD_FAULT_INJECT=tensor_alloc:N, tests): the Nth
 * tensor_create's allocation fails as VK_ERROR_OUT_OF_DEVICE_MEMORY. */
extern uint64_t tensor_fault_alloc_at;

/* Device bytes uid's live tensors hold (a walk of the set). */
uint64_t tensor_set_uid_bytes(const tensor_set *set, uid_t uid);
/* Up to max (uid, bytes) pairs into out, one per uid holding tensor bytes,
 * the rest added to PROTO_UID_OTHER's. Returns how many. */
unsigned tensor_set_by_uid(const tensor_set *set, proto_uid_bytes *out, unsigned max);

/* After a device loss, with nothing running: every tensor's buffer and
 * memory destroyed, each marked lost (its bytes off the set). */
void tensor_set_lose_all(tensor_set *set);

#endif
