// SPDX-License-Identifier: MIT
/*
 * Failure semantics of copies in flight (reference.md §22.4, design.md
 * "A copy in flight"): what a failed copy, a failed event query or sync,
 * and a close may free, who hears about a failure, and that every thread
 * waiting on a copy returns.
 *
 *  - A moved source put back after its copy failed is not admitted again:
 *    its bytes never left, so another thread's plan headroom cannot make
 *    the value's only copy go.
 *  - A failed event query or sync is no answer: the copy's destination and
 *    source stay protected until its stream is synchronized and the event
 *    then reports the copy's result.
 *  - After a copy failing on the device (a sticky stream fault), a copy
 *    queued behind it keeps its destination until the stream has drained.
 *  - Any number of threads may wait for one queued copy; each returns.
 *  - After a failed copy with a GPU lease on its destination the manager
 *    keeps working: the copy's error is returned once, other calls
 *    succeed, close(0) and close(NOWAIT) close.
 *  - close(FORCE | NOWAIT) waits for nothing, other threads' waits on a
 *    stream that never completes included; those threads get RSD_ECLOSED
 *    at once, while the device still runs nothing.
 *
 * The simulated device runs on command: queued work stays queued until
 * the test completes it, so each test decides when a copy runs. A thread
 * blocked on the device is seen through the simulator's call counters.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "../gate.h"
#include "cfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

/* Seconds a thread may take to return once what it waits for happened. */
#define RETURN_S 20

static void setup(struct cfx *f, const struct rsd_budget *b, size_t nb)
{
	cfx_sim(f, b, nb, 1);
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
}

/* Wait until the simulator has seen `want` calls of op in all. */
static void wait_calls(struct cfx *f, enum rsd_simdev_op op, unsigned long want)
{
	const struct timespec ms = { 0, 1000000 };

	for (unsigned i = 0; rsd_simdev_calls(f->sd, op) < want; i++) {
		ATF_REQUIRE_MSG(i < RETURN_S * 1000,
				"no thread reached the device (op %d: %lu of %lu)", (int)op,
				rsd_simdev_calls(f->sd, op), want);
		nanosleep(&ms, NULL);
	}
}

/* Join t, failing the test when it does not return in time. */
static void join(pthread_t t)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += RETURN_S;
	ATF_REQUIRE_EQ_MSG(pthread_timedjoin_np(t, NULL, &dl), 0,
			   "a thread did not return within %d s", RETURN_S);
}

/* A new REPLICABLE value of N bytes at `at`, filled with seed. */
static struct rsd_handle filled(struct cfx *f, struct rsd_location at, int seed)
{
	struct rsd_handle h = cfx_adopt(f, at, N, RSD_REPLICABLE);

	cfx_fill(f, h, at, seed);
	return h;
}

/* One call run on a thread of its own, with its result and message. */
struct call {
	struct cfx *f;
	struct rsd_handle h;
	struct rsd_location at;
	struct rsd_lease *lease;
	int rc;
	char msg[sizeof(rsd_last_error()->message)];
};

static void call_done(struct call *c, int rc)
{
	c->rc = rc;
	snprintf(c->msg, sizeof(c->msg), "%s", rc ? rsd_last_error()->message : "");
}

static void *do_reap(void *arg)
{
	struct call *c = arg;

	call_done(c, rsd_manager_reap(c->f->m));
	return NULL;
}

static void *do_acquire(void *arg)
{
	struct call *c = arg;

	call_done(c, rsd_acquire(c->f->m, &c->h, 1, c->at, NULL, &c->lease));
	return NULL;
}

static void *do_ensure(void *arg)
{
	struct call *c = arg;

	call_done(c, rsd_ensure(c->f->m, c->h, c->at, NULL, NULL));
	return NULL;
}

static void *do_ensure_async(void *arg)
{
	struct call *c = arg;

	call_done(c, rsd_ensure_async(c->f->m, c->h, c->at, NULL, NULL));
	return NULL;
}

static void *do_release_wait(void *arg)
{
	struct call *c = arg;

	call_done(c, rsd_lease_release(c->lease, RSD_RELEASE_WAIT));
	return NULL;
}

static void *do_close_force_nowait(void *arg)
{
	struct call *c = arg;

	call_done(c, rsd_manager_close(c->f->m, RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT));
	return NULL;
}

