// SPDX-License-Identifier: MIT
/*
 * Blocked decisions (Documentation/controller.md, "Blocked decisions"):
 *
 *  - search_limit: a search that exhausts the default state limit
 *    (100,000 states). Example D of reference.md §13.7 with k = 17: 17
 *    replicable values at pageable and pinned host, the pinned budget 17
 *    values, a request that reserves 18 values there. Every subset of the
 *    17 drops is one counted state, so the search stops at the limit with
 *    -RSD_ESEARCHLIMIT; the figure is the time of that decide (target 100
 *    ms, 1 us a state). The baseline, in the same run, is the same decide
 *    with a limit of 10,000 states, times 10: what the figure would be if
 *    a state of the full search cost what one of a search a tenth its
 *    size (and memo) costs. The tree before the search was reworked can
 *    only be timed from its own build (Documentation/performance.md).
 *  - blocked_K (K = 4, 8, 12, 16, 64): the pipeline's next step blocked
 *    by the previous one's pending GPU lease. On the simulated device
 *    (on-command: the consumer stream's event never completes here),
 *    cuda:0 holds 2K values of 4 KiB, its budget: K under a pending lease
 *    and K older ones the tiered LRU may spill to pageable host. The
 *    request needs K new values there and reserves one more for an
 *    output: infeasible. With RSD_CTRL_PRECHECK decide fails at once;
 *    the baseline is the same decide without it, which searches every
 *    subset of the K spills (2^K states, the limit from K = 17 on).
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

#define BLK_LIMIT 100000u /* the default search_state_limit */

static void case_search_limit(void)
{
	struct rsd_budget b = { RSD_LOC_PINNED_HOST, (uint64_t)BLK_D_K * BLK_VAL };
	struct rsd_reservation_spec res = { RSD_LOC_PINNED_HOST, (uint64_t)(BLK_D_K + 1) * BLK_VAL,
					    "ws" };
	struct rsd_manager *m = bench_manager(&b, 1);
	struct rsd_handle h[BLK_D_K];
	struct rsd_requirement q;
	struct rsd_request r = { "exhaust", &q, 1, &res, 1 };
	struct rsd_controller *c, *c10;
	uint64_t explored = 0, explored10 = 0;
	struct bench_fig *f;
	double ms, ms10;

	for (unsigned i = 0; i < BLK_D_K; i++) {
		h[i] = bench_adopt(m, BLK_VAL, RSD_REPLICABLE, false);
		CK(rsd_ensure(m, h[i], RSD_LOC_PINNED_HOST, NULL, NULL));
	}
	q = (struct rsd_requirement){ h[0], RSD_LOC_PAGEABLE_HOST };
	CK(rsd_controller_create(m, NULL, 0, &c));
	CK(rsd_controller_create(m, NULL, BLK_LIMIT / 10, &c10));
	ms10 = blk_decide_ms(c10, &r, -RSD_ESEARCHLIMIT, QF(3, 9), &explored10);
	ms = blk_decide_ms(c, &r, -RSD_ESEARCHLIMIT, QF(3, 5), &explored);
	if (explored != BLK_LIMIT || explored10 != BLK_LIMIT / 10)
		bench_fail("search_limit: explored_states is not the limit", -RSD_EUSAGE);
	f = bench_fig("search_limit", "decide_ms", ms, "ms");
	bench_fig_base(f, "10k-state search x10", ms10 * 10);
	bench_fig_target(f, TGT_MAX, 100);
	bench_line("search_limit", "explored_states", (double)explored, "count");
	bench_line("search_limit", "us_per_state", ms * 1e3 / (double)explored, "us");
	bench_line("search_limit", "base_us_per_state", ms10 * 1e3 / (double)explored10, "us");
	rsd_controller_free(c10);
	rsd_controller_free(c);
	bench_manager_end(m);
}

struct blk_env {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_policy *pol;
	void *st;
	struct rsd_handle *w;
	struct rsd_requirement *q;
	struct rsd_reservation_spec out;
	struct rsd_request r;
};

static struct rsd_handle blk_adopt(struct rsd_manager *m, struct rsd_location at)
{
	struct rsd_resident *res;
	struct rsd_handle h;
	uint64_t n = BLK_VAL;

	CK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &res));
	CK(rsd_adopt(m, res, &at, RSD_REPLICABLE, &h));
	return h;
}

