// SPDX-License-Identifier: MIT
/*
 * Scopes (reference.md §11): entry (version check, stream map, whole-plan
 * preflight, reclaim, reservations, enter), exit (exit actions without a new
 * preflight, reservations always released), nesting, forced manager close,
 * re-entrancy from a source callback, and abandonment. Failures in each
 * phase, with their phase-local indices and partial reports: t_scope_fail.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "pfx.h"

/* ---- the FHE stage ---- */

#define W_BYTES 256  /* weight: replicable, sourced at pageable */
#define K_BYTES 128  /* key: replicable, adopted at pinned */
#define C_BYTES 64   /* ciphertext: exclusive, must-preserve, adopted at pinned */
#define WS_BYTES 512 /* device workspace reservation */
#define DEV_BUDGET 1024

ATF_TC_WITHOUT_HEAD(fhe_stage);
ATF_TC_BODY(fhe_stage, tc)
{
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_budget b[] = { { c0, DEV_BUDGET } };
	struct rsd_reservation_spec rs[] = { { c0, WS_BYTES, "workspace" } };
	struct rsd_action enter[3], ex[3];
	struct rsd_plan p = { .name = "stage",
			      .enter = enter,
			      .nenter = 3,
			      .reservations = rs,
			      .nreservations = 1,
			      .exit = ex,
			      .nexit = 3 };
	struct rsd_location_snapshot ls;
	struct rsd_explanation *e;
	struct rsd_plan_report *r = NULL;
	const struct rsd_plan_report *kept;
	struct rsd_handle w, k, ct;
	struct rsd_scope *s = NULL;
	struct rsd_snapshot *snap;
	uint64_t v;
	size_t nr;
	struct pfx f;

	pfx_init(&f, b, 1, 1);
	w = pfx_sourced_src(&f, PAGEABLE, W_BYTES, 0, NULL);
	k = pfx_adopt_n(&f, PINNED, RSD_REPLICABLE, K_BYTES);
	ct = pfx_adopt_n(&f, PINNED, RSD_EXCLUSIVE, C_BYTES);
	v = pfx_version(&f);
	ATF_CHECK_EQ(v, 5);
	enter[0] = rsd_action_ensure(w, c0);
	enter[1] = rsd_action_ensure(k, c0);
	enter[2] = rsd_action_move(ct, c0, NULL);
	ex[0] = rsd_action_move(ct, PINNED, NULL);
	ex[1] = rsd_action_drop(w, c0);
	ex[2] = rsd_action_drop(k, c0);

	/* What entry's preflight sees. */
	RSD_REQUIRE_OK(rsd_explain(f.m, &p, &v, &e));
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	ATF_CHECK_EQ(e->nactions, 6);
	ATF_REQUIRE_EQ(e->npeaks, 3);
	ATF_CHECK(pfx_loc_is(e->predicted_peak_bytes[0].location, c0));
	ATF_CHECK_EQ(e->predicted_peak_bytes[0].nbytes, WS_BYTES + W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK(pfx_loc_is(e->predicted_peak_bytes[1].location, PAGEABLE));
	ATF_CHECK_EQ(e->predicted_peak_bytes[1].nbytes, W_BYTES);
	ATF_CHECK(pfx_loc_is(e->predicted_peak_bytes[2].location, PINNED));
	ATF_CHECK_EQ(e->predicted_peak_bytes[2].nbytes, K_BYTES + C_BYTES);
	rsd_explanation_free(e);

	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, &v, &s));
	ATF_REQUIRE(s != NULL);
	ATF_CHECK(rsd_scope_report(s) == NULL);
	/* +1 reservation, +1 weight, +1 key, +2 ciphertext move. */
	ATF_CHECK_EQ(pfx_version(&f), v + 5);
	ls = pfx_loc_snap(&f, c0, &nr);
	ATF_CHECK_EQ(ls.used_bytes, W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(ls.reserved_bytes, WS_BYTES);
	ATF_CHECK(ls.has_budget);
	ATF_CHECK_EQ(ls.remaining_budget_bytes,
		     DEV_BUDGET - WS_BYTES - W_BYTES - K_BYTES - C_BYTES);
	ATF_CHECK_EQ(ls.value_count, 3);
	ATF_CHECK_EQ(ls.reservation_count, 1);
	ATF_CHECK_EQ(ls.peak_charged_bytes, WS_BYTES + W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(nr, 1);
	ls = pfx_loc_snap(&f, PINNED, NULL);
	ATF_CHECK_EQ(ls.used_bytes, K_BYTES);
	ls = pfx_loc_snap(&f, PAGEABLE, NULL);
	ATF_CHECK_EQ(ls.used_bytes, 0);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.peak_charged_bytes, W_BYTES); /* the temporary load */
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK(pfx_resident_at(&f, ct, c0));
	ATF_CHECK_EQ(pfx_nmat(&f, ct), 1);
	ATF_CHECK_EQ(pfx_nmat(&f, k), 2);
	RSD_REQUIRE_OK(rsd_snapshot_take(f.m, &snap));
	ATF_REQUIRE_EQ(snap->nreservations, 1);
	ATF_CHECK(pfx_loc_is(snap->reservations[0].location, c0));
	ATF_CHECK_EQ(snap->reservations[0].nbytes, WS_BYTES);
	ATF_CHECK_STREQ(snap->reservations[0].label, "workspace");
	rsd_snapshot_free(snap);
	/* The workspace is charged: a direct reservation of the rest fits, one byte more does not. */
	{
		struct rsd_reservation *extra;

		RSD_CHECK_ERR(RSD_EBUDGET,
			      rsd_reserve(f.m, c0,
					  DEV_BUDGET - WS_BYTES - W_BYTES - K_BYTES - C_BYTES + 1,
					  "extra", &extra));
	}

	RSD_REQUIRE_OK(rsd_scope_close(s, &r));
	ATF_REQUIRE(r != NULL);
	ATF_CHECK_STREQ(r->plan_name, "stage");
	ATF_REQUIRE_EQ(r->ntransitions, 6);
	pfx_check_transition(&r->transitions[0], &enter[0], false, &PAGEABLE, &c0, W_BYTES);
	pfx_check_transition(&r->transitions[1], &enter[1], false, &PINNED, &c0, K_BYTES);
	pfx_check_transition(&r->transitions[2], &enter[2], false, &PINNED, &c0, C_BYTES);
	pfx_check_transition(&r->transitions[3], &ex[0], false, &c0, &PINNED, C_BYTES);
	pfx_check_transition(&r->transitions[4], &ex[1], false, &c0, NULL, W_BYTES);
	pfx_check_transition(&r->transitions[5], &ex[2], false, &c0, NULL, K_BYTES);
	for (size_t i = 0; i < 6; i++) {
		ATF_CHECK(r->transitions[i].has_allocator);
		ATF_CHECK_EQ(r->transitions[i].allocator_device, 0);
	}
	ATF_CHECK(r->started_at_ns <= r->transitions[0].started_at_ns);
	ATF_CHECK(r->completed_at_ns >= r->transitions[5].completed_at_ns);
	kept = rsd_scope_report(s);
	ATF_REQUIRE(kept != NULL);
	ATF_CHECK_STREQ(kept->plan_name, "stage");
	ATF_CHECK_EQ(kept->ntransitions, 6);
	ATF_CHECK_EQ(kept->started_at_ns, r->started_at_ns);
	ATF_CHECK_EQ(kept->completed_at_ns, r->completed_at_ns);
	RSD_CHECK_OK(rsd_scope_exit_error(s));
	rsd_plan_report_free(r);

	/* +2 move out, +1 +1 drops, +1 reservation release. */
	ATF_CHECK_EQ(pfx_version(&f), v + 10);
	ls = pfx_loc_snap(&f, c0, &nr);
	ATF_CHECK_EQ(ls.used_bytes, 0);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.remaining_budget_bytes, DEV_BUDGET);
	ATF_CHECK_EQ(ls.peak_used_bytes, W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(ls.peak_charged_bytes, WS_BYTES + W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(nr, 0);
	ATF_CHECK_EQ(pfx_loc_snap(&f, PINNED, NULL).used_bytes, K_BYTES + C_BYTES);
	ATF_CHECK(pfx_resident_at(&f, ct, PINNED));
	ATF_CHECK_EQ(pfx_nmat(&f, ct), 1);
	ATF_CHECK_EQ(pfx_nmat(&f, w), 0);
	ATF_CHECK(pfx_resident_at(&f, k, PINNED));
	ATF_CHECK_EQ(pfx_nmat(&f, k), 1);

	/* A second close is a silent no-op. */
	r = NULL;
	RSD_CHECK_OK(rsd_scope_close(s, &r));
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(pfx_version(&f), v + 10);
	rsd_scope_free(s);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

/* A stale expectation fails entry before anything happens. */
ATF_TC_WITHOUT_HEAD(stale_entry);
ATF_TC_BODY(stale_entry, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 9, "r" } };
	struct rsd_action enter[1];
	struct rsd_plan p = { .name = "stale",
			      .enter = enter,
			      .nenter = 1,
			      .reservations = rs,
			      .nreservations = 1 };
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	uint64_t v, stale;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	enter[0] = rsd_action_ensure(pfx_sourced(&f, PAGEABLE), PAGEABLE);
	v = pfx_version(&f);
	stale = v + 1;
	RSD_CHECK_ERR(RSD_ESTALE, rsd_scope_enter(f.m, &p, NULL, 0, &stale, &s));
	err = rsd_last_error();
	ATF_CHECK(err->has_versions);
	ATF_CHECK_EQ(err->expected_version, v + 1);
	ATF_CHECK_EQ(err->actual_version, v);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	pfx_check_no_scope(s);
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

/* The version is compared after entry's reaping (§5.5, §18.46). */
ATF_TC_WITHOUT_HEAD(reap_makes_entry_stale);
ATF_TC_BODY(reap_makes_entry_stale, tc)
{
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 3, "r" } };
	struct rsd_plan p = { .name = "reap", .reservations = rs, .nreservations = 1 };
	struct rsd_scope *s = NULL;
	struct rsd_lease *l;
	struct rsd_handle h;
	uint64_t v;
	void *st;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &st));
	h = pfx_sourced(&f, PAGEABLE);
	RSD_REQUIRE_OK(rsd_ensure(f.m, h, c0, NULL, NULL));
	rsd_simdev_set_auto_complete(f.sd, false);
	RSD_REQUIRE_OK(rsd_acquire(f.m, &h, 1, c0, st, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	v = pfx_version(&f);
	rsd_simdev_stream_complete(f.sd, st);
	RSD_CHECK_ERR(RSD_ESTALE, rsd_scope_enter(f.m, &p, NULL, 0, &v, &s));
	ATF_CHECK_EQ(rsd_last_error()->expected_version, v);
	ATF_CHECK_EQ(rsd_last_error()->actual_version, v + 1);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	pfx_check_no_scope(s);
	v++;
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, &v, &s));
	RSD_CHECK_OK(rsd_scope_close(s, NULL));
	rsd_scope_free(s);
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(f.sd, st);
	pfx_fini(&f);
}

