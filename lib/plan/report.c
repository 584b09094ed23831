// SPDX-License-Identifier: MIT
/*
 * Plan reports and the plan-execution failure record (§10.4, §17.2). A
 * failed plan call keeps the committed prefix's report for this thread until
 * rsd_take_partial_report() hands it over.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static pthread_key_t partial_key;
static pthread_once_t partial_once = PTHREAD_ONCE_INIT;

static void partial_free(void *p)
{
	rsd_plan_report_free(p);
}

static void partial_key_make(void)
{
	pthread_key_create(&partial_key, partial_free);
}

struct rsd_plan_report *rsd__report_alloc(const char *name, size_t cap)
{
	size_t len = strlen(name) + 1;
	struct rsd_plan_report *r;
	struct rsd_transition *tt;

	r = rsd__malloc(sizeof(*r) + cap * sizeof(*tt) + len);
	if (!r)
		return NULL;
	tt = (struct rsd_transition *)(r + 1);
	r->plan_name = memcpy((char *)(tt + cap), name, len);
	r->ntransitions = 0;
	r->transitions = tt;
	r->started_at_ns = r->completed_at_ns = 0;
	return r;
}

void rsd__report_fill(struct rsd_plan_report *r, const struct rsd_transition *t, size_t n,
		      uint64_t started, uint64_t completed)
{
	/* The block is the report's own: its transitions are writable. */
	struct rsd_transition *tt = (struct rsd_transition *)(r + 1);

	if (n)
		memcpy(tt, t, n * sizeof(*t));
	r->ntransitions = n;
	r->started_at_ns = started;
	r->completed_at_ns = completed;
}

struct rsd_plan_report *rsd__report_new(const char *name, const struct rsd_transition *t, size_t n,
					uint64_t started, uint64_t completed)
{
	struct rsd_plan_report *r = rsd__report_alloc(name, n);

	if (r)
		rsd__report_fill(r, t, n, started, completed);
	return r;
}

void rsd_plan_report_free(struct rsd_plan_report *r)
{
	free(r);
}

struct rsd_plan_report *rsd_take_partial_report(void)
{
	struct rsd_plan_report *r;

	pthread_once(&partial_once, partial_key_make);
	r = pthread_getspecific(partial_key);
	pthread_setspecific(partial_key, NULL);
	return r;
}

void rsd__partial_report_set(struct rsd_plan_report *r)
{
	pthread_once(&partial_once, partial_key_make);
	rsd_plan_report_free(pthread_getspecific(partial_key));
	pthread_setspecific(partial_key, r);
}

int rsd__exec_failure(const char *plan, enum rsd_plan_phase phase, long action_index,
		      long reservation_index, int cause, const struct rsd_transition *t, size_t n,
		      uint64_t started, struct rsd_plan_report **report)
{
	struct rsd_error cause_rec = *rsd_last_error();
	struct rsd_plan_report *partial;
	struct rsd_error *e;

	rsd__partial_report_set(rsd__report_new(plan, t, n, started, rsd__now_ns()));
	if (report) {
		partial = rsd__report_new(plan, t, n, started, rsd__now_ns());
		*report = partial;
	}
	rsd__err(RSD_EEXEC,
		 "plan '%s' failed in phase %s at %s %ld after %zu committed transitions: %s", plan,
		 rsd_phase_name(phase), action_index >= 0 ? "action" : "reservation",
		 action_index >= 0 ? action_index : reservation_index, n, cause_rec.message);
	e = rsd__err_record();
	e->phase = phase;
	e->failed_action_index = action_index;
	e->failed_reservation_index = reservation_index;
	e->cause = cause;
	snprintf(e->plan_name, sizeof(e->plan_name), "%s", plan);
	/* Keep the cause's structured facts (budget numbers, location). */
	e->has_location = cause_rec.has_location;
	e->location = cause_rec.location;
	e->has_budget = cause_rec.has_budget;
	e->budget_bytes = cause_rec.budget_bytes;
	e->used_bytes = cause_rec.used_bytes;
	e->reserved_bytes = cause_rec.reserved_bytes;
	e->requested_bytes = cause_rec.requested_bytes;
	e->in_flight_bytes = cause_rec.in_flight_bytes;
	e->plan_held_bytes = cause_rec.plan_held_bytes;
	e->plan_hold_count = cause_rec.plan_hold_count;
	return -RSD_EEXEC;
}
