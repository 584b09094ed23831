/* SPDX-License-Identifier: MIT */
/* Plans: explain (a lock-free dry run), execute_actions, scopes. */
#ifndef RSD_PLAN_H
#define RSD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/action.h>
#include <rsd/location.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_manager;

struct rsd_reservation_spec {
	struct rsd_location location;
	uint64_t nbytes;
	const char *label; /* non-blank */
};

/* Arrays are copied on entry; the caller's may change afterwards. */
struct rsd_plan {
	const char *name; /* non-blank */
	const struct rsd_action *reclaim;
	size_t nreclaim;
	const struct rsd_reservation_spec *reservations;
	size_t nreservations;
	const struct rsd_action *enter;
	size_t nenter;
	const struct rsd_action *exit;
	size_t nexit;
};

/* Destination location -> stream for ensure/move copies. */
struct rsd_transfer_stream {
	struct rsd_location location;
	void *stream;
};

struct rsd_action_explanation {
	struct rsd_action action;
	bool executable, no_op;
	bool has_source;
	struct rsd_location source;
	bool has_destination;
	struct rsd_location destination;
	uint64_t logical_nbytes, storage_nbytes;
	const char *reason; /* NULL when absent */
};

struct rsd_location_bytes {
	struct rsd_location location;
	uint64_t nbytes;
};

struct rsd_explanation {
	const char *plan_name;
	size_t nactions;
	const struct rsd_action_explanation *actions;
	size_t nreservations;
	const struct rsd_reservation_spec *reservations;
	size_t npeaks;
	const struct rsd_location_bytes *predicted_peak_bytes;
	bool feasible;
	const char *reason; /* the first failure, NULL when feasible */
};

int rsd_explain(struct rsd_manager *m, const struct rsd_plan *p, const uint64_t *expected_version,
		struct rsd_explanation **out);
void rsd_explanation_free(struct rsd_explanation *e);

struct rsd_plan_report {
	const char *plan_name;
	size_t ntransitions;
	const struct rsd_transition *transitions;
	uint64_t started_at_ns, completed_at_ns;
};
void rsd_plan_report_free(struct rsd_plan_report *r);

/*
 * After a -RSD_EEXEC from any plan call on this thread (execute, scope entry
 * or close, controller scope or use), and after a failed rsd_controller_use
 * whose scope had been entered (the report of what that entry committed
 * before it was unwound): hands over that partial report once; NULL when
 * there is none. The caller frees it.
 */
struct rsd_plan_report *rsd_take_partial_report(void);

/* name NULL: "residency-actions". On -RSD_EEXEC *report (when report is not
 * NULL) receives the partial report as well. */
int rsd_execute_actions(struct rsd_manager *m, const struct rsd_action *a, size_t n, const char *name,
			const struct rsd_transfer_stream *ts, size_t nts, const uint64_t *expected_version,
			struct rsd_plan_report **report);

struct rsd_scope;
/* Construct and enter a single-use scope. *out is written only on success:
 * a failed entry releases what it admitted and frees the scope, leaving the
 * failure's facts in rsd_last_error() and (after -RSD_EEXEC)
 * rsd_take_partial_report(). */
int rsd_scope_enter(struct rsd_manager *m, const struct rsd_plan *p, const struct rsd_transfer_stream *ts,
		    size_t nts, const uint64_t *expected_version, struct rsd_scope **out);
/* Exit actions, then the scope's reservations in reverse order. report may
 * be NULL; *report is written only on success: the close's report, or NULL
 * for a second close, which is a silent no-op. */
int rsd_scope_close(struct rsd_scope *s, struct rsd_plan_report **report);
/* The code of a plan-execution error raised by exit (0 when none). */
int rsd_scope_exit_error(const struct rsd_scope *s);
/* The successful close's report, owned by the scope; NULL until then. */
const struct rsd_plan_report *rsd_scope_report(const struct rsd_scope *s);
/* An entered, unclosed scope is abandoned: reservations released, no exit
 * actions, a warning (if the release is refused because a source load is
 * running, the scope and the manager are retained instead). A close refused
 * with -RSD_EREENTRANT leaves the scope open, so it can be closed later. */
void rsd_scope_free(struct rsd_scope *s);

#ifdef __cplusplus
}
#endif
#endif
