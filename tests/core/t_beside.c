// SPDX-License-Identifier: MIT
/*
 * What other threads see while a transfer runs beside the writer
 * (reference.md §20): a copy to a simulated device is admitted (the
 * destination charged and arriving, the source busy), runs without the
 * transition lock and commits when its bytes are complete.
 *
 * The simulated device runs on command here: a copy's event stays pending
 * until the test completes the device's work, so a transfer stays in flight
 * exactly as long as the test wants. A transfer is in flight once its event
 * is pending (the copy is queued after the lock was left). Calls that must
 * wait for a commit run on helper threads; the test checks they had not
 * returned when it let the transfer finish, which cannot be a matter of
 * timing: they cannot return before it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

#define IN_FLIGHT "a transfer is in flight"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

/*
 * A manager on one simulated device whose work runs only on command. Its
 * copies are unstaged: each is one device copy and one event, which is
 * what "in flight" counts (a staged copy from pageable memory records an
 * event per chunk and one after the last; t_staging covers those).
 */
static void setup(struct cfx *f, const struct rsd_budget *b, size_t nb)
{
	ATF_REQUIRE_EQ(setenv("RSD_STAGING", "off", 1), 0);
	cfx_sim(f, b, nb, 1);
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
}

/* Device events pending on the streams a transfer may use: cuda:0's
 * transfer stream and the driver's streams for each direction. */
static unsigned pending_all(struct cfx *f)
{
	static const struct rsd_location host[] = { { RSD_PAGEABLE_HOST, -1 },
						    { RSD_PINNED_HOST, -1 } };
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	unsigned n = rsd_simdev_pending_events(f->sd, NULL);

	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
		void *in = ops->transfer_stream(f->sd, CUDA0, host[i]);
		void *out = ops->transfer_stream(f->sd, host[i], CUDA0);

		n += in ? rsd_simdev_pending_events(f->sd, in) : 0;
		n += out ? rsd_simdev_pending_events(f->sd, out) : 0;
	}
	return n;
}

/* Wait (generously) until n device events are pending: n transfers in
 * flight, their locks left. */
static void wait_in_flight(struct cfx *f, unsigned n)
{
	for (unsigned i = 0; pending_all(f) < n; i++) {
		ATF_REQUIRE_MSG(i < 120000, "no transfer in flight after two minutes");
		sleep_ms(1);
	}
}

/* ---- calls on helper threads ---- */

struct call {
	struct cfx *f;
	int (*fn)(struct call *c);
	struct rsd_handle h;
	struct rsd_location at;
	const struct rsd_location *from; /* a move's explicit source */
	const struct rsd_action *acts;
	size_t nacts;
	void *stream;
	struct rsd_transition rep;
	struct rsd_plan_report *plan_rep;
	struct rsd_lease *lease;
	struct rsd_hold *hold;
	int rc;
	char msg[sizeof(rsd_last_error()->message)];
	atomic_bool done;
	pthread_t th;
};

static void *call_main(void *arg)
{
	struct call *c = arg;

	c->rc = c->fn(c);
	snprintf(c->msg, sizeof(c->msg), "%s", rsd_last_error()->message);
	atomic_store(&c->done, true);
	return NULL;
}

static void call_init(struct call *c, struct cfx *f, int (*fn)(struct call *c), struct rsd_handle h,
		      struct rsd_location at)
{
	memset(c, 0, sizeof(*c));
	c->f = f;
	c->fn = fn;
	c->h = h;
	c->at = at;
	atomic_init(&c->done, false);
}

static void call_go(struct call *c)
{
	ATF_REQUIRE_EQ(pthread_create(&c->th, NULL, call_main, c), 0);
}

static void call_start(struct call *c, struct cfx *f, int (*fn)(struct call *c),
		       struct rsd_handle h, struct rsd_location at)
{
	call_init(c, f, fn, h, at);
	call_go(c);
}

static bool call_done(struct call *c)
{
	return atomic_load(&c->done);
}

static void call_join(struct call *c)
{
	pthread_join(c->th, NULL);
}

static int c_ensure(struct call *c)
{
	return rsd_ensure(c->f->m, c->h, c->at, NULL, &c->rep);
}

static int c_move(struct call *c)
{
	return rsd_move(c->f->m, c->h, c->at, c->from, NULL, &c->rep);
}

