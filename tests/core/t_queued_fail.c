// SPDX-License-Identifier: MIT
/*
 * Queued copies that fail on the device (reference.md §22): the reap point
 * that sees the failure undoes the copy and reports the device's error
 * once (to an explicit reap or the value's next call, whichever comes
 * first); a destination something still protects (a GPU lease whose stream
 * is ordered after the copy, a hold, a released lease's events) is kept,
 * unreadable, charged and shown arriving, until that protection ends, and
 * then goes with every count lowered. A failed event query alone is no
 * copy failure (t_xfer_fail.c): every failure here is the copy's own
 * (RSD_SIMDEV_COPY_EXEC, a sticky stream fault as CUDA's).
 *
 * The simulated device runs on command: a queued copy stays queued until
 * the test completes the device's work.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

static void setup(struct cfx *f)
{
	cfx_sim(f, NULL, 0, 1);
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
}

/* The location's protection counts, from a checked snapshot. */
static void check_loc_counts(struct cfx *f, struct rsd_location at, uint64_t use, uint64_t hold,
			     uint64_t pending)
{
	struct rsd_snapshot *snap = cfx_snap(f);
	const struct rsd_location_snapshot *l = cfx_loc(snap, at);

	ATF_REQUIRE(l);
	ATF_CHECK_EQ_MSG(l->use_count, use, "use_count %llu", (unsigned long long)l->use_count);
	ATF_CHECK_EQ_MSG(l->hold_count, hold, "hold_count %llu", (unsigned long long)l->hold_count);
	ATF_CHECK_EQ_MSG(l->pending_event_count, pending, "pending_event_count %llu",
			 (unsigned long long)l->pending_event_count);
	rsd_snapshot_free(snap);
}

/* The copy to cuda:0 is undone: no materialization there, nothing charged
 * or counted, the pinned source no longer protected. */
static void check_undone(struct cfx *f, struct rsd_handle h)
{
	struct rsd_snapshot *snap = cfx_snap(f);

	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0));
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, PINNED)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	ATF_CHECK_EQ(cfx_used(f, CUDA0), 0);
	check_loc_counts(f, CUDA0, 0, 0, 0);
}

/*
 * A copy that fails on the device is undone at the reap point that sees
 * it: the destination goes (state_version steps, its charge refunded),
 * the source's protection ends; the first call that needs the value
 * returns the device's error, once: an explicit reap after it has none.
 */
ATF_TC_WITHOUT_HEAD(device_failure_undone);
ATF_TC_BODY(device_failure_undone, tc)
{
	struct rsd_handle h;
	struct rsd_lease *l;
	uint64_t v;
	void *s;
	struct cfx f;

	setup(&f);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	v = cfx_version(&f);
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_acquire(f.m, &h, 1, PINNED, NULL, &l));
	CHECK_MSG_HAS("a queued copy of value");
	CHECK_VERSION(&f, v + 1);
	check_undone(&f, h);
	OK(rsd_manager_reap(f.m));
	OK(rsd_acquire(f.m, &h, 1, PINNED, NULL, &l));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	/* The value is whole: it can be copied again (on a stream of its
	 * own: the transfer stream keeps its fault). */
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &s), 0);
	OK(rsd_ensure(f.m, h, CUDA0, s, NULL));
	rsd_simdev_stream_destroy(f.sd, s);
	cfx_fini(&f);
}

/*
 * The same through the device: the queued copy itself fails when it runs
 * (RSD_SIMDEV_COPY_EXEC, a sticky stream error as CUDA's), its event then
 * reports it, and the reap undoes the copy.
 */
ATF_TC_WITHOUT_HEAD(copy_failing_on_the_device);
ATF_TC_BODY(copy_failing_on_the_device, tc)
{
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	setup(&f);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, h, PINNED, 0x17);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	v = cfx_version(&f);
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	CHECK_VERSION(&f, v + 1);
	check_undone(&f, h);
	OK(rsd_drop(f.m, h, CUDA0, NULL));		 /* reported once: by the reap */
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x17)); /* nothing else lost */
	cfx_fini(&f);
}

/*
 * Two values' copies fail before any reap: each explicit reap reports one
 * of them (the last to fail first), so that reaps drain them all; then
 * there is none, and neither value's next call reports its copy again.
 */
ATF_TC_WITHOUT_HEAD(each_reap_reports_one);
ATF_TC_BODY(each_reap_reports_one, tc)
{
	struct rsd_handle a, b;
	struct rsd_lease *l;
	char want[64];
	struct cfx f;

	setup(&f);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	b = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_COPY_EXEC, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, a, CUDA0, NULL, NULL));
	OK(rsd_ensure_async(f.m, b, CUDA0, NULL, NULL));
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	snprintf(want, sizeof(want), "a queued copy of value %llu to cuda:0",
		 (unsigned long long)b.id);
	CHECK_MSG_HAS(want);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	snprintf(want, sizeof(want), "a queued copy of value %llu to cuda:0",
		 (unsigned long long)a.id);
	CHECK_MSG_HAS(want);
	OK(rsd_manager_reap(f.m));
	check_undone(&f, a);
	check_undone(&f, b);
	OK(rsd_acquire(f.m, &a, 1, PINNED, NULL, &l));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	OK(rsd_acquire(f.m, &b, 1, PINNED, NULL, &l));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	cfx_fini(&f);
}

