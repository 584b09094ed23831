// SPDX-License-Identifier: MIT
/*
 * Copies that the calling thread does not wait for (reference.md §22).
 *
 * A not-waiting call (rsd_ensure_async(), rsd_execute_actions_async(), ...)
 * runs its actions in queue mode, a flag of the calling thread. In queue
 * mode place() admits a device copy as usual, queues it on its transfer
 * stream with a completion event, and commits it at once instead of
 * waiting: the destination is resident from then on (state_version steps
 * as for a waited copy) and merely *filling* until its event completes.
 *
 * The event lives in a pending lease record (the copy's struct rsd_xfer,
 * xfer.c, hangs off it), which is what makes the rest follow without new machinery:
 *  - the record sits on its transfer stream's queue of released events, so
 *    the reap points fold its completion in, in stream order, at the cost
 *    of a released GPU lease;
 *  - when the copy read a materialization, the record protects it as a
 *    released GPU lease protects what it covered (pending_count): nothing
 *    drops or evicts it before the copy has read it, and explain, decisions
 *    and their blockers see it as a pending lease on the transfer stream;
 *  - close waits for it as for any pending lease.
 * What is different from a lease: completion does not step state_version
 * (the placement did not change), and a device error the event reports
 * once its stream has drained (lease.c: a failed query or sync alone is no
 * answer) is the copy's failure, not the reap's: the destination is
 * removed, a move's source reinstated without admission, and the error
 * kept once, for the next call that needs the value (struct
 * rsd_record.copy_err) or an explicit reap, whichever comes first.
 *
 * Bytes a move's copy still reads, and a value a source loaded for the
 * copy, belong to no materialization once the call returns: the record
 * keeps them (leftover), with their charge as a temporary charge of their
 * location (admitted, counted in peak_charged, never shown as a value),
 * and frees both when the copy completes.
 *
 * Everything here runs with m->lock held.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "../trace.h"

bool rsd__queue_mode(void)
{
	return rsd__exec()->queue_mode;
}

static void charge_temp(struct rsd_manager *m, struct rsd_location at, uint64_t c, bool add)
{
	struct rsd_acct *a = &m->acct[rsd__loc_slot(at)];

	if (add) {
		a->temp += c;
		rsd__acct_peak(a);
	} else {
		a->temp -= c;
	}
	rsd__acct_change(m, rsd__loc_slot(at), c, add);
}

void rsd__qcopy_fill(struct rsd_manager *m, struct rsd_lease_rec *l, struct rsd_record *rec,
		     struct rsd_location to, void *stream, void *event, enum rsd_xfer_kind kind)
{
	struct rsd_xfer *xf = l->xf;
	struct rsd_mat *dst;

	memset(xf, 0, sizeof(*xf));
	rsd__xfer_set_state(xf, RSD_XFER_QUEUED, 0);
	xf->kind = kind;
	xf->rec = rec;
	xf->to = to;
	xf->queued_ns = rsd__now_ns();
	dst = rsd__rec_mat(rec, to);
	if (dst) /* none for a failed copy's record (qcopy_failed()) */
		rsd__mat_set_state(dst, RSD_MAT_FILLING, l, 0);
	l->id = rsd__next_id();
	l->loc = to;
	l->n = 0;
	l->events[0] = event;
	l->streams[0] = stream;
	l->nevents = 1;
	l->nleft = 1;
	l->links[0].l = l;
	l->links[0].k = 0;
	l->state = RSD_LEASE_PENDING;
	l->pending_since_ns = xf->queued_ns;
	rsd__list_add_tail(&m->leases, &l->node);
	rsd__pend_push(m, stream, &l->links[0]);
	rsd__pending_added(m, l);
	atomic_fetch_add_explicit(&m->nqueued, 1, memory_order_relaxed);
}

/* The copy's resident source is protected like a released GPU lease's
 * value (no version step of its own: the commit makes it). */
static void protect_source(struct rsd_manager *m, const struct rsd_location *from,
			   struct rsd_mat *mat)
{
	if (!mat)
		return;
	mat->pending_count++;
	m->acct[rsd__loc_slot(*from)].pending_count++;
}

