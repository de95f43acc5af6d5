/* daemon/net/admission.h — whether a peer that just connected is taken: the
 * allow lists (peer.h), then max_connections and max_connections_per_uid.
 *
 * A refusal is logged; a flood of them must not flood the log too, so at
 * most one warning a second is written and the refusals in between go to
 * the debug level, counted in the next warning. That rate limiter is the
 * state below: one per server, loop thread only. The caller owns the
 * socket: admission only decides and says why. */
#ifndef VKG_DAEMON_ADMISSION_H
#define VKG_DAEMON_ADMISSION_H

#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "msg.h"

#define ADMISSION_WARN_NS 1000000000ull /* at most one refusal warning this often */

typedef struct admission {
	const config *cfg;           /* the allow lists */
	const proto_limits *limits;  /* max_connections, max_connections_per_uid */
	uint64_t warned_ns;          /* when the last refusal warning was written */
	uint64_t quiet;              /* refusals logged at debug level since */
	uint64_t refused[PROTO_REFUSED_COUNT]; /* every refusal, by reason (stats) */
} admission;

typedef enum admission_verdict {
	ADMISSION_TAKE,    /* serve it */
	ADMISSION_DENY,    /* the allow lists refuse it */
	ADMISSION_LIMIT,   /* a connection limit is reached */
	/* either way err (a PROTO_LIMIT) says why, for the one error frame
	 * the peer gets before the close */
} admission_verdict;

/* cfg and limits must outlive a (the server's own). */
void admission_init(admission *a, const config *cfg, const proto_limits *limits);

/* Decide on the peer on connected socket fd with credentials cred, at
 * now_ns (CLOCK_MONOTONIC), while `open` connections are open of which
 * `open_of_uid` are cred->uid's. Every refusal is logged (see above); on
 * a refusal err holds a PROTO_LIMIT naming the list, or the limit and its
 * value. */
admission_verdict admission_check(admission *a, int fd, const struct ucred *cred, uint32_t open,
				  uint32_t open_of_uid, uint64_t now_ns, proto_err *err);

#endif
