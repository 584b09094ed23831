// SPDX-License-Identifier: MIT
/*
 * The error model (reference.md §17): rsd_strerror for every
 * code in both signs, the plan-error family, phase names and the
 * thread-local rsd_last_error() record with its structured budget fields.
 */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

ATF_TC_WITHOUT_HEAD(strerror_every_code);
ATF_TC_BODY(strerror_every_code, tc)
{
	const char *unknown = rsd_strerror(RSD_EMAX);

	ATF_REQUIRE(unknown);
	ATF_CHECK_STREQ(unknown, "unknown error");
	for (int c = 1; c < RSD_EMAX; c++) {
		const char *p = rsd_strerror(c), *n = rsd_strerror(-c);

		ATF_REQUIRE_MSG(p && n, "code %d has no text", c);
		ATF_CHECK_MSG(p[0], "code %d has an empty text", c);
		ATF_CHECK_STREQ(p, n);
		ATF_CHECK_MSG(strcmp(p, unknown), "code %d reads as unknown", c);
		for (int d = 1; d < c; d++)
			ATF_CHECK_MSG(strcmp(p, rsd_strerror(d)), "codes %d and %d share \"%s\"", d,
				      c, p);
	}
	ATF_CHECK(rsd_strerror(0) != NULL);
	ATF_CHECK_STREQ(rsd_strerror(-RSD_EMAX), "unknown error");
	ATF_CHECK_STREQ(rsd_strerror(RSD_EMAX + 1), "unknown error");
	ATF_CHECK_STREQ(rsd_strerror(1000), "unknown error");
	ATF_CHECK_STREQ(rsd_strerror(-1000), "unknown error");
	ATF_CHECK_STREQ(rsd_strerror(INT_MAX), "unknown error");
}

/* INT_MIN has no positive counterpart: it must not index the table. */
ATF_TC_WITHOUT_HEAD(strerror_int_min);
ATF_TC_BODY(strerror_int_min, tc)
{
	const char *s = rsd_strerror(INT_MIN);

	ATF_REQUIRE(s);
	ATF_CHECK_STREQ(s, "unknown error");
	ATF_CHECK(!rsd_err_is_plan_error(INT_MIN));
}

ATF_TC_WITHOUT_HEAD(plan_error_family);
ATF_TC_BODY(plan_error_family, tc)
{
	for (int c = 0; c <= RSD_EMAX; c++) {
		bool want = c == RSD_EPLAN || c == RSD_ESTALE || c == RSD_ESEARCHLIMIT;

		ATF_CHECK_EQ_MSG(rsd_err_is_plan_error(c), want, "code %d", c);
		ATF_CHECK_EQ_MSG(rsd_err_is_plan_error(-c), want, "code %d", -c);
	}
	/* Plan execution failure is a sibling, not a plan error. */
	ATF_CHECK(!rsd_err_is_plan_error(-RSD_EEXEC));
}

ATF_TC_WITHOUT_HEAD(phase_names);
ATF_TC_BODY(phase_names, tc)
{
	ATF_CHECK_STREQ(rsd_phase_name(RSD_PHASE_EXECUTE), "execute");
	ATF_CHECK_STREQ(rsd_phase_name(RSD_PHASE_RECLAIM), "reclaim");
	ATF_CHECK_STREQ(rsd_phase_name(RSD_PHASE_RESERVE), "reserve");
	ATF_CHECK_STREQ(rsd_phase_name(RSD_PHASE_ENTER), "enter");
	ATF_CHECK_STREQ(rsd_phase_name(RSD_PHASE_EXIT), "exit");
	ATF_CHECK(rsd_phase_name((enum rsd_plan_phase)99) != NULL);
}

static void check_absent_extras(const struct rsd_error *e)
{
	ATF_CHECK(!e->has_versions);
	ATF_CHECK(!e->has_search);
	ATF_CHECK_EQ(e->phase, RSD_PHASE_NONE);
	ATF_CHECK_EQ(e->failed_action_index, -1);
	ATF_CHECK_EQ(e->failed_reservation_index, -1);
	ATF_CHECK_EQ(e->cause, 0);
}

