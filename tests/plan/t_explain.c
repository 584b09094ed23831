// SPDX-License-Identifier: MIT
/*
 * rsd_explain (semantics.md §12.3): the lock-free dry run. Exact reason
 * texts (data fields, including handle and location messages and Python
 * repr quoting), explanation fields, predicted peaks and their order, the
 * expected-version check, and the promise that explain changes nothing.
 * Values are 64 bytes (N) unless a test says otherwise.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include <rsd/rsd.h>

#define N 64
#define PAGEABLE RSD_LOC_PAGEABLE_HOST
#define PINNED RSD_LOC_PINNED_HOST

#define REPR_PAGEABLE "ResidencyLocation(kind='pageable-host', device=device(type='cpu'))"
#define REPR_PINNED "ResidencyLocation(kind='pinned-host', device=device(type='cpu'))"
#define REPR_CUDA0 "ResidencyLocation(kind='cuda', device=device(type='cuda', index=0))"

struct fx {
	struct rsd_simdev *sd; /* NULL: a host-only manager */
	struct rsd_manager *m;
	unsigned loads;
};

struct src {
	struct fx *f;
	struct rsd_location at;
	uint64_t nbytes;
};

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct src *s = ctx;

	s->f->loads++;
	return rsd_resident_alloc(s->f->m, &rsd_resident_type, s->at, 1, &s->nbytes, NULL, 0, out);
}

static void src_release(void *ctx)
{
	free(ctx);
}

/* ndevices < 0: host-only manager; otherwise the simulated device. */
static void fx_init(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices)
{
	struct rsd_manager_config cfg;

	memset(f, 0, sizeof(*f));
	memset(&cfg, 0, sizeof(cfg));
	cfg.budgets = b;
	cfg.nbudgets = nb;
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

static struct rsd_handle adopt(struct fx *f, struct rsd_location at, enum rsd_replica_mode mode)
{
	struct rsd_resident *r;
	struct rsd_handle h;
	uint64_t n = N;

	ATF_REQUIRE_EQ_MSG(rsd_resident_alloc(f->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r), 0,
			   "%s", rsd_last_error()->message);
	ATF_REQUIRE_EQ_MSG(rsd_adopt(f->m, r, &at, mode, &h), 0, "%s", rsd_last_error()->message);
	return h;
}

static struct rsd_handle sourced(struct fx *f, struct rsd_location at)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct src *s = calloc(1, sizeof(*s));
	struct rsd_source source = { src_load, src_release, s };
	struct rsd_handle h;

	ATF_REQUIRE(s);
	s->f = f;
	s->at = at;
	s->nbytes = N;
	ATF_REQUIRE_EQ_MSG(rsd_register_source(f->m, &spec, &source, at, &h), 0, "%s",
			   rsd_last_error()->message);
	return h;
}

static void ensure(struct fx *f, struct rsd_handle h, struct rsd_location at)
{
	ATF_REQUIRE_EQ_MSG(rsd_ensure(f->m, h, at, NULL, NULL), 0, "%s", rsd_last_error()->message);
}

static uint64_t version(struct fx *f)
{
	uint64_t v = 0;

	ATF_REQUIRE_EQ(rsd_manager_state_version_get(f->m, &v), 0);
	return v;
}

static size_t nlocations(struct fx *f)
{
	struct rsd_location l[8];

	return rsd_manager_locations(f->m, l, 8);
}

static struct rsd_hold *hold1(struct fx *f, struct rsd_handle h, struct rsd_location at)
{
	struct rsd_hold *hd;

	ATF_REQUIRE_EQ_MSG(rsd_hold(f->m, &h, 1, at, &hd), 0, "%s", rsd_last_error()->message);
	return hd;
}

static struct rsd_location cuda(int n)
{
	struct rsd_location l;

	ATF_REQUIRE_EQ(rsd_cuda_location(n, &l), 0);
	return l;
}

