// SPDX-License-Identifier: MIT
/*
 * Move (reference.md §4.7, §20.6, §18.21-18.25) and the allocator sample of
 * transition reports (§4.10, §18.34) on the simulated device.
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

static void need_pinned(struct cfx *f)
{
	struct rsd_resident *probe = cfx_alloc(f, PINNED, 1);

	rsd_resident_free(probe);
}

/* §20.6: move semantics and reports. */
ATF_TC_WITHOUT_HEAD(w6_sequence);
ATF_TC_BODY(w6_sequence, tc)
{
	struct rsd_location mats[4];
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_sourced(&f, &s, PAGEABLE);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	CHECK_VERSION(&f, 5);

	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep));
	a = rsd_action_move(h, PINNED, NULL);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, N, N, NULL);
	CHECK_VERSION(&f, 6);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 1);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));

	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep));
	CHECK_REPORT(&rep, &a, true, NULL, &PINNED, N, N, R_DEST_OWNS);
	CHECK_VERSION(&f, 6);

	OK(rsd_move(f.m, h, PINNED, &PINNED, NULL, &rep));
	a = rsd_action_move(h, PINNED, &PINNED);
	CHECK_REPORT(&rep, &a, true, &PINNED, &PINNED, N, N, R_DEST_OWNS);
	CHECK_VERSION(&f, 6);

	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, h, PINNED, &PAGEABLE, NULL, &rep));
	CHECK_VERSION(&f, 6);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 1);

	OK(rsd_drop(f.m, h, PINNED, NULL));
	CHECK_VERSION(&f, 7);
	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep));
	a = rsd_action_move(h, PINNED, NULL);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, N, N, NULL);
	CHECK_VERSION(&f, 8);
	ATF_CHECK_EQ(s.loads, 2);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PAGEABLE), N);
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 1);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));
	cfx_fini(&f);
}

/* §18.22-18.23: an explicit source must be resident, checked first. */
ATF_TC_WITHOUT_HEAD(explicit_source_not_resident);
ATF_TC_BODY(explicit_source_not_resident, tc)
{
	struct rsd_snapshot *before, *after;
	struct csrc s = { 0 };
	struct rsd_handle h, g;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_sourced(&f, &s, PAGEABLE);
	g = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	before = cfx_snap(&f);
	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, h, PINNED, &PAGEABLE, NULL, NULL));
	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, h, PAGEABLE, &PAGEABLE, NULL, NULL));
	/* Even with the destination resident this is not a no-op. */
	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, g, PAGEABLE, &PINNED, NULL, NULL));
	/* And F == D not resident is no exception. */
	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, g, PINNED, &PINNED, NULL, NULL));
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	ATF_CHECK_EQ(s.loads, 0);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	CHECK_LOCATIONS(&f, PAGEABLE);
	cfx_fini(&f);
}

/* §18.21: an implicit move of an unloaded value loads once, leaves only D. */
ATF_TC_WITHOUT_HEAD(implicit_move_of_unloaded);
ATF_TC_BODY(implicit_move_of_unloaded, tc)
{
	struct rsd_location mats[4];
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_register(&f, &s, PAGEABLE, N, N, RSD_EXCLUSIVE);
	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep));
	a = rsd_action_move(h, PINNED, NULL);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, N, N, NULL);
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 1);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(cfx_reserved(&f, PAGEABLE), 0);
	CHECK_VERSION(&f, 4);
	cfx_fini(&f);
}

/* §4.7 step 3: move of an EXCLUSIVE value, and protection of its source. */
ATF_TC_WITHOUT_HEAD(move_exclusive);
ATF_TC_BODY(move_exclusive, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, N } };
	struct rsd_snapshot *before, *after;
	struct rsd_location mats[4];
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_hold *hd;
	struct rsd_handle h, full;
	struct cfx f;

	cfx_host(&f, b, 1);
	need_pinned(&f);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	/* A held source blocks the move before any copy or budget check. */
	OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	before = cfx_snap(&f);
	ERR(RSD_EINUSE, rsd_move(f.m, h, PINNED, NULL, NULL, NULL));
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	OK(rsd_hold_release(hd));
	rsd_hold_free(hd);

	OK(rsd_move(f.m, h, PINNED, NULL, NULL, &rep));
	a = rsd_action_move(h, PINNED, NULL);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, N, N, NULL);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 1);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(cfx_used(&f, PINNED), N);

	/* A full destination refuses; the source stays. */
	full = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	ERR(RSD_EBUDGET, rsd_move(f.m, full, PINNED, NULL, NULL, NULL));
	ATF_CHECK(cfx_resident(&f, full, PAGEABLE));
	ATF_CHECK_EQ(rsd_last_error()->used_bytes, N);
	/* Moving back with an explicit source. */
	OK(rsd_move(f.m, h, PAGEABLE, &PINNED, NULL, &rep));
	a = rsd_action_move(h, PAGEABLE, &PINNED);
	CHECK_REPORT(&rep, &a, false, &PINNED, &PAGEABLE, N, N, NULL);
	ATF_CHECK_EQ(cfx_used(&f, PINNED), 0);
	cfx_fini(&f);
}

