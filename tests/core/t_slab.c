// SPDX-License-Identifier: MIT
/*
 * The small-object slab (lib/base/slab.c), which the manager's publication
 * objects and the controller search's planning states come from: the size
 * classes at their boundaries; an object freed is the next one of its size
 * class, never of another; objects other threads give back are reused once
 * the owner collects them; many objects are distinct and writable across
 * chunk growth; objects over the largest class are malloc's; chunks come
 * from the slab's source and all go back to it at fini; allocation is the
 * "alloc" fault point. Under AddressSanitizer the slab passes every object
 * to malloc, and the reuse cases check only what still holds there.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "base/slab.h"
#include "rsd/fault.h"

static struct rsd__slab *slab_new(void)
{
	struct rsd__slab *c = calloc(1, sizeof(*c));

	ATF_REQUIRE(c);
	return c;
}

static void slab_end(struct rsd__slab *c)
{
	rsd__slab_fini(c);
	free(c);
}

ATF_TC_WITHOUT_HEAD(reuse_within_class);
ATF_TC_BODY(reuse_within_class, tc)
{
	struct rsd__slab *c = slab_new();
	void *a = rsd__slab_alloc(c, 264), *b, *other;

	ATF_REQUIRE(a);
	memset(a, 0xa5, 264);
	rsd__slab_free(c, a, 264);
	/* 260 bytes is the same 16-byte class (257..272): a comes back. */
	b = rsd__slab_alloc(c, 260);
	ATF_REQUIRE(b);
	if (!RSD__SLAB_PASSTHROUGH)
		ATF_CHECK_EQ(b, a);
	rsd__slab_free(c, b, 260);
	/* 280 bytes is the next class: never the freed 272-byte object. */
	other = rsd__slab_alloc(c, 280);
	ATF_REQUIRE(other);
	ATF_CHECK(other != b || RSD__SLAB_PASSTHROUGH);
	memset(other, 0x5a, 280);
	rsd__slab_free(c, other, 280);
	slab_end(c);
}

