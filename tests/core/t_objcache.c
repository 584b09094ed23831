// SPDX-License-Identifier: MIT
/*
 * The publication object cache (lib/core/objcache.c): an object freed is
 * the next one of its size class, never of another; objects other threads
 * give back are reused once the writer collects them; many objects are
 * distinct and writable across chunk growth; objects over the largest
 * class are malloc's; allocation is the "alloc" fault point. Under
 * AddressSanitizer the cache passes every object to malloc, and the reuse
 * cases check only what still holds there.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "core/objcache.h"
#include "rsd/fault.h"

static struct rsd_objcache *cache_new(void)
{
	struct rsd_objcache *c = calloc(1, sizeof(*c));

	ATF_REQUIRE(c);
	return c;
}

static void cache_end(struct rsd_objcache *c)
{
	rsd__objcache_drain(c);
	free(c);
}

ATF_TC_WITHOUT_HEAD(reuse_within_class);
ATF_TC_BODY(reuse_within_class, tc)
{
	struct rsd_objcache *c = cache_new();
	void *a = rsd__objcache_alloc(c, 264), *b, *other;

	ATF_REQUIRE(a);
	memset(a, 0xa5, 264);
	rsd__objcache_free(c, a, 264);
	/* 260 bytes is the same 16-byte class (257..272): a comes back. */
	b = rsd__objcache_alloc(c, 260);
	ATF_REQUIRE(b);
	if (!RSD_OBJCACHE_PASSTHROUGH)
		ATF_CHECK_EQ(b, a);
	rsd__objcache_free(c, b, 260);
	/* 280 bytes is the next class: never the freed 272-byte object. */
	other = rsd__objcache_alloc(c, 280);
	ATF_REQUIRE(other);
	ATF_CHECK(other != b || RSD_OBJCACHE_PASSTHROUGH);
	memset(other, 0x5a, 280);
	rsd__objcache_free(c, other, 280);
	cache_end(c);
}

/* Many live objects of mixed classes: distinct, writable, intact. */
ATF_TC_WITHOUT_HEAD(many_distinct);
ATF_TC_BODY(many_distinct, tc)
{
	enum {
		N = 40000
	}; /* about 9 MiB: several 2 MiB chunks */
	struct rsd_objcache *c = cache_new();
	unsigned char **p = calloc(N, sizeof(*p));
	size_t bad = 0;

	ATF_REQUIRE(p);
	for (size_t i = 0; i < N; i++) {
		size_t n = 16 + (i % 32) * 16;

		p[i] = rsd__objcache_alloc(c, n);
		ATF_REQUIRE(p[i]);
		ATF_REQUIRE_EQ((uintptr_t)p[i] % 16, 0);
		memset(p[i], (int)(i & 0xff), n);
	}
	for (size_t i = 0; i < N; i++) {
		size_t n = 16 + (i % 32) * 16;

		for (size_t k = 0; k < n; k++)
			bad += p[i][k] != (unsigned char)(i & 0xff);
	}
	ATF_CHECK_EQ(bad, 0);
	for (size_t i = 0; i < N; i++)
		rsd__objcache_free(c, p[i], 16 + (i % 32) * 16);
	free(p);
	cache_end(c);
}

struct remote_arg {
	struct rsd_objcache *c;
	void **objs;
	size_t n;
};

static void *give_back(void *arg)
{
	struct remote_arg *a = arg;

	for (size_t i = 0; i < a->n; i++)
		rsd__objcache_free_remote(a->c, a->objs[i], 96);
	return NULL;
}

/* What other threads give back is what the writer allocates next. */
ATF_TC_WITHOUT_HEAD(remote_frees_collected);
ATF_TC_BODY(remote_frees_collected, tc)
{
	enum {
		N = 1000,
		T = 2
	};
	struct rsd_objcache *c = cache_new();
	void *objs[T][N / T], *again[N];
	struct remote_arg args[T];
	pthread_t t[T];
	size_t found = 0;

	for (int k = 0; k < T; k++) {
		for (size_t i = 0; i < N / T; i++) {
			objs[k][i] = rsd__objcache_alloc(c, 96);
			ATF_REQUIRE(objs[k][i]);
		}
		args[k] = (struct remote_arg){ c, objs[k], N / T };
	}
	for (int k = 0; k < T; k++)
		ATF_REQUIRE_EQ(pthread_create(&t[k], NULL, give_back, &args[k]), 0);
	for (int k = 0; k < T; k++)
		ATF_REQUIRE_EQ(pthread_join(t[k], NULL), 0);
	/* The class's list is empty: the next N allocations are exactly the
	 * N objects given back, each once. */
	for (size_t i = 0; i < N; i++) {
		void *p = rsd__objcache_alloc(c, 96);

		ATF_REQUIRE(p);
		again[i] = p;
		for (int k = 0; k < T; k++)
			for (size_t j = 0; j < N / T; j++)
				if (objs[k][j] == p) {
					objs[k][j] = NULL;
					found++;
				}
	}
	if (!RSD_OBJCACHE_PASSTHROUGH)
		ATF_CHECK_EQ(found, N);
	for (size_t i = 0; i < N; i++)
		rsd__objcache_free(c, again[i], 96);
	cache_end(c);
}

/* Over the largest class: a plain malloc block, freed with free(). */
ATF_TC_WITHOUT_HEAD(large_objects_bypass);
ATF_TC_BODY(large_objects_bypass, tc)
{
	struct rsd_objcache *c = cache_new();
	size_t n = RSD_OBJCACHE_MAX_OBJECT + 1;
	void *p = rsd__objcache_alloc(c, n);

	ATF_REQUIRE(p);
	memset(p, 1, n);
	rsd__objcache_free(c, p, n);
	ATF_CHECK(c->chunks == NULL);
	p = rsd__objcache_alloc(c, n);
	ATF_REQUIRE(p);
	rsd__objcache_free_remote(c, p, n);
	ATF_CHECK(atomic_load(&c->remote) == NULL);
	cache_end(c);
}

ATF_TC_WITHOUT_HEAD(fault_point);
ATF_TC_BODY(fault_point, tc)
{
	struct rsd_objcache *c = cache_new();
	void *p = rsd__objcache_alloc(c, 64);

	ATF_REQUIRE(p);
	rsd__objcache_free(c, p, 64);
	/* A cached object is there, and the armed point still fails. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 1, RSD_ENOMEM));
	ATF_CHECK(rsd__objcache_alloc(c, 64) == NULL);
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	p = rsd__objcache_alloc(c, 64);
	ATF_CHECK(p != NULL);
	rsd__objcache_free(c, p, 64);
	cache_end(c);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, reuse_within_class);
	ATF_TP_ADD_TC(tp, many_distinct);
	ATF_TP_ADD_TC(tp, remote_frees_collected);
	ATF_TP_ADD_TC(tp, large_objects_bypass);
	ATF_TP_ADD_TC(tp, fault_point);
	return atf_no_error();
}
