// SPDX-License-Identifier: MIT
/*
 * The chunk pool (see pool.h for the policy). Bookkeeping lives in small
 * malloc'ed nodes, recycled through a spare list so that a warm pool's
 * alloc/free cycle calls neither malloc nor the chunk allocator.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "pool.h"

/* Spare block nodes kept for reuse beyond what one request needs. */
#define POOL_MAX_SPARE 256
#define POOL_HASH_MIN 64

struct rsd__pool_chunk {
	struct rsd__pool_chunk *prev, *next; /* pool->chunks */
	char *base;
	uint64_t size;
	struct rsd__pool_block *first; /* the block at offset 0; never merged away */
	unsigned long live;	       /* live blocks carved from this chunk */
	bool dedicated;		       /* kept or released when live drops to 0 */
	bool kept;		       /* on pool->kept (first not in a bin) */
	struct rsd__pool_chunk *knext; /* pool->kept */
};

struct rsd__pool_block {
	struct rsd__pool_chunk *chunk;
	struct rsd__pool_block *prev, *next;   /* neighbours in address order */
	struct rsd__pool_block *lprev, *lnext; /* free: bin list; live: hash chain */
	uint64_t off, size;		       /* size: a multiple of the granule */
	uint64_t requested;		       /* live: what the caller asked for */
	bool free;
};

static inline char *block_addr(const struct rsd__pool_block *b)
{
	return b->chunk->base + b->off;
}

static unsigned bin_of(const struct rsd__pool *pool, uint64_t size)
{
	uint64_t g = size / pool->granule;
	unsigned b = 63u - (unsigned)__builtin_clzll(g ? g : 1);

	return b < RSD__POOL_NBINS ? b : RSD__POOL_NBINS - 1;
}

static void bin_insert(struct rsd__pool *pool, struct rsd__pool_block *b)
{
	unsigned i = bin_of(pool, b->size);

	b->lprev = NULL;
	b->lnext = pool->bins[i];
	if (b->lnext)
		b->lnext->lprev = b;
	pool->bins[i] = b;
	pool->bin_map |= 1ull << i;
}

static void bin_remove(struct rsd__pool *pool, struct rsd__pool_block *b)
{
	unsigned i = bin_of(pool, b->size);

	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else
		pool->bins[i] = b->lnext;
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	if (!pool->bins[i])
		pool->bin_map &= ~(1ull << i);
	b->lprev = b->lnext = NULL;
}

/* First fit in the request's own bin (its blocks may be smaller), else the
 * head of the first non-empty larger bin (all of whose blocks fit). */
static struct rsd__pool_block *find_free(struct rsd__pool *pool, uint64_t size)
{
	unsigned i = bin_of(pool, size);
	uint64_t above;

	for (struct rsd__pool_block *b = pool->bins[i]; b; b = b->lnext)
		if (b->size >= size)
			return b;
	above = i + 1 < 64 ? pool->bin_map & ~((2ull << i) - 1) : 0;
	if (!above)
		return NULL;
	return pool->bins[__builtin_ctzll(above)];
}

static uint64_t hash_index(const struct rsd__pool *pool, const void *addr)
{
	uint64_t x = (uint64_t)(uintptr_t)addr * 0x9e3779b97f4a7c15ull;

	return (x >> 29) & pool->hash_mask;
}

static void hash_insert(struct rsd__pool *pool, struct rsd__pool_block *b)
{
	uint64_t i = hash_index(pool, block_addr(b));

	b->lnext = pool->hash[i];
	pool->hash[i] = b;
}

/* Unlink and return the live block at addr, or NULL. */
static struct rsd__pool_block *hash_take(struct rsd__pool *pool, const void *addr, bool unlink)
{
	struct rsd__pool_block **pp;

	if (!pool->hash)
		return NULL;
	for (pp = &pool->hash[hash_index(pool, addr)]; *pp; pp = &(*pp)->lnext) {
		struct rsd__pool_block *b = *pp;

		if (block_addr(b) == addr) {
			if (unlink) {
				*pp = b->lnext;
				b->lnext = NULL;
			}
			return b;
		}
	}
	return NULL;
}

