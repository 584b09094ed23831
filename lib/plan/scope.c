// SPDX-License-Identifier: MIT
/*
 * Scopes (§11): a single-use plan context. Entry preflights the whole
 * plan, runs reclaim, admits reservations, runs enter; close runs exit and
 * releases the scope's reservations in reverse admission order.
 *
 * Deviation from the reference: a close whose prologue fails for any reason
 * but a closed manager (refused on a source callback's thread with
 * -RSD_EREENTRANT, a reap whose event query fails) leaves the scope open,
 * so a later close (or rsd_scope_free) still releases its reservations
 * instead of leaking them. A use that must end its scope whatever happens
 * (its unwinding, §21.4) abandons it with rsd__scope_abandon().
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "../nvtx.h"
#include "../trace.h"

struct rsd_scope {
	struct rsd_objlink link; /* link.m: the manager, NULL once destroyed */
	pthread_mutex_t lock;	 /* entered/closed/report; taken before m->lock */
	struct rsd_plan *plan;
	struct rsd_transfer_stream *ts;
	size_t nts;
	bool has_expected;
	uint64_t expected;
	bool entered, closed;
	struct rsd_reservation **resv; /* admitted, in order */
	size_t nresv;
	struct rsd_transition *trans; /* reclaim ++ enter ++ exit so far */
	size_t ntrans;
	uint64_t started;
	struct rsd_plan_report *report;
	/* Reports allocated ahead by rsd__scope_close_prepare(), for close. */
	struct rsd_plan_report *pre_own, *pre_copy;
	int exit_error;
};

static void release_reservations(struct rsd_manager *m, struct rsd_scope *s)
{
	while (s->nresv) {
		struct rsd_reservation *r = s->resv[--s->nresv];

		rsd__reservation_release_locked(m, r);
		free(r->label);
		free(r);
	}
}

/* Run actions of one phase; on failure record the EEXEC. */
static int run_phase(struct rsd_manager *m, struct rsd_scope *s, const struct rsd_action *a,
		     size_t n, enum rsd_plan_phase phase)
{
	int err;

	for (size_t i = 0; i < n; i++) {
		err = rsd__exec_action(m, &a[i], rsd__stream_for(s->ts, s->nts, &a[i]),
				       &s->trans[s->ntrans]);
		if (err)
			return rsd__exec_failure(s->plan->name, phase, (long)i, -1, err, s->trans,
						 s->ntrans, s->started, NULL);
		s->ntrans++;
	}
	return 0;
}

static int enter_phases(struct rsd_manager *m, struct rsd_scope *s);

static int enter_locked(struct rsd_manager *m, struct rsd_scope *s)
{
	const struct rsd_plan *p = s->plan;
	struct rsd_plan_hold hold;
	int err;

	if (s->has_expected && s->expected != m->version)
		return rsd__err_stale(s->expected, m->version);
	err = rsd__check_transfer_streams(m, s->ts, s->nts);
	if (!err)
		err = rsd__preflight(m, p, &hold);
	if (err)
		return err;
	err = enter_phases(m, s);
	rsd__plan_hold_give(m, &hold);
	return err;
}

/* Reclaim, reservations and enter, with the preflight's headroom held. */
static int enter_phases(struct rsd_manager *m, struct rsd_scope *s)
{
	const struct rsd_plan *p = s->plan;
	int err;

	err = run_phase(m, s, p->reclaim, p->nreclaim, RSD_PHASE_RECLAIM);
	if (err)
		return err;
	for (size_t i = 0; i < p->nreservations; i++) {
		const struct rsd_reservation_spec *r = &p->reservations[i];

		int waited = 0;

		/* Room a queued copy still holds (§22.1): wait for it. */
		for (;;) {
			err = rsd__reserve_locked(m, r->location, r->nbytes, r->label,
						  &s->resv[s->nresv]);
			if (err != -RSD_EBUDGET)
				break;
			waited = rsd__qcopy_wait_room(m, r->location);
			if (waited <= 0)
				break;
			rsd_trace_budget_retry(m->id, r->location, "wait");
		}
		if (waited < 0)
			err = waited;
		if (err) {
			release_reservations(m, s);
			return rsd__exec_failure(p->name, RSD_PHASE_RESERVE, -1, (long)i, err,
						 s->trans, s->ntrans, s->started, NULL);
		}
		s->nresv++;
	}
	err = run_phase(m, s, p->enter, p->nenter, RSD_PHASE_ENTER);
	if (err)
		release_reservations(m, s);
	return err;
}

