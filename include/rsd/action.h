/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_action - Action records and transition reports
 *
 * An action names one primitive transition (ensure, move, drop, discard) of
 * one value, as a record that plans list and the controller produces. It is
 * built with the rsd_action_*() constructors and compared with
 * rsd_action_equal(). Every completed transition, run directly or inside a
 * plan, no-ops included, is described by a struct rsd_transition.
 * See Documentation/reference.md §4.
 */
#ifndef RSD_ACTION_H
#define RSD_ACTION_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * enum rsd_action_kind - The four primitive transitions.
 * @RSD_ACT_ENSURE: make the value resident at a location (a copy).
 * @RSD_ACT_MOVE: relocate it: copy to a location, then remove the source.
 * @RSD_ACT_DROP: remove its materialization at a location.
 * @RSD_ACT_DISCARD: end the value: remove every materialization and its
 *	source, invalidate its handle.
 */
enum rsd_action_kind {
	RSD_ACT_ENSURE,
	RSD_ACT_MOVE,
	RSD_ACT_DROP,
	RSD_ACT_DISCARD
};

/**
 * struct rsd_action - One transition of one value.
 * @kind: the transition.
 * @handle: the value.
 * @location: ensure and drop: the location acted at; move: the
 *	destination; discard: unused.
 * @has_from: move only: @from is an explicit source.
 * @from: the explicit move source.
 */
struct rsd_action {
	enum rsd_action_kind kind;
	struct rsd_handle handle;
	struct rsd_location location;
	bool has_from;
	struct rsd_location from;
};

/**
 * rsd_action_ensure() - Build an ensure action.
 * @h: the value.
 * @at: where it must be resident.
 *
 * Records are not validated here; the call that runs them does.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the filled record.
 */
struct rsd_action rsd_action_ensure(struct rsd_handle h, struct rsd_location at);

/**
 * rsd_action_move() - Build a move action.
 * @h: the value.
 * @to: the destination.
 * @from: the explicit source, copied; NULL to let the manager choose.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the filled record.
 */
struct rsd_action rsd_action_move(struct rsd_handle h, struct rsd_location to,
				  const struct rsd_location *from);

/**
 * rsd_action_drop() - Build a drop action.
 * @h: the value.
 * @at: the materialization to remove.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the filled record.
 */
struct rsd_action rsd_action_drop(struct rsd_handle h, struct rsd_location at);

/**
 * rsd_action_discard() - Build a discard action.
 * @h: the value.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the filled record (its location field is unused).
 */
struct rsd_action rsd_action_discard(struct rsd_handle h);

/**
 * rsd_action_equal() - Structural equality of two actions.
 * @a: an action.
 * @b: another.
 *
 * Only the fields the kind uses are compared: a discard ignores the
 * location, and only a move compares @has_from and @from.
 *
 * Context: Any thread; callable from a source callback.
 * Return: true when equal; two NULLs are equal, one NULL is not.
 */
bool rsd_action_equal(const struct rsd_action *a, const struct rsd_action *b);

/**
 * rsd_action_kind_name() - The name of an action kind.
 * @kind: the kind.
 *
 * Context: Any thread; callable from a source callback.
 * Return: "ensure", "move", "drop" or "discard"; "unknown" otherwise.
 */
const char *rsd_action_kind_name(enum rsd_action_kind kind);

/**
 * struct rsd_transition - The report of one completed transition.
 * @action: the exact action requested.
 * @no_op: the transition changed nothing (@reason says why).
 * @has_source: @source is set.
 * @source: ensure: the copy's source (absent on a no-op); move: the
 *	selected or loaded source; drop: the drop location (no-op too);
 *	discard: absent.
 * @has_destination: @destination is set.
 * @destination: ensure: its location; move: the destination; drop and
 *	discard: absent.
 * @logical_nbytes: the spec's logical size (no-ops too).
 * @storage_nbytes: the spec's storage size, the charge (no-ops too).
 * @started_at_ns: wall clock when the action started (Unix ns).
 * @completed_at_ns: wall clock when it completed, at least @started_at_ns.
 * @has_allocator: the allocator fields are set.
 * @allocator_device: the CUDA device sampled: the first CUDA location among
 *	the action's locations (see Documentation/reference.md §4.10).
 * @allocator_allocated_bytes_before: the device allocator's allocated
 *	bytes before the action body.
 * @allocator_reserved_bytes_before: its reserved bytes before.
 * @allocator_allocated_bytes_after: allocated bytes after every state update.
 * @allocator_reserved_bytes_after: reserved bytes after.
 * @reason: the no-op reason (a static string), NULL when absent.
 *
 * Optional fields carry a has_* flag. Sampling the allocator is best
 * effort: a failed sample leaves the fields absent and never fails the
 * transition.
 */
struct rsd_transition {
	struct rsd_action action;
	bool no_op;
	bool has_source;
	struct rsd_location source;
	bool has_destination;
	struct rsd_location destination;
	uint64_t logical_nbytes, storage_nbytes;
	uint64_t started_at_ns, completed_at_ns;
	bool has_allocator;
	int allocator_device;
	uint64_t allocator_allocated_bytes_before, allocator_reserved_bytes_before;
	uint64_t allocator_allocated_bytes_after, allocator_reserved_bytes_after;
	const char *reason;
};

#ifdef __cplusplus
}
#endif
#endif
