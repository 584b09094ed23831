// SPDX-License-Identifier: MIT
/*
 * The controller search's memo keys (reference.md §13.4): SIG(S) plus the
 * objective's parameters, and the question "did this drop's successor
 * fail before?" answered without building the successor.
 */
#include <stddef.h>
#include <string.h>

#include "memo.h"
#include "pstate.h"
#include "search.h"

/* Room for n more key bytes; the key so far is kept. */
static int key_reserve(struct search *x, size_t n)
{
	if (x->keylen + n > x->keycap) {
		size_t cap = 2 * (x->keylen + n) + 64;
		unsigned char *k = rsd__realloc(x->key, cap);

		if (!k)
			return x->err = rsd__err(RSD_ENOMEM, "out of memory building a search key");
		x->key = k;
		x->keycap = cap;
	}
	return 0;
}

static int key_put(struct search *x, const void *p, size_t n)
{
	if (key_reserve(x, n))
		return x->err;
	memcpy(x->key + x->keylen, p, n);
	x->keylen += n;
	return 0;
}

/* Append a field of a reserved key (no capacity check). */
#define KEY_PUT(q, v) (memcpy((q), &(v), sizeof(v)), (q) += sizeof(v))

/* A key's first word: the tag and both array lengths. */
static uint64_t key_head(char tag, uint32_t ndelta, uint32_t nacct)
{
	return (uint64_t)(unsigned char)tag | (uint64_t)ndelta << 8 | (uint64_t)nacct << 40;
}

/*
 * SIG(S): the planned locations of every value, then (name, used, reserved)
 * of every location in the maps, both in canonical order. Values are
 * serialized as their normalized delta from the image, which is equal
 * for two states of one search exactly when their location sets are
 * (a set is named by its code, pstate.h); a location as its used bytes
 * and its slot, its reserved bytes being the same in every state of the
 * search (struct rsd__ps_bytes). The key is the words
 *
 *	key_head(tag, ndelta, nacct), delta[ndelta], (used, slot)[nacct]
 *
 * written in one pass into a key reserved once (nacct < 2^24: a location
 * appears once).
 */
#define ACCT_KEY_BYTES (2 * sizeof(uint64_t)) /* used, then slot and pad */

/* Append a delta entry at *ctx (a write position in the key). */
static bool put_delta(void *ctx, const struct rsd__vdelta *e)
{
	unsigned char **q = ctx;

	memcpy(*q, e, sizeof(*e));
	*q += sizeof(*e);
	return true;
}

static int key_serialize(struct search *x, char tag, const struct rsd__pstate *S)
{
	size_t nd = S->ndelta * sizeof(struct rsd__vdelta), na = (size_t)S->nacct * ACCT_KEY_BYTES;
	uint64_t head = key_head(tag, S->ndelta, S->nacct);
	unsigned char *q;

	_Static_assert(sizeof(struct rsd__vdelta) == 8 &&
			       offsetof(struct rsd__ps_bytes, slot) == 8 &&
			       offsetof(struct rsd__ps_bytes, pad) == 12,
		       "keys are whole words without padding bytes");
	x->keylen = 0;
	if (key_reserve(x, sizeof(head) + nd + na))
		return x->err;
	q = x->key;
	KEY_PUT(q, head);
	rsd__ps_walk(S, put_delta, &q);
	for (uint32_t i = 0; i < S->nacct; i++, q += ACCT_KEY_BYTES)
		memcpy(q, &S->acct[i], ACCT_KEY_BYTES);
	x->keylen = (size_t)(q - x->key);
	return 0;
}

/* A request state's successor as described, for succ_eq(). */
struct succ_key {
	const struct rsd__pstate *S;
	const struct rsd__ps_succ *t;
};

/*
 * A comparison of S's delta, with v's entry replaced, inserted or removed
 * as the successor t has it, against a key's delta words at k.
 */
struct succ_cmp {
	const unsigned char *k;
	const struct rsd__ps_succ *t;
	bool placed; /* t's entry for v was compared (or has none) */
};

static bool succ_cmp_ent(struct succ_cmp *c, const struct rsd__vdelta *e)
{
	if (memcmp(c->k, e, sizeof(*e)) != 0)
		return false;
	c->k += sizeof(*e);
	return true;
}

static bool succ_cmp_one(void *ctx, const struct rsd__vdelta *e)
{
	struct succ_cmp *c = ctx;

	if (!c->placed && e->vidx >= c->t->ent.vidx) {
		c->placed = true;
		if (c->t->keep && !succ_cmp_ent(c, &c->t->ent))
			return false;
		if (e->vidx == c->t->ent.vidx)
			return true; /* replaced or removed */
	}
	return succ_cmp_ent(c, e);
}

/*
 * Is key the request key of the successor? Compared where the key lies,
 * as key_serialize() would have written the successor: S's delta in order
 * with v's entry replaced, inserted or removed, S's accounting with one
 * used word changed.
 */
