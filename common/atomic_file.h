/* common/atomic_file.h — replace a file's contents atomically: a reader
 * sees the old file or the new one, never half of one. Shared by the
 * daemon (the pipeline cache, daemon/gpu/pipeline_cache.c) and the CLI
 * (the metrics file, client/cli_prom.c); no I/O library beyond libc. */
#ifndef VKG_COMMON_ATOMIC_FILE_H
#define VKG_COMMON_ATOMIC_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Write buf[0, len) to path: into a new temporary file beside it
 * ("<path>.tmp.XXXXXX", made by mkostemp: O_CREAT|O_EXCL, so it follows
 * no symlink and takes no file that exists), given permission bits `mode`
 * (fchmod: the umask does not apply), fsync'd, closed and renamed over
 * path (rename replaces a symlink at path; it does not write through it).
 * The directory must be one where others cannot rename or remove our
 * files (the caller's to check). Returns 0, or -errno with err naming the
 * step and the file that failed; no temporary file is left either way. */
int atomic_file_write(const char *path, const void *buf, size_t len, mode_t mode, char *err,
		      size_t errlen);

#endif
