// SPDX-License-Identifier: MIT
/*
 * Blocked decisions (Documentation/controller.md): a decision that finds no
 * room names what protects the bytes at the short location
 * (rsd_last_blockers(), rsd_blockers_describe()) beside the unchanged
 * message, and RSD_CTRL_PRECHECK fails such a decision at once with
 * explored_states 0 while the search without it counts as before.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "../simwait.h"
#include "fixture.h"

static const struct rsd_location C0 = { RSD_CUDA, 0 };

static struct rsd_controller *ctl(struct fx *f, unsigned flags)
{
	struct rsd_controller *c;

	ATF_REQUIRE_EQ(rsd_controller_create(f->m, NULL, 0, &c), 0);
	ATF_REQUIRE_EQ(rsd_controller_set_flags(c, flags), 0);
	return c;
}

static int decide(struct rsd_controller *c, const char *name, const struct rsd_requirement *q,
		  size_t nq, const struct rsd_reservation_spec *rs, size_t nrs)
{
	struct rsd_request r = { name, q, nq, rs, nrs };
	struct rsd_decision *d = NULL;
	int err = rsd_controller_decide(c, &r, &d);

	rsd_decision_free(d);
	return err;
}

/* A GPU lease on n values at cuda:0 read by stream st, released: pending. */
static void pending_lease(struct fx *f, const struct rsd_handle *h, size_t n, void *st)
{
	struct rsd_lease *l;

	ATF_REQUIRE_EQ(rsd_acquire(f->m, h, n, C0, st, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	rsd_lease_free(l);
}

static void check_value(const struct rsd_blocked_value *v, struct rsd_handle h, uint32_t leases,
			uint32_t holds, uint32_t pending)
{
	ATF_CHECK_EQ(v->handle_id, h.id);
	ATF_CHECK_EQ(v->nbytes, N);
	ATF_CHECK_EQ(v->leases, leases);
	ATF_CHECK_EQ(v->holds, holds);
	ATF_CHECK_EQ(v->pending, pending);
	ATF_CHECK(!v->arriving);
}

/* The two materializations of a pending GPU lease fill cuda:0. */
static void check_pending_blockers(const struct rsd_blockers *b, struct rsd_handle a,
				   struct rsd_handle v, void *st)
{
	char want[512], got[512];

	ATF_REQUIRE(b != NULL);
	ATF_CHECK(rsd_location_equal(b->location, C0));
	ATF_CHECK_EQ(b->requested_bytes, N);
	ATF_CHECK_EQ(b->short_bytes, N);
	ATF_CHECK_EQ(b->budget_bytes, 2 * N);
	ATF_CHECK_EQ(b->used_bytes, 2 * N);
	ATF_CHECK_EQ(b->reserved_bytes, 0);
	ATF_CHECK_EQ(b->freeable_bytes, 0);
	ATF_CHECK_EQ(b->blocked_bytes, 2 * N);
	ATF_CHECK_EQ(b->pending_bytes, 2 * N);
	ATF_CHECK_EQ(b->lease_bytes, 0);
	ATF_CHECK_EQ(b->hold_bytes, 0);
	ATF_CHECK_EQ(b->arriving_bytes, 0);
	ATF_CHECK_EQ(b->nblocked, 2);
	ATF_REQUIRE_EQ(b->nvalues, 2);
	check_value(&b->values[0], a, 0, 0, 1);
	check_value(&b->values[1], v, 0, 0, 1);
	ATF_CHECK_EQ(b->npending, 1);
	ATF_REQUIRE_EQ(b->nleases, 1);
	ATF_CHECK_EQ(b->leases[0].nvalues, 2);
	ATF_CHECK_EQ(b->leases[0].nbytes, 2 * N);
	ATF_CHECK_EQ(b->leases[0].nevents, 1);
	ATF_CHECK_EQ(b->leases[0].nstreams, 1);
	ATF_CHECK(b->leases[0].streams[0] == st);
	snprintf(want, sizeof(want),
		 "cuda:0 short 64 bytes, 0 freeable, 128 bytes blocked in 2 materializations "
		 "(leased 0, pending 128, held 0, arriving 0): value %" PRIu64
		 " (64 bytes, pending 1), value %" PRIu64 " (64 bytes, pending 1); pending lease "
		 "%" PRIu64 " (2 values, 128 bytes, 1 event, streams %p)",
		 a.id, v.id, b->leases[0].lease_id, st);
	ATF_CHECK_EQ(rsd_blockers_describe(b, got, sizeof(got)), (int)strlen(want));
	ATF_CHECK_STREQ(got, want);
}

/*
 * A request for one more value at cuda:0 while the previous step's GPU
 * lease is pending on its two values: the search fails after one state
 * with the reference's message, and the detail names the pending lease,
 * its values, bytes and consumer stream.
 */
ATF_TC_WITHOUT_HEAD(pending_lease_named);
ATF_TC_BODY(pending_lease_named, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, 2 * N } };
	struct rsd_handle h[2], w;
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	const struct rsd_error *e;
	char want[512];
	void *st;
	struct fx f;

	fx_init_on_command(&f, bud, 1, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &st), 0);
	h[0] = fx_adopt(&f, C0, RSD_REPLICABLE);
	h[1] = fx_adopt(&f, C0, RSD_REPLICABLE);
	w = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	pending_lease(&f, h, 2, st);
	q[0] = fx_req(w, C0);

	c = ctl(&f, 0);
	ATF_CHECK_EQ(decide(c, "next", q, 1, NULL, 0), -RSD_EPLAN);
	e = rsd_last_error();
	snprintf(want, sizeof(want),
		 "Automatic residency request 'next' is infeasible: location cuda:0 cannot admit "
		 "64 bytes during materialization of '%" PRIu64 "'; budget=128, used=128, "
		 "reserved=0, in flight=0, held by 0 plans=0, but no invariant-valid victim "
		 "sequence satisfies the complete ordered request",
		 w.id);
	ATF_CHECK_STREQ(e->message, want);
	ATF_CHECK(e->has_search);
	ATF_CHECK_EQ(e->explored_states, 1);
	ATF_CHECK(e->has_blockers);
	check_pending_blockers(rsd_last_blockers(), h[0], h[1], st);

	/* the same detail with the precheck, and no state counted */
	ATF_REQUIRE_EQ(rsd_controller_set_flags(c, RSD_CTRL_PRECHECK), 0);
	ATF_CHECK_EQ(decide(c, "next", q, 1, NULL, 0), -RSD_EPLAN);
	e = rsd_last_error();
	snprintf(want, sizeof(want),
		 "Automatic residency request 'next' is infeasible: location cuda:0 cannot admit "
		 "64 bytes during materialization of '%" PRIu64 "'; budget=128, used=128, "
		 "reserved=0, in flight=0, held by 0 plans=0, and evicting every candidate there "
		 "frees 0 of the 64 bytes short (checked before searching)",
		 w.id);
	ATF_CHECK_STREQ(e->message, want);
	ATF_CHECK(e->has_search);
	ATF_CHECK_EQ(e->explored_states, 0);
	check_pending_blockers(rsd_last_blockers(), h[0], h[1], st);

	/* another failure clears the detail */
	ATF_CHECK_EQ(rsd_controller_set_flags(c, 1u << 5), -RSD_EINVAL);
	ATF_CHECK(!rsd_last_error()->has_blockers);
	ATF_CHECK(rsd_last_blockers() == NULL);

	rsd_controller_free(c);
	rsd_simdev_stream_complete(f.sd, st);
	rsd_simdev_stream_destroy(f.sd, st);
	fx_fini(&f);
}

