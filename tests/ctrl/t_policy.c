// SPDX-License-Identifier: MIT
/*
 * Policies: the deterministic tiered LRU (reference.md §12.3) and the
 * controller's checks of custom policies (§12.2, §12.4).
 */
#include <stdio.h>

#include <atf-c.h>
#include "../check.h"

#include "fixture.h"

static struct rsd_eviction_candidate cand(int prio, long long epoch, const char *key, uint64_t idx)
{
	struct rsd_eviction_candidate c = fx_cand(prio, epoch, idx);

	c.metadata.stable_key = key;
	return c;
}

/* The example of §12.3, fed in reverse and shuffled orders. */
ATF_TC_WITHOUT_HEAD(ordering_example);
ATF_TC_BODY(ordering_example, tc)
{
	const uint64_t want[] = { 4, 5, 0, 2, 1, 3 };
	struct rsd_eviction_candidate c[6];
	struct rsd_policy *p;

	RSD_REQUIRE_OK(rsd_tiered_lru_create(NULL, 0, &p));
	c[0] = cand(0, 5, NULL, 3);
	c[1] = cand(0, 5, "b", 1);
	c[2] = cand(0, 5, "a", 2);
	c[3] = cand(0, -1, NULL, 0);
	c[4] = cand(0, -1, "z", 5);
	c[5] = cand(-1, 0, NULL, 4);
	ATF_REQUIRE_EQ(p->ops->order_candidates(p->ctx, c, 6), 0);
	for (int i = 0; i < 6; i++)
		ATF_CHECK_EQ_MSG(c[i].registration_index, want[i], "position %d", i);
	/* another input order gives the same result */
	c[0] = cand(0, 5, "a", 2);
	c[1] = cand(-1, 0, NULL, 4);
	c[2] = cand(0, 5, NULL, 3);
	c[3] = cand(0, -1, "z", 5);
	c[4] = cand(0, 5, "b", 1);
	c[5] = cand(0, -1, NULL, 0);
	ATF_REQUIRE_EQ(p->ops->order_candidates(p->ctx, c, 6), 0);
	for (int i = 0; i < 6; i++)
		ATF_CHECK_EQ(c[i].registration_index, want[i]);
	rsd_policy_free(p);
}

/* Keys compare bytewise unsigned (code-point order for UTF-8). */
ATF_TC_WITHOUT_HEAD(ordering_keys);
ATF_TC_BODY(ordering_keys, tc)
{
	struct rsd_eviction_candidate c[40];
	struct rsd_policy *p;
	char keys[40][8];

	RSD_REQUIRE_OK(rsd_tiered_lru_create(NULL, 0, &p));
	c[0] = cand(0, 1, "\xc3\xa9", 0); /* é, U+00E9 */
	c[1] = cand(0, 1, "z", 1);
	c[2] = cand(0, 1, "Z", 2);
	ATF_REQUIRE_EQ(p->ops->order_candidates(p->ctx, c, 3), 0);
	ATF_CHECK_STREQ(c[0].metadata.stable_key, "Z");
	ATF_CHECK_STREQ(c[1].metadata.stable_key, "z");
	ATF_CHECK_STREQ(c[2].metadata.stable_key, "\xc3\xa9");
	/* a larger input (heap merge buffer), descending epochs */
	for (int i = 0; i < 40; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02d", i);
		c[i] = cand(0, 100 - i, keys[i], (uint64_t)i);
	}
	ATF_REQUIRE_EQ(p->ops->order_candidates(p->ctx, c, 40), 0);
	for (int i = 0; i < 40; i++)
		ATF_CHECK_EQ(c[i].registration_index, (uint64_t)(39 - i));
	rsd_policy_free(p);
}

