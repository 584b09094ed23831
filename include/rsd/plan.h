/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_plan - Plans: explain (a lock-free dry run), execute_actions and scopes
 *
 * A plan is a named list of reclaim actions, reservations, enter actions and
 * exit actions. rsd_explain() simulates one on the last published image
 * without taking the transition lock and says, action by action, what would
 * happen and the predicted peak bytes per location. rsd_execute_actions()
 * and rsd_scope_enter() first run the same simulation as a preflight under
 * the transition lock: an infeasible plan is -RSD_EPLAN and nothing runs. A
 * failure after preflight is -RSD_EEXEC: the transitions committed before it
 * stay, and rsd_take_partial_report() hands over their report. A scope runs
 * reclaim, reserve and enter at entry, and exit actions then reservation
 * release at close. See Documentation/reference.md §10 and §11.
 */
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

/**
 * struct rsd_reservation_spec - A reservation a plan or request makes.
 * @location: where.
 * @nbytes: how many bytes.
 * @label: a non-blank name.
 */
struct rsd_reservation_spec {
	struct rsd_location location;
	uint64_t nbytes;
	const char *label;
};

/**
 * struct rsd_plan - A named plan.
 * @name: a non-blank name.
 * @reclaim: actions run first at scope entry (eviction, spills).
 * @nreclaim: their number.
 * @reservations: reservations made after the reclaim actions.
 * @nreservations: their number.
 * @enter: actions run last at scope entry.
 * @nenter: their number.
 * @exit: actions run at scope close, before the reservations are released.
 * @nexit: their number.
 *
 * Arrays are copied on entry; the caller's may change afterwards.
 */
struct rsd_plan {
	const char *name;
	const struct rsd_action *reclaim;
	size_t nreclaim;
	const struct rsd_reservation_spec *reservations;
	size_t nreservations;
	const struct rsd_action *enter;
	size_t nenter;
	const struct rsd_action *exit;
	size_t nexit;
};

/**
 * struct rsd_transfer_stream - The stream for copies to one destination.
 * @location: the destination location (one entry per location).
 * @stream: the stream ensure and move copies to it use.
 */
struct rsd_transfer_stream {
	struct rsd_location location;
	void *stream;
};

/**
 * struct rsd_action_explanation - What one action of a plan would do.
 * @action: the action.
 * @executable: it would run; false for the first infeasible action.
 * @no_op: it would change nothing.
 * @has_source: @source is set.
 * @source: the location it would read from (as in struct rsd_transition).
 * @has_destination: @destination is set.
 * @destination: the location it would write to.
 * @logical_nbytes: the value's logical size.
 * @storage_nbytes: its charge.
 * @reason: a no-op or infeasibility reason, NULL when absent. Reasons are
 *	fixed texts (reference.md §17.3), word for word those of the Python
 *	residency manager, so some name its API ("EnsureResident would
 *	replicate an EXCLUSIVE value"); error messages name C things.
 * @source_arriving: @source is a materialization still arriving (a
 *	transfer in flight, or a copy a not-waiting call queued that has not
 *	been seen complete): the action would read it once it is complete.
 * @destination_arriving: @destination already holds such a
 *	materialization (an ensure to it is then a no-op).
 */
struct rsd_action_explanation {
	struct rsd_action action;
	bool executable, no_op;
	bool has_source;
	struct rsd_location source;
	bool has_destination;
	struct rsd_location destination;
	uint64_t logical_nbytes, storage_nbytes;
	const char *reason;
	bool source_arriving, destination_arriving;
};

/**
 * struct rsd_location_bytes - A byte count at a location.
 * @location: the location.
 * @nbytes: the bytes.
 */
struct rsd_location_bytes {
	struct rsd_location location;
	uint64_t nbytes;
};

/**
 * struct rsd_explanation - The result of a dry run.
 * @plan_name: the plan's name.
 * @nactions: the number of explained actions.
 * @actions: explanations in plan order (reclaim, then enter, then exit)
 *	up to and including the first infeasible one.
 * @nreservations: the number of reservations.
 * @reservations: the plan's reservations.
 * @npeaks: the number of peak entries.
 * @predicted_peak_bytes: the highest charged-plus-reserved bytes per
 *	location during the simulation: known locations first, then those
 *	first touched by the plan.
 * @feasible: the whole plan would run.
 * @reason: the first failure, NULL when feasible; a fixed text, as in
 *	struct rsd_action_explanation.
 */
