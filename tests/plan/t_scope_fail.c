// SPDX-License-Identifier: MIT
/*
 * Scope failures (reference.md §11; §20.9, §18.48): an entry that fails at
 * an enter action, a reclaim or a reservation, and an exit that fails,
 * with the exact state_version arithmetic, the rolled-back reservations
 * and the closed scope left behind. The happy paths are in t_scope.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "pfx.h"

/*
 * §20.9 / §18.48: entry fails at the 2nd enter action after two reservations.
 * pinned_known: pinned-host is recorded at construction (budget), so the
 * version advances by exactly 5 (2 admits, 1 install, 2 releases); without
 * it the install records pinned-host too (+6).
 */
static void entry_failure(bool pinned_known)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 1 << 20 } };
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 5, "r1" },
					     { RSD_LOC_PINNED_HOST, 7, "r2" } };
	struct rsd_action enter[2];
	struct rsd_plan p = { .name = "w9",
			      .enter = enter,
			      .nenter = 2,
			      .reservations = rs,
			      .nreservations = 2 };
	struct rsd_location_snapshot ls;
	struct rsd_plan_report *partial;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, bad;
	struct pfx f;
	size_t nr;

	pfx_init(&f, b, pinned_known ? 1 : 0, -1);
	g = pfx_sourced(&f, PAGEABLE);
	bad = pfx_sourced_src(&f, PAGEABLE, N, -RSD_EDEVICE, NULL);
	ATF_REQUIRE_EQ(pfx_version(&f), 3);
	enter[0] = rsd_action_ensure(g, PINNED);
	enter[1] = rsd_action_ensure(bad, PINNED);
	pfx_clear_partial();
	RSD_REQUIRE_ERR(RSD_EEXEC, rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_ENTER);
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EDEVICE);
	ATF_CHECK_STREQ(err->plan_name, "w9");
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_CHECK_STREQ(partial->plan_name, "w9");
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	pfx_check_transition(&partial->transitions[0], &enter[0], false, &PAGEABLE, &PINNED, N);
	rsd_plan_report_free(partial);
	ATF_CHECK(rsd_take_partial_report() == NULL);

	ATF_CHECK_EQ(pfx_version(&f), pinned_known ? 8 : 9);
	ls = pfx_loc_snap(&f, PAGEABLE, &nr);
	ATF_CHECK_EQ(nr, 0);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.reservation_count, 0);
	ATF_CHECK_EQ(ls.peak_charged_bytes, 5 + N);
	ls = pfx_loc_snap(&f, PINNED, NULL);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.used_bytes, N);
	ATF_CHECK_EQ(ls.peak_charged_bytes, 7 + N);
	ATF_CHECK(pfx_resident_at(&f, g, PINNED));
	ATF_CHECK_EQ(pfx_nmat(&f, g), 1);
	ATF_CHECK_EQ(pfx_nmat(&f, bad), 0);
	ATF_CHECK_EQ(f.loads, 2);

	/* §18.49: the scope is finished, and nothing of it was handed out. */
	pfx_check_no_scope(s);
	ATF_CHECK_EQ(pfx_version(&f), pinned_known ? 8 : 9);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(entry_failure_version_5);
ATF_TC_BODY(entry_failure_version_5, tc)
{
	entry_failure(true);
}

ATF_TC_WITHOUT_HEAD(entry_failure_w9);
ATF_TC_BODY(entry_failure_w9, tc)
{
	entry_failure(false);
}

/* A reclaim failure: phase reclaim, reclaim-local index, no reservation admitted. */
ATF_TC_WITHOUT_HEAD(reclaim_failure);
ATF_TC_BODY(reclaim_failure, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 5, "r1" } };
	struct rsd_action reclaim[2], enter[1];
	struct rsd_plan p = { .name = "rc",
			      .reclaim = reclaim,
			      .nreclaim = 2,
			      .enter = enter,
			      .nenter = 1,
			      .reservations = rs,
			      .nreservations = 1 };
	struct rsd_plan_report *partial;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, bad;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	g = pfx_sourced(&f, PAGEABLE);
	bad = pfx_sourced_src(&f, PAGEABLE, N, -RSD_EUNAVAILABLE, NULL);
	v = pfx_version(&f);
	reclaim[0] = rsd_action_ensure(g, PAGEABLE);
	reclaim[1] = rsd_action_ensure(bad, PAGEABLE);
	enter[0] = rsd_action_drop(g, PAGEABLE);
	pfx_clear_partial();
	RSD_REQUIRE_ERR(RSD_EEXEC, rsd_scope_enter(f.m, &p, NULL, 0, &v, &s));
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_RECLAIM);
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EUNAVAILABLE);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	pfx_check_transition(&partial->transitions[0], &reclaim[0], false, &PAGEABLE, &PAGEABLE, N);
	rsd_plan_report_free(partial);
	ATF_CHECK_EQ(pfx_version(&f), v + 1);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	ATF_CHECK_EQ(pfx_loc_snap(&f, PAGEABLE, NULL).peak_charged_bytes, 2 * N);
	ATF_CHECK(pfx_resident_at(&f, g, PAGEABLE));
	pfx_check_no_scope(s);
	pfx_fini(&f);
}

/*
 * §18.52: a reservation-phase failure. Preflight simulates admission, so an
 * exact simulation never lets execution refuse a reservation it admitted;
 * the "reserve" fault point makes the admission of "one" refuse at run time
 * as a budget rejection would. The reclaim action stays committed (the
 * partial report), "all" is released again, nothing is handed out.
 */
