// SPDX-License-Identifier: MIT
/*
 * The pointer map of lib/base/ptrmap.c: a zeroed map is empty; set adds a
 * key or replaces its index; get finds exactly the keys present with
 * their latest index; deleting a key that sits in the middle of a probe
 * run leaves every other key of the run reachable (checked against a
 * reference array over thousands of random operations, through growth);
 * clear empties it and keeps its memory.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdlib.h>

#include "internal.h"

static const void *key(size_t i)
{
	/* Aligned, clustered addresses, like the streams and objects it maps. */
	return (const void *)(uintptr_t)(0x10000 + 64 * i);
}

ATF_TC_WITHOUT_HEAD(set_get_replace);
ATF_TC_BODY(set_get_replace, tc)
{
	struct rsd__ptrmap pm = { 0 };
	size_t v = 99;

	ATF_CHECK(!rsd__ptrmap_get(&pm, key(1), &v));
	ATF_CHECK_EQ(v, 99);	      /* untouched on a miss */
	rsd__ptrmap_del(&pm, key(1)); /* absent: nothing happens */
	ATF_REQUIRE_EQ(rsd__ptrmap_set(&pm, key(1), 10), 0);
	ATF_REQUIRE_EQ(rsd__ptrmap_set(&pm, key(2), 20), 0);
	ATF_CHECK_EQ(pm.n, 2);
	ATF_CHECK_EQ(pm.cap, 16);
	ATF_CHECK(rsd__ptrmap_get(&pm, key(1), &v));
	ATF_CHECK_EQ(v, 10);
	ATF_REQUIRE_EQ(rsd__ptrmap_set(&pm, key(1), 11), 0);
	ATF_CHECK_EQ(pm.n, 2);
	ATF_CHECK(rsd__ptrmap_get(&pm, key(1), &v));
	ATF_CHECK_EQ(v, 11);
	ATF_CHECK(rsd__ptrmap_get(&pm, key(2), NULL));
	rsd__ptrmap_del(&pm, key(1));
	ATF_CHECK_EQ(pm.n, 1);
	ATF_CHECK(!rsd__ptrmap_get(&pm, key(1), NULL));
	ATF_CHECK(rsd__ptrmap_get(&pm, key(2), &v));
	ATF_CHECK_EQ(v, 20);
	rsd__ptrmap_clear(&pm);
	ATF_CHECK_EQ(pm.n, 0);
	ATF_CHECK_EQ(pm.cap, 16);
	ATF_CHECK(!rsd__ptrmap_get(&pm, key(2), NULL));
	rsd__ptrmap_free(&pm);
	ATF_CHECK(pm.slot == NULL && pm.cap == 0 && pm.n == 0);
}

/* Keys that collide fill one run; deleting from its middle and its head
 * must move the later ones back. */
ATF_TC_WITHOUT_HEAD(delete_inside_runs);
ATF_TC_BODY(delete_inside_runs, tc)
{
	struct rsd__ptrmap pm = { 0 };
	size_t v;

	/* 8 keys in a 16-slot table: most share a probe run with another. */
	for (size_t i = 0; i < 8; i++)
		ATF_REQUIRE_EQ(rsd__ptrmap_set(&pm, key(i), i), 0);
	ATF_REQUIRE_EQ(pm.cap, 16);
	for (size_t d = 0; d < 8; d += 2) {
		rsd__ptrmap_del(&pm, key(d));
		for (size_t i = 0; i < 8; i++) {
			bool in = rsd__ptrmap_get(&pm, key(i), &v);

			ATF_CHECK_EQ_MSG(in, i > d || i % 2, "key %zu after deleting %zu", i, d);
			if (in)
				ATF_CHECK_EQ(v, i);
		}
	}
	ATF_CHECK_EQ(pm.n, 4);
	rsd__ptrmap_free(&pm);
}

ATF_TC_WITHOUT_HEAD(random_against_array);
ATF_TC_BODY(random_against_array, tc)
{
	enum {
		NKEYS = 3000,
		NOPS = 200000
	};
	static size_t ref[NKEYS]; /* 0: absent, else index + 1 */
	struct rsd__ptrmap pm = { 0 };
	size_t n = 0, v;

	srand(34);
	for (size_t op = 0; op < NOPS; op++) {
		size_t k = (size_t)rand() % NKEYS;

		if (rand() % 3) {
			ATF_REQUIRE_EQ(rsd__ptrmap_set(&pm, key(k), op), 0);
			n += !ref[k];
			ref[k] = op + 1;
		} else {
			rsd__ptrmap_del(&pm, key(k));
			n -= !!ref[k];
			ref[k] = 0;
		}
		ATF_REQUIRE_EQ(pm.n, n);
		ATF_REQUIRE(2 * pm.n <= pm.cap);
	}
	for (size_t k = 0; k < NKEYS; k++) {
		bool in = rsd__ptrmap_get(&pm, key(k), &v);

		ATF_REQUIRE_EQ_MSG(in, ref[k] != 0, "key %zu", k);
		if (in)
			ATF_REQUIRE_EQ(v + 1, ref[k]);
	}
	rsd__ptrmap_free(&pm);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, set_get_replace);
	ATF_TP_ADD_TC(tp, delete_inside_runs);
	ATF_TP_ADD_TC(tp, random_against_array);
	return atf_no_error();
}
