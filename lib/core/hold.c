// SPDX-License-Identifier: MIT
/*
 * Holds (§8.6) and named reservations (§8.7): protection and pure
 * accounting. Both objects are also the manager's records of themselves:
 * `tracked` says whether the manager still counts them (a forced close
 * stops counting without freeing the caller's object).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "../trace.h"

int rsd_hold(struct rsd_manager *m, const struct rsd_handle *h, size_t n, struct rsd_location at,
	     struct rsd_hold **out)
{
	struct rsd_handle buf[RSD_HANDLES_INLINE], *set = buf;
	struct rsd_hold *hd = NULL;
	size_t k = 0;
	int err;

	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_hold: NULL argument");
	err = rsd__handle_set(h, n, buf, RSD_HANDLES_INLINE, &set, &k);
	if (err)
		return err;
	err = rsd__location_check(at, "rsd_hold");
	if (err)
		goto out_free;
	err = rsd__writer_enter(m, RSD_W_OPEN);
	if (err)
		goto out_free;
	err = rsd__check_location(m, at);
	if (!err)
		err = rsd__reap(m);
	if (err)
		goto out;
	hd = rsd__calloc(1, sizeof(*hd));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	if (!hd || !(hd->recs = rsd__calloc(k, sizeof(*hd->recs)))) {
		err = rsd__err(RSD_ENOMEM, "out of memory creating a hold");
		goto out;
	}
	err = rsd__resolve_resident(m, set, k, at, hd->recs);
	if (err)
		goto out;
	hd->guard = RSD__LIVE;
	hd->id = rsd__next_id();
	hd->active = hd->tracked = true;
	hd->loc = at;
	hd->n = k;
	rsd__list_add_head(&m->holds, &hd->node);
	rsd__commit_prot(m, at, hd->recs, k, 0, +1, 0);
	rsd__obj_link(m, &hd->link);
	rsd_trace_hold(m->id, hd->id, at, (uint32_t)k, true);
	*out = hd;
	hd = NULL;
out:
	rsd__writer_exit(m);
out_free:
	if (hd) {
		free(hd->recs);
		free(hd);
	}
	if (set != buf)
		free(set);
	return err;
}

/* Stop counting a hold; m->lock held. */
static void hold_untrack(struct rsd_manager *m, struct rsd_hold *hd)
{
	rsd__list_del(&m->holds, &hd->node);
	hd->tracked = false;
}

int rsd_hold_release(struct rsd_hold *hd)
{
	struct rsd_manager *m;
	int err;

	if (!hd)
		return rsd__err(RSD_ETYPE, "hold is NULL");
	if (!hd->active)
		return 0;
	m = hd->link.m;
	if (!m) {
		hd->active = false;
		return 0;
	}
	err = rsd__writer_enter(m, 0);
	if (err)
		return err;
	if (hd->tracked) {
		rsd__commit_prot(m, hd->loc, hd->recs, hd->n, 0, -1, 0);
		hold_untrack(m, hd);
		rsd_trace_hold(m->id, hd->id, hd->loc, (uint32_t)hd->n, false);
	}
	hd->active = false;
	rsd__writer_exit(m);
	return 0;
}

bool rsd_hold_active(const struct rsd_hold *hd)
{
	return hd && hd->active;
}

static int hold_release(void *hd)
{
	return rsd_hold_release(hd);
}

static const struct rsd_lifetime_kind hold_kind = {
	.noun = "hold",
	.retained = "the manager was retained",
	.release = hold_release,
};

void rsd_hold_free(struct rsd_hold *hd)
{
	if (!hd)
		return;
	rsd__guard_free(&hd->guard, __func__, "struct rsd_hold", hd);
	if (!rsd__free_release(&hold_kind, hd, &hd->link, hd->active, NULL, hd->n))
		return;
	rsd__obj_unlink(&hd->link);
	free(hd->recs);
	free(hd);
}

