// SPDX-License-Identifier: MIT
/*
 * Publication of the writer state as immutable images, and the lock-free
 * readers of those images (state_version, locations, snapshot).
 *
 * Locking: rsd__publish() runs with m->lock held (writer path only). Readers
 * hold only rcu_read_lock() between rsd__read_begin() and rsd__read_end();
 * an image and everything it references stays valid for that whole span.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "rcu_annot.h"
#include "../trace.h"

#if RSD_TSAN
char rsd__rcu_gp_clock;
#endif

static pthread_key_t rcu_key;
static pthread_once_t rcu_key_once = PTHREAD_ONCE_INIT;
static _Thread_local bool rcu_registered;

static void rcu_thread_exit(void *unused)
{
	(void)unused;
	urcu_memb_unregister_thread();
}

static void rcu_key_make(void)
{
	pthread_key_create(&rcu_key, rcu_thread_exit);
}

/*
 * liburcu's memb flavor needs each reader thread registered. Do it for the
 * application, lazily, and undo it when the thread exits: callers need to
 * know nothing about RCU.
 */
void rsd__rcu_register(void)
{
	if (rsd__likely(rcu_registered))
		return;
	pthread_once(&rcu_key_once, rcu_key_make);
	urcu_memb_register_thread();
	pthread_setspecific(rcu_key, (void *)1);
	rcu_registered = true;
}

const struct rsd_image *rsd__read_begin(struct rsd_manager *m)
{
	rsd__rcu_register();
	rsd__rcu_read_lock();
	return rsd__rcu_deref(m->img);
}

void rsd__read_end(void)
{
	rsd__rcu_read_unlock();
}

static int retire_entry(struct rsd_image *img, void (*fn)(struct rsd_manager *m, void *p), void *p,
			size_t nbytes)
{
	if (!img->retired) {
		img->retired = img->inline_retired;
		img->capretired = RSD_ARRAY_SIZE(img->inline_retired);
	}
	if (img->nretired == img->capretired) {
		size_t cap = img->capretired * 2;
		struct rsd_retired *r;

		r = img->retired == img->inline_retired ?
			    rsd__malloc(cap * sizeof(*r)) :
			    rsd__realloc(img->retired, cap * sizeof(*r));
		if (!r)
			return rsd__err(RSD_ENOMEM, "out of memory retiring published state");
		if (img->retired == img->inline_retired)
			memcpy(r, img->inline_retired, sizeof(img->inline_retired));
		img->retired = r;
		img->capretired = cap;
	}
	if (fn && fn != rsd__retire_free)
		img->reclaim_soon = true;
	img->retired[img->nretired].fn = fn;
	img->retired[img->nretired].p = p;
	img->retired[img->nretired].nbytes = nbytes;
	img->nretired++;
	return 0;
}

int rsd__retire(struct rsd_image *img, void (*fn)(struct rsd_manager *m, void *p), void *p)
{
	return retire_entry(img, fn, p, 0);
}

int rsd__retire_obj(struct rsd_image *img, void *p, size_t nbytes)
{
	return retire_entry(img, NULL, p, nbytes);
}

void rsd__retire_free(struct rsd_manager *m, void *p)
{
	(void)m;
	free(p);
}

/* A new root sharing everything with old, with no log and nothing retired. */
static struct rsd_image *root_next(struct rsd_manager *m, const struct rsd_image *old)
{
	/* Not zeroed: the inline retire array and the log are used only up
	 * to their counts, and every other field is set below. */
	struct rsd_image *img = rsd__slab_alloc(&m->oc, sizeof(*img));

	if (!img)
		return NULL;
	img->m = m;
	img->state_version = old->state_version;
	img->closed = m->closed;
	atomic_init(&img->nlog, 0);
	atomic_init(&img->log, NULL);
	img->values = old->values;
	img->nlocs = old->nlocs;
	img->locs = old->locs;
	img->resv = old->resv;
	img->pending = old->pending;
	img->batch_next = NULL;
	img->reclaim_soon = false;
	img->retired_leases = NULL;
	img->retired = NULL;
	img->nretired = img->capretired = 0;
	return img;
}

