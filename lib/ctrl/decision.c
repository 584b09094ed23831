// SPDX-License-Identifier: MIT
/*
 * decide (reference.md §12.7) and the decision record (§13.5): one
 * published image in, a confirmed plan out. decide never executes an
 * action, admits a reservation, acquires a lease or calls a source.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/image.h"
#include "../plan/plan_api.h"
#include "../trace.h"
#include "ctrl.h"

/* The decision owns deep copies of everything it exposes. */
struct decision {
	struct rsd_decision pub;
	uint32_t guard; /* RSD__LIVE until rsd_decision_free */
	struct rsd_plan plan;
	char *name;
	struct rsd_action *reclaim, *enter;
	struct rsd_reservation_spec *res;
	struct rsd_eviction *ev;
	struct rsd_policy_config_entry *cfg;
	char *policy_name;
	struct rsd_explanation *expl;
};

static const char *reason_text(const struct rsd__evict *e, char *buf, size_t len)
{
	char name[RSD_LOCATION_NAME_MAX];

	switch (e->reason) {
	case RSD__R_OTHER_REPLICA:
		return "another materialization preserves the logical value";
	case RSD__R_SOURCE:
		return "registered source can reconstruct the logical value";
	default:
		snprintf(buf, len,
			 "sole materialization moved to requested destination %s instead of "
			 "reconstructing it later",
			 rsd_location_name(e->moved_to, name, sizeof(name)));
		return buf;
	}
}

void rsd_decision_free(struct rsd_decision *pub)
{
	struct decision *d = (struct decision *)pub;

	if (!d)
		return;
	rsd__guard_free(&d->guard, __func__, "struct rsd_decision", d);
	free(d->name);
	free(d->reclaim);
	free(d->enter);
	for (size_t i = 0; i < d->plan.nreservations; i++)
		free((char *)d->res[i].label);
	free(d->res);
	for (size_t i = 0; i < d->pub.nevictions; i++)
		free((char *)d->ev[i].reason);
	free(d->ev);
	for (size_t i = 0; i < d->pub.npolicy_config; i++) {
		free((char *)d->cfg[i].key);
		free((char *)d->cfg[i].value);
	}
	free(d->cfg);
	free(d->policy_name);
	rsd_explanation_free(d->expl);
	free(d);
}

static void *dup_array(const void *src, size_t n, size_t size)
{
	void *p = rsd__malloc(n ? n * size : 1);

	if (p && n)
		memcpy(p, src, n * size);
	return p;
}

static int build(struct rsd_controller *c, const struct rsd_request *r, uint64_t V,
		 const struct rsd__search_result *res, struct rsd_explanation *expl,
		 struct rsd_decision **out)
{
	const struct rsd_policy *p = c->policy;
	const struct rsd_policy_config_entry *cfg;
	struct decision *d = rsd__calloc(1, sizeof(*d));
	size_t ncfg = 0;
	char buf[160];

