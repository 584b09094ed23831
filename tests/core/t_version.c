// SPDX-License-Identifier: MIT
/*
 * state_version (reference.md §5.4): the worked sequence step by step, the
 * exhaustive increments of transitions, and everything that must not move
 * it (no-ops, reads, explain, failed operations).
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

/* The §5.4 worked sequence (fresh manager, host locations unbudgeted). */
ATF_TC_WITHOUT_HEAD(worked_sequence);
ATF_TC_BODY(worked_sequence, tc)
{
	struct csrc s1 = { 0 }, s2 = { 0 };
	struct rsd_transition rep;
	struct rsd_reservation *r;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_handle h, h2;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	CHECK_VERSION(&f, 0);
	h = cfx_sourced(&f, &s1, PAGEABLE); /* new location + record */
	CHECK_VERSION(&f, 2);
	h2 = cfx_sourced(&f, &s2, PAGEABLE);
	CHECK_VERSION(&f, 3);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL)); /* load installs directly */
	CHECK_VERSION(&f, 4);
	ATF_CHECK_EQ(s1.loads, 1);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL)); /* new location + install */
	CHECK_VERSION(&f, 6);
	OK(rsd_ensure(f.m, h, PINNED, NULL, &rep));
	ATF_CHECK(rep.no_op);
	CHECK_VERSION(&f, 6);
	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep)); /* removes the pageable replica */
	ATF_CHECK(!rep.no_op);
	CHECK_VERSION(&f, 7);
	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep));
	ATF_CHECK(rep.no_op);
	CHECK_VERSION(&f, 7);
	OK(rsd_acquire(f.m, &h, 1, PINNED, NULL, &l));
	CHECK_VERSION(&f, 8);
	OK(rsd_lease_release(l, 0));
	CHECK_VERSION(&f, 9);
	OK(rsd_hold(f.m, &h, 1, PINNED, &hd));
	CHECK_VERSION(&f, 10);
	OK(rsd_hold_release(hd));
	CHECK_VERSION(&f, 11);
	OK(rsd_reserve(f.m, PAGEABLE, 0, "zero", &r));
	CHECK_VERSION(&f, 12);
	OK(rsd_reservation_release(r));
	CHECK_VERSION(&f, 13);
	OK(rsd_discard(f.m, h2, NULL)); /* sourced, no materializations */
	CHECK_VERSION(&f, 14);
	OK(rsd_discard(f.m, h, NULL)); /* one materialization */
	CHECK_VERSION(&f, 16);
	ATF_CHECK_EQ(s1.loads, 1);
	ATF_CHECK_EQ(s2.loads, 0);
	/* Releases are idempotent and free costs nothing. */
	OK(rsd_lease_release(l, 0));
	OK(rsd_hold_release(hd));
	OK(rsd_reservation_release(r));
	rsd_lease_free(l);
	rsd_hold_free(hd);
	rsd_reservation_free(r);
	CHECK_VERSION(&f, 16);
	/* Close is +1 and the version is no longer readable. */
	OK(rsd_manager_close(f.m, 0));
	{
		uint64_t v = 77;

		ERR(RSD_ECLOSED, rsd_manager_state_version_get(f.m, &v));
		ATF_CHECK_EQ(v, 77);
	}
	cfx_fini(&f);
}

/* Transition increments: one per install, one per removal, one per discard mark. */
ATF_TC_WITHOUT_HEAD(transition_increments);
ATF_TC_BODY(transition_increments, tc)
{
	struct csrc s = { 0 };
	struct rsd_handle a, h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	a = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE); /* location + install */
	CHECK_VERSION(&f, 2);
	OK(rsd_move(f.m, a, PINNED, NULL, NULL, NULL)); /* location + install + removal */
	CHECK_VERSION(&f, 5);
	OK(rsd_move(f.m, a, PAGEABLE, NULL, NULL, NULL)); /* install + removal */
	CHECK_VERSION(&f, 7);
	h = cfx_sourced(&f, &s, PINNED);
	CHECK_VERSION(&f, 8);
	/* A temporary load at another location is not an increment. */
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	CHECK_VERSION(&f, 9);
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	CHECK_VERSION(&f, 10);
	OK(rsd_drop(f.m, h, PAGEABLE, NULL));
	CHECK_VERSION(&f, 11);
	OK(rsd_drop(f.m, h, PINNED, NULL)); /* last copy of a sourced value */
	CHECK_VERSION(&f, 12);
	/* A move of an unloaded value from its source location: one install. */
	OK(rsd_move(f.m, h, PINNED, NULL, NULL, NULL));
	CHECK_VERSION(&f, 13);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	CHECK_VERSION(&f, 14);
	/* Discard of two replicas: two removals + the mark. */
	OK(rsd_discard(f.m, h, NULL));
	CHECK_VERSION(&f, 17);
	ATF_CHECK_EQ(s.loads, 2);
	cfx_fini(&f);
}

