/* daemon/net/peer.h — who may use the daemon, on top of the socket's file
 * permissions: the --allow-uid / --allow-gid lists, checked against the
 * credentials the kernel recorded when the peer connected (SO_PEERCRED,
 * SO_PEERGROUPS). */
#ifndef VKG_DAEMON_PEER_H
#define VKG_DAEMON_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "config.h"

/* May the peer on connected socket fd, with credentials cred, be served?
 * With both lists empty everyone the socket lets in is. Otherwise the peer
 * must have its uid in allow_uid, or its primary gid or one of its
 * supplementary groups (SO_PEERGROUPS) in allow_gid; uid 0 is not special.
 * On false, why[n] says which check failed. */
bool peer_allowed(const config *cfg, int fd, const struct ucred *cred, char *why, size_t n);

#endif
