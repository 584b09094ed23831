// SPDX-License-Identifier: MIT
/*
 * rsd-soak: run librsd against the reference model (tests/model/) for many
 * seeds, or replay one. `make soak SOAK_ARGS=...`.
 *
 *   rsd-soak [-s FIRST_SEED] [-n RUNS] [-k STEPS] [-t SECONDS] [-v]
 *
 * Defaults: seeds from the clock, 1000000 runs of 300 steps, no time limit.
 * -v prints every operation (use with -n 1 to replay a failing seed).
 * Exit status 1 on the first divergence, whose seed is printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../tests/model/model.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/model_plan.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/invariants.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/compare.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/interp.c" /* NOLINT(bugprone-suspicious-include): one shared copy */

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL) * 1000003u, runs = 1000000;
	unsigned steps = 300;
	long seconds = 0;
	bool verbose = false;
	struct ip_stats st = { 0 };
	static char why[16384];
	time_t t0 = time(NULL), last = t0;
	int c;

	while ((c = getopt(argc, argv, "s:n:k:t:vh")) != -1) {
		switch (c) {
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			runs = strtoull(optarg, NULL, 0);
			break;
		case 'k':
			steps = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 't':
			seconds = strtol(optarg, NULL, 0);
			break;
		case 'v':
			verbose = true;
			break;
		default:
			fprintf(stderr, "usage: %s [-s SEED] [-n RUNS] [-k STEPS] [-t SECONDS] [-v]\n",
				argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	printf("rsd-soak: seeds %llu.., %llu runs of %u steps\n", (unsigned long long)seed,
	       (unsigned long long)runs, steps);
	for (uint64_t i = 0; i < runs; i++) {
		struct ip_opts o = { .seed = seed + i, .steps = steps, .log = verbose ? stdout : NULL };

		if (ip_run(&o, &st, why, sizeof(why))) {
			printf("DIVERGENCE (replay: %s -s %llu -n 1 -k %u -v)\n%s", argv[0],
			       (unsigned long long)o.seed, steps, why);
			return 1;
		}
		if (seconds && time(NULL) - t0 >= seconds)
			break;
		if (time(NULL) - last >= 10) {
			last = time(NULL);
			printf("  %lu runs, %lu operations, 0 divergences\n", st.runs, st.ops);
			fflush(stdout);
		}
	}
	printf("rsd-soak: %lu runs, %lu operations, %lu snapshots compared, 0 divergences\n",
	       st.runs, st.ops, st.snapshots);
	return 0;
}
