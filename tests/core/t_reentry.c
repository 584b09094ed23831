// SPDX-License-Identifier: MIT
/*
 * The source-callback guard and re-entry (reference.md §9, §18.16-18.17) as
 * librsd deviates from the reference (Documentation/design.md): snapshot,
 * state_version and locations are lock-free reads that succeed during a
 * load and show the pre-load state; a load runs without the transition
 * lock (reference.md §20.3), so only the loading thread's own calls fail
 * with RSD_EREENTRANT while other threads' calls proceed. Value callbacks
 * that run under the transition lock (a wrapped resident's release) are
 * same-thread re-entry.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* What a loader saw of its own manager. */
struct seen {
	struct rsd_handle other; /* a second value to poke at */
	struct rsd_reservation *resv;
	struct rsd_hold *hold;
	uint64_t version;
	size_t nlocations;
	int snap_rc, version_rc;
	uint64_t snap_version, snap_reserved, snap_nmats;
	int rc[12];
	bool rsv_active, hold_active;
	bool propagate;
};

static int read_hook(struct csrc *s)
{
	struct seen *w = s->arg;
	struct rsd_snapshot *snap = NULL;

	w->nlocations = rsd_manager_locations(s->f->m, NULL, 0);
	w->version_rc = rsd_manager_state_version_get(s->f->m, &w->version);
	w->snap_rc = rsd_snapshot_take(s->f->m, &snap);
	if (!w->snap_rc) {
		w->snap_version = snap->state_version;
		w->snap_nmats = snap->values[0].nmaterializations;
		w->snap_reserved = 0;
		for (size_t i = 0; i < snap->nlocations; i++)
			w->snap_reserved += snap->locations[i].reserved_bytes;
		rsd_snapshot_free(snap);
	}
	return 0;
}

/* Lock-free reads succeed during a load and show the state before it. */
ATF_TC_WITHOUT_HEAD(loader_reads_succeed);
ATF_TC_BODY(loader_reads_succeed, tc)
{
	struct seen w;
	struct csrc s = { 0 };
	struct rsd_handle h;
	struct cfx f;

	memset(&w, 0, sizeof(w));
	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	s.hook = read_hook;
	s.arg = &w;
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ(w.nlocations, 1);
	ATF_CHECK_EQ(w.version_rc, 0);
	ATF_CHECK_EQ(w.version, 2);
	ATF_CHECK_EQ(w.snap_rc, 0);
	ATF_CHECK_EQ(w.snap_version, 2);
	ATF_CHECK_EQ(w.snap_nmats, 0);
	ATF_CHECK_EQ(w.snap_reserved, 0); /* the temporary charge is never observable */
	CHECK_VERSION(&f, 3);
	cfx_fini(&f);
}

