// SPDX-License-Identifier: MIT
/*
 * Prefetching as far ahead as the budget allows (RSD_CTRL_LOOKAHEAD,
 * Documentation/controller.md, "Looking ahead"). After a not-waiting use
 * under the next-use policy with a declared schedule, the controller
 * walks the schedule from its position and queues a copy to the use's
 * device for every upcoming value not there yet, nearest next use first,
 * while each fits: in the free budget, or in room made by the very drop
 * Belady's rule would make when that value is used (the held value whose
 * next use from then on is farthest), made now instead of then. So the
 * copy engine works through known future uses while this one's kernel
 * runs, and the bytes brought are those of the next-use policy without
 * looking ahead: the evictions are the same, only earlier.
 *
 * What must stay stays: when that victim is leased, held, arriving or
 * waiting for a released lease's event (an earlier queued use's kernel
 * still reads it), used before the incoming value, or the only copy of a
 * value with a source or of an exclusive one, the walk stops there, to go
 * on after a later use; so does it at the first value that does not fit,
 * and a later, smaller value never overtakes a nearer one.
 *
 * Writing back ahead: a victim that is the value's only copy (replicable,
 * no source: its eviction would be a spill) and is otherwise free to go
 * gets a copy on the host now, on the device-to-host engine, to the first
 * host location the policy would spill it to that has room; its eviction
 * later, at its use or at a later walk, is then a drop. Its room is not
 * free until that copy lands, so from there on the walk queues no more
 * copies to the device: it only goes on naming the victims of the
 * following values, replicas counted as gone and sole copies written
 * back, in the same order and under the same stops. Every choice is a
 * function of the schedule position and the published state:
 * deterministic.
 *
 * It is best effort: the use has succeeded when it runs, a failed drop or
 * copy ends the walk, and the caller's last error is left as it was.
 */
#include <stdlib.h>
#include <string.h>

#include "ctrl.h"

/* An upcoming value: its handle and steps to its next use. */
struct la_next {
	struct rsd_handle h;
	uint64_t d;
};

/* A materialization at the device, or one this walk queued. */
struct la_held {
	struct rsd_handle h;
	uint64_t charge;
	bool droppable; /* an unprotected replica, resident */
	bool sole;	/* an unprotected sole copy a host copy keeps: written back */
	bool gone;
	bool has_nu; /* nu: its next use at or after the incoming one's */
	uint64_t nu;
	bool sooner; /* it is used before the incoming value */
};

/* The first CUDA location of the request; false when it has none. */
static bool la_device(const struct rsd_request *r, struct rsd_location *at)
{
	for (size_t i = 0; i < r->nrequirements; i++)
		if (r->requirements[i].location.kind == RSD_CUDA) {
			*at = r->requirements[i].location;
			return true;
		}
	return false;
}

static bool la_seen(const struct la_next *n, size_t k, uint64_t id)
{
	for (size_t i = 0; i < k; i++)
		if (n[i].h.id == id)
			return true;
	return false;
}

/*
 * The distinct values of the next RSD__LOOKAHEAD_STEPS steps from the
 * position, in order of first use (the request's own handles left out:
 * the use brought them). Caller holds c->lock.
 */
static size_t la_upcoming(struct rsd_controller *c, const struct rsd_request *r,
			  const struct rsd_snapshot *s, struct la_next *out, size_t cap)
{
	const struct rsd__sched *sc = &c->sched;
	size_t n = 0;

	for (uint32_t k = 0; k < RSD__LOOKAHEAD_STEPS && k < sc->nsteps && n < cap; k++) {
		uint32_t st = sc->pos + k;

		if (st >= sc->nsteps) {
			if (!sc->cyclic)
				break;
			st -= sc->nsteps;
		}
		for (uint32_t j = sc->off[st]; j < sc->off[st + 1] && n < cap; j++) {
			uint64_t id = sc->ids[j];
			bool mine = false;

			for (size_t q = 0; q < r->nrequirements; q++)
				mine |= r->requirements[q].handle.id == id;
			if (mine || la_seen(out, n, id))
				continue;
			/* the handle's type comes from the snapshot */
			for (size_t v = 0; v < s->nvalues; v++)
				if (s->values[v].handle.id == id && !s->values[v].discarded) {
					out[n++] = (struct la_next){ s->values[v].handle, k };
					break;
				}
		}
	}
	return n;
}

