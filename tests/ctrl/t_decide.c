// SPDX-License-Identifier: MIT
/*
 * rsd_controller_decide: the worked examples of reference.md §13.7 (A-J,
 * §20.12-20.17) with exact explored_states, plans, eviction ranks and
 * reasons, and the controller edge cases of §18.
 */
#include <stdio.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "fixture.h"

static const char *R_OTHER = "another materialization preserves the logical value";
static const char *R_SOURCE = "registered source can reconstruct the logical value";

static struct rsd_controller *ctl(struct fx *f, const struct rsd_policy *p, size_t limit)
{
	struct rsd_controller *c;

	RSD_REQUIRE_OK(rsd_controller_create(f->m, p, limit, &c));
	return c;
}

static struct rsd_policy *tiers(const struct rsd_fallback_tier *t, size_t n)
{
	struct rsd_policy *p;

	RSD_REQUIRE_OK(rsd_tiered_lru_create(t, n, &p));
	return p;
}

static int decide(struct rsd_controller *c, const char *name, const struct rsd_requirement *q,
		  size_t nq, const struct rsd_reservation_spec *rs, size_t nrs,
		  struct rsd_decision **d)
{
	struct rsd_request r = { name, q, nq, rs, nrs };

	*d = NULL;
	return rsd_controller_decide(c, &r, d);
}

static void check_evict(const struct rsd_decision *d, size_t i, uint64_t rank,
			struct rsd_location released, const char *reason)
{
	ATF_REQUIRE(i < d->nevictions);
	ATF_CHECK_EQ(d->evictions[i].rank, rank);
	ATF_CHECK(rsd_location_equal(d->evictions[i].released_location, released));
	ATF_CHECK_EQ(d->evictions[i].released_nbytes, N);
	ATF_CHECK_STREQ(d->evictions[i].reason, reason);
	ATF_CHECK(rsd_action_equal(&d->evictions[i].action, &d->plan->reclaim[i]));
}

/* §20.12 setup: budgets {pinned: 64}; v REPLICABLE at pageable+pinned; r EXCLUSIVE at pageable. */
static void setup_a(struct fx *f, struct rsd_handle *v, struct rsd_handle *r)
{
	static const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, N } };

	fx_init(f, b, 1, 0);
	*v = fx_adopt(f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(f, *v, PINNED);
	*r = fx_adopt(f, PAGEABLE, RSD_EXCLUSIVE);
	ATF_REQUIRE_EQ(fx_version(f), 4);
}