/* The record names what it protects (protect_source()), once filled. */
static void name_source(struct rsd_manager *m, struct rsd_lease_rec *l, struct rsd_record *rec,
			const struct rsd_location *from, bool protected)
{
	if (from)
		l->loc = *from;
	if (!protected)
		return;
	l->n = 1;
	l->recs[0] = rec;
	l->ids[0] = rec->handle.id;
	rsd__mark_dirty(m, rec);
}

/* What x reads: its replica (NULL for a loaded value), and that value. */
static const struct rsd_location *xfer_from(const struct rsd_xfer *x)
{
	return x->temporary ? NULL : &x->src;
}

static struct rsd_resident *xfer_loaded(const struct rsd_xfer *x)
{
	return x->temporary ? x->value : NULL;
}

void rsd__qcopy_commit(struct rsd_manager *m, struct rsd_lease_rec *l, const struct rsd_xfer *x)
{
	struct rsd_xfer *xf = l->xf;
	struct rsd_record *rec = x->rec;
	const struct rsd_location *from = xfer_from(x), *leave = x->leave ? &x->src : NULL;
	struct rsd_resident *loaded = xfer_loaded(x);
	struct rsd_mat *mat = from && !leave ? rsd__rec_mat(rec, *from) : NULL;

	/* Protected before the settle: a failed copy's kept destination it
	 * reads would go there (rsd__failed_settle()). */
	protect_source(m, from, mat);
	/* The commit of a waited copy, except that a move's source is taken
	 * out of the record instead of freed. */
	rsd__xfer_settle(m, rec, from, x->to, NULL, 0);
	rsd__qcopy_fill(m, l, rec, x->to, x->stream, x->event, RSD_XFER_ASYNC);
	if (leave) {
		xf->leftover = rsd__detach(m, rec, *leave);
		xf->leftover_at = *leave;
		xf->restore = true;
	} else if (loaded) {
		xf->leftover = loaded;
		xf->leftover_at = x->src;
	}
	if (xf->leftover) {
		/* The source's charge becomes a temporary one (a load's
		 * already is) until the copy has read the bytes. */
		if (xf->restore || !x->charged)
			charge_temp(m, xf->leftover_at, rec->spec.storage_nbytes, true);
		xf->leftover_charged = true;
	}
	name_source(m, l, rec, from, mat != NULL);
}

/*
 * A copy known to have failed (its issue did, or the fill of its source)
 * whose queued work may still read its source and write its destination:
 * nothing of it is installed. The record keeps the destination's storage
 * (its charge a temporary one) and a loaded source, protects a resident
 * source, and frees them once its event, recorded behind that work,
 * completed.
 */
static void qcopy_failed(struct rsd_manager *m, struct rsd_lease_rec *l, struct rsd_record *rec,
			 const struct rsd_location *from, struct rsd_location src,
			 struct rsd_location to, struct rsd_resident *loaded, bool loaded_charged,
			 void *stream, void *event, int err)
{
	struct rsd_mat *mat = from ? rsd__rec_mat(rec, *from) : NULL;
	struct rsd_resident *dst;
	struct rsd_xfer *xf;

	protect_source(m, from, mat);
	dst = rsd__arrival_take(m, rec, to);
	charge_temp(m, to, rec->spec.storage_nbytes, true);
	rsd__xfer_settle(m, rec, from, to, NULL, err);
	rsd__qcopy_fill(m, l, rec, to, stream, event, RSD_XFER_UNANSWERED);
	xf = l->xf;
	xf->err = err;
	xf->told = true;
	xf->garbage = dst;
	if (loaded) {
		xf->leftover = loaded;
		xf->leftover_at = src;
		if (!loaded_charged)
			charge_temp(m, src, rec->spec.storage_nbytes, true);
		xf->leftover_charged = true;
	}
	name_source(m, l, rec, from, mat != NULL);
}

/*
 * A waited copy (synchronous, or a plan batch's) whose completion the
 * device would not answer: its event's sync failed and so did the drain
 * of its stream, so the copy may still read its source and write its
 * destination. It becomes what a not-waiting call would have queued (the
 * destination resident and filling, a move's source kept as the
 * record's leftover, the source protected), so that both ends stay
 * allocated and charged until a reap gets the device's answer: then it
 * is folded in as any queued copy (completed, or undone and its error
 * kept once). The caller returns the device's error. Without memory for
 * the record (or once the manager is closed) neither end is ever freed:
 * the destination is kept for the life of the process and settled as a
 * failure. Keeps the error record.
 */
