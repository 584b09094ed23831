// SPDX-License-Identifier: MIT
/*
 * The next-use policy against the tiered LRU and the offline bound
 * (Documentation/controller.md, "The next-use policy"):
 *
 *   sched_demo      rsd-demo's workload under both policies: bytes brought
 *                   to the device, beside the tiered LRU's and the bound;
 *   sched_cyclic    a cyclic sweep over twice the device budget of equal
 *                   values: bytes brought to the device vs the bound;
 *   sched_lru_friendly  a drifting hot set with one-off cold values (recent
 *                   reuse, what LRU is made for): bytes vs the tiered LRU;
 *   sched_decide_10k    one decide that evicts one of 10k resident values,
 *                   next-use vs the tiered LRU.
 *
 * Byte counts are exact (the simulated device completes every lease as it
 * is released), so they need no repetition.
 */
#include <stdlib.h>

#include "common.h"
#include "../demo/bound.h"
#include "../demo/demo.h"

#define SCHED_VAL_BYTES 4096u

/* One run: values[] requested one step at a time on a simulated cuda:0. */
struct sched_run {
	uint32_t nvalues, nsteps, repeat, budget_values;
	const struct bound_step *steps;
	bool next_use; /* else the tiered LRU */
};

static uint64_t sched_h2d(const struct rsd_plan_report *rep)
{
	uint64_t n = 0;

	for (size_t i = 0; rep && i < rep->ntransitions; i++) {
		const struct rsd_transition *t = &rep->transitions[i];

		if (!t->no_op && t->has_source && t->has_destination &&
		    t->destination.kind == RSD_CUDA && t->source.kind != RSD_CUDA)
			n += t->storage_nbytes;
	}
	return n;
}

/* Bytes brought to the device, or -1 after printing why. */
static long long sched_measure(const struct sched_run *sr)
{
	struct rsd_simdev_config sc = { .ndevices = 1, .auto_complete = true, .pooled = true };
	struct rsd_location dev = { RSD_CUDA, 0 };
	struct rsd_budget b = { dev, (uint64_t)sr->budget_values * SCHED_VAL_BYTES };
	struct rsd_manager_config cfg = { .budgets = &b, .nbudgets = 1 };
	struct rsd_handle *h = calloc(sr->nvalues, sizeof(*h));
	struct rsd_schedule_step *st = calloc(sr->nsteps, sizeof(*st));
	struct rsd_handle *sh = NULL;
	struct rsd_requirement req[8];
	struct rsd_controller *c = NULL;
	struct rsd_policy *p = NULL;
	struct rsd_manager *m = NULL;
	struct rsd_simdev *sd = NULL;
	void *stream = NULL;
	long long h2d = -1;
	uint64_t total = 0;
	size_t nh = 0;

	for (uint32_t i = 0; i < sr->nsteps; i++)
		nh += sr->steps[i].n;
	sh = calloc(nh ? nh : 1, sizeof(*sh));
	if (!h || !st || !sh || rsd_simdev_create(&sc, &sd))
		goto out;
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = sd;
	if (rsd_manager_create(&cfg, &m) || rsd_simdev_stream_create(sd, 0, &stream))
		goto out;
	for (uint32_t v = 0; v < sr->nvalues; v++)
		h[v] = bench_adopt(m, SCHED_VAL_BYTES, RSD_REPLICABLE, false);
	if (sr->next_use ? rsd_next_use_create(NULL, 0, 0, &p) : rsd_tiered_lru_create(NULL, 0, &p))
		goto out;
	if (rsd_controller_create(m, p, 0, &c))
		goto out;
	nh = 0;
	for (uint32_t i = 0; i < sr->nsteps; i++) {
		st[i] = (struct rsd_schedule_step){ sh + nh, sr->steps[i].n };
		for (uint32_t k = 0; k < sr->steps[i].n; k++)
			sh[nh++] = h[sr->steps[i].values[k]];
	}
	if (sr->next_use && rsd_controller_set_schedule(c, st, sr->nsteps, sr->repeat > 1))
		goto out;
	for (uint64_t t = 0; t < (uint64_t)sr->nsteps * sr->repeat; t++) {
		const struct rsd_schedule_step *s = &st[t % sr->nsteps];
		struct rsd_request r = { "step", req, s->nhandles, NULL, 0 };
		struct rsd_plan_report *rep = NULL;
		struct rsd_use *u;

		for (size_t k = 0; k < s->nhandles && k < 8; k++)
			req[k] = (struct rsd_requirement){ s->handles[k], dev };
		if (rsd_controller_use(c, &r, &stream, 1, NULL, 0, &u))
			goto out;
		if (rsd_use_close(u, &rep)) {
			rsd_use_free(u);
			goto out;
		}
		total += sched_h2d(rep);
		rsd_plan_report_free(rep);
		rsd_use_free(u);
	}
	h2d = (long long)total;
out:
	if (h2d < 0)
		bench_note("sched: %s failed: %s", sr->next_use ? "next-use" : "tiered LRU",
			   rsd_last_error()->message);
	rsd_controller_free(c);
	rsd_policy_free(p);
	if (m)
		bench_manager_end(m);
	if (stream)
		rsd_simdev_stream_destroy(sd, stream);
	rsd_simdev_destroy(sd);
	free(h);
	free(st);
	free(sh);
	return h2d;
}

