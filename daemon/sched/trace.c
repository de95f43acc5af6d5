/* daemon/sched/trace.c — a batch's and its jobs' stages (engine.h's trace):
 * the GPU clock on the host's, the stages from recording to answering. */
#include "sched/internal.h"

#include <string.h>

#define ENGINE_CAL_EVERY_NS 1000000000ull /* recalibrate GPU and host clocks this often */

uint64_t sched_span(uint64_t from, uint64_t to)
{
	return to > from ? to - from : 0;
}

/* A fresh pair of simultaneous GPU and CLOCK_MONOTONIC readings, at most
 * once a second (the clocks drift apart by parts per million). Loop thread,
 * before a submission. */
void sched_calibrate(engine *e, uint64_t now)
{
	const device *d = e->dev;
	if (!d->calibrated || (e->cal_ok && now - e->cal_at_ns < ENGINE_CAL_EVERY_NS))
		return;
	const VkCalibratedTimestampInfoEXT ci[2] = {
		{.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
		{.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT,
		 .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT},
	};
	uint64_t ts[2], dev_max = 0;
	if (d->get_calibrated(d->dev, 2, ci, ts, &dev_max) != VK_SUCCESS)
		return; /* keep the last one, or none */
	e->cal_dev = ts[0];
	e->cal_host_ns = ts[1];
	e->cal_at_ns = now;
	e->cal_ok = true;
}

/* A GPU timestamp of slot s on the host's clock. */
static uint64_t gpu_to_host(const device *d, const engine_slot *s, uint64_t t)
{
	const uint64_t m = d->timestamp_mask, diff = (t - s->cal_dev) & m;
	const double ticks = diff > m / 2 ? -(double)(m - diff) - 1.0 : (double)diff;
	const double ns = (double)s->cal_host_ns + ticks * (double)d->timestamp_period;
	return ns > 0 ? (uint64_t)ns : 0;
}

/* The batch's part of each job's trace, from the end of recording to the
 * start of answering: SUBMIT, then LAUNCH, GPU, COMPLETE where the GPU's
 * timestamps are on the host's clock, GPU and GPU_WAIT where only the GPU's
 * duration is known, GPU_WAIT alone without timestamps. The GPU may begin
 * before vkQueueSubmit returns (a driver that runs the batch inside it, as
 * lavapipe can): SUBMIT then ends when the GPU began. Times are clamped
 * into recorded..seen in order (the calibration is good to a few µs), so
 * the stages add up to seen - recorded. */
void sched_slot_stages(const engine *e, const engine_slot *s, uint64_t st[PROTO_STAGE_COUNT],
			uint32_t *mask, uint64_t *to_gpu_end)
{
	const device *d = e->dev;
	const uint64_t rec = s->t_recorded_ns;
	const uint64_t sub = s->t_submitted_ns > rec ? s->t_submitted_ns : rec;
	const uint64_t seen = s->t_seen_ns > sub ? s->t_seen_ns : sub;
	const volatile uint64_t *ts = s->ts_map;
	const bool have_ts = d->timestamps && ts && ((ts[1] - ts[0]) & d->timestamp_mask) <=
						       d->timestamp_mask / 2;
	*mask = 1u << PROTO_STAGE_HANDOFF | 1u << PROTO_STAGE_SUBMIT;
	st[PROTO_STAGE_HANDOFF] = sched_span(seen, s->t_answer_ns);
	if (have_ts && s->cal_ok) {
		const uint64_t g0 = gpu_to_host(d, s, ts[0]), g1 = gpu_to_host(d, s, ts[1]);
		const uint64_t e1 = g0 < sub ? (g0 > rec ? g0 : rec) : sub; /* submitted, or the GPU began */
		const uint64_t e2 = g0 < e1 ? e1 : g0 > seen ? seen : g0;
		const uint64_t e3 = g1 < e2 ? e2 : g1 > seen ? seen : g1;
		st[PROTO_STAGE_SUBMIT] = e1 - rec;
		st[PROTO_STAGE_LAUNCH] = e2 - e1;
		st[PROTO_STAGE_GPU] = e3 - e2;
		st[PROTO_STAGE_COMPLETE] = seen - e3;
		*mask |= 1u << PROTO_STAGE_LAUNCH | 1u << PROTO_STAGE_GPU | 1u << PROTO_STAGE_COMPLETE;
		*to_gpu_end = sched_span(sub, e3);
	} else if (have_ts) {
		/* the GPU's time within submitted..seen, or, when longer (it ran
		 * inside vkQueueSubmit), within recorded..seen */
		uint64_t g = (uint64_t)((double)((ts[1] - ts[0]) & d->timestamp_mask) *
					d->timestamp_period);
		if (g > seen - rec)
			g = seen - rec;
		const uint64_t w = g <= seen - sub ? seen - sub - g : 0;
		st[PROTO_STAGE_GPU] = g;
		st[PROTO_STAGE_GPU_WAIT] = w;
		st[PROTO_STAGE_SUBMIT] = seen - rec - g - w;
		*mask |= 1u << PROTO_STAGE_GPU | 1u << PROTO_STAGE_GPU_WAIT;
		*to_gpu_end = g; /* at least; the launch is not known */
	} else {
		st[PROTO_STAGE_SUBMIT] = sub - rec;
		st[PROTO_STAGE_GPU_WAIT] = seen - sub;
		*mask |= 1u << PROTO_STAGE_GPU_WAIT;
		*to_gpu_end = seen - sub; /* at most */
	}
}

/* Job j's stages from its arrival to the start of answering its batch,
 * the batch's part (slot_stages) copied in. */
void sched_job_stages(const engine_slot *s, job *j, const uint64_t st[PROTO_STAGE_COUNT],
		       uint32_t mask)
{
	memcpy(j->stage_ns, st, sizeof(j->stage_ns));
	j->stage_mask = mask | 1u << PROTO_STAGE_QUEUE | 1u << PROTO_STAGE_RECORD;
	j->stage_ns[PROTO_STAGE_QUEUE] = sched_span(j->t_queued_ns, s->t_take_ns);
	j->stage_ns[PROTO_STAGE_RECORD] = sched_span(s->t_take_ns, s->t_recorded_ns);
	if (j->t_recv_ns) {
		j->stage_ns[PROTO_STAGE_DECODE] = sched_span(j->t_recv_ns, j->t_queued_ns);
		j->stage_mask |= 1u << PROTO_STAGE_DECODE;
	}
	j->t_answer_ns = s->t_answer_ns;
}

void engine_job_trace(job *j, uint64_t t_encoded, proto_trace *out)
{
	j->stage_ns[PROTO_STAGE_ANSWER] = sched_span(j->t_answer_ns, t_encoded);
	j->stage_mask |= 1u << PROTO_STAGE_ANSWER;
	out->present = j->t_recv_ns != 0;
	out->t_recv_ns = j->t_recv_ns;
	out->t_reply_ns = t_encoded; /* the writer puts the send's time here */
	out->n = 0;
	for (int i = PROTO_STAGE_DECODE; i <= PROTO_STAGE_ANSWER; i++) {
		if (!(j->stage_mask & (1u << i)))
			continue;
		proto_stage *p = &out->st[out->n++];
		/* a fixed-size copy, not snprintf or strlen: this runs per job */
		proto_stage_copy_name(p, (proto_stage_id)i);
		p->ns = j->stage_ns[i];
	}
}
