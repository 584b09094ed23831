// SPDX-License-Identifier: MIT
/*
 * Internal clean-up never fails (reference.md §20.4): every failure path of
 * rsd_controller_use, scope entry and close, rsd_execute_actions,
 * rsd_acquire and rsd_hold leaves no lease, hold, reservation, charge,
 * busy mark or arriving materialization behind, while other threads copy
 * and load on the same manager; and a source callback's own cleanup calls
 * are refused on its thread without losing the objects they name.
 *
 * The other threads ("noise") take no lease, hold or reservation and use
 * only their own values, pageable memory and cuda:1 (unbudgeted): whatever
 * protections, reservations, cuda:0 or pinned charges a snapshot shows
 * belong to the failure under test. The simulated device runs its work in
 * the background, each item after a delay, so copies take real time.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };
static const struct rsd_location CUDA1 = { RSD_CUDA, 1 };

#define BUDGET_PINNED (8 * N)
#define BUDGET_CUDA0 (4 * N)

static void sleep_us(unsigned us)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000L };

	while (nanosleep(&ts, &ts))
		;
}

/* ---- noise: copies and loads on other threads ---- */

struct noise {
	struct cfx *f;
	/* v[0] adopted, v[1] sourced (its loads are slow), v[2] sourced and
	 * also the target of the main thread's busy-source drops. */
	struct rsd_handle v[3];
	struct csrc src[3];
	atomic_bool stop;
	atomic_ulong rounds;
	/* First unexpected result of a noise thread (written once). */
	atomic_int bad_rc;
	char bad_msg[sizeof(rsd_last_error()->message)];
	pthread_t th[2];
};

/* A load that takes a while, as a regeneration would. */
static int slow_hook(struct csrc *s)
{
	(void)s;
	sleep_us(300);
	return 0;
}

/* Injected device copy failures may hit a noise copy, and a noise drop may
 * find its copy busy as the source of the main thread's ensure of the same
 * value (reference.md §21.2): only those. */
static void noise_check(struct noise *z, int rc)
{
	int none = 0;

	if (!rc || rc == -RSD_EDEVICE)
		return;
	if (rc == -RSD_EINUSE && strstr(rsd_last_error()->message, "a transfer is in flight"))
		return;
	if (atomic_compare_exchange_strong(&z->bad_rc, &none, rc))
		snprintf(z->bad_msg, sizeof(z->bad_msg), "%s", rsd_last_error()->message);
}

static void *noise_copier(void *arg)
{
	struct noise *z = arg;

	while (!atomic_load(&z->stop)) {
		for (int i = 0; i < 3; i += 2) {
			noise_check(z, rsd_ensure(z->f->m, z->v[i], CUDA1, NULL, NULL));
			noise_check(z, rsd_drop(z->f->m, z->v[i], CUDA1, NULL));
		}
		atomic_fetch_add(&z->rounds, 1);
	}
	return NULL;
}

static void *noise_loader(void *arg)
{
	struct noise *z = arg;

	while (!atomic_load(&z->stop)) {
		/* a temporary load at pageable, then a copy to cuda:1 */
		noise_check(z, rsd_ensure(z->f->m, z->v[1], CUDA1, NULL, NULL));
		noise_check(z, rsd_drop(z->f->m, z->v[1], CUDA1, NULL));
		atomic_fetch_add(&z->rounds, 1);
	}
	return NULL;
}

static void noise_start(struct noise *z, struct cfx *f)
{
	memset(z, 0, sizeof(*z));
	z->f = f;
	z->v[0] = cfx_adopt(f, PAGEABLE, N, RSD_REPLICABLE);
	z->v[1] = cfx_sourced(f, &z->src[1], PAGEABLE);
	z->src[1].hook = slow_hook;
	z->v[2] = cfx_sourced(f, &z->src[2], PAGEABLE);
	OK(rsd_ensure(f->m, z->v[2], PAGEABLE, NULL, NULL));
	atomic_init(&z->stop, false);
	atomic_init(&z->rounds, 0);
	atomic_init(&z->bad_rc, 0);
	ATF_REQUIRE_EQ(pthread_create(&z->th[0], NULL, noise_copier, z), 0);
	ATF_REQUIRE_EQ(pthread_create(&z->th[1], NULL, noise_loader, z), 0);
}

