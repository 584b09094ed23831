/* SPDX-License-Identifier: MIT */
/*
 * librsd's allocator for small objects (slab.c): the manager's publication
 * objects (image roots, radix nodes, value images, location tables, value
 * records; lib/core) and the controller search's planning states, delta
 * nodes and reclaim records (lib/ctrl/pstate.c).
 *
 * Why not malloc, for both:
 *
 *  - Objects come and go in bursts of one size. A publication frees what
 *    it replaced a grace period later, 32 images at a time; glibc keeps 7
 *    freed blocks per size in its thread cache and sorts the rest into its
 *    bins, and the next publications paid for sorting them out again (a
 *    third of an adopt was malloc and free). A search makes and drops a
 *    state per successor. Here a freed object goes on the free list of its
 *    size class, and the next allocation of that class pops it.
 *  - New memory costs a page fault per 4 KiB (about 15 us each on the
 *    virtual machines we measure on). Objects are carved from chunks that
 *    double from 64 KiB to 2 MiB; the default chunks of 2 MiB are 2 MiB
 *    aligned and advised as transparent huge pages, so a large manager
 *    faults once per 2 MiB (where THP is enabled for madvise). A slab may
 *    take its chunks from elsewhere instead (struct rsd__slab_source): a
 *    controller's searches take theirs from the memory its previous search
 *    gave back (lib/ctrl/arena.h).
 *
 * Size classes: 16-byte steps up to 1 KiB, then powers of two up to
 * RSD__SLAB_MAX_OBJECT; a larger object is a malloc block of its own.
 *
 * Ownership: objects are the slab's, never malloc's. One thread at a time
 * (the owner: the manager's writer under m->lock, the searching thread)
 * allocates and frees with rsd__slab_alloc/_free. Other threads (the
 * reclaimer, freeing batches after their grace period) give objects back
 * with rsd__slab_free_remote, a lock-free push that the owner collects
 * when a free list runs dry. Chunks are released only by rsd__slab_fini(),
 * so a slab holds its owner's peak until then.
 *
 * A zeroed struct rsd__slab is an empty slab with the default chunks.
 *
 * Under AddressSanitizer every object is its own malloc block, so the
 * sanitizer still sees each one's bounds and lifetime.
 */
#ifndef RSD_BASE_SLAB_H
#define RSD_BASE_SLAB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* 1: every object is its own malloc block (AddressSanitizer builds). */
#if defined(__SANITIZE_ADDRESS__)
#define RSD__SLAB_PASSTHROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSD__SLAB_PASSTHROUGH 1
#endif
#endif
#ifndef RSD__SLAB_PASSTHROUGH
#define RSD__SLAB_PASSTHROUGH 0
#endif

#define RSD__SLAB_GRAIN 16u
#define RSD__SLAB_NSMALL 64u /* 16-byte classes, up to 1 KiB */
#define RSD__SLAB_NLARGE 4u  /* 2, 4, 8, 16 KiB */
#define RSD__SLAB_NCLASS (RSD__SLAB_NSMALL + RSD__SLAB_NLARGE)
#define RSD__SLAB_MAX_OBJECT ((size_t)(RSD__SLAB_GRAIN * RSD__SLAB_NSMALL) << RSD__SLAB_NLARGE)

/*
 * Where a slab's chunks come from: get returns a block of at least n bytes
 * (its size in *got; 16-byte aligned) or NULL, put takes one back.
 */
struct rsd__slab_source {
	void *(*get)(void *ctx, size_t n, size_t *got);
	void (*put)(void *ctx, void *p, size_t size);
	void *ctx;
};

struct rsd__slab_chunk;

struct rsd__slab {
	/* The owner's free lists; a free object's first word links the next. */
	void *head[RSD__SLAB_NCLASS];
	/* Objects other threads gave back: first word the next, second word
	 * the class. Pushed with a CAS, taken whole with an exchange. */
	_Atomic(void *) remote;
	struct rsd__slab_chunk *chunks;	    /* newest first */
	char *bump, *end;		    /* unused space of the newest chunk */
	size_t next_chunk;		    /* bytes of the next chunk */
	const struct rsd__slab_source *src; /* NULL: the default chunks */
};

/* An empty slab whose chunks come from src (NULL: the default ones). */
void rsd__slab_init(struct rsd__slab *s, const struct rsd__slab_source *src);
/* Release every chunk, when no object is in use; s is empty afterwards,
 * with the same source. */
void rsd__slab_fini(struct rsd__slab *s);

/* The size of n bytes' class (n itself over the largest): an object of
 * that many bytes costs no more than one of n. */
size_t rsd__slab_size(size_t n);
/*
 * An object of n bytes (its content undefined), or NULL; records no error.
 * Owner only. Goes through the "alloc" fault point like rsd__malloc(),
 * with the caller's site as subject.
 */
void *rsd__slab_alloc_at(const char *site, struct rsd__slab *s, size_t n);
#define rsd__slab_alloc(s, n) rsd__slab_alloc_at(RSD__SITE, (s), (n))
/* Give back an object of n bytes (NULL is ignored). Owner only. */
void rsd__slab_free(struct rsd__slab *s, void *p, size_t n);
/* The same from any thread. */
void rsd__slab_free_remote(struct rsd__slab *s, void *p, size_t n);

#endif
