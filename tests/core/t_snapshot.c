// SPDX-License-Identifier: MIT
/*
 * Snapshots (reference.md §14): every field, every order, the §14.6
 * invariants (cfx_snap checks them on every snapshot taken in these
 * tests), peaks that never decrease, protection counts as sums, and the
 * lock-free deviation described in Documentation/design.md (reads do not reap).
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

static void need_pinned(struct cfx *f)
{
	struct rsd_resident *probe = cfx_alloc(f, PINNED, 1);

	rsd_resident_free(probe);
}

/* §14.1-14.3: value order = registration order (discarded included),
 * materialization order = install order. */
ATF_TC_WITHOUT_HEAD(value_and_materialization_order);
ATF_TC_BODY(value_and_materialization_order, tc)
{
	struct csrc s = { 0 };
	const struct rsd_value_snapshot *v;
	struct rsd_snapshot *snap;
	struct rsd_handle a, h, b;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	h = cfx_register(&f, &s, PINNED, 32, 48, RSD_EXCLUSIVE);
	b = cfx_adopt(&f, PAGEABLE, 16, RSD_EXCLUSIVE);
	OK(rsd_discard(f.m, h, NULL));
	OK(rsd_ensure(f.m, a, PINNED, NULL, NULL));
	OK(rsd_drop(f.m, a, PAGEABLE, NULL));
	OK(rsd_ensure(f.m, a, PAGEABLE, NULL, NULL)); /* re-added: moves to the end */

	snap = cfx_snap(&f);
	ATF_REQUIRE_EQ(snap->nvalues, 3);
	ATF_CHECK(rsd_handle_equal(snap->values[0].handle, a));
	ATF_CHECK(rsd_handle_equal(snap->values[1].handle, h));
	ATF_CHECK(rsd_handle_equal(snap->values[2].handle, b));
	v = &snap->values[0];
	ATF_REQUIRE_EQ(v->nmaterializations, 2);
	ATF_CHECK(rsd_location_equal(v->materializations[0].location, PINNED));
	ATF_CHECK(rsd_location_equal(v->materializations[1].location, PAGEABLE));
	ATF_CHECK(!v->discarded && !v->has_source && !v->has_source_location);
	v = &snap->values[1];
	ATF_CHECK(v->discarded && !v->has_source && !v->has_source_location);
	ATF_CHECK_EQ(v->nmaterializations, 0);
	ATF_CHECK(v->spec.type == &rsd_resident_type);
	ATF_CHECK_EQ(v->spec.logical_nbytes, 32);
	ATF_CHECK_EQ(v->spec.storage_nbytes, 48);
	ATF_CHECK_EQ(v->spec.replica_mode, RSD_EXCLUSIVE);
	ATF_CHECK_EQ(v->spec.recoverability, RSD_RECONSTRUCTIBLE);
	v = &snap->values[2];
	ATF_CHECK_EQ(v->spec.logical_nbytes, 16);
	ATF_CHECK_EQ(v->spec.recoverability, RSD_MUST_PRESERVE);
	ATF_CHECK_EQ(snap->state_version, cfx_version(&f));
	ATF_CHECK_EQ(snap->manager_id, rsd_manager_id(f.m));
	rsd_snapshot_free(snap);
	cfx_fini(&f);
}

