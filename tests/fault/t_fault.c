// SPDX-License-Identifier: MIT
/*
 * The fault-injection interface (rsd/fault.h): argument checks, the list of
 * points, counting, one-shot arming, subject matching, and the "acquire"
 * and "reserve" points failing their calls with nothing changed.
 */
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "internal.h"

static struct rsd_manager *host_manager(void)
{
	struct rsd_manager_config cfg = { 0 };
	struct rsd_manager *m = NULL;

	cfg.host_only = true;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	return m;
}

static struct rsd_handle put(struct rsd_manager *m, uint64_t n)
{
	struct rsd_location at = RSD_LOC_PAGEABLE_HOST;
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h));
	return h;
}

static uint64_t ver(struct rsd_manager *m)
{
	uint64_t v = 0;

	RSD_REQUIRE_OK(rsd_manager_state_version_get(m, &v));
	return v;
}

ATF_TC_WITHOUT_HEAD(points_listed);
ATF_TC_BODY(points_listed, tc)
{
	const char *names[8] = { 0 };
	size_t n = rsd_fault_points(names, 8);

	ATF_REQUIRE_EQ(n, 4);
	ATF_CHECK_STREQ(names[0], "alloc");
	ATF_CHECK_STREQ(names[1], "acquire");
	ATF_CHECK_STREQ(names[2], "reserve");
	ATF_CHECK_STREQ(names[3], "resident");
	ATF_CHECK(names[4] == NULL);
	/* A short array gets the first cap names and the full count. */
	memset(names, 0, sizeof(names));
	ATF_CHECK_EQ(rsd_fault_points(names, 1), 4);
	ATF_CHECK_STREQ(names[0], "alloc");
	ATF_CHECK(names[1] == NULL);
	ATF_CHECK_EQ(rsd_fault_points(NULL, 0), 4);
}

ATF_TC_WITHOUT_HEAD(bad_arguments);
ATF_TC_BODY(bad_arguments, tc)
{
	RSD_CHECK_ERR(RSD_ETYPE, rsd_fault_inject(NULL, NULL, 1, RSD_ENOMEM));
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_fault_inject("nosuch", NULL, 1, RSD_ENOMEM));
	ATF_CHECK(strstr(rsd_last_error()->message, "'nosuch'") != NULL);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_fault_inject("reserve", NULL, 1, 0));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_fault_inject("reserve", NULL, 1, -RSD_EBUDGET));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_fault_inject("reserve", NULL, 1, RSD_EMAX));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_fault_inject("alloc", NULL, 1, RSD_EDEVICE));
	ATF_CHECK(strstr(rsd_last_error()->message, "RSD_ENOMEM") != NULL);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_fault_inject("reserve", " ", 1, RSD_EBUDGET));
	/* Nothing above armed anything. */
	ATF_CHECK(!rsd__fault_on());
	/* Disarming ignores err, and an unarmed point disarms quietly. */
	RSD_CHECK_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	ATF_CHECK_EQ(rsd_fault_hits(NULL), 0);
	ATF_CHECK_EQ(rsd_fault_hits("nosuch"), 0);
}

