// SPDX-License-Identifier: MIT
/*
 * The shipped policies' order, computed once per search and location.
 *
 * The tiered LRU and the next-use policy sort candidates by a comparison
 * that ends in the registration index: a strict total order on candidate
 * records. Within one search every record of a value at a location is the
 * same (its charge, epoch, metadata and next use do not change while the
 * controller's lock is held), so the order of any set of candidates is
 * the order of their positions in the sorted list of all candidates of
 * the image at that location. RANK of a state then sorts positions instead
 * of asking the policy again, with the same result (reference.md §13.3);
 * a policy of the caller's is always asked (it may count its calls).
 * Candidates projected by planning are not in the image's list: a state
 * with one takes the policy's path (search.c).
 */
#include <stdlib.h>
#include <string.h>

#include "pstate.h"
#include "search.h"

/* Registration-ordered base list of slot: the index of v, or -1. */
static long base_index(const struct search *x, unsigned slot, uint32_t v)
{
	const uint32_t *b = x->base_cands[slot];
	size_t lo = 0, hi = x->nbase_cands[slot];

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b[mid] == v)
			return (long)mid;
		if (b[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* x->base_pos[slot][i]: the position of base_cands[slot][i] in the order. */
static int base_positions(struct search *x, unsigned slot)
{
	uint32_t nb = x->nbase_cands[slot], *pos;
	struct rsd_eviction_candidate *c;
	int err;

	if (x->base_pos[slot])
		return 0;
	pos = rsd__malloc((nb ? nb : 1) * sizeof(*pos));
	c = rsd__malloc((nb ? nb : 1) * sizeof(*c));
	if (!pos || !c) {
		free(pos);
		free(c);
		return x->err = rsd__err(RSD_ENOMEM, "out of memory ranking candidates");
	}
	for (uint32_t i = 0; i < nb; i++)
		rsd__candidate(x, x->base_cands[slot][i], slot, &c[i]);
	err = rsd__cand_sort(c, nb, x->cmp);
	if (err) {
		free(pos);
		free(c);
		return x->err = err;
	}
	for (uint32_t p = 0; p < nb; p++) {
		long i = base_index(x, slot, (uint32_t)c[p].registration_index);

		if (i >= 0) /* the sort permutes the list it was given */
			pos[i] = p;
	}
	free(c);
	x->base_pos[slot] = pos;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t p = *(const uint64_t *)a, q = *(const uint64_t *)b;

	return p < q ? -1 : p > q;
}

/* Sort v[0..n) (values of base candidates of slot) into the order. */
static void order_run(struct search *x, unsigned slot, uint32_t *v, uint32_t n, uint64_t *key)
{
	for (uint32_t k = 0; k < n; k++) {
		long i = base_index(x, slot, v[k]);
		/* every value here is a base candidate (rsd__search_rank) */
		uint64_t p = i < 0 ? UINT32_MAX : x->base_pos[slot][i];

		key[k] = p << 32 | v[k];
	}
	qsort(key, n, sizeof(*key), cmp_u64);
	for (uint32_t k = 0; k < n; k++)
		v[k] = (uint32_t)key[k];
}

int rsd__order_cached(struct search *x, unsigned slot, uint32_t nord, uint32_t n, struct ranked *r)
{
	uint64_t *key;

	if (base_positions(x, slot))
		return x->err;
	key = rsd__malloc((n ? n : 1) * sizeof(*key));
	if (!key)
		return x->err = rsd__err(RSD_ENOMEM, "out of memory ranking candidates");
	order_run(x, slot, x->cvidx, nord, key);
	order_run(x, slot, x->cvidx + nord, n - nord, key);
	free(key);
	for (uint32_t k = 0; k < n; k++) {
		r[k].vidx = x->cvidx[k];
		r[k].charged = rsd__search_charge(x, x->cvidx[k]);
	}
	return 0;
}
