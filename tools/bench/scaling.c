// SPDX-License-Identifier: MIT
/*
 * trace_cycle, the hook of the tracing comparison, and the scaling sweep:
 * how the ensure/drop cycle, a snapshot and explain grow with the number of
 * values registered.
 */
#include "common.h"

/*
 * The ensure(pinned)+drop(pinned) cycle of one 4 KiB value in this build.
 * The three-way comparison (compiled out / compiled in, no session /
 * recording) runs this case in different builds and sessions.
 */
static void case_trace_cycle(void)
{
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, 4096, RSD_REPLICABLE, true);

	bench_line("trace_cycle", "rsd_trace_compiled", RSD_TRACE ? 1 : 0, "flag");
	bench_fig("trace_cycle", "cycle_ns", bench_cycle_ns(m, h, QF(20000, 200000), QF(3, 7)),
		  "ns");
	bench_manager_end(m);
}

/*
 * Each count: the plan environment (10 adopted values) plus registered
 * sources up to the count; sources carry no materialization, so the
 * snapshot rows are the value records alone.
 */
static void case_scaling(void)
{
	static const size_t counts[] = { 1000, 10000, 100000, 1000000 };
	size_t ncounts = bench_opts.quick ? 3 : 4;

	for (size_t c = 0; c < ncounts; c++) {
		size_t n = counts[c], reps = n >= 100000 ? 3 : 9;
		struct plan_env pe;
		struct rsd_snapshot *s;
		double snap[16];
		char metric[32];
		uint64_t t0 = bench_now_ns();

		plan_env_init(&pe, n, true);
		snprintf(metric, sizeof(metric), "setup_%zu_s", n);
		bench_line("scaling", metric, (double)(bench_now_ns() - t0) / 1e9, "s");
		snprintf(metric, sizeof(metric), "cycle_%zu_ns", n);
		bench_line("scaling", metric,
			   bench_cycle_ns(pe.m, pe.acts[0].handle, QF(5000, 50000), 5), "ns");
		CK(rsd_snapshot_take(pe.m, &s));
		rsd_snapshot_free(s);
		for (size_t r = 0; r < reps; r++) {
			t0 = bench_now_ns();
			CK(rsd_snapshot_take(pe.m, &s));
			snap[r] = (double)(bench_now_ns() - t0) / 1e6;
			rsd_snapshot_free(s);
		}
		snprintf(metric, sizeof(metric), "snapshot_%zu_ms", n);
		bench_line("scaling", metric, bench_median(snap, reps), "ms");
		snprintf(metric, sizeof(metric), "explain_%zu_us", n);
		bench_line("scaling", metric, explain_us(&pe, n >= 100000 ? 50 : 500, 3), "us");
		bench_manager_end(pe.m);
	}
}
