// SPDX-License-Identifier: MIT
/*
 * rsd_explain (reference.md §10.3), per-action reasons: ensure, move, drop
 * and discard explanations with their exact reason texts, predicted peaks
 * and their first-touch order, and what holds and pending leases protect.
 * The plan-level checks are in t_explain.c. Values are 64 bytes (N).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "pfx.h"

/* ---- per-action reasons ---- */

ATF_TC_WITHOUT_HEAD(ensure_reasons);
ATF_TC_BODY(ensure_reasons, tc)
{
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle x;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	x = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);

	/* EXCLUSIVE at its current location: a no-op (§18.26). */
	a[0] = rsd_action_ensure(x, PAGEABLE);
	a[1] = rsd_action_ensure(x, PINNED);
	e = pfx_explain_enter(&f, "exclusive", a, 2);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "EnsureResident would replicate an EXCLUSIVE value");
	ATF_REQUIRE_EQ(e->nactions, 2);
	pfx_check_act(&e->actions[0], true, true, NULL, &PAGEABLE, N,
		      "destination already resident");
	pfx_check_act(&e->actions[1], false, false, NULL, &PINNED, N,
		      "EnsureResident would replicate an EXCLUSIVE value");
	rsd_explanation_free(e);
	pfx_fini(&f);
}

/* §20.3: a load at the source location shares one charge (§18.19). */
ATF_TC_WITHOUT_HEAD(load_at_source_one_charge);
ATF_TC_BODY(load_at_source_one_charge, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, N } };
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f;

	pfx_init(&f, b, 1, -1);
	h = pfx_sourced(&f, PAGEABLE);
	ATF_CHECK_EQ(pfx_version(&f), 1);
	a[0] = rsd_action_ensure(h, PAGEABLE);
	e = pfx_explain_enter(&f, "w3", a, 1);
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], true, false, &PAGEABLE, &PAGEABLE, N, NULL);
	ATF_REQUIRE_EQ(e->npeaks, 1);
	pfx_check_peak(e, 0, PAGEABLE, N);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(pfx_version(&f), 1);
	pfx_fini(&f);
}

/* §20.4: infeasible, predicted peak above the budget, explanation prefix (§18.54). */
ATF_TC_WITHOUT_HEAD(peak_above_budget);
ATF_TC_BODY(peak_above_budget, tc)
{
	static const char want[] = "Transition exceeds budget at pageable-host";
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, 64 }, { RSD_LOC_PINNED_HOST, 256 } };
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle h;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, b, 2, -1);
	pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	a[0] = rsd_action_ensure(h, PINNED);
	a[1] = rsd_action_drop(h, PAGEABLE);
	e = pfx_explain_enter(&f, "w4", a, 2);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], false, false, &PAGEABLE, &PINNED, N, want);
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PAGEABLE, 128);
	pfx_check_peak(e, 1, PINNED, 0);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	pfx_fini(&f);
}

/* §20.5 and §18.57: first-touch order; a no-op drop at a never-used location. */
ATF_TC_WITHOUT_HEAD(peak_order_first_touch);
ATF_TC_BODY(peak_order_first_touch, tc)
{
	struct rsd_location c0 = pfx_cuda(0), got[4];
	struct rsd_action a[3];
	struct rsd_explanation *e;
	struct rsd_handle h;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	h = pfx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	v = pfx_version(&f);
	ATF_CHECK_EQ(v, 2);

	a[0] = rsd_action_drop(h, PINNED);
	e = pfx_explain_enter(&f, "noop-drop", a, 1);
	ATF_CHECK(e->feasible);
	ATF_CHECK(e->reason == NULL);
	pfx_check_act(&e->actions[0], true, true, &PINNED, NULL, N,
		      "materialization already absent");
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PAGEABLE, N);
	pfx_check_peak(e, 1, PINNED, 0);
	rsd_explanation_free(e);

	/* cuda:0 touched first, then pinned: peaks follow first touch, not canonical order. */
	a[0] = rsd_action_drop(h, c0);
	a[1] = rsd_action_drop(h, PINNED);
	a[2] = rsd_action_ensure(h, PINNED);
	e = pfx_explain_enter(&f, "w5", a, 3);
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->nactions, 3);
	pfx_check_act(&e->actions[0], true, true, &c0, NULL, N, "materialization already absent");
	pfx_check_act(&e->actions[1], true, true, &PINNED, NULL, N,
		      "materialization already absent");
	pfx_check_act(&e->actions[2], true, false, &PAGEABLE, &PINNED, N, NULL);
	ATF_REQUIRE_EQ(e->npeaks, 3);
	pfx_check_peak(e, 0, PAGEABLE, N);
	pfx_check_peak(e, 1, c0, 0);
	pfx_check_peak(e, 2, PINNED, N);
	rsd_explanation_free(e);

	/* Nothing recorded, nothing changed (§18.45). */
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_REQUIRE_EQ(rsd_manager_locations(f.m, got, 4), 1);
	ATF_CHECK(pfx_loc_is(got[0], PAGEABLE));
	pfx_fini(&f);
}

