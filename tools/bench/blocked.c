// SPDX-License-Identifier: MIT
/*
 * Blocked decisions (Documentation/controller.md, "Blocked decisions"):
 *
 *  - search_limit: a search that exhausts the default state limit
 *    (100,000 states). Example D of reference.md §13.6 with k = 17: 17
 *    replicable values at pageable and pinned host, the pinned budget 17
 *    values, a request that reserves 18 values there. Every subset of the
 *    17 drops is one counted state, so the search stops at the limit with
 *    -RSD_ESEARCHLIMIT; the figure is the time of that decide.
 */
#include <stdlib.h>

#include "common.h"

#define BLK_VAL 4096u
#define BLK_D_K 17u

/* Median ms of reps decides of r on c that must fail with want. */
static double blk_decide_ms(struct rsd_controller *c, const struct rsd_request *r, int want,
			    size_t reps, uint64_t *explored)
{
	double ms[16];

	if (reps > 16)
		reps = 16;
	for (size_t i = 0; i < reps; i++) {
		struct rsd_decision *d = NULL;
		uint64_t t0 = bench_now_ns();
		int rc = rsd_controller_decide(c, r, &d);

		ms[i] = (double)(bench_now_ns() - t0) / 1e6;
		if (rc != want) {
			rsd_decision_free(d);
			bench_fail("rsd_controller_decide (unexpected outcome)",
				   rc ? rc : -RSD_EUSAGE);
		}
		*explored = rsd_last_error()->explored_states;
	}
	return bench_median(ms, reps);
}

static void case_search_limit(void)
{
	struct rsd_budget b = { RSD_LOC_PINNED_HOST, (uint64_t)BLK_D_K * BLK_VAL };
	struct rsd_reservation_spec res = { RSD_LOC_PINNED_HOST, (uint64_t)(BLK_D_K + 1) * BLK_VAL,
					    "ws" };
	struct rsd_manager *m = bench_manager(&b, 1);
	struct rsd_handle h[BLK_D_K];
	struct rsd_requirement q;
	struct rsd_request r = { "exhaust", &q, 1, &res, 1 };
	struct rsd_controller *c;
	uint64_t explored = 0;
	struct bench_fig *f;
	double ms;

	for (unsigned i = 0; i < BLK_D_K; i++) {
		h[i] = bench_adopt(m, BLK_VAL, RSD_REPLICABLE, false);
		CK(rsd_ensure(m, h[i], RSD_LOC_PINNED_HOST, NULL, NULL));
	}
	q = (struct rsd_requirement){ h[0], RSD_LOC_PAGEABLE_HOST };
	CK(rsd_controller_create(m, NULL, 0, &c));
	ms = blk_decide_ms(c, &r, -RSD_ESEARCHLIMIT, QF(3, 5), &explored);
	f = bench_fig("search_limit", "decide_ms", ms, "ms");
	bench_fig_target(f, TGT_MAX, 100);
	bench_line("search_limit", "explored_states", (double)explored, "count");
	bench_line("search_limit", "us_per_state", ms * 1e3 / (double)explored, "us");
	rsd_controller_free(c);
	bench_manager_end(m);
}

static void case_blocked(void)
{
	case_search_limit();
}
