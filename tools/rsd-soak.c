// SPDX-License-Identifier: MIT
/*
 * rsd-soak: run librsd against the reference model (tests/model/) for many
 * seeds, or replay one. `make soak SOAK_ARGS=...`; `make soak-threads`
 * runs the multi-threaded check (-T).
 *
 *   rsd-soak [-s FIRST_SEED] [-n RUNS] [-k STEPS] [-t SECONDS] [-v]
 *            [-T THREADS [-d DELAY_NS] [-l LOAD_US]]
 *            [-H [-F FAULTS] [-r PERMILLE] [-C CHECKS] [-w MS] [-R]]
 *
 * Defaults: seeds from the clock, 1000000 runs of 300 steps, no time limit.
 * -v prints every operation (use with -n 1 to replay a failing seed).
 * -T runs THREADS threads of STEPS calls each on one manager and replays
 * them in commit order (tests/model/linearize.c; 0: 2, 3, 4 in turn), the
 * simulated device delaying each queued item DELAY_NS (default 20000) and
 * source loads sleeping up to LOAD_US (default 2000); -v prints each run's
 * replayed history. Exit status 1 on the first divergence, whose seed is
 * printed.
 *
 * -H adds the hostile mode (tests/model/hostile.inc) to -T (1 to 8 threads;
 * 0: 4 to 8 in turn): not-waiting calls, GPU leases with consumer streams,
 * several waiters on one queued copy, and the fault classes FAULTS (a
 * comma-separated list: all, none, NAME, -NAME; one starting with -NAME
 * starts from the default, all) armed at
 * random, one arming per call with probability PERMILLE/1000 (default 20),
 * with the checks CHECKS (same syntax; default all) and a watchdog: a call
 * running MS milliseconds (default 20000) is a hang, reported with every
 * thread's call, and the process aborts; -v prints the library's warnings
 * as they come. Runs in which no armed fault fired are replayed against
 * the model as for -T when they made no hostile call, or (half the runs
 * with not-waiting calls) only not-waiting calls, waits and reaps.
 * -R makes every budget 8 times larger, so that admissions seldom wait
 * for room (with -T too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../tests/model/model.c"      /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/model_plan.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/invariants.c" /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/compare.c"    /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/interp.c"     /* NOLINT(bugprone-suspicious-include): one shared copy */
#include "../tests/model/linearize.c"  /* NOLINT(bugprone-suspicious-include): one shared copy */

struct soak {
	uint64_t seed, runs, delay;
	unsigned steps, load_us;
	int threads; /* -1: the sequential interpreter */
	long seconds;
	bool verbose, hostile;
	unsigned faults, permille, checks, watchdog_ms;
	bool roomy;
	struct ip_stats st;
	struct lz_stats lst;
};

static char why[16384];

/* The hostile options, as -F and -C lists, to rerun a seed. */
static void hostile_args(const struct soak *s, char *b, size_t len)
{
	size_t k = (size_t)snprintf(b, len, " -H -F ");

	for (int checks = 0; checks < 2; checks++) {
		unsigned set = checks ? s->checks : s->faults, n = 0;

		if (checks)
			k += (size_t)snprintf(b + k, len - k, " -C ");
		for (unsigned i = 0; i < (checks ? LZC_N : LZF_N) && k < len; i++)
			if (set & (1u << i))
				k += (size_t)snprintf(b + k, len - k, "%s%s", n++ ? "," : "",
						      lz_set_name(checks, i));
		if (!n && k < len)
			k += (size_t)snprintf(b + k, len - k, "none");
	}
	if (k < len)
		snprintf(b + k, len - k, " -r %u%s -d %llu -l %u", s->permille,
			 s->roomy ? " -R" : "", (unsigned long long)s->delay, s->load_us);
}

/* Run i; false (after printing it) on a divergence. */
static bool run(struct soak *s, const char *argv0, uint64_t i)
{
	FILE *log = s->verbose ? stdout : NULL;

	if (s->threads < 0) {
		struct ip_opts o = { .seed = s->seed + i, .steps = s->steps, .log = log };

		if (!ip_run(&o, &s->st, why, sizeof(why)))
			return true;
		printf("DIVERGENCE (replay: %s -s %llu -n 1 -k %u -v)\n%s", argv0,
		       (unsigned long long)o.seed, s->steps, why);
	} else {
		struct lz_opts o = { .seed = s->seed + i,
				     .nthreads = s->threads ? (unsigned)s->threads :
						 s->hostile ? 4 + (unsigned)(i % 5) :
							      2 + (unsigned)(i % 3),
				     .ops = s->steps,
				     .delay_ns = s->delay,
				     .load_max_us = s->load_us,
				     .log = log,
				     .hostile = s->hostile,
				     .faults = s->faults,
				     .fault_permille = s->permille,
				     .checks = s->checks,
				     .watchdog_ms = s->watchdog_ms,
				     .roomy = s->roomy };

		char h[256] = "";

		if (!lz_run(&o, &s->lst, why, sizeof(why)))
			return true;
		if (s->hostile)
			hostile_args(s, h, sizeof(h));
		printf("%s (rerun, another interleaving: %s%s -s %llu -n 1 -T %u -k %u -v)\n%s\n",
		       s->hostile ? "FAILURE" : "DIVERGENCE", argv0, h, (unsigned long long)o.seed,
		       o.nthreads, s->steps, why);
	}
	return false;
}

