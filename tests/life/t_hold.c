// SPDX-License-Identifier: MIT
/*
 * Holds (reference.md §8.6, §8.8, §8.9; edge cases 24, 27, 36, 37, 39,
 * 44): what a hold blocks (drop, move from, discard) and what it does not
 * (ensure reading it, acquire, other holds), the per-materialization and
 * per-location counts, all-or-nothing acquisition, idempotent release and
 * abandonment.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "lfx.h"

static int nmats(struct rsd_handle h)
{
	struct rsd_snapshot *s = lfx_snap();
	int n = -1;

	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			n = (int)s->values[i].nmaterializations;
	rsd_snapshot_free(s);
	return n;
}

ATF_TC_WITHOUT_HEAD(hold_blocks_removals);
ATF_TC_BODY(hold_blocks_removals, tc)
{
	struct rsd_location pg = RSD_LOC_PAGEABLE_HOST, pin = RSD_LOC_PINNED_HOST;
	struct rsd_transition rep;
	struct rsd_hold *hd = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd2 = NULL;
	struct rsd_handle a;
	uint64_t v;

	lfx_setup(false);
	a = lfx_put(pg, 64, NULL);
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, a, pin, NULL, NULL));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, pg, &hd));
	ATF_CHECK(rsd_hold_active(hd));
	CHECK_MAT(a, pg, 0, 1, 0);
	CHECK_MAT(a, pin, 0, 0, 0);
	v = lfx_ver();

	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(lfx_m, a, pg, NULL));
	/* Move from the held replica, explicitly ... */
	RSD_CHECK_ERR(RSD_EINUSE, rsd_move(lfx_m, a, lfx_cuda(0), &pg, NULL, NULL));
	/* ... or implicitly: pageable is the canonical first source. */
	RSD_CHECK_ERR(RSD_EINUSE, rsd_move(lfx_m, a, lfx_cuda(0), NULL, NULL, NULL));
	/* Move onto the resident pinned replica removes the best other one,
	 * the held pageable replica (edge case 24). */
	RSD_CHECK_ERR(RSD_EINUSE, rsd_move(lfx_m, a, pin, NULL, NULL, NULL));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_discard(lfx_m, a, NULL));
	CHECK_VER(v);
	ATF_CHECK_EQ(nmats(a), 2);
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, NULL, 0), 2); /* cuda:0 not recorded */

	/* Not blocked: reading it, leasing it, holding it again. */
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, a, lfx_cuda(0), NULL, &rep));
	ATF_CHECK(!rep.no_op);
	ATF_CHECK(rep.has_source && rsd_location_equal(rep.source, pg));
	CHECK_VER(v + 2); /* new location, install */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, pg, NULL, &l));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, pg, &hd2));
	CHECK_MAT(a, pg, 1, 2, 0);
	CHECK_VER(v + 4);
	/* An unheld replica moves freely. */
	RSD_REQUIRE_OK(rsd_move(lfx_m, a, lfx_cuda(1), &pin, NULL, NULL));
	RSD_CHECK_OK(rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	RSD_REQUIRE_OK(rsd_hold_release(hd2));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(lfx_m, a, pg, NULL));

	/* Released: the removals go through. */
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	ATF_CHECK(!rsd_hold_active(hd));
	RSD_CHECK_OK(rsd_drop(lfx_m, a, pg, NULL));
	RSD_CHECK_OK(rsd_discard(lfx_m, a, NULL));
	rsd_hold_free(hd);
	rsd_hold_free(hd2);
	rsd_lease_free(l);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* Edge case 27: protection is checked before the last-copy rule. */
ATF_TC_WITHOUT_HEAD(held_last_copy);
ATF_TC_BODY(held_last_copy, tc)
{
	struct rsd_location pg = RSD_LOC_PAGEABLE_HOST;
	struct rsd_hold *hd = NULL;
	struct rsd_handle a;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(pg, 64, NULL);
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, pg, &hd));
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(lfx_m, a, pg, NULL));
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	RSD_CHECK_ERR(RSD_EOWNERSHIP, rsd_drop(lfx_m, a, pg, NULL));
	CHECK_VER(v + 1);
	rsd_hold_free(hd);
	lfx_teardown();
}

