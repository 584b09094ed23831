// SPDX-License-Identifier: MIT
/*
 * A device that fails for good under a manager with two simulated devices
 * (reference.md, "When a device fails"): the first call that meets the loss
 * returns the driver's RSD_EDEVLOST and quarantines the device (a state
 * change, the location's failed flag in snapshots); every later admission
 * there fails with RSD_EDEVLOST before any driver call; the other device and
 * the host tiers work as before. A failure that is not a loss quarantines
 * nothing.
 */
#include <stdio.h>
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 }, CUDA1 = { RSD_CUDA, 1 };

/* The failed flags of the three locations, from a checked snapshot. */
static void check_failed(struct cfx *f, bool pinned, bool cuda0, bool cuda1)
{
	struct rsd_snapshot *snap = cfx_snap(f);

	ATF_REQUIRE(cfx_loc(snap, PINNED) && cfx_loc(snap, CUDA0) && cfx_loc(snap, CUDA1));
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->failed, pinned);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->failed, cuda0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->failed, cuda1);
	rsd_snapshot_free(snap);
}

/* h's lost flag and location, and how many copies it has (its first at
 * `at` when it has one). */
static void check_values(struct cfx *f, struct rsd_handle h, bool lost, struct rsd_location at,
			 size_t nmats)
{
	struct rsd_snapshot *snap = cfx_snap(f);
	const struct rsd_value_snapshot *v = cfx_val(snap, h);

	ATF_REQUIRE(v);
	ATF_CHECK_EQ_MSG(v->lost, lost, "value %llu lost %d", (unsigned long long)h.id, v->lost);
	if (lost)
		ATF_CHECK(rsd_location_equal(v->lost_location, at));
	ATF_CHECK_EQ_MSG(v->nmaterializations, nmats, "value %llu has %zu copies",
			 (unsigned long long)h.id, v->nmaterializations);
	if (nmats && v->nmaterializations)
		ATF_CHECK(rsd_location_equal(v->materializations[0].location, at));
	rsd_snapshot_free(snap);
}

/* Every call on a lost value fails with RSD_EDEVLOST naming it and its
 * device; no out-parameter is written. */
static void check_lost_calls(struct cfx *f, struct rsd_handle h)
{
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	char id[64];

	snprintf(id, sizeof(id), "value %llu was lost with its device", (unsigned long long)h.id);
	ERR(RSD_EDEVLOST, rsd_ensure(f->m, h, PAGEABLE, NULL, NULL));
	CHECK_MSG_HAS(id);
	CHECK_MSG_HAS("cuda:1");
	ERR(RSD_EDEVLOST, rsd_ensure(f->m, h, CUDA0, NULL, NULL));
	CHECK_MSG_HAS(id);
	ERR(RSD_EDEVLOST, rsd_move(f->m, h, PINNED, NULL, NULL, NULL));
	CHECK_MSG_HAS(id);
	ERR(RSD_EDEVLOST, rsd_drop(f->m, h, CUDA1, NULL));
	CHECK_MSG_HAS(id);
	ERR(RSD_EDEVLOST, rsd_acquire(f->m, &h, 1, PINNED, NULL, &l));
	CHECK_MSG_HAS(id);
	ATF_CHECK(l == NULL);
	ERR(RSD_EDEVLOST, rsd_hold(f->m, &h, 1, CUDA1, &hd));
	CHECK_MSG_HAS(id);
	ATF_CHECK(hd == NULL);
	ERR(RSD_EDEVLOST, rsd_ensure_async(f->m, h, CUDA0, NULL, NULL));
	CHECK_MSG_HAS(id);
}

