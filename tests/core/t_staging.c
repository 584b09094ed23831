// SPDX-License-Identifier: MIT
/*
 * Staged copies between pageable host memory and a device (staging.c):
 * bytes arrive exact both ways for sizes below, at and across many chunks
 * and for values of several buffers; every chunk takes the driver's pinned
 * path (a counting wrapper of the simulated device's copy op sees each
 * copy's two locations); the staging memory shows in no budget or
 * snapshot; staging off (config or RSD_STAGING) copies directly; a
 * staging pair that cannot be allocated falls back to the direct copy with
 * one warning; a device failure in the middle of a copy fails the
 * transition with the device's code and leaves the state as it was; two
 * threads staging onto one device at once get their own bytes.
 *
 * Staging buffers of CHUNK bytes keep the chunk counts small; the device
 * makes progress in the background, as a GPU does, so a chunk's DMA really
 * runs after the call that queued it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"
#include "core/core.h" /* rsd__staging_quiesce() */
#include "../simwait.h"
#include "../stall.h"

#define CHUNK 4096ull
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a simulated device whose copies are counted ------------------------- */

/* copies[src kind][dst kind]: the copies the manager asked the driver for. */
static atomic_ulong copies[3][3];
static atomic_ulong copied_bytes[3][3];

static int counting_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
			 struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	atomic_fetch_add(&copies[src_at.kind][dst_at.kind], 1);
	atomic_fetch_add(&copied_bytes[src_at.kind][dst_at.kind], nbytes);
	return rsd_simdev_ops()->copy(ctx, dst, dst_at, src, src_at, nbytes, stream);
}

/* Pinned allocations asked for (the pairs), their frees, the last sizes. */
static atomic_ulong pinned_allocs, pinned_frees;
static atomic_ullong pinned_alloc_last, pinned_free_last;

static int counting_alloc(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr)
{
	if (at.kind == RSD_PINNED_HOST) {
		atomic_fetch_add(&pinned_allocs, 1);
		atomic_store(&pinned_alloc_last, nbytes);
	}
	return rsd_simdev_ops()->alloc(ctx, at, nbytes, ptr);
}

static void counting_free(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes)
{
	if (at.kind == RSD_PINNED_HOST) {
		atomic_fetch_add(&pinned_frees, 1);
		atomic_store(&pinned_free_last, nbytes);
	}
	rsd_simdev_ops()->free(ctx, at, ptr, nbytes);
}

static struct rsd_device_ops counting_ops;

static unsigned long ncopies(enum rsd_location_kind from, enum rsd_location_kind to)
{
	return atomic_load(&copies[from][to]);
}

static void counts_reset(void)
{
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++) {
			atomic_store(&copies[i][j], 0);
			atomic_store(&copied_bytes[i][j], 0);
		}
}

struct stx {
	struct cfx f; /* f.sd, f.m: what the cfx helpers read */
	atomic_uint warnings;
	char warning[512]; /* the last one */
};

static void stx_warn(void *ctx, const char *msg)
{
	struct stx *x = ctx;

	snprintf(x->warning, sizeof(x->warning), "%s", msg);
	atomic_fetch_add(&x->warnings, 1);
}

/* A manager on the simulated device sc describes; staging as given (0:
 * the environment or the default). */
static void stx_make_on(struct stx *x, const struct rsd_simdev_config *sc, uint64_t staging,
			const struct rsd_budget *b, size_t nb)
{
	struct rsd_manager_config mc = { 0 };

	memset(x, 0, sizeof(*x));
	counting_ops = *rsd_simdev_ops();
	counting_ops.copy = counting_copy;
	counting_ops.alloc = counting_alloc;
	counting_ops.free = counting_free;
	stall_wrap(&counting_ops, rsd_simdev_ops());
	RSD_REQUIRE_OK(rsd_simdev_create(sc, &x->f.sd));
	mc.budgets = b;
	mc.nbudgets = nb;
	mc.driver = &counting_ops;
	mc.driver_ctx = x->f.sd;
	mc.warn = stx_warn;
	mc.warn_ctx = x;
	mc.staging_nbytes = staging;
	RSD_REQUIRE_OK(rsd_manager_create(&mc, &x->f.m));
	counts_reset();
	atomic_store(&pinned_allocs, 0);
	atomic_store(&pinned_frees, 0);
}

/* One simulated device in the background. */
static void stx_make(struct stx *x, uint64_t staging, const struct rsd_budget *b, size_t nb)
{
	struct rsd_simdev_config sc = { .ndevices = 1,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND };

	stx_make_on(x, &sc, staging, b, nb);
}

/* The same with the link model on, every modelled duration x scale. */
static void stx_make_links(struct stx *x, uint64_t staging, double scale)
{
	struct rsd_simdev_config sc = { .ndevices = 1,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND,
					.links = true,
					.time_scale = scale };

	stx_make_on(x, &sc, staging, NULL, 0);
}

static void stx_fini(struct stx *x)
{
	cfx_fini(&x->f);
}

static uint8_t pattern(uint64_t i, unsigned seed)
{
	return (uint8_t)(i * 131u + seed * 7u + (i >> 12));
}

static void fill(void *p, uint64_t n, uint64_t first, unsigned seed)
{
	uint8_t *b = p;

	for (uint64_t i = 0; i < n; i++)
		b[i] = pattern(first + i, seed);
}

/* The index of the first byte of p[0..n) that is not the pattern, or n. */
static uint64_t mismatch(const void *p, uint64_t n, uint64_t first, unsigned seed)
{
	const uint8_t *b = p;

	for (uint64_t i = 0; i < n; i++)
		if (b[i] != pattern(first + i, seed))
			return i;
	return n;
}

/* A replicable pageable value of one n-byte buffer holding the pattern. */
static struct rsd_handle adopt_pageable(struct stx *x, uint64_t n, unsigned seed)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	RSD_REQUIRE_OK(
		rsd_resident_alloc(x->f.m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, &r));
	fill(rsd_resident_data(r, 0), n, 0, seed);
	RSD_REQUIRE_OK(rsd_adopt(x->f.m, r, NULL, RSD_REPLICABLE, &h));
	return h;
}

/*
 * Whether h's bytes at `at` are the pattern, its buffers read as one run
 * of bytes (false, with the reason, from another thread). Reads device
 * memory directly: the simulated device's is host memory.
 */
