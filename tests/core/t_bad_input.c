// SPDX-License-Identifier: MIT
/*
 * Bad input at the public boundary (reference.md §1.2, §2.5, §17.1):
 * NULL managers, objects and out-pointers, and location records that are
 * not locations, give RSD_ETYPE (a CUDA record whose index is outside
 * 0..127 RSD_EINVAL) with a recorded message, write no out-parameter and
 * leave the manager's state untouched.
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

struct fixture {
	struct cfx f;
	struct csrc s;
	struct rsd_handle a, h;
	struct rsd_lease *lease;
	struct rsd_hold *hold;
	struct rsd_reservation *resv;
	struct rsd_snapshot *before;
};

static void setup(struct fixture *x)
{
	memset(x, 0, sizeof(*x));
	cfx_host(&x->f, NULL, 0);
	x->a = cfx_adopt(&x->f, PAGEABLE, N, RSD_REPLICABLE);
	x->h = cfx_sourced(&x->f, &x->s, PAGEABLE);
	OK(rsd_acquire(x->f.m, &x->a, 1, PAGEABLE, NULL, &x->lease));
	OK(rsd_hold(x->f.m, &x->a, 1, PAGEABLE, &x->hold));
	OK(rsd_reserve(x->f.m, PAGEABLE, 1, "r", &x->resv));
	x->before = cfx_snap(&x->f);
}

static void teardown(struct fixture *x)
{
	struct rsd_snapshot *after = cfx_snap(&x->f);

	CHECK_SAME(x->before, after, false);
	ATF_CHECK_EQ(x->s.loads, 0);
	ATF_CHECK(rsd_lease_active(x->lease) && rsd_hold_active(x->hold) &&
		  rsd_reservation_active(x->resv));
	rsd_snapshot_free(after);
	rsd_snapshot_free(x->before);
	OK(rsd_lease_release(x->lease, 0));
	OK(rsd_hold_release(x->hold));
	OK(rsd_reservation_release(x->resv));
	rsd_lease_free(x->lease);
	rsd_hold_free(x->hold);
	rsd_reservation_free(x->resv);
	cfx_fini(&x->f);
}

/* A non-ETYPE call first, so a stale record cannot make a check pass. */
static void reset_error(void)
{
	struct rsd_location l;

	(void)rsd_location_parse("bogus", &l);
	ATF_REQUIRE_EQ(rsd_last_error()->code, RSD_EINVAL);
}

#define ETYPE(expr)                   \
	do {                          \
		reset_error();        \
		ERR(RSD_ETYPE, expr); \
	} while (0)

ATF_TC_WITHOUT_HEAD(manager_null);
ATF_TC_BODY(manager_null, tc)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_manager_config mc;
	struct rsd_source src = { cfx_load, NULL, NULL };
	struct rsd_manager *m = (struct rsd_manager *)0x1;
	struct rsd_handle out = { 0 };
	struct rsd_transition rep;
	struct rsd_resident *v;
	struct rsd_location locs[2];
	struct fixture x;
	uint64_t ver = 42;

	setup(&x);
	src.ctx = &x.s;
	memset(&mc, 0, sizeof(mc));
	mc.host_only = true;
	ETYPE(rsd_manager_create(&mc, NULL));
	mc.nbudgets = 1; /* but no array */
	ETYPE(rsd_manager_create(&mc, &m));
	ATF_CHECK(m == (struct rsd_manager *)0x1);

	ETYPE(rsd_manager_close(NULL, 0));
	ETYPE(rsd_manager_close(NULL, RSD_CLOSE_FORCE));
	rsd_manager_destroy(NULL);
	ATF_CHECK_EQ(rsd_manager_id(NULL), 0);
	reset_error();
	ATF_CHECK_EQ(rsd_manager_state_version(NULL), 0);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ETYPE);
	ETYPE(rsd_manager_state_version_get(NULL, &ver));
	ETYPE(rsd_manager_state_version_get(x.f.m, NULL));
	ATF_CHECK_EQ(ver, 42);
	reset_error();
	ATF_CHECK_EQ(rsd_manager_locations(NULL, locs, 2), 0);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ETYPE);
	ETYPE(rsd_manager_reap(NULL));

	v = cfx_alloc(&x.f, PAGEABLE, 8);
	ETYPE(rsd_adopt(NULL, v, NULL, RSD_EXCLUSIVE, &out));
	ETYPE(rsd_adopt(x.f.m, NULL, NULL, RSD_EXCLUSIVE, &out));
	ETYPE(rsd_adopt(x.f.m, v, NULL, RSD_EXCLUSIVE, NULL));
	rsd_resident_free(v);
	ETYPE(rsd_register_source(NULL, &spec, &src, PAGEABLE, &out));
	ETYPE(rsd_register_source(x.f.m, NULL, &src, PAGEABLE, &out));
	ETYPE(rsd_register_source(x.f.m, &spec, NULL, PAGEABLE, &out));
	ETYPE(rsd_register_source(x.f.m, &spec, &src, PAGEABLE, NULL));
	ATF_CHECK_EQ(out.id, 0);

	ETYPE(rsd_ensure(NULL, x.a, PINNED, NULL, &rep));
	ETYPE(rsd_copy(NULL, x.a, PINNED, NULL, &rep));
	ETYPE(rsd_move(NULL, x.a, PINNED, NULL, NULL, &rep));
	ETYPE(rsd_drop(NULL, x.a, PAGEABLE, &rep));
	ETYPE(rsd_discard(NULL, x.a, &rep));
	teardown(&x);
}

