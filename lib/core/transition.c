// SPDX-License-Identifier: MIT
/*
 * The action executor (§4): ensure/copy, move, drop and discard, each with
 * its report. Runs on the writer path; plans call rsd__exec_action() once
 * per action under the same lock.
 *
 * A transition that moves bytes runs in three phases (reference.md §21.1):
 * admit under the lock (every check, the admission, the destination
 * allocated and charged as an arriving materialization, the source marked
 * busy), transfer without it (the copy, or the source load), commit under
 * it (the destination becomes resident, a move removes its source,
 * state_version steps and the state is published at writer exit). The
 * commit is the linearization point. Another thread's action that depends
 * on a transfer in flight of the same value waits for its commit and starts
 * again (XFER_RETRY), so it runs as if it came after it; one that would
 * remove a busy source fails with RSD_EINUSE.
 *
 * Every check that can fail precedes the first state change, so a failed
 * action leaves no trace beyond the reaping of its prologue and the peak
 * raised by a temporary source charge (§7.2).
 */
#include <string.h>

#include "core.h"
#include "../trace.h"

static const char R_DEST_RESIDENT[] = "destination already resident";
static const char R_DEST_OWNS[] = "destination already owns the selected replica";
static const char R_ABSENT[] = "materialization already absent";

/* Positive: wait for a transfer of the value to commit, then start again. */
#define XFER_RETRY 1
/* Positive: a queued copy was waited for and folded in; start again now. */
#define XFER_WAITED 2

/* The least resident location, `exclude` left out. */
static bool min_resident(const struct rsd_record *rec, const struct rsd_location *exclude,
			 struct rsd_location *out)
{
	bool found = false;

	for (uint32_t i = 0; i < rec->nmats; i++) {
		struct rsd_location l = rec->mats[i].loc;

		/* A failed copy's kept destination holds no bytes to read. */
		if (rec->mats[i].state == RSD_MAT_ARRIVING ||
		    rec->mats[i].state == RSD_MAT_FAILED ||
		    (exclude && rsd_location_equal(l, *exclude)))
			continue;
		if (!found || rsd_location_cmp(l, *out) < 0)
			*out = l;
		found = true;
	}
	return found;
}

/*
 * Whether a transfer in flight could change which source the implicit
 * order picks (§4.2): an arriving materialization before it. Such an
 * action waits for that commit so that its report is the one it would
 * have after it.
 */
static bool arriving_before(const struct rsd_record *rec, struct rsd_location src,
			    const struct rsd_location *exclude)
{
	for (uint32_t i = 0; i < rec->nmats; i++) {
		struct rsd_location l = rec->mats[i].loc;

		if (rec->mats[i].state == RSD_MAT_ARRIVING &&
		    !(exclude && rsd_location_equal(l, *exclude)) && rsd_location_cmp(l, src) < 0)
			return true;
	}
	return false;
}

/*
 * Whether a copy in flight reads from a replica that a new one at d would
 * precede in the implicit order (§4.2): committing d first would leave that
 * copy's report naming a source no sequential order gives it, so the new
 * transfer waits for its commit.
 */
static bool busy_after(const struct rsd_record *rec, struct rsd_location d)
{
	for (uint32_t i = 0; i < rec->nmats; i++)
		if (rec->mats[i].busy && rsd_location_cmp(d, rec->mats[i].loc) < 0)
			return true;
	return false;
}

static uint32_t resident_count(const struct rsd_record *rec)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < rec->nmats; i++)
		n += rec->mats[i].state == RSD_MAT_RESIDENT ||
		     rec->mats[i].state == RSD_MAT_FILLING;
	return n;
}

static void charge_temp(struct rsd_manager *m, struct rsd_location at, uint64_t c)
{
	struct rsd_acct *a = &m->acct[rsd__loc_slot(at)];

	a->temp += c;
	rsd__acct_change(m, rsd__loc_slot(at), c, true);
	rsd__acct_peak(a);
}

static void uncharge_temp(struct rsd_manager *m, struct rsd_xfer *x, const struct rsd_record *rec)
{
	if (!x->charged)
		return;
	m->acct[rsd__loc_slot(x->src)].temp -= rec->spec.storage_nbytes;
	rsd__acct_change(m, rsd__loc_slot(x->src), rec->spec.storage_nbytes, false);
	x->charged = false;
}

/* Enter and leave a transfer phase of rec (m->lock held at both ends). */
static void xfer_begin(struct rsd_manager *m, struct rsd_record *rec)
{
	rec->inflight++;
	m->inflight++;
	rsd__writer_pause(m);
}

static void xfer_end(struct rsd_manager *m, struct rsd_record *rec)
{
	rsd__writer_resume(m);
	rec->inflight--;
	m->inflight--;
}

/*
 * Run the source's load (§4.3, §9) in a transfer phase: the temporary
 * charge is admitted first, the load runs without the lock with this
 * thread marked as its callback's (its own calls into m are refused), and
 * the result is checked once the lock is back.
 */
