// SPDX-License-Identifier: MIT
/*
 * rsd-bench: librsd's benchmark. Each figure is printed as
 * "bench <case> <metric> <value> <unit>"; a closing table sets each beside
 * its baseline from the same run, the Python reference's figure where the
 * issues give one, and the target, with PASS or MISS.
 *
 *   rsd-bench [--quick] [--scaling] [--case NAME]... [--list]
 *
 * The scaling table (1k..1M values) and the StarPU peer cases (when built
 * with StarPU) run in every run; --quick stops the table at 100k.
 *
 * Single-threaded unless a case says otherwise; CLOCK_MONOTONIC; every case
 * warms up first and reports the median of several repetitions.
 * Documentation/performance.md describes the cases and a recorded run.
 *
 * One concept per file under tools/bench/, included here so that the
 * Makefile builds this one program from tools/rsd-bench.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/common.h"

#include "bench/common.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/foundation.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/rcu.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/lifetimes.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/plans.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/controller.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/schedule.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/scaling.c"  /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/fault.c"    /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/pipeline.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/gpu.c"	    /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/dataplane.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/starpu.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/node.c"	  /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/node_ctrl.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/blocked.c"  /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/prefetch.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/gpu_pipeline.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/demo_prefetch.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/devloss.c"  /* NOLINT(bugprone-suspicious-include): one program, split by concept */
#include "bench/fhe_keys.c" /* NOLINT(bugprone-suspicious-include): one program, split by concept */

struct bench_case {
	const char *name;
	const char *group;
	void (*run)(void);
	bool on_request; /* only with --scaling or --case */
};

static const struct bench_case cases[] = {
	{ "adopt", "foundation", case_adopt, false },
	{ "ensure_noop", "foundation", case_ensure_noop, false },
	{ "source_cycle", "foundation", case_source_cycle, false },
	{ "move_64MiB", "foundation", case_move, false },
	{ "snapshot_10k", "rcu", case_snapshot_10k, false },
	{ "snap_lat_writer", "rcu", case_snapshot_latency_writer, false },
	{ "snap_lat_load", "rcu", case_snapshot_latency_load, false },
	{ "writer_tput", "rcu", case_writer_throughput, false },
	{ "cycle_scale", "rcu", case_cycle_scale, false },
	{ "lifetimes", "lifetimes", case_lifetimes, false },
	{ "pinned_alloc", "lifetimes", case_pinned_alloc, false },
	{ "cuda", "lifetimes", case_cuda, false },
	{ "pinned_register", "lifetimes", case_pinned_register, false },
	{ "plans", "plans", case_plans, false },
	{ "ctrl", "controller", case_controller, false },
	{ "dataplane", "controller", case_dataplane, false },
	{ "schedule", "controller", case_schedule, false },
	{ "blocked", "controller", case_blocked, false },
	{ "trace_cycle", "tracing", case_trace_cycle, false },
	{ "fault", "fault", case_fault, false },
	{ "scaling", "scaling", case_scaling, false },
	{ "scaling_life", "scaling", case_scaling_lifetimes, false },
	{ "starpu", "peer", case_starpu, false },
	{ "gpu", "gpu", case_gpu, false },
	{ "node", "node", case_node, false },
	{ "node_ctrl", "node", case_node_ctrl, false },
	{ "prefetch", "pipeline", case_prefetch, false },
	{ "gpu_pipeline", "gpu", case_gpu_pipeline, false },
	{ "staging", "pipeline", case_pipeline_staging, false },
	{ "demo_prefetch", "pipeline", case_demo_prefetch, false },
	{ "devloss", "devloss", case_devloss, false },
	{ "fhe_keys", "pipeline", case_fhe_keys, false },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: rsd-bench [--quick] [--scaling] [--case NAME]... [--list]\n"
		   "  --quick      small iteration counts (seconds in all)\n"
		   "  --scaling    accepted for old scripts: the 1k..1M sweep runs anyway\n"
		   "  --case NAME  run one case or group (repeatable); --list names them\n");
}

int main(int argc, char **argv)
{
	const char *want[NCASES * 2] = { NULL };
	size_t nwant = 0;
	uint64_t t0 = bench_now_ns();

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			bench_opts.quick = true;
		} else if (!strcmp(argv[i], "--scaling")) {
			bench_opts.scaling = true;
		} else if (!strcmp(argv[i], "--case") && i + 1 < argc) {
			if (nwant < NCASES * 2)
				want[nwant++] = argv[++i];
		} else if (!strncmp(argv[i], "--case=", 7)) {
			if (nwant < NCASES * 2)
				want[nwant++] = argv[i] + 7;
		} else if (!strcmp(argv[i], "--list")) {
			for (size_t c = 0; c < NCASES; c++)
				printf("%-16s %s%s\n", cases[c].name, cases[c].group,
				       cases[c].on_request ? " (on request)" : "");
			return 0;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "rsd-bench: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	for (size_t w = 0; w < nwant; w++) {
		bool known = false;

		for (size_t c = 0; c < NCASES; c++)
			known |= !strcmp(want[w], cases[c].name) ||
				 !strcmp(want[w], cases[c].group);
		if (!known) {
			fprintf(stderr, "rsd-bench: no case or group '%s' (--list names them)\n",
				want[w]);
			return 2;
		}
	}
	bench_note("rsd-bench %s%s; tracing %s", bench_opts.quick ? "--quick" : "full run",
		   bench_opts.scaling ? " --scaling" : "",
		   RSD_TRACE ? "compiled in" : "compiled out");
	for (size_t c = 0; c < NCASES; c++) {
		bool run = nwant == 0 && (!cases[c].on_request || bench_opts.scaling);

		for (size_t w = 0; w < nwant; w++)
			run |= !strcmp(want[w], cases[c].name) || !strcmp(want[w], cases[c].group);
		if (run)
			cases[c].run();
	}
	bench_print_table();
	bench_note("total %.1f s", (double)(bench_now_ns() - t0) / 1e9);
	/* A missed target is a finding, not a failure of the program. */
	return 0;
}
