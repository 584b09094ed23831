// SPDX-License-Identifier: MIT
/*
 * Budgets, charges and peaks (reference.md §7, §20.1, §18.4-18.5): the admission
 * boundary, budget 0, charges near UINT64_MAX, unbudgeted reservations and
 * the caller's budget array being copied.
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"
#include "core/core.h" /* which driver a manager picked */

static void check_budget_error(struct rsd_location at, uint64_t budget, uint64_t used,
			       uint64_t reserved, uint64_t requested)
{
	const struct rsd_error *e = rsd_last_error();

	ATF_CHECK_EQ(e->code, RSD_EBUDGET);
	ATF_CHECK(e->has_budget);
	ATF_CHECK(e->has_location && rsd_location_equal(e->location, at));
	ATF_CHECK_EQ_MSG(e->budget_bytes, budget, "budget %llu",
			 (unsigned long long)e->budget_bytes);
	ATF_CHECK_EQ_MSG(e->used_bytes, used, "used %llu", (unsigned long long)e->used_bytes);
	ATF_CHECK_EQ_MSG(e->reserved_bytes, reserved, "reserved %llu",
			 (unsigned long long)e->reserved_bytes);
	ATF_CHECK_EQ_MSG(e->requested_bytes, requested, "requested %llu",
			 (unsigned long long)e->requested_bytes);
}

static void need_pinned(struct cfx *f)
{
	struct rsd_resident *probe = cfx_alloc(f, PINNED, 1);

	rsd_resident_free(probe);
}