/*
 * Start fn(c) on thread *t and return once the simulator has seen nsync
 * more sync calls (event or stream): the thread then waits on the device.
 */
static void start_waiter(struct call *c, void *(*fn)(void *), pthread_t *t, unsigned nsync)
{
	unsigned long syncs = rsd_simdev_calls(c->f->sd, RSD_SIMDEV_EVENT_SYNC);

	ATF_REQUIRE_EQ(pthread_create(t, NULL, fn, c), 0);
	wait_calls(c->f, RSD_SIMDEV_EVENT_SYNC, syncs + nsync);
}

#define CHECK_CALL(c, code) \
	ATF_CHECK_MSG((c).rc == -(code), "rc %d, expected %d: %s", (c).rc, -(code), (c).msg)

/* ---- 1: the undo's reinstall is never admitted ---------------------------- */

struct plan_arg {
	struct cfx *f;
	struct rsd_action a[2];
	int rc;
	char msg[sizeof(rsd_last_error()->message)];
};

static void *run_plan(void *arg)
{
	struct plan_arg *p = arg;

	p->rc = rsd_execute_actions(p->f->m, p->a, 2, "other", NULL, 0, NULL, NULL);
	snprintf(p->msg, sizeof(p->msg), "%s", p->rc ? rsd_last_error()->message : "");
	return NULL;
}

/* The source load holds the plan (and its headroom) until the gate opens. */
static int hold_load(struct csrc *s)
{
	gate_hold(s->arg);
	return 0;
}

/*
 * A must-preserve value moved out of pinned memory while another thread's
 * plan holds pinned's headroom (its first action charged pinned memory,
 * its second waits in a source load): the move's copy fails on the
 * device, and putting the source back must not be refused for budget.
 * The source's bytes never left pinned memory and the ledger kept them
 * counted (in flight) all along, so the plan was admitted beside them:
 * the value is whole there again, and the plan, which planned with those
 * bytes counted, completes. (Before the ledger the plan's preflight did
 * not see the moved source, and the reinstall, sent through admission,
 * was refused and the value's only copy freed.)
 */
ATF_TC_WITHOUT_HEAD(undo_reinstall_not_admitted);
ATF_TC_BODY(undo_reinstall_not_admitted, tc)
{
	const struct rsd_budget b[] = { { PINNED, 3 * N } };
	struct plan_arg p;
	struct gate g = GATE_INIT;
	struct csrc s;
	struct rsd_handle a, c, bv;
	struct call r = { 0 };
	pthread_t t;
	struct cfx f;

	setup(&f, b, 1);
	a = filled(&f, PINNED, 0x41); /* no source: must preserve */
	c = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	memset(&s, 0, sizeof(s));
	s.hook = hold_load;
	s.arg = &g;
	bv = cfx_sourced(&f, &s, PAGEABLE);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_move_async(f.m, a, CUDA0, NULL, NULL, NULL));

	memset(&p, 0, sizeof(p));
	p.f = &f;
	p.a[0] = rsd_action_ensure(c, PINNED);
	p.a[1] = rsd_action_ensure(bv, PINNED);
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, run_plan, &p), 0);
	gate_wait_entered(&g); /* the plan charged c and keeps room for bv */

	rsd_simdev_complete_all(f.sd); /* the move's copy fails */
	r.f = &f;
	do_reap(&r);
	CHECK_CALL(r, RSD_EDEVICE);
	ATF_CHECK_MSG(strstr(r.msg, "a queued copy of value"), "%s", r.msg);
	ATF_CHECK(cfx_resident(&f, a, PINNED));
	ATF_CHECK(!cfx_resident(&f, a, CUDA0));
	ATF_CHECK_EQ(cfx_used(&f, PINNED), 2 * N);
	ATF_CHECK_EQ(cfx_in_flight(&f, PINNED), 0);

	gate_open(&g);
	join(t);
	ATF_CHECK_MSG(p.rc == 0, "plan: %d %s", p.rc, p.msg);
	ATF_CHECK(cfx_resident(&f, c, PINNED));
	ATF_CHECK(cfx_resident(&f, bv, PINNED));
	ATF_CHECK_EQ(cfx_used(&f, PINNED), 3 * N);
	ATF_CHECK_EQ(cfx_in_flight(&f, PINNED), 0);
	ATF_CHECK(cfx_has_pattern(&f, a, PINNED, 0x41));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/* ---- 2: a failed query or sync is no answer -------------------------------- */