ATF_TC_WITHOUT_HEAD(example_a);
ATF_TC_BODY(example_a, tc)
{
	struct fx f;
	struct rsd_handle v, r;
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_scope *s = NULL;
	struct rsd_plan_report *rep = NULL;
	struct rsd_requirement q[1];
	struct rsd_location pg = PAGEABLE;

	setup_a(&f, &v, &r);
	q[0] = fx_req(r, PINNED);
	c = ctl(&f, NULL, 0);
	ATF_REQUIRE_EQ_MSG(decide(c, "A", q, 1, NULL, 0, &d), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(d->explored_states, 2);
	ATF_CHECK_EQ(d->expected_state_version, 4);
	ATF_CHECK_EQ(d->manager_id, rsd_manager_id(f.m));
	ATF_CHECK_STREQ(d->plan->name, "A");
	ATF_CHECK_STREQ(d->policy_name, "deterministic-tiered-lru");
	ATF_REQUIRE_EQ(d->npolicy_config, 1);
	ATF_CHECK_STREQ(d->policy_config[0].key, "fallback_tiers");
	ATF_CHECK_STREQ(d->policy_config[0].value, "[]");
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v, PINNED));
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_move(&d->plan->enter[0], r, PINNED, &pg));
	ATF_CHECK_EQ(d->plan->nexit, 0);
	ATF_REQUIRE_EQ(d->nevictions, 1);
	check_evict(d, 0, 0, PINNED, R_OTHER);
	ATF_CHECK(d->explanation->feasible);
	ATF_CHECK_EQ(fx_version(&f), 4);

	/* enter and close the controller scope */
	RSD_REQUIRE_OK(rsd_controller_scope(c, d, NULL, 0, &s));
	RSD_REQUIRE_OK(rsd_scope_close(s, &rep));
	ATF_REQUIRE(rep);
	ATF_CHECK_EQ(rep->ntransitions, 2);
	ATF_CHECK(fx_is_drop(&rep->transitions[0].action, v, PINNED));
	ATF_CHECK(fx_is_move(&rep->transitions[1].action, r, PINNED, &pg));
	ATF_CHECK(fx_at(&f, v, PAGEABLE) && fx_nmat(&f, v) == 1);
	ATF_CHECK(fx_at(&f, r, PINNED) && fx_nmat(&f, r) == 1);
	ATF_CHECK_EQ(fx_version(&f), 7);
	rsd_plan_report_free(rep);
	rsd_scope_free(s);
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(example_a_limits);
ATF_TC_BODY(example_a_limits, tc)
{
	struct fx f;
	struct rsd_handle v, r;
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_requirement q[1];
	const struct rsd_error *e;

	setup_a(&f, &v, &r);
	q[0] = fx_req(r, PINNED);
	/* §18.74: limit 1 -> search limit with explored 1; limit 2 succeeds */
	c = ctl(&f, NULL, 1);
	ATF_CHECK_EQ(decide(c, "A", q, 1, NULL, 0, &d), -RSD_ESEARCHLIMIT);
	e = rsd_last_error();
	ATF_CHECK_EQ(e->code, RSD_ESEARCHLIMIT);
	ATF_CHECK(e->has_search);
	ATF_CHECK_EQ(e->state_limit, 1);
	ATF_CHECK_EQ(e->explored_states, 1);
	ATF_CHECK_STREQ(e->plan_name, "A");
	ATF_CHECK(strstr(e->message, "inconclusive"));
	ATF_CHECK(strstr(e->message, "automatic residency search exceeded its deterministic state "
				     "limit during ordered request: limit=1"));
	ATF_CHECK(rsd_err_is_plan_error(-RSD_ESEARCHLIMIT));
	ATF_CHECK(d == NULL);
	ATF_CHECK_EQ(fx_version(&f), 4);
	rsd_controller_free(c);
	c = ctl(&f, NULL, 2);
	ATF_REQUIRE_EQ(decide(c, "A", q, 1, NULL, 0, &d), 0);
	ATF_CHECK_EQ(d->explored_states, 2);
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §20.13: cascaded spills, required endpoints last, ranks 0,0,0, explored 4. */
ATF_TC_WITHOUT_HEAD(example_b);
ATF_TC_BODY(example_b, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N },
						 { { RSD_PAGEABLE_HOST, -1 }, N } };
	struct rsd_location pg = PAGEABLE, pn = PINNED;
	struct rsd_requirement q[3];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle a, b, cc;
	struct fx f;

	fx_init(&f, bud, 2, 0);
	a = fx_sourced(&f, PINNED);
	fx_ensure(&f, a, PINNED);
	b = fx_adopt(&f, PINNED, RSD_EXCLUSIVE);
	cc = fx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	f.loads = 0;
	q[0] = fx_req(cc, PINNED);
	q[1] = fx_req(b, PAGEABLE);
	q[2] = fx_req(a, PINNED);
	c = ctl(&f, NULL, 0);
	ATF_REQUIRE_EQ_MSG(decide(c, "B", q, 3, NULL, 0, &d), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(d->explored_states, 4);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 3);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], a, PINNED));
	ATF_CHECK(fx_is_move(&d->plan->reclaim[1], cc, PINNED, &pg));
	ATF_CHECK(fx_is_move(&d->plan->reclaim[2], b, PAGEABLE, &pn));
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_ensure(&d->plan->enter[0], a, PINNED));
	check_evict(d, 0, 0, PINNED, R_SOURCE);
	check_evict(d, 1, 0, PAGEABLE,
		    "sole materialization moved to requested destination pinned-host instead of "
		    "reconstructing it later");
	check_evict(d, 2, 0, PINNED,
		    "sole materialization moved to requested destination pageable-host instead of "
		    "reconstructing it later");
	ATF_CHECK_EQ(f.loads, 0);
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §20.14: backtracking out of a spill that blocks the temporary load. */
ATF_TC_WITHOUT_HEAD(example_c);
ATF_TC_BODY(example_c, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N },
						 { { RSD_PAGEABLE_HOST, -1 }, 2 * N } };
	struct rsd_location pg = PAGEABLE;
	struct rsd_fallback_tier t = { PINNED, &pg, 1 };
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_policy *p;
	struct rsd_handle fh, s, ph, qh;
	struct fx f;

	fx_init(&f, bud, 2, 0);
	p = tiers(&t, 1);
	fh = fx_adopt(&f, PINNED, RSD_EXCLUSIVE);
	s = fx_sourced(&f, PINNED);
	fx_ensure(&f, s, PINNED);
	ph = fx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	qh = fx_sourced(&f, PAGEABLE);
	(void)fh;
	q[0] = fx_req(ph, PAGEABLE);
	q[1] = fx_req(qh, PINNED);
	c = ctl(&f, p, 0);
	ATF_REQUIRE_EQ_MSG(decide(c, "C", q, 2, NULL, 0, &d), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(d->explored_states, 3);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], s, PINNED));
	check_evict(d, 0, 1, PINNED, R_SOURCE);
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_ensure(&d->plan->enter[0], qh, PINNED));
	ATF_REQUIRE_EQ(d->npolicy_config, 1);
	ATF_CHECK_STREQ(d->policy_config[0].key, "fallback_tiers");
	ATF_CHECK_STREQ(d->policy_config[0].value, "[(\"pinned-host\", [\"pageable-host\"])]");
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(p);
	fx_fini(&f);
}

