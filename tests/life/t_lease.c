// SPDX-License-Identifier: MIT
/*
 * Leases (reference.md §8.1-§8.5, §8.9; edge cases 35-42): acquisition
 * and its argument rules, the borrowed-value lookup, the GPU release into
 * a pending lease and its reaping, the state_version arithmetic, where
 * reaping happens (and where it must not: reserve, snapshot and
 * state_version are lock-free or accounting-only in librsd, see
 * Documentation/design.md). Failure paths and abandonment: t_lease_fault.c.
 *
 * The simulated device stands in for CUDA: two devices, events that
 * complete only when the test completes their stream.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "lfx.h"

/* ---- acquisition -------------------------------------------------------- */

ATF_TC_WITHOUT_HEAD(acquire_dedup_order_counts);
ATF_TC_BODY(acquire_dedup_order_counts, tc)
{
	struct rsd_lease *l = NULL, *l2 = NULL;
	struct rsd_handle a, b, set[3], got;
	void *s;
	uint64_t v;

	lfx_setup(false);
	s = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b = lfx_put(lfx_cuda(0), 128, NULL);
	set[0] = a;
	set[1] = b;
	set[2] = a;
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, set, 3, lfx_cuda(0), s, &l));
	CHECK_VER(v + 1);
	ATF_CHECK(rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_lease_count(l), 2);
	ATF_CHECK(rsd_location_equal(rsd_lease_location(l), lfx_cuda(0)));
	RSD_REQUIRE_OK(rsd_lease_handle_at(l, 0, &got));
	ATF_CHECK(rsd_handle_equal(got, a));
	RSD_REQUIRE_OK(rsd_lease_handle_at(l, 1, &got));
	ATF_CHECK(rsd_handle_equal(got, b));
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_lease_handle_at(l, 2, &got));
	CHECK_MAT(a, lfx_cuda(0), 1, 0, 0);
	CHECK_MAT(b, lfx_cuda(0), 1, 0, 0);
	CHECK_LOC(lfx_cuda(0), 2, 0, 0);

	/* A second lease on b: covered twice, the location sums it. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &b, 1, lfx_cuda(0), s, &l2));
	CHECK_VER(v + 2);
	CHECK_MAT(b, lfx_cuda(0), 2, 0, 0);
	CHECK_LOC(lfx_cuda(0), 3, 0, 0);

	ATF_CHECK_EQ(RELEASE_WAIT(l, s), 0);
	ATF_CHECK_EQ(RELEASE_WAIT(l2, s), 0);
	CHECK_VER(v + 6);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	rsd_lease_free(l);
	rsd_lease_free(l2);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(acquire_dedup_host);
ATF_TC_BODY(acquire_dedup_host, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a, b, set[4], got;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(RSD_LOC_PAGEABLE_HOST, 8, NULL);
	b = lfx_put(RSD_LOC_PAGEABLE_HOST, 16, NULL);
	set[0] = b;
	set[1] = a;
	set[2] = b;
	set[3] = a;
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, set, 4, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(rsd_lease_count(l), 2);
	RSD_REQUIRE_OK(rsd_lease_handle_at(l, 0, &got));
	ATF_CHECK(rsd_handle_equal(got, b));
	RSD_REQUIRE_OK(rsd_lease_handle_at(l, 1, &got));
	ATF_CHECK(rsd_handle_equal(got, a));
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 2, 0, 0);
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 2);
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	rsd_lease_free(l);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(acquire_not_resident_is_atomic);
ATF_TC_BODY(acquire_not_resident_is_atomic, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a, b, c, set[3];
	void *s;
	uint64_t v;

	lfx_setup(false);
	s = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	c = lfx_put(lfx_cuda(0), 32, NULL);
	b = lfx_put(lfx_cuda(1), 64, NULL);
	set[0] = a;
	set[1] = c;
	set[2] = b;
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_acquire(lfx_m, set, 3, lfx_cuda(0), s, &l));
	ATF_CHECK(lfx_msg_has("cuda:0"));
	ATF_CHECK(l == NULL);
	CHECK_VER(v);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_MAT(c, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);

	/* A discarded or foreign handle fails resolution, also atomically. */
	RSD_REQUIRE_OK(rsd_discard(lfx_m, b, NULL));
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_acquire(lfx_m, set, 3, lfx_cuda(0), s, &l));
	ATF_CHECK(lfx_msg_has("discarded"));
	set[2] = a;
	set[2].manager_id++;
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_acquire(lfx_m, set, 3, lfx_cuda(0), s, &l));
	ATF_CHECK(l == NULL);
	CHECK_VER(v);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(acquire_empty_and_null);
