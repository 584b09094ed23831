// SPDX-License-Identifier: MIT
/*
 * close and destroy (reference.md §15, §8.4 table, §8.9; edge cases 43,
 * 62, 63, 85; §20.11, §20.19): refusal with the lifetime counts, waiting for
 * and reaping pending leases, forced close and what survives it, the
 * closed-check prologues, idempotent close, and lifetime objects that
 * outlive their manager.
 *
 * state_version cannot be read through the API once a manager is closed,
 * so the version checks across close peek at the writer state through
 * the private core header (white box).
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rsd/rsd.h>

#include "../simwait.h"
#include "lfx.h"

#include "core/core.h"

/* The writer's version, readable after close (white box). */
static uint64_t raw_version(void)
{
	uint64_t v;

	pthread_mutex_lock(&lfx_m->lock);
	v = lfx_m->version;
	pthread_mutex_unlock(&lfx_m->lock);
	return v;
}

/* Edge case 62, §20.19 tail. */
ATF_TC_WITHOUT_HEAD(nowait_refuses_pending_wait_synchronizes);
ATF_TC_BODY(nowait_refuses_pending_wait_synchronizes, tc)
{
	struct simwait w;
	struct rsd_lease *l = NULL;
	struct rsd_snapshot *s = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v, got;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	l = lfx_pending_lease(a, st);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, RSD_CLOSE_NOWAIT));
	ATF_CHECK(lfx_msg_has("active_leases=0, pending_leases=1, holds=0, reservations=0"));
	/* Still open, nothing changed. */
	CHECK_VER(v);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	CHECK_LOC(lfx_cuda(0), 0, 0, 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st), 1);

	/* Waiting close: blocks until the consumer stream has run, then
	 * synchronizes the lease (+1), closes (+1). */
	simwait_start(&w, lfx_sd, st, 100);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	ATF_CHECK_MSG(simwait_blocked(&w), "close returned before its stream was completed");
	ATF_CHECK_EQ(raw_version(), v + 2);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st), 0);
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_manager_state_version_get(lfx_m, &got));
	ATF_CHECK_EQ(rsd_manager_state_version(lfx_m), 0);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ECLOSED);
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_snapshot_take(lfx_m, &s));
	ATF_CHECK(s == NULL);
	/* Closing again: 0, no version change. */
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	RSD_CHECK_OK(rsd_manager_close(lfx_m, RSD_CLOSE_NOWAIT | RSD_CLOSE_FORCE));
	ATF_CHECK_EQ(raw_version(), v + 2);
	rsd_lease_free(l);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* close(wait = false) reaps completed leases, then closes. */
ATF_TC_WITHOUT_HEAD(nowait_reaps_completed);
ATF_TC_BODY(nowait_reaps_completed, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	l = lfx_pending_lease(a, st);
	rsd_simdev_stream_complete(lfx_sd, st);
	v = lfx_ver();
	RSD_CHECK_OK(rsd_manager_close(lfx_m, RSD_CLOSE_NOWAIT));
	ATF_CHECK_EQ(raw_version(), v + 2); /* +1 reap, +1 close */
	rsd_lease_free(l);
	lfx_teardown();
}

/* §20.11-like: the refusal counts every kind of lifetime, nothing changes. */
ATF_TC_WITHOUT_HEAD(refusal_counts);
ATF_TC_BODY(refusal_counts, tc)
{
	struct rsd_reservation *r1 = NULL, *r2 = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_handle a, b;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	b = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &b, 1, RSD_LOC_PAGEABLE_HOST, &hd));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PAGEABLE_HOST, 0, "r1", &r1));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PINNED_HOST, 8, "r2", &r2));
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, 0));
	ATF_CHECK(lfx_msg_has("active_leases=1, pending_leases=0, holds=1, reservations=2"));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, RSD_CLOSE_NOWAIT));
	CHECK_VER(v);
	CHECK_MAT(a, RSD_LOC_PAGEABLE_HOST, 1, 0, 0);

	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, 0));
	ATF_CHECK(lfx_msg_has("active_leases=0, pending_leases=0, holds=1, reservations=2"));
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	RSD_REQUIRE_OK(rsd_reservation_release(r1));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(lfx_m, 0));
	ATF_CHECK(lfx_msg_has("holds=0, reservations=1"));
	RSD_REQUIRE_OK(rsd_reservation_release(r2));
	v = lfx_ver();
	/* Values need not be discarded before close. */
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	ATF_CHECK_EQ(raw_version(), v + 1);
	rsd_lease_free(l);
	rsd_hold_free(hd);
	rsd_reservation_free(r1);
	rsd_reservation_free(r2);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* Edge cases 63 and 85: forced close with live lifetimes. */
