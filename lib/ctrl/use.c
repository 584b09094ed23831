// SPDX-License-Identifier: MIT
/*
 * use (reference.md §13.6): decide, enter the decision's scope, lease every
 * requirement grouped by location, record one access epoch. The C API
 * combines construction and entry: rsd_controller_use returns the entered
 * use object, and only on success. A failed entry is unwound (leases
 * released, the scope closed) and freed; what it committed before failing
 * is the thread's partial report (rsd_take_partial_report).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../plan/plan_api.h"
#include "ctrl.h"

/* The requirements at one location, leased together. */
struct group {
	struct rsd_location at;
	void *stream; /* consumer stream; NULL for host */
	struct rsd_lease *lease;
};

struct rsd_use {
	struct rsd_controller *c;
	size_t nreq;
	struct rsd_requirement *req; /* copied */
	size_t ngroups, nleased;
	struct group *groups; /* locations in order of first appearance */
	struct rsd_decision *decision;
	struct rsd_scope *scope;
	bool entered, closed;
	uint32_t guard; /* RSD__LIVE until rsd_use_free */
};

/* Distinct CUDA requirement locations, in order of first appearance. */
static size_t cuda_locations(const struct rsd_request *r, struct rsd_location *out)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nrequirements; i++) {
		struct rsd_location l = r->requirements[i].location;
		bool seen = false;

		if (l.kind != RSD_CUDA)
			continue;
		for (size_t j = 0; j < n && !seen; j++)
			seen = rsd_location_equal(out[j], l);
		if (!seen)
			out[n++] = l;
	}
	return n;
}

/*
 * Every stream, before any decision: coverage of the CUDA requirement
 * locations, each consumer stream the driver's and on its location's
 * device, each transfer stream valid as a scope would check it. A failure
 * here changes nothing.
 */
static int check_streams(struct rsd_manager *m, const struct rsd_request *r, void *const *cs,
			 size_t ncs, const struct rsd_transfer_stream *ts, size_t nts,
			 struct rsd_location *cuda, size_t *ncuda)
{
	char name[RSD_LOCATION_NAME_MAX], list[256];
	size_t n = cuda_locations(r, cuda), len = 0;
	int err;

	*ncuda = n;
	if (ncs && !cs)
		return rsd__err(RSD_ETYPE, "use '%s': consumer_streams is NULL", r->name);
	if (ncs != n) {
		list[0] = '\0';
		for (size_t i = ncs; i < n && len < sizeof(list); i++)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
						len ? ", " : "",
						rsd_location_name(cuda[i], name, sizeof(name)));
		return rsd__err(
			RSD_EINVAL,
			"use '%s': consumer streams must cover exactly the CUDA requirement "
			"locations (%zu): missing [%s], unexpected %zu extra stream(s)",
			r->name, n, list, ncs > n ? ncs - n : 0);
	}
	for (size_t i = 0; i < ncs; i++) {
		if (!cs[i])
			return rsd__err(RSD_ETYPE, "use '%s': consumer stream for %s is NULL",
					r->name, rsd_location_name(cuda[i], name, sizeof(name)));
		err = rsd__check_stream(m, cs[i], cuda[i]);
		if (err)
			return err;
	}
	/* Exactly the checks the scope's entry would make, only earlier. */
	return rsd__check_transfer_streams(m, ts, nts);
}

static struct rsd_use *use_new(struct rsd_controller *c, const struct rsd_request *r,
			       void *const *cs, const struct rsd_location *cuda, size_t ncuda)
{
	struct rsd_use *u = rsd__calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->c = c;
	u->guard = RSD__LIVE;
	u->nreq = r->nrequirements;
	u->req = rsd__malloc(u->nreq * sizeof(*u->req));
	u->groups = rsd__calloc(u->nreq, sizeof(*u->groups));
	if (!u->req || !u->groups) {
		rsd_use_free(u);
		return NULL;
	}
	memcpy(u->req, r->requirements, u->nreq * sizeof(*u->req));
	for (size_t i = 0; i < u->nreq; i++) {
		size_t g = 0;

		while (g < u->ngroups && !rsd_location_equal(u->groups[g].at, u->req[i].location))
			g++;
		if (g < u->ngroups)
			continue;
		u->groups[u->ngroups].at = u->req[i].location;
		for (size_t k = 0; k < ncuda; k++)
			if (rsd_location_equal(cuda[k], u->req[i].location))
				u->groups[u->ngroups].stream = cs[k];
		u->ngroups++;
	}
	return u;
}

