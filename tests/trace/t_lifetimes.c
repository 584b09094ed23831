// SPDX-License-Identifier: MIT
/*
 * A real librsd workload on the simulated device, for t_trace.sh to record:
 * the events that t_workload never fires. In order:
 *
 *   three adopts (one at cuda:0);
 *   a cuda:0 lease with a consumer stream, released without waiting while
 *     the stream is busy (pending), then reaped once the stream completes;
 *   a host lease on a duplicated handle set, released with RSD_RELEASE_WAIT;
 *   a hold and a reservation, taken and released;
 *   rsd_execute_actions: a plan that succeeds (ensure + drop) and one whose
 *     second action fails in the device copy (EEXEC, a partial report);
 *   a scope with a reservation, entered and closed;
 *   two controller decisions, one granted, one refused;
 *   an output adopted into a reservation with a busy producer stream,
 *     filling until a reap sees the stream complete, the reservation
 *     released;
 *   four discards.
 *
 * Alone, "lifetimes" checks the results it gets. With RSD_T_TRACE_EXPECT set
 * it also writes every event except rsd:state and rsd:device_work that
 * those calls must have produced, in babeltrace2's text form, built from
 * the calls' results and reports (not from lib/trace.h). Lifetime ids are not visible through the
 * API, so the file says "<L1>", "<H1>", "<R1>" (the first lease, hold,
 * reservation id seen) for t_trace.sh to match against the recorded ids;
 * a reap's pending_ns (and an output's queued_ns) is written as "<=N", N
 * being the time the program measured around release (adoption) and reap.
 */
#include <atf-c.h>
#include "../check.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#include "../simwait.h"

#define CUDA0 ((struct rsd_location){ RSD_CUDA, 0 })

static FILE *expect;
static uint64_t mid;

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...)
{
	va_list ap;

	if (!expect)
		return;
	va_start(ap, fmt);
	vfprintf(expect, fmt, ap);
	va_end(ap);
}

static const char *lname(struct rsd_location l, char *buf)
{
	return rsd_location_name(l, buf, RSD_LOCATION_NAME_MAX);
}

/* ", NAME_kind = K, NAME_device = D, NAME = "loc"" ("none" when absent). */
static void put_loc(const char *field, bool has, struct rsd_location l)
{
	char b[RSD_LOCATION_NAME_MAX];

	put(", %s_kind = %d, %s_device = %d, %s = \"%s\"", field, has ? (int)l.kind : -1, field,
	    has ? l.device : -1, field, has ? lname(l, b) : "none");
}

static void e_adopt(struct rsd_handle h, struct rsd_location at, uint64_t nbytes)
{
	put("rsd:adopt: { manager_id = %" PRIu64 ", handle_id = %" PRIu64, mid, h.id);
	put_loc("at", true, at);
	put(", charged_nbytes = %" PRIu64 " }\n", nbytes);
}

static void e_transition(const struct rsd_transition *t)
{
	put("rsd:transition: { manager_id = %" PRIu64 ", handle_id = %" PRIu64 ", action = \"%s\"",
	    mid, t->action.handle.id, rsd_action_kind_name(t->action.kind));
	put_loc("location", t->action.kind != RSD_ACT_DISCARD, t->action.location);
	put_loc("from", t->action.has_from, t->action.from);
	put_loc("source", t->has_source, t->source);
	put_loc("destination", t->has_destination, t->destination);
	put(", no_op = %d, reason = \"%s\", logical_nbytes = %" PRIu64 ", storage_nbytes = %" PRIu64
	    ", started_at_ns = %" PRIu64 ", completed_at_ns = %" PRIu64 ", duration_ns = %" PRIu64
	    ", has_allocator = %d, allocator_device = %d"
	    ", allocator_allocated_bytes_before = %" PRIu64
	    ", allocator_reserved_bytes_before = %" PRIu64
	    ", allocator_allocated_bytes_after = %" PRIu64
	    ", allocator_reserved_bytes_after = %" PRIu64 " }\n",
	    t->no_op, t->reason && *t->reason ? t->reason : "none", t->logical_nbytes,
	    t->storage_nbytes, t->started_at_ns, t->completed_at_ns,
	    t->completed_at_ns - t->started_at_ns, t->has_allocator,
	    t->has_allocator ? t->allocator_device : -1, t->allocator_allocated_bytes_before,
	    t->allocator_reserved_bytes_before, t->allocator_allocated_bytes_after,
	    t->allocator_reserved_bytes_after);
}

