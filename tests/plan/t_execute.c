// SPDX-License-Identifier: MIT
/*
 * rsd_execute_actions (reference.md §10.4): atomic preflight, the typed
 * failures that differ from the direct calls, runtime failures with a
 * committed prefix (-RSD_EEXEC, partial reports), report fields, the
 * expected version, transfer-stream maps, and fault injection through the
 * simulated device at every action position. Values are 64 bytes (N).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "pfx.h"

/*
 * Accounting is consistent: per location, used = Σ charges of the
 * materializations there, value_count matches, and nothing is reserved.
 */
static void check_consistent(struct pfx *f)
{
	struct rsd_snapshot *s;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];
		uint64_t used = 0, count = 0;
		char name[RSD_LOCATION_NAME_MAX];

		for (size_t j = 0; j < s->nvalues; j++)
			for (size_t k = 0; k < s->values[j].nmaterializations; k++) {
				const struct rsd_materialization_snapshot *x =
					&s->values[j].materializations[k];

				if (pfx_loc_is(x->location, l->location)) {
					used += x->charged_nbytes;
					count++;
				}
			}
		rsd_location_name(l->location, name, sizeof(name));
		ATF_CHECK_EQ_MSG(l->used_bytes, used, "%s: used %llu, charges %llu", name,
				 (unsigned long long)l->used_bytes, (unsigned long long)used);
		ATF_CHECK_EQ_MSG(l->value_count, count, "%s: value_count", name);
		ATF_CHECK_EQ_MSG(l->reserved_bytes, 0, "%s: reserved %llu", name,
				 (unsigned long long)l->reserved_bytes);
	}
	ATF_CHECK_EQ(s->nreservations, 0);
	rsd_snapshot_free(s);
}

/* A transition of N bytes with the given reason (NULL: none). */
static void check_transition(const struct rsd_transition *t, const struct rsd_action *a, bool no_op,
			     const struct rsd_location *src, const struct rsd_location *dst,
			     const char *reason)
{
	pfx_check_transition(t, a, no_op, src, dst, N);
	if (reason) {
		ATF_REQUIRE(t->reason);
		ATF_CHECK_STREQ(t->reason, reason);
	} else {
		ATF_CHECK(t->reason == NULL);
	}
}

/* ---- preflight ---- */

/* Infeasible: -RSD_EPLAN with the first reason, nothing changed (§10.4 step 5). */
ATF_TC_WITHOUT_HEAD(atomic_preflight);
ATF_TC_BODY(atomic_preflight, tc)
{
	struct rsd_plan_report *r = NULL;
	const struct rsd_error *err;
	struct rsd_action a[3];
	struct rsd_handle g, x;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	g = pfx_sourced(&f, PAGEABLE);
	x = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	v = pfx_version(&f);
	pfx_clear_partial();
	a[0] = rsd_action_ensure(g, PAGEABLE);
	a[1] = rsd_action_ensure(g, PINNED);
	a[2] = rsd_action_ensure(x, PINNED);
	RSD_CHECK_ERR(RSD_EPLAN, rsd_execute_actions(f.m, a, 3, "atomic", NULL, 0, NULL, &r));
	ATF_CHECK(r == NULL);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->code, RSD_EPLAN);
	ATF_CHECK_STREQ(err->message, "EnsureResident would replicate an EXCLUSIVE value");
	ATF_CHECK_EQ(err->phase, RSD_PHASE_NONE);
	ATF_CHECK_EQ(err->failed_action_index, -1);
	ATF_CHECK(rsd_take_partial_report() == NULL);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(pfx_nmat(&f, g), 0);
	ATF_CHECK_EQ(pfx_nlocations(&f), 1);
	ATF_CHECK(rsd_err_is_plan_error(-RSD_EPLAN));
	ATF_CHECK(!rsd_err_is_plan_error(-RSD_EEXEC));

	/* The same action directly is an ownership error (§18.26). */
	RSD_CHECK_ERR(RSD_EOWNERSHIP, rsd_ensure(f.m, x, PINNED, NULL, NULL));
	/* EXCLUSIVE at its own location: a no-op through both. */
	a[0] = rsd_action_ensure(x, PAGEABLE);
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, NULL, &r));
	ATF_REQUIRE_EQ(r->ntransitions, 1);
	check_transition(&r->transitions[0], &a[0], true, NULL, &PAGEABLE,
			 "destination already resident");
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_version(&f), v);
	check_consistent(&f);
	pfx_fini(&f);
}

