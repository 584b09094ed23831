/* SPDX-License-Identifier: MIT */
/* Snapshots: one published image copied out, lock-free (semantics.md §13). */
#ifndef RSD_SNAPSHOT_H
#define RSD_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_manager;

struct rsd_materialization_snapshot {
	struct rsd_location location;
	uint64_t logical_nbytes, storage_nbytes, charged_nbytes;
	uint64_t use_count, hold_count, pending_event_count;
};

struct rsd_value_snapshot {
	struct rsd_handle handle;
	struct rsd_value_spec spec;
	size_t nmaterializations;
	const struct rsd_materialization_snapshot *materializations;
	bool has_source;
	bool has_source_location;
	struct rsd_location source_location;
	bool discarded;
};

struct rsd_location_snapshot {
	struct rsd_location location;
	bool has_budget;
	uint64_t budget_bytes;
	uint64_t used_bytes, reserved_bytes;
	uint64_t remaining_budget_bytes; /* meaningful only with has_budget */
	uint64_t peak_used_bytes, peak_charged_bytes;
	uint64_t value_count, reservation_count, use_count, hold_count, pending_event_count;
	bool has_allocator;
	uint64_t allocator_allocated_bytes, allocator_reserved_bytes;
};

struct rsd_reservation_snapshot {
	struct rsd_location location;
	uint64_t nbytes;
	const char *label;
};

struct rsd_snapshot {
	uint64_t manager_id, state_version, captured_at_ns;
	size_t nvalues;
	const struct rsd_value_snapshot *values;
	size_t nlocations;
	const struct rsd_location_snapshot *locations;
	size_t nreservations;
	const struct rsd_reservation_snapshot *reservations;
};

/* Lock-free, except after a writer call whose publication ran out of
 * memory: then the snapshot publishes first under the manager's lock, and
 * fails with -RSD_ENOMEM if it cannot (or -RSD_EREENTRANT during a source
 * load). The same holds for rsd_manager_state_version_get, rsd_explain and
 * rsd_controller_decide. */
int rsd_snapshot_take(struct rsd_manager *m, struct rsd_snapshot **out);
void rsd_snapshot_free(struct rsd_snapshot *s);

#ifdef __cplusplus
}
#endif
#endif