static int load_source(struct rsd_manager *m, struct rsd_record *rec, struct rsd_xfer *x)
{
	uint64_t c = rec->spec.storage_nbytes;
	struct rsd_resident *v = NULL;
	struct rsd_cb_frame cb;
	struct rsd_error saved;
	int err, ret;

	err = rsd__admit(m, rec->source_loc, c);
	if (err)
		return err;
	x->src = rec->source_loc;
	x->temporary = true;
	x->charged = true;
	charge_temp(m, x->src, c);
	rec->loading = true;
	xfer_begin(m, rec);
	rsd__err_clear();
	rsd__callback_begin(&cb, m);
	ret = rec->source.load(rec->source.ctx, &v);
	rsd__callback_end(&cb);
	saved = *rsd_last_error();
	xfer_end(m, rec);
	rec->loading = false;
	rsd__xfer_wake(m);
	*rsd__err_record() = saved;
	if (m->closed) {
		/* close(FORCE | NOWAIT) did not wait for the load. */
		if (!ret && v && !v->managed)
			rsd__resident_destroy(v);
		x->charged = false;
		x->temporary = false;
		return rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
				(unsigned long long)m->id);
	}
	if (ret) {
		if (ret < 0 && ret > -RSD_EMAX) {
			/* A loader's own RSD error propagates unchanged; keep the
			 * record it left when it matches. */
			if (rsd_last_error()->code != -ret)
				rsd__err(-ret, "source load of value %llu failed: %s",
					 (unsigned long long)rec->handle.id, rsd_strerror(ret));
			err = ret;
		} else {
			err = rsd__err(RSD_ESOURCE, "source load of value %llu failed with code %d",
				       (unsigned long long)rec->handle.id, ret);
			rsd__err_record()->cause = ret;
		}
		goto fail;
	}
	if (!v) {
		err = rsd__err(RSD_ESOURCE, "source load of value %llu returned no value",
			       (unsigned long long)rec->handle.id);
		goto fail;
	}
	if (v->managed) {
		err = rsd__err(RSD_EOWNERSHIP,
			       "source of value %llu returned a resident a manager already owns",
			       (unsigned long long)rec->handle.id);
		v = NULL;
		goto fail;
	}
	err = rsd__mat_validate(&rec->spec, v, x->src);
	if (err)
		goto fail;
	x->value = v;
	return 0;
fail:
	if (v)
		rsd__resident_destroy(v);
	uncharge_temp(m, x, rec);
	x->temporary = false;
	return err;
}

/*
 * §4.3: the copy source of an ensure, or of a move with nothing to move.
 * XFER_RETRY when a transfer of the value in flight decides it: the least
 * resident copy is leaving with a move, an arriving one would come first,
 * or nothing is resident while a load or copy of it runs.
 */
static int transfer_source(struct rsd_manager *m, struct rsd_record *rec, struct rsd_xfer *x)
{
	memset(x, 0, sizeof(*x)); /* IDLE, RSD_XFER_SYNC */
	x->rec = rec;
	if (min_resident(rec, NULL, &x->src)) {
		struct rsd_mat *mat = rsd__rec_mat(rec, x->src);

		if (mat->leaving || arriving_before(rec, x->src, NULL))
			return XFER_RETRY;
		x->value = mat->value;
		return 0;
	}
	if (rec->inflight)
		return XFER_RETRY;
	if (!rec->has_source)
		return rsd__err(RSD_EUNAVAILABLE,
				"value %llu has no materialization or reconstruction source",
				(unsigned long long)rec->handle.id);
	return load_source(m, rec, x);
}

static void xfer_finish(struct rsd_manager *m, struct rsd_record *rec, struct rsd_xfer *x)
{
	uncharge_temp(m, x, rec);
	if (x->temporary && x->value)
		rsd__resident_destroy(x->value);
	x->value = NULL;
}

void rsd__xfer_settle(struct rsd_manager *m, struct rsd_record *rec,
		      const struct rsd_location *from, struct rsd_location to,
		      const struct rsd_location *leave, int err)
{
	/* Other transfers may have grown rec->mats meanwhile: look again. */
	struct rsd_mat *smat = from ? rsd__rec_mat(rec, *from) : NULL;

	if (smat) {
		smat->busy--;
		smat->leaving = false;
	}
	rec->inflight--;
	m->inflight--;
	if (err) {
		/* Gone already when abandoned (rsd__arrival_abandon()). */
		if (rsd__rec_mat(rec, to))
			rsd__arrival_abort(m, rec, to);
	} else {
		rsd__arrival_commit(m, rec, to);
		if (leave)
			rsd__remove(m, rec, *leave);
	}
	/* The source was a queued copy's destination that failed while this
	 * transfer read it: kept until now, it goes once nothing else does. */
	if (smat)
		rsd__failed_settle(m, rec, *from);
	rsd__xfer_wake(m);
}

/*
 * A transfer came back to a manager that close(FORCE | NOWAIT) closed
 * without waiting for it: only its counts are undone; what it allocated
 * stays in the record, which the last thread back frees whole
 * (rsd__close_drop()).
 */
