// SPDX-License-Identifier: MIT
/*
 * The chunk pool behind pinned and device memory, with a fake backing that
 * counts its calls: warm reuse, splitting and coalescing, dedicated chunks
 * for large requests, the one-idle-chunk policy and more idle chunks within
 * the keep bound, giving back what is unused when the backing refuses,
 * fallback when a whole chunk cannot be backed, unpooled mode and
 * concurrent use.
 */
#include <atf-c.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/internal.h"
#include "../../lib/drivers/pool.h"

struct fake {
	unsigned long allocs, frees;
	uint64_t limit; /* chunks above this many bytes fail (0: no limit) */
	uint64_t cap;	/* more live bytes than this fail (0: no cap) */
	uint64_t live_bytes;
};

static int fake_alloc(void *ctx, uint64_t nbytes, void **base)
{
	struct fake *f = ctx;

	if (f->limit && nbytes > f->limit)
		return rsd__err(RSD_ENOMEM, "fake: %llu bytes is over the limit",
				(unsigned long long)nbytes);
	if (f->cap && f->live_bytes + nbytes > f->cap)
		return rsd__err(RSD_ENOMEM, "fake: the device is full");
	*base = aligned_alloc(4096, (size_t)nbytes);
	if (!*base)
		return rsd__err(RSD_ENOMEM, "fake: out of memory");
	f->allocs++;
	f->live_bytes += nbytes;
	return 0;
}

static void fake_free(void *ctx, void *base, uint64_t nbytes)
{
	struct fake *f = ctx;

	free(base);
	f->frees++;
	f->live_bytes -= nbytes;
}

static const struct rsd__pool_ops fake_ops = { fake_alloc, fake_free };

#define CHUNK (1u << 20)
#define GRAN 4096u

ATF_TC_WITHOUT_HEAD(warm_reuse);
ATF_TC_BODY(warm_reuse, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *a, *b;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 10000, &a), 0);
	ATF_REQUIRE_EQ(f.allocs, 1);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.allocated_bytes, 10000);
	ATF_CHECK_EQ(st.used_bytes, 12288);
	ATF_CHECK_EQ(st.reserved_bytes, CHUNK);
	ATF_CHECK_EQ(st.nallocs, 1);
	ATF_CHECK_EQ((uintptr_t)a % GRAN, 0);
	memset(a, 0xab, 10000);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, a), 0);
	for (int i = 0; i < 1000; i++) {
		ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 10000, &b), 0);
		ATF_REQUIRE_EQ(b, a);
		ATF_REQUIRE_EQ(rsd__pool_free(&pool, b), 0);
	}
	/* Warm: no chunk was added or released by the whole cycle. */
	ATF_CHECK_EQ(f.allocs, 1);
	ATF_CHECK_EQ(f.frees, 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.allocated_bytes, 0);
	ATF_CHECK_EQ(st.nallocs, 0);
	ATF_CHECK_EQ(st.nchunks, 1);
	ATF_CHECK_EQ(st.chunk_allocs, 1);
	rsd__pool_destroy(&pool);
	ATF_CHECK_EQ(f.frees, 1);
	ATF_CHECK_EQ(f.live_bytes, 0);
}

ATF_TC_WITHOUT_HEAD(zero_bytes_distinct);
ATF_TC_BODY(zero_bytes_distinct, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *a = NULL, *b = NULL;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 0, &a), 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 0, &b), 0);
	ATF_CHECK(a && b && a != b);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.allocated_bytes, 0);
	ATF_CHECK_EQ(st.used_bytes, 2 * GRAN);
	rsd__pool_destroy(&pool);
}