int main(int argc, char **argv)
{
	struct soak s = { .seed = (uint64_t)time(NULL) * 1000003u,
			  .runs = 1000000,
			  .delay = 20000,
			  .steps = 300,
			  .load_us = 2000,
			  .threads = -1,
			  .faults = (1u << LZF_N) - 1,
			  .permille = 20,
			  .checks = (1u << LZC_N) - 1 };
	char bad[64];
	time_t t0 = time(NULL), last = t0;
	int c;

	while ((c = getopt(argc, argv, "s:n:k:t:T:d:l:vhHF:r:C:w:R")) != -1) {
		switch (c) {
		case 's':
			s.seed = strtoull(optarg, NULL, 0);
			break;
		case 'n':
			s.runs = strtoull(optarg, NULL, 0);
			break;
		case 'k':
			s.steps = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 't':
			s.seconds = strtol(optarg, NULL, 0);
			break;
		case 'T':
			s.threads = (int)strtol(optarg, NULL, 0);
			break;
		case 'd':
			s.delay = strtoull(optarg, NULL, 0);
			break;
		case 'l':
			s.load_us = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'v':
			s.verbose = true;
			break;
		case 'H':
			s.hostile = true;
			break;
		case 'F':
		case 'C':
			if (lz_parse_set(optarg, c == 'C', c == 'C' ? &s.checks : &s.faults, bad,
					 sizeof(bad))) {
				fprintf(stderr, "%s: -%c: %s\n", argv[0], c, bad);
				return 2;
			}
			break;
		case 'r':
			s.permille = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			s.watchdog_ms = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'R':
			s.roomy = true;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-s SEED] [-n RUNS] [-k STEPS] [-t SECONDS] [-v] [-T THREADS [-d DELAY_NS] [-l LOAD_US]] [-H [-F FAULTS] [-r PERMILLE] [-C CHECKS] [-w MS] [-R]]\n",
				argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	if (s.hostile && s.threads < 0)
		s.threads = 0;
	if (s.threads > (s.hostile ? 8 : 4)) {
		fprintf(stderr, "%s: -T takes 0 to %d\n", argv[0], s.hostile ? 8 : 4);
		return 2;
	}
	printf("rsd-soak: seeds %llu.., %llu runs of %u %s\n", (unsigned long long)s.seed,
	       (unsigned long long)s.runs, s.steps, s.threads < 0 ? "steps" : "calls per thread");
	for (uint64_t i = 0; i < s.runs; i++) {
		if (!run(&s, argv[0], i))
			return 1;
		if (s.seconds && time(NULL) - t0 >= s.seconds)
			break;
		if (time(NULL) - last >= 10) {
			last = time(NULL);
			printf("  %lu runs, %lu operations, 0 divergences\n",
			       s.st.runs + s.lst.runs, s.st.ops + s.lst.ops);
			fflush(stdout);
		}
	}
	if (s.threads < 0)
		printf("rsd-soak: %lu runs, %lu operations, %lu snapshots compared, 0 divergences\n",
		       s.st.runs, s.st.ops, s.st.snapshots);
	else
		printf("rsd-soak: %lu runs, %lu calls, %lu events replayed in commit order, 0 divergences; "
		       "confirmed concurrent-only: %lu EINUSE, %lu EBUDGET, %lu EPLAN\n",
		       s.lst.runs, s.lst.ops, s.lst.events, s.lst.inflight_inuse,
		       s.lst.inflight_budget, s.lst.inflight_plan);
	if (s.hostile) {
		printf("  hostile: %lu runs with hostile calls; %lu replayed against the model (%lu "
		       "with not-waiting calls, %lu queued copies' completions), %lu end-checked; "
		       "%lu not-waiting calls, "
		       "%lu waits on a queued copy, %lu GPU leases, %lu uses, %lu kernels, %lu ledger probes\n",
		       s.lst.hostile_runs, s.lst.replayed, s.lst.replayed_hostile, s.lst.qdone,
		       s.lst.end_checked, s.lst.async_calls, s.lst.waits, s.lst.gpu_leases,
		       s.lst.uses, s.lst.kernels, s.lst.probes);
		printf("  accepted: %lu loads again after a wait for room, %lu preflights passed "
		       "with queued copies' reads over; %lu runs end-checked because a copy took a "
		       "queued spill's block\n",
		       s.lst.async_reloads, s.lst.qread_done, s.lst.handover_runs);
		printf("  runs in which a fault fired:");
		for (unsigned c = 0; c < LZF_N; c++)
			printf(" %s %lu", lz_set_name(false, c), s.lst.fired[c]);
		printf("\n");
	}
	return 0;
}
