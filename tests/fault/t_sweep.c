// SPDX-License-Identifier: MIT
/*
 * Allocation-failure sweep over a scripted workload that calls every public
 * entry point once (manager create, adopt, register_source, every
 * transition, leases, holds, reservations, explain, execute_actions,
 * scopes, the controller's policies, metadata, decide, scope and use,
 * snapshots, close), as SQLite runs its out-of-memory tests: for k = 1, 2,
 * ... the "alloc" fault point fails the kth bookkeeping allocation, until a
 * run completes without reaching it. Every call that reports the failure
 * must return -RSD_ENOMEM (a plan -RSD_EEXEC caused by it) with its error
 * record filled, must not write its out-parameter, and must leave
 * state_version and the snapshot as they were (a plan may keep its
 * committed prefix: then no reservation or protection may be left behind);
 * the call is then retried with the point disarmed (it fires once) and the
 * workload finished. The final state must equal the clean run's, and the
 * manager must close without force. LeakSanitizer (SANITIZE=address) and
 * valgrind (VALGRIND=1) check that no unwinding path leaks.
 *
 * tests/model/t_alloc_sweep does the same against the reference model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "internal.h"

#define NB 32

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 }, CUDA1 = { RSD_CUDA, 1 };
static void *const SENTINEL = (void *)&SENTINEL;

struct w {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	void *cs0, *cs0b, *cs1;
	struct rsd_handle a, b, s;
	uint64_t fired0;
	uint64_t k, hits0, fired_at_arm; /* the arming: kth allocation of the workload */
	struct rsd_snapshot *before;
	unsigned reported, absorbed; /* of this run: 0 or 1 each */
	bool changed;		     /* a reported failure kept a plan prefix */
	char site[128];
	/* Distinct sites over every run of the program. */
};

static char sites[256][128];
static unsigned nsites;

static void quiet(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg;
}

static uint64_t fired(void)
{
	return rsd__fault_fired(NULL, 0);
}

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct w *w = ctx;
	uint64_t n = NB;

	return rsd_resident_alloc(w->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				  out);
}

static void arm(struct w *w, uint64_t k)
{
	w->k = k;
	w->hits0 = rsd_fault_hits("alloc");
	w->fired_at_arm = fired();
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, k, RSD_ENOMEM));
}

/* The checks' own snapshots must not count among the workload's
 * allocations: disarm around them (hits are counted only while armed),
 * then re-arm for what is left of k. */
static bool pause_fault(struct w *w)
{
	if (!w->k || fired() != w->fired_at_arm)
		return false;
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	return true;
}

static void resume_fault(struct w *w)
{
	uint64_t used = rsd_fault_hits("alloc") - w->hits0;

	ATF_REQUIRE(used < w->k);
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, w->k - used, RSD_ENOMEM));
}

static struct rsd_snapshot *snap(struct w *w)
{
	struct rsd_snapshot *s = NULL;
	bool paused = pause_fault(w);

	RSD_REQUIRE_OK(rsd_snapshot_take(w->m, &s));
	if (paused)
		resume_fault(w);
	return s;
}

/*
 * Are a and b the same state? ids: compare handle ids (same run) and
 * state_version; peaks: b's peak_charged may exceed a's (a failed call's
 * temporary charge still raises it: peaks are history), and across runs peaks
 * are not compared at all.
 */