struct rsd_explanation {
	const char *plan_name;
	size_t nactions;
	const struct rsd_action_explanation *actions;
	size_t nreservations;
	const struct rsd_reservation_spec *reservations;
	size_t npeaks;
	const struct rsd_location_bytes *predicted_peak_bytes;
	bool feasible;
	const char *reason;
};

/**
 * rsd_explain() - Simulate a plan without running it.
 * @m: the manager.
 * @p: the plan.
 * @expected_version: the state_version the caller planned against, or NULL.
 * @out: receives the explanation on success; free it with
 *	rsd_explanation_free().
 *
 * An infeasible plan is not an error: the explanation says so.
 *
 * Context: Lock-free reader (reads the last published image); callable
 * from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @p, @out, the plan name, an array that is counted or
 *   a reservation label is NULL; an action or reservation has a bad kind
 *   or location kind; a handle's type is NULL.
 * * -RSD_EINVAL - the plan name or a label is blank; a location is a CUDA
 *   location outside 0..127; a handle's manager_id or id is 0.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_ESTALE - *@expected_version differs from the published version.
 * * -RSD_ENOMEM - the explanation could not be allocated.
 */
int rsd_explain(struct rsd_manager *m, const struct rsd_plan *p, const uint64_t *expected_version,
		struct rsd_explanation **out);

/**
 * rsd_explanation_free() - Free an explanation.
 * @e: the explanation; NULL is ignored.
 *
 * Context: Any thread.
 */
void rsd_explanation_free(struct rsd_explanation *e);

/**
 * DOC: rsd_execute_actions - Running actions as one plan, and partial reports
 *
 * rsd_execute_actions() runs a list of actions under one hold of the
 * transition lock after a preflight: either nothing runs (a plan error) or
 * the actions run in order until one fails (-RSD_EEXEC, with the committed
 * prefix's report). See Documentation/reference.md §10.4 and §11.3.
 */

/**
 * struct rsd_plan_report - The transitions a plan committed.
 * @plan_name: the plan's name.
 * @ntransitions: the number of transitions.
 * @transitions: their reports, in execution order.
 * @started_at_ns: wall clock when the plan call started.
 * @completed_at_ns: wall clock when it completed.
 */
struct rsd_plan_report {
	const char *plan_name;
	size_t ntransitions;
	const struct rsd_transition *transitions;
	uint64_t started_at_ns, completed_at_ns;
};

/**
 * rsd_plan_report_free() - Free a plan report.
 * @r: the report; NULL is ignored.
 *
 * Context: Any thread.
 */
void rsd_plan_report_free(struct rsd_plan_report *r);

/**
 * rsd_take_partial_report() - Hand over the partial report of the last -RSD_EEXEC.
 *
 * After a -RSD_EEXEC from any plan call on this thread (execute, scope
 * entry or close, controller scope or use), returns the report of the
 * transitions committed before the failure, once. After a failed
 * rsd_controller_use() whose scope had been entered, it returns what that
 * entry committed before it was unwound.
 *
 * Context: Any thread (thread-local); callable from a source callback.
 * Return: the report, which the caller frees with rsd_plan_report_free();
 * NULL when there is none or it was taken.
 */
struct rsd_plan_report *rsd_take_partial_report(void);