static int writer_hook(struct csrc *s)
{
	struct seen *w = s->arg;
	struct rsd_manager *m = s->f->m;
	struct rsd_value_spec spec = { &rsd_resident_type, 8, 8, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { cfx_load, NULL, s };
	struct rsd_reservation *r = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_resident *v = NULL;
	struct rsd_handle x;
	uint64_t n = 8;
	int i = 0;

	w->rc[i++] = rsd_ensure(m, w->other, PINNED, NULL, NULL);
	w->rc[i++] = rsd_reserve(m, PAGEABLE, 1, "inner", &r);
	w->rc[i++] = rsd_acquire(m, &w->other, 1, PAGEABLE, NULL, &l);
	w->rc[i++] = rsd_hold(m, &w->other, 1, PAGEABLE, &hd);
	w->rc[i++] = rsd_register_source(m, &spec, &src, PAGEABLE, &x);
	w->rc[i++] = rsd_resident_alloc(m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, &v);
	w->rc[i++] = v ? rsd_adopt(m, v, NULL, RSD_EXCLUSIVE, &x) : -1;
	rsd_resident_free(v);
	w->rc[i++] = rsd_drop(m, w->other, PAGEABLE, NULL);
	w->rc[i++] = rsd_reservation_release(w->resv);
	w->rc[i++] = rsd_hold_release(w->hold);
	w->rc[i++] = rsd_manager_reap(m);
	w->rc[i++] = rsd_manager_close(m, 0);
	w->rsv_active = rsd_reservation_active(w->resv);
	w->hold_active = rsd_hold_active(w->hold);
	return w->propagate ? w->rc[0] : 0;
}

/* §9.1, §9.3: every writer call from inside a load is refused; a loader
 * that swallows the refusal still completes the transition. */
ATF_TC_WITHOUT_HEAD(loader_writer_calls_refused);
ATF_TC_BODY(loader_writer_calls_refused, tc)
{
	static const char *const names[12] = {
		"ensure",	   "reserve",	     "acquire", "hold",
		"register_source", "resident_alloc", "adopt",	"drop",
		"rsv release",	   "hold release",   "reap",	"close",
	};
	struct seen w;
	struct csrc s = { 0 };
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	memset(&w, 0, sizeof(w));
	cfx_host(&f, NULL, 0);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	h = cfx_sourced(&f, &s, PAGEABLE);
	w.other = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_reserve(f.m, PAGEABLE, 3, "outer", &w.resv));
	OK(rsd_hold(f.m, &w.other, 1, PAGEABLE, &w.hold));
	CHECK_VERSION(&f, 5);
	s.hook = writer_hook;
	s.arg = &w;
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	for (int i = 0; i < 12; i++) {
		if (i == 5) {
			/* rsd_resident_alloc uses only the driver: allowed. */
			ATF_CHECK_EQ_MSG(w.rc[i], 0, "%s from a loader: %d", names[i], w.rc[i]);
			continue;
		}
		ATF_CHECK_EQ_MSG(w.rc[i], -RSD_EREENTRANT, "%s from a loader: %d (%s)", names[i],
				 w.rc[i], rsd_strerror(w.rc[i]));
	}
	/* Refused releases leave their objects active. */
	ATF_CHECK(w.rsv_active);
	ATF_CHECK(w.hold_active);
	/* Only the outer transition happened. */
	CHECK_VERSION(&f, 6);
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(snap->nvalues, 2);
	ATF_CHECK_EQ(snap->nreservations, 1);
	ATF_CHECK_EQ(cfx_val(snap, w.other)->nmaterializations, 1);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->hold_count, 1);
	ATF_CHECK_EQ(snap->nlocations, 1);
	rsd_snapshot_free(snap);
	OK(rsd_reservation_release(w.resv));
	OK(rsd_hold_release(w.hold));
	rsd_reservation_free(w.resv);
	rsd_hold_free(w.hold);
	cfx_fini(&f);
}

/* §18.16 (librsd form): a loader that propagates the refusal fails the outer
 * transition with RSD_EREENTRANT and changes nothing; the next call works. */
ATF_TC_WITHOUT_HEAD(loader_propagates_refusal);
ATF_TC_BODY(loader_propagates_refusal, tc)
{
	struct seen w;
	struct csrc s = { 0 };
	struct rsd_snapshot *before, *after;
	struct rsd_handle h;
	struct cfx f;

	memset(&w, 0, sizeof(w));
	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	w.other = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	OK(rsd_reserve(f.m, PAGEABLE, 3, "outer", &w.resv));
	OK(rsd_hold(f.m, &w.other, 1, PAGEABLE, &w.hold));
	w.propagate = true;
	s.hook = writer_hook;
	s.arg = &w;
	before = cfx_snap(&f);
	ERR(RSD_EREENTRANT, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	after = cfx_snap(&f);
	CHECK_SAME(before, after, true);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	ATF_CHECK_EQ(s.loads, 1);
	s.hook = NULL;
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 2);
	OK(rsd_reservation_release(w.resv));
	OK(rsd_hold_release(w.hold));
	rsd_reservation_free(w.resv);
	rsd_hold_free(w.hold);
	cfx_fini(&f);
}

struct peer {
	struct cfx *f;
	struct rsd_handle h;
	int ensure_rc, reserve_rc, snap_rc, version_rc, err_code;
	uint64_t ensure_ms, snap_version, version, snap_reserved;
	size_t nvalues_mats;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	struct rsd_reservation *r = NULL;
	struct rsd_snapshot *snap = NULL;
	uint64_t t0 = now_ms();

