// SPDX-License-Identifier: MIT
/*
 * Scopes (semantics.md §12.5): entry (version check, stream map, whole-plan
 * preflight, reclaim, reservations, enter), exit (exit actions without a new
 * preflight, reservations always released), failures in every phase with
 * their phase-local indices and partial reports, nesting, forced manager
 * close, re-entrancy from a source callback, and abandonment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include <rsd/rsd.h>

#define N 64
#define PAGEABLE RSD_LOC_PAGEABLE_HOST
#define PINNED RSD_LOC_PINNED_HOST

struct fx {
	struct rsd_simdev *sd; /* NULL: a host-only manager */
	struct rsd_manager *m;
	unsigned loads;
	unsigned nwarn;
	char warn[512];
};

struct src {
	struct fx *f;
	struct rsd_location at;
	uint64_t nbytes;
	int fail;                 /* returned by load when nonzero */
	struct rsd_scope *scope;  /* closed from inside load when set */
	int close_rc;
};

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct src *s = ctx;

	s->f->loads++;
	if (s->scope)
		s->close_rc = rsd_scope_close(s->scope, NULL);
	if (s->fail)
		return s->fail;
	return rsd_resident_alloc(s->f->m, &rsd_resident_type, s->at, 1, &s->nbytes, NULL, 0, out);
}

static void src_release(void *ctx)
{
	free(ctx);
}

static void on_warn(void *ctx, const char *message)
{
	struct fx *f = ctx;

	f->nwarn++;
	snprintf(f->warn, sizeof(f->warn), "%s", message);
}

/* ndevices < 0: host-only manager; otherwise the simulated device. */
static void fx_init(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices)
{
	struct rsd_manager_config cfg;

	memset(f, 0, sizeof(*f));
	memset(&cfg, 0, sizeof(cfg));
	cfg.budgets = b;
	cfg.nbudgets = nb;
	cfg.warn = on_warn;
	cfg.warn_ctx = f;
	if (ndevices < 0) {
		cfg.host_only = true;
	} else {
		struct rsd_simdev_config sc = { .ndevices = ndevices, .auto_complete = true,
						.pooled = true };

		ATF_REQUIRE_EQ(rsd_simdev_create(&sc, &f->sd), 0);
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = f->sd;
	}
	ATF_REQUIRE_EQ_MSG(rsd_manager_create(&cfg, &f->m), 0, "%s", rsd_last_error()->message);
}

static void fx_fini(struct fx *f)
{
	rsd_manager_destroy(f->m);
	if (f->sd)
		rsd_simdev_destroy(f->sd);
}

static struct rsd_handle adopt_n(struct fx *f, struct rsd_location at, enum rsd_replica_mode mode,
				 uint64_t n)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	ATF_REQUIRE_EQ_MSG(rsd_resident_alloc(f->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r), 0,
			   "%s", rsd_last_error()->message);
	ATF_REQUIRE_EQ_MSG(rsd_adopt(f->m, r, &at, mode, &h), 0, "%s", rsd_last_error()->message);
	return h;
}

static struct rsd_handle sourced_src(struct fx *f, struct rsd_location at, uint64_t n, int fail,
				     struct src **out)
{
	struct rsd_value_spec spec = { &rsd_resident_type, n, n, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct src *s = calloc(1, sizeof(*s));
	struct rsd_source source = { src_load, src_release, s };
	struct rsd_handle h;

	ATF_REQUIRE(s);
	s->f = f;
	s->at = at;
	s->nbytes = n;
	s->fail = fail;
	ATF_REQUIRE_EQ_MSG(rsd_register_source(f->m, &spec, &source, at, &h), 0, "%s",
			   rsd_last_error()->message);
	if (out)
		*out = s;
	return h;
}

static struct rsd_handle sourced(struct fx *f, struct rsd_location at)
{
	return sourced_src(f, at, N, 0, NULL);
}

static uint64_t version(struct fx *f)
{
	uint64_t v = 0;

	ATF_REQUIRE_EQ(rsd_manager_state_version_get(f->m, &v), 0);
	return v;
}

static struct rsd_location cuda(int n)
{
	struct rsd_location l;

	ATF_REQUIRE_EQ(rsd_cuda_location(n, &l), 0);
	return l;
}

static bool loc_is(struct rsd_location a, struct rsd_location b)
{
	return rsd_location_equal(a, b);
}

/* A copy of one location's snapshot (zeroed when the location is unknown). */
static struct rsd_location_snapshot loc_snap(struct fx *f, struct rsd_location at, size_t *nresv)
{
	struct rsd_location_snapshot out;
	struct rsd_snapshot *s;