/* A foreign handle: EHANDLE directly, EPLAN through a plan (§10.4). */
ATF_TC_WITHOUT_HEAD(foreign_handle_is_plan_error);
ATF_TC_BODY(foreign_handle_is_plan_error, tc)
{
	struct rsd_action a[1];
	struct rsd_handle h;
	struct pfx f, g;
	char want[160];

	pfx_init(&f, NULL, 0, -1);
	pfx_init(&g, NULL, 0, -1);
	h = pfx_adopt(&g, PAGEABLE, RSD_EXCLUSIVE);
	a[0] = rsd_action_drop(h, PAGEABLE);
	RSD_CHECK_ERR(RSD_EPLAN, rsd_execute_actions(f.m, a, 1, "foreign", NULL, 0, NULL, NULL));
	snprintf(want, sizeof(want), "Handle belongs to manager '%llu', not '%llu'",
		 (unsigned long long)rsd_manager_id(g.m), (unsigned long long)rsd_manager_id(f.m));
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	RSD_CHECK_ERR(RSD_EHANDLE, rsd_drop(f.m, h, PAGEABLE, NULL));
	ATF_CHECK_EQ(pfx_version(&f), 0);
	pfx_fini(&g);
	pfx_fini(&f);
}

/* §18.3: cuda:N beyond the device count. */
ATF_TC_WITHOUT_HEAD(unavailable_device_is_plan_error);
ATF_TC_BODY(unavailable_device_is_plan_error, tc)
{
	struct rsd_action a[1];
	struct rsd_handle h;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	a[0] = rsd_action_ensure(h, pfx_cuda(1));
	RSD_CHECK_ERR(RSD_EPLAN, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, NULL, NULL));
	ATF_CHECK_STREQ(rsd_last_error()->message,
			"Residency location cuda:1 is not available in this process");
	RSD_CHECK_ERR(RSD_EINVAL, rsd_ensure(f.m, h, pfx_cuda(1), NULL, NULL));
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(pfx_nlocations(&f), 1);
	ATF_CHECK_EQ(f.loads, 0);
	pfx_fini(&f);
}

/* ---- runtime failure: §20.8 (§18.47) ---- */