/* Give an object back to m's cache, from the writer or another thread. */
static void obj_put(struct rsd_manager *m, bool writer, void *p, size_t nbytes)
{
	if (writer)
		rsd__slab_free(&m->oc, p, nbytes);
	else
		rsd__slab_free_remote(&m->oc, p, nbytes);
}

/* After a grace period: no reader can hold these images any more. */
static void run_retired(struct rsd_image *img, bool writer)
{
	while (img->retired_leases) {
		struct rsd_lease_rec *l = img->retired_leases;

		img->retired_leases = l->free_next;
		rsd__lease_rec_free(img->m, l);
	}
	for (size_t i = 0; i < img->nretired; i++) {
		const struct rsd_retired *r = &img->retired[i];

		if (r->fn)
			r->fn(img->m, r->p);
		else
			obj_put(img->m, writer, r->p, r->nbytes);
	}
	if (img->retired != img->inline_retired)
		free(img->retired);
}

void rsd__image_reclaim(struct rsd_image *img, bool writer)
{
	struct rsd_image *next;

	for (; img; img = next) {
		next = img->batch_next;
		run_retired(img, writer);
		free(atomic_load_explicit(&img->log, memory_order_relaxed));
		obj_put(img->m, writer, img, sizeof(*img));
	}
}

/*
 * Replaced images are reclaimed in batches: one grace-period request per
 * batch keeps that machinery off most writer calls. A batch holding memory
 * or device events goes to the reclaimer at once, so nothing large waits;
 * a plain one waits in m->gpq and the writer frees it (reclaim.c says why).
 */
#define RSD_RECLAIM_BATCH 32
/* Plain batches the writer frees per publication, at most: enough to keep
 * up (one batch per 32 publications), never a long stall. */
#define RSD_RECLAIM_POLL 2

void rsd__reclaim_flush(struct rsd_manager *m)
{
	struct rsd_image *b = m->reclaim;

	if (!b)
		return;
	if (m->reclaim_soon) {
		rsd__reclaim_submit(b);
	} else {
		b->gp_seq = rsd__gp_request();
		rsd__gp_queue_append(&m->gpq_head, &m->gpq_tail, b);
	}
	m->reclaim = NULL;
	m->nreclaim = 0;
	m->reclaim_soon = false;
}

void rsd__reclaim_poll(struct rsd_manager *m, unsigned max)
{
	for (unsigned n = 0; m->gpq_head && (!max || n < max); n++) {
		struct rsd_image *b = m->gpq_head;

		if (!rsd__gp_done(b->gp_seq))
			break;
		m->gpq_head = b->gp_next;
		if (!m->gpq_head)
			m->gpq_tail = NULL;
		rsd__image_reclaim(b, true);
	}
}

static void reclaim_later(struct rsd_manager *m, struct rsd_image *old)
{
	old->batch_next = m->reclaim;
	m->reclaim = old;
	m->reclaim_soon |= old->reclaim_soon;
	if (++m->nreclaim >= RSD_RECLAIM_BATCH || m->reclaim_soon)
		rsd__reclaim_flush(m);
	rsd__reclaim_poll(m, RSD_RECLAIM_POLL);
}

static size_t value_image_size(uint32_t nmats)
{
	return sizeof(struct rsd_img_value) + nmats * sizeof(struct rsd_img_mat);
}

static struct rsd_img_value *value_image(struct rsd_manager *m, const struct rsd_record *rec,
					 uint64_t gen)
{
	struct rsd_img_value *iv;
	uint32_t n = 0;

	/* Every materialization, arriving ones included: a location only
	 * they use has a row of its own (publish_locations). */
	n = rec->nmats;
	iv = rsd__slab_alloc(&m->oc, value_image_size(n));
	if (!iv)
		return NULL;
	iv->gen = gen;
	iv->handle = rec->handle;
	iv->index = rec->index;
	iv->spec = rec->spec;
	iv->has_source = rec->has_source;
	iv->source_loc = rec->source_loc;
	iv->discarded = rec->discarded;
	iv->lost = rec->lost;
	iv->lost_at = rec->lost_at;
	iv->durable = rec->durable;
	iv->nmats = n;
	n = 0;
	for (uint32_t i = 0; i < rec->nmats; i++) {
		const struct rsd_mat *mat = &rec->mats[i];

		iv->mats[n].loc = mat->loc;
		iv->mats[n].storage_nbytes = mat->storage_nbytes;
		iv->mats[n].use_count = mat->use_count;
		iv->mats[n].hold_count = mat->hold_count;
		iv->mats[n].pending_count = mat->pending_count;
		/* Committed but still filling (§22), or kept after that copy
		 * failed, shows as arriving too. */
		iv->mats[n].arriving = mat->state != RSD_MAT_RESIDENT;
		iv->mats[n].returned = mat->returned;
		n++;
	}
	return iv;
}

