// SPDX-License-Identifier: MIT
/*
 * Plans: explain (a lock-free dry run) and execute_actions of a 100-action
 * plan, with few and with many values registered.
 *
 * The plan is 50 pairs ensure(v, pinned) + drop(v, pinned) over the first
 * ten values (replicable, 4 KiB, pageable): every action is executable and
 * the plan leaves the state as it found it, so it can be repeated.
 */
#include <stdlib.h>

#include "common.h"

#define VAL_BYTES 4096u
#define PLAN_ACTIONS 100u
#define PLAN_VALUES 10u

struct plan_env {
	struct rsd_manager *m;
	struct rsd_action acts[PLAN_ACTIONS];
	struct rsd_plan plan;
};

/* nvalues registered in m: PLAN_VALUES adopted ones, the rest adopted (4 KiB,
 * untouched) or, with sources, registered sources without a load (their
 * handles to source_handles when not NULL). */
static void plan_env_init_in(struct plan_env *pe, struct rsd_manager *m, size_t nvalues,
			     bool sources, struct rsd_handle *source_handles)
{
	struct rsd_handle h[PLAN_VALUES];

	pe->m = m;
	for (size_t i = 0; i < PLAN_VALUES; i++)
		h[i] = bench_adopt(pe->m, VAL_BYTES, RSD_REPLICABLE, true);
	if (sources)
		bench_sources(pe->m, nvalues - PLAN_VALUES, VAL_BYTES, source_handles);
	else
		for (size_t i = PLAN_VALUES; i < nvalues; i++)
			bench_adopt(pe->m, VAL_BYTES, RSD_REPLICABLE, false);
	for (size_t i = 0; i < PLAN_ACTIONS; i += 2) {
		struct rsd_handle v = h[(i / 2) % PLAN_VALUES];

		pe->acts[i] = rsd_action_ensure(v, RSD_LOC_PINNED_HOST);
		pe->acts[i + 1] = rsd_action_drop(v, RSD_LOC_PINNED_HOST);
	}
	pe->plan = (struct rsd_plan){ .name = "bench", .enter = pe->acts, .nenter = PLAN_ACTIONS };
}

static void plan_env_init(struct plan_env *pe, size_t nvalues, bool sources)
{
	plan_env_init_in(pe, bench_manager(NULL, 0), nvalues, sources, NULL);
}

/* Median microseconds of one explain. */
static double explain_us(struct plan_env *pe, size_t n, size_t reps)
{
	struct rsd_explanation *e;
	double v[16];

	CK(rsd_explain(pe->m, &pe->plan, NULL, &e));
	if (!e->feasible || e->nactions != PLAN_ACTIONS)
		bench_fail("explain: plan not feasible", -RSD_EPLAN);
	rsd_explanation_free(e);
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < n; i++) {
			CK(rsd_explain(pe->m, &pe->plan, NULL, &e));
			rsd_explanation_free(e);
		}
		v[r] = (double)(bench_now_ns() - t0) / (double)n / 1e3;
	}
	return bench_median(v, reps);
}

static double execute_us(struct plan_env *pe, size_t n, size_t reps)
{
	struct rsd_plan_report *rep;
	double v[16];

	CK(rsd_execute_actions(pe->m, pe->acts, PLAN_ACTIONS, "bench", NULL, 0, NULL, &rep));
	if (rep->ntransitions != PLAN_ACTIONS)
		bench_fail("execute_actions: transition count", -RSD_EUSAGE);
	rsd_plan_report_free(rep);
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < n; i++) {
			CK(rsd_execute_actions(pe->m, pe->acts, PLAN_ACTIONS, "bench", NULL, 0,
					       NULL, &rep));
			rsd_plan_report_free(rep);
		}
		v[r] = (double)(bench_now_ns() - t0) / (double)n / 1e3;
	}
	return bench_median(v, reps);
}

static void case_plans(void)
{
	static const size_t counts[] = { 10, 10000 };
	static const double py_explain_us[] = { 330, 2930 };
	size_t n = QF(200, 2000), reps = QF(3, 7);

	for (size_t c = 0; c < 2; c++) {
		struct plan_env pe;
		char cs[32];
		double us;
		struct bench_fig *f;

		plan_env_init(&pe, counts[c], false);
		snprintf(cs, sizeof(cs), "explain_%zu", counts[c]);
		f = bench_fig(cs, "plan100_us", explain_us(&pe, n, reps), "us");
		bench_fig_py(f, py_explain_us[c]);
		if (counts[c] == 10000)
			bench_fig_target(f, TGT_MAX, 100);
		snprintf(cs, sizeof(cs), "execute_%zu", counts[c]);
		us = execute_us(&pe, n / 4, reps);
		bench_fig(cs, "plan100_us", us, "us");
		bench_line(cs, "per_action_ns", us * 1e3 / PLAN_ACTIONS, "ns");
		bench_manager_end(pe.m);
	}
	bench_note("plans: 100 actions = 50 x (ensure pinned, drop pinned) over 10 replicable "
		   "4 KiB values; N values registered in all (adopted, 4 KiB)");
}