/* §7.1: used + reserved + n <= budget is admitted, one byte more is not. */
ATF_TC_WITHOUT_HEAD(admission_boundary);
ATF_TC_BODY(admission_boundary, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 100 } };
	struct rsd_reservation *r, *z, *x = NULL;
	struct rsd_resident *one;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	OK(rsd_reserve(f.m, PINNED, 40, "forty", &r));
	cfx_adopt(&f, PINNED, 59, RSD_EXCLUSIVE);
	one = cfx_alloc(&f, PINNED, 2);
	ERR(RSD_EBUDGET, rsd_adopt(f.m, one, NULL, RSD_EXCLUSIVE, &h));
	check_budget_error(PINNED, 100, 59, 40, 2);
	rsd_resident_free(one);
	cfx_adopt(&f, PINNED, 1, RSD_EXCLUSIVE); /* exactly at the budget */
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->used_bytes, 60);
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->reserved_bytes, 40);
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->remaining_budget_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->peak_charged_bytes, 100);
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->peak_used_bytes, 60);
	rsd_snapshot_free(s);
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PINNED, 1, "one", &x));
	check_budget_error(PINNED, 100, 60, 40, 1);
	ATF_CHECK(x == NULL);
	/* A zero-byte charge always fits. */
	OK(rsd_reserve(f.m, PINNED, 0, "zero", &z));
	cfx_adopt(&f, PINNED, 0, RSD_EXCLUSIVE);
	/* Releasing the reservation frees exactly its bytes. */
	OK(rsd_reservation_release(r));
	OK(rsd_reserve(f.m, PINNED, 40, "again", &x));
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PINNED, 1, "one", &r));
	OK(rsd_reservation_release(x));
	OK(rsd_reservation_release(z));
	rsd_reservation_free(x);
	rsd_reservation_free(z);
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/* §20.1. */
ATF_TC_WITHOUT_HEAD(w1_reservations);
ATF_TC_BODY(w1_reservations, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 128 } };
	const struct rsd_location_snapshot *l;
	struct rsd_reservation *r, *x = NULL;
	struct rsd_snapshot *s;
	struct cfx f;

	cfx_host(&f, b, 1);
	CHECK_VERSION(&f, 0);
	CHECK_LOCATIONS(&f, PINNED);
	cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	CHECK_VERSION(&f, 2);
	CHECK_LOCATIONS(&f, PINNED, PAGEABLE);
	OK(rsd_reserve(f.m, PINNED, 64, "w", &r));
	CHECK_VERSION(&f, 3);
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PINNED, 65, "x", &x));
	check_budget_error(PINNED, 128, 0, 64, 65);
	ATF_CHECK(strstr(rsd_last_error()->message, "pinned-host") != NULL);
	CHECK_VERSION(&f, 3);
	s = cfx_snap(&f);
	l = cfx_loc(s, PINNED);
	ATF_CHECK_EQ(l->used_bytes, 0);
	ATF_CHECK_EQ(l->reserved_bytes, 64);
	ATF_CHECK_EQ(l->remaining_budget_bytes, 64);
	ATF_CHECK_EQ(l->reservation_count, 1);
	ATF_CHECK_EQ(l->peak_charged_bytes, 64);
	rsd_snapshot_free(s);
	OK(rsd_reservation_release(r));
	OK(rsd_reservation_release(r));
	CHECK_VERSION(&f, 4);
	s = cfx_snap(&f);
	l = cfx_loc(s, PINNED);
	ATF_CHECK_EQ(l->reserved_bytes, 0);
	ATF_CHECK_EQ(l->remaining_budget_bytes, 128);
	ATF_CHECK_EQ(l->peak_used_bytes, 0);
	ATF_CHECK_EQ(l->peak_charged_bytes, 64);
	ATF_CHECK_EQ(l->reservation_count, 0);
	rsd_snapshot_free(s);
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/* §18.4: budget 0 is a real budget, recorded at construction; the map is copied. */
ATF_TC_WITHOUT_HEAD(budget_zero);
ATF_TC_BODY(budget_zero, tc)
{
	struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, 0 } };
	struct rsd_reservation *r, *x = NULL;
	struct rsd_resident *v;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	b[0].nbytes = 1 << 20; /* later changes to the caller's array are ignored */
	b[0].location = RSD_LOC_PINNED_HOST;
	CHECK_LOCATIONS(&f, PAGEABLE);
	v = cfx_alloc(&f, PAGEABLE, N);
	ERR(RSD_EBUDGET, rsd_adopt(f.m, v, NULL, RSD_EXCLUSIVE, &h));
	check_budget_error(PAGEABLE, 0, 0, 0, N);
	rsd_resident_free(v);
	CHECK_VERSION(&f, 0);
	CHECK_LOCATIONS(&f, PAGEABLE);
	cfx_adopt(&f, PAGEABLE, 0, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PAGEABLE, 0, "nothing", &r));
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PAGEABLE, 1, "one", &x));
	check_budget_error(PAGEABLE, 0, 0, 0, 1);
	s = cfx_snap(&f);
	ATF_REQUIRE_EQ(s->nlocations, 1);
	ATF_CHECK(s->locations[0].has_budget);
	ATF_CHECK_EQ(s->locations[0].budget_bytes, 0);
	ATF_CHECK_EQ(s->locations[0].remaining_budget_bytes, 0);
	ATF_CHECK_EQ(s->locations[0].value_count, 1);
	ATF_CHECK_EQ(s->locations[0].reservation_count, 1);
	rsd_snapshot_free(s);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/* §18.5: an unbudgeted reservation of 2^40 bytes is pure accounting. */
