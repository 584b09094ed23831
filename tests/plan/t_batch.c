// SPDX-License-Identifier: MIT
/*
 * A plan's queued copies (reference.md §21.2): rsd_execute_actions() queues
 * the device copies of its ensures together, so copies to different
 * devices are in flight at once, while every report and version step is
 * the one of the actions run one by one; a failed queued copy fails the
 * plan at its action and rolls back the copies queued after it.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "pfx.h"

/* Completes the device's work once every watched stream has a copy queued
 * at the same time (or after a deadline, so a broken library fails the
 * check instead of hanging). */
struct watcher {
	struct rsd_simdev *sd;
	void *streams[4];
	int n;
	bool all_at_once;
	bool stop;
	pthread_mutex_t mu;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *watcher_main(void *p)
{
	struct watcher *w = p;
	uint64_t deadline = now_ms() + 5000;
	struct timespec pause = { 0, 1000000 };

	for (;;) {
		int busy = 0;

		pthread_mutex_lock(&w->mu);
		if (w->stop) {
			pthread_mutex_unlock(&w->mu);
			return NULL;
		}
		pthread_mutex_unlock(&w->mu);
		for (int i = 0; i < w->n; i++)
			busy += rsd_simdev_pending_events(w->sd, w->streams[i]) > 0;
		if (busy == w->n)
			w->all_at_once = true;
		if (busy == w->n || now_ms() > deadline)
			rsd_simdev_complete_all(w->sd);
		nanosleep(&pause, NULL);
	}
}

static void *transfer_stream(struct pfx *f, int device)
{
	return rsd_simdev_ops()->transfer_stream(f->sd, pfx_cuda(device), PINNED);
}

ATF_TC_WITHOUT_HEAD(copies_in_flight_together);
ATF_TC_BODY(copies_in_flight_together, tc)
{
	struct rsd_plan_report *rep = NULL;
	struct rsd_action a[3];
	struct watcher w;
	struct pfx f;
	struct rsd_handle h;
	pthread_t t;
	uint64_t v;

	pfx_init(&f, NULL, 0, 3);
	h = pfx_adopt(&f, PINNED, RSD_REPLICABLE);
	for (int d = 0; d < 3; d++)
		a[d] = rsd_action_ensure(h, pfx_cuda(d));
	memset(&w, 0, sizeof(w));
	pthread_mutex_init(&w.mu, NULL);
	w.sd = f.sd;
	w.n = 3;
	for (int d = 0; d < 3; d++)
		w.streams[d] = transfer_stream(&f, d);
	v = pfx_version(&f);
	rsd_simdev_set_auto_complete(f.sd, false);
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, watcher_main, &w), 0);
	ATF_CHECK_EQ_MSG(rsd_execute_actions(f.m, a, 3, "fan-out", NULL, 0, NULL, &rep), 0, "%s",
			 rsd_last_error()->message);
	pthread_mutex_lock(&w.mu);
	w.stop = true;
	pthread_mutex_unlock(&w.mu);
	pthread_join(t, NULL);
	rsd_simdev_set_auto_complete(f.sd, true);
	ATF_CHECK_MSG(w.all_at_once, "the three copies were never in flight at once");
	/* Exactly what three ensures in a row report: pinned is the source of
	 * each, each device is recorded (+1) and installed (+1). */
	ATF_REQUIRE(rep != NULL);
	ATF_REQUIRE_EQ(rep->ntransitions, 3);
	for (int d = 0; d < 3; d++) {
		const struct rsd_transition *x = &rep->transitions[d];

		ATF_CHECK(!x->no_op);
		ATF_CHECK(x->has_source && pfx_loc_is(x->source, PINNED));
		ATF_CHECK(x->has_destination && pfx_loc_is(x->destination, pfx_cuda(d)));
		ATF_CHECK(x->completed_at_ns >= x->started_at_ns);
		ATF_CHECK(pfx_resident_at(&f, h, pfx_cuda(d)));
	}
	ATF_CHECK_EQ(pfx_version(&f), v + 6);
	rsd_plan_report_free(rep);
	pthread_mutex_destroy(&w.mu);
	pfx_fini(&f);
}

/* The second of three queued copies fails on the device: the plan fails at
 * action 1 after one committed transition, and the third copy is rolled
 * back as if it never ran. */
ATF_TC_WITHOUT_HEAD(failed_copy_rolls_back_the_rest);
ATF_TC_BODY(failed_copy_rolls_back_the_rest, tc)
{
	struct rsd_plan_report *part;
	struct rsd_location_snapshot l1, l2;
	struct rsd_action a[3];
	struct pfx f;
	struct rsd_handle h;
	uint64_t v;
	int rc;

	pfx_init(&f, NULL, 0, 3);
	h = pfx_adopt(&f, PINNED, RSD_REPLICABLE);
	for (int d = 0; d < 3; d++)
		a[d] = rsd_action_ensure(h, pfx_cuda(d));
	v = pfx_version(&f);
	rsd_simdev_fail_location(f.sd, pfx_cuda(1), -RSD_EDEVICE);
	rc = rsd_execute_actions(f.m, a, 3, "fan-out", NULL, 0, NULL, NULL);
	rsd_simdev_fail_location(f.sd, pfx_cuda(1), 0);
	ATF_CHECK_EQ(rc, -RSD_EEXEC);
	ATF_CHECK_EQ(rsd_last_error()->failed_action_index, 1);
	part = rsd_take_partial_report();
	ATF_REQUIRE(part != NULL);
	ATF_CHECK_EQ(part->ntransitions, 1);
	rsd_plan_report_free(part);
	ATF_CHECK(pfx_resident_at(&f, h, pfx_cuda(0)));
	ATF_CHECK(!pfx_resident_at(&f, h, pfx_cuda(1)));
	ATF_CHECK(!pfx_resident_at(&f, h, pfx_cuda(2)));
	ATF_CHECK_EQ(pfx_nmat(&f, h), 2);
	/* cuda:0 recorded and installed; nothing else steps the version. */
	ATF_CHECK_EQ(pfx_version(&f), v + 2);
	l1 = pfx_loc_snap(&f, pfx_cuda(1), NULL);
	l2 = pfx_loc_snap(&f, pfx_cuda(2), NULL);
	ATF_CHECK_EQ(l1.used_bytes, 0);
	ATF_CHECK_EQ(l2.used_bytes, 0);
	pfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, copies_in_flight_together);
	ATF_TP_ADD_TC(tp, failed_copy_rolls_back_the_rest);
	return atf_no_error();
}
