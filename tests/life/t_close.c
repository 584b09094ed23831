// SPDX-License-Identifier: MIT
/*
 * close and destroy (semantics.md §14, §10.4 table, §10.9; edge cases 43,
 * 62, 63, 85; W11, W19): refusal with the lifetime counts, waiting for
 * and reaping pending leases, forced close and what survives it, the
 * closed-check prologues, idempotent close, and lifetime objects that
 * outlive their manager.
 *
 * state_version cannot be read through the API once a manager is closed,
 * so the version checks across close peek at the writer state through
 * the private core header (white box).
 */
#include <atf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "core/core.h"

static struct rsd_simdev *sd;
static struct rsd_manager *m;
static unsigned nwarn;
static char lastwarn[512];

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	nwarn++;
	snprintf(lastwarn, sizeof(lastwarn), "%s", msg);
}

/* A manager on the simulated device, or a host-only one. */
static void setup(bool host_only)
{
	struct rsd_simdev_config sc = { .ndevices = 2, .auto_complete = false, .pooled = true };
	struct rsd_manager_config cfg = { 0 };

	if (!host_only) {
		ATF_REQUIRE_EQ(rsd_simdev_create(&sc, &sd), 0);
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = sd;
	}
	cfg.host_only = host_only;
	cfg.warn = on_warn;
	ATF_REQUIRE_EQ(rsd_manager_create(&cfg, &m), 0);
}

static void teardown(void)
{
	rsd_manager_destroy(m);
	m = NULL;
	if (sd)
		rsd_simdev_destroy(sd);
	sd = NULL;
}

static struct rsd_location cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

static void *stream(int device)
{
	void *s = NULL;

	ATF_REQUIRE_EQ(rsd_simdev_stream_create(sd, device, &s), 0);
	return s;
}

/* Adopt a fresh n-byte REPLICABLE value at a location. */
static struct rsd_handle put(struct rsd_location at, uint64_t n, struct rsd_resident **rp)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &r), 0);
	ATF_REQUIRE_EQ(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h), 0);
	if (rp)
		*rp = r;
	return h;
}

static uint64_t ver(void)
{
	uint64_t v = 0;

	ATF_REQUIRE_EQ(rsd_manager_state_version_get(m, &v), 0);
	return v;
}

static bool msg_has(const char *s)
{
	return strstr(rsd_last_error()->message, s) != NULL;
}

static struct rsd_snapshot *snap(void)
{
	struct rsd_snapshot *s = NULL;

	ATF_REQUIRE_EQ(rsd_snapshot_take(m, &s), 0);
	return s;
}

static const struct rsd_materialization_snapshot *
mat_in(const struct rsd_snapshot *s, struct rsd_handle h, struct rsd_location at)
{
	for (size_t i = 0; i < s->nvalues; i++) {
		if (!rsd_handle_equal(s->values[i].handle, h))
			continue;
		for (size_t j = 0; j < s->values[i].nmaterializations; j++)
			if (rsd_location_equal(s->values[i].materializations[j].location, at))
				return &s->values[i].materializations[j];
	}
	return NULL;
}

static const struct rsd_location_snapshot *loc_in(const struct rsd_snapshot *s,
						  struct rsd_location at)
{
	for (size_t i = 0; i < s->nlocations; i++)
		if (rsd_location_equal(s->locations[i].location, at))
			return &s->locations[i];
	return NULL;
}

/* The protection counts of h's materialization at a location. */
#define CHECK_MAT(h, at, use, hold, pend) check_mat(__LINE__, h, at, use, hold, pend)
static void check_mat(int line, struct rsd_handle h, struct rsd_location at, uint64_t use,
		      uint64_t hold, uint64_t pend)
{
	struct rsd_snapshot *s = snap();
	const struct rsd_materialization_snapshot *x = mat_in(s, h, at);

	ATF_CHECK_MSG(x != NULL, "line %d: value %llu has no materialization there", line,
		      (unsigned long long)h.id);
	if (x) {
		ATF_CHECK_EQ_MSG(x->use_count, use, "line %d: use_count %llu, expected %llu", line,
				 (unsigned long long)x->use_count, (unsigned long long)use);
		ATF_CHECK_EQ_MSG(x->hold_count, hold, "line %d: hold_count %llu, expected %llu", line,
				 (unsigned long long)x->hold_count, (unsigned long long)hold);
		ATF_CHECK_EQ_MSG(x->pending_event_count, pend,
				 "line %d: pending_event_count %llu, expected %llu", line,
				 (unsigned long long)x->pending_event_count, (unsigned long long)pend);
	}
	rsd_snapshot_free(s);
}