static bool succ_eq(const void *ctx, const unsigned char *k, size_t len)
{
	const struct rsd__pstate *S = ((const struct succ_key *)ctx)->S;
	const struct rsd__ps_succ *t = ((const struct succ_key *)ctx)->t;
	uint64_t head = key_head('R', t->ndelta, S->nacct);
	struct succ_cmp c = { k + sizeof(head), t, false };

	if (len != sizeof(head) + t->ndelta * sizeof(struct rsd__vdelta) +
			    (size_t)S->nacct * ACCT_KEY_BYTES ||
	    memcmp(k, &head, sizeof(head)) != 0 || !rsd__ps_walk(S, succ_cmp_one, &c))
		return false;
	if (!c.placed && t->keep && !succ_cmp_ent(&c, &t->ent))
		return false;
	k = c.k;
	for (uint32_t i = 0; i < S->nacct; i++, k += ACCT_KEY_BYTES) {
		uint64_t used = i == t->apos ? t->used : S->acct[i].used;

		if (memcmp(k, &used, sizeof(used)) != 0 ||
		    memcmp(k + sizeof(used), &S->acct[i].slot, sizeof(uint64_t)) != 0)
			return false;
	}
	return true;
}

/* The hash of a request key from its state's running hash (a function of
 * SIG(S), pstate.h) and sizes. */
static uint64_t request_hash(char tag, uint64_t hash, uint32_t ndelta, uint32_t nacct)
{
	return rsd__mix64(hash ^ key_head(tag, ndelta, nacct));
}

/*
 * The request key of S: its hash at once, its bytes when rsd__key_build()
 * asks.
 */
int rsd__search_key_sig(struct search *x, char tag, const struct rsd__pstate *S)
{
	x->keyhash = request_hash(tag, S->hash, S->ndelta, S->nacct);
	x->keyS = S;
	x->key_built = false;
	return 0;
}

int rsd__key_build(struct search *x)
{
	if (x->key_built)
		return 0;
	if (key_serialize(x, 'R', x->keyS))
		return x->err;
	x->key_built = true;
	return 0;
}

int rsd__search_drop_view(struct search *x, const struct rsd__pstate *S, const struct ranked *c,
			  unsigned src, const struct rsd__ps_used_edit *u, struct drop_view *dv)
{
	/* c may come from an ancestor's list: find its entry in S. */
	const struct rsd__vdelta *old = rsd__ps_find(S, c->vidx);
	uint32_t L = old ? old->ls : c->bcode, code = 0;
	struct rsd__locset after, base;
	bool keep, coded = !((L | c->bcode) & RSD__LS_TABLE) && src < 31;

	dv->state = DV_NONE;
	if (coded) {
		/* both sets are their own codes: work on the bitmaps */
		code = L & ~(1u << src);
		dv->others = code != 0;
		keep = code != c->bcode;
	} else {
		after = rsd__ps_locs_of(&x->sp, c->vidx, old);
		base = rsd__ps_base_locs(&x->sp, c->vidx);
		ls_del(&after, src);
		dv->others = !ls_empty(&after);
		keep = !ls_eq(&after, &base);
	}
	if (!u || (!dv->others && !rsd__iv(x->img, c->vidx)->has_source))
		return 0; /* not described, or no drop option */
	if (keep && !coded) {
		long k = rsd__ps_code(&x->sp, &after);

		if (k < 0)
			return x->err = (int)k;
		code = (uint32_t)k;
	}
	rsd__ps_describe(S, c->vidx, old, keep, code, u, &dv->s);
	dv->keyhash = request_hash('R', dv->s.hash, dv->s.ndelta, S->nacct);
	dv->state = DV_DROP;
	rsd__memo_prefetch_slot(&x->failed_req, dv->keyhash);
	return 0;
}

void rsd__search_drop_prefetch(const struct search *x, const struct drop_view *dv)
{
	if (dv->state == DV_DROP)
		rsd__memo_prefetch_key(&x->failed_req, dv->keyhash);
}

bool rsd__search_drop_failed(const struct search *x, const struct rsd__pstate *S,
			     const struct drop_view *dv)
{
	struct succ_key sk = { S, &dv->s };

	return rsd__memo_find(&x->failed_req, dv->keyhash, succ_eq, &sk);
}

int rsd__search_key_capacity(struct search *x, const struct rsd__pstate *S, unsigned X,
			     uint64_t amount, const struct active *act)
{
	uint32_t pairs[2 * 64], *p = pairs, n = 0, cap = 64;
	uint32_t slot = X;
	int err;

	if (key_serialize(x, 'C', S) || key_put(x, &slot, sizeof(slot)) ||
	    key_put(x, &amount, sizeof(amount)))
		return x->err;
	/* active pairs (and so blocked handles), sorted by registration index */
	for (const struct active *a = act; a; a = a->prev) {
		size_t k;

		if (n == cap) {
			uint32_t *np = rsd__malloc(4 * (size_t)cap * sizeof(*np));

			if (!np)
				return x->err = rsd__err(RSD_ENOMEM,
							 "out of memory building a search key");
			memcpy(np, p, 2 * (size_t)n * sizeof(*np));
			if (p != pairs)
				free(p);
			p = np;
			cap *= 2;
		}
		for (k = n; k && p[2 * (k - 1)] > a->vidx; k--) {
			p[2 * k] = p[2 * (k - 1)];
			p[2 * k + 1] = p[2 * (k - 1) + 1];
		}
		p[2 * k] = a->vidx;
		p[2 * k + 1] = a->slot;
		n++;
	}
	err = key_put(x, &n, sizeof(n)) || key_put(x, p, 2 * (size_t)n * sizeof(*p));
	if (p != pairs)
		free(p);
	if (err)
		return x->err;
	x->keyhash = rsd__memo_hash(x->key, x->keylen);
	x->key_built = true;
	return 0;
}
