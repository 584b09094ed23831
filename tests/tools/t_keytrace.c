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
 * The bootstrapping trace as fhe_keys replays it (keys 1/63, 1.02 ms
 * kernels), on the kernel's card's link (27.5 GB/s, the default) and on a
 * PCIe 5.0 link (55 GB/s). At 25% and 50% of the keys' bytes: Belady's
 * copies, the bound and the plan over the ideal (figures kept in
 * Documentation/performance.md), the plan never below the bound and its
 * bytes within 1.1x of Belady's. On the card's own link both budgets leave
 * room under the 1.15x target; on the faster link the bound is above it.
 */
struct kt_pairing {
	uint64_t link_bps, copy_ns; /* the simulated 2 MiB copy: latency + bytes */
	double bound[2], plan[2];
};

static const struct kt_pairing pairings[] = {
	{ KT_DEFAULT_LINK_BPS, 8000 + 4804384, { 1.106, 1.124 }, { 1.113, 1.132 } },
	{ 55000000000ull, 8000 + 2402192, { 1.212, 1.248 }, { 1.225, 1.263 } },
};

ATF_TC_WITHOUT_HEAD(bootstrap_trace);
ATF_TC_BODY(bootstrap_trace, tc)
{
	struct kt_opts o = { .scale = KT_DEFAULT_SCALE,
			     .time_scale = 1,
			     .kernel_ns = KT_DEFAULT_KERNEL_NS };
	struct kt_trace t;

	kt_bootstrap(&t);
	ATF_REQUIRE_EQ(t.naccess, 161);
	ATF_REQUIRE_EQ(t.nkeys, 55);
	for (size_t p = 0; p < sizeof(pairings) / sizeof(pairings[0]); p++) {
		const struct kt_pairing *pp = &pairings[p];

		o.link_bps = pp->link_bps;
		for (unsigned q = 1; q <= 2; q++) {
			uint64_t key = t.key_bytes[0] / o.scale, bound;
			double ideal, lower, plan;
			unsigned copies;
			bool exact;

			o.budget = kt_key_bytes(&t, o.scale) * q / 4;
			bound = kt_belady(&t, o.scale, o.budget, &exact);
			ATF_CHECK(exact);
			ATF_CHECK_EQ(bound / key, q == 1 ? 96 : 82);
			ideal = kt_ideal(&t, &o, bound, pp->copy_ns);
			lower = kt_critical(&t, &o, pp->copy_ns);
			plan = kt_plan(&t, &o, pp->copy_ns, &copies);
			printf("%.1f GB/s, %u%%: ideal %.1f ms, bound %.4fx, plan %.4fx (%u copies)\n",
			       (double)pp->link_bps / 1e9, q * 25, ideal / 1e6, lower / ideal,
			       plan / ideal, copies);
			ATF_CHECK((lower / ideal > 1.15) == (p == 1));
			ATF_CHECK(plan / ideal < 1.15 || p == 1);
			ATF_CHECK(lower / ideal > pp->bound[q - 1] - 0.001 &&
				  lower / ideal < pp->bound[q - 1] + 0.001);
			ATF_CHECK(plan / ideal > pp->plan[q - 1] - 0.001 &&
				  plan / ideal < pp->plan[q - 1] + 0.001);
			ATF_CHECK(plan >= lower);
			ATF_CHECK(copies * key <= bound * 11 / 10);
		}
	}
	kt_free(&t);
}

/* ---- a straightforward reference -----------------------------------------
 *
 * The figures computed the slow, obvious way: every next use found by
 * scanning ahead, every prefix and suffix given its own Belady run. The
 * library's near-linear versions must agree with them exactly.
 */

/* The first access of key k in [i, n); n when none. */
static unsigned ref_use_from(const struct kt_trace *t, unsigned k, unsigned i, unsigned n)
{
	while (i < n && t->access[i] != k)
		i++;
	return i;
}

/* Belady's bytes over the accesses [from, n), the device empty at from:
 * the victim is the held key used farthest ahead, the lowest index among
 * keys not used again. */
