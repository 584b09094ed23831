// SPDX-License-Identifier: MIT
/*
 * Declared schedules and the deterministic next-use policy
 * (Documentation/controller.md): candidate orders by next use, decisions
 * as a function of state, metadata and schedule, the position, departures,
 * refused schedules and the spill tier.
 */
#include <stdio.h>
#include <string.h>

#include <atf-c.h>

#include "fixture.h"

static struct rsd_eviction_candidate cand(long long next, int prio, long long epoch, uint64_t idx)
{
	struct rsd_eviction_candidate c = fx_cand(prio, epoch, idx);

	c.has_next_use = next >= 0;
	c.next_use = next >= 0 ? (uint64_t)next : 0;
	return c;
}

/* Farthest next use first, none first of all, ties as the tiered LRU. */
ATF_TC_WITHOUT_HEAD(order_by_next_use);
ATF_TC_BODY(order_by_next_use, tc)
{
	struct rsd_eviction_candidate c[6];
	const struct rsd_policy_config_entry *e;
	struct rsd_policy *p;
	size_t n = 0;

	ATF_REQUIRE_EQ(rsd_next_use_create(NULL, 0, 7, &p), 0);
	ATF_CHECK_STREQ(p->ops->name(p->ctx), "deterministic-next-use");
	e = p->ops->config_identity(p->ctx, &n);
	ATF_REQUIRE_EQ(n, 2);
	ATF_CHECK_STREQ(e[0].key, "fallback_tiers");
	ATF_CHECK_STREQ(e[0].value, "[]");
	ATF_CHECK_STREQ(e[1].key, "near_steps");
	ATF_CHECK_STREQ(e[1].value, "7");
	c[0] = cand(3, 0, 9, 0);
	c[1] = cand(1, -5, -1, 1); /* priority breaks no next-use tie */
	c[2] = cand(-1, 0, 4, 2);
	c[3] = cand(1, 0, 2, 3);
	c[4] = cand(3, 0, 1, 4);   /* same next use as 0: older epoch first */
	c[5] = cand(-1, -1, 8, 5); /* never again, lower priority: first */
	ATF_REQUIRE_EQ(p->ops->order_candidates(p->ctx, c, 6), 0);
	/* 5, 2 (none, LRU: priority), 4, 0 (3 steps, LRU: epoch), 1, 3 (1 step,
	 * LRU: priority -5 before 0) */
	ATF_CHECK_EQ(c[0].registration_index, 5);
	ATF_CHECK_EQ(c[1].registration_index, 2);
	ATF_CHECK_EQ(c[2].registration_index, 4);
	ATF_CHECK_EQ(c[3].registration_index, 0);
	ATF_CHECK_EQ(c[4].registration_index, 1);
	ATF_CHECK_EQ(c[5].registration_index, 3);
	rsd_policy_free(p);
}

/* A recording wrapper: the next-use policy, with its last order kept. */
static struct rsd_policy *inner;
static uint64_t seen[16];
static bool seen_next[16];
static uint64_t seen_dist[16];
static size_t nseen;

static struct fx_wrap wrapped;

static void record_order(void *ctx, const struct rsd_eviction_candidate *c, size_t n)
{
	(void)ctx;
	if (n) /* keep the ordinary group's order, not the empty second call's */
		for (nseen = 0; nseen < n && nseen < 16; nseen++) {
			seen[nseen] = c[nseen].handle.id;
			seen_next[nseen] = c[nseen].has_next_use;
			seen_dist[nseen] = c[nseen].next_use;
		}
}

static void set_steps(struct rsd_controller *c, const struct rsd_handle *h, size_t n, bool cyclic)
{
	struct rsd_schedule_step st[8];

	for (size_t i = 0; i < n; i++)
		st[i] = (struct rsd_schedule_step){ &h[i], 1 };
	ATF_REQUIRE_EQ_MSG(rsd_controller_set_schedule(c, st, n, cyclic), 0, "%s",
			   rsd_last_error()->message);
}

static uint64_t position(struct rsd_controller *c)
{
	uint64_t p = 99;

	ATF_REQUIRE_EQ(rsd_controller_schedule_position(c, &p), 0);
	return p;
}

/* pinned holds three of four replicable values (pageable copies too). */
static void four_values(struct fx *f, struct rsd_handle v[4])
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 3 * N } };

	fx_init(f, bud, 1, 0);
	for (int i = 0; i < 4; i++)
		v[i] = fx_adopt(f, PAGEABLE, RSD_REPLICABLE);
	for (int i = 0; i < 3; i++)
		fx_ensure(f, v[i], PINNED);
}

