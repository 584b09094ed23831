// SPDX-License-Identifier: MIT
/*
 * The persistent radix vector of published images (lib/core/pvec.c):
 * appending copies no node and leaves an older image's view as it was; a
 * change below the count copies the path and leaves the older view
 * reading the old slot; a failed generation's rollback frees what it built
 * and clears what its appends wrote into shared nodes, so that the older
 * view holds exactly its own slots again; sparse slots read as NULL.
 *
 * The lifetime tables built on it (lib/core/ptab.c): a walk returns
 * exactly the objects present, in slot order, stepping over holes and
 * missing subtrees; the rebuild threshold is exact; replacing a table
 * whole retires it in one entry that frees every one of its nodes and
 * nothing else.
 */
#include <atf-c.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "core/core.h"

/* A manager and an image just sufficient for retirement and the slab. */
struct fixture {
	struct rsd_manager m;
	struct rsd_image rt;
};

static struct fixture *fixture_new(void)
{
	struct fixture *f = calloc(1, sizeof(*f));

	ATF_REQUIRE(f);
	f->rt.m = &f->m;
	return f;
}

/* Retired nodes go back to the slab, as a reclaimed image's would. */
static void fixture_reclaim(struct fixture *f)
{
	for (size_t i = 0; i < f->rt.nretired; i++)
		rsd__slab_free(&f->m.oc, f->rt.retired[i].p, f->rt.retired[i].nbytes);
	if (f->rt.retired != f->rt.inline_retired)
		free(f->rt.retired);
	f->rt.retired = NULL;
	f->rt.nretired = f->rt.capretired = 0;
}

static void fixture_end(struct fixture *f, struct rsd_pv *pv)
{
	fixture_reclaim(f);
	rsd__pv_free_nodes(pv, &f->m.oc, NULL);
	rsd__slab_fini(&f->m.oc);
	free(f);
}

/* Values are small integers stored as pointers: i + 1, never NULL. */
static void *val(uint64_t i)
{
	return (void *)(uintptr_t)(i + 1);
}

static size_t counted;

static void count_value(struct rsd__slab *oc, void *v)
{
	(void)oc;
	(void)v;
	counted++;
}

static size_t rolled_back;

static void count_rollback(struct rsd__slab *oc, void *v, uint64_t gen)
{
	(void)oc;
	(void)v;
	(void)gen;
	rolled_back++;
}

/* Free the tree of pv (an old view), returning how many values its nodes
 * held, whatever its count says. */
static size_t free_counting(struct fixture *f, struct rsd_pv *pv)
{
	counted = 0;
	rsd__pv_free_nodes(pv, &f->m.oc, count_value);
	return counted;
}

ATF_TC_WITHOUT_HEAD(append_copies_nothing);
ATF_TC_BODY(append_copies_nothing, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_pv pv = { 0 }, old;

	for (uint64_t i = 0; i < 40; i++)
		ATF_REQUIRE_EQ(rsd__pv_set(&pv, i, val(i), 1, &f->rt), 0);
	old = pv; /* published as generation 1 */
	for (uint64_t i = 40; i < 2000; i++)
		ATF_REQUIRE_EQ(rsd__pv_set(&pv, i, val(i), 2, &f->rt), 0);
	/* Nothing was replaced, so nothing was retired. */
	ATF_CHECK_EQ(f->rt.nretired, 0);
	ATF_CHECK_EQ(old.count, 40);
	ATF_CHECK(rsd__pv_get(&old, 40) == NULL);
	for (uint64_t i = 0; i < 40; i++)
		ATF_CHECK_EQ(rsd__pv_get(&old, i), val(i));
	for (uint64_t i = 0; i < 2000; i++)
		ATF_CHECK_EQ(rsd__pv_get(&pv, i), val(i));
	ATF_CHECK_EQ(pv.count, 2000);
	fixture_end(f, &pv);
}

ATF_TC_WITHOUT_HEAD(update_copies_path);
ATF_TC_BODY(update_copies_path, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_pv pv = { 0 }, old;

	for (uint64_t i = 0; i < 2000; i++)
		ATF_REQUIRE_EQ(rsd__pv_set(&pv, i, val(i), 1, &f->rt), 0);
	old = pv;
	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 1234, val(7), 2, &f->rt), 0);
	/* 2000 values are three levels: the whole path was copied. */
	ATF_CHECK_EQ(f->rt.nretired, 3);
	ATF_CHECK_EQ(rsd__pv_get(&old, 1234), val(1234));
	ATF_CHECK_EQ(rsd__pv_get(&pv, 1234), val(7));
	/* A second change in the same generation writes its own nodes. */
	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 1235, val(8), 2, &f->rt), 0);
	ATF_CHECK_EQ(f->rt.nretired, 3);
	ATF_CHECK_EQ(rsd__pv_get(&old, 1235), val(1235));
	fixture_end(f, &pv); /* the replaced nodes are freed as retired */
}