static struct rsd_explanation *explain_enter(struct fx *f, const char *name,
					     const struct rsd_action *a, size_t n)
{
	struct rsd_plan p = { .name = name, .enter = a, .nenter = n };
	struct rsd_explanation *e = NULL;

	ATF_REQUIRE_EQ_MSG(rsd_explain(f->m, &p, NULL, &e), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE(e);
	return e;
}

static bool loc_is(struct rsd_location a, struct rsd_location b)
{
	return rsd_location_equal(a, b);
}

static void check_reason(const char *got, const char *want)
{
	ATF_REQUIRE_MSG(got != NULL, "reason absent, wanted \"%s\"", want);
	ATF_CHECK_STREQ(got, want);
}

/* One action explanation, field by field. src/dst NULL: absent. */
static void check_act(const struct rsd_action_explanation *x, bool executable, bool no_op,
		      const struct rsd_location *src, const struct rsd_location *dst, uint64_t nbytes,
		      const char *reason)
{
	ATF_CHECK_EQ(x->executable, executable);
	ATF_CHECK_EQ(x->no_op, no_op);
	ATF_CHECK_EQ(x->has_source, src != NULL);
	if (src && x->has_source)
		ATF_CHECK(loc_is(x->source, *src));
	ATF_CHECK_EQ(x->has_destination, dst != NULL);
	if (dst && x->has_destination)
		ATF_CHECK(loc_is(x->destination, *dst));
	ATF_CHECK_EQ(x->logical_nbytes, nbytes);
	ATF_CHECK_EQ(x->storage_nbytes, nbytes);
	if (reason)
		check_reason(x->reason, reason);
	else
		ATF_CHECK_MSG(x->reason == NULL, "unexpected reason \"%s\"", x->reason);
}

static void check_peak(const struct rsd_explanation *e, size_t i, struct rsd_location at,
		       uint64_t nbytes)
{
	char name[RSD_LOCATION_NAME_MAX];

	ATF_REQUIRE_MSG(i < e->npeaks, "only %zu predicted peaks", e->npeaks);
	ATF_CHECK_MSG(loc_is(e->predicted_peak_bytes[i].location, at), "peak %zu is at %s", i,
		      rsd_location_name(e->predicted_peak_bytes[i].location, name, sizeof(name)));
	ATF_CHECK_EQ_MSG(e->predicted_peak_bytes[i].nbytes, nbytes, "peak %zu: %llu, want %llu", i,
			 (unsigned long long)e->predicted_peak_bytes[i].nbytes,
			 (unsigned long long)nbytes);
}

/* ---- §19.83 and the quoting rule: reservation labels ---- */

static void label_reason(const char *label, const char *quoted)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 8192 } };
	struct rsd_reservation_spec r = { RSD_LOC_PINNED_HOST, 8193, label };
	struct rsd_plan p = { .name = "labels", .reservations = &r, .nreservations = 1 };
	struct rsd_explanation *e;
	char want[256];
	struct fx f;

	fx_init(&f, b, 1, -1);
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	snprintf(want, sizeof(want), "Reservation %s exceeds budget at pinned-host", quoted);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	ATF_CHECK_EQ(e->nactions, 0);
	/* The peak is updated before the budget test (§19.54). */
	ATF_REQUIRE_EQ(e->npeaks, 1);
	check_peak(e, 0, PINNED, 8193);
	rsd_explanation_free(e);
	fx_fini(&f);
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

/* Reservations are simulated after reclaim; peaks include their bytes (§19.53). */
ATF_TC_WITHOUT_HEAD(reservations_after_reclaim);
ATF_TC_BODY(reservations_after_reclaim, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 128 } };
	struct rsd_reservation_spec r[] = { { RSD_LOC_PINNED_HOST, 128, "ws" } };
	struct rsd_action reclaim[1], enter[1];
	struct rsd_plan p = { .name = "after-reclaim", .reclaim = reclaim, .nreclaim = 1,
			      .reservations = r, .nreservations = 1 };
	struct rsd_explanation *e;
	struct rsd_handle a;
	uint64_t v;
	struct fx f;

	fx_init(&f, b, 1, -1);
	a = adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ensure(&f, a, PINNED);
	v = version(&f);
	reclaim[0] = rsd_action_drop(a, PINNED);
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	ATF_CHECK(e->reason == NULL);
	ATF_CHECK_STREQ(e->plan_name, "after-reclaim");
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], true, false, &PINNED, NULL, N, NULL);
	ATF_REQUIRE_EQ(e->nreservations, 1);
	ATF_CHECK(loc_is(e->reservations[0].location, PINNED));
	ATF_CHECK_EQ(e->reservations[0].nbytes, 128);
	ATF_CHECK_STREQ(e->reservations[0].label, "ws");
	/* Registry order: pinned (budget map), then pageable (first used). */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	check_peak(e, 0, PINNED, 128);
	check_peak(e, 1, PAGEABLE, N);
	rsd_explanation_free(e);

	/* An enter action after the reservation no longer fits. */
	enter[0] = rsd_action_ensure(a, PINNED);
	p.enter = enter;
	p.nenter = 1;
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "Transition exceeds budget at pinned-host");
	ATF_REQUIRE_EQ(e->nactions, 2);
	check_act(&e->actions[1], false, false, &PAGEABLE, &PINNED, N,
		  "Transition exceeds budget at pinned-host");
	check_peak(e, 0, PINNED, 192);
	rsd_explanation_free(e);

	/* A failed admission stops before the enter actions: no entry for them. */
	r[0].nbytes = 129;
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "Reservation 'ws' exceeds budget at pinned-host");
	ATF_CHECK_EQ(e->nactions, 1);
	ATF_CHECK_EQ(e->nreservations, 1);
	check_peak(e, 0, PINNED, 129);
	rsd_explanation_free(e);

	/* A failing reclaim action: no admission simulated, yet every reservation listed. */
	reclaim[0] = rsd_action_drop(adopt(&f, PAGEABLE, RSD_EXCLUSIVE), PAGEABLE);
	v = version(&f);
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "cannot drop final MUST_PRESERVE materialization");
	ATF_CHECK_EQ(e->nactions, 1);
	ATF_CHECK_EQ(e->nreservations, 1);
	check_peak(e, 0, PINNED, N);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(version(&f), v);
	fx_fini(&f);
}

