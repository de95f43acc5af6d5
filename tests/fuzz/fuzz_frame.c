/* tests/fuzz/fuzz_frame.c — libFuzzer target: frame reassembly in
 * fuzzer-chosen chunks, then every frame body through the request decoder and
 * the job checks, as daemon/net/conn.c and daemon/ops/ops.c do.
 *
 * Input layout:
 *   byte 0          bits 0-2: number of chunk sizes - 1 (1..8)
 *                   bits 3-4: number of regions - 1 (1..4)
 *   2 bytes each    chunk sizes, big-endian, plus 1 (1..65536 = the daemon's
 *                   read size); used in turn, cyclically
 *   8 bytes each    sizes of regions 1..n, big-endian
 *   the rest        the byte stream the client sends
 *
 * Checked:
 * - the framer's buffer bound. proto_framer_push grows cap only when the
 *   bytes held plus the chunk n do not fit, to 4096 doubled until they fit,
 *   clamped to max_frame + 4 + n. Draining after every push leaves at most an
 *   incomplete frame (≤ max_frame + 3 bytes), so the clamp never cuts below
 *   what is needed, and after every push:
 *     len ≤ cap ≤ max_frame + 4 + (largest chunk pushed so far),
 *   a reallocation by a push of n gives cap ≤ max_frame + 4 + n, and the
 *   grown cap is either the old one (4096 when none) doubled k ≥ 1 times
 *   or exactly max_frame + 4 + n;
 * - every body is 1..max_frame bytes and equals the stream's bytes at the
 *   offset where that frame starts;
 * - the frames (offset, length, bytes) and the outcome (clean end with the
 *   same bytes left over, or -EMSGSIZE at the same offset) are the same as
 *   when the stream is pushed in one piece, and as a direct walk of the
 *   stream's length prefixes;
 * - each body: fuzz_common.h's request checks, until the first bad_frame
 *   body (the daemon stops reading that connection there; framing goes on
 *   here so that the reassembly checks see the whole stream).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

#define MAX_FRAME PROTO_MIN_MAX_FRAME

typedef struct frame_rec {
	size_t at;    /* stream offset of the length prefix */
	uint32_t len; /* body bytes */
} frame_rec;

typedef struct run_result {
	frame_rec *rec;
	size_t n;
	int status;      /* 0, or -EMSGSIZE */
	size_t consumed; /* stream bytes taken as whole frames */
	size_t left;     /* bytes held at the end (clean end only) */
} run_result;

static uint64_t get_be(const uint8_t *p, unsigned k)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < k; i++)
		v = v << 8 | p[i];
	return v;
}

/* c is base × 2^k for some k ≥ 0 */
static bool doubled_from(size_t c, size_t base)
{
	return c >= base && c % base == 0 && ((c / base) & (c / base - 1)) == 0;
}

/* Feed s[0..slen) in the given chunk sizes; drain after every push exactly as
 * conn_read does. With dispatch, bodies go through fuzz_request. */
