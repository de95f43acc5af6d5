/* client/connection.c — a client's connection: which socket (the one
 * place that is chosen), connecting to it with a hint when that fails, the
 * connection's options, closing it. What travels over it is transport.c's. */
#include "vkgrad_priv.h"

#include "frame.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define VKG_SYSTEM_SOCKET "/run/vkgrad/vkgrad.sock"

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
		vkg__set_err(err, -EINVAL, "io",
			     "VKGRAD_WAIT_SPIN_US is '%.32s': want a number of microseconds "
			     "from 0 to %u",
			     s, VKG_MAX_WAIT_SPIN_US);
		return EINVAL;
	}
	*us = (unsigned)v;
	return 0;
}

int vkg_set_wait_spin(vkg_client *c, unsigned us, vkg_error *err)
{
	vkg__clear_err(err);
	if (us > VKG_MAX_WAIT_SPIN_US)
		return vkg__set_err(err, -EINVAL, "io",
				    "wait spin of %u µs is over the limit of %u µs", us,
				    VKG_MAX_WAIT_SPIN_US);
	pthread_mutex_lock(&c->lock);
	c->spin_us = us;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

vkg_client *vkg_connect(const char *path, vkg_error *err)
{
	vkg__clear_err(err);
	if (!path)
		path = vkg_default_socket();
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		vkg__set_err(err, -ENAMETOOLONG, "io", "socket path is longer than %zu bytes: %s",
			     sizeof(sa.sun_path) - 1, path);
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	vkg_client *c = calloc(1, sizeof(*c));
	if (!c) {
		vkg__set_err(err, -ENOMEM, "io", "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	int e;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		e = errno;
		vkg__set_err(err, -e, "io", "socket: %s", strerror(e));
		goto error_free;
	}
	while (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno == EINTR)
			continue;
		e = errno;
		char hint[384];
		connect_hint(hint, sizeof(hint), path, e);
		vkg__set_err(err, -e, "io", "connect to %s: %s%s", path, strerror(e), hint);
		goto error_close;
	}
	if ((e = pthread_mutex_init(&c->lock, NULL)) != 0) {
		vkg__set_err(err, -e, "io", "pthread_mutex_init: %s", strerror(e));
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