/* The whole plan is preflighted, exit included: -RSD_EPLAN, nothing done. */
ATF_TC_WITHOUT_HEAD(preflight_covers_exit);
ATF_TC_BODY(preflight_covers_exit, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 9, "r" } };
	struct rsd_action enter[1], ex[1];
	struct rsd_plan p = { .name = "pf",
			      .enter = enter,
			      .nenter = 1,
			      .reservations = rs,
			      .nreservations = 1,
			      .exit = ex,
			      .nexit = 1 };
	struct rsd_scope *s = NULL;
	struct rsd_hold *hd;
	struct rsd_handle x;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	enter[0] = rsd_action_ensure(pfx_sourced(&f, PAGEABLE), PAGEABLE);
	x = pfx_adopt_n(&f, PAGEABLE, RSD_REPLICABLE, N);
	RSD_REQUIRE_OK(rsd_hold(f.m, &x, 1, PAGEABLE, &hd));
	ex[0] = rsd_action_move(x, PINNED, NULL);
	v = pfx_version(&f);
	RSD_CHECK_ERR(RSD_EPLAN, rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	ATF_CHECK_STREQ(rsd_last_error()->message, "source pageable-host is protected");
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	pfx_check_no_scope(s);
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	pfx_fini(&f);
}

/* §18.59: the manager was force-closed while the scope was open. */
ATF_TC_WITHOUT_HEAD(close_after_forced_manager_close);
ATF_TC_BODY(close_after_forced_manager_close, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 17, "r" } };
	struct rsd_action ex[1];
	struct rsd_plan p = { .name = "forced",
			      .reservations = rs,
			      .nreservations = 1,
			      .exit = ex,
			      .nexit = 1 };
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *s = NULL, *s2 = NULL;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	ex[0] = rsd_action_drop(pfx_sourced(&f, PAGEABLE), PAGEABLE);
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s2));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 34);
	/* Without force the reservations block close. */
	RSD_CHECK_ERR(RSD_EINUSE, rsd_manager_close(f.m, 0));
	RSD_REQUIRE_OK(rsd_manager_close(f.m, RSD_CLOSE_FORCE));

	pfx_clear_partial();
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_scope_close(s, &r));
	ATF_CHECK(r == NULL);
	RSD_CHECK_OK(rsd_scope_exit_error(s));
	ATF_CHECK(rsd_scope_report(s) == NULL);
	ATF_CHECK(rsd_take_partial_report() == NULL);
	RSD_CHECK_OK(rsd_scope_close(s, &r));
	ATF_CHECK(r == NULL);
	rsd_scope_free(s);

	/* The other scope outlives its manager: freeing it is still safe. */
	rsd_manager_destroy(f.m);
	f.m = NULL;
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_scope_close(s2, &r));
	RSD_CHECK_OK(rsd_scope_close(s2, &r));
	rsd_scope_free(s2);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

