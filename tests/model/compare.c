// SPDX-License-Identifier: MIT
/*
 * Reports and snapshot state against the model (compare.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compare.h"

static bool mc_fail(char *why, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool mc_fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return false;
}

static bool loc_eq(bool ha, struct rsd_location a, bool hb, struct rsd_location b)
{
	return ha == hb && (!ha || rsd_location_equal(a, b));
}

bool mc_report(const char *what, const struct rsd_transition *got, const struct rsd_transition *exp,
	       const struct mact *a, struct rsd_handle h, char *why, size_t len)
{
	if (got->action.kind != a->kind || !rsd_handle_equal(got->action.handle, h))
		return mc_fail(why, len, "%s: report action kind/handle differ", what);
	if (a->kind != RSD_ACT_DISCARD && !rsd_location_equal(got->action.location, ml_loc(a->loc)))
		return mc_fail(why, len, "%s: report action location differs", what);
	if (a->kind == RSD_ACT_MOVE &&
	    !loc_eq(got->action.has_from, got->action.from, a->has_from, ml_loc(a->from)))
		return mc_fail(why, len, "%s: report action from differs", what);
	if (got->no_op != exp->no_op)
		return mc_fail(why, len, "%s: report no_op %d, model %d", what, got->no_op,
			       exp->no_op);
	if (!loc_eq(got->has_source, got->source, exp->has_source, exp->source))
		return mc_fail(why, len, "%s: report source %s, model %s", what,
			       got->has_source ? ml_name(ml_from_loc(got->source)) : "absent",
			       exp->has_source ? ml_name(ml_from_loc(exp->source)) : "absent");
	if (!loc_eq(got->has_destination, got->destination, exp->has_destination, exp->destination))
		return mc_fail(why, len, "%s: report destination differs", what);
	if (got->logical_nbytes != exp->logical_nbytes ||
	    got->storage_nbytes != exp->storage_nbytes)
		return mc_fail(why, len, "%s: report bytes %llu/%llu, model %llu/%llu", what,
			       (unsigned long long)got->logical_nbytes,
			       (unsigned long long)got->storage_nbytes,
			       (unsigned long long)exp->logical_nbytes,
			       (unsigned long long)exp->storage_nbytes);
	if ((got->reason == NULL) != (exp->reason == NULL) ||
	    (got->reason && strcmp(got->reason, exp->reason)))
		return mc_fail(why, len, "%s: report reason '%s', model '%s'", what,
			       got->reason ? got->reason : "(null)",
			       exp->reason ? exp->reason : "(null)");
	if (got->completed_at_ns < got->started_at_ns)
		return mc_fail(why, len, "%s: completed_at_ns before started_at_ns", what);
	return true;
}

static bool value_eq(const struct model *md, int v, struct rsd_handle h,
		     const struct rsd_value_snapshot *g, char *why, size_t len)
{
	const struct mval *x = &md->val[v];
	int k = 0;

	if (!rsd_handle_equal(g->handle, h))
		return mc_fail(why, len, "snapshot value %d: handle differs", v);
	if (g->spec.logical_nbytes != x->logical || g->spec.storage_nbytes != x->charge ||
	    g->spec.replica_mode != x->mode ||
	    g->spec.recoverability != (x->ever_source ? RSD_RECONSTRUCTIBLE : RSD_MUST_PRESERVE))
		return mc_fail(why, len, "snapshot value %d: spec differs", v);
	if (g->has_source != x->has_source ||
	    !loc_eq(g->has_source_location, g->source_location, x->has_source,
		    ml_loc(x->src_loc)) ||
	    g->discarded != x->discarded)
		return mc_fail(why, len,
			       "snapshot value %d: source/discarded differ (got %d/%d/%d)", v,
			       g->has_source, g->has_source_location, g->discarded);
	for (size_t i = 0; i < g->nmaterializations; i++) {
		const struct rsd_materialization_snapshot *m = &g->materializations[i];
		const struct mmat *e = &x->mat[k];

		if (m->arriving)
			return mc_fail(why, len, "snapshot value %d mat %zu: arriving", v, i);
		if (k++ >= x->nmat)
			break;
		if (!rsd_location_equal(m->location, ml_loc(e->loc)))
			return mc_fail(why, len, "snapshot value %d mat %d: at %s, model %s", v,
				       k - 1, ml_name(ml_from_loc(m->location)), ml_name(e->loc));
		if (m->logical_nbytes != x->logical || m->charged_nbytes != x->charge ||
		    m->storage_nbytes != x->logical)
			return mc_fail(why, len, "snapshot value %d mat %d: bytes %llu/%llu/%llu",
				       v, k - 1, (unsigned long long)m->logical_nbytes,
				       (unsigned long long)m->storage_nbytes,
				       (unsigned long long)m->charged_nbytes);
		if (m->use_count != e->use || m->hold_count != e->hold ||
		    m->pending_event_count != e->pend)
			return mc_fail(
				why, len,
				"snapshot value %d mat %s: use/hold/pending %llu/%llu/%llu, model %u/%u/%u",
				v, ml_name(e->loc), (unsigned long long)m->use_count,
				(unsigned long long)m->hold_count,
				(unsigned long long)m->pending_event_count, e->use, e->hold,
				e->pend);
	}
	if (k != x->nmat)
		return mc_fail(why, len,
			       "snapshot value %d: %d resident materializations, model %d", v, k,
			       x->nmat);
	return true;
}

static bool location_eq(const struct model *md, int l, const struct rsd_location_snapshot *g,
			unsigned flags, char *why, size_t len)
{
	const struct mlocrec *r = &md->loc[l];
	bool conc = flags & MC_CONCURRENT;
	uint64_t nv = 0, nr = 0;

	for (int v = 0; v < md->nval; v++)
		for (int i = 0; i < md->val[v].nmat; i++)
			nv += md->val[v].mat[i].loc == l;
	for (int i = 0; i < MM_LIFETIMES; i++)
		nr += md->resv[i].live && md->resv[i].active && md->resv[i].loc == l;
	if (g->has_budget != r->has_budget || (r->has_budget && g->budget_bytes != r->budget))
		return mc_fail(why, len, "snapshot %s: budget differs", ml_name(l));
	if (g->used_bytes != r->used || g->reserved_bytes != r->reserved ||
	    (conc ? g->peak_used_bytes < r->peak_used : g->peak_used_bytes != r->peak_used) ||
	    (conc ? g->peak_charged_bytes < r->peak_charged :
		    g->peak_charged_bytes != r->peak_charged) ||
	    (conc && r->has_budget &&
	     (g->peak_used_bytes > r->budget || g->peak_charged_bytes > r->budget)))
		return mc_fail(
			why, len,
			"snapshot %s: used/reserved/peak_used/peak_charged %llu/%llu/%llu/%llu, model %llu/%llu/%llu/%llu",
			ml_name(l), (unsigned long long)g->used_bytes,
			(unsigned long long)g->reserved_bytes,
			(unsigned long long)g->peak_used_bytes,
			(unsigned long long)g->peak_charged_bytes, (unsigned long long)r->used,
			(unsigned long long)r->reserved, (unsigned long long)r->peak_used,
			(unsigned long long)r->peak_charged);
	if (g->value_count != nv || g->reservation_count != nr)
		return mc_fail(why, len, "snapshot %s: value/reservation counts differ",
			       ml_name(l));
	return true;
}

bool mc_state(const struct model *md, const struct rsd_handle *h, const struct rsd_snapshot *s,
	      unsigned flags, char *why, size_t len)
{
	size_t k = 0;

	if (s->nvalues != (size_t)md->nval)
		return mc_fail(why, len, "snapshot: %zu values, model %d", s->nvalues, md->nval);
	for (int v = 0; v < md->nval; v++)
		if (!value_eq(md, v, h[v], &s->values[v], why, len))
			return false;
	if (s->nlocations != (size_t)md->nknown)
		return mc_fail(why, len, "snapshot: %zu locations, model %d", s->nlocations,
			       md->nknown);
	for (int i = 0; i < md->nknown; i++) {
		if (!rsd_location_equal(s->locations[i].location, ml_loc(md->known[i])))
			return mc_fail(why, len, "snapshot location %d is %s, model %s", i,
				       ml_name(ml_from_loc(s->locations[i].location)),
				       ml_name(md->known[i]));
		if (!location_eq(md, md->known[i], &s->locations[i], flags, why, len))
			return false;
	}
	for (uint64_t o = 1; o <= md->order; o++)
		for (int i = 0; i < MM_LIFETIMES; i++) {
			const struct mresv *r = &md->resv[i];
			const struct rsd_reservation_snapshot *g;

			if (!r->live || !r->active || r->order != o)
				continue;
			if (k >= s->nreservations)
				return mc_fail(why, len, "snapshot lacks reservation %s", r->label);
			g = &s->reservations[k++];
			if (!rsd_location_equal(g->location, ml_loc(r->loc)) ||
			    g->nbytes != r->nbytes || strcmp(g->label, r->label))
				return mc_fail(why, len, "snapshot reservation %zu differs (%s)",
					       k - 1, g->label);
		}
	if (k != s->nreservations)
		return mc_fail(why, len, "snapshot has %zu reservations, model %zu",
			       s->nreservations, k);
	return true;
}
