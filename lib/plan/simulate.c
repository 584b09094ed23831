// SPDX-License-Identifier: MIT
/*
 * The plan simulation of reference.md §10.3: a dry run of reclaim ++ enter
 * ++ exit with reservations admitted after reclaim, against one published
 * image. explain runs it lock-free; execute_actions and scope entry run it
 * as their preflight on the writer path. It never changes the manager.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#define NWORDS ((RSD_NSLOTS + 63) / 64)

struct sim_loc {
	bool in;
	bool has_budget;
	uint64_t budget, used, reserved, peak;
	/* Charged by work in flight and kept by other plans: the image's,
	 * fixed for the whole simulation. */
	uint64_t in_flight, held;
	uint32_t holders;
};

struct sim_val {
	uint64_t id;
	const struct rsd_img_value *iv;
	uint64_t locs[NWORDS]; /* simulated resident slots */
	bool has_source;
	struct rsd_location source_loc;
	bool discarded;
};

struct explanation {
	struct rsd_explanation pub;
	char *plan_name;
	struct rsd_action_explanation *acts;
	struct rsd_reservation_spec *resv;
	struct rsd_location_bytes *peaks;
	char **strs;
	size_t nstrs;
};

struct sim {
	struct rsd_manager *m;
	const struct rsd_image *img;
	const struct rsd_view *view; /* of img: its protection counts */
	struct sim_loc loc[RSD_NSLOTS];
	uint8_t order[RSD_NSLOTS];
	unsigned nloc;
	struct sim_val *vals;
	size_t nvals, capvals;
	struct rsd__ptrmap val_idx; /* handle id (never 0) -> its index in vals */
	struct explanation *e;
	const char *reason; /* the current action's first reason */
	int err;	    /* allocation failure */
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/*
 * Does l admit n more bytes? The rule execution's admission applies
 * (rsd__ledger_free) to the simulated used and reserved bytes and the
 * image's bytes in flight and other plans' headroom. Without a budget it
 * refuses a sum past 2^64-1 (execution refuses to wrap the counters).
 */
static bool admits(const struct sim_loc *l, uint64_t n)
{
	struct rsd__ledger led = {
		.has_budget = l->has_budget,
		.budget = l->budget,
		.used = l->used,
		.reserved = l->reserved,
		.in_flight = l->in_flight,
		.held = l->held,
		.holders = l->holders,
	};

	return n <= rsd__ledger_free(&led);
}

static bool has(const struct sim_val *v, unsigned slot)
{
	return v->locs[slot / 64] >> (slot % 64) & 1;
}

static void set(struct sim_val *v, unsigned slot, bool on)
{
	if (on)
		v->locs[slot / 64] |= 1ull << (slot % 64);
	else
		v->locs[slot / 64] &= ~(1ull << (slot % 64));
}

static bool any(const struct sim_val *v)
{
	for (unsigned i = 0; i < NWORDS; i++)
		if (v->locs[i])
			return true;
	return false;
}

/* Canonical minimum of the simulated locations, optionally skipping one. */
static bool min_slot(const struct sim_val *v, int skip, unsigned *out)
{
	for (unsigned s = 0; s < RSD_NSLOTS; s++)
		if ((int)s != skip && has(v, s)) {
			*out = s;
			return true;
		}
	return false;
}

static const char *keep(struct sim *s, char *str)
{
	char **strs;

	if (!str) {
		s->err = -RSD_ENOMEM;
		return "out of memory";
	}
	strs = rsd__realloc(s->e->strs, (s->e->nstrs + 1) * sizeof(*strs));
	if (!strs) {
		free(str);
		s->err = -RSD_ENOMEM;
		return "out of memory";
	}
	s->e->strs = strs;
	strs[s->e->nstrs++] = str;
	return str;
}

static void fail(struct sim *s, char *dynamic)
{
	if (!s->reason)
		s->reason = keep(s, dynamic);
	else
		free(dynamic);
}

static void fail_static(struct sim *s, const char *text)
{
	if (!s->reason)
		s->reason = text;
}

static char *fmt(const char *f, ...) rsd__printf(1, 2);
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *out = NULL;

	va_start(ap, f);
	if (vasprintf(&out, f, ap) < 0)
		out = NULL;
	va_end(ap);
	return out;
}

static const char *lname(struct rsd_location at, char *buf)
{
	return rsd_location_name(at, buf, RSD_LOCATION_NAME_MAX);
}