/* §20.15 / §18.75: exhaustive failure over k = 3 droppable replicas: 2^k states. */
ATF_TC_WITHOUT_HEAD(example_d);
ATF_TC_BODY(example_d, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 3 * N } };
	struct rsd_reservation_spec big = { PINNED, 256, "big" };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle h[3];
	struct fx f;
	const char *head = "Automatic residency request 'D' is infeasible: location pinned-host "
			   "cannot admit 256 bytes during reservation 'big'; budget=192, used=192, "
			   "reserved=0, in flight=0, held by 0 plans=0, but no invariant-valid "
			   "victim sequence satisfies the complete ordered request (";

	fx_init(&f, bud, 1, 0);
	for (int i = 0; i < 3; i++) {
		h[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
		fx_ensure(&f, h[i], PINNED);
	}
	q[0] = fx_req(h[0], PAGEABLE);
	c = ctl(&f, NULL, 8);
	ATF_CHECK_EQ(decide(c, "D", q, 1, &big, 1, &d), -RSD_EPLAN);
	ATF_CHECK_MSG(!strncmp(rsd_last_error()->message, head, strlen(head)), "%s",
		      rsd_last_error()->message);
	ATF_CHECK(strstr(rsd_last_error()->message, "candidate 0: "));
	rsd_controller_free(c);
	c = ctl(&f, NULL, 0);
	ATF_CHECK_EQ(decide(c, "D", q, 1, &big, 1, &d), -RSD_EPLAN);
	rsd_controller_free(c);
	c = ctl(&f, NULL, 7);
	ATF_CHECK_EQ(decide(c, "D", q, 1, &big, 1, &d), -RSD_ESEARCHLIMIT);
	ATF_CHECK_EQ(rsd_last_error()->explored_states, 7);
	ATF_CHECK_EQ(rsd_last_error()->state_limit, 7);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §20.16 / §18.73: the sourced victim's drop is rejected, the spill chosen. */
ATF_TC_WITHOUT_HEAD(example_e);
ATF_TC_BODY(example_e, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PAGEABLE_HOST, -1 }, N },
						 { { RSD_PINNED_HOST, -1 }, N } };
	struct rsd_reservation_spec ws = { PAGEABLE, N, "ws" };
	struct rsd_location pg = PAGEABLE;
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle h;
	struct fx f;

	fx_init(&f, bud, 2, 0);
	h = fx_sourced(&f, PAGEABLE);
	fx_ensure(&f, h, PAGEABLE);
	q[0] = fx_req(h, PINNED);
	c = ctl(&f, NULL, 0);
	ATF_REQUIRE_EQ_MSG(decide(c, "E", q, 1, &ws, 1, &d), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(d->explored_states, 3);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_move(&d->plan->reclaim[0], h, PINNED, &pg));
	check_evict(d, 0, 0, PAGEABLE,
		    "sole materialization moved to requested destination pinned-host instead of "
		    "reconstructing it later");
	ATF_CHECK_EQ(d->plan->nenter, 0);
	ATF_REQUIRE_EQ(d->plan->nreservations, 1);
	ATF_CHECK_STREQ(d->plan->reservations[0].label, "ws");
	ATF_CHECK_EQ(d->plan->reservations[0].nbytes, N);
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