/*
 * A GPU lease acquired on the destination while the copy was queued: its
 * stream is ordered after the copy and may still use the storage, so the
 * failure keeps the destination (charged, arriving, unreadable) and counts
 * the lease on it. The reap reports the copy's error, once; later reads
 * name the kept destination. The MUST_PRESERVE value's only whole copy
 * cannot be dropped beside it. The lease's stream inherited the copy's
 * fault: once its released event has run (failed, after its stream
 * drained: the lease ends all the same) the destination goes and every
 * count is back to zero.
 */
ATF_TC_WITHOUT_HEAD(destination_kept_while_leased);
ATF_TC_BODY(destination_kept_while_leased, tc)
{
	const struct rsd_materialization_snapshot *d;
	struct rsd_snapshot *snap;
	struct rsd_lease *l, *l2;
	struct rsd_hold *hd;
	struct rsd_handle h;
	void *cs;
	uint64_t v;
	struct cfx f;

	setup(&f);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, h, PINNED, 0x5a);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	OK(rsd_acquire(f.m, &h, 1, CUDA0, cs, &l));
	v = cfx_version(&f);
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	CHECK_MSG_HAS("a queued copy of value");
	CHECK_VERSION(&f, v); /* nothing left the placement yet */
	snap = cfx_snap(&f);
	d = cfx_snap_mat(snap, h, CUDA0);
	ATF_REQUIRE(d);
	ATF_CHECK(d->arriving);
	ATF_CHECK_EQ(d->use_count, 1);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, PINNED)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), N);
	check_loc_counts(&f, CUDA0, 1, 0, 0);

	ERR(RSD_EDEVICE, rsd_acquire(f.m, &h, 1, CUDA0, cs, &l2)); /* the kept copy's */
	CHECK_MSG_HAS("stays unreadable until its 1 lease(s), 0 hold(s) and 0 pending event(s)");
	ERR(RSD_EDEVICE, rsd_hold(f.m, &h, 1, CUDA0, &hd));
	ERR(RSD_EDEVICE, rsd_ensure(f.m, h, CUDA0, NULL, NULL));
	ERR(RSD_EDEVICE, rsd_move(f.m, h, CUDA0, NULL, NULL, NULL));
	ERR(RSD_EINUSE, rsd_drop(f.m, h, CUDA0, NULL));
	ERR(RSD_EOWNERSHIP, rsd_drop(f.m, h, PINNED, NULL));
	CHECK_VERSION(&f, v);

	OK(rsd_lease_release(l, 0)); /* pending on cs: +1 */
	rsd_lease_free(l);
	CHECK_VERSION(&f, v + 1);
	check_loc_counts(&f, CUDA0, 0, 0, 1);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m)); /* finalized +1, the destination goes +1 */
	CHECK_VERSION(&f, v + 3);
	check_undone(&f, h);

	/* Nothing else was lost: the value copies again (on a stream
	 * without the fault). */
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	rsd_simdev_stream_destroy(f.sd, cs);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	OK(rsd_ensure(f.m, h, CUDA0, cs, NULL));
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x5a));
	rsd_simdev_stream_destroy(f.sd, cs);
	cfx_fini(&f);
}

/* The same with a hold: releasing it removes the destination. */
ATF_TC_WITHOUT_HEAD(destination_kept_while_held);
ATF_TC_BODY(destination_kept_while_held, tc)
{
	struct rsd_hold *hd;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	setup(&f);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	OK(rsd_hold(f.m, &h, 1, CUDA0, &hd));
	v = cfx_version(&f);
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_drop(f.m, h, CUDA0, NULL)); /* the copy's error, once */
	CHECK_VERSION(&f, v);
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), N);
	check_loc_counts(&f, CUDA0, 0, 1, 0);
	OK(rsd_manager_reap(f.m)); /* reported already */
	ERR(RSD_EINUSE, rsd_drop(f.m, h, CUDA0, NULL));
	ERR(RSD_EINUSE, rsd_discard(f.m, h, NULL));
	CHECK_VERSION(&f, v);

	OK(rsd_hold_release(hd)); /* released +1, the destination goes +1 */
	rsd_hold_free(hd);
	CHECK_VERSION(&f, v + 2);
	check_undone(&f, h);
	OK(rsd_discard(f.m, h, NULL));
	cfx_fini(&f);
}

/*
 * A copy failing when it runs leaves its fault on the transfer stream, and
 * a consumer stream ordered after it inherits it (as CUDA's sticky errors):
 * that lease's released event fails too, once its stream has run. The
 * failure ends the lease all the same (its stream drained: nothing uses
 * the bytes), so the manager goes on: a close while the lease is active is
 * refused for it, and once it is released and its stream has run,
 * close(0) closes.
 */