ATF_TC_WITHOUT_HEAD(split_and_coalesce);
ATF_TC_BODY(split_and_coalesce, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	void *a, *b, *c, *d;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, GRAN, &a), 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 2 * GRAN, &b), 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, GRAN, &c), 0);
	ATF_CHECK_EQ((char *)b, (char *)a + GRAN);
	ATF_CHECK_EQ((char *)c, (char *)b + 2 * GRAN);
	/* a and b merge into one 3-granule hole that a 3-granule request
	 * fills exactly, at a's address. */
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, b), 0);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, a), 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 3 * GRAN, &d), 0);
	ATF_CHECK_EQ(d, a);
	ATF_CHECK_EQ(f.allocs, 1);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, c), 0);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, d), 0);
	/* Everything merged back: the whole chunk is one block again. */
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK, &d), 0);
	ATF_CHECK_EQ(d, a);
	ATF_CHECK_EQ(f.allocs, 1);
	rsd__pool_destroy(&pool);
}

ATF_TC_WITHOUT_HEAD(large_request_own_chunk);
ATF_TC_BODY(large_request_own_chunk, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *small, *big;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 100, &small), 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK + 1, &big), 0);
	ATF_CHECK_EQ(f.allocs, 2);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.reserved_bytes, CHUNK + CHUNK + GRAN);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, big), 0);
	/* A dedicated chunk goes back as soon as its block is freed. */
	ATF_CHECK_EQ(f.frees, 1);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.reserved_bytes, CHUNK);
	ATF_CHECK_EQ(st.nchunks, 1);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, small), 0);
	rsd__pool_destroy(&pool);
}

ATF_TC_WITHOUT_HEAD(one_idle_chunk_kept);
ATF_TC_BODY(one_idle_chunk_kept, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *p[3];

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK, &p[i]), 0);
	ATF_CHECK_EQ(f.allocs, 3);
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(rsd__pool_free(&pool, p[i]), 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nchunks, 1);
	ATF_CHECK_EQ(f.frees, 2);
	ATF_CHECK_EQ(rsd__pool_trim(&pool), 1);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nchunks, 0);
	ATF_CHECK_EQ(st.reserved_bytes, 0);
	ATF_CHECK_EQ(f.live_bytes, 0);
	rsd__pool_destroy(&pool);
}

/*
 * Idle chunks beyond the first stay while they and the kept dedicated
 * chunks fit in the keep bound: use that swings between one and three
 * chunks' worth calls the backing only the first time.
 */
ATF_TC_WITHOUT_HEAD(idle_chunks_within_keep_bound);
ATF_TC_BODY(idle_chunks_within_keep_bound, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *p[3], *big;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	rsd__pool_set_keep(&pool, 2 * CHUNK);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 3; i++)
			ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK, &p[i]), 0);
		for (int i = 0; i < 3; i++)
			ATF_REQUIRE_EQ(rsd__pool_free(&pool, p[i]), 0);
	}
	ATF_CHECK_EQ(f.allocs, 3);
	ATF_CHECK_EQ(f.frees, 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nchunks, 3);
	/* Dedicated chunks share the bound, which the idle chunks fill:
	 * a large block freed now goes back at once. */
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK + GRAN, &big), 0);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, big), 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.kept_bytes, 0);
	ATF_CHECK_EQ(f.frees, 1);
	/* A lower bound gives back the extra idle chunks. */
	rsd__pool_set_keep(&pool, 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nchunks, 1);
	ATF_CHECK_EQ(f.frees, 3);
	rsd__pool_destroy(&pool);
	ATF_CHECK_EQ(f.live_bytes, 0);
}

/* When the backing refuses, what the pool holds unused goes back first
 * and the request is tried once more. */
ATF_TC_WITHOUT_HEAD(refused_backing_releases_unused);
ATF_TC_BODY(refused_backing_releases_unused, tc)
{
	struct fake f = { .cap = 3 * CHUNK };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *p[3], *big;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	rsd__pool_set_keep(&pool, 4 * CHUNK);
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK, &p[i]), 0);
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(rsd__pool_free(&pool, p[i]), 0);
	ATF_CHECK_EQ(f.frees, 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 2 * CHUNK, &big), 0);
	ATF_CHECK_EQ(f.frees, 3);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nchunks, 1);
	ATF_CHECK_EQ(st.reserved_bytes, 2 * CHUNK);
	/* With nothing unused, the refusal comes through. */
	ATF_CHECK_EQ(rsd__pool_alloc(&pool, 2 * CHUNK, &p[0]), -RSD_ENOMEM);
	ATF_CHECK(strstr(rsd_last_error()->message, "full") != NULL);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, big), 0);
	rsd__pool_destroy(&pool);
	ATF_CHECK_EQ(f.live_bytes, 0);
}

