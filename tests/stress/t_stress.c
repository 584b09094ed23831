// SPDX-License-Identifier: MIT
/*
 * Concurrency stress: two writer threads make random operations (ensure,
 * move, drop, acquire/release on host and simulated-GPU locations,
 * reserve/release, execute_actions, event completion) while two reader
 * threads take snapshots and explains lock-free, for a bounded time. Every
 * snapshot must satisfy the invariants (tests/model/invariants.c, linked
 * through a relative include), state_version must never go backwards in
 * one reader, and a value under a hold held for the whole run must be
 * present, protected, in every snapshot.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "../model/invariants.c"

#define NVAL 12
#define SECONDS 5
#define NB 32

struct world {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_handle h[NVAL], pinned_value;
	void *cs[2];
	atomic_bool stop;
	atomic_ulong writes, reads, failures;
	char why[1024];
	pthread_mutex_t why_lock;
};

static void failure(struct world *w, const char *msg)
{
	pthread_mutex_lock(&w->why_lock);
	if (!w->why[0])
		snprintf(w->why, sizeof(w->why), "%s", msg);
	pthread_mutex_unlock(&w->why_lock);
	atomic_fetch_add(&w->failures, 1);
}

static int load(void *ctx, struct rsd_resident **out)
{
	struct world *w = ctx;
	uint64_t n = NB;

	return rsd_resident_alloc(w->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				  out);
}

static unsigned next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(*s >> 33);
}

static struct rsd_location any_loc(uint64_t *s)
{
	static const struct rsd_location l[] = { { RSD_PAGEABLE_HOST, -1 },
						 { RSD_PINNED_HOST, -1 },
						 { RSD_CUDA, 0 },
						 { RSD_CUDA, 1 } };
	return l[next(s) % 4];
}

/* Codes a writer may legitimately get in a contended random workload. */
static bool expected(int rc)
{
	switch (-rc) {
	case 0:
	case RSD_EBUDGET:
	case RSD_EUNAVAILABLE:
	case RSD_EINUSE:
	case RSD_EOWNERSHIP:
	case RSD_EPLAN:
	case RSD_EHANDLE:
	case RSD_EREENTRANT: /* §9.1: refused while another thread's source load runs */
		return true;
	}
	return false;
}

static void *writer(void *arg)
{
	struct world *w = arg;
	uint64_t s = (uint64_t)(uintptr_t)&s;
	struct rsd_lease *l = NULL;
	struct rsd_reservation *r = NULL;

	while (!atomic_load(&w->stop)) {
		struct rsd_handle h = w->h[next(&s) % NVAL];
		struct rsd_location at = any_loc(&s);
		struct rsd_action a[2];
		int rc = 0;

		switch (next(&s) % 9) {
		case 0:
		case 1:
			rc = rsd_ensure(w->m, h, at, NULL, NULL);
			break;
		case 2:
			rc = rsd_move(w->m, h, at, NULL, NULL, NULL);
			break;
		case 3:
			rc = rsd_drop(w->m, h, at, NULL);
			break;
		case 4:
			if (l) {
				unsigned fl = next(&s) % 2 ? RSD_RELEASE_WAIT : 0;

				/* Freeing an unreleased lease would abandon it (§8.9). */
				while ((rc = rsd_lease_release(l, fl)) == -RSD_EREENTRANT)
					sched_yield();
				rsd_lease_free(l);
				l = NULL;
			} else {
				void *cs = at.kind == RSD_CUDA ? w->cs[at.device] : NULL;

				rc = rsd_acquire(w->m, &h, 1, at, cs, &l);
			}
			break;
		case 5:
			if (r) {
				while ((rc = rsd_reservation_release(r)) == -RSD_EREENTRANT)
					sched_yield();
				rsd_reservation_free(r);
				r = NULL;
			} else {
				rc = rsd_reserve(w->m, at, next(&s) % 3 * 8, "stress", &r);
			}
			break;
		case 6:
			a[0] = rsd_action_ensure(h, at);
			a[1] = rsd_action_drop(h, any_loc(&s));
			rc = rsd_execute_actions(w->m, a, 2, "stress", NULL, 0, NULL, NULL);
			if (rc == -RSD_EEXEC)
				rc = 0;
			rsd_plan_report_free(rsd_take_partial_report());
			break;
		case 7:
			rsd_simdev_stream_complete(w->sd, w->cs[next(&s) % 2]);
			break;
		default:
			rc = rsd_manager_reap(w->m);
			break;
		}
		if (!expected(rc)) {
			char msg[700];

			snprintf(msg, sizeof(msg), "writer: unexpected %d: %s", rc,
				 rsd_last_error()->message);
			failure(w, msg);
		}
		atomic_fetch_add(&w->writes, 1);
	}
	while (l && rsd_lease_release(l, RSD_RELEASE_WAIT) == -RSD_EREENTRANT)
		sched_yield();
	while (r && rsd_reservation_release(r) == -RSD_EREENTRANT)
		sched_yield();
	if (l)
		rsd_lease_free(l);
	if (r)
		rsd_reservation_free(r);
	return NULL;
}