static void decide_one(struct rsd_controller *c, struct rsd_handle h, struct rsd_decision **d)
{
	struct rsd_requirement q = fx_req(h, PINNED);
	struct rsd_request r = { "r", &q, 1, NULL, 0 };

	ATF_REQUIRE_EQ_MSG(rsd_controller_decide(c, &r, d), 0, "%s", rsd_last_error()->message);
}

static void use_one(struct rsd_controller *c, struct rsd_handle h)
{
	struct rsd_requirement q = fx_req(h, PINNED);
	struct rsd_request r = { "u", &q, 1, NULL, 0 };
	struct rsd_use *u;

	ATF_REQUIRE_EQ_MSG(rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u), 0, "%s",
			   rsd_last_error()->message);
	ATF_REQUIRE_EQ(rsd_use_close(u, NULL), 0);
	rsd_use_free(u);
}

/* Schedule v3, v1, v0, v2: deciding v3 at step 0 ranks v2 (3 steps away),
 * v0 (2), v1 (1) and drops v2. */
ATF_TC_WITHOUT_HEAD(candidates_and_decision);
ATF_TC_BODY(candidates_and_decision, tc)
{
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle v[4], order[4];
	struct fx f;

	four_values(&f, v);
	ATF_REQUIRE_EQ(rsd_next_use_create(NULL, 0, 0, &inner), 0);
	fx_wrap_init(&wrapped, inner, NULL, record_order, NULL);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, &wrapped.pol, 0, &c), 0);
	order[0] = v[3];
	order[1] = v[1];
	order[2] = v[0];
	order[3] = v[2];
	set_steps(c, order, 4, false);
	decide_one(c, v[3], &d);
	ATF_REQUIRE_EQ(nseen, 3);
	ATF_CHECK_EQ(seen[0], v[2].id);
	ATF_CHECK_EQ(seen[1], v[0].id);
	ATF_CHECK_EQ(seen[2], v[1].id);
	ATF_CHECK(seen_next[0] && seen_next[1] && seen_next[2]);
	ATF_CHECK_EQ(seen_dist[0], 3);
	ATF_CHECK_EQ(seen_dist[1], 2);
	ATF_CHECK_EQ(seen_dist[2], 1);
	ATF_CHECK_STREQ(d->policy_name, "deterministic-next-use");
	ATF_CHECK(d->has_schedule);
	ATF_CHECK(d->on_schedule);
	ATF_CHECK_EQ(d->schedule_position, 0);
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK(fx_is_drop(&d->evictions[0].action, v[2], PINNED));
	ATF_CHECK_EQ(d->evictions[0].rank, 0);
	rsd_decision_free(d);

	/* Without a schedule the same policy is the tiered LRU: v0 first. */
	ATF_REQUIRE_EQ(rsd_controller_set_schedule(c, NULL, 0, false), 0);
	ATF_CHECK_EQ(rsd_controller_schedule_position(c, &(uint64_t){ 0 }), -RSD_ENOTFOUND);
	decide_one(c, v[3], &d);
	ATF_CHECK(!d->has_schedule && !d->on_schedule && d->schedule_position == 0);
	ATF_CHECK_EQ(seen[0], v[0].id);
	ATF_CHECK(!seen_next[0]);
	ATF_CHECK(fx_is_drop(&d->evictions[0].action, v[0], PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(inner);
	fx_fini(&f);
}

/* The same state, metadata and schedule give the same decision, on this
 * controller again and on a fresh one. */
ATF_TC_WITHOUT_HEAD(same_decision);
ATF_TC_BODY(same_decision, tc)
{
	struct rsd_controller *c[2];
	struct rsd_decision *d[3];
	struct rsd_handle v[4], order[3];
	struct fx f;

	four_values(&f, v);
	ATF_REQUIRE_EQ(rsd_next_use_create(NULL, 0, 0, &inner), 0);
	order[0] = v[3];
	order[1] = v[0];
	order[2] = v[1]; /* v2 is never named: evicted first */
	for (int i = 0; i < 2; i++) {
		ATF_REQUIRE_EQ(rsd_controller_create(f.m, inner, 0, &c[i]), 0);
		ATF_REQUIRE_EQ(rsd_controller_set_policy_metadata(c[i], v[0], 3, "k0"), 0);
		set_steps(c[i], order, 3, true);
	}
	decide_one(c[0], v[3], &d[0]);
	decide_one(c[0], v[3], &d[1]);
	decide_one(c[1], v[3], &d[2]);
	for (int i = 0; i < 3; i++) {
		ATF_REQUIRE_EQ(d[i]->nevictions, 1);
		ATF_CHECK(fx_is_drop(&d[i]->evictions[0].action, v[2], PINNED));
		ATF_CHECK_EQ(d[i]->evictions[0].rank, 0);
		ATF_CHECK_EQ(d[i]->schedule_position, 0);
		ATF_CHECK_EQ(d[i]->explored_states, d[0]->explored_states);
		ATF_CHECK_EQ(d[i]->expected_state_version, d[0]->expected_state_version);
		ATF_CHECK_EQ(d[i]->plan->nenter, d[0]->plan->nenter);
		ATF_CHECK(rsd_action_equal(&d[i]->plan->enter[0], &d[0]->plan->enter[0]));
	}
	/* a decision of either enters on the other: same policy identity */
	{
		struct rsd_scope *s;

		ATF_REQUIRE_EQ(rsd_controller_scope(c[1], d[0], NULL, 0, &s), 0);
		ATF_REQUIRE_EQ(rsd_scope_close(s, NULL), 0);
		rsd_scope_free(s);
	}
	for (int i = 0; i < 3; i++)
		rsd_decision_free(d[i]);
	for (int i = 0; i < 2; i++)
		rsd_controller_free(c[i]);
	rsd_policy_free(inner);
	fx_fini(&f);
}

/* Only a successful use moves the position; decide and failures do not. */
ATF_TC_WITHOUT_HEAD(position_advances);
ATF_TC_BODY(position_advances, tc)
{
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_use *u = NULL;
	struct rsd_handle v[4];
	struct rsd_requirement q;
	struct rsd_request r = { "bad", &q, 1, NULL, 0 };
	struct fx f;

	four_values(&f, v);
	ATF_REQUIRE_EQ(rsd_next_use_create(NULL, 0, 0, &inner), 0);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, inner, 0, &c), 0);
	set_steps(c, v, 3, true);
	ATF_CHECK_EQ(position(c), 0);
	decide_one(c, v[0], &d);
	rsd_decision_free(d);
	ATF_CHECK_EQ(position(c), 0);
	use_one(c, v[0]);
	ATF_CHECK_EQ(position(c), 1);
	/* a failed use: v1 on a CUDA location without its consumer stream */
	q = fx_req(v[1], (struct rsd_location){ RSD_CUDA, 0 });
	ATF_CHECK_EQ(rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u), -RSD_EINVAL);
	ATF_CHECK(u == NULL);
	ATF_CHECK_EQ(position(c), 1);
	use_one(c, v[1]);
	ATF_CHECK_EQ(position(c), 2);
	use_one(c, v[2]);
	ATF_CHECK_EQ(position(c), 0); /* cyclic: back to step 0 */

	/* finite: past the last step nothing is named again */
	set_steps(c, v, 2, false);
	use_one(c, v[0]);
	use_one(c, v[1]);
	ATF_CHECK_EQ(position(c), 2);
	decide_one(c, v[3], &d);
	ATF_CHECK(!d->on_schedule);
	ATF_CHECK_EQ(d->schedule_position, 2);
	rsd_decision_free(d);
	use_one(c, v[0]);
	ATF_CHECK_EQ(position(c), 2);
	rsd_controller_free(c);
	rsd_policy_free(inner);
	fx_fini(&f);
}

