/* SPDX-License-Identifier: MIT */
/* The controller search memo: a set of byte-string keys (memo.c). */
#ifndef RSD_CTRL_MEMO_H
#define RSD_CTRL_MEMO_H

#include "arena.h"

struct memo_key {
	size_t len;
	unsigned char bytes[];
};

/* A slot keeps its key's hash beside the pointer: a probe reads no key. */
struct memo_slot {
	uint64_t hash;
	struct memo_key *k; /* NULL: empty */
};

struct rsd__memo {
	struct memo_slot *tab; /* cap is 0 or a power of two */
	size_t cap, n;
	size_t tabbytes;	   /* the size of tab's block */
	struct rsd__arena keys;	   /* every key, kept until rsd__memo_fini() */
	struct rsd__mem_cache *mc; /* the table's and the keys' memory, or NULL */
};

void rsd__memo_init(struct rsd__memo *m, struct rsd__mem_cache *mc);
void rsd__memo_fini(struct rsd__memo *m);
/* The hash that rsd__memo_has() and rsd__memo_add() take with a key. */
uint64_t rsd__memo_hash(const void *key, size_t len);
bool rsd__memo_has(const struct rsd__memo *m, const void *key, size_t len, uint64_t hash);
/* Whether some key with this hash is in the set (then compare the key). */
bool rsd__memo_has_hash(const struct rsd__memo *m, uint64_t hash);

/*
 * Whether the set holds a key of this hash that eq(ctx, key, len) accepts:
 * a key compared where it lies, for a caller that never writes it out.
 * Inline, so that a constant eq is inlined into the probe.
 */
static inline bool rsd__memo_find(const struct rsd__memo *m, uint64_t h,
				  bool (*eq)(const void *ctx, const unsigned char *key, size_t len),
				  const void *ctx)
{
	if (!m->n)
		return false;
	for (size_t i = h & (m->cap - 1); m->tab[i].k; i = (i + 1) & (m->cap - 1))
		if (m->tab[i].hash == h && eq(ctx, m->tab[i].k->bytes, m->tab[i].k->len))
			return true;
	return false;
}

/* Start loading the slot where a probe for hash begins. */
static inline void rsd__memo_prefetch_slot(const struct rsd__memo *m, uint64_t h)
{
	if (m->cap)
		__builtin_prefetch(&m->tab[h & (m->cap - 1)]);
}

/* Start loading the first key of this hash (its slot should be cached). */
static inline void rsd__memo_prefetch_key(const struct rsd__memo *m, uint64_t h)
{
	if (!m->n)
		return;
	for (size_t i = h & (m->cap - 1); m->tab[i].k; i = (i + 1) & (m->cap - 1)) {
		if (m->tab[i].hash == h) {
			__builtin_prefetch(m->tab[i].k);
			__builtin_prefetch((const char *)m->tab[i].k + 64);
			return;
		}
	}
}

/* Records -RSD_ENOMEM on failure. */
int rsd__memo_add(struct rsd__memo *m, const void *key, size_t len, uint64_t hash);

#endif
