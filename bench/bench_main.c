/* bench/bench_main.c — vkgrad-bench, the benchmark program: `vkgrad bench`
 * (client/cli_bench_front.c) runs it as
 *   vkgrad-bench [--socket PATH] bench [OPTIONS]
 * ("bench" may be left out). Its own program because the direct mode and
 * --peak link the daemon's core (libvkgradd-core.a) and Vulkan, which the
 * user's CLI does not. Options and exit status: `vkgrad bench --help`. */
#include "cli.h"
#include "cli_bench.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	cli_ctx ctx = {0};
	int i = 1;
	if (i < argc && strcmp(argv[i], "--socket") == 0) {
		if (i + 1 >= argc)
			return cli_usage_fail("--socket needs a path");
		ctx.socket = argv[i + 1];
		i += 2;
	} else if (i < argc && strncmp(argv[i], "--socket=", 9) == 0) {
		ctx.socket = argv[i] + 9;
		i++;
	}
	/* cli_bench parses from argv[1], with argv[0] the command's name */
	char *args[argc + 2];
	int n = 0;
	args[n++] = "bench";
	if (i < argc && strcmp(argv[i], "bench") == 0)
		i++;
	while (i < argc)
		args[n++] = argv[i++];
	args[n] = NULL;
	return cli_bench(&ctx, n, args);
}
