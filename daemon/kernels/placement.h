/* daemon/kernels/placement.h — where a job's work goes, decided when it joins a
 * batch: its kernels (variant.h), whether its tensors take the device-local
 * path (copied into the slot's scratch and back) and where in scratch its
 * copies and split-K partials sit. The thresholds come from the config,
 * resolved per device and dtype at start (README, Memory path). */
#ifndef VKG_DAEMON_PLACEMENT_H
#define VKG_DAEMON_PLACEMENT_H

#include <stdint.h>

#include "config.h"
#include "costmodel.h"
#include "device.h"
#include "engine_job.h"
#include "pipelines.h"

/* The placement policy, resolved per device at start. */
typedef struct placement {
	const device *dev;
	const pipelines *pl;
	/* jobs with at least devlocal_min tensor bytes (per dtype; CONFIG_OFF:
	 * never) are copied to device memory when their pieces fit scratch_cap
	 * per slot */
	uint64_t devlocal_min[PROTO_DTYPE_COUNT];
	uint64_t scratch_cap;
	/* what the plain kernel families cost on this device (measured at
	 * init; all !ok when it could not be) */
	costmodel cost;
} placement;

/* Resolve p's thresholds from the config and the device (nslots
 * submission slots share the default scratch cap), measure its cost
 * model (costmodel.h: probes on the device, start-up only), and log them. */
void placement_init(placement *p, const device *d, const pipelines *pl, const config *cfg,
		    uint32_t nslots);
/* Choose j's kernels and places, given `used` bytes of the slot's scratch
 * already placed. Returns the scratch bytes j takes, or UINT64_MAX when it
 * would fit an empty slot but not this one. */
uint64_t placement_place(const placement *p, job *j, uint64_t used);
/* Without scratch: j reads the client's memory, dW tiled instead of split-K. */
void placement_drop(job *j);

#endif