	memset(&out, 0, sizeof(out));
	ATF_REQUIRE_EQ(rsd_snapshot_take(f->m, &s), 0);
	for (size_t i = 0; i < s->nlocations; i++)
		if (loc_is(s->locations[i].location, at))
			out = s->locations[i];
	if (nresv)
		*nresv = s->nreservations;
	rsd_snapshot_free(s);
	return out;
}

static uint64_t reserved(struct fx *f, struct rsd_location at)
{
	return loc_snap(f, at, NULL).reserved_bytes;
}

static size_t nreservations(struct fx *f)
{
	size_t n;

	loc_snap(f, PAGEABLE, &n);
	return n;
}

static bool resident_at(struct fx *f, struct rsd_handle h, struct rsd_location at)
{
	struct rsd_snapshot *s;
	bool found = false;

	ATF_REQUIRE_EQ(rsd_snapshot_take(f->m, &s), 0);
	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			for (size_t j = 0; j < s->values[i].nmaterializations; j++)
				found |= loc_is(s->values[i].materializations[j].location, at);
	rsd_snapshot_free(s);
	return found;
}

static size_t nmat(struct fx *f, struct rsd_handle h)
{
	struct rsd_snapshot *s;
	size_t n = (size_t)-1;

	ATF_REQUIRE_EQ(rsd_snapshot_take(f->m, &s), 0);
	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			n = s->values[i].nmaterializations;
	rsd_snapshot_free(s);
	ATF_REQUIRE(n != (size_t)-1);
	return n;
}

static void clear_partial(void)
{
	rsd_plan_report_free(rsd_take_partial_report());
}

static void check_transition(const struct rsd_transition *t, const struct rsd_action *a, bool no_op,
			     const struct rsd_location *src, const struct rsd_location *dst,
			     uint64_t nbytes)
{
	ATF_CHECK(rsd_action_equal(&t->action, a));
	ATF_CHECK_EQ(t->no_op, no_op);
	ATF_CHECK_EQ(t->has_source, src != NULL);
	if (src && t->has_source)
		ATF_CHECK(loc_is(t->source, *src));
	ATF_CHECK_EQ(t->has_destination, dst != NULL);
	if (dst && t->has_destination)
		ATF_CHECK(loc_is(t->destination, *dst));
	ATF_CHECK_EQ(t->logical_nbytes, nbytes);
	ATF_CHECK_EQ(t->storage_nbytes, nbytes);
	ATF_CHECK(t->completed_at_ns >= t->started_at_ns);
}

/* After an entry failure the scope is closed: close is silent, no report. */
static void check_closed_after_failure(struct rsd_scope *s)
{
	struct rsd_plan_report *r = NULL;

	ATF_REQUIRE(s != NULL);
	ATF_CHECK_EQ(rsd_scope_close(s, &r), 0);
	ATF_CHECK(r == NULL);
	ATF_CHECK(rsd_scope_report(s) == NULL);
	ATF_CHECK_EQ(rsd_scope_exit_error(s), 0);
}

/* ---- the FHE stage ---- */

#define W_BYTES 256   /* weight: replicable, sourced at pageable */
#define K_BYTES 128   /* key: replicable, adopted at pinned */
#define C_BYTES 64    /* ciphertext: exclusive, must-preserve, adopted at pinned */
#define WS_BYTES 512  /* device workspace reservation */
#define DEV_BUDGET 1024

ATF_TC_WITHOUT_HEAD(fhe_stage);
ATF_TC_BODY(fhe_stage, tc)
{
	struct rsd_location c0 = cuda(0);
	struct rsd_budget b[] = { { c0, DEV_BUDGET } };
	struct rsd_reservation_spec rs[] = { { c0, WS_BYTES, "workspace" } };
	struct rsd_action enter[3], ex[3];
	struct rsd_plan p = { .name = "stage", .enter = enter, .nenter = 3, .reservations = rs,
			      .nreservations = 1, .exit = ex, .nexit = 3 };
	struct rsd_location_snapshot ls;
	struct rsd_explanation *e;
	struct rsd_plan_report *r = NULL;
	const struct rsd_plan_report *kept;
	struct rsd_handle w, k, ct;
	struct rsd_scope *s = NULL;
	struct rsd_snapshot *snap;
	uint64_t v;
	size_t nr;
	struct fx f;

	fx_init(&f, b, 1, 1);
	w = sourced_src(&f, PAGEABLE, W_BYTES, 0, NULL);
	k = adopt_n(&f, PINNED, RSD_REPLICABLE, K_BYTES);
	ct = adopt_n(&f, PINNED, RSD_EXCLUSIVE, C_BYTES);
	v = version(&f);
	ATF_CHECK_EQ(v, 5);
	enter[0] = rsd_action_ensure(w, c0);
	enter[1] = rsd_action_ensure(k, c0);
	enter[2] = rsd_action_move(ct, c0, NULL);
	ex[0] = rsd_action_move(ct, PINNED, NULL);
	ex[1] = rsd_action_drop(w, c0);
	ex[2] = rsd_action_drop(k, c0);

	/* What entry's preflight sees. */
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, &v, &e), 0);
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	ATF_CHECK_EQ(e->nactions, 6);
	ATF_REQUIRE_EQ(e->npeaks, 3);
	ATF_CHECK(loc_is(e->predicted_peak_bytes[0].location, c0));
	ATF_CHECK_EQ(e->predicted_peak_bytes[0].nbytes, WS_BYTES + W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK(loc_is(e->predicted_peak_bytes[1].location, PAGEABLE));
	ATF_CHECK_EQ(e->predicted_peak_bytes[1].nbytes, W_BYTES);
	ATF_CHECK(loc_is(e->predicted_peak_bytes[2].location, PINNED));
	ATF_CHECK_EQ(e->predicted_peak_bytes[2].nbytes, K_BYTES + C_BYTES);
	rsd_explanation_free(e);

	ATF_REQUIRE_EQ_MSG(rsd_scope_enter(f.m, &p, NULL, 0, &v, &s), 0, "%s",
			   rsd_last_error()->message);
	ATF_REQUIRE(s != NULL);
	ATF_CHECK(rsd_scope_report(s) == NULL);
	/* +1 reservation, +1 weight, +1 key, +2 ciphertext move. */
	ATF_CHECK_EQ(version(&f), v + 5);
	ls = loc_snap(&f, c0, &nr);
	ATF_CHECK_EQ(ls.used_bytes, W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(ls.reserved_bytes, WS_BYTES);
	ATF_CHECK(ls.has_budget);
	ATF_CHECK_EQ(ls.remaining_budget_bytes, DEV_BUDGET - WS_BYTES - W_BYTES - K_BYTES - C_BYTES);
	ATF_CHECK_EQ(ls.value_count, 3);
	ATF_CHECK_EQ(ls.reservation_count, 1);
	ATF_CHECK_EQ(ls.peak_charged_bytes, WS_BYTES + W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(nr, 1);
	ls = loc_snap(&f, PINNED, NULL);
	ATF_CHECK_EQ(ls.used_bytes, K_BYTES);
	ls = loc_snap(&f, PAGEABLE, NULL);
	ATF_CHECK_EQ(ls.used_bytes, 0);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.peak_charged_bytes, W_BYTES); /* the temporary load */
	ATF_CHECK_EQ(f.loads, 1);
	ATF_CHECK(resident_at(&f, ct, c0));
	ATF_CHECK_EQ(nmat(&f, ct), 1);
	ATF_CHECK_EQ(nmat(&f, k), 2);
	ATF_REQUIRE_EQ(rsd_snapshot_take(f.m, &snap), 0);
	ATF_REQUIRE_EQ(snap->nreservations, 1);
	ATF_CHECK(loc_is(snap->reservations[0].location, c0));
	ATF_CHECK_EQ(snap->reservations[0].nbytes, WS_BYTES);
	ATF_CHECK_STREQ(snap->reservations[0].label, "workspace");
	rsd_snapshot_free(snap);
	/* The workspace is charged: a direct reservation of the rest fits, one byte more does not. */
	{
		struct rsd_reservation *extra;

		ATF_CHECK_EQ(rsd_reserve(f.m, c0, DEV_BUDGET - WS_BYTES - W_BYTES - K_BYTES - C_BYTES + 1,
					 "extra", &extra), -RSD_EBUDGET);
	}

	ATF_REQUIRE_EQ_MSG(rsd_scope_close(s, &r), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE(r != NULL);
	ATF_CHECK_STREQ(r->plan_name, "stage");
	ATF_REQUIRE_EQ(r->ntransitions, 6);
	check_transition(&r->transitions[0], &enter[0], false, &PAGEABLE, &c0, W_BYTES);
	check_transition(&r->transitions[1], &enter[1], false, &PINNED, &c0, K_BYTES);
	check_transition(&r->transitions[2], &enter[2], false, &PINNED, &c0, C_BYTES);
	check_transition(&r->transitions[3], &ex[0], false, &c0, &PINNED, C_BYTES);
	check_transition(&r->transitions[4], &ex[1], false, &c0, NULL, W_BYTES);
	check_transition(&r->transitions[5], &ex[2], false, &c0, NULL, K_BYTES);
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
	ATF_CHECK_EQ(rsd_scope_exit_error(s), 0);
	rsd_plan_report_free(r);

	/* +2 move out, +1 +1 drops, +1 reservation release. */
	ATF_CHECK_EQ(version(&f), v + 10);
	ls = loc_snap(&f, c0, &nr);
	ATF_CHECK_EQ(ls.used_bytes, 0);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.remaining_budget_bytes, DEV_BUDGET);
	ATF_CHECK_EQ(ls.peak_used_bytes, W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(ls.peak_charged_bytes, WS_BYTES + W_BYTES + K_BYTES + C_BYTES);
	ATF_CHECK_EQ(nr, 0);
	ATF_CHECK_EQ(loc_snap(&f, PINNED, NULL).used_bytes, K_BYTES + C_BYTES);
	ATF_CHECK(resident_at(&f, ct, PINNED));
	ATF_CHECK_EQ(nmat(&f, ct), 1);
	ATF_CHECK_EQ(nmat(&f, w), 0);
	ATF_CHECK(resident_at(&f, k, PINNED));
	ATF_CHECK_EQ(nmat(&f, k), 1);

	/* A second close is a silent no-op. */
	r = NULL;
	ATF_CHECK_EQ(rsd_scope_close(s, &r), 0);
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(version(&f), v + 10);
	rsd_scope_free(s);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

/* A stale expectation fails entry before anything happens. */
ATF_TC_WITHOUT_HEAD(stale_entry);
ATF_TC_BODY(stale_entry, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 9, "r" } };
	struct rsd_action enter[1];
	struct rsd_plan p = { .name = "stale", .enter = enter, .nenter = 1, .reservations = rs,
			      .nreservations = 1 };
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	uint64_t v, stale;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	enter[0] = rsd_action_ensure(sourced(&f, PAGEABLE), PAGEABLE);
	v = version(&f);
	stale = v + 1;
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, NULL, 0, &stale, &s), -RSD_ESTALE);
	err = rsd_last_error();
	ATF_CHECK(err->has_versions);
	ATF_CHECK_EQ(err->expected_version, v + 1);
	ATF_CHECK_EQ(err->actual_version, v);
	ATF_CHECK_EQ(version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(nreservations(&f), 0);
	check_closed_after_failure(s);
	ATF_CHECK_EQ(version(&f), v);
	rsd_scope_free(s);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

/* The version is compared after entry's reaping (§6.3, §19.46). */
ATF_TC_WITHOUT_HEAD(reap_makes_entry_stale);
ATF_TC_BODY(reap_makes_entry_stale, tc)
{
	struct rsd_location c0 = cuda(0);
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 3, "r" } };
	struct rsd_plan p = { .name = "reap", .reservations = rs, .nreservations = 1 };
	struct rsd_scope *s = NULL;
	struct rsd_lease *l;
	struct rsd_handle h;
	uint64_t v;
	void *st;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &st), 0);
	h = sourced(&f, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_ensure(f.m, h, c0, NULL, NULL), 0);
	rsd_simdev_set_auto_complete(f.sd, false);
	ATF_REQUIRE_EQ(rsd_acquire(f.m, &h, 1, c0, st, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	v = version(&f);
	rsd_simdev_stream_complete(f.sd, st);
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, NULL, 0, &v, &s), -RSD_ESTALE);
	ATF_CHECK_EQ(rsd_last_error()->expected_version, v);
	ATF_CHECK_EQ(rsd_last_error()->actual_version, v + 1);
	ATF_CHECK_EQ(nreservations(&f), 0);
	check_closed_after_failure(s);
	rsd_scope_free(s);
	s = NULL;
	v++;
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, &v, &s), 0);
	ATF_CHECK_EQ(rsd_scope_close(s, NULL), 0);
	rsd_scope_free(s);
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(f.sd, st);
	fx_fini(&f);
}