static int c_acquire(struct call *c)
{
	return rsd_acquire(c->f->m, &c->h, 1, c->at, c->stream, &c->lease);
}

static int c_hold(struct call *c)
{
	return rsd_hold(c->f->m, &c->h, 1, c->at, &c->hold);
}

static int c_close(struct call *c)
{
	return rsd_manager_close(c->f->m, 0);
}

static int c_plan(struct call *c)
{
	return rsd_execute_actions(c->f->m, c->acts, c->nacts, "beside", NULL, 0, NULL,
				   &c->plan_rep);
}

/* rc must be -code with "a transfer is in flight" in the message. */
#define IN_USE(expr)                                                                       \
	do {                                                                               \
		ERR(RSD_EINUSE, (expr));                                                   \
		ATF_CHECK_MSG(strstr(rsd_last_error()->message, IN_FLIGHT), "message: %s", \
			      rsd_last_error()->message);                                  \
	} while (0)

/*
 * §20.2: a second ensure to an arriving destination waits for the first
 * transfer's commit and then runs after it: a no-op, and no second copy.
 */
ATF_TC_WITHOUT_HEAD(second_ensure_waits_for_arrival);
ATF_TC_BODY(second_ensure_waits_for_arrival, tc)
{
	struct rsd_action a;
	struct call first, second;
	struct rsd_handle h;
	unsigned long copies;
	uint64_t v;
	struct cfx f;

	setup(&f, NULL, 0);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	v = cfx_version(&f);
	copies = rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY);
	call_start(&first, &f, c_ensure, h, CUDA0);
	wait_in_flight(&f, 1);
	call_start(&second, &f, c_ensure, h, CUDA0);
	sleep_ms(50); /* let it reach the wait; it cannot return before the commit */
	ATF_CHECK_MSG(!call_done(&second), "the second ensure returned before the commit: %d (%s)",
		      second.rc, second.msg);
	CHECK_VERSION(&f, v);
	rsd_simdev_complete_all(f.sd);
	call_join(&first);
	call_join(&second);
	ATF_REQUIRE_EQ_MSG(first.rc, 0, "first ensure: %s", first.msg);
	ATF_REQUIRE_EQ_MSG(second.rc, 0, "second ensure: %s", second.msg);
	a = rsd_action_ensure(h, CUDA0);
	CHECK_REPORT(&first.rep, &a, false, &PAGEABLE, &CUDA0, N, N, NULL);
	CHECK_REPORT(&second.rep, &a, true, NULL, &CUDA0, N, N, R_DEST_RESIDENT);
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY) - copies, 1);
	/* cuda:0 recorded (+1), the copy installed (+1); the no-op adds nothing */
	CHECK_VERSION(&f, v + 2);
	ATF_CHECK(cfx_resident(&f, h, CUDA0));
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), N);
	cfx_fini(&f);
}

/*
 * §20.2 while a copy pageable -> cuda:0 is in flight: the busy source
 * cannot be dropped, moved out or discarded (state_version unchanged), the
 * arriving destination is absent to a drop, a lease and a hold; another
 * thread's admission counts its charge.
 */