/* Room for one more live block: a table exists, doubled when the load
 * passes 1 (a failed doubling only makes chains longer). */
static int hash_reserve(struct rsd__pool *pool)
{
	uint64_t nheads = pool->hash ? pool->hash_mask + 1 : 0;
	uint64_t newn = nheads ? nheads * 2 : POOL_HASH_MIN;
	struct rsd__pool_block **old = pool->hash, **nh;

	if (nheads && pool->stats.nallocs < nheads)
		return 0;
	nh = rsd__calloc(newn, sizeof(void *));
	if (!nh)
		return old ? 0 : rsd__err(RSD_ENOMEM, "pool: out of memory for the block table");
	pool->hash = nh;
	pool->hash_mask = newn - 1;
	for (uint64_t i = 0; i < nheads; i++) {
		struct rsd__pool_block *b = old[i], *next;

		for (; b; b = next) {
			next = b->lnext;
			hash_insert(pool, b);
		}
	}
	free(old);
	return 0;
}

static int reserve_nodes(struct rsd__pool *pool, unsigned n)
{
	while (pool->nspare < n) {
		struct rsd__pool_block *b = rsd__calloc(1, sizeof(*b));

		if (!b)
			return rsd__err(RSD_ENOMEM, "pool: out of memory for block bookkeeping");
		b->lnext = pool->spare;
		pool->spare = b;
		pool->nspare++;
	}
	return 0;
}

/* Callers reserve nodes first, so this cannot fail. */
static struct rsd__pool_block *node_get(struct rsd__pool *pool)
{
	struct rsd__pool_block *b = pool->spare;

	pool->spare = b->lnext;
	pool->nspare--;
	memset(b, 0, sizeof(*b));
	return b;
}

static void node_put(struct rsd__pool *pool, struct rsd__pool_block *b)
{
	if (pool->nspare >= POOL_MAX_SPARE) {
		free(b);
		return;
	}
	b->lnext = pool->spare;
	pool->spare = b;
	pool->nspare++;
}

/* A new chunk holding one free block (in its bin). Needs one spare node. */
static int chunk_new(struct rsd__pool *pool, uint64_t size, bool dedicated,
		     struct rsd__pool_block **out)
{
	struct rsd__pool_chunk *c = rsd__calloc(1, sizeof(*c));
	struct rsd__pool_block *b;
	void *base = NULL;
	int rc;

	if (!c)
		return rsd__err(RSD_ENOMEM, "pool: out of memory for chunk bookkeeping");
	rc = pool->ops->chunk_alloc(pool->ctx, size, &base);
	if (rc < 0) {
		free(c);
		return rc;
	}
	c->base = base;
	c->size = size;
	c->dedicated = dedicated;
	c->next = pool->chunks;
	if (c->next)
		c->next->prev = c;
	pool->chunks = c;
	b = node_get(pool);
	b->chunk = c;
	b->size = size;
	b->free = true;
	c->first = b;
	bin_insert(pool, b);
	if (!dedicated)
		pool->idle_chunks++;
	pool->stats.nchunks++;
	pool->stats.reserved_bytes += size;
	pool->stats.chunk_allocs++;
	*out = b;
	return 0;
}

/* Take a chunk with no live block out of the pool (its one block must not
 * be in a bin, and it must not be kept); chunk_gone then gives it back. */
static void chunk_detach(struct rsd__pool *pool, struct rsd__pool_chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		pool->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
	node_put(pool, c->first);
	c->first = NULL;
	pool->stats.nchunks--;
	pool->stats.reserved_bytes -= c->size;
	pool->stats.chunk_frees++;
}

static void chunk_gone(struct rsd__pool *pool, struct rsd__pool_chunk *c)
{
	pool->ops->chunk_free(pool->ctx, c->base, c->size);
	free(c);
}