ATF_TC_WITHOUT_HEAD(runtime_failure_partial_report);
ATF_TC_BODY(runtime_failure_partial_report, tc)
{
	struct rsd_plan_report *r = NULL, *p;
	const struct rsd_error *err;
	struct rsd_action a[3];
	struct rsd_handle g, bad;
	char detail[512];
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	g = pfx_sourced(&f, PAGEABLE);
	bad = pfx_sourced_fail(&f, PAGEABLE, -RSD_EDEVICE);
	ATF_REQUIRE_EQ(pfx_version(&f), 3);
	pfx_clear_partial();
	a[0] = rsd_action_ensure(g, PAGEABLE);
	a[1] = rsd_action_ensure(bad, PAGEABLE);
	a[2] = rsd_action_drop(g, PAGEABLE);
	/* The direct call's message is the detail of the plan error. */
	RSD_REQUIRE_ERR(RSD_EDEVICE, rsd_ensure(f.m, bad, PAGEABLE, NULL, NULL));
	snprintf(detail, sizeof(detail), "%s", rsd_last_error()->message);
	RSD_REQUIRE_ERR(RSD_EEXEC, rsd_execute_actions(f.m, a, 3, "w8", NULL, 0, NULL, &r));
	err = rsd_last_error();
	ATF_CHECK_MSG(strstr(err->message, detail) != NULL, "'%s' lacks '%s'", err->message,
		      detail);
	ATF_CHECK_EQ(err->code, RSD_EEXEC);
	ATF_CHECK_EQ(err->phase, RSD_PHASE_EXECUTE);
	ATF_CHECK_STREQ(rsd_phase_name(err->phase), "execute");
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EDEVICE);
	ATF_CHECK_STREQ(err->plan_name, "w8");

	/* The partial report through the out-parameter... */
	ATF_REQUIRE(r != NULL);
	ATF_CHECK_STREQ(r->plan_name, "w8");
	ATF_REQUIRE_EQ(r->ntransitions, 1);
	check_transition(&r->transitions[0], &a[0], false, &PAGEABLE, &PAGEABLE, NULL);
	ATF_CHECK(r->completed_at_ns >= r->started_at_ns);
	ATF_CHECK(r->started_at_ns <= r->transitions[0].started_at_ns);
	rsd_plan_report_free(r);
	/* ...and once through rsd_take_partial_report(). */
	p = rsd_take_partial_report();
	ATF_REQUIRE(p != NULL);
	ATF_CHECK_STREQ(p->plan_name, "w8");
	ATF_REQUIRE_EQ(p->ntransitions, 1);
	check_transition(&p->transitions[0], &a[0], false, &PAGEABLE, &PAGEABLE, NULL);
	rsd_plan_report_free(p);
	ATF_CHECK(rsd_take_partial_report() == NULL);

	/* The prefix stays committed; the Drop never ran. */
	ATF_CHECK_EQ(pfx_version(&f), 4);
	ATF_CHECK(pfx_resident_at(&f, g, PAGEABLE));
	ATF_CHECK_EQ(pfx_nmat(&f, g), 1);
	ATF_CHECK_EQ(pfx_nmat(&f, bad), 0);
	ATF_CHECK_EQ(f.loads, 3);
	check_consistent(&f);

	/* Without a report pointer the partial report is still taken once. */
	a[0] = rsd_action_drop(g, PAGEABLE);
	RSD_REQUIRE_ERR(RSD_EEXEC, rsd_execute_actions(f.m, a, 2, NULL, NULL, 0, NULL, NULL));
	ATF_CHECK_EQ(rsd_last_error()->failed_action_index, 1);
	ATF_CHECK_STREQ(rsd_last_error()->plan_name, "residency-actions");
	p = rsd_take_partial_report();
	ATF_REQUIRE(p != NULL);
	ATF_CHECK_STREQ(p->plan_name, "residency-actions");
	ATF_REQUIRE_EQ(p->ntransitions, 1);
	check_transition(&p->transitions[0], &a[0], false, &PAGEABLE, NULL, NULL);
	rsd_plan_report_free(p);
	ATF_CHECK(rsd_take_partial_report() == NULL);
	ATF_CHECK_EQ(pfx_version(&f), 5);
	pfx_fini(&f);
}

/* A loader failing with a non-RSD code: the cause is -RSD_ESOURCE. */
ATF_TC_WITHOUT_HEAD(runtime_failure_foreign_code);
ATF_TC_BODY(runtime_failure_foreign_code, tc)
{
	struct rsd_action a[1];
	struct rsd_handle bad;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	bad = pfx_sourced_fail(&f, PAGEABLE, 5);
	pfx_clear_partial();
	a[0] = rsd_action_ensure(bad, PINNED);
	RSD_REQUIRE_ERR(RSD_EEXEC, rsd_execute_actions(f.m, a, 1, "eio", NULL, 0, NULL, NULL));
	ATF_CHECK_EQ(rsd_last_error()->failed_action_index, 0);
	ATF_CHECK_EQ(rsd_last_error()->cause, -RSD_ESOURCE);
	RSD_CHECK_ERR(RSD_ESOURCE, rsd_ensure(f.m, bad, PINNED, NULL, NULL));
	rsd_plan_report_free(rsd_take_partial_report());
	/* pinned was never recorded; the temporary charge is gone. */
	ATF_CHECK_EQ(pfx_nlocations(&f), 1);
	check_consistent(&f);
	pfx_fini(&f);
}

struct failer {
	struct pfx *f;
	struct rsd_action a[2];
	int rc;
	size_t n;
};

static void *fail_in_thread(void *arg)
{
	struct failer *x = arg;
	struct rsd_plan_report *p;

	x->rc = rsd_execute_actions(x->f->m, x->a, 2, "thread", NULL, 0, NULL, NULL);
	p = rsd_take_partial_report();
	x->n = p ? p->ntransitions : (size_t)-1;
	rsd_plan_report_free(p);
	return NULL;
}

