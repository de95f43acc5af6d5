/* bench/bench_resident.h — bench --kernels --resident: a line's tensors as
 * device tensors (proto/README.md, "Device tensors"), so its jobs read and
 * write device memory only, as a model kept on the daemon does; without
 * it they name the task's shared-memory region and the daemon copies them
 * in and out around the kernels.
 *
 * The task (client/cli.h) stays the source and the check's target: its
 * inputs and poisoned outputs are written to the tensors first, the
 * outputs read back into the region before the check. */
#ifndef VKGRAD_BENCH_RESIDENT_H
#define VKGRAD_BENCH_RESIDENT_H

#include "cli.h"
#include "vkgrad.h"

typedef struct bench_resident {
	uint64_t id[CLI_NT]; /* VKG_NONE where the task has no such tensor */
} bench_resident;

/* Make t's tensors on the daemon and copy the region's contents into
 * them. 0, or the library's error (err filled; the tensors made so far are
 * freed). */
int bench_resident_open(bench_resident *br, vkg_client *c, const cli_task *t, vkg_error *err);
/* t's job naming the device tensors. */
vkg_job bench_resident_job(const bench_resident *br, const cli_task *t);
/* The outputs back into t's region. 0, or the library's error. */
int bench_resident_read(const bench_resident *br, vkg_client *c, const cli_task *t, vkg_error *err);
/* Free the tensors (errors ignored: a broken connection frees them too). */
void bench_resident_close(bench_resident *br, vkg_client *c);

#endif