static int acquire_groups(struct rsd_use *u)
{
	struct rsd_handle *h = rsd__malloc(u->nreq * sizeof(*h));
	int err = 0;

	if (!h)
		return rsd__err(RSD_ENOMEM, "out of memory acquiring leases");
	for (size_t g = 0; g < u->ngroups && !err; g++) {
		size_t n = 0;

		for (size_t i = 0; i < u->nreq; i++)
			if (rsd_location_equal(u->req[i].location, u->groups[g].at))
				h[n++] = u->req[i].handle;
		err = rsd_acquire(u->c->m, h, n, u->groups[g].at, u->groups[g].stream,
				  &u->groups[g].lease);
		if (!err)
			u->nleased++;
	}
	free(h);
	return err;
}

/* §12.6: one new epoch for every distinct handle of the request. */
static int record_epoch(struct rsd_use *u)
{
	struct rsd_controller *c = u->c;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	c->epoch++;
	for (size_t i = 0; i < u->nreq; i++) {
		struct rsd__meta *e = rsd__meta_get(c, u->req[i].handle.id);

		if (!e) {
			err = -RSD_ENOMEM;
			break;
		}
		e->has_epoch = true;
		e->epoch = c->epoch;
	}
	/* the position moves where the epoch does: successful uses only */
	if (!err)
		rsd__sched_advance(c, &(struct rsd_request){ "use", u->req, u->nreq, NULL, 0 });
	pthread_mutex_unlock(&c->lock);
	return err;
}

/*
 * Close u's scope; when the close fails before it runs (a failed reap),
 * abandon it, so that its reservations never outlive the use (§21.4).
 * The close's error is returned either way.
 */
static int close_scope(struct rsd_use *u, struct rsd_plan_report **rep)
{
	int err = rsd_scope_close(u->scope, rep);

	if (err) {
		struct rsd_error saved = *rsd_last_error();

		rsd__scope_abandon(u->scope);
		*rsd__err_record() = saved;
	}
	return err;
}

/*
 * A failed entry: release the leases taken so far (reverse order, no wait),
 * then close the scope, which releases the request's reservations; its
 * report (what entry committed) becomes the thread's partial report. The
 * original failure is returned unless unwinding itself failed.
 */
static int unwind(struct rsd_use *u, int err)
{
	struct rsd_error saved = *rsd_last_error();
	struct rsd_plan_report *rep = NULL;
	int uerr = 0;

	u->closed = true;
	for (size_t g = u->nleased; g-- > 0;) {
		int e = rsd_lease_release(u->groups[g].lease, 0);

		if (e && !uerr)
			uerr = e;
	}
	if (u->scope) {
		int e = close_scope(u, &rep);

		if (e && !uerr)
			uerr = e;
		else if (!e)
			rsd__partial_report_set(rep);
	}
	if (uerr)
		return uerr;
	*rsd__err_record() = saved;
	return err;
}

/* ---- waiting for other threads' work (DOC: rsd_controller_use_wait) ---- */

/*
 * Whether err, the failure of one attempt, is one that other threads' work
 * in flight may take away: a stale decision, no room found, or an entry
 * refused for budget, for a value in use or for one not there yet.
 */
static bool may_pass(int err)
{
	int cause = rsd_last_error()->cause;

	switch (err) {
	case -RSD_ESTALE:
	case -RSD_EPLAN:
	case -RSD_ESEARCHLIMIT:
	case -RSD_EINUSE:
		return true;
	case -RSD_EEXEC:
		return cause == -RSD_EBUDGET || cause == -RSD_EINUSE ||
		       cause == -RSD_EUNAVAILABLE || cause == -RSD_ESTALE;
	default:
		return false;
	}
}