int rsd_scope_enter(struct rsd_manager *m, const struct rsd_plan *p,
		    const struct rsd_transfer_stream *ts, size_t nts,
		    const uint64_t *expected_version, struct rsd_scope **out)
{
	size_t nact;
	struct rsd_scope *s;
	int err;

	err = rsd__plan_check(p);
	if (err)
		return err;
	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_scope_enter: NULL argument");
	if (nts && !ts)
		return rsd__err(RSD_ETYPE, "%zu transfer streams but no array", nts);
	for (size_t i = 0; i < nts; i++) {
		err = rsd__location_check(ts[i].location, "rsd_scope_enter: transfer stream");
		if (err)
			return err;
	}
	nact = p->nreclaim + p->nenter + p->nexit;
	s = rsd__calloc(1, sizeof(*s));
	if (!s || !(s->plan = rsd__plan_copy(p)) ||
	    !(s->trans = rsd__calloc(nact ? nact : 1, sizeof(*s->trans))) ||
	    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
	    !(s->resv = rsd__calloc(p->nreservations ? p->nreservations : 1, sizeof(*s->resv))) ||
	    !(s->ts = rsd__calloc(nts ? nts : 1, sizeof(*s->ts)))) {
		err = rsd__err(RSD_ENOMEM, "out of memory creating scope '%s'", p->name);
		goto fail;
	}
	if (nts)
		memcpy(s->ts, ts, nts * sizeof(*ts));
	s->nts = nts;
	s->has_expected = expected_version != NULL;
	s->expected = expected_version ? *expected_version : 0;
	s->entered = true;
	s->started = rsd__now_ns();
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		goto fail;
	rsd_trace_plan_begin(m->id, p->name, "scope-enter");
	rsd__nvtx_push(p->name ? p->name : "rsd scope enter", 0);
	err = enter_locked(m, s);
	rsd__nvtx_pop();
	rsd_trace_plan_end(m->id, p->name, "scope-enter",
			   rsd_phase_name(err ? rsd_last_error()->phase : RSD_PHASE_NONE), err,
			   (uint32_t)s->ntrans);
	rsd__writer_exit(m);
	if (err)
		goto fail;
	pthread_mutex_init(&s->lock, NULL);
	rsd__obj_link(m, &s->link);
	*out = s;
	return 0;
fail:
	/*
	 * A failed entry released whatever it had admitted (enter_locked
	 * unwinds its reservations), was never linked to the manager, and
	 * leaves nothing to the caller: its facts are in rsd_last_error() and,
	 * after -RSD_EEXEC, rsd_take_partial_report().
	 */
	if (s) {
		free(s->plan);
		free(s->trans);
		free(s->resv);
		free(s->ts);
		free(s);
	}
	return err;
}

/* Under s->lock: the reports a close will need, if not allocated yet. */
static int close_reports(struct rsd_scope *s, bool copy)
{
	size_t cap = s->ntrans + s->plan->nexit;

	if (!s->pre_own)
		s->pre_own = rsd__report_alloc(s->plan->name, cap);
	if (copy && s->pre_own && !s->pre_copy)
		s->pre_copy = rsd__report_alloc(s->plan->name, cap);
	if (!s->pre_own || (copy && !s->pre_copy))
		return rsd__err(RSD_ENOMEM, "out of memory for the report of scope '%s'",
				s->plan->name);
	return 0;
}