int rsd__reserve_locked(struct rsd_manager *m, struct rsd_location at, uint64_t nbytes,
			const char *label, struct rsd_reservation **out)
{
	struct rsd_reservation *r;
	struct rsd_acct *a;
	int err;

	err = rsd__check_location(m, at);
	if (!err)
		err = rsd__fault(RSD__FAULT_RESERVE, label);
	if (!err)
		err = rsd__admit(m, at, nbytes);
	if (err)
		return err;
	r = rsd__calloc(1, sizeof(*r));
	if (!r || !(r->label = rsd__strdup(label))) {
		free(r);
		return rsd__err(RSD_ENOMEM, "out of memory creating a reservation");
	}
	rsd__record_location(m, at);
	r->guard = RSD__LIVE;
	r->id = rsd__next_id();
	r->active = r->tracked = true;
	r->loc = at;
	r->nbytes = nbytes;
	rsd__list_add_tail(&m->resv, &r->node);
	a = &m->acct[rsd__loc_slot(at)];
	a->reserved += nbytes;
	rsd__acct_change(m, rsd__loc_slot(at), nbytes, true);
	a->reservation_count++;
	rsd__acct_peak(a);
	rsd__resv_changed(m, r);
	rsd__bump(m);
	rsd_trace_reservation(m->id, r->id, at, nbytes, label, true);
	*out = r;
	return 0;
}

void rsd__reservation_release_locked(struct rsd_manager *m, struct rsd_reservation *r)
{
	struct rsd_acct *a;

	if (!r->tracked)
		return;
	a = &m->acct[rsd__loc_slot(r->loc)];
	a->reserved -= r->nbytes;
	rsd__acct_change(m, rsd__loc_slot(r->loc), r->nbytes, false);
	a->reservation_count--;
	rsd__list_del(&m->resv, &r->node);
	r->tracked = false;
	rsd__resv_removed(m, r);
	rsd__bump(m);
	rsd_trace_reservation(m->id, r->id, r->loc, r->nbytes, r->label, false);
}

int rsd_reserve(struct rsd_manager *m, struct rsd_location at, uint64_t nbytes, const char *label,
		struct rsd_reservation **out)
{
	struct rsd_reservation *r = NULL;
	int err;

	if (!label)
		return rsd__err(RSD_ETYPE, "reservation label is NULL");
	if (!rsd__nonblank(label))
		return rsd__err(RSD_EINVAL, "reservation label must not be blank");
	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_reserve: NULL argument");
	err = rsd__location_check(at, "rsd_reserve");
	if (err)
		return err;
	err = rsd__writer_enter(m, RSD_W_OPEN);
	if (err)
		return err;
	err = rsd__reserve_locked(m, at, nbytes, label, &r);
	if (!err) {
		rsd__obj_link(m, &r->link);
		*out = r;
	}
	rsd__writer_exit(m);
	return err;
}

int rsd_reservation_release(struct rsd_reservation *r)
{
	struct rsd_manager *m;
	int err;

	if (!r)
		return rsd__err(RSD_ETYPE, "reservation is NULL");
	if (!r->active)
		return 0;
	m = r->link.m;
	if (!m) {
		r->active = false;
		return 0;
	}
	err = rsd__writer_enter(m, 0);
	if (err)
		return err;
	rsd__reservation_release_locked(m, r);
	r->active = false;
	rsd__writer_exit(m);
	return 0;
}

bool rsd_reservation_active(const struct rsd_reservation *r)
{
	return r && r->active;
}

uint64_t rsd_reservation_nbytes(const struct rsd_reservation *r)
{
	return r ? r->nbytes : 0;
}

const char *rsd_reservation_label(const struct rsd_reservation *r)
{
	return r ? r->label : NULL;
}

static int reservation_release(void *r)
{
	return rsd_reservation_release(r);
}

static const struct rsd_lifetime_kind reservation_kind = {
	.noun = "reservation",
	.retained = "the manager was retained",
	.release = reservation_release,
};

void rsd_reservation_free(struct rsd_reservation *r)
{
	if (!r)
		return;
	rsd__guard_free(&r->guard, __func__, "struct rsd_reservation", r);
	if (!rsd__free_release(&reservation_kind, r, &r->link, r->active, r->label, 0))
		return;
	rsd__obj_unlink(&r->link);
	free(r->label);
	free(r);
}

/* Forced close: every lifetime stops counting; caller objects survive. */
void rsd__lifetimes_drop(struct rsd_manager *m)
{
	struct rsd_reservation *r;
	struct rsd_hold *hd;

	while ((hd = rsd__list_first_entry(&m->holds, struct rsd_hold, node)))
		hold_untrack(m, hd);

	while ((r = rsd__list_first_entry(&m->resv, struct rsd_reservation, node))) {
		rsd__list_del(&m->resv, &r->node);
		r->tracked = false;
		rsd__resv_removed(m, r);
	}
	m->resv_dirty = true;
}