	if (!d)
		goto nomem;
	d->guard = RSD__LIVE;
	d->expl = expl; /* owned from here on, even on failure */
	d->name = rsd__strdup(r->name);
	d->reclaim = dup_array(res->reclaim, res->nreclaim, sizeof(*res->reclaim));
	d->enter = dup_array(res->enter, res->nenter, sizeof(*res->enter));
	d->res = rsd__calloc(r->nreservations ? r->nreservations : 1, sizeof(*d->res));
	d->ev = rsd__calloc(res->nreclaim ? res->nreclaim : 1, sizeof(*d->ev));
	d->policy_name = rsd__strdup(p->ops->name(p->ctx));
	cfg = p->ops->config_identity(p->ctx, &ncfg);
	d->cfg = rsd__calloc(ncfg ? ncfg : 1, sizeof(*d->cfg));
	if (!d->name || !d->reclaim || !d->enter || !d->res || !d->ev || !d->policy_name || !d->cfg)
		goto nomem;
	d->plan.name = d->name;
	d->plan.reclaim = d->reclaim;
	d->plan.nreclaim = res->nreclaim;
	d->plan.enter = d->enter;
	d->plan.nenter = res->nenter;
	d->plan.reservations = d->res;
	for (size_t i = 0; i < r->nreservations; i++, d->plan.nreservations++) {
		d->res[i] = r->reservations[i];
		d->res[i].label = rsd__strdup(r->reservations[i].label);
		if (!d->res[i].label)
			goto nomem;
	}
	for (size_t i = 0; i < res->nreclaim; i++, d->pub.nevictions++) {
		d->ev[i].action = res->reclaim[i];
		d->ev[i].rank = res->evict[i].rank;
		d->ev[i].released_location = res->evict[i].released;
		d->ev[i].released_nbytes = res->evict[i].nbytes;
		d->ev[i].reason = rsd__strdup(reason_text(&res->evict[i], buf, sizeof(buf)));
		if (!d->ev[i].reason)
			goto nomem;
	}
	for (size_t i = 0; i < ncfg; i++, d->pub.npolicy_config++) {
		d->cfg[i].key = rsd__strdup(cfg[i].key);
		d->cfg[i].value = rsd__strdup(cfg[i].value);
		if (!d->cfg[i].key || !d->cfg[i].value) {
			d->pub.npolicy_config++;
			goto nomem;
		}
	}
	d->pub.manager_id = c->manager_id;
	d->pub.expected_state_version = V;
	d->pub.explored_states = res->explored;
	d->pub.policy_name = d->policy_name;
	d->pub.policy_config = d->cfg;
	d->pub.plan = &d->plan;
	d->pub.evictions = d->ev;
	d->pub.explanation = expl;
	d->pub.has_schedule = res->has_schedule;
	d->pub.on_schedule = res->on_schedule;
	d->pub.schedule_position = res->schedule_position;
	*out = &d->pub;
	return 0;
nomem:
	if (d)
		rsd_decision_free(&d->pub);
	else
		rsd_explanation_free(expl);
	return rsd__err(RSD_ENOMEM, "out of memory building the decision for '%s'", r->name);
}

static int decide_locked(struct rsd_controller *c, const struct rsd_request *r,
			 struct rsd_decision **out)
{
	struct rsd__search_result res = { 0 };
	struct rsd_explanation *expl = NULL;
	const struct rsd_image *img;
	struct rsd_view view;
	struct rsd_plan plan;
	uint64_t V, V2;
	int err;

	/*
	 * Read the published image in place for the whole decision instead of
	 * copying it (O(N)): the read section keeps every part of img alive
	 * until rsd__read_end, even if a writer publishes meanwhile. Inside it
	 * decide calls only readers (the plan simulation, the state version),
	 * which nest their own sections; the version check below still catches
	 * a writer that ran in between.
	 */
	err = rsd__reap_queued(c->m);
	if (!err)
		err = rsd__read_fresh(c->m);
	if (err)
		return err;
	img = rsd__read_begin(c->m);
	if (img->closed) {
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)c->manager_id);
		goto out;
	}
	rsd__view_init(&view, img);
	V = view.version;
	err = rsd__validate(img, c->manager_id, r);
	if (err)
		goto out;
	err = rsd__search(c, &view, r, &res);
	if (err)
		goto out;
	memset(&plan, 0, sizeof(plan));
	plan.name = r->name;
	plan.reclaim = res.reclaim;
	plan.nreclaim = res.nreclaim;
	plan.enter = res.enter;
	plan.nenter = res.nenter;
	plan.reservations = r->reservations;
	plan.nreservations = r->nreservations;
	/*
	 * Confirm the plan on the image the search read, not on a fresh one
	 * as rsd_explain would: a transfer admitted meanwhile publishes its
	 * arriving destination (or a plan its headroom) without changing the
	 * state version, so a fresh image could refuse for budget a plan the
	 * search found on this one, under the same version, with no blockers
	 * to name. One image makes the decision a function of what it read
	 * (the version check below still catches a writer's commit); the
	 * bytes admitted since are seen by the next decide, or by preflight
	 * at scope entry.
	 */
	err = rsd__plan_check(&plan);
	if (!err)
		err = rsd__plan_simulate(c->m, &view, &plan, &expl);
	if (err)
		goto out;
	err = rsd_manager_state_version_get(c->m, &V2);
	if (err)
		goto out;
	if (V2 != V) {
		err = rsd__err_stale(V, V2);
		goto out;
	}
	if (!expl->feasible) {
		err = rsd__err(RSD_EPLAN, "%s", expl->reason ? expl->reason : "plan is infeasible");
		goto out;
	}
	err = build(c, r, V, &res, expl, out);
	expl = NULL;