static uint64_t ref_belady(const struct kt_trace *t, uint64_t scale, uint64_t budget, unsigned from,
			   unsigned n)
{
	bool *held = calloc(t->nkeys, sizeof(*held));
	uint64_t used = 0, moved = 0;

	ATF_REQUIRE(held);
	for (unsigned i = from; i < n; i++) {
		unsigned k = t->access[i];
		uint64_t nb = t->key_bytes[k] / scale;

		if (held[k])
			continue;
		moved += nb;
		while (used + nb > budget) {
			unsigned far = t->nkeys, farnext = 0;

			for (unsigned v = 0; v < t->nkeys; v++) {
				unsigned next = held[v] ? ref_use_from(t, v, i + 1, n) : 0;

				if (held[v] && (far == t->nkeys || next > farnext)) {
					far = v;
					farnext = next;
				}
			}
			if (far == t->nkeys)
				break;
			held[far] = false;
			used -= t->key_bytes[far] / scale;
		}
		held[k] = true;
		used += nb;
	}
	free(held);
	return moved;
}

/*
 * kt_critical's bound as its header defines it, with Belady run afresh on
 * each prefix and each suffix: kernel i starts no sooner than, for every
 * j <= i, prefix j's copies and the kernels j + 1 to i. With stride > 1,
 * the suffix term of access i is that of the first access from i on that
 * is a multiple of stride (or the last).
 */
static double ref_critical(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns,
			   unsigned stride)
{
	uint64_t key = t->key_bytes[0] / o->scale, slots = o->budget / key;
	double kernel = (double)o->kernel_ns * o->time_scale, best = 0;
	unsigned n = t->naccess;
	double *prefix = calloc(n, sizeof(*prefix));

	ATF_REQUIRE(prefix);
	for (unsigned j = 0; j < n; j++)
		prefix[j] = (double)ref_belady(t, o->scale, o->budget, 0, j + 1) / (double)key *
			    (double)copy_ns;
	for (unsigned i = 0; i < n; i++) {
		unsigned s = (i + stride - 1) / stride * stride;
		double need = (double)ref_belady(t, o->scale, o->budget, s < n ? s : n - 1, n);
		double earliest = 0, tail_copies, tail_kernels = (double)(n - i) * kernel;

		for (unsigned j = 0; j <= i; j++)
			if (prefix[j] + (double)(i - j) * kernel > earliest)
				earliest = prefix[j] + (double)(i - j) * kernel;
		need = need / (double)key - (double)slots;
		tail_copies = need > 0 ? need * (double)copy_ns + kernel : 0;
		if (earliest + (tail_copies > tail_kernels ? tail_copies : tail_kernels) > best)
			best = earliest + (tail_copies > tail_kernels ? tail_copies : tail_kernels);
	}
	free(prefix);
	return best;
}

/* A key in the reference plan. */
struct ref_key {
	bool held;
	double ready;	/* its copy's end */
	double free_at; /* its last kernel's end so far */
};

/* The held key to evict at access i: ordered by (next use descending,
 * room free ascending) under belady, else the other way round; the lowest
 * index among equals. */
static unsigned ref_victim(const struct kt_trace *t, const struct ref_key *ks, unsigned i,
			   double engine, bool belady)
{
	unsigned victim = t->nkeys;
	double b1 = 0, b2 = 0;

	for (unsigned v = 0; v < t->nkeys; v++) {
		double at = ks[v].free_at > engine ? ks[v].free_at : engine;
		double later = -(double)ref_use_from(t, v, i, t->naccess);
		double p1 = belady ? later : at, p2 = belady ? at : later;

		if (ks[v].held && (victim == t->nkeys || p1 < b1 || (p1 == b1 && p2 < b2))) {
			victim = v;
			b1 = p1;
			b2 = p2;
		}
	}
	return victim;
}

/* kt_plan's two schedules, access by access, each next use found by
 * scanning ahead. */
static double ref_plan_rule(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns,
			    bool belady, unsigned *copies)
{
	uint64_t key = t->key_bytes[0] / o->scale, slots = o->budget / key, nheld = 0;
	double kernel = (double)o->kernel_ns * o->time_scale, engine = 0, end = 0;
	struct ref_key *ks = calloc(t->nkeys, sizeof(*ks));

	ATF_REQUIRE(ks);
	*copies = 0;
	for (unsigned i = 0; slots && i < t->naccess; i++) {
		struct ref_key *a = &ks[t->access[i]];

		if (!a->held) {
			double from = engine;

			if (nheld == slots) {
				struct ref_key *v = &ks[ref_victim(t, ks, i, engine, belady)];

				v->held = false;
				nheld--;
				from = v->free_at > engine ? v->free_at : engine;
			}
			a->held = true;
			nheld++;
			engine = from + (double)copy_ns;
			a->ready = engine;
			(*copies)++;
		}
		end = (end > a->ready ? end : a->ready) + kernel;
		a->free_at = end;
	}
	free(ks);
	return end;
}