static void setup_fg(struct fx *f, uint64_t pageable_budget, struct rsd_handle *fh,
		     struct rsd_handle *s)
{
	struct rsd_budget bud[] = { { { RSD_PAGEABLE_HOST, -1 }, pageable_budget },
				    { { RSD_PINNED_HOST, -1 }, N } };

	fx_init(f, bud, 2, 0);
	*fh = fx_adopt(f, PINNED, RSD_EXCLUSIVE);
	*s = fx_adopt(f, PAGEABLE, RSD_EXCLUSIVE);
}

/* Example F: spill f to pageable via the tier, then move s in. */
ATF_TC_WITHOUT_HEAD(example_f);
ATF_TC_BODY(example_f, tc)
{
	struct rsd_location pg = PAGEABLE, pn = PINNED;
	struct rsd_fallback_tier t = { PINNED, &pg, 1 };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_policy *p;
	struct rsd_handle fh, s;
	struct fx f;

	setup_fg(&f, 2 * N, &fh, &s);
	p = tiers(&t, 1);
	q[0] = fx_req(s, PINNED);
	c = ctl(&f, p, 0);
	ATF_REQUIRE_EQ_MSG(decide(c, "F", q, 1, NULL, 0, &d), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(d->explored_states, 2);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_move(&d->plan->reclaim[0], fh, PAGEABLE, &pn));
	check_evict(d, 0, 0, PINNED,
		    "sole materialization moved to requested destination pageable-host instead of "
		    "reconstructing it later");
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_move(&d->plan->enter[0], s, PINNED, &pg));
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(p);
	fx_fini(&f);
}

/* Example G / §18.71: a swap between two full single-slot locations. */
ATF_TC_WITHOUT_HEAD(example_g);
ATF_TC_BODY(example_g, tc)
{
	struct rsd_location pg = PAGEABLE;
	struct rsd_fallback_tier t = { PINNED, &pg, 1 };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_policy *p;
	struct rsd_handle fh, s;
	struct fx f;
	uint64_t v;

	setup_fg(&f, N, &fh, &s);
	p = tiers(&t, 1);
	q[0] = fx_req(s, PINNED);
	c = ctl(&f, p, 0);
	v = fx_version(&f);
	ATF_CHECK_EQ(decide(c, "G", q, 1, NULL, 0, &d), -RSD_EPLAN);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message,
			     "(candidate 0: no legal drop or fallback transition)"),
		      "%s", rsd_last_error()->message);
	ATF_CHECK(
		strstr(rsd_last_error()->message, "Automatic residency request 'G' is infeasible"));
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK(fx_at(&f, fh, PINNED) && fx_at(&f, s, PAGEABLE));
	rsd_controller_free(c);
	rsd_policy_free(p);
	fx_fini(&f);
}

