// SPDX-License-Identifier: MIT
/*
 * Lease failure paths (semantics.md §10.4 steps 4, 5 and 7, §10.5, §10.9):
 * an event query failing during reaping, abandonment of active leases, the
 * fallback when recording a completion event fails, re-validation of the
 * consumer streams at release, and a waiting release whose event
 * synchronization fails after the lease turned pending.
 *
 * The simulated device stands in for CUDA; its fault injection makes the
 * driver calls fail on command.
 */
#include <atf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>
#include <urcu/urcu-memb.h>

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

/* A lease on [a] at cuda:0 released without waiting while s is busy. */
static struct rsd_lease *pending_lease(struct rsd_handle a, void *s)
{
	struct rsd_lease *l = NULL;

	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	return l;
}

/*
 * §10.5: an error while querying an event during reaping propagates (the
 * writer call fails, the lease stays pending); explain treats it as "still
 * protected". The failed prologue must not leave the thread marked as
 * inside a transition (§6.1).
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

	setup(false);
	st = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_ensure(m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL), 0);
	l = pending_lease(a, st);
	rsd_simdev_stream_complete(sd, st);
	v = ver();

	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	ATF_CHECK_EQ(rsd_manager_reap(m), -RSD_EDEVICE);
	ATF_CHECK(msg_has("event_query"));
	CHECK_VER(v);
	CHECK_MAT(a, cuda(0), 0, 0, 1);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	ATF_CHECK_EQ(rsd_acquire(m, &a, 1, cuda(0), st, &l2), -RSD_EDEVICE);
	ATF_CHECK(l2 == NULL);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	ATF_CHECK_EQ(rsd_drop(m, a, cuda(0), NULL), -RSD_EDEVICE);
	CHECK_VER(v);
	CHECK_MAT(a, cuda(0), 0, 0, 1);

	drop = rsd_action_drop(a, cuda(0));
	plan.reclaim = &drop;
	plan.nreclaim = 1;
	rsd_simdev_fail_all(sd, RSD_SIMDEV_EVENT_QUERY, RSD_EDEVICE);
	ATF_REQUIRE_EQ(rsd_explain(m, &plan, NULL, &ex), 0);
	ATF_CHECK(!ex->feasible);
	rsd_explanation_free(ex);
	rsd_simdev_fail_all(sd, RSD_SIMDEV_EVENT_QUERY, 0);

	/* Not stuck: the next writer call on this thread reaps and drops. */
	ATF_CHECK_EQ(rsd_drop(m, a, cuda(0), NULL), 0);
	CHECK_VER(v + 2);
	rsd_lease_free(l);
	teardown();
}

/* ---- abandonment and fallbacks -------------------------------------------- */

ATF_TC_WITHOUT_HEAD(abandoned_lease_is_released);
ATF_TC_BODY(abandoned_lease_is_released, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a, p;
	void *s;
	uint64_t v;

	setup(false);
	s = stream(0);
	a = put(cuda(0), 64, NULL);
	p = put(RSD_LOC_PAGEABLE_HOST, 64, NULL);

	/* Host lease: released (+1) with one warning. */
	ATF_REQUIRE_EQ(rsd_acquire(m, &p, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l), 0);
	v = ver();
	rsd_lease_free(l);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(nwarn, 1);
	CHECK_MAT(p, RSD_LOC_PAGEABLE_HOST, 0, 0, 0);

	/* GPU lease, stream busy: released with wait (+2), nothing pending. */
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	v = ver();
	rsd_lease_free(l);
	CHECK_VER(v + 2);
	ATF_CHECK_EQ(nwarn, 2);
	CHECK_MAT(a, cuda(0), 0, 0, 0);
	CHECK_LOC(cuda(0), 0, 0, 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 0);

	/* Freeing a released lease is quiet. */
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	v = ver();
	rsd_lease_free(l);
	CHECK_VER(v);
	ATF_CHECK_EQ(nwarn, 2);
	CHECK_MAT(a, cuda(0), 0, 0, 1); /* the pending lease stays */
	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(rsd_manager_reap(m), 0);
	CHECK_VER(v + 1);
	teardown();
}