/* The copy to cuda:0 is still there, filling, its pinned source protected. */
static void check_in_flight(struct cfx *f, struct rsd_handle h, struct rsd_location to,
			    struct rsd_location from)
{
	struct rsd_snapshot *snap = cfx_snap(f);
	const struct rsd_materialization_snapshot *d = cfx_snap_mat(snap, h, to);
	const struct rsd_materialization_snapshot *s = cfx_snap_mat(snap, h, from);

	ATF_CHECK_MSG(d, "the destination of a copy in flight was removed");
	ATF_CHECK_MSG(s && s->pending_event_count == 1, "the source lost its protection");
	rsd_snapshot_free(snap);
}

/* After the copy ran: a reap folds it in, and the value is whole at both
 * ends; the manager closes. */
static void finish_whole(struct cfx *f, struct rsd_handle h, int seed)
{
	OK(rsd_manager_reap(f->m));
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK(cfx_has_pattern(f, h, CUDA0, seed));
	ATF_CHECK(cfx_has_pattern(f, h, PINNED, seed));
	OK(rsd_manager_close(f->m, 0));
	cfx_fini(f);
}

/*
 * One failed event query of a queued copy that has not run: the reap that
 * sees it synchronizes the copy's stream before it decides, so the
 * destination stays (a GPU would still write it) and the source stays
 * protected. Once the copy has run the reap returns 0 and the copy holds
 * its bytes.
 */
ATF_TC_WITHOUT_HEAD(query_failure_is_no_answer);
ATF_TC_BODY(query_failure_is_no_answer, tc)
{
	struct call r = { 0 };
	struct rsd_handle h;
	pthread_t t;
	struct cfx f;

	setup(&f, NULL, 0);
	h = filled(&f, PINNED, 0x33);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	r.f = &f;
	start_waiter(&r, do_reap, &t, 1); /* the stream sync after the query */
	check_in_flight(&f, h, CUDA0, PINNED);
	rsd_simdev_complete_all(f.sd);
	join(t);
	CHECK_CALL(r, 0);
	finish_whole(&f, h, 0x33);
}

/*
 * The same for a host thread waiting for the copy: its failed event sync
 * is followed by a sync of the copy's stream; the acquire then returns a
 * lease on the complete bytes, and nothing was removed meanwhile.
 */
ATF_TC_WITHOUT_HEAD(sync_failure_is_no_answer);
ATF_TC_BODY(sync_failure_is_no_answer, tc)
{
	struct call w;
	const struct rsd_resident *v;
	struct rsd_handle h;
	pthread_t t;
	struct cfx f;

	setup(&f, NULL, 0);
	h = filled(&f, PINNED, 0x5c);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_move(f.m, h, CUDA0, NULL, NULL, NULL));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL)); /* filling */
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	w.f = &f;
	w.h = h;
	w.at = PINNED;
	/* The failed event sync, then the stream sync that waits. */
	start_waiter(&w, do_acquire, &t, 2);
	check_in_flight(&f, h, PINNED, CUDA0);
	rsd_simdev_complete_all(f.sd);
	join(t);
	CHECK_CALL(w, 0);
	if (!w.rc) {
		OK(rsd_lease_value(w.lease, h, &v));
		ATF_CHECK_EQ(((const unsigned char *)rsd_resident_data(v, 0))[N - 1], 0x5c);
		OK(rsd_lease_release(w.lease, 0));
		rsd_lease_free(w.lease);
	}
	OK(rsd_manager_reap(f.m));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * A waited copy (rsd_ensure, and a plan's batch of two copies) whose event
 * sync fails: the stream is drained and the event then says the copy
 * completed, so the call succeeds and the bytes are there. (Before, the
 * failed sync was the copy's failure: the call returned RSD_EDEVICE and
 * the destination was freed while a GPU might still have written it.)
 */
ATF_TC_WITHOUT_HEAD(waited_sync_failure_is_no_answer);
ATF_TC_BODY(waited_sync_failure_is_no_answer, tc)
{
	struct rsd_action a[2];
	struct rsd_handle h, g;
	struct cfx f;

	setup(&f, NULL, 0);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	h = filled(&f, PINNED, 0x61);
	g = filled(&f, PINNED, 0x62);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	OK(rsd_ensure(f.m, h, CUDA0, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA0, 0x61));
	OK(rsd_drop(f.m, h, CUDA0, NULL));

	a[0] = rsd_action_ensure(h, CUDA0);
	a[1] = rsd_action_ensure(g, CUDA0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	OK(rsd_execute_actions(f.m, a, 2, "synced", NULL, 0, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA0, 0x61));
	ATF_CHECK(cfx_has_pattern(&f, g, CUDA0, 0x62));
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), 2 * N);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * A waited copy the device gives no answer for: its event sync fails and
 * so does the sync of its stream. The call returns the device's error,
 * but neither end is freed: the copy stays in flight as a queued copy
 * (destination charged and filling, source protected by its event), and
 * the first reap after the device answers folds it in, complete.
 */
ATF_TC_WITHOUT_HEAD(waited_copy_without_answer_stays);
ATF_TC_BODY(waited_copy_without_answer_stays, tc)
{
	struct rsd_handle h;
	struct cfx f;
	int rc;

	setup(&f, NULL, 0);
	h = filled(&f, PINNED, 0x64);
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_EVENT_SYNC, RSD_EDEVICE);
	rc = rsd_ensure(f.m, h, CUDA0, NULL, NULL);
	ATF_CHECK_EQ_MSG(rc, -RSD_EDEVICE, "rc %d: %s", rc, rsd_last_error()->message);
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_EVENT_SYNC, 0);
	check_in_flight(&f, h, CUDA0, PINNED);
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), N);
	rsd_simdev_complete_all(f.sd);
	finish_whole(&f, h, 0x64);
}