static void closed_settle(struct rsd_manager *m, struct rsd_record *rec, struct rsd_xfer *x)
{
	struct rsd_mat *smat = x->temporary ? NULL : rsd__rec_mat(rec, x->src);

	if (smat) {
		smat->busy--;
		smat->leaving = false;
	}
	rec->inflight--;
	m->inflight--;
	rsd__xfer_wake(m);
}

/*
 * x was issued (or its issue tried) and, unless only queued, waited for:
 * an event still set means it may still run (QUEUED: a batch's, a queued
 * one's, or one the device did not answer); else the device answered.
 */
static void xfer_issued(struct rsd_xfer *x, void *stream, void *ev, int err)
{
	x->stream = stream;
	x->event = ev;
	rsd__xfer_set_state(x, RSD_XFER_QUEUED, 0);
	if (!ev)
		rsd__xfer_set_state(x, err ? RSD_XFER_FAILED : RSD_XFER_DONE, err);
}

/*
 * Not waiting (§22.1): the room a queued spill frees at `to`, taken at
 * once (queued.c, rsd__qcopy_handover()): *copy is laid out in the block
 * the spill still reads, and the copy's stream waits for the spill's
 * event. The spill stays pinned until rsd__qcopy_handed(). Otherwise the
 * refusal stands and the action waits for the room (exec_action_in()).
 */
static int take_room(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_xfer *x,
		     struct rsd_location to, void **stream, struct rsd_resident **copy,
		     struct rsd_lease_rec **spill)
{
	struct rsd_error refused = *rsd_last_error();

	if (!rsd__qcopy_handover(m, rec, x->value, to, copy, spill))
		return -RSD_EBUDGET;
	rsd__lease_pin(*spill);
	if (rsd__copy_order_after(m, x->src, to, stream, (*spill)->events[0]))
		return 0;
	rsd__qcopy_handed(m, *spill, NULL, *copy);
	rsd__resident_destroy(*copy);
	*copy = NULL;
	*spill = NULL;
	*rsd__err_record() = refused;
	return -RSD_EBUDGET;
}

/*
 * Put x's value (or a copy of it) at `to`; x->value is consumed on install.
 * A copy is admitted (destination allocated, charged, arriving; source
 * busy, and leaving when `leave` names it for a move), transferred without
 * the lock and committed (or rolled back) when the lock is back. Inside a
 * plan's batch a device copy is only queued: the batch commits it later
 * (*deferred set). In queue mode (a not-waiting call, queued.c) a device
 * copy is committed as soon as it is queued.
 */