/* The partial report belongs to the failing thread. */
ATF_TC_WITHOUT_HEAD(partial_report_per_thread);
ATF_TC_BODY(partial_report_per_thread, tc)
{
	struct failer x;
	pthread_t t;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	memset(&x, 0, sizeof(x));
	x.f = &f;
	x.a[0] = rsd_action_ensure(pfx_sourced(&f, PAGEABLE), PAGEABLE);
	x.a[1] = rsd_action_ensure(pfx_sourced_fail(&f, PAGEABLE, -RSD_EDEVICE), PAGEABLE);
	pfx_clear_partial();
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, fail_in_thread, &x), 0);
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	ATF_CHECK_EQ(x.rc, -RSD_EEXEC);
	ATF_CHECK_EQ(x.n, 1);
	ATF_CHECK(rsd_take_partial_report() == NULL);
	pfx_fini(&f);
}

/* ---- success: reports ---- */

ATF_TC_WITHOUT_HEAD(empty_action_list);
ATF_TC_BODY(empty_action_list, tc)
{
	struct rsd_plan_report *r = NULL;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, NULL, 0, NULL, NULL, 0, NULL, &r));
	ATF_REQUIRE(r != NULL);
	ATF_CHECK_STREQ(r->plan_name, "residency-actions");
	ATF_CHECK_EQ(r->ntransitions, 0);
	ATF_CHECK(r->completed_at_ns >= r->started_at_ns);
	ATF_CHECK(r->started_at_ns > 0);
	rsd_plan_report_free(r);
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, NULL, 0, "named", NULL, 0, &v, &r));
	ATF_CHECK_STREQ(r->plan_name, "named");
	rsd_plan_report_free(r);
	/* A report is optional. */
	RSD_CHECK_OK(rsd_execute_actions(f.m, NULL, 0, NULL, NULL, 0, NULL, NULL));
	ATF_CHECK_EQ(pfx_version(&f), v);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(argument_errors);
ATF_TC_BODY(argument_errors, tc)
{
	struct rsd_plan_report *r = NULL;
	struct rsd_action a[1];
	struct rsd_handle h;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	a[0] = rsd_action_ensure(h, PAGEABLE);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_execute_actions(f.m, a, 1, "", NULL, 0, NULL, &r));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_execute_actions(f.m, a, 1, " \t\n", NULL, 0, NULL, &r));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_execute_actions(NULL, a, 1, NULL, NULL, 0, NULL, &r));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_execute_actions(f.m, NULL, 1, NULL, NULL, 0, NULL, &r));
	a[0].kind = (enum rsd_action_kind)9;
	RSD_CHECK_ERR(RSD_ETYPE, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, NULL, &r));
	a[0] = rsd_action_ensure(h, PAGEABLE);
	a[0].location.device = 5; /* a host kind with a device: not a location record */
	RSD_CHECK_ERR(RSD_ETYPE, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, NULL, &r));
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);

	RSD_REQUIRE_OK(rsd_manager_close(f.m, 0));
	a[0] = rsd_action_ensure(h, PAGEABLE);
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, NULL, &r));
	ATF_CHECK(r == NULL);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(report_fields);
ATF_TC_BODY(report_fields, tc)
{
	struct rsd_plan_report *r = NULL;
	struct rsd_action a[6];
	struct rsd_handle h, x;
	uint64_t v, before;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_sourced(&f, PAGEABLE);
	x = pfx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	v = pfx_version(&f);
	ATF_CHECK_EQ(v, 3);
	a[0] = rsd_action_ensure(h, PAGEABLE);	 /* load installed directly, +1 */
	a[1] = rsd_action_ensure(h, PINNED);	 /* copy, +1 pinned recorded, +1 */
	a[2] = rsd_action_move(h, PINNED, NULL); /* onto a resident one: removes pageable, +1 */
	a[3] = rsd_action_drop(h, PAGEABLE);	 /* no-op */
	a[4] = rsd_action_move(x, PINNED, &PAGEABLE); /* copy, install, remove: +2 */
	a[5] = rsd_action_discard(x);		      /* one removal + mark: +2 */
	before = (uint64_t)0;
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 6, "fields", NULL, 0, &v, &r));
	ATF_REQUIRE(r != NULL);
	ATF_CHECK_STREQ(r->plan_name, "fields");
	ATF_REQUIRE_EQ(r->ntransitions, 6);
	check_transition(&r->transitions[0], &a[0], false, &PAGEABLE, &PAGEABLE, NULL);
	check_transition(&r->transitions[1], &a[1], false, &PAGEABLE, &PINNED, NULL);
	check_transition(&r->transitions[2], &a[2], false, &PAGEABLE, &PINNED, NULL);
	check_transition(&r->transitions[3], &a[3], true, &PAGEABLE, NULL,
			 "materialization already absent");
	check_transition(&r->transitions[4], &a[4], false, &PAGEABLE, &PINNED, NULL);
	check_transition(&r->transitions[5], &a[5], false, NULL, NULL, NULL);
	for (size_t i = 0; i < r->ntransitions; i++) {
		ATF_CHECK(r->transitions[i].started_at_ns >= before);
		ATF_CHECK(!r->transitions[i].has_allocator);
		before = r->transitions[i].completed_at_ns;
	}
	ATF_CHECK(r->started_at_ns <= r->transitions[0].started_at_ns);
	ATF_CHECK(r->completed_at_ns >= r->transitions[5].completed_at_ns);
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_version(&f), 11);
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK(pfx_resident_at(&f, h, PINNED));
	ATF_CHECK_EQ(pfx_nmat(&f, h), 1);
	check_consistent(&f);
	pfx_fini(&f);
}