static bool bytes_ok(struct stx *x, struct rsd_handle h, struct rsd_location at, unsigned seed,
		     char *why, size_t len)
{
	const struct rsd_resident *r;
	struct rsd_lease *l;
	uint64_t first = 0;
	bool ok = true;
	int rc;

	/* A device lease names a stream: the device's own, waited for at
	 * release. */
	rc = rsd_acquire(x->f.m, &h, 1, at,
			 at.kind == RSD_CUDA ? rsd_simdev_ops()->default_stream(x->f.sd, 0) : NULL,
			 &l);
	if (!rc)
		rc = rsd_lease_value(l, h, &r);
	if (rc) {
		snprintf(why, len, "lease at %s: %s", cfx_name(at), rsd_last_error()->message);
		return false;
	}
	for (size_t i = 0; ok && i < rsd_resident_nbuffers(r); i++) {
		uint64_t n = rsd_resident_buffer_nbytes(r, i);
		uint64_t bad = mismatch(rsd_resident_data(r, i), n, first, seed);

		if (bad != n) {
			snprintf(why, len, "byte %llu of buffer %zu at %s differs",
				 (unsigned long long)bad, i, cfx_name(at));
			ok = false;
		}
		first += n;
	}
	rc = rsd_lease_release(l, RSD_RELEASE_WAIT);
	rsd_lease_free(l);
	if (rc && ok) {
		snprintf(why, len, "lease release at %s: %s", cfx_name(at),
			 rsd_last_error()->message);
		ok = false;
	}
	return ok;
}

static void check_bytes(struct stx *x, struct rsd_handle h, struct rsd_location at, unsigned seed)
{
	char why[640];

	ATF_REQUIRE_MSG(bytes_ok(x, h, at, seed, why, sizeof(why)), "%s", why);
}

static unsigned long chunks(uint64_t n)
{
	return (unsigned long)((n + CHUNK - 1) / CHUNK);
}

/* Ensure h (n bytes) at `to` from its only other replica: exact bytes,
 * through the pair in nchunks chunks, or (0) in one direct copy. */
static void one_way(struct stx *x, struct rsd_handle h, struct rsd_location to, uint64_t n,
		    unsigned seed, unsigned long nchunks)
{
	const bool staged = nchunks != 0;
	const bool in = to.kind == RSD_CUDA;
	const enum rsd_location_kind from = in ? RSD_PAGEABLE_HOST : RSD_CUDA;
	const enum rsd_location_kind src = in ? RSD_PINNED_HOST : RSD_CUDA;
	const enum rsd_location_kind dst = in ? RSD_CUDA : RSD_PINNED_HOST;

	counts_reset();
	OK(rsd_ensure(x->f.m, h, to, NULL, NULL));
	check_bytes(x, h, to, seed);
	ATF_CHECK_EQ_MSG(ncopies(src, dst), nchunks,
			 "%llu bytes to %s: %lu copies through the pair", (unsigned long long)n,
			 cfx_name(to), ncopies(src, dst));
	ATF_CHECK_EQ(atomic_load(&copied_bytes[src][dst]), staged ? n : 0);
	ATF_CHECK_EQ(ncopies(from, to.kind), staged ? 0 : 1);
}

/* pageable -> cuda:0 -> (pageable dropped) -> pageable, checked at each
 * step; the value ends where it began. */
static void round_trip(struct stx *x, uint64_t n, unsigned seed, bool staged)
{
	struct rsd_location dev = cfx_cuda(0);
	struct rsd_handle h = adopt_pageable(x, n, seed);

	one_way(x, h, dev, n, seed, staged ? chunks(n) : 0);
	OK(rsd_drop(x->f.m, h, PAGEABLE, NULL));
	one_way(x, h, PAGEABLE, n, seed, staged ? chunks(n) : 0);
	OK(rsd_drop(x->f.m, h, dev, NULL));
	OK(rsd_discard(x->f.m, h, NULL));
}

/* Below, at and across one chunk and both buffers, and many chunks. */
static const uint64_t sizes[] = {
	1,	   CHUNK - 1,	  CHUNK,	   CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 1,
	3 * CHUNK, 3 * CHUNK + 7, 97 * CHUNK + 13,
};

/* Every size there and back on a new manager; staging as given. */
static void all_sizes(uint64_t staging, unsigned seed, bool staged)
{
	struct stx x;

	stx_make(&x, staging, NULL, 0);
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++)
		round_trip(&x, sizes[i], seed + (unsigned)i, staged);
	ATF_CHECK_EQ(x.warnings, 0);
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(bytes_exact_both_ways);
ATF_TC_BODY(bytes_exact_both_ways, tc)
{
	all_sizes(CHUNK, 1, true);
}

/* ---- values of several buffers ---------------------------------------------- */

static void free_release(void *ctx, struct rsd_resident *r)
{
	(void)r;
	free(ctx);
}

/* Three buffers (5000, 1 and 9000 bytes) of one caller allocation, apart,
 * so that the value is not one block: 14001 bytes in 4 chunks, 6 pieces. */
#define MB_N0 5000ull
#define MB_N1 1ull
#define MB_N2 9000ull
#define MB_PIECES 6ul

static void three_views(char *base, uint64_t base_n, struct rsd_location at,
			struct rsd_buffer_view v[3])
{
	const uint64_t n[3] = { MB_N0, MB_N1, MB_N2 }, off[3] = { 0, 6000, 7000 };

	for (int i = 0; i < 3; i++)
		v[i] = (struct rsd_buffer_view){ base + off[i], n[i], base, base_n, at };
}

static void fill_views(const struct rsd_buffer_view v[3], unsigned seed)
{
	uint64_t first = 0;

	for (int i = 0; i < 3; i++) {
		fill(v[i].data, v[i].nbytes, first, seed);
		first += v[i].nbytes;
	}
}

struct dev_mem {
	struct rsd_simdev *sd;
	void *p;
	uint64_t n;
};

static void dev_release(void *ctx, struct rsd_resident *r)
{
	struct dev_mem *d = ctx;

	(void)r;
	rsd_simdev_ops()->free(d->sd, cfx_cuda(0), d->p, d->n);
	free(d);
}

/*
 * base's three buffers at `from` wrapped, adopted there and ensured at
 * `to` (released through release(ctx)): exact bytes, 6 pieces through the
 * pair, no direct copy.
 */