/* A use off the schedule is allowed: it leaves the position, and values
 * the schedule does not name rank first, among themselves as the LRU. A use
 * matching a later step skips ahead to it. */
ATF_TC_WITHOUT_HEAD(departure);
ATF_TC_BODY(departure, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 3 * N } };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle v[5], order[3];
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (int i = 0; i < 5; i++)
		v[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_next_use_create(NULL, 0, 0, &inner), 0);
	fx_wrap_init(&wrapped, inner, NULL, record_order, NULL);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, &wrapped.pol, 0, &c), 0);
	order[0] = v[0];
	order[1] = v[1];
	order[2] = v[2];
	set_steps(c, order, 3, true);
	use_one(c, v[3]); /* not in the schedule */
	ATF_CHECK_EQ(position(c), 0);
	use_one(c, v[4]);
	ATF_CHECK_EQ(position(c), 0);
	use_one(c, v[1]); /* step 1: skips step 0 */
	ATF_CHECK_EQ(position(c), 2);
	/* pinned: v3 (epoch 1), v4 (epoch 2), v1 (epoch 3), full. Deciding v0
	 * off its step (position 2 names v2; v0 is step 0, matched by wrapping)
	 * ranks v3, v4 (unnamed, LRU order) before v1. */
	decide_one(c, v[0], &d);
	ATF_CHECK(d->on_schedule);
	ATF_CHECK_EQ(d->schedule_position, 0);
	ATF_REQUIRE_EQ(nseen, 3);
	ATF_CHECK_EQ(seen[0], v[3].id);
	ATF_CHECK_EQ(seen[1], v[4].id);
	ATF_CHECK_EQ(seen[2], v[1].id);
	ATF_CHECK(!seen_next[0] && !seen_next[1] && seen_next[2]);
	ATF_CHECK_EQ(seen_dist[2], 1);
	ATF_CHECK(fx_is_drop(&d->evictions[0].action, v[3], PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(inner);
	fx_fini(&f);
}

/* A use matches a step when its distinct handles are the step's set,
 * whatever their order; a handle listed twice in a step counts once. */
ATF_TC_WITHOUT_HEAD(set_matching);
ATF_TC_BODY(set_matching, tc)
{
	struct rsd_controller *c;
	struct rsd_handle v[4], s0[2], s1[2], s2[3];
	struct rsd_schedule_step st[3] = { { s0, 2 }, { s1, 2 }, { s2, 3 } };
	struct rsd_requirement q[2];
	struct rsd_request r = { "pair", q, 2, NULL, 0 };
	struct rsd_use *u;
	struct fx f;

	four_values(&f, v);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	s0[0] = v[0];
	s0[1] = v[1];
	s1[0] = v[0];
	s1[1] = v[0]; /* the set {v0} */
	s2[0] = v[1];
	s2[1] = v[0];
	s2[2] = v[1]; /* the set {v0, v1} again */
	ATF_REQUIRE_EQ(rsd_controller_set_schedule(c, st, 3, true), 0);
	use_one(c, v[0]); /* {v0}: step 1 */
	ATF_CHECK_EQ(position(c), 2);
	q[0] = fx_req(v[0], PINNED);
	q[1] = fx_req(v[1], PINNED);
	ATF_REQUIRE_EQ(rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u), 0);
	ATF_CHECK(rsd_use_decision(u)->on_schedule);
	ATF_CHECK_EQ(rsd_use_decision(u)->schedule_position, 2);
	rsd_use_free(u);
	ATF_CHECK_EQ(position(c), 0);
	ATF_REQUIRE_EQ(rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u), 0);
	rsd_use_free(u);
	ATF_CHECK_EQ(position(c), 1);
	use_one(c, v[1]); /* {v1}: no step */
	ATF_CHECK_EQ(position(c), 1);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* Unknown, foreign and discarded handles are refused, naming the handle and
 * its step; the schedule and position before stay. */