ATF_TC_BODY(acquire_empty_and_null, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(RSD_LOC_PAGEABLE_HOST, 8, NULL);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 0, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	ATF_CHECK(lfx_msg_has("at least one handle"));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_acquire(lfx_m, NULL, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_acquire(lfx_m, &a, 1, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_acquire(NULL, &a, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	ATF_CHECK(l == NULL);
	CHECK_VER(v);
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(acquire_stream_rules);
ATF_TC_BODY(acquire_stream_rules, tc)
{
	struct rsd_location locs[8];
	struct rsd_lease *l = NULL;
	struct rsd_handle a, p, b1;
	void *s0, *s1;
	int not_a_stream = 0;
	size_t nlocs;
	uint64_t v;

	lfx_setup(false);
	s0 = lfx_stream(0);
	s1 = lfx_stream(1);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b1 = lfx_put(lfx_cuda(1), 64, NULL);
	p = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	nlocs = rsd_manager_locations(lfx_m, locs, 8);
	v = lfx_ver();

	/* §8.2 step 4: a CUDA lease needs a consumer stream. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), NULL, &l));
	/* ... and that check precedes the residency check (step 7). */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &b1, 1, lfx_cuda(0), NULL, &l));
	/* Host lease with a (valid) stream. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, s0, &l));
	ATF_CHECK(lfx_msg_has("CUDA"));
	/* Host lease with something that is not a stream: the type check
	 * comes first (§4.1 step 5 order). */
	RSD_CHECK_ERR(RSD_ETYPE,
		      rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, &not_a_stream, &l));
	/* Stream of another device. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s1, &l));
	ATF_CHECK(lfx_msg_has("does not match"));
	/* Stream errors precede the residency check too. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &b1, 1, lfx_cuda(0), s1, &l));
	/* Not a stream at all. */
	RSD_CHECK_ERR(RSD_ETYPE, rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), &not_a_stream, &l));
	/* A location the runtime does not have: not recorded. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 1, lfx_cuda(2), s0, &l));
	ATF_CHECK(l == NULL);
	CHECK_VER(v);
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, locs, 8), nlocs);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);

	/* The right stream works. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &b1, 1, lfx_cuda(1), s1, &l));
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(RELEASE_WAIT(l, s1), 0);
	rsd_lease_free(l);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(add_consumer_stream_rules);
ATF_TC_BODY(add_consumer_stream_rules, tc)
{
	struct rsd_lease *hl = NULL, *l = NULL;
	struct rsd_handle a, p;
	void *s0, *s0b, *s1;
	int not_a_stream = 0;
	unsigned long rec0;
	uint64_t v;

	lfx_setup(false);
	s0 = lfx_stream(0);
	s0b = lfx_stream(0);
	s1 = lfx_stream(1);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	p = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);

	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &hl));
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINVAL, rsd_lease_add_consumer_stream(hl, s0));

	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s0, &l));
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINVAL, rsd_lease_add_consumer_stream(l, s1));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_add_consumer_stream(l, &not_a_stream));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_add_consumer_stream(l, NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_add_consumer_stream(NULL, s0));
	/* The identical stream is registered once. */
	RSD_CHECK_OK(rsd_lease_add_consumer_stream(l, s0));
	RSD_CHECK_OK(rsd_lease_add_consumer_stream(l, s0b));
	RSD_CHECK_OK(rsd_lease_add_consumer_stream(l, s0b));
	CHECK_VER(v); /* add_consumer_stream is not a state change */

	rec0 = rsd_simdev_calls(lfx_sd, RSD_SIMDEV_EVENT_RECORD);
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	ATF_CHECK_EQ(rsd_simdev_calls(lfx_sd, RSD_SIMDEV_EVENT_RECORD) - rec0, 2);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s0), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s0b), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s1), 0);
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_add_consumer_stream(l, s0));
	RSD_CHECK_OK(rsd_lease_release(hl, 0));
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_add_consumer_stream(hl, s0));
	rsd_lease_free(l);
	rsd_lease_free(hl);
	rsd_simdev_complete_all(lfx_sd);
	lfx_teardown();
}