static double ref_plan(const struct kt_trace *t, const struct kt_opts *o, uint64_t copy_ns,
		       unsigned *copies)
{
	unsigned one, other;
	double soonest = ref_plan_rule(t, o, copy_ns, false, &one);
	double farthest = ref_plan_rule(t, o, copy_ns, true, &other);

	*copies = farthest < soonest ? other : one;
	return farthest < soonest ? farthest : soonest;
}

/* A fixed pseudo-random sequence (the same on every platform). */
static uint32_t ref_rand(uint64_t *state)
{
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*state >> 33);
}

/*
 * A random trace of n accesses over nkeys keys, of KEY bytes each or, with
 * mixed, of 1 to 4 KEYs. Some traces favour a few keys, as real key
 * streams do: every other access repeats one of the last four.
 */
static void ref_trace(struct kt_trace *t, uint64_t *seed, unsigned n, unsigned nkeys, bool mixed)
{
	t->naccess = n;
	t->nkeys = nkeys;
	t->access = calloc(n, sizeof(*t->access));
	t->key_bytes = calloc(nkeys, sizeof(*t->key_bytes));
	t->key_name = calloc(nkeys, sizeof(*t->key_name));
	ATF_REQUIRE(t->access && t->key_bytes && t->key_name);
	for (unsigned k = 0; k < nkeys; k++)
		t->key_bytes[k] = mixed ? KEY * (1 + ref_rand(seed) % 4) : KEY;
	for (unsigned i = 0; i < n; i++) {
		bool local = i >= 4 && ref_rand(seed) % 2;

		t->access[i] = local ? t->access[i - 1 - ref_rand(seed) % 4] :
				       ref_rand(seed) % nkeys;
	}
}

/*
 * Random traces against the reference, exactly: Belady's bytes (keys of
 * one size and of several), the lower bound and the plan (keys of one
 * size), at budgets from below one key to above all of them, kernels
 * shorter and longer than copies.
 */
ATF_TC_WITHOUT_HEAD(random_traces);
ATF_TC_BODY(random_traces, tc)
{
	static const unsigned shape[][2] = { { 1, 1 },	 { 9, 2 },    { 40, 3 },   { 120, 5 },
					     { 300, 8 }, { 500, 20 }, { 700, 60 }, { 64, 64 } };
	uint64_t seed = 20261206;
	unsigned cases = 0;

	for (size_t c = 0; c < sizeof(shape) / sizeof(shape[0]); c++) {
		for (int mixed = 0; mixed < 2; mixed++) {
			struct kt_trace t;
			unsigned n = shape[c][0], nkeys = shape[c][1];

			ref_trace(&t, &seed, n, nkeys, mixed);
			for (uint64_t slots = 0; slots <= nkeys + 1; slots += 1 + nkeys / 6) {
				/* a budget of slots keys and a part of one */
				uint64_t budget = slots * KEY + (slots % 2) * (KEY / 3);
				struct kt_opts o = { .scale = 1,
						     .time_scale = 1,
						     .kernel_ns = slots % 3 ? 1000 : 25000,
						     .budget = budget };
				unsigned copies = 7, want_copies;
				bool exact = !mixed, one = true;
				double want;

				for (unsigned k = 1; k < nkeys; k++)
					one &= t.key_bytes[k] == t.key_bytes[0];

				ATF_CHECK_EQ_MSG(kt_belady(&t, 1, budget, &exact),
						 ref_belady(&t, 1, budget, 0, n),
						 "%u accesses, %u keys, mixed %d, budget %llu", n,
						 nkeys, mixed, (unsigned long long)budget);
				ATF_CHECK_EQ(exact, one);
				cases++;
				if (mixed)
					continue;
				want = ref_critical(&t, &o, 10000, 1);
				ATF_CHECK_EQ_MSG(kt_critical(&t, &o, 10000), want,
						 "%u accesses, %u keys, %llu slots", n, nkeys,
						 (unsigned long long)slots);
				want = ref_plan(&t, &o, 10000, &want_copies);
				ATF_CHECK_EQ_MSG(kt_plan(&t, &o, 10000, &copies), want,
						 "%u accesses, %u keys, %llu slots", n, nkeys,
						 (unsigned long long)slots);
				ATF_CHECK_EQ(copies, want_copies);
			}
			free(t.access);
			free(t.key_bytes);
			free(t.key_name);
		}
	}
	printf("%u random cases agree with the reference\n", cases);
	ATF_CHECK(cases > 40);
}