/* §18.61: each scope admits and releases only its own reservations. */
ATF_TC_WITHOUT_HEAD(nested_scopes);
ATF_TC_BODY(nested_scopes, tc)
{
	struct rsd_reservation_spec outer_r[] = { { RSD_LOC_PAGEABLE_HOST, 17, "outer" } };
	struct rsd_reservation_spec inner_r[] = { { RSD_LOC_PAGEABLE_HOST, 11, "inner" } };
	struct rsd_plan outer = { .name = "outer", .reservations = outer_r, .nreservations = 1 };
	struct rsd_plan inner = { .name = "inner", .reservations = inner_r, .nreservations = 1 };
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *so = NULL, *si = NULL;
	struct rsd_snapshot *snap;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	pfx_sourced(&f, PAGEABLE);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &outer, NULL, 0, NULL, &so));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 17);
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &inner, NULL, 0, NULL, &si));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 28);
	RSD_REQUIRE_OK(rsd_snapshot_take(f.m, &snap));
	ATF_REQUIRE_EQ(snap->nreservations, 2);
	ATF_CHECK_STREQ(snap->reservations[0].label, "outer");
	ATF_CHECK_STREQ(snap->reservations[1].label, "inner");
	rsd_snapshot_free(snap);
	RSD_REQUIRE_OK(rsd_scope_close(si, &r));
	ATF_CHECK_STREQ(r->plan_name, "inner");
	ATF_CHECK_EQ(r->ntransitions, 0);
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 17);
	RSD_REQUIRE_OK(rsd_snapshot_take(f.m, &snap));
	ATF_REQUIRE_EQ(snap->nreservations, 1);
	ATF_CHECK_STREQ(snap->reservations[0].label, "outer");
	rsd_snapshot_free(snap);
	RSD_REQUIRE_OK(rsd_scope_close(so, NULL));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK_STREQ(rsd_scope_report(so)->plan_name, "outer");
	rsd_scope_free(si);
	rsd_scope_free(so);

	/* Closed out of order, each still releases only its own. */
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &outer, NULL, 0, NULL, &so));
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &inner, NULL, 0, NULL, &si));
	RSD_REQUIRE_OK(rsd_scope_close(so, NULL));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 11);
	RSD_REQUIRE_OK(rsd_scope_close(si, NULL));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	rsd_scope_free(si);
	rsd_scope_free(so);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

