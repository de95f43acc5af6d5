/* daemon/main.c — vkgradd: parse settings, open the device, build the
 * pipelines, serve until SIGTERM/SIGINT, save the cache, exit (further
 * SIGTERM/SIGINT are logged, never fatal: stop_signals.h). */
#include "config.h"
#include "device.h"
#include "log.h"
#include "ops.h"
#include "pipelines.h"
#include "server.h"
#include "service.h"
#include "stop_signals.h"

#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	config cfg;
	config_defaults(&cfg);
	int rc = config_parse_args(&cfg, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	/* before any thread exists: SIGTERM/SIGINT never end the process by
	 * their default action, the loop reads them (stop_signals.h) */
	if (stop_signals_block() != 0) {
		perror("vkgradd: blocking SIGTERM and SIGINT");
		return 1;
	}
	log_init(cfg.log_level, cfg.env.journal_stream);
	service_init(cfg.env.notify_socket);
	device_keep_drivers(cfg.env.keep_drivers); /* before --list-devices too: it loads the drivers */
	if (cfg.list_devices) {
		char lerr[256];
		if (device_list(stdout, lerr, sizeof(lerr)) != 0) {
			fprintf(stderr, "vkgradd: %s\n", lerr);
			return 1;
		}
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	log_notice("vkgradd %s starting", VKG_VERSION);

	service_status("opening the GPU");
	char err[512];
	device dev;
	if (device_open(&dev, cfg.device, &cfg.env, err, sizeof(err)) != 0) {
		log_err("%s", err);
		return 1;
	}
	service_status("building pipelines on %s", dev.props.deviceName);
	pipelines pl;
	if (pipelines_init(&pl, &dev, cfg.cache_dir, &cfg.env, err, sizeof(err)) != 0) {
		log_err("%s", err);
		pipelines_destroy(&pl, &dev);
		device_close(&dev);
		return 1;
	}
	uv_loop_t loop;
	uv_loop_init(&loop);
	server srv;
	rc = 1;
	if (server_start(&srv, &loop, &cfg, &dev, &pl, &ops_handler, ops_job_done) == 0) {
		log_notice("ready");
		/* only now: a client connecting after READY=1 is served at once */
		service_ready(&srv.svc, &loop, dev.props.deviceName);
		uv_run(&loop, UV_RUN_DEFAULT);
		rc = srv.exit_code; /* 1 when the GPU was lost for good */
	}
	server_destroy(&srv);
	uv_run(&loop, UV_RUN_NOWAIT);
	server_free(&srv);
	if (uv_loop_close(&loop) != 0)
		log_warn("event loop closed with handles still open");
	unsigned verr = atomic_load(&dev.validation_errors);
	pipelines_save(&pl, &dev);
	pipelines_destroy(&pl, &dev);
	device_close(&dev);
	if (verr)
		log_err("%u Vulkan validation error(s) were reported", verr);
	server_signals_end(&srv);
	log_notice("stopped");
	return rc;
}
