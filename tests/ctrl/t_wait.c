// SPDX-License-Identifier: MIT
/*
 * Uses under contention (DOC: rsd_controller_use_wait): a use that other
 * threads' work in flight stands in the way of sleeps until that work
 * ends and decides again; it fails at once when nothing in flight can
 * change its answer, after its wait limit, or at once with
 * RSD_CTRL_NOWAIT; waiters of one location are served in order; a value
 * a transfer reads or moves is never chosen as a victim.
 *
 * The simulated device runs stream work on command only, so the work in
 * flight (a released GPU lease's event, a queued copy) ends exactly when a
 * test completes it. Each failure a test expects is checked to be the
 * failure the same call has alone at that point (with RSD_CTRL_NOWAIT).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atf-c.h>

#include "../check.h"
#include "../gate.h"
#include "fixture.h"

static const struct rsd_location C0 = { RSD_CUDA, 0 };
static const struct rsd_location C1 = { RSD_CUDA, 1 };

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * A use of one value at cuda:0 on its own thread. With keep, the thread
 * first takes a lease on kept at cuda:0 and keeps it across the use (as a
 * worker keeps its inputs between kernels): leased, then the use after
 * go, the lease released after done.
 */
struct user {
	struct rsd_controller *c;
	struct rsd_handle h;
	void *stream;
	bool keep;
	struct rsd_manager *m;
	struct rsd_handle kept;
	pthread_barrier_t *leased, *go, *done;
	int rc;
	uint64_t version;      /* the state_version its decision was made on */
	struct rsd_blockers b; /* of a failure that named them (has_b) */
	bool has_b;
	atomic_bool returned;
	atomic_int tid; /* its kernel thread id, once running */
	pthread_t t;
};

static void *user_main(void *p)
{
	struct user *u = p;
	struct rsd_requirement q = fx_req(u->h, C0);
	struct rsd_request r = { "wait", &q, 1, NULL, 0 };
	struct rsd_lease *l = NULL;
	struct rsd_use *use;

	atomic_store(&u->tid, (int)syscall(SYS_gettid));
	if (u->keep) {
		RSD_REQUIRE_OK(rsd_acquire(u->m, &u->kept, 1, C0, u->stream, &l));
		pthread_barrier_wait(u->leased);
		pthread_barrier_wait(u->go);
	}
	u->rc = rsd_controller_use(u->c, &r, &u->stream, 1, NULL, 0, &use);
	if (!u->rc) {
		u->version = rsd_use_decision(use)->expected_state_version;
		RSD_CHECK_OK(rsd_use_close(use, NULL));
		rsd_use_free(use);
	} else if (rsd_last_blockers()) {
		u->b = *rsd_last_blockers();
		u->has_b = true;
	}
	atomic_store(&u->returned, true);
	if (l) {
		pthread_barrier_wait(u->done);
		RSD_CHECK_OK(rsd_lease_release(l, 0));
		rsd_lease_free(l);
	}
	return NULL;
}

static void user_start(struct user *u, struct rsd_controller *c, struct rsd_handle h, void *st)
{
	memset(u, 0, sizeof(*u));
	u->c = c;
	u->h = h;
	u->stream = st;
	ATF_REQUIRE_EQ(pthread_create(&u->t, NULL, user_main, u), 0);
}

