/* SPDX-License-Identifier: MIT */
/*
 * Memory of controller searches (arena.c), so that a state costs no
 * malloc/free pair and a search no page faults for memory the previous
 * one of its controller had:
 *
 *  - a memory cache keeps large blocks a search gave back, up to a cap,
 *    for the next search of the same controller (the controller's lock
 *    orders its users: no locking of its own);
 *  - an arena hands out memory from chunks it keeps until rsd__arena_fini();
 *    rsd__arena_mark() and rsd__arena_release() make it a stack (the search
 *    frames' scratch: a frame releases what it took when it is popped,
 *    always the top one), and without them it is an append-only store
 *    (the memo's keys);
 *  - a memory cache is also where the slab of a search's planning states
 *    (lib/base/slab.h) takes its chunks from (rsd__mem_source()).
 *
 * Arenas belong to one search and one thread: no locking.
 *
 * Under AddressSanitizer (RSD__ARENA_PASSTHROUGH) every arena allocation
 * is a malloc block of its own, freed when released, and
 * caches keep nothing, so the sanitizer still sees each one's bounds and
 * lifetime.
 */
#ifndef RSD_CTRL_ARENA_H
#define RSD_CTRL_ARENA_H

#include "../base/slab.h"
#include "../internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define RSD__ARENA_PASSTHROUGH 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSD__ARENA_PASSTHROUGH 1
#endif
#endif
#ifndef RSD__ARENA_PASSTHROUGH
#define RSD__ARENA_PASSTHROUGH 0
#endif

struct rsd__mem_block;

struct rsd__mem_cache {
	struct rsd__mem_block *free; /* the blocks kept, most recent first */
	size_t bytes, cap;	     /* bytes kept, and the most it keeps */
};

void rsd__mem_cache_init(struct rsd__mem_cache *mc, size_t cap);
/* Frees every block kept. */
void rsd__mem_cache_fini(struct rsd__mem_cache *mc);
/*
 * A block of at least n bytes (its size in *got): one kept by mc (NULL:
 * none) of at most 2n bytes, else a new one; NULL with -RSD_ENOMEM
 * recorded on failure. Its contents are undefined.
 */
void *rsd__mem_get(struct rsd__mem_cache *mc, size_t n, size_t *got);
/* Give back a block of size bytes: kept while mc stays within its cap,
 * else freed. */
void rsd__mem_put(struct rsd__mem_cache *mc, void *p, size_t size);
/* *src: a slab source whose chunks come from and go back to mc (NULL:
 * none kept); mc must outlive the slabs that use it. */
void rsd__mem_source(struct rsd__mem_cache *mc, struct rsd__slab_source *src);

struct rsd__arena_chunk;

struct rsd__arena {
	struct rsd__arena_chunk *head; /* first chunk; chunks follow by next */
	struct rsd__arena_chunk *cur;  /* the one being filled; those after it are free */
	size_t chunk_size;	       /* of the next new chunk (doubling up to 2 MiB) */
	struct rsd__mem_cache *mc;     /* where chunks come from and go back to */
};

/* Where the arena stood; releasing to it frees everything allocated after. */
struct rsd__arena_mark {
	struct rsd__arena_chunk *chunk;
	size_t used;
};

/* mc: the cache chunks come from and go back to, NULL for none. */
void rsd__arena_init(struct rsd__arena *a, size_t chunk_size, struct rsd__mem_cache *mc);
/* Gives back every chunk: every pointer the arena handed out becomes
 * invalid. */
void rsd__arena_fini(struct rsd__arena *a);
/* n bytes aligned to 8; NULL with -RSD_ENOMEM recorded on failure. */
void *rsd__arena_alloc(struct rsd__arena *a, size_t n);
struct rsd__arena_mark rsd__arena_mark(const struct rsd__arena *a);
void rsd__arena_release(struct rsd__arena *a, struct rsd__arena_mark m);

#endif