ATF_TC_WITHOUT_HEAD(busy_source_and_arriving_destination);
ATF_TC_BODY(busy_source_and_arriving_destination, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, 2 * N } };
	struct rsd_location cuda0 = CUDA0;
	struct rsd_reservation *r = NULL;
	struct rsd_transition rep;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_snapshot *s;
	struct rsd_action a;
	struct call c;
	struct rsd_handle h;
	void *stream;
	uint64_t v;
	struct cfx f;

	setup(&f, bud, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &stream), 0);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	v = cfx_version(&f);
	call_start(&c, &f, c_ensure, h, CUDA0);
	wait_in_flight(&f, 1);

	/* The busy source. */
	IN_USE(rsd_drop(f.m, h, PAGEABLE, NULL));
	IN_USE(rsd_move(f.m, h, PINNED, &PAGEABLE, NULL, NULL));
	IN_USE(rsd_discard(f.m, h, NULL));
	CHECK_VERSION(&f, v);
	/* Reads of the source proceed. */
	OK(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	l = NULL;

	/* The arriving destination: absent to a drop, a lease and a hold. */
	OK(rsd_drop(f.m, h, CUDA0, &rep));
	a = rsd_action_drop(h, CUDA0);
	CHECK_REPORT(&rep, &a, true, &cuda0, NULL, N, N, R_ABSENT);
	ERR(RSD_EUNAVAILABLE, rsd_acquire(f.m, &h, 1, CUDA0, stream, &l));
	ERR(RSD_EUNAVAILABLE, rsd_hold(f.m, &h, 1, CUDA0, &hd));
	ATF_CHECK(!l && !hd);
	/* Two leases released: +2. */
	CHECK_VERSION(&f, v + 2);
	v += 2;
	s = cfx_snap(&f);
	ATF_CHECK_MSG(!cfx_mat(cfx_val(s, h), CUDA0) || cfx_mat(cfx_val(s, h), CUDA0)->arriving,
		      "cuda:0 published as resident before its commit");
	rsd_snapshot_free(s);

	/* Admission counts the arriving charge: 2N more would exceed 2N. */
	ERR(RSD_EBUDGET, rsd_reserve(f.m, CUDA0, 2 * N, "too much", &r));
	OK(rsd_reserve(f.m, CUDA0, N, "fits", &r));
	/* Published by that commit: the destination arriving, charged. */
	s = cfx_snap(&f);
	ATF_CHECK_EQ(s->state_version, v + 1);
	ATF_REQUIRE(cfx_mat(cfx_val(s, h), CUDA0));
	ATF_CHECK(cfx_mat(cfx_val(s, h), CUDA0)->arriving);
	ATF_CHECK(!cfx_mat(cfx_val(s, h), PAGEABLE)->arriving);
	ATF_CHECK_EQ(cfx_loc(s, CUDA0)->used_bytes, N);
	ATF_CHECK_EQ(cfx_loc(s, CUDA0)->reserved_bytes, N);
	rsd_snapshot_free(s);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	v += 2;
	CHECK_VERSION(&f, v);
	ATF_CHECK(!call_done(&c));

	rsd_simdev_complete_all(f.sd);
	call_join(&c);
	ATF_REQUIRE_EQ_MSG(c.rc, 0, "ensure: %s", c.msg);
	CHECK_VERSION(&f, v + 1);
	s = cfx_snap(&f);
	ATF_REQUIRE(cfx_mat(cfx_val(s, h), CUDA0));
	ATF_CHECK(!cfx_mat(cfx_val(s, h), CUDA0)->arriving);
	ATF_CHECK_EQ(cfx_loc(s, CUDA0)->used_bytes, N);
	ATF_CHECK_EQ(cfx_loc(s, CUDA0)->peak_charged_bytes, 2 * N);
	rsd_snapshot_free(s);
	/* Nothing is busy any more. */
	OK(rsd_drop(f.m, h, PAGEABLE, NULL));
	OK(rsd_discard(f.m, h, NULL));
	rsd_simdev_stream_destroy(f.sd, stream);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * A fresh manager (no budget) with one value of N bytes at src, adopted
 * with mode, and fn (an ensure or a move) taking it to cuda:0 on a helper
 * thread, in flight on return; *v: state_version before it started.
 */
static struct rsd_handle start_transfer(struct cfx *f, struct call *c, int (*fn)(struct call *c),
					struct rsd_location src, enum rsd_replica_mode mode,
					uint64_t *v)
{
	struct rsd_handle h;

	setup(f, NULL, 0);
	h = cfx_adopt(f, src, N, mode);
	*v = cfx_version(f);
	call_start(c, f, fn, h, CUDA0);
	wait_in_flight(f, 1);
	return h;
}

/* Wait (up to ten seconds) for a call that must not wait for anything. */
static bool call_returns_soon(struct call *c)
{
	for (unsigned i = 0; i < 10000 && !call_done(c); i++)
		sleep_ms(1);
	return call_done(c);
}

/*
 * §20.2: a move-out of a source that a waiting copy reads fails at once
 * with RSD_EINUSE whatever the destination, also one that sorts before the
 * source (pageable-host before pinned-host), with the source explicit or
 * implicit; such a move once waited for the copy's commit and then moved
 * the source, busy no more. The moves run on helper threads so that a
 * wait shows as a call that has not returned.
 */
ATF_TC_WITHOUT_HEAD(busy_source_move_out_fails_at_once);
ATF_TC_BODY(busy_source_move_out_fails_at_once, tc)
{
	struct rsd_location pinned = PINNED;
	struct call copy, mv[2];
	struct rsd_snapshot *s;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	h = start_transfer(&f, &copy, c_ensure, PINNED, RSD_REPLICABLE, &v);
	for (int i = 0; i < 2; i++) {
		call_init(&mv[i], &f, c_move, h, PAGEABLE);
		mv[i].from = i ? &pinned : NULL;
		call_go(&mv[i]);
		ATF_CHECK_MSG(call_returns_soon(&mv[i]),
			      "move to pageable-host (%s source) waits for the copy",
			      i ? "explicit" : "implicit");
	}
	ATF_CHECK(!call_done(&copy));
	CHECK_VERSION(&f, v);
	rsd_simdev_complete_all(f.sd);
	call_join(&copy);
	for (int i = 0; i < 2; i++) {
		call_join(&mv[i]);
		ATF_CHECK_EQ_MSG(mv[i].rc, -RSD_EINUSE, "move %d: %d (%s)", i, mv[i].rc, mv[i].msg);
		ATF_CHECK_MSG(strstr(mv[i].msg, "at pinned-host is in use: " IN_FLIGHT),
			      "move %d: %s", i, mv[i].msg);
	}
	ATF_REQUIRE_EQ_MSG(copy.rc, 0, "ensure: %s", copy.msg);
	/* Only the copy happened: cuda:0 recorded and installed. */
	CHECK_VERSION(&f, v + 2);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(s, h)->nmaterializations, 2);
	ATF_CHECK(cfx_mat(cfx_val(s, h), PINNED) && !cfx_mat(cfx_val(s, h), PAGEABLE));
	rsd_snapshot_free(s);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * §20.2: a destination arriving at a location the manager has never used
 * shows in the states other writers' commits publish during the copy:
 * that location has a row with the charge in used_bytes, the value's copy
 * there is arriving. The location is recorded only at the commit (+1 for
 * it, +1 for the install; rsd_manager_locations lists it from then on).
 */
ATF_TC_WITHOUT_HEAD(arrival_at_new_location_is_published);
ATF_TC_BODY(arrival_at_new_location_is_published, tc)
{
	const struct rsd_location_snapshot *l;
	struct rsd_snapshot *s;
	struct rsd_handle h, g;
	struct call c;
	uint64_t v;
	struct cfx f;

	h = start_transfer(&f, &c, c_ensure, PAGEABLE, RSD_REPLICABLE, &v);
	/* Another writer's commits: pinned-host recorded, g installed. */
	g = cfx_adopt(&f, PINNED, 2 * N, RSD_REPLICABLE);
	CHECK_VERSION(&f, v + 2);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(s->state_version, v + 2);
	l = cfx_loc(s, CUDA0);
	ATF_CHECK_MSG(l, "cuda:0 is missing from a state published during the copy");
	if (l) {
		ATF_CHECK_EQ(l->used_bytes, N);
		ATF_CHECK_EQ(l->value_count, 1);
		ATF_CHECK(!l->has_budget);
	}
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->used_bytes, 2 * N);
	ATF_CHECK_MSG(cfx_mat(cfx_val(s, h), CUDA0), "h's arriving copy is not published");
	if (cfx_mat(cfx_val(s, h), CUDA0))
		ATF_CHECK(cfx_mat(cfx_val(s, h), CUDA0)->arriving);
	ATF_CHECK(cfx_mat(cfx_val(s, g), PINNED));
	rsd_snapshot_free(s);
	CHECK_LOCATIONS(&f, PAGEABLE, PINNED);
	ATF_CHECK(!call_done(&c));

	rsd_simdev_complete_all(f.sd);
	call_join(&c);
	ATF_REQUIRE_EQ_MSG(c.rc, 0, "ensure: %s", c.msg);
	CHECK_VERSION(&f, v + 4);
	CHECK_LOCATIONS(&f, PAGEABLE, PINNED, CUDA0);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(s, CUDA0)->used_bytes, N);
	ATF_CHECK(!cfx_mat(cfx_val(s, h), CUDA0)->arriving);
	rsd_snapshot_free(s);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * §20.2: acquire and hold of a source a move in flight is taking away wait
 * for its commit and then find it absent; a drop of it fails meanwhile.
 */