/* ---- the lease object ---------------------------------------------------- */

ATF_TC_WITHOUT_HEAD(lookup_and_release_twice);
ATF_TC_BODY(lookup_and_release_twice, tc)
{
	static const struct rsd_type other = { "other", &rsd_resident_type };
	struct rsd_resident *ra = NULL, *rb = NULL;
	const struct rsd_resident *got = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_handle a, b, c, set[2], forged, h;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(RSD_LOC_PAGEABLE_HOST, 24, &ra);
	b = lfx_put(RSD_LOC_PAGEABLE_HOST, 48, &rb);
	c = lfx_put(RSD_LOC_PAGEABLE_HOST, 8, NULL);
	set[0] = a;
	set[1] = b;
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, set, 2, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	v = lfx_ver();

	/* The exact managed value: no copy, no proxy. */
	RSD_REQUIRE_OK(rsd_lease_value(l, a, &got));
	ATF_CHECK(got == ra);
	RSD_REQUIRE_OK(rsd_lease_value(l, b, &got));
	ATF_CHECK(got == rb);
	ATF_CHECK_EQ(rsd_resident_nbytes(got), 48);
	got = NULL;
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_lease_value(l, c, &got));
	forged = a;
	forged.type = &other; /* same ids, another type: not the issued handle */
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_lease_value(l, forged, &got));
	forged.type = NULL; /* no type at all: malformed */
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_value(l, forged, &got));
	ATF_CHECK(got == NULL);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_value(l, a, NULL));
	CHECK_VER(v); /* lookups change nothing */

	RSD_CHECK_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 1);
	ATF_CHECK(!rsd_lease_active(l));
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	RSD_CHECK_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	CHECK_VER(v + 1);
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_value(l, a, &got));
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_value(l, c, &got));
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_handle_at(l, 0, &h));
	ATF_CHECK(got == NULL);
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_release(NULL, 0));
	rsd_lease_free(l);
	rsd_lease_free(NULL);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* ---- GPU release, pending leases, reaping --------------------------------- */

ATF_TC_WITHOUT_HEAD(gpu_release_pending_blocks_drop);
ATF_TC_BODY(gpu_release_pending_blocks_drop, tc)
{
	struct rsd_action drop;
	struct rsd_plan plan = { .name = "drop-a" };
	struct rsd_explanation *ex = NULL;
	struct rsd_snapshot *s;
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	/* A second copy so that dropping cuda:0 is not a last-copy drop. */
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l));
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 1);
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	CHECK_LOC(lfx_cuda(0), 0, 0, 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st), 1);

	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	CHECK_VER(v + 1);
	drop = rsd_action_drop(a, lfx_cuda(0));
	plan.reclaim = &drop;
	plan.nreclaim = 1;
	RSD_REQUIRE_OK(rsd_explain(lfx_m, &plan, NULL, &ex));
	ATF_CHECK(!ex->feasible);
	rsd_explanation_free(ex);

	/* The consumer finishes: lock-free readers still show the pending
	 * lease (no reaping outside the writer path), explain sees the
	 * completed events already, the drop reaps first and then succeeds. */
	rsd_simdev_stream_complete(lfx_sd, st);
	CHECK_VER(v + 1);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	RSD_REQUIRE_OK(rsd_explain(lfx_m, &plan, NULL, &ex));
	ATF_CHECK(ex->feasible);
	rsd_explanation_free(ex);
	CHECK_VER(v + 1);
	RSD_CHECK_OK(rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	CHECK_VER(v + 3); /* +1 reap, +1 removal */
	s = lfx_snap();
	ATF_CHECK(lfx_mat_in(s, a, lfx_cuda(0)) == NULL);
	ATF_CHECK(lfx_mat_in(s, a, RSD_LOC_PAGEABLE_HOST) != NULL);
	ATF_CHECK_EQ(lfx_loc_in(s, lfx_cuda(0))->value_count, 0);
	ATF_CHECK_EQ(lfx_loc_in(s, lfx_cuda(0))->pending_event_count, 0);
	rsd_snapshot_free(s);
	rsd_lease_free(l);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(two_streams_count_once);
ATF_TC_BODY(two_streams_count_once, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a, b, set[2];
	void *s1, *s2;
	uint64_t v;

	lfx_setup(false);
	s1 = lfx_stream(0);
	s2 = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b = lfx_put(lfx_cuda(0), 64, NULL);
	set[0] = a;
	set[1] = b;
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, set, 2, lfx_cuda(0), s1, &l));
	RSD_REQUIRE_OK(rsd_lease_add_consumer_stream(l, s2));
	RSD_REQUIRE_OK(rsd_lease_add_consumer_stream(l, s2));
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 1);
	/* One lease, two events: counted once per covered materialization. */
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	CHECK_MAT(b, lfx_cuda(0), 0, 0, 1);
	CHECK_LOC(lfx_cuda(0), 0, 0, 2);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s1), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s2), 1);

	/* All events must complete before the lease is reaped. */
	rsd_simdev_stream_complete(lfx_sd, s1);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 1);
	CHECK_LOC(lfx_cuda(0), 0, 0, 2);
	rsd_simdev_stream_complete(lfx_sd, s2);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 2);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 2);
	rsd_lease_free(l);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(release_versions);
