/* tests/fuzz/fuzz_request.c — libFuzzer target: one frame body (the input,
 * as is) through everything that reads a body.
 *
 * Checked:
 * - proto_mpcheck: when it accepts, msgpack-c unpacks the body as exactly one
 *   object using every byte, and no proper prefix is accepted (msgpack is
 *   self-delimiting); a body accepted with nesting limit 1 is accepted with
 *   16; a refusal comes with a reason;
 * - daemon side: fuzz_common.h's request checks (decode contract, re-encode
 *   round trip, proto_job_check against its oracle) over a fixed region
 *   table: 1 MiB, 128 MiB, 2^64 - 1 bytes and 64 bytes;
 * - the direct way (proto_decoder without general_only) and the general
 *   way (proto_mpcheck, msgpack_unpack) give the same outcome: code, id,
 *   request bytes, error code and message;
 * - client side: proto_reply_decode on the same bytes returns 0 or -EBADMSG
 *   and leaves its strings terminated and its counts in range (stats
 *   histograms: at most PROTO_MAX_HIST, bounds within their array, rising;
 *   a job's trace and stats' stages: at most PROTO_MAX_STAGES, names ended).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "mpcheck.h"

static const fuzz_regions regions = {
	.n = 4,
	.size = {1u << 20, 1u << 27, UINT64_MAX, 64},
};

static void check_mpcheck(const uint8_t *p, size_t n)
{
	const char *why = NULL;
	const int rc = proto_mpcheck(p, n, PROTO_MAX_DEPTH, &why);
	if (rc != 0) {
		FUZZ_ASSERT(rc == -EBADMSG && why != NULL);
		why = NULL;
		FUZZ_ASSERT(proto_mpcheck(p, n, 1, &why) == -EBADMSG && why != NULL);
		return;
	}
	if (n > 0) {
		why = NULL;
		FUZZ_ASSERT(proto_mpcheck(p, n - 1, PROTO_MAX_DEPTH, &why) == -EBADMSG);
	}
	/* only now is it safe to let msgpack-c allocate for this body */
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	const msgpack_unpack_return ur = msgpack_unpack_next(&u, (const char *)p, n, &off);
	FUZZ_ASSERT(ur == MSGPACK_UNPACK_SUCCESS);
	FUZZ_ASSERT(off == n);
	msgpack_unpacked_destroy(&u);
}

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, 0, cap) != NULL;
}

static void check_reply(const uint8_t *p, size_t n)
{
	proto_reply r;
	proto_err err;
	memset(&err, 0, sizeof(err));
	const int rc = proto_reply_decode(p, n, &r, &err);
	FUZZ_ASSERT(rc == 0 || rc == -EBADMSG);
	if (rc != 0) {
		FUZZ_ASSERT(err.code == PROTO_BAD_FRAME && fuzz_msg_ok(&err));
		return;
	}
	FUZZ_ASSERT((unsigned)r.err.code < PROTO_CODE_COUNT);
	FUZZ_ASSERT(r.ok || r.err.code != PROTO_OK);
	FUZZ_ASSERT(terminated(r.err.message, sizeof(r.err.message)));
	const proto_hello *h = &r.hello;
	FUZZ_ASSERT(h->n_kernels <= PROTO_MAX_KERNELS);
	FUZZ_ASSERT(terminated(h->server, sizeof(h->server)));
	FUZZ_ASSERT(terminated(h->device.name, sizeof(h->device.name)));
	FUZZ_ASSERT(terminated(h->device.driver, sizeof(h->device.driver)));
	FUZZ_ASSERT(terminated(h->device.api, sizeof(h->device.api)));
	FUZZ_ASSERT(terminated(h->device.type, sizeof(h->device.type)));
	for (unsigned i = 0; i < h->n_kernels; i++) {
		const proto_kernel_info *k = &h->kernels[i];
		FUZZ_ASSERT(terminated(k->name, sizeof(k->name)));
		FUZZ_ASSERT(terminated(k->domain, sizeof(k->domain)));
		FUZZ_ASSERT(terminated(k->variant, sizeof(k->variant)));
		FUZZ_ASSERT(terminated(k->dtype, sizeof(k->dtype)));
		FUZZ_ASSERT(terminated(k->status, sizeof(k->status)));
	}
	/* a job's trace and stats' stages: within their arrays, names ended */
	FUZZ_ASSERT(r.trace.n <= PROTO_MAX_STAGES);
	for (unsigned i = 0; i < r.trace.n; i++)
		FUZZ_ASSERT(terminated(r.trace.st[i].name, sizeof(r.trace.st[i].name)));
	FUZZ_ASSERT(r.stats.n_stages <= PROTO_MAX_STAGES);
	for (unsigned i = 0; i < r.stats.n_stages; i++)
		FUZZ_ASSERT(terminated(r.stats.stages[i].name, sizeof(r.stats.stages[i].name)));
	/* stats histograms: within their arrays, bounds rising */
	const proto_stats *st = &r.stats;
	FUZZ_ASSERT(st->n_hist <= PROTO_MAX_HIST);
	for (unsigned i = 0; i < st->n_hist; i++) {
		const proto_histogram *hg = &st->hist[i];
		FUZZ_ASSERT(terminated(hg->name, sizeof(hg->name)));
		FUZZ_ASSERT(hg->n_le <= PROTO_HIST_MAX_LE);
		for (unsigned b = 1; b < hg->n_le; b++)
			FUZZ_ASSERT(hg->le_us[b] > hg->le_us[b - 1]);
	}
}

static void check_ways(const uint8_t *p, size_t n)
{
	static proto_request a, b;
	proto_err ea, eb;
	uint64_t ia, ib;
	proto_decoder d;
	proto_decoder_init(&d);
	memset(&ea, 0, sizeof(ea));
	memset(&eb, 0, sizeof(eb));
	const int ra = proto_request_decode_with(&d, p, n, &a, &ia, &ea);
	d.general_only = true;
	const int rb = proto_request_decode_with(&d, p, n, &b, &ib, &eb);
	proto_decoder_free(&d);
	FUZZ_ASSERT(ra == rb);
	FUZZ_ASSERT(ia == ib);
	FUZZ_ASSERT(memcmp(&a, &b, sizeof(a)) == 0);
	if (ra != 0) {
		FUZZ_ASSERT(ea.code == eb.code);
		FUZZ_ASSERT(strcmp(ea.message, eb.message) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_mpcheck(data, size);
	check_ways(data, size);
	fuzz_request(data, size, &regions);
	check_reply(data, size);
	return 0;
}
