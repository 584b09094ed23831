// SPDX-License-Identifier: MIT
/*
 * Linearizability (reference.md §21): 2-4 threads run random calls on one
 * manager whose simulated device runs copies in the background, and the
 * history, ordered by the writer sections each call took effect in, is
 * replayed against the sequential model (tests/model/linearize.c). A
 * bounded slice; `make soak-threads` runs it for long. A failure prints the
 * seed; rerun it with `rsd-soak -s SEED -n 1 -T THREADS -v`
 * (timing differs, so a replay may not fail the same way).
 *
 * The hostile_* cases run the hostile mode (hostile.inc): 4 to 8 threads,
 * not-waiting calls, GPU leases whose consumer streams run kernels reading
 * the leased bytes, controller uses, faults armed at random, budgets, bytes and close
 * checked, every call under a watchdog; runs in which no fault fired and
 * that made no hostile call, or only not-waiting calls, waits on their
 * copies and reaps, are replayed as above (the queued copies' completions
 * as events of their own). `make soak-hostile` runs it
 * for long; a failure prints the rsd-soak -H command that reruns it.
 */
#include <stdio.h>
#include <time.h>

#include <atf-c.h>
#include <rsd/rsd.h>

#include "linearize.h"

#define BUDGET_S 6

static void run_seeds(uint64_t first, unsigned nthreads, unsigned ops, unsigned maxruns)
{
	struct lz_stats st = { 0 };
	static char why[16384];
	time_t t0 = time(NULL);
	unsigned i;

	for (i = 0; i < maxruns && time(NULL) - t0 < BUDGET_S; i++) {
		struct lz_opts o = { .seed = first + i,
				     .nthreads = nthreads,
				     .ops = ops,
				     .delay_ns = 20000,
				     .load_max_us = 1000 };

		if (lz_run(&o, &st, why, sizeof(why))) {
			fprintf(stderr, "%s\n", why);
			atf_tc_fail(
				"divergence, seed %llu (see stderr; rsd-soak -s %llu -n 1 -T %u -k %u)",
				(unsigned long long)o.seed, (unsigned long long)o.seed, nthreads,
				ops);
		}
	}
	printf("%u runs, %lu calls, %lu events replayed, 0 divergences\n", i, st.ops, st.events);
	printf("  concurrent-only, confirmed: %lu EINUSE (transfer in flight), %lu EBUDGET, %lu EPLAN\n",
	       st.inflight_inuse, st.inflight_budget, st.inflight_plan);
	printf("  plan actions committed after a later action of their plan: %lu\n",
	       st.plan_reordered);
	for (int e = 0; e < 32; e++)
		if (st.codes[e])
			printf("  result %-16s %lu\n", e ? rsd_strerror(-e) : "success",
			       st.codes[e]);
	ATF_REQUIRE(i > 0);
	ATF_REQUIRE(st.codes[0] > st.ops / 4);
}

#define HOSTILE_S 3

/*
 * What the slice arms and checks: every class and every check, close-race
 * included (a thread waiting for a stalled copy returns RSD_ECLOSED as soon
 * as close(FORCE|NOWAIT) stops the manager's waits).
 */
#define SLICE_FAULTS "all"
#define SLICE_CHECKS "all"

static void run_hostile(uint64_t first, unsigned nthreads, unsigned ops, unsigned permille)
{
	struct lz_stats st = { 0 };
	static char why[16384];
	unsigned faults = 0, checks = 0, i;
	time_t t0 = time(NULL);

	ATF_REQUIRE(!lz_parse_set(SLICE_FAULTS, false, &faults, why, sizeof(why)));
	ATF_REQUIRE(!lz_parse_set(SLICE_CHECKS, true, &checks, why, sizeof(why)));
	for (i = 0; time(NULL) - t0 < HOSTILE_S; i++) {
		struct lz_opts o = { .seed = first + i,
				     .nthreads = nthreads ? nthreads : 4 + i % 5,
				     .ops = ops,
				     .delay_ns = 20000,
				     .load_max_us = 500,
				     .hostile = true,
				     .faults = faults,
				     .fault_permille = permille,
				     .checks = checks,
				     .watchdog_ms = 30000 };

		if (lz_run(&o, &st, why, sizeof(why))) {
			fprintf(stderr, "%s\n", why);
			atf_tc_fail(
				"seed %llu failed (see stderr; rsd-soak -H -F %s -C %s -r %u -l %u "
				"-s %llu -n 1 -T %u -k %u)",
				(unsigned long long)o.seed, SLICE_FAULTS, SLICE_CHECKS, permille,
				o.load_max_us, (unsigned long long)o.seed, o.nthreads, ops);
		}
	}
	printf("%u runs, %lu calls: %lu with hostile calls; %lu replayed against the model (%lu of "
	       "them with not-waiting calls, %lu queued copies' completions), %lu end-checked\n",
	       i, st.ops, st.hostile_runs, st.replayed, st.replayed_hostile, st.qdone,
	       st.end_checked);
	printf("  accepted: %lu loads again after a wait for room, %lu preflights passed with "
	       "queued copies' reads over; %lu runs end-checked because a copy took a queued "
	       "spill's block\n",
	       st.async_reloads, st.qread_done, st.handover_runs);
	printf("  %lu not-waiting calls, %lu waits on a queued copy, %lu GPU leases, %lu uses, "
	       "%lu kernels reading them, %lu ledger probes\n",
	       st.async_calls, st.waits, st.gpu_leases, st.uses, st.kernels, st.probes);
	printf("  runs in which a class fired:");
	for (unsigned c = 0; c < LZF_N; c++)
		printf(" %s %lu", lz_set_name(false, c), st.fired[c]);
	printf("\n");
	for (int e = 0; e < 32; e++)
		if (st.codes[e])
			printf("  result %-16s %lu\n", e ? rsd_strerror(-e) : "success",
			       st.codes[e]);
	ATF_REQUIRE(i > 0);
	ATF_REQUIRE(st.codes[0] > st.ops / 8);
	/* Every run either replayed or went through the end checks. */
	ATF_REQUIRE_EQ(st.replayed + st.end_checked, st.runs);
}

ATF_TC_WITHOUT_HEAD(two_threads);
ATF_TC_BODY(two_threads, tc)
{
	run_seeds(1, 2, 150, 40);
}

ATF_TC_WITHOUT_HEAD(four_threads);
ATF_TC_BODY(four_threads, tc)
{
	run_seeds(1001, 4, 100, 40);
}

ATF_TC_WITHOUT_HEAD(hostile_no_faults);
ATF_TC_BODY(hostile_no_faults, tc)
{
	run_hostile(1, 0, 80, 0);
}

ATF_TC_WITHOUT_HEAD(hostile_faults);
ATF_TC_BODY(hostile_faults, tc)
{
	run_hostile(5001, 0, 80, 40);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, two_threads);
	ATF_TP_ADD_TC(tp, four_threads);
	ATF_TP_ADD_TC(tp, hostile_no_faults);
	ATF_TP_ADD_TC(tp, hostile_faults);
	return atf_no_error();
}