/* Example H / §18.69: held and leased materializations are never victims. */
ATF_TC_WITHOUT_HEAD(example_h);
ATF_TC_BODY(example_h, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, N } };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_hold *hd;
	struct rsd_lease *l;
	struct rsd_handle a1, a2;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	a1 = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, a1, PINNED);
	a2 = fx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	RSD_REQUIRE_OK(rsd_hold(f.m, &a1, 1, PINNED, &hd));
	q[0] = fx_req(a2, PINNED);
	c = ctl(&f, NULL, 0);
	ATF_CHECK_EQ(decide(c, "H", q, 1, NULL, 0, &d), -RSD_EPLAN);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "no invariant-valid victim sequence "
							"satisfies the complete ordered request"),
		      "%s", rsd_last_error()->message);
	ATF_CHECK(!strstr(rsd_last_error()->message, "candidate"));
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	/* a lease protects as well */
	RSD_REQUIRE_OK(rsd_acquire(f.m, &a1, 1, PINNED, NULL, &l));
	ATF_CHECK_EQ(decide(c, "H", q, 1, NULL, 0, &d), -RSD_EPLAN);
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	/* unprotected again: the replica is dropped */
	ATF_REQUIRE_EQ(decide(c, "H", q, 1, NULL, 0, &d), 0);
	ATF_CHECK_EQ(d->explored_states, 2);
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* Example J / §18.81: two-way tiers loop to the state limit. */
static void run_j(bool two_way, size_t limit, int want, uint64_t explored)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, N },
						 { { RSD_PAGEABLE_HOST, -1 }, N } };
	struct rsd_location pg = PAGEABLE, pn = PINNED;
	struct rsd_fallback_tier t[2] = { { PINNED, &pg, 1 }, { PAGEABLE, &pn, 1 } };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_policy *p;
	struct rsd_handle x, y;
	struct fx f;

	fx_init(&f, bud, 2, 0);
	x = fx_adopt(&f, PINNED, RSD_EXCLUSIVE);
	y = fx_sourced(&f, PAGEABLE);
	(void)x;
	ATF_REQUIRE_EQ(fx_version(&f), 2);
	p = tiers(t, two_way ? 2 : 1);
	q[0] = fx_req(y, PINNED);
	c = ctl(&f, p, limit);
	ATF_CHECK_EQ_MSG(decide(c, "cyc", q, 1, NULL, 0, &d), want, "%s",
			 rsd_last_error()->message);
	if (want == -RSD_ESEARCHLIMIT) {
		ATF_CHECK_EQ(rsd_last_error()->explored_states, explored);
		ATF_CHECK_EQ(rsd_last_error()->state_limit, explored);
	}
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(fx_version(&f), 2);
	rsd_controller_free(c);
	rsd_policy_free(p);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(example_j);
ATF_TC_BODY(example_j, tc)
{
	for (size_t limit = 1; limit <= 40; limit++)
		run_j(true, limit, -RSD_ESEARCHLIMIT, limit);
	run_j(true, 100, -RSD_ESEARCHLIMIT, 100);
	run_j(true, 800, -RSD_ESEARCHLIMIT, 800);
	run_j(false, 0, -RSD_EPLAN, 0);
}

ATF_TC_WITHOUT_HEAD(example_j_default_limit);
ATF_TC_BODY(example_j_default_limit, tc)
{
	/* 100000 nested SEARCH levels on the heap stack: no native overflow */
	run_j(true, 0, -RSD_ESEARCHLIMIT, 100000);
}