struct rsd_lease_rec *rsd__xfer_unanswered(struct rsd_manager *m, const struct rsd_xfer *x, int err,
					   bool failed)
{
	struct rsd_error saved = *rsd_last_error();
	struct rsd_lease_rec *l = m->closed ? NULL : rsd__xfer_new(m);
	const struct rsd_location *from = xfer_from(x);
	struct rsd_resident *loaded = xfer_loaded(x);

	if (l && failed)
		qcopy_failed(m, l, x->rec, from, x->src, x->to, loaded, x->charged, x->stream,
			     x->event, err);
	else if (l)
		rsd__qcopy_commit(m, l, x);
	if (l) {
		l->xf->kind = RSD_XFER_UNANSWERED;
		*rsd__err_record() = saved;
		return l;
	}
	rsd__arrival_abandon(m, x->rec, x->to);
	if (loaded)
		rsd__keep_forever(loaded);
	rsd__xfer_settle(m, x->rec, from, x->to, NULL, err);
	*rsd__err_record() = saved;
	return NULL;
}

/* Free what the copy read and no materialization owns, with its charge. */
static void drop_leftover(struct rsd_manager *m, struct rsd_xfer *xf)
{
	if (xf->garbage) {
		charge_temp(m, xf->to, xf->rec->spec.storage_nbytes, false);
		rsd__resident_destroy(xf->garbage);
		xf->garbage = NULL;
	}
	if (!xf->leftover)
		return;
	if (xf->leftover_charged)
		charge_temp(m, xf->leftover_at, xf->rec->spec.storage_nbytes, false);
	if (xf->lent) /* the block is another copy's destination now */
		xf->leftover->block = NULL;
	xf->lent = false;
	rsd__resident_destroy(xf->leftover);
	xf->leftover = NULL;
	xf->leftover_charged = false;
}

/*
 * Reinstall a moved source: only its bookkeeping can fail (memory for the
 * record's copies or the owner map), and a failure keeps the value's
 * only copy out of the manager for good, so a transient one is tried
 * again, at most INSTALL_TRIES times.
 */
#define INSTALL_TRIES 3

static int install_back_hard(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
			     struct rsd_resident *v)
{
	int err = rsd__install_back(m, rec, at, v);

	for (int i = 1; err == -RSD_ENOMEM && i < INSTALL_TRIES; i++)
		err = rsd__install_back(m, rec, at, v);
	return err;
}

/*
 * A diagnostic, off unless RSD_DEBUG_LAST_COPY is set in the environment:
 * a warning at the moment a failure path removes the last copy of a
 * value that has no source, is not discarded and is not marked lost (a
 * must-preserve value left with nothing, which the product never allows
 * outside a device loss, and then marks). Costs a few field tests on
 * those paths when off. 1 on, 0 off, -1 not read yet.
 */
static atomic_int debug_last_copy = -1;

static void note_last_copy(struct rsd_manager *m, const struct rsd_record *rec,
			   struct rsd_location at, const char *how, int code)
{
	char name[RSD_LOCATION_NAME_MAX];
	int on;

	if (rec->nmats || rec->has_source || rec->discarded || rec->lost)
		return;
	on = atomic_load_explicit(&debug_last_copy, memory_order_relaxed);
	if (on < 0) {
		on = getenv("RSD_DEBUG_LAST_COPY") != NULL;
		atomic_store_explicit(&debug_last_copy, on, memory_order_relaxed);
	}
	if (on)
		rsd__warn(m,
			  "value %llu: its last copy, at %s, went in %s (error %d, %s); no source, "
			  "not discarded, not marked lost",
			  (unsigned long long)rec->handle.id,
			  rsd_location_name(at, name, sizeof(name)), how, code, rsd_strerror(code));
}

/*
 * The copy failed: undo it as if it had never been queued, and keep the
 * error for whoever needs the value next. A destination something
 * protects stays, marked failed, until that protection ends: a consumer
 * stream ordered after the copy may still be queued on its storage, and
 * the protection's end must find it to lower its location's counts. A
 * transfer reading it (busy: a waited copy that synchronized the fill and
 * now copies out of it, staged or not) protects it the same way; its
 * settle removes it (rsd__xfer_settle()).
 */