ATF_TC_WITHOUT_HEAD(force_close_with_lifetimes);
ATF_TC_BODY(force_close_with_lifetimes, tc)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct simwait w;
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

	lfx_setup(false);
	st = lfx_stream(0);
	id = rsd_manager_id(lfx_m);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &b, 1, lfx_cuda(0), &hd));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, lfx_cuda(0), 0, "kept", &r));
	ATF_REQUIRE_EQ(ops->event_record(lfx_sd, st, &busy), 0);
	v = lfx_ver();

	/* A forced close synchronizes the device: it waits for st. */
	simwait_start(&w, lfx_sd, st, 100);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, RSD_CLOSE_FORCE));
	ATF_CHECK_MSG(simwait_blocked(&w), "forced close returned before the device was idle");
	ATF_CHECK_EQ(raw_version(), v + 1);
	/* The device was synchronized. */
	ATF_CHECK_EQ(ops->event_query(lfx_sd, busy), 1);

	/* The lease still says active, but lookups find nothing. */
	ATF_CHECK(rsd_lease_active(l));
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_lease_value(l, a, &got));
	ATF_CHECK(got == NULL);
	/* Edge case 85: a non-lease handle is simply not a member. */
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_lease_value(l, b, &got));
	RSD_REQUIRE_OK(rsd_lease_handle_at(l, 0, &h));
	ATF_CHECK(rsd_handle_equal(h, a));
	ATF_CHECK(rsd_hold_active(hd));
	ATF_CHECK(rsd_reservation_active(r));

	/* Still working: id, locations, close. */
	ATF_CHECK_EQ(rsd_manager_id(lfx_m), id);
	ATF_REQUIRE_EQ(rsd_manager_locations(lfx_m, locs, 4), 1);
	ATF_CHECK(rsd_location_equal(locs[0], lfx_cuda(0)));
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	RSD_CHECK_OK(rsd_manager_close(lfx_m, RSD_CLOSE_FORCE));
	ATF_CHECK_EQ(raw_version(), v + 1);

	/* Closed-check prologues. */
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_manager_state_version_get(lfx_m, &v));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_snapshot_take(lfx_m, &s));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_explain(lfx_m, &plan, NULL, &ex));
	RSD_REQUIRE_OK(
		rsd_resident_alloc(lfx_m, &rsd_resident_type, lfx_cuda(0), 1, &n, NULL, 0, &res));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_adopt(lfx_m, res, NULL, RSD_REPLICABLE, &h));
	rsd_resident_free(res); /* still the caller's */
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_ensure(lfx_m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l2));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_hold(lfx_m, &a, 1, lfx_cuda(0), &hd2));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_reserve(lfx_m, lfx_cuda(0), 1, "late", &r2));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_manager_reap(lfx_m));
	ATF_CHECK(s == NULL && ex == NULL && l2 == NULL && hd2 == NULL && r2 == NULL);

	/* Releasing the survivors is silent. */
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	ATF_CHECK(!rsd_lease_active(l));
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_value(l, a, &got));
	RSD_CHECK_OK(rsd_hold_release(hd));
	ATF_CHECK(!rsd_hold_active(hd));
	RSD_CHECK_OK(rsd_reservation_release(r));
	ATF_CHECK(!rsd_reservation_active(r));
	ATF_CHECK_EQ(raw_version(), v + 1);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	rsd_lease_free(l);
	rsd_hold_free(hd);
	rsd_reservation_free(r);
	ops->event_destroy(lfx_sd, busy);
	lfx_teardown();
}

/*
 * A pending lease whose stream never completes (on-command progress, never
 * commanded) does not stop a forced close without waiting: the close
 * returns at once, and the value the stream may still use is kept
 * allocated, with a warning, instead of freed. SIGALRM ends a close that
 * waits anyway.
 */
ATF_TC_WITHOUT_HEAD(force_close_pending);
ATF_TC_BODY(force_close_pending, tc)
{
	struct rsd_lease *l = NULL, *busy = NULL;
	struct rsd_handle a, b;
	void *st;
	uint64_t v;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b = lfx_put(lfx_cuda(1), 128, NULL);
	l = lfx_pending_lease(a, st);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &b, 1, lfx_cuda(1), lfx_stream(1), &busy));
	v = lfx_ver();
	alarm(20);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, RSD_CLOSE_NOWAIT | RSD_CLOSE_FORCE));
	alarm(0);
	ATF_CHECK_EQ(raw_version(), v + 1);
	/* The kept values' storage is still allocated on both devices. */
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(lfx_sd, 0), 64);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(lfx_sd, 1), 128);
	ATF_CHECK_EQ(lfx_nwarn, 1);
	ATF_CHECK_MSG(strstr(lfx_lastwarn, "2 value(s) of 192 bytes") &&
			      strstr(lfx_lastwarn, "kept allocated"),
		      "%s", lfx_lastwarn);
	rsd_lease_free(busy);
	rsd_lease_free(l);
	lfx_teardown();
}

