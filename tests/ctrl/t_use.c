// SPDX-License-Identifier: MIT
/*
 * rsd_controller_use (reference.md §13.6): decide, enter, lease grouped by
 * location, record an access epoch; LRU by epochs (example I, §20.18); streams
 * on the simulated device; unwinding a failed entry (§18.76-18.79).
 */
#include <string.h>

#include <atf-c.h>

#include "fixture.h"

static int use(struct rsd_controller *c, const char *name, const struct rsd_requirement *q,
	       size_t nq, const struct rsd_reservation_spec *rs, size_t nrs, void *const *cs,
	       size_t ncs, struct rsd_use **u)
{
	struct rsd_request r = { name, q, nq, rs, nrs };

	*u = NULL;
	return rsd_controller_use(c, &r, cs, ncs, NULL, 0, u);
}

static void use_and_close(struct rsd_controller *c, struct rsd_requirement q, size_t ntrans)
{
	struct rsd_plan_report *rep = NULL;
	struct rsd_use *u;

	ATF_REQUIRE_EQ_MSG(use(c, "u", &q, 1, NULL, 0, NULL, 0, &u), 0, "%s",
			   rsd_last_error()->message);
	ATF_CHECK_EQ(rsd_use_decision(u)->explored_states, 1);
	ATF_REQUIRE_EQ(rsd_use_close(u, &rep), 0);
	ATF_REQUIRE(rep);
	ATF_CHECK_EQ(rep->ntransitions, ntrans);
	rsd_plan_report_free(rep);
	rsd_use_free(u);
}

/* Example I / §20.18 / §18.79. */
ATF_TC_WITHOUT_HEAD(example_i_epochs);
ATF_TC_BODY(example_i_epochs, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_requirement q[1];
	struct rsd_request r = { "I", q, 1, NULL, 0 };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle v[3];
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (int i = 0; i < 3; i++)
		v[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	use_and_close(c, fx_req(v[0], PINNED), 1);
	use_and_close(c, fx_req(v[1], PINNED), 1);
	/* nothing is evicted at exit; deciding again yields an empty plan */
	q[0] = fx_req(v[1], PINNED);
	ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
	ATF_CHECK_EQ(d->plan->nreclaim + d->plan->nenter, 0);
	ATF_CHECK_EQ(d->explored_states, 1);
	rsd_decision_free(d);
	/* a decide is no access: v1 stays the most recent */
	q[0] = fx_req(v[2], PINNED);
	ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
	ATF_CHECK_EQ(d->explored_states, 2);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[0], PINNED));
	ATF_CHECK_EQ(d->evictions[0].rank, 0);
	ATF_CHECK_STREQ(d->evictions[0].reason, "another materialization preserves the logical value");
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_ensure(&d->plan->enter[0], v[2], PINNED));
	rsd_decision_free(d);
	ATF_REQUIRE_EQ(rsd_controller_set_policy_metadata(c, v[1], -1, NULL), 0);
	ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[1], PINNED));
	rsd_decision_free(d);
	ATF_REQUIRE_EQ(rsd_controller_set_policy_metadata(c, v[1], 0, NULL), 0);
	/* using v0 again makes v1 the least recently used */
	use_and_close(c, fx_req(v[0], PAGEABLE), 0);
	ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[1], PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* Failed entries are no access: the epoch does not advance. */