static void three_buffers(struct stx *x, char *base, uint64_t base_n, struct rsd_location from,
			  struct rsd_location to, void (*release)(void *, struct rsd_resident *),
			  void *ctx, unsigned seed)
{
	const enum rsd_location_kind src = to.kind == RSD_CUDA ? RSD_PINNED_HOST : RSD_CUDA;
	const enum rsd_location_kind dst = to.kind == RSD_CUDA ? RSD_CUDA : RSD_PINNED_HOST;
	struct rsd_buffer_view v[3];
	struct rsd_resident *r;
	struct rsd_handle h;

	three_views(base, base_n, from, v);
	fill_views(v, seed);
	RSD_REQUIRE_OK(rsd_resident_wrap(&rsd_resident_type, 3, v, NULL, 0, release, ctx, &r));
	OK(rsd_adopt(x->f.m, r, &from, RSD_REPLICABLE, &h));
	counts_reset();
	OK(rsd_ensure(x->f.m, h, to, NULL, NULL));
	check_bytes(x, h, to, seed);
	ATF_CHECK_EQ(ncopies(src, dst), MB_PIECES);
	ATF_CHECK_EQ(atomic_load(&copied_bytes[src][dst]), MB_N0 + MB_N1 + MB_N2);
	ATF_CHECK_EQ(ncopies(from.kind, to.kind), 0);
	OK(rsd_discard(x->f.m, h, NULL));
}

ATF_TC_WITHOUT_HEAD(several_buffers_both_ways);
ATF_TC_BODY(several_buffers_both_ways, tc)
{
	const uint64_t base_n = 16384;
	struct rsd_location dev = cfx_cuda(0);
	struct dev_mem *d;
	struct stx x;
	char *host;

	ATF_REQUIRE_EQ(chunks(MB_N0 + MB_N1 + MB_N2), 4);
	stx_make(&x, CHUNK, NULL, 0);
	/* Pageable buffers to the device: pieces packed into chunks. */
	host = malloc(base_n);
	ATF_REQUIRE(host);
	three_buffers(&x, host, base_n, PAGEABLE, dev, free_release, host, 3);
	/* Device buffers to pageable memory: chunks unpacked into pieces. */
	d = malloc(sizeof(*d));
	ATF_REQUIRE(d);
	*d = (struct dev_mem){ x.f.sd, NULL, base_n };
	RSD_REQUIRE_OK(rsd_simdev_ops()->alloc(x.f.sd, dev, base_n, &d->p));
	three_buffers(&x, d->p, base_n, dev, PAGEABLE, dev_release, d, 4);
	stx_fini(&x);
}

/* ---- the pair's size --------------------------------------------------------------- */

#define KIB 1024ull
#define MIB (1024ull * KIB)

/* A pageable value of n bytes to cuda:0 in nchunks chunks; then dropped. */
static void to_device(struct stx *x, uint64_t n, unsigned seed, unsigned long nchunks)
{
	struct rsd_handle h = adopt_pageable(x, n, seed);

	one_way(x, h, cfx_cuda(0), n, seed, nchunks);
	OK(rsd_discard(x->f.m, h, NULL));
}

/*
 * With 1 MiB allowed: a 100-byte copy makes a pair of 64 KiB buffers, a
 * 300 KiB one grows it to 512 KiB (the old pair freed), a copy of 3 MiB and
 * a bit to the 1 MiB limit (4 chunks); smaller copies then reuse it, and
 * close frees it.
 */
ATF_TC_WITHOUT_HEAD(pair_grows_with_copies);
ATF_TC_BODY(pair_grows_with_copies, tc)
{
	struct rsd_handle h;
	struct stx x;

	stx_make(&x, MIB, NULL, 0);
	to_device(&x, 100, 1, 1);
	ATF_CHECK_EQ(pinned_allocs, 1);
	ATF_CHECK_EQ(pinned_alloc_last, 2 * 64 * KIB);
	to_device(&x, 300 * KIB, 2, 1);
	ATF_CHECK_EQ(pinned_allocs, 2);
	ATF_CHECK_EQ(pinned_alloc_last, 2 * 512 * KIB);
	ATF_CHECK_EQ(pinned_frees, 1);
	ATF_CHECK_EQ(pinned_free_last, 2 * 64 * KIB);
	h = adopt_pageable(&x, 3 * MIB + 5, 3);
	one_way(&x, h, cfx_cuda(0), 3 * MIB + 5, 3, 4);
	ATF_CHECK_EQ(pinned_allocs, 3);
	ATF_CHECK_EQ(pinned_alloc_last, 2 * MIB);
	OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	one_way(&x, h, PAGEABLE, 3 * MIB + 5, 3, 4);
	to_device(&x, 100, 4, 1);
	ATF_CHECK_EQ(pinned_allocs, 3);
	ATF_CHECK_EQ(pinned_frees, 2);
	OK(rsd_manager_close(x.f.m, 0));
	ATF_CHECK_EQ(pinned_frees, 3);
	ATF_CHECK_EQ(pinned_free_last, 2 * MIB);
	ATF_CHECK_EQ(x.warnings, 0);
	stx_fini(&x);
}

/* Growing fails: the 64 KiB pair stays and takes the larger copies in more
 * chunks, said once, tried once. */
ATF_TC_WITHOUT_HEAD(pair_growth_failure_keeps_it);
ATF_TC_BODY(pair_growth_failure_keeps_it, tc)
{
	const uint64_t n = 3 * MIB + 5;
	const unsigned long nchunks = (unsigned long)((n + 64 * KIB - 1) / (64 * KIB));
	struct stx x;

	stx_make(&x, MIB, NULL, 0);
	to_device(&x, 100, 1, 1);
	rsd_simdev_fail_location(x.f.sd, PINNED, RSD_ENOMEM);
	to_device(&x, n, 2, nchunks);
	ATF_CHECK_EQ(pinned_allocs, 2);
	ATF_CHECK_EQ(x.warnings, 1);
	ATF_CHECK_MSG(strstr(x.warning, "pinned staging of cuda:0 stays at 2 x 65536 bytes"),
		      "warning: %s", x.warning);
	ATF_CHECK_MSG(strstr(x.warning, "growing it to 2 x 1048576 bytes failed"), "warning: %s",
		      x.warning);
	to_device(&x, n, 3, nchunks);
	ATF_CHECK_EQ(pinned_allocs, 2);
	ATF_CHECK_EQ(x.warnings, 1);
	stx_fini(&x);
}

/* ---- the staging memory is librsd's own ------------------------------------- */

