// SPDX-License-Identifier: MIT
/*
 * Protection counts as readers see them (reference.md §5.4, §8.2-§8.6,
 * §14). Lease and hold calls append their count changes to the published
 * image's protection log instead of re-imaging the values
 * (Documentation/design.md, "The protection log"); these tests drive that
 * log through its limits:
 * more protected values than it holds, a lease wider than it, a full
 * publication folding it, and a reader racing it. Every figure a snapshot,
 * explain or state_version reports must equal what it was without it.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "lfx.h"

#define PG RSD_LOC_PAGEABLE_HOST
#define PIN RSD_LOC_PINNED_HOST

/* More values than a view holds net changes for (RSD_PROT_NET_MAX, 32). */
#define NVALS 40

/* Every value's use count is 1 for the first `leased` values, 0 after. */
static void check_uses(const struct rsd_handle *h, size_t n, size_t leased, int line)
{
	struct rsd_snapshot *s = lfx_snap();
	const struct rsd_location_snapshot *l = lfx_loc_in(s, PG);

	for (size_t i = 0; i < n; i++) {
		const struct rsd_materialization_snapshot *mat = lfx_mat_in(s, h[i], PG);

		ATF_REQUIRE_MSG(mat, "line %d: value %zu has no pageable replica", line, i);
		ATF_CHECK_EQ_MSG(mat->use_count, i < leased ? 1u : 0u, "line %d: value %zu", line,
				 i);
		ATF_CHECK_EQ_MSG(mat->hold_count, 0u, "line %d: value %zu", line, i);
	}
	ATF_REQUIRE(l);
	ATF_CHECK_EQ_MSG(l->use_count, leased, "line %d: location use_count", line);
	rsd_snapshot_free(s);
}

ATF_TC_WITHOUT_HEAD(leases_beyond_delta);
ATF_TC_BODY(leases_beyond_delta, tc)
{
	struct rsd_handle h[NVALS];
	struct rsd_lease *l[NVALS];
	uint64_t v;

	lfx_setup(true);
	for (size_t i = 0; i < NVALS; i++)
		h[i] = lfx_put(PG, 64, NULL);
	v = lfx_ver();
	/* One lease per value: the log fills, overflows into a full
	 * publication and fills again. Each acquire is exactly +1. */
	for (size_t i = 0; i < NVALS; i++) {
		RSD_REQUIRE_OK(rsd_acquire(lfx_m, &h[i], 1, PG, NULL, &l[i]));
		CHECK_VER(v + i + 1);
		check_uses(h, NVALS, i + 1, __LINE__);
	}
	for (size_t i = NVALS; i-- > 0;) {
		RSD_REQUIRE_OK(rsd_lease_release(l[i], 0));
		rsd_lease_free(l[i]);
		CHECK_VER(v + NVALS + (NVALS - i));
		check_uses(h, NVALS, i, __LINE__);
	}
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(one_lease_wider_than_delta);
ATF_TC_BODY(one_lease_wider_than_delta, tc)
{
	struct rsd_handle h[NVALS];
	struct rsd_lease *l;
	struct rsd_handle got;
	uint64_t v;

	lfx_setup(true);
	for (size_t i = 0; i < NVALS; i++)
		h[i] = lfx_put(PG, 64, NULL);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, h, NVALS, PG, NULL, &l));
	CHECK_VER(v + 1);
	check_uses(h, NVALS, NVALS, __LINE__);
	/* A handle set beyond the object's inline room keeps every handle. */
	ATF_CHECK_EQ(rsd_lease_count(l), (size_t)NVALS);
	RSD_REQUIRE_OK(rsd_lease_handle_at(l, NVALS - 1, &got));
	ATF_CHECK(rsd_handle_equal(got, h[NVALS - 1]));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	CHECK_VER(v + 2);
	check_uses(h, NVALS, 0, __LINE__);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(delta_folded_by_transition);