	p->ensure_rc = rsd_ensure(p->f->m, p->h, PINNED, NULL, NULL);
	p->ensure_ms = now_ms() - t0;
	p->err_code = rsd_last_error()->code;
	p->reserve_rc = rsd_reserve(p->f->m, PAGEABLE, 1, "peer", &r);
	p->snap_rc = rsd_snapshot_take(p->f->m, &snap);
	if (!p->snap_rc) {
		p->snap_version = snap->state_version;
		p->nvalues_mats = 0;
		for (size_t i = 0; i < snap->nvalues; i++)
			p->nvalues_mats += snap->values[i].nmaterializations;
		for (size_t i = 0; i < snap->nlocations; i++)
			p->snap_reserved += snap->locations[i].reserved_bytes;
		rsd_snapshot_free(snap);
	}
	p->version_rc = rsd_manager_state_version_get(p->f->m, &p->version);
	if (r) {
		rsd_reservation_release(r);
		rsd_reservation_free(r);
	}
	return NULL;
}

static int spawn_peer_hook(struct csrc *s)
{
	struct peer *p = s->arg;
	pthread_t t;

	/* The load blocks until the other thread is done with the manager. */
	if (pthread_create(&t, NULL, peer_main, p))
		return 99;
	pthread_join(t, NULL);
	return 0;
}

/* §18.17: another thread is refused promptly (no deadlock) but reads the
 * published pre-load state. */
/*
 * Reference.md §20.3: a load runs without the transition lock, so another
 * thread's writer calls proceed while it runs (here the loader even waits
 * for them), and its readers see their commits but never the load's
 * temporary charge.
 */
ATF_TC_WITHOUT_HEAD(other_thread_proceeds_during_load);
ATF_TC_BODY(other_thread_proceeds_during_load, tc)
{
	struct peer p;
	struct csrc s = { 0 };
	struct rsd_handle h;
	struct cfx f;

	memset(&p, 0, sizeof(p));
	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	p.f = &f;
	p.h = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	s.hook = spawn_peer_hook;
	s.arg = &p;
	CHECK_VERSION(&f, 3);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ_MSG(p.ensure_rc, 0, "peer's ensure: %d", p.ensure_rc);
	ATF_CHECK_MSG(p.ensure_ms < 1000, "the peer's ensure took %llu ms",
		      (unsigned long long)p.ensure_ms);
	ATF_CHECK_EQ(p.reserve_rc, 0);
	/* pinned recorded (+1) and installed (+1), the reservation (+1). */
	ATF_CHECK_EQ(p.snap_rc, 0);
	ATF_CHECK_EQ(p.snap_version, 6);
	ATF_CHECK_EQ(p.nvalues_mats, 2);
	ATF_CHECK_EQ(p.snap_reserved, 1); /* the peer's byte, not the load's charge */
	ATF_CHECK_EQ(p.version_rc, 0);
	ATF_CHECK_EQ(p.version, 6);
	/* The reservation's release (+1), then the load's commit (+1). */
	CHECK_VERSION(&f, 8);
	ATF_CHECK_EQ(cfx_reserved(&f, PAGEABLE), 0);
	cfx_fini(&f);
}

/* A thread already waiting for the transition lock when a load starts gets
 * it as soon as the load leaves the lock, and finishes while the load
 * still runs (§20.1). */
struct waiter {
	struct cfx *f;
	struct rsd_handle h;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool locked, started;
	int rc;
	uint64_t done_ms;
	uint64_t load_start_ms, load_end_ms;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	/* Call only once the plan holds the transition lock. */
	pthread_mutex_lock(&w->lock);
	while (!w->locked)
		pthread_cond_wait(&w->cond, &w->lock);
	w->started = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	w->rc = rsd_ensure(w->f->m, w->h, PAGEABLE, NULL, NULL);
	w->done_ms = now_ms();
	return NULL;
}

/* Runs under the transition lock when the plan's drop frees the value. */
static void blocking_release(void *ctx, struct rsd_resident *r)
{
	struct waiter *w = ctx;

	(void)r;
	pthread_mutex_lock(&w->lock);
	w->locked = true;
	pthread_cond_broadcast(&w->cond);
	while (!w->started)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	sleep_ms(50); /* the waiter is now polling for the lock */
}

