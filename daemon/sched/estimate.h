/* daemon/sched/estimate.h — a job's GPU time, estimated from measured rates.
 *
 * A job's kind for estimates is what sets its rate: dtype, the outputs it
 * asks for, the kernel family it forces (or auto) and whether it takes
 * the device-local path. Each kind has a rate in ns per multiply-add,
 * started from the device type's prior and moved towards each measured
 * job of that kind (an exponential average, 1/4 per measurement). An
 * estimate is a fixed overhead plus multiply-adds times the rate. Only
 * jobs whose measured time is well above the overhead teach the rate, so
 * tiny jobs, whose time is all overhead, do not make large ones look
 * slower than they are; they make their kind known, though. Only batches
 * of one kind are measured (a batch's time cannot be split among kinds).
 * Loop thread only; no Vulkan here. */
#ifndef VKG_DAEMON_SCHED_ESTIMATE_H
#define VKG_DAEMON_SCHED_ESTIMATE_H

#include <stdbool.h>
#include <stdint.h>

#include "msg.h"

#define ESTIMATE_KINDS 128

typedef struct estimate_kind {
	uint64_t key;     /* 0: unused */
	double ns_per_mac;
	uint64_t samples;
	uint64_t used_at; /* estimate_learn's counter when last used (eviction) */
} estimate_kind;

typedef struct estimate {
	double prior_ns_per_mac[PROTO_DTYPE_COUNT];
	double overhead_ns;
	estimate_kind kinds[ESTIMATE_KINDS];
	uint64_t tick;
	uint64_t learned; /* measurements that moved a rate */
} estimate;

/* Priors for a GPU (cpu false) or a CPU device (lavapipe). */
void estimate_init(estimate *e, bool cpu);

/* The key of a request for estimates (never 0): dtype, outputs, forced
 * variant, device-local path. */
uint64_t estimate_key(const proto_request *q, bool devlocal);

/* Multiply-adds of a request: batch·in·out for dW and for dX each,
 * batch·out for db. */
uint64_t estimate_macs(const proto_request *q);

/* Estimated GPU ns of macs multiply-adds of kind key (dtype's prior
 * until the kind is measured). */
uint64_t estimate_ns(const estimate *e, uint64_t key, proto_dtype dtype, uint64_t macs);

/* Jobs of kind key (dtype), macs multiply-adds together, took gpu_ns on
 * the GPU, alone in their batch. A measurement mostly overhead makes the
 * kind known without changing its rate. */
void estimate_learn(estimate *e, uint64_t key, proto_dtype dtype, uint64_t macs, uint64_t gpu_ns);

/* Has a batch of kind key alone been measured? Until then a job's
 * estimate is the prior's, which may be far off. */
bool estimate_known(const estimate *e, uint64_t key);

/* The rate in force for kind key (ns per multiply-add). */
double estimate_rate(const estimate *e, uint64_t key, proto_dtype dtype);

#endif
