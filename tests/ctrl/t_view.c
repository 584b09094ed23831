// SPDX-License-Identifier: MIT
/*
 * decide reads the published image in place (no snapshot copy): the
 * candidates of a location come from its member bitmap, and the image stays
 * readable while a policy callback changes the manager underneath.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdlib.h>

#include "fixture.h"

#define NVALUES 1100 /* several bitmap words, two vector levels */

static const char *rec_name(void *ctx)
{
	(void)ctx;
	return "recorder";
}

/* The first non-empty candidate list, as registration indices. */
struct seen {
	bool recorded;
	size_t n;
	uint64_t idx[NVALUES];
	struct rsd_handle h[NVALUES];
	/* writer_in_callback: discard every candidate during the first call */
	struct rsd_manager *discard_in;
	int discard_err;
};

static int rec_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	struct seen *s = ctx;

	if (s->recorded || !n)
		return 0;
	s->recorded = true;
	s->n = n;
	for (size_t i = 0; i < n; i++) {
		s->idx[i] = c[i].registration_index;
		s->h[i] = c[i].handle;
	}
	for (size_t i = 0; s->discard_in && i < n && !s->discard_err; i++)
		s->discard_err = rsd_discard(s->discard_in, c[i].handle, NULL);
	return 0;
}

static const struct rsd_policy_ops rec_ops = { rec_name, fx_no_config, fx_no_fallback, rec_order,
					       NULL };

static int decide1(struct rsd_controller *c, struct rsd_requirement q, struct rsd_decision **d)
{
	struct rsd_request r = { "view", &q, 1, NULL, 0 };

	*d = NULL;
	return rsd_controller_decide(c, &r, d);
}

/*
 * Candidates at a location are exactly its unprotected, undiscarded
 * materializations in registration order, however the values are spread
 * over the registration range.
 */
ATF_TC_WITHOUT_HEAD(candidates_from_members);
ATF_TC_BODY(candidates_from_members, tc)
{
	static struct rsd_handle h[NVALUES];
	static struct seen s;
	struct rsd_budget bud[1] = { { { RSD_PINNED_HOST, -1 }, 0 } };
	struct rsd_policy p = { &rec_ops, &s };
	struct rsd_hold *holds[NVALUES];
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle v;
	struct rsd_reservation *fill;
	size_t nhold = 0, nexp = 0, npinned = 0, ndiscard = 0;
	uint64_t exp[NVALUES], ver;
	struct fx f;

	/* budget: exactly the pinned values; the discarded ones' bytes are
	 * then reserved, so the location stays full */
	for (size_t i = 0; i < NVALUES; i++)
		if (i % 7 == 0 || i == NVALUES - 1)
			npinned++;
	bud[0].nbytes = npinned * N;
	fx_init(&f, bud, 1, 0);
	for (size_t i = 0; i < NVALUES; i++) {
		h[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
		if (i % 7 == 0 || i == NVALUES - 1)
			fx_ensure(&f, h[i], PINNED);
	}
	for (size_t i = 0; i < NVALUES; i++) {
		if (i % 7 && i != NVALUES - 1)
			continue;
		if (i % 49 == 0) {
			RSD_REQUIRE_OK(rsd_discard(f.m, h[i], NULL));
			ndiscard++;
		} else if (i % 3 == 0) {
			RSD_REQUIRE_OK(rsd_hold(f.m, &h[i], 1, PINNED, &holds[nhold]));
			nhold++;
		} else {
			exp[nexp++] = i;
		}
	}
	ATF_REQUIRE(nexp > 64 && nhold > 0 && ndiscard > 0);
	RSD_REQUIRE_OK(rsd_reserve(f.m, PINNED, ndiscard * N, "fill", &fill));
	ATF_REQUIRE_EQ(fx_used(&f, PINNED) + fx_reserved(&f, PINNED), npinned * N);
	v = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ver = fx_version(&f);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, &p, 0, &c));
	ATF_REQUIRE_EQ_MSG(decide1(c, fx_req(v, PINNED), &d), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE(s.recorded);
	ATF_REQUIRE_EQ(s.n, nexp);
	for (size_t i = 0; i < nexp; i++) {
		ATF_CHECK_EQ_MSG(s.idx[i], exp[i], "candidate %zu", i);
		ATF_CHECK(rsd_handle_equal(s.h[i], h[exp[i]]));
	}
	/* the policy kept the order: the lowest index is dropped */
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], h[exp[0]], PINNED));
	ATF_CHECK_EQ(d->expected_state_version, ver);
	ATF_CHECK_EQ(fx_version(&f), ver);
	rsd_decision_free(d);
	for (size_t i = 0; i < nhold; i++) {
		RSD_CHECK_OK(rsd_hold_release(holds[i]));
		rsd_hold_free(holds[i]);
	}
	RSD_CHECK_OK(rsd_reservation_release(fill));
	rsd_reservation_free(fill);
	rsd_controller_free(c);
	fx_fini(&f);
}

/*
 * A policy callback that changes the manager (here: discards every
 * candidate) while decide searches: the search keeps reading its image
 * safely, and decide reports the decision stale instead of returning it.
 */
ATF_TC_WITHOUT_HEAD(writer_in_callback);
ATF_TC_BODY(writer_in_callback, tc)
{
	static struct seen s;
	struct rsd_budget bud[1] = { { { RSD_PINNED_HOST, -1 }, 4 * N } };
	struct rsd_policy p = { &rec_ops, &s };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle h[4], v;
	uint64_t ver;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (size_t i = 0; i < 4; i++) {
		h[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
		fx_ensure(&f, h[i], PINNED);
	}
	v = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ver = fx_version(&f);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, &p, 0, &c));
	s.discard_in = f.m;
	ATF_CHECK_EQ(decide1(c, fx_req(v, PINNED), &d), -RSD_ESTALE);
	ATF_CHECK(d == NULL);
	ATF_CHECK_EQ(s.discard_err, 0);
	ATF_REQUIRE_EQ(s.n, 4);
	ATF_CHECK(rsd_last_error()->has_versions);
	ATF_CHECK_EQ(rsd_last_error()->expected_version, ver);
	ATF_CHECK(fx_version(&f) > ver);
	for (size_t i = 0; i < 4; i++)
		ATF_CHECK_EQ(fx_nmat(&f, h[i]), 0);

	/* on the new state the value fits without evictions */
	ATF_REQUIRE_EQ_MSG(decide1(c, fx_req(v, PINNED), &d), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(d->plan->nreclaim, 0);
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_ensure(&d->plan->enter[0], v, PINNED));
	ATF_CHECK_EQ(d->expected_state_version, fx_version(&f));
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, candidates_from_members);
	ATF_TP_ADD_TC(tp, writer_in_callback);
	return atf_no_error();
}