ATF_TC_WITHOUT_HEAD(leaving_source_waits_for_move);
ATF_TC_BODY(leaving_source_waits_for_move, tc)
{
	struct call mv, acq, hold;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	h = start_transfer(&f, &mv, c_move, PAGEABLE, RSD_EXCLUSIVE, &v);
	call_start(&acq, &f, c_acquire, h, PAGEABLE);
	call_start(&hold, &f, c_hold, h, PAGEABLE);
	IN_USE(rsd_drop(f.m, h, PAGEABLE, NULL));
	IN_USE(rsd_discard(f.m, h, NULL));
	sleep_ms(50);
	ATF_CHECK_MSG(!call_done(&acq), "acquire returned before the move's commit: %d (%s)",
		      acq.rc, acq.msg);
	ATF_CHECK_MSG(!call_done(&hold), "hold returned before the move's commit: %d (%s)", hold.rc,
		      hold.msg);
	CHECK_VERSION(&f, v);
	rsd_simdev_complete_all(f.sd);
	call_join(&mv);
	call_join(&acq);
	call_join(&hold);
	ATF_REQUIRE_EQ_MSG(mv.rc, 0, "move: %s", mv.msg);
	ATF_CHECK_EQ_MSG(acq.rc, -RSD_EUNAVAILABLE, "acquire: %d (%s)", acq.rc, acq.msg);
	ATF_CHECK_EQ_MSG(hold.rc, -RSD_EUNAVAILABLE, "hold: %d (%s)", hold.rc, hold.msg);
	ATF_CHECK(!acq.lease && !hold.hold);
	/* cuda:0 recorded, installed, the source removed */
	CHECK_VERSION(&f, v + 3);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(s, h)->nmaterializations, 1);
	ATF_CHECK(cfx_mat(cfx_val(s, h), CUDA0) && !cfx_mat(cfx_val(s, h), CUDA0)->arriving);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->use_count + cfx_loc(s, PAGEABLE)->hold_count, 0);
	rsd_snapshot_free(s);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * §20.1: a device copy that fails rolls its arriving destination back: the
 * charge refunded, state_version unchanged, a location it brought in
 * unrecorded, the peak it raised kept. First while another value's copy
 * to the other device is in flight (a failed copy drains its own device's
 * transfer stream, so the two use different devices).
 */