ATF_TC_WITHOUT_HEAD(budgets_never_show_staging);
ATF_TC_BODY(budgets_never_show_staging, tc)
{
	const uint64_t n = 5 * CHUNK + 3;
	struct rsd_location dev = cfx_cuda(0);
	struct rsd_budget b[] = { { PINNED, 0 }, { dev, n } };
	const struct rsd_location_snapshot *ls;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	struct stx x;

	stx_make(&x, CHUNK, b, 2);
	h = adopt_pageable(&x, n, 9);
	one_way(&x, h, dev, n, 9, chunks(n));
	OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	one_way(&x, h, PAGEABLE, n, 9, chunks(n));
	s = cfx_snap(&x.f);
	ls = cfx_loc(s, PINNED);
	ATF_REQUIRE(ls);
	ATF_CHECK_EQ(ls->used_bytes, 0);
	ATF_CHECK_EQ(ls->reserved_bytes, 0);
	ATF_CHECK_EQ(ls->peak_charged_bytes, 0);
	ATF_CHECK_EQ(ls->value_count, 0);
	ls = cfx_loc(s, dev);
	ATF_REQUIRE(ls);
	ATF_CHECK_EQ(ls->used_bytes, n);
	ATF_CHECK_EQ(ls->peak_charged_bytes, n);
	ATF_CHECK_EQ(s->nlocations, 3);
	rsd_snapshot_free(s);
	stx_fini(&x);
}

/* ---- staging off ----------------------------------------------------------------- */

ATF_TC_WITHOUT_HEAD(staging_off_copies_directly);
ATF_TC_BODY(staging_off_copies_directly, tc)
{
	all_sizes(RSD_STAGING_OFF, 20, false);
}

ATF_TC_WITHOUT_HEAD(environment_sets_staging);
ATF_TC_BODY(environment_sets_staging, tc)
{
	struct stx x;

	ATF_REQUIRE_EQ(setenv("RSD_STAGING", "4K", 1), 0);
	stx_make(&x, 0, NULL, 0);
	round_trip(&x, 3 * CHUNK + 1, 1, true);
	stx_fini(&x);

	ATF_REQUIRE_EQ(setenv("RSD_STAGING", "off", 1), 0);
	stx_make(&x, 0, NULL, 0);
	round_trip(&x, 3 * CHUNK + 1, 2, false);
	stx_fini(&x);

	/* The config wins over the environment. */
	stx_make(&x, CHUNK, NULL, 0);
	round_trip(&x, 3 * CHUNK + 1, 3, true);
	stx_fini(&x);

	/* Unreadable: said once, and the default (8 MiB: one chunk) is used. */
	ATF_REQUIRE_EQ(setenv("RSD_STAGING", "lots", 1), 0);
	stx_make(&x, 0, NULL, 0);
	ATF_CHECK_EQ(x.warnings, 1);
	ATF_CHECK_MSG(strstr(x.warning, "RSD_STAGING=lots"), "warning: %s", x.warning);
	counts_reset();
	{
		struct rsd_handle h = adopt_pageable(&x, 3 * CHUNK + 1, 4);

		OK(rsd_ensure(x.f.m, h, cfx_cuda(0), NULL, NULL));
		check_bytes(&x, h, cfx_cuda(0), 4);
		ATF_CHECK_EQ(ncopies(RSD_PINNED_HOST, RSD_CUDA), 1);
	}
	stx_fini(&x);
}

/* ---- no pinned memory for the pair ----------------------------------------------- */

static void fallback(bool unpinned)
{
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	if (unpinned)
		rsd_simdev_set_unpinned_host(x.f.sd, true);
	else
		rsd_simdev_fail_location(x.f.sd, PINNED, RSD_ENOMEM);
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++)
		round_trip(&x, sizes[i], (unsigned)i + 40, false);
	/* Tried once, said once, naming the device and the driver's reason. */
	ATF_CHECK_EQ(pinned_allocs, 1);
	ATF_CHECK_EQ(x.warnings, 1);
	ATF_CHECK_MSG(strstr(x.warning, "pageable memory and cuda:0 are not staged"), "warning: %s",
		      x.warning);
	ATF_CHECK_MSG(strstr(x.warning, unpinned ? "not page-locked" : "injected failure"),
		      "warning: %s", x.warning);
	/* A failure the copy recovered from is not the thread's error. */
	ATF_CHECK_EQ(rsd_last_error()->code, 0);
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(pinned_failure_falls_back);
ATF_TC_BODY(pinned_failure_falls_back, tc)
{
	fallback(false);
}

ATF_TC_WITHOUT_HEAD(unpinned_host_falls_back);
ATF_TC_BODY(unpinned_host_falls_back, tc)
{
	fallback(true);
}

/* ---- a device failure in the middle of a copy ------------------------------------- */

/*
 * The nth call of op fails (RSD_EDEVICE) during the ensure of a value of
 * 7 chunks to `to` from `from` (where it is the only replica): the ensure
 * fails with the device's code, the state is the one before, nothing is
 * left queued; the next ensure copies exactly.
 */
static void fail_mid_copy(enum rsd_simdev_op op, unsigned nth, bool to_device)
{
	const uint64_t n = 7 * CHUNK + 5;
	struct rsd_location dev = cfx_cuda(0), to = to_device ? dev : PAGEABLE;
	struct rsd_snapshot *before, *after;
	struct rsd_handle h;
	unsigned long calls;
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	h = adopt_pageable(&x, n, 5);
	if (!to_device) {
		OK(rsd_ensure(x.f.m, h, dev, NULL, NULL));
		OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	}
	before = cfx_snap(&x.f);
	calls = rsd_simdev_calls(x.f.sd, op);
	rsd_simdev_fail_nth(x.f.sd, op, nth, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_ensure(x.f.m, h, to, NULL, NULL));
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "injected"), "%s",
		      rsd_last_error()->message);
	/* It failed in the middle: calls of op came before the failing one. */
	ATF_CHECK(rsd_simdev_calls(x.f.sd, op) >= calls + nth);
	after = cfx_snap(&x.f);
	CHECK_SAME(before, after, true);
	ATF_CHECK_EQ(rsd_simdev_pending_events(x.f.sd, NULL), 0);
	ATF_CHECK(!cfx_resident(&x.f, h, to));
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	OK(rsd_ensure(x.f.m, h, to, NULL, NULL));
	check_bytes(&x, h, to, 5);
	ATF_CHECK_EQ(x.warnings, 0);
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(device_failure_mid_chunk);
ATF_TC_BODY(device_failure_mid_chunk, tc)
{
	/* The third chunk's DMA, both ways. */
	fail_mid_copy(RSD_SIMDEV_COPY, 3, true);
	fail_mid_copy(RSD_SIMDEV_COPY, 3, false);
	/* The third chunk's event. */
	fail_mid_copy(RSD_SIMDEV_EVENT_RECORD, 3, true);
	fail_mid_copy(RSD_SIMDEV_EVENT_RECORD, 3, false);
	/* (A failed sync: sync_failure_is_no_answer_beside.) */
}