static bool same_key(const struct rsd__use_waiter *a, const struct rsd__use_waiter *b)
{
	return a->has_at == b->has_at && (!a->has_at || rsd_location_equal(a->at, b->at));
}

/* No waiter for the same location began to wait before w; wait_lock held. */
static bool wait_first(const struct rsd_controller *c, const struct rsd__use_waiter *w)
{
	for (const struct rsd__use_waiter *o = c->waiters; o != w; o = o->next)
		if (same_key(o, w))
			return false;
	return true;
}

static void wait_join(struct rsd_controller *c, struct rsd__use_waiter *w, const char *name)
{
	const struct rsd_error *e = rsd_last_error();

	w->has_at = e->has_location;
	w->at = e->location;
	w->next = NULL;
	w->name = name;
	w->phase = RSD__WP_QUEUED;
	w->err = w->cause = 0;
	w->why = -100;
	w->attempts = 0;
	w->since_ns = rsd__now_ns();
	w->msg[0] = '\0';
	pthread_mutex_lock(&c->wait_lock);
	if (c->waiters_tail)
		c->waiters_tail->next = w;
	else
		c->waiters = w;
	c->waiters_tail = w;
	pthread_mutex_unlock(&c->wait_lock);
}

static void wait_leave(struct rsd_controller *c, struct rsd__use_waiter *w)
{
	struct rsd__use_waiter **p, *prev = NULL;

	pthread_mutex_lock(&c->wait_lock);
	for (p = &c->waiters; *p != w; p = &(*p)->next)
		prev = *p;
	*p = w->next;
	if (c->waiters_tail == w)
		c->waiters_tail = prev;
	pthread_cond_broadcast(&c->wait_cond);
	pthread_mutex_unlock(&c->wait_lock);
}

/*
 * Sleep until w is the oldest waiter of its location, then until the
 * manager's progress moves past seen: for an entry refused for budget,
 * until the bytes it asked for are free there, or bytes there go (the decision cannot see
 * what other threads' plans hold, and would make the same plan again).
 * 1: try again; 0: until_ns came; 2: nothing in flight can change the
 * answer; 3: only other threads' calls committed, with nothing in flight
 * (rsd__progress_wait()); < 0: the manager closed.
 */
static int wait_turn(struct rsd_controller *c, struct rsd__use_waiter *w, int err,
		     const struct rsd__progress_mark *seen, uint64_t until_ns)
{
	const struct rsd_error *e = rsd_last_error();
	bool room = err == -RSD_EEXEC && e->cause == -RSD_EBUDGET && e->has_budget &&
		    e->has_location;
	struct rsd_location at = e->location;
	uint64_t need = e->requested_bytes;
	size_t len;
	int why;

	pthread_mutex_lock(&c->wait_lock);
	w->attempts++;
	w->err = err;
	w->cause = e->cause;
	len = strnlen(e->message, sizeof(w->msg) - 1); /* a cut message is enough */
	memcpy(w->msg, e->message, len);
	w->msg[len] = '\0';
	w->phase = RSD__WP_QUEUED;
	while (!wait_first(c, w)) {
		uint64_t now = rsd__now_ns();
		struct timespec ts;

		if (now >= until_ns) {
			pthread_mutex_unlock(&c->wait_lock);
			return 0;
		}
		ts.tv_sec = (time_t)(until_ns / 1000000000ull);
		ts.tv_nsec = (long)(until_ns % 1000000000ull);
		pthread_cond_timedwait(&c->wait_cond, &c->wait_lock, &ts);
	}
	w->phase = RSD__WP_PROGRESS;
	pthread_mutex_unlock(&c->wait_lock);
	why = rsd__progress_wait(c->m, seen, room ? &at : NULL, need, until_ns);
	pthread_mutex_lock(&c->wait_lock);
	w->why = why;
	w->phase = RSD__WP_ATTEMPT;
	pthread_mutex_unlock(&c->wait_lock);
	return why;
}