/* ---- 3: after a sticky fault, nothing behind it goes before the drain ------- */

/*
 * The first copy on a stream fails when it runs; a second copy queued
 * behind it on that stream has not run (skipped later) although its event
 * already reports the stream's fault. The reap that sees it drains the
 * stream before it frees that copy's destination; afterwards both copies
 * are undone, each value whole at its source.
 */
ATF_TC_WITHOUT_HEAD(sticky_fault_drains_before_free);
ATF_TC_BODY(sticky_fault_drains_before_free, tc)
{
	struct call r = { 0 };
	struct rsd_handle h1, h2;
	void *s;
	pthread_t t;
	struct cfx f;

	setup(&f, NULL, 0);
	h1 = filled(&f, PINNED, 0x11);
	h2 = filled(&f, PINNED, 0x22);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &s), 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h1, CUDA0, s, NULL));
	rsd_simdev_stream_complete(f.sd, s); /* the first copy fails */
	/* Its failure is definite (the stream ran): the next call on h1
	 * reports it, once. */
	ERR(RSD_EDEVICE, rsd_ensure_async(f.m, h1, CUDA0, s, NULL));
	OK(rsd_ensure_async(f.m, h2, CUDA0, s, NULL)); /* queued behind the fault */
	r.f = &f;
	start_waiter(&r, do_reap, &t, 1);
	check_in_flight(&f, h2, CUDA0, PINNED);
	rsd_simdev_complete_all(f.sd); /* the second copy is skipped */
	join(t);
	CHECK_CALL(r, RSD_EDEVICE);
	ATF_CHECK(!cfx_resident(&f, h1, CUDA0));
	ATF_CHECK(!cfx_resident(&f, h2, CUDA0));
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), 0);
	ATF_CHECK(cfx_has_pattern(&f, h1, PINNED, 0x11));
	ATF_CHECK(cfx_has_pattern(&f, h2, PINNED, 0x22));
	rsd_simdev_stream_destroy(f.sd, s);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/* ---- 4: every waiter returns ------------------------------------------------- */

#define NWAITERS 4

/*
 * A value filled with seed, on cuda:0 only, then a queued copy of it into
 * pinned memory (failing on the device when fail is set) that NWAITERS
 * host acquires wait for, each on its own thread.
 */
static struct rsd_handle wait_on_filling(struct cfx *f, int seed, bool fail, struct call *w,
					 pthread_t *t)
{
	struct rsd_handle h = filled(f, PAGEABLE, seed);

	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_move(f->m, h, CUDA0, NULL, NULL, NULL));
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
	if (fail)
		rsd_simdev_fail_nth(f->sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f->m, h, PINNED, NULL, NULL));
	for (int i = 0; i < NWAITERS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].f = f;
		w[i].h = h;
		w[i].at = PINNED;
		start_waiter(&w[i], do_acquire, &t[i], 1);
	}
	return h;
}

