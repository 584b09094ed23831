/* SPDX-License-Identifier: MIT */
/*
 * The publication object cache: freed image roots, radix nodes, value
 * images and location tables, kept per manager for the next publication.
 *
 * Every writer call publishes a new image, and what the image replaced is
 * freed a grace period later, in batches of 32 images. glibc keeps only 7
 * freed blocks per size in its per-thread cache; the rest of a batch went
 * through its sorted bins, and the next publications paid for sorting them
 * back out (a third of an adopt was malloc and free). The writer frees
 * those batches itself (reclaim.c), so it can keep their objects instead:
 * a free list per 16-byte size class, popped by the next publication.
 *
 * Objects are ordinary malloc blocks of their class's size, so anything
 * may still free() one: the reclaimer thread does, for the batches it
 * frees, and so does every error path. The cache holds at most
 * RSD_OBJCACHE_MAX_BYTES; beyond that a freed object goes to free().
 *
 * Locking: protected by m->lock (writer path only).
 */
#ifndef RSD_OBJCACHE_H
#define RSD_OBJCACHE_H

#include <stddef.h>
#include <stdint.h>

#define RSD_OBJCACHE_GRAIN 16u
#define RSD_OBJCACHE_NCLASS 64u /* objects up to 1 KiB */
#define RSD_OBJCACHE_MAX_BYTES (4u << 20)

struct rsd_objcache {
	void *head[RSD_OBJCACHE_NCLASS]; /* a freed object's first word links the next */
	size_t bytes;                    /* held in all classes */
};

/*
 * An object of n bytes, from the cache when it holds one of n's class, else
 * from malloc. Goes through the "alloc" fault point like rsd__malloc().
 */
void *rsd__objcache_alloc_at(const char *site, struct rsd_objcache *c, size_t n);
#define rsd__objcache_alloc(c, n) rsd__objcache_alloc_at(RSD__SITE, (c), (n))
/* Give back an object of n bytes that rsd__objcache_alloc() returned; with
 * c NULL, or the cache full, it is freed. */
void rsd__objcache_free(struct rsd_objcache *c, void *p, size_t n);
/* Free everything held; at manager destroy. */
void rsd__objcache_drain(struct rsd_objcache *c);

#endif