static void noise_stop(struct noise *z)
{
	atomic_store(&z->stop, true);
	pthread_join(z->th[0], NULL);
	pthread_join(z->th[1], NULL);
	ATF_CHECK_EQ_MSG(atomic_load(&z->bad_rc), 0, "noise thread failed: %d (%s)",
			 atomic_load(&z->bad_rc), z->bad_msg);
	ATF_CHECK_MSG(atomic_load(&z->rounds) > 0, "the noise threads never ran");
}

/* ---- what must be left ---- */

struct scene {
	struct cfx f;
	struct noise z;
	struct rsd_controller *c;
	void *stream; /* on cuda:0 */
	struct csrc bad_src, ok_src;
	struct rsd_handle a, b, big, bad;
	unsigned busy_seen; /* busy-source drops refused */
};

/* The whole budget left at a location can be reserved: no charge the
 * snapshot does not show (a load's temporary charge, a plan's headroom)
 * was left behind. */
static void check_budget_free(struct scene *sc, struct rsd_location at, uint64_t budget,
			      const char *what)
{
	struct rsd_reservation *r = NULL;
	uint64_t left = budget - cfx_used(&sc->f, at);
	int rc = rsd_reserve(sc->f.m, at, left, "everything", &r);

	ATF_CHECK_EQ_MSG(rc, 0, "%s: %llu bytes left at %s cannot be reserved: %s", what,
			 (unsigned long long)left, cfx_name(at), rsd_last_error()->message);
	if (!rc) {
		OK(rsd_reservation_release(r));
		rsd_reservation_free(r);
	}
}

/*
 * Nothing of a failed call remains: no reservation, lease or hold, no
 * arriving materialization of the scene's values, charges equal to the
 * materializations (cfx_snap checks that) and nothing else charged.
 */
static void check_clean(struct scene *sc, const char *what)
{
	struct rsd_snapshot *s = cfx_snap(&sc->f);

	ATF_CHECK_EQ_MSG(s->nreservations, 0, "%s: %zu reservations left", what, s->nreservations);
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];

		ATF_CHECK_EQ_MSG(l->use_count, 0, "%s: %llu leases left at %s", what,
				 (unsigned long long)l->use_count, cfx_name(l->location));
		ATF_CHECK_EQ_MSG(l->hold_count, 0, "%s: %llu holds left at %s", what,
				 (unsigned long long)l->hold_count, cfx_name(l->location));
	}
	for (size_t i = 0; i < s->nvalues; i++) {
		const struct rsd_value_snapshot *v = &s->values[i];

		if (rsd_handle_equal(v->handle, sc->z.v[0]) ||
		    rsd_handle_equal(v->handle, sc->z.v[1]) ||
		    rsd_handle_equal(v->handle, sc->z.v[2]))
			continue;
		for (size_t k = 0; k < v->nmaterializations; k++)
			ATF_CHECK_MSG(!v->materializations[k].arriving,
				      "%s: value %llu still arriving at %s", what,
				      (unsigned long long)v->handle.id,
				      cfx_name(v->materializations[k].location));
	}
	rsd_snapshot_free(s);
	check_budget_free(sc, PINNED, BUDGET_PINNED, what);
	check_budget_free(sc, CUDA0, BUDGET_CUDA0, what);
}

/* Pending events of released cuda:0 leases at cuda:0, after a reap. */
static uint64_t pending_cuda0(struct scene *sc)
{
	struct rsd_snapshot *s;
	uint64_t n;

	OK(rsd_manager_reap(sc->f.m));
	s = cfx_snap(&sc->f);
	n = cfx_loc(s, CUDA0) ? cfx_loc(s, CUDA0)->pending_event_count : 0;
	rsd_snapshot_free(s);
	return n;
}

/* Drop what a partly done call left at cuda:0 and pinned, once the events
 * of the leases it released there have run. */