static int slow_load_hook(struct csrc *s)
{
	struct waiter *w = s->arg;

	w->load_start_ms = now_ms();
	sleep_ms(300);
	w->load_end_ms = now_ms();
	return 0;
}

ATF_TC_WITHOUT_HEAD(waiting_thread_proceeds_when_load_starts);
ATF_TC_BODY(waiting_thread_proceeds_when_load_starts, tc)
{
	static char mem[N];
	struct rsd_buffer_view v = { mem, N, mem, N, { RSD_PAGEABLE_HOST, -1 } };
	struct rsd_action acts[2];
	struct rsd_plan_report *rep = NULL;
	struct rsd_resident *r;
	struct csrc s = { 0 };
	struct waiter w;
	pthread_t t;
	struct rsd_handle x, h;
	struct cfx f;

	memset(&w, 0, sizeof(w));
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	cfx_host(&f, NULL, 0);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, blocking_release, &w, &r));
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &x));
	OK(rsd_ensure(f.m, x, PINNED, NULL, NULL));
	h = cfx_sourced(&f, &s, PAGEABLE);
	s.hook = slow_load_hook;
	s.arg = &w;
	w.f = &f;
	w.h = x;
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, waiter_main, &w), 0);
	acts[0] = rsd_action_drop(x, PAGEABLE);
	acts[1] = rsd_action_ensure(h, PAGEABLE);
	OK(rsd_execute_actions(f.m, acts, 2, "drop-then-load", NULL, 0, NULL, &rep));
	pthread_join(t, NULL);
	ATF_CHECK_EQ(rep->ntransitions, 2);
	rsd_plan_report_free(rep);
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ_MSG(w.rc, 0, "waiting thread got %d (%s)", w.rc, rsd_strerror(w.rc));
	/* It may even finish before the loader's first statement ran (the
	 * lock is left before the load starts): what matters is that it did
	 * not wait for the load to end. */
	ATF_CHECK_MSG(w.done_ms < w.load_end_ms, "done at %+lld ms relative to a load of %llu ms",
		      (long long)(w.done_ms - w.load_start_ms),
		      (unsigned long long)(w.load_end_ms - w.load_start_ms));
	cfx_fini(&f);
	pthread_mutex_destroy(&w.lock);
	pthread_cond_destroy(&w.cond);
}

/* §9.2: a value callback run by the manager on its own thread. */
struct inner {
	struct cfx *f;
	int reserve_rc, close_rc, snap_rc, ensure_rc;
	size_t nloc;
	unsigned calls;
	struct rsd_handle other;
};

static void reentering_release(void *ctx, struct rsd_resident *r)
{
	struct inner *in = ctx;
	struct rsd_reservation *rv = NULL;
	struct rsd_snapshot *snap = NULL;

	(void)r;
	if (!in->f || in->calls++)
		return;
	in->reserve_rc = rsd_reserve(in->f->m, PAGEABLE, 1, "inner", &rv);
	in->ensure_rc = rsd_ensure(in->f->m, in->other, PAGEABLE, NULL, NULL);
	in->close_rc = rsd_manager_close(in->f->m, RSD_CLOSE_FORCE);
	in->snap_rc = rsd_snapshot_take(in->f->m, &snap);
	rsd_snapshot_free(snap);
	in->nloc = rsd_manager_locations(in->f->m, NULL, 0);
	if (rv) {
		rsd_reservation_release(rv);
		rsd_reservation_free(rv);
	}
}