/* §14.4, §1.4: locations in registry order, with every field. */
ATF_TC_WITHOUT_HEAD(location_fields);
ATF_TC_BODY(location_fields, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 1000 } };
	const struct rsd_location_snapshot *l;
	struct csrc s = { 0 };
	struct rsd_reservation *r;
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	need_pinned(&f);
	h = cfx_register(&f, &s, PAGEABLE, 32, 48, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	cfx_adopt(&f, PINNED, 100, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PINNED, 200, "two hundred", &r));

	snap = cfx_snap(&f);
	ATF_REQUIRE_EQ(snap->nlocations, 2);
	l = &snap->locations[0];
	ATF_CHECK(rsd_location_equal(l->location, PINNED));
	ATF_CHECK(l->has_budget);
	ATF_CHECK_EQ(l->budget_bytes, 1000);
	ATF_CHECK_EQ(l->used_bytes, 148);
	ATF_CHECK_EQ(l->reserved_bytes, 200);
	ATF_CHECK_EQ(l->remaining_budget_bytes, 652);
	ATF_CHECK_EQ(l->peak_used_bytes, 148);
	ATF_CHECK_EQ(l->peak_charged_bytes, 348);
	ATF_CHECK_EQ(l->value_count, 2);
	ATF_CHECK_EQ(l->reservation_count, 1);
	ATF_CHECK_EQ(l->use_count + l->hold_count + l->pending_event_count, 0);
	ATF_CHECK(!l->has_allocator);
	l = &snap->locations[1];
	ATF_CHECK(rsd_location_equal(l->location, PAGEABLE));
	ATF_CHECK(!l->has_budget);
	ATF_CHECK_EQ(l->used_bytes, 0);
	ATF_CHECK_EQ(l->reserved_bytes, 0); /* temporary charges are never observable */
	ATF_CHECK_EQ(l->peak_used_bytes, 0);
	ATF_CHECK_EQ(l->peak_charged_bytes, 48);
	ATF_CHECK_EQ(l->value_count, 0);
	/* §3.2: storage is what the value uses, the charge is the spec's. */
	{
		const struct rsd_materialization_snapshot *m = cfx_mat(cfx_val(snap, h), PINNED);

		ATF_REQUIRE(m);
		ATF_CHECK_EQ(m->logical_nbytes, 32);
		ATF_CHECK_EQ(m->storage_nbytes, 32);
		ATF_CHECK_EQ(m->charged_nbytes, 48);
	}
	rsd_snapshot_free(snap);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/* §14.5: live reservations in creation order, labels exact. */
ATF_TC_WITHOUT_HEAD(reservation_order_and_labels);
ATF_TC_BODY(reservation_order_and_labels, tc)
{
	char label[16] = "  spaced  ";
	struct rsd_reservation *r[4];
	struct rsd_snapshot *snap;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	OK(rsd_reserve(f.m, PINNED, 1, label, &r[0]));
	strcpy(label, "mutated");
	OK(rsd_reserve(f.m, PAGEABLE, 2, "second", &r[1]));
	OK(rsd_reserve(f.m, PINNED, 3, "third", &r[2]));
	OK(rsd_reservation_release(r[1]));
	OK(rsd_reserve(f.m, PAGEABLE, 4, "fourth", &r[3]));
	ATF_CHECK_STREQ(rsd_reservation_label(r[0]), "  spaced  ");

	snap = cfx_snap(&f);
	ATF_REQUIRE_EQ(snap->nreservations, 3);
	ATF_CHECK_STREQ(snap->reservations[0].label, "  spaced  ");
	ATF_CHECK_EQ(snap->reservations[0].nbytes, 1);
	ATF_CHECK(rsd_location_equal(snap->reservations[0].location, PINNED));
	ATF_CHECK_STREQ(snap->reservations[1].label, "third");
	ATF_CHECK_EQ(snap->reservations[1].nbytes, 3);
	ATF_CHECK_STREQ(snap->reservations[2].label, "fourth");
	ATF_CHECK(rsd_location_equal(snap->reservations[2].location, PAGEABLE));
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->reservation_count, 2);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->reserved_bytes, 4);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->reserved_bytes, 4);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->peak_charged_bytes, 4);
	/* Recording order: pinned first (first reservation), then pageable. */
	ATF_CHECK(rsd_location_equal(snap->locations[0].location, PINNED));
	ATF_CHECK(rsd_location_equal(snap->locations[1].location, PAGEABLE));
	rsd_snapshot_free(snap);
	for (int i = 0; i < 4; i++) {
		OK(rsd_reservation_release(r[i]));
		rsd_reservation_free(r[i]);
	}
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(snap->nreservations, 0);
	rsd_snapshot_free(snap);
	cfx_fini(&f);
}

