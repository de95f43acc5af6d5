/* tests/unit/test_memguard.c — guarded copies against real faults: a
 * memfd mapped, then truncated under its mapping, raises SIGBUS on every
 * touch of the lost pages, as a client's file can under the daemon.
 * memguard_copy must turn that into -EFAULT with the address, for reads
 * and writes, again and again, on several threads at once; and a SIGBUS
 * outside a guarded copy must still kill the process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memguard.h"

#define PG 4096

/* The daemon installs its handler once; cmocka puts its own exception
 * handler in place around every test (through signal(), which would also
 * drop SA_SIGINFO when it puts ours back). So main() installs ours before
 * cmocka runs and remembers it, and each test puts it back first. */
static struct sigaction g_ours;

static void ours(void)
{
	assert_int_equal(sigaction(SIGBUS, &g_ours, NULL), 0);
}

/* A memfd of `pages` pages mapped shared, filled with 0xab, then
 * truncated to `keep` pages: the pages past keep fault. */
static uint8_t *vanishing(int pages, int keep, int *fd_out)
{
	int fd = memfd_create("test-memguard", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)pages * PG), 0);
	uint8_t *m = mmap(NULL, (size_t)pages * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	memset(m, 0xab, (size_t)pages * PG);
	assert_int_equal(ftruncate(fd, (off_t)keep * PG), 0);
	*fd_out = fd;
	return m;
}

static void test_plain_copy(void **state)
{
	(void)state;
	ours();
	uint8_t a[1000], b[1000];
	for (int i = 0; i < 1000; i++)
		a[i] = (uint8_t)(i * 7);
	const void *at = (void *)1;
	assert_int_equal(memguard_copy(b, a, sizeof(a), &at), 0);
	assert_memory_equal(a, b, sizeof(a));
	assert_ptr_equal(at, (void *)1); /* untouched without a fault */
	assert_int_equal(memguard_copy(b, a, 0, NULL), 0);
}

/* Reading from lost pages: -EFAULT, at an address in the lost part. */
static void test_read_fault(void **state)
{
	(void)state;
	ours();
	int fd;
	uint8_t *m = vanishing(3, 1, &fd);
	uint8_t *buf = calloc(3, PG);
	assert_non_null(buf);
	const void *at = NULL;
	assert_int_equal(memguard_copy(buf, m, 3 * PG, &at), -EFAULT);
	/* memcpy may go in any order: the address is somewhere lost */
	assert_true((const uint8_t *)at >= m + PG && (const uint8_t *)at < m + 3 * PG);
	/* entirely in the lost part */
	at = NULL;
	assert_int_equal(memguard_copy(buf, m + 2 * PG + 100, 50, &at), -EFAULT);
	assert_true((const uint8_t *)at >= m + 2 * PG + 100 && (const uint8_t *)at < m + 2 * PG + 150);
	free(buf);
	munmap(m, 3 * PG);
	close(fd);
}

/* Writing into lost pages. */
static void test_write_fault(void **state)
{
	(void)state;
	ours();
	int fd;
	uint8_t *m = vanishing(2, 0, &fd);
	uint8_t src[256];
	memset(src, 1, sizeof(src));
	const void *at = NULL;
	assert_int_equal(memguard_copy(m + PG + 8, src, sizeof(src), &at), -EFAULT);
	assert_true((const uint8_t *)at >= m + PG + 8 && (const uint8_t *)at < m + PG + 8 + sizeof(src));
	munmap(m, 2 * PG);
	close(fd);
}

/* After a fault the guard works as before: faults and good copies
 * alternate a thousand times. */
static void test_fault_again_and_again(void **state)
{
	(void)state;
	ours();
	int fd;
	uint8_t *m = vanishing(2, 1, &fd);
	uint8_t buf[64];
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(memguard_copy(buf, m + PG + (i % 64), sizeof(buf), NULL), -EFAULT);
		assert_int_equal(memguard_copy(buf, m + (i % 64), sizeof(buf), NULL), 0);
		assert_int_equal(buf[0], 0xab);
	}
	munmap(m, 2 * PG);
	close(fd);
}

/* Each thread's guard is its own: four threads fault and copy at once. */
static void *thread_main(void *arg)
{
	uint8_t *m = arg;
	uint8_t buf[128];
	for (int i = 0; i < 2000; i++) {
		if (memguard_copy(buf, m + PG + (i % 512), sizeof(buf), NULL) != -EFAULT)
			return (void *)1;
		if (memguard_copy(buf, m + (i % 512), sizeof(buf), NULL) != 0 || buf[5] != 0xab)
			return (void *)2;
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	ours();
	int fd;
	uint8_t *m = vanishing(2, 1, &fd);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_main, m), 0);
	for (int i = 0; i < 4; i++) {
		void *rv;
		assert_int_equal(pthread_join(t[i], &rv), 0);
		assert_null(rv);
	}
	munmap(m, 2 * PG);
	close(fd);
}

/* A child with the handler installed meets a SIGBUS outside any guarded
 * copy — how 0: a plain read of a lost page, 1: kill(SIGBUS), 2: a plain
 * read after a guarded copy caught a fault. Returns its wait status. */
static int child_status(int how)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd;
		uint8_t *m = vanishing(2, 0, &fd);
		uint8_t buf[8];
		if (memguard_init() != 0)
			_exit(3);
		if (how == 2 && memguard_copy(buf, m, sizeof(buf), NULL) != -EFAULT)
			_exit(4);
		if (how == 1)
			kill(getpid(), SIGBUS);
		else
			buf[0] = *(volatile uint8_t *)m;
		_exit(buf[0] == 0 ? 5 : 6); /* survived: wrong */
	}
	int ws;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	return ws;
}

static void assert_died_of_sigbus(int ws, const char *what)
{
#if defined(__SANITIZE_ADDRESS__)
	/* AddressSanitizer's handler (chained) reports the fault and exits 1,
	 * or aborts (ASAN_OPTIONS=abort_on_error=1, make test-asan) */
	if ((WIFEXITED(ws) && WEXITSTATUS(ws) == 1) || (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT))
		return;
#endif
	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGBUS)
		fail_msg("%s: the process should die of SIGBUS; wait status 0x%x (%s %d)", what, ws,
			 WIFSIGNALED(ws) ? "signal" : "exit",
			 WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
}

static void test_unguarded_sigbus_still_kills(void **state)
{
	(void)state;
	ours();
	assert_died_of_sigbus(child_status(0), "a fault outside a guarded copy");
	assert_died_of_sigbus(child_status(1), "kill(SIGBUS)");
	assert_died_of_sigbus(child_status(2), "a fault after a guarded one");
}

int main(void)
{
	if (memguard_init() != 0 || sigaction(SIGBUS, NULL, &g_ours) != 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_copy),
		cmocka_unit_test(test_read_fault),
		cmocka_unit_test(test_write_fault),
		cmocka_unit_test(test_fault_again_and_again),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_unguarded_sigbus_still_kills),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
