/* daemon/net/server.c — see server.h. */
#include "server.h"
#include "clock.h"

#include "conn.h"
#include "log.h"
#include "service.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/un.h>
#include <unistd.h>

#define ACCEPT_BACKOFF_MS 100

static void listen_cb(uv_poll_t *h, int status, int events);

static void accept_resume_cb(uv_timer_t *t)
{
	server *s = t->data;
	if (!s->draining)
		uv_poll_start(&s->listen_poll, UV_READABLE, listen_cb);
}

static void listen_cb(uv_poll_t *h, int status, int events)
{
	server *s = h->data;
	(void)events;
	if (status < 0)
		return;
	for (int i = 0; i < 64; i++) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* out of descriptors: existing clients keep being served;
				 * pause accepting instead of spinning on a readable socket */
				log_warn("accept: %s; pausing new connections for %d ms", strerror(errno),
					 ACCEPT_BACKOFF_MS);
				uv_poll_stop(&s->listen_poll);
				uv_timer_start(&s->accept_timer, accept_resume_cb, ACCEPT_BACKOFF_MS, 0);
			}
			return;
		}
		conn_open(s, fd, s->handler); /* admission: the allow lists, max_connections, the per-uid cap */
	}
}

/* Past --drain-timeout-s: the connections still holding replies unread
 * are closed (their queued jobs dropped), at every check from then on (a
 * job answered later to a peer that does not read would hold the stop
 * again), so that the stop ends, the cache is saved and the process exits
 * 0 before the service manager's stop timeout. Connections that read
 * keep waiting for their jobs. */
static void drain_deadline(server *s)
{
	uint32_t n = 0;
	uint64_t unread = 0;
	for (conn *c = conn_set_first(&s->conns), *next; c; c = next) {
		next = conn_set_next(&s->conns, c);
		size_t pending = conn_out_pending(c);
		if (!pending)
			continue;
		n++;
		unread += pending;
		conn_close(c, "shutdown: --drain-timeout-s passed with replies unread");
	}
	if (n)
		log_warn("shutting down: --drain-timeout-s %u passed; closed %u connection(s) that left "
			 "%llu reply bytes unread (%u job(s) queued, %u running)",
			 s->cfg->drain_timeout_s, n, (unsigned long long)unread, engine_queued(s->eng),
			 engine_running(s->eng));
}

static void drain_check_cb(uv_timer_t *t)
{
	server *s = t->data;
	if (clock_now_ns() >= s->drain_deadline_ns)
		drain_deadline(s);
	bool flushed = true;
	for (conn *c = conn_set_first(&s->conns); c; c = conn_set_next(&s->conns, c))
		if (conn_out_pending(c))
			flushed = false;
	if (!engine_idle(s->eng) || !flushed)
		return;
	uv_timer_stop(t);
	log_notice("all jobs answered; closing %u connection(s)", conn_set_count(&s->conns));
	for (conn *c; (c = conn_set_first(&s->conns));)
		conn_close(c, "daemon shutting down");
	uv_close((uv_handle_t *)&s->drain_timer, NULL);
	conn_set_close(&s->conns);
	uv_close((uv_handle_t *)&s->accept_timer, NULL);
	uv_close((uv_handle_t *)&s->sig_term, NULL);
	uv_close((uv_handle_t *)&s->sig_int, NULL);
	uv_close((uv_handle_t *)&s->listen_poll, NULL);
	recovery_close(s);
	service_close(&s->svc);
	/* engine_destroy closes the async handle; the loop then ends */
	engine_destroy(s->eng);
}

/* recovery.c gave up on the GPU: stop, and exit 1 once the loop ended
 * (the service manager restarts the daemon). */
static void server_give_up(server *s)
{
	s->exit_code = 1;
	server_stop(s);
}

