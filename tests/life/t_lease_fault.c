// SPDX-License-Identifier: MIT
/*
 * Lease failure paths (reference.md §8.4 steps 4, 5 and 7, §8.5, §8.9):
 * an event query failing during reaping, abandonment of active leases, the
 * fallback when recording a completion event fails, re-validation of the
 * consumer streams at release, and a waiting release whose event
 * synchronization fails after the lease turned pending.
 *
 * The simulated device stands in for CUDA; its fault injection makes the
 * driver calls fail on command.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "../simwait.h"
#include "lfx.h"
#include <urcu/urcu-memb.h>

/*
 * §8.5: an error while querying an event during reaping is no answer: the
 * event's stream is synchronized and the event asked again. When that sync
 * fails too, the error propagates (the writer call fails, the lease stays
 * pending); explain treats it as "still protected". The failed prologue must not leave the thread marked as
 * inside a transition (§5.3).
 */
ATF_TC_WITHOUT_HEAD(reap_query_error_propagates);
ATF_TC_BODY(reap_query_error_propagates, tc)
{
	struct rsd_action drop;
	struct rsd_plan plan = { .name = "drop-a" };
	struct rsd_explanation *ex = NULL;
	struct rsd_lease *l, *l2 = NULL;
	struct rsd_handle a;
	void *st;
	uint64_t v;

	lfx_setup(false);
	st = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	l = lfx_pending_lease(a, st);
	rsd_simdev_stream_complete(lfx_sd, st);
	v = lfx_ver();

	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_manager_reap(lfx_m));
	ATF_CHECK(lfx_msg_has("event_query"));
	CHECK_VER(v);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l2));
	ATF_CHECK(l2 == NULL);
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	CHECK_VER(v);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);

	drop = rsd_action_drop(a, lfx_cuda(0));
	plan.reclaim = &drop;
	plan.nreclaim = 1;
	rsd_simdev_fail_all(lfx_sd, RSD_SIMDEV_EVENT_QUERY, RSD_EDEVICE);
	RSD_REQUIRE_OK(rsd_explain(lfx_m, &plan, NULL, &ex));
	ATF_CHECK(!ex->feasible);
	rsd_explanation_free(ex);
	rsd_simdev_fail_all(lfx_sd, RSD_SIMDEV_EVENT_QUERY, 0);

	/* Not stuck: the next writer call on this thread reaps and drops. */
	RSD_CHECK_OK(rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	CHECK_VER(v + 2);
	rsd_lease_free(l);
	lfx_teardown();
}

/* ---- abandonment and fallbacks -------------------------------------------- */

ATF_TC_WITHOUT_HEAD(abandoned_lease_is_released);
ATF_TC_BODY(abandoned_lease_is_released, tc)
{
	struct simwait sw;
	struct rsd_lease *l = NULL;
	struct rsd_handle a, p;
	void *s;
	uint64_t v;

	lfx_setup(false);
	s = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	p = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);

	/* Host lease: released (+1) with one warning. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	v = lfx_ver();
	rsd_lease_free(l);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(lfx_nwarn, 1);
	ATF_CHECK_STREQ(lfx_lastwarn, "lease on 1 value(s) was freed without release: released it");
	CHECK_MAT(p, RSD_LOC_PAGEABLE_HOST, 0, 0, 0);

	/* GPU lease, stream busy: released with wait (+2), nothing pending;
	 * freeing blocks until the consumer stream has run. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	v = lfx_ver();
	ATF_REQUIRE(simwait_start(&sw, lfx_sd, s, 100));
	rsd_lease_free(l);
	ATF_CHECK_MSG(simwait_blocked(&sw), "abandoning returned before its stream was completed");
	CHECK_VER(v + 2);
	ATF_CHECK_EQ(lfx_nwarn, 2);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s), 0);

	/* Freeing a released lease is quiet. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	v = lfx_ver();
	rsd_lease_free(l);
	CHECK_VER(v);
	ATF_CHECK_EQ(lfx_nwarn, 2);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1); /* the pending lease stays */
	rsd_simdev_stream_complete(lfx_sd, s);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 1);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(event_record_failure_falls_back);
ATF_TC_BODY(event_record_failure_falls_back, tc)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	struct simwait sw;
	void *s, *s2, *busy = NULL, *busy2 = NULL;
	unsigned w;
	uint64_t v;

	lfx_setup(false);
	s = lfx_stream(0);
	s2 = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL));

	/* Work in flight on the consumer stream. */
	ATF_REQUIRE_EQ(ops->event_record(lfx_sd, s, &busy), 0);
	ATF_REQUIRE_EQ(ops->event_query(lfx_sd, busy), 0);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_RECORD, 1, RSD_EDEVICE);
	v = lfx_ver();
	w = lfx_nwarn;
	/* The fallback synchronizes the consumer stream: it blocks. */
	ATF_REQUIRE(simwait_start(&sw, lfx_sd, s, 100));
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	ATF_CHECK_MSG(simwait_blocked(&sw),
		      "the fallback returned before its stream was completed");
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(lfx_nwarn, w + 1);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	/* The fallback synchronized the consumer stream. */
	ATF_CHECK_EQ(ops->event_query(lfx_sd, busy), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, NULL), 0);
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 1);
	rsd_lease_free(l);
	ATF_CHECK_EQ(lfx_nwarn, w + 1);

	/* Second of two recordings fails: the first event is not left behind,
	 * both streams are synchronized, the lease is gone; same with wait. */
	ATF_REQUIRE_EQ(ops->event_record(lfx_sd, s2, &busy2), 0);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	RSD_REQUIRE_OK(rsd_lease_add_consumer_stream(l, s2));
	rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_RECORD, 2, RSD_EDEVICE);
	v = lfx_ver();
	ATF_CHECK_EQ(RELEASE_WAIT(l, NULL), 0);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(lfx_nwarn, w + 2);
	ATF_CHECK_EQ(ops->event_query(lfx_sd, busy2), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, NULL), 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	rsd_lease_free(l);

	/* Unprotected now. */
	RSD_CHECK_OK(rsd_drop(lfx_m, a, lfx_cuda(0), NULL));
	ops->event_destroy(lfx_sd, busy);
	ops->event_destroy(lfx_sd, busy2);
	lfx_teardown();
}

