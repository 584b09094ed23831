// SPDX-License-Identifier: MIT
/*
 * rsd_controller_use (reference.md §13.6): decide, enter, lease grouped by
 * location, record an access epoch; LRU by epochs (example I, §20.18); streams
 * on the simulated device; unwinding a failed entry (§18.76-18.79).
 */
#include <malloc.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>
#include "../check.h"

#include "core/core.h" /* the manager's list of caller objects */
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
	RSD_REQUIRE_OK(rsd_use_close(u, &rep));
	ATF_REQUIRE(rep);
	ATF_CHECK_EQ(rep->ntransitions, ntrans);
	rsd_plan_report_free(rep);
	rsd_use_free(u);
}

/* Example I's start: pinned host (budget 2N) holds v0 and v1, used in
 * that order; v2 is at pageable host only. */
static struct rsd_controller *example_i_open(struct fx *f, struct rsd_handle v[3])
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_controller *c;

	fx_init(f, bud, 1, 0);
	for (int i = 0; i < 3; i++)
		v[i] = fx_adopt(f, PAGEABLE, RSD_REPLICABLE);
	RSD_REQUIRE_OK(rsd_controller_create(f->m, NULL, 0, &c));
	use_and_close(c, fx_req(v[0], PINNED), 1);
	use_and_close(c, fx_req(v[1], PINNED), 1);
	return c;
}

/* Example I / §20.18 / §18.79. */
ATF_TC_WITHOUT_HEAD(example_i_epochs);
ATF_TC_BODY(example_i_epochs, tc)
{
	struct rsd_requirement q[1];
	struct rsd_request r = { "I", q, 1, NULL, 0 };
	struct rsd_decision *d;
	struct rsd_handle v[3];
	struct fx f;
	struct rsd_controller *c = example_i_open(&f, v);

	/* nothing is evicted at exit; deciding again yields an empty plan */
	q[0] = fx_req(v[1], PINNED);
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK_EQ(d->plan->nreclaim + d->plan->nenter, 0);
	ATF_CHECK_EQ(d->explored_states, 1);
	rsd_decision_free(d);
	/* a decide is no access: v1 stays the most recent */
	q[0] = fx_req(v[2], PINNED);
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK_EQ(d->explored_states, 2);
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[0], PINNED));
	ATF_CHECK_EQ(d->evictions[0].rank, 0);
	ATF_CHECK_STREQ(d->evictions[0].reason,
			"another materialization preserves the logical value");
	ATF_REQUIRE_EQ(d->plan->nenter, 1);
	ATF_CHECK(fx_is_ensure(&d->plan->enter[0], v[2], PINNED));
	rsd_decision_free(d);
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, v[1], -1, NULL));
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[1], PINNED));
	rsd_decision_free(d);
	RSD_REQUIRE_OK(rsd_controller_set_policy_metadata(c, v[1], 0, NULL));
	/* using v0 again makes v1 the least recently used */
	use_and_close(c, fx_req(v[0], PAGEABLE), 0);
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], v[1], PINNED));
	rsd_decision_free(d);
	rsd_controller_free(c);
	fx_fini(&f);
}

/*
 * §12.6: decide and scope record no access; a caller that uses them
 * records its own with rsd_controller_record_access(), which ages values
 * exactly as use entries do. A failed call records nothing.
 */
static void check_victim(struct rsd_controller *c, struct rsd_handle want, struct rsd_handle enter)
{
	struct rsd_requirement q = fx_req(enter, PINNED);
	struct rsd_request r = { "next", &q, 1, NULL, 0 };
	struct rsd_decision *d;

	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
	ATF_REQUIRE_EQ(d->plan->nreclaim, 1);
	ATF_CHECK(fx_is_drop(&d->plan->reclaim[0], want, PINNED));
	rsd_decision_free(d);
}