/* §7.2: peaks never decrease. */
ATF_TC_WITHOUT_HEAD(peaks_never_decrease);
ATF_TC_BODY(peaks_never_decrease, tc)
{
	struct rsd_reservation *r1, *r2;
	const struct rsd_location_snapshot *l;
	struct rsd_snapshot *snap;
	struct rsd_handle a, b;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	a = cfx_adopt(&f, PAGEABLE, 100, RSD_EXCLUSIVE);
	b = cfx_adopt(&f, PAGEABLE, 50, RSD_EXCLUSIVE);
	OK(rsd_discard(f.m, a, NULL));
	OK(rsd_reserve(f.m, PAGEABLE, 70, "r1", &r1)); /* 50 + 70 < 150 */
	snap = cfx_snap(&f);
	l = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(l->used_bytes, 50);
	ATF_CHECK_EQ(l->reserved_bytes, 70);
	ATF_CHECK_EQ(l->peak_used_bytes, 150);
	ATF_CHECK_EQ(l->peak_charged_bytes, 150);
	rsd_snapshot_free(snap);
	OK(rsd_reserve(f.m, PAGEABLE, 40, "r2", &r2)); /* 50 + 110 */
	OK(rsd_reservation_release(r1));
	OK(rsd_reservation_release(r2));
	OK(rsd_discard(f.m, b, NULL));
	snap = cfx_snap(&f);
	l = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(l->used_bytes, 0);
	ATF_CHECK_EQ(l->reserved_bytes, 0);
	ATF_CHECK_EQ(l->peak_used_bytes, 150);
	ATF_CHECK_EQ(l->peak_charged_bytes, 160);
	rsd_snapshot_free(snap);
	rsd_reservation_free(r1);
	rsd_reservation_free(r2);
	cfx_fini(&f);
}

/* §14.3-14.4, §18.35, §18.44: protection counts; location counts are sums. */
ATF_TC_WITHOUT_HEAD(protection_counts);
ATF_TC_BODY(protection_counts, tc)
{
	struct rsd_handle h[3];
	struct rsd_lease *l1, *l2;
	struct rsd_hold *hd;
	struct rsd_snapshot *snap;
	const struct rsd_location_snapshot *loc;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	for (int i = 0; i < 3; i++)
		h[i] = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_acquire(f.m, h, 3, PAGEABLE, NULL, &l1));
	{
		struct rsd_handle dup[3] = { h[0], h[1], h[0] };

		OK(rsd_acquire(f.m, dup, 3, PAGEABLE, NULL, &l2));
		ATF_CHECK_EQ(rsd_lease_count(l2), 2);
	}
	OK(rsd_hold(f.m, &h[1], 2, PAGEABLE, &hd));
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h[0]), PAGEABLE)->use_count, 2);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h[1]), PAGEABLE)->use_count, 2);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h[2]), PAGEABLE)->use_count, 1);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h[0]), PAGEABLE)->hold_count, 0);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h[1]), PAGEABLE)->hold_count, 1);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h[2]), PAGEABLE)->hold_count, 1);
	loc = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(loc->use_count, 5);
	ATF_CHECK_EQ(loc->hold_count, 2);
	ATF_CHECK_EQ(loc->pending_event_count, 0);
	rsd_snapshot_free(snap);
	OK(rsd_lease_release(l1, 0));
	OK(rsd_lease_release(l2, 0));
	OK(rsd_hold_release(hd));
	snap = cfx_snap(&f);
	loc = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(loc->use_count + loc->hold_count + loc->pending_event_count, 0);
	rsd_snapshot_free(snap);
	rsd_lease_free(l1);
	rsd_lease_free(l2);
	rsd_hold_free(hd);
	cfx_fini(&f);
}

/* §8.4, §14.3, §18.41: a pending lease counts once however many streams;
 * lock-free snapshots do not reap (Documentation/design.md), a writer call does. */