ATF_TC_WITHOUT_HEAD(lost_device_is_quarantined);
ATF_TC_BODY(lost_device_is_quarantined, tc)
{
	struct rsd_reservation *r = NULL;
	struct rsd_handle a, b, c;
	unsigned long allocs;
	uint64_t v, used1;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	b = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	c = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, a, PINNED, 5);
	cfx_fill(&f, b, PINNED, 7);
	OK(rsd_ensure(f.m, a, CUDA0, NULL, NULL));
	OK(rsd_ensure(f.m, a, CUDA1, NULL, NULL));
	OK(rsd_drop(f.m, a, PINNED, NULL));
	/* c's only copy will be on the device that fails. */
	OK(rsd_move(f.m, c, CUDA1, NULL, NULL, NULL));
	check_failed(&f, false, false, false);
	used1 = cfx_used(&f, CUDA1);
	OK(rsd_simdev_lose_device(f.sd, 1));
	v = cfx_version(&f);

	/* The first call that meets the loss gets the driver's code; the
	 * quarantine (+1) settles the location: a's copy there leaves the
	 * books (+1, a keeps cuda:0), c's only copy makes it lost (+1) and
	 * leaves too (+1). Nothing is charged there any more. */
	ERR(RSD_EDEVLOST, rsd_ensure(f.m, b, CUDA1, NULL, NULL));
	CHECK_MSG_HAS("cuda:1");
	CHECK_VERSION(&f, v + 4);
	check_failed(&f, false, false, true);
	ATF_CHECK(!cfx_resident(&f, b, CUDA1));
	ATF_CHECK_EQ(used1, 2 * N);
	ATF_CHECK_EQ(cfx_used(&f, CUDA1), 0);
	check_values(&f, a, false, CUDA0, 1);
	check_values(&f, c, true, CUDA1, 0);
	check_values(&f, b, false, PINNED, 1);

	/* From now on admission refuses, without asking the driver. */
	allocs = rsd_simdev_calls(f.sd, RSD_SIMDEV_ALLOC);
	ERR(RSD_EDEVLOST, rsd_ensure(f.m, b, CUDA1, NULL, NULL));
	CHECK_MSG_HAS("cuda:1 failed for good");
	CHECK_MSG_HAS("quarantined");
	ERR(RSD_EDEVLOST, rsd_reserve(f.m, CUDA1, N, "after the loss", &r));
	ATF_CHECK(r == NULL);
	ERR(RSD_EDEVLOST, rsd_move(f.m, b, CUDA1, NULL, NULL, NULL));
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_ALLOC), allocs);
	CHECK_VERSION(&f, v + 4);

	/* cuda:0 and the host tiers work as before. */
	OK(rsd_ensure(f.m, b, CUDA0, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, b, CUDA0, 7));
	OK(rsd_ensure(f.m, b, PAGEABLE, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, b, PAGEABLE, 7));
	OK(rsd_reserve(f.m, CUDA0, N, "beside the loss", &r));
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	OK(rsd_ensure(f.m, a, PAGEABLE, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, a, PAGEABLE, 5));
	v = cfx_version(&f);

	/* Every call on c names it and the device, and changes nothing;
	 * a discard ends it. */
	check_lost_calls(&f, c);
	CHECK_VERSION(&f, v);
	OK(rsd_discard(f.m, c, NULL));
	CHECK_VERSION(&f, v + 1);
	check_values(&f, c, false, PAGEABLE, 0);
	ERR(RSD_EHANDLE, rsd_ensure(f.m, c, PAGEABLE, NULL, NULL));
	check_failed(&f, false, false, true);
	cfx_fini(&f);
}

/* A driver failure that is not a loss (RSD_EDEVICE) quarantines nothing:
 * the next call there works. */
ATF_TC_WITHOUT_HEAD(other_failures_quarantine_nothing);
ATF_TC_BODY(other_failures_quarantine_nothing, tc)
{
	struct rsd_handle a;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, a, CUDA0, NULL, NULL));
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_ALLOC, 1, RSD_EDEVICE);
	v = cfx_version(&f);
	ERR(RSD_EDEVICE, rsd_ensure(f.m, a, CUDA1, NULL, NULL));
	CHECK_VERSION(&f, v);
	OK(rsd_ensure(f.m, a, CUDA1, NULL, NULL));
	check_failed(&f, false, false, false);
	cfx_fini(&f);
}

/*
 * A value with a source whose only copy was on the lost device is not
 * lost: the copy leaves the books and the next ensure loads it again,
 * elsewhere. A value with a host copy keeps it.
 */
