// SPDX-License-Identifier: MIT
/*
 * Fault-injection sweeps on the simulated device. For each scenario and
 * each driver op (alloc, copy, event record, event sync), a clean run
 * counts the op's calls; then, for every N up to that count, a fresh run
 * fails the Nth call with RSD_EDEVICE. Each time: the error is clean
 * (-RSD_EDEVICE, or -RSD_EEXEC with cause -RSD_EDEVICE, or success where
 * the failure is absorbed), a partial report matches the failed index,
 * the snapshot invariants hold, no must-preserve value is lost, a direct
 * transition that failed left state_version unchanged, and the manager
 * then closes without force (nothing leaked). Under SANITIZE=address the
 * leak checker runs over all of it at exit.
 */
#include <stdio.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "../simwait.h"
#include "interp.h"

#define NB 32

struct env {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	void *cs0; /* a consumer stream on cuda:0 */
	/* On-command device; the pump runs the transfer streams and cs0 while
	 * the scenario's calls wait for them (the sweep is about failures,
	 * not about pending work). */
	struct simpump pump;
	struct rsd_handle a, b, s;
	unsigned long points;
};

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 }, CUDA1 = { RSD_CUDA, 1 };

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct env *e = ctx;
	uint64_t n = NB;

	return rsd_resident_alloc(e->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				  out);
}

static struct rsd_handle adopt(struct env *e, struct rsd_location at, enum rsd_replica_mode mode)
{
	struct rsd_resident *r;
	struct rsd_handle h;
	uint64_t n = NB;

	RSD_REQUIRE_OK(rsd_resident_alloc(e->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(e->m, r, &at, mode, &h));
	return h;
}

static void env_init(struct env *e)
{
	struct rsd_simdev_config sc = { .ndevices = 2, .auto_complete = false, .pooled = true };
	struct rsd_value_spec spec = { &rsd_resident_type, NB, NB, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { src_load, NULL, e };
	struct rsd_budget b[] = { { { RSD_CUDA, 0 }, 4 * NB } };
	struct rsd_manager_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &e->sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(e->sd, 0, &e->cs0));
	ATF_REQUIRE(simpump_start(&e->pump, e->sd, &e->cs0, 1, true, false));
	cfg.budgets = b;
	cfg.nbudgets = 1;
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = e->sd;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &e->m));
	e->a = adopt(e, RSD_LOC_PAGEABLE_HOST, RSD_EXCLUSIVE);
	e->b = adopt(e, CUDA0, RSD_REPLICABLE);
	RSD_REQUIRE_OK(rsd_register_source(e->m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &e->s));
}

static void check_state(struct env *e)
{
	struct rsd_snapshot *s;
	char why[256];

	RSD_REQUIRE_OK(rsd_snapshot_take(e->m, &s));
	ATF_CHECK_MSG(ip_snapshot_invariants(s, why, sizeof(why)), "%s", why);
	rsd_snapshot_free(s);
}

static void env_fini(struct env *e)
{
	for (int op = 0; op < RSD_SIMDEV_NOPS; op++)
		rsd_simdev_fail_nth(e->sd, (enum rsd_simdev_op)op, 0, 0);
	check_state(e);
	rsd_simdev_complete_all(e->sd);
	/* Nothing may be left protected or reserved by a failed scenario. */
	ATF_CHECK_EQ_MSG(rsd_manager_close(e->m, 0), 0, "close after the scenario: %s",
			 rsd_last_error()->message);
	rsd_manager_destroy(e->m);
	simpump_stop(&e->pump);
	rsd_simdev_stream_destroy(e->sd, e->cs0);
	rsd_simdev_destroy(e->sd);
}

static uint64_t version(struct env *e)
{
	uint64_t v = 0;

	RSD_REQUIRE_OK(rsd_manager_state_version_get(e->m, &v));
	return v;
}

static void check_code(const char *what, unsigned long n, int rc, bool plan)
{
	const struct rsd_error *le = rsd_last_error();

	if (!rc)
		return;
	if (plan && rc == -RSD_EEXEC) {
		ATF_CHECK_EQ_MSG(le->cause, -RSD_EDEVICE, "%s, fault %lu: EEXEC with cause %d (%s)",
				 what, n, le->cause, le->message);
		return;
	}
	ATF_CHECK_EQ_MSG(rc, -RSD_EDEVICE, "%s, fault %lu: %d (%s)", what, n, rc, le->message);
}