/* §18.64: duplicate pairs, EXCLUSIVE at two locations; request validation. */
ATF_TC_WITHOUT_HEAD(request_validation);
ATF_TC_BODY(request_validation, tc)
{
	static const struct rsd_type forged_type = { "forged", &rsd_resident_type };
	struct rsd_reservation_spec blank = { PINNED, 1, " " };
	struct rsd_requirement q[2], bad;
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle e, r, gone, foreign;
	struct fx f, g;
	uint64_t v;

	fx_init(&f, NULL, 0, 0);
	fx_init(&g, NULL, 0, 0);
	e = fx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	r = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	gone = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	RSD_REQUIRE_OK(rsd_discard(f.m, gone, NULL));
	foreign = fx_adopt(&g, PAGEABLE, RSD_REPLICABLE);
	c = ctl(&f, NULL, 0);
	v = fx_version(&f);

	q[0] = fx_req(r, PINNED);
	q[1] = fx_req(r, PINNED);
	ATF_CHECK_EQ(decide(c, "dup", q, 2, NULL, 0, &d), -RSD_EINVAL);
	ATF_CHECK_EQ(decide(c, "empty", q, 0, NULL, 0, &d), -RSD_EINVAL);
	ATF_CHECK_EQ(decide(c, "  ", q, 1, NULL, 0, &d), -RSD_EINVAL);
	ATF_CHECK_EQ(decide(c, NULL, q, 1, NULL, 0, &d), -RSD_ETYPE); /* not a string */
	ATF_CHECK_EQ(decide(c, "nullreq", NULL, 1, NULL, 0, &d), -RSD_ETYPE);
	ATF_CHECK_EQ(decide(c, "blank label", q, 1, &blank, 1, &d), -RSD_EINVAL);
	bad = fx_req(r, PINNED);
	bad.location.kind = (enum rsd_location_kind)7;
	ATF_CHECK_EQ(decide(c, "badloc", &bad, 1, NULL, 0, &d), -RSD_ETYPE);
	bad.location.kind = RSD_CUDA;
	bad.location.device = 500;
	ATF_CHECK_EQ(decide(c, "baddev", &bad, 1, NULL, 0, &d), -RSD_EINVAL);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_decide(c, NULL, &d));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_decide(NULL, NULL, &d));

	q[0] = fx_req(e, PINNED);
	q[1] = fx_req(e, PAGEABLE);
	ATF_CHECK_EQ(decide(c, "excl", q, 2, NULL, 0, &d), -RSD_EOWNERSHIP);
	/* a REPLICABLE value may be required at two locations */
	q[0] = fx_req(r, PINNED);
	q[1] = fx_req(r, PAGEABLE);
	ATF_REQUIRE_EQ(decide(c, "repl", q, 2, NULL, 0, &d), 0);
	ATF_CHECK_EQ(d->plan->nenter, 1);
	ATF_CHECK_EQ(d->explored_states, 1);
	rsd_decision_free(d);

	q[0] = fx_req(gone, PINNED);
	ATF_CHECK_EQ(decide(c, "gone", q, 1, NULL, 0, &d), -RSD_EHANDLE);
	ATF_CHECK(strstr(rsd_last_error()->message, "discarded"));
	q[0] = fx_req(foreign, PINNED);
	ATF_CHECK_EQ(decide(c, "foreign", q, 1, NULL, 0, &d), -RSD_EHANDLE);
	ATF_CHECK(strstr(rsd_last_error()->message, "another manager"));
	/* right ids, another (well-formed) value type: unknown */
	q[0] = fx_req(r, PINNED);
	q[0].handle.type = &forged_type;
	ATF_CHECK_EQ(decide(c, "forged", q, 1, NULL, 0, &d), -RSD_EHANDLE);
	ATF_CHECK(strstr(rsd_last_error()->message, "unknown"));
	ATF_CHECK_EQ(fx_version(&f), v);
	rsd_controller_free(c);
	fx_fini(&f);
	fx_fini(&g);
}

/* §18.65 and §18.66: decide loads nothing and changes nothing; a stale
 * decision is refused at scope entry with the placement unchanged. */