/* ---- two threads, one device ------------------------------------------------------ */

struct worker {
	struct stx *x;
	struct rsd_handle h;
	unsigned seed, rounds;
	pthread_barrier_t *start;
	char why[640]; /* empty: every round was exact */
};

static void *worker_main(void *p)
{
	struct worker *w = p;
	struct rsd_manager *m = w->x->f.m;
	struct rsd_location dev = cfx_cuda(0);
	int rc = 0;

	pthread_barrier_wait(w->start);
	for (unsigned i = 0; i < w->rounds && !w->why[0]; i++) {
		rc = rsd_ensure(m, w->h, dev, NULL, NULL);
		if (!rc && bytes_ok(w->x, w->h, dev, w->seed, w->why, sizeof(w->why)))
			rc = rsd_drop(m, w->h, PAGEABLE, NULL);
		if (!rc && !w->why[0])
			rc = rsd_ensure(m, w->h, PAGEABLE, NULL, NULL);
		if (!rc && !w->why[0] &&
		    bytes_ok(w->x, w->h, PAGEABLE, w->seed, w->why, sizeof(w->why)))
			rc = rsd_drop(m, w->h, dev, NULL);
		if (rc)
			snprintf(w->why, sizeof(w->why), "round %u: %s", i,
				 rsd_last_error()->message);
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(two_threads_one_device);
ATF_TC_BODY(two_threads_one_device, tc)
{
	const uint64_t n[2] = { 9 * CHUNK + 5, 13 * CHUNK + 77 };
	struct worker w[2];
	pthread_barrier_t start;
	pthread_t t[2];
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 2; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i] = (struct worker){ &x,
					adopt_pageable(&x, n[i], 60u + (unsigned)i),
					60u + (unsigned)i,
					25,
					&start,
					"" };
	}
	for (int i = 0; i < 2; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < 2; i++)
		ATF_CHECK_MSG(!w[i].why[0], "thread %d: %s", i, w[i].why);
	/* Every copy was staged: 25 rounds of each value, both ways. */
	ATF_CHECK_EQ(ncopies(RSD_PINNED_HOST, RSD_CUDA), 25 * (chunks(n[0]) + chunks(n[1])));
	ATF_CHECK_EQ(ncopies(RSD_CUDA, RSD_PINNED_HOST), 25 * (chunks(n[0]) + chunks(n[1])));
	ATF_CHECK_EQ(ncopies(RSD_PAGEABLE_HOST, RSD_CUDA) + ncopies(RSD_CUDA, RSD_PAGEABLE_HOST),
		     0);
	stx_fini(&x);
}

/* ---- calls that do not wait for their copies --------------------------------------- */

/* Host to device returns with the copy queued through the pair (a reap
 * completes it), device to host once its bytes are there. */