ATF_TC_WITHOUT_HEAD(unbudgeted_reservation_2_40);
ATF_TC_BODY(unbudgeted_reservation_2_40, tc)
{
	const uint64_t big = (uint64_t)1 << 40;
	const struct rsd_location_snapshot *l;
	struct rsd_reservation *r;
	struct rsd_snapshot *s;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	OK(rsd_reserve(f.m, PAGEABLE, big, "huge", &r));
	ATF_CHECK_EQ(rsd_reservation_nbytes(r), big);
	ATF_CHECK_STREQ(rsd_reservation_label(r), "huge");
	CHECK_VERSION(&f, 2);
	s = cfx_snap(&f);
	l = cfx_loc(s, PAGEABLE);
	ATF_REQUIRE(l);
	ATF_CHECK(!l->has_budget);
	ATF_CHECK_EQ(l->reserved_bytes, big);
	ATF_CHECK_EQ(l->reservation_count, 1);
	ATF_CHECK_EQ(l->peak_charged_bytes, big);
	ATF_CHECK_EQ(l->used_bytes, 0);
	ATF_REQUIRE_EQ(s->nreservations, 1);
	ATF_CHECK_EQ(s->reservations[0].nbytes, big);
	rsd_snapshot_free(s);
	/* Unbudgeted: more transitions are still admitted. */
	cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

static int make_empty(struct csrc *s, struct rsd_resident **out)
{
	uint64_t n = 0;

	return rsd_resident_alloc(s->f->m, &rsd_resident_type, s->at, 1, &n, NULL, 0, out);
}

/* A charge of UINT64_MAX must be rejected at a budgeted location, never wrap. */
ATF_TC_WITHOUT_HEAD(huge_charge_no_overflow);
ATF_TC_BODY(huge_charge_no_overflow, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 100 } };
	struct rsd_value_spec spec = { &rsd_resident_type, 0, UINT64_MAX, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct csrc s = { 0 }, p = { 0 };
	struct rsd_source src = { cfx_load, NULL, &s }, psrc = { cfx_load, NULL, &p };
	struct rsd_snapshot *snap;
	struct rsd_handle h, hp;
	struct cfx f;

	cfx_host(&f, b, 1);
	need_pinned(&f);
	cfx_adopt(&f, PINNED, 10, RSD_EXCLUSIVE);
	s.f = &f;
	s.at = PAGEABLE;
	s.make = make_empty;
	OK(rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	/* Loaded at the unbudgeted source location, refused at pinned. */
	ERR(RSD_EBUDGET, rsd_ensure(f.m, h, PINNED, NULL, NULL));
	check_budget_error(PINNED, 100, 10, 0, UINT64_MAX);
	ATF_CHECK_EQ(s.loads, 1);
	/* Loaded at a budgeted source location: refused before the load. */
	p.f = &f;
	p.at = PINNED;
	p.make = make_empty;
	OK(rsd_register_source(f.m, &spec, &psrc, PINNED, &hp));
	ERR(RSD_EBUDGET, rsd_ensure(f.m, hp, PINNED, NULL, NULL));
	check_budget_error(PINNED, 100, 10, 0, UINT64_MAX);
	ERR(RSD_EBUDGET, rsd_move(f.m, hp, PINNED, NULL, NULL, NULL));
	ATF_CHECK_EQ(p.loads, 0);
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->used_bytes, 10);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->reserved_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->peak_charged_bytes, 10);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->reserved_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->peak_charged_bytes, UINT64_MAX);
	rsd_snapshot_free(snap);
	/* It still fits an unbudgeted location. */
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), UINT64_MAX);
	/* Full to the last representable byte: more is refused, never wrapped. */
	{
		struct rsd_reservation *r = NULL;
		struct rsd_resident *one = cfx_alloc(&f, PAGEABLE, 1);
		struct rsd_handle x;
		uint64_t v = cfx_version(&f);

		ATF_CHECK(rsd_adopt(f.m, one, NULL, RSD_EXCLUSIVE, &x) < 0);
		ATF_CHECK(rsd_reserve(f.m, PAGEABLE, 1, "one", &r) < 0);
		ATF_CHECK(r == NULL);
		rsd_resident_free(one);
		CHECK_VERSION(&f, v);
		ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), UINT64_MAX);
		ATF_CHECK_EQ(cfx_reserved(&f, PAGEABLE), 0);
	}
	cfx_fini(&f);
}

/* A budget of UINT64_MAX is filled exactly, then refuses a single byte. */
ATF_TC_WITHOUT_HEAD(budget_uint64_max);
ATF_TC_BODY(budget_uint64_max, tc)
{
	const struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, UINT64_MAX } };
	struct rsd_value_spec spec = { &rsd_resident_type, 0, UINT64_MAX - 64, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src;
	struct rsd_reservation *r = NULL;
	struct csrc s = { 0 };
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	cfx_adopt(&f, PAGEABLE, 64, RSD_EXCLUSIVE);
	s.f = &f;
	s.at = PAGEABLE;
	s.make = make_empty;
	src.load = cfx_load;
	src.release = NULL;
	src.ctx = &s;
	OK(rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PAGEABLE, 1, "one", &r));
	check_budget_error(PAGEABLE, UINT64_MAX, UINT64_MAX, 0, 1);
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->used_bytes, UINT64_MAX);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->remaining_budget_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->peak_charged_bytes, UINT64_MAX);
	rsd_snapshot_free(snap);
	cfx_fini(&f);
}

