// SPDX-License-Identifier: MIT
/*
 * The search and the plan simulation that confirms its plan agree on which
 * materializations are protected: the search never returns a plan whose
 * confirmation on the same image refuses it. An EXCLUSIVE required value
 * is moved from its only replica; where that replica is protected
 * (pending lease with an incomplete event, active lease, hold) the search
 * itself fails with the simulation's answer, and where the simulation
 * would let it go (a pending lease whose events all completed, not yet
 * reaped) the search plans the move.
 *
 * The search runs directly on a view of the published image, without the
 * reap decide does first, so that a completed but unreaped lease stays in
 * the image as the simulation would see it.
 */
#include <stdio.h>
#include <string.h>

#include <atf-c.h>

#include "../check.h"
#include "core/core.h"
#include "ctrl/ctrl.h"
#include "fixture.h"

static const struct rsd_location C0 = { RSD_CUDA, 0 };

/*
 * rsd__search on the image published now for a request of nq
 * requirements; the plan (when it succeeds) is left in *res.
 */
static int search_now(struct fx *f, struct rsd_controller *c, const struct rsd_requirement *q,
		      size_t nq, struct rsd__search_result *res)
{
	struct rsd_request r = { "confirm", q, nq, NULL, 0 };
	struct rsd_view view;
	int err;

	rsd__view_init(&view, rsd__read_begin(f->m));
	err = rsd__search(c, &view, &r, res);
	rsd__read_end();
	return err;
}

static int decide(struct rsd_controller *c, const struct rsd_requirement *q, size_t nq)
{
	struct rsd_request r = { "confirm", q, nq, NULL, 0 };
	struct rsd_decision *d = NULL;
	int err = rsd_controller_decide(c, &r, &d);

	rsd_decision_free(d);
	return err;
}

/* The search fails as the confirmation would, naming the source at. */
static void check_refused(struct fx *f, struct rsd_controller *c, const struct rsd_requirement *q,
			  size_t nq, const char *at)
{
	struct rsd__search_result res;
	char want[128];

	snprintf(want, sizeof(want), "source %s is protected", at);
	ATF_CHECK_EQ(search_now(f, c, q, nq, &res), -RSD_EPLAN);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	ATF_CHECK_EQ(res.nreclaim, 0);
	ATF_CHECK_EQ(res.nenter, 0);
	rsd__search_result_fini(&res);
}

/* One value adopted at pageable host with mode, required at pinned host. */
static struct rsd_controller *one_value(struct fx *f, enum rsd_replica_mode mode,
					struct rsd_requirement *q)
{
	struct rsd_controller *c;

	fx_init(f, NULL, 0, 0);
	*q = fx_req(fx_adopt(f, PAGEABLE, mode), PINNED);
	ATF_REQUIRE_EQ(rsd_controller_create(f->m, NULL, 0, &c), 0);
	return c;
}

/*
 * The state the hostile test found: an EXCLUSIVE value whose only copy is
 * at cuda:0 under a released GPU lease whose consumer stream has not run
 * (pending, its event incomplete), required at pinned host. Before the
 * search asked, it planned Move(pinned from cuda:0), which the
 * confirmation refused. Once the stream ran (the lease still unreaped)
 * the simulation counts the copy as free, and so does the search.
 */
ATF_TC_WITHOUT_HEAD(pending_exclusive_source);
ATF_TC_BODY(pending_exclusive_source, tc)
{
	struct rsd__search_result res;
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	struct rsd_handle h, other;
	struct rsd_lease *l;
	uint64_t v;
	void *st;
	struct fx f;

	fx_init_on_command(&f, NULL, 0, 1);
	other = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	h = fx_adopt(&f, C0, RSD_EXCLUSIVE);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &st), 0);
	ATF_REQUIRE_EQ(rsd_acquire(f.m, &h, 1, C0, st, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	rsd_lease_free(l);
	ATF_REQUIRE_EQ(rsd_controller_create(f.m, NULL, 0, &c), 0);

	/* the move is the second requirement's, after a feasible ensure */
	q[0] = fx_req(other, PINNED);
	q[1] = fx_req(h, PINNED);
	check_refused(&f, c, q, 2, "cuda:0");
	v = fx_version(&f);
	ATF_CHECK_EQ(decide(c, q, 2), -RSD_EPLAN);
	ATF_CHECK_STREQ(rsd_last_error()->message, "source cuda:0 is protected");
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK(fx_at(&f, h, C0));

	/* the consumer ran: the event completes, the lease is not reaped */
	rsd_simdev_stream_complete(f.sd, st);
	memset(&res, 0xa5, sizeof(res));
	ATF_REQUIRE_EQ(search_now(&f, c, q, 2, &res), 0);
	ATF_CHECK_EQ(res.nreclaim, 0);
	ATF_REQUIRE_EQ(res.nenter, 2);
	ATF_CHECK(fx_is_ensure(&res.enter[0], other, PINNED));
	ATF_CHECK(fx_is_move(&res.enter[1], h, PINNED, &C0));
	rsd__search_result_fini(&res);

	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, st);
	fx_fini(&f);
}

/*
 * Live lifetimes on the only replica: an active host lease, then a hold.
 * The search refuses each; with both gone it plans the move.
 */
ATF_TC_WITHOUT_HEAD(live_exclusive_source);
ATF_TC_BODY(live_exclusive_source, tc)
{
	struct rsd__search_result res;
	struct rsd_requirement q[1];
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct fx f;
	struct rsd_controller *c = one_value(&f, RSD_EXCLUSIVE, q);
	struct rsd_handle h = q[0].handle;

	ATF_REQUIRE_EQ(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l), 0);
	check_refused(&f, c, q, 1, "pageable-host");
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	rsd_lease_free(l);

	RSD_REQUIRE_OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	check_refused(&f, c, q, 1, "pageable-host");
	rsd_hold_release(hd);
	rsd_hold_free(hd);

	ATF_REQUIRE_EQ(search_now(&f, c, q, 1, &res), 0);
	ATF_REQUIRE_EQ(res.nenter, 1);
	ATF_CHECK(fx_is_move(&res.enter[0], h, PINNED, &PAGEABLE));
	rsd__search_result_fini(&res);
	rsd_controller_free(c);
	fx_fini(&f);
}

/*
 * A REPLICABLE required value copies from a protected replica: ensure
 * only reads it, the simulation accepts it, and the search still plans it.
 */
ATF_TC_WITHOUT_HEAD(held_replicable_source);
ATF_TC_BODY(held_replicable_source, tc)
{
	struct rsd__search_result res;
	struct rsd_requirement q[1];
	struct rsd_hold *hd;
	struct fx f;
	struct rsd_controller *c = one_value(&f, RSD_REPLICABLE, q);
	struct rsd_handle h = q[0].handle;

	RSD_REQUIRE_OK(rsd_hold(f.m, &h, 1, PAGEABLE, &hd));
	ATF_REQUIRE_EQ(search_now(&f, c, q, 1, &res), 0);
	ATF_REQUIRE_EQ(res.nenter, 1);
	ATF_CHECK(fx_is_ensure(&res.enter[0], h, PINNED));
	rsd__search_result_fini(&res);
	ATF_CHECK_EQ(decide(c, q, 1), 0);
	rsd_hold_release(hd);
	rsd_hold_free(hd);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, pending_exclusive_source);
	ATF_TP_ADD_TC(tp, live_exclusive_source);
	ATF_TP_ADD_TC(tp, held_replicable_source);
	return atf_no_error();
}