ATF_TC_WITHOUT_HEAD(close_after_fault);
ATF_TC_BODY(close_after_fault, tc)
{
	struct rsd_lease *l;
	struct rsd_handle h;
	void *cs;
	struct cfx f;

	setup(&f);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	OK(rsd_acquire(f.m, &h, 1, CUDA0, cs, &l));
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	check_loc_counts(&f, CUDA0, 1, 0, 0);
	ERR(RSD_EINUSE, rsd_manager_close(f.m, 0));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	check_loc_counts(&f, CUDA0, 0, 0, 1);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m)); /* the lease's event failed: it ended */
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), 0);
	check_loc_counts(&f, CUDA0, 0, 0, 0);
	OK(rsd_manager_close(f.m, 0));
	ERR(RSD_ECLOSED, rsd_manager_reap(f.m));
	rsd_simdev_stream_destroy(f.sd, cs);
	cfx_fini(&f);
}

/* Completes a stream's work once the test is about to call (and, with
 * the fix, wait in) the action that must not count a doomed copy. */
struct later {
	struct rsd_simdev *sd;
	void *stream;
};

static void *complete_later(void *arg)
{
	struct later *x = arg;
	struct timespec ts = { 0, 100 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	rsd_simdev_stream_complete(x->sd, x->stream);
	return NULL;
}

/*
 * A value at cuda:1, queued on to cuda:0 (a copy that fails on the device)
 * and from cuda:0 on to pinned: once cuda:0's copy failed, the pinned copy
 * reads a failed copy and fails too. A drop of cuda:1, or a move to pinned
 * (which would take pinned for the value's home and drop cuda:1), must
 * not count it: each waits for its answer, reports the failure (the
 * value's next call) and leaves cuda:1 alone; run again, the drop is
 * refused (the last copy) and the move copies from cuda:1. Without the
 * wait both removed the value's only bytes (seen in the hostile test).
 */
static void doomed_fill(bool move)
{
	static const struct rsd_location CUDA1 = { RSD_CUDA, 1 };
	struct rsd_snapshot *snap;
	struct later x;
	pthread_t t;
	struct rsd_handle h;
	void *s0;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, h, PINNED, 0x5a);
	OK(rsd_move(f.m, h, CUDA1, NULL, NULL, NULL));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &s0), 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, s0, NULL));
	OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL));
	rsd_simdev_stream_complete(f.sd, s0);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	snap = cfx_snap(&f);
	ATF_REQUIRE(cfx_snap_mat(snap, h, CUDA0) && cfx_snap_mat(snap, h, PINNED));
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA0)->arriving);  /* failed, kept */
	ATF_CHECK(cfx_snap_mat(snap, h, PINNED)->arriving); /* still filling */
	rsd_snapshot_free(snap);

	x.sd = f.sd;
	x.stream = NULL; /* the transfer streams */
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, complete_later, &x), 0);
	/* The wait folds the pinned copy's failure in: the value's next
	 * call, this one, reports it, once; cuda:1 is untouched. */
	if (move)
		ERR(RSD_EDEVICE, rsd_move(f.m, h, PINNED, NULL, NULL, NULL));
	else
		ERR(RSD_EDEVICE, rsd_drop(f.m, h, CUDA1, NULL));
	CHECK_MSG_HAS("a queued copy of value");
	CHECK_MSG_HAS("to pinned-host failed on the device");
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_manager_reap(f.m));
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(snap, h)->nmaterializations, 1);
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA1));
	rsd_snapshot_free(snap);
	if (move) {
		OK(rsd_move(f.m, h, PINNED, NULL, NULL, NULL));
	} else {
		ERR(RSD_EOWNERSHIP, rsd_drop(f.m, h, CUDA1, NULL));
		CHECK_MSG_HAS("the last copy of RSD_MUST_PRESERVE value");
	}
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(snap, h)->nmaterializations, 1);
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0));
	rsd_snapshot_free(snap);
	ATF_CHECK(cfx_has_pattern(&f, h, move ? PINNED : CUDA1, 0x5a));
	rsd_simdev_stream_destroy(f.sd, s0);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(drop_beside_doomed_fill);
ATF_TC_BODY(drop_beside_doomed_fill, tc)
{
	doomed_fill(false);
}

ATF_TC_WITHOUT_HEAD(move_onto_doomed_fill);
ATF_TC_BODY(move_onto_doomed_fill, tc)
{
	doomed_fill(true);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, device_failure_undone);
	ATF_TP_ADD_TC(tp, copy_failing_on_the_device);
	ATF_TP_ADD_TC(tp, each_reap_reports_one);
	ATF_TP_ADD_TC(tp, destination_kept_while_leased);
	ATF_TP_ADD_TC(tp, destination_kept_while_held);
	ATF_TP_ADD_TC(tp, close_after_fault);
	ATF_TP_ADD_TC(tp, drop_beside_doomed_fill);
	ATF_TP_ADD_TC(tp, move_onto_doomed_fill);
	return 0;
}
