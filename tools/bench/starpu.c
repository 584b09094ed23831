// SPDX-License-Identifier: MIT
/*
 * The peer: StarPU (starpu-1.3), the runtime an HPC C user would otherwise
 * pick for managed data handles, measured in the same run as librsd on the
 * same work, one CPU worker, values in main RAM.
 *
 * Built only when the Makefile finds starpu-1.3 with pkg-config (it then
 * passes -DRSD_BENCH_STARPU=1 and links rsd-bench, never the library,
 * against StarPU); otherwise the cases print "skipped" with the reason.
 *
 * Each figure is librsd's time for the work, with StarPU's as its baseline
 * (the "x base" column is librsd / StarPU: below 1 means librsd is faster).
 * Repetitions alternate between the two sides, so a change of load on the
 * machine falls on both. Documentation/performance.md says what each side
 * does per operation.
 */
#include <stdlib.h>
#include <string.h>

#if RSD_BENCH_STARPU
#include <starpu.h>
#endif

#include "common.h"

#define PEER_BYTES 4096u
#define PEER_MOVE_VALUES 64u
#define PEER_MOVE_BYTES (256u << 10)

#if RSD_BENCH_STARPU

/* Allocate n written 4 KiB residents at pageable host (before any clock). */
static void peer_residents(struct rsd_manager *m, size_t n, struct rsd_resident **rs, bool touch)
{
	uint64_t nb = PEER_BYTES;

	for (size_t i = 0; i < n; i++) {
		CK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &nb, NULL, 0,
				      &rs[i]));
		if (touch)
			memset(rsd_resident_data(rs[i], 0), 1, PEER_BYTES);
	}
}

static void *peer_xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p)
		bench_fail("calloc", -RSD_ENOMEM);
	return p;
}

static void peer_fig(const char *cs, const char *metric, double rsd, double sp)
{
	struct bench_fig *f = bench_fig(cs, metric, rsd, "ns");

	bench_fig_base(f, "starpu", sp);
}

/*
 * Register + unregister against adopt + discard. StarPU registers a vector
 * handle on a buffer the caller owns; rsd_adopt takes a resident the caller
 * allocated through librsd. Both buffers are allocated and written before
 * the clock starts.
 */
static void peer_register(void)
{
	size_t n = QF(2000, 20000), reps = QF(3, 7);
	char **bufs = peer_xcalloc(n, sizeof(*bufs));
	starpu_data_handle_t *sh = peer_xcalloc(n, sizeof(*sh));
	struct rsd_resident **rs = peer_xcalloc(n, sizeof(*rs));
	struct rsd_handle *hs = peer_xcalloc(n, sizeof(*hs));
	double sreg[16], sunreg[16], radopt[16], rdisc[16];
	struct bench_fig *f;

	for (size_t i = 0; i < n; i++) {
		bufs[i] = malloc(PEER_BYTES);
		if (!bufs[i])
			bench_fail("malloc", -RSD_ENOMEM);
		memset(bufs[i], 1, PEER_BYTES);
	}
	for (size_t r = 0; r < reps; r++) {
		struct rsd_manager *m = bench_manager(NULL, 0);
		uint64_t t0, t1, t2;

		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			starpu_vector_data_register(&sh[i], STARPU_MAIN_RAM, (uintptr_t)bufs[i],
						    PEER_BYTES, 1);
		t1 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			starpu_data_unregister(sh[i]);
		t2 = bench_now_ns();
		sreg[r] = (double)(t1 - t0) / (double)n;
		sunreg[r] = (double)(t2 - t1) / (double)n;

		peer_residents(m, n, rs, true);
		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			CK(rsd_adopt(m, rs[i], NULL, RSD_EXCLUSIVE, &hs[i]));
		t1 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			CK(rsd_discard(m, hs[i], NULL));
		t2 = bench_now_ns();
		radopt[r] = (double)(t1 - t0) / (double)n;
		rdisc[r] = (double)(t2 - t1) / (double)n;
		bench_manager_end(m);
	}
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(sh);
	free(rs);
	free(hs);
	{
		double sr = bench_median(sreg, reps), su = bench_median(sunreg, reps);
		double ra = bench_median(radopt, reps), rd = bench_median(rdisc, reps);

		/* The title: adopt at half of StarPU's register. */
		f = bench_fig("peer_register", "adopt_ns", ra, "ns");
		bench_fig_base(f, "starpu", sr);
		bench_fig_target(f, TGT_RATIO_MAX, 0.5);
		peer_fig("peer_unregister", "discard_ns", rd, su);
		peer_fig("peer_reg_unreg", "adopt_discard_ns", ra + rd, sr + su);
	}
	bench_note("peer_register: %zu 4 KiB values per repetition; starpu = "
		   "starpu_vector_data_register / starpu_data_unregister on malloc'ed buffers; "
		   "librsd = rsd_adopt / rsd_discard of rsd_resident_alloc'ed ones (allocation "
		   "and writing untimed on both sides)",
		   n);
}

