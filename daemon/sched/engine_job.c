/* daemon/sched/engine_job.c — see engine_job.h. */
#include "engine_job.h"

#include <stdlib.h>

void job_init(job *j, void *owner, const proto_request *q, const uint64_t bytes[PROTO_T_COUNT],
	      region *const reg[PROTO_T_COUNT], uint64_t t_recv_ns)
{
	j->owner = owner;
	j->req = *q;
	j->t_recv_ns = t_recv_ns;
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		j->bytes[t] = bytes[t];
		if (q->t[t].present) {
			j->reg[t] = reg[t];
			region_ref(reg[t]);
		}
	}
}

job *job_new(void *owner, const proto_request *q, const uint64_t bytes[PROTO_T_COUNT],
	     region *const reg[PROTO_T_COUNT], uint64_t t_recv_ns)
{
	job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	job_init(j, owner, q, bytes, reg, t_recv_ns);
	return j;
}

void job_drop_refs(job *j)
{
	for (int t = 0; t < PROTO_T_COUNT; t++) {
		region_unref(j->reg[t]);
		j->reg[t] = NULL;
	}
	free(j->stream_tl);
	j->stream_tl = NULL;
}

void job_free(job *j)
{
	if (!j)
		return;
	job_drop_refs(j);
	free(j);
}
