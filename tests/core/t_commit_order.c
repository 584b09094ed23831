// SPDX-License-Identifier: MIT
/*
 * Calls beside another thread's transfer take effect as if ordered by
 * their commits (reference.md §21.1, §16.3): a copy that would precede the
 * replica a transfer in flight reads waits for its commit,
 * materializations and locations are listed in commit order, and a plan
 * action that waited for its plan's queued copies sees what other threads
 * committed meanwhile. The simulated device runs
 * copies on command, so the first transfer stays in flight until the test
 * completes it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

struct bg {
	struct cfx *f;
	struct rsd_handle h;
	struct rsd_location to;
	struct rsd_transition rep;
	int rc;
	atomic_bool done;
	pthread_t th;
};

static void *bg_ensure(void *arg)
{
	struct bg *b = arg;

	b->rc = rsd_ensure(b->f->m, b->h, b->to, NULL, &b->rep);
	atomic_store(&b->done, true);
	return NULL;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Start an ensure of h to `to` on its own thread and wait until its
 * destination on device dev is allocated: it is in its transfer phase. */
static void bg_start(struct bg *b, struct cfx *f, struct rsd_handle h, struct rsd_location to,
		     int dev)
{
	b->f = f;
	b->h = h;
	b->to = to;
	atomic_init(&b->done, false);
	ATF_REQUIRE_EQ(pthread_create(&b->th, NULL, bg_ensure, b), 0);
	for (int i = 0; dev >= 0 && rsd_simdev_allocated_bytes(f->sd, dev) == 0; i++) {
		ATF_REQUIRE_MSG(i < 5000, "the transfer never started");
		sleep_ms(1);
	}
}

static void bg_join(struct bg *b)
{
	ATF_REQUIRE_EQ(pthread_join(b->th, NULL), 0);
	OK(b->rc);
}

/* h's materializations are at l0, l1, l2, in that order. */
static void check_mats(struct cfx *f, struct rsd_handle h, struct rsd_location l0,
		       struct rsd_location l1, struct rsd_location l2)
{
	struct rsd_location at[4];

	ATF_REQUIRE_EQ(cfx_mats(f, h, at, 4), 3);
	ATF_CHECK_MSG(rsd_location_equal(at[0], l0) && rsd_location_equal(at[1], l1) &&
			      rsd_location_equal(at[2], l2),
		      "materializations at %s %s %s, expected %s %s %s", cfx_name(at[0]),
		      cfx_name(at[1]), cfx_name(at[2]), cfx_name(l0), cfx_name(l1), cfx_name(l2));
}

static void on_command(struct cfx *f)
{
	cfx_sim(f, NULL, 0, 1);
	rsd_simdev_set_auto_complete(f->sd, false);
}

ATF_TC_WITHOUT_HEAD(copy_waits_for_a_copy_reading_a_later_replica);
ATF_TC_BODY(copy_waits_for_a_copy_reading_a_later_replica, tc)
{
	struct bg a, b;
	struct cfx f;
	struct rsd_handle h;

	on_command(&f);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	/* a copies pinned-host -> cuda:0 and stays in flight. */
	bg_start(&a, &f, h, cfx_cuda(0), 0);
	/* b's copy to pageable-host, which precedes pinned-host, must come
	 * after a's commit: had it committed first, a's report (source
	 * pinned-host) would be one no sequential order gives. */
	bg_start(&b, &f, h, PAGEABLE, -1);
	sleep_ms(100);
	ATF_CHECK_MSG(!atomic_load(&b.done), "the copy to pageable-host did not wait");
	rsd_simdev_set_auto_complete(f.sd, true);
	bg_join(&a);
	bg_join(&b);
	ATF_CHECK(a.rep.has_source && rsd_location_equal(a.rep.source, PINNED));
	ATF_CHECK(b.rep.has_source && rsd_location_equal(b.rep.source, PINNED));
	check_mats(&f, h, PINNED, cfx_cuda(0), PAGEABLE);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(insertion_and_registry_order_are_commit_order);
ATF_TC_BODY(insertion_and_registry_order_are_commit_order, tc)
{
	struct bg a, b;
	struct cfx f;
	struct rsd_handle h;

	on_command(&f);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	/* a (pageable-host -> cuda:0) is admitted first and stays in flight;
	 * b (pageable-host -> pinned-host) is admitted second, commits first. */
	bg_start(&a, &f, h, cfx_cuda(0), 0);
	bg_start(&b, &f, h, PINNED, -1);
	bg_join(&b);
	ATF_CHECK(!atomic_load(&a.done));
	rsd_simdev_set_auto_complete(f.sd, true);
	bg_join(&a);
	check_mats(&f, h, PAGEABLE, PINNED, cfx_cuda(0));
	CHECK_LOCATIONS(&f, PAGEABLE, PINNED, cfx_cuda(0));
	cfx_fini(&f);
}

struct bg_plan {
	struct cfx *f;
	struct rsd_action a[2];
	int rc, cause;
	long failed;
	pthread_t th;
};

static void *bg_execute(void *arg)
{
	struct bg_plan *p = arg;

	p->rc = rsd_execute_actions(p->f->m, p->a, 2, "flush", NULL, 0, NULL, NULL);
	p->cause = rsd_last_error()->cause;
	p->failed = rsd_last_error()->failed_action_index;
	return NULL;
}

ATF_TC_WITHOUT_HEAD(action_after_a_flush_resolves_again);
ATF_TC_BODY(action_after_a_flush_resolves_again, tc)
{
	struct csrc src = { 0 };
	struct bg_plan p;
	struct cfx f;
	struct rsd_handle x, s;

	on_command(&f);
	x = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	s = cfx_sourced(&f, &src, PAGEABLE);
	/* The plan queues x's copy to cuda:0; s could load, so its action
	 * first waits (without the lock) for that copy. */
	p.f = &f;
	p.a[0] = rsd_action_ensure(x, cfx_cuda(0));
	p.a[1] = rsd_action_ensure(s, PINNED);
	ATF_REQUIRE_EQ(pthread_create(&p.th, NULL, bg_execute, &p), 0);
	for (int i = 0; rsd_simdev_allocated_bytes(f.sd, 0) == 0; i++) {
		ATF_REQUIRE_MSG(i < 5000, "the plan's copy never started");
		sleep_ms(1);
	}
	sleep_ms(100);
	/* Meanwhile s is discarded: the action must find it so. */
	OK(rsd_discard(f.m, s, NULL));
	rsd_simdev_set_auto_complete(f.sd, true);
	ATF_REQUIRE_EQ(pthread_join(p.th, NULL), 0);
	ATF_CHECK_EQ(p.rc, -RSD_EEXEC);
	ATF_CHECK_EQ(p.failed, 1);
	ATF_CHECK_EQ_MSG(p.cause, -RSD_EHANDLE, "cause %d (%s)", p.cause, rsd_strerror(p.cause));
	ATF_CHECK_EQ(src.loads, 0);
	ATF_CHECK(cfx_resident(&f, x, cfx_cuda(0)));
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, copy_waits_for_a_copy_reading_a_later_replica);
	ATF_TP_ADD_TC(tp, insertion_and_registry_order_are_commit_order);
	ATF_TP_ADD_TC(tp, action_after_a_flush_resolves_again);
	return atf_no_error();
}
