// SPDX-License-Identifier: MIT
/*
 * Holds (semantics.md §10.6, §10.8, §10.9; edge cases 24, 27, 36, 37, 39,
 * 44): what a hold blocks (drop, move from, discard) and what it does not
 * (ensure reading it, acquire, other holds), the per-materialization and
 * per-location counts, all-or-nothing acquisition, idempotent release and
 * abandonment.
 */
#include <atf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

static struct rsd_simdev *sd;
static struct rsd_manager *m;
static unsigned nwarn;
static char lastwarn[512];

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	nwarn++;
	snprintf(lastwarn, sizeof(lastwarn), "%s", msg);
}

/* A manager on the simulated device, or a host-only one. */
static void setup(bool host_only)
{
	struct rsd_simdev_config sc = { .ndevices = 2, .auto_complete = false, .pooled = true };
	struct rsd_manager_config cfg = { 0 };

	if (!host_only) {
		ATF_REQUIRE_EQ(rsd_simdev_create(&sc, &sd), 0);
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = sd;
	}
	cfg.host_only = host_only;
	cfg.warn = on_warn;
	ATF_REQUIRE_EQ(rsd_manager_create(&cfg, &m), 0);
}

static void teardown(void)
{
	rsd_manager_destroy(m);
	m = NULL;
	if (sd)
		rsd_simdev_destroy(sd);
	sd = NULL;
}

static struct rsd_location cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

/* Adopt a fresh n-byte REPLICABLE value at a location. */
static struct rsd_handle put(struct rsd_location at, uint64_t n, struct rsd_resident **rp)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &r), 0);
	ATF_REQUIRE_EQ(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h), 0);
	if (rp)
		*rp = r;
	return h;
}

static uint64_t ver(void)
{
	uint64_t v = 0;

	ATF_REQUIRE_EQ(rsd_manager_state_version_get(m, &v), 0);
	return v;
}

static bool msg_has(const char *s)
{
	return strstr(rsd_last_error()->message, s) != NULL;
}

static struct rsd_snapshot *snap(void)
{
	struct rsd_snapshot *s = NULL;

	ATF_REQUIRE_EQ(rsd_snapshot_take(m, &s), 0);
	return s;
}

static const struct rsd_materialization_snapshot *
mat_in(const struct rsd_snapshot *s, struct rsd_handle h, struct rsd_location at)
{
	for (size_t i = 0; i < s->nvalues; i++) {
		if (!rsd_handle_equal(s->values[i].handle, h))
			continue;
		for (size_t j = 0; j < s->values[i].nmaterializations; j++)
			if (rsd_location_equal(s->values[i].materializations[j].location, at))
				return &s->values[i].materializations[j];
	}
	return NULL;
}

static const struct rsd_location_snapshot *loc_in(const struct rsd_snapshot *s,
						  struct rsd_location at)
{
	for (size_t i = 0; i < s->nlocations; i++)
		if (rsd_location_equal(s->locations[i].location, at))
			return &s->locations[i];
	return NULL;
}

/* The protection counts of h's materialization at a location. */
#define CHECK_MAT(h, at, use, hold, pend) check_mat(__LINE__, h, at, use, hold, pend)
static void check_mat(int line, struct rsd_handle h, struct rsd_location at, uint64_t use,
		      uint64_t hold, uint64_t pend)
{
	struct rsd_snapshot *s = snap();
	const struct rsd_materialization_snapshot *x = mat_in(s, h, at);

	ATF_CHECK_MSG(x != NULL, "line %d: value %llu has no materialization there", line,
		      (unsigned long long)h.id);
	if (x) {
		ATF_CHECK_EQ_MSG(x->use_count, use, "line %d: use_count %llu, expected %llu", line,
				 (unsigned long long)x->use_count, (unsigned long long)use);
		ATF_CHECK_EQ_MSG(x->hold_count, hold, "line %d: hold_count %llu, expected %llu", line,
				 (unsigned long long)x->hold_count, (unsigned long long)hold);
		ATF_CHECK_EQ_MSG(x->pending_event_count, pend,
				 "line %d: pending_event_count %llu, expected %llu", line,
				 (unsigned long long)x->pending_event_count, (unsigned long long)pend);
	}
	rsd_snapshot_free(s);
}