ATF_TC_WITHOUT_HEAD(sourced_value_loads_again);
ATF_TC_BODY(sourced_value_loads_again, tc)
{
	struct csrc src = { 0 };
	struct rsd_handle s, p;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	s = cfx_sourced(&f, &src, PAGEABLE);
	p = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, p, PINNED, 9);
	OK(rsd_ensure(f.m, s, CUDA1, NULL, NULL));
	OK(rsd_ensure(f.m, p, CUDA1, NULL, NULL));
	ATF_CHECK_EQ(src.loads, 1);
	OK(rsd_simdev_lose_device(f.sd, 1));
	v = cfx_version(&f);
	ERR(RSD_EDEVLOST, rsd_ensure(f.m, s, PAGEABLE, NULL, NULL));
	/* quarantine, s's copy and p's copy leave: +3 */
	CHECK_VERSION(&f, v + 3);
	check_values(&f, s, false, PAGEABLE, 0);
	check_values(&f, p, false, PINNED, 1);
	OK(rsd_ensure(f.m, s, CUDA0, NULL, NULL));
	ATF_CHECK_EQ(src.loads, 2);
	check_values(&f, s, false, CUDA0, 1);
	ATF_CHECK(cfx_has_pattern(&f, p, PINNED, 9));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * Work in flight on the lost device settles at the quarantine, nothing
 * waited for: a copy queued to it is undone, a released GPU lease's event
 * there ends as failed, a queued copy from it to cuda:0 (on a sound
 * stream) fails when it runs and is undone at the next reap. The values
 * whose only copy was there are lost; the others keep their copies. No
 * count is left at cuda:1, and close(0) closes.
 */
/* Once the loss settled: nothing left on cuda:1, nothing on cuda:0. */
static void check_settled(const struct rsd_snapshot *snap)
{
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->value_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->pending_event_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 0);
}

ATF_TC_WITHOUT_HEAD(work_in_flight_settles);
ATF_TC_BODY(work_in_flight_settles, tc)
{
	struct rsd_handle to1, leased, from1;
	struct rsd_snapshot *snap;
	struct rsd_lease *l;
	void *cs1;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	to1 = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	leased = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	from1 = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, to1, PINNED, 1);
	OK(rsd_move(f.m, leased, CUDA1, NULL, NULL, NULL));
	OK(rsd_move(f.m, from1, CUDA1, NULL, NULL, NULL));
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 1, &cs1), 0);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_ensure_async(f.m, to1, CUDA1, NULL, NULL));
	OK(rsd_acquire(f.m, &leased, 1, CUDA1, cs1, &l));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	OK(rsd_ensure_async(f.m, from1, CUDA0, NULL, NULL));
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->pending_event_count, 2);
	rsd_snapshot_free(snap);

	OK(rsd_simdev_lose_device(f.sd, 1));
	/* The reap meets the loss: the lost device's events are final. */
	ERR(RSD_EDEVLOST, rsd_manager_reap(f.m));
	check_failed(&f, false, false, true);
	check_values(&f, to1, false, PINNED, 1);
	check_values(&f, leased, true, CUDA1, 0);
	/* from1's copy to cuda:0 still runs on cuda:0's transfer stream. */
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVLOST, rsd_manager_reap(f.m));
	check_values(&f, from1, true, CUDA1, 0);
	snap = cfx_snap(&f);
	check_settled(snap);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->in_flight_bytes, 0);
	rsd_snapshot_free(snap);
	ATF_CHECK(cfx_has_pattern(&f, to1, PINNED, 1));
	OK(rsd_manager_reap(f.m));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * A value whose only copy is on cuda:1, queued on from there to pinned and
 * from pinned on to cuda:0 when cuda:1 is lost. The pinned copy never
 * gets the value's bytes, so the cuda:0 copy reading it cannot either:
 * neither outlives the loss, and the value is lost with cuda:1 (marked so,
 * its calls failing with RSD_EDEVLOST), not left without a copy and
 * without the mark (seen in the hostile test: the copy to cuda:0 counted
 * as a survivor while cuda:1's copy was settled, then failed with pinned's).
 */