/*
 * A trace longer than KT_CRITICAL_EXACT: the suffix term counted from
 * every stride-th access, each standing for the accesses before it, as
 * the reference computes it when told the stride; at most the bound with
 * every suffix counted, at least the one with the suffix term dropped.
 */
ATF_TC_WITHOUT_HEAD(sampled_suffixes);
ATF_TC_BODY(sampled_suffixes, tc)
{
	struct kt_opts o = { .scale = 1, .time_scale = 1, .kernel_ns = 1000, .budget = 3 * KEY };
	unsigned n = KT_CRITICAL_EXACT + 900, stride = kt_critical_stride(n);
	uint64_t seed = 4242;
	struct kt_trace t;
	double got, all;

	ATF_CHECK_EQ(kt_critical_stride(KT_CRITICAL_EXACT), 1);
	ATF_CHECK_EQ(stride, (n + KT_CRITICAL_POINTS - 1) / KT_CRITICAL_POINTS);
	ATF_REQUIRE(stride > 1);
	ref_trace(&t, &seed, n, 7, false);
	got = kt_critical(&t, &o, 10000);
	all = ref_critical(&t, &o, 10000, 1);
	ATF_CHECK_EQ(got, ref_critical(&t, &o, 10000, stride));
	ATF_CHECK(got <= all);
	/* the prefix term alone: the first copies, then every kernel */
	ATF_CHECK(got >= 7 * 10000.0 + (double)(n - 1) * 1000.0);
	printf("%u accesses, one suffix in %u: %.0f ns, every suffix %.0f ns\n", n, stride, got,
	       all);
	free(t.access);
	free(t.key_bytes);
	free(t.key_name);
}

/*
 * A user's long trace: 200k accesses over 64 keys. The figures come in a
 * few Belady runs' time (nothing is asserted about that time: the case
 * must only end within kyua's timeout), and are consistent: every key
 * copied once at least, the plan no faster than the bound, the bound no
 * faster than the ideal.
 */
ATF_TC_WITHOUT_HEAD(long_trace);
ATF_TC_BODY(long_trace, tc)
{
	struct kt_opts o = { .scale = 1, .time_scale = 1, .kernel_ns = 1000, .budget = 16 * KEY };
	uint64_t seed = 77, bound;
	struct kt_trace t;
	double ideal, lower, plan;
	unsigned copies = 0;
	bool exact = false;

	ref_trace(&t, &seed, 200000, 64, false);
	bound = kt_belady(&t, 1, o.budget, &exact);
	ATF_CHECK(exact);
	ATF_CHECK(bound >= 64 * KEY && bound <= 200000 * KEY);
	ideal = kt_ideal(&t, &o, bound, 10000);
	lower = kt_critical(&t, &o, 10000);
	plan = kt_plan(&t, &o, 10000, &copies);
	printf("bound %llu keys, ideal %.0f ns, lower bound %.0f ns, plan %.0f ns (%u copies)\n",
	       (unsigned long long)(bound / KEY), ideal, lower, plan, copies);
	ATF_CHECK(lower >= ideal);
	ATF_CHECK(plan >= lower);
	ATF_CHECK((uint64_t)copies * KEY >= bound);
	free(t.access);
	free(t.key_bytes);
	free(t.key_name);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, small_trace);
	ATF_TP_ADD_TC(tp, bootstrap_trace);
	ATF_TP_ADD_TC(tp, random_traces);
	ATF_TP_ADD_TC(tp, sampled_suffixes);
	ATF_TP_ADD_TC(tp, long_trace);
	return atf_no_error();
}