/* The state letter of thread tid (/proc), '?' when unknown. */
static char thread_state(int tid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/*
 * Until u's thread has slept through 10 polls 5 ms apart: a use waiting
 * for work sleeps on its condition variable until that work ends, which
 * in these tests happens only on the test's command; a sleep of a few
 * polls could be a contended lock, ten in a row is the wait (a busy
 * machine delays the thread, never makes it look asleep for 50 ms).
 */
static void user_asleep(struct user *u)
{
	int tid, asleep = 0;

	for (int k = 0; k < 4000 && asleep < 10; k++) {
		sleep_ms(5);
		tid = atomic_load(&u->tid);
		asleep = tid && !atomic_load(&u->returned) && thread_state(tid) == 'S' ?
				 asleep + 1 :
				 0;
	}
	ATF_REQUIRE_MSG(asleep >= 10, "the use did not begin to wait within 20 s");
}

/* b, resident at cuda:0, under a released GPU lease whose event is pending
 * on st (the device runs work on command). */
static void pending_on_device(struct fx *f, struct rsd_handle b, void *st)
{
	struct rsd_lease *l;

	RSD_REQUIRE_OK(rsd_acquire(f->m, &b, 1, C0, st, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
}

/* Alone at this point the use fails with code: the failure a waiting use
 * would return is a real one. */
static void fails_alone(struct rsd_controller *c, struct rsd_handle a, void *st, int code)
{
	struct rsd_requirement q = fx_req(a, C0);
	struct rsd_request r = { "alone", &q, 1, NULL, 0 };
	struct rsd_use *use;

	RSD_REQUIRE_OK(rsd_controller_set_flags(c, RSD_CTRL_NOWAIT));
	ATF_CHECK_EQ(rsd_controller_use(c, &r, &st, 1, NULL, 0, &use), -code);
	RSD_REQUIRE_OK(rsd_controller_set_flags(c, 0));
}

/*
 * Every case but the last: a budget at cuda:0, a stream st there, a and v
 * replicable at pageable host, a controller; after open the caller puts
 * what it needs on the device, then calls wenv_on_command().
 */
struct wenv {
	struct fx f;
	struct rsd_controller *c;
	struct rsd_handle a, v;
	void *st;
};

static void wenv_open_n(struct wenv *e, uint64_t budget, int ndevices)
{
	struct rsd_budget b = { C0, budget };

	fx_init(&e->f, &b, 1, ndevices);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(e->f.sd, 0, &e->st));
	e->a = fx_adopt(&e->f, PAGEABLE, RSD_REPLICABLE);
	e->v = fx_adopt(&e->f, PAGEABLE, RSD_REPLICABLE);
	RSD_REQUIRE_OK(rsd_controller_create(e->f.m, NULL, 0, &e->c));
}

static void wenv_open(struct wenv *e, uint64_t budget)
{
	wenv_open_n(e, budget, 1);
}

static void wenv_on_command(struct wenv *e)
{
	rsd_simdev_set_auto_complete(e->f.sd, false);
}

/* cuda:0 (budget N) full with v, the device on command. */
static void wenv_open_full(struct wenv *e)
{
	wenv_open(e, N);
	fx_ensure(&e->f, e->v, C0);
	wenv_on_command(e);
}

/* Let the device work (the test's waiters' own copies then run at once). */
static void wenv_run(struct wenv *e, void *stream)
{
	rsd_simdev_set_auto_complete(e->f.sd, true);
	if (stream)
		rsd_simdev_stream_complete(e->f.sd, stream);
	else
		rsd_simdev_complete_all(e->f.sd);
}

static void wenv_close(struct wenv *e)
{
	rsd_controller_free(e->c);
	rsd_simdev_complete_all(e->f.sd);
	RSD_CHECK_OK(rsd_manager_close(e->f.m, 0));
	rsd_simdev_stream_destroy(e->f.sd, e->st);
	fx_fini(&e->f);
}

/* The waiting use of e->a: it has not returned before the device works,
 * then it succeeds with v dropped from cuda:0 and a there. */
static void waits_then_succeeds(struct wenv *e, void *stream)
{
	struct user u;

	user_start(&u, e->c, e->a, e->st);
	sleep_ms(50);
	ATF_CHECK_MSG(!atomic_load(&u.returned), "the use returned %d before the work it waits for",
		      u.rc);
	wenv_run(e, stream);
	pthread_join(u.t, NULL);
	RSD_CHECK_OK(u.rc);
	ATF_CHECK(!fx_at(&e->f, e->v, C0));
	ATF_CHECK(fx_at(&e->f, e->a, C0));
}

/*
 * cuda:0 holds one value, v, whose released lease's event is pending: a
 * use of a needs v dropped. Alone (no wait) it fails with RSD_EPLAN, the
 * blockers named; the waiting use sleeps until the consumer stream
 * completes, then drops v.
 */
ATF_TC_WITHOUT_HEAD(waits_for_pending_lease);
ATF_TC_BODY(waits_for_pending_lease, tc)
{
	struct wenv e;

	wenv_open_full(&e);
	pending_on_device(&e.f, e.v, e.st);
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	ATF_CHECK(rsd_last_error()->has_blockers);
	waits_then_succeeds(&e, e.st);
	wenv_close(&e);
}

/*
 * cuda:0 is full with a copy of v still queued (arriving): it is no
 * victim, so a use of a fails alone; the waiting use sleeps until the copy
 * completes and is reaped, then drops v.
 */
ATF_TC_WITHOUT_HEAD(waits_for_queued_copy);
ATF_TC_BODY(waits_for_queued_copy, tc)
{
	struct wenv e;

	wenv_open(&e, N);
	wenv_on_command(&e);
	RSD_REQUIRE_OK(rsd_ensure_async(e.f.m, e.v, C0, NULL, NULL));
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	waits_then_succeeds(&e, NULL);
	wenv_close(&e);
}

/*
 * The wait limit: the pending event never completes while the use waits;
 * the use returns the failure it has alone (RSD_EPLAN, blockers named)
 * once its 30 ms are spent, not before. With RSD_CTRL_NOWAIT it returns
 * at once.
 */
ATF_TC_WITHOUT_HEAD(wait_limit);
ATF_TC_BODY(wait_limit, tc)
{
	struct rsd_requirement q;
	struct rsd_request r = { "bounded", &q, 1, NULL, 0 };
	struct rsd_use *use;
	uint64_t t0, ms;
	struct wenv e;

	wenv_open(&e, N);
	q = fx_req(e.a, C0);
	fx_ensure(&e.f, e.v, C0);
	wenv_on_command(&e);
	pending_on_device(&e.f, e.v, e.st);
	ATF_CHECK_EQ(rsd_controller_set_wait_limit(NULL, 1), -RSD_ETYPE);
	RSD_REQUIRE_OK(rsd_controller_set_wait_limit(e.c, 30000000));
	t0 = now_ms();
	RSD_CHECK_ERR(RSD_EPLAN, rsd_controller_use(e.c, &r, &e.st, 1, NULL, 0, &use));
	ms = now_ms() - t0;
	ATF_CHECK_MSG(ms >= 30 && ms < 150, "waited %llu ms, limit 30", (unsigned long long)ms);
	ATF_CHECK(rsd_last_error()->has_blockers);
	ATF_CHECK(rsd_last_blockers() != NULL && rsd_last_blockers()->pending_bytes == N);

	RSD_REQUIRE_OK(rsd_controller_set_flags(e.c, RSD_CTRL_NOWAIT));
	RSD_REQUIRE_OK(rsd_controller_set_wait_limit(e.c, UINT64_MAX));
	t0 = now_ms();
	RSD_CHECK_ERR(RSD_EPLAN, rsd_controller_use(e.c, &r, &e.st, 1, NULL, 0, &use));
	ATF_CHECK_MSG(now_ms() - t0 < 20, "a no-wait use took %llu ms",
		      (unsigned long long)(now_ms() - t0));
	wenv_close(&e);
}

/*
 * The bound with two waiters of one location: the pending event never
 * completes while they wait; the second waits behind the first (served in
 * order) and each returns once the controller's 100 ms limit from its own
 * first failure are spent, with the failure it has alone (RSD_EPLAN, the
 * pending lease named). A waiter's bound holds in the queue too.
 */
ATF_TC_WITHOUT_HEAD(wait_limit_in_queue);
ATF_TC_BODY(wait_limit_in_queue, tc)
{
	struct rsd_handle a2;
	struct user u[2];
	uint64_t t0, ms;
	struct wenv e;

	wenv_open_full(&e);
	a2 = fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE);
	pending_on_device(&e.f, e.v, e.st);
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	RSD_REQUIRE_OK(rsd_controller_set_wait_limit(e.c, 100000000));
	t0 = now_ms();
	user_start(&u[0], e.c, e.a, e.st);
	user_start(&u[1], e.c, a2, e.st);
	for (int i = 0; i < 2; i++) {
		pthread_join(u[i].t, NULL);
		ms = now_ms() - t0;
		ATF_CHECK_MSG(ms >= 100 && ms < 400, "use %d returned after %llu ms, limit 100", i,
			      (unsigned long long)ms);
		ATF_CHECK_EQ(u[i].rc, -RSD_EPLAN);
		ATF_CHECK(u[i].has_b && u[i].b.pending_bytes == N && u[i].b.live_bytes == 0);
	}
	ATF_CHECK(fx_at(&e.f, e.v, C0));
	wenv_close(&e);
}

/*
 * Pending lease events alone are waited for at most 200 ms without any
 * work ending (they end only when their consumer streams run, which may be
 * work the caller has not let run): with no wait limit, the waiting use
 * returns the failure it has alone (RSD_EPLAN, the pending lease named)
 * once that time is spent, not before, and not for ever.
 */
ATF_TC_WITHOUT_HEAD(pending_leases_alone_bounded);
ATF_TC_BODY(pending_leases_alone_bounded, tc)
{
	struct rsd_requirement q;
	struct rsd_request r = { "pending", &q, 1, NULL, 0 };
	struct rsd_use *use;
	uint64_t t0, ms;
	struct wenv e;

	wenv_open_full(&e);
	q = fx_req(e.a, C0);
	pending_on_device(&e.f, e.v, e.st);
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	t0 = now_ms();
	RSD_CHECK_ERR(RSD_EPLAN, rsd_controller_use(e.c, &r, &e.st, 1, NULL, 0, &use));
	ms = now_ms() - t0;
	ATF_CHECK_MSG(ms >= 200 && ms < 5000, "waited %llu ms for pending lease events alone",
		      (unsigned long long)ms);
	ATF_CHECK(rsd_last_blockers() != NULL && rsd_last_blockers()->pending_bytes == N &&
		  rsd_last_blockers()->npending == 1 && rsd_last_blockers()->live_bytes == 0);
	ATF_CHECK(fx_at(&e.f, e.v, C0));
	wenv_close(&e);
}

/*
 * Nothing in flight: the only copy at cuda:0 is under an active lease,
 * which no completion ends. The use fails at once with RSD_EPLAN, as it
 * does alone, instead of waiting.
 */
ATF_TC_WITHOUT_HEAD(nothing_in_flight_fails_at_once);
ATF_TC_BODY(nothing_in_flight_fails_at_once, tc)
{
	struct rsd_requirement q;
	struct rsd_request r = { "blocked", &q, 1, NULL, 0 };
	struct rsd_lease *l;
	struct rsd_use *use;
	struct wenv e;
	uint64_t t0;

	wenv_open(&e, N);
	q = fx_req(e.a, C0);
	fx_ensure(&e.f, e.v, C0);
	wenv_on_command(&e);
	RSD_REQUIRE_OK(rsd_acquire(e.f.m, &e.v, 1, C0, e.st, &l));
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	t0 = now_ms();
	RSD_CHECK_ERR(RSD_EPLAN, rsd_controller_use(e.c, &r, &e.st, 1, NULL, 0, &use));
	ATF_CHECK_MSG(now_ms() - t0 < 20, "the use waited %llu ms for nothing in flight",
		      (unsigned long long)(now_ms() - t0));
	ATF_CHECK(rsd_last_blockers() != NULL && rsd_last_blockers()->lease_bytes == N);
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	wenv_close(&e);
}

/*
 * Another thread's calls that commit while a use decides: a policy that
 * orders candidates as the tiered LRU does, but first, when asked for
 * those at cuda:0 (once a decision here), has a second thread reserve and
 * release 8 bytes at pageable host (two state_version steps that give no
 * room back) and waits until it has, for the first 200 times it is armed.
 */
struct churn {
	struct rsd_manager *m;
	struct rsd_policy *lru;
	struct fx_wrap pol;
	atomic_bool armed, stop, free_run; /* free_run: commit in a loop */
	atomic_uint want, done;
	pthread_t t;
};

static void *churn_main(void *p)
{
	struct churn *ch = p;

	while (!atomic_load(&ch->stop)) {
		struct rsd_reservation *r;

		if (!atomic_load(&ch->free_run) &&
		    atomic_load(&ch->done) == atomic_load(&ch->want)) {
			sleep_ms(0);
			continue;
		}
		RSD_CHECK_OK(rsd_reserve(ch->m, PAGEABLE, 8, "churn", &r));
		RSD_CHECK_OK(rsd_reservation_release(r));
		rsd_reservation_free(r);
		atomic_fetch_add(&ch->done, 1);
	}
	return NULL;
}

static void churn_order(void *ctx, const struct rsd_eviction_candidate *c, size_t n)
{
	struct churn *ch = ctx;

	if (n && rsd_location_equal(c[0].location, C0) && atomic_load(&ch->armed) &&
	    atomic_load(&ch->want) < 200) {
		unsigned w = atomic_fetch_add(&ch->want, 1) + 1;

		while (atomic_load(&ch->done) < w)
			sleep_ms(0);
	}
}

/*
 * A use that finds no plan while nothing is in flight, and another
 * thread's calls that commit during each of its decisions (state_version
 * steps that give no room back). cuda:0 holds v, the only copy of a
 * must-preserve value, and no other location has room for it (pageable
 * host keeps 8 bytes free, pinned host is full with a): a use of a at
 * cuda:0 fails with RSD_EPLAN, v freeable (no lifetime blocks it). The
 * waiting use decides again once after such commits, then returns
 * RSD_EPLAN; it used to decide again after each of them, for as long as
 * they came (the hostile test's watchdog hang: a use deciding again and
 * again beside the checker thread's ledger probes).
 */
ATF_TC_WITHOUT_HEAD(commits_alone_not_waited_for);
ATF_TC_BODY(commits_alone_not_waited_for, tc)
{
	struct rsd_budget b[3] = { { C0, N }, { PAGEABLE, N + 8 }, { PINNED, N } };
	struct rsd_requirement q;
	struct rsd_request r = { "no-room", &q, 1, NULL, 0 };
	const struct rsd_blockers *bl;
	struct rsd_controller *c;
	struct churn ch = { 0 };
	struct rsd_handle a;
	struct rsd_use *use;
	void *st;
	struct fx f;
	int rc;

	fx_init(&f, b, 3, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &st));
	(void)fx_adopt(&f, C0, RSD_REPLICABLE);
	(void)fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	a = fx_adopt(&f, PINNED, RSD_REPLICABLE);
	q = fx_req(a, C0);
	ch.m = f.m;
	RSD_REQUIRE_OK(rsd_tiered_lru_create(NULL, 0, &ch.lru));
	fx_wrap_init(&ch.pol, ch.lru, churn_order, NULL, &ch);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, &ch.pol.pol, 0, &c));
	fails_alone(c, a, st, RSD_EPLAN);
	bl = rsd_last_blockers();
	ATF_REQUIRE(bl != NULL);
	ATF_CHECK_EQ(bl->freeable_bytes, N);
	ATF_CHECK_EQ(bl->live_bytes + bl->reserved_bytes, 0);

	ATF_REQUIRE_EQ(pthread_create(&ch.t, NULL, churn_main, &ch), 0);
	atomic_store(&ch.armed, true);
	rc = rsd_controller_use(c, &r, &st, 1, NULL, 0, &use);
	atomic_store(&ch.armed, false);
	atomic_store(&ch.stop, true);
	pthread_join(ch.t, NULL);
	RSD_CHECK_ERR(RSD_EPLAN, rc);
	if (!rc) {
		RSD_CHECK_OK(rsd_use_close(use, NULL));
		rsd_use_free(use);
	}
	/* its first decision, and one more after the commits */
	ATF_CHECK_EQ_MSG(atomic_load(&ch.done), 2, "the use decided %u times",
			 atomic_load(&ch.done));

	rsd_controller_free(c);
	rsd_policy_free(ch.lru);
	RSD_CHECK_OK(rsd_manager_close(f.m, 0));
	rsd_simdev_stream_destroy(f.sd, st);
	fx_fini(&f);
}