void rsd__controller_dump(struct rsd_controller *c, FILE *f)
{
	static const char *const phase[] = { "queued behind an older waiter of its location",
					     "waiting for progress", "attempting again" };
	char at[RSD_LOCATION_NAME_MAX];
	uint64_t now = rsd__now_ns();
	unsigned n = 0;

	pthread_mutex_lock(&c->wait_lock);
	for (const struct rsd__use_waiter *w = c->waiters; w; w = w->next, n++)
		fprintf(f,
			"  use waiter %u '%s' at %s: %s for %llu ms, %lu failed attempts, last "
			"wait answer %d, last failure %s (cause %s): %s\n",
			n, w->name ? w->name : "?",
			w->has_at ? rsd_location_name(w->at, at, sizeof(at)) : "(no location)",
			phase[w->phase], (unsigned long long)((now - w->since_ns) / 1000000),
			w->attempts, w->why, rsd_strerror(w->err), rsd_strerror(w->cause), w->msg);
	if (!n)
		fprintf(f, "  no use waiting\n");
	pthread_mutex_unlock(&c->wait_lock);
}

/*
 * Whether err, a failure may_pass() lets wait, can never be taken away by
 * the end of work in flight: the decision found too little room at its
 * short location because of live lifetimes (active leases, holds,
 * reservations), which end only when whoever owns them, perhaps a thread
 * waiting here itself, releases or closes them. Judged on the image the
 * decision read (its blockers), so the failure is the one the same use
 * has alone there. Waiting for them instead is how two threads that keep
 * leases between uses waited for each other for ever.
 */
static bool blocked_for_good(int err)
{
	const struct rsd_blockers *b = rsd_last_blockers();

	return (err == -RSD_EPLAN || err == -RSD_ESEARCHLIMIT) && b && rsd__blockers_for_good(b);
}

/*
 * An entry refused for budget at a location where live lifetimes alone
 * leave too little room for the bytes it asked for: no wait brings that
 * room, a new decision (which sees the lifetimes) goes another way or
 * fails for good.
 */
static bool refused_for_good(struct rsd_controller *c, int err)
{
	const struct rsd_error *e = rsd_last_error();

	return err == -RSD_EEXEC && e->cause == -RSD_EBUDGET && e->has_location &&
	       rsd__lifetimes_block(c->m, e->location, e->requested_bytes);
}

/* Back to a use that never attempted: nothing entered, nothing leased. */
static void attempt_reset(struct rsd_use *u)
{
	for (size_t g = 0; g < u->ngroups; g++) {
		rsd_lease_free(u->groups[g].lease);
		u->groups[g].lease = NULL;
	}
	u->nleased = 0;
	rsd_scope_free(u->scope);
	u->scope = NULL;
	rsd_decision_free(u->decision);
	u->decision = NULL;
	u->entered = u->closed = false;
}

/*
 * One attempt: decide, enter, lease, record the epoch. *taken: a value
 * was not resident for its lease after the entry: another thread moved
 * or dropped it between the entry's commit and the lease, or its copy
 * there was still arriving (the decision counts an arriving copy as
 * there, a lease waits for none). Either is other threads' work, which a
 * use waits for as for the failures of may_pass().
 */
static int attempt(struct rsd_use *u, const struct rsd_request *r,
		   const struct rsd_transfer_stream *ts, size_t nts, bool *taken)
{
	struct rsd_controller *c = u->c;
	int err;

	*taken = false;
	err = rsd_controller_decide(c, r, &u->decision);
	if (err)
		return err;
	u->entered = true;
	/* a failed scope entry leaves nothing to close */
	err = rsd_controller_scope(c, u->decision, ts, nts, &u->scope);
	if (err)
		return err;
	err = acquire_groups(u);
	*taken = err == -RSD_EUNAVAILABLE;
	if (!err)
		err = record_epoch(u);
	if (err)
		err = unwind(u, err);
	return err;
}