ATF_TC_WITHOUT_HEAD(value_callback_reentry);
ATF_TC_BODY(value_callback_reentry, tc)
{
	static char mem[N];
	struct rsd_buffer_view v = { mem, N, mem, N, { RSD_PAGEABLE_HOST, -1 } };
	struct inner in;
	struct rsd_resident *r;
	struct rsd_handle x;
	struct cfx f;

	memset(&in, 0, sizeof(in));
	cfx_host(&f, NULL, 0);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, reentering_release, &in, &r));
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &x));
	OK(rsd_ensure(f.m, x, PINNED, NULL, NULL));
	in.other = x;
	in.f = &f;
	OK(rsd_drop(f.m, x, PAGEABLE, NULL)); /* frees the wrapped value under the lock */
	ATF_CHECK_EQ(in.calls, 1);
	ATF_CHECK_EQ(in.reserve_rc, -RSD_EREENTRANT);
	ATF_CHECK_EQ(in.ensure_rc, -RSD_EREENTRANT);
	ATF_CHECK_EQ(in.close_rc, -RSD_EREENTRANT);
	ATF_CHECK_EQ(in.snap_rc, 0);
	ATF_CHECK_EQ(in.nloc, 2);
	/* Nothing happened but the drop; the manager is open and usable. */
	CHECK_VERSION(&f, 5);
	ATF_CHECK_EQ(cfx_reserved(&f, PAGEABLE), 0);
	OK(rsd_ensure(f.m, x, PAGEABLE, NULL, NULL));
	CHECK_VERSION(&f, 6);
	cfx_fini(&f);
}

/*
 * A source callback runs in an executor scope of its own: a waiting call
 * it makes on another manager waits for its copy, although the caller's
 * not-waiting call (queue mode) or plan (its batch of queued copies) is
 * in progress on this thread. (Before, the callback inherited both: the
 * other manager's copy was queued, or even put in this manager's batch,
 * and rsd_ensure() returned with its destination still arriving.)
 */
struct other_mgr {
	struct cfx *g;
	struct rsd_handle h;
	int rc;
	bool arriving, found;
};

static int other_manager_hook(struct csrc *s)
{
	struct other_mgr *o = s->arg;
	const struct rsd_materialization_snapshot *ms;
	struct rsd_snapshot *snap;

	o->rc = rsd_ensure(o->g->m, o->h, cfx_cuda(0), NULL, NULL);
	snap = cfx_snap(o->g);
	ms = cfx_snap_mat(snap, o->h, cfx_cuda(0));
	o->found = ms != NULL;
	o->arriving = ms && ms->arriving;
	rsd_snapshot_free(snap);
	return 0;
}

static void check_other_manager(bool plan)
{
	struct other_mgr o = { 0 };
	struct csrc s = { 0 };
	struct rsd_handle h;
	struct cfx f, g;

	cfx_sim(&f, NULL, 0, 1);
	cfx_sim(&g, NULL, 0, 1);
	o.g = &g;
	o.h = cfx_adopt(&g, PINNED, 64, RSD_REPLICABLE);
	s.hook = other_manager_hook;
	s.arg = &o;
	h = cfx_sourced(&f, &s, PAGEABLE);
	if (plan) {
		struct rsd_action a = rsd_action_ensure(h, PINNED);

		OK(rsd_execute_actions(f.m, &a, 1, "outer", NULL, 0, NULL, NULL));
	} else {
		OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL));
	}
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ_MSG(o.rc, 0, "inner rsd_ensure: %d", o.rc);
	ATF_CHECK_MSG(o.found && !o.arriving,
		      "the other manager's copy had not arrived when rsd_ensure returned "
		      "(found %d, arriving %d)",
		      o.found, o.arriving);
	ATF_CHECK_EQ(cfx_in_flight(&g, cfx_cuda(0)), 0);
	OK(rsd_manager_close(f.m, 0));
	OK(rsd_manager_close(g.m, 0));
	cfx_fini(&f);
	cfx_fini(&g);
}

ATF_TC_WITHOUT_HEAD(callback_scope_not_waiting);
ATF_TC_BODY(callback_scope_not_waiting, tc)
{
	check_other_manager(false);
}

ATF_TC_WITHOUT_HEAD(callback_scope_plan_batch);
ATF_TC_BODY(callback_scope_plan_batch, tc)
{
	check_other_manager(true);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, loader_reads_succeed);
	ATF_TP_ADD_TC(tp, loader_writer_calls_refused);
	ATF_TP_ADD_TC(tp, loader_propagates_refusal);
	ATF_TP_ADD_TC(tp, other_thread_proceeds_during_load);
	ATF_TP_ADD_TC(tp, waiting_thread_proceeds_when_load_starts);
	ATF_TP_ADD_TC(tp, value_callback_reentry);
	ATF_TP_ADD_TC(tp, callback_scope_not_waiting);
	ATF_TP_ADD_TC(tp, callback_scope_plan_batch);
	return 0;
}
