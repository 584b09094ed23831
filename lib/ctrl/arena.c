// SPDX-License-Identifier: MIT
/* Memory caches and arenas of controller searches (see arena.h). */
#include <stdlib.h>
#include <sys/mman.h>

#include "arena.h"

#define ARENA_ALIGN 8u
#define MEM_HUGE ((size_t)2 << 20) /* a transparent huge page */

/* A block kept by a memory cache; its first bytes while it is kept. */
struct rsd__mem_block {
	struct rsd__mem_block *next;
	size_t size;
};

void rsd__mem_cache_init(struct rsd__mem_cache *mc, size_t cap)
{
	mc->free = NULL;
	mc->bytes = 0;
	mc->cap = RSD__ARENA_PASSTHROUGH ? 0 : cap;
}

void rsd__mem_cache_fini(struct rsd__mem_cache *mc)
{
	while (mc->free) {
		struct rsd__mem_block *b = mc->free;

		mc->free = b->next;
		free(b);
	}
	mc->bytes = 0;
}

/*
 * A new block. One of 2 MiB or more is 2 MiB aligned and advised as
 * transparent huge pages: a large search faults once per 2 MiB, not once
 * per 4 KiB (each fault costs microseconds on the virtual machines we
 * measure on; where THP is off this changes nothing).
 */
static void *mem_alloc(size_t n)
{
	void *p;

	if (n < MEM_HUGE || RSD__ARENA_PASSTHROUGH)
		return rsd__malloc(n);
	if (rsd__fault(RSD__FAULT_ALLOC, RSD__SITE) || posix_memalign(&p, MEM_HUGE, n))
		return NULL;
	(void)madvise(p, n, MADV_HUGEPAGE);
	return p;
}

void *rsd__mem_get(struct rsd__mem_cache *mc, size_t n, size_t *got)
{
	void *p;

	if (n < sizeof(struct rsd__mem_block))
		n = sizeof(struct rsd__mem_block);
	for (struct rsd__mem_block **pp = mc ? &mc->free : NULL; pp && *pp; pp = &(*pp)->next) {
		struct rsd__mem_block *b = *pp;

		/* not much larger: a big block stays for a big request */
		if (b->size >= n && b->size / 2 <= n) {
			*pp = b->next;
			mc->bytes -= b->size;
			*got = b->size;
			return b;
		}
	}
	p = mem_alloc(n);
	if (!p) {
		rsd__err(RSD_ENOMEM, "out of memory: search block of %zu bytes", n);
		return NULL;
	}
	*got = n;
	return p;
}

void rsd__mem_put(struct rsd__mem_cache *mc, void *p, size_t size)
{
	struct rsd__mem_block *b = p;

	if (!p)
		return;
	if (!mc || size > mc->cap - mc->bytes) {
		free(p);
		return;
	}
	b->size = size;
	b->next = mc->free;
	mc->free = b;
	mc->bytes += size;
}

static void *mem_source_get(void *mc, size_t n, size_t *got)
{
	return rsd__mem_get(mc, n, got);
}

static void mem_source_put(void *mc, void *p, size_t size)
{
	rsd__mem_put(mc, p, size);
}

void rsd__mem_source(struct rsd__mem_cache *mc, struct rsd__slab_source *src)
{
	src->get = mem_source_get;
	src->put = mem_source_put;
	src->ctx = mc;
}

struct rsd__arena_chunk {
	struct rsd__arena_chunk *next;
	size_t size, used;
	/* keeps data aligned whatever the three fields above take */
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

void rsd__arena_init(struct rsd__arena *a, size_t chunk_size, struct rsd__mem_cache *mc)
{
	a->head = NULL;
	a->cur = NULL;
	/* passthrough: every allocation is a chunk of its own (arena.h) */
	a->chunk_size = RSD__ARENA_PASSTHROUGH ? 0 : chunk_size;
	a->mc = mc;
}

void rsd__arena_fini(struct rsd__arena *a)
{
	struct rsd__arena_chunk *c = a->head;

	while (c) {
		struct rsd__arena_chunk *next = c->next;

		rsd__mem_put(a->mc, c, sizeof(*c) + c->size);
		c = next;
	}
	a->head = NULL;
	a->cur = NULL;
}

/*
 * A new empty chunk for at least n bytes, linked right after a->cur. Chunks
 * double from chunk_size up to a huge page (data and header together), so
 * a small search takes little and a large one a huge page at a time.
 */
static struct rsd__arena_chunk *chunk_new(struct rsd__arena *a, size_t n)
{
	size_t size = n > a->chunk_size ? n : a->chunk_size, got;
	struct rsd__arena_chunk *c;

	if (size > SIZE_MAX - sizeof(*c)) {
		rsd__err(RSD_ENOMEM, "out of memory: search arena chunk of %zu bytes", size);
		return NULL;
	}
	c = rsd__mem_get(a->mc, sizeof(*c) + size, &got);
	if (!c)
		return NULL;
	c->size = got - sizeof(*c);
	c->used = 0;
	if (a->cur) {
		c->next = a->cur->next;
		a->cur->next = c;
	} else {
		c->next = a->head;
		a->head = c;
	}
	if (a->chunk_size) {
		size_t next = 2 * a->chunk_size;

		a->chunk_size = next > MEM_HUGE - sizeof(*c) ? MEM_HUGE - sizeof(*c) : next;
	}
	return c;
}

void *rsd__arena_alloc(struct rsd__arena *a, size_t n)
{
	struct rsd__arena_chunk *c = a->cur;
	void *p;

	if (n > SIZE_MAX - ARENA_ALIGN) {
		rsd__err(RSD_ENOMEM, "out of memory: search arena request of %zu bytes", n);
		return NULL;
	}
	n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (!c || c->size - c->used < n) {
		/* The chunks after cur are free: reuse the next one if it fits. */
		c = a->cur ? a->cur->next : a->head;
		if (c && c->size >= n)
			c->used = 0;
		else if (!(c = chunk_new(a, n)))
			return NULL;
		a->cur = c;
	}
	p = c->data + c->used;
	c->used += n;
	return p;
}

struct rsd__arena_mark rsd__arena_mark(const struct rsd__arena *a)
{
	struct rsd__arena_mark m = { a->cur, a->cur ? a->cur->used : 0 };

	return m;
}

void rsd__arena_release(struct rsd__arena *a, struct rsd__arena_mark m)
{
	if (RSD__ARENA_PASSTHROUGH) {
		struct rsd__arena_chunk **tail = m.chunk ? &m.chunk->next : &a->head;

		/* free what was allocated after the mark, so that it is caught
		 * if used */
		while (*tail) {
			struct rsd__arena_chunk *c = *tail;

			*tail = c->next;
			rsd__mem_put(a->mc, c, sizeof(*c) + c->size);
		}
	}
	if (m.chunk) {
		a->cur = m.chunk;
		m.chunk->used = m.used;
	} else {
		/* marked before the first chunk: everything is free again */
		a->cur = NULL;
	}
}
