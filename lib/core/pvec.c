// SPDX-License-Identifier: MIT
/*
 * A persistent 32-way radix vector: the published images share every node
 * that a publication did not touch. Setting slot i copies the nodes on the
 * root-to-leaf path of i, except nodes created by the current publication
 * (node->gen == gen), which no reader can see yet and are updated in place.
 * Replaced nodes are retired into the outgoing image and freed after a
 * grace period. Slots never set read as NULL, so the same structure serves
 * as a persistent sparse bitmap (words stored as pointer-sized integers).
 *
 * Appends copy nothing. A reader of an image never reads a slot at or past
 * that image's count, nor descends into a subtree whose first index is at
 * or past it. So setting a slot i >= count writes into the nodes on its
 * path as they are, frozen or not, and links new nodes only where their
 * whole range lies past count (a node covering count - 1 exists already,
 * being on that slot's path). Registering a value used to copy the whole
 * root-to-leaf path; now it writes one slot.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

void *rsd__pv_get(const struct rsd_pv *pv, uint64_t i)
{
	const struct rsd_pv_node *n = pv->root;

	if (i >= pv->count)
		return NULL;
	for (unsigned shift = pv->shift; shift && n; shift -= RSD_PV_BITS)
		n = n->slot[(i >> shift) & (RSD_PV_WIDTH - 1)];
	return n ? n->slot[i & (RSD_PV_WIDTH - 1)] : NULL; /* sparse: absent */
}

static struct rsd_pv_node *node_new(struct rsd_image *rt, uint64_t gen,
				    const struct rsd_pv_node *from)
{
	struct rsd_pv_node *n = rsd__slab_alloc(&rt->m->oc, sizeof(*n));

	if (!n)
		return NULL;
	if (from)
		memcpy(n->slot, from->slot, sizeof(n->slot));
	else
		memset(n->slot, 0, sizeof(n->slot));
	n->gen = gen;
	return n;
}

/* A node of this publication: copy it first if an image may share it. */
static struct rsd_pv_node *own(struct rsd_pv_node *n, uint64_t gen, struct rsd_image *rt)
{
	struct rsd_pv_node *c;

	if (n->gen == gen)
		return n;
	c = node_new(rt, gen, n);
	if (!c)
		return NULL;
	if (rsd__retire_obj(rt, n, sizeof(*n))) {
		rsd__slab_free(&rt->m->oc, c, sizeof(*c));
		return NULL;
	}
	return c;
}

/*
 * Set slot i >= count in place (the file comment says why no reader sees
 * it). The root exists and covers i. Only nodes created here are new; on a
 * failed publication rsd__pv_free_gen() unlinks them and clears the slots.
 * -RSD_ENOMEM, recorded by the caller.
 */
static int append(struct rsd_pv *pv, uint64_t i, void *val, uint64_t gen, struct rsd_image *rt)
{
	struct rsd_pv_node *n = pv->root;

	for (unsigned shift = pv->shift; shift; shift -= RSD_PV_BITS) {
		void **link = &n->slot[(i >> shift) & (RSD_PV_WIDTH - 1)];

		if (!*link) {
			*link = node_new(rt, gen, NULL);
			if (!*link)
				return -RSD_ENOMEM;
		}
		n = *link;
	}
	n->slot[i & (RSD_PV_WIDTH - 1)] = val;
	pv->count = i + 1;
	return 0;
}

int rsd__pv_set(struct rsd_pv *pv, uint64_t i, void *val, uint64_t gen, struct rsd_image *rt)
{
	struct rsd_pv_node *n, **link;
	unsigned shift;

	if (!pv->root) {
		pv->root = node_new(rt, gen, NULL);
		if (!pv->root)
			goto nomem;
		pv->shift = 0;
	}
	/* Grow levels until i fits under the root (a sparse vector may jump
	 * several at once). */
	while (i >> pv->shift >= RSD_PV_WIDTH) {
		struct rsd_pv_node *top = node_new(rt, gen, NULL);

		if (!top)
			goto nomem;
		top->slot[0] = pv->root;
		pv->root = top;
		pv->shift += RSD_PV_BITS;
	}
	if (i >= pv->count) {
		if (append(pv, i, val, gen, rt))
			goto nomem;
		return 0;
	}
	n = own(pv->root, gen, rt);
	if (!n)
		goto nomem;
	pv->root = n;
	for (shift = pv->shift; shift; shift -= RSD_PV_BITS) {
		link = (struct rsd_pv_node **)&n->slot[(i >> shift) & (RSD_PV_WIDTH - 1)];
		n = *link ? own(*link, gen, rt) : node_new(rt, gen, NULL);
		if (!n)
			goto nomem;
		*link = n;
	}
	n->slot[i & (RSD_PV_WIDTH - 1)] = val;
	if (i >= pv->count)
		pv->count = i + 1;
	return 0;
nomem:
	return rsd__err(RSD_ENOMEM, "out of memory publishing value %llu", (unsigned long long)i);
}

static void free_level(struct rsd_pv_node *n, unsigned shift, struct rsd__slab *oc,
		       void (*fn)(struct rsd__slab *oc, void *val))
{
	if (!n)
		return;
	for (unsigned i = 0; i < RSD_PV_WIDTH; i++) {
		if (!n->slot[i])
			continue;
		if (shift)
			free_level(n->slot[i], shift - RSD_PV_BITS, oc, fn);
		else if (fn)
			fn(oc, n->slot[i]);
	}
	rsd__slab_free(oc, n, sizeof(*n));
}

/*
 * Undo generation gen under n, whose first index is base: free its nodes,
 * and in older nodes clear what appends wrote in place (slots and links at
 * indices >= from, the published count). An older node is otherwise never
 * written, so an older subtree wholly below from is left alone.
 */
static void free_gen(struct rsd_pv_node *n, unsigned shift, struct rsd__slab *oc, uint64_t base,
		     uint64_t from, uint64_t gen,
		     void (*fn)(struct rsd__slab *oc, void *val, uint64_t gen))
{
	bool mine = n->gen == gen;

	for (unsigned i = 0; i < RSD_PV_WIDTH; i++) {
		uint64_t lo = base + ((uint64_t)i << shift);
		struct rsd_pv_node *c = n->slot[i];

		if (!c)
			continue;
		if (!shift) {
			if (mine || lo >= from) {
				if (fn)
					fn(oc, n->slot[i], gen);
				if (!mine)
					n->slot[i] = NULL;
			}
			continue;
		}
		if (c->gen == gen) {
			free_gen(c, shift - RSD_PV_BITS, oc, lo, from, gen, fn);
			if (!mine)
				n->slot[i] = NULL;
		} else if (lo + (1ull << shift) > from) {
			free_gen(c, shift - RSD_PV_BITS, oc, lo, from, gen, fn);
		}
	}
	if (mine)
		rsd__slab_free(oc, n, sizeof(*n));
}

void rsd__pv_free_gen(struct rsd_pv *pv, struct rsd__slab *oc, uint64_t from, uint64_t gen,
		      void (*fn)(struct rsd__slab *oc, void *val, uint64_t gen))
{
	if (pv->root)
		free_gen(pv->root, pv->shift, oc, 0, from, gen, fn);
}

void rsd__pv_free_nodes(struct rsd_pv *pv, struct rsd__slab *oc,
			void (*fn)(struct rsd__slab *oc, void *val))
{
	free_level(pv->root, pv->shift, oc, fn);
	pv->root = NULL;
	pv->count = 0;
}
