/* tests/soak/soak.h — `make soak`: one vkgradd, mixed clients for a given
 * time, the daemon's memory and descriptors sampled every second, and a
 * verdict. Not part of `make test` (minutes); built by it so it compiles.
 *
 * Clients, each a process of its own (soak_clients.c), loop until the end:
 *   small     synchronous small jobs of random shapes, outputs and
 *             accumulate, each on a fresh region, every result checked
 *             against the float64 reference (jobcase);
 *   large     jobs of 192x256x128, three in flight on one connection,
 *             every result checked;
 *   churn     connect, register a memfd, maybe one job (checked), then
 *             unregister or not, and disconnect;
 *   hostile   garbage frames, truncated frames, length prefixes 0 and
 *             2^32-1, a descriptor riding a ping, hanging up mid-reply;
 *             one every 10 ms;
 *   killer    forks a client that registers and queues 12 jobs of 160^3,
 *             and SIGKILLs it at a random moment (before, while or after
 *             they are queued); one every ~0.1 s.
 *
 * Environment: SOAK_SECONDS (default 600), SOAK_WARMUP_SECONDS (default a
 * quarter of the run, at most 60), BUILD (the daemon is $BUILD/vkgradd),
 * VKGRAD_TEST_VALIDATION=1 to run the daemon under the Khronos validation
 * layer (off by default: its own bookkeeping is not the daemon's memory).
 *
 * The daemon's VmRSS, owned memory (RssAnon + RssShmem) and descriptors are
 * sampled every second while the clients run. While they run these swing
 * with the work in flight, so the growth verdict uses quiet points: every
 * `quiet_every` seconds (a ninth of the time after the warm-up, 5 to 30 s)
 * each client finishes its operation, closes what it holds and waits; the
 * daemon settles (no client, region or job: leakcheck_settle) and is
 * sampled; then the clients go on.
 *
 * Verdict (soak_report.c): the daemon served throughout and stopped
 * cleanly; no error where none is expected (small, large, churn: none at
 * all; hostile: bad_frame, bad_request or a closed connection only); and
 * after the warm-up neither the memory it owns nor its descriptors grow
 * across the quiet points (tests/common/growth.h; bounds SOAK_KB_PER_MIN
 * and SOAK_FDS_PER_MIN). Exit status 0 on PASS, 1 on FAIL, 2 on bad usage. */
#ifndef VKG_TEST_SOAK_H
#define VKG_TEST_SOAK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SOAK_KB_PER_MIN 1024.0
#define SOAK_FDS_PER_MIN 1.0

typedef enum soak_kind {
	SOAK_SMALL,
	SOAK_LARGE,
	SOAK_CHURN,
	SOAK_HOSTILE,
	SOAK_KILLER,
	SOAK_KIND_COUNT
} soak_kind;

/* What each kind counts as one operation. */
extern const char *const soak_kind_name[SOAK_KIND_COUNT];
extern const char *const soak_kind_unit[SOAK_KIND_COUNT];

#define SOAK_CODES 16

/* One client process's counters, written only by it (in shared memory). */
typedef struct soak_slot {
	soak_kind kind;
	atomic_ulong ops;      /* jobs done, connections, frames, kills */
	atomic_ulong checked;  /* results compared with the reference */
	atomic_ulong failed;   /* unexpected: a wrong result, an error where none belongs */
	struct {
		char code[24];
		atomic_ulong n;
	} codes[SOAK_CODES];   /* errors and answers seen, by code */
	char last_failure[256];
} soak_slot;

#define SOAK_MAX_CLIENTS 8

typedef struct soak_shared {
	atomic_int stop;
	atomic_int pause;   /* the driver asks for a quiet point */
	atomic_int paused;  /* clients waiting in one */
	char sock[96];
	unsigned nslots;
	soak_slot slot[SOAK_MAX_CLIENTS];
} soak_shared;

/* One sample of the daemon: every second while the clients run, and at
 * each quiet point (quiet: every client paused, the daemon settled). */
typedef struct soak_sample {
	double t;        /* seconds since the clients started */
	long rss_kb;     /* VmRSS */
	long owned_kb;   /* RssAnon + RssShmem */
	int fds;
	unsigned long ops;
} soak_sample;

/* The run's samples. */
typedef struct soak_series {
	soak_sample *busy;   /* every second */
	unsigned nbusy;
	soak_sample *quiet;  /* at each quiet point */
	unsigned nquiet;
	double quiet_every;  /* seconds between quiet points */
} soak_series;

/* Count one `code` (an error code, "eof", ...) in sl. */
void soak_tally(soak_slot *sl, const char *code);
/* Count an unexpected event, remembering its description. */
void soak_fail(soak_slot *sl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Run client kind sl->kind until sh->stop; seed makes each one differ.
 * Never returns (exits the process). */
void soak_client_run(soak_shared *sh, soak_slot *sl, uint64_t seed) __attribute__((noreturn));

/* Print the summary of a run and return whether it passed. `served`: the
 * daemon answered and stopped cleanly at the end. */
bool soak_report(const soak_shared *sh, const soak_series *ser, double seconds, double warmup,
		 bool served);

#endif
