/* daemon/gpu/memguard.c — see memguard.h. */
#include "memguard.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* This thread's guard, armed only while memguard_copy copies. Static TLS
 * (initial-exec): the handler may read it without allocating. */
typedef struct guard {
	sigjmp_buf jb;
	volatile sig_atomic_t armed;
	uintptr_t dst, src;
	size_t n;
	void *volatile addr;
} guard;

static __thread guard tls_guard __attribute__((tls_model("initial-exec")));
static struct sigaction prev; /* the disposition before ours */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_rc;

static bool in_range(uintptr_t a, uintptr_t lo, size_t n)
{
	return a - lo < n;
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	guard *g = &tls_guard;
	uintptr_t a = (uintptr_t)si->si_addr;
	if (g->armed && si->si_code > 0 && (in_range(a, g->dst, g->n) || in_range(a, g->src, g->n))) {
		g->armed = 0;
		g->addr = si->si_addr;
		/* SA_NODEFER: SIGBUS is not blocked in here, so no mask to restore */
		siglongjmp(g->jb, 1);
	}
	if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
		prev.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
		prev.sa_handler(sig);
		return;
	}
	/* as if we had never been here: the default action (core dump) */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGBUS, &dfl, NULL);
	if (si->si_code <= 0)
		raise(SIGBUS); /* sent by kill: it will not come again by itself */
	/* a fault: returning runs the faulting instruction again, unhandled */
}

static void install(void)
{
	struct sigaction sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &prev) != 0)
		init_rc = -errno;
}

int memguard_init(void)
{
	pthread_once(&once, install);
	return init_rc;
}

int memguard_copy(void *dst, const void *src, size_t n, const void **fault_at)
{
	int rc = memguard_init();
	if (rc)
		return rc;
	guard *g = &tls_guard;
	if (sigsetjmp(g->jb, 0)) {
		if (fault_at)
			*fault_at = g->addr;
		return -EFAULT;
	}
	g->dst = (uintptr_t)dst;
	g->src = (uintptr_t)src;
	g->n = n;
	atomic_signal_fence(memory_order_seq_cst);
	g->armed = 1;
	atomic_signal_fence(memory_order_seq_cst);
	memcpy(dst, src, n);
	atomic_signal_fence(memory_order_seq_cst);
	g->armed = 0;
	return 0;
}
