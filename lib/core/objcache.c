// SPDX-License-Identifier: MIT
/* The publication object cache (objcache.h says why and who may call what). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../internal.h"
#include "objcache.h"

#define CHUNK_FIRST (64u << 10)
#define CHUNK_HUGE (2u << 20) /* a transparent huge page */

struct rsd_objcache_chunk {
	struct rsd_objcache_chunk *next;
	size_t nbytes;
};

/* Class k holds objects of (k + 1) * GRAIN bytes. */
static inline size_t class_of(size_t n)
{
	return n ? (n - 1) / RSD_OBJCACHE_GRAIN : 0;
}

static inline size_t class_bytes(size_t k)
{
	return (k + 1) * RSD_OBJCACHE_GRAIN;
}

/* A new chunk to carve from; false when memory is out. */
static bool chunk_add(struct rsd_objcache *c)
{
	size_t nbytes = c->next_chunk ? c->next_chunk : CHUNK_FIRST;
	size_t align = nbytes >= CHUNK_HUGE ? CHUNK_HUGE : 64;
	struct rsd_objcache_chunk *ch;
	void *p;

	if (posix_memalign(&p, align, nbytes))
		return false;
	/* Best effort: where THP is off or unsupported this changes nothing. */
	if (nbytes >= CHUNK_HUGE)
		(void)madvise(p, nbytes, MADV_HUGEPAGE);
	ch = p;
	ch->next = c->chunks;
	ch->nbytes = nbytes;
	c->chunks = ch;
	c->bump = (char *)p +
		  ((sizeof(*ch) + RSD_OBJCACHE_GRAIN - 1) & ~(size_t)(RSD_OBJCACHE_GRAIN - 1));
	c->end = (char *)p + nbytes;
	if (nbytes < CHUNK_HUGE)
		c->next_chunk = nbytes * 2;
	else
		c->next_chunk = CHUNK_HUGE;
	return true;
}

/* Move what other threads gave back onto the free lists. */
static void collect_remote(struct rsd_objcache *c)
{
	void *p = atomic_exchange_explicit(&c->remote, NULL, memory_order_acquire);

	while (p) {
		void **w = p;
		void *next = w[0];
		size_t k = (size_t)(uintptr_t)w[1];

		w[0] = c->head[k];
		c->head[k] = p;
		p = next;
	}
}

void *rsd__objcache_alloc_at(const char *site, struct rsd_objcache *c, size_t n)
{
	size_t k = class_of(n);
	void *p;

	if (rsd__fault(RSD__FAULT_ALLOC, site))
		return NULL;
	if (RSD_OBJCACHE_PASSTHROUGH || k >= RSD_OBJCACHE_NCLASS)
		return malloc(n);
	p = c->head[k];
	if (rsd__unlikely(!p) && atomic_load_explicit(&c->remote, memory_order_relaxed)) {
		collect_remote(c);
		p = c->head[k];
	}
	if (p) {
		c->head[k] = *(void **)p;
		return p;
	}
	if ((size_t)(c->end - c->bump) < class_bytes(k)) {
		/* The rest of the old chunk stays unused: at most 1 KiB. */
		if (!chunk_add(c))
			return NULL;
	}
	p = c->bump;
	c->bump += class_bytes(k);
	return p;
}

void rsd__objcache_free(struct rsd_objcache *c, void *p, size_t n)
{
	size_t k = class_of(n);

	if (!p)
		return;
	if (RSD_OBJCACHE_PASSTHROUGH || k >= RSD_OBJCACHE_NCLASS) {
		free(p);
		return;
	}
	*(void **)p = c->head[k];
	c->head[k] = p;
}

void rsd__objcache_free_remote(struct rsd_objcache *c, void *p, size_t n)
{
	size_t k = class_of(n);
	void **w = p;
	void *head;

	if (!p)
		return;
	if (RSD_OBJCACHE_PASSTHROUGH || k >= RSD_OBJCACHE_NCLASS) {
		free(p);
		return;
	}
	/* Every class holds two words at least. */
	w[1] = (void *)(uintptr_t)k;
	head = atomic_load_explicit(&c->remote, memory_order_relaxed);
	do
		w[0] = head;
	while (!atomic_compare_exchange_weak_explicit(&c->remote, &head, p, memory_order_release,
						      memory_order_relaxed));
}

void rsd__objcache_drain(struct rsd_objcache *c)
{
	while (c->chunks) {
		struct rsd_objcache_chunk *ch = c->chunks;

		c->chunks = ch->next;
		free(ch);
	}
	memset(c, 0, sizeof(*c));
}