ATF_TC_BODY(delta_folded_by_transition, tc)
{
	struct rsd_handle a, b, c;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	uint64_t v;

	lfx_setup(true);
	a = lfx_put(PG, 64, NULL);
	b = lfx_put(PG, 64, NULL);
	c = lfx_put(PG, 64, NULL);
	/* Second replicas, so that only protection can forbid the drops. */
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, a, PIN, NULL, NULL));
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, b, PIN, NULL, NULL));
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, PG, NULL, &l));
	RSD_REQUIRE_OK(rsd_hold(lfx_m, &b, 1, PG, &hd));
	CHECK_MAT(a, PG, 1, 0, 0);
	CHECK_MAT(b, PG, 0, 1, 0);
	CHECK_LOC(PG, 1, 1, 0);
	ATF_CHECK(!lfx_drop_feasible(a, PG));
	ATF_CHECK(!lfx_drop_feasible(b, PG));
	ATF_CHECK(lfx_drop_feasible(a, PIN));
	/* A transition publishes in full: the counts move into the images. */
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, c, PIN, NULL, NULL));
	CHECK_VER(v + 3); /* acquire, hold, install */
	ATF_CHECK(lfx_drop_feasible(c, PG));
	CHECK_MAT(a, PG, 1, 0, 0);
	CHECK_MAT(b, PG, 0, 1, 0);
	CHECK_LOC(PG, 1, 1, 0);
	CHECK_LOC(PIN, 0, 0, 0);
	ATF_CHECK(!lfx_drop_feasible(a, PG));
	ATF_CHECK(!lfx_drop_feasible(b, PG));
	/* Releases after the fold are logged again, now negative changes. */
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	CHECK_MAT(a, PG, 0, 0, 0);
	CHECK_LOC(PG, 0, 1, 0);
	ATF_CHECK(lfx_drop_feasible(a, PG));
	ATF_CHECK(!lfx_drop_feasible(b, PG));
	/* A lease and a hold on one materialization count separately. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &b, 1, PG, NULL, &l));
	CHECK_MAT(b, PG, 1, 1, 0);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	CHECK_MAT(b, PG, 1, 0, 0);
	ATF_CHECK(!lfx_drop_feasible(b, PG));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(lfx_m, b, PG, NULL));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	CHECK_MAT(b, PG, 0, 0, 0);
	CHECK_LOC(PG, 0, 0, 0);
	ATF_CHECK(lfx_drop_feasible(b, PG));
	CHECK_VER(v + 7);
	RSD_REQUIRE_OK(rsd_drop(lfx_m, b, PG, NULL));
	lfx_teardown();
}

/*
 * A reader racing a writer that acquires and releases one lease: every
 * snapshot must pair its state_version with its counts. Starting from
 * version v0 with no lease, an odd distance means the lease is held.
 */
struct race {
	struct rsd_handle h;
	uint64_t v0;
	atomic_bool stop;
	unsigned long seen, bad;
	char why[256];
};

static void *reader(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop)) {
		struct rsd_snapshot *s;
		const struct rsd_materialization_snapshot *mat;
		const struct rsd_location_snapshot *l;
		uint64_t want;

		if (rsd_snapshot_take(lfx_m, &s))
			continue;
		mat = lfx_mat_in(s, r->h, PG);
		l = lfx_loc_in(s, PG);
		want = (s->state_version - r->v0) % 2;
		if (!mat || !l || mat->use_count != want || l->use_count != want) {
			if (!r->bad++)
				snprintf(r->why, sizeof(r->why),
					 "version %llu: use_count %llu, location %llu, want %llu",
					 (unsigned long long)s->state_version,
					 mat ? (unsigned long long)mat->use_count : 99ull,
					 l ? (unsigned long long)l->use_count : 99ull,
					 (unsigned long long)want);
		}
		r->seen++;
		rsd_snapshot_free(s);
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(reader_sees_counts_with_their_version);
ATF_TC_BODY(reader_sees_counts_with_their_version, tc)
{
	struct race r;
	pthread_t t;

	memset(&r, 0, sizeof(r));
	lfx_setup(true);
	r.h = lfx_put(PG, 64, NULL);
	/* Other values make the log's folds land between reads. */
	for (int i = 0; i < 3; i++)
		(void)lfx_put(PG, 64, NULL);
	r.v0 = lfx_ver();
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, reader, &r), 0);
	for (int i = 0; i < 20000; i++) {
		struct rsd_lease *l;

		RSD_REQUIRE_OK(rsd_acquire(lfx_m, &r.h, 1, PG, NULL, &l));
		RSD_REQUIRE_OK(rsd_lease_release(l, 0));
		rsd_lease_free(l);
	}
	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	ATF_CHECK_MSG(r.bad == 0, "%lu of %lu snapshots torn; first: %s", r.bad, r.seen, r.why);
	ATF_CHECK(r.seen > 0);
	CHECK_VER(r.v0 + 40000);
	CHECK_MAT(r.h, PG, 0, 0, 0);
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, leases_beyond_delta);
	ATF_TP_ADD_TC(tp, one_lease_wider_than_delta);
	ATF_TP_ADD_TC(tp, delta_folded_by_transition);
	ATF_TP_ADD_TC(tp, reader_sees_counts_with_their_version);
	return 0;
}
