// SPDX-License-Identifier: MIT
/*
 * errprobe: call public functions on error paths and print, one line each,
 * "FUNCTION CODE" with the code each call returned (RSD_E* name, or 0 when
 * it unexpectedly succeeded). t_doc's error_paths_listed checks every line
 * against the codes that function's Return: section lists (returns.txt,
 * written by tools/build/kdoc2man.py), so a page that omits a code a real error
 * path returns fails the suite. Each failing call's rsd_last_error()
 * message goes to stderr, one line each, for t_doc's
 * error_messages_name_c.
 */
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

static const char *code_name(int err)
{
	static const char *const names[RSD_EMAX] = {
		[RSD_EINVAL] = "RSD_EINVAL",
		[RSD_ETYPE] = "RSD_ETYPE",
		[RSD_EUSAGE] = "RSD_EUSAGE",
		[RSD_ENOTFOUND] = "RSD_ENOTFOUND",
		[RSD_EBUDGET] = "RSD_EBUDGET",
		[RSD_EHANDLE] = "RSD_EHANDLE",
		[RSD_EUNAVAILABLE] = "RSD_EUNAVAILABLE",
		[RSD_EINUSE] = "RSD_EINUSE",
		[RSD_ELIFETIME] = "RSD_ELIFETIME",
		[RSD_EMATERIAL] = "RSD_EMATERIAL",
		[RSD_EOWNERSHIP] = "RSD_EOWNERSHIP",
		[RSD_EPLAN] = "RSD_EPLAN",
		[RSD_ESTALE] = "RSD_ESTALE",
		[RSD_ESEARCHLIMIT] = "RSD_ESEARCHLIMIT",
		[RSD_EEXEC] = "RSD_EEXEC",
		[RSD_ECLOSED] = "RSD_ECLOSED",
		[RSD_EREENTRANT] = "RSD_EREENTRANT",
		[RSD_ENOMEM] = "RSD_ENOMEM",
		[RSD_EDEVICE] = "RSD_EDEVICE",
		[RSD_ESOURCE] = "RSD_ESOURCE",
		[RSD_EDEVLOST] = "RSD_EDEVLOST",
	};

	if (err == 0)
		return "0";
	if (err < 0 && -err < RSD_EMAX && names[-err])
		return names[-err];
	return "unknown";
}

static void probe(const char *fn, int err)
{
	printf("%s %s\n", fn, code_name(err));
	if (err)
		fprintf(stderr, "%s: %s\n", fn, rsd_last_error()->message);
}

#define PROBE(fn, call) probe(#fn, call)

static int load_fails(void *ctx, struct rsd_resident **out)
{
	(void)ctx;
	(void)out;
	return 7; /* not an RSD_E* code */
}

/*
 * The error paths that need a device: a lease on a value a not-waiting
 * copy is still filling orders each added stream after that copy, which
 * the device refuses here. Nonzero when the setup itself fails.
 */
static int probe_device(struct rsd_simdev *sd)
{
	struct rsd_manager_config cfg = { .driver = rsd_simdev_ops(), .driver_ctx = sd };
	struct rsd_location pin = RSD_LOC_PINNED_HOST, cuda0 = { RSD_CUDA, 0 };
	struct rsd_manager *m;
	struct rsd_resident *r;
	struct rsd_lease *l;
	struct rsd_handle h;
	void *s0, *s1;
	uint64_t n = 64;
	int err;

	if (rsd_manager_create(&cfg, &m))
		return 1;
	rsd_simdev_set_progress(sd, RSD_SIMDEV_ON_COMMAND, 0);
	err = rsd_simdev_stream_create(sd, 0, &s0) || rsd_simdev_stream_create(sd, 0, &s1) ||
	      rsd_resident_alloc(m, &rsd_resident_type, pin, 1, &n, NULL, 0, &r) ||
	      rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h) ||
	      rsd_ensure_async(m, h, cuda0, NULL, NULL) || rsd_acquire(m, &h, 1, cuda0, s0, &l);
	if (!err) {
		rsd_simdev_fail_nth(sd, RSD_SIMDEV_STREAM_WAIT, 1, RSD_EDEVICE);
		PROBE(rsd_lease_add_consumer_stream, rsd_lease_add_consumer_stream(l, s1));
		rsd_simdev_set_progress(sd, RSD_SIMDEV_IMMEDIATE, 0);
		err = rsd_lease_release(l, RSD_RELEASE_WAIT);
		rsd_lease_free(l);
	}
	rsd_simdev_set_progress(sd, RSD_SIMDEV_IMMEDIATE, 0);
	err = rsd_manager_close(m, 0) || err;
	rsd_manager_destroy(m);
	return err;
}