/*
 * cuda:0 (budget 5N) holds a pending, a leased and a held value and two
 * sourced ones; the request reserves 2N there and needs one more value.
 * The search drops the two sourced values in both orders and counts 4
 * states (S0, drop e1, drop e1+e2, drop e2; e2+e1 is the memo's); with the
 * precheck the materialization stage is short 3N where 2N can be freed,
 * so it fails at once.
 */
ATF_TC_WITHOUT_HEAD(precheck_fails_at_once);
ATF_TC_BODY(precheck_fails_at_once, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, 5 * N } };
	struct rsd_reservation_spec ws = { { RSD_CUDA, 0 }, 2 * N, "ws" };
	struct rsd_handle p, l, hd, e1, e2, w;
	struct rsd_requirement q[1];
	const struct rsd_blockers *b;
	struct rsd_controller *c;
	struct rsd_lease *lease;
	struct rsd_hold *hold;
	char text[512];
	void *st;
	struct fx f;

	fx_init_on_command(&f, bud, 1, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &st), 0);
	p = fx_adopt(&f, C0, RSD_REPLICABLE);
	l = fx_adopt(&f, C0, RSD_REPLICABLE);
	hd = fx_adopt(&f, C0, RSD_REPLICABLE);
	e1 = fx_sourced(&f, C0);
	e2 = fx_sourced(&f, C0);
	fx_ensure(&f, e1, C0);
	fx_ensure(&f, e2, C0);
	w = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	pending_lease(&f, &p, 1, st);
	ATF_REQUIRE_EQ(rsd_acquire(f.m, &l, 1, C0, st, &lease), 0);
	ATF_REQUIRE_EQ(rsd_hold(f.m, &hd, 1, C0, &hold), 0);
	q[0] = fx_req(w, C0);

	c = ctl(&f, 0);
	ATF_CHECK_EQ(decide(c, "step", q, 1, &ws, 1), -RSD_EPLAN);
	ATF_CHECK_EQ(rsd_last_error()->explored_states, 4);
	b = rsd_last_blockers();
	ATF_REQUIRE(b != NULL);
	/* the root's shortfall: the reservation */
	ATF_CHECK_EQ(b->requested_bytes, 2 * N);
	ATF_CHECK_EQ(b->short_bytes, 2 * N);
	ATF_CHECK_EQ(b->used_bytes, 5 * N);
	ATF_CHECK_EQ(b->freeable_bytes, 2 * N);
	ATF_CHECK_EQ(b->blocked_bytes, 3 * N);
	ATF_CHECK_EQ(b->lease_bytes, N);
	ATF_CHECK_EQ(b->pending_bytes, N);
	ATF_CHECK_EQ(b->hold_bytes, N);
	ATF_CHECK_EQ(b->nblocked, 3);
	ATF_REQUIRE_EQ(b->nvalues, 3);
	check_value(&b->values[0], p, 0, 0, 1);
	check_value(&b->values[1], l, 1, 0, 0);
	check_value(&b->values[2], hd, 0, 1, 0);
	ATF_CHECK_EQ(b->npending, 1);

	ATF_REQUIRE_EQ(rsd_controller_set_flags(c, RSD_CTRL_PRECHECK), 0);
	ATF_CHECK_EQ(decide(c, "step", q, 1, &ws, 1), -RSD_EPLAN);
	ATF_CHECK_EQ(rsd_last_error()->explored_states, 0);
	b = rsd_last_blockers();
	ATF_REQUIRE(b != NULL);
	/* the stage evictions cannot cover: the materialization */
	ATF_CHECK_EQ(b->requested_bytes, N);
	ATF_CHECK_EQ(b->short_bytes, 3 * N);
	ATF_CHECK_EQ(b->reserved_bytes, 0);
	ATF_CHECK_EQ(b->freeable_bytes, 2 * N);
	ATF_CHECK_EQ(b->blocked_bytes, 3 * N);
	rsd_blockers_describe(b, text, sizeof(text));
	ATF_CHECK_MSG(
		!strncmp(text,
			 "cuda:0 short 192 bytes, 128 freeable, 192 bytes blocked in 3 "
			 "materializations (leased 64, pending 64, held 64, arriving 0): ",
			 strlen("cuda:0 short 192 bytes, 128 freeable, 192 bytes blocked in 3 "
				"materializations (leased 64, pending 64, held 64, arriving 0): ")),
		"%s", text);

	/* a request the evictions can serve is decided as without the precheck */
	ws.nbytes = N;
	ATF_CHECK_EQ(decide(c, "fits", q, 1, &ws, 1), 0);
	ATF_REQUIRE_EQ(rsd_controller_set_flags(c, 0), 0);
	ATF_CHECK_EQ(decide(c, "fits", q, 1, &ws, 1), 0);

	ATF_REQUIRE_EQ(rsd_hold_release(hold), 0);
	rsd_hold_free(hold);
	ATF_REQUIRE_EQ(rsd_lease_release(lease, 0), 0);
	rsd_lease_free(lease);
	rsd_controller_free(c);
	rsd_simdev_stream_complete(f.sd, st);
	rsd_simdev_stream_destroy(f.sd, st);
	fx_fini(&f);
}