/*
 * Pending lease events are waited for as before while other threads'
 * calls commit beside the wait (a reservation taken and released in a
 * loop): those steps end no work, so the use still returns RSD_EPLAN only
 * after 200 ms without any work ending, not at the first commits.
 */
ATF_TC_WITHOUT_HEAD(pending_leases_waited_beside_commits);
ATF_TC_BODY(pending_leases_waited_beside_commits, tc)
{
	struct rsd_requirement q;
	struct rsd_request r = { "pending", &q, 1, NULL, 0 };
	struct churn ch = { 0 };
	struct rsd_use *use;
	uint64_t t0, ms;
	unsigned before;
	struct wenv e;

	wenv_open_full(&e);
	q = fx_req(e.a, C0);
	pending_on_device(&e.f, e.v, e.st);
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	ch.m = e.f.m;
	atomic_store(&ch.free_run, true);
	ATF_REQUIRE_EQ(pthread_create(&ch.t, NULL, churn_main, &ch), 0);
	while (atomic_load(&ch.done) < 100)
		sleep_ms(1);
	before = atomic_load(&ch.done);
	t0 = now_ms();
	RSD_CHECK_ERR(RSD_EPLAN, rsd_controller_use(e.c, &r, &e.st, 1, NULL, 0, &use));
	ms = now_ms() - t0;
	ATF_CHECK_MSG(atomic_load(&ch.done) > before, "no commit beside the wait");
	atomic_store(&ch.stop, true);
	pthread_join(ch.t, NULL);
	ATF_CHECK_MSG(ms >= 200 && ms < 5000, "waited %llu ms for pending lease events",
		      (unsigned long long)ms);
	ATF_CHECK(rsd_last_blockers() != NULL && rsd_last_blockers()->pending_bytes == N);
	ATF_CHECK(fx_at(&e.f, e.v, C0));
	wenv_close(&e);
}