ATF_TC_WITHOUT_HEAD(copy_failure_rolls_back);
ATF_TC_BODY(copy_failure_rolls_back, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 4 * N } };
	struct rsd_location cuda1 = cfx_cuda(1);
	struct rsd_snapshot *s;
	struct rsd_handle h, g;
	struct call other;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, bud, 1, 2);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	g = cfx_adopt(&f, PINNED, 2 * N, RSD_REPLICABLE);
	CHECK_LOCATIONS(&f, PINNED);
	v = cfx_version(&f);
	call_start(&other, &f, c_ensure, g, cuda1);
	wait_in_flight(&f, 1);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_ensure(f.m, h, CUDA0, NULL, NULL));
	CHECK_VERSION(&f, v);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(s, h)->nmaterializations, 1);
	ATF_CHECK(!cfx_loc(s, CUDA0));
	ATF_CHECK(!cfx_mat(cfx_val(s, g), cuda1) || cfx_mat(cfx_val(s, g), cuda1)->arriving);
	rsd_snapshot_free(s);
	ATF_CHECK(!call_done(&other));
	rsd_simdev_complete_all(f.sd);
	call_join(&other);
	ATF_REQUIRE_EQ_MSG(other.rc, 0, "g's ensure: %s", other.msg);
	/* g's commit: cuda:1 recorded (+1), installed (+1); cuda:0 never. */
	CHECK_VERSION(&f, v + 2);
	CHECK_LOCATIONS(&f, PINNED, cuda1);
	ATF_CHECK_EQ(cfx_used(&f, cuda1), 2 * N);
	ATF_CHECK_EQ(cfx_used(&f, PINNED), 3 * N);

	/* On a known location: both charges peaked there, h's is refunded. */
	v += 2;
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_move(f.m, h, cuda1, &PINNED, NULL, NULL));
	CHECK_VERSION(&f, v);
	CHECK_LOCATIONS(&f, PINNED, cuda1);
	ATF_CHECK_EQ(cfx_used(&f, cuda1), 2 * N);
	ATF_CHECK_EQ(cfx_peak_charged(&f, cuda1), 3 * N);
	ATF_CHECK_EQ(cfx_used(&f, PINNED), 3 * N);
	ATF_CHECK(cfx_resident(&f, h, PINNED) && !cfx_resident(&f, h, cuda1));
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/*
 * §20.2: while a plan executes, the headroom its preflight predicted stays
 * charged to it: another thread's reservation that would take it fails
 * while the plan's transfers run and succeeds once the plan is done.
 */
