/* daemon/gpu/memguard.h — copies to and from client memory that survive the
 * client's pages going away.
 *
 * A region is the client's file mapped MAP_SHARED. Sealed against
 * shrinking and on shmem it should never fault, yet a page can still be
 * missing when the daemon touches it: the kernel may refuse to fill a hole
 * of a sparse memfd (strict overcommit accounting), a file of another file
 * system can lose pages (a hugetlbfs hole whose pool is empty, a full
 * tmpfs), a check can race a truncation. The touch raises SIGBUS, whose
 * default action would end the daemon and every client's jobs.
 *
 * memguard_copy() is memcpy with this thread's guard armed: a SIGBUS
 * inside it, at an address in its source or destination, ends the copy
 * (siglongjmp out of the handler) and returns -EFAULT with the address;
 * the caller fails that one job. The handler is installed once, at the
 * first call (or memguard_init). Any other SIGBUS — outside a guarded
 * copy, on another thread, at another address, or sent by kill — is
 * handled as before the handler existed: passed to the handler installed
 * before (a sanitizer's), or, when there was none, the default action is
 * restored and the fault happens again: the process dies of SIGBUS.
 *
 * The guard covers the CPU only: a device that reads client memory from
 * its own threads (a CPU device importing it) would fault outside any
 * guard, which is why regions are never imported on a CPU device
 * (region.c). */
#ifndef VKG_DAEMON_MEMGUARD_H
#define VKG_DAEMON_MEMGUARD_H

#include <stddef.h>

/* Install the SIGBUS handler (once per process; later calls do nothing).
 * Returns 0 or -errno from sigaction. */
int memguard_init(void);

/* Copy n bytes from src to dst (not overlapping). Returns 0, or -EFAULT
 * when a page of either faulted, with *fault_at (may be NULL) set to the
 * faulting address; the bytes before it may have been copied. Returns
 * -errno, copying nothing, when the handler cannot be installed. */
int memguard_copy(void *dst, const void *src, size_t n, const void **fault_at);

#endif