static void reset(struct scene *sc)
{
	const struct rsd_handle h[3] = { sc->a, sc->b, sc->bad };

	for (unsigned i = 0; pending_cuda0(sc); i++) {
		ATF_REQUIRE_MSG(i < 120000, "lease events still pending after two minutes");
		sleep_us(1000);
	}

	for (int i = 0; i < 3; i++) {
		OK(rsd_drop(sc->f.m, h[i], CUDA0, NULL));
		OK(rsd_drop(sc->f.m, h[i], PINNED, NULL));
	}
}

static void scene_init(struct scene *sc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, BUDGET_PINNED },
						 { { RSD_CUDA, 0 }, BUDGET_CUDA0 } };
	struct cfx *f = &sc->f;

	memset(sc, 0, sizeof(*sc));
	cfx_sim(f, bud, 2, 2);
	{
		struct rsd_resident *probe = cfx_alloc(f, PINNED, 1);

		rsd_resident_free(probe);
	}
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_BACKGROUND, 100000);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f->sd, 0, &sc->stream), 0);
	sc->a = cfx_adopt(f, PAGEABLE, N, RSD_REPLICABLE);
	sc->b = cfx_adopt(f, PAGEABLE, N, RSD_REPLICABLE);
	sc->big = cfx_adopt(f, PAGEABLE, BUDGET_CUDA0 + N, RSD_REPLICABLE);
	sc->bad = cfx_sourced(f, &sc->bad_src, PINNED);
	sc->bad_src.fail_rc = 42;
	sc->bad_src.fail_times = UINT32_MAX;
	ATF_REQUIRE_EQ(rsd_controller_create(f->m, NULL, 0, &sc->c), 0);
	/* The failures are the point: a use fails at once instead of waiting
	 * while the noise threads keep work in flight. */
	ATF_REQUIRE_EQ(rsd_controller_set_flags(sc->c, RSD_CTRL_NOWAIT), 0);
}

static void scene_fini(struct scene *sc)
{
	/* Every value can go: nothing is busy or protected. */
	OK(rsd_discard(sc->f.m, sc->a, NULL));
	OK(rsd_discard(sc->f.m, sc->b, NULL));
	OK(rsd_discard(sc->f.m, sc->big, NULL));
	OK(rsd_discard(sc->f.m, sc->bad, NULL));
	check_clean(sc, "the end");
	OK(rsd_manager_close(sc->f.m, 0));
	rsd_controller_free(sc->c);
	rsd_simdev_stream_destroy(sc->f.sd, sc->stream);
	cfx_fini(&sc->f);
}

/* An EEXEC (its partial report freed) whose cause is `cause`. */
static void check_exec(int rc, int cause, enum rsd_plan_phase phase, const char *what)
{
	ATF_CHECK_EQ_MSG(rc, -RSD_EEXEC, "%s: %d (%s)", what, rc, rsd_last_error()->message);
	if (rc == -RSD_EEXEC) {
		ATF_CHECK_EQ_MSG(rsd_last_error()->cause, -cause, "%s: cause %d", what,
				 rsd_last_error()->cause);
		ATF_CHECK_EQ_MSG(rsd_last_error()->phase, phase, "%s: phase %d", what,
				 (int)rsd_last_error()->phase);
	}
	rsd_plan_report_free(rsd_take_partial_report());
}

/* ---- the failure paths ---- */

