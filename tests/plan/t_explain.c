// SPDX-License-Identifier: MIT
/*
 * rsd_explain (reference.md §10.3): the lock-free dry run. Exact reason
 * texts (data fields, including handle and location messages and Python
 * repr quoting), explanation fields, predicted peaks and their order, the
 * expected-version check, and the promise that explain changes nothing.
 * Per-action reasons and predicted peaks: t_explain_reasons.c.
 * Values are 64 bytes (N) unless a test says otherwise.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "pfx.h"

/* ---- §18.83 and the quoting rule: reservation labels ---- */

static void label_reason(const char *label, const char *quoted)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 8192 } };
	struct rsd_reservation_spec r = { RSD_LOC_PINNED_HOST, 8193, label };
	struct rsd_plan p = { .name = "labels", .reservations = &r, .nreservations = 1 };
	struct rsd_explanation *e;
	char want[1024];
	struct pfx f;

	pfx_init(&f, b, 1, -1);
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	snprintf(want, sizeof(want), "Reservation %s exceeds budget at pinned-host", quoted);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	ATF_CHECK_EQ(e->nactions, 0);
	/* The peak is updated before the budget test (§18.54). */
	ATF_REQUIRE_EQ(e->npeaks, 1);
	pfx_check_peak(e, 0, PINNED, 8193);
	rsd_explanation_free(e);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(reservation_label_quoting);
ATF_TC_BODY(reservation_label_quoting, tc)
{
	label_reason("ws", "'ws'");
	label_reason("it's", "\"it's\"");
	label_reason("a\"b'c", "'a\"b\\'c'");
	label_reason("say \"hi\"", "'say \"hi\"'");
	label_reason("back\\slash", "'back\\\\slash'");
	label_reason("tab\there", "'tab\\there'");
	label_reason("new\nline\r", "'new\\nline\\r'");
	label_reason("bell\x01", "'bell\\x01'");
	label_reason("it's\\", "\"it's\\\\\"");
}

/* The reason is a data field: a long label is never cut (review F3). */
ATF_TC_WITHOUT_HEAD(reservation_long_label);
ATF_TC_BODY(reservation_long_label, tc)
{
	char label[301], quoted[304];

	memset(label, 'x', 300);
	label[300] = '\0';
	snprintf(quoted, sizeof(quoted), "'%s'", label);
	label_reason(label, quoted);
}

/* Reservations are simulated after reclaim; peaks include their bytes (§18.53). */
ATF_TC_WITHOUT_HEAD(reservations_after_reclaim);
ATF_TC_BODY(reservations_after_reclaim, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 128 } };
	struct rsd_reservation_spec r[] = { { RSD_LOC_PINNED_HOST, 128, "ws" } };
	struct rsd_action reclaim[1], enter[1];
	struct rsd_plan p = { .name = "after-reclaim",
			      .reclaim = reclaim,
			      .nreclaim = 1,
			      .reservations = r,
			      .nreservations = 1 };
	struct rsd_explanation *e;
	struct rsd_handle a;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, b, 1, -1);
	a = pfx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	pfx_ensure(&f, a, PINNED);
	v = pfx_version(&f);
	reclaim[0] = rsd_action_drop(a, PINNED);
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	ATF_CHECK(e->reason == NULL);
	ATF_CHECK_STREQ(e->plan_name, "after-reclaim");
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], true, false, &PINNED, NULL, N, NULL);
	ATF_REQUIRE_EQ(e->nreservations, 1);
	ATF_CHECK(pfx_loc_is(e->reservations[0].location, PINNED));
	ATF_CHECK_EQ(e->reservations[0].nbytes, 128);
	ATF_CHECK_STREQ(e->reservations[0].label, "ws");
	/* Registry order: pinned (budget map), then pageable (first used). */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PINNED, 128);
	pfx_check_peak(e, 1, PAGEABLE, N);
	rsd_explanation_free(e);

	/* An enter action after the reservation no longer fits. */
	enter[0] = rsd_action_ensure(a, PINNED);
	p.enter = enter;
	p.nenter = 1;
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "Transition exceeds budget at pinned-host");
	ATF_REQUIRE_EQ(e->nactions, 2);
	pfx_check_act(&e->actions[1], false, false, &PAGEABLE, &PINNED, N,
		      "Transition exceeds budget at pinned-host");
	pfx_check_peak(e, 0, PINNED, 192);
	rsd_explanation_free(e);

	/* A failed admission stops before the enter actions: no entry for them. */
	r[0].nbytes = 129;
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "Reservation 'ws' exceeds budget at pinned-host");
	ATF_CHECK_EQ(e->nactions, 1);
	ATF_CHECK_EQ(e->nreservations, 1);
	pfx_check_peak(e, 0, PINNED, 129);
	rsd_explanation_free(e);

	/* A failing reclaim action: no admission simulated, yet every reservation listed. */
	reclaim[0] = rsd_action_drop(pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE), PAGEABLE);
	v = pfx_version(&f);
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, "cannot drop final MUST_PRESERVE materialization");
	ATF_CHECK_EQ(e->nactions, 1);
	ATF_CHECK_EQ(e->nreservations, 1);
	pfx_check_peak(e, 0, PINNED, N);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(pfx_version(&f), v);
	pfx_fini(&f);
}