static int place(struct rsd_manager *m, struct rsd_record *rec, struct rsd_xfer *x,
		 struct rsd_location to, void *stream, bool allow_exclusive,
		 const struct rsd_location *leave, bool *deferred)
{
	struct rsd_lease_rec *queued = NULL, *fill = NULL, *spill = NULL, *fail;
	struct rsd_resident *copy = NULL;
	struct rsd_mat *smat;
	void *ev = NULL;
	bool defer, stuck = false, recorded = false,
		    device = to.kind == RSD_CUDA || x->src.kind == RSD_CUDA;
	int err;

	if (x->temporary && rsd_location_equal(x->src, to)) {
		/* Load and install share one charge. */
		uncharge_temp(m, x, rec);
		err = rsd__install(m, rec, to, x->value, allow_exclusive);
		if (!err)
			x->value = NULL;
		return err;
	}
	x->to = to;
	x->leave = leave != NULL;
	/* Without memory for its record a queued copy is waited for. */
	if (device && rsd__queue_mode())
		queued = rsd__xfer_new(m);
	err = rsd__admit(m, to, rec->spec.storage_nbytes);
	if (err == -RSD_EBUDGET && queued)
		err = take_room(m, rec, x, to, &stream, &copy, &spill);
	else if (!err)
		err = rsd__copy_alloc(m, x->value, to, stream, &copy);
	if (!err) {
		err = rsd__install_arriving(m, rec, to, copy, allow_exclusive);
		if (err && spill)
			rsd__qcopy_handed(m, spill, NULL, copy);
		if (err)
			rsd__resident_destroy(copy);
	}
	if (err) {
		rsd__xfer_discard(m, queued);
		return err;
	}
	smat = x->temporary ? NULL : rsd__rec_mat(rec, x->src);
	if (smat) {
		smat->busy++;
		smat->leaving = leave != NULL;
		fill = smat->fill;
		if (fill)
			rsd__lease_pin(fill);
	}
	/* Copies only: a queued move would keep its source charged past the
	 * next action's admission, which changes that location's peaks. */
	defer = !queued && !fill && smat && !leave && rsd__batch_room() && device;
	xfer_begin(m, rec);
	/* A queued copy still fills the source (§22): a not-waiting copy the
	 * device can order waits for it on its stream (and fails with it,
	 * copy.c); otherwise the host waits for it, so this copy reads
	 * complete bytes (and fails if that one did). */
	if (fill && !(queued && rsd__copy_order_after(m, x->src, to, &stream, fill->events[0])))
		err = rsd__event_wait(m, fill->events[0]);
	if (!err)
		err = rsd__copy_issue(m, x->value, x->src, copy, to, &stream, &ev, &stuck);
	if (!err && !defer && !queued)
		err = rsd__copy_wait(m, stream, &ev);
	rsd__writer_resume(m);
	xfer_issued(x, stream, ev, err);
	if (fill) {
		if (!err && fill->xf->err)
			err = rsd__fill_error(fill);
		rsd__lease_unpin(m, fill);
	}
	/* Queued into a spill's block: the block goes back unless queued,
	 * or failed with work that may still write it (below). */
	if (spill && (m->closed || (err && !ev && !stuck))) {
		rsd__qcopy_handed(m, spill, NULL, copy);
		spill = NULL;
	}
	if (m->closed) {
		/* Closed meanwhile by close(FORCE | NOWAIT), which waited for
		 * nothing: the last thread back frees what this transfer
		 * holds. A copy only queued may still read and write: both
		 * ends stay allocated for ever (the record lets go of them). */
		if (ev || stuck) { /* queued, deferred, or without an answer */
			rsd__keep_forever(copy);
			rsd__rec_mat(rec, to)->value = NULL;
			rsd__keep_forever(x->value);
			if (smat)
				rsd__rec_mat(rec, x->src)->value = NULL;
			else
				x->value = NULL; /* a loaded value: not freed either */
		}
		rsd__xfer_discard(m, queued);
		closed_settle(m, rec, x);
		return rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
				(unsigned long long)m->id);
	}
	if (!err && queued) {
		rsd__qcopy_commit(m, queued, x);
		if (spill)
			rsd__qcopy_handed(m, spill, queued, copy);
		if (x->temporary) {
			x->value = NULL;
			x->charged = false;
		}
		return 0;
	}
	/*
	 * The copy failed to queue and its stream would not drain: what it
	 * queued may still read the source and write the destination. An
	 * event recorded behind it says when it is over: till then it is in
	 * flight, as below, known to have failed.
	 */
	if (stuck) {
		struct rsd_error saved = *rsd_last_error();

		if (!m->ops->event_record(m->ops_ctx, stream, &ev)) {
			stuck = false;
			recorded = true;
		}
		*rsd__err_record() = saved;
	}
	if (err && ev) {
		/* A waited copy without an answer from the device, or a copy
		 * known to have failed that may still run (as above, or a
		 * queued one whose source's fill failed): it stays in flight,
		 * as a queued copy (queued.c). */
		rsd__xfer_discard(m, queued);
		x->event = ev; /* recorded behind a stuck issue, perhaps */
		fail = rsd__xfer_unanswered(m, x, err, recorded || queued || defer);
		/* Into a spill's block: its record keeps the block until that
		 * work is over, then gives it back (queued.c). */
		if (spill)
			rsd__qcopy_handed(m, spill, fail, copy);
		if (x->temporary) {
			x->value = NULL;
			x->charged = false;
		}
		return err;
	}
	rsd__xfer_discard(m, queued);
	if (spill) /* stuck: the block is the spill's again */
		rsd__qcopy_handed(m, spill, NULL, copy);
	if (stuck) {
		/* Not even an event: neither end is ever freed. */
		rsd__arrival_abandon(m, rec, to);
		if (x->temporary) {
			/* A loaded source it may still read: kept too. */
			rsd__keep_forever(x->value);
			x->value = NULL;
		}
		rsd__warn(m,
			  "value %llu: a failed copy's stream could not be synchronized; its "
			  "destination (%llu bytes) stays allocated for the life of the process",
			  (unsigned long long)rec->handle.id,
			  (unsigned long long)rec->spec.storage_nbytes);
	}
	if (!err && defer) {
		rsd__batch_add(x);
		*deferred = true;
		return 0;
	}
	rsd__xfer_settle(m, rec, x->temporary ? NULL : &x->src, to, leave, err);
	rsd__xfer_set_state(x, RSD_XFER_SETTLED, 0);
	return err;
}

static void set_source(struct rsd_transition *rep, struct rsd_location at)
{
	rep->has_source = true;
	rep->source = at;
}

/*
 * A queued move of rec away from `at` keeps its source's bytes aside until
 * the copy answers, and its undo puts them back at `at` only if no copy is
 * there by then. A copy arriving there meanwhile may read the move's
 * destination and fail with it: the undo would then free the value's last
 * bytes. So an action that would place a copy at `at` first waits for that
 * move's copy (folded in by the wait) and then runs again: XFER_WAITED, or
 * the wait's error, or 0 when no such move is queued.
 */
static int wait_move_from(struct rsd_manager *m, const struct rsd_record *rec,
			  struct rsd_location at)
{
	for (uint32_t k = 0; k < rec->nmats; k++) {
		struct rsd_lease_rec *f = rec->mats[k].fill;
		int err;

		if (!f || !f->xf || !f->xf->restore || !rsd_location_equal(f->xf->leftover_at, at))
			continue;
		err = rsd__lease_wait(m, f);
		return err ? err : XFER_WAITED;
	}
	return 0;
}