/* The location's sums of protection counts over its materializations. */
#define CHECK_LOC(at, use, hold, pend) check_loc(__LINE__, at, use, hold, pend)
static void check_loc(int line, struct rsd_location at, uint64_t use, uint64_t hold, uint64_t pend)
{
	struct rsd_snapshot *s = snap();
	const struct rsd_location_snapshot *x = loc_in(s, at);

	ATF_CHECK_MSG(x != NULL, "line %d: location not known", line);
	if (x) {
		ATF_CHECK_EQ_MSG(x->use_count, use, "line %d: location use_count %llu, expected %llu",
				 line, (unsigned long long)x->use_count, (unsigned long long)use);
		ATF_CHECK_EQ_MSG(x->hold_count, hold,
				 "line %d: location hold_count %llu, expected %llu", line,
				 (unsigned long long)x->hold_count, (unsigned long long)hold);
		ATF_CHECK_EQ_MSG(x->pending_event_count, pend,
				 "line %d: location pending_event_count %llu, expected %llu", line,
				 (unsigned long long)x->pending_event_count, (unsigned long long)pend);
	}
	rsd_snapshot_free(s);
}

#define CHECK_VER(expected) check_ver(__LINE__, expected)
static void check_ver(int line, uint64_t expected)
{
	uint64_t v = ver();

	ATF_CHECK_EQ_MSG(v, expected, "line %d: state_version %llu, expected %llu", line,
			 (unsigned long long)v, (unsigned long long)expected);
}


/* The writer's version, readable after close (white box). */
static uint64_t raw_version(void)
{
	uint64_t v;

	pthread_mutex_lock(&m->lock);
	v = m->version;
	pthread_mutex_unlock(&m->lock);
	return v;
}

/* Edge case 62, W19 tail. */
ATF_TC_WITHOUT_HEAD(nowait_refuses_pending_wait_synchronizes);
ATF_TC_BODY(nowait_refuses_pending_wait_synchronizes, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_snapshot *s = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v, got;

	setup(false);
	st = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	v = ver();
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_NOWAIT), -RSD_EINUSE);
	ATF_CHECK(msg_has("active_leases=0, pending_leases=1, holds=0, reservations=0"));
	/* Still open, nothing changed. */
	CHECK_VER(v);
	CHECK_MAT(a, cuda(0), 0, 0, 1);
	CHECK_LOC(cuda(0), 0, 0, 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, st), 1);

	/* Waiting close: synchronizes the lease (+1), closes (+1). */
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	ATF_CHECK_EQ(raw_version(), v + 2);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, st), 0);
	ATF_CHECK_EQ(rsd_manager_state_version_get(m, &got), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_manager_state_version(m), 0);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_snapshot_take(m, &s), -RSD_ECLOSED);
	ATF_CHECK(s == NULL);
	/* Closing again: 0, no version change. */
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_NOWAIT | RSD_CLOSE_FORCE), 0);
	ATF_CHECK_EQ(raw_version(), v + 2);
	rsd_lease_free(l);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
}

/* close(wait = false) reaps completed leases, then closes. */
ATF_TC_WITHOUT_HEAD(nowait_reaps_completed);
ATF_TC_BODY(nowait_reaps_completed, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v;

	setup(false);
	st = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	rsd_simdev_stream_complete(sd, st);
	v = ver();
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_NOWAIT), 0);
	ATF_CHECK_EQ(raw_version(), v + 2); /* +1 reap, +1 close */
	rsd_lease_free(l);
	teardown();
}

/* W11-like: the refusal counts every kind of lifetime, nothing changes. */
ATF_TC_WITHOUT_HEAD(refusal_counts);
ATF_TC_BODY(refusal_counts, tc)
{
	struct rsd_reservation *r1 = NULL, *r2 = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_handle a, b;
	uint64_t v;

	setup(true);
	a = put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	b = put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l), 0);
	ATF_REQUIRE_EQ(rsd_hold(m, &b, 1, RSD_LOC_PAGEABLE_HOST, &hd), 0);
	ATF_REQUIRE_EQ(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 0, "r1", &r1), 0);
	ATF_REQUIRE_EQ(rsd_reserve(m, RSD_LOC_PINNED_HOST, 8, "r2", &r2), 0);
	v = ver();
	ATF_CHECK_EQ(rsd_manager_close(m, 0), -RSD_EINUSE);
	ATF_CHECK(msg_has("active_leases=1, pending_leases=0, holds=1, reservations=2"));
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_NOWAIT), -RSD_EINUSE);
	CHECK_VER(v);
	CHECK_MAT(a, RSD_LOC_PAGEABLE_HOST, 1, 0, 0);

	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	ATF_CHECK_EQ(rsd_manager_close(m, 0), -RSD_EINUSE);
	ATF_CHECK(msg_has("active_leases=0, pending_leases=0, holds=1, reservations=2"));
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	ATF_REQUIRE_EQ(rsd_reservation_release(r1), 0);
	ATF_CHECK_EQ(rsd_manager_close(m, 0), -RSD_EINUSE);
	ATF_CHECK(msg_has("holds=0, reservations=1"));
	ATF_REQUIRE_EQ(rsd_reservation_release(r2), 0);
	v = ver();
	/* Values need not be discarded before close. */
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	ATF_CHECK_EQ(raw_version(), v + 1);
	rsd_lease_free(l);
	rsd_hold_free(hd);
	rsd_reservation_free(r1);
	rsd_reservation_free(r2);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
}

