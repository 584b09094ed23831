// SPDX-License-Identifier: MIT
/* Plan records, explain and execute_actions (§10.1-§10.4). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "../nvtx.h"
#include "../trace.h"

static const char DEFAULT_NAME[] = "residency-actions";

/* One action record; what names it ("enter action 2") in messages. */
static int action_check(const struct rsd_action *a, const char *what)
{
	int err;

	if ((unsigned)a->kind > RSD_ACT_DISCARD)
		return rsd__err(RSD_ETYPE, "%s: invalid action kind %d", what, (int)a->kind);
	err = rsd__handle_check(a->handle, what);
	if (!err && a->kind != RSD_ACT_DISCARD)
		err = rsd__location_check(a->location, what);
	if (!err && a->kind == RSD_ACT_MOVE && a->has_from)
		err = rsd__location_check(a->from, what);
	return err;
}

static int check_actions(const struct rsd_action *a, size_t n, const char *phase)
{
	char what[48];
	int err;

	if (n && !a)
		return rsd__err(RSD_ETYPE, "plan %s: %zu actions but no array", phase, n);
	for (size_t i = 0; i < n; i++) {
		snprintf(what, sizeof(what), "%s action %zu", phase, i);
		err = action_check(&a[i], what);
		if (err)
			return err;
	}
	return 0;
}

int rsd__plan_check(const struct rsd_plan *p)
{
	int err;

	if (!p)
		return rsd__err(RSD_ETYPE, "plan is NULL");
	if (!p->name)
		return rsd__err(RSD_ETYPE, "plan name is NULL");
	if (!rsd__nonblank(p->name))
		return rsd__err(RSD_EINVAL, "plan name must not be blank");
	err = check_actions(p->reclaim, p->nreclaim, "reclaim");
	if (!err)
		err = check_actions(p->enter, p->nenter, "enter");
	if (!err)
		err = check_actions(p->exit, p->nexit, "exit");
	if (err)
		return err;
	if (p->nreservations && !p->reservations)
		return rsd__err(RSD_ETYPE, "plan has %zu reservations but no array",
				p->nreservations);
	for (size_t i = 0; i < p->nreservations; i++) {
		const struct rsd_reservation_spec *r = &p->reservations[i];

		char what[48];

		snprintf(what, sizeof(what), "reservation %zu", i);
		err = rsd__location_check(r->location, what);
		if (err)
			return err;
		if (!r->label)
			return rsd__err(RSD_ETYPE, "reservation %zu: label is NULL", i);
		if (!rsd__nonblank(r->label))
			return rsd__err(RSD_EINVAL, "reservation %zu: label must not be blank", i);
	}
	return 0;
}

struct rsd_plan *rsd__plan_copy(const struct rsd_plan *p)
{
	size_t nact = p->nreclaim + p->nenter + p->nexit, size, off, len;
	struct rsd_action *acts;
	struct rsd_reservation_spec *resv;
	struct rsd_plan *c;
	char *str;

	size = sizeof(*c) + nact * sizeof(*acts) + p->nreservations * sizeof(*resv) +
	       strlen(p->name) + 1;
	for (size_t i = 0; i < p->nreservations; i++)
		size += strlen(p->reservations[i].label) + 1;
	c = rsd__malloc(size);
	if (!c) {
		rsd__err(RSD_ENOMEM, "out of memory copying plan '%s'", p->name);
		return NULL;
	}
	acts = (struct rsd_action *)(c + 1);
	resv = (struct rsd_reservation_spec *)(acts + nact);
	str = (char *)(resv + p->nreservations);
	if (p->nreclaim)
		memcpy(acts, p->reclaim, p->nreclaim * sizeof(*acts));
	if (p->nenter)
		memcpy(acts + p->nreclaim, p->enter, p->nenter * sizeof(*acts));
	if (p->nexit)
		memcpy(acts + p->nreclaim + p->nenter, p->exit, p->nexit * sizeof(*acts));
	c->reclaim = acts;
	c->nreclaim = p->nreclaim;
	c->enter = acts + p->nreclaim;
	c->nenter = p->nenter;
	c->exit = acts + p->nreclaim + p->nenter;
	c->nexit = p->nexit;
	c->reservations = resv;
	c->nreservations = p->nreservations;
	/* the strings, each with its NUL, in the bytes counted into size above */
	len = strlen(p->name) + 1;
	c->name = memcpy(str, p->name, len);
	off = len;
	for (size_t i = 0; i < p->nreservations; i++) {
		resv[i] = p->reservations[i];
		len = strlen(p->reservations[i].label) + 1;
		resv[i].label = memcpy(str + off, p->reservations[i].label, len);
		off += len;
	}
	return c;
}

