// SPDX-License-Identifier: MIT
/*
 * Plans and the byte ledger (reference.md §10.3, §14.4, §20.2): the
 * headroom an executing plan keeps is published per location
 * (plan_held_bytes, plan_hold_count), shrinks by what the plan's own
 * actions charge (a byte is never counted twice), and explain, preflight
 * and every admission of another thread compute the free bytes from the
 * same fields: remaining_budget_bytes is feasible, one byte more is not.
 *
 * Plans run on helper threads and stop inside a source load on a gate, so
 * their headroom is held while the test looks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include "../check.h"
#include "../gate.h"
#include "pfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

/* A source that loads n bytes at `at` once its gate opens. */
struct gated {
	struct pfx *f;
	struct rsd_location at;
	struct gate gate;
};

static int gated_load(void *ctx, struct rsd_resident **out)
{
	struct gated *g = ctx;
	uint64_t n = N;

	gate_hold(&g->gate);
	return rsd_resident_alloc(g->f->m, &rsd_resident_type, g->at, 1, &n, NULL, 0, out);
}

static struct rsd_handle gated_value(struct pfx *f, struct gated *g)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { gated_load, NULL, g };
	struct rsd_handle h;

	g->f = f;
	g->at = PAGEABLE;
	RSD_REQUIRE_OK(rsd_register_source(f->m, &spec, &src, PAGEABLE, &h));
	return h;
}

struct runner {
	struct pfx *f;
	const struct rsd_action *acts;
	size_t nacts;
	int rc;
	pthread_t th;
};

static void *runner_main(void *arg)
{
	struct runner *r = arg;

	r->rc = rsd_execute_actions(r->f->m, r->acts, r->nacts, "held", NULL, 0, NULL, NULL);
	return NULL;
}

/* Run the plan acts on a helper thread until it stops in g's load. */
static void run(struct runner *r, struct pfx *f, const struct rsd_action *acts, size_t n,
		struct gated *g)
{
	r->f = f;
	r->acts = acts;
	r->nacts = n;
	ATF_REQUIRE_EQ(pthread_create(&r->th, NULL, runner_main, r), 0);
	gate_wait_entered(&g->gate);
}

/* A manager on one simulated device (auto-complete), cuda:0's budget b. */
static void setup(struct pfx *f, uint64_t b)
{
	const struct rsd_budget bud[] = { { CUDA0, b } };

	pfx_init(f, bud, 1, 1);
}

static void check_loc(struct pfx *f, struct rsd_location at, uint64_t used, uint64_t reserved,
		      uint64_t in_flight, uint64_t held, uint32_t holders, uint64_t remaining)
{
	struct rsd_location_snapshot l = pfx_loc_snap(f, at, NULL);

	ATF_CHECK_EQ(l.used_bytes, used);
	ATF_CHECK_EQ(l.reserved_bytes, reserved);
	ATF_CHECK_EQ(l.in_flight_bytes, in_flight);
	ATF_CHECK_EQ(l.plan_held_bytes, held);
	ATF_CHECK_EQ(l.plan_hold_count, holders);
	ATF_CHECK_EQ(l.remaining_budget_bytes, remaining);
}

/* Explain a plan that only reserves nbytes at `at`: feasible or not. */
static bool reserve_feasible(struct pfx *f, struct rsd_location at, uint64_t nbytes)
{
	struct rsd_reservation_spec rs = { at, nbytes, "r" };
	struct rsd_plan p = { .name = "probe", .reservations = &rs, .nreservations = 1 };
	struct rsd_explanation *e;
	bool ok;

	RSD_REQUIRE_OK(rsd_explain(f->m, &p, NULL, &e));
	ok = e->feasible;
	if (!ok)
		pfx_check_reason(e->reason, "Reservation 'r' exceeds budget at cuda:0");
	rsd_explanation_free(e);
	return ok;
}

