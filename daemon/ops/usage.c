/* daemon/ops/usage.c — see usage.h. */
#include "usage.h"

#include <string.h>
#include <time.h>

void usage_init(usage *u)
{
	memset(u, 0, sizeof(*u));
	u->other.uid = PROTO_UID_OTHER;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	u->started_unix_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void usage_error(usage *u, proto_code code)
{
	if ((unsigned)code < PROTO_CODE_COUNT)
		u->errors[code]++;
}

static proto_uid_stat *entry(usage *u, uid_t uid)
{
	for (unsigned i = 0; i < u->nuids; i++)
		if (u->uids[i].uid == (uint32_t)uid)
			return &u->uids[i];
	if (u->nuids == USAGE_MAX_UIDS || (uint32_t)uid == PROTO_UID_OTHER)
		return &u->other;
	proto_uid_stat *e = &u->uids[u->nuids++];
	memset(e, 0, sizeof(*e));
	e->uid = (uint32_t)uid;
	return e;
}

void usage_job(usage *u, uid_t uid, proto_code code, uint64_t gpu_us)
{
	proto_uid_stat *e = entry(u, uid);
	e->gpu_us += gpu_us;
	if (code == PROTO_OK) {
		e->jobs_done++;
		return;
	}
	e->jobs_failed++;
	if ((unsigned)code < PROTO_CODE_COUNT)
		u->failed[code]++;
}

uint64_t usage_job_gpu_us(uint64_t kernel_us, bool has_kernel_us, uint64_t gpu_us,
			  uint32_t batch_jobs)
{
	if (has_kernel_us)
		return kernel_us;
	return batch_jobs ? gpu_us / batch_jobs : gpu_us;
}

void usage_stats(const usage *u, proto_stats *s)
{
	s->has_counters = true;
	for (int c = 0; c < PROTO_CODE_COUNT; c++) {
		s->jobs_failed_by_code[c] = u->failed[c];
		/* a failed job's reply is an error reply too */
		s->requests_rejected_by_code[c] = u->errors[c] >= u->failed[c] ? u->errors[c] - u->failed[c] : 0;
	}
	s->started_unix_s = u->started_unix_s;
	s->n_uids = 0;
	for (unsigned i = 0; i < u->nuids; i++)
		s->uids[s->n_uids++] = u->uids[i];
	if (u->other.jobs_done || u->other.jobs_failed || u->other.gpu_us)
		s->uids[s->n_uids++] = u->other;
}