static void undo(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd_xfer *xf = l->xf;
	struct rsd_record *rec = xf->rec;
	/* A failed copy's record installed nothing: a copy there now is
	 * another transfer's (qcopy_failed()). */
	struct rsd_mat *dst = xf->told ? NULL : rsd__rec_mat(rec, xf->to);

	if (dst && (rsd__mat_protected(dst) || dst->busy)) {
		rsd__mat_set_state(dst, RSD_MAT_FAILED, NULL, xf->err);
		rsd__mark_dirty(m, rec);
	} else if (dst) {
		rsd__remove(m, rec, xf->to);
	}
	if (xf->restore && xf->lent) {
		/* Its block is the destination of a copy that completed
		 * after it on the device (settle_handover()): only a driver
		 * that runs a stream's work after a failed event it waits on
		 * gets here, and that copy overwrote the bytes. */
		rsd__warn(m,
			  "value %llu: the move off %s failed after a later copy reused its "
			  "block; the value's bytes there are gone",
			  (unsigned long long)rec->handle.id,
			  rsd_location_name(xf->leftover_at, name, sizeof(name)));
	} else if (xf->restore && !rsd__rec_mat(rec, xf->leftover_at)) {
		struct rsd_resident *v = xf->leftover;
		struct rsd_error saved = *rsd_last_error();

		/* Its charge never left: the temporary one becomes the
		 * value's again, with no admission (nothing can refuse it). */
		charge_temp(m, xf->leftover_at, rec->spec.storage_nbytes, false);
		xf->leftover_charged = false;
		xf->leftover = NULL;
		v->managed = false;
		if (install_back_hard(m, rec, xf->leftover_at, v)) {
			/* Out of memory for the bookkeeping: the bytes are
			 * never freed, only no longer managed. */
			rsd__keep_forever(v);
			rsd__warn(m,
				  "value %llu: reinstating the source of a failed move at %s "
				  "failed: %s; its bytes stay allocated for the life of the "
				  "process",
				  (unsigned long long)rec->handle.id,
				  rsd_location_name(xf->leftover_at, name, sizeof(name)),
				  rsd_last_error()->message);
		}
		*rsd__err_record() = saved;
	}
	if (dst)
		note_last_copy(m, rec, xf->to, "the undo of a failed queued copy", xf->err);
	/* Reported once: to the next call that needs the value or to an
	 * explicit reap, whichever comes first (the other then sees none);
	 * not again when the call that queued it returned it. */
	if (xf->told)
		return;
	if (!rec->copy_err)
		m->copy_errs++;
	rec->copy_err = xf->err;
	rec->copy_err_at = xf->to;
	m->copy_err = xf->err;
	m->copy_err_rec = rec;
	m->copy_err_at = xf->to;
}

/*
 * Stream-ordered room (reference.md §22.1). A not-waiting copy whose
 * admission needs the room a queued spill (a move off the device) frees
 * does not wait for it: its destination is laid out in the spill's source
 * block, which the spill's record still holds as its leftover, and its
 * stream waits on the device for the spill's event before writing. The
 * block's charge moves with it: the leftover's temporary charge goes and
 * the destination is admitted and charged as any, so the location counts
 * it once. The leftover keeps pointing at the block (lent) so that the
 * spilled value can have it back:
 *  - both complete: the destination owns the block; the leftover's
 *    header is freed alone;
 *  - the spill fails (or the copy, while the spill is queued): the
 *    driver fails the copy ordered after it, so the block still holds
 *    the spilled bytes. The destination gives the block and its charge
 *    back (rsd__return_storage(): FAILED with its protections, owning
 *    nothing), the leftover is charged again and, for a failed spill,
 *    reinstated by undo() as the source of any failed move is.
 * Whichever record a reap folds first settles the pair, so the order of
 * the two streams' queues does not matter.
 */
int rsd__qcopy_handover(struct rsd_manager *m, struct rsd_record *rec,
			const struct rsd_resident *like, struct rsd_location to,
			struct rsd_resident **out, struct rsd_lease_rec **spill)
{
	struct rsd_error saved = *rsd_last_error();
	struct rsd_lease_rec *l;

