// SPDX-License-Identifier: MIT
/*
 * Snapshot invariants that need no model: accounting sums, budgets, peaks,
 * must-preserve values, uniqueness (reference.md §3.2, §7.2, §14.6).
 */
#include <stdio.h>
#include <string.h>

#include "interp.h"

#define FAIL(...)                                \
	do {                                     \
		snprintf(why, len, __VA_ARGS__); \
		return false;                    \
	} while (0)

bool ip_snapshot_invariants(const struct rsd_snapshot *s, char *why, size_t len)
{
	char n[RSD_LOCATION_NAME_MAX];

	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];
		uint64_t used = 0, resv = 0, nval = 0, nres = 0, use = 0, hold = 0, pend = 0;

		rsd_location_name(l->location, n, sizeof(n));
		for (size_t j = 0; j < i; j++)
			if (rsd_location_equal(s->locations[j].location, l->location))
				FAIL("location %s listed twice", n);
		for (size_t v = 0; v < s->nvalues; v++)
			for (size_t k = 0; k < s->values[v].nmaterializations; k++) {
				const struct rsd_materialization_snapshot *m =
					&s->values[v].materializations[k];

				if (!rsd_location_equal(m->location, l->location))
					continue;
				used += m->charged_nbytes;
				nval++;
				use += m->use_count;
				hold += m->hold_count;
				pend += m->pending_event_count;
			}
		for (size_t r = 0; r < s->nreservations; r++)
			if (rsd_location_equal(s->reservations[r].location, l->location)) {
				resv += s->reservations[r].nbytes;
				nres++;
			}
		if (l->used_bytes != used)
			FAIL("%s: used_bytes %llu != sum of charges %llu", n,
			     (unsigned long long)l->used_bytes, (unsigned long long)used);
		if (l->reserved_bytes != resv)
			FAIL("%s: reserved_bytes %llu != sum of reservations %llu", n,
			     (unsigned long long)l->reserved_bytes, (unsigned long long)resv);
		if (l->value_count != nval || l->reservation_count != nres)
			FAIL("%s: value_count %llu/%llu reservation_count %llu/%llu", n,
			     (unsigned long long)l->value_count, (unsigned long long)nval,
			     (unsigned long long)l->reservation_count, (unsigned long long)nres);
		if (l->use_count != use || l->hold_count != hold || l->pending_event_count != pend)
			FAIL("%s: use/hold/pending %llu/%llu/%llu, materializations say %llu/%llu/%llu",
			     n, (unsigned long long)l->use_count, (unsigned long long)l->hold_count,
			     (unsigned long long)l->pending_event_count, (unsigned long long)use,
			     (unsigned long long)hold, (unsigned long long)pend);
		if (l->peak_used_bytes < l->used_bytes)
			FAIL("%s: peak_used below used", n);
		if (l->peak_charged_bytes < l->peak_used_bytes ||
		    l->peak_charged_bytes < l->used_bytes + l->reserved_bytes)
			FAIL("%s: peak_charged %llu below peak_used %llu or used+reserved", n,
			     (unsigned long long)l->peak_charged_bytes,
			     (unsigned long long)l->peak_used_bytes);
		if (l->has_budget) {
			/* Every term admission sums (the ledger). */
			uint64_t taken = l->used_bytes + l->reserved_bytes + l->in_flight_bytes +
					 l->plan_held_bytes;

			if (taken > l->budget_bytes)
				FAIL("%s: budget %llu exceeded: used %llu reserved %llu in flight %llu held %llu",
				     n, (unsigned long long)l->budget_bytes,
				     (unsigned long long)l->used_bytes,
				     (unsigned long long)l->reserved_bytes,
				     (unsigned long long)l->in_flight_bytes,
				     (unsigned long long)l->plan_held_bytes);
			if (l->peak_charged_bytes > l->budget_bytes)
				FAIL("%s: peak_charged %llu above budget %llu", n,
				     (unsigned long long)l->peak_charged_bytes,
				     (unsigned long long)l->budget_bytes);
			if (l->remaining_budget_bytes != l->budget_bytes - taken)
				FAIL("%s: remaining_budget_bytes wrong", n);
		}
		if (l->location.kind != RSD_CUDA && l->has_allocator)
			FAIL("%s: host location with allocator metrics", n);
	}
	for (size_t v = 0; v < s->nvalues; v++) {
		const struct rsd_value_snapshot *x = &s->values[v];

		for (size_t w = 0; w < v; w++)
			if (rsd_handle_equal(s->values[w].handle, x->handle) ||
			    s->values[w].handle.id == x->handle.id)
				FAIL("handle id %llu listed twice",
				     (unsigned long long)x->handle.id);
		if (x->handle.id == 0 || x->handle.manager_id != s->manager_id)
			FAIL("value %zu: bad handle", v);
		if (x->has_source != x->has_source_location)
			FAIL("value %llu: has_source != has_source_location",
			     (unsigned long long)x->handle.id);
		if (x->discarded && (x->has_source || x->nmaterializations))
			FAIL("discarded value %llu keeps a source or materializations",
			     (unsigned long long)x->handle.id);
		if (!x->discarded && x->spec.recoverability == RSD_MUST_PRESERVE &&
		    !x->nmaterializations)
			FAIL("must-preserve value %llu has no materialization",
			     (unsigned long long)x->handle.id);
		if (x->spec.replica_mode == RSD_EXCLUSIVE && x->nmaterializations > 1)
			FAIL("exclusive value %llu has %zu materializations",
			     (unsigned long long)x->handle.id, x->nmaterializations);
		for (size_t k = 0; k < x->nmaterializations; k++) {
			const struct rsd_materialization_snapshot *m = &x->materializations[k];

			for (size_t j = 0; j < k; j++)
				if (rsd_location_equal(x->materializations[j].location,
						       m->location))
					FAIL("value %llu: two materializations at one location",
					     (unsigned long long)x->handle.id);
			if (m->charged_nbytes != x->spec.storage_nbytes ||
			    m->logical_nbytes != x->spec.logical_nbytes ||
			    m->charged_nbytes < m->storage_nbytes)
				FAIL("value %llu: materialization bytes %llu/%llu/%llu vs spec %llu/%llu",
				     (unsigned long long)x->handle.id,
				     (unsigned long long)m->logical_nbytes,
				     (unsigned long long)m->storage_nbytes,
				     (unsigned long long)m->charged_nbytes,
				     (unsigned long long)x->spec.logical_nbytes,
				     (unsigned long long)x->spec.storage_nbytes);
		}
	}
	return true;
}
