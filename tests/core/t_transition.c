// SPDX-License-Identifier: MIT
/*
 * Primitive transitions (reference.md §4.6, §4.8-4.10): ensure/copy, drop
 * and discard with every report field, implicit source choice, the
 * last-copy rule, handle resolution and the order of checks (§19.5).
 * Moves are in t_move.c, source loading in t_load.c.
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

static void need_pinned(struct cfx *f)
{
	struct rsd_resident *probe = cfx_alloc(f, PINNED, 1);

	rsd_resident_free(probe);
}

/* §20.3: a load at the destination is installed directly and shares one charge. */
ATF_TC_WITHOUT_HEAD(ensure_load_at_source);
ATF_TC_BODY(ensure_load_at_source, tc)
{
	const struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, N } };
	const struct rsd_location_snapshot *l;
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	h = cfx_sourced(&f, &s, PAGEABLE);
	CHECK_VERSION(&f, 1);
	memset(&rep, 0xff, sizeof(rep));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	a = rsd_action_ensure(h, PAGEABLE);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PAGEABLE, N, N, NULL);
	ATF_CHECK(!rep.has_allocator);
	CHECK_VERSION(&f, 2);
	ATF_CHECK_EQ(s.loads, 1);
	snap = cfx_snap(&f);
	l = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(l->used_bytes, N);
	ATF_CHECK_EQ(l->reserved_bytes, 0);
	ATF_CHECK_EQ(l->peak_used_bytes, N);
	ATF_CHECK_EQ(l->peak_charged_bytes, N);
	ATF_CHECK(l->has_budget);
	ATF_CHECK_EQ(l->remaining_budget_bytes, 0);
	rsd_snapshot_free(snap);
	cfx_fini(&f);
}

/* §4.6 step 1 and copy == ensure. */
ATF_TC_WITHOUT_HEAD(ensure_noop_and_copy_alias);
ATF_TC_BODY(ensure_noop_and_copy_alias, tc)
{
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_register(&f, &s, PAGEABLE, 40, 56, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	CHECK_VERSION(&f, 3);
	memset(&rep, 0xff, sizeof(rep));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	a = rsd_action_ensure(h, PAGEABLE);
	CHECK_REPORT(&rep, &a, true, NULL, &PAGEABLE, 40, 56, R_DEST_RESIDENT);
	ATF_CHECK(!rep.has_allocator);
	CHECK_VERSION(&f, 3);

	OK(rsd_copy(f.m, h, PINNED, NULL, &rep));
	a = rsd_action_ensure(h, PINNED);
	ATF_CHECK_EQ(rep.action.kind, RSD_ACT_ENSURE);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, 40, 56, NULL);
	CHECK_VERSION(&f, 5);
	OK(rsd_copy(f.m, h, PINNED, NULL, &rep));
	CHECK_REPORT(&rep, &a, true, NULL, &PINNED, 40, 56, R_DEST_RESIDENT);
	CHECK_VERSION(&f, 5);
	ATF_CHECK_EQ(s.loads, 1);
	cfx_fini(&f);
}

/* §4.6 step 2, §18.26: EXCLUSIVE values are never replicated by ensure. */
ATF_TC_WITHOUT_HEAD(ensure_exclusive);
ATF_TC_BODY(ensure_exclusive, tc)
{
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	a = rsd_action_ensure(h, PAGEABLE);
	CHECK_REPORT(&rep, &a, true, NULL, &PAGEABLE, N, N, R_DEST_RESIDENT);
	ERR(RSD_EOWNERSHIP, rsd_ensure(f.m, h, PINNED, NULL, NULL));
	ERR(RSD_EOWNERSHIP, rsd_copy(f.m, h, PINNED, NULL, NULL));
	CHECK_VERSION(&f, 2);
	CHECK_LOCATIONS(&f, PAGEABLE);
	cfx_fini(&f);
}