/* §10.2 / §18.60 in scope entry: host key → EINVAL, non-stream → ETYPE. */
ATF_TC_WITHOUT_HEAD(transfer_streams);
ATF_TC_BODY(transfer_streams, tc)
{
	struct rsd_location c0 = pfx_cuda(0);
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 5, "r" } };
	struct rsd_action enter[1], ex[1];
	struct rsd_plan p = { .name = "ts",
			      .enter = enter,
			      .nenter = 1,
			      .reservations = rs,
			      .nreservations = 1,
			      .exit = ex,
			      .nexit = 1 };
	struct rsd_transfer_stream ts[1];
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *s = NULL;
	struct rsd_handle h;
	int not_a_stream;
	void *st;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &st));
	h = pfx_sourced(&f, PAGEABLE);
	RSD_REQUIRE_OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	enter[0] = rsd_action_ensure(h, c0);
	ex[0] = rsd_action_move(h, c0, &PINNED);
	v = pfx_version(&f);

	ts[0].location = PINNED;
	ts[0].stream = st;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_scope_enter(f.m, &p, ts, 1, NULL, &s));
	pfx_check_no_scope(s);
	ts[0].location = c0;
	ts[0].stream = &not_a_stream;
	RSD_CHECK_ERR(RSD_ETYPE, rsd_scope_enter(f.m, &p, ts, 1, NULL, &s));
	pfx_check_no_scope(s);
	/* The version check precedes the stream map. */
	v++;
	RSD_CHECK_ERR(RSD_ESTALE, rsd_scope_enter(f.m, &p, ts, 1, &v, &s));
	v--;
	rsd_scope_free(s);
	s = NULL;
	ATF_CHECK_EQ(pfx_version(&f), v);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);

	ts[0].stream = st;
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, ts, 1, &v, &s));
	/* The scope copied its plan and stream map: exit uses the copies. */
	ts[0].stream = &not_a_stream;
	ex[0] = rsd_action_drop(h, c0);
	p.name = "changed";
	RSD_REQUIRE_OK(rsd_scope_close(s, &r));
	ATF_CHECK_STREQ(r->plan_name, "ts");
	ex[0] = rsd_action_move(h, c0, &PINNED);
	ATF_REQUIRE_EQ(r->ntransitions, 2);
	pfx_check_transition(&r->transitions[0], &enter[0], false, &PINNED, &c0, N);
	/* Move onto a resident destination removes the explicit source. */
	pfx_check_transition(&r->transitions[1], &ex[0], false, &PINNED, &c0, N);
	rsd_plan_report_free(r);
	ATF_CHECK(pfx_resident_at(&f, h, c0));
	ATF_CHECK_EQ(pfx_nmat(&f, h), 1);
	rsd_scope_free(s);
	rsd_simdev_stream_destroy(f.sd, st);
	pfx_fini(&f);
}