ATF_TC_WITHOUT_HEAD(counts_only_while_armed);
ATF_TC_BODY(counts_only_while_armed, tc)
{
	struct rsd_manager *m = host_manager();
	uint64_t h0 = rsd_fault_hits("alloc"), h1;

	put(m, 64);
	ATF_CHECK_EQ(rsd_fault_hits("alloc"), h0);
	/* Armed far away: every allocation counts, none fails. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, UINT64_MAX, RSD_ENOMEM));
	ATF_CHECK(rsd__fault_on());
	put(m, 64);
	h1 = rsd_fault_hits("alloc");
	ATF_CHECK_MSG(h1 > h0, "adopt made no counted allocation (%llu)",
		      (unsigned long long)(h1 - h0));
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	ATF_CHECK(!rsd__fault_on());
	put(m, 64);
	ATF_CHECK_EQ(rsd_fault_hits("alloc"), h1);
	rsd_manager_destroy(m);
}

ATF_TC_WITHOUT_HEAD(alloc_fails_once);
ATF_TC_BODY(alloc_fails_once, tc)
{
	struct rsd_manager *m = host_manager();
	struct rsd_handle h = put(m, 64);
	struct rsd_reservation *r = NULL;
	uint64_t v = ver(m), fired = rsd__fault_fired(NULL, 0);
	char site[128];

	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 1, RSD_ENOMEM));
	RSD_CHECK_ERR(RSD_ENOMEM, rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "ws", &r));
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ENOMEM);
	ATF_CHECK_EQ(rsd__fault_fired(site, sizeof(site)), fired + 1);
	ATF_CHECK_MSG(strncmp(site, "lib/core/hold.c:", 16) == 0, "site %s", site);
	ATF_CHECK_EQ(ver(m), v);
	/* Fired once, then disarmed: the retry succeeds. */
	ATF_CHECK(!rsd__fault_on());
	RSD_REQUIRE_OK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "ws", &r));
	rsd_reservation_free(r);
	/* A site that never allocates in this call: nothing fails. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", "lib/nowhere.c:1", 1, RSD_ENOMEM));
	RSD_REQUIRE_OK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "ws", &r));
	rsd_reservation_free(r);
	/* The site itself fails when matched. */
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", site, 1, RSD_ENOMEM));
	RSD_CHECK_ERR(RSD_ENOMEM, rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "ws", &r));
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	(void)h;
	rsd_manager_destroy(m);
}

ATF_TC_WITHOUT_HEAD(reserve_point);
ATF_TC_BODY(reserve_point, tc)
{
	struct rsd_manager *m = host_manager();
	struct rsd_reservation *a = NULL, *b = NULL;
	struct rsd_snapshot *s;
	uint64_t v = ver(m);

	/* Only reservations labelled "b" count; the second of them fails. */
	RSD_REQUIRE_OK(rsd_fault_inject("reserve", "b", 2, RSD_EBUDGET));
	RSD_REQUIRE_OK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "b", &b));
	RSD_REQUIRE_OK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "a", &a));
	rsd_reservation_free(b);
	b = NULL;
	v = ver(m);
	RSD_CHECK_ERR(RSD_EBUDGET, rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "b", &b));
	ATF_CHECK(b == NULL);
	ATF_CHECK(strstr(rsd_last_error()->message, "'reserve'") != NULL);
	ATF_CHECK_EQ(ver(m), v);
	RSD_REQUIRE_OK(rsd_snapshot_take(m, &s));
	ATF_CHECK_EQ(s->nreservations, 1);
	rsd_snapshot_free(s);
	RSD_REQUIRE_OK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 8, "b", &b));
	rsd_reservation_free(a);
	rsd_reservation_free(b);
	rsd_manager_destroy(m);
}