static void run(const uint8_t *s, size_t slen, const size_t *chunk, unsigned nchunk,
		bool dispatch, const fuzz_regions *rt, run_result *r)
{
	proto_framer f;
	proto_framer_init(&f, MAX_FRAME);
	size_t pos = 0, biggest = 0;
	unsigned ci = 0;
	bool bad_frame_seen = false;
	r->n = 0;
	r->status = 0;
	r->consumed = 0;
	while (pos < slen) {
		size_t n = chunk[ci++ % nchunk];
		if (n > slen - pos)
			n = slen - pos;
		if (n > biggest)
			biggest = n;
		FUZZ_ASSERT(f.len <= MAX_FRAME + PROTO_FRAME_HDR - 1);
		const size_t old_cap = f.cap;
		FUZZ_ASSERT(proto_framer_push(&f, s + pos, n) == 0);
		pos += n;
		const size_t bound = (size_t)MAX_FRAME + PROTO_FRAME_HDR + n;
		FUZZ_ASSERT(f.len <= f.cap);
		FUZZ_ASSERT(f.cap <= (size_t)MAX_FRAME + PROTO_FRAME_HDR + biggest);
		if (f.cap != old_cap) {
			FUZZ_ASSERT(f.cap > old_cap);
			FUZZ_ASSERT(f.cap <= bound);
			FUZZ_ASSERT(f.cap == bound || doubled_from(f.cap, old_cap ? old_cap : 4096));
		}
		for (;;) {
			const uint8_t *body = NULL;
			uint32_t len = 0;
			const int rc = proto_framer_next(&f, &body, &len);
			if (rc == 0)
				break;
			if (rc < 0) {
				FUZZ_ASSERT(rc == -EMSGSIZE);
				r->status = rc;
				goto out; /* the daemon answers bad_frame and stops reading */
			}
			FUZZ_ASSERT(rc == 1);
			FUZZ_ASSERT(len >= 1 && len <= MAX_FRAME);
			FUZZ_ASSERT(body >= f.buf && body + len <= f.buf + f.cap);
			const size_t at = r->consumed;
			FUZZ_ASSERT(at + PROTO_FRAME_HDR + len <= pos);
			FUZZ_ASSERT(get_be(s + at, PROTO_FRAME_HDR) == len);
			FUZZ_ASSERT(memcmp(body, s + at + PROTO_FRAME_HDR, len) == 0);
			r->rec[r->n++] = (frame_rec){at, len};
			r->consumed = at + PROTO_FRAME_HDR + len;
			if (dispatch && !bad_frame_seen)
				bad_frame_seen = fuzz_request(body, len, rt) == PROTO_BAD_FRAME;
		}
		/* what is left is an incomplete frame with a valid prefix */
		FUZZ_ASSERT(f.len == pos - r->consumed);
	}
out:
	r->left = f.len;
	proto_framer_free(&f);
}

/* The expected result, from the stream's length prefixes alone. */
static void walk(const uint8_t *s, size_t slen, run_result *r)
{
	size_t at = 0;
	r->n = 0;
	r->status = 0;
	while (slen - at >= PROTO_FRAME_HDR) {
		const uint64_t n = get_be(s + at, PROTO_FRAME_HDR);
		if (n == 0 || n > MAX_FRAME) {
			r->status = -EMSGSIZE;
			break;
		}
		if (slen - at - PROTO_FRAME_HDR < n)
			break;
		r->rec[r->n++] = (frame_rec){at, (uint32_t)n};
		at += PROTO_FRAME_HDR + n;
	}
	r->consumed = at;
	r->left = slen - at;
}

static void same(const run_result *a, const run_result *b)
{
	FUZZ_ASSERT(a->status == b->status);
	FUZZ_ASSERT(a->n == b->n);
	FUZZ_ASSERT(a->consumed == b->consumed);
	FUZZ_ASSERT(a->n == 0 || memcmp(a->rec, b->rec, a->n * sizeof(*a->rec)) == 0);
	if (a->status == 0)
		FUZZ_ASSERT(a->left == b->left);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const unsigned nchunk = (data[0] & 7u) + 1, nreg = ((data[0] >> 3) & 3u) + 1;
	const size_t hdr = 1 + 2 * (size_t)nchunk + 8 * (size_t)nreg;
	if (size < hdr)
		return 0;
	size_t chunk[8];
	for (unsigned i = 0; i < nchunk; i++)
		chunk[i] = (size_t)get_be(data + 1 + 2 * i, 2) + 1;
	fuzz_regions rt = {.n = nreg};
	for (unsigned i = 0; i < nreg; i++)
		rt.size[i] = get_be(data + 1 + 2 * nchunk + 8 * i, 8);
	const uint8_t *s = data + hdr;
	const size_t slen = size - hdr;

	/* a frame takes at least 5 bytes of the stream */
	const size_t max_rec = slen / (PROTO_FRAME_HDR + 1) + 1;
	frame_rec *mem = calloc(3 * max_rec, sizeof(frame_rec));
	FUZZ_ASSERT(mem);
	run_result chunked = {.rec = mem}, whole = {.rec = mem + max_rec},
		   expect = {.rec = mem + 2 * max_rec};
	const size_t one[1] = {slen ? slen : 1};

	run(s, slen, chunk, nchunk, true, &rt, &chunked);
	run(s, slen, one, 1, false, &rt, &whole);
	walk(s, slen, &expect);
	same(&chunked, &whole);
	same(&chunked, &expect);
	free(mem);
	return 0;
}