static void chunk_release(struct rsd__pool *pool, struct rsd__pool_chunk *c)
{
	chunk_detach(pool, c);
	chunk_gone(pool, c);
}

/* Unlink kept chunk c (prev: its predecessor on pool->kept, or NULL). */
static void kept_remove(struct rsd__pool *pool, struct rsd__pool_chunk *prev,
			struct rsd__pool_chunk *c)
{
	if (prev)
		prev->knext = c->knext;
	else
		pool->kept = c->knext;
	c->knext = NULL;
	c->kept = false;
	pool->stats.kept_bytes -= c->size;
}

/* Detach the oldest kept chunks until the kept bytes fit in bound, onto
 * *gone (chained by knext) for chunk_gone once the lock is dropped. */
static void kept_shrink(struct rsd__pool *pool, uint64_t bound, struct rsd__pool_chunk **gone)
{
	/* kept_bytes is the sum over pool->kept: non-zero means non-empty. */
	while (pool->kept && pool->stats.kept_bytes > bound) {
		struct rsd__pool_chunk *c = pool->kept, *prev = NULL;

		while (c->knext) {
			prev = c;
			c = c->knext;
		}
		kept_remove(pool, prev, c);
		chunk_detach(pool, c);
		c->knext = *gone;
		*gone = c;
	}
}

static void chunks_gone(struct rsd__pool *pool, struct rsd__pool_chunk *gone)
{
	while (gone) {
		struct rsd__pool_chunk *c = gone;

		gone = c->knext;
		chunk_gone(pool, c);
	}
}

/*
 * Idle standard chunks beyond the first share the keep bound with the kept
 * dedicated ones. A pool whose use swings between one and two chunks'
 * worth (a copy in, another out) would otherwise give a chunk back and
 * take a new one at every swing: on a GPU a cudaFree, which synchronizes
 * the device, then a cudaMalloc.
 */
static uint64_t idle_extra_bytes(const struct rsd__pool *pool)
{
	return pool->idle_chunks > 1 ? (uint64_t)(pool->idle_chunks - 1) * pool->chunk_size : 0;
}

/* What the kept dedicated chunks may total beside the extra idle ones. */
static uint64_t kept_bound(const struct rsd__pool *pool)
{
	uint64_t extra = idle_extra_bytes(pool);

	return pool->keep_bytes > extra ? pool->keep_bytes - extra : 0;
}

/* Whether a standard chunk that just became entirely free stays idle. */
static bool idle_room(const struct rsd__pool *pool)
{
	uint64_t extra;

	if (!pool->idle_chunks)
		return true;
	extra = idle_extra_bytes(pool) + pool->chunk_size;
	return extra + pool->stats.kept_bytes <= pool->keep_bytes;
}

/* Release every chunk with no live block, kept ones included, with the
 * lock held (trim, and an allocation the backing refused); returns how
 * many. */
static unsigned release_unused(struct rsd__pool *pool)
{
	struct rsd__pool_chunk *c, *next;
	unsigned n = 0;

	for (c = pool->chunks; c; c = next) {
		next = c->next;
		if (c->live)
			continue;
		if (c->kept) {
			struct rsd__pool_chunk *k, *prev = NULL;

			for (k = pool->kept; k != c; k = k->knext)
				prev = k;
			kept_remove(pool, prev, c);
		} else {
			bin_remove(pool, c->first);
		}
		if (!c->dedicated)
			pool->idle_chunks--;
		chunk_release(pool, c);
		n++;
	}
	return n;
}

/* The smallest kept chunk of size to 2 x size bytes, taken off pool->kept
 * with its block put in a bin for carve; NULL when none fits. */
static struct rsd__pool_block *kept_take(struct rsd__pool *pool, uint64_t size)
{
	struct rsd__pool_chunk *c, *prev = NULL, *best = NULL, *best_prev = NULL;

	for (c = pool->kept; c; prev = c, c = c->knext) {
		if (c->size < size || c->size / 2 > size)
			continue;
		if (!best || c->size < best->size) {
			best = c;
			best_prev = prev;
		}
	}
	if (!best)
		return NULL;
	kept_remove(pool, best_prev, best);
	bin_insert(pool, best->first);
	pool->stats.kept_hits++;
	return best->first;
}