/* With the precheck on, a decision that fits is the search's: same plan, same count. */
ATF_TC_WITHOUT_HEAD(precheck_keeps_feasible);
ATF_TC_BODY(precheck_keeps_feasible, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_handle h[3];
	struct rsd_requirement q[1];
	struct rsd_request r = { "D", q, 1, NULL, 0 };
	struct rsd_decision *d[2];
	struct rsd_controller *c;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (int i = 0; i < 3; i++) {
		h[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
		if (i < 2)
			fx_ensure(&f, h[i], PINNED);
	}
	q[0] = fx_req(h[2], PINNED);
	for (int k = 0; k < 2; k++) {
		c = ctl(&f, k ? RSD_CTRL_PRECHECK : 0);
		ATF_REQUIRE_EQ_MSG(rsd_controller_decide(c, &r, &d[k]), 0, "%s",
				   rsd_last_error()->message);
		rsd_controller_free(c);
	}
	ATF_CHECK_EQ(d[1]->explored_states, d[0]->explored_states);
	ATF_CHECK_EQ(d[0]->explored_states, 2);
	ATF_REQUIRE_EQ(d[1]->nevictions, d[0]->nevictions);
	ATF_REQUIRE_EQ(d[0]->nevictions, 1);
	ATF_CHECK(rsd_action_equal(&d[1]->plan->reclaim[0], &d[0]->plan->reclaim[0]));
	rsd_decision_free(d[0]);
	rsd_decision_free(d[1]);
	fx_fini(&f);
}

struct ensure_arg {
	struct fx *f;
	struct rsd_handle h;
	int err;
};

static void *ensure_main(void *p)
{
	struct ensure_arg *a = p;

	a->err = rsd_ensure(a->f->m, a->h, C0, NULL, NULL);
	return NULL;
}

/*
 * A copy to cuda:0 that another thread is waiting for (its destination
 * arriving) and a held value fill cuda:0: both are named, with their
 * bytes; once the copy completes, the value is resident and a candidate.
 */
ATF_TC_WITHOUT_HEAD(arriving_named);
ATF_TC_BODY(arriving_named, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, 2 * N } };
	struct timespec ms = { 0, 1000000 };
	struct ensure_arg ea;
	struct rsd_handle a, w;
	struct rsd_requirement q[1];
	const struct rsd_blockers *b = NULL;
	struct rsd_controller *c;
	struct rsd_hold *hold;
	struct simpump pump;
	pthread_t th;
	struct fx f;

	fx_init_on_command(&f, bud, 1, 1);
	a = fx_adopt(&f, C0, RSD_REPLICABLE);
	ea.f = &f;
	ea.h = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	w = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_hold(f.m, &a, 1, C0, &hold), 0);
	q[0] = fx_req(w, C0);
	c = ctl(&f, RSD_CTRL_PRECHECK);
	ATF_REQUIRE_EQ(pthread_create(&th, NULL, ensure_main, &ea), 0);
	/*
	 * Until the copy is admitted: its destination is then arriving, and
	 * the next full publication (an adoption here) shows it. Before the
	 * admission the request fits.
	 */
	for (int i = 0; i < 5000; i++) {
		(void)fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
		if (decide(c, "next", q, 1, NULL, 0) == -RSD_EPLAN) {
			b = rsd_last_blockers();
			ATF_REQUIRE(b != NULL);
			if (b->arriving_bytes)
				break;
		}
		b = NULL;
		nanosleep(&ms, NULL);
	}
	ATF_REQUIRE_MSG(b != NULL, "the copy's destination never showed as arriving");
	ATF_CHECK_EQ(rsd_last_error()->explored_states, 0);
	ATF_CHECK_EQ(b->short_bytes, N);
	ATF_CHECK_EQ(b->freeable_bytes, 0);
	ATF_CHECK_EQ(b->blocked_bytes, 2 * N);
	ATF_CHECK_EQ(b->hold_bytes, N);
	ATF_CHECK_EQ(b->arriving_bytes, N);
	ATF_CHECK_EQ(b->nblocked, 2);
	ATF_REQUIRE_EQ(b->nvalues, 2);
	check_value(&b->values[0], a, 0, 1, 0);
	ATF_CHECK_EQ(b->values[1].handle_id, ea.h.id);
	ATF_CHECK(b->values[1].arriving);
	ATF_CHECK_EQ(b->npending, 0);

	/* The copy may not be queued yet (its admission is all this test
	 * saw): keep completing the transfer streams until it ends. */
	ATF_REQUIRE(simpump_start(&pump, f.sd, NULL, 0, true, false));
	ATF_REQUIRE_EQ(pthread_join(th, NULL), 0);
	simpump_stop(&pump);
	ATF_CHECK_EQ_MSG(ea.err, 0, "%s", rsd_last_error()->message);
	/* resident now, with its pageable replica: dropping it makes room */
	ATF_CHECK_EQ_MSG(decide(c, "next", q, 1, NULL, 0), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE_EQ(rsd_hold_release(hold), 0);
	rsd_hold_free(hold);
	rsd_controller_free(c);
	fx_fini(&f);
}