int rsd_explain(struct rsd_manager *m, const struct rsd_plan *p, const uint64_t *expected_version,
		struct rsd_explanation **out)
{
	const struct rsd_image *img;
	struct rsd_view view;
	int err;

	err = rsd__plan_check(p);
	if (err)
		return err;
	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_explain: NULL argument");
	/* Lock-free: one published image, never the writer. */
	err = rsd__read_fresh(m);
	if (err)
		return err;
	img = rsd__read_begin(m);
	rsd__view_init(&view, img);
	if (img->closed)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
	else if (expected_version && *expected_version != view.version)
		err = rsd__err_stale(*expected_version, view.version);
	else
		err = rsd__plan_simulate(m, &view, p, out);
	rsd__read_end();
	return err;
}

int rsd__check_transfer_streams(struct rsd_manager *m, const struct rsd_transfer_stream *ts,
				size_t nts)
{
	int err;

	if (nts && !ts)
		return rsd__err(RSD_ETYPE, "%zu transfer streams but no array", nts);
	for (size_t i = 0; i < nts; i++) {
		err = rsd__check_location(m, ts[i].location);
		if (!err)
			err = rsd__check_stream(m, ts[i].stream, ts[i].location);
		if (err)
			return err;
		for (size_t j = 0; j < i; j++)
			if (rsd_location_equal(ts[j].location, ts[i].location))
				return rsd__err(RSD_EINVAL, "transfer stream location given twice");
	}
	return 0;
}

void *rsd__stream_for(const struct rsd_transfer_stream *ts, size_t nts, const struct rsd_action *a)
{
	if (a->kind != RSD_ACT_ENSURE && a->kind != RSD_ACT_MOVE)
		return NULL;
	for (size_t i = 0; i < nts; i++)
		if (rsd_location_equal(ts[i].location, a->location))
			return ts[i].stream;
	return NULL;
}

/* Preflight on the writer path: publish so the image is the writer state. */
int rsd__preflight(struct rsd_manager *m, const struct rsd_plan *p, struct rsd_plan_hold *hold)
{
	struct rsd_explanation *e;
	struct rsd_view view;
	int err;

	err = rsd__unpublished(m) ? rsd__publish(m) : 0;
	if (!err) {
		m->locs_dirty = false;
		/* The writer's own image and log: the whole truth now. */
		rsd__view_init(&view, m->img);
		err = rsd__plan_simulate(m, &view, p, &e);
	}
	if (err)
		return err;
	if (!e->feasible)
		err = rsd__err(RSD_EPLAN, "%s", e->reason);
	else
		rsd__plan_hold_take(m, hold, e->predicted_peak_bytes, e->npeaks);
	rsd_explanation_free(e);
	return err;
}

/*
 * Run the actions in order with their device copies queued together
 * (lib/core/batch.c): copies to different devices overlap, reports and
 * versions are those of one action after another. On failure *failed is
 * the failing action's index (every action before it committed).
 */
static int run_batched(struct rsd_manager *m, const struct rsd_action *a, size_t n,
		       const struct rsd_transfer_stream *ts, size_t nts,
		       struct rsd_transition *done, size_t *failed)
{
	struct rsd_xfer_batch batch;
	size_t i;
	int err = 0;