ATF_TC_WITHOUT_HEAD(record_access_ages_like_use);
ATF_TC_BODY(record_access_ages_like_use, tc)
{
	static const struct rsd_budget bud[] = { { { RSD_PINNED_HOST, -1 }, 2 * N } };
	struct rsd_controller *c;
	struct rsd_handle v[3], two[2];
	struct rsd_schedule_step step[2];
	uint64_t pos;
	struct fx f;

	fx_init(&f, bud, 1, 0);
	for (int i = 0; i < 3; i++)
		v[i] = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	fx_ensure(&f, v[0], PINNED);
	fx_ensure(&f, v[1], PINNED);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	RSD_REQUIRE_OK(rsd_controller_record_access(c, &v[1], 1));
	RSD_REQUIRE_OK(rsd_controller_record_access(c, &v[0], 1));
	check_victim(c, v[1], v[2]);
	RSD_REQUIRE_OK(rsd_controller_record_access(c, &v[1], 1));
	check_victim(c, v[0], v[2]);

	/* failures record nothing: v0 stays the oldest */
	two[0] = v[0];
	two[1] = v[1];
	two[1].manager_id += 7;
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_controller_record_access(c, two, 2));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_record_access(c, NULL, 1));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_record_access(NULL, v, 1));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_record_access(c, v, 0));
	check_victim(c, v[0], v[2]);
	/* an access to v0 twice in one call: v1 is the oldest again */
	two[1] = v[0];
	RSD_REQUIRE_OK(rsd_controller_record_access(c, two, 2));
	check_victim(c, v[1], v[2]);

	/* a declared schedule moves as it would for uses of the same sets */
	step[0] = (struct rsd_schedule_step){ &v[0], 1 };
	step[1] = (struct rsd_schedule_step){ &v[1], 1 };
	RSD_REQUIRE_OK(rsd_controller_set_schedule(c, step, 2, false));
	RSD_REQUIRE_OK(rsd_controller_record_access(c, &v[2], 1)); /* no step */
	RSD_REQUIRE_OK(rsd_controller_schedule_position(c, &pos));
	ATF_CHECK_EQ(pos, 0);
	RSD_REQUIRE_OK(rsd_controller_record_access(c, &v[0], 1));
	RSD_REQUIRE_OK(rsd_controller_schedule_position(c, &pos));
	ATF_CHECK_EQ(pos, 1);
	/* a failed call moves nothing: [v1, foreign] is refused, still at 1 */
	two[0] = v[1];
	two[1].manager_id += 7;
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_controller_record_access(c, two, 2));
	RSD_REQUIRE_OK(rsd_controller_schedule_position(c, &pos));
	ATF_CHECK_EQ(pos, 1);
	RSD_REQUIRE_OK(rsd_controller_record_access(c, &v[1], 1));
	RSD_REQUIRE_OK(rsd_controller_schedule_position(c, &pos));
	ATF_CHECK_EQ(pos, 2); /* a finite schedule, complete */
	rsd_controller_free(c);
	fx_fini(&f);
}

