/* SPDX-License-Identifier: MIT */
/* The controller search memo: a set of byte-string keys (memo.c). */
#ifndef RSD_CTRL_MEMO_H
#define RSD_CTRL_MEMO_H

#include "../internal.h"

struct memo_key;

struct rsd__memo {
	struct memo_key **tab; /* cap is 0 or a power of two */
	size_t cap, n;
};

void rsd__memo_init(struct rsd__memo *m);
void rsd__memo_fini(struct rsd__memo *m);
bool rsd__memo_has(const struct rsd__memo *m, const void *key, size_t len);
/* Records -RSD_ENOMEM on failure. */
int rsd__memo_add(struct rsd__memo *m, const void *key, size_t len);

#endif
