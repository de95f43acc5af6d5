/* client/vkgrad_full.h — internal to libvkgrad: the hello and stats calls
 * that fill today's whole vkg_info / vkg_stats (queries.c); abi.c copies
 * as much of them as the caller's struct holds (vkgrad.h, "A growing
 * ABI"). Not exported. */
#ifndef VKGRAD_FULL_H
#define VKGRAD_FULL_H

#include "msg.h"
#include "vkgrad.h"

#define VKG_FULL_MAX_KERNELS PROTO_MAX_KERNELS

int vkg_full_hello(vkg_client *c, const char *client_name, vkg_info *out, vkg_error *err);
int vkg_full_stats(vkg_client *c, vkg_stats *out, vkg_error *err);

/* Today's whole vkg_job: every tensor VKG_NONE (jobs.c), and a job run or
 * submitted from it (vkg_linear_backward / vkg_submit read 0.1's part,
 * the _sized forms the caller's size, abi.c). */
vkg_job vkg_full_job_init(void);
int vkg_full_linear_backward(vkg_client *c, const vkg_job *job, vkg_result *res, vkg_error *err);
int vkg_full_submit(vkg_client *c, const vkg_job *job, uint64_t *handle, vkg_error *err);

/* The library defines the 0.1 entry points these macros of vkgrad.h stand
 * in for (a program's calls go to the _sized forms). */
#undef vkg_job_init
#undef vkg_linear_backward
#undef vkg_submit

#endif