static double sched_mib(uint64_t n)
{
	return (double)n / (1024.0 * 1024.0);
}

static void case_sched_demo(void)
{
	struct demo_opts o;
	struct demo_result r[NPOLICIES];
	uint64_t h2d[NPOLICIES], bound = 0;
	struct bench_fig *f;
	bool exact = false;

	demo_opts_default(&o, false);
	o.quiet = true;
	for (int p = 0; p < NPOLICIES; p++) {
		if (demo_workload(&o, (enum demo_policy)p, NULL, NULL, &r[p]) || r[p].lost) {
			bench_skip("sched_demo", "h2d_MiB", "the demo workload failed: %s",
				   rsd_last_error()->message);
			return;
		}
		h2d[p] = r[p].moved[T_PAGEABLE][T_DEVICE] + r[p].moved[T_PINNED][T_DEVICE];
	}
	if (demo_bound(&o, &bound, &exact) || !bound) {
		bench_skip("sched_demo", "h2d_MiB", "the bound is not computable");
		return;
	}
	f = bench_fig("sched_demo", "h2d_MiB", sched_mib(h2d[DP_NEXT_USE]), "MiB");
	bench_fig_base(f, "tiered LRU", sched_mib(h2d[DP_LRU]));
	bench_fig_target(f, TGT_RATIO_MAX, 0.7);
	f = bench_fig("sched_demo", "h2d_MiB_vs_bound", sched_mib(h2d[DP_NEXT_USE]), "MiB");
	bench_fig_base(f, exact ? "bound (exact)" : "bound (lower)", sched_mib(bound));
	bench_fig_target(f, TGT_RATIO_MAX, 1.1);
	bench_line("sched_demo", "lru_vs_bound", (double)h2d[DP_LRU] / (double)bound, "x");
	/* what no policy can beat: the bound over the tiered LRU's bytes */
	bench_line("sched_demo", "bound_vs_lru", (double)bound / (double)h2d[DP_LRU], "x");
	bench_line("sched_demo", "h2h_MiB_lru", sched_mib(r[DP_LRU].moved[T_PINNED][T_PAGEABLE]),
		   "MiB");
	bench_line("sched_demo", "h2h_MiB_next_use",
		   sched_mib(r[DP_NEXT_USE].moved[T_PINNED][T_PAGEABLE]), "MiB");
}

/* Both policies and the bound on one pattern; figure against base_name. */
static void sched_compare(const char *cs, uint32_t *idx, uint32_t nvalues, uint32_t nsteps,
			  uint32_t repeat, uint32_t budget, bool vs_bound)
{
	struct bound_step *steps = calloc(nsteps, sizeof(*steps));
	uint64_t *size = calloc(nvalues, sizeof(*size));
	struct sched_run sr = { nvalues, nsteps, repeat, budget, steps, false };
	long long lru, nu;
	uint64_t bound = 0;
	bool exact = false;
	struct bench_fig *f;

	if (!steps || !size)
		goto out;
	for (uint32_t i = 0; i < nsteps; i++)
		steps[i] = (struct bound_step){ &idx[i], 1, 0 };
	for (uint32_t v = 0; v < nvalues; v++)
		size[v] = SCHED_VAL_BYTES;
	lru = sched_measure(&sr);
	sr.next_use = true;
	nu = sched_measure(&sr);
	if (lru < 0 || nu < 0 ||
	    bound_min_loads(size, nvalues, steps, nsteps, repeat,
			    (uint64_t)budget * SCHED_VAL_BYTES, &bound, &exact)) {
		bench_skip(cs, "h2d_KiB", "a run failed (see the note above)");
		goto out;
	}
	f = bench_fig(cs, "h2d_KiB", (double)nu / 1024.0, "KiB");
	if (vs_bound) {
		bench_fig_base(f, "Belady bound", (double)bound / 1024.0);
		bench_fig_target(f, TGT_RATIO_MAX, 1.05);
		bench_line(cs, "lru_h2d_KiB", (double)lru / 1024.0, "KiB");
	} else {
		bench_fig_base(f, "tiered LRU", (double)lru / 1024.0);
		bench_fig_target(f, TGT_RATIO_MAX, 1.0);
		bench_line(cs, "bound_h2d_KiB", (double)bound / 1024.0, "KiB");
	}
out:
	free(steps);
	free(size);
}