ATF_TC_WITHOUT_HEAD(copy_of_a_copy_from_lost_device);
ATF_TC_BODY(copy_of_a_copy_from_lost_device, tc)
{
	struct rsd_handle v, kept;
	struct rsd_snapshot *snap;
	const struct rsd_value_snapshot *vs;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	v = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	kept = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, kept, PINNED, 2);
	OK(rsd_move(f.m, v, CUDA1, NULL, NULL, NULL));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_ensure_async(f.m, v, PINNED, NULL, NULL));
	OK(rsd_ensure_async(f.m, v, CUDA0, NULL, NULL));
	/* The copy to cuda:0 reads the arriving pinned copy, not cuda:1. */
	snap = cfx_snap(&f);
	vs = cfx_val(snap, v);
	ATF_REQUIRE(vs);
	ATF_CHECK_EQ(vs->nmaterializations, 3);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->pending_event_count, 1);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->pending_event_count, 1);
	rsd_snapshot_free(snap);

	OK(rsd_simdev_lose_device(f.sd, 1));
	ERR(RSD_EDEVLOST, rsd_manager_reap(f.m));
	check_failed(&f, false, false, true);
	rsd_simdev_complete_all(f.sd);
	(void)rsd_manager_reap(f.m);
	(void)rsd_manager_reap(f.m);
	check_values(&f, v, true, CUDA1, 0);
	check_lost_calls(&f, v);
	check_values(&f, kept, false, PINNED, 1);
	ATF_CHECK(cfx_has_pattern(&f, kept, PINNED, 2));
	snap = cfx_snap(&f);
	check_settled(snap);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->pending_event_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->used_bytes, N);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	OK(rsd_discard(f.m, v, NULL));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * A copy on the lost device that a lease or a hold protects is kept,
 * unreadable, shown arriving and still charged, until its protection
 * ends; the value's copy elsewhere is read meanwhile. The release that
 * ends the last protection removes it.
 */
ATF_TC_WITHOUT_HEAD(protected_copy_leaves_at_release);
ATF_TC_BODY(protected_copy_leaves_at_release, tc)
{
	const struct rsd_materialization_snapshot *d;
	struct rsd_snapshot *snap;
	struct rsd_handle a, only;
	struct rsd_hold *hd, *hd2 = NULL;
	struct rsd_lease *l;
	uint64_t v;
	void *cs1;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	only = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, a, PINNED, 3);
	OK(rsd_ensure(f.m, a, CUDA1, NULL, NULL));
	OK(rsd_move(f.m, only, CUDA1, NULL, NULL, NULL));
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 1, &cs1), 0);
	OK(rsd_acquire(f.m, &a, 1, CUDA1, cs1, &l));
	OK(rsd_hold(f.m, &only, 1, CUDA1, &hd));
	OK(rsd_simdev_lose_device(f.sd, 1));
	v = cfx_version(&f);
	/* A read of only's copy meets the loss: quarantine, a's copy marked
	 * failed, only lost, only's copy marked failed. */
	ERR(RSD_EDEVLOST, rsd_ensure(f.m, only, PAGEABLE, NULL, NULL));
	CHECK_MSG_HAS("cuda:1");
	CHECK_VERSION(&f, v + 4);
	snap = cfx_snap(&f);
	d = cfx_snap_mat(snap, a, CUDA1);
	ATF_REQUIRE(d);
	ATF_CHECK(d->arriving);
	ATF_CHECK_EQ(d->use_count, 1);
	d = cfx_snap_mat(snap, only, CUDA1);
	ATF_REQUIRE(d);
	ATF_CHECK(d->arriving);
	ATF_CHECK_EQ(d->hold_count, 1);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->used_bytes, 2 * N);
	ATF_CHECK(cfx_val(snap, only)->lost);
	ATF_CHECK(!cfx_val(snap, a)->lost);
	rsd_snapshot_free(snap);
	ERR(RSD_EDEVLOST, rsd_hold(f.m, &a, 1, CUDA1, &hd2));
	CHECK_MSG_HAS("its device was lost for good");
	CHECK_MSG_HAS("1 lease(s), 0 hold(s)");
	ATF_CHECK(hd2 == NULL);
	ERR(RSD_EDEVLOST, rsd_ensure(f.m, a, CUDA1, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, a, PINNED, 3));
	ERR(RSD_EINUSE, rsd_discard(f.m, only, NULL));
	v = cfx_version(&f);

	OK(rsd_lease_release(l, 0)); /* released +1, the copy goes +1 */
	rsd_lease_free(l);
	CHECK_VERSION(&f, v + 2);
	check_values(&f, a, false, PINNED, 1);
	OK(rsd_hold_release(hd)); /* released +1, the copy goes +1 */
	rsd_hold_free(hd);
	CHECK_VERSION(&f, v + 4);
	check_values(&f, only, true, CUDA1, 0);
	ATF_CHECK_EQ(cfx_used(&f, CUDA1), 0);
	OK(rsd_discard(f.m, only, NULL));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * close(0) after a loss, once the lifetimes are released, does not sync
 * the lost device; a new manager on the same simulated device then works
 * on cuda:0, and quarantines cuda:1 at its first call there.
 */