static void *reader(void *arg)
{
	struct world *w = arg;
	uint64_t last = 0, s = (uint64_t)(uintptr_t)&s;
	char why[256], msg[400];

	while (!atomic_load(&w->stop)) {
		struct rsd_snapshot *snap;
		struct rsd_explanation *e = NULL;
		struct rsd_action a[2] = { rsd_action_ensure(w->h[next(&s) % NVAL], any_loc(&s)),
					   rsd_action_move(w->h[next(&s) % NVAL], any_loc(&s),
							   NULL) };
		struct rsd_plan p = { .name = "reader", .enter = a, .nenter = 2 };
		bool seen = false;

		if (rsd_snapshot_take(w->m, &snap)) {
			failure(w, "snapshot failed");
			break;
		}
		if (!ip_snapshot_invariants(snap, why, sizeof(why))) {
			snprintf(msg, sizeof(msg), "snapshot at version %llu: %s",
				 (unsigned long long)snap->state_version, why);
			failure(w, msg);
		}
		if (snap->state_version < last)
			failure(w, "state_version went backwards");
		last = snap->state_version;
		for (size_t i = 0; i < snap->nvalues; i++) {
			const struct rsd_value_snapshot *v = &snap->values[i];

			if (!rsd_handle_equal(v->handle, w->pinned_value))
				continue;
			for (size_t k = 0; k < v->nmaterializations; k++)
				seen |= rsd_location_equal(v->materializations[k].location,
							   RSD_LOC_PINNED_HOST) &&
					v->materializations[k].hold_count == 1;
		}
		if (!seen)
			failure(w, "the held materialization is missing or unprotected");
		rsd_snapshot_free(snap);
		if (rsd_explain(w->m, &p, NULL, &e))
			failure(w, "explain failed");
		else if (e->nactions < 1 || e->nactions > 2 || e->feasible != (e->reason == NULL))
			failure(w, "explanation malformed");
		rsd_explanation_free(e);
		atomic_fetch_add(&w->reads, 1);
	}
	return NULL;
}

ATF_TC(stress);
ATF_TC_HEAD(stress, tc)
{
	atf_tc_set_md_var(tc, "timeout", "60");
}
ATF_TC_BODY(stress, tc)
{
	/* The device runs its streams in the background (20 us per item), as a
	 * GPU does; writers also complete consumer streams themselves. Under
	 * valgrind, which runs one thread at a time, every hand-off to a worker
	 * waits behind the busy readers' time slices: there the work runs as it
	 * is queued (immediate mode) and the readers and writers still race. */
	bool vg = getenv("RSD_UNDER_VALGRIND") != NULL;
	struct rsd_simdev_config sc = { .ndevices = 2,
					.pooled = true,
					.progress = vg ? RSD_SIMDEV_IMMEDIATE :
							 RSD_SIMDEV_BACKGROUND,
					.delay_ns = 20000 };
	struct rsd_budget b[] = { { { RSD_CUDA, 0 }, 4 * NB },
				  { { RSD_PINNED_HOST, -1 }, 6 * NB } };
	struct rsd_value_spec spec = { &rsd_resident_type, NB, NB, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { load, NULL, NULL };
	struct rsd_manager_config cfg;
	static struct world w;
	struct rsd_hold *hd;
	struct rsd_resident *res;
	pthread_t t[4];
	uint64_t n = NB;
	time_t t0;
	int secs;

	memset(&cfg, 0, sizeof(cfg));
	pthread_mutex_init(&w.why_lock, NULL);
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &w.sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(w.sd, 0, &w.cs[0]));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(w.sd, 1, &w.cs[1]));
	cfg.budgets = b;
	cfg.nbudgets = 2;
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = w.sd;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &w.m));
	src.ctx = &w;
	for (int i = 0; i < NVAL; i++)
		RSD_REQUIRE_OK(
			rsd_register_source(w.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &w.h[i]));
	RSD_REQUIRE_OK(rsd_resident_alloc(w.m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &n, NULL,
					  0, &res));
	RSD_REQUIRE_OK(rsd_adopt(w.m, res, NULL, RSD_REPLICABLE, &w.pinned_value));
	RSD_REQUIRE_OK(rsd_hold(w.m, &w.pinned_value, 1, RSD_LOC_PINNED_HOST, &hd));
	w.h[NVAL - 1] = w.pinned_value; /* writers try to move/drop it: always EINUSE */
	for (int i = 0; i < 4; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, i < 2 ? writer : reader, &w), 0);
	/* Under valgrind (make check VALGRIND=1) every operation is ~50x
	 * slower: a second still makes thousands of them. */
	secs = vg ? 1 : SECONDS;
	t0 = time(NULL);
	while (time(NULL) - t0 < secs && !atomic_load(&w.failures))
		usleep(50000);
	atomic_store(&w.stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("%lu writes, %lu snapshot+explain reads, %lu failures\n", (unsigned long)w.writes,
	       (unsigned long)w.reads, (unsigned long)w.failures);
	ATF_CHECK_EQ_MSG(atomic_load(&w.failures), 0, "%s", w.why);
	ATF_CHECK(w.writes > 100 && w.reads > 100);
	RSD_CHECK_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	rsd_simdev_complete_all(w.sd);
	RSD_CHECK_OK(rsd_manager_close(w.m, 0));
	rsd_manager_destroy(w.m);
	rsd_simdev_stream_destroy(w.sd, w.cs[0]);
	rsd_simdev_stream_destroy(w.sd, w.cs[1]);
	rsd_simdev_destroy(w.sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, stress);
	return atf_no_error();
}