/* §18.45: no-op actions change nothing, not even the location registry. */
ATF_TC_WITHOUT_HEAD(noop_changes_nothing);
ATF_TC_BODY(noop_changes_nothing, tc)
{
	struct rsd_plan_report *r = NULL;
	struct rsd_action a[2];
	struct rsd_handle x;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	x = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	v = pfx_version(&f);
	a[0] = rsd_action_drop(x, PINNED);
	a[1] = rsd_action_move(x, PAGEABLE, NULL);
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 2, "noop", NULL, 0, &v, &r));
	ATF_REQUIRE_EQ(r->ntransitions, 2);
	check_transition(&r->transitions[0], &a[0], true, &PINNED, NULL,
			 "materialization already absent");
	check_transition(&r->transitions[1], &a[1], true, NULL, &PAGEABLE,
			 "destination already owns the selected replica");
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(pfx_nlocations(&f), 1);
	pfx_fini(&f);
}

/* ---- expected version and transfer streams ---- */

ATF_TC_WITHOUT_HEAD(stale_expected_version);
ATF_TC_BODY(stale_expected_version, tc)
{
	struct rsd_transfer_stream ts[1] = { { RSD_LOC_PINNED_HOST, NULL } };
	struct rsd_plan_report *r = NULL;
	const struct rsd_error *err;
	struct rsd_action a[1];
	struct rsd_handle h;
	uint64_t v, stale;
	void *s;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s));
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	stale = v - 1;
	a[0] = rsd_action_ensure(h, PAGEABLE);
	RSD_CHECK_ERR(RSD_ESTALE, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, &stale, &r));
	err = rsd_last_error();
	ATF_CHECK(err->has_versions);
	ATF_CHECK_EQ(err->expected_version, v - 1);
	ATF_CHECK_EQ(err->actual_version, v);
	/* The version check precedes the stream-map validation. */
	ts[0].stream = s;
	RSD_CHECK_ERR(RSD_ESTALE, rsd_execute_actions(f.m, a, 1, NULL, ts, 1, &stale, &r));
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, &v, &r));
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_version(&f), v + 1);
	rsd_simdev_stream_destroy(f.sd, s);
	pfx_fini(&f);
}

/* §18.46: a pending lease that completed is reaped first, making the expectation stale. */
ATF_TC_WITHOUT_HEAD(reap_makes_stale);
ATF_TC_BODY(reap_makes_stale, tc)
{
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_action a[1];
	struct rsd_plan p = { .name = "after-reap", .enter = a, .nenter = 1 };
	struct rsd_plan_report *r = NULL;
	struct rsd_explanation *e;
	struct rsd_lease *l;
	struct rsd_handle h;
	uint64_t v;
	void *s;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s));
	h = pfx_sourced(&f, PAGEABLE);
	RSD_REQUIRE_OK(rsd_ensure(f.m, h, c0, NULL, NULL));
	rsd_simdev_set_auto_complete(f.sd, false);
	RSD_REQUIRE_OK(rsd_acquire(f.m, &h, 1, c0, s, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	a[0] = rsd_action_drop(h, c0);
	RSD_CHECK_ERR(RSD_EPLAN, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, NULL, NULL));
	ATF_CHECK_STREQ(rsd_last_error()->message, "materialization at cuda:0 is protected");
	v = pfx_version(&f);

	rsd_simdev_stream_complete(f.sd, s);
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, &v, &e));
	ATF_CHECK(e->feasible);
	rsd_explanation_free(e);
	RSD_CHECK_ERR(RSD_ESTALE, rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, &v, &r));
	ATF_CHECK_EQ(rsd_last_error()->expected_version, v);
	ATF_CHECK_EQ(rsd_last_error()->actual_version, v + 1);
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(pfx_version(&f), v + 1);
	v++;
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 1, NULL, NULL, 0, &v, &r));
	ATF_REQUIRE_EQ(r->ntransitions, 1);
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_version(&f), v + 1);
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(f.sd, s);
	pfx_fini(&f);
}

