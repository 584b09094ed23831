// SPDX-License-Identifier: MIT
/*
 * Protection deltas: the fast publication of lease and hold changes.
 *
 * Acquiring or releasing a lease and taking or releasing a hold change
 * nothing but use and hold counts (and state_version). Publishing them like
 * any other change would re-image every covered value, copy the vector path
 * to each, and rebuild the location table: several allocations per call on
 * the hottest path there is. Instead the next root carries, inline, the
 * count changes made since the last full publication; readers add them to
 * the base images (rsd__img_mat_prot, rsd__img_loc_prot). The delta is
 * short by construction (RSD_PROT_DELTA_MAX entries, and an acquire that
 * is released again leaves no entry behind); when it would overflow, or
 * anything else is unpublished, the change takes the ordinary path and the
 * next full publication folds the delta into new value images.
 *
 * Locking: writers run with m->lock held; readers hold rcu_read_lock and
 * see a root's delta only together with the base it applies to.
 */
#include <string.h>

#include "core.h"

static uint32_t prot_find(const struct rsd_img_prot *p, uint32_t n, uint64_t index, uint32_t slot)
{
	uint32_t i;

	for (i = 0; i < n && (p[i].index != index || p[i].slot != slot); i++)
		;
	return i;
}

/* Publish the image before this call plus the change; -1 if it does not fit. */
static int publish_delta(struct rsd_manager *m, uint32_t slot, struct rsd_record *const *recs,
			 size_t n, int use, int hold)
{
	struct rsd_image *old = m->img, *img;
	struct rsd_img_prot p[RSD_PROT_DELTA_MAX];
	uint32_t np = old->nprot;

	memcpy(p, old->prot, np * sizeof(p[0]));
	for (size_t i = 0; i < n; i++) {
		uint32_t k = prot_find(p, np, recs[i]->index, slot);

		if (k == np) {
			if (np == RSD_PROT_DELTA_MAX)
				return -1;
			p[np++] = (struct rsd_img_prot){ recs[i]->index, slot, 0, 0 };
		}
		p[k].use += use;
		p[k].hold += hold;
		/* Balanced again: the base image is exact for this one. */
		if (!p[k].use && !p[k].hold)
			p[k] = p[--np];
	}
	img = rsd__root_alloc(m);
	if (!img)
		return -1;
	img->m = m;
	img->state_version = m->version;
	img->closed = m->closed;
	img->nprot = np;
	memcpy(img->prot, p, np * sizeof(p[0]));
	img->values = old->values;
	img->nlocs = old->nlocs;
	img->locs = old->locs;
	img->nresv = old->nresv;
	img->resv = old->resv;
	img->npending = old->npending;
	img->pending = old->pending;
	img->batch_next = NULL;
	img->reclaim_soon = false;
	img->retired = NULL;
	img->nretired = img->capretired = 0;
	rsd__image_replace(m, old, img);
	return 0;
}

void rsd__commit_prot(struct rsd_manager *m, struct rsd_location at,
		      struct rsd_record *const *recs, size_t n, int use, int hold)
{
	unsigned slot = rsd__loc_slot(at);
	struct rsd_acct *a = &m->acct[slot];
	/* A delta is relative to the published image: only when that image
	 * is the whole truth before this change may the change ride on it. */
	bool fast = !rsd__unpublished(m);

	for (size_t i = 0; i < n; i++) {
		struct rsd_mat *mat = rsd__rec_mat(recs[i], at);

		/* Protected materializations cannot go away; this is the
		 * close path's caution only. */
		if (!mat) {
			fast = false;
			continue;
		}
		mat->use_count += use;
		mat->hold_count += hold;
		a->use_count += use;
		a->hold_count += hold;
	}
	m->version++;
	if (fast && !publish_delta(m, slot, recs, n, use, hold))
		return;
	for (size_t i = 0; i < n; i++)
		rsd__mark_dirty(m, recs[i]);
	m->locs_dirty = true;
}

void rsd__prot_fold(struct rsd_manager *m, const struct rsd_image *img)
{
	for (uint32_t i = 0; i < img->nprot; i++)
		/* A closing manager has dropped its records already. */
		if (img->prot[i].index < m->nrecs)
			rsd__mark_dirty(m, m->recs[img->prot[i].index]);
	if (img->nprot)
		m->locs_dirty = true;
}

static void prot_add(struct rsd_prot_counts *c, const struct rsd_img_prot *p)
{
	/* The sums are the writer's true counts: never below zero. */
	c->use = (uint64_t)((int64_t)c->use + p->use);
	c->hold = (uint64_t)((int64_t)c->hold + p->hold);
}

struct rsd_prot_counts rsd__img_mat_prot(const struct rsd_image *img,
					 const struct rsd_img_value *iv, uint32_t k)
{
	const struct rsd_img_mat *im = &iv->mats[k];
	struct rsd_prot_counts c = { im->use_count, im->hold_count, im->pending_count };
	uint32_t slot;

	if (rsd__likely(!img->nprot))
		return c;
	slot = rsd__loc_slot(im->loc);
	for (uint32_t i = 0; i < img->nprot; i++)
		if (img->prot[i].index == iv->index && img->prot[i].slot == slot)
			prot_add(&c, &img->prot[i]);
	return c;
}

struct rsd_prot_counts rsd__img_loc_prot(const struct rsd_image *img, const struct rsd_img_loc *l)
{
	struct rsd_prot_counts c = { l->acct.use_count, l->acct.hold_count, l->acct.pending_count };
	unsigned slot = rsd__loc_slot(l->loc);

	for (uint32_t i = 0; i < img->nprot; i++)
		if (img->prot[i].slot == slot)
			prot_add(&c, &img->prot[i]);
	return c;
}