/* §18.24-18.25: a move onto a resident destination removes one other replica. */
ATF_TC_WITHOUT_HEAD(move_onto_resident_destination);
ATF_TC_BODY(move_onto_resident_destination, tc)
{
	struct rsd_location c0 = cfx_cuda(0), c1 = cfx_cuda(1), mats[4];
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_hold *hd;
	struct rsd_handle h, solo;
	unsigned long copies;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, c1, NULL, NULL));
	OK(rsd_ensure(f.m, h, c0, NULL, NULL));
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	/* mats: pageable, cuda:1, cuda:0, pinned */
	copies = rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY);

	/* Implicit: the minimum other replica (pageable) goes. */
	OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	v = cfx_version(&f);
	ERR(RSD_EINUSE, rsd_move(f.m, h, c1, NULL, NULL, NULL));
	CHECK_VERSION(&f, v);
	OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	v = cfx_version(&f);
	OK(rsd_move(f.m, h, c1, NULL, NULL, &rep));
	a = rsd_action_move(h, c1, NULL);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &c1, N, N, NULL);
	CHECK_VERSION(&f, v + 1);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 3);
	ATF_CHECK(rsd_location_equal(mats[0], c1) && rsd_location_equal(mats[1], c0) &&
		  rsd_location_equal(mats[2], PINNED));
	/* Explicit: exactly the named replica goes, the others stay. */
	OK(rsd_move(f.m, h, c1, &c0, NULL, &rep));
	a = rsd_action_move(h, c1, &c0);
	CHECK_REPORT(&rep, &a, false, &c0, &c1, N, N, NULL);
	CHECK_VERSION(&f, v + 2);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 2);
	ATF_CHECK(rsd_location_equal(mats[0], c1) && rsd_location_equal(mats[1], PINNED));
	/* No copy happened. */
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY), copies);

	/* With no other replica it is a no-op with source absent. */
	solo = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	v = cfx_version(&f);
	OK(rsd_move(f.m, solo, PAGEABLE, NULL, NULL, &rep));
	a = rsd_action_move(solo, PAGEABLE, NULL);
	CHECK_REPORT(&rep, &a, true, NULL, &PAGEABLE, N, N, R_DEST_OWNS);
	CHECK_VERSION(&f, v);
	cfx_fini(&f);
}

/* §4.10, §18.34: which device a report samples, and best-effort sampling. */
ATF_TC_WITHOUT_HEAD(allocator_sample_device);
ATF_TC_BODY(allocator_sample_device, tc)
{
	struct rsd_location c0 = cfx_cuda(0), c1 = cfx_cuda(1);
	struct rsd_transition rep;
	struct rsd_handle h, g;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, c0, NULL, &rep));
	ATF_REQUIRE(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 0);
	ATF_CHECK(rep.allocator_allocated_bytes_after >= rep.allocator_allocated_bytes_before + N);
	ATF_CHECK_EQ(rep.allocator_allocated_bytes_after, rsd_simdev_allocated_bytes(f.sd, 0));
	/* Cross-GPU move samples the destination. */
	OK(rsd_move(f.m, h, c1, &c0, NULL, &rep));
	ATF_CHECK(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 1);
	/* Host destination and no GPU endpoint named: first GPU replica in insertion order. */
	OK(rsd_ensure(f.m, h, c0, NULL, NULL)); /* mats: pageable, cuda:1, cuda:0 */
	OK(rsd_drop(f.m, h, PAGEABLE, NULL));	/* mats: cuda:1, cuda:0 */
	OK(rsd_move(f.m, h, PAGEABLE, NULL, NULL, &rep));
	ATF_CHECK(rsd_location_equal(rep.source, c0)); /* canonical choice */
	ATF_CHECK(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 1); /* insertion-order sample */
	/* A GPU-to-host ensure has no sample; a drop at a GPU samples it. */
	OK(rsd_ensure(f.m, h, PINNED, NULL, &rep));
	ATF_CHECK(!rep.has_allocator);
	OK(rsd_drop(f.m, h, c1, &rep));
	ATF_CHECK(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 1);
	/* Discard samples its first GPU materialization. */
	g = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, g, c1, NULL, NULL));
	OK(rsd_ensure(f.m, g, c0, NULL, NULL));
	OK(rsd_discard(f.m, g, &rep));
	ATF_CHECK(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 1);
	/* Host-only actions never sample. */
	OK(rsd_drop(f.m, h, PINNED, &rep));
	ATF_CHECK(!rep.has_allocator);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(allocator_sample_failure);
ATF_TC_BODY(allocator_sample_failure, tc)
{
	struct rsd_location c0 = cfx_cuda(0), c1 = cfx_cuda(1);
	struct rsd_transition rep;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_METRICS, RSD_EDEVICE);
	v = cfx_version(&f);
	OK(rsd_ensure(f.m, h, c0, NULL, &rep));
	ATF_CHECK(!rep.has_allocator);
	ATF_CHECK(cfx_resident(&f, h, c0));
	CHECK_VERSION(&f, v + 2);
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_METRICS, 0);
	/* Only the "after" sample fails. */
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_METRICS, 2, RSD_EDEVICE);
	OK(rsd_ensure(f.m, h, c1, NULL, &rep));
	ATF_CHECK(!rep.has_allocator);
	ATF_CHECK(cfx_resident(&f, h, c1));
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_METRICS, 0, 0);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, w6_sequence);
	ATF_TP_ADD_TC(tp, explicit_source_not_resident);
	ATF_TP_ADD_TC(tp, implicit_move_of_unloaded);
	ATF_TP_ADD_TC(tp, move_exclusive);
	ATF_TP_ADD_TC(tp, move_onto_resident_destination);
	ATF_TP_ADD_TC(tp, allocator_sample_device);
	ATF_TP_ADD_TC(tp, allocator_sample_failure);
	return 0;
}