/* §4.3, §4.6: a load at another location is a temporary copy source. */
ATF_TC_WITHOUT_HEAD(ensure_temporary_load);
ATF_TC_BODY(ensure_temporary_load, tc)
{
	const struct rsd_location_snapshot *l;
	struct rsd_location mats[4];
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_sourced(&f, &s, PAGEABLE);
	OK(rsd_ensure(f.m, h, PINNED, NULL, &rep));
	a = rsd_action_ensure(h, PINNED);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, N, N, NULL);
	ATF_CHECK_EQ(s.loads, 1);
	CHECK_VERSION(&f, 4);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 1);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));
	snap = cfx_snap(&f);
	l = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(l->used_bytes, 0);
	ATF_CHECK_EQ(l->reserved_bytes, 0);
	ATF_CHECK_EQ(l->peak_used_bytes, 0);
	ATF_CHECK_EQ(l->peak_charged_bytes, N);
	l = cfx_loc(snap, PINNED);
	ATF_CHECK_EQ(l->used_bytes, N);
	ATF_CHECK_EQ(l->peak_charged_bytes, N);
	rsd_snapshot_free(snap);
	/* With a replica present, nothing is loaded: the replica is the source. */
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	a = rsd_action_ensure(h, PAGEABLE);
	CHECK_REPORT(&rep, &a, false, &PINNED, &PAGEABLE, N, N, NULL);
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 2);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));
	ATF_CHECK(rsd_location_equal(mats[1], PAGEABLE));
	cfx_fini(&f);
}

/* §4.2, §18.32: canonical order, never insertion order. */
ATF_TC_WITHOUT_HEAD(implicit_source_canonical_order);
ATF_TC_BODY(implicit_source_canonical_order, tc)
{
	struct rsd_location c0 = cfx_cuda(0), c1 = cfx_cuda(1), mats[4];
	struct rsd_transition rep;
	struct rsd_resident *r;
	struct rsd_action a;
	struct rsd_handle h;
	uint64_t n = N;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	OK(rsd_resident_alloc(f.m, &rsd_resident_type, c1, 1, &n, NULL, 0, &r));
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &h));
	OK(rsd_ensure(f.m, h, PINNED, NULL, &rep));
	ATF_CHECK(rsd_location_equal(rep.source, c1));
	OK(rsd_ensure(f.m, h, c0, NULL, &rep));
	ATF_CHECK(rep.has_source && rsd_location_equal(rep.source, PINNED));
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 3);
	ATF_CHECK(rsd_location_equal(mats[0], c1) && rsd_location_equal(mats[1], PINNED) &&
		  rsd_location_equal(mats[2], c0));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	a = rsd_action_ensure(h, PAGEABLE);
	CHECK_REPORT(&rep, &a, false, &PINNED, &PAGEABLE, N, N, NULL);
	/* A GPU-to-host ensure has no allocator sample (only its location counts). */
	OK(rsd_drop(f.m, h, PINNED, NULL));
	OK(rsd_drop(f.m, h, PAGEABLE, NULL));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	CHECK_REPORT(&rep, &a, false, &c0, &PAGEABLE, N, N, NULL);
	ATF_CHECK(!rep.has_allocator);
	cfx_fini(&f);
}