void server_stop(server *s)
{
	if (s->draining)
		return;
	s->draining = true;
	s->drain_deadline_ns = clock_now_ns() + (uint64_t)s->cfg->drain_timeout_s * 1000000000ull;
	log_notice("shutting down: %u job(s) queued, %u running; replies wait at most %u s "
		   "(--drain-timeout-s) to be read", engine_queued(s->eng), engine_running(s->eng),
		   s->cfg->drain_timeout_s);
	service_stopping(&s->svc);
	uv_poll_stop(&s->listen_poll);
	uv_timer_stop(&s->accept_timer);
	recovery_stop(s);
	if (s->own_socket)
		unlink(s->cfg->socket_path);
	uv_timer_start(&s->drain_timer, drain_check_cb, 0, 5);
}

static void signal_cb(uv_signal_t *h, int signum)
{
	server *s = h->data;
	log_notice("received %s", strsignal(signum));
	server_stop(s);
}

static int bind_socket(server *s)
{
	const char *path = s->cfg->socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("socket path %s is too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_err("socket: %s", strerror(errno));
		return -1;
	}
	/* a stale socket from a crashed run is replaced; a live one is not */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		log_err("another daemon is already serving %s", path);
		close(fd);
		return -1;
	}
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	mode_t old = umask(0117); /* socket mode 0660: the group decides who may use the GPU */
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc != 0 || listen(fd, 128) != 0) {
		const int e = errno;
		log_err("bind/listen %s: %s%s", path, strerror(e),
			e == ENOENT || e == EACCES || e == EPERM
				? "; as a user, name a socket of your own (--socket "
				  "$XDG_RUNTIME_DIR/vkgrad.sock) or run systemctl --user start "
				  "vkgradd.socket; the system daemon is systemctl start vkgradd.socket"
				: "");
		close(fd);
		return -1;
	}
	s->listen_fd = fd;
	s->own_socket = true;
	return 0;
}

/* The host's memory in bytes (0: unknown). */
static uint64_t host_ram_bytes(void)
{
	struct sysinfo si;
	if (sysinfo(&si) != 0)
		return 0;
	return (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1);
}

/* The heap staging buffers come from (region.c: host-visible, coherent,
 * cached where there is such memory), in bytes (0: none found). */
static uint64_t staging_heap_bytes(const device *d)
{
	const VkMemoryPropertyFlags vis = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
					  VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	for (int pass = 0; pass < 2; pass++) {
		VkMemoryPropertyFlags want = pass ? vis : vis | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
		for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
			if ((d->mem.memoryTypes[i].propertyFlags & want) == want)
				return d->mem.memoryHeaps[d->mem.memoryTypes[i].heapIndex].size;
	}
	return 0;
}

/* The size of the heap device-local memory comes from (0: none found). */
static uint64_t device_heap_bytes(const device *d)
{
	for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++)
		if (d->mem.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
			return d->mem.memoryHeaps[d->mem.memoryTypes[i].heapIndex].size;
	return 0;
}