/*
 * A copy admitted to cuda:0 while the search runs (from the policy's
 * fallback callback, which waits until a reader sees its arriving bytes):
 * the admission publishes without changing the state version. The
 * decision is made on the image the search read, where cuda:0 still had
 * room for the spill: it succeeds with that plan, it is not refused for
 * budget by bytes that image did not show. The next decision sees them.
 */
struct race_ctx {
	struct ensure_arg ea;
	pthread_t th;
	bool started, seen;
};

static const char *race_name(void *ctx)
{
	(void)ctx;
	return "race";
}

static size_t race_fallback(void *ctx, struct rsd_location l, struct rsd_location *o, size_t cap)
{
	struct timespec ms = { 0, 1000000 };
	struct race_ctx *r = ctx;

	(void)l;
	if (!r->started) {
		r->started = pthread_create(&r->th, NULL, ensure_main, &r->ea) == 0;
		for (int i = 0; r->started && i < 5000 && !r->seen; i++) {
			r->seen = fx_used(r->ea.f, C0) == 2 * N;
			nanosleep(&ms, NULL);
		}
	}
	if (cap < 1)
		return 0;
	o[0] = C0;
	return 1;
}

static int race_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	(void)ctx, (void)c, (void)n;
	return 0;
}

static const struct rsd_policy_ops race_ops = { race_name, fx_no_config, race_fallback, race_order,
						NULL };