int rsd__scope_close_prepare(struct rsd_scope *s, bool report)
{
	struct rsd_manager *m = NULL;
	int err = 0;

	pthread_mutex_lock(&s->lock);
	if (!s->closed && s->entered) {
		err = close_reports(s, report);
		m = s->link.m;
	}
	pthread_mutex_unlock(&s->lock);
	/* A close the writer guard would refuse on this thread (inside a
	 * source callback of the manager, §9.1) is refused here, before the
	 * caller releases anything, so that a later close still can. */
	if (!err && m) {
		err = rsd__writer_enter(m, 0);
		if (!err)
			rsd__writer_exit(m);
	}
	return err;
}

int rsd_scope_close(struct rsd_scope *s, struct rsd_plan_report **report)
{
	struct rsd_plan_report *own = NULL, *copy = NULL;
	const struct rsd_plan *p;
	struct rsd_manager *m;
	int err;

	if (!s)
		return rsd__err(RSD_ETYPE, "scope is NULL");
	pthread_mutex_lock(&s->lock);
	p = s->plan;
	if (s->closed) {
		/* a second close: a silent no-op without a report */
		if (report)
			*report = NULL;
		err = 0;
		goto out;
	}
	if (!s->entered) {
		err = rsd__err(RSD_EUSAGE, "scope '%s' was never entered", p->name);
		goto out;
	}
	m = s->link.m;
	if (!m) {
		s->closed = true;
		err = rsd__err(RSD_ECLOSED, "the manager of scope '%s' no longer exists", p->name);
		goto out;
	}
	/* Both reports before exit commits anything: a done close must not
	 * fail, and a close that cannot start leaves the scope open. */
	err = close_reports(s, report != NULL);
	if (err)
		goto out;
	own = s->pre_own;
	copy = s->pre_copy;
	s->pre_own = s->pre_copy = NULL;
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err) {
		/* A closed manager dropped the reservations (a forced close);
		 * after any other refusal they are still ours to release. */
		if (err == -RSD_ECLOSED)
			s->closed = true;
		goto out;
	}
	rsd_trace_plan_begin(m->id, p->name, "scope-exit");
	rsd__nvtx_push(p->name ? p->name : "rsd scope exit", 0);
	err = run_phase(m, s, p->exit, p->nexit, RSD_PHASE_EXIT);
	/* Always, even after an exit failure. */
	release_reservations(m, s);
	s->closed = true;
	if (err) {
		s->exit_error = err;
	} else {
		rsd__report_fill(own, s->trans, s->ntrans, s->started, rsd__now_ns());
		s->report = own;
		own = NULL;
	}
	rsd__nvtx_pop();
	rsd_trace_plan_end(m->id, p->name, "scope-exit",
			   rsd_phase_name(err ? RSD_PHASE_EXIT : RSD_PHASE_NONE), err,
			   (uint32_t)s->ntrans);
	rsd__writer_exit(m);
	/* s->report is set whenever err is 0; tested too, for the analyzer */
	if (!err && report && s->report) {
		rsd__report_fill(copy, s->trans, s->ntrans, s->report->started_at_ns,
				 s->report->completed_at_ns);
		*report = copy;
		copy = NULL;
	}
out:
	pthread_mutex_unlock(&s->lock);
	rsd_plan_report_free(own);
	rsd_plan_report_free(copy);
	return err;
}

/*
 * The reservation an output labelled `label` goes into: the first so
 * labelled at the value's own location with room for it; when none has
 * room, the one there with the most bytes left (its adopt then fails
 * naming them), else the first so labelled (whose adopt fails saying the
 * value does not conform); NULL when no reservation has the label. s->lock
 * held: only calls that hold it change the bytes of the scope's
 * reservations.
 */
static struct rsd_reservation *output_reservation(struct rsd_scope *s, const char *label,
						  const struct rsd_resident *value)
{
	struct rsd_reservation *first = NULL, *best = NULL;
	struct rsd_location at;
	bool known = rsd__resident_location(value, &at);
	uint64_t charge = rsd_resident_nbytes(value), storage = rsd_resident_storage_nbytes(value);

	if (storage > charge)
		charge = storage;
	for (size_t i = 0; i < s->nresv; i++) {
		struct rsd_reservation *r = s->resv[i];

		if (strcmp(r->label, label) != 0)
			continue;
		if (!first)
			first = r;
		if (!known || !rsd_location_equal(r->loc, at))
			continue;
		if (r->nbytes >= charge)
			return r;
		if (!best || r->nbytes > best->nbytes)
			best = r;
	}
	return best ? best : first;
}

