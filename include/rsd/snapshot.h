/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_snapshot - Snapshots: one published image copied out, lock-free
 *
 * A snapshot copies the manager's last published image: every value
 * (discarded ones included, in registration order) with its
 * materializations and protection counts, every known location with its
 * budget, charges, reservations and peaks, and every live reservation.
 * Taking one never blocks a writer. See Documentation/reference.md §14.
 */
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

/**
 * struct rsd_materialization_snapshot - One copy of a value.
 * @location: where it lives.
 * @logical_nbytes: the resident's logical size.
 * @storage_nbytes: the resident's storage size.
 * @charged_nbytes: what it is charged (the spec's storage size).
 * @use_count: active leases reading it.
 * @hold_count: holds pinning it.
 * @pending_event_count: released GPU leases still waiting for events.
 * @arriving: the destination of a transfer admitted and not yet committed
 *	(another thread's copy or load is writing it; its charge is in the
 *	location's used bytes). It is not resident: leases and holds refuse
 *	it, a drop finds it absent. Never true in a state published by a
 *	single-threaded caller.
 */
struct rsd_materialization_snapshot {
	struct rsd_location location;
	uint64_t logical_nbytes, storage_nbytes, charged_nbytes;
	uint64_t use_count, hold_count, pending_event_count;
	bool arriving;
};

/**
 * struct rsd_value_snapshot - One value.
 * @handle: its handle.
 * @spec: its spec.
 * @nmaterializations: the number of copies.
 * @materializations: the copies, in install order.
 * @has_source: it has a reconstruction source.
 * @has_source_location: @source_location is set.
 * @source_location: where a load puts it.
 * @discarded: it was discarded (then it has no copies and no source).
 * @lost: it was lost with its device: its only copy was on
 *	@lost_location's device when that failed for good, and it has no
 *	source. Every call on it but rsd_discard() fails with RSD_EDEVLOST.
 *	It keeps a copy there only while a lease or hold on it lasts (shown
 *	arriving: unreadable); a discard ends it.
 * @lost_location: with @lost, where its last copy was.
 * @durable: it was adopted with RSD_DURABLE: a host copy is kept while
 *	its copies are on devices.
 */
struct rsd_value_snapshot {
	struct rsd_handle handle;
	struct rsd_value_spec spec;
	size_t nmaterializations;
	const struct rsd_materialization_snapshot *materializations;
	bool has_source;
	bool has_source_location;
	struct rsd_location source_location;
	bool discarded;
	bool lost;
	struct rsd_location lost_location;
	bool durable;
};

/**
 * struct rsd_location_snapshot - One known location's accounting.
 * @location: the location.
 * @has_budget: it has a budget.
 * @budget_bytes: the budget (meaningful with @has_budget).
 * @used_bytes: bytes charged by the materializations there, arriving
 *	destinations of transfers in flight included.
 * @reserved_bytes: bytes held by named reservations.
 * @remaining_budget_bytes: what an admission there accepts now: budget -
 *	used - reserved - in flight - plan-held, 0 when those reach the budget;
 *	meaningful only with @has_budget. A request of this many bytes by a
 *	thread running no plan is admitted, one byte more is refused with
 *	RSD_EBUDGET (as long as the state does not change meanwhile). Without
 *	work in flight and executing plans it is budget - used - reserved.
 * @peak_used_bytes: the highest @used_bytes right after an install:
 *	materializations only, never a reservation or a temporary source load.
 * @peak_charged_bytes: the highest @used_bytes + @reserved_bytes right after
 *	an install, a reservation or a temporary source-load charge (also one
 *	whose load then failed); at least @peak_used_bytes. Neither peak ever
 *	goes down (reference.md §7.2).
 * @value_count: materializations there.
 * @reservation_count: live reservations there.
 * @use_count: active lease entries there.
 * @hold_count: hold entries there.
 * @pending_event_count: pending GPU lease entries there.
 * @has_allocator: the allocator fields are set (a CUDA location whose
 *	driver reports metrics).
 * @allocator_allocated_bytes: the device allocator's allocated bytes.
 * @allocator_reserved_bytes: its reserved bytes.
 * @in_flight_bytes: bytes of work in flight charged there besides
 *	@used_bytes and @reserved_bytes: the source of a move whose copy was
 *	queued without waiting, until the copy has read it (the source is no
 *	materialization any more, its bytes are still allocated), and the
 *	temporary charge of a source load running there (reference.md §4.3).
 *	Every admission counts them.
 * @plan_held_bytes: headroom that plans executing now (rsd_execute_actions,
 *	scope entries, controller uses) keep there for their own actions: each
 *	plan's predicted peak above the location's used + reserved at its
 *	preflight, less what its own actions charged since (never counted
 *	twice). Every other thread's admission counts it.
 * @plan_hold_count: how many executing plans keep some of
 *	@plan_held_bytes.
 * @failed: a CUDA location whose device failed for good (the driver
 *	reported it lost; reference.md, "When a device fails"): set once, never
 *	cleared. Nothing is admitted there any more (RSD_EDEVLOST).
 */