/* Explain an ensure of a fresh nbytes value at `at`: feasible or not. */
static bool ensure_feasible(struct pfx *f, struct rsd_location at, struct rsd_handle h)
{
	struct rsd_action a = rsd_action_ensure(h, at);
	struct rsd_explanation *e = pfx_explain_enter(f, "probe", &a, 1);
	bool ok = e->feasible;

	rsd_explanation_free(e);
	return ok;
}

/*
 * One plan, stopped in its second action's load: its first action's copy
 * is charged at cuda:0 and its headroom has shrunk by exactly that charge.
 */
ATF_TC_WITHOUT_HEAD(hold_shrinks_by_own_charges);
ATF_TC_BODY(hold_shrinks_by_own_charges, tc)
{
	struct pfx f;
	struct gated g = { .gate = GATE_INIT };
	struct rsd_reservation *r = NULL;
	struct runner a = { 0 };
	struct rsd_action acts[2];
	const struct rsd_error *e;
	struct rsd_handle x, y, z, big;
	char want[256];

	setup(&f, 4 * N);
	x = pfx_adopt(&f, PINNED, RSD_REPLICABLE);
	y = gated_value(&f, &g);
	z = pfx_adopt_n(&f, PINNED, RSD_REPLICABLE, 2 * N);
	big = pfx_adopt_n(&f, PINNED, RSD_REPLICABLE, 2 * N + 1);
	check_loc(&f, CUDA0, 0, 0, 0, 0, 0, 4 * N);

	acts[0] = rsd_action_ensure(x, CUDA0);
	acts[1] = rsd_action_ensure(y, CUDA0);
	run(&a, &f, acts, 2, &g);

	/* Peak 2N predicted; x's N charged; N still held for y. The
	 * temporary load charge is in flight at pageable-host. */
	check_loc(&f, CUDA0, N, 0, 0, N, 1, 2 * N);
	check_loc(&f, PAGEABLE, 0, 0, N, 0, 0, 0);
	ATF_CHECK(reserve_feasible(&f, CUDA0, 2 * N));
	ATF_CHECK(!reserve_feasible(&f, CUDA0, 2 * N + 1));
	ATF_CHECK(ensure_feasible(&f, CUDA0, z));
	ATF_CHECK(!ensure_feasible(&f, CUDA0, big));

	RSD_CHECK_ERR(RSD_EBUDGET, rsd_reserve(f.m, CUDA0, 2 * N + 1, "over", &r));
	e = rsd_last_error();
	snprintf(want, sizeof(want),
		 "Residency budget exceeded at cuda:0: budget=%d, used=%d, reserved=0, "
		 "in flight=0, held by 1 plan=%d, requested=%d",
		 4 * N, N, N, 2 * N + 1);
	ATF_CHECK_STREQ(e->message, want);
	ATF_CHECK_EQ(e->plan_held_bytes, N);
	ATF_CHECK_EQ(e->plan_hold_count, 1);
	ATF_CHECK_EQ(e->in_flight_bytes, 0);
	/* A plan whose ensure explain found infeasible fails its preflight. */
	{
		struct rsd_action over = rsd_action_ensure(big, CUDA0);

		RSD_CHECK_ERR(RSD_EPLAN,
			      rsd_execute_actions(f.m, &over, 1, "over", NULL, 0, NULL, NULL));
	}
	/* Exactly the free bytes fit: x's charge is not counted twice. */
	RSD_REQUIRE_OK(rsd_reserve(f.m, CUDA0, 2 * N, "fits", &r));
	check_loc(&f, CUDA0, N, 2 * N, 0, N, 1, 0);

	/* The plan's own install uses its headroom. */
	gate_open(&g.gate);
	pthread_join(a.th, NULL);
	ATF_CHECK_EQ(a.rc, 0);
	check_loc(&f, CUDA0, 2 * N, 2 * N, 0, 0, 0, 0);
	RSD_REQUIRE_OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	pfx_fini(&f);
}

/*
 * Two plans hold headroom at cuda:0 at once: the second one's preflight
 * counts the first one's, the location shows both, and a budget error
 * names them.
 */