ATF_TC_WITHOUT_HEAD(refused_schedules);
ATF_TC_BODY(refused_schedules, tc)
{
	struct rsd_controller *c;
	struct rsd_handle v[4], bad[2], gone;
	struct rsd_schedule_step st[2] = { { v, 1 }, { bad, 2 } };
	struct fx f, g;
	char want[128];

	four_values(&f, v);
	fx_init(&g, NULL, 0, 0);
	gone = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_discard(f.m, gone, NULL), 0);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	set_steps(c, v, 2, true);
	use_one(c, v[0]);
	ATF_REQUIRE_EQ(position(c), 1);

	bad[0] = v[1];
	bad[1] = fx_adopt(&g, PAGEABLE, RSD_REPLICABLE); /* another manager */
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, st, 2, false), -RSD_EHANDLE);
	snprintf(want, sizeof(want), "schedule step 1: Handle '%llu' belongs to manager",
		 (unsigned long long)bad[1].id);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, want), "%s", rsd_last_error()->message);
	bad[1] = v[2];
	bad[1].id = 999; /* unknown */
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, st, 2, false), -RSD_EHANDLE);
	ATF_CHECK_STREQ(rsd_last_error()->message,
			"schedule step 1: Residency handle '999' is unknown");
	bad[1] = gone;
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, st, 2, false), -RSD_EHANDLE);
	snprintf(want, sizeof(want), "schedule step 1: Residency value '%llu' has been discarded",
		 (unsigned long long)gone.id);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	bad[1].id = 0;
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, st, 2, false), -RSD_EINVAL);
	st[1].nhandles = 0;
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, st, 2, false), -RSD_EINVAL);
	ATF_CHECK_STREQ(rsd_last_error()->message, "schedule step 1 names no handle");
	st[1] = (struct rsd_schedule_step){ NULL, 1 };
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, st, 2, false), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_controller_set_schedule(c, NULL, 2, false), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_controller_set_schedule(NULL, st, 0, false), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_controller_schedule_position(c, NULL), -RSD_ETYPE);
	/* the old schedule is intact: cyclic v0, v1 at position 1 */
	ATF_CHECK_EQ(position(c), 1);
	use_one(c, v[1]);
	ATF_CHECK_EQ(position(c), 0);
	rsd_controller_free(c);
	fx_fini(&f);
	fx_fini(&g);
}