ATF_TC_WITHOUT_HEAD(acquire_point);
ATF_TC_BODY(acquire_point, tc)
{
	struct rsd_manager *m = host_manager();
	struct rsd_handle h = put(m, 64);
	struct rsd_lease *l = NULL;
	uint64_t v = ver(m), hits = rsd_fault_hits("acquire");

	RSD_REQUIRE_OK(rsd_fault_inject("acquire", "pinned-host", 1, RSD_EDEVICE));
	/* A pageable acquire is not the subject: it succeeds. */
	RSD_REQUIRE_OK(rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	rsd_lease_free(l);
	l = NULL;
	RSD_REQUIRE_OK(rsd_fault_inject("acquire", NULL, 1, RSD_EDEVICE));
	v = ver(m);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	ATF_CHECK(l == NULL);
	ATF_CHECK(strstr(rsd_last_error()->message, "'acquire'") != NULL);
	ATF_CHECK_EQ(ver(m), v);
	ATF_CHECK_EQ(rsd_fault_hits("acquire"), hits + 2);
	/* Argument errors come first: a NULL out never reaches the point. */
	RSD_REQUIRE_OK(rsd_fault_inject("acquire", NULL, 1, RSD_EDEVICE));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	RSD_REQUIRE_ERR(RSD_EDEVICE, rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	RSD_REQUIRE_OK(rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	rsd_lease_free(l);
	rsd_manager_destroy(m);
}

ATF_TC_WITHOUT_HEAD(resident_point);
ATF_TC_BODY(resident_point, tc)
{
	struct rsd_manager *m = host_manager();
	struct rsd_handle h = put(m, 64);
	struct rsd_resident *r = NULL;
	struct rsd_transition t;
	uint64_t n = 8, v;

	/* A value's storage: rsd_resident_alloc itself... */
	RSD_REQUIRE_OK(rsd_fault_inject("resident", "pageable-host", 1, RSD_ENOMEM));
	RSD_CHECK_ERR(RSD_ENOMEM, rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST,
						     1, &n, NULL, 0, &r));
	ATF_CHECK(r == NULL);
	/* ...and the copy a transition makes, here as a device would fail. */
	RSD_REQUIRE_OK(rsd_fault_inject("resident", NULL, 1, RSD_EDEVICE));
	v = ver(m);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_ensure(m, h, RSD_LOC_PINNED_HOST, NULL, &t));
	ATF_CHECK(strstr(rsd_last_error()->message, "'resident'") != NULL);
	ATF_CHECK_EQ(ver(m), v);
	RSD_REQUIRE_OK(rsd_ensure(m, h, RSD_LOC_PINNED_HOST, NULL, &t));
	rsd_manager_destroy(m);
}

/* Inside a scope the reserve point is the scope's reserve phase failing:
 * -RSD_EEXEC, the reclaim prefix committed, no reservation left. */
ATF_TC_WITHOUT_HEAD(reserve_point_in_scope);
ATF_TC_BODY(reserve_point_in_scope, tc)
{
	struct rsd_manager *m = host_manager();
	struct rsd_handle h = put(m, 64);
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 8, "zero" },
					     { RSD_LOC_PAGEABLE_HOST, 8, "one" } };
	struct rsd_action reclaim = rsd_action_ensure(h, RSD_LOC_PINNED_HOST);
	struct rsd_plan p = { .name = "rv",
			      .reclaim = &reclaim,
			      .nreclaim = 1,
			      .reservations = rs,
			      .nreservations = 2 };
	struct rsd_plan_report *partial;
	const struct rsd_error *e;
	struct rsd_scope *sc = NULL;
	struct rsd_snapshot *s;
	uint64_t v = ver(m);
	int rc;

	rsd_plan_report_free(rsd_take_partial_report());
	RSD_REQUIRE_OK(rsd_fault_inject("reserve", "one", 1, RSD_EBUDGET));
	rc = rsd_scope_enter(m, &p, NULL, 0, NULL, &sc);
	e = rsd_last_error();
	ATF_REQUIRE_EQ_MSG(rc, -RSD_EEXEC, "%d: %s", rc, e->message);
	ATF_CHECK_EQ(e->phase, RSD_PHASE_RESERVE);
	ATF_CHECK_EQ(e->failed_action_index, -1);
	ATF_CHECK_EQ(e->failed_reservation_index, 1);
	ATF_CHECK_EQ(e->cause, -RSD_EBUDGET);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_CHECK_EQ(partial->ntransitions, 1);
	rsd_plan_report_free(partial);
	/* The reclaim ensure stays committed; reservation "zero" was released. */
	ATF_CHECK(ver(m) > v);
	RSD_REQUIRE_OK(rsd_snapshot_take(m, &s));
	ATF_CHECK_EQ(s->nreservations, 0);
	rsd_snapshot_free(s);
	ATF_CHECK(!rsd__fault_on());
	ATF_CHECK(sc == NULL); /* a failed entry hands out nothing */
	rsd_manager_destroy(m);
}

/*
 * A publication that fails after building the reservation table must keep
 * the reservation mark: the next publication still has to show it. State:
 * a lease at cuda:0; A = reserve "ws" (its publication fails at its last
 * allocation, a node of the reservation table); B = release the lease
 * without waiting (its publication puts "ws" in the reservation table,
 * then fails at its last allocation, a node of the pending-lease table,
 * and takes the reservation table's change back). A snapshot must then
 * list "ws".
 */