/* The location's sums of protection counts over its materializations. */
#define CHECK_LOC(at, use, hold, pend) check_loc(__LINE__, at, use, hold, pend)
static void check_loc(int line, struct rsd_location at, uint64_t use, uint64_t hold, uint64_t pend)
{
	struct rsd_snapshot *s = snap();
	const struct rsd_location_snapshot *x = loc_in(s, at);

	ATF_CHECK_MSG(x != NULL, "line %d: location not known", line);
	if (x) {
		ATF_CHECK_EQ_MSG(x->use_count, use, "line %d: location use_count %llu, expected %llu",
				 line, (unsigned long long)x->use_count, (unsigned long long)use);
		ATF_CHECK_EQ_MSG(x->hold_count, hold,
				 "line %d: location hold_count %llu, expected %llu", line,
				 (unsigned long long)x->hold_count, (unsigned long long)hold);
		ATF_CHECK_EQ_MSG(x->pending_event_count, pend,
				 "line %d: location pending_event_count %llu, expected %llu", line,
				 (unsigned long long)x->pending_event_count, (unsigned long long)pend);
	}
	rsd_snapshot_free(s);
}

#define CHECK_VER(expected) check_ver(__LINE__, expected)
static void check_ver(int line, uint64_t expected)
{
	uint64_t v = ver();

	ATF_CHECK_EQ_MSG(v, expected, "line %d: state_version %llu, expected %llu", line,
			 (unsigned long long)v, (unsigned long long)expected);
}

static int nmats(struct rsd_handle h)
{
	struct rsd_snapshot *s = snap();
	int n = -1;

	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			n = (int)s->values[i].nmaterializations;
	rsd_snapshot_free(s);
	return n;
}

ATF_TC_WITHOUT_HEAD(hold_blocks_removals);
ATF_TC_BODY(hold_blocks_removals, tc)
{
	struct rsd_location pg = RSD_LOC_PAGEABLE_HOST, pin = RSD_LOC_PINNED_HOST;
	struct rsd_transition rep;
	struct rsd_hold *hd = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd2 = NULL;
	struct rsd_handle a;
	uint64_t v;

	setup(false);
	a = put(pg, 64, NULL);
	ATF_REQUIRE_EQ(rsd_ensure(m, a, pin, NULL, NULL), 0);
	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, pg, &hd), 0);
	ATF_CHECK(rsd_hold_active(hd));
	CHECK_MAT(a, pg, 0, 1, 0);
	CHECK_MAT(a, pin, 0, 0, 0);
	v = ver();

	ATF_CHECK_EQ(rsd_drop(m, a, pg, NULL), -RSD_EINUSE);
	/* Move from the held replica, explicitly ... */
	ATF_CHECK_EQ(rsd_move(m, a, cuda(0), &pg, NULL, NULL), -RSD_EINUSE);
	/* ... or implicitly: pageable is the canonical first source. */
	ATF_CHECK_EQ(rsd_move(m, a, cuda(0), NULL, NULL, NULL), -RSD_EINUSE);
	/* Move onto the resident pinned replica removes the best other one,
	 * the held pageable replica (edge case 24). */
	ATF_CHECK_EQ(rsd_move(m, a, pin, NULL, NULL, NULL), -RSD_EINUSE);
	ATF_CHECK_EQ(rsd_discard(m, a, NULL), -RSD_EINUSE);
	CHECK_VER(v);
	ATF_CHECK_EQ(nmats(a), 2);
	ATF_CHECK_EQ(rsd_manager_locations(m, NULL, 0), 2); /* cuda:0 not recorded */

	/* Not blocked: reading it, leasing it, holding it again. */
	ATF_REQUIRE_EQ(rsd_ensure(m, a, cuda(0), NULL, &rep), 0);
	ATF_CHECK(!rep.no_op);
	ATF_CHECK(rep.has_source && rsd_location_equal(rep.source, pg));
	CHECK_VER(v + 2); /* new location, install */
	ATF_REQUIRE_EQ(rsd_acquire(m, &a, 1, pg, NULL, &l), 0);
	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, pg, &hd2), 0);
	CHECK_MAT(a, pg, 1, 2, 0);
	CHECK_VER(v + 4);
	/* An unheld replica moves freely. */
	ATF_REQUIRE_EQ(rsd_move(m, a, cuda(1), &pin, NULL, NULL), 0);
	ATF_CHECK_EQ(rsd_drop(m, a, cuda(0), NULL), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	ATF_REQUIRE_EQ(rsd_hold_release(hd2), 0);
	ATF_CHECK_EQ(rsd_drop(m, a, pg, NULL), -RSD_EINUSE);

	/* Released: the removals go through. */
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	ATF_CHECK(!rsd_hold_active(hd));
	ATF_CHECK_EQ(rsd_drop(m, a, pg, NULL), 0);
	ATF_CHECK_EQ(rsd_discard(m, a, NULL), 0);
	rsd_hold_free(hd);
	rsd_hold_free(hd2);
	rsd_lease_free(l);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
}