	rsd__batch_begin(m, &batch);
	for (i = 0; !err && i < n; i++) {
		batch.index = i;
		err = rsd__exec_action(m, &a[i], rsd__stream_for(ts, nts, &a[i]), &done[i]);
		if (err && !batch.failed) {
			/* The actions before it commit first; a failure among
			 * them comes first. */
			struct rsd_error saved = *rsd_last_error();
			int ferr = rsd__batch_flush(m);

			if (ferr)
				err = ferr;
			else
				*rsd__err_record() = saved;
		}
		*failed = batch.failed ? batch.failed_index : i;
	}
	if (!err) {
		err = rsd__batch_flush(m);
		*failed = batch.failed_index;
	}
	rsd__batch_end(&batch);
	return err;
}

int rsd_execute_actions(struct rsd_manager *m, const struct rsd_action *a, size_t n,
			const char *name, const struct rsd_transfer_stream *ts, size_t nts,
			const uint64_t *expected_version, struct rsd_plan_report **report)
{
	struct rsd_transition *done = NULL;
	struct rsd_plan_report *rep = NULL;
	struct rsd_plan_hold hold;
	bool held = false;
	struct rsd_plan plan;
	uint64_t started;
	size_t i = 0;
	int err;

	memset(&plan, 0, sizeof(plan));
	plan.name = name ? name : DEFAULT_NAME;
	plan.enter = a;
	plan.nenter = n;
	err = rsd__plan_check(&plan);
	if (err)
		return err;
	if (!m)
		return rsd__err(RSD_ETYPE, "rsd_execute_actions: manager is NULL");
	done = rsd__malloc((n ? n : 1) * sizeof(*done));
	/* The report before anything commits: a done plan must not fail. */
	if (!done || (report && !(rep = rsd__report_alloc(plan.name, n)))) {
		free(done);
		return rsd__err(RSD_ENOMEM, "out of memory for %zu transition reports", n);
	}
	started = rsd__now_ns();
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		goto out_free;
	rsd_trace_plan_begin(m->id, plan.name, "execute");
	rsd__nvtx_push(plan.name ? plan.name : "rsd plan", 0);
	if (expected_version && *expected_version != m->version)
		err = rsd__err_stale(*expected_version, m->version);
	if (!err)
		err = rsd__check_transfer_streams(m, ts, nts);
	if (!err)
		err = rsd__preflight(m, &plan, &hold);
	held = !err;
	if (!err) {
		err = run_batched(m, a, n, ts, nts, done, &i);
		if (err)
			err = rsd__exec_failure(plan.name, RSD_PHASE_EXECUTE, (long)i, -1, err,
						done, i, started, report);
		else
			i = n;
	}
	if (!err && report) {
		rsd__report_fill(rep, done, n, started, rsd__now_ns());
		*report = rep;
		rep = NULL;
	}
	if (held)
		rsd__plan_hold_give(m, &hold);
	rsd__nvtx_pop();
	rsd_trace_plan_end(m->id, plan.name, "execute",
			   rsd_phase_name(err == -RSD_EEXEC ? RSD_PHASE_EXECUTE : RSD_PHASE_NONE),
			   err, (uint32_t)(err ? i : n));
	rsd__writer_exit(m);
out_free:
	rsd_plan_report_free(rep);
	free(done);
	return err;
}

int rsd_execute_actions_async(struct rsd_manager *m, const struct rsd_action *a, size_t n,
			      const char *name, const struct rsd_transfer_stream *ts, size_t nts,
			      const uint64_t *expected_version, struct rsd_plan_report **report)
{
	struct rsd_exec_scope scope;
	int err;

	rsd__exec_enter(&scope, RSD_EXEC_QUEUE);
	err = rsd_execute_actions(m, a, n, name, ts, nts, expected_version, report);
	rsd__exec_leave(&scope);
	return err;
}