static const struct rsd_materialization_snapshot *la_at(const struct rsd_value_snapshot *v,
							struct rsd_location at)
{
	for (size_t i = 0; i < v->nmaterializations; i++)
		if (rsd_location_equal(v->materializations[i].location, at))
			return &v->materializations[i];
	return NULL;
}

static const struct rsd_value_snapshot *la_value(const struct rsd_snapshot *s, uint64_t id)
{
	for (size_t v = 0; v < s->nvalues; v++)
		if (s->values[v].handle.id == id)
			return &s->values[v];
	return NULL;
}

/* Every materialization at `at`; n fits s->nvalues. */
static size_t la_held(const struct rsd_snapshot *s, struct rsd_location at, struct la_held *out)
{
	size_t n = 0;

	for (size_t v = 0; v < s->nvalues; v++) {
		const struct rsd_value_snapshot *vs = &s->values[v];
		const struct rsd_materialization_snapshot *ms = la_at(vs, at);

		bool free;

		if (!ms)
			continue;
		free = !ms->arriving && !ms->use_count && !ms->hold_count &&
		       !ms->pending_event_count;
		out[n++] = (struct la_held){
			.h = vs->handle,
			.charge = ms->charged_nbytes,
			.droppable = vs->nmaterializations > 1 && free,
			.sole = vs->nmaterializations == 1 && free && !vs->has_source &&
				!vs->lost && vs->spec.replica_mode == RSD_REPLICABLE,
		};
	}
	return n;
}

/* Is a a better victim than b: used farther on (none: farthest), then one
 * that can be dropped now, then the lower id. */
static bool la_before(const struct la_held *a, const struct la_held *b)
{
	if (a->has_nu != b->has_nu)
		return !a->has_nu;
	if (a->has_nu && a->nu != b->nu)
		return a->nu > b->nu;
	if ((a->droppable && !a->sooner) != (b->droppable && !b->sooner))
		return a->droppable && !a->sooner;
	return a->h.id < b->h.id;
}

/*
 * What Belady's rule would evict when the incoming value is used at step
 * st, d steps from the position: the held value whose next use at or after
 * st is farthest (none is farthest of all; among equals, one that can be
 * dropped now). One used before st (sooner) cannot be dropped now: the
 * walk stops there. Caller holds c->lock.
 */
static struct la_held *la_victim(struct rsd_controller *c, struct la_held *held, size_t n,
				 uint32_t st, uint64_t d)
{
	struct la_held *best = NULL;

	for (size_t i = 0; i < n; i++) {
		struct la_held *x = &held[i];
		const struct rsd__meta *md = rsd__meta_find(c, x->h.id);
		uint64_t first;

		if (x->gone)
			continue;
		/* used before then: Belady's rule may drop it at that use,
		 * never now */
		x->sooner = rsd__sched_next_use(c, md, c->sched.pos, &first) && first < d;
		x->has_nu = rsd__sched_next_use(c, md, st, &x->nu);
		if (!best || la_before(x, best))
			best = x;
	}
	return best;
}

/* Room at `at` from the snapshot: what its budget has left (UINT64_MAX
 * without a budget, with false). */
static bool la_room(const struct rsd_snapshot *s, struct rsd_location at, uint64_t *room)
{
	*room = UINT64_MAX;
	for (size_t i = 0; i < s->nlocations; i++)
		if (rsd_location_equal(s->locations[i].location, at)) {
			if (!s->locations[i].has_budget)
				return false;
			*room = s->locations[i].remaining_budget_bytes;
			return true;
		}
	return false;
}

/* The host room this walk's write-backs have left, per host kind. */
struct la_host {
	uint64_t room[2]; /* pageable, pinned */
	bool known[2];
};

/*
 * Write x, the value's only copy, back to the first host location the
 * policy would spill it from `at` to that has room for it; false when
 * there is none or the copy cannot be queued. Caller holds c->lock.
 */
static bool la_write_back(struct rsd_controller *c, struct rsd_location at,
			  const struct rsd_snapshot *s, struct la_host *hr, const struct la_held *x)
{
	const struct rsd_value_snapshot *vs = la_value(s, x->h.id);
	const struct rsd_policy *p = c->policy;
	struct rsd_location to[RSD_NSLOTS];
	size_t k = p->ops->fallback_locations(p->ctx, at, to, RSD_NSLOTS);

	for (size_t i = 0; vs && i < k && i < RSD_NSLOTS; i++) {
		uint64_t need = vs->spec.storage_nbytes;
		int j;

		if (to[i].kind != RSD_PAGEABLE_HOST && to[i].kind != RSD_PINNED_HOST)
			continue;
		j = to[i].kind == RSD_PINNED_HOST;
		if (!hr->known[j]) {
			la_room(s, to[i], &hr->room[j]);
			hr->known[j] = true;
		}
		if (hr->room[j] < need)
			continue;
		if (rsd_ensure_async(c->m, x->h, to[i], NULL, NULL))
			return false;
		if (hr->room[j] != UINT64_MAX)
			hr->room[j] -= need;
		return true;
	}
	return false;
}