ATF_TC_WITHOUT_HEAD(no_side_effects_and_stale);
ATF_TC_BODY(no_side_effects_and_stale, tc)
{
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_reservation *rv;
	struct rsd_scope *s = NULL;
	struct rsd_handle h;
	struct fx f;
	uint64_t v;

	fx_init(&f, NULL, 0, 0);
	h = fx_sourced(&f, PAGEABLE);
	v = fx_version(&f);
	q[0] = fx_req(h, PINNED);
	c = ctl(&f, NULL, 0);
	ATF_REQUIRE_EQ(decide(c, "load", q, 1, NULL, 0, &d), 0);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK_EQ(d->expected_state_version, v);
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_ensure(&d->plan->enter[0], h, PINNED));

	/* an intervening 1-byte reservation elsewhere makes it stale */
	RSD_REQUIRE_OK(rsd_reserve(f.m, PAGEABLE, 1, "elsewhere", &rv));
	RSD_CHECK_ERR(RSD_ESTALE, rsd_controller_scope(c, d, NULL, 0, &s));
	ATF_CHECK(rsd_last_error()->has_versions);
	ATF_CHECK_EQ(rsd_last_error()->expected_version, v);
	ATF_CHECK_EQ(fx_nmat(&f, h), 0);
	ATF_CHECK_EQ(f.loads, 0);
	rsd_scope_free(s);
	s = NULL;
	rsd_decision_free(d);

	/* a fresh decision enters and loads once */
	ATF_REQUIRE_EQ(decide(c, "load", q, 1, NULL, 0, &d), 0);
	RSD_REQUIRE_OK(rsd_controller_scope(c, d, NULL, 0, &s));
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK(fx_at(&f, h, PINNED));
	RSD_REQUIRE_OK(rsd_scope_close(s, NULL));
	rsd_scope_free(s);
	rsd_decision_free(d);
	RSD_REQUIRE_OK(rsd_reservation_release(rv));
	rsd_reservation_free(rv);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §18.67: other policy configuration, other manager. */
ATF_TC_WITHOUT_HEAD(foreign_decisions);
ATF_TC_BODY(foreign_decisions, tc)
{
	struct rsd_location pg = PAGEABLE;
	struct rsd_fallback_tier t = { PINNED, &pg, 1 };
	struct rsd_requirement q[1];
	struct rsd_controller *c, *c2, *c3;
	struct rsd_decision *d;
	struct rsd_scope *s = NULL;
	struct rsd_policy *p;
	struct rsd_handle h;
	struct fx f, g;

	fx_init(&f, NULL, 0, 0);
	fx_init(&g, NULL, 0, 0);
	h = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(h, PINNED);
	p = tiers(&t, 1);
	c = ctl(&f, NULL, 0);
	c2 = ctl(&f, p, 0);
	c3 = ctl(&g, NULL, 0);
	ATF_REQUIRE_EQ(decide(c, "x", q, 1, NULL, 0, &d), 0);
	RSD_CHECK_ERR(RSD_EPLAN, rsd_controller_scope(c2, d, NULL, 0, &s));
	ATF_CHECK(strstr(rsd_last_error()->message, "issued under another policy configuration"));
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_controller_scope(c3, d, NULL, 0, &s));
	ATF_CHECK(s == NULL);
	ATF_CHECK(!fx_at(&f, h, PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_controller_free(c2);
	rsd_controller_free(c3);
	rsd_policy_free(p);
	fx_fini(&f);
	fx_fini(&g);
}

/* §18.70: sole MUST_PRESERVE victim without a tier; no state change. */
ATF_TC_WITHOUT_HEAD(sole_must_preserve);
ATF_TC_BODY(sole_must_preserve, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, N } };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle x, y;
	struct fx f;
	uint64_t v;

	fx_init(&f, bud, 1, 0);
	x = fx_adopt(&f, PINNED, RSD_EXCLUSIVE);
	y = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(y, PINNED);
	c = ctl(&f, NULL, 0);
	v = fx_version(&f);
	ATF_CHECK_EQ(decide(c, "sole", q, 1, NULL, 0, &d), -RSD_EPLAN);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "location pinned-host cannot admit 64 "
							"bytes during materialization of '"),
		      "%s", rsd_last_error()->message);
	ATF_CHECK(strstr(rsd_last_error()->message,
			 "(candidate 0: no legal drop or fallback transition)"));
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK(fx_at(&f, x, PINNED));
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §18.84: an EXCLUSIVE required value whose only replica is held. */
ATF_TC_WITHOUT_HEAD(protected_move_source);
ATF_TC_BODY(protected_move_source, tc)
{
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_hold *hd;
	struct rsd_handle r;
	struct fx f;

	fx_init(&f, NULL, 0, 0);
	r = fx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	RSD_REQUIRE_OK(rsd_hold(f.m, &r, 1, PAGEABLE, &hd));
	q[0] = fx_req(r, PINNED);
	c = ctl(&f, NULL, 0);
	ATF_CHECK_EQ(decide(c, "p", q, 1, NULL, 0, &d), -RSD_EPLAN);
	ATF_CHECK_STREQ(rsd_last_error()->message, "source pageable-host is protected");
	rsd_hold_release(hd);
	rsd_hold_free(hd);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §18.80: registration indices count discarded records. */
static unsigned long long seen_index;

static const char *rec_name(void *ctx)
{
	(void)ctx;
	return "recorder";
}

static int rec_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		seen_index = c[i].registration_index;
	return 0;
}