static bool same_state(const struct rsd_snapshot *a, const struct rsd_snapshot *b, bool ids,
		       char *why, size_t len)
{
	if (ids && a->state_version != b->state_version)
		return snprintf(why, len, "state_version %llu -> %llu",
				(unsigned long long)a->state_version,
				(unsigned long long)b->state_version),
		       false;
	if (a->nvalues != b->nvalues || a->nlocations != b->nlocations ||
	    a->nreservations != b->nreservations)
		return snprintf(why, len,
				"values/locations/reservations %zu/%zu/%zu -> %zu/%zu/%zu",
				a->nvalues, a->nlocations, a->nreservations, b->nvalues,
				b->nlocations, b->nreservations),
		       false;
	for (size_t i = 0; i < a->nvalues; i++) {
		const struct rsd_value_snapshot *x = &a->values[i], *y = &b->values[i];

		if ((ids && x->handle.id != y->handle.id) || x->discarded != y->discarded ||
		    x->has_source != y->has_source ||
		    x->spec.storage_nbytes != y->spec.storage_nbytes ||
		    x->nmaterializations != y->nmaterializations)
			return snprintf(why, len, "value %zu differs", i), false;
		for (size_t k = 0; k < x->nmaterializations; k++) {
			const struct rsd_materialization_snapshot *p = &x->materializations[k],
								  *q = &y->materializations[k];

			if (!rsd_location_equal(p->location, q->location) ||
			    p->charged_nbytes != q->charged_nbytes ||
			    p->use_count != q->use_count || p->hold_count != q->hold_count ||
			    p->pending_event_count != q->pending_event_count)
				return snprintf(why, len, "value %zu materialization %zu differs",
						i, k),
				       false;
		}
	}
	for (size_t i = 0; i < a->nlocations; i++) {
		const struct rsd_location_snapshot *x = &a->locations[i], *y = &b->locations[i];

		if (!rsd_location_equal(x->location, y->location) ||
		    x->used_bytes != y->used_bytes || x->reserved_bytes != y->reserved_bytes ||
		    x->value_count != y->value_count ||
		    x->reservation_count != y->reservation_count || x->use_count != y->use_count ||
		    x->hold_count != y->hold_count ||
		    x->pending_event_count != y->pending_event_count ||
		    (ids && (x->peak_used_bytes != y->peak_used_bytes ||
			     x->peak_charged_bytes > y->peak_charged_bytes)))
			return snprintf(why, len, "location %zu differs", i), false;
	}
	for (size_t i = 0; i < a->nreservations; i++)
		if (!rsd_location_equal(a->reservations[i].location, b->reservations[i].location) ||
		    a->reservations[i].nbytes != b->reservations[i].nbytes ||
		    strcmp(a->reservations[i].label, b->reservations[i].label))
			return snprintf(why, len, "reservation %zu differs", i), false;
	return true;
}

/* Nothing left protected or reserved that was not before: what a failed
 * plan call must guarantee even when it keeps a committed prefix. */
static bool nothing_left(const struct rsd_snapshot *a, const struct rsd_snapshot *b, char *why,
			 size_t len)
{
	if (a->nreservations != b->nreservations)
		return snprintf(why, len, "%zu reservations -> %zu", a->nreservations,
				b->nreservations),
		       false;
	for (size_t i = 0; i < b->nlocations; i++) {
		const struct rsd_location_snapshot *y = &b->locations[i];
		uint64_t use = 0, hold = 0;

		for (size_t k = 0; k < a->nlocations; k++)
			if (rsd_location_equal(a->locations[k].location, y->location)) {
				use = a->locations[k].use_count;
				hold = a->locations[k].hold_count;
			}
		if (y->use_count != use || y->hold_count != hold)
			return snprintf(why, len, "location %zu: use/hold %llu/%llu -> %llu/%llu",
					i, (unsigned long long)use, (unsigned long long)hold,
					(unsigned long long)y->use_count,
					(unsigned long long)y->hold_count),
			       false;
	}
	return true;
}

/*
 * Before a call. Reaping first: every mutating call reaps completed leases
 * in its prologue, a change that stands even when the call then fails
 * (the writer prologue), so the state compared must have nothing to reap.
 */
static void pre(struct w *w)
{
	if (w->m) {
		bool paused = pause_fault(w);

		(void)rsd_manager_reap(w->m);
		if (paused)
			resume_fault(w);
	}
	w->fired0 = fired();
	w->before = w->m ? snap(w) : NULL;
}

enum kind {
	STRICT, /* nothing may change */
	PLAN,	/* -RSD_EEXEC may keep a committed prefix; a use may keep its scope's */
};

/*
 * After one attempt of a call that succeeds in the clean run. Returns true
 * when the call reported the injected failure (the caller retries it).
 */