/* Failed entries are no access: the epoch does not advance. */
ATF_TC_WITHOUT_HEAD(failed_use_is_no_access);
ATF_TC_BODY(failed_use_is_no_access, tc)
{
	struct rsd_reservation_spec huge = { PINNED, 10 * N, "huge" };
	struct rsd_requirement q[1];
	struct rsd_request r = { "I", q, 1, NULL, 0 };
	struct rsd_decision *d;
	struct rsd_handle v[3];
	struct rsd_use *u;
	struct fx f;
	struct rsd_controller *c = example_i_open(&f, v);

	q[0] = fx_req(v[0], PAGEABLE);
	ATF_CHECK_EQ(use(c, "fail", q, 1, &huge, 1, NULL, 0, &u), -RSD_EPLAN);
	ATF_CHECK(u == NULL);
	q[0] = fx_req(v[2], PINNED);
	RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
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
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	ATF_REQUIRE_EQ_MSG(use(c, "vals", q, 3, &ws, 1, NULL, 0, &u), 0, "%s",
			   rsd_last_error()->message);
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK_EQ(fx_reserved(&f, PINNED), 5);
	RSD_REQUIRE_OK(rsd_use_value(u, a, PINNED, &val));
	ATF_CHECK(val && rsd_location_equal(rsd_resident_location(val), PINNED));
	RSD_REQUIRE_OK(rsd_use_value(u, b, PAGEABLE, &val));
	ATF_CHECK(rsd_location_equal(rsd_resident_location(val), PAGEABLE));
	RSD_REQUIRE_OK(rsd_use_value(u, a, PAGEABLE, &val));
	RSD_CHECK_ERR(RSD_ENOTFOUND, rsd_use_value(u, b, PINNED, &val));
	ATF_CHECK(rsd_use_decision(u) != NULL);
	ATF_CHECK_EQ(rsd_use_decision(u)->plan->nenter, 2);
	RSD_REQUIRE_OK(rsd_use_close(u, &rep));
	ATF_REQUIRE(rep);
	ATF_CHECK_STREQ(rep->plan_name, "vals");
	ATF_CHECK_EQ(rep->ntransitions, 2);
	rsd_plan_report_free(rep);
	ATF_CHECK_EQ(fx_reserved(&f, PINNED), 0);
	/* admitted values stay resident */
	ATF_CHECK(fx_at(&f, a, PINNED) && fx_at(&f, b, PAGEABLE));
	RSD_CHECK_ERR(RSD_EUSAGE, rsd_use_value(u, a, PINNED, &val));
	RSD_CHECK_ERR(RSD_EUSAGE, rsd_use_value(u, b, PINNED, &val));
	rep = (struct rsd_plan_report *)0x1;
	RSD_CHECK_OK(rsd_use_close(u, &rep)); /* a second close: no report */
	ATF_CHECK(rep == NULL);
	rsd_use_free(u);
	/* freeing an unclosed use closes it: the leases go away */
	ATF_REQUIRE_EQ(use(c, "vals", q, 3, NULL, 0, NULL, 0, &u), 0);
	rsd_use_free(u);
	RSD_CHECK_OK(rsd_drop(f.m, a, PINNED, NULL));
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
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s[0]));
	s[1] = s[0];
	h = fx_sourced(&f, PAGEABLE);
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(h, c0);
	q[1] = fx_req(g, PAGEABLE);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
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
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s));
	h = fx_sourced(&f, PAGEABLE);
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(h, c0);
	q[1] = fx_req(g, PAGEABLE);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	ATF_REQUIRE_EQ_MSG(use(c, "gpu", q, 2, NULL, 0, &s, 1, &u), 0, "%s",
			   rsd_last_error()->message);
	RSD_REQUIRE_OK(rsd_use_value(u, h, c0, &val));
	ATF_CHECK(rsd_location_equal(rsd_resident_location(val), c0));
	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(f.m, h, c0, NULL));
	RSD_REQUIRE_OK(rsd_use_close(u, &rep));
	ATF_REQUIRE(rep);
	ATF_CHECK_EQ(rep->ntransitions, 1);
	rsd_plan_report_free(rep);
	rsd_use_free(u);
	rsd_simdev_complete_all(f.sd);
	RSD_CHECK_OK(rsd_drop(f.m, h, c0, NULL));
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s);
	fx_fini(&f);
}

/*
 * §13.6 construction: every consumer stream is checked against its key's
 * device, and every transfer stream, before any decision. A consumer stream
 * of cuda:1 for a cuda:0 requirement is -RSD_EINVAL with nothing changed:
 * no decision, no load, no copy at cuda:0, no reservation, the same
 * state_version, and nothing written to *out.
 */