/* ---- scenarios: each returns its result code -------------------------- */

static int sc_ensure(struct env *e, unsigned long n)
{
	uint64_t v0 = version(e);
	struct rsd_transition t;
	int rc = rsd_ensure(e->m, e->a, CUDA0, NULL, &t);

	/* a is EXCLUSIVE: ensure elsewhere is refused; use a replicable one */
	ATF_CHECK_EQ(rc, -RSD_EOWNERSHIP);
	rc = rsd_ensure(e->m, e->s, CUDA0, NULL, &t);
	check_code("ensure", n, rc, false);
	if (rc)
		ATF_CHECK_EQ_MSG(version(e), v0,
				 "ensure failed at fault %lu but changed the version", n);
	return rc;
}

static int sc_move(struct env *e, unsigned long n)
{
	uint64_t v0 = version(e);
	struct rsd_transition t;
	int rc = rsd_move(e->m, e->b, RSD_LOC_PINNED_HOST, NULL, NULL, &t);

	check_code("move cuda:0 -> pinned", n, rc, false);
	if (rc)
		ATF_CHECK_EQ_MSG(version(e), v0, "move failed at fault %lu but changed the version",
				 n);
	return rc;
}

static int sc_execute(struct env *e, unsigned long n)
{
	struct rsd_action a[3] = { rsd_action_ensure(e->s, CUDA0),
				   rsd_action_move(e->b, CUDA1, NULL),
				   rsd_action_ensure(e->s, RSD_LOC_PINNED_HOST) };
	struct rsd_plan_report *rep = NULL, *partial;
	int rc = rsd_execute_actions(e->m, a, 3, "sweep", NULL, 0, NULL, &rep);
	long idx = rsd_last_error()->failed_action_index;

	partial = rsd_take_partial_report();
	check_code("execute_actions", n, rc, true);
	if (rc == -RSD_EEXEC) {
		ATF_REQUIRE(idx >= 0 && idx < 3);
		ATF_REQUIRE(rep && partial);
		ATF_CHECK_EQ((long)rep->ntransitions, idx);
		ATF_CHECK_EQ((long)partial->ntransitions, idx);
		for (long i = 0; i < idx; i++)
			ATF_CHECK(rsd_action_equal(&rep->transitions[i].action, &a[i]));
	} else if (!rc) {
		ATF_CHECK_EQ(rep->ntransitions, 3);
	}
	rsd_plan_report_free(rep);
	rsd_plan_report_free(partial);
	return rc;
}

static void no_reservations(struct env *e, unsigned long n)
{
	struct rsd_snapshot *s;

	RSD_REQUIRE_OK(rsd_snapshot_take(e->m, &s));
	ATF_CHECK_EQ_MSG(s->nreservations, 0, "fault %lu: scope left a reservation", n);
	rsd_snapshot_free(s);
}

static int sc_scope(struct env *e, unsigned long n)
{
	struct rsd_reservation_spec rs = { CUDA0, 16, "ws" };
	struct rsd_action en = rsd_action_ensure(e->s, CUDA0), ex = rsd_action_drop(e->s, CUDA0);
	struct rsd_plan p = { .name = "sweep-scope",
			      .reservations = &rs,
			      .nreservations = 1,
			      .enter = &en,
			      .nenter = 1,
			      .exit = &ex,
			      .nexit = 1 };
	struct rsd_plan_report *rep = NULL, *partial;
	struct rsd_scope *sc = NULL;
	const struct rsd_error *le;
	int rc = rsd_scope_enter(e->m, &p, NULL, 0, NULL, &sc);

	le = rsd_last_error();
	partial = rsd_take_partial_report();
	check_code("scope entry", n, rc, true);
	if (rc == -RSD_EEXEC) {
		ATF_CHECK_EQ(le->phase, RSD_PHASE_ENTER);
		ATF_CHECK_EQ(le->failed_action_index, 0);
		ATF_CHECK(partial && partial->ntransitions == 0);
		no_reservations(e, n);
	}
	rsd_plan_report_free(partial);
	if (!rc) {
		rc = rsd_scope_close(sc, &rep);
		le = rsd_last_error();
		partial = rsd_take_partial_report();
		check_code("scope exit", n, rc, true);
		if (rc == -RSD_EEXEC) {
			ATF_CHECK_EQ(le->phase, RSD_PHASE_EXIT);
			ATF_CHECK(partial && partial->ntransitions == 1);
			RSD_CHECK_ERR(RSD_EEXEC, rsd_scope_exit_error(sc));
		} else if (!rc) {
			ATF_CHECK(rep && rep->ntransitions == 2);
		}
		rsd_plan_report_free(partial);
		rsd_plan_report_free(rep);
		no_reservations(e, n);
	}
	rsd_scope_free(sc);
	return rc;
}

