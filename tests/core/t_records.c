// SPDX-License-Identifier: MIT
/*
 * Malformed records at every entry point, checked before anything else
 * looks at them:
 *
 *  - a handle whose manager_id or id is 0 is RSD_EINVAL, one whose type is
 *    NULL or does not derive from rsd_resident_type is RSD_ETYPE (ids are
 *    checked first), whether it is passed directly or inside an action,
 *    requirement or handle array, and even after a good (or discarded)
 *    handle in that array: never RSD_EHANDLE, RSD_EUNAVAILABLE or RSD_EPLAN;
 *  - a location record of no known kind, or a host kind with a device, is
 *    RSD_ETYPE; a CUDA record whose index is outside 0..127 is RSD_EINVAL;
 *  - a request whose name is NULL is RSD_ETYPE.
 *
 * Every case asserts the exact code, that rsd_last_error() says it, that no
 * out-parameter was written and that state_version did not move; the whole
 * run leaves the snapshot as it found it.
 */
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

struct env {
	struct cfx f;
	struct csrc s;
	struct rsd_handle a;	/* adopted at pageable, REPLICABLE */
	struct rsd_handle gone; /* discarded */
	struct rsd_lease *lease;
	struct rsd_controller *c;
	struct rsd_use *use; /* a@pageable, entered */
	struct rsd_snapshot *before;
};

static void env_init(struct env *e)
{
	struct rsd_requirement q = { { 0 }, PAGEABLE };
	struct rsd_request r = { "held", &q, 1, NULL, 0 };

	memset(e, 0, sizeof(*e));
	cfx_host(&e->f, NULL, 0);
	e->a = cfx_adopt(&e->f, PAGEABLE, N, RSD_REPLICABLE);
	e->gone = cfx_sourced(&e->f, &e->s, PAGEABLE);
	OK(rsd_discard(e->f.m, e->gone, NULL));
	OK(rsd_acquire(e->f.m, &e->a, 1, PAGEABLE, NULL, &e->lease));
	OK(rsd_controller_create(e->f.m, NULL, 0, &e->c));
	q.handle = e->a;
	OK(rsd_controller_use(e->c, &r, NULL, 0, NULL, 0, &e->use));
	e->before = cfx_snap(&e->f);
}

