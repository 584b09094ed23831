// SPDX-License-Identifier: MIT
/*
 * The pageable block cache behind values' pageable storage: a freed block
 * is reused by the next value of its size class with its bytes intact for
 * whoever owns it, never handed to two values, kept within its count and
 * byte bounds, skipped for small blocks, and still behind the "resident"
 * fault point. Each test case is its own process, so the process-wide
 * cache starts empty in each.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "core/pcache.h"
#include "cfx.h"

#define MiB (1ull << 20)

/* A fresh pageable value of one n-byte buffer. */
static struct rsd_resident *value(struct cfx *f, uint64_t n)
{
	return cfx_alloc(f, PAGEABLE, n);
}

/* A fresh 4 MiB pageable value filled with c; *data is its buffer. */
static struct rsd_resident *filled(struct cfx *f, unsigned char c, void **data)
{
	struct rsd_resident *r = value(f, 4 * MiB);

	*data = rsd_resident_data(r, 0);
	memset(*data, c, 4 * MiB);
	return r;
}

/* Every byte is c: the first is, and each equals the next. One memcmp,
 * which ThreadSanitizer checks as a range (a byte loop took it minutes). */
static bool all_bytes(const void *p, uint64_t n, unsigned char c)
{
	const unsigned char *b = p;

	return !n || (b[0] == c && !memcmp(b, b + 1, n - 1));
}

static struct rsd__pcache_stats stats(void)
{
	struct rsd__pcache_stats s;

	rsd__pcache_stats(&s);
	return s;
}

ATF_TC_WITHOUT_HEAD(reuse);
ATF_TC_BODY(reuse, tc)
{
	struct cfx f;
	struct rsd_resident *a, *b, *c;
	struct rsd__pcache_stats s;
	void *pa;

	cfx_host(&f, NULL, 0);
	a = filled(&f, 0xa5, &pa);
	s = stats();
	ATF_CHECK_EQ(s.misses, 1);
	ATF_CHECK_EQ(s.hits, 0);
	rsd_resident_free(a);
	s = stats();
	ATF_CHECK_EQ(s.puts, 1);
	ATF_CHECK_EQ(s.nblocks, 1);
	ATF_CHECK_EQ(s.bytes, 4 * MiB);

	/* The next value of that size gets the freed block back... */
	b = value(&f, 4 * MiB);
	ATF_CHECK_EQ(rsd_resident_data(b, 0), pa);
	s = stats();
	ATF_CHECK_EQ(s.hits, 1);
	ATF_CHECK_EQ(s.nblocks, 0);
	ATF_CHECK_EQ(s.bytes, 0);
	/* ...and the one after, while it lives, does not. */
	c = value(&f, 4 * MiB);
	ATF_CHECK(rsd_resident_data(c, 0) != pa);
	ATF_CHECK_EQ(stats().misses, 2);
	memset(rsd_resident_data(b, 0), 0x11, 4 * MiB);
	memset(rsd_resident_data(c, 0), 0x22, 4 * MiB);
	ATF_CHECK(all_bytes(rsd_resident_data(b, 0), 4 * MiB, 0x11));
	ATF_CHECK(all_bytes(rsd_resident_data(c, 0), 4 * MiB, 0x22));
	rsd_resident_free(b);
	rsd_resident_free(c);
	ATF_CHECK_EQ(stats().nblocks, 2);
	ATF_CHECK_EQ(rsd__pcache_drain(), 2);
	s = stats();
	ATF_CHECK_EQ(s.nblocks, 0);
	ATF_CHECK_EQ(s.bytes, 0);
	cfx_fini(&f);
}

/* A managed value that leaves pageable host returns its block after the
 * grace period; the value spilled next lands in it with its own bytes. */
