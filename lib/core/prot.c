// SPDX-License-Identifier: MIT
/*
 * The protection log: the fast publication of lease and hold changes.
 *
 * Acquiring or releasing a lease and taking or releasing a hold change
 * nothing but use and hold counts and state_version. Publishing them like
 * any other change would re-image every covered value, copy the vector path
 * to each and rebuild the location table: several allocations and a grace
 * period per call on the hottest path there is. Instead the writer appends
 * the change to the published image's own log and then advances the log's
 * length with release semantics; a reader reads the length once
 * (rsd__view_init) and adds the entries below it to the base counts. Nothing
 * is allocated and no image is replaced. When the log is full, or anything
 * else is unpublished, the change takes the ordinary path and the next full
 * publication folds the log into new value images.
 *
 * Locking: the writer appends with m->lock held, and only to the current
 * image; entries below nlog are never written again, so readers need only
 * rcu_read_lock and one acquire load.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* The version an image publishes with its first n log entries. */
static uint64_t log_version(const struct rsd_image *img, const struct rsd_img_prot *log, unsigned n)
{
	return n ? log[n - 1].version : img->state_version;
}

uint64_t rsd__img_version(const struct rsd_image *img)
{
	unsigned n = atomic_load_explicit(&img->nlog, memory_order_acquire);

	return log_version(img, atomic_load_explicit(&img->log, memory_order_relaxed), n);
}

static uint32_t net_find(const struct rsd_img_prot *net, uint32_t n, uint64_t index, uint32_t slot)
{
	uint32_t k;

	for (k = 0; k < n && (net[k].index != index || net[k].slot != slot); k++)
		;
	return k;
}

/* Add one entry to a net table (of at most RSD_PROT_NET_MAX entries). */
static void net_add(struct rsd_img_prot *net, uint32_t *n, const struct rsd_img_prot *e)
{
	uint32_t k = net_find(net, *n, e->index, e->slot);

	if (k == *n)
		net[(*n)++] = (struct rsd_img_prot){ e->index, 0, e->slot, 0, 0 };
	net[k].use += e->use;
	net[k].hold += e->hold;
	/* An acquire released again leaves nothing to look up. */
	if (!net[k].use && !net[k].hold)
		net[k] = net[--*n];
}

/*
 * The published image's log, ready for n more entries: NULL when they do
 * not fit, or would leave readers more net changes than a view holds.
 */
static struct rsd_img_prot *log_room(struct rsd_manager *m, uint32_t slot,
				     struct rsd_record *const *recs, size_t n)
{
	struct rsd_image *img = m->img;
	struct rsd_img_prot *log = atomic_load_explicit(&img->log, memory_order_relaxed);
	unsigned len = atomic_load_explicit(&img->nlog, memory_order_relaxed), fresh = 0;

	if (n > RSD_PROT_LOG_MAX - len)
		return NULL;
	for (size_t i = 0; i < n; i++)
		fresh += net_find(m->lognet, m->nlognet, recs[i]->index, slot) == m->nlognet;
	if (fresh > RSD_PROT_NET_MAX - m->nlognet)
		return NULL;
	if (!log) {
		log = rsd__malloc(RSD_PROT_LOG_MAX * sizeof(*log));
		if (!log)
			return NULL;
		/* Readers look at it only once nlog covers an entry. */
		atomic_store_explicit(&img->log, log, memory_order_release);
	}
	return log;
}