/*
 * Several host acquires wait for one queued copy into pinned memory, each
 * on its own thread: when the copy completes every one returns a lease,
 * and the copy's record is folded in once (the pinned copy is resident,
 * its source unprotected).
 */
ATF_TC_WITHOUT_HEAD(many_host_waiters_return);
ATF_TC_BODY(many_host_waiters_return, tc)
{
	struct call w[NWAITERS];
	pthread_t t[NWAITERS];
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	setup(&f, NULL, 0);
	h = wait_on_filling(&f, 0x6e, false, w, t);
	rsd_simdev_complete_all(f.sd);
	for (int i = 0; i < NWAITERS; i++) {
		join(t[i]);
		CHECK_CALL(w[i], 0);
	}
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, PINNED)->use_count, NWAITERS);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, CUDA0)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	for (int i = 0; i < NWAITERS; i++) {
		if (w[i].rc)
			continue;
		OK(rsd_lease_release(w[i].lease, 0));
		rsd_lease_free(w[i].lease);
	}
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x6e));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * The same with the copy failing on the device: every waiter returns, the
 * copy is undone once, and its error goes to exactly one of them (the
 * first back); the others then find no copy at pinned memory, as they
 * would alone after the undo (RSD_EUNAVAILABLE). The value is whole on
 * the device.
 */
ATF_TC_WITHOUT_HEAD(many_waiters_on_failed_copy);
ATF_TC_BODY(many_waiters_on_failed_copy, tc)
{
	struct call w[NWAITERS];
	pthread_t t[NWAITERS];
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	int copy_err = 0, gone = 0;
	struct cfx f;

	setup(&f, NULL, 0);
	h = wait_on_filling(&f, 0x3d, true, w, t);
	rsd_simdev_complete_all(f.sd);
	for (int i = 0; i < NWAITERS; i++) {
		join(t[i]);
		copy_err += w[i].rc == -RSD_EDEVICE && strstr(w[i].msg, "a queued copy of value");
		gone += w[i].rc == -RSD_EUNAVAILABLE;
		if (!w[i].rc) {
			rsd_lease_release(w[i].lease, 0);
			rsd_lease_free(w[i].lease);
		}
	}
	ATF_CHECK_EQ_MSG(copy_err, 1, "%d waiters got the copy's error", copy_err);
	ATF_CHECK_EQ_MSG(gone, NWAITERS - 1, "%d waiters found no copy", gone);
	OK(rsd_manager_reap(f.m)); /* reported once */
	snap = cfx_snap(&f);
	ATF_CHECK(!cfx_snap_mat(snap, h, PINNED));
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, CUDA0)->pending_event_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->used_bytes, 0);
	rsd_snapshot_free(snap);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * A queued move from pinned memory to cuda:0 that fails on the device, and
 * another thread's ensure back to pinned memory while it is queued: the
 * ensure waits for the move's copy before placing anything there, so the
 * move's undo finds the place free and puts the source back. (Before, the
 * ensure's own copy, arriving at pinned memory and reading the move's
 * destination, was there when a reap undid the move: the undo kept no
 * source, the ensure then failed with the move's copy, and the value's
 * only bytes were gone.) The copy's error goes to exactly one of the
 * ensure and the reap that races it; the value is whole at pinned memory.
 */
