/* client/vkgrad.c — see vkgrad.h. One socket per client; requests are
 * msgpack frames from proto/msg.h, replies are matched to requests by id
 * through a table, because the daemon may answer out of order. */
#include "vkgrad.h"
#include "vkgrad_full.h"

#include "frame.h"
#include "mpcheck.h"
#include "msg.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Replies such as hello can be larger than any request the daemon accepts. */
#define VKG_CLIENT_MAX_FRAME (16u << 20)
#define VKG_SYSTEM_SOCKET "/run/vkgrad/vkgrad.sock"

/* One request whose reply has not been claimed yet. */
typedef struct vkg_entry {
	uint64_t id;
	bool done;
	bool ok;
	proto_code code;
	char message[256];
	uint64_t region;
	uint64_t queued_us, gpu_us, batch_jobs, kernel_us; /* kernel_us 0: not sent */
	uint64_t t_submit_ns, t_seen_ns; /* CLOCK_MONOTONIC: request about to go, reply decoded */
	proto_trace trace;               /* the daemon's part, when the reply had one */
	proto_stream_tl stream;          /* a streamed job's timeline (n 0: none) */
	proto_reply *full; /* sync calls needing the whole reply (hello, stats) */
	bool want_raw;     /* vkg_call_raw: keep the reply's body */
	uint8_t *raw;      /* malloc'd copy of it, handed to the caller */
	size_t raw_len;
} vkg_entry;

/* A mapping made by vkg_region_create, unmapped by destroy or close. */
typedef struct vkg_mapping {
	uint64_t region;
	void *ptr;
	size_t size;
} vkg_mapping;

struct vkg_client {
	pthread_mutex_t lock;
	int fd;
	uint64_t next_id;
	proto_framer rx;
	proto_reply scratch; /* large: kept here rather than on the stack */

	vkg_entry *entries;
	size_t n_entries, cap_entries;
	vkg_mapping *maps;
	size_t n_maps, cap_maps;

	/* Once the connection is unusable every later call reports this. */
	int dead_rc;
	char dead_msg[256];
	char fatal[200]; /* the daemon's id-0 error, sent just before it closes */
	proto_code fatal_code;
	unsigned spin_us;  /* vkg_set_wait_spin */
	/* the last hello's kernels, all of them (vkg_info_kernel) */
	unsigned n_kernels;
	vkg_kernel_info kernels[VKG_FULL_MAX_KERNELS];
};

int vkg_info_kernel(const vkg_client *c, unsigned i, vkg_kernel_info *out)
{
	if (i >= c->n_kernels)
		return -ENOENT;
	*out = c->kernels[i];
	return 0;
}

/* ---- errors ------------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static int set_err(vkg_error *err, int rc,
							 const char *code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		snprintf(err->code, sizeof(err->code), "%s", code);
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return rc;
}

static void clear_err(vkg_error *err)
{
	if (err)
		err->code[0] = err->message[0] = 0;
}

/* Mark the connection unusable; the first reason wins. */
__attribute__((format(printf, 3, 4))) static void conn_dead(vkg_client *c, int rc,
							    const char *fmt, ...)
{
	if (c->dead_rc)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->dead_msg, sizeof(c->dead_msg), fmt, ap);
	va_end(ap);
	c->dead_rc = rc;
}

/* The daemon's code when it said why it closed (bad_frame, limit). */
static int dead_err(const vkg_client *c, vkg_error *err)
{
	return set_err(err, c->dead_rc, c->fatal[0] ? proto_code_name(c->fatal_code) : "io", "%s",
		       c->dead_msg);
}

/* ---- reply table -------------------------------------------------------- */

static vkg_entry *entry_find(vkg_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_entries; i++)
		if (c->entries[i].id == id)
			return &c->entries[i];
	return NULL;
}

static vkg_entry *entry_add(vkg_client *c, uint64_t id, proto_reply *full)
{
	if (c->n_entries == c->cap_entries) {
		size_t cap = c->cap_entries ? c->cap_entries * 2 : 16;
		vkg_entry *ne = realloc(c->entries, cap * sizeof(*ne));
		if (!ne)
			return NULL;
		c->entries = ne;
		c->cap_entries = cap;
	}
	vkg_entry *e = &c->entries[c->n_entries++];
	memset(e, 0, sizeof(*e));
	e->id = id;
	e->full = full;
	return e;
}

/* Order of the table does not matter: swap the last one in. A raw reply
 * body not handed out yet goes with the entry. */
static void entry_remove(vkg_client *c, vkg_entry *e)
{
	size_t i = (size_t)(e - c->entries);
	free(e->raw);
	c->entries[i] = c->entries[--c->n_entries];
}

/* ---- traces ------------------------------------------------------------- */

