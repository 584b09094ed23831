// SPDX-License-Identifier: MIT
/*
 * Linearizability (reference.md §21): 2-4 threads run random calls on one
 * manager whose simulated device runs copies in the background, and the
 * history, ordered by the writer sections each call took effect in, is
 * replayed against the sequential model (tests/model/linearize.c). A
 * bounded slice; `make soak-threads` runs it for long. A failure prints the
 * seed; rerun it with `rsd-soak -s SEED -n 1 -T THREADS -v`
 * (timing differs, so a replay may not fail the same way).
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

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, two_threads);
	ATF_TP_ADD_TC(tp, four_threads);
	return atf_no_error();
}