ATF_TC_WITHOUT_HEAD(async_calls_stage_too);
ATF_TC_BODY(async_calls_stage_too, tc)
{
	const uint64_t n = 7 * CHUNK + 5;
	struct rsd_location dev = cfx_cuda(0);
	struct rsd_snapshot *s;
	struct rsd_handle h;
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	h = adopt_pageable(&x, n, 70);
	OK(rsd_ensure_async(x.f.m, h, dev, NULL, NULL));
	ATF_CHECK_EQ(ncopies(RSD_PINNED_HOST, RSD_CUDA), chunks(n));
	ATF_CHECK_EQ(ncopies(RSD_PAGEABLE_HOST, RSD_CUDA), 0);
	OK(rsd_simdev_ops()->stream_sync(x.f.sd, NULL));
	OK(rsd_manager_reap(x.f.m));
	s = cfx_snap(&x.f);
	ATF_CHECK(!cfx_mat(cfx_val(s, h), dev)->arriving);
	rsd_snapshot_free(s);
	check_bytes(&x, h, dev, 70);
	OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	counts_reset();
	OK(rsd_ensure_async(x.f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(ncopies(RSD_CUDA, RSD_PINNED_HOST), chunks(n));
	ATF_CHECK_EQ(ncopies(RSD_CUDA, RSD_PAGEABLE_HOST), 0);
	check_bytes(&x, h, PAGEABLE, 70);
	stx_fini(&x);
}

/* ---- staging beside the caller ---------------------------------------------------- */

#define BIG_CHUNK (1ull << 20)
#define BIG (8 * BIG_CHUNK + 4096)

/* A simulated kernel's computation: check the bytes it reads. */
struct kcheck {
	const void *p;
	uint64_t n;
	unsigned seed;
	atomic_ullong first_bad; /* n: every byte is the pattern */
	atomic_int ran;
};

static void kernel_reads(void *arg)
{
	struct kcheck *k = arg;

	atomic_store(&k->first_bad, mismatch(k->p, k->n, 0, k->seed));
	atomic_store(&k->ran, 1);
}

/* Lease h at cuda:0 for a consumer stream and run a kernel there that
 * reads it (queued at once: the stream waits for the copy on the device),
 * then release, waiting: the kernel has read exactly the pattern. */
static void kernel_reads_pattern(struct stx *x, struct rsd_handle h, uint64_t n, unsigned seed)
{
	struct kcheck k = { .n = n, .seed = seed };
	struct rsd_simdev_access acc = { 0 };
	const struct rsd_resident *r;
	struct rsd_lease *l;
	void *cs;

	atomic_store(&k.first_bad, 0);
	OK(rsd_simdev_stream_create(x->f.sd, 0, &cs));
	OK(rsd_acquire(x->f.m, &h, 1, cfx_cuda(0), cs, &l));
	OK(rsd_lease_value(l, h, &r));
	k.p = rsd_resident_data(r, 0);
	acc.ptr = (void *)k.p;
	acc.nbytes = n;
	OK(rsd_simdev_launch_kernel(x->f.sd, cs, 1000, &acc, 1, kernel_reads, &k));
	OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_lease_free(l);
	ATF_CHECK_EQ(atomic_load(&k.ran), 1);
	ATF_CHECK_EQ_MSG(atomic_load(&k.first_bad), n, "the kernel read byte %llu wrong",
			 (unsigned long long)atomic_load(&k.first_bad));
	rsd_simdev_stream_destroy(x->f.sd, cs);
}

/*
 * A not-waiting ensure of a pageable value returns with its copy queued
 * and its bytes not yet staged: the call's host time is far below the
 * link model's time for the copy (a caller that staged would spend the
 * 9 memcpys of the chunks, and wait for the DMAs of all but the last two),
 * and the copy is still pending. A kernel queued after it on a consumer
 * stream reads the right bytes. Back to pageable memory the same.
 */
ATF_TC_WITHOUT_HEAD(async_returns_before_its_copy);
ATF_TC_BODY(async_returns_before_its_copy, tc)
{
	struct rsd_location dev = cfx_cuda(0);
	uint64_t t0, host, model;
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct stx x;

	stx_make_links(&x, BIG_CHUNK, 100);
	h = adopt_pageable(&x, BIG, 81);
	model = rsd_simdev_copy_ns(x.f.sd, dev, RSD_LOC_PINNED_HOST, BIG);
	ATF_REQUIRE(model > 0);
	/* Warm: the staging pair and the device block exist (their modelled
	 * allocations are no part of the call's own time). */
	OK(rsd_ensure(x.f.m, h, dev, NULL, NULL));
	OK(rsd_drop(x.f.m, h, dev, NULL));
	counts_reset();
	t0 = simwait_now_ns();
	OK(rsd_ensure_async(x.f.m, h, dev, NULL, NULL));
	host = simwait_now_ns() - t0;
	ATF_CHECK(rsd_simdev_pending_events(x.f.sd, NULL) > 0);
	ATF_CHECK_MSG(host < model / 4, "the call took %llu ns; the copy is modelled at %llu ns",
		      (unsigned long long)host, (unsigned long long)model);
	ATF_CHECK_EQ(ncopies(RSD_PINNED_HOST, RSD_CUDA), BIG / BIG_CHUNK + 1);
	kernel_reads_pattern(&x, h, BIG, 81);
	/* A waiting ensure takes the same path and waits for it. */
	OK(rsd_drop(x.f.m, h, dev, NULL));
	OK(rsd_ensure(x.f.m, h, dev, NULL, NULL));
	snap = cfx_snap(&x.f);
	ATF_CHECK(!cfx_mat(cfx_val(snap, h), dev)->arriving);
	rsd_snapshot_free(snap);
	check_bytes(&x, h, dev, 81);
	/* Device to pageable: the same, the worker copying the chunks out;
	 * a host lease waits for the copy. */
	OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	t0 = simwait_now_ns();
	OK(rsd_ensure_async(x.f.m, h, PAGEABLE, NULL, NULL));
	host = simwait_now_ns() - t0;
	ATF_CHECK(rsd_simdev_pending_events(x.f.sd, NULL) > 0);
	ATF_CHECK_MSG(host < model / 4, "the call took %llu ns; the copy is modelled at %llu ns",
		      (unsigned long long)host, (unsigned long long)model);
	check_bytes(&x, h, PAGEABLE, 81);
	stx_fini(&x);
}

struct ensurer {
	struct stx *x;
	struct rsd_handle h;
	pthread_barrier_t *start;
	int rc;
};

static void *ensure_main(void *p)
{
	struct ensurer *e = p;

	pthread_barrier_wait(e->start);
	e->rc = rsd_ensure(e->x->f.m, e->h, cfx_cuda(0), NULL, NULL);
	return NULL;
}

/* n threads ensure h at cuda:0 at once; each one's result must be rc. */
static void ensure_together(struct stx *x, struct rsd_handle h, int n, int rc)
{
	struct ensurer e[4];
	pthread_barrier_t start;
	pthread_t t[4];

	ATF_REQUIRE(n > 0 && n <= 4);
	ATF_REQUIRE_EQ(pthread_barrier_init(&start, NULL, (unsigned)n), 0);
	for (int i = 0; i < n; i++) {
		e[i] = (struct ensurer){ .x = x, .h = h, .start = &start, .rc = 1 };
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, ensure_main, &e[i]), 0);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		ATF_CHECK_EQ_MSG(e[i].rc, rc, "thread %d: %d", i, e[i].rc);
	}
	pthread_barrier_destroy(&start);
}

/* Four threads ensure one pageable value at once: each returns 0 once the
 * value is there, the bytes are exact, and they are staged once. */
ATF_TC_WITHOUT_HEAD(several_waiters_one_copy);
ATF_TC_BODY(several_waiters_one_copy, tc)
{
	struct rsd_handle h;
	struct stx x;

	stx_make_links(&x, BIG_CHUNK, 20);
	h = adopt_pageable(&x, BIG, 82);
	ensure_together(&x, h, 4, 0);
	ATF_CHECK_EQ(ncopies(RSD_PINNED_HOST, RSD_CUDA), BIG / BIG_CHUNK + 1);
	check_bytes(&x, h, cfx_cuda(0), 82);
	kernel_reads_pattern(&x, h, BIG, 82);
	stx_fini(&x);
}

/* The worker's wait for a buffer's previous DMA fails once (an injected
 * event_sync failure): a failed sync says nothing, the worker asks again
 * after draining, and the copy completes exactly. */
