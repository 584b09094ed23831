/* SPDX-License-Identifier: MIT */
/*
 * The pageable block cache: value storage at pageable host, recycled.
 *
 * A value's pageable storage is one large block. glibc serves blocks of a
 * few MiB with mmap and returns them with munmap, so a workload that spills
 * values to pageable memory and loads them back pays a page fault on every
 * page of every spill. This cache keeps a bounded number of freed large
 * blocks, keyed by size class, and hands them to the next value of the same
 * class with their pages still mapped.
 *
 * Only value storage goes through it (rsd__resident_alloc and
 * rsd__resident_destroy), never bookkeeping. A block is in the cache only
 * between its free and its next alloc: it is taken out under the lock before
 * it is handed out, so no two values ever share one. Blocks under
 * RSD__PCACHE_MIN_BYTES are malloc's business and bypass the cache, as do
 * blocks over RSD__PCACHE_MAX_BYTES.
 *
 * Bounds: at most RSD__PCACHE_MAX_BLOCKS blocks and RSD__PCACHE_MAX_BYTES
 * bytes are held; a free that would exceed either evicts the oldest blocks
 * first. The cache is emptied when the library is unloaded or the process
 * exits (a destructor), and by rsd__pcache_drain.
 *
 * Thread-safe: one process-wide mutex, never held across malloc or free,
 * and held across fork() so that a child never inherits it locked.
 */
#ifndef RSD_CORE_PCACHE_H
#define RSD_CORE_PCACHE_H

#include <stdint.h>

#define RSD__PCACHE_MIN_BYTES (1ull << 20)
#define RSD__PCACHE_MAX_BYTES (64ull << 20)
#define RSD__PCACHE_MAX_BLOCKS 16u
/* Size classes: a cacheable request is rounded up to a multiple of this. */
#define RSD__PCACHE_CLASS (64ull << 10)

struct rsd__pcache_stats {
	uint64_t hits;	    /* allocs served from the cache, ever */
	uint64_t misses;    /* cacheable allocs that found no block, ever */
	uint64_t puts;	    /* frees that kept their block, ever */
	uint64_t evictions; /* blocks given back to malloc to stay in bounds, ever */
	uint64_t nblocks;   /* blocks held now */
	uint64_t bytes;	    /* bytes held now */
};

/*
 * A 64-byte aligned block of at least nbytes (nbytes > 0) for a value's
 * pageable storage: 0 and *ptr, or -1 (nothing recorded) when out of memory.
 */
int rsd__pcache_alloc(uint64_t nbytes, void **ptr);
/* Give back a block from rsd__pcache_alloc, with the nbytes it was asked for. */
void rsd__pcache_free(void *ptr, uint64_t nbytes);
/* Free every held block; returns how many. */
unsigned rsd__pcache_drain(void);
void rsd__pcache_stats(struct rsd__pcache_stats *out);

#endif