/* §4.6: reading a protected replica is allowed. */
ATF_TC_WITHOUT_HEAD(ensure_reads_protected_replica);
ATF_TC_BODY(ensure_reads_protected_replica, tc)
{
	struct rsd_transition rep;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	OK(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	OK(rsd_ensure(f.m, h, PINNED, NULL, &rep));
	ATF_CHECK(rsd_location_equal(rep.source, PAGEABLE));
	ATF_CHECK(cfx_resident(&f, h, PAGEABLE) && cfx_resident(&f, h, PINNED));
	OK(rsd_lease_release(l, 0));
	OK(rsd_hold_release(hd));
	rsd_lease_free(l);
	rsd_hold_free(hd);
	cfx_fini(&f);
}

/* §4.8 step 1, §18.29: a no-op drop never records its location. */
ATF_TC_WITHOUT_HEAD(drop_noop_unrecorded);
ATF_TC_BODY(drop_noop_unrecorded, tc)
{
	struct rsd_location c0 = cfx_cuda(0);
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	memset(&rep, 0xff, sizeof(rep));
	OK(rsd_drop(f.m, h, PINNED, &rep));
	a = rsd_action_drop(h, PINNED);
	CHECK_REPORT(&rep, &a, true, &PINNED, NULL, N, N, R_ABSENT);
	OK(rsd_drop(f.m, h, c0, &rep));
	a = rsd_action_drop(h, c0);
	CHECK_REPORT(&rep, &a, true, &c0, NULL, N, N, R_ABSENT);
	CHECK_VERSION(&f, 2);
	CHECK_LOCATIONS(&f, PAGEABLE);
	cfx_fini(&f);
}

/* §4.8, §18.27 (§20.7): protection is checked before the last-copy rule. */
ATF_TC_WITHOUT_HEAD(drop_last_copy_rule);
ATF_TC_BODY(drop_last_copy_rule, tc)
{
	struct rsd_transition rep;
	struct rsd_hold *hd;
	struct rsd_action a;
	struct rsd_handle h, r2;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	ERR(RSD_EINUSE, rsd_drop(f.m, h, PAGEABLE, NULL));
	OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	ERR(RSD_EOWNERSHIP, rsd_drop(f.m, h, PAGEABLE, NULL));
	ATF_CHECK(cfx_resident(&f, h, PAGEABLE));
	/* A REPLICABLE preserve-only value may lose all but its last replica. */
	r2 = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, r2, PINNED, NULL, NULL));
	{
		uint64_t v = cfx_version(&f);

		OK(rsd_drop(f.m, r2, PAGEABLE, &rep));
		a = rsd_action_drop(r2, PAGEABLE);
		CHECK_REPORT(&rep, &a, false, &PAGEABLE, NULL, N, N, NULL);
		CHECK_VERSION(&f, v + 1);
	}
	ERR(RSD_EOWNERSHIP, rsd_drop(f.m, r2, PINNED, NULL));
	ATF_CHECK(cfx_resident(&f, r2, PINNED));
	cfx_fini(&f);
}

/* §18.28: a sourced value may lose its last copy and is reloaded later. */
ATF_TC_WITHOUT_HEAD(drop_last_copy_of_sourced);
ATF_TC_BODY(drop_last_copy_of_sourced, tc)
{
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	struct rsd_action a;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	OK(rsd_drop(f.m, h, PAGEABLE, &rep));
	a = rsd_action_drop(h, PAGEABLE);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, NULL, N, N, NULL);
	CHECK_VERSION(&f, 4);
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_val(snap, h)->has_source);
	ATF_CHECK(rsd_location_equal(cfx_val(snap, h)->source_location, PAGEABLE));
	ATF_CHECK_EQ(cfx_val(snap, h)->nmaterializations, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->used_bytes, 0);
	rsd_snapshot_free(snap);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 2);
	ATF_CHECK(cfx_resident(&f, h, PAGEABLE));
	cfx_fini(&f);
}