static int member_set(struct rsd_pv *pv, uint64_t idx, bool on, uint64_t gen, struct rsd_image *rt)
{
	uint64_t word = (uint64_t)(uintptr_t)rsd__pv_get(pv, idx / 64), bit = 1ull << (idx % 64);

	word = on ? word | bit : word & ~bit;
	return rsd__pv_set(pv, idx / 64, (void *)(uintptr_t)word, gen, rt);
}

static bool has_slot(const struct rsd_img_value *iv, unsigned slot)
{
	for (uint32_t i = 0; iv && i < iv->nmats; i++)
		if (rsd__loc_slot(iv->mats[i].loc) == slot)
			return true;
	return false;
}

/*
 * Bring the location member bitmaps of the new table in line with one
 * value's new set of materializations. Only recorded locations keep
 * members: row_of[slot] is the new table's row of a recorded slot (-1
 * otherwise), had[slot] whether the old table's row of it was recorded,
 * so prev's bit there is set. A provisional row (publish_locations) has
 * none, so a row that goes again leaves no nodes behind; once its
 * location is recorded, each value's bit is set at its next image.
 */
static int update_members(struct rsd_manager *m, struct rsd_img_loc *locs, const int *row_of,
			  const bool *had, const struct rsd_img_value *prev,
			  const struct rsd_img_value *iv, uint64_t idx, struct rsd_image *old)
{
	int err;

	for (uint32_t i = 0; prev && i < prev->nmats; i++) {
		unsigned slot = rsd__loc_slot(prev->mats[i].loc);

		if (had[slot] && !has_slot(iv, slot) && row_of[slot] >= 0) {
			err = member_set(&locs[row_of[slot]].members, idx, false, m->gen, old);
			if (err)
				return err;
		}
	}
	for (uint32_t i = 0; i < iv->nmats; i++) {
		unsigned slot = rsd__loc_slot(iv->mats[i].loc);

		if (!(had[slot] && has_slot(prev, slot)) && row_of[slot] >= 0) {
			err = member_set(&locs[row_of[slot]].members, idx, true, m->gen, old);
			if (err)
				return err;
		}
	}
	return 0;
}

static int publish_values(struct rsd_manager *m, struct rsd_image *img, struct rsd_image *old,
			  struct rsd_img_loc *locs, const int *row_of, const bool *had)
{
	size_t n = m->republish_all ? m->nrecs : m->ndirty;

	for (size_t i = 0; i < n; i++) {
		struct rsd_record *rec = m->republish_all ? m->recs[i] : m->dirty[i];
		struct rsd_img_value *iv = value_image(m, rec, m->gen), *prev;
		int err;

		if (!iv)
			return rsd__err(RSD_ENOMEM, "out of memory publishing a value image");
		prev = rsd__pv_get(&img->values, rec->index);
		err = rsd__pv_set(&img->values, rec->index, iv, m->gen, old);
		if (err) {
			rsd__slab_free(&m->oc, iv, value_image_size(iv->nmats));
			return err;
		}
		err = update_members(m, locs, row_of, had, prev, iv, rec->index, old);
		if (!err && prev)
			err = rsd__retire_obj(old, prev, value_image_size(prev->nmats));
		if (err)
			return err; /* iv sits in a node of this generation: unpublish() frees it */
	}
	return 0;
}

static size_t loc_table_size(uint32_t nlocs)
{
	return (nlocs ? nlocs : 1) * sizeof(struct rsd_img_loc);
}

/* The row of old's table at `at`, or NULL. Rows are compared by location:
 * a row of a location not yet recorded may sit at another index. */
static const struct rsd_img_loc *old_row(const struct rsd_image *old, uint32_t i,
					 struct rsd_location at)
{
	if (i < old->nlocs && rsd_location_equal(old->locs[i].loc, at))
		return &old->locs[i];
	return old->locs ? rsd__img_loc(old, at) : NULL;
}

