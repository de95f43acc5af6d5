/* tests/common/lregion.h — a region holding one jobcase, registered through
 * the client library: made and filled, its job run and checked, freed. For
 * the cmocka tests (each fails the running test with a message). */
#ifndef VKG_TEST_LREGION_H
#define VKG_TEST_LREGION_H

#include <stdbool.h>
#include <stdint.h>

#include "jobcase.h"
#include "vkgrad.h"

typedef struct lregion {
	jobcase jc;
	uint64_t id;
	void *map;
} lregion;

/* A batch × in × out case of every output (accumulating when acc) in a new
 * region of c, filled from seed. */
void lregion_make(vkg_client *c, lregion *r, uint64_t batch, uint64_t in, uint64_t out, bool acc,
		  uint64_t seed);
/* Run r's job synchronously: it must succeed with the reference's numbers
 * (JC_TOL_F32); `what` names it in a failure. */
void lregion_job_ok(vkg_client *c, lregion *r, const char *what);
/* Unregister and unmap r, and free its case. */
void lregion_free(vkg_client *c, lregion *r);

#endif
