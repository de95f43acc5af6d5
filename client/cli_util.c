/* client/cli_util.c — the small helpers every subcommand of vkgrad (and
 * vkgrad-bench, which links this too) uses: whole-line output, error and
 * usage messages, number parsing, the socket path, a clock. */
#include "cli.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void vwrite_fd(int fd, const char *fmt, va_list ap)
{
	char buf[2048];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* one write(2) per call keeps concurrent processes' lines whole */
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, (size_t)n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (int)w;
	}
}

void cli_out(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout); /* keep order with anything printf'd before */
	va_start(ap, fmt);
	vwrite_fd(STDOUT_FILENO, fmt, ap);
	va_end(ap);
}

void cli_errf(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	va_start(ap, fmt);
	vwrite_fd(STDERR_FILENO, fmt, ap);
	va_end(ap);
}

int cli_fail(const vkg_error *err)
{
	cli_errf("vkgrad: %s: %s\n", err->code[0] ? err->code : "io",
		 err->message[0] ? err->message : "unknown error");
	return CLI_EXIT_DAEMON;
}

int cli_usage_fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_errf("vkgrad: %s\n(run 'vkgrad --help' for usage)\n", msg);
	return CLI_EXIT_USAGE;
}

int cli_parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-') {
		cli_usage_fail("%s needs an unsigned number", opt);
		return -1;
	}
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max) {
		cli_usage_fail("%s must be a number in [%" PRIu64 ", %" PRIu64 "] (got '%s')", opt,
			       min, max, s);
		return -1;
	}
	*out = v;
	return 0;
}

int cli_parse_double(const char *opt, const char *s, double min, double max, double *out)
{
	char *end = NULL;
	errno = 0;
	const double v = s ? strtod(s, &end) : NAN;
	if (!s || errno || end == s || *end || !isfinite(v) || v < min || v > max) {
		if (max >= DBL_MAX)
			cli_usage_fail("%s must be a finite number >= %g (got '%s')", opt, min, s ? s : "");
		else
			cli_usage_fail("%s must be a number in [%g, %g] (got '%s')", opt, min, max, s ? s : "");
		return -1;
	}
	*out = v;
	return 0;
}

const char *cli_socket_path(const cli_ctx *ctx)
{
	return ctx->socket ? ctx->socket : vkg_default_socket();
}

vkg_client *cli_connect(const cli_ctx *ctx, vkg_error *err)
{
	return vkg_connect(ctx->socket, err);
}

uint64_t cli_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