/* Edge case 27: protection is checked before the last-copy rule. */
ATF_TC_WITHOUT_HEAD(held_last_copy);
ATF_TC_BODY(held_last_copy, tc)
{
	struct rsd_location pg = RSD_LOC_PAGEABLE_HOST;
	struct rsd_hold *hd = NULL;
	struct rsd_handle a;
	uint64_t v;

	setup(true);
	a = put(pg, 64, NULL);
	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, pg, &hd), 0);
	v = ver();
	ATF_CHECK_EQ(rsd_drop(m, a, pg, NULL), -RSD_EINUSE);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	ATF_CHECK_EQ(rsd_drop(m, a, pg, NULL), -RSD_EOWNERSHIP);
	CHECK_VER(v + 1);
	rsd_hold_free(hd);
	teardown();
}

/* Edge case 44 and first-occurrence dedup. */
ATF_TC_WITHOUT_HEAD(hold_counts);
ATF_TC_BODY(hold_counts, tc)
{
	struct rsd_location pin = RSD_LOC_PINNED_HOST;
	struct rsd_hold *h1 = NULL, *h2 = NULL;
	struct rsd_handle a, b, c, set[3];
	uint64_t v;

	setup(true);
	a = put(pin, 64, NULL);
	b = put(pin, 32, NULL);
	c = put(RSD_LOC_PAGEABLE_HOST, 32, NULL);
	set[0] = a;
	set[1] = b;
	set[2] = a;
	v = ver();
	ATF_REQUIRE_EQ(rsd_hold(m, set, 3, pin, &h1), 0);
	CHECK_VER(v + 1);
	CHECK_MAT(a, pin, 0, 1, 0);
	CHECK_MAT(b, pin, 0, 1, 0);
	CHECK_LOC(pin, 0, 2, 0);
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	CHECK_MAT(c, RSD_LOC_PAGEABLE_HOST, 0, 0, 0);

	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, pin, &h2), 0);
	CHECK_VER(v + 2);
	CHECK_MAT(a, pin, 0, 2, 0);
	CHECK_LOC(pin, 0, 3, 0);

	ATF_REQUIRE_EQ(rsd_hold_release(h1), 0);
	CHECK_VER(v + 3);
	CHECK_MAT(a, pin, 0, 1, 0);
	CHECK_MAT(b, pin, 0, 0, 0);
	CHECK_LOC(pin, 0, 1, 0);
	ATF_REQUIRE_EQ(rsd_hold_release(h2), 0);
	CHECK_LOC(pin, 0, 0, 0);
	CHECK_VER(v + 4);
	rsd_hold_free(h1);
	rsd_hold_free(h2);
	teardown();
}