static void blk_setup(struct blk_env *e, unsigned k)
{
	const struct rsd_location c0 = { RSD_CUDA, 0 }, host = RSD_LOC_PAGEABLE_HOST;
	struct rsd_budget b = { c0, 2ull * k * BLK_VAL };
	struct rsd_simdev_config sc = { .ndevices = 1, .pooled = true };
	struct rsd_manager_config mc = { .budgets = &b, .nbudgets = 1 };
	struct rsd_fallback_tier t = { c0, &host, 1 };
	struct rsd_handle *prev = calloc(k, sizeof(*prev));
	struct rsd_lease *l;

	e->w = calloc(k, sizeof(*e->w));
	e->q = calloc(k, sizeof(*e->q));
	if (!prev || !e->w || !e->q)
		bench_fail("calloc", -RSD_ENOMEM);
	CK(rsd_simdev_create(&sc, &e->sd));
	mc.driver = rsd_simdev_ops();
	mc.driver_ctx = e->sd;
	CK(rsd_manager_create(&mc, &e->m));
	CK(rsd_simdev_stream_create(e->sd, 0, &e->st));
	CK(rsd_tiered_lru_create(&t, 1, &e->pol));
	for (unsigned i = 0; i < k; i++)
		prev[i] = blk_adopt(e->m, c0);
	for (unsigned i = 0; i < k; i++)
		blk_adopt(e->m, c0);
	for (unsigned i = 0; i < k; i++) {
		e->w[i] = blk_adopt(e->m, host);
		e->q[i] = (struct rsd_requirement){ e->w[i], c0 };
	}
	CK(rsd_acquire(e->m, prev, k, c0, e->st, &l));
	CK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	free(prev);
	e->out = (struct rsd_reservation_spec){ c0, BLK_VAL, "out" };
	e->r = (struct rsd_request){ "next", e->q, k, &e->out, 1 };
}

static void blk_end(struct blk_env *e)
{
	rsd_simdev_stream_complete(e->sd, e->st);
	CK(rsd_manager_close(e->m, RSD_CLOSE_FORCE));
	rsd_manager_destroy(e->m);
	rsd_simdev_stream_destroy(e->sd, e->st);
	rsd_simdev_destroy(e->sd);
	rsd_policy_free(e->pol);
	free(e->w);
	free(e->q);
}

static void case_blocked_k(unsigned k)
{
	struct blk_env e;
	struct rsd_controller *c;
	uint64_t states = 0, zero = 0;
	double base, us;
	struct bench_fig *f;
	char cs[32];

	blk_setup(&e, k);
	CK(rsd_controller_create(e.m, e.pol, 0, &c));
	base = blk_decide_ms(c, &e.r, k >= 17 ? -RSD_ESEARCHLIMIT : -RSD_EPLAN, QF(1, 3), &states) *
	       1e3;
	CK(rsd_controller_set_flags(c, RSD_CTRL_PRECHECK));
	us = blk_decide_ms(c, &e.r, -RSD_EPLAN, QF(5, 15), &zero) * 1e3;
	if (!rsd_last_blockers() || zero)
		bench_fail("blocked decide: no blockers or states counted", -RSD_EUSAGE);
	snprintf(cs, sizeof(cs), "blocked_%u", k);
	f = bench_fig(cs, "decide_us", us, "us");
	bench_fig_base(f, "search decide_us", base);
	bench_fig_target(f, TGT_MAX, 1000);
	bench_line(cs, "search_explored_states", (double)states, "count");
	rsd_controller_free(c);
	blk_end(&e);
}

static void case_blocked(void)
{
	static const unsigned ks[] = { 4, 8, 12, 16, 64 };

	case_search_limit();
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
		case_blocked_k(ks[i]);
	bench_note("blocked_K: decide with RSD_CTRL_PRECHECK of K new 4 KiB values plus a "
		   "4 KiB output reservation at cuda:0, whose budget (2K values) K values under a "
		   "pending GPU lease and K spillable ones fill; baseline: the same decide "
		   "without it (2^K states, at most the default limit)");
	bench_note("search_limit: a search that exhausts the default limit (100,000 states), "
		   "example D with 17 values; baseline: the same decide with a limit of 10,000, "
		   "x10. Earlier trees, timed from their own builds on the machine of "
		   "Documentation/performance.md: see its \"Blocked decisions\"");
}