ATF_TC_WITHOUT_HEAD(pending_event_count);
ATF_TC_BODY(pending_event_count, tc)
{
	struct rsd_location c0 = cfx_cuda(0);
	const struct rsd_materialization_snapshot *m;
	struct rsd_snapshot *snap;
	struct rsd_lease *l;
	void *s1, *s2;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, c0, NULL, NULL));
	OK(rsd_simdev_stream_create(f.sd, 0, &s1));
	OK(rsd_simdev_stream_create(f.sd, 0, &s2));
	rsd_simdev_set_auto_complete(f.sd, false);
	OK(rsd_acquire(f.m, &h, 1, c0, s1, &l));
	OK(rsd_lease_add_consumer_stream(l, s2));
	OK(rsd_lease_add_consumer_stream(l, s2));
	v = cfx_version(&f);
	OK(rsd_lease_release(l, 0));
	CHECK_VERSION(&f, v + 1);
	ATF_CHECK(!rsd_lease_active(l));
	snap = cfx_snap(&f);
	m = cfx_mat(cfx_val(snap, h), c0);
	ATF_REQUIRE(m);
	ATF_CHECK_EQ(m->use_count, 0);
	ATF_CHECK_EQ(m->pending_event_count, 1);
	ATF_CHECK_EQ(cfx_loc(snap, c0)->pending_event_count, 1);
	ATF_CHECK(cfx_loc(snap, c0)->has_allocator);
	ATF_CHECK_EQ(cfx_loc(snap, c0)->allocator_allocated_bytes,
		     rsd_simdev_allocated_bytes(f.sd, 0));
	rsd_snapshot_free(snap);
	ERR(RSD_EINUSE, rsd_drop(f.m, h, c0, NULL));
	/* One stream done is not enough. */
	rsd_simdev_stream_complete(f.sd, s1);
	OK(rsd_manager_reap(f.m));
	CHECK_VERSION(&f, v + 1);
	rsd_simdev_stream_complete(f.sd, s2);
	/* Reads never reap: still pending until a writer call. */
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h), c0)->pending_event_count, 1);
	ATF_CHECK_EQ(snap->state_version, v + 1);
	rsd_snapshot_free(snap);
	OK(rsd_manager_reap(f.m));
	CHECK_VERSION(&f, v + 2);
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_mat(cfx_val(snap, h), c0)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	OK(rsd_drop(f.m, h, c0, NULL));
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(f.sd, s1);
	rsd_simdev_stream_destroy(f.sd, s2);
	cfx_fini(&f);
}

/* A snapshot is an independent copy; later changes do not touch it. */
ATF_TC_WITHOUT_HEAD(snapshot_is_a_copy);
ATF_TC_BODY(snapshot_is_a_copy, tc)
{
	struct rsd_snapshot *s1, *s2;
	struct rsd_reservation *r;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PAGEABLE, 5, "five", &r));
	s1 = cfx_snap(&f);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	OK(rsd_discard(f.m, h, NULL));
	cfx_adopt(&f, PAGEABLE, 8, RSD_EXCLUSIVE);
	s2 = cfx_snap(&f);
	ATF_CHECK_EQ(s1->state_version, 3);
	ATF_CHECK_EQ(s1->nvalues, 1);
	ATF_CHECK_EQ(s1->values[0].nmaterializations, 1);
	ATF_CHECK(!s1->values[0].discarded);
	ATF_REQUIRE_EQ(s1->nreservations, 1);
	ATF_CHECK_STREQ(s1->reservations[0].label, "five");
	ATF_CHECK_EQ(s1->locations[0].used_bytes, N);
	ATF_CHECK_EQ(s2->nvalues, 2);
	ATF_CHECK(s2->values[0].discarded);
	ATF_CHECK_EQ(s2->nreservations, 0);
	ATF_CHECK(s2->state_version > s1->state_version);
	ATF_CHECK(s2->captured_at_ns >= s1->captured_at_ns);
	rsd_snapshot_free(s1);
	rsd_snapshot_free(s2);
	/* After close: no snapshot. */
	OK(rsd_manager_close(f.m, 0));
	{
		struct rsd_snapshot *s3 = NULL;

		ERR(RSD_ECLOSED, rsd_snapshot_take(f.m, &s3));
		ATF_CHECK(s3 == NULL);
	}
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, value_and_materialization_order);
	ATF_TP_ADD_TC(tp, location_fields);
	ATF_TP_ADD_TC(tp, reservation_order_and_labels);
	ATF_TP_ADD_TC(tp, peaks_never_decrease);
	ATF_TP_ADD_TC(tp, protection_counts);
	ATF_TP_ADD_TC(tp, pending_event_count);
	ATF_TP_ADD_TC(tp, snapshot_is_a_copy);
	return 0;
}
