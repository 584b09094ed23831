// SPDX-License-Identifier: MIT
/*
 * Named reservations (reference.md §8.7, §7.1, §7.2, §14.5; edge cases 5,
 * 43; §20.1): label and argument validation, budget admission with the
 * error's numbers, pure accounting (reserved and remaining bytes, counts,
 * peaks), creation-order listing and release, lazy location recording,
 * zero-byte reservations blocking close, abandonment.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "lfx.h"

/* Bytes and count of reservations at a location, as a snapshot shows them. */
#define CHECK_RESERVED(at, bytes, count) check_reserved(__LINE__, at, bytes, count)
static void check_reserved(int line, struct rsd_location at, uint64_t bytes, uint64_t count)
{
	struct rsd_snapshot *s = lfx_snap();
	const struct rsd_location_snapshot *x = lfx_loc_in(s, at);
	uint64_t sum = 0, n = 0;

	ATF_CHECK_MSG(x != NULL, "line %d: location not known", line);
	for (size_t i = 0; i < s->nreservations; i++) {
		if (!rsd_location_equal(s->reservations[i].location, at))
			continue;
		sum += s->reservations[i].nbytes;
		n++;
	}
	ATF_CHECK_EQ_MSG(sum, bytes, "line %d: listed reservations sum to %llu, expected %llu",
			 line, (unsigned long long)sum, (unsigned long long)bytes);
	ATF_CHECK_EQ_MSG(n, count, "line %d: %llu listed reservations, expected %llu", line,
			 (unsigned long long)n, (unsigned long long)count);
	if (x) {
		ATF_CHECK_EQ_MSG(x->reserved_bytes, bytes,
				 "line %d: reserved_bytes %llu, expected %llu", line,
				 (unsigned long long)x->reserved_bytes, (unsigned long long)bytes);
		ATF_CHECK_EQ_MSG(x->reservation_count, count,
				 "line %d: reservation_count %llu, expected %llu", line,
				 (unsigned long long)x->reservation_count,
				 (unsigned long long)count);
		if (x->has_budget)
			ATF_CHECK_EQ_MSG(x->remaining_budget_bytes,
					 x->budget_bytes - x->used_bytes - x->reserved_bytes,
					 "line %d: remaining_budget_bytes %llu", line,
					 (unsigned long long)x->remaining_budget_bytes);
	}
	rsd_snapshot_free(s);
}

ATF_TC_WITHOUT_HEAD(label_and_argument_rules);
ATF_TC_BODY(label_and_argument_rules, tc)
{
	struct rsd_reservation *r = NULL;
	struct rsd_location locs[8];
	size_t nlocs;
	uint64_t v;

	lfx_setup(false);
	nlocs = rsd_manager_locations(lfx_m, locs, 8);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINVAL, rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 1, "", &r));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 1, "   ", &r));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 1, " \t\n", &r));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 1, NULL, &r));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 1, "x", NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_reserve(NULL, RSD_LOC_PAGEABLE_HOST, 1, "x", &r));
	/* A cuda location the runtime lacks: ArgumentValueError, unrecorded. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_reserve(lfx_m, lfx_cuda(2), 1, "x", &r));
	ATF_CHECK(r == NULL);
	CHECK_VER(v);
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, locs, 8), nlocs);
	lfx_teardown();

	lfx_setup(true);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINVAL, rsd_reserve(lfx_m, lfx_cuda(0), 1, "x", &r));
	ATF_CHECK(r == NULL);
	CHECK_VER(v);
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, locs, 8), 0);
	lfx_teardown();
}

/* §20.1-like: admission with the error's numbers, reservations consume budget. */
ATF_TC_WITHOUT_HEAD(budget_admission);
ATF_TC_BODY(budget_admission, tc)
{
	struct rsd_budget b = { .nbytes = 100 };
	struct rsd_reservation *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL;
	struct rsd_location pin = RSD_LOC_PINNED_HOST;
	const struct rsd_error *e;
	struct rsd_resident *res = NULL;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	uint64_t v, one = 1;

	b.location = pin;
	lfx_setup_budgets(true, &b, 1);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 60, "first", &r1));
	CHECK_VER(v + 1); /* budgeted locations are known from the start */
	CHECK_RESERVED(pin, 60, 1);
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_reserve(lfx_m, pin, 41, "second", &r2));
	e = rsd_last_error();
	ATF_CHECK(e->has_budget);
	ATF_CHECK_EQ(e->budget_bytes, 100);
	ATF_CHECK_EQ(e->used_bytes, 0);
	ATF_CHECK_EQ(e->reserved_bytes, 60);
	ATF_CHECK_EQ(e->requested_bytes, 41);
	ATF_CHECK(e->has_location && rsd_location_equal(e->location, pin));
	ATF_CHECK(r2 == NULL);
	CHECK_VER(v + 1);
	CHECK_RESERVED(pin, 60, 1);

	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 40, "second", &r2));
	s = lfx_snap();
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->remaining_budget_bytes, 0);
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->peak_charged_bytes, 100);
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->peak_used_bytes, 0);
	rsd_snapshot_free(s);
	/* Zero bytes fit even when full. */
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 0, "zero", &r3));
	CHECK_RESERVED(pin, 100, 3);
	/* A value does not fit either: reservations consume budget. */
	RSD_REQUIRE_OK(rsd_resident_alloc(lfx_m, &rsd_resident_type, pin, 1, &one, NULL, 0, &res));
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_adopt(lfx_m, res, &pin, RSD_REPLICABLE, &h));
	ATF_CHECK_EQ(rsd_last_error()->reserved_bytes, 100);
	CHECK_VER(v);
	RSD_REQUIRE_OK(rsd_reservation_release(r1));
	CHECK_VER(v + 1);
	CHECK_RESERVED(pin, 40, 2);
	RSD_REQUIRE_OK(rsd_adopt(lfx_m, res, &pin, RSD_REPLICABLE, &h));
	/* used 1 + reserved 40: 60 more do not fit, 59 do. */
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_reserve(lfx_m, pin, 60, "big", &r4));
	ATF_CHECK_EQ(rsd_last_error()->used_bytes, 1);
	ATF_CHECK_EQ(rsd_last_error()->reserved_bytes, 40);
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_reserve(lfx_m, pin, UINT64_MAX, "huge", &r4));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 59, "big", &r4));
	s = lfx_snap();
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->used_bytes, 1);
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->reserved_bytes, 99);
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->remaining_budget_bytes, 0);
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->peak_charged_bytes, 100);
	rsd_snapshot_free(s);
	rsd_reservation_release(r2);
	rsd_reservation_release(r3);
	rsd_reservation_release(r4);
	rsd_reservation_free(r1);
	rsd_reservation_free(r2);
	rsd_reservation_free(r3);
	rsd_reservation_free(r4);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* §8.7 step 5 and edge case 5: recording, unbudgeted accounting. */