/*
 * Not waiting (§22.1): an action whose source is a load, to a location
 * whose room a queued copy still holds, waits for that copy before the
 * load, not after it. Loading first, the admission of the copy's
 * destination is refused, the loaded value goes, and the action runs
 * again once the room is free (exec_action_in()): the source is loaded
 * twice for one placement (a key regenerated twice per stage of the
 * demo's prefetching). The outcome is the same either way. XFER_WAITED
 * once waited, the wait's error, or 0 (then the action runs as it
 * would: a batch pending is flushed first, by the retry, as before).
 */
static int room_before_load(struct rsd_manager *m, const struct rsd_record *rec,
			    struct rsd_location to)
{
	struct rsd_location src;
	struct rsd_error saved;
	int err;

	if (!rsd__queue_mode() || !rec->has_source || rec->inflight || rsd__batch_pending() ||
	    rsd_location_equal(rec->source_loc, to) || min_resident(rec, NULL, &src))
		return 0;
	saved = *rsd_last_error();
	err = rsd__admit(m, to, rec->spec.storage_nbytes);
	if (err == -RSD_EBUDGET)
		err = rsd__qcopy_wait_room(m, to);
	else
		err = 0;
	if (err > 0)
		rsd_trace_budget_retry(m->id, to, "wait");
	if (!err)
		*rsd__err_record() = saved; /* refused for nothing to wait for */
	return err > 0 ? XFER_WAITED : err;
}

/* Whether mat is being filled from a failed copy, directly or along a
 * chain of filling copies: its copy fails too (rsd__qcopy_finish()). */
static bool fill_doomed(const struct rsd_record *rec, const struct rsd_mat *mat)
{
	const struct rsd_mat *src = rsd__fill_source(rec, mat);

	for (uint32_t depth = rec->nmats; src && depth; depth--) {
		if (rsd__mat_failed(src))
			return true;
		src = rsd__fill_source(rec, src);
	}
	return false;
}

/*
 * A drop or a move that removes a copy of rec because another is there
 * (resident_count(), a move onto an existing destination) must not count
 * a copy filling from a failed one: that copy fails too, and its undo
 * would remove the value's last bytes. Such an action first waits for the
 * doomed copy (folded in by the wait) and then runs again: XFER_WAITED,
 * or the wait's error, or 0 when there is none.
 */
static int wait_doomed_fill(struct rsd_manager *m, const struct rsd_record *rec)
{
	for (uint32_t k = 0; k < rec->nmats; k++) {
		int err;

		if (!fill_doomed(rec, &rec->mats[k]))
			continue;
		err = rsd__lease_wait(m, rec->mats[k].fill);
		return err ? err : XFER_WAITED;
	}
	return 0;
}

static int do_ensure(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_action *a,
		     void *stream, struct rsd_transition *rep, bool *deferred)
{
	struct rsd_location d = a->location;
	struct rsd_xfer x;
	int err = wait_move_from(m, rec, d);

	if (err)
		return err;
	struct rsd_mat *dmat = rsd__rec_mat(rec, d);

	if (dmat && dmat->state == RSD_MAT_ARRIVING)
		return XFER_RETRY;
	if (dmat && rsd__mat_failed(dmat))
		return rsd__failed_error(rec, dmat);
	rep->has_destination = true;
	rep->destination = d;
	if (dmat) {
		rep->no_op = true;
		rep->reason = R_DEST_RESIDENT;
		return 0;
	}
	/* Whether a copy exists may be what a transfer in flight decides. */
	if (rec->spec.replica_mode == RSD_EXCLUSIVE && rec->inflight)
		return XFER_RETRY;
	if (rec->spec.replica_mode == RSD_EXCLUSIVE && rec->nmats)
		return rsd__err(RSD_EOWNERSHIP,
				"rsd_ensure would replicate RSD_EXCLUSIVE value %llu; use rsd_move",
				(unsigned long long)rec->handle.id);
	if (busy_after(rec, d))
		return XFER_RETRY;
	err = room_before_load(m, rec, d);
	if (err)
		return err;
	err = transfer_source(m, rec, &x);
	if (err)
		return err;
	set_source(rep, x.src);
	err = place(m, rec, &x, d, stream, false, NULL, deferred);
	xfer_finish(m, rec, &x);
	return err;
}