int main(void)
{
	struct rsd_budget budget = { { RSD_PINNED_HOST, -1 }, 64 };
	struct rsd_manager_config cfg = { .budgets = &budget, .nbudgets = 1, .host_only = true };
	struct rsd_location pin = RSD_LOC_PINNED_HOST, page = RSD_LOC_PAGEABLE_HOST;
	struct rsd_location bad_kind = { (enum rsd_location_kind)7, -1 }, loc;
	struct rsd_value_spec spec = { &rsd_resident_type, 8, 8, RSD_REPLICABLE,
				       RSD_MUST_PRESERVE };
	struct rsd_source src = { load_fails, NULL, NULL };
	struct rsd_manager *m, *closed;
	struct rsd_resident *r;
	struct rsd_handle h, g, foreign, sh;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_reservation *rv;
	struct rsd_explanation *ex;
	struct rsd_snapshot *snap;
	struct rsd_policy *pol;
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_simdev *sd;
	struct rsd_simdev_config sdc = { .ndevices = 500 };
	struct rsd_action act;
	struct rsd_fallback_tier tier;
	struct rsd_use *u;
	struct rsd_scope *s;
	struct rsd_buffer_view view = { NULL, 0, NULL, 0, { RSD_PAGEABLE_HOST, -1 } };
	void *stream;
	struct rsd_plan plan = { .name = "probe" };
	struct rsd_requirement req;
	struct rsd_request rq = { .name = " ", .requirements = &req, .nrequirements = 1 };
	uint64_t n = 8, big = 1024, v, wrong = 12345;

	if (rsd_manager_create(&cfg, &m) || rsd_manager_create(&cfg, &closed))
		return 2;
	cfg.budgets = NULL;
	PROBE(rsd_manager_create, rsd_manager_create(&cfg, &closed));
	PROBE(rsd_manager_create, rsd_manager_create(NULL, NULL));

	if (rsd_resident_alloc(m, &rsd_resident_type, page, 1, &n, NULL, 0, &r) ||
	    rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h))
		return 2;
	if (rsd_resident_alloc(closed, &rsd_resident_type, page, 1, &n, NULL, 0, &r) ||
	    rsd_adopt(closed, r, NULL, RSD_REPLICABLE, &foreign))
		return 2;
	if (rsd_resident_alloc(m, &rsd_resident_type, page, 1, &n, NULL, 0, &r) ||
	    rsd_adopt(m, r, NULL, RSD_EXCLUSIVE, &g))
		return 2;
	PROBE(rsd_adopt, rsd_adopt(m, NULL, NULL, RSD_EXCLUSIVE, &g));
	PROBE(rsd_resident_alloc,
	      rsd_resident_alloc(m, &rsd_resident_type, page, 0, &n, NULL, 0, &r));
	PROBE(rsd_resident_alloc, rsd_resident_alloc(m, NULL, page, 1, &n, NULL, 0, &r));

	PROBE(rsd_ensure, rsd_ensure(NULL, h, pin, NULL, NULL));
	PROBE(rsd_ensure, rsd_ensure(m, foreign, pin, NULL, NULL));
	PROBE(rsd_ensure, rsd_ensure(m, h, bad_kind, NULL, NULL));
	loc.kind = RSD_CUDA;
	loc.device = 200;
	PROBE(rsd_ensure, rsd_ensure(m, h, loc, NULL, NULL));
	loc.device = 0;
	PROBE(rsd_ensure, rsd_ensure(m, h, loc, NULL, NULL));
	PROBE(rsd_copy, rsd_copy(m, foreign, pin, NULL, NULL));
	PROBE(rsd_move, rsd_move(m, h, pin, &pin, NULL, NULL));
	PROBE(rsd_drop, rsd_drop(m, h, page, NULL));
	PROBE(rsd_discard, rsd_discard(m, foreign, NULL));

	PROBE(rsd_register_source, rsd_register_source(m, &spec, &src, page, &sh));
	spec.recoverability = RSD_RECONSTRUCTIBLE;
	if (rsd_register_source(m, &spec, &src, page, &sh))
		return 2;
	PROBE(rsd_ensure, rsd_ensure(m, sh, page, NULL, NULL));

	PROBE(rsd_reserve, rsd_reserve(m, pin, big, "too much", &rv));
	PROBE(rsd_reserve, rsd_reserve(m, pin, 1, " ", &rv));
	PROBE(rsd_reserve, rsd_reserve(m, pin, 1, NULL, &rv));
	PROBE(rsd_acquire, rsd_acquire(m, &h, 0, page, NULL, &l));
	PROBE(rsd_acquire, rsd_acquire(m, &h, 1, pin, NULL, &l));
	PROBE(rsd_hold, rsd_hold(m, &h, 1, pin, &hd));

	if (rsd_acquire(m, &h, 1, page, NULL, &l) || rsd_hold(m, &g, 1, page, &hd))
		return 2;
	PROBE(rsd_lease_handle_at, rsd_lease_handle_at(l, 5, &h));
	PROBE(rsd_lease_value, rsd_lease_value(l, g, (const struct rsd_resident **)&r));
	PROBE(rsd_drop, rsd_drop(m, g, page, NULL));
	PROBE(rsd_discard, rsd_discard(m, g, NULL));
	PROBE(rsd_manager_close, rsd_manager_close(m, 0));
	rsd_lease_release(l, 0);
	PROBE(rsd_lease_value, rsd_lease_value(l, h, (const struct rsd_resident **)&r));
	PROBE(rsd_lease_handle_at, rsd_lease_handle_at(l, 0, &h));
	PROBE(rsd_lease_add_consumer_stream, rsd_lease_add_consumer_stream(l, NULL));
	rsd_lease_free(l);
	rsd_hold_release(hd);
	rsd_hold_free(hd);
	PROBE(rsd_drop, rsd_drop(m, g, page, NULL));

	PROBE(rsd_location_parse, rsd_location_parse("cuda", &loc));
	PROBE(rsd_location_parse, rsd_location_parse(NULL, &loc));
	PROBE(rsd_cuda_location, rsd_cuda_location(128, &loc));
	PROBE(rsd_location_make, rsd_location_make(RSD_CUDA, -1, &loc));

	act = rsd_action_ensure(h, pin);
	PROBE(rsd_explain, rsd_explain(m, &plan, &wrong, &ex));
	PROBE(rsd_explain, rsd_explain(m, NULL, NULL, &ex));
	PROBE(rsd_execute_actions, rsd_execute_actions(m, &act, 1, NULL, NULL, 0, &wrong, NULL));
	act = rsd_action_drop(h, page); /* the last copy of a preserve-only value */
	PROBE(rsd_execute_actions, rsd_execute_actions(m, &act, 1, NULL, NULL, 0, NULL, NULL));
	PROBE(rsd_execute_actions, rsd_execute_actions(m, &act, 1, " ", NULL, 0, NULL, NULL));
	PROBE(rsd_snapshot_take, rsd_snapshot_take(NULL, &snap));
	PROBE(rsd_scope_close, rsd_scope_close(NULL, NULL));

	PROBE(rsd_tiered_lru_create, rsd_tiered_lru_create(NULL, 0, NULL));
	if (rsd_tiered_lru_create(NULL, 0, &pol) || rsd_controller_create(m, pol, 0, &c))
		return 2;
	req.handle = h;
	req.location = pin;
	PROBE(rsd_controller_decide, rsd_controller_decide(c, &rq, &d));
	rq.name = "probe";
	req.handle = foreign;
	PROBE(rsd_controller_decide, rsd_controller_decide(c, &rq, &d));
	PROBE(rsd_controller_set_policy_metadata, rsd_controller_set_policy_metadata(c, h, 0, " "));
	PROBE(rsd_controller_create, rsd_controller_create(NULL, NULL, 0, &c));
	rq.name = "probe";
	req.handle = h;
	req.location = page;
	PROBE(rsd_controller_use, rsd_controller_use(c, &rq, NULL, 1, NULL, 0, &u));
	PROBE(rsd_controller_scope, rsd_controller_scope(c, NULL, NULL, 0, &s));
	PROBE(rsd_controller_set_policy_metadata,
	      rsd_controller_set_policy_metadata(c, foreign, 0, NULL));
	PROBE(rsd_controller_record_access, rsd_controller_record_access(c, &foreign, 1));
	PROBE(rsd_controller_record_access, rsd_controller_record_access(c, &h, 0));
	PROBE(rsd_controller_record_access, rsd_controller_record_access(NULL, &h, 1));
	rsd_controller_free(c);
	rsd_policy_free(pol);
	tier.from = pin;
	tier.to = &pin;
	tier.nto = 1;
	PROBE(rsd_tiered_lru_create, rsd_tiered_lru_create(&tier, 1, &pol));
	PROBE(rsd_simdev_create, rsd_simdev_create(&sdc, &sd));
	PROBE(rsd_simdev_create, rsd_simdev_create(NULL, &sd));
	sdc.ndevices = 1;
	if (rsd_simdev_create(&sdc, &sd))
		return 2;
	PROBE(rsd_simdev_stream_create, rsd_simdev_stream_create(sd, 3, &stream));
	if (probe_device(sd))
		return 2;
	rsd_simdev_destroy(sd);

	/* Today a failed entry still hands out the closed scope; free it either way. */
	s = NULL;
	PROBE(rsd_scope_enter, rsd_scope_enter(m, &plan, NULL, 0, &wrong, &s));
	rsd_scope_free(s);
	PROBE(rsd_scope_enter, rsd_scope_enter(m, NULL, NULL, 0, NULL, &s));
	PROBE(rsd_lease_release, rsd_lease_release(NULL, 0));
	PROBE(rsd_hold_release, rsd_hold_release(NULL));
	PROBE(rsd_reservation_release, rsd_reservation_release(NULL));
	PROBE(rsd_resident_wrap,
	      rsd_resident_wrap(&rsd_resident_type, 0, &view, NULL, 0, NULL, NULL, &r));
	PROBE(rsd_resident_wrap, rsd_resident_wrap(NULL, 1, &view, NULL, 0, NULL, NULL, &r));
	src.load = NULL;
	PROBE(rsd_register_source, rsd_register_source(m, &spec, &src, page, &sh));
	PROBE(rsd_manager_reap, rsd_manager_reap(NULL));
	PROBE(rsd_manager_close, rsd_manager_close(NULL, 0));
	PROBE(rsd_use_close, rsd_use_close(NULL, NULL));
	PROBE(rsd_use_value, rsd_use_value(NULL, h, page, (const struct rsd_resident **)&r));

	/* Outputs adopted into reservations: too small, released, by label. */
	if (rsd_reserve(m, page, 4, "out", &rv) ||
	    rsd_resident_alloc(m, &rsd_resident_type, page, 1, &n, NULL, 0, &r))
		return 2;
	PROBE(rsd_adopt_reserved, rsd_adopt_reserved(rv, r, RSD_EXCLUSIVE, NULL, &sh));
	PROBE(rsd_adopt_reserved, rsd_adopt_reserved(rv, r, RSD_EXCLUSIVE, &n, &sh));
	PROBE(rsd_adopt_reserved, rsd_adopt_reserved(rv, NULL, RSD_EXCLUSIVE, NULL, &sh));
	rsd_reservation_release(rv);
	PROBE(rsd_adopt_reserved, rsd_adopt_reserved(rv, r, RSD_EXCLUSIVE, NULL, &sh));
	rsd_reservation_free(rv);
	{
		const struct rsd_reservation_spec out = { page, 4, "out" };
		struct rsd_plan step = { .name = "step", .reservations = &out, .nreservations = 1 };

		if (rsd_scope_enter(m, &step, NULL, 0, NULL, &s))
			return 2;
		PROBE(rsd_scope_adopt, rsd_scope_adopt(s, "in", r, RSD_EXCLUSIVE, NULL, &sh));
		PROBE(rsd_scope_adopt, rsd_scope_adopt(s, "out", r, RSD_EXCLUSIVE, NULL, &sh));
		PROBE(rsd_scope_adopt, rsd_scope_adopt(s, NULL, r, RSD_EXCLUSIVE, NULL, &sh));
		rsd_scope_close(s, NULL);
		PROBE(rsd_scope_adopt, rsd_scope_adopt(s, "out", r, RSD_EXCLUSIVE, NULL, &sh));
		rsd_scope_free(s);
	}
	PROBE(rsd_use_adopt, rsd_use_adopt(NULL, "out", r, RSD_EXCLUSIVE, NULL, &sh));
	rsd_resident_free(r);

	rsd_manager_close(closed, RSD_CLOSE_FORCE);
	PROBE(rsd_manager_state_version_get, rsd_manager_state_version_get(closed, &v));
	PROBE(rsd_ensure, rsd_ensure(closed, foreign, page, NULL, NULL));
	PROBE(rsd_snapshot_take, rsd_snapshot_take(closed, &snap));
	PROBE(rsd_reserve, rsd_reserve(closed, page, 1, "late", &rv));
	PROBE(rsd_manager_reap, rsd_manager_reap(closed));
	rsd_manager_destroy(closed);
	rsd_manager_destroy(m);
	return 0;
}