/*
 * Make room for a value of need bytes used d steps on (at step st) from
 * the victims Belady's rule takes there: replicas dropped (filling) or
 * counted as gone, sole copies written back (filling ends: their room
 * comes later). false at a victim that must stay. Caller holds c->lock.
 */
static bool la_make_room(struct rsd_controller *c, struct rsd_location at,
			 const struct rsd_snapshot *s, struct la_held *held, size_t nheld,
			 struct la_host *hr, uint32_t st, uint64_t d, uint64_t need, uint64_t *room,
			 bool *filling)
{
	while (*room < need) {
		struct la_held *x = la_victim(c, held, nheld, st, d);

		if (!x || x->sooner)
			return false;
		if (x->droppable) {
			if (*filling && rsd_drop(c->m, x->h, at, NULL))
				return false;
		} else if (!x->sole || !la_write_back(c, at, s, hr, x)) {
			return false;
		} else {
			*filling = false;
		}
		x->gone = true;
		*room += x->charge;
	}
	return true;
}

/*
 * Bring the upcoming values in, nearest first, while each fits; room is
 * made only by the drop Belady's rule would make at the value's use, and
 * only when that drop can be made now; sole copies among those victims
 * are written back, after which the walk only names victims. held has
 * room for one more entry per upcoming value. Caller holds c->lock.
 */
static void la_fill(struct rsd_controller *c, struct rsd_location at, const struct rsd_snapshot *s,
		    const struct la_next *up, size_t nup, struct la_held *held, size_t nheld,
		    uint64_t room)
{
	struct la_host hr = { { 0, 0 }, { false, false } };
	bool filling = true;

	for (size_t i = 0; i < nup; i++) {
		const struct rsd_value_snapshot *vs = la_value(s, up[i].h.id);
		uint32_t st = (uint32_t)((c->sched.pos + up[i].d) % c->sched.nsteps);
		uint64_t need;

		if (!vs || la_at(vs, at))
			continue; /* there, or arriving */
		if (!vs->nmaterializations)
			return; /* a load: not a copy the engine can run ahead */
		need = vs->spec.storage_nbytes;
		if (!la_make_room(c, at, s, held, nheld, &hr, st, up[i].d, need, &room, &filling))
			return;
		if (filling && rsd_ensure_async(c->m, up[i].h, at, NULL, NULL))
			return;
		room -= need;
		/* there (or, past a write-back, counted there) from now on */
		held[nheld++] = (struct la_held){ .h = up[i].h, .charge = need };
	}
}

void rsd__lookahead(struct rsd_controller *c, const struct rsd_request *r)
{
	struct rsd_error saved = *rsd_last_error();
	struct la_held *held = NULL;
	struct la_next *up = NULL;
	struct rsd_snapshot *s = NULL;
	struct rsd_location at;
	size_t nup = 0, nheld = 0;
	uint64_t room;

	if (!la_device(r, &at))
		return;
	pthread_mutex_lock(&c->lock);
	if (!(c->flags & RSD_CTRL_LOOKAHEAD) || !c->sched.nsteps || !rsd__next_use_cmp(c->policy)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (rsd_snapshot_take(c->m, &s) || !la_room(s, at, &room))
		goto unlock;
	up = calloc(RSD__LOOKAHEAD_STEPS, sizeof(*up));
	held = calloc(s->nvalues + RSD__LOOKAHEAD_STEPS, sizeof(*held));
	if (!up || !held)
		goto unlock;
	nup = la_upcoming(c, r, s, up, RSD__LOOKAHEAD_STEPS);
	nheld = la_held(s, at, held);
	/* The controller's lock is recursive and held across manager calls
	 * as a decision holds it; the manager never calls back. */
	la_fill(c, at, s, up, nup, held, nheld, room);
unlock:
	pthread_mutex_unlock(&c->lock);
	free(up);
	free(held);
	rsd_snapshot_free(s);
	*rsd__err_record() = saved;
}
