/* SPDX-License-Identifier: MIT */
/* The controller search memo: a set of byte-string keys (memo.c). */
#ifndef RSD_CTRL_MEMO_H
#define RSD_CTRL_MEMO_H

#include "../internal.h"

struct memo_key;

/* A slot keeps its key's hash beside the pointer: a probe reads no key. */
struct memo_slot {
	uint64_t hash;
	struct memo_key *k; /* NULL: empty */
};

struct rsd__memo {
	struct memo_slot *tab; /* cap is 0 or a power of two */
	size_t cap, n;
};

void rsd__memo_init(struct rsd__memo *m);
void rsd__memo_fini(struct rsd__memo *m);
/* The hash that rsd__memo_has() and rsd__memo_add() take with a key. */
uint64_t rsd__memo_hash(const void *key, size_t len);
bool rsd__memo_has(const struct rsd__memo *m, const void *key, size_t len, uint64_t hash);
/* Whether some key with this hash is in the set (then compare the key). */
bool rsd__memo_has_hash(const struct rsd__memo *m, uint64_t hash);
/* Records -RSD_ENOMEM on failure. */
int rsd__memo_add(struct rsd__memo *m, const void *key, size_t len, uint64_t hash);

#endif
