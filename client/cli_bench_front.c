/* client/cli_bench_front.c — `vkgrad bench`: runs vkgrad-bench, the
 * benchmark program (bench/), which links the daemon's core for its direct
 * mode; vkgrad itself links only libvkgrad. The program is looked for next
 * to this executable (the build tree, or where make install put both), then
 * on PATH. The command line goes on unchanged, --socket first when given. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BENCH_PROGRAM "vkgrad-bench"

/* The vkgrad-bench beside /proc/self/exe into buf: 0, or -1 when there is none. */
static int bench_beside_self(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -1;
	slash[1] = '\0';
	if ((size_t)snprintf(buf, len, "%s%s", self, BENCH_PROGRAM) >= len)
		return -1;
	return access(buf, X_OK) == 0 ? 0 : -1;
}

int cli_bench(const cli_ctx *ctx, int argc, char **argv)
{
	/* vkgrad-bench [--socket PATH] bench ARGS...: argv[0] here is "bench" */
	char *args[argc + 4];
	int n = 0;
	char path[PATH_MAX];
	const bool beside = bench_beside_self(path, sizeof(path)) == 0;
	args[n++] = beside ? path : BENCH_PROGRAM;
	if (ctx->socket) {
		args[n++] = "--socket";
		args[n++] = (char *)ctx->socket;
	}
	for (int i = 0; i < argc; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	fflush(stdout);
	if (beside)
		execv(path, args);
	else
		execvp(BENCH_PROGRAM, args);
	cli_errf("vkgrad: bench: cannot run %s (%s): it is built beside vkgrad "
		 "(make all) and installed beside it (make install)\n",
		 beside ? path : BENCH_PROGRAM, strerror(errno));
	return CLI_EXIT_USAGE;
}
