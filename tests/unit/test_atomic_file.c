/* tests/unit/test_atomic_file.c — common/atomic_file.h: the contents and
 * mode written, a symlink at the path replaced rather than written through,
 * and no temporary file left after a success or a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"

typedef struct {
	char dir[256];
	char path[300];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/vkg-atomic.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (strlen(f->dir) >= sizeof(f->dir) - 1 || !mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/out.prom", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	int rc = system(cmd);
	free(f);
	return rc == 0 ? 0 : -1;
}

/* The file's contents into buf (NUL-terminated), or fail. */
static void slurp(const char *path, char *buf, size_t n)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		fail_msg("%s: %s", path, strerror(errno));
	size_t got = fread(buf, 1, n - 1, fp);
	buf[got] = 0;
	fclose(fp);
}

/* Files in dir whose name holds ".tmp." */
static int temporaries(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(d);
	return n;
}

static void test_writes_contents_and_mode(void **state)
{
	fixture *f = *state;
	char err[256] = "";
	char got[64];
	struct stat st;
	mode_t old = umask(077); /* the mode is set as asked, whatever the umask */
	assert_int_equal(atomic_file_write(f->path, "first\n", 6, 0644, err, sizeof(err)), 0);
	umask(old);
	slurp(f->path, got, sizeof(got));
	assert_string_equal(got, "first\n");
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	/* replaced whole, and shorter */
	assert_int_equal(atomic_file_write(f->path, "2\n", 2, 0600, err, sizeof(err)), 0);
	slurp(f->path, got, sizeof(got));
	assert_string_equal(got, "2\n");
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* empty is a file too */
	assert_int_equal(atomic_file_write(f->path, "", 0, 0600, err, sizeof(err)), 0);
	assert_int_equal(stat(f->path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(temporaries(f->dir), 0);
}

static void test_symlink_replaced_not_followed(void **state)
{
	fixture *f = *state;
	char victim[300], err[700] = "", got[64];
	snprintf(victim, sizeof(victim), "%s/victim", f->dir);
	FILE *fp = fopen(victim, "w");
	assert_non_null(fp);
	fputs("keep\n", fp);
	fclose(fp);
	assert_int_equal(symlink(victim, f->path), 0);
	assert_int_equal(atomic_file_write(f->path, "new\n", 4, 0644, err, sizeof(err)), 0);
	slurp(victim, got, sizeof(got));
	assert_string_equal(got, "keep\n");
	struct stat st;
	assert_int_equal(lstat(f->path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	slurp(f->path, got, sizeof(got));
	assert_string_equal(got, "new\n");
}

static void test_failures_say_what_and_leave_nothing(void **state)
{
	fixture *f = *state;
	char path[300], err[700] = "";
	/* no such directory: the temporary file cannot be made */
	snprintf(path, sizeof(path), "%s/missing/out", f->dir);
	assert_int_equal(atomic_file_write(path, "x", 1, 0644, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "creating "));
	assert_non_null(strstr(err, path));
	/* the path is a directory with something in it: the rename fails,
	 * the temporary beside it goes */
	snprintf(path, sizeof(path), "%s/adir", f->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	char inner[320];
	snprintf(inner, sizeof(inner), "%s/inner", path);
	assert_int_equal(mkdir(inner, 0700), 0);
	err[0] = 0;
	int rc = atomic_file_write(path, "x", 1, 0644, err, sizeof(err));
	assert_true(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
	assert_non_null(strstr(err, "renaming "));
	assert_int_equal(temporaries(f->dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_writes_contents_and_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_replaced_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures_say_what_and_leave_nothing, setup, teardown),
	};
	return cmocka_run_group_tests_name("atomic_file", tests, NULL, NULL);
}
