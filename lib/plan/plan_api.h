/* SPDX-License-Identifier: MIT */
/*
 * What the plan layer offers the controller (lib/ctrl): plan checks,
 * simulation against a published image and its protection test, a
 * scope's two-step close, partial reports and transfer-stream maps. Only
 * the read side of the core (image.h) is needed to call them; plan.h is
 * the rest of the layer.
 */
#ifndef RSD_PLAN_API_H
#define RSD_PLAN_API_H

#include "../core/image.h"

/* in lib/plan/simulate.c: */
/*
 * Simulate p against one image (§10.3). Readers pass the image they hold
 * under rcu_read_lock(); the writer passes m->img after publishing, so the
 * image equals its state. with_reservations: admit p's reservations after
 * the reclaim actions (explain, scope preflight; not execute_actions).
 */
int rsd__plan_simulate(struct rsd_manager *m, const struct rsd_view *view, const struct rsd_plan *p,
		       struct rsd_explanation **out);

/*
 * Whether iv's materialization at `at` in view's image is protected as
 * execution would see it after its reap: arriving (a transfer in flight
 * writes it), or with use or hold tokens, or with a pending lease not all
 * of whose events report complete now (a query error counts as
 * protected). False where iv has no materialization at `at`. The plan
 * simulation refuses to remove such a one; the controller's search asks
 * the same question so that it never plans what the simulation refuses.
 */
bool rsd__plan_mat_protected(struct rsd_manager *m, const struct rsd_view *view,
			     const struct rsd_img_value *iv, struct rsd_location at);

/* in lib/plan/plan.c: */
/* Validate a plan's records without a manager (§10.1). */
int rsd__plan_check(const struct rsd_plan *p);

/* Validate a transfer-stream map (§10.2): locations available, each stream
 * the driver's and on its location's device, no location twice. Reads only
 * what is fixed at manager creation, so it needs no lock. */
int rsd__check_transfer_streams(struct rsd_manager *m, const struct rsd_transfer_stream *ts,
				size_t nts);

/* in lib/plan/scope.c: */
/* Allocate what rsd_scope_close(s, report) will need and ask the writer
 * guard whether this thread may close it, so that a caller that must do
 * other work first (a use releasing its leases) can fail before changing
 * anything. */
int rsd__scope_close_prepare(struct rsd_scope *s, bool report);

/* End an entered scope whose close failed before it ran (its reap
 * failed): release its reservations without exit actions, under the
 * transition lock taken without the guard, and mark it closed. Cannot
 * fail (§21.4); a no-op on a closed scope. */
void rsd__scope_abandon(struct rsd_scope *s);

/* in lib/plan/report.c: */
/* Make r (may be NULL) this thread's partial report, freeing the previous
 * one; rsd_take_partial_report() hands it over. */
void rsd__partial_report_set(struct rsd_plan_report *r);

#endif
