// SPDX-License-Identifier: MIT
/*
 * A map from pointers to indices: open addressing, linear probing, at most
 * half full, deletion by shifting the probe run back (no tombstones), so
 * that a lookup reads a few adjacent slots whatever came and went.
 *
 * It replaces linear searches of pointer arrays that grow with what the
 * caller adds: the consumer streams of one lease, the streams with
 * released lease events (lease.c). Not thread-safe: its owner's lock
 * protects it.
 */
#include <stdlib.h>
#include <string.h>

#include "../internal.h"

static size_t home(const struct rsd__ptrmap *pm, const void *key)
{
	uint64_t h = (uint64_t)(uintptr_t)key;

	/* Pointers are aligned and clustered: mix every bit into the top. */
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (size_t)h & (pm->cap - 1);
}

static struct rsd__ptrmap_slot *find(const struct rsd__ptrmap *pm, const void *key)
{
	if (!pm->n)
		return NULL;
	for (size_t i = home(pm, key);; i = (i + 1) & (pm->cap - 1)) {
		if (pm->slot[i].key == key)
			return &pm->slot[i];
		if (!pm->slot[i].key)
			return NULL;
	}
}

bool rsd__ptrmap_get(const struct rsd__ptrmap *pm, const void *key, size_t *val)
{
	const struct rsd__ptrmap_slot *s = find(pm, key);

	if (s && val)
		*val = s->val;
	return s != NULL;
}

static void put(struct rsd__ptrmap *pm, const void *key, size_t val)
{
	size_t i = home(pm, key);

	while (pm->slot[i].key)
		i = (i + 1) & (pm->cap - 1);
	pm->slot[i].key = key;
	pm->slot[i].val = val;
	pm->n++;
}

int rsd__ptrmap_set(struct rsd__ptrmap *pm, const void *key, size_t val)
{
	struct rsd__ptrmap_slot *s = find(pm, key);

	if (s) {
		s->val = val;
		return 0;
	}
	if (2 * (pm->n + 1) > pm->cap) {
		struct rsd__ptrmap old = *pm;
		size_t cap = pm->cap ? 2 * pm->cap : 16;

		pm->slot = rsd__calloc(cap, sizeof(*pm->slot));
		if (!pm->slot) {
			*pm = old;
			return -RSD_ENOMEM;
		}
		pm->cap = cap;
		pm->n = 0;
		for (size_t i = 0; i < old.cap; i++)
			if (old.slot[i].key)
				put(pm, old.slot[i].key, old.slot[i].val);
		free(old.slot);
	}
	put(pm, key, val);
	return 0;
}

void rsd__ptrmap_del(struct rsd__ptrmap *pm, const void *key)
{
	struct rsd__ptrmap_slot *s = find(pm, key);
	size_t hole, i;

	if (!s)
		return;
	hole = (size_t)(s - pm->slot);
	pm->slot[hole].key = NULL;
	pm->n--;
	/* Move back every later entry of the run whose home the hole does
	 * not lie past (cyclically), so that no probe stops early. */
	for (i = (hole + 1) & (pm->cap - 1); pm->slot[i].key; i = (i + 1) & (pm->cap - 1)) {
		size_t h = home(pm, pm->slot[i].key);

		if (((i - h) & (pm->cap - 1)) >= ((i - hole) & (pm->cap - 1))) {
			pm->slot[hole] = pm->slot[i];
			pm->slot[i].key = NULL;
			hole = i;
		}
	}
}

void rsd__ptrmap_clear(struct rsd__ptrmap *pm)
{
	if (pm->n)
		memset(pm->slot, 0, pm->cap * sizeof(*pm->slot));
	pm->n = 0;
}

void rsd__ptrmap_free(struct rsd__ptrmap *pm)
{
	free(pm->slot);
	memset(pm, 0, sizeof(*pm));
}