ATF_TC_WITHOUT_HEAD(streams_checked_before_decision);
ATF_TC_BODY(streams_checked_before_decision, tc)
{
	struct rsd_location c0 = { RSD_CUDA, 0 }, c1 = { RSD_CUDA, 1 };
	struct rsd_reservation_spec ws = { PAGEABLE, 7, "ws" };
	struct rsd_transfer_stream ts[2];
	struct rsd_requirement q[2];
	struct rsd_controller *c;
	struct rsd_handle h, g;
	struct rsd_use *u = (struct rsd_use *)0x1;
	struct rsd_request r = { "bad", q, 2, &ws, 1 };
	int not_a_stream;
	void *s0, *s1, *cs[1];
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, 2);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s0));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 1, &s1));
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	h = fx_sourced(&f, PAGEABLE);
	q[0] = fx_req(g, PAGEABLE);
	q[1] = fx_req(h, c0);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	v = fx_version(&f);

	/* a consumer stream of the wrong device */
	cs[0] = s1;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_use(c, &r, cs, 1, NULL, 0, &u));
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "cuda:1") &&
			      strstr(rsd_last_error()->message, "cuda:0"),
		      "%s", rsd_last_error()->message);
	/* not a stream of the driver */
	cs[0] = &not_a_stream;
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_use(c, &r, cs, 1, NULL, 0, &u));
	/* transfer streams: wrong device, unavailable device, a location twice */
	cs[0] = s0;
	ts[0] = (struct rsd_transfer_stream){ c0, s1 };
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_use(c, &r, cs, 1, ts, 1, &u));
	ts[0] = (struct rsd_transfer_stream){ { RSD_CUDA, 5 }, s0 };
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_use(c, &r, cs, 1, ts, 1, &u));
	ts[0] = (struct rsd_transfer_stream){ c1, s1 };
	ts[1] = (struct rsd_transfer_stream){ c1, s1 };
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_use(c, &r, cs, 1, ts, 2, &u));
	ts[0] = (struct rsd_transfer_stream){ c1, &not_a_stream };
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_use(c, &r, cs, 1, ts, 1, &u));
	ts[0] = (struct rsd_transfer_stream){ c1, NULL };
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_use(c, &r, cs, 1, ts, 1, &u));
	ts[0] = (struct rsd_transfer_stream){ PINNED, s0 }; /* a host key */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_use(c, &r, cs, 1, ts, 1, &u));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_controller_use(c, &r, cs, 1, NULL, 1, &u));

	ATF_CHECK(u == (struct rsd_use *)0x1);
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK(!fx_at(&f, h, c0));
	ATF_CHECK_EQ(fx_nmat(&f, h), 0);
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 0);
	/* and the good streams still work */
	ts[0] = (struct rsd_transfer_stream){ c1, s1 };
	RSD_REQUIRE_OK(rsd_controller_use(c, &r, cs, 1, ts, 1, &u));
	ATF_CHECK(fx_at(&f, h, c0));
	RSD_CHECK_OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	rsd_simdev_complete_all(f.sd);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s0);
	rsd_simdev_stream_destroy(f.sd, s1);
	fx_fini(&f);
}

/*
 * A requirement at a device the process lacks (cuda:2 with two simulated
 * devices) is refused for the device, before its stream is compared: the
 * cuda:0 stream given for it is not what is wrong.
 */
ATF_TC_WITHOUT_HEAD(absent_device_before_stream);
ATF_TC_BODY(absent_device_before_stream, tc)
{
	struct rsd_location c2 = { RSD_CUDA, 2 };
	struct rsd_use *u = (struct rsd_use *)0x1;
	struct rsd_requirement q[1];
	struct rsd_request r = { "absent", q, 1, NULL, 0 };
	struct rsd_controller *c;
	const char *msg;
	void *s0;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, 2);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s0));
	q[0] = fx_req(fx_sourced(&f, PAGEABLE), c2);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	v = fx_version(&f);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_controller_use(c, &r, &s0, 1, NULL, 0, &u));
	msg = rsd_last_error()->message;
	ATF_CHECK_MSG(strstr(msg, "cuda:2") && strstr(msg, "not available") &&
			      !strstr(msg, "does not match"),
		      "%s", msg);
	ATF_CHECK(u == (struct rsd_use *)0x1);
	ATF_CHECK_EQ(fx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s0);
	fx_fini(&f);
}

/*
 * §18.77: an acquire fails after the scope committed (the "acquire" fault
 * point at cuda:0): the use unwinds (the pageable lease released, the
 * reservation released, the placement kept), returns the acquire's code and
 * writes nothing to *out; what entry committed is the partial report.
 * That is the fail-fast use (RSD_CTRL_NOWAIT): a waiting one takes a value
 * not resident for its lease for another thread's work (moved away, or
 * still arriving), unwinds the same way and decides again.
 */