int server_start(server *s, uv_loop_t *loop, const config *cfg, device *dev, pipelines *pl,
		 const conn_handler *handler, engine_done_fn done)
{
	memset(s, 0, sizeof(*s));
	s->loop = loop;
	s->cfg = cfg;
	s->dev = dev;
	s->pl = pl;
	s->handler = handler;
	s->listen_fd = -1;
	s->started_ns = clock_now_ns();
	usage_init(&s->usage);
	/* the configured limits, lowered to what the device can run */
	s->limits = cfg->limits;
	config_region_budget(cfg, host_ram_bytes(), staging_heap_bytes(dev),
			     &s->limits.max_total_region_bytes, &s->limits.max_region_bytes_per_uid);
	config_device_budget(cfg, device_heap_bytes(dev), &s->limits.max_device_bytes,
			     &s->limits.max_device_bytes_per_uid);
	s->limits.max_connections = cfg->max_connections;
	s->limits.max_connections_per_uid = cfg->max_connections_per_uid;
	s->limits.max_fds_per_message = CONN_CMSG_FDS;
	s->limits.max_fds_held = CONN_MAX_FDS;
	s->limits.max_outbound_bytes = cfg->max_outbound_bytes;
	device_clamp_limits(dev, &s->limits);
	admission_init(&s->admission, cfg, &s->limits);
	char err[256];
	const engine_events ev = {
		.done = done,
		.replies = conn_replies_cork, .replies_ctx = s,
		.lost = recovery_lost, .lost_ctx = s,
	};
	s->eng = engine_new();
	if (!s->eng) {
		log_err("out of memory for the engine");
		return -1;
	}
	if (engine_init(s->eng, loop, dev, pl, cfg, &ev, err, sizeof(err)) != 0) {
		log_err("%s", err);
		return -1;
	}
	/* socket activation: the service manager's socket, else our own */
	char where[160];
	snprintf(where, sizeof(where), "%s", cfg->socket_path);
	int lfd = service_listen_fd(where, sizeof(where));
	if (lfd >= 0)
		s->listen_fd = lfd; /* own_socket stays false: systemd unlinks it */
	if (lfd == -2 || (lfd == -1 && bind_socket(s) != 0)) {
		engine_destroy(s->eng);
		return -1;
	}
	uv_poll_init(loop, &s->listen_poll, s->listen_fd);
	s->listen_poll.data = s;
	uv_poll_start(&s->listen_poll, UV_READABLE, listen_cb);
	uv_timer_init(loop, &s->accept_timer);
	s->accept_timer.data = s;
	uv_timer_init(loop, &s->drain_timer);
	s->drain_timer.data = s;
	conn_set_init(s);
	uv_signal_init(loop, &s->sig_term);
	s->sig_term.data = s;
	uv_signal_start(&s->sig_term, signal_cb, SIGTERM);
	uv_signal_init(loop, &s->sig_int);
	s->sig_int.data = s;
	uv_signal_start(&s->sig_int, signal_cb, SIGINT);
	recovery_init(s, server_give_up);
	log_notice("listening on %s (max_frame %u, max_regions %u, max_inflight %u, max_dim %llu, max_tensor_bytes %llu)",
		   where, s->limits.max_frame, s->limits.max_regions,
		   s->limits.max_inflight, (unsigned long long)s->limits.max_dim,
		   (unsigned long long)s->limits.max_tensor_bytes);
	log_info("registered bytes: max_total_region_bytes %llu%s, max_region_bytes_per_uid %llu%s "
		 "(host memory %llu, staging heap %llu)",
		 (unsigned long long)s->limits.max_total_region_bytes,
		 cfg->max_total_region_bytes == CONFIG_AUTO ? " (auto)" : "",
		 (unsigned long long)s->limits.max_region_bytes_per_uid,
		 cfg->max_region_bytes_per_uid == CONFIG_AUTO ? " (auto)" : "",
		 (unsigned long long)host_ram_bytes(), (unsigned long long)staging_heap_bytes(dev));
	log_info("device tensors: max_device_bytes %llu%s, max_device_bytes_per_uid %llu%s, "
		 "max_tensors %u per connection (device-local heap %llu)",
		 (unsigned long long)s->limits.max_device_bytes,
		 cfg->max_device_bytes == CONFIG_AUTO ? " (auto)" : "",
		 (unsigned long long)s->limits.max_device_bytes_per_uid,
		 cfg->max_device_bytes_per_uid == CONFIG_AUTO ? " (auto)" : "", s->limits.max_tensors,
		 (unsigned long long)device_heap_bytes(dev));
	return 0;
}

void server_free(server *s)
{
	engine_free(s->eng);
	s->eng = NULL;
}

void server_destroy(server *s)
{
	proto_decoder_free(&s->dec);
	conn_set_destroy(&s->conns);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	s->listen_fd = -1;
}