/* The whole plan is preflighted, exit included: -RSD_EPLAN, nothing done. */
ATF_TC_WITHOUT_HEAD(preflight_covers_exit);
ATF_TC_BODY(preflight_covers_exit, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 9, "r" } };
	struct rsd_action enter[1], ex[1];
	struct rsd_plan p = { .name = "pf", .enter = enter, .nenter = 1, .reservations = rs,
			      .nreservations = 1, .exit = ex, .nexit = 1 };
	struct rsd_scope *s = NULL;
	struct rsd_hold *hd;
	struct rsd_handle x;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	enter[0] = rsd_action_ensure(sourced(&f, PAGEABLE), PAGEABLE);
	x = adopt_n(&f, PAGEABLE, RSD_REPLICABLE, N);
	ATF_REQUIRE_EQ(rsd_hold(f.m, &x, 1, PAGEABLE, &hd), 0);
	ex[0] = rsd_action_move(x, PINNED, NULL);
	v = version(&f);
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), -RSD_EPLAN);
	ATF_CHECK_STREQ(rsd_last_error()->message, "source pageable-host is protected");
	ATF_CHECK_EQ(version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(nreservations(&f), 0);
	check_closed_after_failure(s);
	rsd_scope_free(s);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	rsd_hold_free(hd);
	fx_fini(&f);
}