/*
 * Whether a slot has a row: every recorded location, in registry order,
 * then every location not yet recorded where a transfer in flight is
 * bringing a destination (§20.2: its charge must show), in slot order.
 * The commit records such a location (and steps state_version for it);
 * a failed transfer leaves it unrecorded, and its row goes.
 */
static bool provisional_row(const struct rsd_acct *a)
{
	return !a->known && a->arriving;
}

static uint32_t row_count(const struct rsd_manager *m)
{
	uint32_t n = m->nknown;

	for (unsigned slot = 0; slot < RSD_NSLOTS; slot++)
		n += provisional_row(&m->acct[slot]);
	return n;
}

static void row_fill(struct rsd_manager *m, const struct rsd_image *old, struct rsd_img_loc *locs,
		     uint32_t i, unsigned slot)
{
	const struct rsd_img_loc *prev;

	locs[i].loc = rsd__slot_loc(slot);
	locs[i].acct = m->acct[slot];
	prev = old_row(old, i, locs[i].loc);
	/* The member bitmap carries over; publish_values edits it. */
	if (prev)
		locs[i].members = prev->members;
	else
		memset(&locs[i].members, 0, sizeof(locs[i].members));
	/* Feed the managed-bytes-over-time plot. */
	if (!prev || prev->acct.used != locs[i].acct.used ||
	    prev->acct.reserved != locs[i].acct.reserved)
		rsd_trace_state(m->id, m->version, locs[i].loc, locs[i].acct.used,
				locs[i].acct.reserved, locs[i].acct.has_budget, locs[i].acct.budget,
				locs[i].acct.arriving);
}

static int publish_locations(struct rsd_manager *m, struct rsd_image *img, struct rsd_image *old,
			     struct rsd_img_loc **out)
{
	uint32_t n = row_count(m), k = 0;
	struct rsd_img_loc *locs = rsd__slab_alloc(&m->oc, loc_table_size(n));

	if (!locs)
		return rsd__err(RSD_ENOMEM, "out of memory publishing the location table");
	for (; k < m->nknown; k++)
		row_fill(m, old, locs, k, m->order[k]);
	for (unsigned slot = 0; slot < RSD_NSLOTS; slot++)
		if (provisional_row(&m->acct[slot]))
			row_fill(m, old, locs, k++, slot);
	if (old->locs && rsd__retire_obj(old, (void *)old->locs, loc_table_size(old->nlocs))) {
		rsd__slab_free(&m->oc, locs, loc_table_size(n));
		return -RSD_ENOMEM;
	}
	img->locs = locs;
	img->nlocs = n;
	*out = locs;
	return 0;
}

/* ---- the reservation and pending-lease tables (struct rsd_ptab) ---- */

void rsd__resv_changed(struct rsd_manager *m, struct rsd_reservation *r)
{
	if (!r->on_chg) {
		rsd__list_add_tail(&m->resv_chg, &r->chg);
		r->on_chg = true;
		m->nresv_add += !r->pub;
	}
	m->resv_dirty = true;
}

void rsd__resv_removed(struct rsd_manager *m, struct rsd_reservation *r)
{
	if (r->on_chg) {
		rsd__list_del(&m->resv_chg, &r->chg);
		r->on_chg = false;
		m->nresv_add -= !r->pub;
	}
	if (r->pub) {
		r->pub->owner = NULL;
		rsd__list_add_tail(&m->resv_dead, &r->pub->dead);
		m->nresv_dead++;
		r->pub = NULL;
	}
	m->resv_dirty = true;
}

void rsd__pending_added(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	l->tab = RSD_TAB_NEW;
	rsd__list_add_tail(&m->pend_new, &l->tab_node);
	m->npend_add++;
	m->pending_dirty = true;
}

/* l's memory lasts until the image published now is reclaimed: past the
 * next publication, which clears its slot. */
void rsd__pending_removed(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	if (l->tab == RSD_TAB_NEW) {
		rsd__list_del(&m->pend_new, &l->tab_node);
		m->npend_add--;
	} else if (l->tab == RSD_TAB_IN) {
		rsd__list_add_tail(&m->pend_dead, &l->tab_node);
		m->npend_dead++;
	}
	l->tab = l->tab == RSD_TAB_IN ? RSD_TAB_DEAD : RSD_TAB_OUT;
	m->pending_dirty = true;
}