	if (!rsd__queue_mode() || to.kind != RSD_CUDA || !m->ops->stream_wait_event)
		return 0;
	rsd__list_for_each_entry(l, &m->leases, node) {
		struct rsd_xfer *xf = l->xf;
		uint64_t c;

		/* Only a block charged as much as the new value: a smaller
		 * charge would free the rest for other admissions while the
		 * block may still go back, whole, to the spilled value. */
		if (!xf || !xf->restore || !xf->leftover_charged || xf->lent || xf->err ||
		    xf->state != RSD_XFER_QUEUED || !rsd_location_equal(xf->leftover_at, to) ||
		    xf->rec->spec.storage_nbytes != rec->spec.storage_nbytes || l->nevents != 1 ||
		    !l->events[0])
			continue;
		if (!rsd__resident_over(like, xf->leftover, out))
			continue;
		c = xf->rec->spec.storage_nbytes;
		charge_temp(m, to, c, false);
		if (rsd__admit(m, to, rec->spec.storage_nbytes)) {
			charge_temp(m, to, c, true);
			(*out)->block = NULL;
			rsd__resident_destroy(*out);
			*out = NULL;
			*rsd__err_record() = saved;
			continue;
		}
		xf->leftover_charged = false;
		xf->lent = true;
		xf->lent_rec = rec;
		xf->lent_at = to;
		*spill = l;
		rsd__lin_note(m, RSD_LIN_HANDOVER, 0);
		return 1;
	}
	return 0;
}

/* The destination the spill lent its block to failed, or the spill: the
 * block goes back to the spill, with its charge. */
static void give_back(struct rsd_manager *m, struct rsd_lease_rec *spill)
{
	struct rsd_xfer *sx = spill->xf;
	struct rsd_xfer *to = sx->lent_to ? sx->lent_to->xf : NULL;
	struct rsd_mat *mat = rsd__rec_mat(sx->lent_rec, sx->lent_at);

	/* A failed copy's record keeps its destination as garbage (and
	 * installed nothing: a copy there now is another transfer's). */
	if (to && to->told && to->garbage)
		to->garbage->block = NULL;
	else if (mat && !mat->returned)
		rsd__return_storage(m, sx->lent_rec, sx->lent_at);
	charge_temp(m, sx->leftover_at, sx->rec->spec.storage_nbytes, true);
	sx->leftover_charged = true;
	sx->lent = false;
}

static void unlink_handover(struct rsd_lease_rec *spill)
{
	if (spill->xf->lent_to)
		spill->xf->lent_to->xf->borrowed = NULL;
	spill->xf->lent_to = NULL;
	spill->xf->lent_rec = NULL;
}

void rsd__qcopy_handed(struct rsd_manager *m, struct rsd_lease_rec *spill, struct rsd_lease_rec *l,
		       struct rsd_resident *copy)
{
	if (spill->xf->lent_rec && l) {
		l->xf->borrowed = spill;
		spill->xf->lent_to = l;
	} else if (spill->xf->lent_rec) {
		/* Never queued: nothing writes the block. Whatever frees
		 * `copy` now frees its header only. */
		copy->block = NULL;
		charge_temp(m, spill->xf->leftover_at, spill->xf->rec->spec.storage_nbytes, true);
		spill->xf->leftover_charged = true;
		spill->xf->lent = false;
		unlink_handover(spill);
	}
	rsd__lease_unpin(m, spill);
}

/* l folds while the other end of a handover may still need the block
 * (see above): a failure of either gives it back to the spill. */
static void settle_handover(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	struct rsd_xfer *xf = l->xf;
	struct rsd_lease_rec *spill = xf->borrowed ? xf->borrowed : l;

	if (!spill->xf->lent_rec)
		return;
	if (xf->state == RSD_XFER_FAILED)
		give_back(m, spill);
	else if (l != spill)
		spill->xf->proven = true;
	/* The copy ordered after a failed spill wrote nothing and fails
	 * with it (the driver fails it too; this covers one that does not). */
	if (l == spill && xf->state == RSD_XFER_FAILED && xf->lent_to &&
	    xf->lent_to->xf->state == RSD_XFER_QUEUED && !xf->lent_to->xf->err)
		xf->lent_to->xf->err = xf->err;
	unlink_handover(spill);
}

/*
 * Which answer comes first. A spill's event may answer a failure that the
 * work did not have (an event query that failed twice around a drain is
 * taken as the work's failure, lease.c): then the copy that took its
 * block ran after it and wrote the block, the spilled value's bytes are
 * whole at the spill's destination, and reinstating them from the block
 * would lose them (that copy folded in first) or put the new value's
 * bytes in their place (the spill first). So a spill whose block is lent
 * folds a failure in only after the copy into the block: that copy's
 * completion proves the spill's (settle_handover(): proven, and the
 * failure is not taken, lease.c), and its failure, the device failing it
 * after the failed spill, gives the block back to be reinstated.
 */