ATF_TC_WITHOUT_HEAD(close_and_reopen);
ATF_TC_BODY(close_and_reopen, tc)
{
	struct rsd_manager_config mc;
	struct rsd_manager *m2;
	struct rsd_handle a, b;
	struct rsd_lease *l;
	void *cs1;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, a, CUDA1, NULL, NULL));
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 1, &cs1), 0);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_acquire(f.m, &a, 1, CUDA1, cs1, &l));
	OK(rsd_lease_release(l, 0)); /* pending on cs1 */
	rsd_lease_free(l);
	OK(rsd_simdev_lose_device(f.sd, 1));
	/* The pending lease's event answers at once: close waits for nothing. */
	OK(rsd_manager_close(f.m, 0));
	rsd_manager_destroy(f.m);
	f.m = NULL;

	memset(&mc, 0, sizeof(mc));
	mc.driver = rsd_simdev_ops();
	mc.driver_ctx = f.sd;
	OK(rsd_manager_create(&mc, &m2));
	f.m = m2;
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	b = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, b, PINNED, 4);
	OK(rsd_ensure(f.m, b, CUDA0, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, b, CUDA0, 4));
	ERR(RSD_EDEVLOST, rsd_ensure(f.m, b, CUDA1, NULL, NULL));
	check_failed(&f, false, false, true);
	OK(rsd_move(f.m, b, PAGEABLE, NULL, NULL, NULL));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/* Make cuda:1 lost and quarantined (one call meets it). */
static void lose_cuda1(struct cfx *f, struct rsd_handle probe)
{
	OK(rsd_simdev_lose_device(f->sd, 1));
	ERR(RSD_EDEVLOST, rsd_ensure(f->m, probe, CUDA1, NULL, NULL));
	check_failed(f, false, false, true);
}

/*
 * Plans and the controller after the loss: explain says why an action to
 * or from the failed location, or on a lost value, cannot run; a decision
 * that needs cuda:1 or a lost value fails with RSD_EDEVLOST naming it; a
 * spill never goes to cuda:1 (the tier lists it first: pinned host is
 * taken).
 */