static void free_resv_entry(struct rsd__slab *oc, void *val, uint64_t gen)
{
	struct rsd_img_resv *e = val;

	(void)oc;
	if (e->gen == gen)
		free(e);
}

/* A new entry for r, of this publication. */
static struct rsd_img_resv *resv_entry(struct rsd_manager *m, const struct rsd_reservation *r)
{
	size_t len = strlen(r->label) + 1;
	struct rsd_img_resv *e = rsd__malloc(sizeof(*e) + len);

	if (!e) {
		rsd__err(RSD_ENOMEM, "out of memory publishing reservation '%s'", r->label);
		return NULL;
	}
	memset(e, 0, sizeof(*e));
	e->loc = r->loc;
	e->nbytes = r->nbytes;
	e->label = memcpy(e + 1, r->label, len);
	e->gen = m->gen;
	e->owner = (struct rsd_reservation *)r;
	return e;
}

/* Put r's new entry at pos (count: append); its published one, if any,
 * is retired. */
static int resv_put(struct rsd_manager *m, struct rsd_ptab *t, struct rsd_reservation *r,
		    uint64_t pos, struct rsd_image *old)
{
	struct rsd_img_resv *e = resv_entry(m, r);
	int err;

	if (!e)
		return -RSD_ENOMEM;
	err = rsd__pv_set(&t->pv, pos, e, m->gen, old);
	if (err) {
		free(e);
		return err;
	}
	e->pos = pos;
	r->next_pub = e;
	return r->pub ? rsd__retire(old, rsd__retire_free, r->pub) : 0;
}

/*
 * The reservation table of img from old's and the changes since: in place
 * (clear released entries' slots, replace changed ones, append new ones),
 * or rebuilt without holes when they would be more than half of it. The
 * writer's marks change only in publish_commit(); on failure the caller
 * takes the retirements back and unpublish() frees what was built.
 */
static int publish_reservations(struct rsd_manager *m, struct rsd_image *img, struct rsd_image *old)
{
	struct rsd_ptab *t = &img->resv;
	uint64_t live = old->resv.live + m->nresv_add - m->nresv_dead;
	struct rsd_reservation *r;
	struct rsd_img_resv *e;
	int err = 0;

	m->resv_rebuilt = rsd__ptab_sparse(old->resv.pv.count + m->nresv_add, live);
	if (!m->resv_rebuilt) {
		rsd__list_for_each_entry(e, &m->resv_dead, dead) {
			err = rsd__pv_set(&t->pv, e->pos, NULL, m->gen, old);
			if (!err)
				err = rsd__retire(old, rsd__retire_free, e);
			if (err)
				return err;
		}
		rsd__list_for_each_entry(r, &m->resv_chg, chg) {
			err = resv_put(m, t, r, r->pub ? r->pub->pos : t->pv.count, old);
			if (err)
				return err;
		}
		t->live = live;
		return 0;
	}
	memset(t, 0, sizeof(*t));
	for (uint64_t i = 0; (e = rsd__ptab_next(&old->resv, &i)) && !err;) {
		if (!e->owner)
			err = rsd__retire(old, rsd__retire_free, e);
		else if (e->owner->on_chg)
			err = resv_put(m, t, e->owner, t->pv.count, old);
		else if (!(err = rsd__pv_set(&t->pv, t->pv.count, e, m->gen, old)))
			t->live++;
	}
	rsd__list_for_each_entry(r, &m->resv_chg, chg) {
		if (!err && !r->pub)
			err = resv_put(m, t, r, t->pv.count, old);
	}
	if (!err)
		err = rsd__ptab_retire_nodes(&old->resv, old);
	t->live = live;
	return err;
}