ATF_TC_WITHOUT_HEAD(admitted_during_search);
ATF_TC_BODY(admitted_during_search, tc)
{
	const struct rsd_budget bud[] = { { PINNED, N }, { C0, 2 * N } };
	struct race_ctx r = { .started = false, .seen = false };
	struct rsd_policy pol = { &race_ops, &r };
	struct rsd_decision *d = NULL;
	struct rsd_handle a, b, w;
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_request req;
	struct rsd_hold *hold;
	struct simpump pump;
	uint64_t v0;
	struct fx f;

	fx_init_on_command(&f, bud, 2, 1);
	a = fx_adopt(&f, C0, RSD_REPLICABLE);
	b = fx_adopt(&f, PINNED, RSD_REPLICABLE);
	w = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	r.ea.f = &f;
	r.ea.h = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_hold(f.m, &a, 1, C0, &hold), 0);
	q[0] = fx_req(w, PINNED);
	req = (struct rsd_request){ "spill", q, 1, NULL, 0 };
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, &pol, 0, &c), 0);
	v0 = fx_version(&f);

	ATF_CHECK_EQ_MSG(rsd_controller_decide(c, &req, &d), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE(r.started);
	ATF_REQUIRE_MSG(r.seen, "the copy's arriving bytes never showed");
	ATF_CHECK_EQ(fx_used(&f, C0), 2 * N);
	ATF_CHECK_EQ(fx_version(&f), v0);
	if (d) {
		ATF_CHECK_EQ(d->expected_state_version, v0);
		ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
		ATF_CHECK(fx_is_move(&d->plan->reclaim[0], b, C0, &PINNED));
		ATF_REQUIRE_EQ(d->plan->nenter, 1);
		ATF_CHECK(fx_is_ensure(&d->plan->enter[0], w, PINNED));
	}
	rsd_decision_free(d);

	ATF_REQUIRE(simpump_start(&pump, f.sd, NULL, 0, true, false));
	ATF_REQUIRE_EQ(pthread_join(r.th, NULL), 0);
	simpump_stop(&pump);
	ATF_CHECK_EQ_MSG(r.ea.err, 0, "%s", rsd_last_error()->message);
	/* The image now shows the copy resident at cuda:0 beside its pageable
	 * replica: the spill makes room by dropping it first. */
	d = NULL;
	ATF_CHECK_EQ_MSG(rsd_controller_decide(c, &req, &d), 0, "%s", rsd_last_error()->message);
	if (d) {
		ATF_REQUIRE_EQ(d->plan->nreclaim, 2);
		ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], r.ea.h, C0));
		ATF_CHECK(fx_is_move(&d->plan->reclaim[1], b, C0, &PINNED));
		ATF_REQUIRE_EQ(d->plan->nenter, 1);
		ATF_CHECK(fx_is_ensure(&d->plan->enter[0], w, PINNED));
	}
	rsd_decision_free(d);
	ATF_REQUIRE_EQ(rsd_hold_release(hold), 0);
	rsd_hold_free(hold);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(set_flags_checks);