/* Edge cases 63 and 85: forced close with live lifetimes. */
ATF_TC_WITHOUT_HEAD(force_close_with_lifetimes);
ATF_TC_BODY(force_close_with_lifetimes, tc)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_reservation *r = NULL, *r2 = NULL;
	struct rsd_explanation *ex = NULL;
	struct rsd_plan plan = { .name = "after-close" };
	struct rsd_resident *res = NULL;
	const struct rsd_resident *got = NULL;
	struct rsd_snapshot *s = NULL;
	struct rsd_lease *l = NULL, *l2 = NULL;
	struct rsd_hold *hd = NULL, *hd2 = NULL;
	struct rsd_location locs[4];
	struct rsd_handle a, b, h;
	uint64_t v, id, n = 16;
	void *st, *busy = NULL;

	setup(false);
	st = stream(0);
	id = rsd_manager_id(m);
	a = put(cuda(0), 64, NULL);
	b = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l), 0);
	ATF_REQUIRE_EQ(rsd_hold(m, &b, 1, cuda(0), &hd), 0);
	ATF_REQUIRE_EQ(rsd_reserve(m, cuda(0), 0, "kept", &r), 0);
	ATF_REQUIRE_EQ(ops->event_record(sd, st, &busy), 0);
	v = ver();

	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
	ATF_CHECK_EQ(raw_version(), v + 1);
	/* The device was synchronized. */
	ATF_CHECK_EQ(ops->event_query(sd, busy), 1);

	/* The lease still says active, but lookups find nothing. */
	ATF_CHECK(rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_lease_value(l, a, &got), -RSD_EUNAVAILABLE);
	ATF_CHECK(got == NULL);
	/* Edge case 85: a non-lease handle is simply not a member. */
	ATF_CHECK_EQ(rsd_lease_value(l, b, &got), -RSD_ENOTFOUND);
	ATF_REQUIRE_EQ(rsd_lease_handle_at(l, 0, &h), 0);
	ATF_CHECK(rsd_handle_equal(h, a));
	ATF_CHECK(rsd_hold_active(hd));
	ATF_CHECK(rsd_reservation_active(r));

	/* Still working: id, locations, close. */
	ATF_CHECK_EQ(rsd_manager_id(m), id);
	ATF_REQUIRE_EQ(rsd_manager_locations(m, locs, 4), 1);
	ATF_CHECK(rsd_location_equal(locs[0], cuda(0)));
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
	ATF_CHECK_EQ(raw_version(), v + 1);

	/* Closed-check prologues. */
	ATF_CHECK_EQ(rsd_manager_state_version_get(m, &v), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_snapshot_take(m, &s), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_explain(m, &plan, NULL, &ex), -RSD_ECLOSED);
	ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, cuda(0), 1, &n, NULL, 0, &res), 0);
	ATF_CHECK_EQ(rsd_adopt(m, res, NULL, RSD_REPLICABLE, &h), -RSD_ECLOSED);
	rsd_resident_free(res); /* still the caller's */
	ATF_CHECK_EQ(rsd_ensure(m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_drop(m, a, cuda(0), NULL), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l2), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_hold(m, &a, 1, cuda(0), &hd2), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_reserve(m, cuda(0), 1, "late", &r2), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_manager_reap(m), -RSD_ECLOSED);
	ATF_CHECK(s == NULL && ex == NULL && l2 == NULL && hd2 == NULL && r2 == NULL);

	/* Releasing the survivors is silent. */
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	ATF_CHECK(!rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_lease_value(l, a, &got), -RSD_ELIFETIME);
	ATF_CHECK_EQ(rsd_hold_release(hd), 0);
	ATF_CHECK(!rsd_hold_active(hd));
	ATF_CHECK_EQ(rsd_reservation_release(r), 0);
	ATF_CHECK(!rsd_reservation_active(r));
	ATF_CHECK_EQ(raw_version(), v + 1);
	ATF_CHECK_EQ(nwarn, 0);
	rsd_lease_free(l);
	rsd_hold_free(hd);
	rsd_reservation_free(r);
	ops->event_destroy(sd, busy);
	teardown();
}