ATF_TC_WITHOUT_HEAD(fallback_to_exact_chunk);
ATF_TC_BODY(fallback_to_exact_chunk, tc)
{
	struct fake f = { .limit = 64 * 1024 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *a, *b = NULL;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	/* The chunk cannot be backed but the request can: it gets its own. */
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 5000, &a), 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.reserved_bytes, 2 * GRAN);
	ATF_CHECK_EQ(f.allocs, 1);
	/* Nothing can back this one: the backing's error comes through. */
	ATF_CHECK_EQ(rsd__pool_alloc(&pool, 100 * 1024, &b), -RSD_ENOMEM);
	ATF_CHECK_EQ(b, NULL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ENOMEM);
	ATF_CHECK(strstr(rsd_last_error()->message, "over the limit") != NULL);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nallocs, 1);
	ATF_REQUIRE_EQ(rsd__pool_free(&pool, a), 0);
	ATF_CHECK_EQ(f.frees, 1);
	rsd__pool_destroy(&pool);
}

ATF_TC_WITHOUT_HEAD(unpooled_one_chunk_per_alloc);
ATF_TC_BODY(unpooled_one_chunk_per_alloc, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *p[4];

	rsd__pool_init(&pool, &fake_ops, &f, 0, GRAN);
	for (int i = 0; i < 4; i++)
		ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 10, &p[i]), 0);
	ATF_CHECK_EQ(f.allocs, 4);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.reserved_bytes, 4 * GRAN);
	for (int i = 0; i < 4; i++)
		ATF_REQUIRE_EQ(rsd__pool_free(&pool, p[i]), 0);
	ATF_CHECK_EQ(f.frees, 4);
	rsd__pool_destroy(&pool);
}

ATF_TC_WITHOUT_HEAD(foreign_pointer);
ATF_TC_BODY(foreign_pointer, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	void *a;
	int x;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	ATF_CHECK_EQ(rsd__pool_free(&pool, &x), -RSD_EINVAL);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 100, &a), 0);
	ATF_CHECK(rsd__pool_owns(&pool, a));
	ATF_CHECK(!rsd__pool_owns(&pool, (char *)a + 1));
	ATF_CHECK_EQ(rsd__pool_free(&pool, (char *)a + GRAN), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd__pool_free(&pool, a), 0);
	ATF_CHECK_EQ(rsd__pool_free(&pool, a), -RSD_EINVAL); /* double free */
	ATF_CHECK(!rsd__pool_owns(&pool, a));
	rsd__pool_destroy(&pool);
}

ATF_TC_WITHOUT_HEAD(destroy_releases_live_chunks);
ATF_TC_BODY(destroy_releases_live_chunks, tc)
{
	struct fake f = { 0 };
	struct rsd__pool pool;
	void *a;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	for (int i = 0; i < 10; i++)
		ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, CHUNK / 3, &a), 0);
	ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, 3 * CHUNK, &a), 0);
	rsd__pool_destroy(&pool);
	ATF_CHECK_EQ(f.allocs, f.frees);
	ATF_CHECK_EQ(f.live_bytes, 0);
}

/* Random alloc/free against a shadow of what each block should hold: no
 * two live blocks may overlap, and the books balance at the end. */