static _Thread_local vkg_trace last_trace;
static _Thread_local bool last_trace_set;
static _Thread_local vkg_stream_timeline last_stream;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void trace_add(vkg_trace *t, const char *name, uint64_t ns)
{
	if (t->n_stages >= VKG_TRACE_MAX_STAGES)
		return;
	vkg_trace_stage *s = &t->stages[t->n_stages++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->ns = ns;
}

/* The finished job's trace for vkg_trace_last: the daemon's stages between
 * its own two times, with this process's ends around them when the clocks
 * agree. */
static void trace_keep(const vkg_entry *e)
{
	vkg_trace *t = &last_trace;
	last_trace_set = e->trace.present;
	if (!e->trace.present)
		return;
	memset(t, 0, sizeof(*t));
	t->t_submit_ns = e->t_submit_ns;
	t->t_seen_ns = e->t_seen_ns;
	t->t_recv_ns = e->trace.t_recv_ns;
	t->t_reply_ns = e->trace.t_reply_ns;
	uint64_t sum = 0;
	for (unsigned i = 0; i < e->trace.n; i++)
		sum += e->trace.st[i].ns;
	const uint64_t encoded = t->t_recv_ns + sum;
	t->complete = t->t_recv_ns >= t->t_submit_ns && t->t_reply_ns >= encoded &&
		      t->t_seen_ns >= t->t_reply_ns;
	if (t->complete)
		trace_add(t, "request", t->t_recv_ns - t->t_submit_ns);
	for (unsigned i = 0; i < e->trace.n; i++)
		trace_add(t, e->trace.st[i].name, e->trace.st[i].ns);
	if (t->t_reply_ns >= encoded)
		trace_add(t, "write", t->t_reply_ns - encoded);
	if (t->complete)
		trace_add(t, "client_wake", t->t_seen_ns - t->t_reply_ns);
}

/* The finished job's stream timeline for vkg_stream_last (n 0: none). */
static void stream_keep(const vkg_entry *e)
{
	vkg_stream_timeline *t = &last_stream;
	t->n = 0;
	for (unsigned i = 0; i < e->stream.n && t->n < VKG_STREAM_MAX_FIELDS; i++) {
		snprintf(t->f[t->n].name, sizeof(t->f[0].name), "%s", e->stream.f[i].name);
		t->f[t->n++].us = e->stream.f[i].us;
	}
}

int vkg_stream_last(vkg_stream_timeline *out)
{
	if (last_stream.n == 0)
		return -ENOENT;
	if (out)
		*out = last_stream;
	return 0;
}

int vkg_trace_last(vkg_trace *out)
{
	if (!last_trace_set)
		return -ENOENT;
	if (out)
		*out = last_trace;
	return 0;
}

/* Copy a finished entry out to the caller's structures, then drop it. */
static int entry_consume(vkg_client *c, vkg_entry *e, vkg_result *res, uint64_t *region,
			 vkg_error *err)
{
	int rc = 0;
	if (e->ok) {
		if (res) {
			res->queued_us = e->queued_us;
			res->gpu_us = e->gpu_us;
			res->batch_jobs = e->batch_jobs;
			res->kernel_us = e->kernel_us;
		}
		trace_keep(e);
		stream_keep(e);
		if (region)
			*region = e->region;
	} else {
		rc = set_err(err, VKG_EREMOTE, proto_code_name(e->code), "%s", e->message);
	}
	entry_remove(c, e);
	return rc;
}

/* ---- receiving ---------------------------------------------------------- */

static void dispatch_frame(vkg_client *c, const uint8_t *body, uint32_t len, uint64_t t_seen)
{
	proto_reply *r = &c->scratch;
	proto_err perr;
	if (proto_reply_decode(body, len, r, &perr) != 0) {
		conn_dead(c, -EPROTO, "daemon sent an undecodable reply: %s", perr.message);
		return;
	}
	vkg_entry *e = entry_find(c, r->id);
	if (!e || e->done) {
		/* id 0 carries a protocol error; the daemon closes right after. */
		if (r->id == 0 && !r->ok) {
			snprintf(c->fatal, sizeof(c->fatal), "%s: %.180s", proto_code_name(r->err.code),
				 r->err.message);
			c->fatal_code = r->err.code;
		}
		return;
	}
	e->done = true;
	e->ok = r->ok;
	e->code = r->err.code;
	snprintf(e->message, sizeof(e->message), "%s", r->err.message);
	e->region = r->region;
	e->queued_us = r->queued_us;
	e->gpu_us = r->gpu_us;
	e->batch_jobs = r->batch_jobs;
	e->kernel_us = r->has_kernel_us ? r->kernel_us : 0;
	e->t_seen_ns = t_seen;
	e->trace = r->trace;
	e->stream.n = r->stream.n; /* (the fields only when there are any: most replies have none) */
	if (r->stream.n)
		memcpy(e->stream.f, r->stream.f, r->stream.n * sizeof(r->stream.f[0]));
	if (e->full)
		memcpy(e->full, r, sizeof(*r));
	if (e->want_raw && (e->raw = malloc(len ? len : 1)) != NULL) {
		memcpy(e->raw, body, len);
		e->raw_len = len;
	}
}

/* Read whatever has arrived and file every whole frame in the table; with
 * `block`, wait for something to arrive first (one recv instead of a poll
 * and a recv). A read shorter than the buffer took all there was: no empty
 * read after it to find that out. Problems mark the connection dead;
 * callers check dead_rc. */
static void conn_drain_wait(vkg_client *c, bool block)
{
	uint8_t buf[65536];
	int flags = block ? 0 : MSG_DONTWAIT;
	while (!c->dead_rc) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), flags);
		if (n == 0) {
			if (c->fatal[0])
				conn_dead(c, -ECONNRESET, "daemon closed the connection after: %s",
					  c->fatal);
			else
				conn_dead(c, -ECONNRESET, "daemon closed the connection");
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECONNRESET)
				conn_dead(c, -ECONNRESET, "daemon closed the connection (reset)%s%s",
					  c->fatal[0] ? " after: " : "", c->fatal);
			else if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_dead(c, -errno, "receive from daemon: %s", strerror(errno));
			break;
		}
		if (proto_framer_push(&c->rx, buf, (size_t)n) != 0) {
			conn_dead(c, -ENOMEM, "out of memory buffering a reply");
			break;
		}
		/* Consume frames after each chunk so the framer stays small. */
		const uint8_t *body;
		uint32_t len;
		int got = 0;
		const uint64_t t_seen = now_ns();
		while (!c->dead_rc && (got = proto_framer_next(&c->rx, &body, &len)) == 1)
			dispatch_frame(c, body, len, t_seen);
		if (got < 0)
			conn_dead(c, -EPROTO, "daemon sent a frame with a bad length (0 or over %u bytes)",
				  VKG_CLIENT_MAX_FRAME);
		if ((size_t)n < sizeof(buf))
			break;
		flags = MSG_DONTWAIT;
	}
}