out:
	rsd_explanation_free(expl);
	rsd__search_result_fini(&res);
	rsd__read_end();
	return err;
}

int rsd_controller_decide(struct rsd_controller *c, const struct rsd_request *r,
			  struct rsd_decision **out)
{
	int err;

	if (!c)
		return rsd__err(RSD_ETYPE, "rsd_controller_decide: controller is NULL");
	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_controller_decide: out is NULL");
	err = rsd__request_check(r);
	if (err)
		return err;
	pthread_mutex_lock(&c->lock);
	err = decide_locked(c, r, out);
	pthread_mutex_unlock(&c->lock);
	rsd_trace_decision(c->manager_id, r->name, err ? 0 : (uint32_t)(*out)->nevictions,
			   err ? rsd_last_error()->explored_states : (*out)->explored_states, err);
	if (err)
		rsd_trace_decision_blocked(c->manager_id, r->name, err,
					   rsd_last_error()->explored_states, rsd_last_blockers());
	return err;
}

/* Same policy name and the same (key, value) pairs in the same order. */
static bool same_policy(const struct rsd_policy *p, const struct rsd_decision *d)
{
	const struct rsd_policy_config_entry *cfg;
	const char *name = p->ops->name(p->ctx);
	size_t n = 0;

	if (!name || !d->policy_name || strcmp(name, d->policy_name) != 0)
		return false;
	cfg = p->ops->config_identity(p->ctx, &n);
	if (n != d->npolicy_config)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(cfg[i].key, d->policy_config[i].key) != 0 ||
		    strcmp(cfg[i].value, d->policy_config[i].value) != 0)
			return false;
	return true;
}

int rsd_controller_scope(struct rsd_controller *c, const struct rsd_decision *d,
			 const struct rsd_transfer_stream *ts, size_t nts, struct rsd_scope **out)
{
	if (!c || !d || !out)
		return rsd__err(RSD_ETYPE, "rsd_controller_scope: NULL %s",
				!c ? "controller" :
				!d ? "decision" :
				     "out");
	if (d->manager_id != c->manager_id)
		return rsd__err(
			RSD_EHANDLE,
			"decision for '%s' belongs to manager '%llu', not '%llu' (another manager)",
			d->plan->name, (unsigned long long)d->manager_id,
			(unsigned long long)c->manager_id);
	if (!same_policy(c->policy, d))
		return rsd__err(RSD_EPLAN,
				"decision for '%s' was issued under another policy "
				"configuration",
				d->plan->name);
	return rsd_scope_enter(c->m, d->plan, ts, nts, &d->expected_state_version, out);
}

int rsd_controller_scope_async(struct rsd_controller *c, const struct rsd_decision *d,
			       const struct rsd_transfer_stream *ts, size_t nts,
			       struct rsd_scope **out)
{
	struct rsd_exec_scope scope;
	int err;

	rsd__exec_enter(&scope, RSD_EXEC_QUEUE);
	err = rsd_controller_scope(c, d, ts, nts, out);
	rsd__exec_leave(&scope);
	return err;
}