ATF_TC_WITHOUT_HEAD(failed_use_is_no_access);
ATF_TC_BODY(failed_use_is_no_access, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_reservation_spec huge = { PINNED, 10 * N, "huge" };
	struct rsd_requirement q[1];
	struct rsd_request r = { "I", q, 1, NULL, 0 };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle v[3];
	struct rsd_use *u;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (int i = 0; i < 3; i++)
		v[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	use_and_close(c, fx_req(v[0], PINNED), 1);
	use_and_close(c, fx_req(v[1], PINNED), 1);
	q[0] = fx_req(v[0], PAGEABLE);
	ATF_CHECK_EQ(use(c, "fail", q, 1, &huge, 1, NULL, 0, &u), -RSD_EPLAN);
	ATF_CHECK(u == NULL);
	q[0] = fx_req(v[2], PINNED);
	ATF_REQUIRE_EQ(rsd_controller_decide(c, &r, &d), 0);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[0], PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(use_values_and_close);
ATF_TC_BODY(use_values_and_close, tc)
{
	struct rsd_reservation_spec ws = { PINNED, 5, "ws" };
	const struct rsd_resident *val = NULL;
	struct rsd_plan_report *rep = NULL;
	struct rsd_requirement q[3];
	struct rsd_controller *c;
	struct rsd_handle a, b;
	struct rsd_use *u;
	struct fx f;

	fx_init(&f, NULL, 0, 0);
	a = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	b = fx_sourced(&f, PAGEABLE);
	q[0] = fx_req(a, PINNED);
	q[1] = fx_req(b, PAGEABLE);
	q[2] = fx_req(a, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	ATF_REQUIRE_EQ_MSG(use(c, "vals", q, 3, &ws, 1, NULL, 0, &u), 0, "%s",
			   rsd_last_error()->message);
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK_EQ(fx_reserved(&f, PINNED), 5);
	ATF_REQUIRE_EQ(rsd_use_value(u, a, PINNED, &val), 0);
	ATF_CHECK(val && rsd_location_equal(rsd_resident_location(val), PINNED));
	ATF_REQUIRE_EQ(rsd_use_value(u, b, PAGEABLE, &val), 0);
	ATF_CHECK(rsd_location_equal(rsd_resident_location(val), PAGEABLE));
	ATF_REQUIRE_EQ(rsd_use_value(u, a, PAGEABLE, &val), 0);
	ATF_CHECK_EQ(rsd_use_value(u, b, PINNED, &val), -RSD_ENOTFOUND);
	ATF_CHECK(rsd_use_decision(u) != NULL);
	ATF_CHECK_EQ(rsd_use_decision(u)->plan->nenter, 2);
	ATF_REQUIRE_EQ(rsd_use_close(u, &rep), 0);
	ATF_REQUIRE(rep);
	ATF_CHECK_STREQ(rep->plan_name, "vals");
	ATF_CHECK_EQ(rep->ntransitions, 2);
	rsd_plan_report_free(rep);
	ATF_CHECK_EQ(fx_reserved(&f, PINNED), 0);
	/* admitted values stay resident */
	ATF_CHECK(fx_at(&f, a, PINNED) && fx_at(&f, b, PAGEABLE));
	ATF_CHECK_EQ(rsd_use_value(u, a, PINNED, &val), -RSD_ELIFETIME);
	ATF_CHECK_EQ(rsd_use_value(u, b, PINNED, &val), -RSD_ENOTFOUND);
	ATF_CHECK_EQ(rsd_use_close(u, &rep), 0);
	ATF_CHECK(rep == NULL);
	rsd_use_free(u);
	/* freeing an unclosed use closes it: the leases go away */
	ATF_REQUIRE_EQ(use(c, "vals", q, 3, NULL, 0, NULL, 0, &u), 0);
	rsd_use_free(u);
	ATF_CHECK_EQ(rsd_drop(f.m, a, PINNED, NULL), 0);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* §18.76: consumer streams must match the CUDA requirement locations. */
ATF_TC_WITHOUT_HEAD(consumer_stream_coverage);
ATF_TC_BODY(consumer_stream_coverage, tc)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	struct rsd_handle h, g;
	struct rsd_use *u;
	void *s[2] = { NULL, NULL }, *nul[1] = { NULL };
	struct fx f;
	uint64_t v;

	fx_init(&f, NULL, 0, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &s[0]), 0);
	s[1] = s[0];
	h = fx_sourced(&f, PAGEABLE);
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(h, c0);
	q[1] = fx_req(g, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	v = fx_version(&f);
	ATF_CHECK_EQ(use(c, "gpu", q, 2, NULL, 0, NULL, 0, &u), -RSD_EINVAL);
	ATF_CHECK(strstr(rsd_last_error()->message, "missing [cuda:0]"));
	ATF_CHECK_EQ(use(c, "gpu", q, 2, NULL, 0, s, 2, &u), -RSD_EINVAL);
	ATF_CHECK(strstr(rsd_last_error()->message, "unexpected 1"));
	ATF_CHECK_EQ(use(c, "host", &q[1], 1, NULL, 0, s, 1, &u), -RSD_EINVAL);
	ATF_CHECK_EQ(use(c, "gpu", q, 2, NULL, 0, nul, 1, &u), -RSD_ETYPE);
	ATF_CHECK(u == NULL);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(fx_version(&f), v);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s[0]);
	fx_fini(&f);
}

/* A GPU use on the simulated device: the lease turns pending at close. */
ATF_TC_WITHOUT_HEAD(gpu_use);
ATF_TC_BODY(gpu_use, tc)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	const struct rsd_resident *val;
	struct rsd_plan_report *rep = NULL;
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	struct rsd_handle h, g;
	struct rsd_use *u;
	void *s;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &s), 0);
	h = fx_sourced(&f, PAGEABLE);
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(h, c0);
	q[1] = fx_req(g, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	ATF_REQUIRE_EQ_MSG(use(c, "gpu", q, 2, NULL, 0, &s, 1, &u), 0, "%s",
			   rsd_last_error()->message);
	ATF_REQUIRE_EQ(rsd_use_value(u, h, c0, &val), 0);
	ATF_CHECK(rsd_location_equal(rsd_resident_location(val), c0));
	ATF_CHECK_EQ(rsd_drop(f.m, h, c0, NULL), -RSD_EINUSE);
	ATF_REQUIRE_EQ(rsd_use_close(u, &rep), 0);
	ATF_REQUIRE(rep);
	ATF_CHECK_EQ(rep->ntransitions, 1);
	rsd_plan_report_free(rep);
	rsd_use_free(u);
	rsd_simdev_complete_all(f.sd);
	ATF_CHECK_EQ_MSG(rsd_drop(f.m, h, c0, NULL), 0, "%s", rsd_last_error()->message);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s);
	fx_fini(&f);
}