/*
 * W9 / §19.48: entry fails at the 2nd enter action after two reservations.
 * pinned_known: pinned-host is recorded at construction (budget), so the
 * version advances by exactly 5 (2 admits, 1 install, 2 releases); without
 * it the install records pinned-host too (+6).
 */
static void entry_failure(bool pinned_known)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 1 << 20 } };
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 5, "r1" },
					     { RSD_LOC_PINNED_HOST, 7, "r2" } };
	struct rsd_action enter[2];
	struct rsd_plan p = { .name = "w9", .enter = enter, .nenter = 2, .reservations = rs,
			      .nreservations = 2 };
	struct rsd_location_snapshot ls;
	struct rsd_plan_report *partial;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, bad;
	struct fx f;
	size_t nr;

	fx_init(&f, b, pinned_known ? 1 : 0, -1);
	g = sourced(&f, PAGEABLE);
	bad = sourced_src(&f, PAGEABLE, N, -RSD_EDEVICE, NULL);
	ATF_REQUIRE_EQ(version(&f), 3);
	enter[0] = rsd_action_ensure(g, PINNED);
	enter[1] = rsd_action_ensure(bad, PINNED);
	clear_partial();
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), -RSD_EEXEC);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_ENTER);
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EDEVICE);
	ATF_CHECK_STREQ(err->plan_name, "w9");
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_CHECK_STREQ(partial->plan_name, "w9");
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	check_transition(&partial->transitions[0], &enter[0], false, &PAGEABLE, &PINNED, N);
	rsd_plan_report_free(partial);
	ATF_CHECK(rsd_take_partial_report() == NULL);

	ATF_CHECK_EQ(version(&f), pinned_known ? 8 : 9);
	ls = loc_snap(&f, PAGEABLE, &nr);
	ATF_CHECK_EQ(nr, 0);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.reservation_count, 0);
	ATF_CHECK_EQ(ls.peak_charged_bytes, 5 + N);
	ls = loc_snap(&f, PINNED, NULL);
	ATF_CHECK_EQ(ls.reserved_bytes, 0);
	ATF_CHECK_EQ(ls.used_bytes, N);
	ATF_CHECK_EQ(ls.peak_charged_bytes, 7 + N);
	ATF_CHECK(resident_at(&f, g, PINNED));
	ATF_CHECK_EQ(nmat(&f, g), 1);
	ATF_CHECK_EQ(nmat(&f, bad), 0);
	ATF_CHECK_EQ(f.loads, 2);

	/* §19.49: the scope is finished. */
	check_closed_after_failure(s);
	ATF_CHECK_EQ(version(&f), pinned_known ? 8 : 9);
	rsd_scope_free(s);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(entry_failure_version_5);