/* §17.2: ResidencyBudgetError carries the numbers at check time (§20.1). */
ATF_TC_WITHOUT_HEAD(last_error_budget_fields);
ATF_TC_BODY(last_error_budget_fields, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 128 } };
	struct rsd_reservation *r, *x = NULL;
	struct rsd_error e;
	struct cfx f;

	cfx_host(&f, b, 1);
	cfx_adopt(&f, PINNED, 32, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PINNED, 64, "w", &r));
	CHECK_VERSION(&f, 2);
	ERR(RSD_EBUDGET, rsd_reserve(f.m, PINNED, 33, "x", &x));
	e = *rsd_last_error();
	ATF_CHECK(x == NULL);
	ATF_CHECK_EQ(e.code, RSD_EBUDGET);
	ATF_CHECK(e.has_budget);
	ATF_CHECK_EQ(e.budget_bytes, 128);
	ATF_CHECK_EQ(e.used_bytes, 32);
	ATF_CHECK_EQ(e.reserved_bytes, 64);
	ATF_CHECK_EQ(e.requested_bytes, 33);
	ATF_CHECK(e.has_location);
	ATF_CHECK(rsd_location_equal(e.location, PINNED));
	ATF_CHECK_MSG(strstr(e.message, "pinned-host"), "message does not name the location: %s",
		      e.message);
	check_absent_extras(&e);
	CHECK_VERSION(&f, 2);

	/* The remainder itself still fits. */
	OK(rsd_reserve(f.m, PINNED, 32, "x", &x));
	CHECK_VERSION(&f, 3);

	/* A later failure of another kind replaces the whole record. */
	{
		struct rsd_handle forged = { rsd_manager_id(f.m), 987654321, &rsd_resident_type };

		ERR(RSD_EHANDLE, rsd_drop(f.m, forged, PINNED, NULL));
		e = *rsd_last_error();
		ATF_CHECK(!e.has_budget);
		check_absent_extras(&e);
	}
	OK(rsd_reservation_release(x));
	OK(rsd_reservation_release(r));
	rsd_reservation_free(x);
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/* A transition's pre-copy check reports the destination's numbers. */
ATF_TC_WITHOUT_HEAD(last_error_budget_transition);
ATF_TC_BODY(last_error_budget_transition, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 100 } };
	struct rsd_reservation *r;
	struct rsd_handle h;
	struct rsd_error e;
	struct cfx f;

	cfx_host(&f, b, 1);
	cfx_adopt(&f, PINNED, 30, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PINNED, 7, "seven", &r));
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	ERR(RSD_EBUDGET, rsd_ensure(f.m, h, PINNED, NULL, NULL));
	e = *rsd_last_error();
	ATF_CHECK(e.has_budget);
	ATF_CHECK_EQ(e.budget_bytes, 100);
	ATF_CHECK_EQ(e.used_bytes, 30);
	ATF_CHECK_EQ(e.reserved_bytes, 7);
	ATF_CHECK_EQ(e.requested_bytes, N);
	ATF_CHECK(rsd_location_equal(e.location, PINNED));
	ATF_CHECK(strstr(e.message, "pinned-host") != NULL);
	check_absent_extras(&e);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

struct other {
	struct cfx *f;
	int rc;
	struct rsd_error seen;
};

static void *fail_elsewhere(void *arg)
{
	struct other *o = arg;
	struct rsd_handle forged = { rsd_manager_id(o->f->m), 424242, &rsd_resident_type };

	o->rc = rsd_discard(o->f->m, forged, NULL);
	o->seen = *rsd_last_error();
	return NULL;
}

/* rsd_last_error() is per thread. */
ATF_TC_WITHOUT_HEAD(last_error_thread_local);
ATF_TC_BODY(last_error_thread_local, tc)
{
	struct rsd_reservation *r = NULL;
	struct other o = { 0 };
	pthread_t t;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	ERR(RSD_EINVAL, rsd_reserve(f.m, PAGEABLE, 1, " \t\n", &r));
	o.f = &f;
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, fail_elsewhere, &o), 0);
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	ATF_CHECK_EQ(o.rc, -RSD_EHANDLE);
	ATF_CHECK_EQ(o.seen.code, RSD_EHANDLE);
	/* This thread still sees its own failure. */
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EINVAL);
	ATF_CHECK(r == NULL);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, strerror_every_code);
	ATF_TP_ADD_TC(tp, strerror_int_min);
	ATF_TP_ADD_TC(tp, plan_error_family);
	ATF_TP_ADD_TC(tp, phase_names);
	ATF_TP_ADD_TC(tp, last_error_budget_fields);
	ATF_TP_ADD_TC(tp, last_error_budget_transition);
	ATF_TP_ADD_TC(tp, last_error_thread_local);
	return 0;
}