static void e_report(const struct rsd_plan_report *r, size_t from, size_t to)
{
	for (size_t i = from; i < to && i < r->ntransitions; i++)
		e_transition(&r->transitions[i]);
}

/* lease, hold and reservation events; id is "<L1>" and the like. */
static void e_life(const char *event, const char *idfield, const char *id, struct rsd_location at)
{
	put("rsd:%s: { manager_id = %" PRIu64 ", %s = %s", event, mid, idfield, id);
	put_loc("at", true, at);
}

static void e_plan_begin(const char *name, const char *kind)
{
	put("rsd:plan_begin: { manager_id = %" PRIu64 ", name = \"%s\", kind = \"%s\" }\n", mid,
	    name, kind);
}

static void e_plan_end(const char *name, const char *kind, enum rsd_plan_phase phase, int outcome,
		       size_t ntransitions)
{
	put("rsd:plan_end: { manager_id = %" PRIu64 ", name = \"%s\", kind = \"%s\", phase = \"%s\""
	    ", outcome = %d, ntransitions = %zu }\n",
	    mid, name, kind, rsd_phase_name(phase), outcome, ntransitions);
}

static void e_decision(const char *request, size_t nevictions, uint64_t explored, int outcome)
{
	put("rsd:decision: { manager_id = %" PRIu64 ", request = \"%s\", nevictions = %zu"
	    ", explored_states = %" PRIu64 ", outcome = %d }\n",
	    mid, request, nevictions, explored, outcome);
}

/* rsd:decision_blocked of the failure just recorded (rsd_last_blockers()). */
static void e_decision_blocked(const char *request, int outcome)
{
	const struct rsd_error *e = rsd_last_error();
	const struct rsd_blockers *b = rsd_last_blockers();
	char name[RSD_LOCATION_NAME_MAX], detail[1024];

	ATF_REQUIRE(b != NULL);
	rsd_blockers_describe(b, detail, sizeof(detail));
	put("rsd:decision_blocked: { manager_id = %" PRIu64 ", request = \"%s\", outcome = %d"
	    ", explored_states = %" PRIu64 ", at_kind = %d, at_device = %d, at = \"%s\""
	    ", requested = %" PRIu64 ", short_bytes = %" PRIu64 ", budget = %" PRIu64
	    ", used = %" PRIu64 ", reserved = %" PRIu64 ", freeable = %" PRIu64
	    ", blocked = %" PRIu64 ", leased = %" PRIu64 ", pending = %" PRIu64 ", held = %" PRIu64
	    ", arriving = %" PRIu64 ", nblocked = %" PRIu64 ", npending_leases = %" PRIu64
	    ", detail = \"%s\" }\n",
	    mid, request, outcome, e->explored_states, (int)b->location.kind, b->location.device,
	    rsd_location_name(b->location, name, sizeof(name)), b->requested_bytes, b->short_bytes,
	    b->budget_bytes, b->used_bytes, b->reserved_bytes, b->freeable_bytes, b->blocked_bytes,
	    b->lease_bytes, b->pending_bytes, b->hold_bytes, b->arriving_bytes, b->nblocked,
	    b->npending, detail);
}

static uint64_t unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct rsd_handle adopt(struct rsd_manager *m, struct rsd_location at, uint64_t n)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h));
	e_adopt(h, at, n);
	return h;
}