/* §5.4 non-increments and §18.45: reads, no-ops, explain. */
ATF_TC_WITHOUT_HEAD(non_increments);
ATF_TC_BODY(non_increments, tc)
{
	struct csrc s = { 0 };
	struct rsd_location locs[4];
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	struct rsd_explanation *e = NULL;
	struct rsd_action acts[3];
	struct rsd_plan p;
	struct rsd_handle a, h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	h = cfx_sourced(&f, &s, PAGEABLE);
	CHECK_VERSION(&f, 3);
	for (int i = 0; i < 3; i++) {
		snap = cfx_snap(&f);
		ATF_CHECK_EQ(snap->state_version, 3);
		rsd_snapshot_free(snap);
		ATF_CHECK_EQ(rsd_manager_state_version(f.m), 3);
		ATF_CHECK_EQ(rsd_manager_locations(f.m, locs, 4), 1);
		ATF_CHECK(rsd_manager_id(f.m) != 0);
	}
	OK(rsd_manager_reap(f.m)); /* nothing to reap */
	/* No-op transitions. */
	OK(rsd_ensure(f.m, a, PAGEABLE, NULL, &rep));
	ATF_CHECK(rep.no_op);
	OK(rsd_move(f.m, a, PAGEABLE, NULL, NULL, &rep));
	ATF_CHECK(rep.no_op);
	OK(rsd_move(f.m, a, PAGEABLE, &PAGEABLE, NULL, &rep));
	ATF_CHECK(rep.no_op);
	OK(rsd_drop(f.m, h, PAGEABLE, &rep));
	ATF_CHECK(rep.no_op);
	OK(rsd_drop(f.m, a, PINNED, &rep));
	ATF_CHECK(rep.no_op);
	/* explain is a dry run. */
	acts[0] = rsd_action_ensure(h, PAGEABLE);
	acts[1] = rsd_action_ensure(h, PINNED);
	acts[2] = rsd_action_drop(a, PAGEABLE);
	memset(&p, 0, sizeof(p));
	p.name = "dry";
	p.enter = acts;
	p.nenter = 3;
	OK(rsd_explain(f.m, &p, NULL, &e));
	rsd_explanation_free(e);
	ATF_CHECK_EQ(s.loads, 0);
	CHECK_VERSION(&f, 3);
	CHECK_LOCATIONS(&f, PAGEABLE);
	cfx_fini(&f);
}

/* Failed primitive operations change nothing (every check precedes the first change). */
ATF_TC_WITHOUT_HEAD(failures_do_not_increment);
ATF_TC_BODY(failures_do_not_increment, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, N } };
	struct rsd_value_spec keep = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_MUST_PRESERVE };
	struct csrc s = { 0 }, bad = { 0 };
	struct rsd_source src = { cfx_load, NULL, &s };
	struct rsd_snapshot *before, *after;
	struct rsd_reservation *r = NULL;
	struct rsd_hold *hd;
	struct rsd_lease *l = NULL;
	struct rsd_handle a, p, h, hb, x, forged;
	struct cfx f;

	cfx_host(&f, b, 1);
	p = cfx_adopt(&f, PINNED, N, RSD_EXCLUSIVE); /* pinned is full */
	a = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	h = cfx_sourced(&f, &s, PAGEABLE);
	hb = cfx_sourced(&f, &bad, PAGEABLE);
	bad.fail_rc = 5;
	bad.fail_times = UINT32_MAX;
	OK(rsd_hold(f.m, &a, 1, PAGEABLE, &hd));
	forged = a;
	forged.id += 1000;
	before = cfx_snap(&f);

	ERR(RSD_EBUDGET, rsd_ensure(f.m, h, PINNED, NULL, NULL)); /* after a load */
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PINNED, 1, "one", &r));
	ERR(RSD_ESOURCE, rsd_ensure(f.m, hb, PAGEABLE, NULL, NULL));
	ERR(RSD_EOWNERSHIP, rsd_ensure(f.m, a, PINNED, NULL, NULL));
	ERR(RSD_EOWNERSHIP, rsd_drop(f.m, p, PINNED, NULL));
	ERR(RSD_EINUSE, rsd_drop(f.m, a, PAGEABLE, NULL));
	ERR(RSD_EINUSE, rsd_discard(f.m, a, NULL));
	ERR(RSD_EINUSE, rsd_move(f.m, a, PINNED, NULL, NULL, NULL));
	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, h, PAGEABLE, &PINNED, NULL, NULL));
	ERR(RSD_EHANDLE, rsd_ensure(f.m, forged, PAGEABLE, NULL, NULL));
	ERR(RSD_EUNAVAILABLE, rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	ERR(RSD_EINVAL, rsd_register_source(f.m, &keep, &src, PAGEABLE, &x));
	{
		struct rsd_resident *one = cfx_alloc(&f, PINNED, 1);

		ERR(RSD_EBUDGET, rsd_adopt(f.m, one, NULL, RSD_EXCLUSIVE, &x));
		rsd_resident_free(one);
	}

	after = cfx_snap(&f);
	/* Only the failed load's temporary charge may have raised a peak. */
	CHECK_SAME(before, after, true);
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ(bad.loads, 1);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, worked_sequence);
	ATF_TP_ADD_TC(tp, transition_increments);
	ATF_TP_ADD_TC(tp, non_increments);
	ATF_TP_ADD_TC(tp, failures_do_not_increment);
	return 0;
}