/* A label longer than RSD_MANAGER_LABEL_MAX is refused before anything is
 * built; one of that length, "" and NULL are taken. */
ATF_TC_WITHOUT_HEAD(manager_label);
ATF_TC_BODY(manager_label, tc)
{
	struct rsd_manager_config mc;
	struct rsd_manager *m = (struct rsd_manager *)0x1;
	char label[RSD_MANAGER_LABEL_MAX + 2];
	const char *ok[] = { label + 1, "", NULL };

	memset(&mc, 0, sizeof(mc));
	mc.host_only = true;
	memset(label, 'x', sizeof(label) - 1);
	label[sizeof(label) - 1] = '\0';
	mc.label = label;
	reset_error();
	ERR(RSD_EINVAL, rsd_manager_create(&mc, &m));
	ATF_CHECK(strstr(rsd_last_error()->message, "longer than 63 bytes") != NULL);
	ATF_CHECK(m == (struct rsd_manager *)0x1);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		mc.label = ok[i];
		OK(rsd_manager_create(&mc, &m));
		ATF_CHECK(m != NULL && m != (struct rsd_manager *)0x1);
		OK(rsd_manager_close(m, 0));
		rsd_manager_destroy(m);
		m = (struct rsd_manager *)0x1;
	}
}

ATF_TC_WITHOUT_HEAD(lifetimes_null);
ATF_TC_BODY(lifetimes_null, tc)
{
	const struct rsd_resident *val = NULL;
	struct rsd_lease *l = (struct rsd_lease *)0x1;
	struct rsd_hold *hd = (struct rsd_hold *)0x1;
	struct rsd_reservation *r = (struct rsd_reservation *)0x1;
	struct rsd_handle out = { 0 };
	struct fixture x;
	int stream;

	setup(&x);
	ETYPE(rsd_acquire(NULL, &x.a, 1, PAGEABLE, NULL, &l));
	ETYPE(rsd_acquire(x.f.m, &x.a, 1, PAGEABLE, NULL, NULL));
	ETYPE(rsd_acquire(x.f.m, NULL, 1, PAGEABLE, NULL, &l));
	reset_error();
	ERR(RSD_EINVAL, rsd_acquire(x.f.m, &x.a, 0, PAGEABLE, NULL, &l));
	ETYPE(rsd_lease_add_consumer_stream(NULL, &stream));
	ETYPE(rsd_lease_value(NULL, x.a, &val));
	ETYPE(rsd_lease_value(x.lease, x.a, NULL));
	ATF_CHECK(val == NULL);
	ATF_CHECK_EQ(rsd_lease_count(NULL), 0);
	ETYPE(rsd_lease_handle_at(NULL, 0, &out));
	ETYPE(rsd_lease_handle_at(x.lease, 0, NULL));
	ATF_CHECK_EQ(out.id, 0);
	(void)rsd_lease_location(NULL);
	ATF_CHECK(!rsd_lease_active(NULL));
	ETYPE(rsd_lease_release(NULL, 0));
	ETYPE(rsd_lease_release(NULL, RSD_RELEASE_WAIT));
	rsd_lease_free(NULL);

	ETYPE(rsd_hold(NULL, &x.a, 1, PAGEABLE, &hd));
	ETYPE(rsd_hold(x.f.m, &x.a, 1, PAGEABLE, NULL));
	ETYPE(rsd_hold(x.f.m, NULL, 1, PAGEABLE, &hd));
	reset_error();
	ERR(RSD_EINVAL, rsd_hold(x.f.m, &x.a, 0, PAGEABLE, &hd));
	ETYPE(rsd_hold_release(NULL));
	ATF_CHECK(!rsd_hold_active(NULL));
	rsd_hold_free(NULL);

	ETYPE(rsd_reserve(NULL, PAGEABLE, 1, "x", &r));
	ETYPE(rsd_reserve(x.f.m, PAGEABLE, 1, NULL, &r));
	ETYPE(rsd_reserve(x.f.m, PAGEABLE, 1, "x", NULL));
	reset_error();
	ERR(RSD_EINVAL, rsd_reserve(x.f.m, PAGEABLE, 1, " \t ", &r));
	reset_error();
	ERR(RSD_EINVAL, rsd_reserve(x.f.m, PAGEABLE, 1, "", &r));
	ETYPE(rsd_reservation_release(NULL));
	ATF_CHECK(!rsd_reservation_active(NULL));
	ATF_CHECK_EQ(rsd_reservation_nbytes(NULL), 0);
	ATF_CHECK(rsd_reservation_label(NULL) == NULL);
	rsd_reservation_free(NULL);
	ATF_CHECK(l == (struct rsd_lease *)0x1);
	ATF_CHECK(hd == (struct rsd_hold *)0x1);
	ATF_CHECK(r == (struct rsd_reservation *)0x1);
	teardown(&x);
}