/* The cuda:0 lease: pending after release, reaped after the stream ends. */
static void gpu_lease(struct rsd_manager *m, struct rsd_simdev *sd, struct rsd_handle a)
{
	struct rsd_lease *l = NULL;
	uint64_t t0;
	void *s = NULL;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	RSD_REQUIRE_OK(rsd_acquire(m, &a, 1, CUDA0, s, &l));
	e_life("lease_acquire", "lease_id", "<L1>", CUDA0);
	put(", nhandles = 1 }\n");
	t0 = unix_ns();
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	ATF_CHECK(!rsd_lease_active(l));
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 1);
	e_life("lease_release", "lease_id", "<L1>", CUDA0);
	put(", nstreams = 1, wait = 0, pending = 1 }\n");
	/* Not complete yet: reaping finds nothing. */
	RSD_CHECK_OK(rsd_manager_reap(m));
	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 0);
	RSD_CHECK_OK(rsd_manager_reap(m));
	put("rsd:lease_reap: { manager_id = %" PRIu64 ", lease_id = <L1>, pending_ns = <=%" PRIu64
	    " }\n",
	    mid, unix_ns() - t0);
	rsd_lease_free(l);
	rsd_simdev_stream_destroy(sd, s);
}

/* A host lease, a hold and a reservation, each taken and released. */
static void host_lifetimes(struct rsd_manager *m, struct rsd_handle b, struct rsd_handle c)
{
	const struct rsd_handle set[3] = { b, c, b };
	struct rsd_reservation *r = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;

	RSD_REQUIRE_OK(rsd_acquire(m, set, 3, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	ATF_CHECK_EQ(rsd_lease_count(l), 2);
	e_life("lease_acquire", "lease_id", "<L2>", RSD_LOC_PAGEABLE_HOST);
	put(", nhandles = 2 }\n");
	RSD_REQUIRE_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	e_life("lease_release", "lease_id", "<L2>", RSD_LOC_PAGEABLE_HOST);
	put(", nstreams = 0, wait = 1, pending = 0 }\n");
	/* Released twice: the second is a no-op and fires nothing. */
	RSD_CHECK_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);

	RSD_REQUIRE_OK(rsd_hold(m, set + 1, 2, RSD_LOC_PAGEABLE_HOST, &hd));
	e_life("hold_acquire", "hold_id", "<H1>", RSD_LOC_PAGEABLE_HOST);
	put(", nhandles = 2 }\n");
	RSD_REQUIRE_OK(rsd_hold_release(hd));
	e_life("hold_release", "hold_id", "<H1>", RSD_LOC_PAGEABLE_HOST);
	put(", nhandles = 2 }\n");
	RSD_CHECK_OK(rsd_hold_release(hd));
	rsd_hold_free(hd);

	RSD_REQUIRE_OK(rsd_reserve(m, CUDA0, 65536, "workspace", &r));
	e_life("reservation_acquire", "reservation_id", "<R1>", CUDA0);
	put(", nbytes = 65536, label = \"workspace\" }\n");
	RSD_REQUIRE_OK(rsd_reservation_release(r));
	e_life("reservation_release", "reservation_id", "<R1>", CUDA0);
	put(", nbytes = 65536, label = \"workspace\" }\n");
	rsd_reservation_free(r);
}

/* execute_actions: one plan that completes, one that fails mid-way. */
static void plans(struct rsd_manager *m, struct rsd_simdev *sd, struct rsd_handle b,
		  struct rsd_handle c)
{
	const struct rsd_action ok[2] = { rsd_action_ensure(b, RSD_LOC_PINNED_HOST),
					  rsd_action_drop(b, RSD_LOC_PINNED_HOST) };
	const struct rsd_action bad[2] = { rsd_action_ensure(c, RSD_LOC_PINNED_HOST),
					   rsd_action_ensure(c, CUDA0) };
	struct rsd_plan_report *rep = NULL;
	int err;

	RSD_REQUIRE_OK(rsd_execute_actions(m, ok, 2, "step-1", NULL, 0, NULL, &rep));
	ATF_REQUIRE_EQ(rep->ntransitions, 2);
	e_plan_begin("step-1", "execute");
	e_report(rep, 0, 2);
	e_plan_end("step-1", "execute", RSD_PHASE_NONE, 0, 2);
	rsd_plan_report_free(rep);

	/* Every device copy fails: the pinned copy completes, cuda:0 does not. */
	rsd_simdev_fail_all(sd, RSD_SIMDEV_COPY, RSD_EDEVICE);
	rep = NULL;
	err = rsd_execute_actions(m, bad, 2, "step-2", NULL, 0, NULL, &rep);
	rsd_simdev_fail_all(sd, RSD_SIMDEV_COPY, 0);
	ATF_REQUIRE_EQ_MSG(err, -RSD_EEXEC, "step-2: %d (%s)", err, rsd_last_error()->message);
	ATF_CHECK_EQ(rsd_last_error()->phase, RSD_PHASE_EXECUTE);
	ATF_CHECK_EQ(rsd_last_error()->failed_action_index, 1);
	ATF_REQUIRE(rep != NULL);
	ATF_REQUIRE_EQ(rep->ntransitions, 1);
	e_plan_begin("step-2", "execute");
	e_report(rep, 0, 1);
	e_plan_end("step-2", "execute", RSD_PHASE_EXECUTE, err, 1);
	rsd_plan_report_free(rep);
	rsd_plan_report_free(rsd_take_partial_report());
}

/*
 * A scope entered right after step-2's failure (the thread's error record
 * still names the execute phase) and closed: reservation, enter, exit.
 */
static void scope(struct rsd_manager *m, struct rsd_handle c)
{
	const struct rsd_reservation_spec resv = { CUDA0, 4096, "scratch" };
	const struct rsd_action enter = rsd_action_ensure(c, CUDA0);
	const struct rsd_action leave = rsd_action_drop(c, CUDA0);
	const struct rsd_plan p = { .name = "scope-1",
				    .reservations = &resv,
				    .nreservations = 1,
				    .enter = &enter,
				    .nenter = 1,
				    .exit = &leave,
				    .nexit = 1 };
	struct rsd_plan_report *rep = NULL;
	struct rsd_scope *s = NULL;

	RSD_REQUIRE_OK(rsd_scope_enter(m, &p, NULL, 0, NULL, &s));
	RSD_REQUIRE_OK(rsd_scope_close(s, &rep));
	RSD_CHECK_OK(rsd_scope_exit_error(s));
	ATF_REQUIRE_EQ(rep->ntransitions, 2);
	e_plan_begin("scope-1", "scope-enter");
	e_life("reservation_acquire", "reservation_id", "<R2>", CUDA0);
	put(", nbytes = 4096, label = \"scratch\" }\n");
	e_report(rep, 0, 1);
	e_plan_end("scope-1", "scope-enter", RSD_PHASE_NONE, 0, 1);
	e_plan_begin("scope-1", "scope-exit");
	e_report(rep, 1, 2);
	e_life("reservation_release", "reservation_id", "<R2>", CUDA0);
	put(", nbytes = 4096, label = \"scratch\" }\n");
	e_plan_end("scope-1", "scope-exit", RSD_PHASE_NONE, 0, 2);
	rsd_plan_report_free(rep);
	rsd_scope_free(s);
}

/*
 * An output: a reservation at cuda:0, a value adopted into half of it
 * while its producer stream is busy (the value is filling until the stream
 * completes and a reap sees it: rsd:copy_complete), then the reservation
 * released with the half it still holds. Returns the output's handle.
 */
static struct rsd_handle output(struct rsd_manager *m, struct rsd_simdev *sd)
{
	struct rsd_reservation *r = NULL;
	struct rsd_resident *v = NULL;
	struct rsd_handle h;
	uint64_t n = 4096, t0;
	void *s = NULL;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	RSD_REQUIRE_OK(rsd_reserve(m, CUDA0, 2 * n, "result", &r));
	e_life("reservation_acquire", "reservation_id", "<R3>", CUDA0);
	put(", nbytes = 8192, label = \"result\" }\n");
	RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, CUDA0, 1, &n, NULL, 0, &v));
	t0 = unix_ns();
	RSD_REQUIRE_OK(rsd_adopt_reserved(r, v, RSD_EXCLUSIVE, s, &h));
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 1);
	put("rsd:adopt_reserved: { manager_id = %" PRIu64 ", handle_id = %" PRIu64, mid, h.id);
	put_loc("at", true, CUDA0);
	put(", charged_nbytes = 4096, reservation_id = <R3>, label = \"result\""
	    ", remaining_nbytes = 4096, filling = 1 }\n");
	rsd_simdev_stream_complete(sd, s);
	RSD_CHECK_OK(rsd_manager_reap(m));
	put("rsd:copy_complete: { manager_id = %" PRIu64 ", handle_id = %" PRIu64, mid, h.id);
	put_loc("at", true, CUDA0);
	put(", queued_ns = <=%" PRIu64 ", error = 0 }\n", unix_ns() - t0);
	RSD_REQUIRE_OK(rsd_reservation_release(r));
	e_life("reservation_release", "reservation_id", "<R3>", CUDA0);
	put(", nbytes = 4096, label = \"result\" }\n");
	rsd_reservation_free(r);
	rsd_simdev_stream_destroy(sd, s);
	return h;
}

