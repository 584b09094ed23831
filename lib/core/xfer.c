// SPDX-License-Identifier: MIT
/*
 * Copies in flight and the state of the materializations they write.
 *
 * A materialization's state (enum rsd_mat_state, core.h) changes only
 * here, so that every transition is one the table below allows; the
 * table is the one Documentation/design.md explains ("Materialization
 * states"). Everything here runs with m->lock held.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core.h"

#define BIT(s) (1u << (s))

/*
 * legal[from] is the set of states `from` may go to. A fresh
 * materialization is RESIDENT (zeroed) and goes ARRIVING only before
 * anything counts on it (install()).
 */
static const unsigned legal[] = {
	[RSD_MAT_RESIDENT] = BIT(RSD_MAT_ARRIVING) | BIT(RSD_MAT_FILLING) | BIT(RSD_MAT_FAILED),
	[RSD_MAT_ARRIVING] = BIT(RSD_MAT_RESIDENT),
	[RSD_MAT_FILLING] = BIT(RSD_MAT_RESIDENT),
	[RSD_MAT_FAILED] = 0,
};

static const char *const state_name[] = {
	[RSD_MAT_RESIDENT] = "resident",
	[RSD_MAT_ARRIVING] = "arriving",
	[RSD_MAT_FILLING] = "filling",
	[RSD_MAT_FAILED] = "failed",
};

static void illegal(const struct rsd_mat *mat, enum rsd_mat_state to, const char *why)
{
	char name[RSD_LOCATION_NAME_MAX];

	fprintf(stderr, "librsd: internal: materialization at %s: %s -> %s: %s\n",
		rsd_location_name(mat->loc, name, sizeof(name)), state_name[mat->state],
		state_name[to], why);
	fflush(stderr); /* a redirected stderr may be buffered; abort() flushes nothing */
	abort();
}

void rsd__mat_set_state(struct rsd_mat *mat, enum rsd_mat_state to, struct rsd_lease_rec *fill,
			int err)
{
	if (rsd__unlikely(!(legal[mat->state] & BIT(to))))
		illegal(mat, to, "not a transition the state machine has");
	/* Only a materialization nothing counts on yet becomes ARRIVING. */
	if (rsd__unlikely(to == RSD_MAT_ARRIVING &&
			  (rsd__mat_protected(mat) || mat->busy || mat->leaving)))
		illegal(mat, to, "it is in use already");
	if (rsd__unlikely((to == RSD_MAT_FILLING) != (fill != NULL) ||
			  (to == RSD_MAT_FAILED) != (err != 0)))
		illegal(mat, to, "the copy's record or error does not match the state");
	mat->state = to;
	mat->fill = fill;
	mat->err = err;
}