/* The plan is copied: the caller's arrays and labels may change afterwards. */
ATF_TC_WITHOUT_HEAD(explanation_owns_its_copy);
ATF_TC_BODY(explanation_owns_its_copy, tc)
{
	char label[] = "scratch";
	char name[] = "copied";
	struct rsd_reservation_spec r[] = { { RSD_LOC_PINNED_HOST, 10, label } };
	struct rsd_action a[1];
	struct rsd_plan p = { .name = name,
			      .enter = a,
			      .nenter = 1,
			      .reservations = r,
			      .nreservations = 1 };
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_sourced(&f, PAGEABLE);
	a[0] = rsd_action_ensure(h, PAGEABLE);
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	memset(label, 'x', sizeof(label) - 1);
	memset(name, 'y', sizeof(name) - 1);
	a[0] = rsd_action_discard(h);
	r[0].nbytes = 99;
	ATF_CHECK_STREQ(e->plan_name, "copied");
	ATF_REQUIRE_EQ(e->nreservations, 1);
	ATF_CHECK_STREQ(e->reservations[0].label, "scratch");
	ATF_CHECK_EQ(e->reservations[0].nbytes, 10);
	ATF_REQUIRE_EQ(e->nactions, 1);
	ATF_CHECK_EQ(e->actions[0].action.kind, RSD_ACT_ENSURE);
	/* The new location pinned-host is appended with the reservation's bytes. */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PAGEABLE, N);
	pfx_check_peak(e, 1, PINNED, 10);
	rsd_explanation_free(e);
	pfx_fini(&f);
}

/*
 * Admission arithmetic is exact: two reservations of 2^64-1 and 1 bytes do
 * not fit a 2^64-1 budget (a saturating sum would wrongly admit them, and
 * execution would then fail in the reserve phase).
 */
ATF_TC_WITHOUT_HEAD(reservation_sum_exact);
ATF_TC_BODY(reservation_sum_exact, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, UINT64_MAX } };
	struct rsd_reservation_spec r[] = { { RSD_LOC_PAGEABLE_HOST, UINT64_MAX, "all" },
					    { RSD_LOC_PAGEABLE_HOST, 1, "one" } };
	struct rsd_plan p = { .name = "huge", .reservations = r, .nreservations = 2 };
	struct rsd_explanation *e;
	struct pfx f;

	pfx_init(&f, b, 1, -1);
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK_MSG(!e->feasible, "2^64-1 + 1 bytes admitted under a 2^64-1 budget");
	if (!e->feasible)
		pfx_check_reason(e->reason, "Reservation 'one' exceeds budget at pageable-host");
	rsd_explanation_free(e);
	pfx_fini(&f);
}

/* ---- handle resolution reasons ---- */