/* §4.9, §18.30-18.31. */
ATF_TC_WITHOUT_HEAD(discard_reports_and_stale_handle);
ATF_TC_BODY(discard_reports_and_stale_handle, tc)
{
	struct csrc s = { 0 };
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	const struct rsd_value_snapshot *v;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_action a;
	struct rsd_handle h, g;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_register(&f, &s, PAGEABLE, 24, 32, RSD_REPLICABLE);
	g = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	CHECK_VERSION(&f, 3);
	memset(&rep, 0xff, sizeof(rep));
	OK(rsd_discard(f.m, h, &rep));
	a = rsd_action_discard(h);
	CHECK_REPORT(&rep, &a, false, NULL, NULL, 24, 32, NULL);
	ATF_CHECK(!rep.has_allocator);
	CHECK_VERSION(&f, 4);
	ATF_CHECK_EQ(s.releases, 1);
	ATF_CHECK_EQ(s.loads, 0);

	snap = cfx_snap(&f);
	ATF_REQUIRE_EQ(snap->nvalues, 2);
	v = &snap->values[0];
	ATF_CHECK(rsd_handle_equal(v->handle, h));
	ATF_CHECK(v->discarded && !v->has_source && !v->has_source_location);
	ATF_CHECK_EQ(v->nmaterializations, 0);
	ATF_CHECK_EQ(v->spec.logical_nbytes, 24);
	rsd_snapshot_free(snap);

	/* Every later use of the handle is stale. */
	ERR(RSD_EHANDLE, rsd_discard(f.m, h, NULL));
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "discarded"), "%s",
		      rsd_last_error()->message);
	ERR(RSD_EHANDLE, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ERR(RSD_EHANDLE, rsd_move(f.m, h, PAGEABLE, NULL, NULL, NULL));
	ERR(RSD_EHANDLE, rsd_drop(f.m, h, PAGEABLE, NULL));
	ERR(RSD_EHANDLE, rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	ERR(RSD_EHANDLE, rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	CHECK_VERSION(&f, 4);
	ATF_CHECK_EQ(s.releases, 1);

	/* A discard with one materialization: removal + mark. */
	OK(rsd_discard(f.m, g, &rep));
	a = rsd_action_discard(g);
	CHECK_REPORT(&rep, &a, false, NULL, NULL, N, N, NULL);
	CHECK_VERSION(&f, 6);
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), 0);
	cfx_fini(&f);
	ATF_CHECK_EQ(s.releases, 1);
}

/* §4.9 step 1: discard is all-or-nothing over its materializations. */
ATF_TC_WITHOUT_HEAD(discard_blocked_by_protection);
ATF_TC_BODY(discard_blocked_by_protection, tc)
{
	struct rsd_snapshot *before, *after;
	struct rsd_location mats[4];
	struct rsd_hold *hd;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	OK(rsd_hold(f.m, &h, 1, PINNED, &hd)); /* the second in insertion order */
	before = cfx_snap(&f);
	ERR(RSD_EINUSE, rsd_discard(f.m, h, NULL));
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	ATF_CHECK_EQ(cfx_mats(&f, h, mats, 4), 2);
	OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	{
		uint64_t v = cfx_version(&f);

		OK(rsd_discard(f.m, h, NULL));
		CHECK_VERSION(&f, v + 3);
	}
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	cfx_fini(&f);
}

/* §2.5: foreign, unknown and forged handles. */
ATF_TC_WITHOUT_HEAD(handle_resolution);
ATF_TC_BODY(handle_resolution, tc)
{
	struct rsd_handle h, forged, unknown, foreign, zero;
	struct rsd_lease *l = NULL;
	struct cfx f, g;

	cfx_host(&f, NULL, 0);
	cfx_host(&g, NULL, 0);
	ATF_CHECK(rsd_manager_id(f.m) != rsd_manager_id(g.m));
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	foreign = cfx_adopt(&g, PAGEABLE, N, RSD_REPLICABLE);
	forged = h;
	forged.type = &cfx_base_type;
	ATF_CHECK(!rsd_handle_equal(h, forged));
	unknown = h;
	unknown.id = h.id + 1000000;
	zero = h;
	zero.manager_id = 0;

	ERR(RSD_EHANDLE, rsd_ensure(f.m, forged, PAGEABLE, NULL, NULL));
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "unknown"), "%s",
		      rsd_last_error()->message);
	ERR(RSD_EHANDLE, rsd_drop(f.m, unknown, PAGEABLE, NULL));
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "unknown"), "%s",
		      rsd_last_error()->message);
	ERR(RSD_EHANDLE, rsd_discard(f.m, foreign, NULL));
	ERR(RSD_EHANDLE, rsd_move(f.m, foreign, PAGEABLE, NULL, NULL, NULL));
	ERR(RSD_EHANDLE, rsd_acquire(f.m, &foreign, 1, PAGEABLE, NULL, &l));
	/* A zero manager id is malformed, not foreign: a caller's bug. */
	ERR(RSD_EINVAL, rsd_discard(f.m, zero, NULL));
	/* The other manager still knows its own handle, this one its own. */
	OK(rsd_ensure(g.m, foreign, PAGEABLE, NULL, NULL));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	CHECK_VERSION(&f, 2);
	CHECK_VERSION(&g, 2);
	ATF_CHECK(l == NULL);
	cfx_fini(&g);
	cfx_fini(&f);
}

