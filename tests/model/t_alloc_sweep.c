// SPDX-License-Identifier: MIT
/*
 * Allocation-failure sweeps against the reference model, as SQLite runs
 * its out-of-memory tests: a seeded run of the interpreter (interp.c) is a
 * scripted workload; for k = 1, 2, ... the kth bookkeeping allocation
 * librsd makes in it fails (the "alloc" fault point), until a run completes
 * without reaching its kth allocation. interp_fault.inc checks each
 * failure: -RSD_ENOMEM (or -RSD_EEXEC caused by it), nothing changed but a
 * committed plan prefix (the model, rolled back, must match the snapshot
 * and state_version), and the run finished with the point disarmed agrees
 * with the model to the end. Under SANITIZE=address LeakSanitizer checks
 * every unwinding path for leaks; under VALGRIND=1, valgrind does.
 *
 * The figures printed (allocation sites, k swept) go to
 * Documentation/fault-injection.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "internal.h"
#include "interp.h"

/* Distinct call sites failed over all sweeps of this program. */
#define MAX_SITES 256
static char sites[MAX_SITES][128];
static unsigned nsites;

static void site_seen(void)
{
	char s[128];

	rsd__fault_fired(s, sizeof(s));
	for (unsigned i = 0; i < nsites; i++)
		if (!strcmp(sites[i], s))
			return;
	if (nsites < MAX_SITES)
		snprintf(sites[nsites++], sizeof(sites[0]), "%s", s);
}

/* Sweep one workload (seed, steps); returns the number of k swept. */
static unsigned long sweep(uint64_t seed, unsigned steps, struct ip_stats *st)
{
	static char why[8192];
	/* Under valgrind every run costs ~50 times more: every 16th k. */
	unsigned long k, n = 0, stride = getenv("RSD_UNDER_VALGRIND") ? 16 : 1;

	for (k = 1;; k += stride) {
		struct ip_opts o = { .seed = seed, .steps = steps, .alloc_fault = k };
		unsigned long fired = st->faults_fired;

		if (ip_run(&o, st, why, sizeof(why)))
			atf_tc_fail("seed %llu, %u steps, allocation %lu failed:\n%s",
				    (unsigned long long)seed, steps, k, why);
		if (st->faults_fired == fired)
			break; /* the run made fewer than k allocations */
		site_seen();
		n++;
	}
	return n;
}

static void sweep_seeds(uint64_t first, unsigned nseeds, unsigned steps)
{
	struct ip_stats st = { 0 };
	unsigned long ks = 0;
	time_t t0 = time(NULL);

	for (unsigned i = 0; i < nseeds; i++)
		ks += sweep(first + i, steps, &st);
	printf("%u workloads of %u steps: %lu k swept (%lu runs, %lu operations), %lu failures "
	       "reported by a call, %lu absorbed, %u distinct allocation sites so far, %lds\n",
	       nseeds, steps, ks, st.runs, st.ops, st.faults_reported,
	       st.faults_fired - st.faults_reported, nsites, (long)(time(NULL) - t0));
	for (int e = 0; e < RSD_EMAX; e++)
		if (st.codes[e])
			printf("  result %-16s %lu\n", e ? rsd_strerror(-e) : "success",
			       st.codes[e]);
	ATF_REQUIRE(ks > 0);
	ATF_REQUIRE_EQ(st.faults_fired, ks);
	/* Most failures must reach a caller; an absorbed one is the exception. */
	ATF_REQUIRE(st.faults_reported > ks / 2);
}

static void print_sites(void)
{
	printf("%u distinct allocation sites failed:\n", nsites);
	for (unsigned i = 0; i < nsites; i++)
		printf("  %s\n", sites[i]);
}

static unsigned env_or(const char *name, unsigned dflt)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 0) : dflt;
}

/* RSD_SWEEP_FIRST, RSD_SWEEP_SEEDS and RSD_SWEEP_STEPS widen a run by hand. */
ATF_TC_WITHOUT_HEAD(model_alloc_sweep);
ATF_TC_BODY(model_alloc_sweep, tc)
{
	sweep_seeds(env_or("RSD_SWEEP_FIRST", 1), env_or("RSD_SWEEP_SEEDS", 8),
		    env_or("RSD_SWEEP_STEPS", 50));
	print_sites();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, model_alloc_sweep);
	return atf_no_error();
}
