/* daemon/net/peer.c — see peer.h. */
#include "peer.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool listed(const uint32_t *list, unsigned n, uint32_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (list[i] == id)
			return true;
	return false;
}

/* One of the peer's supplementary groups (as of connect()) is listed. */
static bool supplementary_listed(const config *cfg, int fd)
{
	gid_t small[64];
	gid_t *groups = small;
	socklen_t len = sizeof(small);
	bool hit = false;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0) {
		if (errno != ERANGE || len == 0 || len > 65536 * sizeof(gid_t))
			return false;
		groups = malloc(len);
		if (!groups || getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
			goto out;
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && !hit; i++)
		hit = listed(cfg->allow_gid, cfg->n_allow_gid, groups[i]);
out:
	if (groups != small)
		free(groups);
	return hit;
}

bool peer_allowed(const config *cfg, int fd, const struct ucred *cred, char *why, size_t n)
{
	if (cfg->n_allow_uid == 0 && cfg->n_allow_gid == 0)
		return true;
	if (listed(cfg->allow_uid, cfg->n_allow_uid, cred->uid))
		return true;
	if (listed(cfg->allow_gid, cfg->n_allow_gid, cred->gid))
		return true;
	if (cfg->n_allow_gid && supplementary_listed(cfg, fd))
		return true;
	snprintf(why, n, "uid %u not in --allow-uid (%u listed) and no group of it in --allow-gid (%u listed)",
		 (unsigned)cred->uid, cfg->n_allow_uid, cfg->n_allow_gid);
	return false;
}