static void env_fini(struct env *e)
{
	struct rsd_snapshot *after = cfx_snap(&e->f);

	CHECK_SAME(e->before, after, false);
	rsd_snapshot_free(after);
	rsd_snapshot_free(e->before);
	OK(rsd_use_close(e->use, NULL));
	rsd_use_free(e->use);
	rsd_controller_free(e->c);
	OK(rsd_lease_release(e->lease, 0));
	rsd_lease_free(e->lease);
	ATF_CHECK_EQ(e->s.loads, 0);
	cfx_fini(&e->f);
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* What the out-parameters hold until a call writes them. */
#define SENTINEL ((void *)0x5e5e)

/* ---- handles ---------------------------------------------------------------- */

/*
 * One entry point called with the malformed handle `bad`; entry points that
 * take several handles get `first` (well-formed) before it. Each writes its
 * out-parameters to *out only on success, so *out must stay SENTINEL.
 */
struct hcall {
	const char *name;
	bool array; /* `first` is used */
	int (*call)(struct env *e, struct rsd_handle first, struct rsd_handle bad, void **out);
};

static int h_ensure(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_ensure(e->f.m, b, PINNED, NULL, NULL);
}

static int h_copy(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_copy(e->f.m, b, PINNED, NULL, NULL);
}

static int h_move(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_move(e->f.m, b, PINNED, NULL, NULL, NULL);
}

static int h_move_from(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_move(e->f.m, b, PINNED, &PAGEABLE, NULL, NULL);
}

static int h_drop(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_drop(e->f.m, b, PAGEABLE, NULL);
}

static int h_discard(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_discard(e->f.m, b, NULL);
}

static int h_acquire(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_handle h[2] = { f, b };

	return rsd_acquire(e->f.m, h, 2, PAGEABLE, NULL, (struct rsd_lease **)out);
}

static int h_hold(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_handle h[2] = { f, b };

	return rsd_hold(e->f.m, h, 2, PAGEABLE, (struct rsd_hold **)out);
}

static int h_explain_enter(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_action a[2] = { rsd_action_ensure(f, PINNED), rsd_action_ensure(b, PINNED) };
	struct rsd_plan p = { .name = "p", .enter = a, .nenter = 2 };

	return rsd_explain(e->f.m, &p, NULL, (struct rsd_explanation **)out);
}

static int h_explain_reclaim(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_action a[2] = { rsd_action_drop(f, PINNED), rsd_action_drop(b, PINNED) };
	struct rsd_plan p = { .name = "p", .reclaim = a, .nreclaim = 2 };

	return rsd_explain(e->f.m, &p, NULL, (struct rsd_explanation **)out);
}

static int h_explain_exit(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_action a[2] = { rsd_action_discard(f), rsd_action_discard(b) };
	struct rsd_plan p = { .name = "p", .exit = a, .nexit = 2 };

	return rsd_explain(e->f.m, &p, NULL, (struct rsd_explanation **)out);
}

static int h_execute(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_action a[2] = { rsd_action_ensure(f, PINNED),
				   rsd_action_move(b, PINNED, &PAGEABLE) };

	return rsd_execute_actions(e->f.m, a, 2, "x", NULL, 0, NULL,
				   (struct rsd_plan_report **)out);
}

static int h_scope_enter(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_action a[2] = { rsd_action_ensure(f, PINNED), rsd_action_ensure(b, PINNED) };
	struct rsd_plan p = { .name = "s", .enter = a, .nenter = 2 };

	return rsd_scope_enter(e->f.m, &p, NULL, 0, NULL, (struct rsd_scope **)out);
}

static int h_scope_exit(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_action a[2] = { rsd_action_drop(f, PINNED), rsd_action_drop(b, PINNED) };
	struct rsd_plan p = { .name = "s", .exit = a, .nexit = 2 };

	return rsd_scope_enter(e->f.m, &p, NULL, 0, NULL, (struct rsd_scope **)out);
}

static int h_decide(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_requirement q[2] = { { f, PAGEABLE }, { b, PINNED } };
	struct rsd_request r = { "d", q, 2, NULL, 0 };

	return rsd_controller_decide(e->c, &r, (struct rsd_decision **)out);
}

static int h_use(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	struct rsd_requirement q[2] = { { f, PAGEABLE }, { b, PINNED } };
	struct rsd_request r = { "u", q, 2, NULL, 0 };

	return rsd_controller_use(e->c, &r, NULL, 0, NULL, 0, (struct rsd_use **)out);
}

static int h_metadata(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f, (void)out;
	return rsd_controller_set_policy_metadata(e->c, b, 1, "key");
}

static int h_lease_value(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f;
	return rsd_lease_value(e->lease, b, (const struct rsd_resident **)out);
}

static int h_use_value(struct env *e, struct rsd_handle f, struct rsd_handle b, void **out)
{
	(void)f;
	return rsd_use_value(e->use, b, PAGEABLE, (const struct rsd_resident **)out);
}

static const struct hcall hcalls[] = {
	{ "rsd_ensure", false, h_ensure },
	{ "rsd_copy", false, h_copy },
	{ "rsd_move", false, h_move },
	{ "rsd_move(from)", false, h_move_from },
	{ "rsd_drop", false, h_drop },
	{ "rsd_discard", false, h_discard },
	{ "rsd_acquire", true, h_acquire },
	{ "rsd_hold", true, h_hold },
	{ "rsd_explain(enter)", true, h_explain_enter },
	{ "rsd_explain(reclaim)", true, h_explain_reclaim },
	{ "rsd_explain(exit)", true, h_explain_exit },
	{ "rsd_execute_actions", true, h_execute },
	{ "rsd_scope_enter(enter)", true, h_scope_enter },
	{ "rsd_scope_enter(exit)", true, h_scope_exit },
	{ "rsd_controller_decide", true, h_decide },
	{ "rsd_controller_use", true, h_use },
	{ "rsd_controller_set_policy_metadata", false, h_metadata },
	{ "rsd_lease_value", false, h_lease_value },
	{ "rsd_use_value", false, h_use_value },
};

struct bad_handle {
	const char *what;
	struct rsd_handle h;
	int code;
};

static size_t bad_handles(const struct env *e, struct bad_handle *b)
{
	struct rsd_handle a = e->a;
	size_t n = 0;

	b[n++] = (struct bad_handle){ "manager_id 0", { 0, a.id, a.type }, RSD_EINVAL };
	b[n++] = (struct bad_handle){ "id 0", { a.manager_id, 0, a.type }, RSD_EINVAL };
	b[n++] = (struct bad_handle){ "zeroed", { 0, 0, NULL }, RSD_EINVAL };
	b[n++] = (struct bad_handle){ "type NULL", { a.manager_id, a.id, NULL }, RSD_ETYPE };
	b[n++] = (struct bad_handle){ "rogue type",
				      { a.manager_id, a.id, &cfx_rogue_type },
				      RSD_ETYPE };
	return n;
}

static void check_hcall(struct env *e, const struct hcall *c, const struct bad_handle *b,
			struct rsd_handle first, const char *first_what)
{
	uint64_t v = cfx_version(&e->f);
	void *out = SENTINEL;
	int rc;

	cfx_reset_error(b->code);
	rc = c->call(e, first, b->h, &out);
	ATF_CHECK_MSG(rc == -b->code && rsd_last_error()->code == b->code &&
			      rsd_last_error()->message[0],
		      "%s with a %s handle%s%s: returned %d (%s), recorded %d: %s", c->name,
		      b->what, first_what ? " after " : "", first_what ? first_what : "", rc,
		      rsd_strerror(rc), rsd_last_error()->code, rsd_last_error()->message);
	ATF_CHECK_MSG(out == SENTINEL, "%s with a %s handle wrote its out-parameter", c->name,
		      b->what);
	ATF_CHECK_MSG(cfx_version(&e->f) == v, "%s with a %s handle moved state_version", c->name,
		      b->what);
}

ATF_TC_WITHOUT_HEAD(malformed_handles);
ATF_TC_BODY(malformed_handles, tc)
{
	struct bad_handle bad[8];
	size_t nbad, ncases = 0;
	struct env e;

	env_init(&e);
	nbad = bad_handles(&e, bad);
	for (size_t i = 0; i < NELEM(hcalls); i++)
		for (size_t j = 0; j < nbad; j++) {
			if (!hcalls[i].array) {
				check_hcall(&e, &hcalls[i], &bad[j], e.a, NULL);
				ncases++;
				continue;
			}
			/* a good handle first, and one whose resolution fails */
			check_hcall(&e, &hcalls[i], &bad[j], e.a, "a good one");
			check_hcall(&e, &hcalls[i], &bad[j], e.gone, "a discarded one");
			ncases += 2;
		}
	ATF_CHECK_EQ(ncases, 5 * (9 + 2 * 10));
	env_fini(&e);
}

/* Well-formed but foreign, unknown or discarded handles are still runtime
 * conditions (RSD_EHANDLE), not malformed ones. */
ATF_TC_WITHOUT_HEAD(wellformed_handles_resolve);
ATF_TC_BODY(wellformed_handles_resolve, tc)
{
	struct rsd_handle foreign, unknown;
	void *out = SENTINEL;
	struct env e;

	env_init(&e);
	foreign = e.a;
	foreign.manager_id += 1000;
	unknown = e.a;
	unknown.id += 1000000;
	ERR(RSD_EHANDLE, h_ensure(&e, e.a, foreign, &out));
	ERR(RSD_EHANDLE, h_acquire(&e, e.a, unknown, &out));
	ERR(RSD_EHANDLE, h_hold(&e, e.a, e.gone, &out));
	ERR(RSD_EHANDLE, h_decide(&e, e.a, unknown, &out));
	ERR(RSD_EHANDLE, h_metadata(&e, e.a, foreign, &out));
	ATF_CHECK(out == SENTINEL);
	env_fini(&e);
}

/* ---- location records ------------------------------------------------------ */

/* One entry point that takes a location, called with `b` in one place. */
struct lcall {
	const char *name;
	int (*call)(struct env *e, struct rsd_location b, void **out);
};

static int l_explain_action(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_action a = rsd_action_ensure(e->a, b);
	struct rsd_plan p = { .name = "p", .enter = &a, .nenter = 1 };

	return rsd_explain(e->f.m, &p, NULL, (struct rsd_explanation **)out);
}

static int l_explain_from(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_action a = rsd_action_move(e->a, PINNED, &b);
	struct rsd_plan p = { .name = "p", .exit = &a, .nexit = 1 };

	return rsd_explain(e->f.m, &p, NULL, (struct rsd_explanation **)out);
}

static int l_explain_reservation(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_reservation_spec rs = { b, 1, "r" };
	struct rsd_plan p = { .name = "p", .reservations = &rs, .nreservations = 1 };

	return rsd_explain(e->f.m, &p, NULL, (struct rsd_explanation **)out);
}

static int l_execute_action(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_action a = rsd_action_drop(e->a, b);

	return rsd_execute_actions(e->f.m, &a, 1, NULL, NULL, 0, NULL,
				   (struct rsd_plan_report **)out);
}

static int l_execute_stream(struct env *e, struct rsd_location b, void **out)
{
	static int junk;
	struct rsd_transfer_stream ts = { b, &junk };
	struct rsd_action a = rsd_action_ensure(e->a, PAGEABLE);

	return rsd_execute_actions(e->f.m, &a, 1, NULL, &ts, 1, NULL,
				   (struct rsd_plan_report **)out);
}

static int l_scope_action(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_action a = rsd_action_ensure(e->a, b);
	struct rsd_plan p = { .name = "s", .reclaim = &a, .nreclaim = 1 };

	return rsd_scope_enter(e->f.m, &p, NULL, 0, NULL, (struct rsd_scope **)out);
}

static int l_scope_reservation(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_reservation_spec rs = { b, 1, "r" };
	struct rsd_plan p = { .name = "s", .reservations = &rs, .nreservations = 1 };

	return rsd_scope_enter(e->f.m, &p, NULL, 0, NULL, (struct rsd_scope **)out);
}

static int l_scope_stream(struct env *e, struct rsd_location b, void **out)
{
	static int junk;
	struct rsd_transfer_stream ts = { b, &junk };
	struct rsd_plan p = { .name = "s" };

	return rsd_scope_enter(e->f.m, &p, &ts, 1, NULL, (struct rsd_scope **)out);
}

static int l_decide_requirement(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_requirement q[2] = { { e->a, PAGEABLE }, { e->a, b } };
	struct rsd_request r = { "d", q, 2, NULL, 0 };

	return rsd_controller_decide(e->c, &r, (struct rsd_decision **)out);
}

static int l_decide_reservation(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_requirement q = { e->a, PAGEABLE };
	struct rsd_reservation_spec rs = { b, 1, "r" };
	struct rsd_request r = { "d", &q, 1, &rs, 1 };

	return rsd_controller_decide(e->c, &r, (struct rsd_decision **)out);
}

static int l_use_requirement(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_requirement q = { e->a, b };
	struct rsd_request r = { "u", &q, 1, NULL, 0 };

	return rsd_controller_use(e->c, &r, NULL, 0, NULL, 0, (struct rsd_use **)out);
}

static int l_use_stream(struct env *e, struct rsd_location b, void **out)
{
	static int junk;
	struct rsd_transfer_stream ts = { b, &junk };
	struct rsd_requirement q = { e->a, PAGEABLE };
	struct rsd_request r = { "u", &q, 1, NULL, 0 };

	return rsd_controller_use(e->c, &r, NULL, 0, &ts, 1, (struct rsd_use **)out);
}

static int l_use_value(struct env *e, struct rsd_location b, void **out)
{
	return rsd_use_value(e->use, e->a, b, (const struct rsd_resident **)out);
}

static int l_policy_from(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_fallback_tier t = { b, &PAGEABLE, 1 };

	(void)e;
	return rsd_tiered_lru_create(&t, 1, (struct rsd_policy **)out);
}

static int l_policy_to(struct env *e, struct rsd_location b, void **out)
{
	struct rsd_fallback_tier t = { PINNED, &b, 1 };

	(void)e;
	return rsd_tiered_lru_create(&t, 1, (struct rsd_policy **)out);
}

static int l_wrap(struct env *e, struct rsd_location b, void **out)
{
	static char mem[16];
	struct rsd_buffer_view v = { mem, 8, mem, sizeof(mem), b };

	(void)e;
	return rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL,
				 (struct rsd_resident **)out);
}