ATF_TC_WITHOUT_HEAD(snapshot_null);
ATF_TC_BODY(snapshot_null, tc)
{
	struct rsd_snapshot *s = (struct rsd_snapshot *)0x1;
	struct fixture x;

	setup(&x);
	ETYPE(rsd_snapshot_take(NULL, &s));
	ETYPE(rsd_snapshot_take(x.f.m, NULL));
	ATF_CHECK(s == (struct rsd_snapshot *)0x1);
	rsd_snapshot_free(NULL);
	teardown(&x);
}

/* Every manager entry point that takes a location refuses cfx_bad_locs. */
#define BADLOC(code, expr)             \
	do {                           \
		cfx_reset_error(code); \
		ERR(code, expr);       \
	} while (0)

ATF_TC_WITHOUT_HEAD(invalid_location_records);
ATF_TC_BODY(invalid_location_records, tc)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { cfx_load, NULL, NULL };
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_reservation *r = NULL;
	struct rsd_resident *res = NULL;
	struct rsd_handle out = { 0 };
	uint64_t n8 = 8;
	struct fixture x;

	setup(&x);
	src.ctx = &x.s;
	for (size_t i = 0; i < cfx_nbad_locs; i++) {
		struct rsd_location b = cfx_bad_locs[i].loc;
		int code = cfx_bad_locs[i].code;
		struct rsd_resident *v = cfx_alloc(&x.f, PAGEABLE, 8);

		BADLOC(code, rsd_register_source(x.f.m, &spec, &src, b, &out));
		BADLOC(code, rsd_adopt(x.f.m, v, &b, RSD_EXCLUSIVE, &out));
		rsd_resident_free(v);
		BADLOC(code,
		       rsd_resident_alloc(x.f.m, &rsd_resident_type, b, 1, &n8, NULL, 0, &res));
		BADLOC(code, rsd_ensure(x.f.m, x.a, b, NULL, NULL));
		BADLOC(code, rsd_copy(x.f.m, x.a, b, NULL, NULL));
		BADLOC(code, rsd_move(x.f.m, x.a, b, NULL, NULL, NULL));
		BADLOC(code, rsd_move(x.f.m, x.a, PINNED, &b, NULL, NULL));
		BADLOC(code, rsd_drop(x.f.m, x.a, b, NULL));
		BADLOC(code, rsd_acquire(x.f.m, &x.a, 1, b, NULL, &l));
		BADLOC(code, rsd_hold(x.f.m, &x.a, 1, b, &hd));
		BADLOC(code, rsd_reserve(x.f.m, b, 0, "r", &r));
		{
			struct rsd_budget bud = { b, 10 };
			struct rsd_manager_config mc;
			struct rsd_manager *m = NULL;

			memset(&mc, 0, sizeof(mc));
			mc.host_only = true;
			mc.budgets = &bud;
			mc.nbudgets = 1;
			BADLOC(code, rsd_manager_create(&mc, &m));
			ATF_CHECK(m == NULL);
		}
	}
	ATF_CHECK(l == NULL && hd == NULL && r == NULL && res == NULL && out.id == 0);
	teardown(&x);
}

/* Bad input is reported even by a closed manager's entry points. */
ATF_TC_WITHOUT_HEAD(closed_manager);
ATF_TC_BODY(closed_manager, tc)
{
	struct rsd_reservation *r = NULL;
	struct rsd_snapshot *s = NULL;
	struct rsd_resident *v;
	struct rsd_handle a, out;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	v = cfx_alloc(&f, PAGEABLE, 8);
	OK(rsd_manager_close(f.m, 0));
	OK(rsd_manager_close(f.m, 0)); /* idempotent */
	ETYPE(rsd_adopt(f.m, NULL, NULL, RSD_EXCLUSIVE, &out));
	ERR(RSD_ECLOSED, rsd_adopt(f.m, v, NULL, RSD_EXCLUSIVE, &out));
	ERR(RSD_ECLOSED, rsd_ensure(f.m, a, PAGEABLE, NULL, NULL));
	ERR(RSD_ECLOSED, rsd_reserve(f.m, PAGEABLE, 0, "r", &r));
	ERR(RSD_ECLOSED, rsd_snapshot_take(f.m, &s));
	ERR(RSD_ECLOSED, rsd_manager_reap(f.m));
	ATF_CHECK_EQ(rsd_manager_locations(f.m, NULL, 0), 1);
	ATF_CHECK(rsd_manager_id(f.m) != 0);
	rsd_resident_free(v);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, manager_null);
	ATF_TP_ADD_TC(tp, manager_label);
	ATF_TP_ADD_TC(tp, lifetimes_null);
	ATF_TP_ADD_TC(tp, snapshot_null);
	ATF_TP_ADD_TC(tp, invalid_location_records);
	ATF_TP_ADD_TC(tp, closed_manager);
	return 0;
}