ATF_TC_WITHOUT_HEAD(acquire_failure_unwinds);
ATF_TC_BODY(acquire_failure_unwinds, tc)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_reservation_spec ws = { PAGEABLE, 7, "ws" };
	struct rsd_requirement q[2];
	struct rsd_request r = { "bad", q, 2, &ws, 1 };
	struct rsd_use *u = (struct rsd_use *)0x1;
	struct rsd_plan_report *partial;
	struct rsd_controller *c;
	struct rsd_handle h, g;
	void *s0;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s0));
	g = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	h = fx_sourced(&f, PAGEABLE);
	q[0] = fx_req(g, PAGEABLE);
	q[1] = fx_req(h, c0);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	RSD_REQUIRE_OK(rsd_controller_set_flags(c, RSD_CTRL_NOWAIT));
	rsd_plan_report_free(rsd_take_partial_report());
	RSD_REQUIRE_OK(rsd_fault_inject("acquire", "cuda:0", 1, RSD_EUNAVAILABLE));
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_controller_use(c, &r, &s0, 1, NULL, 0, &u));
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EUNAVAILABLE);
	RSD_REQUIRE_OK(rsd_fault_inject("acquire", NULL, 0, 0));
	ATF_CHECK(u == (struct rsd_use *)0x1);
	/* placement stays, the reservation was released, the first lease too */
	ATF_CHECK(fx_at(&f, h, c0));
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 0);
	RSD_CHECK_ERR(RSD_EOWNERSHIP, rsd_drop(f.m, g, PAGEABLE, NULL)); /* not leased */
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_CHECK_STREQ(partial->plan_name, "bad");
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	ATF_CHECK(fx_is_ensure(&partial->transitions[0].action, h, c0));
	rsd_plan_report_free(partial);
	ATF_CHECK(rsd_take_partial_report() == NULL);
	/* the same use succeeds once the point is disarmed */
	RSD_REQUIRE_OK(rsd_controller_use(c, &r, &s0, 1, NULL, 0, &u));
	RSD_CHECK_OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	/* waiting: the failed lease is unwound and the use decided again */
	RSD_REQUIRE_OK(rsd_controller_set_flags(c, 0));
	RSD_REQUIRE_OK(rsd_fault_inject("acquire", "cuda:0", 1, RSD_EUNAVAILABLE));
	RSD_CHECK_OK(rsd_controller_use(c, &r, &s0, 1, NULL, 0, &u));
	RSD_REQUIRE_OK(rsd_fault_inject("acquire", NULL, 0, 0));
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 7);
	RSD_CHECK_OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 0);
	rsd_simdev_complete_all(f.sd);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, s0);
	fx_fini(&f);
}

/*
 * Values exist only inside the active use: after close every lookup is
 * -RSD_EUSAGE (a usage error, not a closed lifetime), whether or not the
 * pair is a requirement; a malformed handle or location record is refused
 * as such even then.
 */
ATF_TC_WITHOUT_HEAD(value_outside_active_use);
ATF_TC_BODY(value_outside_active_use, tc)
{
	const struct rsd_resident *val = (const struct rsd_resident *)0x1;
	struct rsd_requirement q[1];
	struct rsd_controller *c;
	struct rsd_handle a, zero;
	struct rsd_use *u;
	struct fx f;

	fx_init(&f, NULL, 0, 0);
	a = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	q[0] = fx_req(a, PAGEABLE);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	ATF_REQUIRE_EQ(use(c, "v", q, 1, NULL, 0, NULL, 0, &u), 0);
	RSD_REQUIRE_OK(rsd_use_close(u, NULL));
	RSD_CHECK_ERR(RSD_EUSAGE, rsd_use_value(u, a, PAGEABLE, &val));
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "not active"), "%s",
		      rsd_last_error()->message);
	RSD_CHECK_ERR(RSD_EUSAGE, rsd_use_value(u, a, PINNED, &val));
	zero = a;
	zero.id = 0;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_use_value(u, zero, PAGEABLE, &val));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_use_value(u, a, (struct rsd_location){ RSD_CUDA, -1 }, &val));
	ATF_CHECK(val == (const struct rsd_resident *)0x1);
	rsd_use_free(u);
	rsd_controller_free(c);
	fx_fini(&f);
}