/*
 * A sole copy on cuda:0 spills by its next use: within near_steps to the
 * fastest fallback (pinned host, although pageable is configured first),
 * later or never to the slowest.
 */
ATF_TC_WITHOUT_HEAD(spill_tier);
ATF_TC_BODY(spill_tier, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_CUDA, 0 }, N } };
	struct rsd_location c0 = { RSD_CUDA, 0 }, to[2] = { PAGEABLE, PINNED };
	struct rsd_fallback_tier tier = { c0, to, 2 };
	struct rsd_handle v[4], order[4];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_location out[4];
	struct rsd_eviction_candidate k;
	struct fx f;

	/* the op alone */
	ATF_REQUIRE_EQ(rsd_next_use_create(&tier, 1, 2, &inner), 0);
	k = cand(2, 0, -1, 0);
	k.location = c0;
	ATF_REQUIRE_EQ(inner->ops->spill_locations(inner->ctx, &k, out, 4), 2);
	ATF_CHECK(rsd_location_equal(out[0], PINNED) && rsd_location_equal(out[1], PAGEABLE));
	k.next_use = 3;
	ATF_REQUIRE_EQ(inner->ops->spill_locations(inner->ctx, &k, out, 4), 2);
	ATF_CHECK(rsd_location_equal(out[0], PAGEABLE) && rsd_location_equal(out[1], PINNED));
	k.has_next_use = false;
	k.next_use = 0;
	ATF_REQUIRE_EQ(inner->ops->spill_locations(inner->ctx, &k, out, 1), 2);
	ATF_CHECK(rsd_location_equal(out[0], PAGEABLE));
	k.location = PINNED; /* no tier */
	ATF_CHECK_EQ(inner->ops->spill_locations(inner->ctx, &k, out, 4), 0);

	/* in a decision: v0 alone on the device, v1 needed there */
	fx_init(&f, bud, 1, 1);
	v[0] = fx_adopt(&f, c0, RSD_EXCLUSIVE);
	for (int i = 1; i < 4; i++)
		v[i] = fx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, inner, 0, &c), 0);
	order[0] = v[1];
	order[1] = v[0]; /* next use 1 step on */
	set_steps(c, order, 2, false);
	{
		struct rsd_requirement q = fx_req(v[1], c0);
		struct rsd_request r = { "near", &q, 1, NULL, 0 };

		ATF_REQUIRE_EQ_MSG(rsd_controller_decide(c, &r, &d), 0, "%s",
				   rsd_last_error()->message);
		ATF_REQUIRE_EQ(d->nevictions, 1);
		ATF_CHECK(fx_is_move(&d->evictions[0].action, v[0], PINNED, &c0));
		rsd_decision_free(d);

		order[1] = v[2];
		order[2] = v[3];
		order[3] = v[0]; /* 3 steps on */
		set_steps(c, order, 4, false);
		r.name = "far";
		ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
		ATF_REQUIRE_EQ(d->nevictions, 1);
		ATF_CHECK(fx_is_move(&d->evictions[0].action, v[0], PAGEABLE, &c0));
		rsd_decision_free(d);

		set_steps(c, &v[1], 1, false); /* v0 never named */
		ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
		ATF_CHECK(fx_is_move(&d->evictions[0].action, v[0], PAGEABLE, &c0));
		rsd_decision_free(d);
	}
	rsd_controller_free(c);
	rsd_policy_free(inner);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, order_by_next_use);
	ATF_TP_ADD_TC(tp, candidates_and_decision);
	ATF_TP_ADD_TC(tp, same_decision);
	ATF_TP_ADD_TC(tp, position_advances);
	ATF_TP_ADD_TC(tp, departure);
	ATF_TP_ADD_TC(tp, set_matching);
	ATF_TP_ADD_TC(tp, refused_schedules);
	ATF_TP_ADD_TC(tp, spill_tier);
	return 0;
}