/* §10.2 / §18.60: host key → EINVAL, non-stream → ETYPE, wrong device → EINVAL. */
ATF_TC_WITHOUT_HEAD(transfer_streams);
ATF_TC_BODY(transfer_streams, tc)
{
	struct rsd_location c0 = pfx_cuda(0), c1 = pfx_cuda(1);
	struct rsd_transfer_stream ts[1];
	struct rsd_plan_report *r = NULL;
	struct rsd_action a[2];
	struct rsd_handle h;
	void *s0, *s1;
	int not_a_stream;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, 2);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s0));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 1, &s1));
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	a[0] = rsd_action_ensure(h, c0);
	a[1] = rsd_action_move(h, c1, NULL);

	ts[0].location = PINNED;
	ts[0].stream = s0;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_execute_actions(f.m, a, 2, NULL, ts, 1, NULL, &r));
	ts[0].location = c0;
	ts[0].stream = &not_a_stream;
	RSD_CHECK_ERR(RSD_ETYPE, rsd_execute_actions(f.m, a, 2, NULL, ts, 1, NULL, &r));
	ts[0].stream = s1;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_execute_actions(f.m, a, 2, NULL, ts, 1, NULL, &r));
	ts[0].location = pfx_cuda(2);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_execute_actions(f.m, a, 2, NULL, ts, 1, NULL, &r));
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);

	ts[0].location = c0;
	ts[0].stream = s0;
	RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 2, "streams", ts, 1, NULL, &r));
	ATF_REQUIRE_EQ(r->ntransitions, 2);
	check_transition(&r->transitions[0], &a[0], false, &PAGEABLE, &c0, NULL);
	check_transition(&r->transitions[1], &a[1], false, &c0, &c1, NULL);
	ATF_CHECK(r->transitions[0].has_allocator);
	ATF_CHECK_EQ(r->transitions[0].allocator_device, 0);
	ATF_CHECK(r->transitions[1].has_allocator);
	ATF_CHECK_EQ(r->transitions[1].allocator_device, 1);
	rsd_plan_report_free(r);
	ATF_CHECK(pfx_resident_at(&f, h, c1));
	ATF_CHECK_EQ(pfx_nmat(&f, h), 1);
	check_consistent(&f);
	rsd_simdev_stream_destroy(f.sd, s0);
	rsd_simdev_stream_destroy(f.sd, s1);
	pfx_fini(&f);
}

/* ---- fault injection at every action position ---- */

static void three_values(struct pfx *f, struct rsd_action *a)
{
	for (int i = 0; i < 3; i++)
		a[i] = rsd_action_ensure(pfx_adopt(f, PAGEABLE, RSD_REPLICABLE), pfx_cuda(0));
}

