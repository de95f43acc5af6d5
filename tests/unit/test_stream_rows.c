/* tests/unit/test_stream_rows.c — daemon/sched/stream.h stream_chunk_rows: rows
 * of a streamed job per chunk. Under --stream-chunk-bytes auto a chunk is
 * CONFIG_STREAM_AUTO_CHUNK_ELEMS elements of dY whatever the dtype (16 MiB
 * of f32, 8 MiB of f16/bf16: measured the faster for each on the H200,
 * config.h), f16/bf16 at least 1,024 rows and an eighth of the batch; an explicit size is bytes for every dtype; at most
 * STREAM_MAX_CHUNKS chunks; rows whose bytes start on 4 in every tensor.
 * (lavapipe has no transfer-only queue, so no daemon there streams under
 * auto: this is where auto's rows are checked.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "engine_priv.h"
#include "engine_job.h"
#include "stream.h"

static uint64_t rows_of(bool chunk_auto, uint64_t chunk, proto_dtype dt, uint64_t b, uint64_t i, uint64_t o)
{
	static engine e;
	static job j;
	memset(&e, 0, sizeof(e));
	memset(&j, 0, sizeof(j));
	e.stream_chunk = chunk;
	e.stream_chunk_auto = chunk_auto;
	j.req.dtype = dt;
	j.req.batch = b;
	j.req.in = i;
	j.req.out = o;
	return stream_chunk_rows(&e, &j);
}

static void test_auto_same_rows_every_dtype(void **state)
{
	(void)state;
	/* 4 Mi elements of dY at out = 4096: 1,024 rows */
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_F32, 8192, 4096, 4096), 1024);
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_BF16, 8192, 4096, 4096), 1024);
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_F16, 8192, 4096, 4096), 1024);
	/* out = 8192: 512 rows of f32; f16/bf16 at least 1,024 rows and an
	 * eighth of the batch */
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_F32, 16384, 8192, 8192), 512);
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_BF16, 8192, 8192, 8192), 1024);
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_BF16, 16384, 8192, 8192), 2048);
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_F16, 16384, 8192, 8192), 2048);
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_F16, 9000, 4096, 4096), 1125);
	/* an explicit size has no floor */
	assert_int_equal(rows_of(false, 8ull << 20, PROTO_BF16, 16384, 8192, 8192), 512);
}

static void test_explicit_bytes_every_dtype(void **state)
{
	(void)state;
	/* 16 MiB given: bytes, so twice the rows of 16-bit dY */
	assert_int_equal(rows_of(false, 16ull << 20, PROTO_F32, 8192, 4096, 4096), 1024);
	assert_int_equal(rows_of(false, 16ull << 20, PROTO_BF16, 8192, 4096, 4096), 2048);
	assert_int_equal(rows_of(false, 8ull << 20, PROTO_F16, 8192, 4096, 4096), 1024);
	/* a row at least */
	assert_int_equal(rows_of(false, 1, PROTO_F32, 100, 8, 8), 1);
}

static void test_bounds(void **state)
{
	(void)state;
	/* at most STREAM_MAX_CHUNKS chunks: 1-byte chunks of 2^20 rows */
	assert_int_equal(rows_of(false, 1, PROTO_F32, 1ull << 20, 8, 8), (1ull << 20) / STREAM_MAX_CHUNKS);
	/* 16-bit rows of odd length: pairs, so every chunk starts on 4 bytes */
	assert_int_equal(rows_of(false, 1, PROTO_BF16, 100, 9, 8), 2);
	/* auto, bf16, out 4097: 8 MiB / 8,194 bytes = 1,023 rows, made a pair */
	assert_int_equal(rows_of(true, CONFIG_STREAM_AUTO_CHUNK, PROTO_BF16, 8192, 4096, 4097), 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_same_rows_every_dtype),
		cmocka_unit_test(test_explicit_bytes_every_dtype),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests_name("stream_rows", tests, NULL, NULL);
}