/* The plan is copied: the caller's arrays and labels may change afterwards. */
ATF_TC_WITHOUT_HEAD(explanation_owns_its_copy);
ATF_TC_BODY(explanation_owns_its_copy, tc)
{
	char label[] = "scratch";
	char name[] = "copied";
	struct rsd_reservation_spec r[] = { { RSD_LOC_PINNED_HOST, 10, label } };
	struct rsd_action a[1];
	struct rsd_plan p = { .name = name, .enter = a, .nenter = 1, .reservations = r,
			      .nreservations = 1 };
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	h = sourced(&f, PAGEABLE);
	a[0] = rsd_action_ensure(h, PAGEABLE);
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
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
	check_peak(e, 0, PAGEABLE, N);
	check_peak(e, 1, PINNED, 10);
	rsd_explanation_free(e);
	fx_fini(&f);
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
	struct fx f;

	fx_init(&f, b, 1, -1);
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK_MSG(!e->feasible, "2^64-1 + 1 bytes admitted under a 2^64-1 budget");
	if (!e->feasible)
		check_reason(e->reason, "Reservation 'one' exceeds budget at pageable-host");
	rsd_explanation_free(e);
	fx_fini(&f);
}

/* ---- handle resolution reasons ---- */

ATF_TC_WITHOUT_HEAD(foreign_handle);
ATF_TC_BODY(foreign_handle, tc)
{
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f, g;
	char want[160];

	fx_init(&f, NULL, 0, -1);
	fx_init(&g, NULL, 0, -1);
	h = adopt(&g, PAGEABLE, RSD_EXCLUSIVE);
	a[0] = rsd_action_ensure(h, PINNED);
	e = explain_enter(&f, "foreign", a, 1);
	snprintf(want, sizeof(want), "Handle belongs to manager '%llu', not '%llu'",
		 (unsigned long long)rsd_manager_id(g.m), (unsigned long long)rsd_manager_id(f.m));
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], false, false, NULL, NULL, 0, want);
	/* Nothing was touched: only the known locations (none) are listed. */
	ATF_CHECK_EQ(e->npeaks, 0);
	rsd_explanation_free(e);
	fx_fini(&g);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(unknown_and_discarded_handles);
ATF_TC_BODY(unknown_and_discarded_handles, tc)
{
	static const struct rsd_type other = { "other", &rsd_resident_type };
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle h, forged;
	char want[128];
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	h = adopt(&f, PAGEABLE, RSD_EXCLUSIVE);

	/* Right ids, different value type: unknown (§4.1). */
	forged = h;
	forged.type = &other;
	a[0] = rsd_action_drop(forged, PAGEABLE);
	e = explain_enter(&f, "forged", a, 1);
	check_reason(e->reason, "Residency handle is unknown");
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], false, false, NULL, NULL, 0, "Residency handle is unknown");
	rsd_explanation_free(e);

	forged = h;
	forged.id = h.id + 1000000;
	a[0] = rsd_action_ensure(forged, PAGEABLE);
	e = explain_enter(&f, "unknown", a, 1);
	check_reason(e->reason, "Residency handle is unknown");
	rsd_explanation_free(e);

	/* Discarded earlier in this simulation (§19.56). */
	a[0] = rsd_action_discard(h);
	a[1] = rsd_action_ensure(h, PAGEABLE);
	e = explain_enter(&f, "discard-then-ensure", a, 2);
	snprintf(want, sizeof(want), "Value '%llu' is discarded", (unsigned long long)h.id);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 2);
	check_act(&e->actions[0], true, false, NULL, NULL, N, NULL);
	check_act(&e->actions[1], false, false, NULL, NULL, 0, want);
	/* The simulated discard released pageable: peak stays at the current charge. */
	ATF_REQUIRE_EQ(e->npeaks, 1);
	check_peak(e, 0, PAGEABLE, N);
	rsd_explanation_free(e);

	/* Discarded in the real manager. */
	ATF_REQUIRE_EQ(rsd_discard(f.m, h, NULL), 0);
	a[0] = rsd_action_ensure(h, PAGEABLE);
	e = explain_enter(&f, "discarded", a, 1);
	snprintf(want, sizeof(want), "Residency value '%llu' has been discarded",
		 (unsigned long long)h.id);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], false, false, NULL, NULL, 0, want);
	rsd_explanation_free(e);
	fx_fini(&f);
}

/* ---- location reasons (§19.3) ---- */

