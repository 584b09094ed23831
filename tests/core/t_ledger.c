// SPDX-License-Identifier: MIT
/*
 * One byte ledger (reference.md §7.1, §14.4): every byte an admission
 * counts at a location is a field of that location's published snapshot,
 * remaining_budget_bytes is exactly what an admission then accepts (a
 * request of that many bytes succeeds, one byte more is refused), and a
 * budget error names every term it summed.
 *
 * The charges here are those of work in flight that the snapshot once hid:
 * the source of a move whose copy is queued without waiting (cuda:0 keeps
 * its bytes until the copy has read them) and the temporary charge of a
 * source load, stopped mid-call on a gate. A plan's kept headroom has its
 * own program (tests/plan/t_ledger.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include "../gate.h"
#include "cfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

/* One location's ledger, field by field. */
static void check_ledger(struct cfx *f, struct rsd_location at, uint64_t used, uint64_t reserved,
			 uint64_t in_flight, uint64_t held, uint32_t holders, uint64_t remaining)
{
	struct rsd_snapshot *s = cfx_snap(f);
	const struct rsd_location_snapshot *l = cfx_loc(s, at);

	ATF_REQUIRE_MSG(l, "%s is not listed", cfx_name(at));
	ATF_CHECK_EQ(l->used_bytes, used);
	ATF_CHECK_EQ(l->reserved_bytes, reserved);
	ATF_CHECK_EQ(l->in_flight_bytes, in_flight);
	ATF_CHECK_EQ(l->plan_held_bytes, held);
	ATF_CHECK_EQ(l->plan_hold_count, holders);
	ATF_CHECK_EQ(l->remaining_budget_bytes, remaining);
	rsd_snapshot_free(s);
}

/*
 * The boundary at `at`, whose budget is budget and whose only charge is
 * in_flight bytes of work in flight: the snapshot shows them; reserving one
 * byte more than the free bytes fails with a budget error whose message
 * and fields carry every term; reserving exactly the free bytes succeeds
 * (*out) and leaves none.
 */
static void check_boundary(struct cfx *f, struct rsd_location at, uint64_t budget,
			   uint64_t in_flight, struct rsd_reservation **out)
{
	uint64_t remaining = budget - in_flight;
	struct rsd_reservation *r = NULL;
	const struct rsd_error *e;
	char want[256];

	check_ledger(f, at, 0, 0, in_flight, 0, 0, remaining);
	ERR(RSD_EBUDGET, rsd_reserve(f->m, at, remaining + 1, "over", &r));
	e = rsd_last_error();
	snprintf(want, sizeof(want),
		 "Residency budget exceeded at %s: budget=%llu, used=0, reserved=0, "
		 "in flight=%llu, held by 0 plans=0, requested=%llu",
		 cfx_name(at), (unsigned long long)budget, (unsigned long long)in_flight,
		 (unsigned long long)remaining + 1);
	ATF_CHECK_STREQ(e->message, want);
	ATF_CHECK(e->has_budget && e->has_location);
	ATF_CHECK_EQ(e->budget_bytes, budget);
	ATF_CHECK_EQ(e->requested_bytes, remaining + 1);
	ATF_CHECK_EQ(e->in_flight_bytes, in_flight);
	ATF_CHECK_EQ(e->plan_held_bytes, 0);
	ATF_CHECK_EQ(e->plan_hold_count, 0);
	ATF_CHECK(r == NULL);
	OK(rsd_reserve(f->m, at, remaining, "fits", out));
	check_ledger(f, at, 0, remaining, in_flight, 0, 0, 0);
}

/*
 * A move whose copy is queued keeps its source's bytes at cuda:0 until the
 * copy read them: no materialization any more, in flight instead, and
 * every admission there counts them.
 */
