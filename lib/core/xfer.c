// SPDX-License-Identifier: MIT
/*
 * Copies in flight and the state of the materializations they write.
 *
 * A materialization's state (enum rsd_mat_state, core.h) and a transfer's
 * (enum rsd_xfer_state) change only here, so that every transition is one
 * the tables below allow; Documentation/design.md explains them
 * ("Materialization states", "The transfer object"). A transfer that
 * outlives its issuer lives in one slab block with its pending record's
 * event, stream and queue link: allocating it costs no malloc on the
 * not-waiting path. Materializations and pending transfers change with
 * m->lock held; a waited or batched transfer belongs to its thread, and
 * rsd__xfer_free() may run on any thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const unsigned xfer_legal[] = {
	[RSD_XFER_IDLE] = BIT(RSD_XFER_QUEUED),
	[RSD_XFER_QUEUED] = BIT(RSD_XFER_DONE) | BIT(RSD_XFER_FAILED),
	[RSD_XFER_DONE] = BIT(RSD_XFER_SETTLED),
	[RSD_XFER_FAILED] = BIT(RSD_XFER_SETTLED),
	[RSD_XFER_SETTLED] = 0,
};

static const char *const xfer_state_name[] = {
	[RSD_XFER_IDLE] = "idle",     [RSD_XFER_QUEUED] = "queued",   [RSD_XFER_DONE] = "done",
	[RSD_XFER_FAILED] = "failed", [RSD_XFER_SETTLED] = "settled",
};

void rsd__xfer_set_state(struct rsd_xfer *xf, enum rsd_xfer_state to, int err)
{
	if (rsd__unlikely(!(xfer_legal[xf->state] & BIT(to)) || (to == RSD_XFER_FAILED && !err))) {
		fprintf(stderr,
			"librsd: internal: transfer of value %llu: %s -> %s (error %d): not a "
			"transition the state machine has\n",
			xf->rec ? (unsigned long long)xf->rec->handle.id : 0ull,
			xfer_state_name[xf->state], xfer_state_name[to], err);
		fflush(stderr);
		abort();
	}
	if (to == RSD_XFER_FAILED && !xf->err)
		xf->err = err;
	xf->state = to;
}

/* The block: the event, its stream, its queue link and the transfer. */
#define XFER_BLOCK (2 * sizeof(void *) + sizeof(struct rsd_pend_link) + sizeof(struct rsd_xfer))

struct rsd_lease_rec *rsd__xfer_new(struct rsd_manager *m)
{
	struct rsd_lease_rec *l = rsd__lease_rec_new(m, 1);
	void **events;

	if (!l)
		return NULL;
	events = rsd__slab_alloc(&m->xfers, XFER_BLOCK);
	if (!events) {
		rsd__lease_rec_put(m, l);
		return NULL;
	}
	memset(events, 0, XFER_BLOCK);
	l->events = events;
	l->streams = events + 1;
	l->links = (struct rsd_pend_link *)(events + 2);
	l->xf = (struct rsd_xfer *)(l->links + 1);
	return l;
}

/* Detach the block from l (its record is being freed or reused). */
static void *xfer_block_take(struct rsd_lease_rec *l)
{
	void *block = l->events;

	l->events = NULL;
	l->streams = NULL;
	l->links = NULL;
	l->xf = NULL;
	return block;
}

void rsd__xfer_discard(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	if (!l)
		return;
	if (rsd__unlikely(l->xf->state != RSD_XFER_IDLE || l->nevents)) {
		fprintf(stderr, "librsd: internal: discarding a transfer that was queued (%s)\n",
			xfer_state_name[l->xf->state]);
		fflush(stderr);
		abort();
	}
	rsd__slab_free(&m->xfers, xfer_block_take(l), XFER_BLOCK);
	rsd__lease_rec_put(m, l);
}

void rsd__xfer_free(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	/* The reclaimer frees retired records off the writer's thread. */
	rsd__slab_free_remote(&m->xfers, xfer_block_take(l), XFER_BLOCK);
}