ATF_TC_WITHOUT_HEAD(cuda_unavailable);
ATF_TC_BODY(cuda_unavailable, tc)
{
	static const char want[] = "CUDA residency locations require available CUDA";
	struct rsd_location c0 = cuda(0);
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f;
	uint64_t v;

	fx_init(&f, NULL, 0, -1);
	h = sourced(&f, PAGEABLE);
	v = version(&f);
	a[0] = rsd_action_ensure(h, c0);
	e = explain_enter(&f, "cuda", a, 1);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	/* Resolution passed, so the byte fields are the spec's. */
	check_act(&e->actions[0], false, false, NULL, &c0, N, want);
	ATF_CHECK_EQ(e->npeaks, 1);
	rsd_explanation_free(e);

	/* Drop: source is the drop location even when it is invalid. */
	a[0] = rsd_action_drop(h, c0);
	e = explain_enter(&f, "cuda-drop", a, 1);
	check_act(&e->actions[0], false, false, &c0, NULL, N, want);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(version(&f), v);
	ATF_CHECK_EQ(nlocations(&f), 1);
	ATF_CHECK_EQ(f.loads, 0);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(cuda_beyond_device_count);
ATF_TC_BODY(cuda_beyond_device_count, tc)
{
	static const char want[] = "Residency location cuda:1 is not available in this process";
	struct rsd_location c1 = cuda(1), c0 = cuda(0);
	struct rsd_reservation_spec r = { c1, 1, "ws" };
	struct rsd_plan p = { .name = "resv", .reservations = &r, .nreservations = 1 };
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f;
	uint64_t v;

	fx_init(&f, NULL, 0, 1);
	h = sourced(&f, PAGEABLE);
	v = version(&f);
	a[0] = rsd_action_ensure(h, c0);
	a[1] = rsd_action_ensure(h, c1);
	e = explain_enter(&f, "cuda1", a, 2);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 2);
	check_act(&e->actions[0], true, false, &PAGEABLE, &c0, N, NULL);
	check_act(&e->actions[1], false, false, NULL, &c1, N, want);
	/* cuda:1 could not be prepared, so it is no peak entry. */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	check_peak(e, 0, PAGEABLE, N);
	check_peak(e, 1, c0, N);
	rsd_explanation_free(e);

	/* A reservation at an unavailable device. */
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	rsd_explanation_free(e);

	/* Direct calls reject it without recording the location. */
	ATF_CHECK_EQ(rsd_ensure(f.m, h, c1, NULL, NULL), -RSD_EINVAL);
	ATF_CHECK_EQ(version(&f), v);
	ATF_CHECK_EQ(nlocations(&f), 1);
	ATF_CHECK_EQ(f.loads, 0);
	fx_fini(&f);
}

/* Move with an invalid destination reports the registered source location (§19.55). */
ATF_TC_WITHOUT_HEAD(move_invalid_destination_source);
ATF_TC_BODY(move_invalid_destination_source, tc)
{
	static const char want[] = "Residency location cuda:3 is not available in this process";
	struct rsd_location c3 = cuda(3);
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h, x;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	h = sourced(&f, PAGEABLE);
	ensure(&f, h, PINNED);
	x = adopt(&f, PINNED, RSD_EXCLUSIVE);

	/* Explicit source pinned-host, yet the reported source is the registered one. */
	a[0] = rsd_action_move(h, c3, &PINNED);
	e = explain_enter(&f, "move-bad-to", a, 1);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], false, false, &PAGEABLE, &c3, N, want);
	rsd_explanation_free(e);

	/* A value without a source: absent. */
	a[0] = rsd_action_move(x, c3, &PINNED);
	e = explain_enter(&f, "move-bad-to-adopted", a, 1);
	check_act(&e->actions[0], false, false, NULL, &c3, N, want);
	rsd_explanation_free(e);

	/* An invalid explicit source: its validation message; source = F. */
	a[0] = rsd_action_move(x, PAGEABLE, &c3);
	e = explain_enter(&f, "move-bad-from", a, 1);
	check_act(&e->actions[0], false, false, &c3, &PAGEABLE, N, want);
	rsd_explanation_free(e);
	fx_fini(&f);
}

/* ---- per-action reasons ---- */

ATF_TC_WITHOUT_HEAD(ensure_reasons);
ATF_TC_BODY(ensure_reasons, tc)
{
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle x;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	x = adopt(&f, PAGEABLE, RSD_EXCLUSIVE);

	/* EXCLUSIVE at its current location: a no-op (§19.26). */
	a[0] = rsd_action_ensure(x, PAGEABLE);
	a[1] = rsd_action_ensure(x, PINNED);
	e = explain_enter(&f, "exclusive", a, 2);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "EnsureResident would replicate an EXCLUSIVE value");
	ATF_REQUIRE_EQ(e->nactions, 2);
	check_act(&e->actions[0], true, true, NULL, &PAGEABLE, N, "destination already resident");
	check_act(&e->actions[1], false, false, NULL, &PINNED, N,
		  "EnsureResident would replicate an EXCLUSIVE value");
	rsd_explanation_free(e);
	fx_fini(&f);
}

/* W3: a load at the source location shares one charge (§19.19). */
ATF_TC_WITHOUT_HEAD(load_at_source_one_charge);
ATF_TC_BODY(load_at_source_one_charge, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, N } };
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f;

	fx_init(&f, b, 1, -1);
	h = sourced(&f, PAGEABLE);
	ATF_CHECK_EQ(version(&f), 1);
	a[0] = rsd_action_ensure(h, PAGEABLE);
	e = explain_enter(&f, "w3", a, 1);
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], true, false, &PAGEABLE, &PAGEABLE, N, NULL);
	ATF_REQUIRE_EQ(e->npeaks, 1);
	check_peak(e, 0, PAGEABLE, N);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(f.loads, 0);
	ATF_CHECK_EQ(version(&f), 1);
	fx_fini(&f);
}