static void case_sched_cyclic(void)
{
	uint32_t budget = 32, n = 2 * budget, repeat = QF(3, 6), *idx = calloc(n, sizeof(*idx));

	if (!idx)
		return;
	for (uint32_t i = 0; i < n; i++)
		idx[i] = i;
	sched_compare("sched_cyclic", idx, n, n, repeat, budget, true);
	bench_note("sched_cyclic: %u values of %u KiB swept %u times through a device budget of "
		   "%u values",
		   n, SCHED_VAL_BYTES / 1024, repeat, budget);
	free(idx);
}

/*
 * A hot set of 12 values that drifts by 4 every 40 steps, with a one-off
 * cold value every fifth step on average, through a budget of 16 values.
 */
static void case_sched_lru_friendly(void)
{
	uint32_t nsteps = QF(400, 1600), budget = 16, hot_span = 2 * (nsteps / 40) * 4 + 16;
	uint32_t nvalues = hot_span + nsteps, cold = hot_span, *idx = calloc(nsteps, sizeof(*idx));
	uint64_t x = 0x2545f4914f6cdd1dull;

	if (!idx)
		return;
	for (uint32_t t = 0; t < nsteps; t++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		idx[t] = x % 5 ? (t / 40) * 4 + (uint32_t)((x >> 8) % 12) : cold++;
	}
	sched_compare("sched_lru_friendly", idx, nvalues, nsteps, 1, budget, false);
	free(idx);
}

/* One decide at 10k resident values on pinned host (its budget full),
 * for a value that is not: the search ranks 10k candidates and evicts one. */
static int sched_decide_time(bool next_use, size_t n, size_t reps, double *us)
{
	struct rsd_budget b = { RSD_LOC_PINNED_HOST, (uint64_t)n * SCHED_VAL_BYTES };
	struct rsd_manager *m = bench_manager(&b, 1);
	struct rsd_handle *h = calloc(n + 1, sizeof(*h));
	struct rsd_schedule_step *st = calloc(n + 1, sizeof(*st));
	struct rsd_controller *c = NULL;
	struct rsd_policy *p = NULL;
	struct rsd_requirement q;
	struct rsd_request r = { "decide", &q, 1, NULL, 0 };
	size_t inner = QF(5, 20);
	int rc = -1;

	if (!h || !st)
		goto out;
	for (size_t i = 0; i <= n; i++) {
		h[i] = bench_adopt(m, SCHED_VAL_BYTES, RSD_REPLICABLE, false);
		if (i < n)
			CK(rsd_ensure(m, h[i], RSD_LOC_PINNED_HOST, NULL, NULL));
		st[i] = (struct rsd_schedule_step){ &h[i], 1 };
	}
	if (next_use ? rsd_next_use_create(NULL, 0, 0, &p) : rsd_tiered_lru_create(NULL, 0, &p))
		goto out;
	if (rsd_controller_create(m, p, 0, &c))
		goto out;
	/* the schedule names every value, the request's last */
	if (next_use && rsd_controller_set_schedule(c, st, n + 1, true))
		goto out;
	q = (struct rsd_requirement){ h[n], RSD_LOC_PINNED_HOST };
	for (size_t k = 0; k < reps; k++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < inner; i++) {
			struct rsd_decision *d;

			if (rsd_controller_decide(c, &r, &d))
				goto out;
			rsd_decision_free(d);
		}
		us[k] = (double)(bench_now_ns() - t0) / (double)inner / 1e3;
	}
	rc = 0;
out:
	if (rc)
		bench_note("sched_decide: %s", rsd_last_error()->message);
	rsd_controller_free(c);
	rsd_policy_free(p);
	bench_manager_end(m);
	free(h);
	free(st);
	return rc;
}

static void case_sched_decide(void)
{
	size_t reps = QF(3, 7);
	double lru[8], nu[8];
	struct bench_fig *f;

	if (sched_decide_time(false, 10000, reps, lru) ||
	    sched_decide_time(true, 10000, reps, nu)) {
		bench_skip("sched_decide_10k", "decide_us", "a decide failed (see the note above)");
		return;
	}
	f = bench_fig("sched_decide_10k", "decide_us", bench_median(nu, reps), "us");
	bench_fig_base(f, "tiered LRU", bench_median(lru, reps));
	bench_fig_target(f, TGT_RATIO_MAX, 1.5);
}

static void case_schedule(void)
{
	case_sched_demo();
	case_sched_cyclic();
	case_sched_lru_friendly();
	case_sched_decide();
}