/* A source whose load stops on a gate: the plan loading it keeps its
 * headroom at the destination until the test opens the gate. */
struct gsrc {
	struct fx *f;
	struct gate gate;
	struct rsd_handle h;
	int rc; /* of the plan that loads it */
	pthread_t t;
};

static int gsrc_load(void *ctx, struct rsd_resident **out)
{
	struct gsrc *g = ctx;
	uint64_t n = N;

	gate_hold(&g->gate);
	return rsd_resident_alloc(g->f->m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, out);
}

static void *gsrc_plan(void *p)
{
	struct gsrc *g = p;
	struct rsd_action act = rsd_action_ensure(g->h, C0);

	g->rc = rsd_execute_actions(g->f->m, &act, 1, "held", NULL, 0, NULL, NULL);
	return NULL;
}

/*
 * Another thread's plan holds the only room at cuda:0 (budget N) for its
 * ensure of g, stopped in g's load: alone, a use of a fails with
 * RSD_EPLAN (the headroom is no victim, and not a lifetime); the waiting
 * use sleeps until the plan has ended, then drops g to make room.
 */
ATF_TC_WITHOUT_HEAD(waits_for_held_headroom);
ATF_TC_BODY(waits_for_held_headroom, tc)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct gsrc g = { .gate = GATE_INIT };
	struct rsd_source src = { gsrc_load, NULL, &g };
	struct user u;
	struct wenv e;

	wenv_open(&e, N);
	g.f = &e.f;
	RSD_REQUIRE_OK(rsd_register_source(e.f.m, &spec, &src, PAGEABLE, &g.h));
	ATF_REQUIRE_EQ(pthread_create(&g.t, NULL, gsrc_plan, &g), 0);
	gate_wait_entered(&g.gate);
	ATF_CHECK_EQ(fx_used(&e.f, C0), 0);
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	ATF_CHECK(rsd_last_blockers() && rsd_last_blockers()->plan_held_bytes == N &&
		  rsd_last_blockers()->live_bytes == 0);

	user_start(&u, e.c, e.a, e.st);
	sleep_ms(50);
	ATF_CHECK_MSG(!atomic_load(&u.returned), "the use returned %d while the plan held", u.rc);
	gate_open(&g.gate);
	pthread_join(g.t, NULL);
	RSD_CHECK_OK(g.rc);
	pthread_join(u.t, NULL);
	RSD_CHECK_OK(u.rc);
	ATF_CHECK(fx_at(&e.f, e.a, C0));
	ATF_CHECK(!fx_at(&e.f, g.h, C0));
	wenv_close(&e);
}

