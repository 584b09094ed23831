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
 * the image at that location. RANK of a state then walks that list once
 * per part (ordinary, required) and takes the state's candidates as it
 * meets them, instead of asking the policy again, with the same result
 * (reference.md §13.3); a walk stops when its part is complete;
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

/*
 * x->base_order[slot]: the indices of base_cands[slot] in the policy's
 * order; x->base_req[slot][i]: whether base candidate i is a required
 * endpoint at slot. x->cmark grows to the list's length.
 */
static int base_order(struct search *x, unsigned slot)
{
	uint32_t nb = x->nbase_cands[slot], *order;
	struct rsd_eviction_candidate *c;
	uint8_t *req;
	int err;

	if (x->base_order[slot])
		return 0;
	if (nb > x->cmarkcap) {
		uint8_t *m = rsd__calloc(nb, 1);
		uint32_t *p = rsd__malloc(nb * sizeof(*p));

		if (!m || !p) {
			free(m);
			free(p);
			return x->err = rsd__err(RSD_ENOMEM, "out of memory ranking candidates");
		}
		free(x->cmark);
		free(x->bpos);
		x->cmark = m;
		x->bpos = p;
		x->cmarkcap = nb;
	}
	order = rsd__calloc(nb ? nb : 1, sizeof(*order));
	req = rsd__calloc(nb ? nb : 1, 1);
	c = rsd__malloc((nb ? nb : 1) * sizeof(*c));
	if (!order || !req || !c) {
		err = rsd__err(RSD_ENOMEM, "out of memory ranking candidates");
		goto fail;
	}
	for (uint32_t i = 0; i < nb; i++) {
		rsd__candidate(x, x->base_cands[slot][i], slot, &c[i]);
		req[i] = rsd__search_required(x, x->base_cands[slot][i], slot);
	}
	err = rsd__cand_sort(c, nb, x->cmp);
	if (err)
		goto fail;
	for (uint32_t p = 0; p < nb; p++) {
		/* the sort permutes the list it was given: every index is found */
		long i = base_index(x, slot, (uint32_t)c[p].registration_index);

		order[p] = i < 0 ? 0 : (uint32_t)i;
	}
	free(c);
	x->base_order[slot] = order;
	x->base_req[slot] = req;
	return 0;
fail:
	free(order);
	free(req);
	free(c);
	return x->err = err;
}

int rsd__order_cached(struct search *x, unsigned slot, uint32_t n, struct ranked *r)
{
	const uint32_t *order, *base = x->base_cands[slot];
	const uint8_t *req;
	uint32_t nb, nreq = 0, k = 0;
	uint8_t *mark;

	if (base_order(x, slot))
		return x->err;
	nb = x->nbase_cands[slot];
	order = x->base_order[slot];
	req = x->base_req[slot];
	mark = x->cmark;
	for (uint32_t j = 0; j < n; j++) {
		mark[x->cbi[j]] = 1;
		x->bpos[x->cbi[j]] = x->cpos[j];
		nreq += req[x->cbi[j]];
	}
	/*
	 * One walk of the order per part, ordinary candidates (first n - nreq
	 * of the result) then required endpoints; each walk stops once its
	 * part is complete and unmarks what it takes.
	 */
	for (uint8_t part = 0; part < 2; part++) {
		uint32_t end = part ? n : n - nreq;

		for (uint32_t p = 0; k < end && p < nb; p++) {
			uint32_t i = order[p];

			if (mark[i] && req[i] == part) {
				mark[i] = 0;
				r[k].vidx = base[i];
				r[k].charged = x->base_charge[slot][i];
				r[k].dpos = x->bpos[i] >> 1;
				r[k].found = x->bpos[i] & 1;
				r[k].bcode = x->base_code[slot][i];
				k++;
			}
		}
	}
	return 0;
}