ATF_TC_WITHOUT_HEAD(foreign_handle);
ATF_TC_BODY(foreign_handle, tc)
{
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f, g;
	char want[160];

	pfx_init(&f, NULL, 0, -1);
	pfx_init(&g, NULL, 0, -1);
	h = pfx_adopt(&g, PAGEABLE, RSD_EXCLUSIVE);
	a[0] = rsd_action_ensure(h, PINNED);
	e = pfx_explain_enter(&f, "foreign", a, 1);
	snprintf(want, sizeof(want), "Handle belongs to manager '%llu', not '%llu'",
		 (unsigned long long)rsd_manager_id(g.m), (unsigned long long)rsd_manager_id(f.m));
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], false, false, NULL, NULL, 0, want);
	/* Nothing was touched: only the known locations (none) are listed. */
	ATF_CHECK_EQ(e->npeaks, 0);
	rsd_explanation_free(e);
	pfx_fini(&g);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(unknown_and_discarded_handles);
ATF_TC_BODY(unknown_and_discarded_handles, tc)
{
	static const struct rsd_type other = { "other", &rsd_resident_type };
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle h, forged;
	char want[128];
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);

	/* Right ids, different value type: unknown (§2.5). */
	forged = h;
	forged.type = &other;
	a[0] = rsd_action_drop(forged, PAGEABLE);
	e = pfx_explain_enter(&f, "forged", a, 1);
	pfx_check_reason(e->reason, "Residency handle is unknown");
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], false, false, NULL, NULL, 0, "Residency handle is unknown");
	rsd_explanation_free(e);

	forged = h;
	forged.id = h.id + 1000000;
	a[0] = rsd_action_ensure(forged, PAGEABLE);
	e = pfx_explain_enter(&f, "unknown", a, 1);
	pfx_check_reason(e->reason, "Residency handle is unknown");
	rsd_explanation_free(e);

	/* Discarded earlier in this simulation (§18.56). */
	a[0] = rsd_action_discard(h);
	a[1] = rsd_action_ensure(h, PAGEABLE);
	e = pfx_explain_enter(&f, "discard-then-ensure", a, 2);
	snprintf(want, sizeof(want), "Value '%llu' is discarded", (unsigned long long)h.id);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 2);
	pfx_check_act(&e->actions[0], true, false, NULL, NULL, N, NULL);
	pfx_check_act(&e->actions[1], false, false, NULL, NULL, 0, want);
	/* The simulated discard released pageable: peak stays at the current charge. */
	ATF_REQUIRE_EQ(e->npeaks, 1);
	pfx_check_peak(e, 0, PAGEABLE, N);
	rsd_explanation_free(e);

	/* Discarded in the real manager. */
	RSD_REQUIRE_OK(rsd_discard(f.m, h, NULL));
	a[0] = rsd_action_ensure(h, PAGEABLE);
	e = pfx_explain_enter(&f, "discarded", a, 1);
	snprintf(want, sizeof(want), "Residency value '%llu' has been discarded",
		 (unsigned long long)h.id);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], false, false, NULL, NULL, 0, want);
	rsd_explanation_free(e);
	pfx_fini(&f);
}

/*
 * Two managers registering in turn: each one's ids have gaps (the other's
 * values), so resolution cannot assume dense ids. Every value resolves; a
 * gap id, an id below the first and one above the last are unknown.
 */
