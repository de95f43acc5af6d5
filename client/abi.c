/* client/abi.c — libvkgrad's growing ABI (vkgrad.h, "A growing ABI"):
 * the version, and each call of a struct that may grow in a form for the
 * 0.1 layout and one for the caller's size. The calls themselves are
 * queries.c's and jobs.c's. */
#include "vkgrad.h"
#include "vkgrad_full.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* sizeof of each in 0.1's header (tests/abi/v0.1.0/vkgrad.h) on LP64 */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(VKG_INFO_SIZE_0_1 == 4232, "vkg_info's 0.1 part must keep its size");
_Static_assert(VKG_STATS_SIZE_0_1 == 232, "vkg_stats' 0.1 part must keep its size");
_Static_assert(VKG_JOB_SIZE_0_1 == 144, "vkg_job's 0.1 layout must keep its size");
#endif

unsigned vkg_version(void)
{
	return VKGRAD_VERSION;
}

/* size bytes of out from full (this library's whole struct): a smaller
 * caller gets its part, a larger one zeroes past ours */
static void copy_sized(void *out, size_t size, const void *full, size_t full_size)
{
	if (size <= full_size) {
		memcpy(out, full, size);
	} else {
		memcpy(out, full, full_size);
		memset((char *)out + full_size, 0, size - full_size);
	}
}

int vkg_hello_sized(vkg_client *c, const char *client_name, vkg_info *out, size_t size,
		    vkg_error *err)
{
	static _Thread_local vkg_info full; /* 4 KiB: off the caller's stack */
	int rc = vkg_full_hello(c, client_name, out ? &full : NULL, err);
	if (rc == 0 && out)
		copy_sized(out, size, &full, sizeof(full));
	return rc;
}

int vkg_hello(vkg_client *c, const char *client_name, vkg_info *out, vkg_error *err)
{
	return vkg_hello_sized(c, client_name, out, VKG_INFO_SIZE_0_1, err);
}

int vkg_stats_get_sized(vkg_client *c, vkg_stats *out, size_t size, vkg_error *err)
{
	vkg_stats full;
	int rc = vkg_full_stats(c, out ? &full : NULL, err);
	if (rc == 0 && out)
		copy_sized(out, size, &full, sizeof(full));
	return rc;
}

int vkg_stats_get(vkg_client *c, vkg_stats *out, vkg_error *err)
{
	return vkg_stats_get_sized(c, out, VKG_STATS_SIZE_0_1, err);
}

void vkg_job_init_sized(vkg_job *job, size_t size)
{
	vkg_job j = vkg_full_job_init();
	copy_sized(job, size, &j, sizeof(j));
}

/* The caller's job as this library's vkg_job: -EINVAL when it sets a
 * field this library does not know (a newer header's). */
static int job_of_size(vkg_job *j, const vkg_job *job, size_t size, vkg_error *err)
{
	if (size < VKG_JOB_SIZE_0_1) {
		if (err) {
			snprintf(err->code, sizeof(err->code), "io");
			snprintf(err->message, sizeof(err->message),
				 "vkg_job of %zu bytes: smaller than 0.1's %zu", size,
				 (size_t)VKG_JOB_SIZE_0_1);
		}
		return -EINVAL;
	}
	*j = vkg_full_job_init(); /* a 0.1 caller's job leaves the 0.2 fields as none */
	memcpy(j, job, size < sizeof(*j) ? size : sizeof(*j));
	for (size_t i = sizeof(*j); i < size; i++)
		if (((const unsigned char *)job)[i]) {
			if (err) {
				snprintf(err->code, sizeof(err->code), "io");
				snprintf(err->message, sizeof(err->message),
					 "vkg_job byte %zu is set: a field of a newer libvkgrad than "
					 "this %u.%u.%u",
					 i, VKGRAD_VERSION_MAJOR, VKGRAD_VERSION_MINOR,
					 VKGRAD_VERSION_PATCH);
			}
			return -EINVAL;
		}
	return 0;
}

int vkg_linear_backward_sized(vkg_client *c, const vkg_job *job, size_t size, vkg_result *res,
			      vkg_error *err)
{
	vkg_job j;
	int rc = job_of_size(&j, job, size, err);
	return rc ? rc : vkg_full_linear_backward(c, &j, res, err);
}

int vkg_submit_sized(vkg_client *c, const vkg_job *job, size_t size, uint64_t *handle,
		     vkg_error *err)
{
	vkg_job j;
	int rc = job_of_size(&j, job, size, err);
	return rc ? rc : vkg_full_submit(c, &j, handle, err);
}