/* W4: infeasible, predicted peak above the budget, explanation prefix (§19.54). */
ATF_TC_WITHOUT_HEAD(peak_above_budget);
ATF_TC_BODY(peak_above_budget, tc)
{
	static const char want[] = "Transition exceeds budget at pageable-host";
	struct rsd_budget b[] = { { RSD_LOC_PAGEABLE_HOST, 64 }, { RSD_LOC_PINNED_HOST, 256 } };
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_handle h;
	uint64_t v;
	struct fx f;

	fx_init(&f, b, 2, -1);
	adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	h = sourced(&f, PAGEABLE);
	v = version(&f);
	a[0] = rsd_action_ensure(h, PINNED);
	a[1] = rsd_action_drop(h, PAGEABLE);
	e = explain_enter(&f, "w4", a, 2);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, want);
	ATF_REQUIRE_EQ(e->nactions, 1);
	check_act(&e->actions[0], false, false, &PAGEABLE, &PINNED, N, want);
	ATF_REQUIRE_EQ(e->npeaks, 2);
	check_peak(e, 0, PAGEABLE, 128);
	check_peak(e, 1, PINNED, 0);
	rsd_explanation_free(e);
	ATF_CHECK_EQ(version(&f), v);
	ATF_CHECK_EQ(f.loads, 0);
	fx_fini(&f);
}

/* W5 and §19.57: first-touch order; a no-op drop at a never-used location. */
ATF_TC_WITHOUT_HEAD(peak_order_first_touch);
ATF_TC_BODY(peak_order_first_touch, tc)
{
	struct rsd_location c0 = cuda(0), got[4];
	struct rsd_action a[3];
	struct rsd_explanation *e;
	struct rsd_handle h;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	h = adopt(&f, PAGEABLE, RSD_REPLICABLE);
	v = version(&f);
	ATF_CHECK_EQ(v, 2);

	a[0] = rsd_action_drop(h, PINNED);
	e = explain_enter(&f, "noop-drop", a, 1);
	ATF_CHECK(e->feasible);
	ATF_CHECK(e->reason == NULL);
	check_act(&e->actions[0], true, true, &PINNED, NULL, N, "materialization already absent");
	ATF_REQUIRE_EQ(e->npeaks, 2);
	check_peak(e, 0, PAGEABLE, N);
	check_peak(e, 1, PINNED, 0);
	rsd_explanation_free(e);

	/* cuda:0 touched first, then pinned: peaks follow first touch, not canonical order. */
	a[0] = rsd_action_drop(h, c0);
	a[1] = rsd_action_drop(h, PINNED);
	a[2] = rsd_action_ensure(h, PINNED);
	e = explain_enter(&f, "w5", a, 3);
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->nactions, 3);
	check_act(&e->actions[0], true, true, &c0, NULL, N, "materialization already absent");
	check_act(&e->actions[1], true, true, &PINNED, NULL, N, "materialization already absent");
	check_act(&e->actions[2], true, false, &PAGEABLE, &PINNED, N, NULL);
	ATF_REQUIRE_EQ(e->npeaks, 3);
	check_peak(e, 0, PAGEABLE, N);
	check_peak(e, 1, c0, 0);
	check_peak(e, 2, PINNED, N);
	rsd_explanation_free(e);

	/* Nothing recorded, nothing changed (§19.45). */
	ATF_CHECK_EQ(version(&f), v);
	ATF_REQUIRE_EQ(rsd_manager_locations(f.m, got, 4), 1);
	ATF_CHECK(loc_is(got[0], PAGEABLE));
	fx_fini(&f);
}

/* Peaks start at the current charge (used + reserved), not the historical peak. */
ATF_TC_WITHOUT_HEAD(peak_starts_at_current_charge);
ATF_TC_BODY(peak_starts_at_current_charge, tc)
{
	struct rsd_budget b[] = { { RSD_LOC_PINNED_HOST, 70 } };
	struct rsd_reservation_spec r[] = { { RSD_LOC_PINNED_HOST, 6, "x" } };
	struct rsd_plan p = { .name = "current" };
	struct rsd_reservation *standalone;
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f;

	fx_init(&f, b, 1, -1);
	h = adopt(&f, PAGEABLE, RSD_REPLICABLE);
	ensure(&f, h, PINNED);
	ATF_REQUIRE_EQ(rsd_drop(f.m, h, PINNED, NULL), 0);
	ATF_REQUIRE_EQ(rsd_reserve(f.m, PINNED, 5, "standalone", &standalone), 0);
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->npeaks, 2);
	check_peak(e, 0, PINNED, 5);
	check_peak(e, 1, PAGEABLE, N);
	rsd_explanation_free(e);

	/* Standalone reservations count against the budget in the simulation. */
	p.reservations = r;
	p.nreservations = 1;
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(e->feasible);
	check_peak(e, 0, PINNED, 11);
	rsd_explanation_free(e);
	r[0].nbytes = 66;
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "Reservation 'x' exceeds budget at pinned-host");
	check_peak(e, 0, PINNED, 71);
	rsd_explanation_free(e);
	ATF_REQUIRE_EQ(rsd_reservation_release(standalone), 0);
	rsd_reservation_free(standalone);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(move_reasons);
