// SPDX-License-Identifier: MIT
/* The publication object cache (objcache.h says why it exists). */
#include <stdlib.h>

#include "../internal.h"
#include "objcache.h"

/* Class k holds objects of (k + 1) * GRAIN bytes; larger ones bypass it. */
static inline size_t class_of(size_t n)
{
	return n ? (n - 1) / RSD_OBJCACHE_GRAIN : 0;
}

void *rsd__objcache_alloc_at(const char *site, struct rsd_objcache *c, size_t n)
{
	size_t k = class_of(n);
	void *p;

	if (rsd__fault(RSD__FAULT_ALLOC, site))
		return NULL;
	if (k >= RSD_OBJCACHE_NCLASS)
		return malloc(n);
	p = c->head[k];
	if (p) {
		c->head[k] = *(void **)p;
		c->bytes -= (k + 1) * RSD_OBJCACHE_GRAIN;
		return p;
	}
	/* The class's full size: a later object of the class may reuse it. */
	return malloc((k + 1) * RSD_OBJCACHE_GRAIN);
}

void rsd__objcache_free(struct rsd_objcache *c, void *p, size_t n)
{
	size_t k = class_of(n), sz = (k + 1) * RSD_OBJCACHE_GRAIN;

	if (!p)
		return;
	if (!c || k >= RSD_OBJCACHE_NCLASS || c->bytes + sz > RSD_OBJCACHE_MAX_BYTES) {
		free(p);
		return;
	}
	*(void **)p = c->head[k];
	c->head[k] = p;
	c->bytes += sz;
}

void rsd__objcache_drain(struct rsd_objcache *c)
{
	for (size_t k = 0; k < RSD_OBJCACHE_NCLASS; k++) {
		while (c->head[k]) {
			void *p = c->head[k];

			c->head[k] = *(void **)p;
			free(p);
		}
	}
	c->bytes = 0;
}