static int do_move(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_action *a,
		   void *stream, struct rsd_transition *rep, bool *deferred)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd_location d = a->location, s;
	struct rsd_mat *smat;
	struct rsd_xfer x;
	bool have_src;
	int err = wait_move_from(m, rec, d);

	if (err)
		return err;
	struct rsd_mat *dmat = rsd__rec_mat(rec, d);

	if (dmat && dmat->state == RSD_MAT_ARRIVING)
		return XFER_RETRY;
	if (dmat && rsd__mat_failed(dmat))
		return rsd__failed_error(rec, dmat);
	if (a->has_from) {
		s = a->from;
		have_src = true;
	} else {
		have_src = min_resident(rec, &d, &s);
		/* The implicit source may be what a transfer in flight decides. */
		if ((have_src && arriving_before(rec, s, &d)) || (!have_src && rec->inflight))
			return XFER_RETRY;
	}
	rep->has_destination = true;
	rep->destination = d;
	if (a->has_from && !rsd__rec_resident(rec, s))
		return rsd__err(RSD_EUNAVAILABLE, "explicit source %s is not resident",
				rsd_location_name(s, name, sizeof(name)));
	smat = have_src ? rsd__rec_mat(rec, s) : NULL;
	if (smat && rsd__mat_failed(smat))
		return rsd__failed_error(rec, smat);
	if (dmat) {
		if (!have_src || rsd_location_equal(s, d)) {
			rep->no_op = true;
			rep->reason = R_DEST_OWNS;
			if (have_src)
				set_source(rep, s);
			return 0;
		}
		err = rsd__removable(rec, rsd__rec_mat(rec, s));
		if (err)
			return err;
		err = wait_doomed_fill(m, rec);
		if (err)
			return err;
		set_source(rep, s);
		/* A durable value keeps its last host copy (devloss.c). */
		if (!rsd__durable_keep(rec, s))
			rsd__remove(m, rec, s);
		return 0;
	}
	/* A busy source fails now, before any wait for the copies that
	 * read it (§20.2): after them it would no longer be busy. */
	err = have_src ? rsd__removable(rec, smat) : 0;
	if (err)
		return err;
	if (busy_after(rec, d))
		return XFER_RETRY;
	if (have_src) {
		memset(&x, 0, sizeof(x)); /* IDLE, RSD_XFER_SYNC */
		x.rec = rec;
		x.src = s;
		x.value = rsd__rec_mat(rec, s)->value;
	} else {
		err = room_before_load(m, rec, d);
		if (!err)
			err = transfer_source(m, rec, &x);
		if (err)
			return err;
	}
	set_source(rep, x.src);
	err = place(m, rec, &x, d, stream, true, have_src && !rsd__durable_keep(rec, s) ? &s : NULL,
		    deferred);
	xfer_finish(m, rec, &x);
	return err;
}

static int do_drop(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_action *a,
		   struct rsd_transition *rep)
{
	/* An arriving destination is not resident yet: the drop is
	 * linearized before that transfer's commit. */
	struct rsd_mat *mat = rsd__rec_resident(rec, a->location);
	int err;

	set_source(rep, a->location);
	if (!mat) {
		rep->no_op = true;
		rep->reason = R_ABSENT;
		return 0;
	}
	err = rsd__removable(rec, mat);
	if (!err && !rec->has_source)
		err = wait_doomed_fill(m, rec);
	if (err)
		return err;
	if (resident_count(rec) == 1 && !rec->has_source)
		return rsd__err(RSD_EOWNERSHIP,
				"the last copy of RSD_MUST_PRESERVE value %llu cannot be "
				"dropped; rsd_discard it",
				(unsigned long long)rec->handle.id);
	rsd__remove(m, rec, a->location);
	return 0;
}

static int do_discard(struct rsd_manager *m, struct rsd_record *rec)
{
	int err;

	if (rec->inflight)
		return rsd__err(RSD_EINUSE, "value %llu is in use: a transfer is in flight",
				(unsigned long long)rec->handle.id);
	for (uint32_t i = 0; i < rec->nmats; i++) {
		err = rsd__removable(rec, &rec->mats[i]);
		if (err)
			return err;
	}
	while (rec->nmats)
		rsd__remove(m, rec, rec->mats[0].loc);
	if (rec->has_source && rec->source.release)
		rec->source.release(rec->source.ctx);
	rec->has_source = false;
	memset(&rec->source, 0, sizeof(rec->source));
	rec->discarded = true;
	rsd__mark_dirty(m, rec);
	rsd__bump(m);
	return 0;
}

/* §4.10: the first CUDA location among the action's candidates. */
static int sample_device(const struct rsd_record *rec, const struct rsd_action *a)
{
	switch (a->kind) {
	case RSD_ACT_ENSURE:
	case RSD_ACT_DROP:
		return a->location.kind == RSD_CUDA ? a->location.device : -1;
	case RSD_ACT_MOVE:
		if (a->location.kind == RSD_CUDA)
			return a->location.device;
		if (a->has_from)
			return a->from.kind == RSD_CUDA ? a->from.device : -1;
		/* then current materializations, insertion order */
		rsd__fallthrough;
	case RSD_ACT_DISCARD:
		for (uint32_t i = 0; i < rec->nmats; i++)
			if (rec->mats[i].loc.kind == RSD_CUDA)
				return rec->mats[i].loc.device;
	}
	return -1;
}