ATF_TC_WITHOUT_HEAD(tiered_lru_config);
ATF_TC_BODY(tiered_lru_config, tc)
{
	struct rsd_location pg = PAGEABLE, pn = PINNED, cu[2] = { { RSD_CUDA, 1 }, PAGEABLE };
	struct rsd_fallback_tier t[2] = { { PINNED, &pg, 1 }, { { RSD_CUDA, 0 }, cu, 2 } };
	const struct rsd_policy_config_entry *e;
	struct rsd_location out[4];
	struct rsd_policy *p;
	size_t n = 9;

	RSD_REQUIRE_OK(rsd_tiered_lru_create(NULL, 0, &p));
	ATF_CHECK_STREQ(p->ops->name(p->ctx), "deterministic-tiered-lru");
	e = p->ops->config_identity(p->ctx, &n);
	ATF_REQUIRE_EQ(n, 1);
	ATF_CHECK_STREQ(e[0].key, "fallback_tiers");
	ATF_CHECK_STREQ(e[0].value, "[]");
	ATF_CHECK_EQ(p->ops->fallback_locations(p->ctx, PINNED, out, 4), 0);
	rsd_policy_free(p);

	RSD_REQUIRE_OK(rsd_tiered_lru_create(t, 2, &p));
	e = p->ops->config_identity(p->ctx, &n);
	ATF_CHECK_STREQ(e[0].value, "[(\"pinned-host\", [\"pageable-host\"]), "
				    "(\"cuda:0\", [\"cuda:1\", \"pageable-host\"])]");
	ATF_REQUIRE_EQ(p->ops->fallback_locations(p->ctx, (struct rsd_location){ RSD_CUDA, 0 }, out,
						  4),
		       2);
	ATF_CHECK(rsd_location_equal(out[0], cu[0]) && rsd_location_equal(out[1], pg));
	ATF_CHECK_EQ(p->ops->fallback_locations(p->ctx, PAGEABLE, out, 4), 0);
	ATF_CHECK_EQ(p->ops->fallback_locations(p->ctx, PINNED, out, 4), 1);
	ATF_CHECK(rsd_location_equal(out[0], pg));
	rsd_policy_free(p);
	(void)pn;
}

ATF_TC_WITHOUT_HEAD(tiered_lru_validation);
ATF_TC_BODY(tiered_lru_validation, tc)
{
	struct rsd_location self[2] = { PAGEABLE, PINNED }, dup[2] = { PAGEABLE, PAGEABLE };
	struct rsd_location badkind = { (enum rsd_location_kind)9, -1 }, baddev = { RSD_CUDA, 300 };
	struct rsd_fallback_tier t;
	struct rsd_policy *p = NULL;

	RSD_CHECK_ERR(RSD_ETYPE, rsd_tiered_lru_create(NULL, 1, &p));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_tiered_lru_create(NULL, 0, NULL));
	t = (struct rsd_fallback_tier){ PINNED, self, 2 };
	RSD_CHECK_ERR(RSD_EINVAL, rsd_tiered_lru_create(&t, 1, &p));
	ATF_CHECK(strstr(rsd_last_error()->message, "own source"));
	t = (struct rsd_fallback_tier){ PINNED, dup, 2 };
	RSD_CHECK_ERR(RSD_EINVAL, rsd_tiered_lru_create(&t, 1, &p));
	ATF_CHECK(strstr(rsd_last_error()->message, "duplicate"));
	t = (struct rsd_fallback_tier){ badkind, dup, 1 };
	RSD_CHECK_ERR(RSD_ETYPE, rsd_tiered_lru_create(&t, 1, &p));
	t = (struct rsd_fallback_tier){ PINNED, &badkind, 1 };
	RSD_CHECK_ERR(RSD_ETYPE, rsd_tiered_lru_create(&t, 1, &p));
	t = (struct rsd_fallback_tier){ PINNED, &baddev, 1 };
	RSD_CHECK_ERR(RSD_EINVAL, rsd_tiered_lru_create(&t, 1, &p));
	t = (struct rsd_fallback_tier){ PINNED, NULL, 1 };
	RSD_CHECK_ERR(RSD_ETYPE, rsd_tiered_lru_create(&t, 1, &p));
	ATF_CHECK(p == NULL);
	/* unavailable GPUs are not checked here (statically valid) */
	baddev.device = 127;
	t = (struct rsd_fallback_tier){ PINNED, &baddev, 1 };
	RSD_CHECK_OK(rsd_tiered_lru_create(&t, 1, &p));
	rsd_policy_free(p);
}

/* ---- custom policies ---- */

static int mode; /* 0 honest, 1 duplicate, 2 blank name, 3 fails */

static const char *c_name(void *ctx)
{
	(void)ctx;
	return mode == 2 ? "  " : "custom";
}

static const struct rsd_policy_config_entry *c_cfg(void *ctx, size_t *n)
{
	static const struct rsd_policy_config_entry e = { "k", "v" };

	(void)ctx;
	*n = 1;
	return &e;
}

static int c_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	(void)ctx;
	if (mode == 1 && n >= 2)
		c[1] = c[0];
	if (mode == 3)
		return -RSD_EINVAL;
	return 0;
}