/*
 * cuda:0 (budget N) holds v, whose queued move to pinned host (a spill
 * another thread started) has not run: v is leaving, no victim, and its
 * bytes stay charged until the copy is done. Alone a use of a fails with
 * RSD_EPLAN; the waiting use sleeps until the move completes, then finds
 * the room.
 */
ATF_TC_WITHOUT_HEAD(waits_for_queued_spill);
ATF_TC_BODY(waits_for_queued_spill, tc)
{
	struct wenv e;

	wenv_open_full(&e);
	RSD_REQUIRE_OK(rsd_move_async(e.f.m, e.v, PINNED, &C0, NULL, NULL));
	fails_alone(e.c, e.a, e.st, RSD_EPLAN);
	waits_then_succeeds(&e, NULL);
	ATF_CHECK(fx_at(&e.f, e.v, PINNED));
	wenv_close(&e);
}

/*
 * Two threads each keep a lease at cuda:0 (budget 2N: full) and use a
 * value that needs the other's bytes, while a copy to cuda:1 stays
 * queued (work in flight that never ends while the test holds the
 * device). Only a release can make room, and each releaser is the other
 * waiter: both uses fail at once with RSD_EPLAN, as each does alone, the
 * leases named as live. Before, both slept as long as any work was in
 * flight anywhere (here, until the test lets the copy run; in a busy
 * process, for ever), each waiting for the other's lease.
 */
