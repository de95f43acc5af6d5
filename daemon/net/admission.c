/* daemon/net/admission.c — see admission.h. */
#include "admission.h"

#include "log.h"
#include "peer.h"

void admission_init(admission *a, const config *cfg, const proto_limits *limits)
{
	*a = (admission){.cfg = cfg, .limits = limits};
}

/* One warning a second, the rest at debug level (counted in the next). */
static void log_refusal(admission *a, const struct ucred *cred, const char *why, uint64_t now_ns)
{
	if (now_ns - a->warned_ns >= ADMISSION_WARN_NS) {
		if (a->quiet)
			log_warn("refusing client pid %d uid %u gid %u: %s (and %llu more since the "
				 "last warning, logged at debug level)", (int)cred->pid,
				 (unsigned)cred->uid, (unsigned)cred->gid, why,
				 (unsigned long long)a->quiet);
		else
			log_warn("refusing client pid %d uid %u gid %u: %s", (int)cred->pid,
				 (unsigned)cred->uid, (unsigned)cred->gid, why);
		a->warned_ns = now_ns;
		a->quiet = 0;
	} else {
		a->quiet++;
		log_debug("refusing client pid %d uid %u gid %u: %s", (int)cred->pid,
			  (unsigned)cred->uid, (unsigned)cred->gid, why);
	}
}

admission_verdict admission_check(admission *a, int fd, const struct ucred *cred, uint32_t open,
				  uint32_t open_of_uid, uint64_t now_ns, proto_err *err)
{
	char why[160];
	*err = (proto_err){0};
	if (!peer_allowed(a->cfg, fd, cred, why, sizeof(why))) {
		proto_fail(err, PROTO_LIMIT, "connection refused: %s", why);
		log_refusal(a, cred, why, now_ns);
		a->refused[PROTO_REFUSED_ALLOW_LIST]++;
		return ADMISSION_DENY;
	}
	if (open >= a->limits->max_connections) {
		proto_fail(err, PROTO_LIMIT, "connection refused: max_connections = %u reached",
			   a->limits->max_connections);
		a->refused[PROTO_REFUSED_MAX_CONNECTIONS]++;
	} else if (open_of_uid >= a->limits->max_connections_per_uid) {
		proto_fail(err, PROTO_LIMIT,
			   "connection refused: uid %u has max_connections_per_uid = %u open",
			   (unsigned)cred->uid, a->limits->max_connections_per_uid);
		a->refused[PROTO_REFUSED_MAX_CONNECTIONS_PER_UID]++;
	}
	if (err->code == PROTO_OK)
		return ADMISSION_TAKE;
	log_refusal(a, cred, err->message, now_ns);
	return ADMISSION_LIMIT;
}