/* A pending lease with busy streams does not stop a forced close. */
ATF_TC_WITHOUT_HEAD(force_close_pending);
ATF_TC_BODY(force_close_pending, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v;

	setup(false);
	st = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	v = ver();
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_NOWAIT | RSD_CLOSE_FORCE), 0);
	ATF_CHECK_EQ(raw_version(), v + 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, st), 0);
	rsd_lease_free(l);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
}

/*
 * Lifetime objects released and freed after rsd_manager_destroy (which
 * force-closes an open manager) are inert: no crash, no use after free
 * (run under ASan), no warning.
 */
ATF_TC_WITHOUT_HEAD(objects_outlive_manager);
ATF_TC_BODY(objects_outlive_manager, tc)
{
	const struct rsd_resident *got = NULL;
	struct rsd_reservation *r = NULL;
	struct rsd_lease *l = NULL, *lp = NULL, *lh = NULL, *lf = NULL;
	struct rsd_hold *hd = NULL, *hf = NULL;
	struct rsd_handle a, p;
	void *st;

	setup(false);
	st = stream(0);
	a = put(cuda(0), 64, NULL);
	p = put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l), 0);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &lp), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(lp, 0), 0); /* pending */
	ATF_REQUIRE_EQ(rsd_acquire(m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &lh), 0);
	ATF_REQUIRE_EQ(rsd_acquire(m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &lf), 0);
	ATF_REQUIRE_EQ(rsd_hold(m, &p, 1, RSD_LOC_PAGEABLE_HOST, &hd), 0);
	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, cuda(0), &hf), 0);
	ATF_REQUIRE_EQ(rsd_reserve(m, RSD_LOC_PINNED_HOST, 10, "orphan", &r), 0);

	rsd_manager_destroy(m);
	m = NULL;
	ATF_CHECK(rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_lease_value(l, a, &got), -RSD_EUNAVAILABLE);
	ATF_CHECK_EQ(rsd_lease_release(l, RSD_RELEASE_WAIT), 0);
	ATF_CHECK(!rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_lease_release(lp, 0), 0);
	ATF_CHECK_EQ(rsd_lease_release(lh, 0), 0);
	ATF_CHECK_EQ(rsd_lease_add_consumer_stream(lf, st), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd_hold_release(hd), 0);
	ATF_CHECK_EQ(rsd_reservation_release(r), 0);
	ATF_CHECK_EQ(rsd_reservation_nbytes(r), 10);
	ATF_CHECK_STREQ(rsd_reservation_label(r), "orphan");
	rsd_lease_free(l);
	rsd_lease_free(lp);
	rsd_lease_free(lh);
	rsd_lease_free(lf); /* never released */
	rsd_hold_free(hd);
	rsd_hold_free(hf); /* never released */
	rsd_reservation_free(r);
	ATF_CHECK_EQ(nwarn, 0);
	rsd_simdev_destroy(sd);
	sd = NULL;
}

/* Force close after a failed waiting release left the lease pending. */
ATF_TC_WITHOUT_HEAD(force_close_after_failed_wait);
ATF_TC_BODY(force_close_after_failed_wait, tc)
{
	const struct rsd_resident *got = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;

	setup(false);
	st = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l), 0);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	ATF_CHECK_EQ(rsd_lease_release(l, RSD_RELEASE_WAIT), -RSD_EDEVICE);
	ATF_CHECK(rsd_lease_active(l));
	ATF_REQUIRE_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
	/* Let the close's retirements be reclaimed. */
	rsd__rcu_register();
	urcu_memb_barrier();
	ATF_CHECK(rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_lease_value(l, a, &got), -RSD_EUNAVAILABLE);
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	ATF_CHECK(!rsd_lease_active(l));
	rsd_lease_free(l);
	teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, nowait_refuses_pending_wait_synchronizes);
	ATF_TP_ADD_TC(tp, nowait_reaps_completed);
	ATF_TP_ADD_TC(tp, refusal_counts);
	ATF_TP_ADD_TC(tp, force_close_with_lifetimes);
	ATF_TP_ADD_TC(tp, force_close_pending);
	ATF_TP_ADD_TC(tp, objects_outlive_manager);
	ATF_TP_ADD_TC(tp, force_close_after_failed_wait);
	return atf_no_error();
}