ATF_TC_WITHOUT_HEAD(random_no_overlap);
ATF_TC_BODY(random_no_overlap, tc)
{
	enum {
		N = 200
	};
	struct fake f = { 0 };
	struct rsd__pool pool;
	struct rsd__pool_stats st;
	void *p[N] = { 0 };
	uint64_t sz[N] = { 0 }, total = 0;
	unsigned seed = 12345;

	rsd__pool_init(&pool, &fake_ops, &f, CHUNK, GRAN);
	for (int step = 0; step < 20000; step++) {
		int i = rand_r(&seed) % N;

		if (p[i]) {
			for (uint64_t k = 0; k < sz[i]; k += 997)
				ATF_REQUIRE_EQ(((unsigned char *)p[i])[k], (unsigned char)i);
			ATF_REQUIRE_EQ(rsd__pool_free(&pool, p[i]), 0);
			total -= sz[i];
			p[i] = NULL;
		} else {
			sz[i] = (uint64_t)(rand_r(&seed) % (CHUNK / 4)) +
				(rand_r(&seed) % 50 == 0 ? CHUNK : 0);
			ATF_REQUIRE_EQ(rsd__pool_alloc(&pool, sz[i], &p[i]), 0);
			memset(p[i], i, (size_t)sz[i]);
			total += sz[i];
		}
	}
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.allocated_bytes, total);
	for (int i = 0; i < N; i++)
		if (p[i])
			ATF_REQUIRE_EQ(rsd__pool_free(&pool, p[i]), 0);
	rsd__pool_stats(&pool, &st);
	ATF_CHECK_EQ(st.nallocs, 0);
	ATF_CHECK_EQ(st.used_bytes, 0);
	ATF_CHECK(st.nchunks <= 1);
	rsd__pool_destroy(&pool);
	ATF_CHECK_EQ(f.live_bytes, 0);
}

static struct rsd__pool thr_pool;

static void *thr_body(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	void *mine[16];

	for (int round = 0; round < 2000; round++) {
		for (int i = 0; i < 16; i++) {
			if (rsd__pool_alloc(&thr_pool, (uint64_t)(rand_r(&seed) % 20000), &mine[i]))
				return (void *)1;
			*(unsigned *)mine[i] = seed;
		}
		for (int i = 0; i < 16; i++)
			if (rsd__pool_free(&thr_pool, mine[i]))
				return (void *)1;
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(threads);
ATF_TC_BODY(threads, tc)
{
	struct fake f = { 0 };
	struct rsd__pool_stats st;
	pthread_t t[4];
	void *ret;

	rsd__pool_init(&thr_pool, &fake_ops, &f, CHUNK, GRAN);
	for (int i = 0; i < 4; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, thr_body, (void *)(uintptr_t)(i + 1)),
			       0);
	for (int i = 0; i < 4; i++) {
		ATF_REQUIRE_EQ(pthread_join(t[i], &ret), 0);
		ATF_CHECK_EQ(ret, NULL);
	}
	rsd__pool_stats(&thr_pool, &st);
	ATF_CHECK_EQ(st.nallocs, 0);
	ATF_CHECK_EQ(st.allocated_bytes, 0);
	rsd__pool_destroy(&thr_pool);
	ATF_CHECK_EQ(f.live_bytes, 0);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, warm_reuse);
	ATF_TP_ADD_TC(tp, zero_bytes_distinct);
	ATF_TP_ADD_TC(tp, split_and_coalesce);
	ATF_TP_ADD_TC(tp, large_request_own_chunk);
	ATF_TP_ADD_TC(tp, one_idle_chunk_kept);
	ATF_TP_ADD_TC(tp, idle_chunks_within_keep_bound);
	ATF_TP_ADD_TC(tp, refused_backing_releases_unused);
	ATF_TP_ADD_TC(tp, fallback_to_exact_chunk);
	ATF_TP_ADD_TC(tp, unpooled_one_chunk_per_alloc);
	ATF_TP_ADD_TC(tp, foreign_pointer);
	ATF_TP_ADD_TC(tp, destroy_releases_live_chunks);
	ATF_TP_ADD_TC(tp, random_no_overlap);
	ATF_TP_ADD_TC(tp, threads);
	return atf_no_error();
}