ATF_TC_BODY(move_reasons, tc)
{
	struct rsd_action a[2];
	struct rsd_explanation *e;
	struct rsd_hold *hd;
	struct rsd_handle h, u;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	h = sourced(&f, PAGEABLE);
	ensure(&f, h, PAGEABLE);
	ensure(&f, h, PINNED);

	/* Implicit source: the best other replica; it is removed. */
	a[0] = rsd_action_move(h, PINNED, NULL);
	a[1] = rsd_action_drop(h, PAGEABLE);
	e = explain_enter(&f, "move-onto", a, 2);
	ATF_CHECK(e->feasible);
	ATF_REQUIRE_EQ(e->nactions, 2);
	check_act(&e->actions[0], true, false, &PAGEABLE, &PINNED, N, NULL);
	/* The move removed pageable in the simulation: the drop is a no-op. */
	check_act(&e->actions[1], true, true, &PAGEABLE, NULL, N, "materialization already absent");
	rsd_explanation_free(e);

	/* Explicit source == destination: a no-op whose source is the destination. */
	a[0] = rsd_action_move(h, PINNED, &PINNED);
	e = explain_enter(&f, "move-self", a, 1);
	check_act(&e->actions[0], true, true, &PINNED, &PINNED, N,
		  "destination already owns the selected replica");
	rsd_explanation_free(e);

	/* Protected implicit source onto a resident destination (§19.24). */
	hd = hold1(&f, h, PAGEABLE);
	a[0] = rsd_action_move(h, PINNED, NULL);
	e = explain_enter(&f, "move-held", a, 1);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "source pageable-host is protected");
	check_act(&e->actions[0], false, false, &PAGEABLE, &PINNED, N,
		  "source pageable-host is protected");
	rsd_explanation_free(e);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	rsd_hold_free(hd);

	/* Only replica moved: no-op with the source absent. */
	ATF_REQUIRE_EQ(rsd_drop(f.m, h, PAGEABLE, NULL), 0);
	a[0] = rsd_action_move(h, PINNED, NULL);
	e = explain_enter(&f, "move-noop", a, 1);
	check_act(&e->actions[0], true, true, NULL, &PINNED, N,
		  "destination already owns the selected replica");
	rsd_explanation_free(e);

	/* Explicit source not resident, even though the destination is (§19.23). */
	a[0] = rsd_action_move(h, PINNED, &PAGEABLE);
	e = explain_enter(&f, "move-from-absent", a, 1);
	ATF_CHECK(!e->feasible);
	check_reason(e->reason, "explicit source pageable-host is not resident");
	check_act(&e->actions[0], false, false, &PAGEABLE, &PINNED, N,
		  "explicit source pageable-host is not resident");
	rsd_explanation_free(e);

	/* Held source with the destination not resident. */
	hd = hold1(&f, h, PINNED);
	a[0] = rsd_action_move(h, PAGEABLE, NULL);
	e = explain_enter(&f, "move-held-src", a, 1);
	check_reason(e->reason, "source pinned-host is protected");
	check_act(&e->actions[0], false, false, &PINNED, &PAGEABLE, N,
		  "source pinned-host is protected");
	rsd_explanation_free(e);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	rsd_hold_free(hd);

	/* Unloaded sourced value: the registered source location, loaded temporarily. */
	u = sourced(&f, PAGEABLE);
	a[0] = rsd_action_move(u, PINNED, NULL);
	e = explain_enter(&f, "move-unloaded", a, 1);
	ATF_CHECK(e->feasible);
	check_act(&e->actions[0], true, false, &PAGEABLE, &PINNED, N, NULL);
	/* pageable: current 0, temporary 64; pinned: current 64 + 64. */
	ATF_REQUIRE_EQ(e->npeaks, 2);
	check_peak(e, 0, PAGEABLE, N);
	check_peak(e, 1, PINNED, 2 * N);
	rsd_explanation_free(e);

	/* Explicit source of an unloaded value: not resident (§19.22). */
	a[0] = rsd_action_move(u, PINNED, &PAGEABLE);
	e = explain_enter(&f, "move-unloaded-from", a, 1);
	check_reason(e->reason, "explicit source pageable-host is not resident");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(f.loads, 1);
	fx_fini(&f);
}

/* W7: protection before the last-copy rule. */
ATF_TC_WITHOUT_HEAD(drop_reasons);
ATF_TC_BODY(drop_reasons, tc)
{
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_hold *hd;
	struct rsd_handle x;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	x = adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	hd = hold1(&f, x, PAGEABLE);
	a[0] = rsd_action_drop(x, PAGEABLE);
	e = explain_enter(&f, "w7", a, 1);
	check_reason(e->reason, "materialization at pageable-host is protected");
	check_act(&e->actions[0], false, false, &PAGEABLE, NULL, N,
		  "materialization at pageable-host is protected");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(rsd_drop(f.m, x, PAGEABLE, NULL), -RSD_EINUSE);
	ATF_REQUIRE_EQ(rsd_hold_release(hd), 0);
	rsd_hold_free(hd);

	e = explain_enter(&f, "w7", a, 1);
	check_reason(e->reason, "cannot drop final MUST_PRESERVE materialization");
	check_act(&e->actions[0], false, false, &PAGEABLE, NULL, N,
		  "cannot drop final MUST_PRESERVE materialization");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(rsd_drop(f.m, x, PAGEABLE, NULL), -RSD_EOWNERSHIP);
	fx_fini(&f);
}