/* Bytes the allocator has handed out and not taken back (0 where the
 * allocator does not say, as under AddressSanitizer: LeakSanitizer checks
 * there instead). */
static size_t heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
	return mallinfo2().uordblks;
#else
	return 0;
#endif
}

/* Let replaced images and retired records reach their grace periods and be
 * freed (by the reclaimer thread and by the writer's next calls). */
static size_t quiesced_heap(struct fx *f)
{
	struct timespec ms5 = { 0, 5000000 };

	for (int i = 0; i < 4; i++) {
		nanosleep(&ms5, NULL);
		RSD_REQUIRE_OK(rsd_manager_reap(f->m));
	}
	return heap_in_use();
}

/* Caller objects (leases, holds, reservations, scopes) the manager lists. */
static size_t listed_objects(struct rsd_manager *m)
{
	const struct rsd_objlink *o;
	size_t n = 0;

	pthread_mutex_lock(&m->objs_lock);
	rsd__list_for_each_entry(o, &m->objs, node)
		n++;
	pthread_mutex_unlock(&m->objs_lock);
	return n;
}

/* A completed but unreaped GPU lease: the next writer entry reaps it (+1). */
static void completed_pending_lease(struct fx *f, struct rsd_handle h, void *st)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_lease *l;

	RSD_REQUIRE_OK(rsd_acquire(f->m, &h, 1, c0, st, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	rsd_simdev_stream_complete(f->sd, st);
}

/*
 * The stale-entry set-up: g replicable at pageable host, h sourced and
 * ensured on cuda:0, a stream st, device work completing on command only.
 */
static void stale_setup(struct fx *f, struct rsd_handle *g, struct rsd_handle *h, void **st)
{
	struct rsd_location c0 = { RSD_CUDA, 0 };

	fx_init(f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f->sd, 0, st));
	*g = fx_adopt(f, PAGEABLE, RSD_REPLICABLE);
	*h = fx_sourced(f, PAGEABLE);
	fx_ensure(f, *h, c0);
	rsd_simdev_set_auto_complete(f->sd, false);
}

/*
 * A failed entry writes nothing to *out and leaves nothing to free: 1,000
 * stale entries each of rsd_scope_enter, rsd_controller_scope and
 * rsd_controller_use, written as a caller who trusts "out-parameters only
 * on success" writes them, neither grow the heap (LeakSanitizer and
 * valgrind check the same in the instrumented suites) nor leave an object
 * on the manager's list of caller objects, and the manager then closes
 * without force. The use goes stale inside its own entry: its scope entry
 * reaps a completed GPU lease that decide saw pending.
 */