/**
 * rsd_execute_actions() - Run a list of actions as one preflighted plan.
 * @m: the manager.
 * @a: the actions (@n entries), copied.
 * @n: their number.
 * @name: the plan's name; NULL means "residency-actions".
 * @ts: transfer streams (@nts entries), or NULL.
 * @nts: their number.
 * @expected_version: the state_version planned against, or NULL.
 * @report: receives the report on success; on -RSD_EEXEC it receives the
 *	partial report too. NULL when not wanted.
 *
 * The version check, the preflight and every action run under one hold of
 * the transition lock: no other writer interleaves.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL; @a or @ts is NULL with a nonzero count; an
 *   action has a bad kind or location kind; a handle's type is NULL; a
 *   stream is not the driver's.
 * * -RSD_EINVAL - @name is blank; a location is a CUDA location outside
 *   0..127 or not available; a handle's manager_id or id is 0; a transfer
 *   stream location given twice or not matching its stream.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_ESTALE - *@expected_version differs from the current version.
 * * -RSD_EPLAN - the preflight found the plan infeasible; nothing ran.
 * * -RSD_EEXEC - an action failed after preflight; the earlier actions
 *   stay committed (rsd_last_error() names the phase, index and cause).
 * * -RSD_ENOMEM - the reports could not be allocated.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_execute_actions(struct rsd_manager *m, const struct rsd_action *a, size_t n,
			const char *name, const struct rsd_transfer_stream *ts, size_t nts,
			const uint64_t *expected_version, struct rsd_plan_report **report);

/**
 * rsd_execute_actions_async() - rsd_execute_actions() that does not wait for copies.
 * @m: the manager.
 * @a: the actions (@n entries), copied.
 * @n: their number.
 * @name: the plan's name; NULL means "residency-actions".
 * @ts: transfer streams (@nts entries), or NULL.
 * @nts: their number.
 * @expected_version: the state_version planned against, or NULL.
 * @report: as for rsd_execute_actions().
 *
 * What rsd_execute_actions() does, with each device copy queued on its
 * transfer stream and committed at once (DOC: rsd_async in
 * <rsd/manager.h>): the call returns when every action is admitted and
 * its copy queued; the reports, version steps and errors are those of the
 * waiting call.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_execute_actions() returns.
 */
int rsd_execute_actions_async(struct rsd_manager *m, const struct rsd_action *a, size_t n,
			      const char *name, const struct rsd_transfer_stream *ts, size_t nts,
			      const uint64_t *expected_version, struct rsd_plan_report **report);

struct rsd_scope;

/**
 * DOC: rsd_scope - Scopes: a plan entered, held, and left
 *
 * A scope enters a plan (reclaim actions, reservations, enter actions) and
 * keeps its reservations until it is closed, when it runs the exit actions
 * and releases the reservations in reverse order. Other threads may act
 * between entry and close; exit actions are not preflighted again. An
 * output produced inside the scope goes into one of its reservations with
 * rsd_scope_adopt(). See Documentation/reference.md §11.
 */

/**
 * rsd_scope_enter() - Construct and enter a single-use scope.
 * @m: the manager.
 * @p: the plan, copied.
 * @ts: transfer streams (@nts entries), or NULL.
 * @nts: their number.
 * @expected_version: the state_version planned against, or NULL.
 * @out: receives the entered scope on success only; close it with
 *	rsd_scope_close() and free it with rsd_scope_free().
 *
 * Entry checks the version, preflights, runs the reclaim actions, makes
 * the reservations and runs the enter actions, all under one hold of the
 * transition lock. A failure after preflight releases the reservations
 * made so far and is -RSD_EEXEC with a partial report. A failed entry
 * frees the scope and writes nothing to *@out: the failure's facts are in
 * rsd_last_error() and, after -RSD_EEXEC, rsd_take_partial_report().
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @p or @out is NULL, or as for rsd_execute_actions().
 * * -RSD_EINVAL - a blank name or label, a bad CUDA location, a malformed
 *   handle, a duplicated transfer stream location.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_ESTALE - *@expected_version differs from the current version.
 * * -RSD_EPLAN - the preflight found the plan infeasible; nothing ran.
 * * -RSD_EEXEC - a reclaim action, reservation or enter action failed.
 * * -RSD_ENOMEM - the scope could not be allocated.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_scope_enter(struct rsd_manager *m, const struct rsd_plan *p,
		    const struct rsd_transfer_stream *ts, size_t nts,
		    const uint64_t *expected_version, struct rsd_scope **out);

/**
 * rsd_scope_enter_async() - rsd_scope_enter() that does not wait for copies.
 * @m: the manager.
 * @p: the plan, copied.
 * @ts: transfer streams (@nts entries), or NULL.
 * @nts: their number.
 * @expected_version: the state_version planned against, or NULL.
 * @out: receives the entered scope on success only.
 *
 * What rsd_scope_enter() does, with the device copies of its reclaim and
 * enter actions queued and committed at once (DOC: rsd_async in
 * <rsd/manager.h>). Its exit actions, run by rsd_scope_close(), wait.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_scope_enter() returns.
 */