/* Two decisions: b on cuda:0 is granted; 2 MiB of workspace is not. */
static void decisions(struct rsd_manager *m, struct rsd_handle b)
{
	const struct rsd_requirement want = { b, CUDA0 };
	const struct rsd_reservation_spec big = { CUDA0, 2u << 20, "too-big" };
	const struct rsd_request ok = { .name = "req-1",
					.requirements = &want,
					.nrequirements = 1 };
	const struct rsd_request no = { .name = "req-2",
					.requirements = &want,
					.nrequirements = 1,
					.reservations = &big,
					.nreservations = 1 };
	struct rsd_controller *ctl = NULL;
	struct rsd_decision *d = NULL;
	int err;

	RSD_REQUIRE_OK(rsd_controller_create(m, NULL, 0, &ctl));
	RSD_REQUIRE_OK(rsd_controller_decide(ctl, &ok, &d));
	ATF_CHECK(d->explored_states > 0);
	e_decision("req-1", d->nevictions, d->explored_states, 0);
	rsd_decision_free(d);
	d = NULL;

	err = rsd_controller_decide(ctl, &no, &d);
	ATF_CHECK_MSG(err < 0, "a 2 MiB reservation under a 1 MiB budget was granted");
	e_decision("req-2", 0, rsd_last_error()->explored_states, err);
	e_decision_blocked("req-2", err);
	rsd_controller_free(ctl);
}

