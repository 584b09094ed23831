// SPDX-License-Identifier: MIT
/*
 * Fault points: what the framework costs a library nobody arms. An unarmed
 * point is one relaxed load of a cold flag and a branch not taken; these
 * figures put that beside the work around it (a malloc, a reservation
 * cycle), and beside what counting every hit (one shared atomic increment
 * per hit) would cost, which is why hits are counted only while armed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"
#include "internal.h"

/* Keep the compiler from folding the loops away. */
static void *volatile fault_sink;

static double ns_per(uint64_t t0, size_t n)
{
	return (double)(bench_now_ns() - t0) / (double)n;
}

/* An unarmed point alone: the flag load and the branch. */
static double unarmed_hit_ns(size_t n)
{
	uint64_t t0 = bench_now_ns();
	int sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += rsd__fault(RSD__FAULT_ALLOC, "bench");
	fault_sink = (void *)(intptr_t)sum;
	return ns_per(t0, n);
}

/* malloc+free of 64 bytes, through the alloc point or straight. */
static double malloc_ns(size_t n, bool wrapped)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < n; i++) {
		void *p = wrapped ? rsd__malloc(64) : malloc(64);

		fault_sink = p;
		free(p);
	}
	return ns_per(t0, n);
}

/* The alternative design: a shared hit counter bumped on every hit. */
static atomic_uint_fast64_t count_always;

static void *count_loop(void *arg)
{
	size_t n = *(const size_t *)arg;

	for (size_t i = 0; i < n; i++)
		atomic_fetch_add_explicit(&count_always, 1, memory_order_relaxed);
	return NULL;
}

static double count_ns(size_t n, int nthreads)
{
	pthread_t t[2];
	uint64_t t0 = bench_now_ns();

	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, count_loop, &n))
			bench_fail("pthread_create", -RSD_ENOMEM);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	return ns_per(t0, n);
}

static double reserve_cycle_ns(struct rsd_manager *m, size_t n)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < n; i++) {
		struct rsd_reservation *r;

		CK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 64, "bench", &r));
		CK(rsd_reservation_release(r));
		rsd_reservation_free(r);
	}
	return ns_per(t0, n);
}

static void case_fault(void)
{
	size_t n = QF(2000000, 20000000), nm = QF(200000, 2000000), nr = QF(20000, 200000);
	size_t reps = QF(3, 7);
	double hit[16], wr[16], raw[16], c1[16], c2[16], cyc[16], armed[16];
	struct rsd_manager *m = bench_manager(NULL, 0);
	uint64_t h0, hits;
	struct bench_fig *f;

	reserve_cycle_ns(m, nr / 10);
	malloc_ns(nm / 10, false);
	for (size_t r = 0; r < reps; r++) {
		hit[r] = unarmed_hit_ns(n);
		raw[r] = malloc_ns(nm, false);
		wr[r] = malloc_ns(nm, true);
		c1[r] = count_ns(n, 1);
		c2[r] = count_ns(n, 2);
		cyc[r] = reserve_cycle_ns(m, nr);
	}
	/* Armed far away: every allocation takes the slow path and counts. */
	h0 = rsd_fault_hits("alloc");
	CK(rsd_fault_inject("alloc", NULL, UINT64_MAX, RSD_ENOMEM));
	for (size_t r = 0; r < reps; r++)
		armed[r] = reserve_cycle_ns(m, nr);
	CK(rsd_fault_inject("alloc", NULL, 0, 0));
	hits = rsd_fault_hits("alloc") - h0;
	bench_manager_end(m);

	f = bench_fig("fault", "unarmed_hit_ns", bench_median(hit, reps), "ns");
	bench_fig_target(f, TGT_MAX, 1.0);
	f = bench_fig("fault", "malloc_wrapped_ns", bench_median(wr, reps), "ns");
	bench_fig_base(f, "malloc_ns", bench_median(raw, reps));
	bench_fig_target(f, TGT_RATIO_MAX, 1.10);
	bench_line("fault", "count_always_1thr_ns", bench_median(c1, reps), "ns");
	bench_line("fault", "count_always_2thr_ns", bench_median(c2, reps), "ns");
	f = bench_fig("fault", "reserve_cycle_armed_ns", bench_median(armed, reps), "ns");
	bench_fig_base(f, "reserve_cycle_ns", bench_median(cyc, reps));
	bench_line("fault", "allocs_per_reserve_cycle", (double)hits / (double)(reps * nr), "");
	bench_note(
		"fault: unarmed_hit is rsd__fault() alone; malloc_wrapped is rsd__malloc(64)+free "
		"against malloc(64)+free; count_always is the per-hit atomic increment a "
		"hit-counting design would add (2thr: two threads on one counter, ns per hit "
		"per thread); reserve_cycle_armed is reserve+release+free with alloc armed at "
		"UINT64_MAX (slow path: lock and count) against the same cycle unarmed");
}