ATF_TC_BODY(release_versions, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *s;
	uint64_t v;

	lfx_setup(false);
	s = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	CHECK_VER(v + 1);
	/* Stream busy: waiting blocks until it has run. active -> pending ->
	 * gone. */
	ATF_REQUIRE_EQ(RELEASE_WAIT(l, s), 0);
	CHECK_VER(v + 3);
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s), 0);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 3);
	rsd_lease_free(l);
	lfx_teardown();

	/* Host leases: +1 on release, with or without the wait flag. */
	lfx_setup(true);
	a = lfx_put(RSD_LOC_PINNED_HOST, 64, NULL);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, RSD_LOC_PINNED_HOST, NULL, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 2);
	rsd_lease_free(l);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, RSD_LOC_PINNED_HOST, NULL, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	CHECK_VER(v + 4);
	CHECK_LOC(RSD_LOC_PINNED_HOST, 0, 0, 0);
	rsd_lease_free(l);
	lfx_teardown();
}

/*
 * Reap points (§8.5 as Documentation/design.md amends it): every writer call
 * (rsd_manager_reap, transitions, acquire, hold) folds completed leases in
 * first; reserve, releases, lookups, snapshots and state_version reads do
 * not.
 */
ATF_TC_WITHOUT_HEAD(reap_points);
ATF_TC_BODY(reap_points, tc)
{
	const struct rsd_resident *got;
	struct rsd_reservation *r = NULL;
	struct rsd_lease *l, *act = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_snapshot *s;
	struct rsd_handle a;
	void *st, *st2;
	uint64_t v;

	lfx_setup(false);
	st = lfx_stream(0);
	st2 = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st2, &act));

	/* Not reaping: snapshot, state_version, reserve, releases, lookups. */
	l = lfx_pending_lease(a, st);
	rsd_simdev_stream_complete(lfx_sd, st);
	v = lfx_ver();
	s = lfx_snap();
	ATF_CHECK_EQ(s->state_version, v);
	ATF_CHECK_EQ(lfx_mat_in(s, a, lfx_cuda(0))->pending_event_count, 1);
	rsd_snapshot_free(s);
	CHECK_VER(v);
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, lfx_cuda(0), 0, "no-reap", &r));
	CHECK_VER(v + 1);
	CHECK_MAT(a, lfx_cuda(0), 1, 0, 1);
	RSD_REQUIRE_OK(rsd_lease_value(act, a, &got));
	RSD_REQUIRE_OK(rsd_reservation_release(r));
	CHECK_VER(v + 2);
	CHECK_MAT(a, lfx_cuda(0), 1, 0, 1);
	rsd_reservation_free(r);
	/* Releasing another lease does not reap either. */
	ATF_REQUIRE_EQ(RELEASE_WAIT(act, st2), 0);
	CHECK_VER(v + 4);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	rsd_lease_free(act);

	/* rsd_manager_reap: +1 for the one lease. */
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 5);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	rsd_lease_free(l);

	/* A transition (here a no-op ensure) reaps in its prologue. */
	l = lfx_pending_lease(a, st);
	rsd_simdev_stream_complete(lfx_sd, st);
	v = lfx_ver();
	RSD_CHECK_OK(rsd_ensure(lfx_m, a, lfx_cuda(0), st, NULL));
	CHECK_VER(v + 1);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	rsd_lease_free(l);

	/* acquire reaps, then acquires. */
	l = lfx_pending_lease(a, st);
	rsd_simdev_stream_complete(lfx_sd, st);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &act));
	CHECK_VER(v + 2);
	CHECK_MAT(a, lfx_cuda(0), 1, 0, 0);
	ATF_REQUIRE_EQ(RELEASE_WAIT(act, st), 0);
	rsd_lease_free(act);
	rsd_lease_free(l);

	/* hold reaps, then holds. */
	l = lfx_pending_lease(a, st);
	rsd_simdev_stream_complete(lfx_sd, st);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, lfx_cuda(0), &hd));
	CHECK_VER(v + 2);
	CHECK_MAT(a, lfx_cuda(0), 0, 1, 0);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	rsd_lease_free(l);

	/* An incomplete lease survives every reap point. */
	l = lfx_pending_lease(a, st);
	v = lfx_ver();
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	RSD_CHECK_OK(rsd_ensure(lfx_m, a, lfx_cuda(0), NULL, NULL));
	CHECK_VER(v);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	rsd_simdev_stream_complete(lfx_sd, st);
	rsd_lease_free(l);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/*
 * A released lease protects its value until a reap sees its events
 * complete; explain treats a pending lease whose events all completed as
 * gone (§18.46). Both read the published pending table: with n leases of
 * stream a completed and reaped, the one lease of stream b must still be
 * in it, whether the reap cleared a few slots (n = 5) or the table was
 * rebuilt without the holes (n = 40), and leases released after the
 * rebuild are found there too.
 */