ATF_TC_WITHOUT_HEAD(plans_avoid_the_failed_location);
ATF_TC_BODY(plans_avoid_the_failed_location, tc)
{
	const struct rsd_budget b[] = { { CUDA0, N } };
	const struct rsd_location spill_to[] = { CUDA1, PINNED };
	const struct rsd_fallback_tier tier = { CUDA0, spill_to, 2 };
	struct rsd_handle a, lost, y;
	struct rsd_action acts[3];
	struct rsd_plan plan = { 0 };
	struct rsd_explanation *e = NULL;
	struct rsd_controller *c;
	struct rsd_decision *d = NULL;
	struct rsd_policy *pol;
	struct rsd_requirement rq;
	struct rsd_request req = { "after the loss", &rq, 1, NULL, 0 };
	struct cfx f;

	cfx_sim(&f, b, 1, 2);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	lost = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	y = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	OK(rsd_move(f.m, lost, CUDA1, NULL, NULL, NULL));
	OK(rsd_move(f.m, a, CUDA0, NULL, NULL, NULL));
	lose_cuda1(&f, y);
	check_values(&f, lost, true, CUDA1, 0);

	acts[0] = rsd_action_ensure(y, CUDA1);
	acts[1] = rsd_action_drop(a, CUDA1);
	acts[2] = rsd_action_ensure(lost, PAGEABLE);
	plan.name = "explain";
	plan.nenter = 1;
	for (size_t i = 0; i < 3; i++) {
		const char *why = i < 2 ? "cuda:1 failed for good" : "was lost with its device";

		plan.enter = &acts[i];
		OK(rsd_explain(f.m, &plan, NULL, &e));
		ATF_REQUIRE_EQ(e->nactions, 1);
		ATF_CHECK(!e->feasible);
		ATF_CHECK(!e->actions[0].executable);
		ATF_CHECK_MSG(e->actions[0].reason && strstr(e->actions[0].reason, why),
			      "action %zu: %s", i, e->actions[0].reason);
		ATF_CHECK_MSG(e->reason && strstr(e->reason, why), "plan %zu: %s", i, e->reason);
		rsd_explanation_free(e);
		e = NULL;
	}

	OK(rsd_tiered_lru_create(&tier, 1, &pol));
	OK(rsd_controller_create(f.m, pol, 0, &c));
	rq.handle = y;
	rq.location = CUDA1;
	ERR(RSD_EDEVLOST, rsd_controller_decide(c, &req, &d));
	CHECK_MSG_HAS("requirement 0 is at cuda:1");
	ATF_CHECK(d == NULL);
	rq.handle = lost;
	rq.location = CUDA0;
	ERR(RSD_EDEVLOST, rsd_controller_decide(c, &req, &d));
	CHECK_MSG_HAS("was lost with its device");
	ATF_CHECK(d == NULL);
	/* y at cuda:0 (budget N) evicts a: to pinned host, not cuda:1. */
	rq.handle = y;
	OK(rsd_controller_decide(c, &req, &d));
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, a));
	ATF_CHECK_EQ(d->evictions[0].action.kind, RSD_ACT_MOVE);
	ATF_CHECK(rsd_location_equal(d->evictions[0].action.location, PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(pol);
	cfx_fini(&f);
}

/* h's materialization locations, in order, are want[0..n). */
static void check_mats(struct cfx *f, struct rsd_handle h, const struct rsd_location *want,
		       size_t n)
{
	struct rsd_location got[4];
	size_t k = cfx_mats(f, h, got, 4);

	ATF_CHECK_EQ_MSG(k, n, "value %llu has %zu copies, expected %zu", (unsigned long long)h.id,
			 k, n);
	for (size_t i = 0; i < k && i < n; i++)
		ATF_CHECK_MSG(rsd_location_equal(got[i], want[i]), "copy %zu at %s, expected %s", i,
			      cfx_name(got[i]), cfx_name(want[i]));
}

/* A value adopted with mode at `at` (one N-byte buffer). */
static struct rsd_handle adopt_mode(struct cfx *f, struct rsd_location at, int mode)
{
	struct rsd_resident *r = cfx_alloc(f, at, N);
	struct rsd_handle h;

	OK(rsd_adopt(f->m, r, &at, (enum rsd_replica_mode)mode, &h));
	return h;
}

/*
 * RSD_DURABLE: a move off the value's last host copy keeps it (the move
 * copies), and a drop of it is followed, in the same call, by a write-back
 * to pinned host (charged there; the snapshot shows durable); after the
 * device's loss the durable value keeps its bytes, the same value without
 * the flag is lost. An adopt on a device writes back at once. RSD_EXCLUSIVE
 * cannot be durable.
 */
ATF_TC_WITHOUT_HEAD(durable_value_survives);
ATF_TC_BODY(durable_value_survives, tc)
{
	const struct rsd_location pinned_cuda1[] = { CUDA1, PINNED };
	const struct rsd_location kept_cuda1[] = { PINNED, CUDA1 };
	struct rsd_resident *r;
	struct rsd_snapshot *snap;
	struct rsd_handle d, plain, ondev, h, probe;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	/* Both devices known: no location is recorded below. */
	probe = adopt_mode(&f, PINNED, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, probe, CUDA0, NULL, NULL));
	OK(rsd_ensure(f.m, probe, CUDA1, NULL, NULL));
	OK(rsd_drop(f.m, probe, CUDA1, NULL));
	d = adopt_mode(&f, PINNED, RSD_REPLICABLE | RSD_DURABLE);
	plain = adopt_mode(&f, PINNED, RSD_REPLICABLE);
	cfx_fill(&f, d, PINNED, 0x44);
	cfx_fill(&f, plain, PINNED, 0x45);
	v = cfx_version(&f);
	OK(rsd_move(f.m, plain, CUDA1, NULL, NULL, NULL));
	CHECK_VERSION(&f, v + 2);
	check_mats(&f, plain, pinned_cuda1, 1);
	v = cfx_version(&f);
	OK(rsd_move(f.m, d, CUDA1, NULL, NULL, NULL));
	/* The move copies and keeps the last host copy (+1): no write-back. */
	CHECK_VERSION(&f, v + 1);
	check_mats(&f, d, kept_cuda1, 2);
	ATF_CHECK_EQ(cfx_used(&f, PINNED), 2 * N); /* probe's and d's */
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_val(snap, d)->durable);
	ATF_CHECK(!cfx_val(snap, plain)->durable);
	rsd_snapshot_free(snap);
	/* A drop of the host copy is followed by a write-back (+2). */
	v = cfx_version(&f);
	OK(rsd_drop(f.m, d, PINNED, NULL));
	CHECK_VERSION(&f, v + 2);
	check_mats(&f, d, pinned_cuda1, 2);

	/* Adopted on a device: written back before rsd_adopt returns. */
	ondev = adopt_mode(&f, CUDA1, RSD_REPLICABLE | RSD_DURABLE);
	check_mats(&f, ondev, pinned_cuda1, 2);

	r = cfx_alloc(&f, CUDA0, N);
	ERR(RSD_ETYPE,
	    rsd_adopt(f.m, r, &CUDA0, (enum rsd_replica_mode)(RSD_EXCLUSIVE | RSD_DURABLE), &h));
	CHECK_MSG_HAS("RSD_DURABLE needs RSD_REPLICABLE");
	rsd_resident_free(r);

	lose_cuda1(&f, probe);
	check_values(&f, d, false, PINNED, 1);
	check_values(&f, ondev, false, PINNED, 1);
	check_values(&f, plain, true, CUDA1, 0);
	ATF_CHECK(cfx_has_pattern(&f, d, PINNED, 0x44));
	/* It lives on: to cuda:0 and back, with its host copy kept. */
	OK(rsd_move(f.m, d, CUDA0, NULL, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, d, CUDA0, 0x44));
	ATF_CHECK(cfx_resident(&f, d, PINNED));
	OK(rsd_discard(f.m, plain, NULL));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * An output a producer stream still writes on cuda:1 is written back once
 * the reap sees the producer finish, not before; with pinned host full the
 * write-back goes to pageable host; with no host room the calls succeed,
 * with no host copy.
 */