static int publish_pending(struct rsd_manager *m, struct rsd_image *img, struct rsd_image *old)
{
	struct rsd_ptab *t = &img->pending;
	uint64_t live = old->pending.live + m->npend_add - m->npend_dead;
	struct rsd_lease_rec *l;
	int err = 0;

	m->pend_rebuilt = rsd__ptab_sparse(old->pending.pv.count + m->npend_add, live);
	if (!m->pend_rebuilt) {
		rsd__list_for_each_entry(l, &m->pend_dead, tab_node) {
			err = rsd__pv_set(&t->pv, l->tab_pos, NULL, m->gen, old);
			if (err)
				return err;
		}
	} else {
		memset(t, 0, sizeof(*t));
		/* Nothing to keep when every survivor is new (a reap that
		 * emptied the table): no record is read again. */
		for (uint64_t i = 0;
		     live > m->npend_add && (l = rsd__ptab_next(&old->pending, &i)) && !err;)
			if (l->tab == RSD_TAB_IN)
				err = rsd__pv_set(&t->pv, t->pv.count, l, m->gen, old);
		if (!err)
			err = rsd__ptab_retire_nodes(&old->pending, old);
	}
	rsd__list_for_each_entry(l, &m->pend_new, tab_node) {
		if (!err)
			err = rsd__pv_set(&t->pv, t->pv.count, l, m->gen, old);
	}
	t->live = live;
	return err;
}

/* The publication succeeded: the writer's marks follow the new tables. */
static void publish_commit_tables(struct rsd_manager *m, struct rsd_image *img)
{
	struct rsd_reservation *r, *rn;
	struct rsd_lease_rec *l, *ln;
	struct rsd_img_resv *e;
	uint64_t i;

	rsd__list_for_each_entry_safe(r, rn, &m->resv_chg, chg) {
		r->pub = r->next_pub;
		r->on_chg = false;
		rsd__list_del(&m->resv_chg, &r->chg);
	}
	rsd__list_init(&m->resv_dead);
	m->nresv_add = m->nresv_dead = 0;
	if (m->resv_rebuilt)
		for (i = 0; (e = rsd__ptab_next(&img->resv, &i));)
			e->pos = i - 1;
	/* The dead records are never linked again: forget the list whole. */
	rsd__list_init(&m->pend_dead);
	if (m->pend_rebuilt) {
		for (i = 0; (l = rsd__ptab_next(&img->pending, &i));)
			l->tab_pos = i - 1;
	} else {
		/* The new records were appended in list order. */
		i = img->pending.pv.count - m->npend_add;
		rsd__list_for_each_entry(l, &m->pend_new, tab_node)
			l->tab_pos = i++;
	}
	rsd__list_for_each_entry_safe(l, ln, &m->pend_new, tab_node) {
		l->tab = RSD_TAB_IN;
		rsd__list_del(&m->pend_new, &l->tab_node);
	}
	m->npend_add = m->npend_dead = 0;
	m->resv_rebuilt = m->pend_rebuilt = false;
}

static void free_new_value(struct rsd__slab *oc, void *val, uint64_t gen)
{
	struct rsd_img_value *iv = val;

	if (iv->gen == gen)
		rsd__slab_free(oc, iv, value_image_size(iv->nmats));
}

/* A failed publication: free what it built for img (everything of
 * generation m->gen, and the tables img does not share with old). */
static void unpublish(struct rsd_manager *m, struct rsd_image *img, const struct rsd_image *old)
{
	rsd__pv_free_gen(&img->values, &m->oc, old->values.count, m->gen, free_new_value);
	if (img->locs != old->locs) {
		for (uint32_t i = 0; i < img->nlocs; i++) {
			const struct rsd_img_loc *prev = old_row(old, i, img->locs[i].loc);

			rsd__pv_free_gen((struct rsd_pv *)&img->locs[i].members, &m->oc,
					 prev ? prev->members.count : 0, m->gen, NULL);
		}
		rsd__slab_free(&m->oc, (void *)img->locs, loc_table_size(img->nlocs));
	}
	rsd__pv_free_gen(&img->resv.pv, &m->oc, m->resv_rebuilt ? 0 : old->resv.pv.count, m->gen,
			 free_resv_entry);
	rsd__pv_free_gen(&img->pending.pv, &m->oc, m->pend_rebuilt ? 0 : old->pending.pv.count,
			 m->gen, NULL);
	m->resv_rebuilt = m->pend_rebuilt = false;
	rsd__slab_free(&m->oc, img, sizeof(*img));
}

/*
 * Build the next image from the writer state and swap it in. Called with
 * m->lock held at the end of every writer call that changed something.
 * On allocation failure the dirty marks stay, so the next writer call
 * publishes again; readers keep seeing the previous consistent image.
 */