ATF_TC_WITHOUT_HEAD(unbudgeted_and_recording);
ATF_TC_BODY(unbudgeted_and_recording, tc)
{
	struct rsd_reservation *r = NULL;
	struct rsd_location locs[4];
	const struct rsd_location_snapshot *x;
	struct rsd_snapshot *s;
	uint64_t v;

	lfx_setup(true);
	v = lfx_ver();
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, locs, 4), 0);
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, UINT64_C(1) << 40, "big", &r));
	CHECK_VER(v + 2); /* the new location, then the reservation */
	ATF_REQUIRE_EQ(rsd_manager_locations(lfx_m, locs, 4), 1);
	ATF_CHECK(rsd_location_equal(locs[0], RSD_LOC_PAGEABLE_HOST));
	s = lfx_snap();
	x = lfx_loc_in(s, RSD_LOC_PAGEABLE_HOST);
	ATF_REQUIRE(x != NULL);
	ATF_CHECK(!x->has_budget);
	ATF_CHECK_EQ(x->reserved_bytes, UINT64_C(1) << 40);
	ATF_CHECK_EQ(x->used_bytes, 0);
	ATF_CHECK_EQ(x->peak_charged_bytes, UINT64_C(1) << 40);
	ATF_CHECK_EQ(x->reservation_count, 1);
	ATF_REQUIRE_EQ(s->nreservations, 1);
	ATF_CHECK_STREQ(s->reservations[0].label, "big");
	ATF_CHECK_EQ(s->reservations[0].nbytes, UINT64_C(1) << 40);
	rsd_snapshot_free(s);
	RSD_CHECK_OK(rsd_reservation_release(r));
	CHECK_VER(v + 3);
	CHECK_RESERVED(RSD_LOC_PAGEABLE_HOST, 0, 0);
	s = lfx_snap();
	ATF_CHECK_EQ(lfx_loc_in(s, RSD_LOC_PAGEABLE_HOST)->peak_charged_bytes, UINT64_C(1) << 40);
	rsd_snapshot_free(s);
	rsd_reservation_free(r);
	lfx_teardown();
}

/*
 * reserved_bytes is an exact sum (§14.4): a reservation that would carry
 * the location's counter past 2^64 - 1 cannot be represented and must be
 * refused, leaving the accounting as it was.
 */
