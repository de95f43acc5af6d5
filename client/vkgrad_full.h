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

#endif