int rsd_scope_enter_async(struct rsd_manager *m, const struct rsd_plan *p,
			  const struct rsd_transfer_stream *ts, size_t nts,
			  const uint64_t *expected_version, struct rsd_scope **out);

/**
 * rsd_scope_close() - Leave a scope.
 * @s: the scope.
 * @report: written only on success: a copy of the scope's report (entry
 *	and exit transitions), or NULL for a second close; may be NULL.
 *
 * Runs the exit actions, then releases the scope's reservations in
 * reverse order, even when an exit action failed. A second close is a
 * silent no-op. A close refused before it runs (-RSD_EREENTRANT, or a
 * reap's -RSD_EDEVICE) leaves the scope open with its reservations, so it
 * can be closed later.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @s is NULL.
 * * -RSD_EUSAGE - the scope was never entered.
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 * * -RSD_ECLOSED - the manager is closed or gone.
 * * -RSD_EEXEC - an exit action failed (also kept in
 *   rsd_scope_exit_error()).
 * * -RSD_ENOMEM - the report could not be allocated.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_scope_close(struct rsd_scope *s, struct rsd_plan_report **report);

/**
 * rsd_scope_adopt() - Adopt a produced value into one of a scope's reservations.
 * @s: an entered, unclosed scope.
 * @label: the label of a reservation of the scope's plan.
 * @value: the output, as for rsd_adopt_reserved().
 * @mode: RSD_EXCLUSIVE or RSD_REPLICABLE.
 * @producer_stream: as for rsd_adopt_reserved(); NULL when @value is
 *	complete.
 * @out: receives the new handle on success.
 *
 * rsd_adopt_reserved() into the scope's reservation labelled @label: of
 * several so labelled, the first (in plan order) at @value's location
 * with room for it. When none has room the call fails as
 * rsd_adopt_reserved() would with the one there that has the most bytes
 * left (-RSD_EBUDGET), or, when none is at @value's location, with the
 * first so labelled (-RSD_EMATERIAL). Close releases what the reservation still holds; the
 * adopted value stays, an ordinary value.
 *
 * Context: Writer path; not callable from a source callback. Takes the
 * scope's lock, so calls on one scope from several threads are serialized.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @s, @label, @value or @out is NULL, or as for
 *   rsd_adopt_reserved().
 * * -RSD_EUSAGE - the scope is closed.
 * * -RSD_ENOTFOUND - the scope has no reservation labelled @label.
 * * -RSD_ECLOSED - the manager is closed or destroyed.
 * * -RSD_EREENTRANT, -RSD_EINVAL, -RSD_EMATERIAL, -RSD_EOWNERSHIP,
 *   -RSD_EBUDGET, -RSD_ENOMEM, -RSD_EDEVICE - as for rsd_adopt_reserved().
 */
int rsd_scope_adopt(struct rsd_scope *s, const char *label, struct rsd_resident *value,
		    enum rsd_replica_mode mode, void *producer_stream, struct rsd_handle *out);

/**
 * rsd_scope_exit_error() - The plan-execution error an exit raised.
 * @s: the scope.
 *
 * Context: Any thread.
 * Return: -RSD_EEXEC when an exit action failed at close, 0 otherwise or
 * for NULL.
 */
int rsd_scope_exit_error(const struct rsd_scope *s);

/**
 * rsd_scope_report() - The report of a successful close.
 * @s: the scope.
 *
 * Context: Any thread.
 * Return: the report, owned by the scope; NULL before a successful close
 * or for NULL.
 */
const struct rsd_plan_report *rsd_scope_report(const struct rsd_scope *s);

/**
 * rsd_scope_free() - Free a scope.
 * @s: the scope; NULL is ignored.
 *
 * An entered, unclosed scope is abandoned: its reservations are released,
 * no exit action runs, and a warning is given. If that release is refused
 * because a source load is running, the scope and the manager are retained
 * for the life of the process instead.
 *
 * Context: Any thread; not from a source callback.
 */
void rsd_scope_free(struct rsd_scope *s);

#ifdef __cplusplus
}
#endif
#endif