ATF_TC_WITHOUT_HEAD(reservation_failure);
ATF_TC_BODY(reservation_failure, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, 1024 * N } };
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, N, "all" },
					     { RSD_LOC_PAGEABLE_HOST, 1, "one" } };
	struct rsd_action reclaim[1], enter[1];
	struct rsd_plan p = { .name = "rv",
			      .reclaim = reclaim,
			      .nreclaim = 1,
			      .enter = enter,
			      .nenter = 1,
			      .reservations = rs,
			      .nreservations = 2 };
	struct rsd_plan_report *partial;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g;
	uint64_t v;
	int rc;
	struct pfx f;

	pfx_init(&f, b, 1, -1);
	g = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	reclaim[0] = rsd_action_ensure(g, PINNED);
	enter[0] = rsd_action_drop(g, PINNED);
	pfx_clear_partial();
	RSD_REQUIRE_OK(rsd_fault_inject("reserve", "one", 1, RSD_EBUDGET));
	rc = rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s);
	RSD_REQUIRE_OK(rsd_fault_inject("reserve", NULL, 0, 0));
	ATF_REQUIRE_EQ_MSG(rc, -RSD_EEXEC, "entry returned %d", rc);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_RESERVE);
	ATF_CHECK_EQ(err->failed_action_index, -1);
	ATF_CHECK_EQ(err->failed_reservation_index, 1);
	ATF_CHECK_EQ(err->cause, -RSD_EBUDGET);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	pfx_check_transition(&partial->transitions[0], &reclaim[0], false, &PAGEABLE, &PINNED, N);
	rsd_plan_report_free(partial);
	/* +1 pinned recorded, +1 install, +1 admit "all", +1 release it. */
	ATF_CHECK_EQ(pfx_version(&f), v + 4);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK(pfx_resident_at(&f, g, PINNED));
	pfx_check_no_scope(s);
	pfx_fini(&f);
}

/*
 * §20.10 / §18.50: a hold taken in the body makes exit[1] fail; exit is not
 * re-preflighted, exit[2] is skipped, the reservation is released anyway.
 */
ATF_TC_WITHOUT_HEAD(exit_failure);
ATF_TC_BODY(exit_failure, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 3, "w" } };
	struct rsd_action enter[2], ex[3];
	struct rsd_plan p = { .name = "w10",
			      .enter = enter,
			      .nenter = 2,
			      .reservations = rs,
			      .nreservations = 1,
			      .exit = ex,
			      .nexit = 3 };
	struct rsd_plan_report *partial, *r = NULL;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, k;
	struct rsd_hold *hd;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	g = pfx_sourced(&f, PAGEABLE);
	k = pfx_sourced(&f, PAGEABLE);
	ATF_REQUIRE_EQ(pfx_version(&f), 3);
	enter[0] = rsd_action_ensure(g, PAGEABLE);
	enter[1] = rsd_action_ensure(k, PAGEABLE);
	ex[0] = rsd_action_drop(g, PAGEABLE);
	ex[1] = rsd_action_drop(k, PAGEABLE);
	ex[2] = rsd_action_ensure(g, PINNED); /* would load g and record pinned-host */
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	ATF_CHECK_EQ(pfx_version(&f), 6);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 3);
	RSD_REQUIRE_OK(rsd_hold(f.m, &k, 1, PAGEABLE, &hd));
	ATF_CHECK_EQ(pfx_version(&f), 7);

	pfx_clear_partial();
	RSD_REQUIRE_ERR(RSD_EEXEC, rsd_scope_close(s, &r));
	ATF_CHECK(r == NULL);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_EXIT);
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EINUSE);
	ATF_CHECK_STREQ(err->plan_name, "w10");
	RSD_CHECK_ERR(RSD_EEXEC, rsd_scope_exit_error(s));
	ATF_CHECK(rsd_scope_report(s) == NULL);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_CHECK_STREQ(partial->plan_name, "w10");
	ATF_REQUIRE_EQ(partial->ntransitions, 3);
	pfx_check_transition(&partial->transitions[0], &enter[0], false, &PAGEABLE, &PAGEABLE, N);
	pfx_check_transition(&partial->transitions[1], &enter[1], false, &PAGEABLE, &PAGEABLE, N);
	pfx_check_transition(&partial->transitions[2], &ex[0], false, &PAGEABLE, NULL, N);
	rsd_plan_report_free(partial);

	/* +1 drop of g, +1 reservation release; exit[2] never ran. */
	ATF_CHECK_EQ(pfx_version(&f), 9);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	ATF_CHECK_EQ(pfx_nmat(&f, g), 0);
	ATF_CHECK(pfx_resident_at(&f, k, PAGEABLE));
	ATF_CHECK_EQ(f.loads, 2);
	{
		struct rsd_location l[4];

		/* pinned-host never recorded */
		ATF_CHECK_EQ(rsd_manager_locations(f.m, l, 4), 1);
	}

	RSD_CHECK_OK(rsd_scope_close(s, &r));
	ATF_CHECK(r == NULL);
	RSD_CHECK_ERR(RSD_EEXEC, rsd_scope_exit_error(s));
	ATF_CHECK_EQ(pfx_version(&f), 9);
	rsd_scope_free(s);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, entry_failure_version_5);
	ATF_TP_ADD_TC(tp, entry_failure_w9);
	ATF_TP_ADD_TC(tp, reclaim_failure);
	ATF_TP_ADD_TC(tp, reservation_failure);
	ATF_TP_ADD_TC(tp, exit_failure);
	return atf_no_error();
}