ATF_TC_WITHOUT_HEAD(interleaved_ids);
ATF_TC_BODY(interleaved_ids, tc)
{
	struct rsd_handle h[5], other[5], forged;
	struct rsd_action a[5];
	struct rsd_explanation *e;
	struct pfx f, g;

	pfx_init(&f, NULL, 0, -1);
	pfx_init(&g, NULL, 0, -1);
	for (int i = 0; i < 5; i++) {
		other[i] = pfx_adopt(&g, PAGEABLE, RSD_EXCLUSIVE);
		h[i] = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
		/* a second value of g between each pair of f's: gaps of two */
		(void)pfx_adopt(&g, PAGEABLE, RSD_EXCLUSIVE);
		a[i] = rsd_action_ensure(h[i], PAGEABLE);
	}
	e = pfx_explain_enter(&f, "interleaved", a, 5);
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->nactions, 5);
	for (int i = 0; i < 5; i++) {
		/* resolved: a no-op ensure that knows the value's size */
		ATF_CHECK_MSG(e->actions[i].executable && e->actions[i].no_op,
			      "value %d of 5 not resolved", i);
		ATF_CHECK_EQ(e->actions[i].logical_nbytes, N);
	}
	rsd_explanation_free(e);
	/* g's ids with f's manager: below f's first id (other[0]) and in its gaps */
	for (int i = 0; i < 5; i++) {
		forged = h[0];
		forged.id = other[i].id;
		a[0] = rsd_action_ensure(forged, PAGEABLE);
		e = pfx_explain_enter(&f, "gap", a, 1);
		pfx_check_reason(e->reason, "Residency handle is unknown");
		rsd_explanation_free(e);
	}
	forged = h[4];
	forged.id = h[4].id + 1;
	a[0] = rsd_action_ensure(forged, PAGEABLE);
	e = pfx_explain_enter(&f, "above", a, 1);
	pfx_check_reason(e->reason, "Residency handle is unknown");
	rsd_explanation_free(e);
	pfx_fini(&g);
	pfx_fini(&f);
}

/* ---- location reasons (§18.3) ---- */