ATF_TC_WITHOUT_HEAD(event_record_failure_falls_back);
ATF_TC_BODY(event_record_failure_falls_back, tc)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *s, *s2, *busy = NULL, *busy2 = NULL;
	unsigned w;
	uint64_t v;

	setup(false);
	s = stream(0);
	s2 = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_ensure(m, a, RSD_LOC_PAGEABLE_HOST, NULL, NULL), 0);

	/* Work in flight on the consumer stream. */
	ATF_REQUIRE_EQ(ops->event_record(sd, s, &busy), 0);
	ATF_REQUIRE_EQ(ops->event_query(sd, busy), 0);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_RECORD, 1, RSD_EDEVICE);
	v = ver();
	w = nwarn;
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(nwarn, w + 1);
	CHECK_MAT(a, cuda(0), 0, 0, 0);
	CHECK_LOC(cuda(0), 0, 0, 0);
	/* The fallback synchronized the consumer stream. */
	ATF_CHECK_EQ(ops->event_query(sd, busy), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	CHECK_VER(v + 1);
	rsd_lease_free(l);
	ATF_CHECK_EQ(nwarn, w + 1);

	/* Second of two recordings fails: the first event is not left behind,
	 * both streams are synchronized, the lease is gone; same with wait. */
	ATF_REQUIRE_EQ(ops->event_record(sd, s2, &busy2), 0);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_add_consumer_stream(l, s2), 0);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_RECORD, 2, RSD_EDEVICE);
	v = ver();
	ATF_CHECK_EQ(rsd_lease_release(l, RSD_RELEASE_WAIT), 0);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(nwarn, w + 2);
	ATF_CHECK_EQ(ops->event_query(sd, busy2), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	CHECK_LOC(cuda(0), 0, 0, 0);
	rsd_lease_free(l);

	/* Unprotected now. */
	ATF_CHECK_EQ(rsd_drop(m, a, cuda(0), NULL), 0);
	ops->event_destroy(sd, busy);
	ops->event_destroy(sd, busy2);
	teardown();
}

/*
 * A consumer stream destroyed before release fails the re-validation of
 * §10.4 step 4: the error propagates and the lease stays active.
 */
ATF_TC_WITHOUT_HEAD(release_revalidates_streams);
ATF_TC_BODY(release_revalidates_streams, tc)
{
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	void *s, *s2;
	uint64_t v;

	setup(false);
	s = stream(0);
	s2 = stream(0);
	a = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_add_consumer_stream(l, s2), 0);
	rsd_simdev_stream_destroy(sd, s2);
	v = ver();
	ATF_CHECK_EQ(rsd_lease_release(l, 0), -RSD_ETYPE);
	ATF_CHECK(rsd_lease_active(l));
	CHECK_VER(v);
	CHECK_MAT(a, cuda(0), 1, 0, 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 0);
	ATF_REQUIRE_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	rsd_lease_free(l);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
}

/*
 * Waiting fails after the lease turned pending (event synchronization
 * error): the error propagates, the caller's object stays active (§10.3:
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

	setup(false);
	s = stream(0);
	a = put(cuda(0), 64, NULL);
	b = put(cuda(0), 64, NULL);
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, cuda(0), s, &l), 0);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	v = ver();
	ATF_CHECK_EQ(rsd_lease_release(l, RSD_RELEASE_WAIT), -RSD_EDEVICE);
	ATF_CHECK(rsd_lease_active(l));
	CHECK_VER(v + 1);
	CHECK_MAT(a, cuda(0), 0, 0, 1);

	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(rsd_manager_reap(m), 0);
	CHECK_VER(v + 2);
	CHECK_MAT(a, cuda(0), 0, 0, 0);
	/* Let grace periods pass so that the reaped record is really freed. */
	for (i = 0; i < 4; i++) {
		ATF_REQUIRE_EQ(rsd_ensure(m, b, RSD_LOC_PAGEABLE_HOST, NULL, NULL), 0);
		ATF_REQUIRE_EQ(rsd_drop(m, b, RSD_LOC_PAGEABLE_HOST, NULL), 0);
	}
	urcu_memb_barrier();
	/* A new lease (its record may reuse the freed one's memory) must not
	 * be touched by releasing the old object. */
	ATF_REQUIRE_EQ(rsd_acquire(m, &b, 1, cuda(0), s, &l2), 0);
	v = ver();
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_VER(v);
	CHECK_MAT(b, cuda(0), 1, 0, 0);
	CHECK_LOC(cuda(0), 1, 0, 0);
	ATF_CHECK(rsd_lease_active(l2));
	ATF_CHECK_EQ(rsd_lease_release(l2, RSD_RELEASE_WAIT), 0);
	CHECK_VER(v + 2);
	CHECK_LOC(cuda(0), 0, 0, 0);
	rsd_lease_free(l);
	rsd_lease_free(l2);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
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
