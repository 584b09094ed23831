// SPDX-License-Identifier: MIT
/*
 * Foundation: the cost of bringing a value under management and of the
 * cheapest transitions, on 4 KiB values in pageable host memory, and the
 * bandwidth of a pageable -> pinned move against a plain memcpy.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

#define VAL_BYTES 4096u

/*
 * adopt: residents are allocated (and written) before the clock starts, so
 * the figure is the adoption alone; the allocation is its own figure.
 */
static void case_adopt(void)
{
	size_t n = QF(2000, 20000), reps = QF(3, 7);
	struct rsd_resident **rs = calloc(n, sizeof(*rs));
	double adopt[16], alloc[16];
	struct bench_fig *f;

	if (!rs)
		bench_fail("calloc", -RSD_ENOMEM);
	for (size_t r = 0; r < reps; r++) {
		struct rsd_manager *m = bench_manager(NULL, 0);
		uint64_t nb = VAL_BYTES, t0, t1, t2;
		struct rsd_handle h;

		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			CK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &nb,
					      NULL, 0, &rs[i]));
		t1 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			memset(rsd_resident_data(rs[i], 0), 1, VAL_BYTES);
		t2 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			CK(rsd_adopt(m, rs[i], NULL, RSD_EXCLUSIVE, &h));
		adopt[r] = (double)(bench_now_ns() - t2) / (double)n;
		alloc[r] = (double)(t1 - t0) / (double)n;
		bench_manager_end(m);
	}
	free(rs);
	f = bench_fig("adopt", "adopt_ns", bench_median(adopt, reps), "ns");
	bench_fig_target(f, TGT_MAX, 500);
	bench_fig("adopt", "resident_alloc_ns", bench_median(alloc, reps), "ns");
	bench_note("adopt: %zu pre-allocated 4 KiB residents per repetition into a fresh manager; "
		   "resident_alloc (rsd_resident_alloc, pageable) is timed apart, not included",
		   n);
}

static void case_ensure_noop(void)
{
	size_t n = QF(50000, 1000000), reps = QF(3, 7);
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, VAL_BYTES, RSD_EXCLUSIVE, true);
	double v[16];
	struct bench_fig *f;

	for (size_t i = 0; i < n / 10; i++)
		CK(rsd_ensure(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < n; i++)
			CK(rsd_ensure(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
		v[r] = (double)(bench_now_ns() - t0) / (double)n;
	}
	bench_manager_end(m);
	f = bench_fig("ensure_noop", "ensure_ns", bench_median(v, reps), "ns");
	bench_fig_target(f, TGT_MAX, 100);
}

/* source_cycle: register_source + ensure (load) + drop; values accumulate. */
static void case_source_cycle(void)
{
	size_t n = QF(5000, 50000), reps = QF(3, 5);
	double v[16];
	struct bench_fig *f;

	for (size_t r = 0; r < reps; r++) {
		struct rsd_manager *m = bench_manager(NULL, 0);
		struct rsd_handle h;
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < n; i++) {
			bench_sources(m, 1, VAL_BYTES, &h);
			CK(rsd_ensure(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
			CK(rsd_drop(m, h, RSD_LOC_PAGEABLE_HOST, NULL));
		}
		v[r] = (double)(bench_now_ns() - t0) / (double)n;
		bench_manager_end(m);
	}
	f = bench_fig("source_cycle", "cycle_ns", bench_median(v, reps), "ns");
	(void)f;
	bench_note("source_cycle: %zu cycles per repetition in a fresh manager (the load allocates "
		   "4 KiB, untouched); registered values accumulate",
		   n);
}

/*
 * move_64MiB: a pageable -> pinned move against memcpy of the same size
 * between two buffers already faulted in. Only the pageable -> pinned
 * direction is timed: the pinned pool is warm (the first move grew it) and
 * the pageable source was written by the previous (untimed) move back, so
 * both sides are faulted in, as they are for the memcpy. The move also frees
 * its 64 MiB pageable source (munmap); that cost is printed on its own.
 */
static void case_move(void)
{
	const uint64_t nb = 64u << 20;
	size_t reps = QF(3, 9);
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, nb, RSD_EXCLUSIVE, true);
	double mv[16], cp[16], unmap[16];
	char *a, *b;
	struct bench_fig *f;

	a = malloc(nb);
	b = malloc(nb);
	if (!a || !b)
		bench_fail("malloc(64 MiB)", -RSD_ENOMEM);
	memset(a, 1, nb);
	memset(b, 2, nb);
	memcpy(b, a, nb);
	/* Warm the pinned pool: one round trip. */
	CK(rsd_move(m, h, RSD_LOC_PINNED_HOST, NULL, NULL, NULL));
	CK(rsd_move(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL, NULL));
	/* Interleaved, so that a change of load on the machine hits both. */
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		CK(rsd_move(m, h, RSD_LOC_PINNED_HOST, NULL, NULL, NULL));
		mv[r] = (double)nb / (double)(bench_now_ns() - t0); /* bytes/ns = GB/s */
		CK(rsd_move(m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL, NULL));
		t0 = bench_now_ns();
		memcpy(b, a, nb);
		cp[r] = (double)nb / (double)(bench_now_ns() - t0);
		a[r] = (char)r; /* keep the copies observable */
	}
	bench_manager_end(m);
	free(a);
	free(b);
	/* What the move's free of its faulted pageable source costs. */
	for (size_t r = 0; r < reps; r++) {
		char *p =
			mmap(NULL, nb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t t0;

		if (p == MAP_FAILED)
			bench_fail("mmap(64 MiB)", -RSD_ENOMEM);
		memset(p, 3, nb);
		t0 = bench_now_ns();
		munmap(p, nb);
		unmap[r] = (double)(bench_now_ns() - t0) / 1e6;
	}
	bench_line("move_64MiB", "memcpy_GBps", bench_median(cp, reps), "GB/s");
	f = bench_fig("move_64MiB", "pageable_to_pinned", bench_median(mv, reps), "GB/s");
	bench_fig_base(f, "memcpy", bench_median(cp, reps));
	bench_fig_target(f, TGT_RATIO_MIN, 0.9);
	bench_line("move_64MiB", "munmap_src_ms", bench_median(unmap, reps), "ms");
	bench_note("move_64MiB: GB/s = 10^9 bytes/s; the move's time includes freeing its 64 MiB "
		   "pageable source (munmap_src_ms above), which memcpy does not do");
}
