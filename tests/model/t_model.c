// SPDX-License-Identifier: MIT
/*
 * librsd against the reference model: a bounded number of seeded random
 * runs (tests/model/interp.c). A failure prints the seed; replay it with
 * `rsd-soak -s SEED -n 1 -k STEPS -v`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <atf-c.h>

#include "interp.h"

#define NSEEDS 500
#define NSTEPS 300
#define BUDGET_S 20

static void run_seeds(uint64_t first, unsigned nseeds, unsigned steps)
{
	struct ip_stats st = { 0 };
	static char why[8192];
	time_t t0 = time(NULL);
	unsigned i;

	for (i = 0; i < nseeds && time(NULL) - t0 < BUDGET_S; i++) {
		struct ip_opts o = { .seed = first + i, .steps = steps };

		if (ip_run(&o, &st, why, sizeof(why)))
			atf_tc_fail("divergence (replay: rsd-soak -s %llu -n 1 -k %u -v):\n%s",
				    (unsigned long long)o.seed, steps, why);
	}
	printf("%u runs, %lu operations, %lu snapshots compared, 0 divergences\n", i, st.ops,
	       st.snapshots);
	for (unsigned op = 0; op < ip_nops(); op++)
		printf("  %-22s %lu\n", ip_op_name(op), st.per_op[op]);
	for (int e = 0; e < RSD_EMAX; e++)
		if (st.codes[e])
			printf("  result %-16s %lu\n", e ? rsd_strerror(-e) : "success",
			       st.codes[e]);
	ATF_REQUIRE(i > 0);
	/* A run that never succeeds or never fails tests little. */
	ATF_REQUIRE(st.codes[0] > st.ops / 4);
	ATF_REQUIRE(st.codes[RSD_EBUDGET] > 0 && st.codes[RSD_EINUSE] > 0 &&
		    st.codes[RSD_EPLAN] > 0);
}

ATF_TC_WITHOUT_HEAD(model_seeds);
ATF_TC_BODY(model_seeds, tc)
{
	run_seeds(1, NSEEDS, NSTEPS);
}

ATF_TC_WITHOUT_HEAD(model_long_runs);
ATF_TC_BODY(model_long_runs, tc)
{
	/* Fewer, longer runs reach fuller states (values up to the cap). */
	run_seeds(1000003, 20, 2000);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, model_seeds);
	ATF_TP_ADD_TC(tp, model_long_runs);
	return atf_no_error();
}