ATF_TC_WITHOUT_HEAD(rollback_clears_appends);
ATF_TC_BODY(rollback_clears_appends, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_pv pv = { 0 }, old;

	for (uint64_t i = 0; i < 50; i++)
		ATF_REQUIRE_EQ(rsd__pv_set(&pv, i, val(i), 1, &f->rt), 0);
	old = pv;
	/* Generation 2 changes one old slot (a copied path) and appends into
	 * the shared leaf, a new leaf and, past 1024, a new level. */
	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 3, val(99), 2, &f->rt), 0);
	for (uint64_t i = 50; i < 1100; i++)
		ATF_REQUIRE_EQ(rsd__pv_set(&pv, i, val(i), 2, &f->rt), 0);
	rolled_back = 0;
	rsd__pv_free_gen(&pv, &f->m.oc, old.count, 2, count_rollback);
	/* Every slot generation 2 set was handed back: the copied leaf's 32
	 * slots and the 1050 appended ones. */
	ATF_CHECK_EQ(rolled_back, 32 + 1050);
	/* As a failed publication does, take the retirements back: the
	 * replaced nodes are the generation-1 tree's again. That tree is
	 * whole and holds exactly its 50 values: nothing appended in place
	 * is left in a shared node. */
	f->rt.nretired = 0;
	for (uint64_t i = 0; i < 50; i++)
		ATF_CHECK_EQ(rsd__pv_get(&old, i), val(i));
	ATF_CHECK_EQ(free_counting(f, &old), 50);
	pv = (struct rsd_pv){ 0 }; /* its generation-2 nodes were freed above */
	fixture_end(f, &pv);
}

ATF_TC_WITHOUT_HEAD(sparse_slots);
ATF_TC_BODY(sparse_slots, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_pv pv = { 0 }, old;

	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 0, val(0), 1, &f->rt), 0);
	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 5000, val(5000), 1, &f->rt), 0);
	old = pv;
	ATF_CHECK_EQ(pv.count, 5001);
	ATF_CHECK(rsd__pv_get(&pv, 2500) == NULL);
	ATF_CHECK(rsd__pv_get(&pv, 4999) == NULL);
	/* Setting a hole below the count is a change: copied, not in place. */
	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 2500, val(2500), 2, &f->rt), 0);
	ATF_CHECK(rsd__pv_get(&old, 2500) == NULL);
	ATF_CHECK_EQ(rsd__pv_get(&pv, 2500), val(2500));
	ATF_CHECK(f->rt.nretired > 0);
	/* A sparse append past the count, in place. */
	fixture_reclaim(f);
	old = pv;
	ATF_REQUIRE_EQ(rsd__pv_set(&pv, 9000, val(9000), 3, &f->rt), 0);
	ATF_CHECK_EQ(f->rt.nretired, 0);
	ATF_CHECK(rsd__pv_get(&old, 9000) == NULL);
	ATF_CHECK_EQ(rsd__pv_get(&pv, 9000), val(9000));
	fixture_reclaim(f);
	fixture_end(f, &pv);
}

ATF_TC_WITHOUT_HEAD(walk_skips_holes);
ATF_TC_BODY(walk_skips_holes, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_ptab t = { 0 };
	uint64_t i = 0, want = 1, seen = 0;
	void *o;

	/* 1100 slots (three levels), every third one empty. */
	for (uint64_t k = 0; k < 1100; k++)
		ATF_REQUIRE_EQ(rsd__pv_set(&t.pv, k, k % 3 ? val(k) : NULL, 1, &f->rt), 0);
	while ((o = rsd__ptab_next(&t, &i))) {
		ATF_REQUIRE_EQ(o, val(want));
		ATF_REQUIRE_EQ(i, want + 1); /* just past the object's slot */
		seen++;
		want += want % 3 == 1 ? 1 : 2;
	}
	ATF_CHECK_EQ(seen, 1100 - 367);
	ATF_CHECK_EQ(i, 1100);
	/* At the end it stays at the end. */
	ATF_CHECK(rsd__ptab_next(&t, &i) == NULL);
	ATF_CHECK_EQ(i, 1100);
	fixture_end(f, &t.pv);
}

