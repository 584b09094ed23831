// SPDX-License-Identifier: MIT
/*
 * rsd_snapshot_take: copy one published image out, lock-free. The copy is a
 * single allocation, so rsd_snapshot_free is one free() and a snapshot of
 * ten thousand values costs two walks of the value vector. The caller's
 * struct rsd_snapshot opens it, followed by the double-free guard and the
 * arrays.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

struct snapshot {
	struct rsd_snapshot pub;
	uint32_t guard; /* RSD__LIVE until rsd_snapshot_free */
};

int rsd_snapshot_take(struct rsd_manager *m, struct rsd_snapshot **out)
{
	const struct rsd_image *img;
	struct rsd_view view;
	struct rsd_snapshot *s;
	struct snapshot *box;
	struct rsd_value_snapshot *vals;
	struct rsd_materialization_snapshot *mats;
	struct rsd_location_snapshot *locs;
	struct rsd_reservation_snapshot *resv;
	const struct rsd_img_resv *e;
	size_t nmats = 0, labels = 0, size;
	char *lbl;
	int err = 0;

	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_snapshot_take: NULL argument");
	err = rsd__read_fresh(m);
	if (err)
		return err;
	img = rsd__read_begin(m);
	rsd__view_init(&view, img);
	if (img->closed) {
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
		goto out;
	}
	for (uint64_t i = 0; i < img->values.count; i++)
		nmats += ((const struct rsd_img_value *)rsd__pv_get(&img->values, i))->nmats;
	for (uint64_t i = 0; (e = rsd__ptab_next(&img->resv, &i));)
		labels += strlen(e->label) + 1;
	size = sizeof(*box) + img->values.count * sizeof(*vals) + nmats * sizeof(*mats) +
	       img->nlocs * sizeof(*locs) + img->resv.live * sizeof(*resv) + labels;
	box = rsd__malloc(size);
	if (!box) {
		err = rsd__err(RSD_ENOMEM, "out of memory for a snapshot of %llu values",
			       (unsigned long long)img->values.count);
		goto out;
	}
	box->guard = RSD__LIVE;
	s = &box->pub;
	vals = (struct rsd_value_snapshot *)(box + 1);
	mats = (struct rsd_materialization_snapshot *)(vals + img->values.count);
	locs = (struct rsd_location_snapshot *)(mats + nmats);
	resv = (struct rsd_reservation_snapshot *)(locs + img->nlocs);
	lbl = (char *)(resv + img->resv.live);

	s->manager_id = m->id;
	s->state_version = view.version;
	s->nvalues = img->values.count;
	s->values = vals;
	s->nlocations = img->nlocs;
	s->locations = locs;
	s->nreservations = img->resv.live;
	s->reservations = resv;
	for (uint64_t i = 0; i < img->values.count; i++) {
		const struct rsd_img_value *iv = rsd__pv_get(&img->values, i);
		struct rsd_value_snapshot *v = &vals[i];

		v->handle = iv->handle;
		v->spec = iv->spec;
		v->has_source = iv->has_source;
		v->has_source_location = iv->has_source;
		v->source_location = iv->has_source ? iv->source_loc : RSD_LOC_PAGEABLE_HOST;
		v->discarded = iv->discarded;
		v->lost = iv->lost && !iv->discarded;
		v->durable = iv->durable;
		v->lost_location = v->lost ? iv->lost_at : RSD_LOC_PAGEABLE_HOST;
		v->nmaterializations = iv->nmats;
		v->materializations = mats;
		for (uint32_t j = 0; j < iv->nmats; j++, mats++) {
			struct rsd_prot_counts c = rsd__view_mat_prot(&view, iv, j);

			mats->location = iv->mats[j].loc;
			mats->logical_nbytes = iv->spec.logical_nbytes;
			mats->storage_nbytes = iv->mats[j].storage_nbytes;
			mats->charged_nbytes = iv->mats[j].returned ? 0 : iv->spec.storage_nbytes;
			mats->use_count = c.use;
			mats->hold_count = c.hold;
			mats->pending_event_count = c.pending;
			mats->arriving = iv->mats[j].arriving;
		}
	}
	for (uint32_t i = 0; i < img->nlocs; i++) {
		const struct rsd_acct *a = &img->locs[i].acct;
		struct rsd_prot_counts c = rsd__view_loc_prot(&view, &img->locs[i]);
		struct rsd__ledger ledger;
		struct rsd_location_snapshot *l = &locs[i];

		memset(l, 0, sizeof(*l));
		l->location = img->locs[i].loc;
		l->has_budget = a->has_budget;
		l->budget_bytes = a->has_budget ? a->budget : 0;
		l->used_bytes = a->used;
		l->reserved_bytes = a->reserved;
		l->in_flight_bytes = a->temp;
		l->plan_held_bytes = a->plan_hold;
		l->plan_hold_count = a->plan_holders;
		/* The one rule admission applies (no plan of this thread's). */
		ledger = rsd__acct_ledger(a, 0);
		l->remaining_budget_bytes = a->has_budget ? rsd__ledger_free(&ledger) : 0;
		l->peak_used_bytes = a->peak_used;
		l->peak_charged_bytes = a->peak_charged;
		l->value_count = a->value_count;
		l->reservation_count = a->reservation_count;
		l->use_count = c.use;
		l->hold_count = c.hold;
		l->pending_event_count = c.pending;
		l->failed = a->failed;
		/* Allocator metrics are sampled now, best effort (§14.4). */
		if (l->location.kind == RSD_CUDA && l->location.device < m->ndevices &&
		    m->ops->metrics &&
		    !m->ops->metrics(m->ops_ctx, l->location.device, &l->allocator_allocated_bytes,
				     &l->allocator_reserved_bytes))
			l->has_allocator = true;
	}
	for (uint64_t i = 0; (e = rsd__ptab_next(&img->resv, &i)); resv++) {
		size_t len = strlen(e->label) + 1;

		resv->location = e->loc;
		resv->nbytes = e->nbytes;
		resv->label = memcpy(lbl, e->label, len);
		lbl += len;
	}
	s->captured_at_ns = rsd__now_ns();
	*out = s;
out:
	rsd__read_end();
	return err;
}

void rsd_snapshot_free(struct rsd_snapshot *s)
{
	struct snapshot *box = (struct snapshot *)s;

	if (!box)
		return;
	rsd__guard_free(&box->guard, __func__, "struct rsd_snapshot", box);
	free(box);
}