/* Runtime validation plus first touch (§10.3 "Preparing a location"). */
static bool prepare(struct sim *s, struct rsd_location at)
{
	const struct rsd_img_loc *il;
	struct rsd__ledger led;
	struct sim_loc *l;
	unsigned slot;

	if (rsd__check_location(s->m, at)) {
		fail(s, rsd__strdup(rsd_last_error()->message));
		return false;
	}
	slot = rsd__loc_slot(at);
	il = rsd__img_loc(s->img, at);
	/* Nothing is planned to or from a lost device's location. */
	if (il && rsd__unlikely(il->acct.failed)) {
		char name[RSD_LOCATION_NAME_MAX];

		fail(s, fmt("%s failed for good (its device was lost) and is quarantined",
			    lname(at, name)));
		return false;
	}
	l = &s->loc[slot];
	if (l->in)
		return true;
	l->in = true;
	if (il) {
		l->has_budget = il->acct.has_budget;
		l->budget = il->acct.budget;
		l->used = il->acct.used;
		l->reserved = il->acct.reserved;
		/* A plan of this thread's (preflight nested in a plan) may use
		 * its own headroom, as its admissions do. */
		led = rsd__acct_ledger(&il->acct, rsd__plan_hold_own(slot));
		l->in_flight = led.in_flight;
		l->held = led.held;
		l->holders = led.holders;
	}
	l->peak = sat_add(l->used, l->reserved);
	s->order[s->nloc++] = (uint8_t)slot;
	return true;
}

static bool add(struct sim *s, struct sim_val *v, struct rsd_location at, bool temporary)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct sim_loc *l;
	uint64_t total;

	if (!prepare(s, at))
		return false;
	l = &s->loc[rsd__loc_slot(at)];
	total = sat_add(sat_add(l->used, l->reserved), v->iv->spec.storage_nbytes);
	if (total > l->peak)
		l->peak = total;
	if (!admits(l, v->iv->spec.storage_nbytes)) {
		if (l->has_budget)
			fail(s, fmt("Transition exceeds budget at %s", lname(at, name)));
		else
			fail(s, fmt("Transition would overflow the byte counters at %s",
				    lname(at, name)));
		return false;
	}
	if (!temporary) {
		l->used = sat_add(l->used, v->iv->spec.storage_nbytes);
		set(v, rsd__loc_slot(at), true);
	}
	return true;
}

static void sim_remove(struct sim *s, struct sim_val *v, unsigned slot)
{
	struct sim_loc *l = &s->loc[slot];

	l->used -= l->used < v->iv->spec.storage_nbytes ? l->used : v->iv->spec.storage_nbytes;
	set(v, slot, false);
}

bool rsd__plan_mat_protected(struct rsd_manager *m, const struct rsd_view *view,
			     const struct rsd_img_value *iv, struct rsd_location at)
{
	struct rsd_prot_counts c;
	uint32_t k, done = 0;

	for (k = 0; k < iv->nmats && !rsd_location_equal(iv->mats[k].loc, at); k++)
		;
	if (k == iv->nmats)
		return false;
	/* A transfer in flight writes it: nothing may take it away. */
	if (iv->mats[k].arriving)
		return true;
	c = rsd__view_mat_prot(view, iv, k);
	if (c.use || c.hold)
		return true;
	if (!c.pending)
		return false;
	const struct rsd_lease_rec *l;

	for (uint64_t i = 0; (l = rsd__ptab_next(&view->img->pending, &i));) {
		bool covers = false, complete = true;

		if (!rsd_location_equal(l->loc, at))
			continue;
		for (size_t j = 0; j < l->n && !covers; j++)
			covers = l->ids[j] == iv->handle.id;
		if (!covers)
			continue;
		for (size_t j = 0; j < l->nevents && complete; j++)
			complete = m->ops->event_query(m->ops_ctx, l->events[j]) == 1;
		done += complete;
	}
	return done < c.pending;
}

static bool is_protected(struct sim *s, const struct sim_val *v, unsigned slot)
{
	return rsd__plan_mat_protected(s->m, s->view, v->iv, rsd__slot_loc(slot));
}

static struct sim_val *value(struct sim *s, const struct rsd_img_value *iv)
{
	const void *key = (const void *)(uintptr_t)iv->handle.id;
	struct sim_val *v;
	size_t i;