ATF_TC_WITHOUT_HEAD(queued_move_source_in_flight);
ATF_TC_BODY(queued_move_source_in_flight, tc)
{
	const struct rsd_budget b[] = { { CUDA0, 3 * N } };
	struct rsd_reservation *r;
	struct rsd_handle h;
	struct cfx f;
	char want[256];

	cfx_sim(&f, b, 1, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_EXCLUSIVE);
	OK(rsd_move(f.m, h, CUDA0, NULL, NULL, NULL));
	check_ledger(&f, CUDA0, N, 0, 0, 0, 0, 2 * N);

	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_move_async(f.m, h, PINNED, NULL, NULL, NULL));
	check_boundary(&f, CUDA0, 3 * N, N, &r);
	/* A copy to cuda:0 is refused by the same rule, naming the same terms. */
	ERR(RSD_EBUDGET,
	    rsd_ensure(f.m, cfx_adopt(&f, PINNED, 1, RSD_REPLICABLE), CUDA0, NULL, NULL));
	snprintf(want, sizeof(want),
		 "Residency budget exceeded at cuda:0: budget=%d, used=0, reserved=%d, "
		 "in flight=%d, held by 0 plans=0, requested=1",
		 3 * N, 2 * N, N);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);

	/* The copy read the source: its bytes leave the ledger. */
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	check_ledger(&f, CUDA0, 0, 2 * N, 0, 0, 0, N);
	ATF_CHECK(cfx_resident(&f, h, PINNED));
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	check_ledger(&f, CUDA0, 0, 0, 0, 0, 0, 3 * N);
	cfx_fini(&f);
}

/* ---- a source load stopped on a gate, on a helper thread ---- */

struct loader {
	struct cfx *f;
	struct rsd_handle h;
	struct rsd_location at;
	struct gate gate;
	int rc;
	pthread_t th;
};

static int gate_hook(struct csrc *s)
{
	gate_hold(s->arg);
	return 0;
}

static void *loader_main(void *arg)
{
	struct loader *w = arg;

	w->rc = rsd_ensure(w->f->m, w->h, w->at, NULL, NULL);
	return NULL;
}

/*
 * A load's temporary charge at its source location is in flight while the
 * load runs: published (other threads' snapshots show it) and counted by
 * their admissions. Its install then takes the same bytes as used.
 */
ATF_TC_WITHOUT_HEAD(load_temp_charge_in_flight);
ATF_TC_BODY(load_temp_charge_in_flight, tc)
{
	const struct rsd_budget b[] = { { PINNED, 3 * N } };
	struct loader w = { .gate = GATE_INIT };
	struct rsd_reservation *r;
	struct csrc src = { 0 };
	struct cfx f;

	cfx_sim(&f, b, 1, 1);
	src.hook = gate_hook;
	src.arg = &w.gate;
	w.f = &f;
	w.h = cfx_sourced(&f, &src, PINNED);
	w.at = PINNED;
	check_ledger(&f, PINNED, 0, 0, 0, 0, 0, 3 * N);
	ATF_REQUIRE_EQ(pthread_create(&w.th, NULL, loader_main, &w), 0);
	gate_wait_entered(&w.gate);
	check_boundary(&f, PINNED, 3 * N, N, &r);

	/* The install shares the load's charge: it still fits. */
	gate_open(&w.gate);
	pthread_join(w.th, NULL);
	ATF_CHECK_EQ(w.rc, 0);
	ATF_CHECK_EQ(src.loads, 1);
	check_ledger(&f, PINNED, N, 2 * N, 0, 0, 0, 0);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PINNED), 3 * N);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	check_ledger(&f, PINNED, N, 0, 0, 0, 0, 2 * N);
	cfx_fini(&f);
}

/*
 * The load fails: its charge leaves the ledger with it, the peak it raised
 * stays (§7.2).
 */
ATF_TC_WITHOUT_HEAD(failed_load_leaves_ledger);
ATF_TC_BODY(failed_load_leaves_ledger, tc)
{
	const struct rsd_budget b[] = { { PINNED, 2 * N } };
	struct loader w = { .gate = GATE_INIT };
	struct csrc src = { 0 };
	struct cfx f;

	cfx_sim(&f, b, 1, 1);
	src.hook = gate_hook;
	src.arg = &w.gate;
	src.fail_rc = -RSD_ENOMEM;
	src.fail_times = 1;
	w.f = &f;
	w.h = cfx_sourced(&f, &src, PINNED);
	w.at = PINNED;
	ATF_REQUIRE_EQ(pthread_create(&w.th, NULL, loader_main, &w), 0);
	gate_wait_entered(&w.gate);
	check_ledger(&f, PINNED, 0, 0, N, 0, 0, N);
	gate_open(&w.gate);
	pthread_join(w.th, NULL);
	ATF_CHECK(w.rc < 0);
	check_ledger(&f, PINNED, 0, 0, 0, 0, 0, 2 * N);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PINNED), N);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, queued_move_source_in_flight);
	ATF_TP_ADD_TC(tp, load_temp_charge_in_flight);
	ATF_TP_ADD_TC(tp, failed_load_leaves_ledger);
	return atf_no_error();
}