ATF_TC_WITHOUT_HEAD(durable_output_written_back_after_its_producer);
ATF_TC_BODY(durable_output_written_back_after_its_producer, tc)
{
	const struct rsd_budget b[] = { { PINNED, 0 } };
	const struct rsd_location pageable_cuda1[] = { CUDA1, PAGEABLE };
	struct rsd_reservation *res;
	struct rsd_resident *r;
	struct rsd_handle out;
	void *ps;
	struct cfx f;

	cfx_sim(&f, b, 1, 2);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 1, &ps), 0);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_reserve(f.m, CUDA1, N, "output", &res));
	r = cfx_alloc(&f, CUDA1, N);
	OK(rsd_adopt_reserved(res, r, (enum rsd_replica_mode)(RSD_REPLICABLE | RSD_DURABLE), ps,
			      &out));
	OK(rsd_reservation_release(res));
	rsd_reservation_free(res);
	OK(rsd_manager_reap(f.m));
	check_mats(&f, out, pageable_cuda1, 1); /* the producer still runs */
	/* The write-back waits for its copy: let the device run. */
	rsd_simdev_complete_all(f.sd);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_manager_reap(f.m));
	check_mats(&f, out, pageable_cuda1, 2);
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), N);
	cfx_fini(&f);

	/* No host room at all: the adopt succeeds without a host copy. */
	{
		const struct rsd_budget none[] = { { PINNED, 0 }, { PAGEABLE, 0 } };

		cfx_sim(&f, none, 2, 2);
		out = adopt_mode(&f, CUDA1, RSD_REPLICABLE | RSD_DURABLE);
		check_mats(&f, out, pageable_cuda1, 1);
		cfx_fini(&f);
	}
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, lost_device_is_quarantined);
	ATF_TP_ADD_TC(tp, other_failures_quarantine_nothing);
	ATF_TP_ADD_TC(tp, sourced_value_loads_again);
	ATF_TP_ADD_TC(tp, work_in_flight_settles);
	ATF_TP_ADD_TC(tp, copy_of_a_copy_from_lost_device);
	ATF_TP_ADD_TC(tp, protected_copy_leaves_at_release);
	ATF_TP_ADD_TC(tp, close_and_reopen);
	ATF_TP_ADD_TC(tp, plans_avoid_the_failed_location);
	ATF_TP_ADD_TC(tp, durable_value_survives);
	ATF_TP_ADD_TC(tp, durable_output_written_back_after_its_producer);
	return atf_no_error();
}