ATF_TC_WITHOUT_HEAD(unbudgeted_overflow_refused);
ATF_TC_BODY(unbudgeted_overflow_refused, tc)
{
	struct rsd_reservation *r1 = NULL, *r2 = NULL;
	int err;

	lfx_setup(true);
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, UINT64_MAX - 10, "most", &r1));
	err = rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 11, "wraps", &r2);
	ATF_CHECK_MSG(err < 0, "a reservation wrapping reserved_bytes past 2^64 succeeded");
	CHECK_RESERVED(RSD_LOC_PAGEABLE_HOST, UINT64_MAX - 10, 1);
	if (!err) {
		rsd_reservation_release(r2);
		rsd_reservation_free(r2);
	}
	rsd_reservation_release(r1);
	rsd_reservation_free(r1);
	lfx_teardown();
}

/* Creation order in snapshots, release by identity, reserved bytes. */
ATF_TC_WITHOUT_HEAD(release_order_and_bytes);
ATF_TC_BODY(release_order_and_bytes, tc)
{
	struct rsd_reservation *r1 = NULL, *r2 = NULL, *r3 = NULL, *rp = NULL;
	struct rsd_location pin = RSD_LOC_PINNED_HOST;
	struct rsd_snapshot *s;
	char label[16] = "three";
	uint64_t v;

	lfx_setup(false);
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 10, "one", &r1));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 5, "page", &rp));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 20, "two", &r2));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, pin, 30, label, &r3));
	strcpy(label, "changed"); /* copied on entry */
	ATF_CHECK_STREQ(rsd_reservation_label(r3), "three");
	ATF_CHECK_EQ(rsd_reservation_nbytes(r3), 30);
	ATF_CHECK(rsd_reservation_active(r3));
	CHECK_RESERVED(pin, 60, 3);
	CHECK_RESERVED(RSD_LOC_PAGEABLE_HOST, 5, 1);
	s = lfx_snap();
	ATF_REQUIRE_EQ(s->nreservations, 4);
	ATF_CHECK_STREQ(s->reservations[0].label, "one");
	ATF_CHECK_STREQ(s->reservations[1].label, "page");
	ATF_CHECK_STREQ(s->reservations[2].label, "two");
	ATF_CHECK_STREQ(s->reservations[3].label, "three");
	ATF_CHECK_EQ(s->reservations[2].nbytes, 20);
	ATF_CHECK(rsd_location_equal(s->reservations[1].location, RSD_LOC_PAGEABLE_HOST));
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->peak_charged_bytes, 60);
	rsd_snapshot_free(s);

	v = lfx_ver();
	RSD_CHECK_OK(rsd_reservation_release(r2));
	CHECK_VER(v + 1);
	ATF_CHECK(!rsd_reservation_active(r2));
	RSD_CHECK_OK(rsd_reservation_release(r2));
	CHECK_VER(v + 1);
	CHECK_RESERVED(pin, 40, 2);
	s = lfx_snap();
	ATF_REQUIRE_EQ(s->nreservations, 3);
	ATF_CHECK_STREQ(s->reservations[0].label, "one");
	ATF_CHECK_STREQ(s->reservations[1].label, "page");
	ATF_CHECK_STREQ(s->reservations[2].label, "three");
	rsd_snapshot_free(s);
	RSD_CHECK_OK(rsd_reservation_release(r1));
	CHECK_RESERVED(pin, 30, 1);
	RSD_CHECK_OK(rsd_reservation_release(r3));
	RSD_CHECK_OK(rsd_reservation_release(rp));
	CHECK_VER(v + 4);
	CHECK_RESERVED(pin, 0, 0);
	s = lfx_snap();
	ATF_CHECK_EQ(s->nreservations, 0);
	ATF_CHECK_EQ(lfx_loc_in(s, pin)->peak_charged_bytes, 60); /* peaks never decrease */
	rsd_snapshot_free(s);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_reservation_release(NULL));
	rsd_reservation_free(r1);
	rsd_reservation_free(r2);
	rsd_reservation_free(r3);
	rsd_reservation_free(rp);
	rsd_reservation_free(NULL);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/*
 * The snapshot lists exactly the live reservations, in creation order,
 * with their bytes, while many are made and released: the published table
 * clears the slots of released ones and is rebuilt without them once they
 * outnumber the live ones (here at the release of the 70th of 100), and a
 * reservation whose bytes changed keeps its place.
 */
#define NTAB 100u

static void check_table(int line, struct rsd_reservation *const *r, size_t n)
{
	struct rsd_snapshot *s = lfx_snap();
	size_t k = 0, live = 0;

	for (size_t i = 0; i < n; i++)
		live += r[i] && rsd_reservation_active(r[i]);
	ATF_CHECK_EQ_MSG(s->nreservations, live, "line %d: %zu reservations, want %zu", line,
			 s->nreservations, live);
	for (size_t i = 0; i < n && k < s->nreservations; i++) {
		if (!r[i] || !rsd_reservation_active(r[i]))
			continue;
		ATF_CHECK_STREQ_MSG(s->reservations[k].label, rsd_reservation_label(r[i]),
				    "line %d: reservation %zu", line, k);
		ATF_CHECK_EQ_MSG(s->reservations[k].nbytes, rsd_reservation_nbytes(r[i]),
				 "line %d: reservation %zu", line, k);
		k++;
	}
	rsd_snapshot_free(s);
}
#define CHECK_TABLE(r, n) check_table(__LINE__, r, n)

