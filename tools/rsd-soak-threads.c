// SPDX-License-Identifier: MIT
/*
 * rsd-soak-threads: the multi-threaded linearizability check
 * (tests/model/linearize.c) for many seeds. `make soak-threads SOAK_ARGS=...`.
 *
 *   rsd-soak-threads [-s FIRST_SEED] [-n RUNS] [-T THREADS] [-k CALLS]
 *                    [-d DELAY_NS] [-l LOAD_US] [-t SECONDS] [-v]
 *
 * Defaults: seeds from the clock, 1000000 runs, threads cycling 2..4, 300
 * calls per thread, a 20 us per-item device delay, loads up to 2 ms, no
 * time limit. -v prints each run's replayed history. A seed replays the same
 * calls but not the same interleaving. Exit status 1 on the first
 * divergence, whose seed is printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../tests/model/model.c"      /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/model_plan.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/invariants.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/compare.c"    /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/linearize.c"  /* NOLINT(bugprone-suspicious-include): one shared copy */

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) * 1000003u, runs = 1000000, delay = 20000;
	unsigned threads = 0, calls = 300, load_us = 2000;
	long seconds = 0;
	bool verbose = false;
	struct lz_stats st = { 0 };
	static char why[16384];
	time_t t0 = time(NULL), last = t0;
	int c;

	while ((c = getopt(argc, argv, "s:n:T:k:d:l:t:vh")) != -1) {
		switch (c) {
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			runs = strtoull(optarg, NULL, 0);
			break;
		case 'T':
			threads = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			calls = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'd':
			delay = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			load_us = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 't':
			seconds = strtol(optarg, NULL, 0);
			break;
		case 'v':
			verbose = true;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-s SEED] [-n RUNS] [-T THREADS] [-k CALLS] [-d DELAY_NS] [-l LOAD_US] [-t SECONDS] [-v]\n",
				argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	printf("rsd-soak-threads: seeds %llu.., %llu runs of %u calls per thread\n",
	       (unsigned long long)seed, (unsigned long long)runs, calls);
	for (uint64_t i = 0; i < runs; i++) {
		struct lz_opts o = { .seed = seed + i,
				     .nthreads = threads ? threads : 2 + (unsigned)(i % 3),
				     .ops = calls,
				     .delay_ns = delay,
				     .load_max_us = load_us,
				     .log = verbose ? stdout : NULL };

		if (lz_run(&o, &st, why, sizeof(why))) {
			printf("DIVERGENCE (rerun: %s -s %llu -n 1 -T %u -k %u)\n%s\n", argv[0],
			       (unsigned long long)o.seed, o.nthreads, calls, why);
			return 1;
		}
		if (seconds && time(NULL) - t0 >= seconds)
			break;
		if (time(NULL) - last >= 10) {
			last = time(NULL);
			printf("  %lu runs, %lu calls, %lu events, 0 divergences\n", st.runs,
			       st.ops, st.events);
			fflush(stdout);
		}
	}
	printf("rsd-soak-threads: %lu runs, %lu calls, %lu events replayed, 0 divergences; "
	       "confirmed concurrent-only: %lu EINUSE, %lu EBUDGET, %lu EPLAN\n",
	       st.runs, st.ops, st.events, st.inflight_inuse, st.inflight_budget, st.inflight_plan);
	return 0;
}