/* §19.82: protected locations listed in canonical order, whatever the insertion order. */
ATF_TC_WITHOUT_HEAD(discard_protected_list);
ATF_TC_BODY(discard_protected_list, tc)
{
	struct rsd_location c0 = cuda(0);
	struct rsd_hold *h1, *h2, *h3;
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_handle h;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	h = adopt(&f, c0, RSD_REPLICABLE);
	ensure(&f, h, PINNED);
	ensure(&f, h, PAGEABLE);
	h1 = hold1(&f, h, PINNED);
	a[0] = rsd_action_discard(h);

	e = explain_enter(&f, "discard-one", a, 1);
	check_reason(e->reason, "discarded value has protected locations [" REPR_PINNED "]");
	check_act(&e->actions[0], false, false, NULL, NULL, N,
		  "discarded value has protected locations [" REPR_PINNED "]");
	rsd_explanation_free(e);

	h2 = hold1(&f, h, c0);
	h3 = hold1(&f, h, PAGEABLE);
	e = explain_enter(&f, "discard-three", a, 1);
	check_reason(e->reason, "discarded value has protected locations [" REPR_PAGEABLE ", "
				REPR_PINNED ", " REPR_CUDA0 "]");
	rsd_explanation_free(e);

	/* Two locations (§19.82). */
	ATF_REQUIRE_EQ(rsd_hold_release(h1), 0);
	e = explain_enter(&f, "discard-two", a, 1);
	check_reason(e->reason,
		     "discarded value has protected locations [" REPR_PAGEABLE ", " REPR_CUDA0 "]");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(rsd_discard(f.m, h, NULL), -RSD_EINUSE);

	ATF_REQUIRE_EQ(rsd_hold_release(h2), 0);
	ATF_REQUIRE_EQ(rsd_hold_release(h3), 0);
	e = explain_enter(&f, "discard-free", a, 1);
	ATF_CHECK(e->feasible);
	check_act(&e->actions[0], true, false, NULL, NULL, N, NULL);
	rsd_explanation_free(e);
	rsd_hold_free(h1);
	rsd_hold_free(h2);
	rsd_hold_free(h3);
	fx_fini(&f);
}

/* A pending lease protects until its events complete; explain never reaps. */
ATF_TC_WITHOUT_HEAD(pending_lease_protection);
ATF_TC_BODY(pending_lease_protection, tc)
{
	struct rsd_location c0 = cuda(0);
	struct rsd_action a[1];
	struct rsd_explanation *e;
	struct rsd_lease *l;
	struct rsd_handle h;
	void *s1;
	uint64_t v;
	struct fx f;

	fx_init(&f, NULL, 0, 1);
	rsd_simdev_set_auto_complete(f.sd, false);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &s1), 0);
	h = sourced(&f, PAGEABLE);
	ensure(&f, h, c0);
	ATF_REQUIRE_EQ(rsd_acquire(f.m, &h, 1, c0, s1, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_release(l, 0), 0);
	v = version(&f);
	a[0] = rsd_action_drop(h, c0);
	e = explain_enter(&f, "pending", a, 1);
	check_reason(e->reason, "materialization at cuda:0 is protected");
	rsd_explanation_free(e);

	rsd_simdev_stream_complete(f.sd, s1);
	{
		struct rsd_plan p = { .name = "pending", .enter = a, .nenter = 1 };

		ATF_REQUIRE_EQ(rsd_explain(f.m, &p, &v, &e), 0);
	}
	ATF_CHECK_MSG(e->feasible, "reason: %s", e->reason ? e->reason : "(none)");
	rsd_explanation_free(e);
	ATF_CHECK_EQ(version(&f), v);
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(f.sd, s1);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(stale_expected_version);
ATF_TC_BODY(stale_expected_version, tc)
{
	struct rsd_plan p = { .name = "stale" };
	struct rsd_explanation *e = NULL;
	const struct rsd_error *err;
	uint64_t v, want;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	sourced(&f, PAGEABLE);
	v = version(&f);
	want = v + 7;
	ATF_CHECK_EQ(rsd_explain(f.m, &p, &want, &e), -RSD_ESTALE);
	ATF_CHECK(e == NULL);
	err = rsd_last_error();
	ATF_CHECK_EQ(err->code, RSD_ESTALE);
	ATF_CHECK(err->has_versions);
	ATF_CHECK_EQ(err->expected_version, v + 7);
	ATF_CHECK_EQ(err->actual_version, v);
	ATF_CHECK(rsd_err_is_plan_error(-RSD_ESTALE));

	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, &v, &e), 0);
	ATF_CHECK(e->feasible);
	ATF_CHECK_STREQ(e->plan_name, "stale");
	ATF_CHECK_EQ(e->nactions, 0);
	ATF_CHECK_EQ(e->nreservations, 0);
	ATF_CHECK_EQ(e->npeaks, 1);
	rsd_explanation_free(e);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(argument_errors);