	if (rsd__ptrmap_get(&s->val_idx, key, &i))
		return &s->vals[i];
	if (s->nvals == s->capvals) {
		size_t cap = s->capvals ? s->capvals * 2 : 16;

		v = rsd__realloc(s->vals, cap * sizeof(*v));
		if (!v) {
			s->err = rsd__err(RSD_ENOMEM, "out of memory simulating a plan");
			return NULL;
		}
		s->vals = v;
		s->capvals = cap;
	}
	if (rsd__ptrmap_set(&s->val_idx, key, s->nvals)) {
		s->err = rsd__err(RSD_ENOMEM, "out of memory simulating a plan");
		return NULL;
	}
	v = &s->vals[s->nvals++];
	memset(v, 0, sizeof(*v));
	v->id = iv->handle.id;
	v->iv = iv;
	v->has_source = iv->has_source;
	v->source_loc = iv->source_loc;
	v->discarded = iv->discarded;
	for (uint32_t i = 0; i < iv->nmats; i++)
		set(v, rsd__loc_slot(iv->mats[i].loc), true);
	return v;
}

/* Resolution against the image (§2.5); the message becomes the reason. */
static const struct rsd_img_value *resolve(struct sim *s, struct rsd_handle h,
					   enum rsd_action_kind a_kind)
{
	const struct rsd_img_value *iv;

	if (h.manager_id != s->m->id) {
		fail(s, fmt("Handle belongs to manager '%llu', not '%llu'",
			    (unsigned long long)h.manager_id, (unsigned long long)s->m->id));
		return NULL;
	}
	iv = rsd__img_find(s->img, h.id);
	if (!iv || iv->handle.type != h.type) {
		fail_static(s, "Residency handle is unknown");
		return NULL;
	}
	if (iv->discarded) {
		fail(s, fmt("Residency value '%llu' has been discarded", (unsigned long long)h.id));
		return NULL;
	}
	/* Lost with its device (lib/core/devloss.c); a discard still ends it. */
	if (rsd__unlikely(iv->lost) && a_kind != RSD_ACT_DISCARD) {
		char name[RSD_LOCATION_NAME_MAX];

		fail(s, fmt("value %llu was lost with its device: its only copy was at %s",
			    (unsigned long long)h.id, lname(iv->lost_at, name)));
		return NULL;
	}
	return iv;
}

struct outcome {
	bool no_op, has_source, has_dest;
	struct rsd_location source, dest;
};

static void sim_ensure(struct sim *s, struct sim_val *v, const struct rsd_action *a,
		       struct outcome *o)
{
	unsigned d = rsd__loc_slot(a->location), src;
	struct rsd_location from;

	o->has_dest = true;
	o->dest = a->location;
	if (!prepare(s, a->location))
		return;
	if (has(v, d)) {
		o->no_op = true;
		fail_static(s, "destination already resident");
		return;
	}
	if (v->iv->spec.replica_mode == RSD_EXCLUSIVE && any(v)) {
		fail_static(s, "EnsureResident would replicate an EXCLUSIVE value");
		return;
	}
	if (min_slot(v, -1, &src)) {
		from = rsd__slot_loc(src);
	} else if (v->has_source) {
		from = v->source_loc;
	} else {
		fail_static(s, "value has no materialization or source");
		return;
	}
	o->has_source = true;
	o->source = from;
	if (!any(v) && !add(s, v, from, true))
		return;
	add(s, v, a->location, false);
}

static void sim_move(struct sim *s, struct sim_val *v, const struct rsd_action *a,
		     struct outcome *o)
{
	char name[RSD_LOCATION_NAME_MAX];
	unsigned to = rsd__loc_slot(a->location), slot;
	bool src_resident;

	o->has_dest = true;
	o->dest = a->location;
	if (!prepare(s, a->location)) {
		/* Parity: the reported source is the registered one. */
		o->has_source = v->has_source;
		o->source = v->source_loc;
		return;
	}
	if (a->has_from) {
		o->has_source = true;
		o->source = a->from;
		if (!prepare(s, a->from))
			return;
		if (!has(v, rsd__loc_slot(a->from))) {
			fail(s, fmt("explicit source %s is not resident", lname(a->from, name)));
			return;
		}
	} else if (any(v)) {
		o->has_source = min_slot(v, (int)to, &slot);
		if (o->has_source)
			o->source = rsd__slot_loc(slot);
	} else {
		o->has_source = v->has_source;
		o->source = v->source_loc;
	}
	src_resident = o->has_source && has(v, rsd__loc_slot(o->source));
	if (has(v, to)) {
		if (!o->has_source || rsd_location_equal(o->source, a->location)) {
			o->no_op = true;
			fail_static(s, "destination already owns the selected replica");
		} else if (is_protected(s, v, rsd__loc_slot(o->source))) {
			fail(s, fmt("source %s is protected", lname(o->source, name)));
		} else {
			sim_remove(s, v, rsd__loc_slot(o->source));
		}
		return;
	}
	if (!o->has_source) {
		fail_static(s, "value has no materialization or source");
		return;
	}
	if (src_resident && is_protected(s, v, rsd__loc_slot(o->source))) {
		fail(s, fmt("source %s is protected", lname(o->source, name)));
		return;
	}
	if (!src_resident && !add(s, v, o->source, true))
		return;
	if (!add(s, v, a->location, false))
		return;
	if (src_resident)
		sim_remove(s, v, rsd__loc_slot(o->source));
}