ATF_TC_BODY(set_flags_checks, tc)
{
	ATF_CHECK_EQ(rsd_controller_set_flags(NULL, 0), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_blockers_describe(NULL, NULL, 0), -RSD_ETYPE);
}

/*
 * Bytes in flight block like any other charge (the ledger): the source of
 * a move whose copy is queued keeps N of cuda:0's 2N. One value fits in
 * what is left, two do not, and the message and the detail name the bytes
 * in flight, which no eviction frees. (The message's used and reserved
 * bytes are those of the state the search started from, as before.)
 */
ATF_TC_WITHOUT_HEAD(in_flight_counted);
ATF_TC_BODY(in_flight_counted, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, 2 * N } };
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	const struct rsd_blockers *b;
	struct rsd_handle h, w, u;
	char want[512];
	struct fx f;

	fx_init_on_command(&f, bud, 1, 1);
	h = fx_adopt(&f, C0, RSD_EXCLUSIVE);
	w = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	u = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_move_async(f.m, h, PINNED, NULL, NULL, NULL), 0);
	q[0] = fx_req(w, C0);
	q[1] = fx_req(u, C0);

	c = ctl(&f, 0);
	ATF_CHECK_EQ(decide(c, "one", q, 1, NULL, 0), 0);
	ATF_CHECK_EQ(decide(c, "two", q, 2, NULL, 0), -RSD_EPLAN);
	snprintf(want, sizeof(want),
		 "Automatic residency request 'two' is infeasible: location cuda:0 cannot admit "
		 "64 bytes during materialization of '%" PRIu64 "'; budget=128, used=0, "
		 "reserved=0, in flight=64, held by 0 plans=0, but no invariant-valid victim "
		 "sequence satisfies the complete ordered request",
		 u.id);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	b = rsd_last_blockers();
	ATF_REQUIRE(b);
	ATF_CHECK_EQ(b->requested_bytes, N);
	ATF_CHECK_EQ(b->short_bytes, N);
	ATF_CHECK_EQ(b->used_bytes, 0);
	ATF_CHECK_EQ(b->in_flight_bytes, N);
	ATF_CHECK_EQ(b->plan_held_bytes, 0);
	ATF_CHECK_EQ(b->freeable_bytes, 0);

	rsd_simdev_complete_all(f.sd);
	ATF_REQUIRE_EQ(rsd_manager_reap(f.m), 0);
	ATF_CHECK_EQ(decide(c, "two", q, 2, NULL, 0), 0);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, pending_lease_named);
	ATF_TP_ADD_TC(tp, precheck_fails_at_once);
	ATF_TP_ADD_TC(tp, precheck_keeps_feasible);
	ATF_TP_ADD_TC(tp, arriving_named);
	ATF_TP_ADD_TC(tp, admitted_during_search);
	ATF_TP_ADD_TC(tp, set_flags_checks);
	ATF_TP_ADD_TC(tp, in_flight_counted);
	return 0;
}
