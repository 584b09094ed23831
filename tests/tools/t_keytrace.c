// SPDX-License-Identifier: MIT
/*
 * The key-trace replay's offline figures (tools/demo/keytrace.h): the
 * lower bound kt_critical, below which no schedule of the trace's copies
 * and kernels ends, and the offline plan kt_plan, a schedule that ends at
 * its figure. On a small trace worked by hand, and on the bootstrapping
 * trace that rsd-bench --case fhe_keys replays.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atf-c.h>

#include "../../tools/demo/keytrace.h"

#define KEY (1ull << 20)

/* A trace over keys named by one letter each, every key KEY bytes. */
static void kt_small(struct kt_trace *t, const char *order)
{
	static char *names[26];
	static uint64_t bytes[26];
	static uint32_t access[64];

	t->naccess = 0;
	t->nkeys = 0;
	for (const char *p = order; *p; p++) {
		unsigned k = (unsigned)(*p - 'a');

		ATF_REQUIRE(k < 26 && t->naccess < 64);
		access[t->naccess++] = k;
		if (k + 1 > t->nkeys)
			t->nkeys = k + 1;
		bytes[k] = KEY;
		names[k] = NULL;
	}
	t->access = access;
	t->key_bytes = bytes;
	t->key_name = names;
}

/*
 * a b c c c c a b, room for two keys, copies of 10 us, kernels of 1 us.
 * Kernel 5 (the last c) starts at 33 us at the earliest: three copies
 * before the first c, then three more kernels. Then the device holds c
 * and at most one of a and b, so one more copy starts after 33 and its
 * kernel ends at 44 at the earliest: the bound. The prefix alone (the
 * critical path of before) gives 41: four copies, then b's kernel. The
 * better plan evicts b for c (Belady's victim, at 21 when its kernel
 * ends: c's copy ends at 31, its kernels at 35, a's at 36), then c for b:
 * 46 us, four copies. Evicting a for c instead, free sooner (11), costs a
 * copy of a and of b later: 51.
 */
ATF_TC_WITHOUT_HEAD(small_trace);
ATF_TC_BODY(small_trace, tc)
{
	struct kt_opts o = { .scale = 1, .time_scale = 1, .kernel_ns = 1000, .budget = 2 * KEY };
	struct kt_trace t;
	unsigned copies = 0;
	bool exact = false;

	kt_small(&t, "abccccab");
	ATF_CHECK_EQ(kt_belady(&t, 1, o.budget, &exact), 4 * KEY);
	ATF_CHECK(exact);
	ATF_CHECK_EQ(kt_ideal(&t, &o, 4 * KEY, 10000), 40000.0);
	ATF_CHECK_EQ(kt_critical(&t, &o, 10000), 44000.0);
	ATF_CHECK_EQ(kt_plan(&t, &o, 10000, &copies), 46000.0);
	ATF_CHECK_EQ(copies, 4);

	/* with room for three nothing is evicted: the three copies, then
	 * the kernels from c's first on; the plan is that */
	o.budget = 3 * KEY;
	ATF_CHECK_EQ(kt_critical(&t, &o, 10000), 36000.0);
	ATF_CHECK_EQ(kt_plan(&t, &o, 10000, &copies), 36000.0);
	ATF_CHECK_EQ(copies, 3);

	/* kernels longer than copies: the kernels after the first copy */
	o.kernel_ns = 20000;
	ATF_CHECK_EQ(kt_critical(&t, &o, 10000), 10000.0 + 8 * 20000.0);
	ATF_CHECK_EQ(kt_plan(&t, &o, 10000, &copies), 10000.0 + 8 * 20000.0);

	/* a budget below one key: no plan */
	o.budget = KEY - 1;
	ATF_CHECK_EQ(kt_plan(&t, &o, 10000, &copies), 0.0);
	ATF_CHECK_EQ(copies, 0);
}

/* The bootstrapping trace: below $RSD_SRCDIR (make check sets it), else
 * below the tree this program was built in (<tree>/<build>/tests/tools/). */
static void kt_bootstrap(struct kt_trace *t)
{
	const char *src = getenv("RSD_SRCDIR");
	char tree[4096], path[4300];
	ssize_t n;

	if (src && *src) {
		snprintf(tree, sizeof(tree), "%s", src);
	} else {
		n = readlink("/proc/self/exe", tree, sizeof(tree) - 1);
		ATF_REQUIRE(n > 0);
		tree[n] = '\0';
		for (int up = 0; up < 4; up++) {
			char *slash = strrchr(tree, '/');

			ATF_REQUIRE(slash);
			*slash = '\0';
		}
	}
	snprintf(path, sizeof(path), "%s/tools/data/fhe-bootstrap/trace-bootstrap-n16.tsv", tree);
	ATF_REQUIRE_EQ_MSG(kt_load(path, t), 0, "no trace at %s", path);
}

/*
 * The bootstrapping trace as fhe_keys replays it (keys 1/63, copies at 55
 * GB/s of the full key, 1.02 ms kernels): at 25% and 50% of the keys'
 * bytes the bound is above 1.15x the ideal, the target, and the
 * plan between the bound and a few percent above it, its bytes within
 * 1.1x of Belady's.
 */
ATF_TC_WITHOUT_HEAD(bootstrap_trace);
ATF_TC_BODY(bootstrap_trace, tc)
{
	/* the simulated link's 2 MiB copy at 55 GB/s / 63: latency + bytes */
	const uint64_t copy_ns = 8000 + 2402192;
	struct kt_opts o = { .scale = KT_DEFAULT_SCALE,
			     .time_scale = 1,
			     .kernel_ns = KT_DEFAULT_KERNEL_NS };
	const double want_bound[2] = { 1.212, 1.248 }, want_plan[2] = { 1.225, 1.263 };
	struct kt_trace t;

	kt_bootstrap(&t);
	ATF_REQUIRE_EQ(t.naccess, 161);
	ATF_REQUIRE_EQ(t.nkeys, 55);
	for (unsigned q = 1; q <= 2; q++) {
		uint64_t key = t.key_bytes[0] / o.scale, bound;
		double ideal, lower, plan;
		unsigned copies;
		bool exact;

		o.budget = kt_key_bytes(&t, o.scale) * q / 4;
		bound = kt_belady(&t, o.scale, o.budget, &exact);
		ATF_CHECK(exact);
		ATF_CHECK_EQ(bound / key, q == 1 ? 96 : 82);
		ideal = kt_ideal(&t, &o, bound, copy_ns);
		lower = kt_critical(&t, &o, copy_ns);
		plan = kt_plan(&t, &o, copy_ns, &copies);
		printf("%u%%: ideal %.1f ms, bound %.4fx, plan %.4fx (%u copies)\n", q * 25,
		       ideal / 1e6, lower / ideal, plan / ideal, copies);
		ATF_CHECK(lower / ideal > 1.15);
		ATF_CHECK(lower / ideal > want_bound[q - 1] - 0.001 &&
			  lower / ideal < want_bound[q - 1] + 0.001);
		ATF_CHECK(plan / ideal > want_plan[q - 1] - 0.001 &&
			  plan / ideal < want_plan[q - 1] + 0.001);
		ATF_CHECK(plan >= lower);
		ATF_CHECK(copies * key <= bound * 11 / 10);
	}
	kt_free(&t);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, small_trace);
	ATF_TP_ADD_TC(tp, bootstrap_trace);
	return atf_no_error();
}