ATF_TC_BODY(argument_errors, tc)
{
	struct rsd_action a[1];
	struct rsd_plan p = { .name = "  \t" };
	struct rsd_explanation *e = NULL;
	struct rsd_reservation_spec r = { RSD_LOC_PAGEABLE_HOST, 1, " " };
	struct rsd_handle h;
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	h = adopt(&f, PAGEABLE, RSD_EXCLUSIVE);
	ATF_CHECK_EQ(rsd_explain(f.m, &p, NULL, &e), -RSD_EINVAL);
	p.name = NULL;
	ATF_CHECK_EQ(rsd_explain(f.m, &p, NULL, &e), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_explain(f.m, NULL, NULL, &e), -RSD_ETYPE);
	p.name = "ok";
	ATF_CHECK_EQ(rsd_explain(NULL, &p, NULL, &e), -RSD_ETYPE);
	p.reservations = &r;
	p.nreservations = 1;
	ATF_CHECK_EQ(rsd_explain(f.m, &p, NULL, &e), -RSD_EINVAL);
	p.nreservations = 0;
	a[0] = rsd_action_ensure(h, PAGEABLE);
	a[0].kind = (enum rsd_action_kind)42;
	p.enter = a;
	p.nenter = 1;
	ATF_CHECK_EQ(rsd_explain(f.m, &p, NULL, &e), -RSD_ETYPE);
	ATF_CHECK(e == NULL);

	/* A closed manager. */
	p.nenter = 0;
	ATF_REQUIRE_EQ(rsd_manager_close(f.m, 0), 0);
	ATF_CHECK_EQ(rsd_explain(f.m, &p, NULL, &e), -RSD_ECLOSED);
	fx_fini(&f);
}

/* ---- lock-free explain while a source load holds the writer path ---- */

struct blocker {
	struct fx *f;
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
	struct fx f;

	fx_init(&f, NULL, 0, -1);
	memset(&b, 0, sizeof(b));
	b.f = &f;
	pthread_mutex_init(&b.lock, NULL);
	pthread_cond_init(&b.cond, NULL);
	ATF_REQUIRE_EQ(rsd_register_source(f.m, &spec, &src, PAGEABLE, &b.h), 0);
	v = version(&f);
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
		check_act(&e->actions[0], true, false, &PAGEABLE, &PINNED, N, NULL);
		/* pageable: 0 used, temporary 64 (temp charges are never published). */
		check_peak(e, 0, PAGEABLE, N);
		rsd_explanation_free(e);
	}
	ATF_CHECK_EQ(rsd_manager_state_version(f.m), v);
	/* A writer call from this thread is refused meanwhile. */
	ATF_CHECK_EQ(rsd_drop(f.m, b.h, PINNED, NULL), -RSD_EREENTRANT);

	pthread_mutex_lock(&b.lock);
	b.go = true;
	pthread_cond_broadcast(&b.cond);
	pthread_mutex_unlock(&b.lock);
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	ATF_REQUIRE_EQ_MSG(b.rc, 0, "ensure in the loader thread failed: %d", b.rc);

	e = NULL;
	ATF_REQUIRE_EQ(rsd_explain(f.m, &p, NULL, &e), 0);
	check_act(&e->actions[0], true, true, NULL, &PINNED, N, "destination already resident");
	rsd_explanation_free(e);
	fx_fini(&f);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.lock);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, reservation_label_quoting);
	ATF_TP_ADD_TC(tp, reservations_after_reclaim);
	ATF_TP_ADD_TC(tp, reservation_sum_exact);
	ATF_TP_ADD_TC(tp, explanation_owns_its_copy);
	ATF_TP_ADD_TC(tp, foreign_handle);
	ATF_TP_ADD_TC(tp, unknown_and_discarded_handles);
	ATF_TP_ADD_TC(tp, cuda_unavailable);
	ATF_TP_ADD_TC(tp, cuda_beyond_device_count);
	ATF_TP_ADD_TC(tp, move_invalid_destination_source);
	ATF_TP_ADD_TC(tp, ensure_reasons);
	ATF_TP_ADD_TC(tp, load_at_source_one_charge);
	ATF_TP_ADD_TC(tp, peak_above_budget);
	ATF_TP_ADD_TC(tp, peak_order_first_touch);
	ATF_TP_ADD_TC(tp, peak_starts_at_current_charge);
	ATF_TP_ADD_TC(tp, move_reasons);
	ATF_TP_ADD_TC(tp, drop_reasons);
	ATF_TP_ADD_TC(tp, discard_protected_list);
	ATF_TP_ADD_TC(tp, pending_lease_protection);
	ATF_TP_ADD_TC(tp, stale_expected_version);
	ATF_TP_ADD_TC(tp, argument_errors);
	ATF_TP_ADD_TC(tp, lock_free_during_load);
	return atf_no_error();
}