int rsd_controller_use(struct rsd_controller *c, const struct rsd_request *r,
		       void *const *consumer_streams, size_t ncs,
		       const struct rsd_transfer_stream *ts, size_t nts, struct rsd_use **out)
{
	struct rsd_location cuda[RSD_NSLOTS];
	struct rsd__use_waiter w;
	bool waiting = false, last = false, redecided = false, taken = false;
	uint64_t limit, until = 0, v, last_v = 0;
	struct rsd_error saved;
	struct rsd_use *u;
	size_t ncuda;
	int err;

	if (!c)
		return rsd__err(RSD_ETYPE, "rsd_controller_use: controller is NULL");
	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_controller_use: out is NULL");
	err = rsd__request_check(r);
	if (err)
		return err;
	err = check_streams(c->m, r, consumer_streams, ncs, ts, nts, cuda, &ncuda);
	if (err)
		return err;
	u = use_new(c, r, consumer_streams, cuda, ncuda);
	if (!u)
		return rsd__err(RSD_ENOMEM, "out of memory creating use '%s'", r->name);
	pthread_mutex_lock(&c->lock);
	limit = (c->flags & RSD_CTRL_NOWAIT) ? 0 : atomic_load(&c->wait_limit_ns);
	pthread_mutex_unlock(&c->lock);
	for (;;) {
		/* Read before deciding: no step after it is missed. */
		struct rsd__progress_mark seen;
		int why;

		rsd__progress_mark(c->m, &seen);
		err = attempt(u, r, ts, nts, &taken);
		if (!err || !limit || (!taken && (!may_pass(err) || blocked_for_good(err))))
			break;
		if (!until)
			until = limit > UINT64_MAX - rsd__now_ns() ? UINT64_MAX :
								     rsd__now_ns() + limit;
		/* Overtaken by another commit: the state moved, decide again.
		 * Refused for room that only lifetimes hold: decide again at
		 * once (once in a row), on a state that shows them. */
		if ((err == -RSD_ESTALE || (!redecided && refused_for_good(c, err))) &&
		    rsd__now_ns() < until) {
			redecided = err != -RSD_ESTALE;
			attempt_reset(u);
			continue;
		}
		redecided = false;
		if (!waiting) {
			wait_join(c, &w, r->name);
			waiting = true;
		}
		why = wait_turn(c, &w, err, &seen, until);
		/*
		 * Room a waiter looks for may have come before it began to
		 * wait: with nothing left in flight, one more attempt. Another
		 * thread's transfer admitted beside that attempt (its arriving
		 * copy moves no state version) refuses the entry too, and is
		 * done by the next wait: one more attempt for as long as each
		 * decides on a newer state than the one before; one that fails
		 * twice on the same state fails so alone.
		 */
		v = u->decision ? u->decision->expected_state_version : 0;
		if (why == 1) {
			last = false;
		} else if (why == 3) {
			/* Only other threads' calls committed, nothing in flight:
			 * one of them may have given room back, so once more;
			 * after that, deciding again for every call another
			 * thread makes would never end while they keep coming. */
			why = last ? 2 : 1;
			last = true;
			last_v = v;
		} else if (why == 2 && (err == -RSD_EEXEC || taken) && (!last || v != last_v)) {
			last = true;
			last_v = v;
			why = 1;
		}
		if (why != 1)
			break; /* the last attempt's failure is the answer */
		attempt_reset(u);
	}
	if (waiting) {
		saved = *rsd_last_error();
		wait_leave(c, &w);
		*rsd__err_record() = saved;
	}
	if (err)
		goto fail;
	*out = u;
	return 0;
fail:
	/* Nothing of a failed entry outlives it; its error stays recorded. */
	saved = *rsd_last_error();
	u->closed = true;
	rsd_use_free(u);
	*rsd__err_record() = saved;
	return err;
}

