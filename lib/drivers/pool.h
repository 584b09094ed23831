/* SPDX-License-Identifier: MIT */
/*
 * A chunk pool: the allocator behind pinned host memory and device memory.
 *
 * Expensive allocators (mmap + mlock, cudaMalloc, cudaHostAlloc) are called
 * only to add a chunk; requests are then carved out of chunks, so a warm pool
 * serves an alloc/free cycle without calling them. What backs a chunk is the
 * owner's business: it passes chunk_alloc/chunk_free callbacks. The pool
 * keeps its bookkeeping out of band (the memory may not be host-accessible).
 *
 * Placement: first fit over power-of-two size bins with a bitmap of the
 * non-empty bins, splitting on alloc and coalescing neighbours on free. A
 * repeated alloc/free of one size therefore costs a bitmap scan, a split and
 * a coalesce: O(1) in practice. Live blocks are found by address in a hash.
 *
 * Chunk policy: requests larger than chunk_size get a chunk of their own
 * (dedicated). Freed, a dedicated chunk is kept for reuse while the kept
 * ones total at most keep_bytes (rsd__pool_set_keep; 0, the default, keeps
 * none): a later oversize request takes the smallest kept chunk that holds
 * it and is at most twice its size, so a steady stream of same-sized large
 * blocks calls the backing allocator once, not once per block. Beyond the
 * bound the oldest kept chunks are released. Standard chunks stay; one
 * that becomes entirely free stays idle if it is the first idle one, or if
 * the idle ones beyond the first and the kept dedicated ones still fit in
 * keep_bytes, and is released otherwise (with keep_bytes 0, at most one
 * idle chunk). When the backing refuses a chunk with -RSD_ENOMEM, every
 * chunk with no live block goes back and the chunk is asked for once more.
 * A pool with chunk_size 0 does not pool at all: every request is one
 * chunk_alloc call and every free one chunk_free call.
 *
 * Every function is thread-safe (one mutex per pool). chunk_alloc runs
 * under it; chunk_free runs after it is dropped on the free path (a
 * cudaFree may wait for the whole device: other users of the pool must not
 * wait behind it), under it in trim and destroy. Neither may call back
 * into the same pool.
 */
#ifndef RSD_DRIVERS_POOL_H
#define RSD_DRIVERS_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct rsd__pool_ops {
	/* Back a new chunk of nbytes (a multiple of the granule). Returns 0, or
	 * a negative RSD_E* code already recorded with rsd__err. */
	int (*chunk_alloc)(void *ctx, uint64_t nbytes, void **base);
	void (*chunk_free)(void *ctx, void *base, uint64_t nbytes);
};

struct rsd__pool_stats {
	uint64_t allocated_bytes; /* requested bytes of live allocations */
	uint64_t used_bytes;	  /* live allocations rounded up to the granule */
	uint64_t reserved_bytes;  /* bytes of the chunks held */
	uint64_t nallocs;	  /* live allocations */
	uint64_t nchunks;	  /* chunks held */
	uint64_t chunk_allocs;	  /* successful chunk_alloc calls, ever */
	uint64_t chunk_frees;	  /* chunk_free calls, ever */
	uint64_t kept_bytes;	  /* bytes of freed dedicated chunks kept */
	uint64_t kept_hits;	  /* oversize requests served by a kept chunk */
};

#define RSD__POOL_NBINS 64

struct rsd__pool_chunk;
struct rsd__pool_block;

struct rsd__pool {
	const struct rsd__pool_ops *ops;
	void *ctx;
	uint64_t chunk_size; /* 0: no pooling */
	uint64_t granule;    /* power of two; sizes and offsets are multiples */

	pthread_mutex_t lock;
	/* Everything below is protected by lock. */
	struct rsd__pool_chunk *chunks;		       /* every chunk held */
	struct rsd__pool_block *bins[RSD__POOL_NBINS]; /* free blocks by size */
	uint64_t bin_map;			       /* bit b: bins[b] non-empty */
	struct rsd__pool_block **hash;		       /* live blocks by address */
	uint64_t hash_mask;			       /* hash has hash_mask + 1 heads */
	struct rsd__pool_block *spare;		       /* unused block nodes */
	unsigned nspare;
	unsigned idle_chunks;	      /* standard chunks with no live block */
	uint64_t keep_bytes;	      /* bound on kept bytes + extra idle chunks */
	struct rsd__pool_chunk *kept; /* kept dedicated chunks, newest first */
	struct rsd__pool_stats stats;
};

/*
 * Set up a pool; never fails (nothing is allocated until the first request).
 * granule is rounded up to a power of two (at least 16); chunk_size is
 * rounded up to a multiple of it.
 */
void rsd__pool_init(struct rsd__pool *pool, const struct rsd__pool_ops *ops, void *ctx,
		    uint64_t chunk_size, uint64_t granule);
/* Release every chunk (live allocations included) and the bookkeeping. */
void rsd__pool_destroy(struct rsd__pool *pool);
/*
 * Carve nbytes (0 is served as one granule) out of the pool. Returns 0 and
 * the address, or a negative code recorded with rsd__err: -RSD_ENOMEM for
 * bookkeeping or oversized requests, or whatever chunk_alloc returned.
 */
int rsd__pool_alloc(struct rsd__pool *pool, uint64_t nbytes, void **ptr);
/* Return ptr to the pool; -RSD_EINVAL (not recorded) when ptr is not a live
 * allocation of this pool. */
int rsd__pool_free(struct rsd__pool *pool, void *ptr);
/* True when ptr is a live allocation of this pool. */
bool rsd__pool_owns(struct rsd__pool *pool, const void *ptr);
/* Bound the bytes of freed dedicated chunks kept for reuse and of idle
 * standard chunks beyond the first (0: none); what a lower bound leaves
 * out is released at once. */
void rsd__pool_set_keep(struct rsd__pool *pool, uint64_t keep_bytes);
/* Release every chunk with no live block (kept ones included); returns how
 * many. */
unsigned rsd__pool_trim(struct rsd__pool *pool);
void rsd__pool_stats(struct rsd__pool *pool, struct rsd__pool_stats *out);

#endif
