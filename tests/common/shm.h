/* tests/common/shm.h — shared-memory files for tests: memfds the way a client
 * makes them for `register` (sealed against shrinking), or deliberately not. */
#ifndef VKG_TEST_SHM_H
#define VKG_TEST_SHM_H

#include <stdbool.h>
#include <stddef.h>

/* Make a memfd of `file_size` bytes, sealed with F_SEAL_SHRINK when `seal`,
 * and map its first `map_size` bytes shared read-write into *map (map may be
 * NULL: no mapping). Returns the descriptor (close-on-exec), or -errno. */
int shm_create(size_t file_size, bool seal, size_t map_size, void **map);

#endif