int rsd_use_value(struct rsd_use *u, struct rsd_handle h, struct rsd_location at,
		  const struct rsd_resident **out)
{
	char name[RSD_LOCATION_NAME_MAX];
	bool found = false;

	int err;

	if (!u || !out)
		return rsd__err(RSD_ETYPE, "rsd_use_value: NULL %s", u ? "out" : "use");
	err = rsd__handle_check(h, "rsd_use_value");
	if (!err)
		err = rsd__location_check(at, "rsd_use_value");
	if (err)
		return err;
	/* The values exist only inside the active use, whatever is asked. */
	if (!u->entered || u->closed)
		return rsd__err(RSD_EUSAGE,
				"use '%s' is not active: its values were released at close",
				u->decision->plan->name);
	for (size_t i = 0; i < u->nreq && !found; i++)
		found = rsd_handle_equal(u->req[i].handle, h) &&
			rsd_location_equal(u->req[i].location, at);
	if (!found)
		return rsd__err(RSD_ENOTFOUND,
				"handle '%llu' at %s is not a requirement of this use",
				(unsigned long long)h.id,
				rsd_location_name(at, name, sizeof(name)));
	for (size_t g = 0; g < u->ngroups; g++)
		if (rsd_location_equal(u->groups[g].at, at))
			return rsd_lease_value(u->groups[g].lease, h, out);
	return rsd__err(RSD_EUSAGE, "use has no lease at %s", name);
}

int rsd_use_adopt(struct rsd_use *u, const char *label, struct rsd_resident *value,
		  enum rsd_replica_mode mode, void *producer_stream, struct rsd_handle *out)
{
	if (!u || !label || !value || !out)
		return rsd__err(RSD_ETYPE, "rsd_use_adopt: NULL %s",
				!u     ? "use" :
				!label ? "label" :
				!value ? "value" :
					 "out");
	/* As for its values: the reservations exist only inside the use. */
	if (!u->entered || u->closed)
		return rsd__err(RSD_EUSAGE,
				"use '%s' is not active: its reservations were released at close",
				u->decision->plan->name);
	return rsd_scope_adopt(u->scope, label, value, mode, producer_stream, out);
}

const struct rsd_decision *rsd_use_decision(const struct rsd_use *u)
{
	return u ? u->decision : NULL;
}

int rsd_use_close(struct rsd_use *u, struct rsd_plan_report **report)
{
	struct rsd_plan_report *rep = NULL;
	int err = 0;

	if (!u)
		return rsd__err(RSD_ETYPE, "rsd_use_close: use is NULL");
	if (u->closed) {
		/* a second close: a silent no-op without a report */
		if (report)
			*report = NULL;
		return 0;
	}
	/* The scope's reports first: out of memory then changes nothing. */
	if (u->scope && (err = rsd__scope_close_prepare(u->scope, report != NULL)))
		return err;
	u->closed = true;
	for (size_t g = u->nleased; g-- > 0;) {
		int e = rsd_lease_release(u->groups[g].lease, 0);

		if (e && !err)
			err = e;
	}
	if (u->scope) {
		int e = close_scope(u, report ? &rep : NULL);

		if (e && !err)
			err = e;
	}
	if (err) {
		/* out-parameters are written only on success */
		rsd_plan_report_free(rep);
		return err;
	}
	if (report)
		*report = rep;
	return 0;
}

void rsd_use_free(struct rsd_use *u)
{
	if (!u)
		return;
	rsd__guard_free(&u->guard, __func__, "struct rsd_use", u);
	if (u->entered && !u->closed)
		rsd_use_close(u, NULL);
	for (size_t g = 0; g < u->ngroups; g++)
		rsd_lease_free(u->groups[g].lease);
	rsd_scope_free(u->scope);
	rsd_decision_free(u->decision);
	free(u->groups);
	free(u->req);
	free(u);
}

int rsd_controller_use_async(struct rsd_controller *c, const struct rsd_request *r,
			     void *const *consumer_streams, size_t ncs,
			     const struct rsd_transfer_stream *ts, size_t nts, struct rsd_use **out)
{
	struct rsd_exec_scope scope;
	int err;

	rsd__exec_enter(&scope, RSD_EXEC_QUEUE);
	err = rsd_controller_use(c, r, consumer_streams, ncs, ts, nts, out);

	if (!err)
		rsd__lookahead(c, r); /* RSD_CTRL_LOOKAHEAD */
	rsd__exec_leave(&scope);
	return err;
}