ATF_TC_BODY(entry_failure_version_5, tc)
{
	entry_failure(true);
}

ATF_TC_WITHOUT_HEAD(entry_failure_w9);
ATF_TC_BODY(entry_failure_w9, tc)
{
	entry_failure(false);
}

/* A reclaim failure: phase reclaim, reclaim-local index, no reservation admitted. */
ATF_TC_WITHOUT_HEAD(reclaim_failure);
ATF_TC_BODY(reclaim_failure, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 5, "r1" } };
	struct rsd_action reclaim[2], enter[1];
	struct rsd_plan p = { .name = "rc", .reclaim = reclaim, .nreclaim = 2, .enter = enter,
			      .nenter = 1, .reservations = rs, .nreservations = 1 };
	struct rsd_plan_report *partial;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, bad;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	g = sourced(&f, PAGEABLE);
	bad = sourced_src(&f, PAGEABLE, N, -RSD_EUNAVAILABLE, NULL);
	v = version(&f);
	reclaim[0] = rsd_action_ensure(g, PAGEABLE);
	reclaim[1] = rsd_action_ensure(bad, PAGEABLE);
	enter[0] = rsd_action_drop(g, PAGEABLE);
	clear_partial();
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, &v, &s), -RSD_EEXEC);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_RECLAIM);
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EUNAVAILABLE);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	check_transition(&partial->transitions[0], &reclaim[0], false, &PAGEABLE, &PAGEABLE, N);
	rsd_plan_report_free(partial);
	ATF_CHECK_EQ(version(&f), v + 1);
	ATF_CHECK_EQ(nreservations(&f), 0);
	ATF_CHECK_EQ(loc_snap(&f, PAGEABLE, NULL).peak_charged_bytes, 2 * N);
	ATF_CHECK(resident_at(&f, g, PAGEABLE));
	check_closed_after_failure(s);
	rsd_scope_free(s);
	fx_fini(&f);
}

/*
 * §19.52: a reservation-phase failure. Preflight simulates admission, so a
 * runtime rejection needs the simulation to admit what execution refuses;
 * the only such case is 64-bit saturation (2^64-1 + 1 bytes). When the
 * simulation is exact the entry is a plan error instead and this case
 * cannot be provoked (see t_explain:reservation_sum_exact).
 */
ATF_TC_WITHOUT_HEAD(reservation_failure);
ATF_TC_BODY(reservation_failure, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, UINT64_MAX } };
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, UINT64_MAX, "all" },
					     { RSD_LOC_PAGEABLE_HOST, 1, "one" } };
	struct rsd_action reclaim[1], enter[1];
	struct rsd_plan p = { .name = "rv", .reclaim = reclaim, .nreclaim = 1, .enter = enter,
			      .nenter = 1, .reservations = rs, .nreservations = 2 };
	struct rsd_plan_report *partial;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g;
	uint64_t v;
	int rc;
	struct fx f;

	fx_init(&f, b, 1, -1);
	g = sourced(&f, PAGEABLE);
	v = version(&f);
	reclaim[0] = rsd_action_ensure(g, PINNED);
	enter[0] = rsd_action_drop(g, PINNED);
	clear_partial();
	rc = rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s);
	if (rc == -RSD_EPLAN) {
		ATF_CHECK_EQ(version(&f), v);
		check_closed_after_failure(s);
		rsd_scope_free(s);
		fx_fini(&f);
		atf_tc_skip("the simulation rejects 2^64 reserved bytes, so no runtime "
			    "reservation failure can be provoked");
	}
	ATF_REQUIRE_EQ_MSG(rc, -RSD_EEXEC, "entry returned %d", rc);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_RESERVE);
	ATF_CHECK_EQ(err->failed_action_index, -1);
	ATF_CHECK_EQ(err->failed_reservation_index, 1);
	ATF_CHECK_EQ(err->cause, -RSD_EBUDGET);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_REQUIRE_EQ(partial->ntransitions, 1);
	check_transition(&partial->transitions[0], &reclaim[0], false, &PAGEABLE, &PINNED, N);
	rsd_plan_report_free(partial);
	/* +1 pinned recorded, +1 install, +1 admit "all", +1 release it. */
	ATF_CHECK_EQ(version(&f), v + 4);
	ATF_CHECK_EQ(nreservations(&f), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	ATF_CHECK(resident_at(&f, g, PINNED));
	check_closed_after_failure(s);
	rsd_scope_free(s);
	fx_fini(&f);
}