int rsd__publish(struct rsd_manager *m)
{
	struct rsd_image *old = m->img, *img;
	struct rsd_img_loc *locs = NULL;
	int row_of[RSD_NSLOTS];
	bool had[RSD_NSLOTS];
	size_t retired_before;
	int err;

	img = root_next(m, old);
	if (!img)
		return rsd__err(RSD_ENOMEM, "out of memory publishing manager state");
	/* The new image starts with no log: its values are re-imaged. */
	rsd__prot_fold(m, old);
	/* Retirements land in the outgoing image: freed with it. */
	retired_before = old->nretired;
	err = publish_locations(m, img, old, &locs);
	if (!err) {
		for (unsigned s = 0; s < RSD_NSLOTS; s++) {
			row_of[s] = -1;
			had[s] = false;
		}
		/* Recorded rows only: provisional ones keep no members. */
		for (uint32_t i = 0; i < img->nlocs && locs[i].acct.known; i++)
			row_of[rsd__loc_slot(locs[i].loc)] = (int)i;
		for (uint32_t i = 0; i < old->nlocs && old->locs[i].acct.known; i++)
			had[rsd__loc_slot(old->locs[i].loc)] = true;
		err = publish_values(m, img, old, locs, row_of, had);
	}
	if (!err && m->resv_dirty)
		err = publish_reservations(m, img, old);
	if (!err && m->pending_dirty)
		err = publish_pending(m, img, old);
	if (!err)
		publish_commit_tables(m, img);
	if (err) {
		/*
		 * The current image still references everything retired above:
		 * take those retirements back, and free what this attempt built.
		 * The dirty marks stay, so the next writer call (or reader,
		 * rsd__read_fresh) publishes again.
		 */
		rsd__ptab_retire_undo(old, retired_before);
		old->nretired = retired_before;
		unpublish(m, img, old);
		return err;
	}
	/* Only now: a failure in any step above leaves every mark set. */
	for (size_t i = 0; i < m->ndirty; i++)
		m->dirty[i]->dirty = false;
	m->ndirty = 0;
	m->republish_all = false;
	m->resv_dirty = m->pending_dirty = false;
	img->state_version = m->version;
	img->closed = m->closed;
	/* The new image's log is empty: so are the net changes it allows. */
	m->nlognet = 0;
	rsd__rcu_register();
	rsd__rcu_publish(m->img, img);
	reclaim_later(m, old);
	m->gen++;
	return 0;
}

/* The first image, at create: empty values, the budgeted locations. */
int rsd__publish_first(struct rsd_manager *m)
{
	/* From the object cache like every image: it goes back there. */
	struct rsd_image *img = rsd__slab_alloc(&m->oc, sizeof(*img)), stub;
	struct rsd_img_loc *locs;
	int err;

	if (!img)
		return rsd__err(RSD_ENOMEM, "out of memory publishing manager state");
	memset(img, 0, sizeof(*img));
	memset(&stub, 0, sizeof(stub));
	img->m = m;
	/* The reservation and pending tables start empty (zeroed). */
	err = publish_locations(m, img, &stub, &locs);
	/* Nothing is retired from an empty image; keep the analyzer sure. */
	if (stub.retired && stub.retired != stub.inline_retired)
		free(stub.retired);
	if (err) {
		rsd__slab_free(&m->oc, (void *)img->locs, loc_table_size(img->nlocs));
		rsd__slab_free(&m->oc, img, sizeof(*img));
		return err;
	}
	m->img = img;
	m->resv_dirty = m->pending_dirty = false;
	m->gen++;
	return 0;
}

static void free_value_image(struct rsd__slab *oc, void *p)
{
	rsd__slab_free(oc, p, value_image_size(((struct rsd_img_value *)p)->nmats));
}

static void free_resv_value(struct rsd__slab *oc, void *p)
{
	(void)oc;
	free(p);
}

