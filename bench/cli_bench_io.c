/* bench/cli_bench_io.c — the small parts every piece of `vkgrad bench`
 * shares (cli_bench.h): whole reads and writes on the pipes between its
 * processes, a result's memory and its rows of stage times, JSON string
 * escaping. */
#include "cli_bench.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bench_result_free(bench_result *r)
{
	free(r->lat_ns);
	free(r->stage_ns);
	r->lat_ns = NULL;
	r->stage_ns = NULL;
	r->n = 0;
}

void bench_stage_row_clear(uint64_t *row)
{
	for (int i = 0; i < PROTO_STAGE_COUNT; i++)
		row[i] = BENCH_NO_STAGE;
}

void bench_stage_put(uint64_t *row, const char *name, uint64_t ns)
{
	int id = proto_stage_parse(name, strlen(name));
	if (id >= 0)
		row[id] = ns;
}

int bench_write_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;
	while (len) {
		ssize_t w = write(fd, b, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		len -= (size_t)w;
	}
	return 0;
}

int bench_read_all(int fd, void *p, size_t len)
{
	uint8_t *b = p;
	while (len) {
		ssize_t r = read(fd, b, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		len -= (size_t)r;
	}
	return 0;
}

void cli_json_escape(char *out, size_t cap, const char *s)
{
	size_t o = 0;
	for (; *s && o + 7 < cap; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20) {
			o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = 0;
}