/*
 * W10 / §19.50: a hold taken in the body makes exit[1] fail; exit is not
 * re-preflighted, exit[2] is skipped, the reservation is released anyway.
 */
ATF_TC_WITHOUT_HEAD(exit_failure);
ATF_TC_BODY(exit_failure, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 3, "w" } };
	struct rsd_action enter[2], ex[3];
	struct rsd_plan p = { .name = "w10", .enter = enter, .nenter = 2, .reservations = rs,
			      .nreservations = 1, .exit = ex, .nexit = 3 };
	struct rsd_plan_report *partial, *r = NULL;
	const struct rsd_error *err;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, k;
	struct rsd_hold *hd;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	g = sourced(&f, PAGEABLE);
	k = sourced(&f, PAGEABLE);
	ATF_REQUIRE_EQ(version(&f), 3);
	enter[0] = rsd_action_ensure(g, PAGEABLE);
	enter[1] = rsd_action_ensure(k, PAGEABLE);
	ex[0] = rsd_action_drop(g, PAGEABLE);
	ex[1] = rsd_action_drop(k, PAGEABLE);
	ex[2] = rsd_action_ensure(g, PINNED); /* would load g and record pinned-host */
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), 0);
	ATF_CHECK_EQ(version(&f), 6);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 3);
	ATF_REQUIRE_EQ(rsd_hold(f.m, &k, 1, PAGEABLE, &hd), 0);
	ATF_CHECK_EQ(version(&f), 7);

	clear_partial();
	ATF_REQUIRE_EQ(rsd_scope_close(s, &r), -RSD_EEXEC);
	ATF_CHECK(r == NULL);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->phase, RSD_PHASE_EXIT);
	ATF_CHECK_EQ(err->failed_action_index, 1);
	ATF_CHECK_EQ(err->failed_reservation_index, -1);
	ATF_CHECK_EQ(err->cause, -RSD_EINUSE);
	ATF_CHECK_STREQ(err->plan_name, "w10");
	ATF_CHECK_EQ(rsd_scope_exit_error(s), -RSD_EEXEC);
	ATF_CHECK(rsd_scope_report(s) == NULL);
	partial = rsd_take_partial_report();
	ATF_REQUIRE(partial != NULL);
	ATF_CHECK_STREQ(partial->plan_name, "w10");
	ATF_REQUIRE_EQ(partial->ntransitions, 3);
	check_transition(&partial->transitions[0], &enter[0], false, &PAGEABLE, &PAGEABLE, N);
	check_transition(&partial->transitions[1], &enter[1], false, &PAGEABLE, &PAGEABLE, N);
	check_transition(&partial->transitions[2], &ex[0], false, &PAGEABLE, NULL, N);
	rsd_plan_report_free(partial);

	/* +1 drop of g, +1 reservation release; exit[2] never ran. */
	ATF_CHECK_EQ(version(&f), 9);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(nreservations(&f), 0);
	ATF_CHECK_EQ(nmat(&f, g), 0);
	ATF_CHECK(resident_at(&f, k, PAGEABLE));
	ATF_CHECK_EQ(f.loads, 2);
	{
		struct rsd_location l[4];

		/* pinned-host never recorded */
		ATF_CHECK_EQ(rsd_manager_locations(f.m, l, 4), 1);
	}

	ATF_CHECK_EQ(rsd_scope_close(s, &r), 0);
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(rsd_scope_exit_error(s), -RSD_EEXEC);
	ATF_CHECK_EQ(version(&f), 9);
	rsd_scope_free(s);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	rsd_hold_free(hd);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

/* §19.59: the manager was force-closed while the scope was open. */
ATF_TC_WITHOUT_HEAD(close_after_forced_manager_close);
ATF_TC_BODY(close_after_forced_manager_close, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 17, "r" } };
	struct rsd_action ex[1];
	struct rsd_plan p = { .name = "forced", .reservations = rs, .nreservations = 1, .exit = ex,
			      .nexit = 1 };
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *s = NULL, *s2 = NULL;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	ex[0] = rsd_action_drop(sourced(&f, PAGEABLE), PAGEABLE);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), 0);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s2), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 34);
	/* Without force the reservations block close. */
	ATF_CHECK_EQ(rsd_manager_close(f.m, 0), -RSD_EINUSE);
	ATF_REQUIRE_EQ(rsd_manager_close(f.m, RSD_CLOSE_FORCE), 0);

	clear_partial();
	ATF_CHECK_EQ(rsd_scope_close(s, &r), -RSD_ECLOSED);
	ATF_CHECK(r == NULL);
	ATF_CHECK_EQ(rsd_scope_exit_error(s), 0);
	ATF_CHECK(rsd_scope_report(s) == NULL);
	ATF_CHECK(rsd_take_partial_report() == NULL);
	ATF_CHECK_EQ(rsd_scope_close(s, &r), 0);
	ATF_CHECK(r == NULL);
	rsd_scope_free(s);

	/* The other scope outlives its manager: freeing it is still safe. */
	rsd_manager_destroy(f.m);
	f.m = NULL;
	ATF_CHECK_EQ(rsd_scope_close(s2, &r), -RSD_ECLOSED);
	ATF_CHECK_EQ(rsd_scope_close(s2, &r), 0);
	rsd_scope_free(s2);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