/* Peaks start at the current charge (used + reserved), not the historical peak. */
ATF_TC_WITHOUT_HEAD(peak_starts_at_current_charge);
ATF_TC_BODY(peak_starts_at_current_charge, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 70 } };
	struct rsd_reservation_spec r[] = { { RSD_LOC_PINNED_HOST, 6, "x" } };
	struct rsd_plan p = { .name = "current" };
	struct rsd_reservation *standalone;
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f;

	pfx_init(&f, b, 1, -1);
	h = pfx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	pfx_ensure(&f, h, PINNED);
	RSD_REQUIRE_OK(rsd_drop(f.m, h, PINNED, NULL));
	RSD_REQUIRE_OK(rsd_reserve(f.m, PINNED, 5, "standalone", &standalone));
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PINNED, 5);
	pfx_check_peak(e, 1, PAGEABLE, N);
	rsd_explanation_free(e);

	/* Standalone reservations count against the budget in the simulation. */
	p.reservations = r;
	p.nreservations = 1;
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(e->feasible);
	pfx_check_peak(e, 0, PINNED, 11);
	rsd_explanation_free(e);
	r[0].nbytes = 66;
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "Reservation 'x' exceeds budget at pinned-host");
	pfx_check_peak(e, 0, PINNED, 71);
	rsd_explanation_free(e);
	RSD_REQUIRE_OK(rsd_reservation_release(standalone));
	rsd_reservation_free(standalone);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(move_reasons);