void rsd__commit_prot(struct rsd_manager *m, struct rsd_location at, struct rsd_record *const *recs,
		      size_t n, int use, int hold, int pending)
{
	unsigned slot = rsd__loc_slot(at);
	struct rsd_acct *a = &m->acct[slot];
	struct rsd_image *img = m->img;
	/* The log extends the published image: only when that image is the
	 * whole truth before this change may the change ride on it. Pending
	 * counts are not logged: they change with the pending-lease table,
	 * which only a full publication carries. */
	struct rsd_img_prot *log = rsd__unpublished(m) || pending ? NULL :
								    log_room(m, slot, recs, n);
	unsigned len = atomic_load_explicit(&img->nlog, memory_order_relaxed);

	for (size_t i = 0; i < n; i++) {
		struct rsd_mat *mat = rsd__rec_mat(recs[i], at);

		/* Protected materializations cannot go away; this is the
		 * close path's caution only. */
		if (!mat) {
			log = NULL;
			continue;
		}
		mat->use_count += use;
		mat->hold_count += hold;
		mat->pending_count += pending;
		a->use_count += use;
		a->hold_count += hold;
		a->pending_count += pending;
		/* The last protection of a failed copy's destination ends:
		 * it goes now, which the log cannot carry. */
		if (rsd__unlikely(rsd__mat_failed(mat)) && rsd__failed_settle(m, recs[i], at))
			log = NULL;
	}
	m->version++;
	if (log) {
		for (size_t i = 0; i < n; i++) {
			log[len + i] = (struct rsd_img_prot){ recs[i]->index, m->version, slot, use,
							      hold };
			net_add(m->lognet, &m->nlognet, &log[len + i]);
		}
		atomic_store_explicit(&img->nlog, len + (unsigned)n, memory_order_release);
		return;
	}
	for (size_t i = 0; i < n; i++)
		rsd__mark_dirty(m, recs[i]);
	m->locs_dirty = true;
}

void rsd__prot_fold(struct rsd_manager *m, const struct rsd_image *img)
{
	unsigned n = atomic_load_explicit(&img->nlog, memory_order_relaxed);
	const struct rsd_img_prot *log = atomic_load_explicit(&img->log, memory_order_relaxed);

	for (unsigned i = 0; i < n; i++)
		/* A closing manager has dropped its records already. */
		if (log[i].index < m->nrecs)
			rsd__mark_dirty(m, m->recs[log[i].index]);
	if (n)
		m->locs_dirty = true;
}

void rsd__view_init(struct rsd_view *v, const struct rsd_image *img)
{
	unsigned n = atomic_load_explicit(&img->nlog, memory_order_acquire);
	const struct rsd_img_prot *log = n ? atomic_load_explicit(&img->log, memory_order_acquire) :
					     NULL;

	v->img = img;
	v->version = log_version(img, log, n);
	v->nnet = 0;
	/* The writer kept every published prefix within RSD_PROT_NET_MAX. */
	for (unsigned i = 0; i < n; i++)
		net_add(v->net, &v->nnet, &log[i]);
}

static void prot_add(struct rsd_prot_counts *c, const struct rsd_img_prot *p)
{
	/* The sums are the writer's true counts: never below zero. */
	c->use = (uint64_t)((int64_t)c->use + p->use);
	c->hold = (uint64_t)((int64_t)c->hold + p->hold);
}

struct rsd_prot_counts rsd__view_mat_prot(const struct rsd_view *v, const struct rsd_img_value *iv,
					  uint32_t k)
{
	const struct rsd_img_mat *im = &iv->mats[k];
	struct rsd_prot_counts c = { im->use_count, im->hold_count, im->pending_count };
	uint32_t slot;

	if (rsd__likely(!v->nnet))
		return c;
	slot = rsd__loc_slot(im->loc);
	for (uint32_t i = 0; i < v->nnet; i++)
		if (v->net[i].index == iv->index && v->net[i].slot == slot)
			prot_add(&c, &v->net[i]);
	return c;
}

struct rsd_prot_counts rsd__view_loc_prot(const struct rsd_view *v, const struct rsd_img_loc *l)
{
	struct rsd_prot_counts c = { l->acct.use_count, l->acct.hold_count, l->acct.pending_count };
	unsigned slot = rsd__loc_slot(l->loc);

	for (uint32_t i = 0; i < v->nnet; i++)
		if (v->net[i].slot == slot)
			prot_add(&c, &v->net[i]);
	return c;
}