struct rsd_location_snapshot {
	struct rsd_location location;
	bool has_budget;
	uint64_t budget_bytes;
	uint64_t used_bytes, reserved_bytes;
	uint64_t remaining_budget_bytes;
	uint64_t peak_used_bytes, peak_charged_bytes;
	uint64_t value_count, reservation_count, use_count, hold_count, pending_event_count;
	bool has_allocator;
	uint64_t allocator_allocated_bytes, allocator_reserved_bytes;
	uint64_t in_flight_bytes, plan_held_bytes;
	uint32_t plan_hold_count;
	/* Device loss (appended; other appended fields may come before). */
	bool failed;
};

/**
 * struct rsd_reservation_snapshot - One live reservation.
 * @location: where.
 * @nbytes: how many bytes.
 * @label: its label, owned by the snapshot.
 */
struct rsd_reservation_snapshot {
	struct rsd_location location;
	uint64_t nbytes;
	const char *label;
};

/**
 * struct rsd_snapshot - A copy of one published image.
 * @manager_id: the manager.
 * @state_version: the version of the image.
 * @captured_at_ns: wall clock when it was taken (Unix ns).
 * @nvalues: the number of values.
 * @values: every value, in registration order, discarded ones included.
 * @nlocations: the number of known locations.
 * @locations: the known locations, in recording order.
 * @nreservations: the number of live reservations.
 * @reservations: the live reservations, in creation order.
 */
struct rsd_snapshot {
	uint64_t manager_id, state_version, captured_at_ns;
	size_t nvalues;
	const struct rsd_value_snapshot *values;
	size_t nlocations;
	const struct rsd_location_snapshot *locations;
	size_t nreservations;
	const struct rsd_reservation_snapshot *reservations;
};

/**
 * rsd_snapshot_take() - Copy out the last published image.
 * @m: the manager.
 * @out: receives the snapshot on success; free it with rsd_snapshot_free().
 *
 * Context: Lock-free reader, except after a writer call whose publication
 * ran out of memory: then the snapshot publishes first under the manager's
 * lock (as rsd_manager_state_version_get(), rsd_explain() and
 * rsd_controller_decide() do). Callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m or @out is NULL.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EREENTRANT - a publication is owed and this is the thread of a
 *   running source load.
 * * -RSD_ENOMEM - the copy, or the owed publication, could not be allocated.
 */
int rsd_snapshot_take(struct rsd_manager *m, struct rsd_snapshot **out);

/**
 * rsd_snapshot_free() - Free a snapshot.
 * @s: the snapshot; NULL is ignored.
 *
 * Freeing it a second time aborts the process with "librsd:
 * rsd_snapshot_free(): double free of struct rsd_snapshot" on stderr, as glibc's
 * free() aborts on a double free, rather than corrupt the manager.
 *
 * Context: Any thread.
 */
void rsd_snapshot_free(struct rsd_snapshot *s);

#ifdef __cplusplus
}
#endif
#endif