ATF_TC_BODY(move_reasons, tc)
{
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_hold *hd;
	struct rsd_handle h, u;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_sourced(&f, PAGEABLE);
	pfx_ensure(&f, h, PAGEABLE);
	pfx_ensure(&f, h, PINNED);

	/* Implicit source: the best other replica; it is removed. */
	a[0] = rsd_action_move(h, PINNED, NULL);
	a[1] = rsd_action_drop(h, PAGEABLE);
	e = pfx_explain_enter(&f, "move-onto", a, 2);
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->nactions, 2);
	pfx_check_act(&e->actions[0], true, false, &PAGEABLE, &PINNED, N, NULL);
	/* The move removed pageable in the simulation: the drop is a no-op. */
	pfx_check_act(&e->actions[1], true, true, &PAGEABLE, NULL, N,
		      "materialization already absent");
	rsd_explanation_free(e);

	/* Explicit source == destination: a no-op whose source is the destination. */
	a[0] = rsd_action_move(h, PINNED, &PINNED);
	e = pfx_explain_enter(&f, "move-self", a, 1);
	pfx_check_act(&e->actions[0], true, true, &PINNED, &PINNED, N,
		      "destination already owns the selected replica");
	rsd_explanation_free(e);

	/* Protected implicit source onto a resident destination (§18.24). */
	hd = pfx_hold1(&f, h, PAGEABLE);
	a[0] = rsd_action_move(h, PINNED, NULL);
	e = pfx_explain_enter(&f, "move-held", a, 1);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "source pageable-host is protected");
	pfx_check_act(&e->actions[0], false, false, &PAGEABLE, &PINNED, N,
		      "source pageable-host is protected");
	rsd_explanation_free(e);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);

	/* Only replica moved: no-op with the source absent. */
	RSD_REQUIRE_OK(rsd_drop(f.m, h, PAGEABLE, NULL));
	a[0] = rsd_action_move(h, PINNED, NULL);
	e = pfx_explain_enter(&f, "move-noop", a, 1);
	pfx_check_act(&e->actions[0], true, true, NULL, &PINNED, N,
		      "destination already owns the selected replica");
	rsd_explanation_free(e);

	/* Explicit source not resident, even though the destination is (§18.23). */
	a[0] = rsd_action_move(h, PINNED, &PAGEABLE);
	e = pfx_explain_enter(&f, "move-from-absent", a, 1);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "explicit source pageable-host is not resident");
	pfx_check_act(&e->actions[0], false, false, &PAGEABLE, &PINNED, N,
		      "explicit source pageable-host is not resident");
	rsd_explanation_free(e);

	/* Held source with the destination not resident. */
	hd = pfx_hold1(&f, h, PINNED);
	a[0] = rsd_action_move(h, PAGEABLE, NULL);
	e = pfx_explain_enter(&f, "move-held-src", a, 1);
	pfx_check_reason(e->reason, "source pinned-host is protected");
	pfx_check_act(&e->actions[0], false, false, &PINNED, &PAGEABLE, N,
		      "source pinned-host is protected");
	rsd_explanation_free(e);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);

	/* Unloaded sourced value: the registered source location, loaded temporarily. */
	u = pfx_sourced(&f, PAGEABLE);
	a[0] = rsd_action_move(u, PINNED, NULL);
	e = pfx_explain_enter(&f, "move-unloaded", a, 1);
	ATF_CHECK(e->feasible);
	pfx_check_act(&e->actions[0], true, false, &PAGEABLE, &PINNED, N, NULL);
	/* pageable: current 0, temporary 64; pinned: current 64 + 64. */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PAGEABLE, N);
	pfx_check_peak(e, 1, PINNED, 2 * N);
	rsd_explanation_free(e);

	/* Explicit source of an unloaded value: not resident (§18.22). */
	a[0] = rsd_action_move(u, PINNED, &PAGEABLE);
	e = pfx_explain_enter(&f, "move-unloaded-from", a, 1);
	pfx_check_reason(e->reason, "explicit source pageable-host is not resident");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(f.loads, 1);
	pfx_fini(&f);
}

/* §20.7: protection before the last-copy rule. */
ATF_TC_WITHOUT_HEAD(drop_reasons);
ATF_TC_BODY(drop_reasons, tc)
{
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_hold *hd;
	struct rsd_handle x;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	x = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	hd = pfx_hold1(&f, x, PAGEABLE);
	a[0] = rsd_action_drop(x, PAGEABLE);
	e = pfx_explain_enter(&f, "w7", a, 1);
	pfx_check_reason(e->reason, "materialization at pageable-host is protected");
	pfx_check_act(&e->actions[0], false, false, &PAGEABLE, NULL, N,
		      "materialization at pageable-host is protected");
	rsd_explanation_free(e);
	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(f.m, x, PAGEABLE, NULL));
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);

	e = pfx_explain_enter(&f, "w7", a, 1);
	pfx_check_reason(e->reason, "cannot drop final MUST_PRESERVE materialization");
	pfx_check_act(&e->actions[0], false, false, &PAGEABLE, NULL, N,
		      "cannot drop final MUST_PRESERVE materialization");
	rsd_explanation_free(e);
	RSD_CHECK_ERR(RSD_EOWNERSHIP, rsd_drop(f.m, x, PAGEABLE, NULL));
	pfx_fini(&f);
}