ATF_TC_WITHOUT_HEAD(cuda_unavailable);
ATF_TC_BODY(cuda_unavailable, tc)
{
	static const char want[] = "CUDA residency locations require available CUDA";
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f;
	uint64_t v;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	a[0] = rsd_action_ensure(h, c0);
	e = pfx_explain_enter(&f, "cuda", a, 1);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	/* Resolution passed, so the byte fields are the spec's. */
	pfx_check_act(&e->actions[0], false, false, NULL, &c0, N, want);
	ATF_CHECK_EQ(e->npeaks, 1);
	rsd_explanation_free(e);

	/* Drop: source is the drop location even when it is invalid. */
	a[0] = rsd_action_drop(h, c0);
	e = pfx_explain_enter(&f, "cuda-drop", a, 1);
	pfx_check_act(&e->actions[0], false, false, &c0, NULL, N, want);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(pfx_nlocations(&f), 1);
	ATF_CHECK_EQ(f.loads, 0);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(cuda_beyond_device_count);
ATF_TC_BODY(cuda_beyond_device_count, tc)
{
	static const char want[] = "Residency location cuda:1 is not available in this process";
	struct rsd_location c1 = pfx_cuda(1), c0 = pfx_cuda(0);
	struct rsd_reservation_spec r = { c1, 1, "ws" };
	struct rsd_plan p = { .name = "resv", .reservations = &r, .nreservations = 1 };
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct pfx f;
	uint64_t v;

	pfx_init(&f, NULL, 0, 1);
	h = pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	a[0] = rsd_action_ensure(h, c0);
	a[1] = rsd_action_ensure(h, c1);
	e = pfx_explain_enter(&f, "cuda1", a, 2);
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 2);
	pfx_check_act(&e->actions[0], true, false, &PAGEABLE, &c0, N, NULL);
	pfx_check_act(&e->actions[1], false, false, NULL, &c1, N, want);
	/* cuda:1 could not be prepared, so it is no peak entry. */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	pfx_check_peak(e, 0, PAGEABLE, N);
	pfx_check_peak(e, 1, c0, N);
	rsd_explanation_free(e);

	/* A reservation at an unavailable device. */
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(!e->feasible);
	pfx_check_reason(e->reason, want);
	rsd_explanation_free(e);

	/* Direct calls reject it without recording the location. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_ensure(f.m, h, c1, NULL, NULL));
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(pfx_nlocations(&f), 1);
	ATF_CHECK_EQ(f.loads, 0);
	pfx_fini(&f);
}

/* Move with an invalid destination reports the registered source location (§18.55). */
ATF_TC_WITHOUT_HEAD(move_invalid_destination_source);
ATF_TC_BODY(move_invalid_destination_source, tc)
{
	static const char want[] = "Residency location cuda:3 is not available in this process";
	struct rsd_location c3 = pfx_cuda(3);
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h, x;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	h = pfx_sourced(&f, PAGEABLE);
	pfx_ensure(&f, h, PINNED);
	x = pfx_adopt(&f, PINNED, RSD_EXCLUSIVE);

	/* Explicit source pinned-host, yet the reported source is the registered one. */
	a[0] = rsd_action_move(h, c3, &PINNED);
	e = pfx_explain_enter(&f, "move-bad-to", a, 1);
	pfx_check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	pfx_check_act(&e->actions[0], false, false, &PAGEABLE, &c3, N, want);
	rsd_explanation_free(e);

	/* A value without a source: absent. */
	a[0] = rsd_action_move(x, c3, &PINNED);
	e = pfx_explain_enter(&f, "move-bad-to-adopted", a, 1);
	pfx_check_act(&e->actions[0], false, false, NULL, &c3, N, want);
	rsd_explanation_free(e);

	/* An invalid explicit source: its validation message; source = F. */
	a[0] = rsd_action_move(x, PAGEABLE, &c3);
	e = pfx_explain_enter(&f, "move-bad-from", a, 1);
	pfx_check_act(&e->actions[0], false, false, &c3, &PAGEABLE, N, want);
	rsd_explanation_free(e);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(stale_expected_version);
ATF_TC_BODY(stale_expected_version, tc)
{
	struct rsd_plan p = { .name = "stale" };
	struct rsd_explanation *e = NULL;
	const struct rsd_error *err;
	uint64_t v, want;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	pfx_sourced(&f, PAGEABLE);
	v = pfx_version(&f);
	want = v + 7;
	RSD_CHECK_ERR(RSD_ESTALE, rsd_explain(f.m, &p, &want, &e));
	ATF_CHECK(e == NULL);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->code, RSD_ESTALE);
	ATF_CHECK(err->has_versions);
	ATF_CHECK_EQ(err->expected_version, v + 7);
	ATF_CHECK_EQ(err->actual_version, v);
	ATF_CHECK(rsd_err_is_plan_error(-RSD_ESTALE));

	RSD_REQUIRE_OK(rsd_explain(f.m, &p, &v, &e));
	ATF_CHECK(e->feasible);
	ATF_CHECK_STREQ(e->plan_name, "stale");
	ATF_CHECK_EQ(e->nactions, 0);
	ATF_CHECK_EQ(e->nreservations, 0);
	ATF_CHECK_EQ(e->npeaks, 1);
	rsd_explanation_free(e);
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(argument_errors);
ATF_TC_BODY(argument_errors, tc)
{
	struct rsd_action a[1];
	struct rsd_plan p = { .name = "  \t" };
	struct rsd_explanation *e = NULL;
	struct rsd_reservation_spec r = { RSD_LOC_PAGEABLE_HOST, 1, " " };
	struct rsd_handle h;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	h = pfx_adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_explain(f.m, &p, NULL, &e));
	p.name = NULL;
	RSD_CHECK_ERR(RSD_ETYPE, rsd_explain(f.m, &p, NULL, &e));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_explain(f.m, NULL, NULL, &e));
	p.name = "ok";
	RSD_CHECK_ERR(RSD_ETYPE, rsd_explain(NULL, &p, NULL, &e));
	p.reservations = &r;
	p.nreservations = 1;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_explain(f.m, &p, NULL, &e));
	p.nreservations = 0;
	a[0] = rsd_action_ensure(h, PAGEABLE);
	a[0].kind = (enum rsd_action_kind)42;
	p.enter = a;
	p.nenter = 1;
	RSD_CHECK_ERR(RSD_ETYPE, rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(e == NULL);

	/* A closed manager. */
	p.nenter = 0;
	RSD_REQUIRE_OK(rsd_manager_close(f.m, 0));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_explain(f.m, &p, NULL, &e));
	pfx_fini(&f);
}

/* ---- lock-free explain while a source load holds the writer path ---- */

struct blocker {
	struct pfx *f;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered, go;
	struct rsd_handle h;
	int rc;
};