/* §7.1: budgets never apply to removals, holds or leases. */
ATF_TC_WITHOUT_HEAD(no_admission_for_protections);
ATF_TC_BODY(no_admission_for_protections, tc)
{
	const struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, N } };
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	OK(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), N);
	ATF_CHECK_EQ(cfx_reserved(&f, PAGEABLE), 0);
	OK(rsd_lease_release(l, 0));
	OK(rsd_hold_release(hd));
	rsd_lease_free(l);
	rsd_hold_free(hd);
	OK(rsd_discard(f.m, h, NULL));
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PAGEABLE), N);
	cfx_fini(&f);
}

/*
 * rsd_manager_create(NULL, &m) is the all-defaults configuration: no
 * budgets (nothing recorded, any charge fits) and the CUDA runtime when it
 * sees a device, else the host driver and no CUDA location; exactly what a
 * zeroed configuration gives.
 */
ATF_TC_WITHOUT_HEAD(null_config_is_all_defaults);
ATF_TC_BODY(null_config_is_all_defaults, tc)
{
	const struct rsd_device_ops *cuda = rsd_cuda_driver();
	int ndev = cuda && cuda->device_count ? cuda->device_count(NULL) : 0;
	struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_manager_config zeroed;
	struct rsd_manager *m = NULL, *z = NULL;
	struct rsd_reservation *r;
	struct rsd_snapshot *s;
	struct cfx f;

	OK(rsd_manager_create(NULL, &m));
	ATF_REQUIRE(m != NULL);
	memset(&zeroed, 0, sizeof(zeroed));
	OK(rsd_manager_create(&zeroed, &z));
	ATF_CHECK(m->ops == (ndev > 0 ? cuda : rsd_host_driver()));
	ATF_CHECK(m->ops == z->ops);
	ATF_CHECK_EQ(m->ndevices, ndev > 0 ? ndev : 0);
	f.m = m;
	f.sd = NULL;
	CHECK_VERSION(&f, 0);
	ATF_CHECK_EQ(rsd_manager_locations(m, NULL, 0), 0);
	/* unbudgeted: half the address space fits at pageable-host */
	OK(rsd_reserve(m, PAGEABLE, UINT64_MAX / 2, "big", &r));
	OK(rsd_snapshot_take(m, &s));
	ATF_REQUIRE_EQ(s->nlocations, 1);
	ATF_CHECK(rsd_location_equal(s->locations[0].location, PAGEABLE));
	ATF_CHECK(!s->locations[0].has_budget);
	ATF_CHECK_EQ(s->locations[0].reserved_bytes, UINT64_MAX / 2);
	rsd_snapshot_free(s);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	if (ndev > 0) {
		OK(rsd_reserve(m, c0, 1, "gpu", &r));
		OK(rsd_reservation_release(r));
		rsd_reservation_free(r);
	} else {
		ERR(RSD_EINVAL, rsd_reserve(m, c0, 1, "gpu", &r));
		ATF_CHECK_MSG(strstr(rsd_last_error()->message, "require available CUDA"), "%s",
			      rsd_last_error()->message);
	}
	OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	rsd_manager_destroy(z);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, admission_boundary);
	ATF_TP_ADD_TC(tp, w1_reservations);
	ATF_TP_ADD_TC(tp, budget_zero);
	ATF_TP_ADD_TC(tp, unbudgeted_reservation_2_40);
	ATF_TP_ADD_TC(tp, huge_charge_no_overflow);
	ATF_TP_ADD_TC(tp, budget_uint64_max);
	ATF_TP_ADD_TC(tp, no_admission_for_protections);
	ATF_TP_ADD_TC(tp, null_config_is_all_defaults);
	return 0;
}