/* §4.1, §19.5: handle -> locations -> stream -> no-op. */
ATF_TC_WITHOUT_HEAD(check_order);
ATF_TC_BODY(check_order, tc)
{
	struct rsd_location c5 = cfx_cuda(5), c0 = cfx_cuda(0), c1 = cfx_cuda(1);
	int notastream;
	void *st0, *st1;
	struct rsd_handle h, forged;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	forged = h;
	forged.id += 999;
	OK(rsd_simdev_stream_create(f.sd, 0, &st0));
	OK(rsd_simdev_stream_create(f.sd, 1, &st1));
	/* Handle before location. */
	ERR(RSD_EHANDLE, rsd_ensure(f.m, forged, c5, NULL, NULL));
	ERR(RSD_EHANDLE, rsd_move(f.m, forged, PAGEABLE, &c5, NULL, NULL));
	/* Location before stream: destination first, then the explicit source. */
	ERR(RSD_EINVAL, rsd_ensure(f.m, h, c5, &notastream, NULL));
	ERR(RSD_EINVAL, rsd_move(f.m, h, c5, &PAGEABLE, &notastream, NULL));
	ERR(RSD_EINVAL, rsd_move(f.m, h, PAGEABLE, &c5, &notastream, NULL));
	/* Stream before no-op: h is already resident at pageable. */
	ERR(RSD_EINVAL, rsd_ensure(f.m, h, PAGEABLE, st0, NULL));
	ERR(RSD_EINVAL, rsd_move(f.m, h, PAGEABLE, NULL, st0, NULL));
	ERR(RSD_ETYPE, rsd_ensure(f.m, h, PAGEABLE, &notastream, NULL));
	ERR(RSD_ETYPE, rsd_ensure(f.m, h, c0, &notastream, NULL));
	ERR(RSD_EINVAL, rsd_ensure(f.m, h, c0, st1, NULL));
	ERR(RSD_EINVAL, rsd_copy(f.m, h, c1, st0, NULL));
	CHECK_VERSION(&f, 2);
	CHECK_LOCATIONS(&f, PAGEABLE);
	/* A matching stream works, and a no-op still validates it. */
	OK(rsd_ensure(f.m, h, c1, st1, NULL));
	OK(rsd_ensure(f.m, h, c1, st1, NULL));
	ERR(RSD_EINVAL, rsd_ensure(f.m, h, c1, st0, NULL));
	CHECK_VERSION(&f, 4);
	rsd_simdev_stream_destroy(f.sd, st0);
	rsd_simdev_stream_destroy(f.sd, st1);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, ensure_load_at_source);
	ATF_TP_ADD_TC(tp, ensure_noop_and_copy_alias);
	ATF_TP_ADD_TC(tp, ensure_exclusive);
	ATF_TP_ADD_TC(tp, ensure_temporary_load);
	ATF_TP_ADD_TC(tp, implicit_source_canonical_order);
	ATF_TP_ADD_TC(tp, ensure_reads_protected_replica);
	ATF_TP_ADD_TC(tp, drop_noop_unrecorded);
	ATF_TP_ADD_TC(tp, drop_last_copy_rule);
	ATF_TP_ADD_TC(tp, drop_last_copy_of_sourced);
	ATF_TP_ADD_TC(tp, discard_reports_and_stale_handle);
	ATF_TP_ADD_TC(tp, discard_blocked_by_protection);
	ATF_TP_ADD_TC(tp, handle_resolution);
	ATF_TP_ADD_TC(tp, check_order);
	return 0;
}