static void execute_failures(struct scene *sc)
{
	struct rsd_manager *m = sc->f.m;
	struct rsd_action acts[3];
	uint64_t v;
	int rc;

	/* A load failure after a committed copy: the copy stays, nothing else. */
	acts[0] = rsd_action_ensure(sc->a, CUDA0);
	acts[1] = rsd_action_ensure(sc->bad, PINNED);
	acts[2] = rsd_action_drop(sc->a, CUDA0);
	check_exec(rsd_execute_actions(m, acts, 3, "load fails", NULL, 0, NULL, NULL), RSD_ESOURCE,
		   RSD_PHASE_EXECUTE, "execute, load failure");
	check_clean(sc, "execute, load failure");
	reset(sc);

	/* The destination's allocation fails at its admission. */
	acts[0] = rsd_action_ensure(sc->a, CUDA0);
	acts[1] = rsd_action_ensure(sc->b, CUDA0);
	OK(rsd_fault_inject("resident", "cuda:0", 2, RSD_ENOMEM));
	check_exec(rsd_execute_actions(m, acts, 2, "alloc fails", NULL, 0, NULL, NULL), RSD_ENOMEM,
		   RSD_PHASE_EXECUTE, "execute, allocation failure");
	check_clean(sc, "execute, allocation failure");
	reset(sc);

	/* A device copy failure (it may hit a noise copy instead). */
	rsd_simdev_fail_nth(sc->f.sd, RSD_SIMDEV_COPY, 1, RSD_EDEVICE);
	rc = rsd_execute_actions(m, acts, 2, "copy fails", NULL, 0, NULL, NULL);
	rsd_simdev_fail_nth(sc->f.sd, RSD_SIMDEV_COPY, 0, 0);
	if (rc)
		check_exec(rc, RSD_EDEVICE, RSD_PHASE_EXECUTE, "execute, copy failure");
	check_clean(sc, "execute, copy failure");
	reset(sc);

	/* A drop of a source another thread is copying from: RSD_EINUSE
	 * (when the copy is not in flight the drop succeeds: try again). */
	acts[0] = rsd_action_ensure(sc->a, CUDA0);
	acts[1] = rsd_action_drop(sc->z.v[2], PAGEABLE);
	for (int tries = 0; tries < 500; tries++) {
		OK(rsd_ensure(m, sc->z.v[2], PAGEABLE, NULL, NULL));
		rc = rsd_execute_actions(m, acts, 2, "busy source", NULL, 0, NULL, NULL);
		if (rc) {
			check_exec(rc, RSD_EINUSE, RSD_PHASE_EXECUTE, "execute, busy source");
			ATF_CHECK_MSG(strstr(rsd_last_error()->message, "a transfer is in flight"),
				      "execute, busy source: %s", rsd_last_error()->message);
			sc->busy_seen++;
			break;
		}
		OK(rsd_drop(m, sc->a, CUDA0, NULL));
	}
	check_clean(sc, "execute, busy source");
	reset(sc);

	/* Budget (preflight) and a stale expected version: nothing runs. */
	acts[0] = rsd_action_ensure(sc->big, CUDA0);
	ERR(RSD_EPLAN, rsd_execute_actions(m, acts, 1, "too big", NULL, 0, NULL, NULL));
	acts[0] = rsd_action_ensure(sc->a, CUDA0);
	v = 1;
	ERR(RSD_ESTALE, rsd_execute_actions(m, acts, 1, "stale", NULL, 0, &v, NULL));
	check_clean(sc, "execute, refused");
	reset(sc);
}

static void scope_failures(struct scene *sc)
{
	const struct rsd_reservation_spec rs[2] = { { PINNED, 2 * N, "scope-r1" },
						    { PINNED, 2 * N, "scope-r2" } };
	struct rsd_action enter[2], exit_[1];
	struct rsd_plan p = { "scope", NULL, 0, rs, 2, enter, 2, NULL, 0 };
	struct rsd_manager *m = sc->f.m;
	struct rsd_scope *s = NULL;
	uint64_t v = 1;

	enter[0] = rsd_action_ensure(sc->a, CUDA0);
	enter[1] = rsd_action_ensure(sc->bad, PINNED);
	/* enter fails: both reservations released */
	check_exec(rsd_scope_enter(m, &p, NULL, 0, NULL, &s), RSD_ESOURCE, RSD_PHASE_ENTER,
		   "scope enter, load failure");
	ATF_CHECK(!s);
	check_clean(sc, "scope enter, load failure");
	reset(sc);

	/* the second reservation refused: the first released */
	OK(rsd_fault_inject("reserve", "scope-r2", 1, RSD_EBUDGET));
	check_exec(rsd_scope_enter(m, &p, NULL, 0, NULL, &s), RSD_EBUDGET, RSD_PHASE_RESERVE,
		   "scope enter, reservation refused");
	check_clean(sc, "scope enter, reservation refused");
	reset(sc);

	/* the copy's destination cannot be allocated */
	enter[1] = rsd_action_ensure(sc->b, CUDA0);
	OK(rsd_fault_inject("resident", "cuda:0", 2, RSD_ENOMEM));
	check_exec(rsd_scope_enter(m, &p, NULL, 0, NULL, &s), RSD_ENOMEM, RSD_PHASE_ENTER,
		   "scope enter, allocation failure");
	check_clean(sc, "scope enter, allocation failure");
	reset(sc);

	ERR(RSD_ESTALE, rsd_scope_enter(m, &p, NULL, 0, &v, &s));
	check_clean(sc, "scope enter, stale");
	reset(sc);

	/* exit fails: the reservations are released anyway */
	p.nenter = 1;
	exit_[0] = rsd_action_ensure(sc->bad, PINNED);
	p.exit = exit_;
	p.nexit = 1;
	OK(rsd_scope_enter(m, &p, NULL, 0, NULL, &s));
	check_exec(rsd_scope_close(s, NULL), RSD_ESOURCE, RSD_PHASE_EXIT, "scope exit");
	rsd_scope_free(s);
	s = NULL;
	check_clean(sc, "scope exit");
	reset(sc);
}