/*
 * librsd deviation from reference.md §11 step 2 / §18.86: the reference
 * marks a scope closed when its close() is refused from inside a source
 * callback, leaving its reservations charged until a forced manager close.
 * librsd refuses the close with -RSD_EREENTRANT and leaves the scope open,
 * so a later close runs the exit actions and releases its reservations.
 */
ATF_TC_WITHOUT_HEAD(close_from_source_callback);
ATF_TC_BODY(close_from_source_callback, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 17, "r" } };
	struct rsd_action ex[1];
	struct rsd_plan p = { .name = "cb",
			      .reservations = rs,
			      .nreservations = 1,
			      .exit = ex,
			      .nexit = 1 };
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, x;
	struct pfx_src *gs;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	g = pfx_sourced_src(&f, PAGEABLE, N, 0, &gs);
	x = pfx_adopt_n(&f, PAGEABLE, RSD_REPLICABLE, N);
	RSD_REQUIRE_OK(rsd_ensure(f.m, x, PINNED, NULL, NULL));
	ex[0] = rsd_action_drop(x, PINNED);
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 17);

	gs->scope = s;
	gs->close_rc = 1;
	RSD_REQUIRE_OK(rsd_ensure(f.m, g, PAGEABLE, NULL, NULL));
	gs->scope = NULL;
	ATF_CHECK_EQ(gs->close_rc, -RSD_EREENTRANT);
	/* Still open: reservation charged, exit not run. */
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 17);
	ATF_CHECK_EQ(pfx_nreservations(&f), 1);
	ATF_CHECK(pfx_resident_at(&f, x, PINNED));
	ATF_CHECK(rsd_scope_report(s) == NULL);
	RSD_CHECK_OK(rsd_scope_exit_error(s));

	v = pfx_version(&f);
	RSD_REQUIRE_OK(rsd_scope_close(s, &r));
	ATF_REQUIRE_EQ(r->ntransitions, 1);
	pfx_check_transition(&r->transitions[0], &ex[0], false, &PINNED, NULL, N);
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	ATF_CHECK(!pfx_resident_at(&f, x, PINNED));
	ATF_CHECK_EQ(pfx_version(&f), v + 2);
	rsd_scope_free(s);
	ATF_CHECK_EQ(f.nwarn, 0);
	pfx_fini(&f);
}