static void sim_drop(struct sim *s, struct sim_val *v, const struct rsd_action *a,
		     struct outcome *o)
{
	char name[RSD_LOCATION_NAME_MAX];
	unsigned x = rsd__loc_slot(a->location), other;

	o->has_source = true;
	o->source = a->location;
	if (!prepare(s, a->location))
		return;
	if (!has(v, x)) {
		o->no_op = true;
		fail_static(s, "materialization already absent");
		return;
	}
	if (is_protected(s, v, x)) {
		fail(s, fmt("materialization at %s is protected", lname(a->location, name)));
		return;
	}
	if (!min_slot(v, (int)x, &other) && !v->has_source) {
		fail_static(s, "cannot drop final MUST_PRESERVE materialization");
		return;
	}
	sim_remove(s, v, x);
}

static void sim_discard(struct sim *s, struct sim_val *v)
{
	char list[4096], repr[128];
	size_t off = 0;
	bool first = true;

	for (unsigned slot = 0; slot < RSD_NSLOTS; slot++) {
		if (!has(v, slot) || !is_protected(s, v, slot))
			continue;
		rsd__loc_repr(rsd__slot_loc(slot), repr, sizeof(repr));
		off += (size_t)snprintf(list + off, off < sizeof(list) ? sizeof(list) - off : 0,
					"%s%s", first ? "" : ", ", repr);
		first = false;
	}
	if (!first) {
		fail(s, fmt("discarded value has protected locations [%s]", list));
		return;
	}
	for (unsigned slot = 0; slot < RSD_NSLOTS; slot++)
		if (has(v, slot))
			sim_remove(s, v, slot);
	v->discarded = true;
	v->has_source = false;
}

/*
 * Whether v's materialization at `at` is one the published state shows
 * arriving (a transfer in flight, or a queued copy still filling it). The
 * simulation never removes such a one (it is protected), so it is still
 * that materialization whenever v is simulated resident there.
 */
static bool arriving_at(const struct sim_val *v, struct rsd_location at)
{
	if (!has(v, rsd__loc_slot(at)))
		return false;
	for (uint32_t k = 0; k < v->iv->nmats; k++)
		if (rsd_location_equal(v->iv->mats[k].loc, at))
			return v->iv->mats[k].arriving;
	return false;
}

/* One action; returns false when the simulation must stop. */
static bool sim_action(struct sim *s, const struct rsd_action *a, struct rsd_action_explanation *x)
{
	const struct rsd_img_value *iv;
	struct outcome o;
	struct sim_val *v;

	memset(x, 0, sizeof(*x));
	memset(&o, 0, sizeof(o));
	x->action = *a;
	s->reason = NULL;
	iv = resolve(s, a->handle, a->kind);
	if (!iv)
		goto out;
	v = value(s, iv);
	if (!v)
		return false;
	if (v->discarded) {
		fail(s, fmt("Value '%llu' is discarded", (unsigned long long)v->id));
		goto out;
	}
	x->logical_nbytes = iv->spec.logical_nbytes;
	x->storage_nbytes = iv->spec.storage_nbytes;
	switch (a->kind) {
	case RSD_ACT_ENSURE:
		sim_ensure(s, v, a, &o);
		break;
	case RSD_ACT_MOVE:
		sim_move(s, v, a, &o);
		break;
	case RSD_ACT_DROP:
		sim_drop(s, v, a, &o);
		break;
	case RSD_ACT_DISCARD:
		sim_discard(s, v);
		break;
	}
	x->no_op = o.no_op;
	x->has_source = o.has_source;
	x->source = o.source;
	x->has_destination = o.has_dest;
	x->destination = o.dest;
	x->source_arriving = o.has_source && arriving_at(v, o.source);
	x->destination_arriving = o.has_dest && arriving_at(v, o.dest);
out:
	x->reason = s->reason;
	x->executable = !s->reason || x->no_op;
	return x->executable;
}