static int check_action_locations(struct rsd_manager *m, const struct rsd_action *a, void *stream)
{
	int err = 0;

	switch (a->kind) {
	case RSD_ACT_ENSURE:
	case RSD_ACT_DROP:
		err = rsd__check_location(m, a->location);
		break;
	case RSD_ACT_MOVE:
		err = rsd__check_location(m, a->location);
		if (!err && a->has_from)
			err = rsd__check_location(m, a->from);
		break;
	case RSD_ACT_DISCARD:
		break;
	default:
		return rsd__err(RSD_ETYPE, "invalid action kind %d", (int)a->kind);
	}
	if (err || !stream)
		return err;
	if (a->kind == RSD_ACT_DROP || a->kind == RSD_ACT_DISCARD)
		return rsd__err(RSD_EINVAL, "only RSD_ACT_ENSURE and RSD_ACT_MOVE take a stream");
	return rsd__check_stream(m, stream, a->location);
}

/*
 * Whether the action can join a plan's queued copies: an ensure whose
 * device copy place() will queue (a resident source, a destination not
 * there yet, a device at one end, room in the batch). Any other action is
 * preceded by a flush of the queued copies, so that commits, their
 * version steps and their trace events come in action order, a load never
 * runs twice for a retried action, and a move, drop or discard sees the
 * copies before it resident. A queued copy that decides this ensure's
 * outcome (its destination, a source it would precede) makes it
 * XFER_RETRY, which flushes too.
 */
static bool may_queue(struct rsd_record *rec, const struct rsd_action *a)
{
	struct rsd_location src;

	if (a->kind != RSD_ACT_ENSURE || !rsd__batch_room() || rsd__rec_mat(rec, a->location) ||
	    !min_resident(rec, NULL, &src))
		return false;
	return a->location.kind == RSD_CUDA || src.kind == RSD_CUDA;
}

/*
 * Whether a copy that failed with RSD_EDEVLOST read a copy on a device the
 * driver now reports lost (those bytes are gone, not the value): once the
 * loss is quarantined the action runs again from the value's other copy,
 * where it has one (§23.2: the rest works as before).
 */
static bool source_lost(struct rsd_manager *m, const struct rsd_transition *rep, int err)
{
	return err == -RSD_EDEVLOST && rep->has_source && rep->source.kind == RSD_CUDA &&
	       m->ops->device_lost && m->ops->device_lost(m->ops_ctx, rep->source.device);
}

static int exec_action_in(struct rsd_manager *m, const struct rsd_action *a, void *stream,
			  struct rsd_transition *report)
{
	struct rsd_transition rep;
	struct rsd_record *rec;
	uint64_t started = 0;
	bool stamp, deferred, flushed = false, relost = false;
	int err, dev;

	err = rsd__reap(m);
	if (err)
		return err;
	/* Reading the clock is most of a no-op's cost: only when someone
	 * reads the report (the caller, or a recording trace session). */
	stamp = report || rsd_trace_transition_enabled();
	if (stamp)
		started = rsd__now_ns();
	for (;;) {
		memset(&rep, 0, sizeof(rep));
		rep.started_at_ns = started;
		rep.action = *a;
		deferred = false;
		/* A discard ends a value lost with its device (devloss.c). */
		err = a->kind == RSD_ACT_DISCARD ? rsd__resolve_lost(m, a->handle, &rec) :
						   rsd__resolve(m, a->handle, &rec);
		if (err)
			return err;
		err = check_action_locations(m, a, stream);
		if (err)
			return err;
		if (rsd__batch_pending() && !may_queue(rec, a)) {
			err = rsd__batch_flush(m);
			if (err)
				return err;
			/* The flush left the lock: resolve again. */
			continue;
		}
		/* The allocator's figures are the report's too: two driver
		 * calls (each taking its locks) that nobody reads otherwise. */
		dev = stamp ? sample_device(rec, a) : -1;
		if (dev >= 0 && dev < m->ndevices && m->ops->metrics) {
			rep.allocator_device = dev;
			rep.has_allocator = !m->ops->metrics(m->ops_ctx, dev,
							     &rep.allocator_allocated_bytes_before,
							     &rep.allocator_reserved_bytes_before);
		}
		rep.logical_nbytes = rec->spec.logical_nbytes;
		rep.storage_nbytes = rec->spec.storage_nbytes;
		switch (a->kind) {
		case RSD_ACT_ENSURE:
			err = do_ensure(m, rec, a, stream, &rep, &deferred);
			break;
		case RSD_ACT_MOVE:
			err = do_move(m, rec, a, stream, &rep, &deferred);
			break;
		case RSD_ACT_DROP:
			err = do_drop(m, rec, a, &rep);
			break;
		case RSD_ACT_DISCARD:
			err = do_discard(m, rec);
			break;
		}
		/* Room an earlier queued move frees, or a value it is moving:
		 * commit the plan's queued copies and run the action again. */
		if (rsd__batch_pending() && !flushed &&
		    (err == XFER_RETRY || err == -RSD_EBUDGET)) {
			if (err == -RSD_EBUDGET)
				rsd_trace_budget_retry(m->id, rsd_last_error()->location, "flush");
			flushed = true;
			err = rsd__batch_flush(m);
			if (err)
				return err;
			continue;
		}
		/* Not waiting (§22.1): room a queued move or load still holds
		 * is free once its copy has read the bytes: wait for that copy
		 * on the host, and run the action again. */
		if (err == -RSD_EBUDGET && (a->kind == RSD_ACT_ENSURE || a->kind == RSD_ACT_MOVE)) {
			struct rsd_location refused = rsd_last_error()->location;
			int waited = rsd__qcopy_wait_room(m, a->location);

			if (waited < 0)
				return waited;
			if (waited) {
				rsd_trace_budget_retry(m->id, refused, "wait");
				continue;
			}
		}
		if (err == XFER_WAITED)
			continue;
		/* The quarantine takes the dead copy out (devloss.c); a
		 * second loss is the action's answer, and so is this one
		 * when no other copy is left (§23.1). */
		if (!relost && !rsd__batch_pending() && source_lost(m, &rep, err)) {
			struct rsd_error saved = *rsd_last_error();
			struct rsd_location other;

			relost = true;
			rsd__quarantine(m);
			*rsd__err_record() = saved;
			if (min_resident(rec, NULL, &other))
				continue;
		}
		if (err != XFER_RETRY)
			break;
		/* Another thread's transfer of this value decides the outcome:
		 * run after its commit, as if called then. */
		rsd__writer_wait(m);
		if (m->closed)
			return rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
					(unsigned long long)m->id);
	}
	if (err)
		return err;
	if (rep.has_allocator && m->ops->metrics) {
		/* Best effort: a failed sample leaves the fields absent. */
		struct rsd_error saved = *rsd_last_error();

		rep.has_allocator = !m->ops->metrics(m->ops_ctx, dev,
						     &rep.allocator_allocated_bytes_after,
						     &rep.allocator_reserved_bytes_after);
		*rsd__err_record() = saved;
	}
	if (!rep.has_allocator) {
		rep.allocator_device = 0;
		rep.allocator_allocated_bytes_before = rep.allocator_reserved_bytes_before = 0;
	}
	if (deferred) {
		/* Completed, reported and traced at its commit. */
		rsd__batch_report(&rep, stamp, report);
		return 0;
	}
	if (stamp)
		rep.completed_at_ns = rsd__now_ns();
	rsd_trace_transition(m->id, &rep);
	if (report)
		*report = rep;
	return 0;
}