ATF_TC_WITHOUT_HEAD(kept_leases_do_not_deadlock);
ATF_TC_BODY(kept_leases_do_not_deadlock, tc)
{
	pthread_barrier_t leased, go, done;
	struct user k[2];
	struct rsd_handle x, y, a, b, z;
	struct wenv e;
	uint64_t t0;

	wenv_open_n(&e, 2 * N, 2);
	x = e.a;
	y = e.v;
	a = fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE);
	b = fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE);
	z = fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&e.f, x, C0);
	fx_ensure(&e.f, y, C0);
	wenv_on_command(&e);
	RSD_REQUIRE_OK(rsd_ensure_async(e.f.m, z, C1, NULL, NULL));
	ATF_REQUIRE_EQ(pthread_barrier_init(&leased, NULL, 3), 0);
	ATF_REQUIRE_EQ(pthread_barrier_init(&go, NULL, 3), 0);
	ATF_REQUIRE_EQ(pthread_barrier_init(&done, NULL, 3), 0);
	for (int i = 0; i < 2; i++) {
		k[i] = (struct user){ .c = e.c,
				      .h = i ? b : a,
				      .stream = e.st,
				      .keep = true,
				      .m = e.f.m,
				      .kept = i ? y : x,
				      .leased = &leased,
				      .go = &go,
				      .done = &done };
		ATF_REQUIRE_EQ(pthread_create(&k[i].t, NULL, user_main, &k[i]), 0);
	}
	pthread_barrier_wait(&leased);
	fails_alone(e.c, a, e.st, RSD_EPLAN);
	fails_alone(e.c, b, e.st, RSD_EPLAN);
	t0 = now_ms();
	pthread_barrier_wait(&go);
	while (now_ms() - t0 < 1000 &&
	       !(atomic_load(&k[0].returned) && atomic_load(&k[1].returned)))
		sleep_ms(5);
	ATF_CHECK_MSG(atomic_load(&k[0].returned) && atomic_load(&k[1].returned),
		      "the uses still wait after %llu ms", (unsigned long long)(now_ms() - t0));
	/* let whatever still waits return before the checks */
	wenv_run(&e, NULL);
	pthread_barrier_wait(&done);
	for (int i = 0; i < 2; i++) {
		pthread_join(k[i].t, NULL);
		ATF_CHECK_EQ(k[i].rc, -RSD_EPLAN);
		ATF_REQUIRE(k[i].has_b);
		ATF_CHECK(rsd_location_equal(k[i].b.location, C0));
		ATF_CHECK_EQ(k[i].b.lease_bytes, 2 * N);
		ATF_CHECK_EQ(k[i].b.live_bytes, 2 * N);
		ATF_CHECK_EQ(k[i].b.requested_bytes, N);
	}
	ATF_CHECK(fx_at(&e.f, x, C0) && fx_at(&e.f, y, C0));
	ATF_CHECK(!fx_at(&e.f, a, C0) && !fx_at(&e.f, b, C0));
	pthread_barrier_destroy(&leased);
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&done);
	wenv_close(&e);
}