int rsd_scope_adopt(struct rsd_scope *s, const char *label, struct rsd_resident *value,
		    enum rsd_replica_mode mode, void *producer_stream, struct rsd_handle *out)
{
	struct rsd_reservation *r;
	struct rsd_manager *m;
	int err;

	if (!s || !label || !value || !out)
		return rsd__err(RSD_ETYPE, "rsd_scope_adopt: NULL %s",
				!s     ? "scope" :
				!label ? "label" :
				!value ? "value" :
					 "out");
	pthread_mutex_lock(&s->lock);
	if (s->closed) {
		err = rsd__err(RSD_EUSAGE, "scope '%s' is closed: its reservations were released",
			       s->plan->name);
		goto out;
	}
	m = s->link.m;
	if (!m) {
		err = rsd__err(RSD_ECLOSED, "the manager of scope '%s' no longer exists",
			       s->plan->name);
		goto out;
	}
	r = output_reservation(s, label, value);
	if (!r) {
		err = rsd__err(RSD_ENOTFOUND, "scope '%s' has no reservation labelled '%s'",
			       s->plan->name, label);
		goto out;
	}
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		goto out;
	err = rsd__adopt_reserved_locked(m, r, value, mode, producer_stream, out);
	rsd__writer_exit(m);
out:
	pthread_mutex_unlock(&s->lock);
	return err;
}

void rsd__scope_abandon(struct rsd_scope *s)
{
	struct rsd_manager *m;

	pthread_mutex_lock(&s->lock);
	m = s->link.m;
	if (m && s->entered && !s->closed) {
		rsd__writer_lock(m);
		release_reservations(m, s);
		rsd__writer_exit(m);
	}
	s->closed = true;
	pthread_mutex_unlock(&s->lock);
}

int rsd_scope_exit_error(const struct rsd_scope *s)
{
	return s ? s->exit_error : 0;
}

const struct rsd_plan_report *rsd_scope_report(const struct rsd_scope *s)
{
	return s ? s->report : NULL;
}

void rsd_scope_free(struct rsd_scope *s)
{
	struct rsd_manager *m;

	if (!s)
		return;
	m = s->link.m;
	if (m && s->entered && !s->closed) {
		/* Abandonment: reservations back, no exit actions. */
		if (!rsd__writer_enter(m, 0)) {
			release_reservations(m, s);
			rsd__writer_exit(m);
			rsd__warn(m, "scope '%s' was freed while open: released its reservations",
				  s->plan->name);
		} else {
			/* The manager still lists the scope's reservations: keep
			 * the scope and the manager (§8.9). */
			m->keep_alive = true;
			rsd__warn(
				m,
				"scope '%s' was freed while open and its reservations could not be "
				"released (%s): the manager was retained",
				s->plan->name, rsd_last_error()->message);
			return;
		}
	}
	rsd__obj_unlink(&s->link);
	/* Reservation records left over (manager gone) are ours to free. */
	for (size_t i = 0; i < s->nresv; i++) {
		free(s->resv[i]->label);
		free(s->resv[i]);
	}
	pthread_mutex_destroy(&s->lock);
	rsd_plan_report_free(s->report);
	rsd_plan_report_free(s->pre_own);
	rsd_plan_report_free(s->pre_copy);
	free(s->plan);
	free(s->trans);
	free(s->resv);
	free(s->ts);
	free(s);
}

int rsd_scope_enter_async(struct rsd_manager *m, const struct rsd_plan *p,
			  const struct rsd_transfer_stream *ts, size_t nts,
			  const uint64_t *expected_version, struct rsd_scope **out)
{
	struct rsd_exec_scope scope;
	int err;

	rsd__exec_enter(&scope, RSD_EXEC_QUEUE);
	err = rsd_scope_enter(m, p, ts, nts, expected_version, out);
	rsd__exec_leave(&scope);
	return err;
}