/* Read whatever has arrived, without blocking. */
static void conn_drain(vkg_client *c)
{
	conn_drain_wait(c, false);
}

/* ---- sending ------------------------------------------------------------ */

/* Send one whole frame; fd >= 0 rides as SCM_RIGHTS on the frame's first
 * byte. While the socket is full we keep reading replies, so that neither
 * side can block the other with full buffers. */
static int conn_send(vkg_client *c, const char *data, size_t len, int fd, vkg_error *err)
{
	size_t off = 0;
	while (off < len) {
		if (c->dead_rc)
			return dead_err(c, err);
		struct iovec iov = {.iov_base = (void *)(data + off), .iov_len = len - off};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		union {
			struct cmsghdr h;
			char buf[CMSG_SPACE(sizeof(int))];
		} cm;
		if (fd >= 0 && off == 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.buf;
			mh.msg_controllen = sizeof(cm.buf);
			struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
			ch->cmsg_level = SOL_SOCKET;
			ch->cmsg_type = SCM_RIGHTS;
			ch->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(ch), &fd, sizeof(int));
		}
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = {.fd = c->fd, .events = POLLOUT | POLLIN};
			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return set_err(err, -errno, "io", "poll: %s", strerror(errno));
			if (p.revents & (POLLIN | POLLHUP | POLLERR))
				conn_drain(c);
			continue;
		}
		int e = errno;
		/* The daemon may have said why before closing: read that first. */
		conn_drain(c);
		if (e == EPIPE || e == ECONNRESET)
			conn_dead(c, -ECONNRESET, "daemon closed the connection%s%s",
				  c->fatal[0] ? " after: " : "", c->fatal);
		else
			conn_dead(c, -e, "send to daemon: %s", strerror(e));
		return dead_err(c, err);
	}
	return 0;
}

/* File a pending entry for id and send its encoded frame. */
static int conn_send_request(vkg_client *c, uint64_t id, const msgpack_sbuffer *sb, int fd,
			     proto_reply *full, bool want_raw, uint64_t t_submit, vkg_error *err)
{
	vkg_entry *e = entry_add(c, id, full);
	if (!e)
		return set_err(err, -ENOMEM, "io", "out of memory");
	e->want_raw = want_raw;
	e->t_submit_ns = t_submit;
	int rc = conn_send(c, sb->data, sb->size, fd, err);
	if (rc && (e = entry_find(c, id)) != NULL)
		entry_remove(c, e);
	return rc;
}