/* §19.61: each scope admits and releases only its own reservations. */
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
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	sourced(&f, PAGEABLE);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &outer, NULL, 0, NULL, &so), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 17);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &inner, NULL, 0, NULL, &si), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 28);
	ATF_REQUIRE_EQ(rsd_snapshot_take(f.m, &snap), 0);
	ATF_REQUIRE_EQ(snap->nreservations, 2);
	ATF_CHECK_STREQ(snap->reservations[0].label, "outer");
	ATF_CHECK_STREQ(snap->reservations[1].label, "inner");
	rsd_snapshot_free(snap);
	ATF_REQUIRE_EQ(rsd_scope_close(si, &r), 0);
	ATF_CHECK_STREQ(r->plan_name, "inner");
	ATF_CHECK_EQ(r->ntransitions, 0);
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 17);
	ATF_REQUIRE_EQ(rsd_snapshot_take(f.m, &snap), 0);
	ATF_REQUIRE_EQ(snap->nreservations, 1);
	ATF_CHECK_STREQ(snap->reservations[0].label, "outer");
	rsd_snapshot_free(snap);
	ATF_REQUIRE_EQ(rsd_scope_close(so, NULL), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	ATF_CHECK_STREQ(rsd_scope_report(so)->plan_name, "outer");
	rsd_scope_free(si);
	rsd_scope_free(so);

	/* Closed out of order, each still releases only its own. */
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &outer, NULL, 0, NULL, &so), 0);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &inner, NULL, 0, NULL, &si), 0);
	ATF_REQUIRE_EQ(rsd_scope_close(so, NULL), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 11);
	ATF_REQUIRE_EQ(rsd_scope_close(si, NULL), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	rsd_scope_free(si);
	rsd_scope_free(so);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

/* §12.2 / §19.60 in scope entry: host key → EINVAL, non-stream → ETYPE. */
ATF_TC_WITHOUT_HEAD(transfer_streams);
ATF_TC_BODY(transfer_streams, tc)
{
	struct rsd_location c0 = cuda(0);
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 5, "r" } };
	struct rsd_action enter[1], ex[1];
	struct rsd_plan p = { .name = "ts", .enter = enter, .nenter = 1, .reservations = rs,
			      .nreservations = 1, .exit = ex, .nexit = 1 };
	struct rsd_transfer_stream ts[1];
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *s = NULL;
	struct rsd_handle h;
	int not_a_stream;
	void *st;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &st), 0);
	h = sourced(&f, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_ensure(f.m, h, PINNED, NULL, NULL), 0);
	enter[0] = rsd_action_ensure(h, c0);
	ex[0] = rsd_action_move(h, c0, &PINNED);
	v = version(&f);

	ts[0].location = PINNED;
	ts[0].stream = st;
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, ts, 1, NULL, &s), -RSD_EINVAL);
	check_closed_after_failure(s);
	rsd_scope_free(s);
	s = NULL;
	ts[0].location = c0;
	ts[0].stream = &not_a_stream;
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, ts, 1, NULL, &s), -RSD_ETYPE);
	check_closed_after_failure(s);
	rsd_scope_free(s);
	s = NULL;
	/* The version check precedes the stream map. */
	v++;
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, ts, 1, &v, &s), -RSD_ESTALE);
	v--;
	rsd_scope_free(s);
	s = NULL;
	ATF_CHECK_EQ(version(&f), v);
	ATF_CHECK_EQ(nreservations(&f), 0);

	ts[0].stream = st;
	ATF_REQUIRE_EQ_MSG(rsd_scope_enter(f.m, &p, ts, 1, &v, &s), 0, "%s",
			   rsd_last_error()->message);
	/* The scope copied its plan and stream map: exit uses the copies. */
	ts[0].stream = &not_a_stream;
	ex[0] = rsd_action_drop(h, c0);
	p.name = "changed";
	ATF_REQUIRE_EQ_MSG(rsd_scope_close(s, &r), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_STREQ(r->plan_name, "ts");
	ex[0] = rsd_action_move(h, c0, &PINNED);
	ATF_REQUIRE_EQ(r->ntransitions, 2);
	check_transition(&r->transitions[0], &enter[0], false, &PINNED, &c0, N);
	/* Move onto a resident destination removes the explicit source. */
	check_transition(&r->transitions[1], &ex[0], false, &PINNED, &c0, N);
	rsd_plan_report_free(r);
	ATF_CHECK(resident_at(&f, h, c0));
	ATF_CHECK_EQ(nmat(&f, h), 1);
	rsd_scope_free(s);
	rsd_simdev_stream_destroy(f.sd, st);
	fx_fini(&f);
}