ATF_TC_WITHOUT_HEAD(table_order_many);
ATF_TC_BODY(table_order_many, tc)
{
	struct rsd_reservation *r[NTAB + 10] = { NULL };
	struct rsd_resident *value;
	struct rsd_handle h;
	uint64_t one = 64;
	char label[16];

	lfx_setup(true);
	for (unsigned i = 0; i < NTAB; i++) {
		snprintf(label, sizeof(label), "r%u", i);
		RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 100 + i, label, &r[i]));
	}
	CHECK_TABLE(r, NTAB);
	/* Release every odd one, one publication each: holes in place. */
	for (unsigned i = 1; i < NTAB; i += 2)
		RSD_REQUIRE_OK(rsd_reservation_release(r[i]));
	CHECK_TABLE(r, NTAB);
	/* Two more, then bytes out of r[10] into a value: it keeps its place. */
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 7, "late0", &r[NTAB]));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 8, "late1", &r[NTAB + 1]));
	RSD_REQUIRE_OK(rsd_resident_alloc(lfx_m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &one,
					  NULL, 0, &value));
	RSD_REQUIRE_OK(rsd_adopt_reserved(r[10], value, RSD_REPLICABLE, NULL, &h));
	ATF_CHECK_EQ(rsd_reservation_nbytes(r[10]), 110 - 64);
	CHECK_TABLE(r, NTAB + 2);
	/* Release all but r[0], r[98] and the late ones: past the rebuild. */
	for (unsigned i = 2; i < NTAB - 2; i += 2)
		RSD_REQUIRE_OK(rsd_reservation_release(r[i]));
	CHECK_TABLE(r, NTAB + 2);
	/* New ones after a rebuild go last. */
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 9, "after", &r[NTAB + 2]));
	RSD_REQUIRE_OK(rsd_reservation_release(r[NTAB]));
	CHECK_TABLE(r, NTAB + 3);
	for (unsigned i = 0; i < NTAB + 3; i++)
		RSD_REQUIRE_OK(rsd_reservation_release(r[i]));
	CHECK_TABLE(r, NTAB + 3);
	for (unsigned i = 0; i < NTAB + 3; i++)
		rsd_reservation_free(r[i]);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* Edge case 43: a zero-byte reservation is a live lifetime. */
ATF_TC_WITHOUT_HEAD(zero_byte_blocks_close);
ATF_TC_BODY(zero_byte_blocks_close, tc)
{
	struct rsd_reservation *r = NULL;
	uint64_t v;

	lfx_setup(true);
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 0, "zero", &r));
	CHECK_RESERVED(RSD_LOC_PAGEABLE_HOST, 0, 1);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, 0));
	ATF_CHECK(lfx_msg_has("reservations=1"));
	ATF_CHECK(lfx_msg_has("active_leases=0"));
	ATF_CHECK(lfx_msg_has("pending_leases=0"));
	ATF_CHECK(lfx_msg_has("holds=0"));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, RSD_CLOSE_NOWAIT));
	CHECK_VER(v); /* still open, unchanged */
	RSD_CHECK_OK(rsd_reservation_release(r));
	CHECK_VER(v + 1);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	rsd_reservation_free(r);
	r = NULL;
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 0, "late", &r));
	ATF_CHECK(r == NULL);
	lfx_teardown();
}

/* §8.9: a freed active reservation is released (+1) with a warning. */
ATF_TC_WITHOUT_HEAD(abandoned_reservation);
ATF_TC_BODY(abandoned_reservation, tc)
{
	struct rsd_reservation *r = NULL;
	uint64_t v;

	lfx_setup(true);
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PINNED_HOST, 77, "forgotten", &r));
	v = lfx_ver();
	rsd_reservation_free(r);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(lfx_nwarn, 1);
	ATF_CHECK_STREQ(lfx_lastwarn,
			"reservation 'forgotten' was freed without release: released it");
	CHECK_RESERVED(RSD_LOC_PINNED_HOST, 0, 0);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, label_and_argument_rules);
	ATF_TP_ADD_TC(tp, budget_admission);
	ATF_TP_ADD_TC(tp, unbudgeted_and_recording);
	ATF_TP_ADD_TC(tp, unbudgeted_overflow_refused);
	ATF_TP_ADD_TC(tp, release_order_and_bytes);
	ATF_TP_ADD_TC(tp, table_order_many);
	ATF_TP_ADD_TC(tp, zero_byte_blocks_close);
	ATF_TP_ADD_TC(tp, abandoned_reservation);
	return atf_no_error();
}