ATF_TC_WITHOUT_HEAD(ensure_beside_failed_move_keeps_source);
ATF_TC_BODY(ensure_beside_failed_move_keeps_source, tc)
{
	struct rsd_snapshot *snap;
	struct call w;
	struct rsd_handle h;
	pthread_t t;
	int reaped;
	struct cfx f;

	setup(&f, NULL, 0);
	h = filled(&f, PINNED, 0x5b);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_move_async(f.m, h, CUDA0, NULL, NULL, NULL));
	w = (struct call){ .f = &f, .h = h, .at = PINNED };
	start_waiter(&w, do_ensure, &t, 1);
	rsd_simdev_complete_all(f.sd);
	/* Most often before the ensure is back from its wait. */
	reaped = rsd_manager_reap(f.m);
	join(t);
	ATF_CHECK_MSG((reaped == -RSD_EDEVICE) != (w.rc == -RSD_EDEVICE),
		      "the copy's error returned %s (reap %d, ensure %d: %s)",
		      reaped && w.rc ? "twice" : "never", reaped, w.rc, w.msg);
	ATF_CHECK_MSG(!reaped || reaped == -RSD_EDEVICE, "reap: %d", reaped);
	ATF_CHECK_MSG(!w.rc || w.rc == -RSD_EDEVICE, "ensure: %d (%s)", w.rc, w.msg);
	OK(rsd_manager_reap(f.m)); /* reported once */
	snap = cfx_snap(&f);
	ATF_REQUIRE_MSG(cfx_snap_mat(snap, h, PINNED), "the moved source was not put back");
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0));
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->used_bytes, N);
	rsd_snapshot_free(snap);
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), 0);
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x5b));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * Two not-waiting ensures into a full pinned budget, each waiting for the
 * room a queued move out of pinned memory still holds: both return once
 * the copy has run, and both values fit.
 */
ATF_TC_WITHOUT_HEAD(room_waiters_return);
ATF_TC_BODY(room_waiters_return, tc)
{
	const struct rsd_budget b[] = { { PINNED, N } };
	struct call w[2];
	pthread_t t[2];
	struct rsd_handle a, x, y;
	struct cfx f;

	setup(&f, b, 1);
	a = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	x = cfx_adopt(&f, PAGEABLE, N / 2, RSD_REPLICABLE);
	y = cfx_adopt(&f, PAGEABLE, N / 2, RSD_REPLICABLE);
	cfx_fill(&f, x, PAGEABLE, 0x78);
	OK(rsd_move_async(f.m, a, CUDA0, NULL, NULL, NULL)); /* pinned stays charged */
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 2; i++) {
		w[i].f = &f;
		w[i].h = i ? y : x;
		w[i].at = PINNED;
		start_waiter(&w[i], do_ensure_async, &t[i], 1);
	}
	rsd_simdev_complete_all(f.sd);
	join(t[0]);
	join(t[1]);
	CHECK_CALL(w[0], 0);
	CHECK_CALL(w[1], 0);
	ATF_CHECK(cfx_resident(&f, x, PINNED));
	ATF_CHECK(cfx_resident(&f, y, PINNED));
	ATF_CHECK_EQ(cfx_used(&f, PINNED), N);
	ATF_CHECK(cfx_has_pattern(&f, x, PINNED, 0x78));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/* ---- 5: the manager keeps working after a failed copy ---------------------- */

/*
 * A copy fails on the device while a GPU lease on its destination orders
 * a consumer stream after it (which inherits the fault). Other values'
 * calls succeed all along; the copy's error goes to the first call that
 * needs the value (here an acquire of its source), once; an explicit reap
 * does not repeat it. Once the lease is released and its stream has run,
 * the kept destination goes and close(flags) closes.
 */
static void after_failed_copy(unsigned close_flags)
{
	struct rsd_handle h, o;
	struct rsd_lease *l, *l2;
	void *cs;
	struct cfx f;

	setup(&f, NULL, 0);
	h = filled(&f, PINNED, 0x2b);
	o = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	OK(rsd_acquire(f.m, &h, 1, CUDA0, cs, &l));
	rsd_simdev_complete_all(f.sd); /* the copy fails; cs inherits it */

	OK(rsd_ensure(f.m, o, PINNED, NULL, NULL));		      /* another value */
	ERR(RSD_EDEVICE, rsd_acquire(f.m, &h, 1, PINNED, NULL, &l2)); /* the copy's error */
	CHECK_MSG_HAS("a queued copy of value");
	OK(rsd_manager_reap(f.m)); /* returned once */
	OK(rsd_acquire(f.m, &h, 1, PINNED, NULL, &l2));
	OK(rsd_lease_release(l2, 0));
	rsd_lease_free(l2);

	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_drop(f.m, o, PAGEABLE, NULL));
	OK(rsd_ensure(f.m, o, PAGEABLE, NULL, NULL));
	OK(rsd_manager_reap(f.m));
	ATF_CHECK(!cfx_resident(&f, h, CUDA0));
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), 0);
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x2b));
	OK(rsd_manager_close(f.m, close_flags));
	rsd_simdev_stream_destroy(f.sd, cs);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(works_after_failed_copy);