ATF_TC_WITHOUT_HEAD(lifetimes);
ATF_TC_BODY(lifetimes, tc)
{
	const char *expect_path = getenv("RSD_T_TRACE_EXPECT");
	const struct rsd_budget budgets[] = { { CUDA0, 1u << 20 } };
	struct rsd_simdev_config sc = { .ndevices = 1, .auto_complete = false, .pooled = true };
	struct rsd_manager_config cfg = { .budgets = budgets, .nbudgets = 1 };
	struct rsd_simdev *sd = NULL;
	struct rsd_manager *m = NULL;
	struct rsd_handle a, b, c, hs[4];
	struct rsd_transition rep;
	struct simpump pump;

	if (expect_path)
		ATF_REQUIRE((expect = fopen(expect_path, "w")) != NULL);
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &sd));
	/* Transfers progress by themselves, as on a GPU; the consumer stream
	 * of the lease stays on command. */
	ATF_REQUIRE(simpump_start(&pump, sd, NULL, 0, true, false));
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = sd;
	cfg.label = "lifetimes";
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	mid = rsd_manager_id(m);
	put("rsd:manager_create: { manager_id = %" PRIu64 ", label = \"lifetimes\", nbudgets = 1"
	    ", ndevices = 1 }\n",
	    mid);

	a = adopt(m, CUDA0, 4096);
	b = adopt(m, RSD_LOC_PAGEABLE_HOST, 8192);
	c = adopt(m, RSD_LOC_PAGEABLE_HOST, 4096);

	gpu_lease(m, sd, a);
	host_lifetimes(m, b, c);
	plans(m, sd, b, c);
	scope(m, c);
	decisions(m, b);
	hs[3] = output(m, sd);

	hs[0] = a;
	hs[1] = b;
	hs[2] = c;
	for (int i = 0; i < 4; i++) {
		RSD_REQUIRE_OK(rsd_discard(m, hs[i], &rep));
		e_transition(&rep);
	}
	RSD_CHECK_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	simpump_stop(&pump);
	rsd_simdev_destroy(sd);
	if (expect)
		ATF_REQUIRE_EQ(fclose(expect), 0);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, lifetimes);
	return atf_no_error();
}