/* Encode req with a fresh id, file a pending entry for it and send it. */
static int conn_request(vkg_client *c, proto_request *req, int fd, proto_reply *full,
			uint64_t *id_out, vkg_error *err)
{
	if (c->dead_rc)
		return dead_err(c, err);
	const uint64_t t_submit = now_ns();
	req->id = c->next_id++;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	int rc = proto_request_encode(&sb, req);
	if (rc) {
		rc = set_err(err, rc, "io", "encoding the %s request failed: %s",
			     proto_op_name(req->op), strerror(-rc));
		goto out;
	}
	rc = conn_send_request(c, req->id, &sb, fd, full, false, t_submit, err);
	if (rc == 0)
		*id_out = req->id;
out:
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Read without sleeping for up to c->spin_us µs (at most timeout_ms when
 * that is not -1) until the entry for id is done, gone, or the connection
 * dead; the caller then looks at the entry as usual. */
static void conn_spin(vkg_client *c, uint64_t id, int timeout_ms)
{
	uint64_t budget = (uint64_t)c->spin_us * 1000;
	if (timeout_ms >= 0 && budget > (uint64_t)timeout_ms * 1000000)
		budget = (uint64_t)timeout_ms * 1000000;
	if (!budget)
		return;
	const uint64_t until = now_ns() + budget;
	do {
		conn_drain(c);
		const vkg_entry *e = entry_find(c, id);
		if (!e || e->done || c->dead_rc)
			return;
		cpu_relax();
	} while (now_ns() < until);
}

/* Block until the entry for id is done (returned in *out), the time runs out
 * (-ETIMEDOUT, entry kept) or the connection dies (entry dropped). */
static int conn_wait(vkg_client *c, uint64_t id, int timeout_ms, vkg_entry **out,
		     vkg_error *err)
{
	const int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
	conn_spin(c, id, timeout_ms);
	for (bool first = true;; first = false) {
		/* without a time limit the read itself waits (one syscall, not a
		 * poll and a read); the table may hold the reply already */
		if (timeout_ms >= 0)
			conn_drain(c);
		else if (!first)
			conn_drain_wait(c, true);
		vkg_entry *e = entry_find(c, id);
		if (!e)
			return set_err(err, -ENOENT, "io",
				       "no outstanding request with handle %llu (never submitted, "
				       "or already reported)",
				       (unsigned long long)id);
		if (e->done) {
			*out = e;
			return 0;
		}
		if (c->dead_rc) {
			entry_remove(c, e);
			return dead_err(c, err);
		}
		if (timeout_ms < 0)
			continue;
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return set_err(err, -ETIMEDOUT, "io", "request %llu not finished within %d ms",
				       (unsigned long long)id, timeout_ms);
		int wait = left > INT_MAX ? INT_MAX : (int)left;
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return set_err(err, -errno, "io", "poll: %s", strerror(errno));
	}
}

/* Send a request and wait for its reply: the synchronous ops. */
static int conn_call(vkg_client *c, proto_request *req, int fd, proto_reply *full,
		     vkg_result *res, uint64_t *region, vkg_error *err)
{
	uint64_t id;
	int rc = conn_request(c, req, fd, full, &id, err);
	if (rc)
		return rc;
	vkg_entry *e;
	rc = conn_wait(c, id, -1, &e, err);
	if (rc) {
		/* A local poll failure leaves the entry: drop it, so that a late
		 * reply can never be copied into the caller's freed `full`. */
		if ((e = entry_find(c, id)) != NULL)
			entry_remove(c, e);
		return rc;
	}
	return entry_consume(c, e, res, region, err);
}

/* ---- connection --------------------------------------------------------- */

/* The one place the socket is chosen (docs/operations.md, "Which socket"):
 * $VKGRAD_SOCKET when set; else the user's $XDG_RUNTIME_DIR/vkgrad.sock
 * when that exists (a user daemon, systemctl --user); else the system
 * daemon's /run/vkgrad/vkgrad.sock. */
const char *vkg_default_socket(void)
{
	static _Thread_local char buf[PATH_MAX];
	const char *s = getenv("VKGRAD_SOCKET");
	struct stat st;
	if (s && *s) {
		snprintf(buf, sizeof(buf), "%s", s);
		return buf;
	}
	if ((s = getenv("XDG_RUNTIME_DIR")) && *s &&
	    snprintf(buf, sizeof(buf), "%s/vkgrad.sock", s) < (int)sizeof(buf) &&
	    stat(buf, &st) == 0 && S_ISSOCK(st.st_mode))
		return buf;
	snprintf(buf, sizeof(buf), VKG_SYSTEM_SOCKET);
	return buf;
}

/* What to do about a failed connect(2) to path, after the error itself:
 * the daemon to start, the group to join, the variable to set. */
static void connect_hint(char *out, size_t n, const char *path, int e)
{
	out[0] = 0;
	const bool system = strcmp(path, VKG_SYSTEM_SOCKET) == 0;
	if (e == ENOENT || e == ECONNREFUSED) {
		if (system)
			snprintf(out, n, "; no daemon: systemctl start vkgradd.socket, or your own: "
					 "systemctl --user start vkgradd.socket (other sockets: "
					 "$VKGRAD_SOCKET, --socket)");
		else
			snprintf(out, n, "; no daemon there: start one (vkgradd --socket PATH; "
					 "for $XDG_RUNTIME_DIR/vkgrad.sock systemctl --user start "
					 "vkgradd.socket)");
		return;
	}
	if (e != EACCES && e != EPERM)
		return;
	struct stat st;
	if (stat(path, &st) != 0)
		return;
	char gname[64];
	struct group gr, *g = NULL;
	char gbuf[4096];
	if (getgrgid_r(st.st_gid, &gr, gbuf, sizeof(gbuf), &g) == 0 && g)
		snprintf(gname, sizeof(gname), "%s", g->gr_name);
	else
		snprintf(gname, sizeof(gname), "%u", (unsigned)st.st_gid);
	snprintf(out, n, "; the socket is group '%s', mode %04o: join it (sudo usermod -aG %s $USER, "
			 "log in again)",
		 gname, (unsigned)(st.st_mode & 07777), gname);
}

/* $VKGRAD_WAIT_SPIN_US, when set: 0, or EINVAL with err naming it. */
static int spin_from_env(unsigned *us, vkg_error *err)
{
	const char *s = getenv("VKGRAD_WAIT_SPIN_US");
	*us = 0;
	if (!s || !*s)
		return 0;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || *s == '-' || v > VKG_MAX_WAIT_SPIN_US) {
		set_err(err, -EINVAL, "io",
			"VKGRAD_WAIT_SPIN_US is '%.32s': want a number of microseconds from 0 to %u", s,
			VKG_MAX_WAIT_SPIN_US);
		return EINVAL;
	}
	*us = (unsigned)v;
	return 0;
}