static void lease_failures(struct scene *sc)
{
	struct rsd_manager *m = sc->f.m;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;

	ERR(RSD_EUNAVAILABLE, rsd_acquire(m, &sc->a, 1, CUDA0, sc->stream, &l));
	ERR(RSD_EUNAVAILABLE, rsd_hold(m, &sc->a, 1, CUDA0, &hd));
	OK(rsd_fault_inject("acquire", "pageable-host", 1, RSD_EDEVICE));
	ERR(RSD_EDEVICE, rsd_acquire(m, &sc->a, 1, PAGEABLE, NULL, &l));
	/* one of two handles is not resident */
	{
		struct rsd_handle two[2] = { sc->a, sc->bad };

		ERR(RSD_EUNAVAILABLE, rsd_acquire(m, two, 2, PAGEABLE, NULL, &l));
		ERR(RSD_EUNAVAILABLE, rsd_hold(m, two, 2, PAGEABLE, &hd));
	}
	ATF_CHECK(!l && !hd);
	check_clean(sc, "acquire/hold");
	reset(sc);
}

static int use_one(struct scene *sc, const struct rsd_requirement *q, size_t nq,
		   const struct rsd_reservation_spec *rs, size_t nrs, struct rsd_use **u)
{
	struct rsd_request r = { "cleanup", q, nq, rs, nrs };
	void *cs[1] = { sc->stream };
	size_t ncs = 0;

	for (size_t i = 0; i < nq; i++)
		if (rsd_location_equal(q[i].location, CUDA0))
			ncs = 1;
	*u = NULL;
	return rsd_controller_use(sc->c, &r, ncs ? cs : NULL, ncs, NULL, 0, u);
}

static void use_failures(struct scene *sc)
{
	const struct rsd_reservation_spec rs[1] = { { PINNED, 2 * N, "use-r" } };
	const struct rsd_reservation_spec huge[1] = { { PINNED, BUDGET_PINNED + 1, "use-huge" } };
	struct rsd_requirement q[2];
	struct rsd_use *u = NULL;
	int rc = 0, tries;

	/* The second group's acquire fails after the first leased and the
	 * scope reserved: unwound. Stale decisions are retried. */
	q[0] = (struct rsd_requirement){ sc->a, CUDA0 };
	q[1] = (struct rsd_requirement){ sc->b, PINNED };
	for (tries = 0; tries < 10000; tries++) {
		OK(rsd_fault_inject("acquire", "pinned-host", 1, RSD_EDEVICE));
		rc = use_one(sc, q, 2, rs, 1, &u);
		rsd_plan_report_free(rsd_take_partial_report());
		ATF_CHECK(!u);
		if (rc != -RSD_ESTALE)
			break;
	}
	OK(rsd_fault_inject("acquire", NULL, 0, 0));
	ATF_CHECK_EQ_MSG(rc, -RSD_EDEVICE, "use, acquire failure: %d (%s) after %d tries", rc,
			 rsd_last_error()->message, tries);
	check_clean(sc, "use, acquire failure");
	reset(sc);

	/* The scope's load fails. */
	q[1] = (struct rsd_requirement){ sc->bad, PINNED };
	for (tries = 0; tries < 10000; tries++) {
		rc = use_one(sc, q, 2, rs, 1, &u);
		if (rc != -RSD_ESTALE)
			break;
	}
	check_exec(rc, RSD_ESOURCE, RSD_PHASE_ENTER, "use, load failure");
	ATF_CHECK(!u);
	check_clean(sc, "use, load failure");
	reset(sc);

	/* The copy's destination cannot be allocated. */
	q[1] = (struct rsd_requirement){ sc->b, CUDA0 };
	for (tries = 0; tries < 10000; tries++) {
		OK(rsd_fault_inject("resident", "cuda:0", 1, RSD_ENOMEM));
		rc = use_one(sc, q, 2, rs, 1, &u);
		if (rc != -RSD_ESTALE)
			break;
	}
	OK(rsd_fault_inject("resident", NULL, 0, 0));
	check_exec(rc, RSD_ENOMEM, RSD_PHASE_ENTER, "use, allocation failure");
	ATF_CHECK(!u);
	check_clean(sc, "use, allocation failure");
	reset(sc);

	/* Infeasible: nothing is entered. */
	ERR(RSD_EPLAN, use_one(sc, q, 1, huge, 1, &u));
	ATF_CHECK(!u);
	check_clean(sc, "use, infeasible");
	reset(sc);
}