/* At destroy, after rcu_barrier(): nothing else can reach the last image. */
void rsd__image_destroy(struct rsd_manager *m)
{
	struct rsd_image *img = m->img;

	if (!img)
		return;
	rsd__pv_free_nodes(&img->values, &m->oc, free_value_image);
	for (uint32_t i = 0; i < img->nlocs; i++)
		rsd__pv_free_nodes((struct rsd_pv *)&img->locs[i].members, &m->oc, NULL);
	rsd__slab_free(&m->oc, (void *)img->locs, loc_table_size(img->nlocs));
	rsd__pv_free_nodes(&img->resv.pv, &m->oc, free_resv_value);
	rsd__pv_free_nodes(&img->pending.pv, &m->oc, NULL);
	run_retired(img, true);
	free(atomic_load_explicit(&img->log, memory_order_relaxed));
	rsd__slab_free(&m->oc, img, sizeof(*img));
	m->img = NULL;
}

/*
 * Ids grow strictly with the index (ids come from one process-wide counter,
 * values are appended under the writer lock and never removed), so the
 * value with this id sits at an index no greater than id - first and no
 * less than count - 1 - (last - id). When a manager's ids are dense, as
 * they are unless several managers register at once, that pins the index
 * and the search reads three values instead of log2(count) scattered ones.
 */
const struct rsd_img_value *rsd__img_find(const struct rsd_image *img, uint64_t id)
{
	uint64_t lo = 0, hi = img->values.count, first, last;

	if (!hi)
		return NULL;
	first = ((const struct rsd_img_value *)rsd__pv_get(&img->values, 0))->handle.id;
	last = ((const struct rsd_img_value *)rsd__pv_get(&img->values, hi - 1))->handle.id;
	if (id < first || id > last)
		return NULL;
	if (id - first < hi - 1)
		hi = id - first + 1;
	if (last - id < img->values.count - 1)
		lo = img->values.count - 1 - (last - id);
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct rsd_img_value *iv = rsd__pv_get(&img->values, mid);

		if (iv->handle.id == id)
			return iv;
		if (iv->handle.id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct rsd_img_loc *rsd__img_loc(const struct rsd_image *img, struct rsd_location at)
{
	for (uint32_t i = 0; i < img->nlocs; i++)
		if (rsd_location_equal(img->locs[i].loc, at))
			return &img->locs[i];
	return NULL;
}

int rsd_manager_state_version_get(struct rsd_manager *m, uint64_t *out)
{
	const struct rsd_image *img;
	int err = 0;

	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_manager_state_version: NULL argument");
	err = rsd__read_fresh(m);
	if (err)
		return err;
	img = rsd__read_begin(m);
	if (img->closed)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
	else
		*out = rsd__img_version(img);
	rsd__read_end();
	return err;
}

uint64_t rsd_manager_state_version(struct rsd_manager *m)
{
	uint64_t v = 0;

	rsd_manager_state_version_get(m, &v);
	return v;
}

size_t rsd_manager_locations(struct rsd_manager *m, struct rsd_location *out, size_t cap)
{
	const struct rsd_image *img;
	size_t n;

	if (!m) {
		rsd__err(RSD_ETYPE, "rsd_manager_locations: manager is NULL");
		return 0;
	}
	/* Best effort: on failure the previous publication's list is read. */
	(void)rsd__read_fresh(m);
	img = rsd__read_begin(m);
	/* The recorded rows come first; a transfer's row does not count. */
	for (n = 0; n < img->nlocs && img->locs[n].acct.known; n++)
		if (n < cap && out)
			out[n] = img->locs[n].loc;
	rsd__read_end();
	return n;
}

bool rsd__img_loc_next(const struct rsd_img_loc *l, uint64_t *i)
{
	for (uint64_t w = *i / 64; w < l->members.count; w++) {
		uint64_t word = (uint64_t)(uintptr_t)rsd__pv_get(&l->members, w);

		if (w == *i / 64)
			word &= ~0ull << (*i % 64);
		if (word) {
			*i = w * 64 + (uint64_t)__builtin_ctzll(word);
			return true;
		}
	}
	return false;
}

bool rsd__img_pending_next(const struct rsd_image *img, uint64_t *i, struct rsd_img_lease *out)
{
	const struct rsd_lease_rec *l = rsd__ptab_next(&img->pending, i);

	if (!l)
		return false;
	*out = (struct rsd_img_lease){ .id = l->id,
				       .loc = l->loc,
				       .n = l->n,
				       .ids = l->ids,
				       .nevents = l->nevents,
				       .streams = l->streams };
	return true;
}
