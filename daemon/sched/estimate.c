/* daemon/sched/estimate.c — see estimate.h. */
#include "estimate.h"

#include <string.h>

/* Priors: about 20 T multiply-adds/s for f32 and 100 T for 16-bit on a
 * GPU; 0.04 G/s on a CPU device (a loaded 2-core lavapipe: a slice of
 * the first job of a kind errs short). Measurements replace them within a few
 * jobs of each kind. */
#define GPU_NS_PER_MAC_F32 (1.0 / 20000.0)
#define GPU_NS_PER_MAC_16 (1.0 / 100000.0)
#define CPU_NS_PER_MAC 25.0
#define GPU_OVERHEAD_NS 8000.0
#define CPU_OVERHEAD_NS 200000.0
/* a measurement teaches the rate only when it is this many overheads long */
#define LEARN_MIN_OVERHEADS 4.0

void estimate_init(estimate *e, bool cpu)
{
	memset(e, 0, sizeof(*e));
	for (int d = 0; d < PROTO_DTYPE_COUNT; d++)
		e->prior_ns_per_mac[d] = cpu ? CPU_NS_PER_MAC
					     : d == PROTO_F32 ? GPU_NS_PER_MAC_F32 : GPU_NS_PER_MAC_16;
	e->overhead_ns = cpu ? CPU_OVERHEAD_NS : GPU_OVERHEAD_NS;
}

uint64_t estimate_key(const proto_request *q, bool devlocal)
{
	uint64_t outputs = 0;
	for (int t = 0; t < PROTO_T_COUNT; t++)
		outputs |= (uint64_t)q->t[t].present << t;
	const uint64_t v[] = {(uint64_t)q->dtype, outputs, (uint64_t)q->variant, devlocal,
			      (uint64_t)q->op};
	uint64_t h = 14695981039346656037ull; /* FNV-1a */
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		for (int b = 0; b < 64; b += 8) {
			h ^= (v[i] >> b) & 0xff;
			h *= 1099511628211ull;
		}
	return h ? h : 1;
}

uint64_t estimate_macs(const proto_request *q)
{
	const uint64_t bio = q->batch * q->in * q->out;
	return (q->t[PROTO_T_DW].present ? bio : 0) + (q->t[PROTO_T_DX].present ? bio : 0) +
	       (q->t[PROTO_T_DB].present ? q->batch * q->out : 0);
}

static const estimate_kind *find(const estimate *e, uint64_t key)
{
	for (uint64_t i = 0; i < 4; i++) {
		const estimate_kind *k = &e->kinds[(key + i) % ESTIMATE_KINDS];
		if (k->key == key)
			return k;
	}
	return NULL;
}

double estimate_rate(const estimate *e, uint64_t key, proto_dtype dtype)
{
	const estimate_kind *k = find(e, key);
	if (k)
		return k->ns_per_mac;
	return e->prior_ns_per_mac[dtype < PROTO_DTYPE_COUNT ? dtype : PROTO_F32];
}

uint64_t estimate_ns(const estimate *e, uint64_t key, proto_dtype dtype, uint64_t macs)
{
	const double ns = e->overhead_ns + (double)macs * estimate_rate(e, key, dtype);
	return ns < 1.8e19 ? (uint64_t)ns : UINT64_MAX / 2;
}

bool estimate_known(const estimate *e, uint64_t key)
{
	return find(e, key) != NULL;
}

void estimate_learn(estimate *e, uint64_t key, proto_dtype dtype, uint64_t macs, uint64_t gpu_ns)
{
	if (macs == 0)
		return;
	/* mostly overhead: the kind is known (its jobs are that short), its
	 * rate stays what it was. Jobs whose multiply-adds the prior puts
	 * below the overhead teach no rate even when they took long: their
	 * time is a first dispatch's, or the device's fixed costs, not their
	 * work's, and a rate learned from them would make every larger job
	 * of the kind look hundreds of times longer than it is. */
	const bool teaches = (double)gpu_ns >= LEARN_MIN_OVERHEADS * e->overhead_ns &&
			     (double)macs * e->prior_ns_per_mac[dtype < PROTO_DTYPE_COUNT ? dtype : PROTO_F32] >=
				     e->overhead_ns;
	const double rate = teaches ? ((double)gpu_ns - e->overhead_ns) / (double)macs
				    : estimate_rate(e, key, dtype);
	e->tick++;
	e->learned += teaches;
	estimate_kind *k = (estimate_kind *)find(e, key);
	if (!k) {
		/* a free entry of the key's four, else the least recently used */
		estimate_kind *victim = NULL;
		for (uint64_t i = 0; i < 4; i++) {
			estimate_kind *c = &e->kinds[(key + i) % ESTIMATE_KINDS];
			if (!c->key) {
				victim = c;
				break;
			}
			if (!victim || c->used_at < victim->used_at)
				victim = c;
		}
		*victim = (estimate_kind){.key = key, .ns_per_mac = rate, .samples = 0};
		k = victim;
	} else if (teaches) {
		k->ns_per_mac += (rate - k->ns_per_mac) / 4.0;
	}
	k->samples++;
	k->used_at = e->tick;
}