static void lease_n(struct rsd_handle h, void *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		rsd_lease_free(lfx_pending_lease(h, s));
}

ATF_TC_WITHOUT_HEAD(pending_table_reaps);
ATF_TC_BODY(pending_table_reaps, tc)
{
	static const unsigned ns[] = { 5, 40 };
	struct rsd_location c0 = lfx_cuda(0);
	struct rsd_handle h;
	void *a, *b;

	lfx_setup(false);
	a = lfx_stream(0);
	b = lfx_stream(0);
	h = lfx_put(RSD_LOC_PAGEABLE_HOST, 4096, NULL);
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, h, c0, NULL, NULL));
	for (unsigned k = 0; k < 2; k++) {
		lease_n(h, b, 1);
		lease_n(h, a, ns[k]);
		CHECK_MAT(h, c0, 0, 0, ns[k] + 1);
		ATF_CHECK(!lfx_drop_feasible(h, c0));
		rsd_simdev_stream_complete(lfx_sd, a);
		RSD_REQUIRE_OK(rsd_manager_reap(lfx_m));
		CHECK_MAT(h, c0, 0, 0, 1);
		ATF_CHECK(!lfx_drop_feasible(h, c0)); /* b's lease runs */
		/* One more on a after the reap: found wherever it went. */
		lease_n(h, a, 1);
		rsd_simdev_stream_complete(lfx_sd, b);
		ATF_CHECK(!lfx_drop_feasible(h, c0)); /* a's new lease runs */
		rsd_simdev_stream_complete(lfx_sd, a);
		ATF_CHECK(lfx_drop_feasible(h, c0)); /* both complete, not reaped */
		CHECK_MAT(h, c0, 0, 0, 2);
		RSD_REQUIRE_OK(rsd_manager_reap(lfx_m));
		CHECK_MAT(h, c0, 0, 0, 0);
		ATF_CHECK(lfx_drop_feasible(h, c0));
	}
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, acquire_dedup_order_counts);
	ATF_TP_ADD_TC(tp, pending_table_reaps);
	ATF_TP_ADD_TC(tp, acquire_dedup_host);
	ATF_TP_ADD_TC(tp, acquire_not_resident_is_atomic);
	ATF_TP_ADD_TC(tp, acquire_empty_and_null);
	ATF_TP_ADD_TC(tp, acquire_stream_rules);
	ATF_TP_ADD_TC(tp, add_consumer_stream_rules);
	ATF_TP_ADD_TC(tp, lookup_and_release_twice);
	ATF_TP_ADD_TC(tp, gpu_release_pending_blocks_drop);
	ATF_TP_ADD_TC(tp, two_streams_count_once);
	ATF_TP_ADD_TC(tp, release_versions);
	ATF_TP_ADD_TC(tp, reap_points);
	return atf_no_error();
}
