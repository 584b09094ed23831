/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_error - librsd's error model: codes, names and the last-error record
 *
 * Every librsd call that can fail returns 0 or a negative RSD_E* code and
 * records the facts of the failure (a message naming handle ids, location
 * names, byte counts, the plan name and phase) in a thread-local struct
 * rsd_error that rsd_last_error() returns. A failing call leaves the manager's
 * state and state_version unchanged unless its page says a prefix of work may
 * have been committed (-RSD_EEXEC). Out-parameters are written only on
 * success, except for the partial plan reports named on their pages.
 * The codes are grouped in Documentation/reference.md §17.
 */
#ifndef RSD_ERROR_H
#define RSD_ERROR_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/location.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * enum rsd_err - Error codes; functions return them negated (return -RSD_EBUDGET).
 * @RSD_EINVAL: an argument has the right type but a bad value (CUDA device
 *	index outside 0..127, a handle whose manager_id or id is 0, a blank
 *	label, storage below logical size, a counter that would overflow).
 * @RSD_ETYPE: an argument is of the wrong kind: a NULL object or
 *	out-pointer, a location kind that is not one of the three, a handle
 *	with no type, a missing callback, an unknown enum value.
 * @RSD_EUSAGE: a single-use object used twice or at the wrong time, or an
 *	internal inconsistency.
 * @RSD_ENOTFOUND: a lookup of a key that the object does not hold.
 * @RSD_EBUDGET: the admission rule of a location's byte budget refused a
 *	charge or reservation; rsd_last_error() carries the numbers.
 * @RSD_EHANDLE: a well-formed handle that is foreign, unknown or discarded.
 * @RSD_EUNAVAILABLE: nothing to read the value from, or not resident where
 *	required.
 * @RSD_EINUSE: removal of a materialization that a lease, hold or pending
 *	event protects; a non-forced close with live lifetimes.
 * @RSD_ELIFETIME: use of a released lease, hold or reservation.
 * @RSD_EMATERIAL: a value that does not conform to its spec or location.
 * @RSD_EOWNERSHIP: a replica, last-copy or storage-alias rule was broken.
 * @RSD_EPLAN: a plan is infeasible at preflight; nothing was executed.
 * @RSD_ESTALE: the expected state_version differs from the current one (a
 *	plan error; nothing was executed).
 * @RSD_ESEARCHLIMIT: the controller's search hit its state limit without
 *	an answer (a plan error; inconclusive, not infeasible).
 * @RSD_EEXEC: a failure after preflight: a prefix of the plan may be
 *	committed; rsd_take_partial_report() returns it.
 * @RSD_ECLOSED: the manager is closed.
 * @RSD_EREENTRANT: manager access from the thread of a running source
 *	callback, or re-entry from the thread that is running a transition.
 * @RSD_ENOMEM: bookkeeping or materialization memory could not be allocated.
 * @RSD_EDEVICE: a device driver call failed.
 * @RSD_ESOURCE: a source's load callback failed with a code that is not an
 *	RSD_E* code (kept in rsd_error.cause), or returned no value.
 * @RSD_EDEVLOST: a device failed for good (a sticky error: its context is
 *	gone, every later call on it fails): the call needed that device, or
 *	a value whose only copy was there; the message names the device.
 *	Unlike RSD_EDEVICE it never goes away in this process.
 * @RSD_EMAX: one past the largest code; not an error.
 */
enum rsd_err {
	RSD_EINVAL = 1,
	RSD_ETYPE,
	RSD_EUSAGE,
	RSD_ENOTFOUND,
	RSD_EBUDGET,
	RSD_EHANDLE,
	RSD_EUNAVAILABLE,
	RSD_EINUSE,
	RSD_ELIFETIME,
	RSD_EMATERIAL,
	RSD_EOWNERSHIP,
	RSD_EPLAN,
	RSD_ESTALE,
	RSD_ESEARCHLIMIT,
	RSD_EEXEC,
	RSD_ECLOSED,
	RSD_EREENTRANT,
	RSD_ENOMEM,
	RSD_EDEVICE,
	RSD_ESOURCE,
	RSD_EDEVLOST,
	RSD_EMAX
};

/**
 * rsd_strerror() - A short description of an error code.
 * @err: an RSD_E* code, positive or negative.
 *
 * Context: Any thread; callable from a source callback.
 * Return: a static string; "success" for 0, "unknown error" for a code
 * that is not an RSD_E* code.
 */
const char *rsd_strerror(int err);

/**
 * rsd_err_is_plan_error() - Whether a code means "the plan did not run".
 * @err: an RSD_E* code, positive or negative.
 *
 * RSD_EPLAN, RSD_ESTALE and RSD_ESEARCHLIMIT are plan errors: nothing was
 * executed. RSD_EEXEC is not: a prefix may have been committed.
 *
 * Context: Any thread; callable from a source callback.
 * Return: true for RSD_EPLAN, RSD_ESTALE and RSD_ESEARCHLIMIT (sign
 * ignored), false otherwise.
 */