/*
 * Four threads: three uses wait for the same location, each from before
 * the next began, each needing one of three values there dropped once
 * their queued copies there complete (an arriving copy is no victim).
 * They are served in the order they began to wait: each decides only
 * after the one before it committed its entry, so none is overtaken (no
 * starvation). Queued copies, not pending lease events: those alone are
 * waited for at most 200 ms without progress, and starting three waiters
 * one after another, each seen asleep first, takes longer than that on a
 * loaded machine (the first then fails with RSD_EPLAN, as documented).
 */
ATF_TC_WITHOUT_HEAD(waiters_served_in_order);
ATF_TC_BODY(waiters_served_in_order, tc)
{
	struct rsd_handle want[3], old[3];
	struct user u[3];
	struct wenv e;

	wenv_open(&e, 3 * N);
	wenv_on_command(&e);
	for (int i = 0; i < 3; i++) {
		want[i] = i ? fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE) : e.a;
		old[i] = i ? fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE) : e.v;
		RSD_REQUIRE_OK(rsd_ensure_async(e.f.m, old[i], C0, NULL, NULL));
	}
	fails_alone(e.c, want[0], e.st, RSD_EPLAN);
	ATF_CHECK(rsd_last_blockers() && rsd_last_blockers()->arriving_bytes == 3 * N &&
		  rsd_last_blockers()->live_bytes == 0);

	/* Each use asleep in its wait before the next one starts: the order
	 * they began to wait is the order they were started in. */
	for (int i = 0; i < 3; i++) {
		user_start(&u[i], e.c, want[i], e.st);
		user_asleep(&u[i]);
	}
	for (int i = 0; i < 3; i++)
		ATF_CHECK_MSG(!atomic_load(&u[i].returned), "use %d returned %d before the work", i,
			      u[i].rc);
	wenv_run(&e, NULL);
	for (int i = 0; i < 3; i++) {
		pthread_join(u[i].t, NULL);
		RSD_CHECK_OK(u[i].rc);
		ATF_CHECK(fx_at(&e.f, want[i], C0));
		ATF_CHECK(!fx_at(&e.f, old[i], C0));
	}
	/* each decided on a state after the entry of the one before it */
	for (int i = 1; i < 3; i++)
		ATF_CHECK_MSG(u[i - 1].version < u[i].version,
			      "use %d decided on state_version %llu, use %d on %llu", i - 1,
			      (unsigned long long)u[i - 1].version, i,
			      (unsigned long long)u[i].version);
	wenv_close(&e);
}