ATF_TC_WITHOUT_HEAD(plan_keeps_its_headroom);
ATF_TC_BODY(plan_keeps_its_headroom, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, 3 * N } };
	struct rsd_reservation *r = NULL;
	struct rsd_action acts[4];
	struct rsd_handle a, b;
	struct call p;
	struct cfx f;

	setup(&f, bud, 1);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	b = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	/* Moves, so that one transfer at a time is in flight (a plan queues
	 * the copies of its ensures together). */
	acts[0] = rsd_action_move(a, CUDA0, NULL);
	acts[1] = rsd_action_move(b, CUDA0, NULL);
	acts[2] = rsd_action_move(a, PAGEABLE, NULL);
	acts[3] = rsd_action_move(b, PAGEABLE, NULL);
	call_init(&p, &f, c_plan, a, CUDA0);
	p.acts = acts;
	p.nacts = 4;
	call_go(&p);
	for (int i = 0; i < 4; i++) {
		wait_in_flight(&f, 1);
		/* The plan's peak is 2N: during the first move N is used, and
		 * 2N more would fit but for the plan's kept headroom. */
		if (i < 2)
			ERR(RSD_EBUDGET,
			    rsd_reserve(f.m, CUDA0, 2 * N, "takes the plan's headroom", &r));
		ATF_CHECK(!call_done(&p));
		rsd_simdev_complete_all(f.sd);
	}
	call_join(&p);
	ATF_REQUIRE_EQ_MSG(p.rc, 0, "plan: %s", p.msg);
	ATF_REQUIRE(p.plan_rep);
	ATF_CHECK_EQ(p.plan_rep->ntransitions, 4);
	rsd_plan_report_free(p.plan_rep);
	ATF_CHECK_EQ(cfx_peak_charged(&f, CUDA0), 2 * N);
	OK(rsd_reserve(f.m, CUDA0, 2 * N, "after the plan", &r));
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

/* §14 with §20.1: a close from another thread waits for the transfer in
 * flight, which commits, then closes cleanly. */
ATF_TC_WITHOUT_HEAD(close_waits_for_transfer);
ATF_TC_BODY(close_waits_for_transfer, tc)
{
	struct rsd_snapshot *s = NULL;
	struct call x, cl;
	struct rsd_handle h;
	uint64_t got = 0;
	struct cfx f;

	setup(&f, NULL, 0);
	h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	call_start(&x, &f, c_ensure, h, CUDA0);
	wait_in_flight(&f, 1);
	call_start(&cl, &f, c_close, h, CUDA0);
	sleep_ms(50);
	ATF_CHECK_MSG(!call_done(&cl), "close returned during the transfer: %d (%s)", cl.rc,
		      cl.msg);
	ATF_CHECK(!call_done(&x));
	rsd_simdev_complete_all(f.sd);
	call_join(&x);
	call_join(&cl);
	ATF_CHECK_EQ_MSG(x.rc, 0, "ensure: %s", x.msg);
	ATF_CHECK_EQ_MSG(cl.rc, 0, "close: %s", cl.msg);
	ERR(RSD_ECLOSED, rsd_snapshot_take(f.m, &s));
	ERR(RSD_ECLOSED, rsd_manager_state_version_get(f.m, &got));
	/* Closing freed the copy the transfer committed. */
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(f.sd, 0), 0);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, second_ensure_waits_for_arrival);
	ATF_TP_ADD_TC(tp, busy_source_and_arriving_destination);
	ATF_TP_ADD_TC(tp, busy_source_move_out_fails_at_once);
	ATF_TP_ADD_TC(tp, arrival_at_new_location_is_published);
	ATF_TP_ADD_TC(tp, leaving_source_waits_for_move);
	ATF_TP_ADD_TC(tp, copy_failure_rolls_back);
	ATF_TP_ADD_TC(tp, plan_keeps_its_headroom);
	ATF_TP_ADD_TC(tp, close_waits_for_transfer);
	return atf_no_error();
}