ATF_TC_WITHOUT_HEAD(walk_skips_missing_subtrees);
ATF_TC_BODY(walk_skips_missing_subtrees, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_ptab t = { 0 };
	uint64_t i = 0;

	/* Slot 5, then slot 40000: every subtree between them is missing. */
	ATF_REQUIRE_EQ(rsd__pv_set(&t.pv, 5, val(5), 1, &f->rt), 0);
	ATF_REQUIRE_EQ(rsd__pv_set(&t.pv, 40000, val(40000), 1, &f->rt), 0);
	ATF_CHECK_EQ(rsd__ptab_next(&t, &i), val(5));
	ATF_CHECK_EQ(i, 6);
	ATF_CHECK_EQ(rsd__ptab_next(&t, &i), val(40000));
	ATF_CHECK_EQ(i, 40001);
	ATF_CHECK(rsd__ptab_next(&t, &i) == NULL);
	/* Starting inside the gap finds the next object. */
	i = 1000;
	ATF_CHECK_EQ(rsd__ptab_next(&t, &i), val(40000));
	/* An empty table has nothing. */
	i = 0;
	ATF_CHECK(rsd__ptab_next(&(struct rsd_ptab){ 0 }, &i) == NULL);
	ATF_CHECK_EQ(i, 0);
	fixture_end(f, &t.pv);
}

ATF_TC_WITHOUT_HEAD(sparse_threshold);
ATF_TC_BODY(sparse_threshold, tc)
{
	/* Rebuilt once the holes exceed the objects by more than 32. */
	ATF_CHECK(!rsd__ptab_sparse(0, 0));
	ATF_CHECK(!rsd__ptab_sparse(32, 0));
	ATF_CHECK(rsd__ptab_sparse(33, 0));
	ATF_CHECK(!rsd__ptab_sparse(64, 16));
	ATF_CHECK(rsd__ptab_sparse(65, 16));
	ATF_CHECK(!rsd__ptab_sparse(64000, 64000));
	ATF_CHECK(!rsd__ptab_sparse(128032, 64000));
	ATF_CHECK(rsd__ptab_sparse(128033, 64000));
}

ATF_TC_WITHOUT_HEAD(retire_every_node);
ATF_TC_BODY(retire_every_node, tc)
{
	struct fixture *f = fixture_new();
	struct rsd_ptab t = { 0 };
	size_t nodes = 0;

	for (uint64_t k = 0; k < 1100; k++)
		ATF_REQUIRE_EQ(rsd__pv_set(&t.pv, k, val(k), 1, &f->rt), 0);
	ATF_REQUIRE_EQ(f->rt.nretired, 0);
	ATF_REQUIRE_EQ(rsd__ptab_retire_nodes(&t, &f->rt), 0);
	/* One retirement for the tree, which frees its nodes when run. */
	ATF_REQUIRE_EQ(f->rt.nretired, 1);
	ATF_REQUIRE(f->rt.retired[0].fn != NULL);
	f->rt.retired[0].fn(&f->m, f->rt.retired[0].p);
	f->rt.nretired = 0;
	/* A root, two inner nodes and 35 leaves (1100 = 34 * 32 + 12), given
	 * back to the slab as from the reclaimer; none of the values. */
	for (void **p = atomic_load(&f->m.oc.remote); p; p = *p)
		nodes++;
	if (!RSD__SLAB_PASSTHROUGH)
		ATF_CHECK_EQ(nodes, 38);
	/* An empty table retires nothing. */
	ATF_CHECK_EQ(rsd__ptab_retire_nodes(&(struct rsd_ptab){ 0 }, &f->rt), 0);
	ATF_CHECK_EQ(f->rt.nretired, 0);
	/* A failed publication takes the retirement back: the tree stays
	 * (freed below as the live table), its record goes (a leak under
	 * the sanitizers otherwise). */
	t = (struct rsd_ptab){ 0 };
	for (uint64_t k = 0; k < 40; k++)
		ATF_REQUIRE_EQ(rsd__pv_set(&t.pv, k, val(k), 1, &f->rt), 0);
	ATF_REQUIRE_EQ(rsd__ptab_retire_nodes(&t, &f->rt), 0);
	ATF_REQUIRE_EQ(f->rt.nretired, 1);
	rsd__ptab_retire_undo(&f->rt, 0);
	f->rt.nretired = 0;
	ATF_CHECK_EQ(rsd__pv_get(&t.pv, 39), val(39));
	fixture_end(f, &t.pv);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, append_copies_nothing);
	ATF_TP_ADD_TC(tp, update_copies_path);
	ATF_TP_ADD_TC(tp, rollback_clears_appends);
	ATF_TP_ADD_TC(tp, sparse_slots);
	ATF_TP_ADD_TC(tp, walk_skips_holes);
	ATF_TP_ADD_TC(tp, walk_skips_missing_subtrees);
	ATF_TP_ADD_TC(tp, sparse_threshold);
	ATF_TP_ADD_TC(tp, retire_every_node);
	return atf_no_error();
}