/*
 * Each failure path, several times, while two other threads copy and load
 * on the same manager; at the end every value can be discarded, every
 * budget reserved whole, and the manager closes without "in use".
 */
ATF_TC(failures_leave_nothing);
ATF_TC_HEAD(failures_leave_nothing, tc)
{
	atf_tc_set_md_var(tc, "timeout", "600");
}
ATF_TC_BODY(failures_leave_nothing, tc)
{
	struct scene sc;

	scene_init(&sc);
	noise_start(&sc.z, &sc.f);
	for (int round = 0; round < 20; round++) {
		execute_failures(&sc);
		scope_failures(&sc);
		lease_failures(&sc);
		use_failures(&sc);
	}
	noise_stop(&sc.z);
	ATF_CHECK_MSG(sc.busy_seen > 0, "no drop ever found the noise copy in flight");
	check_clean(&sc, "the end");
	for (int i = 0; i < 3; i++)
		OK(rsd_discard(sc.f.m, sc.z.v[i], NULL));
	scene_fini(&sc);
}

/* ---- a source callback's own cleanup calls ---- */

/* One of each object a cleanup call ends. */
struct objs {
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_reservation *r;
	struct rsd_scope *s;
	struct rsd_use *u;
};

static void objs_make(struct cfx *f, struct rsd_controller *c, struct rsd_handle h,
		      const char *label, struct objs *o)
{
	const struct rsd_reservation_spec rs[1] = { { PINNED, N, label } };
	const struct rsd_plan p = { label, NULL, 0, rs, 1, NULL, 0, NULL, 0 };
	const struct rsd_requirement q[1] = { { h, PAGEABLE } };
	const struct rsd_request req = { label, q, 1, rs, 1 };

	OK(rsd_acquire(f->m, &h, 1, PAGEABLE, NULL, &o->l));
	OK(rsd_hold(f->m, &h, 1, PAGEABLE, &o->hd));
	OK(rsd_reserve(f->m, PINNED, N, label, &o->r));
	OK(rsd_scope_enter(f->m, &p, NULL, 0, NULL, &o->s));
	OK(rsd_controller_use(c, &req, NULL, 0, NULL, 0, &o->u));
}

/* Every cleanup call on o; rc[0..4] their results. */
static void objs_release(struct objs *o, int *rc)
{
	rc[0] = rsd_lease_release(o->l, 0);
	rc[1] = rsd_hold_release(o->hd);
	rc[2] = rsd_reservation_release(o->r);
	rc[3] = rsd_scope_close(o->s, NULL);
	rc[4] = rsd_use_close(o->u, NULL);
}

static void objs_free(struct objs *o)
{
	rsd_lease_free(o->l);
	rsd_hold_free(o->hd);
	rsd_reservation_free(o->r);
	rsd_scope_free(o->s);
	rsd_use_free(o->u);
}

struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool loading, open;
	struct objs *own;
	int rc[5];
	bool still_active[3];
};

/* On the loading thread: its own cleanup calls are refused; then it waits
 * for the test to let the load finish. */
static int gated_hook(struct csrc *s)
{
	struct gate *g = s->arg;

	objs_release(g->own, g->rc);
	g->still_active[0] = rsd_lease_active(g->own->l);
	g->still_active[1] = rsd_hold_active(g->own->hd);
	g->still_active[2] = rsd_reservation_active(g->own->r);
	pthread_mutex_lock(&g->mu);
	g->loading = true;
	pthread_cond_broadcast(&g->cv);
	while (!g->open)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

struct loader {
	struct cfx *f;
	struct rsd_handle h;
	int rc;
};

static void *load_main(void *arg)
{
	struct loader *ld = arg;

	ld->rc = rsd_ensure(ld->f->m, ld->h, PAGEABLE, NULL, NULL);
	return NULL;
}

/*
 * §20.3, §20.4: a source callback's cleanup calls into its own manager on
 * its own thread are refused with RSD_EREENTRANT and leave their objects
 * active; another thread's cleanup calls succeed while the load runs; the
 * refused objects are released normally afterwards.
 */
ATF_TC_WITHOUT_HEAD(callback_cleanup_refused_on_own_thread);
ATF_TC_BODY(callback_cleanup_refused_on_own_thread, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 8 * N } };
	static const char *const names[5] = { "lease release", "hold release",
					      "reservation release", "scope close", "use close" };
	struct objs own = { 0 }, other = { 0 };
	struct rsd_controller *c;
	struct rsd_snapshot *snap;
	struct csrc src = { 0 };
	struct loader ld;
	struct gate g;
	struct rsd_handle a;
	pthread_t th;
	int rc[5];
	struct cfx f;

	cfx_sim(&f, bud, 1, 1);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	a = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	objs_make(&f, c, a, "own", &own);
	objs_make(&f, c, a, "other", &other);
	memset(&g, 0, sizeof(g));
	pthread_mutex_init(&g.mu, NULL);
	pthread_cond_init(&g.cv, NULL);
	g.own = &own;
	ld.f = &f;
	ld.h = cfx_sourced(&f, &src, PAGEABLE);
	src.hook = gated_hook;
	src.arg = &g;
	ATF_REQUIRE_EQ(pthread_create(&th, NULL, load_main, &ld), 0);
	pthread_mutex_lock(&g.mu);
	while (!g.loading)
		pthread_cond_wait(&g.cv, &g.mu);
	pthread_mutex_unlock(&g.mu);
	/* While the load runs: another thread's cleanup proceeds. */
	objs_release(&other, rc);
	for (int i = 0; i < 5; i++)
		ATF_CHECK_EQ_MSG(rc[i], 0, "%s beside the load: %d", names[i], rc[i]);
	pthread_mutex_lock(&g.mu);
	g.open = true;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	pthread_join(th, NULL);
	ATF_CHECK_EQ(ld.rc, 0);
	for (int i = 0; i < 5; i++)
		ATF_CHECK_EQ_MSG(g.rc[i], -RSD_EREENTRANT, "%s inside the load: %d", names[i],
				 g.rc[i]);
	for (int i = 0; i < 3; i++)
		ATF_CHECK_MSG(g.still_active[i], "%s inside the load ended its object", names[i]);
	/* Still counted, and released normally now. */
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(snap->nreservations, 3);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->use_count, 2);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->hold_count, 1);
	rsd_snapshot_free(snap);
	objs_release(&own, rc);
	for (int i = 0; i < 5; i++)
		ATF_CHECK_EQ_MSG(rc[i], 0, "%s after the load: %d", names[i], rc[i]);
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(snap->nreservations, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->use_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PAGEABLE)->hold_count, 0);
	rsd_snapshot_free(snap);
	objs_free(&own);
	objs_free(&other);
	rsd_controller_free(c);
	OK(rsd_manager_close(f.m, 0));
	pthread_cond_destroy(&g.cv);
	pthread_mutex_destroy(&g.mu);
	cfx_fini(&f);
}