static int sc_use(struct env *e, unsigned long n)
{
	struct rsd_requirement q[2] = { { e->s, CUDA0 }, { e->b, CUDA0 } };
	struct rsd_request r = { "sweep-use", q, 2, NULL, 0 };
	struct rsd_controller *c = NULL;
	struct rsd_plan_report *rep = NULL, *partial;
	struct rsd_use *u = NULL;
	void *cs[1] = { e->cs0 };
	int rc;

	RSD_REQUIRE_OK(rsd_controller_create(e->m, NULL, 0, &c));
	rc = rsd_controller_use(c, &r, cs, 1, NULL, 0, &u);
	partial = rsd_take_partial_report();
	check_code("controller use", n, rc, true);
	rsd_plan_report_free(partial);
	if (!rc) {
		const struct rsd_resident *v;

		RSD_CHECK_OK(rsd_use_value(u, e->s, CUDA0, &v));
		rc = rsd_use_close(u, &rep);
		partial = rsd_take_partial_report();
		check_code("use close", n, rc, true);
		rsd_plan_report_free(partial);
		rsd_plan_report_free(rep);
	}
	if (u)
		rsd_use_free(u);
	rsd_controller_free(c);
	return rc;
}

struct scenario {
	const char *name;
	int (*run)(struct env *e, unsigned long n);
};

static const struct scenario scenarios[] = {
	{ "ensure to cuda:0", sc_ensure },	{ "move cuda:0 -> pinned", sc_move },
	{ "execute_actions of 3", sc_execute }, { "scope entry and exit", sc_scope },
	{ "controller use", sc_use },
};

static const enum rsd_simdev_op ops[] = { RSD_SIMDEV_ALLOC, RSD_SIMDEV_COPY,
					  RSD_SIMDEV_EVENT_RECORD, RSD_SIMDEV_EVENT_SYNC };
static const char *const op_names[] = { "alloc", "copy", "event_record", "event_sync" };

static unsigned long sweep(const struct scenario *sc)
{
	unsigned long points = 0;

	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		struct env e;
		unsigned long before, calls;

		env_init(&e);
		before = rsd_simdev_calls(e.sd, ops[k]);
		ATF_REQUIRE_EQ_MSG(sc->run(&e, 0), 0, "%s: clean run failed: %s", sc->name,
				   rsd_last_error()->message);
		calls = rsd_simdev_calls(e.sd, ops[k]) - before;
		env_fini(&e);
		for (unsigned long n = 1; n <= calls; n++) {
			env_init(&e);
			rsd_simdev_fail_nth(e.sd, ops[k], (unsigned)n, RSD_EDEVICE);
			sc->run(&e, n);
			env_fini(&e);
			points++;
		}
		printf("%s: %s: %lu calls in a clean run, each failed once\n", sc->name,
		       op_names[k], calls);
	}
	return points;
}

ATF_TC_WITHOUT_HEAD(fault_sweeps);
ATF_TC_BODY(fault_sweeps, tc)
{
	unsigned long points = 0;

	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		points += sweep(&scenarios[i]);
	printf("%lu fault points swept\n", points);
	ATF_REQUIRE(points > 10);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, fault_sweeps);
	return atf_no_error();
}