static const struct lcall lcalls[] = {
	{ "rsd_explain(action)", l_explain_action },
	{ "rsd_explain(move from)", l_explain_from },
	{ "rsd_explain(reservation)", l_explain_reservation },
	{ "rsd_execute_actions(action)", l_execute_action },
	{ "rsd_execute_actions(transfer stream)", l_execute_stream },
	{ "rsd_scope_enter(action)", l_scope_action },
	{ "rsd_scope_enter(reservation)", l_scope_reservation },
	{ "rsd_scope_enter(transfer stream)", l_scope_stream },
	{ "rsd_controller_decide(requirement)", l_decide_requirement },
	{ "rsd_controller_decide(reservation)", l_decide_reservation },
	{ "rsd_controller_use(requirement)", l_use_requirement },
	{ "rsd_controller_use(transfer stream)", l_use_stream },
	{ "rsd_use_value", l_use_value },
	{ "rsd_tiered_lru_create(from)", l_policy_from },
	{ "rsd_tiered_lru_create(to)", l_policy_to },
	{ "rsd_resident_wrap", l_wrap },
};

/* cfx_bad_locs at the plan, controller, policy and wrap entry points (the
 * manager's are in t_bad_input). */
ATF_TC_WITHOUT_HEAD(location_records);
ATF_TC_BODY(location_records, tc)
{
	struct env e;

	env_init(&e);
	for (size_t i = 0; i < NELEM(lcalls); i++)
		for (size_t j = 0; j < cfx_nbad_locs; j++) {
			struct rsd_location b = cfx_bad_locs[j].loc;
			int code = cfx_bad_locs[j].code;
			uint64_t v = cfx_version(&e.f);
			void *out = SENTINEL;
			int rc;

			cfx_reset_error(code);
			rc = lcalls[i].call(&e, b, &out);
			ATF_CHECK_MSG(rc == -code && rsd_last_error()->code == code,
				      "%s with location (kind %d, device %d): returned %d (%s), "
				      "expected %d: %s",
				      lcalls[i].name, (int)b.kind, b.device, rc, rsd_strerror(rc),
				      -code, rsd_last_error()->message);
			ATF_CHECK_MSG(out == SENTINEL, "%s wrote its out-parameter",
				      lcalls[i].name);
			ATF_CHECK_EQ(cfx_version(&e.f), v);
		}
	env_fini(&e);
}

