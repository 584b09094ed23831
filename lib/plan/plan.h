/* SPDX-License-Identifier: MIT */
/* The plan layer: simulation (explain, preflight), execution, scopes. */
#ifndef RSD_PLAN_PRIV_H
#define RSD_PLAN_PRIV_H

#include "../core/core.h"
#include "plan_api.h"

/* Deep copy of a plan (names, arrays, labels) in one allocation. */
struct rsd_plan *rsd__plan_copy(const struct rsd_plan *p);

/* Reports. */
struct rsd_plan_report *rsd__report_new(const char *name, const struct rsd_transition *t, size_t n,
					uint64_t started, uint64_t completed);
/* A report with room for cap transitions, allocated before a plan commits
 * anything so that its success never needs memory; rsd__report_fill()
 * (n <= cap) completes it. */
struct rsd_plan_report *rsd__report_alloc(const char *name, size_t cap);
void rsd__report_fill(struct rsd_plan_report *r, const struct rsd_transition *t, size_t n,
		      uint64_t started, uint64_t completed);
/* Record an EEXEC failure: rsd_last_error() fields and the thread's partial
 * report; returns -RSD_EEXEC. cause is the original negative code. */
int rsd__exec_failure(const char *plan, enum rsd_plan_phase phase, long action_index,
		      long reservation_index, int cause, const struct rsd_transition *t, size_t n,
		      uint64_t started, struct rsd_plan_report **report);

/* Preflight a plan on the writer path: -RSD_EPLAN with the first reason. */
/* Preflight a plan on the writer path; on success the headroom its peaks
 * predict is kept in *hold for the plan (rsd__plan_hold_give after it). */
int rsd__preflight(struct rsd_manager *m, const struct rsd_plan *p, struct rsd_plan_hold *hold);

void *rsd__stream_for(const struct rsd_transfer_stream *ts, size_t nts, const struct rsd_action *a);

#endif