/* Edge cases 36, 37 for holds, and the P-life prologue. */
ATF_TC_WITHOUT_HEAD(hold_errors);
ATF_TC_BODY(hold_errors, tc)
{
	struct rsd_location locs[8];
	struct rsd_hold *hd = NULL;
	struct rsd_handle a, b, set[2];
	size_t nlocs;
	uint64_t v;

	setup(false);
	a = put(cuda(0), 64, NULL);
	b = put(cuda(1), 64, NULL);
	set[0] = a;
	set[1] = b;
	nlocs = rsd_manager_locations(m, locs, 8);
	v = ver();
	ATF_CHECK_EQ(rsd_hold(m, set, 2, cuda(0), &hd), -RSD_EUNAVAILABLE);
	ATF_CHECK(msg_has("cuda:0"));
	CHECK_MAT(a, cuda(0), 0, 0, 0);
	CHECK_LOC(cuda(0), 0, 0, 0);
	ATF_CHECK_EQ(rsd_hold(m, set, 0, cuda(0), &hd), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd_hold(m, NULL, 2, cuda(0), &hd), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_hold(m, set, 2, cuda(0), NULL), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_hold(NULL, set, 2, cuda(0), &hd), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_hold(m, &a, 1, cuda(2), &hd), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd_hold(m, &a, 1, RSD_LOC_PINNED_HOST, &hd), -RSD_EUNAVAILABLE);
	ATF_CHECK(hd == NULL);
	CHECK_VER(v);
	ATF_CHECK_EQ(rsd_manager_locations(m, locs, 8), nlocs);

	/* A GPU hold needs no stream. */
	ATF_REQUIRE_EQ(rsd_hold(m, &b, 1, cuda(1), &hd), 0);
	CHECK_MAT(b, cuda(1), 0, 1, 0);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	rsd_hold_free(hd);
	ATF_REQUIRE_EQ(rsd_manager_close(m, 0), 0);
	hd = NULL;
	ATF_CHECK_EQ(rsd_hold(m, &a, 1, cuda(0), &hd), -RSD_ECLOSED);
	ATF_CHECK(hd == NULL);
	teardown();
}

/* Edge case 39 for holds: release is idempotent, +1 on the first. */
ATF_TC_WITHOUT_HEAD(hold_release_idempotent);
ATF_TC_BODY(hold_release_idempotent, tc)
{
	struct rsd_hold *hd = NULL;
	struct rsd_handle a;
	uint64_t v;

	setup(true);
	a = put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, RSD_LOC_PAGEABLE_HOST, &hd), 0);
	v = ver();
	ATF_CHECK_EQ(rsd_hold_release(hd), 0);
	CHECK_VER(v + 1);
	ATF_CHECK(!rsd_hold_active(hd));
	ATF_CHECK_EQ(rsd_hold_release(hd), 0);
	ATF_CHECK_EQ(rsd_hold_release(hd), 0);
	CHECK_VER(v + 1);
	CHECK_MAT(a, RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	ATF_CHECK_EQ(rsd_hold_release(NULL), -RSD_ETYPE);
	ATF_CHECK(!rsd_hold_active(NULL));
	rsd_hold_free(hd);
	rsd_hold_free(NULL);
	ATF_CHECK_EQ(nwarn, 0);
	teardown();
}

/* §10.9: a freed active hold is released (+1) with a warning. */
ATF_TC_WITHOUT_HEAD(abandoned_hold);
ATF_TC_BODY(abandoned_hold, tc)
{
	struct rsd_hold *hd = NULL;
	struct rsd_handle a;
	uint64_t v;

	setup(true);
	a = put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	ATF_REQUIRE_EQ(rsd_hold(m, &a, 1, RSD_LOC_PAGEABLE_HOST, &hd), 0);
	v = ver();
	rsd_hold_free(hd);
	CHECK_VER(v + 1);
	ATF_CHECK_EQ(nwarn, 1);
	ATF_CHECK(strstr(lastwarn, "hold") != NULL);
	CHECK_LOC(RSD_LOC_PAGEABLE_HOST, 0, 0, 0);
	ATF_CHECK_EQ(rsd_drop(m, a, RSD_LOC_PAGEABLE_HOST, NULL), -RSD_EOWNERSHIP);
	teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, hold_blocks_removals);
	ATF_TP_ADD_TC(tp, held_last_copy);
	ATF_TP_ADD_TC(tp, hold_counts);
	ATF_TP_ADD_TC(tp, hold_errors);
	ATF_TP_ADD_TC(tp, hold_release_idempotent);
	ATF_TP_ADD_TC(tp, abandoned_hold);
	return atf_no_error();
}