/* A request name that is not a string is a type error, a blank one a value
 * error. */
ATF_TC_WITHOUT_HEAD(request_name);
ATF_TC_BODY(request_name, tc)
{
	struct rsd_requirement q;
	struct rsd_request r = { NULL, &q, 1, NULL, 0 };
	void *out = SENTINEL;
	struct env e;

	env_init(&e);
	q = (struct rsd_requirement){ e.a, PAGEABLE };
	cfx_reset_error(RSD_ETYPE);
	ERR(RSD_ETYPE, rsd_controller_decide(e.c, &r, (struct rsd_decision **)&out));
	cfx_reset_error(RSD_ETYPE);
	ERR(RSD_ETYPE, rsd_controller_use(e.c, &r, NULL, 0, NULL, 0, (struct rsd_use **)&out));
	r.name = " ";
	cfx_reset_error(RSD_EINVAL);
	ERR(RSD_EINVAL, rsd_controller_decide(e.c, &r, (struct rsd_decision **)&out));
	cfx_reset_error(RSD_EINVAL);
	ERR(RSD_EINVAL, rsd_controller_use(e.c, &r, NULL, 0, NULL, 0, (struct rsd_use **)&out));
	ATF_CHECK(out == SENTINEL);
	env_fini(&e);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, malformed_handles);
	ATF_TP_ADD_TC(tp, wellformed_handles_resolve);
	ATF_TP_ADD_TC(tp, location_records);
	ATF_TP_ADD_TC(tp, request_name);
	return 0;
}