/* §18.82: protected locations listed in canonical order, whatever the insertion order. */
ATF_TC_WITHOUT_HEAD(discard_protected_list);
ATF_TC_BODY(discard_protected_list, tc)
{
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_hold *h1, *h2, *h3;
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	h = pfx_adopt(&f, c0, RSD_REPLICABLE);
	pfx_ensure(&f, h, PINNED);
	pfx_ensure(&f, h, PAGEABLE);
	h1 = pfx_hold1(&f, h, PINNED);
	a[0] = rsd_action_discard(h);

	e = pfx_explain_enter(&f, "discard-one", a, 1);
	pfx_check_reason(e->reason, "discarded value has protected locations [" REPR_PINNED "]");
	pfx_check_act(&e->actions[0], false, false, NULL, NULL, N,
		      "discarded value has protected locations [" REPR_PINNED "]");
	rsd_explanation_free(e);

	h2 = pfx_hold1(&f, h, c0);
	h3 = pfx_hold1(&f, h, PAGEABLE);
	e = pfx_explain_enter(&f, "discard-three", a, 1);
	pfx_check_reason(e->reason, "discarded value has protected locations [" REPR_PAGEABLE
				    ", " REPR_PINNED ", " REPR_CUDA0 "]");
	rsd_explanation_free(e);

	/* Two locations (§18.82). */
	RSD_REQUIRE_OK(rsd_hold_release(h1));
	e = pfx_explain_enter(&f, "discard-two", a, 1);
	pfx_check_reason(e->reason, "discarded value has protected locations [" REPR_PAGEABLE
				    ", " REPR_CUDA0 "]");
	rsd_explanation_free(e);
	RSD_CHECK_ERR(RSD_EINUSE, rsd_discard(f.m, h, NULL));

	RSD_REQUIRE_OK(rsd_hold_release(h2));
	RSD_REQUIRE_OK(rsd_hold_release(h3));
	e = pfx_explain_enter(&f, "discard-free", a, 1);
	ATF_CHECK(e->feasible);
	pfx_check_act(&e->actions[0], true, false, NULL, NULL, N, NULL);
	rsd_explanation_free(e);
	rsd_hold_free(h1);
	rsd_hold_free(h2);
	rsd_hold_free(h3);
	pfx_fini(&f);
}

/* A pending lease protects until its events complete; explain never reaps. */
ATF_TC_WITHOUT_HEAD(pending_lease_protection);
ATF_TC_BODY(pending_lease_protection, tc)
{
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_lease *l;
	struct rsd_handle h;
	void *s1;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s1));
	h = pfx_sourced(&f, PAGEABLE);
	pfx_ensure(&f, h, c0);
	/* From here on s1's work waits for the test: the lease stays pending. */
	rsd_simdev_set_auto_complete(f.sd, false);
	RSD_REQUIRE_OK(rsd_acquire(f.m, &h, 1, c0, s1, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	v = pfx_version(&f);
	a[0] = rsd_action_drop(h, c0);
	e = pfx_explain_enter(&f, "pending", a, 1);
	pfx_check_reason(e->reason, "materialization at cuda:0 is protected");
	rsd_explanation_free(e);

	rsd_simdev_stream_complete(f.sd, s1);
	{
		struct rsd_plan p = { .name = "pending", .enter = a, .nenter = 1 };

		RSD_REQUIRE_OK(rsd_explain(f.m, &p, &v, &e));
	}
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(pfx_version(&f), v);
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(f.sd, s1);
	pfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, ensure_reasons);
	ATF_TP_ADD_TC(tp, load_at_source_one_charge);
	ATF_TP_ADD_TC(tp, peak_above_budget);
	ATF_TP_ADD_TC(tp, peak_order_first_touch);
	ATF_TP_ADD_TC(tp, peak_starts_at_current_charge);
	ATF_TP_ADD_TC(tp, move_reasons);
	ATF_TP_ADD_TC(tp, drop_reasons);
	ATF_TP_ADD_TC(tp, discard_protected_list);
	ATF_TP_ADD_TC(tp, pending_lease_protection);
	return atf_no_error();
}
