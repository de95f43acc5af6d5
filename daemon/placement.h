/* daemon/placement.h — where a job's work goes, decided when it joins a
 * batch: its kernels (variant.h), whether its tensors take the device-local
 * path (copied into the slot's scratch and back) and where in scratch its
 * copies and split-K partials sit. The thresholds come from the config,
 * resolved per device and dtype at start (README, Memory path). */
#ifndef VKG_DAEMON_PLACEMENT_H
#define VKG_DAEMON_PLACEMENT_H

#include <stdint.h>

#include "engine.h"

/* Resolve e->devlocal_min (per dtype) and e->scratch_cap from the config
 * and the device, and log them. */
void placement_init(engine *e);
/* Choose j's kernels and places, given `used` bytes of the slot's scratch
 * already placed. Returns the scratch bytes j takes, or UINT64_MAX when it
 * would fit an empty slot but not this one. */
uint64_t placement_place(engine *e, job *j, uint64_t used);
/* Without scratch: j reads the client's memory, dW tiled instead of split-K. */
void placement_drop(job *j);

#endif