/* Take size bytes off the front of free block b; the rest stays free. */
static void carve(struct rsd__pool *pool, struct rsd__pool_block *b, uint64_t size, uint64_t nbytes)
{
	struct rsd__pool_chunk *c = b->chunk;

	bin_remove(pool, b);
	if (b->size > size) {
		struct rsd__pool_block *rest = node_get(pool);

		rest->chunk = c;
		rest->off = b->off + size;
		rest->size = b->size - size;
		rest->free = true;
		rest->prev = b;
		rest->next = b->next;
		if (b->next)
			b->next->prev = rest;
		b->next = rest;
		b->size = size;
		bin_insert(pool, rest);
	}
	b->free = false;
	b->requested = nbytes;
	if (c->live++ == 0 && !c->dedicated)
		pool->idle_chunks--;
	hash_insert(pool, b);
	pool->stats.nallocs++;
	pool->stats.allocated_bytes += nbytes;
	pool->stats.used_bytes += size;
}

void rsd__pool_init(struct rsd__pool *pool, const struct rsd__pool_ops *ops, void *ctx,
		    uint64_t chunk_size, uint64_t granule)
{
	uint64_t g = 16;

	memset(pool, 0, sizeof(*pool));
	while (g < granule && g < (1ull << 40))
		g <<= 1;
	pool->ops = ops;
	pool->ctx = ctx;
	pool->granule = g;
	pool->chunk_size = (chunk_size + g - 1) & ~(g - 1);
	pthread_mutex_init(&pool->lock, NULL);
}

void rsd__pool_destroy(struct rsd__pool *pool)
{
	struct rsd__pool_chunk *c, *cnext;
	struct rsd__pool_block *b, *bnext;

	for (c = pool->chunks; c; c = cnext) {
		cnext = c->next;
		for (b = c->first; b; b = bnext) {
			bnext = b->next;
			free(b);
		}
		pool->ops->chunk_free(pool->ctx, c->base, c->size);
		free(c);
	}
	for (b = pool->spare; b; b = bnext) {
		bnext = b->lnext;
		free(b);
	}
	free(pool->hash);
	pthread_mutex_destroy(&pool->lock);
	memset(pool, 0, sizeof(*pool));
}

int rsd__pool_alloc(struct rsd__pool *pool, uint64_t nbytes, void **ptr)
{
	uint64_t g = pool->granule, size;
	struct rsd__pool_block *b = NULL;
	int rc;

	if (nbytes > UINT64_MAX - g)
		return rsd__err(RSD_ENOMEM, "pool: a request of %" PRIu64 " bytes is too large",
				nbytes);
	size = ((nbytes ? nbytes : 1) + g - 1) & ~(g - 1);

	pthread_mutex_lock(&pool->lock);
	/* Everything that can fail for want of bookkeeping happens before the
	 * pool changes: a split needs one node, a new chunk another. */
	rc = hash_reserve(pool);
	if (!rc)
		rc = reserve_nodes(pool, 2);
	if (rc)
		goto out;
	if (pool->chunk_size && size <= pool->chunk_size) {
		b = find_free(pool, size);
		if (!b) {
			rc = chunk_new(pool, pool->chunk_size, false, &b);
			/* Memory the pool keeps idle may be what is missing. */
			if (rc == -RSD_ENOMEM && release_unused(pool))
				rc = chunk_new(pool, pool->chunk_size, false, &b);
			/* A chunk's worth may be more than the backing allows
			 * (RLIMIT_MEMLOCK, a nearly full device) while the
			 * request itself fits: give it a chunk of its own. */
			if (rc && size < pool->chunk_size)
				rc = chunk_new(pool, size, true, &b);
		}
	} else {
		b = kept_take(pool, size);
		if (b) {
			size = b->size; /* the whole kept chunk, never split */
		} else {
			rc = chunk_new(pool, size, true, &b);
			if (rc == -RSD_ENOMEM && release_unused(pool))
				rc = chunk_new(pool, size, true, &b);
		}
	}
	if (rc || !b)
		goto out;
	carve(pool, b, size, nbytes);
	*ptr = block_addr(b);
out:
	pthread_mutex_unlock(&pool->lock);
	return rc;
}