static void fault_at_each_position(enum rsd_simdev_op op)
{
	unsigned long calls[4];
	struct rsd_plan_report *r;
	struct rsd_action a[3];
	struct pfx f;

	/* Calibrate: driver calls of op made by each action. */
	pfx_init_pooled(&f, NULL, 0, 1, false);
	three_values(&f, a);
	calls[0] = rsd_simdev_calls(f.sd, op);
	for (int i = 0; i < 3; i++) {
		RSD_REQUIRE_OK(rsd_execute_actions(f.m, &a[i], 1, NULL, NULL, 0, NULL, NULL));
		calls[i + 1] = rsd_simdev_calls(f.sd, op);
		ATF_REQUIRE_MSG(calls[i + 1] > calls[i], "action %d made no call of op %d", i,
				(int)op);
	}
	pfx_fini(&f);

	for (int pos = 0; pos < 3; pos++) {
		const struct rsd_error *err;
		uint64_t v;

		pfx_init_pooled(&f, NULL, 0, 1, false);
		three_values(&f, a);
		v = pfx_version(&f);
		pfx_clear_partial();
		rsd_simdev_fail_nth(f.sd, op, (unsigned)(calls[pos] - calls[0] + 1), RSD_EDEVICE);
		r = NULL;
		ATF_REQUIRE_EQ_MSG(rsd_execute_actions(f.m, a, 3, "faults", NULL, 0, &v, &r),
				   -RSD_EEXEC, "position %d", pos);
		err = rsd_last_error();
		ATF_CHECK_EQ(err->phase, RSD_PHASE_EXECUTE);
		ATF_CHECK_EQ_MSG(err->failed_action_index, pos, "index %ld, position %d",
				 err->failed_action_index, pos);
		ATF_CHECK_EQ(err->cause, -RSD_EDEVICE);
		ATF_REQUIRE(r != NULL);
		ATF_CHECK_EQ_MSG(r->ntransitions, (size_t)pos, "partial %zu, position %d",
				 r->ntransitions, pos);
		for (int i = 0; i < pos && i < (int)r->ntransitions; i++)
			ATF_CHECK(rsd_action_equal(&r->transitions[i].action, &a[i]));
		rsd_plan_report_free(r);
		r = rsd_take_partial_report();
		ATF_REQUIRE(r != NULL);
		ATF_CHECK_EQ(r->ntransitions, (size_t)pos);
		rsd_plan_report_free(r);

		/* pos installs at cuda:0 (+1 for recording it once). */
		ATF_CHECK_EQ(pfx_version(&f), v + pos + (pos > 0));
		for (int i = 0; i < 3; i++)
			ATF_CHECK_EQ(pfx_nmat(&f, a[i].handle), i < pos ? 2u : 1u);
		check_consistent(&f);
		/* The failed action's device memory went back. */
		ATF_CHECK_EQ_MSG(rsd_simdev_allocated_bytes(f.sd, 0), (uint64_t)pos * N,
				 "position %d: %llu device bytes", pos,
				 (unsigned long long)rsd_simdev_allocated_bytes(f.sd, 0));

		/* Disarmed, the rest of the plan completes. */
		rsd_simdev_fail_nth(f.sd, op, 0, 0);
		RSD_REQUIRE_OK(rsd_execute_actions(f.m, a, 3, NULL, NULL, 0, NULL, NULL));
		ATF_CHECK_EQ(rsd_simdev_allocated_bytes(f.sd, 0), 3 * N);
		check_consistent(&f);
		pfx_fini(&f);
	}
}

ATF_TC_WITHOUT_HEAD(fault_copy_each_position);
ATF_TC_BODY(fault_copy_each_position, tc)
{
	fault_at_each_position(RSD_SIMDEV_COPY);
}

ATF_TC_WITHOUT_HEAD(fault_alloc_each_position);
ATF_TC_BODY(fault_alloc_each_position, tc)
{
	fault_at_each_position(RSD_SIMDEV_ALLOC);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, atomic_preflight);
	ATF_TP_ADD_TC(tp, foreign_handle_is_plan_error);
	ATF_TP_ADD_TC(tp, unavailable_device_is_plan_error);
	ATF_TP_ADD_TC(tp, runtime_failure_partial_report);
	ATF_TP_ADD_TC(tp, runtime_failure_foreign_code);
	ATF_TP_ADD_TC(tp, partial_report_per_thread);
	ATF_TP_ADD_TC(tp, empty_action_list);
	ATF_TP_ADD_TC(tp, argument_errors);
	ATF_TP_ADD_TC(tp, report_fields);
	ATF_TP_ADD_TC(tp, noop_changes_nothing);
	ATF_TP_ADD_TC(tp, stale_expected_version);
	ATF_TP_ADD_TC(tp, reap_makes_stale);
	ATF_TP_ADD_TC(tp, transfer_streams);
	ATF_TP_ADD_TC(tp, fault_copy_each_position);
	ATF_TP_ADD_TC(tp, fault_alloc_each_position);
	return atf_no_error();
}
