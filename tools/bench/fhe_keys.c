// SPDX-License-Identifier: MIT
/*
 * A real workload (group "pipeline", case "fhe_keys"): the evaluation keys
 * of one OpenFHE CKKS bootstrapping at N = 2^16, read in the order
 * tools/data/fhe-bootstrap/trace-bootstrap-n16.tsv gives (161 accesses of
 * 55 keys of 126 MiB), replayed through the controller by
 * tools/demo/keytrace.c: keys are pinned values scaled down 63 times (2 MiB
 * each) with the link model's bandwidths divided by 63, the trace is the
 * schedule, each access a key-switch kernel of KT_DEFAULT_KERNEL_NS, the
 * link that kernel's card's (KT_DEFAULT_LINK_BPS).
 *
 * Device budgets of 25% and 50% of the keys' bytes, both policies, each
 * waiting, prefetching one access ahead, and (next-use) with
 * RSD_CTRL_LOOKAHEAD, as far ahead as the budget allows; durations
 * stretched by FK_TIME_SCALE; the median of the repetitions. Figures:
 * bytes brought to the device over Belady's bound (target for next-use:
 * <= 1.1), and the prefetching run's elapsed time (next-use: looking
 * ahead) over the ideal max(the bound's copies at the link rate, the
 * kernels), the waiting run's beside it and the one-ahead run's on a line
 * of its own (target for next-use: <= 1.15). Beside it, the same time over
 * the trace's lower bound (kt_critical: the copies the accesses up to one
 * must wait for, then the kernels after it or the copies the rest needs
 * beyond what the budget holds), and the bound and an offline plan
 * (kt_plan) over the ideal as bound_* and plan_* lines: 1.106x and 1.113x
 * at 25%, 1.124x and 1.132x at 50% (on a PCIe 5.0 link, 1.21x-1.26x: no
 * replay could meet the target; Documentation/performance.md).
 */
#include <unistd.h>

#include "common.h"
#include "../demo/keytrace.h"

#define FK_REPS_MAX 5
/* Modelled durations x4 (a run is about 1.5 s): the host's wake-ups, the
 * same in every mode, weigh less beside the copies. */
#define FK_TIME_SCALE 4.0
#define FK_TRACE "tools/data/fhe-bootstrap/trace-bootstrap-n16.tsv"

/* The trace: $RSD_FHE_TRACE, else FK_TRACE below the working directory
 * (make bench runs from the source tree), else beside the build tree. */
static int fk_load(struct kt_trace *t)
{
	const char *env = getenv("RSD_FHE_TRACE");
	char exe[4096], path[4200];
	ssize_t n;

	if (env && *env)
		return kt_load(env, t);
	if (!access(FK_TRACE, R_OK))
		return kt_load(FK_TRACE, t);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	/* <tree>/<build>/tools/rsd-bench */
	for (int up = 0; up < 3; up++) {
		char *slash = strrchr(exe, '/');

		if (!slash)
			return -1;
		*slash = '\0';
	}
	snprintf(path, sizeof(path), "%s/%s", exe, FK_TRACE);
	return kt_load(path, t);
}

/* The median elapsed time of reps runs; the bytes of the last (every run
 * of one policy and budget decides the same). false after a failed run. */
static bool fk_runs(const struct kt_trace *t, struct kt_opts *o, size_t reps, double *ns,
		    struct kt_result *r)
{
	double v[FK_REPS_MAX];

	for (size_t i = 0; i < reps; i++) {
		if (kt_replay(t, o, r))
			return false;
		if (r->kernel_faults || r->kernel_reads != t->naccess) {
			bench_note("fhe_keys: %u of %u kernels read their key, %u wrong",
				   r->kernel_reads, t->naccess, r->kernel_faults);
			return false;
		}
		v[i] = (double)r->elapsed_ns;
	}
	*ns = bench_median(v, reps);
	return true;
}