/* A host function on a consumer stream: counts that it ran. */
static void consumer_ran(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

/*
 * A consumer stream destroyed before release fails the re-validation of
 * §8.4 step 4: no event can be recorded behind its work, which still runs
 * (as after cudaStreamDestroy()). The release waits for the device
 * instead, ends the lease (+1) and warns; nothing is recorded on the
 * lease's other stream. Freed unreleased, such a lease is released the
 * same way and keeps nothing alive: close(0) then succeeds.
 */
ATF_TC_WITHOUT_HEAD(release_revalidates_streams);
ATF_TC_BODY(release_revalidates_streams, tc)
{
	struct rsd_lease *l = NULL;
	atomic_int ran = 0;
	struct simwait sw;
	struct rsd_handle a;
	char want[160];
	void *s, *s2;
	uint64_t v;

	lfx_setup(false);
	s = lfx_stream(0);
	s2 = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	RSD_REQUIRE_OK(rsd_lease_add_consumer_stream(l, s2));
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(lfx_sd, s2, consumer_ran, &ran));
	rsd_simdev_stream_destroy(lfx_sd, s2);
	v = lfx_ver();
	ATF_REQUIRE(simwait_start(&sw, lfx_sd, NULL, 100));
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	ATF_CHECK_MSG(simwait_blocked(&sw),
		      "the release returned before the destroyed stream's work ran");
	ATF_CHECK_EQ(atomic_load(&ran), 1);
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_VER(v + 1);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, s), 0);
	ATF_CHECK_EQ(lfx_nwarn, 1);
	snprintf(want, sizeof(want), "on cuda:0 lost consumer stream %p (", s2);
	ATF_CHECK_MSG(strstr(lfx_lastwarn, want), "warning: %s", lfx_lastwarn);
	ATF_CHECK_MSG(strstr(lfx_lastwarn, "): synchronized the device"), "warning: %s",
		      lfx_lastwarn);
	rsd_lease_free(l);

	/* Abandoned: released the same way (+1), one more warning each. */
	s2 = lfx_stream(0);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s2, &l));
	rsd_simdev_stream_destroy(lfx_sd, s2);
	v = lfx_ver();
	rsd_lease_free(l);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(lfx_nwarn, 3);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	lfx_teardown();
}

/*
 * Waiting fails after the lease turned pending (event synchronization
 * error, and the stream sync that would answer instead fails too): the
 * error propagates, the caller's object stays active (§8.3:
 * inactive only after a successful manager-side release) and the lease is
 * pending. A later release is a silent no-op, also once the pending lease
 * has been reaped and its record freed.
 */
ATF_TC_WITHOUT_HEAD(release_wait_sync_failure);
ATF_TC_BODY(release_wait_sync_failure, tc)
{
	struct rsd_lease *l = NULL, *l2 = NULL;
	struct rsd_handle a, b;
	void *s;
	uint64_t v;
	int i;

	lfx_setup(false);
	s = lfx_stream(0);
	a = lfx_put(lfx_cuda(0), 64, NULL);
	b = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	rsd_simdev_fail_all(lfx_sd, RSD_SIMDEV_EVENT_SYNC, RSD_EDEVICE);
	v = lfx_ver();
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_simdev_fail_all(lfx_sd, RSD_SIMDEV_EVENT_SYNC, 0);
	ATF_CHECK(rsd_lease_active(l));
	CHECK_VER(v + 1);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 1);

	rsd_simdev_stream_complete(lfx_sd, s);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 2);
	CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
	/* Let grace periods pass so that the reaped record is really freed. */
	for (i = 0; i < 4; i++) {
		RSD_REQUIRE_OK(rsd_ensure(lfx_m, b, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
		RSD_REQUIRE_OK(rsd_drop(lfx_m, b, RSD_LOC_PAGEABLE_HOST, NULL));
	}
	urcu_memb_barrier();
	/* A new lease (its record may reuse the freed one's memory) must not
	 * be touched by releasing the old object. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &b, 1, lfx_cuda(0), s, &l2));
	v = lfx_ver();
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_VER(v);
	CHECK_MAT(b, lfx_cuda(0), 1, 0, 0);
	CHECK_LOC(lfx_cuda(0), 1, 0, 0);
	ATF_CHECK(rsd_lease_active(l2));
	ATF_CHECK_EQ(RELEASE_WAIT(l2, s), 0);
	CHECK_VER(v + 2);
	CHECK_LOC(lfx_cuda(0), 0, 0, 0);
	rsd_lease_free(l);
	rsd_lease_free(l2);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, reap_query_error_propagates);
	ATF_TP_ADD_TC(tp, abandoned_lease_is_released);
	ATF_TP_ADD_TC(tp, event_record_failure_falls_back);
	ATF_TP_ADD_TC(tp, release_revalidates_streams);
	ATF_TP_ADD_TC(tp, release_wait_sync_failure);
	return atf_no_error();
}