static bool post(struct w *w, const char *what, int rc, enum kind k, void **out)
{
	const struct rsd_error *le = rsd_last_error();
	struct rsd_snapshot *after;
	char why[256];
	bool ok;

	if (!rc) {
		rsd_snapshot_free(w->before);
		w->before = NULL;
		if (fired() != w->fired0 && !w->reported)
			w->absorbed = 1;
		return false;
	}
	ATF_REQUIRE_MSG(fired() != w->fired0 && !w->reported,
			"%s failed with no injected fault: %d (%s)", what, rc, le->message);
	rsd__fault_fired(w->site, sizeof(w->site));
	w->reported = 1;
	if (rc == -RSD_EEXEC && k == PLAN)
		ATF_REQUIRE_EQ_MSG(le->cause, -RSD_ENOMEM,
				   "%s: allocation at %s: EEXEC cause %d (%s)", what, w->site,
				   le->cause, le->message);
	else
		ATF_REQUIRE_EQ_MSG(rc, -RSD_ENOMEM, "%s: allocation at %s: returned %d (%s)", what,
				   w->site, rc, le->message);
	ATF_REQUIRE_EQ_MSG(le->code, -rc, "%s: error record code %d", what, le->code);
	ATF_REQUIRE_MSG(le->message[0], "%s: empty error message", what);
	/* rsd_use_close and rsd_scope_close set *report to NULL first (issue
	 * 17 item 1 decides whether they may). */
	if (out && !(*out == NULL && strstr(what, "_close(")))
		ATF_REQUIRE_MSG(*out == SENTINEL, "%s: allocation at %s: *out written on failure",
				what, w->site);
	else if (!strcmp(what, "rsd_manager_create"))
		ATF_REQUIRE_MSG(!w->m, "rsd_manager_create: *out written on failure");
	if (w->before) {
		after = snap(w);
		ok = same_state(w->before, after, true, why, sizeof(why));
		if (!ok && k == PLAN) {
			w->changed = true;
			ok = nothing_left(w->before, after, why, sizeof(why));
		}
		ATF_REQUIRE_MSG(ok, "%s: allocation at %s failed (%s) and changed the state: %s",
				what, w->site, rsd_strerror(rc), why);
		rsd_snapshot_free(after);
		rsd_snapshot_free(w->before);
		w->before = NULL;
	}
	return true;
}

static void sentinel(void **o)
{
	if (o)
		*o = SENTINEL;
}

/*
 * A call with an out-parameter (or none: out NULL) whose clean result is
 * want (0, or the error a clean run gets); retried once.
 */