int vkg_set_wait_spin(vkg_client *c, unsigned us, vkg_error *err)
{
	clear_err(err);
	if (us > VKG_MAX_WAIT_SPIN_US)
		return set_err(err, -EINVAL, "io", "wait spin of %u µs is over the limit of %u µs", us,
			       VKG_MAX_WAIT_SPIN_US);
	pthread_mutex_lock(&c->lock);
	c->spin_us = us;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

vkg_client *vkg_connect(const char *path, vkg_error *err)
{
	clear_err(err);
	if (!path)
		path = vkg_default_socket();
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		set_err(err, -ENAMETOOLONG, "io", "socket path is longer than %zu bytes: %s",
			sizeof(sa.sun_path) - 1, path);
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	vkg_client *c = calloc(1, sizeof(*c));
	if (!c) {
		set_err(err, -ENOMEM, "io", "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	int e;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		e = errno;
		set_err(err, -e, "io", "socket: %s", strerror(e));
		goto error_free;
	}
	while (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		e = errno;
		char hint[384];
		connect_hint(hint, sizeof(hint), path, e);
		set_err(err, -e, "io", "connect to %s: %s%s", path, strerror(e), hint);
		goto error_close;
	}
	if ((e = pthread_mutex_init(&c->lock, NULL)) != 0) {
		set_err(err, -e, "io", "pthread_mutex_init: %s", strerror(e));
		goto error_close;
	}
	c->next_id = 1;
	if ((e = spin_from_env(&c->spin_us, err)) != 0) {
		pthread_mutex_destroy(&c->lock);
		goto error_close;
	}
	proto_framer_init(&c->rx, VKG_CLIENT_MAX_FRAME);
	return c;

error_close:
	close(c->fd);
error_free:
	free(c);
	errno = e;
	return NULL;
}

void vkg_close(vkg_client *c)
{
	if (!c)
		return;
	/* Closing the socket makes the daemon drop its side of every region. */
	close(c->fd);
	for (size_t i = 0; i < c->n_maps; i++)
		munmap(c->maps[i].ptr, c->maps[i].size);
	for (size_t i = 0; i < c->n_entries; i++)
		free(c->entries[i].raw);
	free(c->maps);
	free(c->entries);
	proto_framer_free(&c->rx);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int vkg_fd(const vkg_client *c)
{
	return c->fd;
}

/* ---- hello, stats, ping ------------------------------------------------- */

int vkg_full_hello(vkg_client *c, const char *client_name, vkg_info *out, vkg_error *err)
{
	clear_err(err);
	proto_reply *full = malloc(sizeof(*full));
	if (!full)
		return set_err(err, -ENOMEM, "io", "out of memory");
	proto_request req = {.op = PROTO_OP_HELLO, .version = PROTO_VERSION};
	if (client_name)
		snprintf(req.client, sizeof(req.client), "%s", client_name);
	pthread_mutex_lock(&c->lock);
	int rc = conn_call(c, &req, -1, full, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && out) {
		const proto_hello *h = &full->hello;
		memset(out, 0, sizeof(*out));
		snprintf(out->server, sizeof(out->server), "%s", h->server);
		snprintf(out->device_name, sizeof(out->device_name), "%s", h->device.name);
		snprintf(out->driver, sizeof(out->driver), "%s", h->device.driver);
		snprintf(out->api, sizeof(out->api), "%s", h->device.api);
		snprintf(out->device_type, sizeof(out->device_type), "%s", h->device.type);
		out->vendor_id = h->device.vendor_id;
		out->device_id = h->device.device_id;
		out->max_frame = h->limits.max_frame;
		out->max_regions = h->limits.max_regions;
		out->max_inflight = h->limits.max_inflight;
		out->max_region_bytes = h->limits.max_region_bytes;
		out->max_dim = h->limits.max_dim;
		out->max_tensor_bytes = h->limits.max_tensor_bytes;
		out->n_kernels = h->n_kernels;
		out->protocol_version = h->version;
		out->max_total_region_bytes = h->limits.max_total_region_bytes;
		out->max_region_bytes_per_uid = h->limits.max_region_bytes_per_uid;
		out->max_connections = h->limits.max_connections;
		out->max_connections_per_uid = h->limits.max_connections_per_uid;
		/* every kernel, for vkg_info_kernel (the struct holds 32) */
		c->n_kernels = 0;
		for (unsigned i = 0; i < h->n_kernels && i < VKG_FULL_MAX_KERNELS; i++) {
			const proto_kernel_info *k = &h->kernels[i];
			vkg_kernel_info *o = &c->kernels[c->n_kernels++];
			snprintf(o->name, sizeof(o->name), "%s", k->name);
			snprintf(o->domain, sizeof(o->domain), "%s", k->domain);
			snprintf(o->variant, sizeof(o->variant), "%s", k->variant);
			snprintf(o->dtype, sizeof(o->dtype), "%s", k->dtype);
			snprintf(o->status, sizeof(o->status), "%s", k->status);
		}
		for (unsigned i = 0; i < h->n_kernels && i < 32; i++) {
			const proto_kernel_info *k = &h->kernels[i];
			vkg_kernel_info *o = &out->kernels[i];
			snprintf(o->name, sizeof(o->name), "%s", k->name);
			snprintf(o->domain, sizeof(o->domain), "%s", k->domain);
			snprintf(o->variant, sizeof(o->variant), "%s", k->variant);
			snprintf(o->dtype, sizeof(o->dtype), "%s", k->dtype);
			snprintf(o->status, sizeof(o->status), "%s", k->status);
		}
	}
	free(full);
	return rc;
}

int vkg_full_stats(vkg_client *c, vkg_stats *out, vkg_error *err)
{
	clear_err(err);
	proto_reply *full = malloc(sizeof(*full));
	if (!full)
		return set_err(err, -ENOMEM, "io", "out of memory");
	proto_request req = {.op = PROTO_OP_STATS};
	pthread_mutex_lock(&c->lock);
	int rc = conn_call(c, &req, -1, full, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && out) {
		const proto_stats *s = &full->stats;
		*out = (vkg_stats){
			.uptime_s = s->uptime_s,
			.jobs_per_batch_avg = s->jobs_per_batch_avg,
			.clients = s->clients,
			.regions = s->regions,
			.region_bytes = s->region_bytes,
			.jobs_done = s->jobs_done,
			.jobs_failed = s->jobs_failed,
			.batches = s->batches,
			.pipelines = s->pipelines,
			.pipeline_cache_hits = s->pipeline_cache_hits,
			.jobs_queued = s->jobs_queued,
			.jobs_running = s->jobs_running,
			.host_imports = s->host_imports,
			.staged_regions = s->staged_regions,
			.validation_errors = s->validation_errors,
			.devlocal_min_bytes = s->devlocal_min_bytes,
			.devlocal_min_bytes_16bit = s->devlocal_min_bytes_16bit,
			.devlocal_jobs = s->devlocal_jobs,
			.devlocal_copy_bytes = s->devlocal_copy_bytes,
			.splitk_jobs = s->splitk_jobs,
			.dispatches = s->dispatches,
			.scratch_bytes = s->scratch_bytes,
			.scratch_failures = s->scratch_failures,
			.stream_chunk_bytes = s->stream_chunk_bytes,
			.stream_min_bytes = s->stream_min_bytes,
			.stream_queues = s->stream_queues,
			.stream_jobs = s->stream_jobs,
			.stream_chunks = s->stream_chunks,
			.stream_dw_blocks = s->stream_dw_blocks,
			.started_unix_s = s->started_unix_s,
			.device_losses = s->device_losses,
			.device_recoveries = s->device_recoveries,
		};
		for (int k = 0; k < PROTO_CODE_COUNT; k++)
			out->requests_rejected += s->requests_rejected_by_code[k];
		for (int k = 0; k < PROTO_REFUSED_COUNT; k++)
			out->connections_refused += s->connections_refused[k];
	}
	free(full);
	return rc;
}

int vkg_ping(vkg_client *c, vkg_error *err)
{
	clear_err(err);
	proto_request req = {.op = PROTO_OP_PING};
	pthread_mutex_lock(&c->lock);
	int rc = conn_call(c, &req, -1, NULL, NULL, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- regions ------------------------------------------------------------ */

static int maps_add(vkg_client *c, uint64_t region, void *ptr, size_t size)
{
	if (c->n_maps == c->cap_maps) {
		size_t cap = c->cap_maps ? c->cap_maps * 2 : 8;
		vkg_mapping *nm = realloc(c->maps, cap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		c->maps = nm;
		c->cap_maps = cap;
	}
	c->maps[c->n_maps++] = (vkg_mapping){region, ptr, size};
	return 0;
}

void *vkg_region_create(vkg_client *c, size_t size, uint64_t *region, vkg_error *err)
{
	clear_err(err);
	int rc, e;
	if (size == 0) {
		set_err(err, -EINVAL, "io", "region size must be at least 1 byte");
		errno = EINVAL;
		return NULL;
	}
	int fd = memfd_create("vkgrad-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		e = errno;
		set_err(err, -e, "io", "memfd_create: %s", strerror(e));
		goto error;
	}
	if (ftruncate(fd, (off_t)size) < 0) {
		e = errno;
		set_err(err, -e, "io", "ftruncate memfd to %zu bytes: %s", size, strerror(e));
		goto error_close;
	}
	/* The daemon refuses a region that could shrink under the GPU. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
		e = errno;
		set_err(err, -e, "io", "sealing memfd (F_SEAL_SHRINK): %s", strerror(e));
		goto error_close;
	}
	void *ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ptr == MAP_FAILED) {
		e = errno;
		set_err(err, -e, "io", "mmap of %zu bytes: %s", size, strerror(e));
		goto error_close;
	}
	proto_request req = {.op = PROTO_OP_REGISTER, .size = size};
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	rc = conn_call(c, &req, fd, NULL, NULL, &id, err);
	if (rc == 0 && maps_add(c, id, ptr, size) != 0)
		rc = set_err(err, -ENOMEM, "io", "out of memory");
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		/* a remote error is not an errno; callers read err instead */
		e = rc == VKG_EREMOTE ? EIO : -rc;
		goto error_unmap;
	}
	/* The daemon holds its own reference now; the mapping keeps ours. */
	close(fd);
	if (region)
		*region = id;
	return ptr;

error_unmap:
	munmap(ptr, size);
error_close:
	close(fd);
error:
	errno = e;
	return NULL;
}

int vkg_region_register_fd(vkg_client *c, int fd, size_t size, uint64_t *region, vkg_error *err)
{
	clear_err(err);
	if (size == 0)
		return set_err(err, -EINVAL, "io", "region size must be at least 1 byte");
	if (fd < 0)
		return set_err(err, -EBADF, "io", "region descriptor %d is not open", fd);
	proto_request req = {.op = PROTO_OP_REGISTER, .size = size};
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	int rc = conn_call(c, &req, fd, NULL, NULL, &id, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && region)
		*region = id;
	return rc;
}

int vkg_region_destroy(vkg_client *c, uint64_t region, void *ptr, size_t size, vkg_error *err)
{
	clear_err(err);
	proto_request req = {.op = PROTO_OP_UNREGISTER, .region = region};
	pthread_mutex_lock(&c->lock);
	int rc = conn_call(c, &req, -1, NULL, NULL, NULL, err);
	/* Unmap even when the daemon refused: the mapping is ours alone, and a
	 * caller has no better way to release it. */
	for (size_t i = 0; i < c->n_maps; i++) {
		if (c->maps[i].region == region && c->maps[i].ptr == ptr) {
			c->maps[i] = c->maps[--c->n_maps];
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (ptr)
		munmap(ptr, size);
	return rc;
}

/* ---- jobs --------------------------------------------------------------- */

vkg_job vkg_job_init(void)
{
	vkg_job j;
	memset(&j, 0, sizeof(j));
	j.x.region = j.dy.region = j.w.region = VKG_NONE;
	j.dw.region = j.db.region = j.dx.region = VKG_NONE;
	return j;
}

/* A job's dtype, variant and shape into req (op set by the caller). */
static int job_common(const char *dtype, const char *variant, uint64_t batch, uint64_t in,
		      uint64_t out, bool accumulate, proto_request *req, vkg_error *err)
{
	const char *dt = dtype ? dtype : "f32";
	int d = -1;
	for (int i = 0; i < PROTO_DTYPE_COUNT; i++)
		if (strcmp(dt, proto_dtype_name((proto_dtype)i)) == 0)
			d = i;
	if (d < 0)
		return set_err(err, -EINVAL, "io", "dtype '%s' is not one of f32, f16, bf16", dt);
	req->dtype = (proto_dtype)d;
	req->batch = batch;
	req->in = in;
	req->out = out;
	req->accumulate = accumulate;
	if (variant) {
		int v = proto_variant_parse(variant);
		if (v < 0) {
			char names[128];
			proto_variant_list(names, sizeof(names), -1, NULL, NULL);
			return set_err(err, -EINVAL, "io", "variant '%s' is not one of %s", variant,
				       names);
		}
		req->variant = (proto_variant)v;
	}
	return 0;
}

/* The tensors of t (NULL: not one of the op's) into req. */
static void job_tensors(const vkg_tensor *const t[PROTO_T_COUNT], proto_request *req)
{
	for (int i = 0; i < PROTO_T_COUNT; i++) {
		req->t[i].present = t[i] && t[i]->region != VKG_NONE;
		req->t[i].region = t[i] ? t[i]->region : 0;
		req->t[i].offset = t[i] ? t[i]->offset : 0;
	}
}

static int job_to_request(const vkg_job *job, proto_request *req, vkg_error *err)
{
	memset(req, 0, sizeof(*req));
	req->op = PROTO_OP_LINEAR_BACKWARD;
	int rc = job_common(job->dtype, job->variant, job->batch, job->in, job->out, job->accumulate,
			    req, err);
	if (rc)
		return rc;
	const vkg_tensor *t[PROTO_T_COUNT] = {
		[PROTO_T_X] = &job->x,	 [PROTO_T_DY] = &job->dy, [PROTO_T_W] = &job->w,
		[PROTO_T_DW] = &job->dw, [PROTO_T_DB] = &job->db, [PROTO_T_DX] = &job->dx,
	};
	job_tensors(t, req);
	return 0;
}

vkg_forward_job vkg_forward_job_init(void)
{
	vkg_forward_job j;
	memset(&j, 0, sizeof(j));
	j.x.region = j.w.region = j.b.region = j.y.region = VKG_NONE;
	return j;
}

static int forward_to_request(const vkg_forward_job *job, proto_request *req, vkg_error *err)
{
	memset(req, 0, sizeof(*req));
	req->op = PROTO_OP_LINEAR_FORWARD;
	int rc = job_common(job->dtype, job->variant, job->batch, job->in, job->out, job->accumulate,
			    req, err);
	if (rc)
		return rc;
	const vkg_tensor *t[PROTO_T_COUNT] = {
		[PROTO_T_X] = &job->x, [PROTO_T_W] = &job->w, [PROTO_T_B] = &job->b, [PROTO_T_Y] = &job->y,
	};
	job_tensors(t, req);
	return 0;
}

int vkg_linear_forward(vkg_client *c, const vkg_forward_job *job, vkg_result *res, vkg_error *err)
{
	clear_err(err);
	proto_request req;
	int rc = forward_to_request(job, &req, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = conn_call(c, &req, -1, NULL, res, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_submit_forward(vkg_client *c, const vkg_forward_job *job, uint64_t *handle, vkg_error *err)
{
	clear_err(err);
	proto_request req;
	int rc = forward_to_request(job, &req, err);
	if (rc)
		return rc;
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	rc = conn_request(c, &req, -1, NULL, &id, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && handle)
		*handle = id;
	return rc;
}

int vkg_linear_backward(vkg_client *c, const vkg_job *job, vkg_result *res, vkg_error *err)
{
	clear_err(err);
	proto_request req;
	int rc = job_to_request(job, &req, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	rc = conn_call(c, &req, -1, NULL, res, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_submit(vkg_client *c, const vkg_job *job, uint64_t *handle, vkg_error *err)
{
	clear_err(err);
	proto_request req;
	int rc = job_to_request(job, &req, err);
	if (rc)
		return rc;
	uint64_t id = 0;
	pthread_mutex_lock(&c->lock);
	rc = conn_request(c, &req, -1, NULL, &id, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && handle)
		*handle = id;
	return rc;
}

int vkg_poll(vkg_client *c, uint64_t handle, vkg_result *res, vkg_error *err)
{
	clear_err(err);
	pthread_mutex_lock(&c->lock);
	vkg_entry *e;
	int rc = conn_wait(c, handle, 0, &e, err);
	if (rc == 0)
		rc = entry_consume(c, e, res, NULL, err);
	else if (rc == -ETIMEDOUT)
		rc = set_err(err, -EAGAIN, "io", "job %llu is still running",
			     (unsigned long long)handle);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* vkg_poll_any with the lock held. */
static int poll_any_locked(vkg_client *c, uint64_t *handle, vkg_result *res, vkg_error *err)
{
	conn_drain(c);
	int rc = -EAGAIN;
	for (size_t i = 0; i < c->n_entries; i++) {
		if (!c->entries[i].done)
			continue;
		if (handle)
			*handle = c->entries[i].id;
		rc = entry_consume(c, &c->entries[i], res, NULL, err);
		goto out;
	}
	if (c->n_entries == 0) {
		rc = c->dead_rc ? dead_err(c, err)
				: set_err(err, -ENOENT, "io", "no job is outstanding");
	} else if (c->dead_rc) {
		/* report the dead connection once per outstanding handle */
		if (handle)
			*handle = c->entries[0].id;
		entry_remove(c, &c->entries[0]);
		rc = dead_err(c, err);
	} else {
		set_err(err, -EAGAIN, "io", "no job has finished yet");
	}
out:
	return rc;
}

int vkg_poll_any(vkg_client *c, uint64_t *handle, vkg_result *res, vkg_error *err)
{
	clear_err(err);
	pthread_mutex_lock(&c->lock);
	int rc = poll_any_locked(c, handle, res, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_wait_any(vkg_client *c, uint64_t *handle, int timeout_ms, vkg_result *res,
		 vkg_error *err)
{
	clear_err(err);
	pthread_mutex_lock(&c->lock);
	const int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
	uint64_t spin = (uint64_t)c->spin_us * 1000;
	if (timeout_ms >= 0 && spin > (uint64_t)timeout_ms * 1000000)
		spin = (uint64_t)timeout_ms * 1000000;
	const uint64_t spin_until = now_ns() + spin;
	int rc;
	while ((rc = poll_any_locked(c, handle, res, err)) == -EAGAIN) {
		if (spin && now_ns() < spin_until) {
			cpu_relax();
			continue;
		}
		int wait = -1;
		if (timeout_ms >= 0) {
			const int64_t left = deadline - now_ms();
			if (left <= 0) {
				rc = set_err(err, -ETIMEDOUT, "io", "no job finished within %d ms",
					     timeout_ms);
				break;
			}
			wait = left > INT_MAX ? INT_MAX : (int)left;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		if (poll(&p, 1, wait) < 0 && errno != EINTR) {
			rc = set_err(err, -errno, "io", "poll: %s", strerror(errno));
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int vkg_wait(vkg_client *c, uint64_t handle, int timeout_ms, vkg_result *res, vkg_error *err)
{
	clear_err(err);
	pthread_mutex_lock(&c->lock);
	vkg_entry *e;
	int rc = conn_wait(c, handle, timeout_ms, &e, err);
	if (rc == 0)
		rc = entry_consume(c, e, res, NULL, err);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ---- any request -------------------------------------------------------- */

/* The pairs of one msgpack map: their count and where they start. */
static int raw_args_map(const uint8_t *a, size_t n, uint32_t *pairs, size_t *hdr, vkg_error *err)
{
	const char *why = NULL;
	*pairs = 0;
	*hdr = 0;
	if (n == 0)
		return 0;
	if (proto_mpcheck(a, n, PROTO_MAX_DEPTH, &why) != 0)
		return set_err(err, -EINVAL, "io", "args are not one msgpack object: %s", why);
	if ((a[0] & 0xf0) == 0x80) {
		*pairs = a[0] & 0x0f;
		*hdr = 1;
	} else if (a[0] == 0xde) { /* mpcheck made sure the header is whole */
		*pairs = (uint32_t)a[1] << 8 | a[2];
		*hdr = 3;
	} else if (a[0] == 0xdf) {
		*pairs = (uint32_t)a[1] << 24 | (uint32_t)a[2] << 16 | (uint32_t)a[3] << 8 | a[4];
		*hdr = 5;
	} else {
		return set_err(err, -EINVAL, "io", "args must be one msgpack map (first byte 0x%02x)", a[0]);
	}
	if (*pairs > UINT32_MAX - 2)
		return set_err(err, -EINVAL, "io", "args hold too many keys");
	return 0;
}

/* {op, id, args' pairs...} as one frame. */
static int raw_encode(msgpack_sbuffer *sb, const char *op, uint64_t id, const uint8_t *args,
		      size_t args_len, uint32_t pairs, size_t hdr)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	static const char zero[PROTO_FRAME_HDR] = {0};
	msgpack_sbuffer_write(sb, zero, PROTO_FRAME_HDR);
	msgpack_pack_map(&pk, pairs + 2);
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "op", 2);
	msgpack_pack_str(&pk, strlen(op));
	msgpack_pack_str_body(&pk, op, strlen(op));
	msgpack_pack_str(&pk, 2);
	msgpack_pack_str_body(&pk, "id", 2);
	msgpack_pack_uint64(&pk, id);
	if (args_len > hdr)
		msgpack_sbuffer_write(sb, (const char *)args + hdr, args_len - hdr);
	if (!sb->data || sb->size < PROTO_FRAME_HDR)
		return -ENOMEM;
	if (sb->size - PROTO_FRAME_HDR > UINT32_MAX)
		return -EMSGSIZE;
	proto_frame_put_len((uint8_t *)sb->data, (uint32_t)(sb->size - PROTO_FRAME_HDR));
	return 0;
}

int vkg_call_raw(vkg_client *c, const char *op, const void *args, size_t args_len, void **reply,
		 size_t *reply_len, vkg_error *err)
{
	clear_err(err);
	*reply = NULL;
	*reply_len = 0;
	if (!op || !*op)
		return set_err(err, -EINVAL, "io", "op must be a non-empty string");
	uint32_t pairs;
	size_t hdr;
	int rc = raw_args_map(args, args ? args_len : 0, &pairs, &hdr, err);
	if (rc)
		return rc;
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	pthread_mutex_lock(&c->lock);
	if (c->dead_rc) {
		rc = dead_err(c, err);
		goto out;
	}
	const uint64_t t_submit = now_ns(), id = c->next_id++;
	rc = raw_encode(&sb, op, id, args, args ? args_len : 0, pairs, hdr);
	if (rc) {
		rc = set_err(err, rc, "io", "encoding the %s request failed: %s", op, strerror(-rc));
		goto out;
	}
	rc = conn_send_request(c, id, &sb, -1, NULL, true, t_submit, err);
	if (rc)
		goto out;
	vkg_entry *e;
	rc = conn_wait(c, id, -1, &e, err);
	if (rc) {
		if ((e = entry_find(c, id)) != NULL)
			entry_remove(c, e);
		goto out;
	}
	if (!e->raw) {
		rc = set_err(err, -ENOMEM, "io", "out of memory keeping a %zu-byte reply", e->raw_len);
		entry_remove(c, e);
		goto out;
	}
	*reply = e->raw;
	*reply_len = e->raw_len;
	e->raw = NULL;
	rc = entry_consume(c, e, NULL, NULL, err);
out:
	pthread_mutex_unlock(&c->lock);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}