int rsd__qcopy_answer_after(const struct rsd_lease_rec *l, struct rsd_lease_rec **first)
{
	const struct rsd_xfer *xf = l->xf;

	if (!xf || !xf->lent_rec || xf->state != RSD_XFER_QUEUED)
		return 0;
	if (!xf->lent_to)
		return -1;
	*first = xf->lent_to;
	return 1;
}

void rsd__qcopy_finish(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	struct rsd_xfer *xf = l->xf;
	struct rsd_record *rec = xf->rec;
	struct rsd_mat *mat = rsd__rec_mat(rec, xf->to);
	struct rsd_mat *src = l->n ? rsd__rec_mat(rec, l->loc) : NULL;

	rsd__lin_note(m, RSD_LIN_QDONE, rsd__lin_qdone_arg(rec->handle.id, xf->to));
	/* Ordered on the device after a copy filling its source that
	 * failed: it read no value (the driver fails it too; this covers a
	 * driver that does not). */
	if (src && rsd__mat_failed(src) && !xf->err && xf->state == RSD_XFER_QUEUED)
		xf->err = src->err;
	/* Its event answered: a failure the device reported made it FAILED
	 * already (lease.c); one known at issue (told) is answered now. */
	if (xf->state == RSD_XFER_QUEUED)
		rsd__xfer_set_state(xf, xf->err ? RSD_XFER_FAILED : RSD_XFER_DONE, xf->err);
	if (mat && mat->fill == l)
		rsd__mat_set_state(mat, RSD_MAT_RESIDENT, NULL, 0);
	if (l->n) {
		if (src) {
			src->pending_count--;
			m->acct[rsd__loc_slot(l->loc)].pending_count--;
			rsd__failed_settle(m, rec, l->loc);
			/* It read a copy on a failed device: the writer exit
			 * settles that copy now (devloss.c). */
			if (l->loc.kind == RSD_CUDA && m->acct[rsd__loc_slot(l->loc)].failed)
				rsd__devlost_note();
		}
	}
	settle_handover(m, l);
	if (xf->state == RSD_XFER_FAILED)
		undo(m, l);
	/* A copy out of a lost device ended: the value's fate is known now
	 * (devloss.c sweeps it at this call's exit). */
	if ((l->n && l->loc.kind == RSD_CUDA && m->acct[rsd__loc_slot(l->loc)].failed) ||
	    (xf->restore && xf->leftover_at.kind == RSD_CUDA &&
	     m->acct[rsd__loc_slot(xf->leftover_at)].failed))
		rsd__devlost_note();
	drop_leftover(m, xf);
	atomic_fetch_sub_explicit(&m->nqueued, 1, memory_order_relaxed);
	rsd__mark_dirty(m, rec);
	m->locs_dirty = true;
	/* the destination arrived (or went): waiters decide again */
	rsd__xfer_wake(m);
	rsd_trace_copy_complete(m->id, rec->handle.id, xf->to, rsd__now_ns() - xf->queued_ns,
				xf->err);
	rsd__xfer_set_state(xf, RSD_XFER_SETTLED, 0);
	rsd__lease_retire(m, l);
}

void rsd__qcopy_abandon(struct rsd_manager *m, struct rsd_lease_rec *l, bool keep)
{
	struct rsd_xfer *xf = l->xf;

	if (!xf || (!xf->leftover && !xf->garbage))
		return;
	if (keep) {
		if (xf->leftover)
			rsd__keep_forever(xf->leftover);
		if (xf->garbage)
			rsd__keep_forever(xf->garbage);
		xf->leftover = NULL;
		xf->garbage = NULL;
	}
	drop_leftover(m, xf);
}

int rsd__qcopy_wait_room(struct rsd_manager *m, struct rsd_location at)
{
	struct rsd_lease_rec *l;
	int err;

	if (!rsd__queue_mode())
		return 0;
	/* Creation order: the oldest copy is likely the first to finish. */
	rsd__list_for_each_entry(l, &m->leases, node)
		if (l->xf && l->xf->leftover_charged && rsd_location_equal(l->xf->leftover_at, at))
			break;
	if (!l)
		return 0;
	/* Folded in on return: a failure of the copy is the value's (undo). */
	err = rsd__lease_wait(m, l);
	if (!err && m->closed)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
	return err ? err : 1;
}