bool rsd_err_is_plan_error(int err);

/**
 * enum rsd_plan_phase - Where a plan execution failed.
 * @RSD_PHASE_NONE: not a plan-execution failure.
 * @RSD_PHASE_EXECUTE: an action of rsd_execute_actions().
 * @RSD_PHASE_RECLAIM: a reclaim action at scope entry.
 * @RSD_PHASE_RESERVE: a reservation at scope entry.
 * @RSD_PHASE_ENTER: an enter action at scope entry.
 * @RSD_PHASE_EXIT: an exit action at scope close.
 */
enum rsd_plan_phase {
	RSD_PHASE_NONE,
	RSD_PHASE_EXECUTE,
	RSD_PHASE_RECLAIM,
	RSD_PHASE_RESERVE,
	RSD_PHASE_ENTER,
	RSD_PHASE_EXIT,
};

/**
 * rsd_phase_name() - The name of a plan phase.
 * @phase: a phase.
 *
 * Context: Any thread; callable from a source callback.
 * Return: "none", "execute", "reclaim", "reserve", "enter" or "exit"; a
 * static string.
 */
const char *rsd_phase_name(enum rsd_plan_phase phase);

/**
 * struct rsd_error - The last failure recorded on the calling thread.
 * @code: the positive RSD_E* code, 0 when no failure was recorded.
 * @message: a sentence naming the facts of the failure and the C names
 *	involved (rsd_ensure, RSD_EXCLUSIVE); an RSD_EPLAN message of an
 *	infeasible plan carries its explanation's reason, a fixed text
 *	(struct rsd_action_explanation).
 * @has_location: @location is set (budget rejections).
 * @location: the location whose budget refused.
 * @has_budget: the four byte fields below, and @in_flight_bytes,
 *	@plan_held_bytes and @plan_hold_count, are set (RSD_EBUDGET).
 * @budget_bytes: the location's budget at check time.
 * @used_bytes: its charged bytes at check time.
 * @reserved_bytes: its reserved bytes at check time.
 * @requested_bytes: the bytes that did not fit.
 * @has_versions: the two version fields are set (RSD_ESTALE).
 * @expected_version: the state_version the caller expected.
 * @actual_version: the state_version found.
 * @has_search: the search fields are set (RSD_ESEARCHLIMIT, and RSD_EPLAN
 *	of a controller's search).
 * @state_limit: the controller's search_state_limit.
 * @explored_states: the states explored (equal to @state_limit for
 *	RSD_ESEARCHLIMIT).
 * @phase: the plan phase of an RSD_EEXEC, RSD_PHASE_NONE otherwise.
 * @failed_action_index: the phase-local index of the failed action, -1
 *	when absent (a reservation failed, or not a plan execution).
 * @failed_reservation_index: the index of the failed reservation, -1 when
 *	absent.
 * @cause: the negative code of the original error behind an RSD_EEXEC, or
 *	a source's own non-RSD return value behind an RSD_ESOURCE; 0 when absent.
 * @plan_name: the plan or request name of a plan-execution or search-limit
 *	failure.
 * @has_blockers: a controller decision failed because a location could not
 *	admit its request; rsd_last_blockers() (rsd/controller.h) names what
 *	protects the bytes there.
 * @in_flight_bytes: with @has_budget, the location's bytes of work in
 *	flight that the admission counted besides @used_bytes and
 *	@reserved_bytes: the sources of queued moves still being read and
 *	temporary source-load charges (struct rsd_location_snapshot).
 * @plan_held_bytes: with @has_budget, the headroom that plans executing on
 *	other threads keep there and the admission counted.
 * @plan_hold_count: with @has_budget, how many plans keep @plan_held_bytes.
 *
 * A budget rejection refuses exactly when @requested_bytes exceeds
 * @budget_bytes minus the sum of @used_bytes, @reserved_bytes,
 * @in_flight_bytes and @plan_held_bytes; its message names every term.
 *
 * Fields that do not apply are absent: has_* false, indices -1, cause 0,
 * phase RSD_PHASE_NONE.
 */
struct rsd_error {
	int code;
	char message[512];
	bool has_location;
	struct rsd_location location;
	bool has_budget;
	uint64_t budget_bytes, used_bytes, reserved_bytes, requested_bytes;
	bool has_versions;
	uint64_t expected_version, actual_version;
	bool has_search;
	uint64_t state_limit, explored_states;
	enum rsd_plan_phase phase;
	long failed_action_index;
	long failed_reservation_index;
	int cause;
	char plan_name[128];
	bool has_blockers;
	uint64_t in_flight_bytes, plan_held_bytes;
	uint32_t plan_hold_count;
};

/**
 * rsd_last_error() - The last failure recorded on the calling thread.
 *
 * The record is overwritten by the next failing librsd call on this thread;
 * successful calls leave it as it was.
 *
 * Context: Any thread; callable from a source callback.
 * Return: never NULL; valid until the next librsd call on this thread.
 */
const struct rsd_error *rsd_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