static const struct rsd_policy_ops rec_ops = { rec_name, fx_no_config, fx_no_fallback, rec_order,
					       NULL };

ATF_TC_WITHOUT_HEAD(registration_index_gaps);
ATF_TC_BODY(registration_index_gaps, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, N } };
	struct rsd_policy p = { &rec_ops, NULL };
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle a, b, v;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	a = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	RSD_REQUIRE_OK(rsd_discard(f.m, a, NULL));
	b = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, b, PINNED);
	v = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(v, PINNED);
	c = ctl(&f, &p, 0);
	ATF_REQUIRE_EQ(decide(c, "gaps", q, 1, NULL, 0, &d), 0);
	ATF_CHECK_EQ(seen_index, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], b, PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/*
 * A chain of spills: eight sole values fill pinned-host, the request keeps
 * the first and wants room for four more. Each SEARCH level after a move
 * takes over its parent's candidates (search_derive()), so the plan must be
 * what ranking every level afresh gives: the four least recently used
 * values after the kept one, each the first candidate of its level (rank
 * 0), moved to pageable-host in that order, and as many states explored as
 * when every level ranked (5: the root and one per move).
 */
ATF_TC_WITHOUT_HEAD(spill_chain_derived);
ATF_TC_BODY(spill_chain_derived, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 8 * N } };
	struct rsd_location pg = PAGEABLE, pn = PINNED;
	struct rsd_fallback_tier t = { PINNED, &pg, 1 };
	struct rsd_reservation_spec out = { PINNED, 4 * N, "out" };
	struct rsd_policy *pol = tiers(&t, 1);
	struct rsd_requirement q;
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle h[8];
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (unsigned i = 0; i < 8; i++)
		h[i] = fx_adopt(&f, PINNED, RSD_EXCLUSIVE);
	q = fx_req(h[0], PINNED);
	c = ctl(&f, pol, 0);
	ATF_REQUIRE_EQ_MSG(decide(c, "chain", &q, 1, &out, 1, &d), 0, "%s",
			   rsd_last_error()->message);
	ATF_CHECK_EQ(d->explored_states, 5);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 4);
	ATF_REQUIRE_EQ(d->nevictions, 4);
	for (unsigned i = 0; i < 4; i++) {
		ATF_CHECK(fx_is_move(&d->plan->reclaim[i], h[i + 1], PAGEABLE, &pn));
		ATF_CHECK_EQ(d->evictions[i].rank, 0);
		ATF_CHECK(rsd_location_equal(d->evictions[i].released_location, pn));
	}
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(pol);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, example_a);
	ATF_TP_ADD_TC(tp, example_a_limits);
	ATF_TP_ADD_TC(tp, example_b);
	ATF_TP_ADD_TC(tp, example_c);
	ATF_TP_ADD_TC(tp, example_d);
	ATF_TP_ADD_TC(tp, example_e);
	ATF_TP_ADD_TC(tp, example_f);
	ATF_TP_ADD_TC(tp, example_g);
	ATF_TP_ADD_TC(tp, example_h);
	ATF_TP_ADD_TC(tp, example_j);
	ATF_TP_ADD_TC(tp, example_j_default_limit);
	ATF_TP_ADD_TC(tp, request_validation);
	ATF_TP_ADD_TC(tp, no_side_effects_and_stale);
	ATF_TP_ADD_TC(tp, foreign_decisions);
	ATF_TP_ADD_TC(tp, sole_must_preserve);
	ATF_TP_ADD_TC(tp, protected_move_source);
	ATF_TP_ADD_TC(tp, registration_index_gaps);
	ATF_TP_ADD_TC(tp, spill_chain_derived);
	return atf_no_error();
}
