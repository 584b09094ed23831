/* SPDX-License-Identifier: MIT */
/* Action records and transition reports. */
#ifndef RSD_ACTION_H
#define RSD_ACTION_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rsd_action_kind { RSD_ACT_ENSURE, RSD_ACT_MOVE, RSD_ACT_DROP, RSD_ACT_DISCARD };

struct rsd_action {
	enum rsd_action_kind kind;
	struct rsd_handle handle;
	struct rsd_location location; /* ensure/drop: at; move: to; discard: unused */
	bool has_from;                /* move only */
	struct rsd_location from;
};

struct rsd_action rsd_action_ensure(struct rsd_handle h, struct rsd_location at);
struct rsd_action rsd_action_move(struct rsd_handle h, struct rsd_location to,
				  const struct rsd_location *from);
struct rsd_action rsd_action_drop(struct rsd_handle h, struct rsd_location at);
struct rsd_action rsd_action_discard(struct rsd_handle h);
/* Structural equality over the fields the kind uses. */
bool rsd_action_equal(const struct rsd_action *a, const struct rsd_action *b);
/* "ensure", "move", "drop", "discard". */
const char *rsd_action_kind_name(enum rsd_action_kind kind);

/* semantics.md §8.10. Optional fields carry a has_* flag. */
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
	const char *reason; /* a no-op reason (static string), NULL when absent */
};

#ifdef __cplusplus
}
#endif
#endif
