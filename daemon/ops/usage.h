/* daemon/ops/usage.h — what the daemon counts for operators beside the
 * engine's counters: every error reply by code (conn_reply_err), accepted
 * jobs that failed by code, and per uid the jobs finished and failed and
 * the GPU time charged to them (ops_job_done); reported by `stats`
 * (proto/README.md, "stats: counters for operators"). The refused
 * connections are admission.h's, the device losses recovery.h's.
 *
 * GPU time charged to a job: its own dispatches' time (kernel_us) when the
 * daemon measured it, else its share of its batch (gpu_us / batch_jobs).
 *
 * The uid table holds the first USAGE_MAX_UIDS uids seen; later ones add
 * to one entry with uid PROTO_UID_OTHER, so the table is bounded whoever
 * connects. Loop thread only. */
#ifndef VKG_DAEMON_USAGE_H
#define VKG_DAEMON_USAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "msg.h"

#define USAGE_MAX_UIDS (PROTO_MAX_UIDS - 1) /* + the "other" entry */

typedef struct usage {
	uint64_t errors[PROTO_CODE_COUNT]; /* error replies, by code */
	uint64_t failed[PROTO_CODE_COUNT]; /* of which accepted jobs' */
	unsigned nuids;
	proto_uid_stat uids[USAGE_MAX_UIDS];
	proto_uid_stat other;
	double started_unix_s;
} usage;

void usage_init(usage *u);
/* An error reply with this code went out. */
void usage_error(usage *u, proto_code code);
/* An accepted job of uid ended: PROTO_OK, or the code it failed with
 * (usage_error is counted for that reply too); gpu_us charged to it. */
void usage_job(usage *u, uid_t uid, proto_code code, uint64_t gpu_us);
/* The GPU µs charged to a job (above). */
uint64_t usage_job_gpu_us(uint64_t kernel_us, bool has_kernel_us, uint64_t gpu_us,
			  uint32_t batch_jobs);
/* Fill s's operator counters (s->has_counters) but the refusals and the
 * device's, which the caller adds. */
void usage_stats(const usage *u, proto_stats *s);

#endif