int rsd__pool_free(struct rsd__pool *pool, void *ptr)
{
	struct rsd__pool_chunk *c, *gone = NULL;
	struct rsd__pool_block *b, *n;

	pthread_mutex_lock(&pool->lock);
	b = hash_take(pool, ptr, true);
	if (!b) {
		pthread_mutex_unlock(&pool->lock);
		return -RSD_EINVAL;
	}
	c = b->chunk;
	pool->stats.nallocs--;
	pool->stats.allocated_bytes -= b->requested;
	pool->stats.used_bytes -= b->size;
	b->free = true;
	b->requested = 0;
	n = b->prev;
	if (n && n->free) {
		/* The predecessor absorbs b. */
		bin_remove(pool, n);
		n->size += b->size;
		n->next = b->next;
		if (b->next)
			b->next->prev = n;
		node_put(pool, b);
		b = n;
	}
	n = b->next;
	if (n && n->free) {
		bin_remove(pool, n);
		b->size += n->size;
		b->next = n->next;
		if (n->next)
			n->next->prev = b;
		node_put(pool, n);
	}
	if (--c->live == 0) {
		if (c->dedicated && c->size <= kept_bound(pool)) {
			/* Kept whole, out of the bins: only an oversize
			 * request may take it. */
			c->kept = true;
			c->knext = pool->kept;
			pool->kept = c;
			pool->stats.kept_bytes += c->size;
			kept_shrink(pool, kept_bound(pool), &gone);
			goto out;
		}
		if (c->dedicated || !idle_room(pool)) {
			chunk_detach(pool, c);
			c->knext = gone;
			gone = c;
			goto out;
		}
		pool->idle_chunks++;
	}
	bin_insert(pool, b);
out:
	pthread_mutex_unlock(&pool->lock);
	chunks_gone(pool, gone);
	return 0;
}

/* Detach idle standard chunks beyond the first until the extra ones fit
 * in the keep bound, onto *gone. */
static void idle_shrink(struct rsd__pool *pool, struct rsd__pool_chunk **gone)
{
	struct rsd__pool_chunk *c, *next;

	for (c = pool->chunks; c && idle_extra_bytes(pool) > pool->keep_bytes; c = next) {
		next = c->next;
		if (c->live || c->dedicated)
			continue;
		bin_remove(pool, c->first);
		pool->idle_chunks--;
		chunk_detach(pool, c);
		c->knext = *gone;
		*gone = c;
	}
}

void rsd__pool_set_keep(struct rsd__pool *pool, uint64_t keep_bytes)
{
	struct rsd__pool_chunk *gone = NULL;

	pthread_mutex_lock(&pool->lock);
	pool->keep_bytes = keep_bytes;
	idle_shrink(pool, &gone);
	kept_shrink(pool, kept_bound(pool), &gone);
	pthread_mutex_unlock(&pool->lock);
	chunks_gone(pool, gone);
}

bool rsd__pool_owns(struct rsd__pool *pool, const void *ptr)
{
	bool owns;

	pthread_mutex_lock(&pool->lock);
	owns = hash_take(pool, ptr, false) != NULL;
	pthread_mutex_unlock(&pool->lock);
	return owns;
}

unsigned rsd__pool_trim(struct rsd__pool *pool)
{
	unsigned n;

	pthread_mutex_lock(&pool->lock);
	n = release_unused(pool);
	pthread_mutex_unlock(&pool->lock);
	return n;
}

void rsd__pool_stats(struct rsd__pool *pool, struct rsd__pool_stats *out)
{
	pthread_mutex_lock(&pool->lock);
	*out = pool->stats;
	pthread_mutex_unlock(&pool->lock);
}
