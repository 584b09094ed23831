// SPDX-License-Identifier: MIT
/*
 * Published tables of lifetime objects (the reservation and pending-lease
 * tables of an image): a persistent vector whose slots hold the objects in
 * the order they joined, NULL where one left. image.c edits a table at a
 * publication the way it edits the value vector, clearing or appending
 * the slots of what changed since the last one, and rebuilds it without
 * its holes when they would outnumber its objects; readers walk it with
 * rsd__ptab_next().
 *
 * Why not an array rebuilt at each change: with tens of thousands of live
 * reservations or pending leases, each publication copied them all, and
 * making or releasing N of them cost O(N^2).
 */
#include <stdlib.h>

#include "core.h"

/* Holes a table may hold beyond its live objects before a rebuild: a
 * small table is never rebuilt for a few releases. */
#define RSD_PTAB_SLACK 32u

bool rsd__ptab_sparse(uint64_t count, uint64_t live)
{
	return count - live > live + RSD_PTAB_SLACK;
}

/*
 * Walk down to each leaf once instead of looking every slot up from the
 * root; a missing subtree (never possible below count, but cheap to
 * check) is skipped whole.
 */
void *rsd__ptab_next(const struct rsd_ptab *t, uint64_t *i)
{
	const struct rsd_pv *pv = &t->pv;

	while (*i < pv->count) {
		const struct rsd_pv_node *n = pv->root;
		unsigned shift;

		for (shift = pv->shift; shift && n; shift -= RSD_PV_BITS)
			n = n->slot[(*i >> shift) & (RSD_PV_WIDTH - 1)];
		if (!n) {
			/* Past the subtree that is missing at level shift. */
			uint64_t span = 1ull << (shift + RSD_PV_BITS);

			*i = (*i / span + 1) * span;
			continue;
		}
		do {
			void *obj = n->slot[*i & (RSD_PV_WIDTH - 1)];

			(*i)++;
			if (obj)
				return obj;
		} while (*i < pv->count && *i & (RSD_PV_WIDTH - 1));
	}
	return NULL;
}

/* A whole table waiting for its grace period: its nodes, not its objects. */
struct retired_tree {
	struct rsd_pv_node *root;
	unsigned shift;
};

static void free_level(struct rsd_manager *m, struct rsd_pv_node *n, unsigned shift)
{
	for (unsigned i = 0; shift && i < RSD_PV_WIDTH; i++)
		if (n->slot[i])
			free_level(m, n->slot[i], shift - RSD_PV_BITS);
	/* From the reclaimer or the writer alike. */
	rsd__slab_free_remote(&m->oc, n, sizeof(*n));
}

static void free_tree(struct rsd_manager *m, void *p)
{
	struct retired_tree *t = p;

	free_level(m, t->root, t->shift);
	free(t);
}

/*
 * One retirement for the whole tree, not one per node: a reap that empties
 * a table of 64,000 leases retires 2,000 nodes, and growing the retire
 * array for them was most of what the reap cost beyond its leases.
 */
int rsd__ptab_retire_nodes(const struct rsd_ptab *t, struct rsd_image *rt)
{
	struct retired_tree *r;

	if (!t->pv.root)
		return 0;
	r = rsd__malloc(sizeof(*r));
	if (!r)
		return rsd__err(RSD_ENOMEM, "out of memory retiring a published table");
	r->root = t->pv.root;
	r->shift = t->pv.shift;
	if (rsd__retire(rt, free_tree, r)) {
		free(r);
		return -RSD_ENOMEM;
	}
	return 0;
}

void rsd__ptab_retire_undo(struct rsd_image *rt, size_t from)
{
	for (size_t i = from; i < rt->nretired; i++)
		if (rt->retired[i].fn == free_tree)
			free(rt->retired[i].p); /* the record; the tree stays published */
}