ATF_TC_BODY(works_after_failed_copy, tc)
{
	after_failed_copy(0);
}

ATF_TC_WITHOUT_HEAD(works_after_failed_copy_nowait);
ATF_TC_BODY(works_after_failed_copy_nowait, tc)
{
	after_failed_copy(RSD_CLOSE_NOWAIT);
}

/* ---- 6: close(FORCE | NOWAIT) waits for nothing ----------------------------- */

/*
 * Two threads wait on streams that do not complete: one releases a GPU
 * lease with RSD_RELEASE_WAIT, one acquires at a host location that a
 * queued copy still fills. close(FORCE | NOWAIT) returns at once; when
 * the streams finally run, both waiters return RSD_ECLOSED.
 */
ATF_TC_WITHOUT_HEAD(force_nowait_close_waits_for_nothing);
ATF_TC_BODY(force_nowait_close_waits_for_nothing, tc)
{
	struct call rel = { 0 }, acq = { 0 }, cl = { 0 };
	pthread_t trel, tacq, tcl;
	struct rsd_handle h, k;
	void *cs;
	struct cfx f;

	setup(&f, NULL, 0);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	k = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_ensure(f.m, h, CUDA0, NULL, NULL));
	OK(rsd_move(f.m, k, CUDA0, NULL, NULL, NULL));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_acquire(f.m, &h, 1, CUDA0, cs, &rel.lease));
	OK(rsd_ensure_async(f.m, k, PINNED, NULL, NULL)); /* filling */
	rel.f = acq.f = cl.f = &f;
	acq.h = k;
	acq.at = PINNED;
	start_waiter(&rel, do_release_wait, &trel, 1);
	start_waiter(&acq, do_acquire, &tacq, 1);

	ATF_REQUIRE_EQ(pthread_create(&tcl, NULL, do_close_force_nowait, &cl), 0);
	join(tcl);
	CHECK_CALL(cl, 0);
	ERR(RSD_ECLOSED, rsd_manager_reap(f.m));

	rsd_simdev_complete_all(f.sd);
	join(trel);
	join(tacq);
	CHECK_CALL(rel, RSD_ECLOSED);
	CHECK_CALL(acq, RSD_ECLOSED);
	rsd_lease_free(rel.lease);
	rsd_simdev_stream_destroy(f.sd, cs);
	cfx_fini(&f);
}

/* Join t, failing the test unless it returns within ms milliseconds. */
static void join_within(pthread_t t, long ms)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	ATF_REQUIRE_EQ_MSG(pthread_timedjoin_np(t, NULL, &dl), 0,
			   "a thread still waited %ld ms after close(FORCE | NOWAIT)", ms);
}

/* How long a waiter may take to notice a forced close (its wait polls the
 * close every 0.5 ms; the rest is slack for a loaded machine). */
#define CLOSE_NOTICE_MS 2000

/*
 * Threads waiting on stalled copies, without the lock and in every way a
 * wait happens: NWAITERS host acquires on one queued copy (its event), a
 * waiting ensure (its own copy's event) and a reap whose event query
 * failed (the drain of that copy's stream). close(FORCE | NOWAIT) returns
 * 0 at once, and every one of them returns RSD_ECLOSED while the device
 * still runs nothing; the device runs the copies only afterwards, into
 * memory still allocated (the simulator aborts on memory freed under a
 * queued copy).
 */