/* Read acquire + release of one 4 KiB value in main RAM, n times. */
static double peer_lease_rsd(struct rsd_manager *m, struct rsd_handle h, size_t n)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < n; i++) {
		struct rsd_lease *l;

		CK(rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
		CK(rsd_lease_release(l, 0));
		rsd_lease_free(l);
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}

static double peer_lease_sp(starpu_data_handle_t h, size_t n)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < n; i++) {
		if (starpu_data_acquire(h, STARPU_R))
			bench_fail("starpu_data_acquire", -RSD_EUSAGE);
		starpu_data_release(h);
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}

static void peer_lease(void)
{
	size_t n = QF(20000, 200000), reps = QF(3, 7);
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, PEER_BYTES, RSD_REPLICABLE, true);
	char *buf = malloc(PEER_BYTES);
	starpu_data_handle_t sh;
	double sp[16], rs[16];

	if (!buf)
		bench_fail("malloc", -RSD_ENOMEM);
	memset(buf, 1, PEER_BYTES);
	starpu_vector_data_register(&sh, STARPU_MAIN_RAM, (uintptr_t)buf, PEER_BYTES, 1);
	peer_lease_sp(sh, n / 10);
	peer_lease_rsd(m, h, n / 10);
	for (size_t r = 0; r < reps; r++) {
		sp[r] = peer_lease_sp(sh, n);
		rs[r] = peer_lease_rsd(m, h, n);
	}
	starpu_data_unregister(sh);
	free(buf);
	bench_manager_end(m);
	peer_fig("peer_lease", "acquire_release_ns", bench_median(rs, reps),
		 bench_median(sp, reps));
	bench_note("peer_lease: starpu = starpu_data_acquire(STARPU_R) + starpu_data_release; "
		   "librsd = rsd_acquire(pageable) + rsd_lease_release + rsd_lease_free; one 4 KiB "
		   "value, main thread");
}

/*
 * Register N values, then acquire (read) and release each once. Buffers are
 * allocated (untouched) before the clock on both sides; teardown untimed.
 */