/*
 * No victim in flight: at pinned host, x (evicted first by priority) is
 * the source of a queued copy to cuda:0, y is idle. A request that needs
 * one of them gone evicts y; x's copy is untouched.
 */
ATF_TC_WITHOUT_HEAD(no_victim_in_flight);
ATF_TC_BODY(no_victim_in_flight, tc)
{
	struct rsd_budget b = { PINNED, 2 * N };
	struct rsd_requirement q;
	struct rsd_request r = { "room", &q, 1, NULL, 0 };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle x, y, z;
	struct fx f;

	fx_init(&f, &b, 1, 1);
	x = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	y = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	z = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, x, PINNED);
	fx_ensure(&f, y, PINNED);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, x, -1, NULL));
	rsd_simdev_set_auto_complete(f.sd, false);
	/* first without the copy: x is the victim */
	q = fx_req(z, PINNED);
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, x));
	rsd_decision_free(d);
	/* a copy of x to cuda:0 is queued (it reads pinned or pageable host) */
	RSD_REQUIRE_OK(rsd_ensure_async(f.m, x, C0, NULL, NULL));
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, y));
	rsd_decision_free(d);

	rsd_controller_free(c);
	rsd_simdev_complete_all(f.sd);
	RSD_CHECK_OK(rsd_manager_close(f.m, 0));
	fx_fini(&f);
}

/* The one eviction d makes, of h at cuda:0. */
static void evicts(struct rsd_controller *c, const struct rsd_request *r, struct rsd_handle h)
{
	struct rsd_decision *d;

	RSD_REQUIRE_OK(rsd_controller_decide(c, r, &d));
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, h));
	ATF_CHECK(rsd_location_equal(d->evictions[0].action.location, C0));
	rsd_decision_free(d);
}

/*
 * No victim leaving or arriving: at cuda:0 (budget 2N), x is evicted
 * first by priority. While a queued move takes x away to pinned host
 * (leaving), and then while a queued copy brings x back (arriving), a
 * request that needs one value gone evicts y instead; idle again, x.
 */
ATF_TC_WITHOUT_HEAD(no_victim_leaving_or_arriving);
ATF_TC_BODY(no_victim_leaving_or_arriving, tc)
{
	struct rsd_requirement q;
	struct rsd_request r = { "room", &q, 1, NULL, 0 };
	struct rsd_handle x, y;
	struct wenv e;

	wenv_open(&e, 2 * N);
	x = e.v;
	y = fx_adopt(&e.f, PAGEABLE, RSD_REPLICABLE);
	q = fx_req(e.a, C0);
	fx_ensure(&e.f, x, C0);
	fx_ensure(&e.f, y, C0);
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(e.c, x, -1, NULL));
	evicts(e.c, &r, x);

	wenv_on_command(&e);
	RSD_REQUIRE_OK(rsd_move_async(e.f.m, x, PINNED, &C0, NULL, NULL));
	evicts(e.c, &r, y);
	wenv_run(&e, NULL);
	ATF_REQUIRE(!fx_at(&e.f, x, C0));

	wenv_on_command(&e);
	RSD_REQUIRE_OK(rsd_ensure_async(e.f.m, x, C0, NULL, NULL));
	evicts(e.c, &r, y);
	wenv_run(&e, NULL);
	RSD_REQUIRE_OK(rsd_manager_reap(e.f.m));
	evicts(e.c, &r, x);
	wenv_close(&e);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, waits_for_pending_lease);
	ATF_TP_ADD_TC(tp, waits_for_queued_copy);
	ATF_TP_ADD_TC(tp, wait_limit);
	ATF_TP_ADD_TC(tp, wait_limit_in_queue);
	ATF_TP_ADD_TC(tp, pending_leases_alone_bounded);
	ATF_TP_ADD_TC(tp, nothing_in_flight_fails_at_once);
	ATF_TP_ADD_TC(tp, commits_alone_not_waited_for);
	ATF_TP_ADD_TC(tp, pending_leases_waited_beside_commits);
	ATF_TP_ADD_TC(tp, waiters_served_in_order);
	ATF_TP_ADD_TC(tp, no_victim_in_flight);
	ATF_TP_ADD_TC(tp, kept_leases_do_not_deadlock);
	ATF_TP_ADD_TC(tp, waits_for_held_headroom);
	ATF_TP_ADD_TC(tp, waits_for_queued_spill);
	ATF_TP_ADD_TC(tp, no_victim_leaving_or_arriving);
	return atf_no_error();
}