ATF_TC_WITHOUT_HEAD(failed_entries_leave_nothing);
ATF_TC_BODY(failed_entries_leave_nothing, tc)
{
	struct rsd_reservation_spec ws = { PAGEABLE, 8, "ws" };
	struct rsd_action en[1];
	struct rsd_plan p = { .name = "stale",
			      .reservations = &ws,
			      .nreservations = 1,
			      .enter = en,
			      .nenter = 1 };
	struct rsd_requirement q[1];
	struct rsd_request r = { "stale", q, 1, &ws, 1 };
	struct rsd_scope *sc = (struct rsd_scope *)0x1;
	struct rsd_use *u = (struct rsd_use *)0x1;
	struct rsd_reservation *bump;
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_handle g, h;
	size_t before = 0, after;
	uint64_t stale;
	void *st;
	struct fx f;

	stale_setup(&f, &g, &h, &st);
	en[0] = rsd_action_ensure(g, PINNED);
	q[0] = fx_req(g, PINNED);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	/* fail fast: a waiting use would decide again after the stale entry */
	RSD_REQUIRE_OK(rsd_controller_set_flags(c, RSD_CTRL_NOWAIT));
	for (int i = 0; i < 200 + 1000; i++) {
		/* after the caches, tables and thread-local records warmed up */
		if (i == 200)
			before = quiesced_heap(&f);
		stale = fx_version(&f) + 1;
		RSD_REQUIRE_ERR(RSD_ESTALE, rsd_scope_enter(f.m, &p, NULL, 0, &stale, &sc));

		RSD_REQUIRE_OK(rsd_controller_decide(c, &r, &d));
		RSD_REQUIRE_OK(rsd_reserve(f.m, PAGEABLE, 1, "bump", &bump));
		RSD_REQUIRE_OK(rsd_reservation_release(bump));
		rsd_reservation_free(bump);
		RSD_REQUIRE_ERR(RSD_ESTALE, rsd_controller_scope(c, d, NULL, 0, &sc));
		rsd_decision_free(d);

		completed_pending_lease(&f, h, st);
		RSD_REQUIRE_ERR(RSD_ESTALE, rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u));
	}
	after = quiesced_heap(&f);
	ATF_CHECK(sc == (struct rsd_scope *)0x1 && u == (struct rsd_use *)0x1);
	/* a leaked entry costs 0.5-2 KiB: 3000 of them several MiB; what
	 * waits for a grace period varies by less than 64 KiB */
	ATF_CHECK_MSG(after <= before + 256 * 1024, "3000 failed entries kept %zu heap bytes",
		      after - before);
	ATF_CHECK_EQ_MSG(listed_objects(f.m), 0, "%zu objects left on the manager's list",
			 listed_objects(f.m));
	/* nothing was admitted, loaded or left reserved */
	ATF_CHECK(!fx_at(&f, g, PINNED));
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(f.loads, 1);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, st);
	RSD_CHECK_OK(rsd_manager_close(f.m, 0));
	fx_fini(&f);
}

/*
 * The same entry overtaken by a reap, without RSD_CTRL_NOWAIT: the use
 * decides again on the state its entry found and succeeds, with exactly
 * one decision (the second) and the value leased; the failed first attempt
 * left nothing reserved.
 */
ATF_TC_WITHOUT_HEAD(stale_use_decides_again);
ATF_TC_BODY(stale_use_decides_again, tc)
{
	struct rsd_reservation_spec ws = { PAGEABLE, 8, "ws" };
	struct rsd_requirement q[1];
	struct rsd_request r = { "stale", q, 1, &ws, 1 };
	const struct rsd_resident *res;
	struct rsd_controller *c;
	struct rsd_handle g, h;
	struct rsd_use *u;
	uint64_t v0;
	void *st;
	struct fx f;

	stale_setup(&f, &g, &h, &st);
	q[0] = fx_req(g, PINNED);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, 0, &c));
	/* decide sees the lease pending, the entry reaps it: stale once */
	completed_pending_lease(&f, h, st);
	v0 = fx_version(&f);
	RSD_REQUIRE_OK(rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u));
	/* the decision entered is the one made after the reap */
	ATF_CHECK_EQ(rsd_use_decision(u)->expected_state_version, v0 + 1);
	RSD_CHECK_OK(rsd_use_value(u, g, PINNED, &res));
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 8);
	RSD_CHECK_OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	ATF_CHECK_EQ(fx_reserved(&f, PAGEABLE), 0);
	rsd_controller_free(c);
	rsd_simdev_stream_destroy(f.sd, st);
	RSD_CHECK_OK(rsd_manager_close(f.m, 0));
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, example_i_epochs);
	ATF_TP_ADD_TC(tp, failed_use_is_no_access);
	ATF_TP_ADD_TC(tp, record_access_ages_like_use);
	ATF_TP_ADD_TC(tp, use_values_and_close);
	ATF_TP_ADD_TC(tp, consumer_stream_coverage);
	ATF_TP_ADD_TC(tp, gpu_use);
	ATF_TP_ADD_TC(tp, streams_checked_before_decision);
	ATF_TP_ADD_TC(tp, absent_device_before_stream);
	ATF_TP_ADD_TC(tp, acquire_failure_unwinds);
	ATF_TP_ADD_TC(tp, value_outside_active_use);
	ATF_TP_ADD_TC(tp, failed_entries_leave_nothing);
	ATF_TP_ADD_TC(tp, stale_use_decides_again);
	return atf_no_error();
}