/* The tables' nodes come from the persistent vector (pvec.c). */
static bool in_publication(const char *site)
{
	return !strncmp(site, "lib/core/image.c:", 17) || !strncmp(site, "lib/core/pvec.c:", 16);
}
struct pub {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	void *st;
	struct rsd_lease *l;
	struct rsd_reservation *r;
};

static void pub_setup(struct pub *p)
{
	struct rsd_simdev_config sc = { .ndevices = 1, .pooled = true };
	struct rsd_manager_config cfg = { 0 };
	struct rsd_location at = { RSD_CUDA, 0 };
	struct rsd_resident *r;
	struct rsd_handle h;
	uint64_t n = 64;

	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &p->sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(p->sd, 0, &p->st));
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = p->sd;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &p->m));
	RSD_REQUIRE_OK(rsd_resident_alloc(p->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(p->m, r, &at, RSD_REPLICABLE, &h));
	RSD_REQUIRE_OK(rsd_acquire(p->m, &h, 1, at, p->st, &p->l));
	p->r = NULL;
}

static void pub_teardown(struct pub *p)
{
	/* Freeing the lease unreleased abandons it, which waits for its
	 * consumer stream: let the stream's work run as it is queued. */
	rsd_simdev_set_progress(p->sd, RSD_SIMDEV_IMMEDIATE, 0);
	rsd_lease_free(p->l);
	rsd_reservation_free(p->r);
	rsd_simdev_complete_all(p->sd);
	rsd_manager_destroy(p->m);
	rsd_simdev_stream_destroy(p->sd, p->st);
	rsd_simdev_destroy(p->sd);
}

/* Run step 0 (A) or 1 (B) failing its fail-th allocation (0: none);
 * returns how many allocations it made. */
static uint64_t pub_step(struct pub *p, int step, uint64_t fail)
{
	uint64_t h0 = rsd_fault_hits("alloc");

	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, fail ? fail : UINT64_MAX, RSD_ENOMEM));
	if (step == 0)
		RSD_REQUIRE_OK(rsd_reserve(p->m, RSD_LOC_PAGEABLE_HOST, 8, "ws", &p->r));
	else
		RSD_REQUIRE_OK(rsd_lease_release(p->l, 0));
	RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
	return rsd_fault_hits("alloc") - h0;
}

ATF_TC_WITHOUT_HEAD(failed_publication_keeps_marks);
ATF_TC_BODY(failed_publication_keeps_marks, tc)
{
	struct pub p;
	struct rsd_snapshot *s;
	uint64_t na, nb, f0;
	char site[128];

	pub_setup(&p);
	na = pub_step(&p, 0, 0);
	pub_teardown(&p);
	pub_setup(&p);
	f0 = rsd__fault_fired(NULL, 0);
	pub_step(&p, 0, na);
	ATF_REQUIRE_EQ(rsd__fault_fired(site, sizeof(site)), f0 + 1);
	ATF_REQUIRE_MSG(in_publication(site), "A failed at %s", site);
	nb = pub_step(&p, 1, 0);
	pub_teardown(&p);
	pub_setup(&p);
	pub_step(&p, 0, na);
	pub_step(&p, 1, nb);
	ATF_REQUIRE_EQ(rsd__fault_fired(site, sizeof(site)), f0 + 3);
	ATF_REQUIRE_MSG(in_publication(site), "B failed at %s", site);
	RSD_REQUIRE_OK(rsd_snapshot_take(p.m, &s));
	ATF_CHECK_EQ(s->nreservations, 1);
	rsd_snapshot_free(s);
	pub_teardown(&p);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, points_listed);
	ATF_TP_ADD_TC(tp, bad_arguments);
	ATF_TP_ADD_TC(tp, counts_only_while_armed);
	ATF_TP_ADD_TC(tp, alloc_fails_once);
	ATF_TP_ADD_TC(tp, reserve_point);
	ATF_TP_ADD_TC(tp, acquire_point);
	ATF_TP_ADD_TC(tp, reserve_point_in_scope);
	ATF_TP_ADD_TC(tp, resident_point);
	ATF_TP_ADD_TC(tp, failed_publication_keeps_marks);
	return atf_no_error();
}