/* Forced and waiting: the devices are synchronized first, nothing is kept. */
ATF_TC_WITHOUT_HEAD(force_close_waits_for_devices);
ATF_TC_BODY(force_close_waits_for_devices, tc)
{
	struct simwait w;
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	l = lfx_pending_lease(a, st);
	v = lfx_ver();
	simwait_start(&w, lfx_sd, st, 100);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, RSD_CLOSE_FORCE));
	ATF_CHECK_MSG(simwait_blocked(&w), "forced close returned before the device was idle");
	ATF_CHECK_EQ(raw_version(), v + 2); /* the lease's reap, then the close */
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(lfx_sd, 0), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st), 0);
	rsd_lease_free(l);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
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
	struct simwait w;
	void *st;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	p = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l));
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &lp));
	RSD_REQUIRE_OK(rsd_lease_release(lp, 0)); /* pending */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &lh));
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &lf));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, &hd));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &a, 1, lfx_cuda(0), &hf));
	RSD_REQUIRE_OK(rsd_reserve(lfx_m, RSD_LOC_PINNED_HOST, 10, "orphan", &r));

	/* Destroying force-closes, which waits for the busy stream. */
	simwait_start(&w, lfx_sd, st, 100);
	rsd_manager_destroy(lfx_m);
	ATF_CHECK_MSG(simwait_blocked(&w), "destroy returned before the device was idle");
	lfx_m = NULL;
	ATF_CHECK(rsd_lease_active(l));
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_lease_value(l, a, &got));
	RSD_CHECK_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	ATF_CHECK(!rsd_lease_active(l));
	RSD_CHECK_OK(rsd_lease_release(lp, 0));
	RSD_CHECK_OK(rsd_lease_release(lh, 0));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_lease_add_consumer_stream(lf, st));
	RSD_CHECK_OK(rsd_hold_release(hd));
	RSD_CHECK_OK(rsd_reservation_release(r));
	ATF_CHECK_EQ(rsd_reservation_nbytes(r), 10);
	ATF_CHECK_STREQ(rsd_reservation_label(r), "orphan");
	rsd_lease_free(l);
	rsd_lease_free(lp);
	rsd_lease_free(lh);
	rsd_lease_free(lf); /* never released */
	rsd_hold_free(hd);
	rsd_hold_free(hf); /* never released */
	rsd_reservation_free(r);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_stop_pump();
	rsd_simdev_destroy(lfx_sd);
	lfx_sd = NULL;
}

/* Force close after a failed waiting release (its event sync and the
 * stream sync that would have answered both failed) left the lease
 * pending. */
ATF_TC_WITHOUT_HEAD(force_close_after_failed_wait);
ATF_TC_BODY(force_close_after_failed_wait, tc)
{
	const struct rsd_resident *got = NULL;
	struct simwait w;
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *st;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l));
	rsd_simdev_fail_all(lfx_sd, RSD_SIMDEV_EVENT_SYNC, RSD_EDEVICE);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_simdev_fail_all(lfx_sd, RSD_SIMDEV_EVENT_SYNC, 0);
	ATF_CHECK(rsd_lease_active(l));
	simwait_start(&w, lfx_sd, st, 100);
	RSD_REQUIRE_OK(rsd_manager_close(lfx_m, RSD_CLOSE_FORCE));
	ATF_CHECK_MSG(simwait_blocked(&w), "forced close returned before the device was idle");
	/* Let the close's retirements be reclaimed. */
	rsd__rcu_register();
	urcu_memb_barrier();
	ATF_CHECK(rsd_lease_active(l));
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_lease_value(l, a, &got));
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	ATF_CHECK(!rsd_lease_active(l));
	rsd_lease_free(l);
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, nowait_refuses_pending_wait_synchronizes);
	ATF_TP_ADD_TC(tp, nowait_reaps_completed);
	ATF_TP_ADD_TC(tp, refusal_counts);
	ATF_TP_ADD_TC(tp, force_close_with_lifetimes);
	ATF_TP_ADD_TC(tp, force_close_pending);
	ATF_TP_ADD_TC(tp, force_close_waits_for_devices);
	ATF_TP_ADD_TC(tp, objects_outlive_manager);
	ATF_TP_ADD_TC(tp, force_close_after_failed_wait);
	return atf_no_error();
}