#define CALL_EXPECT(w, k, want, out, call)                                      \
	do {                                                                    \
		void **o_ = (void **)(out);                                     \
		int rc_;                                                        \
		pre(w);                                                         \
		sentinel(o_);                                                   \
		rc_ = (call);                                                   \
		if (post(w, #call, rc_ == (want) ? 0 : rc_, k, o_)) {           \
			pre(w);                                                 \
			rc_ = (call);                                           \
			ATF_REQUIRE_EQ_MSG(rc_, want, "%s, retried: %s", #call, \
					   rsd_last_error()->message);          \
			post(w, #call, 0, k, NULL);                             \
		}                                                               \
	} while (0)
#define CALL(w, k, out, call) CALL_EXPECT(w, k, 0, out, call)
#define CALL_RC(w, want, out, call) CALL_EXPECT(w, STRICT, want, out, call)

/*
 * A scope or use entry, retried once like CALL. Until issue 17 item 1 lands
 * a failed entry may still hand back a closed object: free it.
 */
#define ENTRY(w, obj, call, free_fn)                             \
	for (;;) {                                               \
		int rc_;                                         \
		pre(w);                                          \
		(obj) = NULL;                                    \
		rc_ = (call);                                    \
		rsd_plan_report_free(rsd_take_partial_report()); \
		if (rc_ && (obj))                                \
			free_fn(obj);                            \
		if (!post(w, #call, rc_, PLAN, NULL))            \
			break;                                   \
	}

static struct rsd_handle adopt(struct w *w, struct rsd_location at, enum rsd_replica_mode mode)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;
	uint64_t n = NB;

	CALL(w, STRICT, &r, rsd_resident_alloc(w->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	pre(w);
	h.id = 0;
	if (post(w, "rsd_adopt", rsd_adopt(w->m, r, &at, mode, &h), STRICT, NULL)) {
		ATF_REQUIRE_EQ(h.id, 0);
		pre(w);
		RSD_REQUIRE_OK(rsd_adopt(w->m, r, &at, mode, &h));
		post(w, "rsd_adopt", 0, STRICT, NULL);
	}
	return h;
}

static void lifetimes(struct w *w)
{
	struct rsd_handle sb[2] = { w->s, w->b };
	const struct rsd_resident *v;
	struct rsd_reservation *r;
	struct rsd_lease *l;
	struct rsd_hold *hd;

	CALL(w, STRICT, &l, rsd_acquire(w->m, sb, 2, CUDA0, w->cs0, &l));
	CALL(w, STRICT, NULL, rsd_lease_add_consumer_stream(l, w->cs0b));
	CALL(w, STRICT, &v, rsd_lease_value(l, w->s, &v));
	CALL(w, STRICT, NULL, rsd_lease_release(l, 0));
	rsd_simdev_complete_all(w->sd);
	CALL(w, STRICT, NULL, rsd_manager_reap(w->m));
	rsd_lease_free(l);
	CALL(w, STRICT, &l, rsd_acquire(w->m, &w->a, 1, RSD_LOC_PINNED_HOST, NULL, &l));
	CALL(w, STRICT, NULL, rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_lease_free(l);
	CALL(w, STRICT, &hd, rsd_hold(w->m, &w->s, 1, CUDA0, &hd));
	CALL(w, STRICT, NULL, rsd_hold_release(hd));
	rsd_hold_free(hd);
	CALL(w, STRICT, &r, rsd_reserve(w->m, CUDA0, 16, "ws", &r));
	CALL(w, STRICT, NULL, rsd_reservation_release(r));
	rsd_reservation_free(r);
}

static void plans(struct w *w)
{
	struct rsd_action two[2] = { rsd_action_ensure(w->s, RSD_LOC_PINNED_HOST),
				     rsd_action_drop(w->s, RSD_LOC_PINNED_HOST) };
	struct rsd_reservation_spec rs = { CUDA1, 16, "scope-ws" };
	struct rsd_action en = rsd_action_ensure(w->s, CUDA1), ex = rsd_action_drop(w->s, CUDA1);
	struct rsd_plan p = { .name = "sweep-scope",
			      .reservations = &rs,
			      .nreservations = 1,
			      .enter = &en,
			      .nenter = 1,
			      .exit = &ex,
			      .nexit = 1 };
	struct rsd_plan_report *rep;
	struct rsd_explanation *e;
	struct rsd_scope *sc;
	int rc;

	CALL(w, STRICT, &e, rsd_explain(w->m, &p, NULL, &e));
	ATF_CHECK(e->feasible);
	rsd_explanation_free(e);
	/* On -RSD_EEXEC *report receives the committed prefix's report too. */
	for (;;) {
		pre(w);
		rep = NULL;
		rc = rsd_execute_actions(w->m, two, 2, "sweep", NULL, 0, NULL, &rep);
		rsd_plan_report_free(rsd_take_partial_report());
		if (rc) {
			ATF_REQUIRE_EQ_MSG(rep != NULL, rc == -RSD_EEXEC,
					   "execute_actions: %d with report %p", rc, (void *)rep);
			rsd_plan_report_free(rep);
		}
		if (!post(w, "rsd_execute_actions", rc, PLAN, NULL))
			break;
	}
	rsd_plan_report_free(rep);
	/* Scope entry: a failed one may still hand a closed scope back until
	 * issue 17 item 1 lands; free it then. */
	ENTRY(w, sc, rsd_scope_enter(w->m, &p, NULL, 0, NULL, &sc), rsd_scope_free);
	CALL(w, PLAN, &rep, rsd_scope_close(sc, &rep));
	rsd_plan_report_free(rep);
	rsd_plan_report_free(rsd_take_partial_report());
	rsd_scope_free(sc);
}

static void controller(struct w *w)
{
	struct rsd_location to[1] = { RSD_LOC_PINNED_HOST };
	struct rsd_fallback_tier tier = { CUDA0, to, 1 };
	struct rsd_requirement q1[2] = { { w->s, CUDA1 }, { w->b, CUDA0 } };
	struct rsd_requirement q2[2] = { { w->s, CUDA0 }, { w->b, CUDA0 } };
	struct rsd_request r1 = { "sweep-decide", q1, 2, NULL, 0 };
	struct rsd_request r2 = { "sweep-use", q2, 2, NULL, 0 };
	struct rsd_controller *c, *c2;
	const struct rsd_resident *v;
	struct rsd_plan_report *rep;
	struct rsd_decision *d;
	struct rsd_policy *pol;
	void *cs[1] = { w->cs0 };
	struct rsd_scope *sc;
	struct rsd_use *u;

	CALL(w, STRICT, &c, rsd_controller_create(w->m, NULL, 0, &c));
	CALL(w, STRICT, &pol, rsd_tiered_lru_create(&tier, 1, &pol));
	CALL(w, STRICT, &c2, rsd_controller_create(w->m, pol, 0, &c2));
	CALL(w, STRICT, NULL, rsd_controller_set_policy_metadata(c, w->s, 1, "key-s"));
	CALL(w, STRICT, &d, rsd_controller_decide(c, &r1, &d));
	ENTRY(w, sc, rsd_controller_scope(c, d, NULL, 0, &sc), rsd_scope_free);
	CALL(w, PLAN, &rep, rsd_scope_close(sc, &rep));
	rsd_plan_report_free(rep);
	rsd_scope_free(sc);
	rsd_decision_free(d);
	ENTRY(w, u, rsd_controller_use(c, &r2, cs, 1, NULL, 0, &u), rsd_use_free);
	CALL(w, STRICT, &v, rsd_use_value(u, w->s, CUDA0, &v));
	CALL(w, PLAN, &rep, rsd_use_close(u, &rep));
	rsd_plan_report_free(rep);
	rsd_use_free(u);
	rsd_simdev_complete_all(w->sd);
	CALL(w, STRICT, &d, rsd_controller_decide(c2, &r1, &d));
	rsd_decision_free(d);
	rsd_controller_free(c2);
	rsd_controller_free(c);
	rsd_policy_free(pol);
}

/*
 * The less common paths: a value of many buffers copied to every location
 * (more materializations than a record holds inline), a lease of more
 * handles and streams than fit inline, an infeasible reservation, and a
 * decision that must evict (search, policy ordering, memo, evictions) with
 * a reservation in its request, entered through a use.
 */
static void extras(struct w *w)
{
	static const uint64_t nine[9] = { 8, 8, 8, 8, 8, 8, 8, 8, 8 };
	struct rsd_location at = RSD_LOC_PAGEABLE_HOST;
	struct rsd_reservation_spec big = { CUDA1, 64 * NB, "too-big" };
	struct rsd_plan p = { .name = "sweep-infeasible",
			      .reservations = &big,
			      .nreservations = 1 };
	struct rsd_reservation_spec rs = { CUDA1, 2 * NB, "r3" };
	struct rsd_requirement q = { w->s, CUDA1 };
	struct rsd_request r3 = { "sweep-evict", &q, 1, &rs, 1 };
	struct rsd_reservation_spec rs4 = { CUDA1, 5 * NB, "r4" }, rs5 = { CUDA1, 9 * NB, "r5" };
	struct rsd_requirement q4[3] = { { w->b, CUDA1 }, { w->a, CUDA0 }, { w->s, CUDA0 } };
	struct rsd_request r4 = { "sweep-evict-more", q4, 3, &rs4, 1 };
	struct rsd_request r5 = { "sweep-infeasible", q4, 3, &rs5, 1 };
	struct rsd_handle x[5], mv;
	struct rsd_explanation *e;
	struct rsd_controller *c;
	struct rsd_plan_report *rep;
	struct rsd_resident *r;
	struct rsd_transition t;
	struct rsd_decision *d;
	struct rsd_lease *l;
	struct rsd_use *u;
	void *st[4];

	CALL(w, STRICT, &r, rsd_resident_alloc(w->m, &rsd_resident_type, at, 9, nine, NULL, 0, &r));
	mv.id = 0;
	CALL(w, STRICT, NULL, rsd_adopt(w->m, r, &at, RSD_REPLICABLE, &mv));
	CALL(w, STRICT, NULL, rsd_ensure(w->m, mv, RSD_LOC_PINNED_HOST, NULL, &t));
	CALL(w, STRICT, NULL, rsd_ensure(w->m, mv, CUDA0, NULL, &t));
	CALL(w, STRICT, NULL, rsd_ensure(w->m, mv, CUDA1, NULL, &t));
	x[4] = mv;
	for (int i = 0; i < 4; i++) {
		x[i] = adopt(w, RSD_LOC_PAGEABLE_HOST, RSD_REPLICABLE);
		CALL(w, STRICT, NULL, rsd_ensure(w->m, x[i], CUDA1, NULL, &t));
	}
	CALL(w, STRICT, &l, rsd_acquire(w->m, x, 5, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	CALL(w, STRICT, NULL, rsd_lease_release(l, 0));
	rsd_lease_free(l);
	for (int i = 0; i < 4; i++)
		RSD_REQUIRE_OK(rsd_simdev_stream_create(w->sd, 1, &st[i]));
	CALL(w, STRICT, &l, rsd_acquire(w->m, x, 2, CUDA1, st[0], &l));
	for (int i = 1; i < 4; i++)
		CALL(w, STRICT, NULL, rsd_lease_add_consumer_stream(l, st[i]));
	CALL(w, STRICT, NULL, rsd_lease_add_consumer_stream(l, w->cs1));
	CALL(w, STRICT, NULL, rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_lease_free(l);
	for (int i = 0; i < 4; i++)
		rsd_simdev_stream_destroy(w->sd, st[i]);
	CALL(w, STRICT, &e, rsd_explain(w->m, &p, NULL, &e));
	ATF_CHECK(!e->feasible);
	rsd_explanation_free(e);
	/* cuda:1 holds mv, s and x[0..3] (232 of 256 bytes): 64 reserved
	 * bytes need two evictions. */
	CALL(w, STRICT, &c, rsd_controller_create(w->m, NULL, 0, &c));
	CALL(w, STRICT, &d, rsd_controller_decide(c, &r3, &d));
	ATF_CHECK(d->nevictions > 0);
	rsd_decision_free(d);
	CALL(w, STRICT, &d, rsd_controller_decide(c, &r4, &d));
	rsd_decision_free(d);
	CALL_RC(w, -RSD_EPLAN, &d, rsd_controller_decide(c, &r5, &d));
	ENTRY(w, u, rsd_controller_use(c, &r3, &w->cs1, 1, NULL, 0, &u), rsd_use_free);
	CALL(w, PLAN, &rep, rsd_use_close(u, &rep));
	rsd_plan_report_free(rep);
	rsd_use_free(u);
	rsd_controller_free(c);
	rsd_simdev_complete_all(w->sd);
}

/* The workload; returns its final snapshot (the caller frees it). */
static struct rsd_snapshot *workload(struct w *w, uint64_t k)
{
	/* Immediate progress: the streams' work runs as it is queued, so the
	 * transitions' copies and a release that falls back to synchronizing
	 * its streams never wait for a completer, and every run (clean or
	 * failed) sees the same completion order. */
	struct rsd_simdev_config sc = { .ndevices = 2, .auto_complete = true, .pooled = true };
	struct rsd_value_spec spec = { &rsd_resident_type, NB, NB, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { src_load, NULL, w };
	struct rsd_budget bud[] = { { CUDA0, 8 * NB },
				    { CUDA1, 8 * NB },
				    { RSD_LOC_PINNED_HOST, 8 * NB } };
	struct rsd_manager_config cfg = { 0 };
	struct rsd_transition t;
	struct rsd_snapshot *s, *fin;

	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &w->sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(w->sd, 0, &w->cs0));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(w->sd, 0, &w->cs0b));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(w->sd, 1, &w->cs1));
	cfg.budgets = bud;
	cfg.nbudgets = RSD_ARRAY_SIZE(bud);
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = w->sd;
	cfg.warn = quiet;
	if (k)
		arm(w, k);
	pre(w);
	if (post(w, "rsd_manager_create", rsd_manager_create(&cfg, &w->m), STRICT, NULL)) {
		ATF_REQUIRE(w->m == NULL);
		RSD_REQUIRE_OK(rsd_manager_create(&cfg, &w->m));
	}
	w->a = adopt(w, RSD_LOC_PAGEABLE_HOST, RSD_EXCLUSIVE);
	w->b = adopt(w, CUDA0, RSD_REPLICABLE);
	CALL(w, STRICT, NULL, rsd_register_source(w->m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &w->s));
	CALL(w, STRICT, NULL, rsd_ensure(w->m, w->s, CUDA0, NULL, &t));
	CALL(w, STRICT, NULL, rsd_copy(w->m, w->b, RSD_LOC_PINNED_HOST, NULL, &t));
	CALL(w, STRICT, NULL, rsd_move(w->m, w->a, RSD_LOC_PINNED_HOST, NULL, NULL, &t));
	CALL(w, STRICT, NULL, rsd_drop(w->m, w->b, RSD_LOC_PINNED_HOST, &t));
	lifetimes(w);
	plans(w);
	controller(w);
	extras(w);
	CALL(w, STRICT, &s, rsd_snapshot_take(w->m, &s));
	rsd_snapshot_free(s);
	CALL(w, STRICT, NULL, rsd_discard(w->m, w->s, &t));
	fin = snap(w);
	CALL(w, STRICT, NULL, rsd_manager_close(w->m, 0));
	rsd_manager_destroy(w->m);
	rsd_simdev_stream_destroy(w->sd, w->cs0);
	rsd_simdev_stream_destroy(w->sd, w->cs0b);
	rsd_simdev_stream_destroy(w->sd, w->cs1);
	rsd_simdev_destroy(w->sd);
	/* A run that never reached its kth allocation leaves the point armed. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	return fin;
}

static void site_seen(const char *s)
{
	for (unsigned i = 0; i < nsites; i++)
		if (!strcmp(sites[i], s))
			return;
	if (nsites < RSD_ARRAY_SIZE(sites))
		snprintf(sites[nsites++], sizeof(sites[0]), "%s", s);
}

ATF_TC_WITHOUT_HEAD(every_call_alloc_sweep);
ATF_TC_BODY(every_call_alloc_sweep, tc)
{
	struct w clean = { 0 };
	struct rsd_snapshot *ref = workload(&clean, 0);
	unsigned long k, reported = 0, absorbed = 0, changed = 0, runs = 0;
	/* Under valgrind (make check VALGRIND=1) every run costs ~50 times
	 * more: sweep every 16th k there, every k elsewhere. */
	unsigned long stride = getenv("RSD_UNDER_VALGRIND") ? 16 : 1;
	char why[256];

	for (k = 1;; k += stride) {
		struct w w = { 0 };
		uint64_t f0 = fired();
		struct rsd_snapshot *fin = workload(&w, k);

		if (fired() == f0) {
			rsd_snapshot_free(fin);
			break;
		}
		runs++;
		rsd__fault_fired(w.site, sizeof(w.site));
		site_seen(w.site);
		reported += w.reported;
		absorbed += w.absorbed || !w.reported;
		changed += w.changed;
		ATF_REQUIRE_MSG(same_state(ref, fin, false, why, sizeof(why)),
				"allocation %lu (%s): the finished workload differs from the clean "
				"run: %s",
				k, w.site, why);
		/* A lease release without memory for its events synchronizes its
		 * streams instead, as when recording fails: one version step, not two. */
		if (!w.changed && strncmp(w.site, "lib/core/lease.c:", 17))
			ATF_REQUIRE_EQ_MSG(
				fin->state_version, ref->state_version,
				"allocation %lu (%s): final state_version %llu, clean %llu", k,
				w.site, (unsigned long long)fin->state_version,
				(unsigned long long)ref->state_version);
		rsd_snapshot_free(fin);
	}
	rsd_snapshot_free(ref);
	printf("%lu k swept (every %lu up to %lu): %lu failures reported by a call (%lu kept a plan "
	       "prefix), %lu absorbed; %u distinct allocation sites:\n",
	       runs, stride, k - stride, reported, changed, absorbed, nsites);
	for (unsigned i = 0; i < nsites; i++)
		printf("  %s\n", sites[i]);
	ATF_REQUIRE(k > 50);
	ATF_REQUIRE(reported > runs / 2);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, every_call_alloc_sweep);
	return atf_no_error();
}