int rsd__exec_action(struct rsd_manager *m, const struct rsd_action *a, void *stream,
		     struct rsd_transition *report)
{
	int err;

	/* The test-only section log marks where each action begins and ends. */
	rsd__lin_note(m, RSD_LIN_ACT_BEGIN, 0);
	err = exec_action_in(m, a, stream, report);
	rsd__lin_note(m, RSD_LIN_ACT_END, 0);
	return err;
}

/* fn: the public entry point, for messages. */
static int run_one(struct rsd_manager *m, const char *fn, const struct rsd_action *a, void *stream,
		   struct rsd_transition *report)
{
	int err;

	err = rsd__handle_check(a->handle, fn);
	if (!err && a->kind != RSD_ACT_DISCARD)
		err = rsd__location_check(a->location, fn);
	if (!err && a->has_from)
		err = rsd__location_check(a->from, "rsd_move: from");
	if (err)
		return err;
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		return err;
	err = rsd__exec_action(m, a, stream, report);
	rsd__writer_exit(m);
	return err;
}

int rsd_ensure(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at, void *stream,
	       struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_ensure(h, at);

	return run_one(m, "rsd_ensure", &a, stream, report);
}

int rsd_copy(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to, void *stream,
	     struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_ensure(h, to);

	return run_one(m, "rsd_copy", &a, stream, report);
}

int rsd_move(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to,
	     const struct rsd_location *from, void *stream, struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_move(h, to, from);

	return run_one(m, "rsd_move", &a, stream, report);
}

/* The not-waiting calls run as the waiting ones in queue mode (queued.c). */
static int run_one_queued(struct rsd_manager *m, const char *fn, const struct rsd_action *a,
			  void *stream, struct rsd_transition *report)
{
	struct rsd_exec_scope scope;
	int err;

	rsd__exec_enter(&scope, RSD_EXEC_QUEUE);
	err = run_one(m, fn, a, stream, report);
	rsd__exec_leave(&scope);
	return err;
}

int rsd_ensure_async(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
		     void *stream, struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_ensure(h, at);

	return run_one_queued(m, "rsd_ensure_async", &a, stream, report);
}

int rsd_move_async(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to,
		   const struct rsd_location *from, void *stream, struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_move(h, to, from);

	return run_one_queued(m, "rsd_move_async", &a, stream, report);
}

int rsd_drop(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
	     struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_drop(h, at);

	return run_one(m, "rsd_drop", &a, NULL, report);
}

int rsd_discard(struct rsd_manager *m, struct rsd_handle h, struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_discard(h);

	return run_one(m, "rsd_discard", &a, NULL, report);
}
