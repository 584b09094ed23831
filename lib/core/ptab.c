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

static int retire_level(struct rsd_pv_node *n, unsigned shift, struct rsd_image *rt)
{
	int err = 0;

	if (!n)
		return 0;
	for (unsigned i = 0; shift && i < RSD_PV_WIDTH && !err; i++)
		err = retire_level(n->slot[i], shift - RSD_PV_BITS, rt);
	return err ? err : rsd__retire_obj(rt, n, sizeof(*n));
}

int rsd__ptab_retire_nodes(const struct rsd_ptab *t, struct rsd_image *rt)
{
	return retire_level(t->pv.root, t->pv.shift, rt);
}