/* ---- clean-up after a failing reap ---- */

/* A released cuda:0 lease whose event the next reap queries. */
static void pending_lease(struct scene *sc)
{
	struct rsd_lease *l = NULL;

	OK(rsd_ensure(sc->f.m, sc->a, CUDA0, NULL, NULL));
	OK(rsd_acquire(sc->f.m, &sc->a, 1, CUDA0, sc->stream, &l));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
}

/*
 * A scope close whose prologue fails (its reap's event query fails, and
 * so does the sync of the event's stream that would have answered it) is
 * refused as a whole: the scope stays open with its reservations, and the
 * next close ends it and releases them.
 */
ATF_TC_WITHOUT_HEAD(scope_close_after_failed_reap);
ATF_TC_BODY(scope_close_after_failed_reap, tc)
{
	const struct rsd_reservation_spec rs[1] = { { PINNED, 2 * N, "scope-r" } };
	const struct rsd_plan p = { "reap", NULL, 0, rs, 1, NULL, 0, NULL, 0 };
	struct rsd_scope *s = NULL;
	struct scene sc;

	scene_init(&sc);
	rsd_simdev_set_progress(sc.f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_scope_enter(sc.f.m, &p, NULL, 0, NULL, &s));
	pending_lease(&sc);
	rsd_simdev_fail_nth(sc.f.sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_EDEVICE);
	rsd_simdev_fail_nth(sc.f.sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_scope_close(s, NULL));
	ATF_CHECK_EQ(cfx_reserved(&sc.f, PINNED), 2 * N);
	OK(rsd_scope_close(s, NULL));
	ATF_CHECK(rsd_scope_report(s));
	rsd_scope_free(s);
	check_clean(&sc, "scope close after a failed reap");
	reset(&sc);
	scene_fini(&sc);
}

/*
 * rsd_controller_use unwinding after an acquire failure: the scope's close
 * fails at its reap (the event of the lease just released); the unwinding
 * still releases the scope's reservation, and the failure is reported.
 */
ATF_TC_WITHOUT_HEAD(use_unwind_after_failed_reap);
ATF_TC_BODY(use_unwind_after_failed_reap, tc)
{
	const struct rsd_reservation_spec rs[1] = { { PINNED, 2 * N, "use-r" } };
	struct rsd_requirement q[2];
	struct rsd_use *u = NULL;
	struct scene sc;
	int rc;

	scene_init(&sc);
	rsd_simdev_set_progress(sc.f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	q[0] = (struct rsd_requirement){ sc.a, CUDA0 };
	q[1] = (struct rsd_requirement){ sc.b, PINNED };
	OK(rsd_fault_inject("acquire", "pinned-host", 1, RSD_EDEVICE));
	/* no event is pending before: the first query is the unwinding's;
	 * the second sync (after the copy's) the stream sync that would
	 * have answered it */
	rsd_simdev_fail_nth(sc.f.sd, RSD_SIMDEV_EVENT_QUERY, 1, RSD_ENOMEM);
	rsd_simdev_fail_nth(sc.f.sd, RSD_SIMDEV_EVENT_SYNC, 2, RSD_ENOMEM);
	rc = use_one(&sc, q, 2, rs, 1, &u);
	/* the unwinding's failure propagates (reference.md §13.6) */
	ATF_CHECK_EQ_MSG(rc, -RSD_ENOMEM, "%d (%s)", rc, rsd_last_error()->message);
	ATF_CHECK(!u);
	rsd_plan_report_free(rsd_take_partial_report());
	ATF_CHECK_EQ(rsd_simdev_calls(sc.f.sd, RSD_SIMDEV_EVENT_QUERY), 1);
	check_clean(&sc, "use unwinding after a failed reap");
	reset(&sc);
	scene_fini(&sc);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, failures_leave_nothing);
	ATF_TP_ADD_TC(tp, callback_cleanup_refused_on_own_thread);
	ATF_TP_ADD_TC(tp, scope_close_after_failed_reap);
	ATF_TP_ADD_TC(tp, use_unwind_after_failed_reap);
	return atf_no_error();
}