/* The RSD_E* code a device's failure is reported with. */
static int failure_code(int code)
{
	return -code > 0 && -code < RSD_EMAX ? -code : RSD_EDEVICE;
}

static int copy_failure(int code, uint64_t value, struct rsd_location at)
{
	char name[RSD_LOCATION_NAME_MAX];

	return rsd__err(failure_code(code),
			"a queued copy of value %llu to %s failed on the device: %s",
			(unsigned long long)value, rsd_location_name(at, name, sizeof(name)),
			rsd_strerror(code));
}

int rsd__failed_error(const struct rsd_record *rec, const struct rsd_mat *mat)
{
	char name[RSD_LOCATION_NAME_MAX];
	int code = mat->err;

	/* A copy on a sound device fails with RSD_EDEVLOST too when it
	 * touched a lost one: only a copy on the lost device died with it. */
	if (code == -RSD_EDEVLOST && mat->value && rsd__devloss_dead_block(mat->value))
		return rsd__err_dead_copy(rec, mat);
	return rsd__err(failure_code(code),
			"value %llu at %s: a queued copy to it failed on the device (%s); it stays "
			"unreadable until its %u lease(s), %u hold(s) and %u pending event(s) end",
			(unsigned long long)rec->handle.id,
			rsd_location_name(mat->loc, name, sizeof(name)), rsd_strerror(code),
			mat->use_count, mat->hold_count, mat->pending_count);
}

bool rsd__failed_settle(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	struct rsd_mat *mat = rsd__rec_mat(rec, at);
	int err;

	if (!mat || !rsd__mat_failed(mat) || rsd__mat_protected(mat) || mat->busy)
		return false;
	err = mat->err;
	rsd__remove(m, rec, at);
	note_last_copy(m, rec, at, "the settle of a failed copy", err);
	return true;
}

int rsd__fill_error(const struct rsd_lease_rec *fill)
{
	return copy_failure(fill->xf->err, fill->xf->rec->handle.id, fill->xf->to);
}

int rsd__copy_error(struct rsd_manager *m, struct rsd_record *rec)
{
	int code = rec->copy_err;

	rec->copy_err = 0;
	if (m->copy_errs)
		m->copy_errs--;
	if (m->copy_err_rec == rec)
		m->copy_err = 0;
	return copy_failure(code, rec->handle.id, rec->copy_err_at);
}

/* With m->copy_err reported already: another record's failure that no
 * call has reported (the slot keeps only the last one). */
static struct rsd_record *copy_error_other(struct rsd_manager *m)
{
	for (size_t i = 0; i < m->nrecs; i++)
		if (m->recs[i]->copy_err && !m->recs[i]->discarded)
			return m->recs[i];
	m->copy_errs = 0;
	return NULL;
}

int rsd__copy_error_reap(struct rsd_manager *m)
{
	struct rsd_record *rec = m->copy_err_rec;
	int code = m->copy_err;

	if (!code) {
		rec = m->copy_errs ? copy_error_other(m) : NULL;
		if (!rec)
			return 0;
		return rsd__copy_error(m, rec);
	}
	m->copy_err = 0;
	if (rec->copy_err == code) {
		rec->copy_err = 0;
		if (m->copy_errs)
			m->copy_errs--;
	}
	return copy_failure(code, rec->handle.id, m->copy_err_at);
}

int rsd__reap_now(struct rsd_manager *m)
{
	int err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);

	if (!err)
		rsd__writer_exit(m);
	return err;
}

int rsd__reap_queued(struct rsd_manager *m)
{
	if (rsd__likely(!atomic_load_explicit(&m->nqueued, memory_order_relaxed)))
		return 0;
	return rsd__reap_now(m);
}

const struct rsd_mat *rsd__fill_source(const struct rsd_record *rec, const struct rsd_mat *mat)
{
	const struct rsd_lease_rec *f = mat->fill;

	if (mat->state != RSD_MAT_FILLING || !f || !f->n || (f->xf && f->xf->restore))
		return NULL;
	for (uint32_t k = 0; k < rec->nmats; k++)
		if (rsd_location_equal(rec->mats[k].loc, f->loc))
			return &rec->mats[k];
	return NULL;
}
