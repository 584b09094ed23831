// SPDX-License-Identifier: MIT
/*
 * The search memo: sets of byte-string keys (serialized SIG(S) plus the
 * objective's parameters). Two planning states have equal signatures
 * exactly when their serialized keys are equal, because deltas are kept
 * normalized and sorted (pstate.h). Open addressing, linear probing; the
 * keys are never removed, so they live in an arena (no malloc per key, one
 * free per chunk at the end).
 */
#include <stdlib.h>
#include <string.h>

#include "memo.h"

uint64_t rsd__memo_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		p += 8;
		len -= 8;
	}
	while (len--) {
		h = (h ^ *p++) * 0xc4ceb9fe1a85ec53ull;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* Key chunks: about a thousand keys of a typical search each. */
#define KEY_CHUNK ((size_t)128 << 10)

void rsd__memo_init(struct rsd__memo *m, struct rsd__mem_cache *mc)
{
	m->tab = NULL;
	m->cap = 0;
	m->tabbytes = 0;
	m->n = 0;
	m->mc = mc;
	rsd__arena_init(&m->keys, KEY_CHUNK, mc);
}

void rsd__memo_fini(struct rsd__memo *m)
{
	rsd__mem_put(m->mc, m->tab, m->tabbytes);
	rsd__arena_fini(&m->keys);
	rsd__memo_init(m, m->mc);
}

bool rsd__memo_has(const struct rsd__memo *m, const void *key, size_t len, uint64_t h)
{
	if (!m->n)
		return false;
	for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		const struct memo_slot *sl = &m->tab[i];

		if (!sl->k)
			return false;
		if (sl->hash == h && sl->k->len == len && !memcmp(sl->k->bytes, key, len))
			return true;
	}
}

bool rsd__memo_has_hash(const struct rsd__memo *m, uint64_t h)
{
	if (!m->n)
		return false;
	for (size_t i = h & (m->cap - 1); m->tab[i].k; i = (i + 1) & (m->cap - 1))
		if (m->tab[i].hash == h)
			return true;
	return false;
}

static void place(struct memo_slot *tab, size_t cap, uint64_t h, struct memo_key *k)
{
	size_t i = h & (cap - 1);

	while (tab[i].k)
		i = (i + 1) & (cap - 1);
	tab[i].hash = h;
	tab[i].k = k;
}

int rsd__memo_add(struct rsd__memo *m, const void *key, size_t len, uint64_t h)
{
	struct memo_key *k;

	if (rsd__memo_has(m, key, len, h))
		return 0;
	if (2 * (m->n + 1) > m->cap) {
		/* x4: a large memo is rehashed (and its new table faulted in)
		 * a third as often as by doubling */
		size_t cap = m->cap ? 4 * m->cap : 64, got;
		struct memo_slot *tab = rsd__mem_get(m->mc, cap * sizeof(*tab), &got);

		if (!tab)
			return -RSD_ENOMEM; /* recorded by the cache */
		memset(tab, 0, cap * sizeof(*tab));
		for (size_t i = 0; i < m->cap; i++)
			if (m->tab[i].k)
				place(tab, cap, m->tab[i].hash, m->tab[i].k);
		rsd__mem_put(m->mc, m->tab, m->tabbytes);
		m->tab = tab;
		m->tabbytes = got;
		m->cap = cap;
	}
	k = rsd__arena_alloc(&m->keys, sizeof(*k) + len);
	if (!k)
		return -RSD_ENOMEM; /* recorded by the arena */
	k->len = len;
	memcpy(k->bytes, key, len);
	place(m->tab, m->cap, h, k);
	m->n++;
	return 0;
}