/* Edge case 44 and first-occurrence dedup. */
ATF_TC_WITHOUT_HEAD(hold_counts);
ATF_TC_BODY(hold_counts, tc)
{
	struct rsd_location pin = RSD_LOC_PINNED_HOST;
	struct rsd_hold *h1 = NULL, *h2 = NULL;
	struct rsd_handle a, b, c, set[3];
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(pin, 64, NULL);
	b = lfx_put(pin, 32, NULL);
	c = lfx_put(RSD_LOC_PAGEABLE_HOST, 32, NULL);
	set[0] = a;
	set[1] = b;
	set[2] = a;
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_hold(lfx_m, set, 3, pin, &h1));
	CHECK_VER(v + 1);
	CHECK_MAT(a, pin, 0, 1, 0);
	CHECK_MAT(b, pin, 0, 1, 0);
	CHECK_LOC(pin, 0, 2, 0);
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	CHECK_MAT(c, RSD_LOC_PAGEABLE_HOST, 0, 0, 0);

	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, pin, &h2));
	CHECK_VER(v + 2);
	CHECK_MAT(a, pin, 0, 2, 0);
	CHECK_LOC(pin, 0, 3, 0);

	RSD_REQUIRE_OK(rsd_hold_release(h1));
	CHECK_VER(v + 3);
	CHECK_MAT(a, pin, 0, 1, 0);
	CHECK_MAT(b, pin, 0, 0, 0);
	CHECK_LOC(pin, 0, 1, 0);
	RSD_REQUIRE_OK(rsd_hold_release(h2));
	CHECK_LOC(pin, 0, 0, 0);
	CHECK_VER(v + 4);
	rsd_hold_free(h1);
	rsd_hold_free(h2);
	lfx_teardown();
}

/* Edge cases 36, 37 for holds, and the P-life prologue. */
ATF_TC_WITHOUT_HEAD(hold_errors);
ATF_TC_BODY(hold_errors, tc)
{
	struct rsd_location locs[8];
	struct rsd_hold *hd = NULL;
	struct rsd_handle a, b, set[2];
	size_t nlocs;
	uint64_t v;

	lfx_setup(false);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b = lfx_put(lfx_cuda(1), 64, NULL);
	set[0] = a;
	set[1] = b;
	nlocs = rsd_manager_locations(lfx_m, locs, 8);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_hold(lfx_m, set, 2, lfx_cuda(0), &hd));
	ATF_CHECK(lfx_msg_has("cuda:0"));
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_hold(lfx_m, set, 0, lfx_cuda(0), &hd));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_hold(lfx_m, NULL, 2, lfx_cuda(0), &hd));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_hold(lfx_m, set, 2, lfx_cuda(0), NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_hold(NULL, set, 2, lfx_cuda(0), &hd));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_hold(lfx_m, &a, 1, lfx_cuda(2), &hd));
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_hold(lfx_m, &a, 1, RSD_LOC_PINNED_HOST, &hd));
	ATF_CHECK(hd == NULL);
	CHECK_VER(v);
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, locs, 8), nlocs);

	/* A GPU hold needs no stream. */
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &b, 1, lfx_cuda(1), &hd));
	CHECK_MAT(b, lfx_cuda(1), 0, 1, 0);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	RSD_REQUIRE_OK(rsd_manager_close(lfx_m, 0));
	hd = NULL;
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_hold(lfx_m, &a, 1, lfx_cuda(0), &hd));
	ATF_CHECK(hd == NULL);
	lfx_teardown();
}

/* Edge case 39 for holds: release is idempotent, +1 on the first. */
ATF_TC_WITHOUT_HEAD(hold_release_idempotent);
ATF_TC_BODY(hold_release_idempotent, tc)
{
	struct rsd_hold *hd = NULL;
	struct rsd_handle a;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, RSD_LOC_PAGEABLE_HOST, &hd));
	v = lfx_ver();
	RSD_CHECK_OK(rsd_hold_release(hd));
	CHECK_VER(v + 1);
	ATF_CHECK(!rsd_hold_active(hd));
	RSD_CHECK_OK(rsd_hold_release(hd));
	RSD_CHECK_OK(rsd_hold_release(hd));
	CHECK_VER(v + 1);
	CHECK_MAT(a, RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_hold_release(NULL));
	ATF_CHECK(!rsd_hold_active(NULL));
	rsd_hold_free(hd);
	rsd_hold_free(NULL);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* §8.9: a freed active hold is released (+1) with a warning. */
ATF_TC_WITHOUT_HEAD(abandoned_hold);
ATF_TC_BODY(abandoned_hold, tc)
{
	struct rsd_hold *hd = NULL;
	struct rsd_handle a;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, RSD_LOC_PAGEABLE_HOST, &hd));
	v = lfx_ver();
	rsd_hold_free(hd);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(lfx_nwarn, 1);
	ATF_CHECK_STREQ(lfx_lastwarn, "hold on 1 value(s) was freed without release: released it");
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	RSD_CHECK_ERR(RSD_EOWNERSHIP, rsd_drop(lfx_m, a, RSD_LOC_PAGEABLE_HOST, NULL));
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, hold_blocks_removals);
	ATF_TP_ADD_TC(tp, held_last_copy);
	ATF_TP_ADD_TC(tp, hold_counts);
	ATF_TP_ADD_TC(tp, hold_errors);
	ATF_TP_ADD_TC(tp, hold_release_idempotent);
	ATF_TP_ADD_TC(tp, abandoned_hold);
	return atf_no_error();
}