ATF_TC_WITHOUT_HEAD(managed_spill);
ATF_TC_BODY(managed_spill, tc)
{
	struct rsd_location at = RSD_LOC_PAGEABLE_HOST;
	struct rsd_resident *r, *r2;
	struct rsd_handle h;
	struct cfx f;
	void *p;

	cfx_host(&f, NULL, 0);
	r = filled(&f, 0x5a, &p);
	RSD_REQUIRE_OK(rsd_adopt(f.m, r, &at, RSD_REPLICABLE, &h));
	RSD_REQUIRE_OK(rsd_discard(f.m, h, NULL));
	cfx_fini(&f);
	ATF_CHECK_EQ(stats().nblocks, 1);
	cfx_host(&f, NULL, 0);
	r2 = value(&f, 4 * MiB);
	ATF_CHECK_EQ(rsd_resident_data(r2, 0), p);
	ATF_CHECK_EQ(stats().hits, 1);
	rsd_resident_free(r2);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(bounds);
ATF_TC_BODY(bounds, tc)
{
	struct cfx f;
	struct rsd_resident *v[20];
	struct rsd__pcache_stats s;

	cfx_host(&f, NULL, 0);
	/* The count bound: 20 blocks of 4 MiB freed, 16 kept (64 MiB). */
	for (int i = 0; i < 20; i++)
		v[i] = value(&f, 4 * MiB);
	for (int i = 0; i < 20; i++) {
		rsd_resident_free(v[i]);
		s = stats();
		ATF_CHECK(s.nblocks <= RSD__PCACHE_MAX_BLOCKS);
		ATF_CHECK(s.bytes <= RSD__PCACHE_MAX_BYTES);
	}
	s = stats();
	ATF_CHECK_EQ(s.nblocks, 16);
	ATF_CHECK_EQ(s.bytes, 64 * MiB);
	ATF_CHECK_EQ(s.puts, 20);
	ATF_CHECK_EQ(s.evictions, 4);
	ATF_CHECK_EQ(rsd__pcache_drain(), 16);
	/* The count bound, below the byte bound: 20 blocks of 1 MiB, 16 kept. */
	for (int i = 0; i < 20; i++)
		v[i] = value(&f, MiB);
	for (int i = 0; i < 20; i++)
		rsd_resident_free(v[i]);
	s = stats();
	ATF_CHECK_EQ(s.nblocks, RSD__PCACHE_MAX_BLOCKS);
	ATF_CHECK_EQ(s.bytes, 16 * MiB);
	ATF_CHECK_EQ(s.evictions, 4 + 4);
	/* The byte bound: 8 blocks of 8 MiB push every 1 MiB block out. */
	for (int i = 0; i < 10; i++)
		v[i] = value(&f, 8 * MiB);
	for (int i = 0; i < 10; i++)
		rsd_resident_free(v[i]);
	s = stats();
	ATF_CHECK_EQ(s.nblocks, 8);
	ATF_CHECK_EQ(s.bytes, 64 * MiB);
	ATF_CHECK_EQ(s.evictions, 4 + 4 + 16 + 2);
	/* The newest are kept: the 8 MiB class hits, the 1 MiB one misses. */
	v[0] = value(&f, 8 * MiB);
	v[1] = value(&f, MiB);
	s = stats();
	ATF_CHECK_EQ(s.hits, 1);
	ATF_CHECK_EQ(s.nblocks, 7);
	rsd_resident_free(v[0]);
	rsd_resident_free(v[1]);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(size_classes);
ATF_TC_BODY(size_classes, tc)
{
	struct cfx f;
	struct rsd_resident *r;
	struct rsd__pcache_stats s;

	cfx_host(&f, NULL, 0);
	rsd_resident_free(value(&f, 4 * MiB));
	/* 4 MiB less a little is the same class; 4 MiB and a byte is not. */
	r = value(&f, 4 * MiB + 1);
	ATF_CHECK_EQ(stats().hits, 0);
	rsd_resident_free(r);
	r = value(&f, 4 * MiB - 100);
	s = stats();
	ATF_CHECK_EQ(s.hits, 1);
	ATF_CHECK_EQ(s.nblocks, 1); /* the 4 MiB + 64 KiB block */
	ATF_CHECK_EQ(s.bytes, 4 * MiB + RSD__PCACHE_CLASS);
	memset(rsd_resident_data(r, 0), 0x33, 4 * MiB - 100);
	rsd_resident_free(r);
	/* Small blocks and blocks over the byte bound stay malloc's: neither
	 * counted nor kept. */
	s = stats();
	rsd_resident_free(value(&f, 64 << 10));
	rsd_resident_free(value(&f, RSD__PCACHE_MAX_BYTES + 1));
	ATF_CHECK_EQ(stats().hits + stats().misses, s.hits + s.misses);
	ATF_CHECK_EQ(stats().nblocks, s.nblocks);
	ATF_CHECK_EQ(stats().puts, s.puts);
	cfx_fini(&f);
}

/* A cached block does not bypass the "resident" fault point. */
ATF_TC_WITHOUT_HEAD(fault_point);
ATF_TC_BODY(fault_point, tc)
{
	struct cfx f;
	struct rsd_resident *r = NULL;
	uint64_t n = 4 * MiB;

	cfx_host(&f, NULL, 0);
	rsd_resident_free(value(&f, n));
	ATF_REQUIRE_EQ(stats().nblocks, 1);
	RSD_REQUIRE_OK(rsd_fault_inject("resident", "pageable-host", 1, RSD_ENOMEM));
	RSD_CHECK_ERR(RSD_ENOMEM, rsd_resident_alloc(f.m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST,
						     1, &n, NULL, 0, &r));
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(stats().hits, 0);
	ATF_CHECK_EQ(stats().nblocks, 1);
	RSD_REQUIRE_OK(rsd_fault_inject("resident", NULL, 0, 0));
	r = value(&f, n);
	ATF_CHECK_EQ(stats().hits, 1);
	rsd_resident_free(r);
	cfx_fini(&f);
}

#define NTHREADS 4
#define ROUNDS 150

struct worker {
	struct cfx *f;
	unsigned char tag;
	bool ok;
};

/* Each thread stamps its blocks with its own tag and checks them after the
 * others have had time to run: a block handed out twice shows up as a tag
 * that is not its owner's. */
static void *work(void *arg)
{
	struct worker *w = arg;

	w->ok = true;
	for (int i = 0; i < ROUNDS; i++) {
		uint64_t n = (1 + (uint64_t)(i % 3)) * MiB;
		struct rsd_resident *r = value(w->f, n);
		unsigned char *p = rsd_resident_data(r, 0);

		memset(p, w->tag, n);
		for (int k = 0; k < 3; k++)
			sched_yield();
		if (!all_bytes(p, n, w->tag))
			w->ok = false;
		rsd_resident_free(r);
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(concurrent);
ATF_TC_BODY(concurrent, tc)
{
	struct cfx f;
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct rsd__pcache_stats s;

	cfx_host(&f, NULL, 0);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .f = &f, .tag = (unsigned char)(0x40 + i) };
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		ATF_REQUIRE_EQ(pthread_join(t[i], NULL), 0);
		ATF_CHECK_MSG(w[i].ok, "thread %d found another thread's bytes in its block", i);
	}
	s = stats();
	ATF_CHECK_EQ(s.hits + s.misses, NTHREADS * ROUNDS);
	ATF_CHECK_EQ(s.puts, NTHREADS * ROUNDS);
	ATF_CHECK(s.hits > 0);
	ATF_CHECK(s.nblocks <= RSD__PCACHE_MAX_BLOCKS);
	ATF_CHECK(s.bytes <= RSD__PCACHE_MAX_BYTES);
	ATF_CHECK_EQ(s.nblocks, s.puts - s.hits - s.evictions);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, reuse);
	ATF_TP_ADD_TC(tp, managed_spill);
	ATF_TP_ADD_TC(tp, bounds);
	ATF_TP_ADD_TC(tp, size_classes);
	ATF_TP_ADD_TC(tp, fault_point);
	ATF_TP_ADD_TC(tp, concurrent);
	return atf_no_error();
}