/* Many live objects of mixed classes: distinct, writable, intact. */
ATF_TC_WITHOUT_HEAD(many_distinct);
ATF_TC_BODY(many_distinct, tc)
{
	enum {
		N = 40000
	}; /* about 9 MiB: several 2 MiB chunks */
	struct rsd__slab *c = slab_new();
	unsigned char **p = calloc(N, sizeof(*p));
	size_t bad = 0;

	ATF_REQUIRE(p);
	for (size_t i = 0; i < N; i++) {
		size_t n = 16 + (i % 32) * 16;

		p[i] = rsd__slab_alloc(c, n);
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
		rsd__slab_free(c, p[i], 16 + (i % 32) * 16);
	free(p);
	slab_end(c);
}

struct remote_arg {
	struct rsd__slab *c;
	void **objs;
	size_t n;
};

static void *give_back(void *arg)
{
	struct remote_arg *a = arg;

	for (size_t i = 0; i < a->n; i++)
		rsd__slab_free_remote(a->c, a->objs[i], 96);
	return NULL;
}

/* What other threads give back is what the owner allocates next. */
ATF_TC_WITHOUT_HEAD(remote_frees_collected);
ATF_TC_BODY(remote_frees_collected, tc)
{
	enum {
		N = 1000,
		T = 2
	};
	struct rsd__slab *c = slab_new();
	void *objs[T][N / T], *again[N];
	struct remote_arg args[T];
	pthread_t t[T];
	size_t found = 0;

	for (int k = 0; k < T; k++) {
		for (size_t i = 0; i < N / T; i++) {
			objs[k][i] = rsd__slab_alloc(c, 96);
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
		void *p = rsd__slab_alloc(c, 96);

		ATF_REQUIRE(p);
		again[i] = p;
		for (int k = 0; k < T; k++)
			for (size_t j = 0; j < N / T; j++)
				if (objs[k][j] == p) {
					objs[k][j] = NULL;
					found++;
				}
	}
	if (!RSD__SLAB_PASSTHROUGH)
		ATF_CHECK_EQ(found, N);
	for (size_t i = 0; i < N; i++)
		rsd__slab_free(c, again[i], 96);
	slab_end(c);
}

/* Over the largest class: a plain malloc block, freed with free(). */
ATF_TC_WITHOUT_HEAD(large_objects_bypass);
ATF_TC_BODY(large_objects_bypass, tc)
{
	struct rsd__slab *c = slab_new();
	size_t n = RSD__SLAB_MAX_OBJECT + 1;
	void *p = rsd__slab_alloc(c, n);

	ATF_REQUIRE(p);
	memset(p, 1, n);
	rsd__slab_free(c, p, n);
	ATF_CHECK(c->chunks == NULL);
	p = rsd__slab_alloc(c, n);
	ATF_REQUIRE(p);
	rsd__slab_free_remote(c, p, n);
	ATF_CHECK(atomic_load(&c->remote) == NULL);
	slab_end(c);
}

ATF_TC_WITHOUT_HEAD(size_classes);
ATF_TC_BODY(size_classes, tc)
{
	static const size_t
		want[][2] = {
			{ 0, 16 },	  { 1, 16 },	  { 16, 16 },	   { 17, 32 },
			{ 1008, 1008 },	  { 1009, 1024 }, { 1024, 1024 },  { 1025, 2048 },
			{ 2048, 2048 },	  { 2049, 4096 }, { 8193, 16384 }, { 16384, 16384 },
			{ 16385, 16385 }, /* over the largest class: its own size */
		};
	struct rsd__slab *c = slab_new();
	void *a, *a2, *b;

	ATF_REQUIRE_EQ(RSD__SLAB_MAX_OBJECT, 16384);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ATF_CHECK_EQ_MSG(rsd__slab_size(want[i][0]), want[i][1], "%zu bytes", want[i][0]);
	/* a power-of-two class: 3000 and 4096 bytes share it, 2048 does not */
	a = rsd__slab_alloc(c, 3000);
	ATF_REQUIRE(a);
	memset(a, 1, 3000);
	rsd__slab_free(c, a, 3000);
	b = rsd__slab_alloc(c, 2048);
	ATF_REQUIRE(b);
	ATF_CHECK(b != a || RSD__SLAB_PASSTHROUGH);
	/* 4096 bytes: the freed 3000-byte object, its class's */
	a2 = rsd__slab_alloc(c, 4096);
	ATF_REQUIRE(a2);
	ATF_CHECK(a2 == a || RSD__SLAB_PASSTHROUGH);
	rsd__slab_free(c, b, 2048);
	rsd__slab_free(c, a2, 4096);
	slab_end(c);
}

/* A source that counts the chunks it lent and checks what comes back. */
struct src_count {
	unsigned out, got, put;
	size_t bytes;
};

static void *src_get(void *ctx, size_t n, size_t *got)
{
	struct src_count *k = ctx;
	/* twice the request, as a cache may lend a larger block */
	void *p = malloc(2 * n);

	if (p) {
		k->out++;
		k->got++;
		k->bytes += 2 * n;
		*got = 2 * n;
	}
	return p;
}

static void src_put(void *ctx, void *p, size_t size)
{
	struct src_count *k = ctx;

	k->out--;
	k->put++;
	k->bytes -= size;
	free(p);
}

ATF_TC_WITHOUT_HEAD(chunk_source);
ATF_TC_BODY(chunk_source, tc)
{
	struct src_count k = { 0, 0, 0, 0 };
	struct rsd__slab_source src = { src_get, src_put, &k };
	struct rsd__slab s;

	if (RSD__SLAB_PASSTHROUGH)
		atf_tc_skip("AddressSanitizer build: objects are malloc blocks, no chunks");
	rsd__slab_init(&s, &src);
	for (int round = 0; round < 2; round++) {
		/* 100 objects of 1 KiB: more than the 64 KiB asked for, but
		 * the slab carves all that the source lent (128 KiB) */
		for (int i = 0; i < 100; i++) {
			void *p = rsd__slab_alloc(&s, 1024);

			ATF_REQUIRE(p);
			memset(p, i, 1024);
		}
		ATF_CHECK_EQ(k.out, 1);
		ATF_CHECK(s.end - (char *)s.chunks == 128 << 10);
		/* 100 more: a second chunk */
		for (int i = 0; i < 100; i++)
			ATF_REQUIRE(rsd__slab_alloc(&s, 1024));
		ATF_CHECK_EQ(k.out, 2);
		/* fini gives every chunk back, with the size it was lent */
		rsd__slab_fini(&s);
		ATF_CHECK_EQ(k.out, 0);
		ATF_CHECK_EQ(k.bytes, 0);
		ATF_CHECK(s.chunks == NULL && s.src == &src);
	}
	ATF_CHECK_EQ(k.got, 4);
	ATF_CHECK_EQ(k.put, 4);
}

ATF_TC_WITHOUT_HEAD(fault_point);
ATF_TC_BODY(fault_point, tc)
{
	struct rsd__slab *c = slab_new();
	void *p = rsd__slab_alloc(c, 64);

	ATF_REQUIRE(p);
	rsd__slab_free(c, p, 64);
	/* A cached object is there, and the armed point still fails. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 1, RSD_ENOMEM));
	ATF_CHECK(rsd__slab_alloc(c, 64) == NULL);
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	p = rsd__slab_alloc(c, 64);
	ATF_CHECK(p != NULL);
	rsd__slab_free(c, p, 64);
	slab_end(c);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, reuse_within_class);
	ATF_TP_ADD_TC(tp, many_distinct);
	ATF_TP_ADD_TC(tp, remote_frees_collected);
	ATF_TP_ADD_TC(tp, large_objects_bypass);
	ATF_TP_ADD_TC(tp, size_classes);
	ATF_TP_ADD_TC(tp, chunk_source);
	ATF_TP_ADD_TC(tp, fault_point);
	return atf_no_error();
}