static void peer_many(size_t n, size_t reps)
{
	char **bufs = peer_xcalloc(n, sizeof(*bufs));
	starpu_data_handle_t *sh = peer_xcalloc(n, sizeof(*sh));
	struct rsd_resident **rs = peer_xcalloc(n, sizeof(*rs));
	struct rsd_handle *hs = peer_xcalloc(n, sizeof(*hs));
	double sp[32], rd[32];
	char cs[32];

	for (size_t r = 0; r < reps; r++) {
		struct rsd_manager *m;
		uint64_t t0;

		for (size_t i = 0; i < n; i++) {
			bufs[i] = malloc(PEER_BYTES);
			if (!bufs[i])
				bench_fail("malloc", -RSD_ENOMEM);
		}
		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			starpu_vector_data_register(&sh[i], STARPU_MAIN_RAM, (uintptr_t)bufs[i],
						    PEER_BYTES, 1);
		for (size_t i = 0; i < n; i++) {
			if (starpu_data_acquire(sh[i], STARPU_R))
				bench_fail("starpu_data_acquire", -RSD_EUSAGE);
			starpu_data_release(sh[i]);
		}
		sp[r] = (double)(bench_now_ns() - t0) / (double)n;
		for (size_t i = 0; i < n; i++) {
			starpu_data_unregister_no_coherency(sh[i]);
			free(bufs[i]);
		}

		m = bench_manager(NULL, 0);
		peer_residents(m, n, rs, false);
		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++)
			CK(rsd_adopt(m, rs[i], NULL, RSD_EXCLUSIVE, &hs[i]));
		for (size_t i = 0; i < n; i++) {
			struct rsd_lease *l;

			CK(rsd_acquire(m, &hs[i], 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
			CK(rsd_lease_release(l, 0));
			rsd_lease_free(l);
		}
		rd[r] = (double)(bench_now_ns() - t0) / (double)n;
		bench_manager_end(m);
	}
	free(bufs);
	free(sh);
	free(rs);
	free(hs);
	snprintf(cs, sizeof(cs), "peer_many_%zuk", n / 1000);
	peer_fig(cs, "per_value_ns", bench_median(rd, reps), bench_median(sp, reps));
}

/*
 * The data-moving workload. Each of 64 values of 256 KiB is written once in
 * pageable memory, copied to a second buffer and read back there.
 *  starpu: acquire(W) of the value's handle, write, release; then
 *    starpu_data_cpy into a handle on a starpu_malloc'ed buffer (a copy task
 *    run by the CPU worker, waited for), and acquire(R) + read + release of
 *    that handle. Without an accelerator StarPU has one memory node, so this
 *    copy between two handles is its only way to move bytes here.
 *  librsd: write through the resident, rsd_ensure(pinned) (a copy into the
 *    host driver's pinned pool), rsd_acquire(pinned) + read + release, then
 *    rsd_drop(pinned), so the next round copies again.
 * Per value: one 256 KiB write, one 256 KiB copy, one 256 KiB read on both
 * sides.
 */
static volatile uint64_t peer_sink; /* keeps the reads observable */

static uint64_t peer_read(const void *p, size_t nb)
{
	const uint64_t *w = p;
	uint64_t s = 0;

	for (size_t i = 0; i < nb / sizeof(*w); i += 8)
		s += w[i];
	return s;
}

static void peer_move(void)
{
	size_t nv = PEER_MOVE_VALUES, reps = QF(3, 7), rounds = QF(2, 10);
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_resident *rs[PEER_MOVE_VALUES];
	struct rsd_handle hs[PEER_MOVE_VALUES];
	starpu_data_handle_t src[PEER_MOVE_VALUES], dst[PEER_MOVE_VALUES];
	char *sbuf[PEER_MOVE_VALUES], *dbuf[PEER_MOVE_VALUES];
	uint64_t nb = PEER_MOVE_BYTES, sink = 0;
	double sp[16], rd[16];

	for (size_t i = 0; i < nv; i++) {
		sbuf[i] = malloc(nb);
		if (!sbuf[i] || starpu_malloc((void **)&dbuf[i], nb))
			bench_fail("malloc", -RSD_ENOMEM);
		memset(sbuf[i], 1, nb);
		memset(dbuf[i], 1, nb);
		starpu_vector_data_register(&src[i], STARPU_MAIN_RAM, (uintptr_t)sbuf[i], nb, 1);
		starpu_vector_data_register(&dst[i], STARPU_MAIN_RAM, (uintptr_t)dbuf[i], nb, 1);
		CK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &nb, NULL, 0,
				      &rs[i]));
		memset(rsd_resident_data(rs[i], 0), 1, nb);
		CK(rsd_adopt(m, rs[i], NULL, RSD_REPLICABLE, &hs[i]));
	}
	for (size_t r = 0; r <= reps; r++) { /* round 0 warms up both sides */
		uint64_t t0 = bench_now_ns();

		for (size_t k = 0; k < rounds; k++)
			for (size_t i = 0; i < nv; i++) {
				if (starpu_data_acquire(src[i], STARPU_W))
					bench_fail("starpu_data_acquire", -RSD_EUSAGE);
				memset((void *)starpu_vector_get_local_ptr(src[i]), (int)k, nb);
				starpu_data_release(src[i]);
				if (starpu_data_cpy(dst[i], src[i], 0, NULL, NULL))
					bench_fail("starpu_data_cpy", -RSD_EUSAGE);
				if (starpu_data_acquire(dst[i], STARPU_R))
					bench_fail("starpu_data_acquire", -RSD_EUSAGE);
				sink += peer_read((void *)starpu_vector_get_local_ptr(dst[i]), nb);
				starpu_data_release(dst[i]);
			}
		if (r)
			sp[r - 1] = (double)(bench_now_ns() - t0) / (double)(rounds * nv);
		t0 = bench_now_ns();
		for (size_t k = 0; k < rounds; k++)
			for (size_t i = 0; i < nv; i++) {
				const struct rsd_resident *v;
				struct rsd_lease *l;

				memset(rsd_resident_data(rs[i], 0), (int)k, nb);
				CK(rsd_ensure(m, hs[i], RSD_LOC_PINNED_HOST, NULL, NULL));
				CK(rsd_acquire(m, &hs[i], 1, RSD_LOC_PINNED_HOST, NULL, &l));
				CK(rsd_lease_value(l, hs[i], &v));
				sink += peer_read(rsd_resident_data(v, 0), nb);
				CK(rsd_lease_release(l, 0));
				rsd_lease_free(l);
				CK(rsd_drop(m, hs[i], RSD_LOC_PINNED_HOST, NULL));
			}
		if (r)
			rd[r - 1] = (double)(bench_now_ns() - t0) / (double)(rounds * nv);
	}
	for (size_t i = 0; i < nv; i++) {
		starpu_data_unregister(src[i]);
		starpu_data_unregister(dst[i]);
		free(sbuf[i]);
		starpu_free(dbuf[i]);
	}
	bench_manager_end(m);
	peer_fig("peer_move_256KiB", "per_value_ns", bench_median(rd, reps),
		 bench_median(sp, reps));
	bench_note("peer_move: %zu values of %u KiB, each written, copied once, read back "
		   "on both sides; starpu: acquire W + write + release, starpu_data_cpy to a "
		   "starpu_malloc'ed handle, acquire R + read + release; librsd: write, "
		   "rsd_ensure(pinned), lease at pinned + read, rsd_drop(pinned)",
		   nv, PEER_MOVE_BYTES >> 10);
	peer_sink = sink;
}

static void case_starpu(void)
{
	struct starpu_conf conf;
	int rc;

	/* One CPU worker, nothing else; quiet unless the user asks. */
	setenv("STARPU_SILENT", "1", 0);
	starpu_conf_init(&conf);
	conf.ncpus = 1;
	conf.ncuda = 0;
	conf.nopencl = 0;
	conf.nmic = 0;
	rc = starpu_init(&conf);
	if (rc) {
		bench_skip("peer_register", "adopt_ns", "starpu_init failed: %d", rc);
		return;
	}
	peer_register();
	peer_lease();
	peer_many(1000, QF(5, 31)); /* short batches: more of them */
	/* --quick: 10k for 100k, so the run stays at seconds */
	peer_many(QF(10000, 100000), QF(1, 3));
	peer_move();
	starpu_shutdown();
}

#else /* !RSD_BENCH_STARPU */

static void case_starpu(void)
{
	bench_skip("peer_register", "adopt_ns",
		   "rsd-bench was built without StarPU (pkg-config starpu-1.3: "
		   "tools/build/install-deps installs libstarpu-dev)");
}

#endif