static const struct rsd_policy_ops c_ops = { c_name, c_cfg, fx_no_fallback, c_order, NULL };
static const struct rsd_policy_ops missing_ops = { c_name, c_cfg, NULL, c_order, NULL };

ATF_TC_WITHOUT_HEAD(controller_create);
ATF_TC_BODY(controller_create, tc)
{
	struct rsd_policy good = { &c_ops, NULL }, noops = { NULL, NULL };
	struct rsd_policy missing = { &missing_ops, NULL };
	struct rsd_controller *c = NULL;
	struct fx f;

	fx_init(&f, NULL, 0, 0);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_create(NULL, NULL, 0, &c));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_create(f.m, NULL, 0, NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_create(f.m, &noops, 0, &c));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_create(f.m, &missing, 0, &c));
	mode = 2;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_create(f.m, &good, 0, &c));
	ATF_CHECK(c == NULL);
	mode = 0;
	RSD_REQUIRE_OK(rsd_controller_create(f.m, &good, 0, &c));
	rsd_controller_free(c);
	rsd_controller_free(NULL);
	fx_fini(&f);
}

/* A policy that does not return a permutation, or fails, stops decide. */
ATF_TC_WITHOUT_HEAD(policy_permutation);
ATF_TC_BODY(policy_permutation, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_policy good = { &c_ops, NULL };
	struct rsd_requirement q[1];
	struct rsd_request r = { "perm", q, 1, NULL, 0 };
	struct rsd_controller *c;
	struct rsd_decision *d = NULL;
	struct rsd_handle a, b, v;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	a = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, a, PINNED);
	b = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, b, PINNED);
	v = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(v, PINNED);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, &good, 0, &c));
	mode = 1;
	RSD_CHECK_ERR(RSD_EUSAGE, rsd_controller_decide(c, &r, &d));
	ATF_CHECK_STREQ(rsd_last_error()->message,
			"policy must return every candidate exactly once");
	mode = 3;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_decide(c, &r, &d));
	mode = 0;
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK_STREQ(d->policy_name, "custom");
	ATF_REQUIRE_EQ(d->npolicy_config, 1);
	ATF_CHECK_STREQ(d->policy_config[0].value, "v");
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], a, PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §12.5 and §18.68: set_policy_metadata. */
ATF_TC_WITHOUT_HEAD(policy_metadata);
ATF_TC_BODY(policy_metadata, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_requirement q[1];
	struct rsd_request r = { "meta", q, 1, NULL, 0 };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle a, b, v, gone;
	struct fx f, g;
	uint64_t ver;

	fx_init(&f, bud, 1, 0);
	fx_init(&g, NULL, 0, 0);
	gone = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	a = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, a, PINNED);
	b = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, b, PINNED);
	v = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(v, PINNED);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, gone, 0, "shared"));
	RSD_REQUIRE_OK(rsd_discard(f.m, gone, NULL));
	ver = fx_version(&f);
	/* a discarded handle's key still counts; the handle itself is refused */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_set_policy_metadata(c, a, 0, "shared"));
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_controller_set_policy_metadata(c, gone, 0, NULL));
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_controller_set_policy_metadata(
					   c, fx_adopt(&g, PAGEABLE, RSD_REPLICABLE), 0, NULL));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_set_policy_metadata(c, a, 0, " "));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_set_policy_metadata(NULL, a, 0, NULL));
	ATF_CHECK_EQ(fx_version(&f), ver);

	/* keyed candidates go first at equal priority and epoch */
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, b, 0, "kb"));
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], b, PINNED));
	rsd_decision_free(d);
	/* the same key again for the same handle is fine; clearing it restores order */
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, b, 0, "kb"));
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, b, 0, NULL));
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], a, PINNED));
	rsd_decision_free(d);
	/* the key is free again; higher priority retains a */
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, a, 5, "kb"));
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], b, PINNED));
	ATF_CHECK_EQ(d->evictions[0].rank, 0);
	rsd_decision_free(d);
	ATF_CHECK_EQ(fx_version(&f), ver);
	rsd_controller_free(c);
	fx_fini(&f);
	fx_fini(&g);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, ordering_example);
	ATF_TP_ADD_TC(tp, ordering_keys);
	ATF_TP_ADD_TC(tp, tiered_lru_config);
	ATF_TP_ADD_TC(tp, tiered_lru_validation);
	ATF_TP_ADD_TC(tp, controller_create);
	ATF_TP_ADD_TC(tp, policy_permutation);
	ATF_TP_ADD_TC(tp, policy_metadata);
	return atf_no_error();
}