ATF_TC_WITHOUT_HEAD(force_nowait_close_ends_every_wait);
ATF_TC_BODY(force_nowait_close_ends_every_wait, tc)
{
	struct call w[NWAITERS], e = { 0 }, r = { 0 }, cl = { 0 };
	pthread_t t[NWAITERS], te, tr, tcl;
	struct rsd_handle k, q;
	struct timespec t0, t1;
	unsigned long ran;
	struct cfx f;
	long ms;

	setup(&f, NULL, 0);
	k = filled(&f, PINNED, 0x21);
	q = filled(&f, PINNED, 0x22);
	wait_on_filling(&f, 0x20, false, w, t);
	e.f = r.f = cl.f = &f;
	e.h = k;
	e.at = CUDA0;
	start_waiter(&e, do_ensure, &te, 1);
	OK(rsd_ensure_async(f.m, q, CUDA0, NULL, NULL));
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	start_waiter(&r, do_reap, &tr, 1); /* the drain after the failed query */
	ran = rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY_EXEC);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ATF_REQUIRE_EQ(pthread_create(&tcl, NULL, do_close_force_nowait, &cl), 0);
	join_within(tcl, CLOSE_NOTICE_MS);
	CHECK_CALL(cl, 0);
	for (int i = 0; i < NWAITERS; i++)
		join_within(t[i], CLOSE_NOTICE_MS);
	join_within(te, CLOSE_NOTICE_MS);
	join_within(tr, CLOSE_NOTICE_MS);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	printf("close and %d waiters back in %ld ms\n", NWAITERS + 2, ms);
	/* Nothing ran meanwhile: the copies are still queued. */
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY_EXEC), ran);
	for (int i = 0; i < NWAITERS; i++) {
		CHECK_CALL(w[i], RSD_ECLOSED);
		ATF_CHECK_EQ(w[i].lease, NULL);
	}
	CHECK_CALL(e, RSD_ECLOSED);
	CHECK_CALL(r, RSD_ECLOSED);
	ERR(RSD_ECLOSED, rsd_manager_reap(f.m));
	rsd_simdev_complete_all(f.sd);
	cfx_fini(&f);
}

/*
 * A plan's two copies out of pinned memory, queued in its batch and
 * waited for at its end: a forced close stops that wait, the plan fails
 * for the close, and the copies' sources are kept allocated though the plan
 * thread, the last one back, frees the values (the simulator aborts on
 * memory freed under a queued copy when they run afterwards).
 */
ATF_TC_WITHOUT_HEAD(force_nowait_close_keeps_a_plans_sources);
ATF_TC_BODY(force_nowait_close_keeps_a_plans_sources, tc)
{
	struct call cl = { 0 };
	struct plan_arg p;
	pthread_t t, tcl;
	unsigned long syncs;
	struct cfx f;

	setup(&f, NULL, 0);
	memset(&p, 0, sizeof(p));
	p.f = cl.f = &f;
	p.a[0] = rsd_action_ensure(filled(&f, PINNED, 0x31), CUDA0);
	p.a[1] = rsd_action_ensure(filled(&f, PINNED, 0x32), CUDA0);
	syncs = rsd_simdev_calls(f.sd, RSD_SIMDEV_EVENT_SYNC);
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, run_plan, &p), 0);
	wait_calls(&f, RSD_SIMDEV_EVENT_SYNC, syncs + 1); /* the batch's first wait */
	ATF_REQUIRE_EQ(pthread_create(&tcl, NULL, do_close_force_nowait, &cl), 0);
	join_within(tcl, CLOSE_NOTICE_MS);
	CHECK_CALL(cl, 0);
	join_within(t, CLOSE_NOTICE_MS);
	/* A plan reports a failed action as RSD_EEXEC, naming its cause. */
	ATF_CHECK_MSG(p.rc == -RSD_EEXEC && strstr(p.msg, "was closed"), "plan: %d %s", p.rc,
		      p.msg);
	rsd_simdev_complete_all(f.sd);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, undo_reinstall_not_admitted);
	ATF_TP_ADD_TC(tp, query_failure_is_no_answer);
	ATF_TP_ADD_TC(tp, sync_failure_is_no_answer);
	ATF_TP_ADD_TC(tp, waited_sync_failure_is_no_answer);
	ATF_TP_ADD_TC(tp, waited_copy_without_answer_stays);
	ATF_TP_ADD_TC(tp, sticky_fault_drains_before_free);
	ATF_TP_ADD_TC(tp, many_host_waiters_return);
	ATF_TP_ADD_TC(tp, many_waiters_on_failed_copy);
	ATF_TP_ADD_TC(tp, ensure_beside_failed_move_keeps_source);
	ATF_TP_ADD_TC(tp, room_waiters_return);
	ATF_TP_ADD_TC(tp, works_after_failed_copy);
	ATF_TP_ADD_TC(tp, works_after_failed_copy_nowait);
	ATF_TP_ADD_TC(tp, force_nowait_close_waits_for_nothing);
	ATF_TP_ADD_TC(tp, force_nowait_close_ends_every_wait);
	ATF_TP_ADD_TC(tp, force_nowait_close_keeps_a_plans_sources);
	return 0;
}
