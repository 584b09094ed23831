// SPDX-License-Identifier: MIT
/*
 * rsd-demo's stages waiting for their copies against prefetching the next
 * stage while this one's kernel runs (group "pipeline", case
 * "demo_prefetch"; Documentation/performance.md, "Prefetching the demo's
 * stages").
 *
 * The demo's workload (tools/demo, linked in) on the simulated device with
 * its link model on, in the background, time scale DEMO_TIME_SCALE: each
 * run is rsd-demo --links [--no-prefetch] under one policy. The figure is
 * the stages' elapsed time, from the first stage's use to the end of the
 * last stage's kernel (the values' creation and the final checks are the
 * same in both modes and left out), prefetching beside waiting, for each
 * policy; the median of the repetitions, which alternate the two modes.
 * Every run must verify every value and every kernel's reads.
 *
 * The target row: prefetching over max(the stages' copies alone, their
 * kernels alone), <= 1.15 under both policies, the waiting run's ratio as
 * its baseline. Copies alone are measured in the same run: the same
 * stages, waiting, with kernels of 0 us (the median of as many runs);
 * kernels alone are the modelled total, stages x kernel x time scale,
 * which is what the simulated compute engine is charged for them.
 */
#include "common.h"
#include "../demo/demo.h"

#define DP_REPS_MAX 5

/* One run's stages' elapsed time in seconds; a negative number after a
 * failed or lossy run (said on stderr). kernels: each stage's kernel runs
 * (else a kernel of 0 us: the copies alone). */
static double dp_run(const struct demo_opts *base, enum demo_policy pol, bool prefetch,
		     bool kernels)
{
	struct demo_opts o = *base;
	struct demo_result r;

	o.prefetch = prefetch;
	if (!kernels)
		o.kernel_ns = 0;
	if (demo_workload(&o, pol, NULL, NULL, &r) || r.lost) {
		bench_note("demo_prefetch: the %s run under %s failed: %s",
			   prefetch ? "prefetching" : "waiting", demo_policy_name[pol],
			   r.lost ? "values lost or read wrong" : rsd_last_error()->message);
		return -1;
	}
	return (double)r.stages_ns / 1e9;
}

/* The median of reps runs in each mode under pol, and of the copies
 * alone, alternating; false after a failed run. */
static bool dp_policy(const struct demo_opts *o, enum demo_policy pol, size_t reps, double *wait,
		      double *pre, double *copies)
{
	double w[DP_REPS_MAX], f[DP_REPS_MAX], c[DP_REPS_MAX];

	for (size_t i = 0; i < reps; i++) {
		w[i] = dp_run(o, pol, false, true);
		f[i] = dp_run(o, pol, true, true);
		c[i] = dp_run(o, pol, false, false);
		if (w[i] < 0 || f[i] < 0 || c[i] < 0)
			return false;
	}
	*wait = bench_median(w, reps);
	*pre = bench_median(f, reps);
	*copies = bench_median(c, reps);
	return true;
}

static void case_demo_prefetch(void)
{
	static const char *const pre_metric[NPOLICIES] = { "prefetching_lru",
							   "prefetching_next_use" };
	static const char *const wait_metric[NPOLICIES] = { "waiting_lru", "waiting_next_use" };
	static const char *const copy_metric[NPOLICIES] = { "copies_alone_lru",
							    "copies_alone_next_use" };
	static const char *const x_metric[NPOLICIES] = { "prefetch_x_alone_lru",
							 "prefetch_x_alone_next_use" };
	const char *env = getenv("RSD_SIMDEV_TIME_SCALE");
	size_t reps = QF(1, 3);
	struct demo_opts o;
	double kernels;

	demo_opts_default(&o, false);
	o.stages = QF(24, 60);
	o.quiet = true;
	o.links = true;
	bench_note("demo_prefetch: the stages of rsd-demo -s %u --links (time scale %g), "
		   "waiting and prefetching, median of %zu",
		   o.stages, DEMO_TIME_SCALE, reps);
	/* the scale the workload gives the simulated device */
	kernels = (double)o.stages * (double)o.kernel_ns / 1e9 *
		  (env && *env ? strtod(env, NULL) : DEMO_TIME_SCALE);
	for (int p = 0; p < NPOLICIES; p++) {
		double wait, pre, copies, alone;
		struct bench_fig *f;

		if (!dp_policy(&o, (enum demo_policy)p, reps, &wait, &pre, &copies)) {
			bench_skip("demo_prefetch", x_metric[p], "a run failed (see the note)");
			continue;
		}
		alone = copies > kernels ? copies : kernels;
		bench_note("demo_prefetch: %s: waiting %.3f s, prefetching %.3f s, copies alone "
			   "%.3f s, kernels alone %.3f s (modelled)",
			   demo_policy_name[p], wait, pre, copies, kernels);
		bench_line("demo_prefetch", wait_metric[p], wait, "s");
		bench_line("demo_prefetch", pre_metric[p], pre, "s");
		bench_line("demo_prefetch", copy_metric[p], copies, "s");
		f = bench_fig("demo_prefetch", x_metric[p], pre / alone, "x");
		bench_fig_base(f, "waiting", wait / alone);
		bench_fig_target(f, TGT_MAX, 1.15);
	}
}