/* §8.9: freeing an entered, unclosed scope releases its reservations, runs no exit. */
ATF_TC_WITHOUT_HEAD(free_open_scope);
ATF_TC_BODY(free_open_scope, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 9, "a" },
					     { RSD_LOC_PINNED_HOST, 4, "b" } };
	struct rsd_action enter[1], ex[1];
	struct rsd_plan p = { .name = "abandoned",
			      .enter = enter,
			      .nenter = 1,
			      .reservations = rs,
			      .nreservations = 2,
			      .exit = ex,
			      .nexit = 1 };
	struct rsd_scope *s = NULL;
	struct rsd_handle g;
	uint64_t v;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	g = pfx_sourced(&f, PAGEABLE);
	enter[0] = rsd_action_ensure(g, PAGEABLE);
	ex[0] = rsd_action_drop(g, PAGEABLE);
	RSD_REQUIRE_OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 9);
	ATF_CHECK_EQ(pfx_reserved(&f, PINNED), 4);
	v = pfx_version(&f);
	rsd_scope_free(s);
	ATF_CHECK_EQ(pfx_reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(pfx_reserved(&f, PINNED), 0);
	ATF_CHECK_EQ(pfx_nreservations(&f), 0);
	ATF_CHECK_EQ(pfx_version(&f), v + 2);
	ATF_CHECK(pfx_resident_at(&f, g, PAGEABLE));
	ATF_CHECK_EQ(f.nwarn, 1);
	ATF_CHECK_MSG(strstr(f.warn, "abandoned") != NULL, "warning: %s", f.warn);
	/* The manager closes without force: nothing is left. */
	RSD_CHECK_OK(rsd_manager_close(f.m, 0));
	pfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(entry_errors);
ATF_TC_BODY(entry_errors, tc)
{
	struct rsd_plan p = { .name = " " };
	struct rsd_scope *s = NULL;
	struct pfx f;

	pfx_init(&f, NULL, 0, -1);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	ATF_CHECK(s == NULL);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_scope_enter(f.m, NULL, NULL, 0, NULL, &s));
	p.name = "ok";
	RSD_CHECK_ERR(RSD_ETYPE, rsd_scope_enter(NULL, &p, NULL, 0, NULL, &s));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_scope_enter(f.m, &p, NULL, 1, NULL, &s));
	ATF_CHECK(s == NULL);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_scope_close(NULL, NULL));
	RSD_CHECK_OK(rsd_scope_exit_error(NULL));
	ATF_CHECK(rsd_scope_report(NULL) == NULL);
	rsd_scope_free(NULL);

	RSD_REQUIRE_OK(rsd_manager_close(f.m, 0));
	RSD_CHECK_ERR(RSD_ECLOSED, rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	pfx_check_no_scope(s);
	pfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, fhe_stage);
	ATF_TP_ADD_TC(tp, stale_entry);
	ATF_TP_ADD_TC(tp, reap_makes_entry_stale);
	ATF_TP_ADD_TC(tp, preflight_covers_exit);
	ATF_TP_ADD_TC(tp, close_after_forced_manager_close);
	ATF_TP_ADD_TC(tp, nested_scopes);
	ATF_TP_ADD_TC(tp, transfer_streams);
	ATF_TP_ADD_TC(tp, close_from_source_callback);
	ATF_TP_ADD_TC(tp, free_open_scope);
	ATF_TP_ADD_TC(tp, entry_errors);
	return atf_no_error();
}