static void sync_fails_once(unsigned nth, bool to_device)
{
	const uint64_t n = 7 * CHUNK + 5;
	struct rsd_location dev = cfx_cuda(0), to = to_device ? dev : PAGEABLE;
	unsigned long calls;
	struct rsd_handle h;
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	h = adopt_pageable(&x, n, 83);
	if (!to_device) {
		OK(rsd_ensure(x.f.m, h, dev, NULL, NULL));
		OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	}
	calls = rsd_simdev_calls(x.f.sd, RSD_SIMDEV_EVENT_SYNC);
	rsd_simdev_fail_nth(x.f.sd, RSD_SIMDEV_EVENT_SYNC, nth, RSD_EDEVICE);
	OK(rsd_ensure(x.f.m, h, to, NULL, NULL));
	ATF_CHECK(rsd_simdev_calls(x.f.sd, RSD_SIMDEV_EVENT_SYNC) >= calls + nth);
	check_bytes(&x, h, to, 83);
	ATF_CHECK_EQ(x.warnings, 0);
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(sync_failure_is_no_answer_beside);
ATF_TC_BODY(sync_failure_is_no_answer_beside, tc)
{
	/* Host to device: the first sync (the worker's wait for a buffer,
	 * or the caller's for the copy). Device to host: the first waits
	 * are for what the ensure to the device left on the two buffers,
	 * then the worker's for each chunk before it is copied out. */
	for (unsigned nth = 1; nth <= 5; nth++) {
		sync_fails_once(nth, true);
		sync_fails_once(nth, false);
	}
}

/*
 * The DMA of a chunk fails on the device (after the worker opened its
 * gate), either way: the copy fails once with the device's code when it is
 * waited for, nothing is lost (the source replica is the only one, and
 * stays with its bytes), nothing is left queued.
 */
static void chunk_fault(bool to_device)
{
	const uint64_t n = 7 * CHUNK + 5;
	struct rsd_location dev = cfx_cuda(0), to = to_device ? dev : PAGEABLE;
	struct rsd_location from = to_device ? PAGEABLE : dev;
	struct rsd_snapshot *before, *after;
	struct rsd_handle h;
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	h = adopt_pageable(&x, n, 84);
	if (!to_device) {
		OK(rsd_ensure(x.f.m, h, dev, NULL, NULL));
		OK(rsd_drop(x.f.m, h, PAGEABLE, NULL));
	}
	before = cfx_snap(&x.f);
	rsd_simdev_fail_nth(x.f.sd, RSD_SIMDEV_COPY_EXEC, 3, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_ensure(x.f.m, h, to, NULL, NULL));
	after = cfx_snap(&x.f);
	CHECK_SAME(before, after, true);
	ATF_CHECK(!cfx_resident(&x.f, h, to));
	ATF_CHECK(cfx_resident(&x.f, h, from));
	ATF_CHECK_EQ(rsd_simdev_pending_events(x.f.sd, NULL), 0);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	check_bytes(&x, h, from, 84);
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(chunk_fault_fails_once);
ATF_TC_BODY(chunk_fault_fails_once, tc)
{
	chunk_fault(true);
	chunk_fault(false);
}

/*
 * close(FORCE) while the worker is in the middle of long copies both ways
 * (the link model makes each chunk's DMA take milliseconds): close returns, every
 * gate was opened (nothing is left pending on the device), and nothing
 * freed was still read (the simulator would abort).
 */
ATF_TC_WITHOUT_HEAD(forced_close_mid_copy);
ATF_TC_BODY(forced_close_mid_copy, tc)
{
	struct rsd_handle h, k;
	struct stx x;

	stx_make_links(&x, BIG_CHUNK, 100);
	k = adopt_pageable(&x, BIG, 86);
	OK(rsd_ensure(x.f.m, k, cfx_cuda(0), NULL, NULL));
	OK(rsd_drop(x.f.m, k, PAGEABLE, NULL));
	h = adopt_pageable(&x, BIG, 85);
	OK(rsd_ensure_async(x.f.m, h, cfx_cuda(0), NULL, NULL));
	OK(rsd_ensure_async(x.f.m, k, PAGEABLE, NULL, NULL));
	ATF_CHECK(rsd_simdev_pending_events(x.f.sd, NULL) > 0);
	OK(rsd_manager_close(x.f.m, RSD_CLOSE_FORCE));
	ATF_CHECK_EQ(rsd_simdev_pending_events(x.f.sd, NULL), 0);
	stx_fini(&x);
}

/* ---- a device lost while the worker stages ------------------------------------ */

enum lost_end {
	LOST_DISCARD,
	LOST_MOVE,
	LOST_CLOSE,
	LOST_WAITERS
};

/*
 * cuda:0 is lost while its worker stages a pageable value's not-waiting
 * copy there, held in the middle of the copy, about to read the source
 * (tests/stall.h). Then the caller frees or moves the source (end): the
 * lost device's answer is final at once, but nothing frees the source
 * before the worker is done with it (under ASan the worker's read would
 * be a use after free), and nothing hangs.
 */
static void lost_mid_stage(enum lost_end end)
{
	const uint64_t n = 9 * CHUNK + 5;
	struct rsd_buffer_view v;
	struct rsd_resident *r;
	struct rsd_handle h;
	struct stx x;
	char *src;

	stx_make(&x, CHUNK, NULL, 0);
	src = malloc(n);
	ATF_REQUIRE(src);
	fill(src, n, 0, 90 + end);
	v = (struct rsd_buffer_view){ src, n, src, n, PAGEABLE };
	RSD_REQUIRE_OK(
		rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, stall_release, src, &r));
	OK(rsd_adopt(x.f.m, r, &PAGEABLE, RSD_REPLICABLE, &h));
	stall_arm();
	OK(rsd_ensure_async(x.f.m, h, cfx_cuda(0), NULL, NULL));
	stall_wait_held();
	OK(rsd_simdev_lose_device(x.f.sd, 0));
	switch (end) {
	case LOST_DISCARD:
		/* The failed copy is reported once, by the next call. */
		ERR(RSD_EDEVLOST, rsd_discard(x.f.m, h, NULL));
		OK(rsd_discard(x.f.m, h, NULL));
		ATF_CHECK_EQ(atomic_load(&stall.releases), 1);
		break;
	case LOST_MOVE:
		/* Pageable to pinned: the source is freed once moved. */
		ERR(RSD_EDEVLOST, rsd_move(x.f.m, h, PINNED, &PAGEABLE, NULL, NULL));
		OK(rsd_move(x.f.m, h, PINNED, &PAGEABLE, NULL, NULL));
		ATF_CHECK_EQ(atomic_load(&stall.releases), 1);
		check_bytes(&x, h, PINNED, 90 + end);
		break;
	case LOST_CLOSE:
		OK(rsd_manager_close(x.f.m, RSD_CLOSE_FORCE));
		ATF_CHECK_EQ(atomic_load(&stall.releases), 1);
		break;
	case LOST_WAITERS:
		/* Each waiter meets the failed copy (or the quarantine). */
		ensure_together(&x, h, 3, -RSD_EDEVLOST);
		check_bytes(&x, h, PAGEABLE, 90 + end);
		OK(rsd_discard(x.f.m, h, NULL));
		ATF_CHECK_EQ(atomic_load(&stall.releases), 1);
		break;
	}
	ATF_CHECK_EQ_MSG(atomic_load(&stall.freed_in_use), 0,
			 "the source was freed while the staging worker could still read it");
	ATF_CHECK(!atomic_load(&stall.armed));
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(lost_device_mid_stage_discard);
ATF_TC_BODY(lost_device_mid_stage_discard, tc)
{
	lost_mid_stage(LOST_DISCARD);
}

ATF_TC_WITHOUT_HEAD(lost_device_mid_stage_move);
ATF_TC_BODY(lost_device_mid_stage_move, tc)
{
	lost_mid_stage(LOST_MOVE);
}

ATF_TC_WITHOUT_HEAD(lost_device_mid_stage_forced_close);
ATF_TC_BODY(lost_device_mid_stage_forced_close, tc)
{
	lost_mid_stage(LOST_CLOSE);
}

ATF_TC_WITHOUT_HEAD(lost_device_mid_stage_waiters);
ATF_TC_BODY(lost_device_mid_stage_waiters, tc)
{
	lost_mid_stage(LOST_WAITERS);
}

/* ---- host-only managers ------------------------------------------------------------ */

/* ---- no allocation of its own ------------------------------------------------------ */

/* The bookkeeping allocations (the "alloc" fault point's hits) of a
 * not-waiting ensure of h at cuda:0 from its host copy, once what was
 * queued before is done (the staging worker put its last job away) and h
 * is dropped there. */
static uint64_t async_allocs(struct stx *x, struct rsd_handle h)
{
	uint64_t h0;

	OK(rsd_simdev_ops()->device_sync(x->f.sd, 0));
	OK(rsd_manager_reap(x->f.m));
	OK(rsd_drop(x->f.m, h, cfx_cuda(0), NULL));
	OK(rsd__staging_quiesce(x->f.m));
	h0 = rsd_fault_hits("alloc");
	OK(rsd_ensure_async(x->f.m, h, cfx_cuda(0), NULL, NULL));
	return rsd_fault_hits("alloc") - h0;
}

/*
 * A copy handed to the staging worker is made in the memory of the job
 * the worker staged before it, when that is large enough: a not-waiting
 * ensure from pageable memory allocates exactly what the same ensure from
 * pinned memory does (each counted after one of the same, as the first
 * call of a kind fills caches of its own). A copy of more chunks than any
 * before allocates its job once (one more); the next one of that size
 * does not. Bytes exact.
 */
ATF_TC_WITHOUT_HEAD(handed_copies_reuse_the_job);
ATF_TC_BODY(handed_copies_reuse_the_job, tc)
{
	const uint64_t n[2] = { 3 * CHUNK + 5, 9 * CHUNK + 1 };
	struct rsd_handle pg[2], pn[2];
	uint64_t pinned[2];
	struct stx x;

	stx_make(&x, CHUNK, NULL, 0);
	for (int i = 0; i < 2; i++) {
		struct rsd_resident *r;

		pg[i] = adopt_pageable(&x, n[i], 90 + i);
		RSD_REQUIRE_OK(rsd_resident_alloc(x.f.m, &rsd_resident_type, PINNED, 1, &n[i], NULL,
						  0, &r));
		fill(rsd_resident_data(r, 0), n[i], 0, 92 + i);
		RSD_REQUIRE_OK(rsd_adopt(x.f.m, r, NULL, RSD_REPLICABLE, &pn[i]));
	}
	/* Warm: the pair at its size, the device's blocks and records. */
	OK(rsd_ensure(x.f.m, pg[0], cfx_cuda(0), NULL, NULL));
	for (int i = 0; i < 2; i++)
		OK(rsd_ensure(x.f.m, pn[i], cfx_cuda(0), NULL, NULL));
	/* Armed far away: every allocation counts, none fails. The second
	 * count of each: the first not-waiting call also fills caches. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, UINT64_MAX, RSD_ENOMEM));
	for (int i = 0; i < 2; i++) {
		pinned[i] = async_allocs(&x, pn[i]);
		pinned[i] = async_allocs(&x, pn[i]);
	}
	ATF_CHECK_EQ(async_allocs(&x, pg[0]), pinned[0]);
	ATF_CHECK_EQ(async_allocs(&x, pg[0]), pinned[0]);
	ATF_CHECK_EQ(async_allocs(&x, pg[1]), pinned[1] + 1);
	ATF_CHECK_EQ(async_allocs(&x, pg[1]), pinned[1]);
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	/* The last copy may still run: the check reads the device's memory
	 * from this thread, so after it. */
	OK(rsd_simdev_ops()->device_sync(x.f.sd, 0));
	OK(rsd_manager_reap(x.f.m));
	for (int i = 0; i < 2; i++) {
		check_bytes(&x, pg[i], cfx_cuda(0), 90 + i);
		check_bytes(&x, pn[i], cfx_cuda(0), 92 + i);
	}
	stx_fini(&x);
}

ATF_TC_WITHOUT_HEAD(host_only_unaffected);
ATF_TC_BODY(host_only_unaffected, tc)
{
	struct cfx f;
	struct rsd_handle h;

	cfx_host(&f, NULL, 0);
	h = cfx_adopt(&f, PAGEABLE, 3 * CHUNK, RSD_REPLICABLE);
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	OK(rsd_drop(f.m, h, PAGEABLE, NULL));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK(cfx_resident(&f, h, PAGEABLE));
	ERR(RSD_EINVAL, rsd_ensure(f.m, h, cfx_cuda(0), NULL, NULL));
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, bytes_exact_both_ways);
	ATF_TP_ADD_TC(tp, several_buffers_both_ways);
	ATF_TP_ADD_TC(tp, pair_grows_with_copies);
	ATF_TP_ADD_TC(tp, pair_growth_failure_keeps_it);
	ATF_TP_ADD_TC(tp, budgets_never_show_staging);
	ATF_TP_ADD_TC(tp, staging_off_copies_directly);
	ATF_TP_ADD_TC(tp, environment_sets_staging);
	ATF_TP_ADD_TC(tp, pinned_failure_falls_back);
	ATF_TP_ADD_TC(tp, unpinned_host_falls_back);
	ATF_TP_ADD_TC(tp, device_failure_mid_chunk);
	ATF_TP_ADD_TC(tp, two_threads_one_device);
	ATF_TP_ADD_TC(tp, async_calls_stage_too);
	ATF_TP_ADD_TC(tp, host_only_unaffected);
	ATF_TP_ADD_TC(tp, async_returns_before_its_copy);
	ATF_TP_ADD_TC(tp, several_waiters_one_copy);
	ATF_TP_ADD_TC(tp, sync_failure_is_no_answer_beside);
	ATF_TP_ADD_TC(tp, chunk_fault_fails_once);
	ATF_TP_ADD_TC(tp, forced_close_mid_copy);
	ATF_TP_ADD_TC(tp, handed_copies_reuse_the_job);
	ATF_TP_ADD_TC(tp, lost_device_mid_stage_discard);
	ATF_TP_ADD_TC(tp, lost_device_mid_stage_move);
	ATF_TP_ADD_TC(tp, lost_device_mid_stage_forced_close);
	ATF_TP_ADD_TC(tp, lost_device_mid_stage_waiters);
	return atf_no_error();
}