static void fk_budget(const struct kt_trace *t, struct kt_opts *o, unsigned pct, size_t reps)
{
	static const char *const pname[NPOLICIES] = { "lru", "next_use" };
	uint64_t bound;
	bool exact;

	o->budget = kt_key_bytes(t, o->scale) * pct / 100;
	bound = kt_belady(t, o->scale, o->budget, &exact);
	if (bound == KT_FAILED) {
		bench_skip("fhe_keys", "bytes", "Belady's bound ran out of memory");
		return;
	}
	bench_note("fhe_keys: budget %u%% (%.0f MiB scaled): Belady's bound %.0f MiB (%llu "
		   "copies)%s",
		   pct, (double)o->budget / (1 << 20), (double)bound / (1 << 20),
		   (unsigned long long)(bound / (t->key_bytes[0] / o->scale)),
		   exact ? "" : " (keys of several sizes)");
	for (int p = 0; p < NPOLICIES; p++) {
		struct kt_result rw, r1, rp;
		double wait, one, pre, ideal, path, plan;
		unsigned plan_copies;
		struct bench_fig *f;
		char metric[32];

		o->pol = (enum demo_policy)p;
		o->prefetch = o->lookahead = false;
		snprintf(metric, sizeof(metric), "bytes_%u_%s", pct, pname[p]);
		if (!fk_runs(t, o, reps, &wait, &rw)) {
			bench_skip("fhe_keys", metric, "a waiting run failed (see above)");
			continue;
		}
		o->prefetch = true;
		if (!fk_runs(t, o, reps, &one, &r1)) {
			bench_skip("fhe_keys", metric, "a prefetching run failed (see above)");
			continue;
		}
		/* next-use: the row is RSD_CTRL_LOOKAHEAD's, one ahead beside it */
		o->lookahead = p == DP_NEXT_USE;
		pre = one;
		rp = r1;
		if (o->lookahead && !fk_runs(t, o, reps, &pre, &rp)) {
			bench_skip("fhe_keys", metric, "a look-ahead run failed (see above)");
			continue;
		}
		ideal = kt_ideal(t, o, bound, rp.copy_ns);
		path = kt_critical(t, o, rp.copy_ns);
		plan = kt_plan(t, o, rp.copy_ns, &plan_copies);
		if (path < 0 || plan < 0) {
			bench_skip("fhe_keys", metric, "the bound or the plan ran out of memory");
			continue;
		}
		bench_note("fhe_keys: %u%% %s: waiting %.1f ms (%u copies), one ahead %.1f ms "
			   "(%u copies), %s %.1f ms (%u copies), ideal %.1f ms, lower bound "
			   "%.1f ms (%.3fx the ideal), offline plan %.1f ms (%.3fx, %u copies)",
			   pct, pname[p], wait / 1e6, rw.copies, one / 1e6, r1.copies,
			   o->lookahead ? "looking ahead" : "(the row)", pre / 1e6, rp.copies,
			   ideal / 1e6, path / 1e6, path / ideal, plan / 1e6, plan / ideal,
			   plan_copies);
		f = bench_fig("fhe_keys", metric, (double)rp.h2d_bytes / (double)bound, "x");
		bench_fig_base(f, "waiting", (double)rw.h2d_bytes / (double)bound);
		if (p == DP_NEXT_USE)
			bench_fig_target(f, TGT_MAX, 1.1);
		snprintf(metric, sizeof(metric), "one_ahead_%u_%s", pct, pname[p]);
		bench_line("fhe_keys", metric, one / ideal, "x");
		snprintf(metric, sizeof(metric), "prefetch_%u_%s", pct, pname[p]);
		f = bench_fig("fhe_keys", metric, pre / ideal, "x");
		bench_fig_base(f, "waiting", wait / ideal);
		if (p == DP_NEXT_USE)
			bench_fig_target(f, TGT_MAX, 1.15);
		/* what no schedule of these copies and kernels goes below, and
		 * the best schedule found offline, both over the ideal */
		snprintf(metric, sizeof(metric), "x_critical_%u_%s", pct, pname[p]);
		bench_line("fhe_keys", metric, pre / path, "x");
		if (p == DP_NEXT_USE) {
			if (path / ideal > 1.15)
				bench_note("fhe_keys: %u%%: no schedule meets 1.15x the ideal: "
					   "the lower bound is %.3fx",
					   pct, path / ideal);
			snprintf(metric, sizeof(metric), "bound_%u", pct);
			bench_line("fhe_keys", metric, path / ideal, "x");
			snprintf(metric, sizeof(metric), "plan_%u", pct);
			bench_line("fhe_keys", metric, plan / ideal, "x");
		}
	}
}

static void case_fhe_keys(void)
{
	struct kt_opts o = { .scale = KT_DEFAULT_SCALE,
			     .time_scale = FK_TIME_SCALE,
			     .kernel_ns = KT_DEFAULT_KERNEL_NS,
			     .link_bps = KT_DEFAULT_LINK_BPS };
	size_t reps = QF(1, 3);
	struct kt_trace t;

	if (fk_load(&t)) {
		bench_skip("fhe_keys", "prefetch_25_next_use", "no trace (set RSD_FHE_TRACE)");
		return;
	}
	bench_note("fhe_keys: %u accesses of %u keys, %.0f MiB (scaled 1/%llu), kernel %.0f us "
		   "x%.0f, link %.1f GB/s, median of %zu",
		   t.naccess, t.nkeys, (double)kt_key_bytes(&t, 1) / (1 << 20),
		   (unsigned long long)o.scale, (double)o.kernel_ns / 1e3, o.time_scale,
		   (double)o.link_bps / 1e9, reps);
	fk_budget(&t, &o, 25, reps);
	fk_budget(&t, &o, 50, reps);
	kt_free(&t);
}