ATF_TC_WITHOUT_HEAD(two_plans_hold);
ATF_TC_BODY(two_plans_hold, tc)
{
	struct pfx f;
	struct gated ga = { .gate = GATE_INIT }, gb = { .gate = GATE_INIT };
	struct rsd_reservation *r = NULL;
	struct runner a = { 0 }, c = { 0 };
	struct rsd_action acts[2], cacts[1];
	struct rsd_handle x, y, w;
	char want[256];

	setup(&f, 4 * N);
	x = pfx_adopt(&f, PINNED, RSD_REPLICABLE);
	y = gated_value(&f, &ga);
	w = gated_value(&f, &gb);

	acts[0] = rsd_action_ensure(x, CUDA0);
	acts[1] = rsd_action_ensure(y, CUDA0);
	run(&a, &f, acts, 2, &ga);
	cacts[0] = rsd_action_ensure(w, CUDA0);
	run(&c, &f, cacts, 1, &gb);

	check_loc(&f, CUDA0, N, 0, 0, 2 * N, 2, N);
	check_loc(&f, PAGEABLE, 0, 0, 2 * N, 0, 0, 0);
	ATF_CHECK(reserve_feasible(&f, CUDA0, N));
	ATF_CHECK(!reserve_feasible(&f, CUDA0, N + 1));
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_reserve(f.m, CUDA0, N + 1, "over", &r));
	snprintf(want, sizeof(want),
		 "Residency budget exceeded at cuda:0: budget=%d, used=%d, reserved=0, "
		 "in flight=0, held by 2 plans=%d, requested=%d",
		 4 * N, N, 2 * N, N + 1);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	ATF_CHECK_EQ(rsd_last_error()->plan_hold_count, 2);
	RSD_REQUIRE_OK(rsd_reserve(f.m, CUDA0, N, "fits", &r));
	check_loc(&f, CUDA0, N, N, 0, 2 * N, 2, 0);

	/* Each plan's install is admitted against the other's headroom. */
	gate_open(&gb.gate);
	pthread_join(c.th, NULL);
	ATF_CHECK_EQ(c.rc, 0);
	check_loc(&f, CUDA0, 2 * N, N, 0, N, 1, 0);
	gate_open(&ga.gate);
	pthread_join(a.th, NULL);
	ATF_CHECK_EQ(a.rc, 0);
	check_loc(&f, CUDA0, 3 * N, N, 0, 0, 0, 0);
	RSD_REQUIRE_OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	check_loc(&f, CUDA0, 3 * N, 0, 0, 0, 0, N);
	pfx_fini(&f);
}

/*
 * What the plan's own action gives back returns to its headroom (never
 * beyond what its preflight predicted): ensure x, drop x, ensure y peaks
 * at N; after the drop the N x had taken is held again for y.
 */
ATF_TC_WITHOUT_HEAD(hold_returns_own_refunds);
ATF_TC_BODY(hold_returns_own_refunds, tc)
{
	struct pfx f;
	struct gated g = { .gate = GATE_INIT };
	struct rsd_action acts[3];
	struct runner a = { 0 };
	struct rsd_handle x, y;

	setup(&f, 2 * N);
	x = pfx_adopt(&f, PINNED, RSD_REPLICABLE);
	y = gated_value(&f, &g);
	acts[0] = rsd_action_ensure(x, CUDA0);
	acts[1] = rsd_action_drop(x, CUDA0);
	acts[2] = rsd_action_ensure(y, CUDA0);
	run(&a, &f, acts, 3, &g);

	check_loc(&f, CUDA0, 0, 0, 0, N, 1, N);
	ATF_CHECK(reserve_feasible(&f, CUDA0, N));
	ATF_CHECK(!reserve_feasible(&f, CUDA0, N + 1));
	gate_open(&g.gate);
	pthread_join(a.th, NULL);
	ATF_CHECK_EQ(a.rc, 0);
	check_loc(&f, CUDA0, N, 0, 0, 0, 0, N);
	pfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, hold_shrinks_by_own_charges);
	ATF_TP_ADD_TC(tp, two_plans_hold);
	ATF_TP_ADD_TC(tp, hold_returns_own_refunds);
	return atf_no_error();
}