/* §18.77: acquire fails after admission; the use unwinds and stays readable. */
ATF_TC_WITHOUT_HEAD(acquire_failure_unwinds);
ATF_TC_BODY(acquire_failure_unwinds, tc)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_reservation_spec ws = { PAGEABLE, 7, "ws" };
	const struct rsd_resident *val;
	struct rsd_plan_report *rep = NULL;
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	struct rsd_handle h, g;
	struct rsd_use *u;
	void *wrong;
	struct fx f;

	fx_init(&f, NULL, 0, 2);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 1, &wrong), 0);
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	h = fx_sourced(&f, PAGEABLE);
	q[0] = fx_req(g, PAGEABLE);
	q[1] = fx_req(h, c0);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);
	ATF_CHECK_EQ(use(c, "bad", q, 2, &ws, 1, &wrong, 1, &u), -RSD_EINVAL);
	ATF_REQUIRE(u != NULL);
	ATF_REQUIRE(rsd_use_decision(u) != NULL);
	ATF_CHECK_EQ(rsd_use_decision(u)->plan->nenter, 1);
	/* placement stays, the reservation was released, the first lease too */
	ATF_CHECK(fx_at(&f, h, c0));
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(rsd_use_value(u, g, PAGEABLE, &val), -RSD_ELIFETIME);
	ATF_REQUIRE_EQ(rsd_use_close(u, &rep), 0);
	ATF_REQUIRE(rep);
	ATF_CHECK_EQ(rep->ntransitions, 1);
	rsd_plan_report_free(rep);
	ATF_CHECK_EQ(rsd_use_close(u, &rep), 0);
	ATF_CHECK(rep == NULL);
	rsd_use_free(u);
	ATF_CHECK_EQ(rsd_drop(f.m, g, PAGEABLE, NULL), -RSD_EOWNERSHIP); /* not leased */
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, wrong);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, example_i_epochs);
	ATF_TP_ADD_TC(tp, failed_use_is_no_access);
	ATF_TP_ADD_TC(tp, use_values_and_close);
	ATF_TP_ADD_TC(tp, consumer_stream_coverage);
	ATF_TP_ADD_TC(tp, gpu_use);
	ATF_TP_ADD_TC(tp, acquire_failure_unwinds);
	return atf_no_error();
}
