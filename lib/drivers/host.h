/* SPDX-License-Identifier: MIT */
/*
 * Private interface of the host driver: page-locked chunks for pools of
 * pinned host memory (used by the simulated device too), and the host
 * driver's process-wide pool for tests and diagnostics.
 */
#ifndef RSD_DRIVERS_HOST_H
#define RSD_DRIVERS_HOST_H

#include <stdint.h>

#include <rsd/location.h>

#include "pool.h"

/* Chunks of pinned host pools: mmap + mlock, munmap (ctx unused). mlock
 * failure is -RSD_ENOMEM naming errno and RLIMIT_MEMLOCK. */
extern const struct rsd__pool_ops rsd__locked_chunk_ops;
/* Chunks of plain host memory posing as device memory: mmap, munmap. */
extern const struct rsd__pool_ops rsd__anon_chunk_ops;

/*
 * Check a location record for a driver op: -RSD_ETYPE for an unknown kind,
 * -RSD_EINVAL for a bad device (recorded, naming the driver).
 */
int rsd__driver_check_location(const char *driver, struct rsd_location at);

/*
 * Verify that nbytes at ptr are page-locked, as pinned host memory must be:
 * 0, or -RSD_EDEVICE ("pinned host storage is unavailable: <driver>: ...")
 * recorded, when a page of the range is not resident (a locked page always
 * is). Residency is necessary, not sufficient: the check catches memory that
 * was never locked or has been unlocked and reclaimed.
 */
int rsd__check_pinned(const char *driver, const void *ptr, uint64_t nbytes);

/* Chunk size of the host driver's pinned pool. */
#define RSD__HOST_CHUNK_SIZE (64ull << 20)
#define RSD__PAGE_GRANULE 4096ull

/* The host driver's pinned pool. */
void rsd__host_pool_stats(struct rsd__pool_stats *out);
/* Release its chunks that hold no live allocation; returns how many. */
unsigned rsd__host_pool_trim(void);

#endif
