// SPDX-License-Identifier: MIT
/* The small-object slab (slab.h says why and who may call what). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../internal.h"
#include "slab.h"

#define CHUNK_FIRST ((size_t)64 << 10)
#define CHUNK_HUGE ((size_t)2 << 20) /* a transparent huge page */

struct rsd__slab_chunk {
	struct rsd__slab_chunk *next;
	size_t nbytes;
};

_Static_assert(RSD__SLAB_MAX_OBJECT + sizeof(struct rsd__slab_chunk) <= CHUNK_FIRST,
	       "the first chunk holds the largest object");

/* Classes below NSMALL hold (k + 1) * GRAIN bytes, the others powers of
 * two from 2 KiB. */
static inline size_t class_of(size_t n)
{
	size_t k = RSD__SLAB_NSMALL, b = (size_t)RSD__SLAB_GRAIN * RSD__SLAB_NSMALL * 2;

	if (n <= (size_t)RSD__SLAB_GRAIN * RSD__SLAB_NSMALL)
		return n ? (n - 1) / RSD__SLAB_GRAIN : 0;
	while (b < n && k < RSD__SLAB_NCLASS) {
		b *= 2;
		k++;
	}
	return k; /* RSD__SLAB_NCLASS: none, a malloc block */
}

static inline size_t class_bytes(size_t k)
{
	if (k < RSD__SLAB_NSMALL)
		return (k + 1) * RSD__SLAB_GRAIN;
	return ((size_t)RSD__SLAB_GRAIN * RSD__SLAB_NSMALL) << (k - RSD__SLAB_NSMALL + 1);
}

size_t rsd__slab_size(size_t n)
{
	size_t k = class_of(n);

	return k < RSD__SLAB_NCLASS ? class_bytes(k) : n;
}

void rsd__slab_init(struct rsd__slab *s, const struct rsd__slab_source *src)
{
	memset(s, 0, sizeof(*s));
	s->src = src;
}

/* A block for a chunk of about nbytes, its size in *got. */
static void *chunk_get(struct rsd__slab *s, size_t nbytes, size_t *got)
{
	void *p;

	if (s->src)
		return s->src->get(s->src->ctx, nbytes, got);
	if (posix_memalign(&p, nbytes >= CHUNK_HUGE ? CHUNK_HUGE : 64, nbytes))
		return NULL;
	/* Best effort: where THP is off or unsupported this changes nothing. */
	if (nbytes >= CHUNK_HUGE)
		(void)madvise(p, nbytes, MADV_HUGEPAGE);
	*got = nbytes;
	return p;
}

/* A new chunk to carve from; false when memory is out. */
static bool chunk_add(struct rsd__slab *s)
{
	size_t nbytes = s->next_chunk ? s->next_chunk : CHUNK_FIRST;
	struct rsd__slab_chunk *ch;
	size_t got;

	ch = chunk_get(s, nbytes, &got);
	if (!ch)
		return false;
	ch->next = s->chunks;
	ch->nbytes = got;
	s->chunks = ch;
	s->bump =
		(char *)ch + ((sizeof(*ch) + RSD__SLAB_GRAIN - 1) & ~(size_t)(RSD__SLAB_GRAIN - 1));
	s->end = (char *)ch + got;
	s->next_chunk = nbytes < CHUNK_HUGE ? nbytes * 2 : CHUNK_HUGE;
	return true;
}

/* Move what other threads gave back onto the free lists. */
static void collect_remote(struct rsd__slab *s)
{
	void *p = atomic_exchange_explicit(&s->remote, NULL, memory_order_acquire);

	while (p) {
		void **w = p;
		void *next = w[0];
		size_t k = (size_t)(uintptr_t)w[1];

		w[0] = s->head[k];
		s->head[k] = p;
		p = next;
	}
}

void *rsd__slab_alloc_at(const char *site, struct rsd__slab *s, size_t n)
{
	size_t k = class_of(n);
	void *p;

	if (rsd__fault(RSD__FAULT_ALLOC, site))
		return NULL;
	if (RSD__SLAB_PASSTHROUGH || k >= RSD__SLAB_NCLASS)
		return malloc(n ? n : 1);
	p = s->head[k];
	if (rsd__unlikely(!p) && atomic_load_explicit(&s->remote, memory_order_relaxed)) {
		collect_remote(s);
		p = s->head[k];
	}
	if (p) {
		s->head[k] = *(void **)p;
		return p;
	}
	if ((size_t)(s->end - s->bump) < class_bytes(k)) {
		/* The rest of the old chunk stays unused: less than the
		 * largest class. */
		if (!chunk_add(s))
			return NULL;
	}
	p = s->bump;
	s->bump += class_bytes(k);
	return p;
}

void rsd__slab_free(struct rsd__slab *s, void *p, size_t n)
{
	size_t k = class_of(n);

	if (!p)
		return;
	if (RSD__SLAB_PASSTHROUGH || k >= RSD__SLAB_NCLASS) {
		free(p);
		return;
	}
	*(void **)p = s->head[k];
	s->head[k] = p;
}

void rsd__slab_free_remote(struct rsd__slab *s, void *p, size_t n)
{
	size_t k = class_of(n);
	void **w = p;
	void *head;

	if (!p)
		return;
	if (RSD__SLAB_PASSTHROUGH || k >= RSD__SLAB_NCLASS) {
		free(p);
		return;
	}
	/* Every class holds two words at least. */
	w[1] = (void *)(uintptr_t)k;
	head = atomic_load_explicit(&s->remote, memory_order_relaxed);
	do
		w[0] = head;
	while (!atomic_compare_exchange_weak_explicit(&s->remote, &head, p, memory_order_release,
						      memory_order_relaxed));
}

void rsd__slab_fini(struct rsd__slab *s)
{
	const struct rsd__slab_source *src = s->src;

	while (s->chunks) {
		struct rsd__slab_chunk *ch = s->chunks;

		s->chunks = ch->next;
		if (src)
			src->put(src->ctx, ch, ch->nbytes);
		else
			free(ch);
	}
	rsd__slab_init(s, src);
}