/*
 * librsd deviation from semantics.md §12.5 step 2 / §19.86: the reference
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
	struct rsd_plan p = { .name = "cb", .reservations = rs, .nreservations = 1, .exit = ex,
			      .nexit = 1 };
	struct rsd_plan_report *r = NULL;
	struct rsd_scope *s = NULL;
	struct rsd_handle g, x;
	struct src *gs;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	g = sourced_src(&f, PAGEABLE, N, 0, &gs);
	x = adopt_n(&f, PAGEABLE, RSD_REPLICABLE, N);
	ATF_REQUIRE_EQ(rsd_ensure(f.m, x, PINNED, NULL, NULL), 0);
	ex[0] = rsd_action_drop(x, PINNED);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 17);

	gs->scope = s;
	gs->close_rc = 1;
	ATF_REQUIRE_EQ_MSG(rsd_ensure(f.m, g, PAGEABLE, NULL, NULL), 0, "%s",
			   rsd_last_error()->message);
	gs->scope = NULL;
	ATF_CHECK_EQ(gs->close_rc, -RSD_EREENTRANT);
	/* Still open: reservation charged, exit not run. */
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 17);
	ATF_CHECK_EQ(nreservations(&f), 1);
	ATF_CHECK(resident_at(&f, x, PINNED));
	ATF_CHECK(rsd_scope_report(s) == NULL);
	ATF_CHECK_EQ(rsd_scope_exit_error(s), 0);

	v = version(&f);
	ATF_REQUIRE_EQ_MSG(rsd_scope_close(s, &r), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE_EQ(r->ntransitions, 1);
	check_transition(&r->transitions[0], &ex[0], false, &PINNED, NULL, N);
	rsd_plan_report_free(r);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(nreservations(&f), 0);
	ATF_CHECK(!resident_at(&f, x, PINNED));
	ATF_CHECK_EQ(version(&f), v + 2);
	rsd_scope_free(s);
	ATF_CHECK_EQ(f.nwarn, 0);
	fx_fini(&f);
}

/* §10.9: freeing an entered, unclosed scope releases its reservations, runs no exit. */
ATF_TC_WITHOUT_HEAD(free_open_scope);
ATF_TC_BODY(free_open_scope, tc)
{
	struct rsd_reservation_spec rs[] = { { RSD_LOC_PAGEABLE_HOST, 9, "a" },
					     { RSD_LOC_PINNED_HOST, 4, "b" } };
	struct rsd_action enter[1], ex[1];
	struct rsd_plan p = { .name = "abandoned", .enter = enter, .nenter = 1, .reservations = rs,
			      .nreservations = 2, .exit = ex, .nexit = 1 };
	struct rsd_scope *s = NULL;
	struct rsd_handle g;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	g = sourced(&f, PAGEABLE);
	enter[0] = rsd_action_ensure(g, PAGEABLE);
	ex[0] = rsd_action_drop(g, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), 0);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 9);
	ATF_CHECK_EQ(reserved(&f, PINNED), 4);
	v = version(&f);
	rsd_scope_free(s);
	ATF_CHECK_EQ(reserved(&f, PAGEABLE), 0);
	ATF_CHECK_EQ(reserved(&f, PINNED), 0);
	ATF_CHECK_EQ(nreservations(&f), 0);
	ATF_CHECK_EQ(version(&f), v + 2);
	ATF_CHECK(resident_at(&f, g, PAGEABLE));
	ATF_CHECK_EQ(f.nwarn, 1);
	ATF_CHECK_MSG(strstr(f.warn, "abandoned") != NULL, "warning: %s", f.warn);
	/* The manager closes without force: nothing is left. */
	ATF_CHECK_EQ(rsd_manager_close(f.m, 0), 0);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(entry_errors);
ATF_TC_BODY(entry_errors, tc)
{
	struct rsd_plan p = { .name = " " };
	struct rsd_scope *s = NULL;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), -RSD_EINVAL);
	ATF_CHECK(s == NULL);
	ATF_CHECK_EQ(rsd_scope_enter(f.m, NULL, NULL, 0, NULL, &s), -RSD_ETYPE);
	p.name = "ok";
	ATF_CHECK_EQ(rsd_scope_enter(NULL, &p, NULL, 0, NULL, &s), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, NULL, 1, NULL, &s), -RSD_ETYPE);
	ATF_CHECK(s == NULL);
	ATF_CHECK_EQ(rsd_scope_close(NULL, NULL), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_scope_exit_error(NULL), 0);
	ATF_CHECK(rsd_scope_report(NULL) == NULL);
	rsd_scope_free(NULL);

	ATF_REQUIRE_EQ(rsd_manager_close(f.m, 0), 0);
	ATF_CHECK_EQ(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s), -RSD_ECLOSED);
	if (s) {
		check_closed_after_failure(s);
		rsd_scope_free(s);
	}
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, fhe_stage);
	ATF_TP_ADD_TC(tp, stale_entry);
	ATF_TP_ADD_TC(tp, reap_makes_entry_stale);
	ATF_TP_ADD_TC(tp, preflight_covers_exit);
	ATF_TP_ADD_TC(tp, entry_failure_version_5);
	ATF_TP_ADD_TC(tp, entry_failure_w9);
	ATF_TP_ADD_TC(tp, reclaim_failure);
	ATF_TP_ADD_TC(tp, reservation_failure);
	ATF_TP_ADD_TC(tp, exit_failure);
	ATF_TP_ADD_TC(tp, close_after_forced_manager_close);
	ATF_TP_ADD_TC(tp, nested_scopes);
	ATF_TP_ADD_TC(tp, transfer_streams);
	ATF_TP_ADD_TC(tp, close_from_source_callback);
	ATF_TP_ADD_TC(tp, free_open_scope);
	ATF_TP_ADD_TC(tp, entry_errors);
	return atf_no_error();
}