static int blocking_load(void *ctx, struct rsd_resident **out)
{
	struct blocker *b = ctx;
	uint64_t n = N;

	pthread_mutex_lock(&b->lock);
	b->entered = true;
	pthread_cond_broadcast(&b->cond);
	while (!b->go)
		pthread_cond_wait(&b->cond, &b->lock);
	pthread_mutex_unlock(&b->lock);
	return rsd_resident_alloc(b->f->m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, out);
}

static void *ensure_thread(void *arg)
{
	struct blocker *b = arg;

	b->rc = rsd_ensure(b->f->m, b->h, PINNED, NULL, NULL);
	return NULL;
}

ATF_TC_WITHOUT_HEAD(lock_free_during_load);
ATF_TC_BODY(lock_free_during_load, tc)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct blocker b;
	struct rsd_source src = { blocking_load, NULL, &b };
	struct rsd_action a[1];
	struct rsd_plan p = { .name = "during-load", .enter = a, .nenter = 1 };
	struct rsd_explanation *e = NULL;
	pthread_t t;
	uint64_t v;
	int rc;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	memset(&b, 0, sizeof(b));
	b.f = &f;
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cond, NULL);
	RSD_REQUIRE_OK(rsd_register_source(f.m, &spec, &src, PAGEABLE, &b.h));
	v = pfx_version(&f);
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, ensure_thread, &b), 0);
	pthread_mutex_lock(&b.lock);
	while (!b.entered)
		pthread_cond_wait(&b.cond, &b.lock);
	pthread_mutex_unlock(&b.lock);

	/* The load is running: explain reads the last published image. */
	a[0] = rsd_action_ensure(b.h, PINNED);
	rc = rsd_explain(f.m, &p, &v, &e);
	ATF_CHECK_EQ_MSG(rc, 0, "%s", rsd_last_error()->message);
	if (!rc) {
		ATF_CHECK(e->feasible);
		ATF_REQUIRE_EQ(e->nactions, 1);
		/* Pre-load state: not resident anywhere, so not a no-op. */
		pfx_check_act(&e->actions[0], true, false, &PAGEABLE, &PINNED, N, NULL);
		/* pageable: 0 used, temporary 64 (temp charges are never published). */
		pfx_check_peak(e, 0, PAGEABLE, N);
		rsd_explanation_free(e);
	}
	ATF_CHECK_EQ(rsd_manager_state_version(f.m), v);
	/* Another thread's writer call proceeds meanwhile (the loading
	 * thread's alone would be refused): the value is not resident at
	 * pinned, so the drop is a no-op that changes nothing. */
	RSD_CHECK_OK(rsd_drop(f.m, b.h, PINNED, NULL));
	ATF_CHECK_EQ(rsd_manager_state_version(f.m), v);

	pthread_mutex_lock(&b.lock);
	b.go = true;
	pthread_cond_broadcast(&b.cond);
	pthread_mutex_unlock(&b.lock);
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	ATF_REQUIRE_EQ_MSG(b.rc, 0, "ensure in the loader thread failed: %d", b.rc);

	e = NULL;
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, NULL, &e));
	pfx_check_act(&e->actions[0], true, true, NULL, &PINNED, N, "destination already resident");
	rsd_explanation_free(e);
	pfx_fini(&f);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.lock);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, reservation_label_quoting);
	ATF_TP_ADD_TC(tp, interleaved_ids);
	ATF_TP_ADD_TC(tp, reservation_long_label);
	ATF_TP_ADD_TC(tp, reservations_after_reclaim);
	ATF_TP_ADD_TC(tp, reservation_sum_exact);
	ATF_TP_ADD_TC(tp, explanation_owns_its_copy);
	ATF_TP_ADD_TC(tp, foreign_handle);
	ATF_TP_ADD_TC(tp, unknown_and_discarded_handles);
	ATF_TP_ADD_TC(tp, cuda_unavailable);
	ATF_TP_ADD_TC(tp, cuda_beyond_device_count);
	ATF_TP_ADD_TC(tp, move_invalid_destination_source);
	ATF_TP_ADD_TC(tp, stale_expected_version);
	ATF_TP_ADD_TC(tp, argument_errors);
	ATF_TP_ADD_TC(tp, lock_free_during_load);
	return atf_no_error();
}
