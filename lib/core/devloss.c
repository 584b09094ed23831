// SPDX-License-Identifier: MIT
/*
 * Quarantine of a device that failed for good (reference.md, "When a device
 * fails"). A driver reports a lost device by failing an op with RSD_EDEVLOST
 * and answering its device_lost op; the first writer call that meets such a
 * failure marks the device's location failed before it publishes (a state
 * change: state_version increments, and snapshots show the location's
 * failed flag). From then on nothing is admitted there: every admission,
 * whatever asked for it (an ensure, a move, a reservation, a load, a plan's
 * action), fails with RSD_EDEVLOST before any driver call. Calls that do not
 * place bytes there work as before, on the other devices and the host tiers.
 *
 * What is not done yet: the failed location's materializations stay in the
 * state as they were (a copy from one fails with the driver's RSD_EDEVLOST);
 * values with another copy or a source are not yet moved off it, and a value
 * whose only copy was there is not yet marked lost.
 */
#include "core.h"

int rsd__err_failed(struct rsd_location at, uint64_t n)
{
	char name[RSD_LOCATION_NAME_MAX];

	return rsd__err(RSD_EDEVLOST,
			"%s failed for good (its device was lost) and is quarantined: "
			"%llu bytes cannot be admitted there",
			rsd_location_name(at, name, sizeof(name)), (unsigned long long)n);
}

void rsd__quarantine(struct rsd_manager *m)
{
	bool changed = false;

	if (!m->ops->device_lost)
		return;
	for (int d = 0; d < m->ndevices; d++) {
		struct rsd_acct *a = &m->acct[2u + (unsigned)d];

		if (a->failed || !m->ops->device_lost(m->ops_ctx, d))
			continue;
		a->failed = true;
		changed = true;
		rsd__warn(m,
			  "cuda:%d failed for good (the driver reports its device lost): "
			  "quarantined, nothing is admitted there any more",
			  d);
	}
	if (changed)
		rsd__bump(m);
}
