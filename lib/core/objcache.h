/* SPDX-License-Identifier: MIT */
/*
 * The publication object cache: a per-manager slab for the objects images
 * are made of (image roots, radix nodes, value images, location tables) and
 * for value records.
 *
 * Two costs made registering a value slow, both outside librsd's own code:
 *
 *  - Every writer call publishes an image, and what it replaced is freed a
 *    grace period later, in batches of 32 images. glibc keeps 7 freed
 *    blocks per size in its thread cache; the rest of a batch went to its
 *    sorted bins, and the next publications paid for sorting them out again
 *    (a third of an adopt was malloc and free). Here a freed object goes on
 *    a free list of its 16-byte size class, and the next publication pops
 *    it.
 *  - The bookkeeping of a growing manager is new memory: one page fault per
 *    4 KiB, about 15 us each on the virtual machines we measure on, so
 *    0.05 faults per adopt cost more than the adopt itself. Objects are
 *    carved from chunks that double from 64 KiB to 2 MiB; 2 MiB chunks are
 *    2 MiB aligned and advised as transparent huge pages, so a large
 *    manager faults once per 2 MiB (where THP is enabled for madvise).
 *
 * Ownership: objects are the cache's, never malloc's. The writer (m->lock
 * held) allocates and frees with rsd__objcache_alloc/_free. Other threads
 * (the reclaimer, freeing batches after their grace period) give objects
 * back with rsd__objcache_free_remote, a lock-free push that the writer
 * collects when a free list runs dry. Chunks are released only at manager
 * destroy, so the cache holds the manager's peak bookkeeping until then.
 * Objects over RSD_OBJCACHE_MAX_OBJECT bytes are plain malloc blocks.
 *
 * Under AddressSanitizer every object is its own malloc block, so the
 * sanitizer still sees each one's bounds and lifetime.
 */
#ifndef RSD_OBJCACHE_H
#define RSD_OBJCACHE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* 1: every object is its own malloc block (AddressSanitizer builds). */
#if defined(__SANITIZE_ADDRESS__)
#define RSD_OBJCACHE_PASSTHROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSD_OBJCACHE_PASSTHROUGH 1
#endif
#endif
#ifndef RSD_OBJCACHE_PASSTHROUGH
#define RSD_OBJCACHE_PASSTHROUGH 0
#endif

#define RSD_OBJCACHE_GRAIN 16u
#define RSD_OBJCACHE_NCLASS 64u
#define RSD_OBJCACHE_MAX_OBJECT (RSD_OBJCACHE_GRAIN * RSD_OBJCACHE_NCLASS)

struct rsd_objcache_chunk;

struct rsd_objcache {
	/* The writer's free lists; a free object's first word links the next. */
	void *head[RSD_OBJCACHE_NCLASS];
	/* Objects other threads gave back: first word the next, second word
	 * the class. Pushed with a CAS, taken whole with an exchange. */
	_Atomic(void *) remote;
	struct rsd_objcache_chunk *chunks; /* newest first */
	char *bump, *end;		   /* unused space of the newest chunk */
	size_t next_chunk;		   /* bytes of the next chunk */
};

/*
 * An object of n bytes (its content undefined), or NULL. Writer only. Goes
 * through the "alloc" fault point like rsd__malloc(), with the caller's
 * site as subject.
 */
void *rsd__objcache_alloc_at(const char *site, struct rsd_objcache *c, size_t n);
#define rsd__objcache_alloc(c, n) rsd__objcache_alloc_at(RSD__SITE, (c), (n))
/* Give back an object of n bytes (NULL is ignored). Writer only. */
void rsd__objcache_free(struct rsd_objcache *c, void *p, size_t n);
/* The same from any thread. */
void rsd__objcache_free_remote(struct rsd_objcache *c, void *p, size_t n);
/* Release every chunk; at manager destroy, when no object is in use. */
void rsd__objcache_drain(struct rsd_objcache *c);

#endif