static bool sim_reservation(struct sim *s, const struct rsd_reservation_spec *r)
{
	char name[RSD_LOCATION_NAME_MAX], *label;
	struct sim_loc *l;
	uint64_t total;
	size_t len;
	bool fits;

	s->reason = NULL;
	if (!prepare(s, r->location))
		return false;
	l = &s->loc[rsd__loc_slot(r->location)];
	total = sat_add(sat_add(l->used, l->reserved), r->nbytes);
	fits = admits(l, r->nbytes);
	l->reserved = sat_add(l->reserved, r->nbytes);
	if (total > l->peak)
		l->peak = total;
	if (!fits) {
		/* Worst case every byte becomes \xNN: the reason is a data
		 * field and must not be cut. */
		len = strlen(r->label) * 4 + 3;
		label = rsd__malloc(len);
		fail(s, label ? fmt("Reservation %s exceeds budget at %s",
				    rsd__quote(r->label, label, len), lname(r->location, name)) :
				NULL);
		free(label);
		return false;
	}
	return true;
}

void rsd_explanation_free(struct rsd_explanation *pub)
{
	struct explanation *e = (struct explanation *)pub;

	if (!e)
		return;
	for (size_t i = 0; i < e->nstrs; i++)
		free(e->strs[i]);
	free(e->strs);
	free(e->acts);
	free(e->resv);
	free(e->peaks);
	free(e->plan_name);
	free(e);
}

int rsd__plan_simulate(struct rsd_manager *m, const struct rsd_view *view, const struct rsd_plan *p,
		       struct rsd_explanation **out)
{
	size_t nacts = p->nreclaim + p->nenter + p->nexit, k = 0;
	const struct rsd_image *img = view->img;
	struct sim *s;
	struct explanation *e;
	bool ok = true;
	int err = 0;

	s = rsd__calloc(1, sizeof(*s));
	e = rsd__calloc(1, sizeof(*e));
	if (!s || !e || !(e->plan_name = rsd__strdup(p->name)) ||
	    !(e->acts = rsd__calloc(nacts ? nacts : 1, sizeof(*e->acts))) ||
	    !(e->resv = rsd__calloc(p->nreservations ? p->nreservations : 1, sizeof(*e->resv)))) {
		err = rsd__err(RSD_ENOMEM, "out of memory explaining plan '%s'", p->name);
		goto out;
	}
	s->m = m;
	s->img = img;
	s->view = view;
	s->e = e;
	/* Known locations first, registry order, with their current charge
	 * (not a location only a transfer in flight is bringing a copy to:
	 * it is first touched like any other). */
	for (uint32_t i = 0; i < img->nlocs && img->locs[i].acct.known; i++)
		prepare(s, img->locs[i].loc);
	for (size_t i = 0; i < p->nreservations; i++) {
		e->resv[i] = p->reservations[i];
		e->resv[i].label = keep(s, rsd__strdup(p->reservations[i].label));
	}
	for (size_t i = 0; i < p->nreclaim && ok; i++)
		ok = sim_action(s, &p->reclaim[i], &e->acts[k++]);
	for (size_t i = 0; i < p->nreservations && ok; i++)
		ok = sim_reservation(s, &p->reservations[i]);
	for (size_t i = 0; i < p->nenter && ok; i++)
		ok = sim_action(s, &p->enter[i], &e->acts[k++]);
	for (size_t i = 0; i < p->nexit && ok; i++)
		ok = sim_action(s, &p->exit[i], &e->acts[k++]);
	if (s->err) {
		err = rsd__err(RSD_ENOMEM, "out of memory explaining plan '%s'", p->name);
		goto out;
	}
	e->peaks = rsd__calloc(s->nloc ? s->nloc : 1, sizeof(*e->peaks));
	if (!e->peaks) {
		err = rsd__err(RSD_ENOMEM, "out of memory explaining plan '%s'", p->name);
		goto out;
	}
	for (unsigned i = 0; i < s->nloc; i++) {
		e->peaks[i].location = rsd__slot_loc(s->order[i]);
		e->peaks[i].nbytes = s->loc[s->order[i]].peak;
	}
	e->pub.plan_name = e->plan_name;
	e->pub.nactions = k;
	e->pub.actions = e->acts;
	e->pub.nreservations = p->nreservations;
	e->pub.reservations = e->resv;
	e->pub.npeaks = s->nloc;
	e->pub.predicted_peak_bytes = e->peaks;
	e->pub.feasible = ok;
	e->pub.reason = ok ? NULL : s->reason;
	*out = &e->pub;
	e = NULL;
out:
	rsd_explanation_free(e ? &e->pub : NULL);
	if (s) {
		free(s->vals);
		rsd__ptrmap_free(&s->val_idx);
	}
	free(s);
	return err;
}
