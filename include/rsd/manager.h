/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_manager - The residency manager: creation, state version, close
 *
 * A manager owns values, places them at locations under per-location byte
 * budgets and runs the primitive transitions. Writers (every state-changing
 * call) are serialized by the manager's transition lock, which is held for
 * admissions and commits only: copies, source loads and waits for a device
 * run without it, so threads driving different devices proceed together
 * (Documentation/reference.md §21). A call made from a source's load
 * callback on its own thread is refused with -RSD_EREENTRANT.
 * Readers (rsd_snapshot_take(), rsd_explain(), rsd_manager_state_version(),
 * rsd_manager_locations()) never lock: they read the last image the writer
 * published through RCU. state_version counts the published changes of
 * state; a call that fails leaves it unchanged. See
 * Documentation/reference.md §5 and §16.
 */
#ifndef RSD_MANAGER_H
#define RSD_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/action.h>
#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_device_ops;

/**
 * struct rsd_budget - A byte budget of one location.
 * @location: the location.
 * @nbytes: the bytes that charges and reservations there may total; 0 is
 *	a real budget in which only 0-byte charges fit.
 */
struct rsd_budget {
	struct rsd_location location;
	uint64_t nbytes;
};

/**
 * struct rsd_manager_config - How to build a manager.
 * @budgets: the budgets, copied; their locations are recorded first, in
 *	this order. A location without a budget is unbudgeted.
 * @nbudgets: the number of budgets.
 * @driver: the device driver for pinned host and CUDA memory. NULL: the
 *	CUDA runtime driver when it sees a device, else the host driver
 *	(page-locked host memory, no CUDA devices).
 * @driver_ctx: passed to every driver op.
 * @host_only: use the host driver even where CUDA devices exist.
 * @warn: receives warnings (abandoned lifetimes, refused releases); NULL
 *	prints them to stderr.
 * @warn_ctx: passed to @warn.
 * @staging_nbytes: the largest size of each of the two pinned staging
 *	buffers every CUDA device gets for copies between pageable host
 *	memory and the device, which move through them chunk by chunk at the
 *	pinned rate instead of the driver's pageable rate. 0: the RSD_STAGING
 *	environment variable ("off", or bytes with an optional K, M or G
 *	suffix), else 8 MiB. RSD_STAGING_OFF: no staging, such copies go
 *	straight to the driver. The buffers are allocated at a device's
 *	first staged copy (64 KiB, or that copy's size rounded up to a power
 *	of two), doubled when a larger copy needs it, up to this size, and
 *	freed at close; they are librsd's own memory: charged to no budget,
 *	shown in no snapshot. When they cannot be allocated, that device's
 *	copies go unstaged; when they cannot grow, they keep their size;
 *	either is warned about once.
 * @label: a name for the manager in traces (the rsd:manager_create event;
 *	rsd-trace names its series and processes by it), such as the policy
 *	or the job step it serves; copied. NULL or "": no label. At most
 *	RSD_MANAGER_LABEL_MAX bytes, any bytes but NUL.
 */
struct rsd_manager_config {
	const struct rsd_budget *budgets;
	size_t nbudgets;
	const struct rsd_device_ops *driver;
	void *driver_ctx;
	bool host_only;
	void (*warn)(void *ctx, const char *message);
	void *warn_ctx;
	uint64_t staging_nbytes;
	const char *label;
};

/**
 * RSD_MANAGER_LABEL_MAX - The longest struct rsd_manager_config.label, in bytes.
 */
#define RSD_MANAGER_LABEL_MAX 63

/**
 * RSD_STAGING_OFF - struct rsd_manager_config.staging_nbytes value: no staging.
 *
 * Copies between pageable host memory and a CUDA device go straight to the
 * driver's copy (for the CUDA runtime, a pageable cudaMemcpyAsync, which
 * holds the calling thread).
 */
#define RSD_STAGING_OFF UINT64_MAX

/**
 * rsd_manager_create() - Create a manager.
 * @cfg: the configuration; NULL is the all-defaults configuration, the same
 *	as a zeroed one: no budgets, the CUDA runtime driver when it sees a
 *	device (else the host driver, with no CUDA location), warnings to
 *	stderr.
 * @out: receives the manager on success.
 *
 * The new manager gets a process-unique id, never 0. Its state_version
 * starts at 0 and its locations list holds the budgeted locations.
 *
 * Context: Any thread; takes no manager's lock, so a source callback may
 * call it.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @out is NULL; @nbudgets is nonzero with no @budgets; a
 *   budget's location kind is not one of the three; @driver lacks
 *   device_count, alloc, free or copy.
 * * -RSD_EINVAL - two budgets name one location; a budget names a CUDA
 *   device outside 0..127 or one the driver does not see; @label is longer
 *   than RSD_MANAGER_LABEL_MAX bytes.
 * * -RSD_ENOMEM - the manager, its devices' staging records or its first
 *   published image could not be allocated, or a lock could not be
 *   initialized.
 */
int rsd_manager_create(const struct rsd_manager_config *cfg, struct rsd_manager **out);

/**
 * RSD_CLOSE_NOWAIT - rsd_manager_close() flag: reap completed leases instead of waiting.
 *
 * Without it, close waits for the events of every pending lease first.
 */
#define RSD_CLOSE_NOWAIT 1u
/**
 * RSD_CLOSE_FORCE - rsd_manager_close() flag: end every lifetime and value.
 *
 * An unsafe escape hatch: devices are synchronized, then every lease, hold
 * and reservation is ended and every value freed, whatever protects it.
 * With RSD_CLOSE_NOWAIT as well nothing is waited for, not even a stream
 * that never completes nor another thread waiting on one (it returns
 * -RSD_ECLOSED when its wait ends); the storage of every CUDA materialization a lease
 * still protects (a stream may still use it) is then kept allocated for the
 * life of the process instead of freed, with one warning that counts it.
 */
#define RSD_CLOSE_FORCE 2u

/**
 * rsd_manager_close() - Close a manager.
 * @m: the manager.
 * @flags: 0, or RSD_CLOSE_NOWAIT and/or RSD_CLOSE_FORCE.
 *
 * Waits for pending leases (or, with RSD_CLOSE_NOWAIT, reaps those that
 * completed), then refuses while any lease, hold or reservation is alive
 * unless RSD_CLOSE_FORCE is given. On success every value is freed, every
 * source released, state_version bumped once, and every later call that
 * needs an open manager fails with -RSD_ECLOSED. Closing a closed manager
 * succeeds and does nothing.
 *
 * Context: Writer path (takes the transition lock); not callable from a
 * source callback (-RSD_EREENTRANT).
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_EINUSE - leases, holds or reservations are alive and
 *   RSD_CLOSE_FORCE was not given (the message counts them).
 * * -RSD_EDEVICE - waiting for or querying a pending lease's event failed
 *   (the driver's own code is returned). A forced close that waits does
 *   not stop there: it warns, ends that lease as complete and goes on (a
 *   stream ordered after a failed copy inherits its error and its event
 *   would never complete).
 */
int rsd_manager_close(struct rsd_manager *m, unsigned flags);

/**
 * rsd_manager_destroy() - Free a manager.
 * @m: the manager; NULL is ignored.
 *
 * A manager still open is force-closed first (a failure is warned about).
 * Lifetime objects, scopes and controllers of the manager must be freed
 * before it.
 *
 * Context: Any thread, once no other thread uses @m; not from a source
 * callback.
 */
void rsd_manager_destroy(struct rsd_manager *m);

/**
 * rsd_manager_id() - A manager's process-unique id.
 * @m: the manager.
 *
 * Context: Lock-free; callable from a source callback and after close.
 * Return: the id; 0 for NULL.
 */
uint64_t rsd_manager_id(const struct rsd_manager *m);

/**
 * rsd_manager_state_version() - The last published state version.
 * @m: the manager.
 *
 * A failure returns 0 and sets rsd_last_error(); use
 * rsd_manager_state_version_get() to tell a 0 version from an error.
 *
 * Context: Lock-free reader; callable from a source callback.
 * Return: the version, or 0 when @m is NULL (RSD_ETYPE recorded) or closed
 * (RSD_ECLOSED recorded).
 */
uint64_t rsd_manager_state_version(struct rsd_manager *m);

/**
 * rsd_manager_state_version_get() - Read the last published state version.
 * @m: the manager.
 * @out: receives the version on success.
 *
 * Context: Lock-free reader; callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m or @out is NULL.
 * * -RSD_ECLOSED - the manager is closed.
 */
int rsd_manager_state_version_get(struct rsd_manager *m, uint64_t *out);

/**
 * rsd_manager_locations() - The manager's known locations.
 * @m: the manager.
 * @out: receives up to @cap locations; may be NULL when @cap is 0.
 * @cap: the capacity of @out.
 *
 * Locations are known from their budget or from the first successful
 * operation that used them, and listed in that recording order. Works after
 * close.
 *
 * Context: Lock-free reader; callable from a source callback.
 * Return: how many locations there are (copies at most @cap); 0 when @m is
 * NULL (RSD_ETYPE recorded).
 */
size_t rsd_manager_locations(struct rsd_manager *m, struct rsd_location *out, size_t cap);

/**
 * rsd_manager_reap() - Finalize pending leases whose events completed.
 * @m: the manager.
 *
 * Every writer call reaps too; this one only reaps. A failed query of an
 * event is no answer: the event's stream is synchronized (without the
 * transition lock) and the event asked again.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EDEVICE - a queued copy failed on the device and no call that
 *   needed its value has reported it yet (reported once); or an event
 *   query failed and so did the sync of its stream (the driver's own code
 *   is returned).
 */
int rsd_manager_reap(struct rsd_manager *m);

/**
 * DOC: rsd_adopt - Registration: adopting a resident, registering a source
 *
 * A value enters a manager either as a resident the caller built
 * (rsd_adopt(): its one materialization is installed and charged at once)
 * or as a reconstruction source (rsd_register_source(): nothing is resident
 * until a transition loads it). Either way the manager issues a handle that
 * is never reused. See Documentation/reference.md §6.
 */
/**
 * rsd_adopt() - Hand a resident to the manager as a new value.
 * @m: the manager.
 * @value: the resident; on success it is the manager's, on failure it
 *	stays the caller's.
 * @at: where it lives; NULL infers it from the resident's buffers.
 * @mode: RSD_EXCLUSIVE or RSD_REPLICABLE, the latter optionally with
 *	RSD_DURABLE (a host copy kept while its copies are on devices).
 * @out: receives the new handle on success.
 *
 * The value's spec is taken from the resident: its type, logical bytes and
 * storage bytes, @mode (without RSD_DURABLE), and RSD_MUST_PRESERVE. Its materialization at @at
 * is charged against @at's budget.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @value or @out is NULL; @at's kind is not one of the
 *   three; @mode is unknown, or RSD_EXCLUSIVE with RSD_DURABLE.
 * * -RSD_EINVAL - @at is a CUDA location outside 0..127 or not available.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EMATERIAL - the resident does not conform to @at, or no location
 *   can be inferred (buffers mix pageable and pinned storage).
 * * -RSD_EOWNERSHIP - the resident is already owned by a manager, or its
 *   storage aliases another value's.
 * * -RSD_EBUDGET - the charge does not fit @at's budget.
 * * -RSD_ENOMEM - bookkeeping memory ran out.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_adopt(struct rsd_manager *m, struct rsd_resident *value, const struct rsd_location *at,
	      enum rsd_replica_mode mode, struct rsd_handle *out);

/**
 * rsd_register_source() - Register a value that a source can load.
 * @m: the manager.
 * @spec: the value's spec, copied; must be RSD_RECONSTRUCTIBLE.
 * @source: the source, copied; @source->load is required.
 * @source_location: where a load puts the value.
 * @out: receives the new handle on success.
 *
 * The value starts with no materialization; the first transition that
 * needs one loads it. Nothing is charged now.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @spec, @source or @out is NULL; @source has no load;
 *   the spec's type is not a value type, or its modes are unknown;
 *   @source_location's kind is not one of the three.
 * * -RSD_EINVAL - storage_nbytes < logical_nbytes; the spec is
 *   RSD_MUST_PRESERVE; @source_location is a CUDA location outside 0..127
 *   or not available.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_ENOMEM - bookkeeping memory ran out.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_register_source(struct rsd_manager *m, const struct rsd_value_spec *spec,
			const struct rsd_source *source, struct rsd_location source_location,
			struct rsd_handle *out);

/**
 * DOC: rsd_ensure - The primitive transitions: ensure, copy, move, drop, discard
 *
 * Each call runs one action on the writer path, checks everything before it
 * changes anything, and on success may fill a struct rsd_transition report
 * (NULL: not wanted). A failure leaves the state and state_version as they
 * were. Budgets are enforced by the admission rule at every charge; leases,
 * holds and pending GPU events protect materializations from removal. See
 * Documentation/reference.md §4 and §7.
 */
/**
 * rsd_ensure() - Make a value resident at a location.
 * @m: the manager.
 * @h: the value.
 * @at: where it must be resident.
 * @stream: the CUDA stream for the copy (NULL: the driver's transfer
 *	stream); only for a CUDA @at.
 * @report: receives the transition report on success; NULL when not wanted.
 *
 * A no-op when the value is already at @at. Otherwise the value is copied
 * from its first materialization in canonical location order, or loaded
 * from its source (a temporary load is charged at the source location until
 * the copy is done), and the new copy is charged at @at. An
 * RSD_EXCLUSIVE value that is resident elsewhere is refused: move it.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL; @h's type is NULL; @at's kind is not one of
 *   the three; @stream is not a stream of the manager's driver.
 * * -RSD_EINVAL - @h's manager_id or id is 0; @at is a CUDA location
 *   outside 0..127 or not available; a stream given for a host @at or for
 *   another device; a byte counter would overflow.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - @h is foreign, unknown or discarded.
 * * -RSD_EUNAVAILABLE - the value has neither a materialization nor a source.
 * * -RSD_EOWNERSHIP - the value is RSD_EXCLUSIVE and resident elsewhere;
 *   a loaded or copied value's storage aliases another value's.
 * * -RSD_EBUDGET - the temporary load or the new copy does not fit a budget.
 * * -RSD_EMATERIAL - a loaded or copied value does not match the spec.
 * * -RSD_ESOURCE - the source's load failed with a non-RSD code or
 *   returned no value (a load's own negative RSD_E* code is returned as is).
 * * -RSD_ENOMEM - memory for the copy or bookkeeping ran out.
 * * -RSD_EDEVICE - the driver failed to allocate or copy.
 */
int rsd_ensure(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at, void *stream,
	       struct rsd_transition *report);

/**
 * rsd_copy() - An exact alias of rsd_ensure().
 * @m: the manager.
 * @h: the value.
 * @to: where it must be resident.
 * @stream: the CUDA stream for the copy, or NULL.
 * @report: receives the report on success (its action is an ensure); may
 *	be NULL.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_ensure() returns:
 * * -RSD_ETYPE, -RSD_EINVAL, -RSD_EREENTRANT, -RSD_ECLOSED, -RSD_EHANDLE,
 *   -RSD_EUNAVAILABLE, -RSD_EOWNERSHIP, -RSD_EBUDGET, -RSD_EMATERIAL,
 *   -RSD_ESOURCE, -RSD_ENOMEM, -RSD_EDEVICE - see rsd_ensure().
 */
int rsd_copy(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to, void *stream,
	     struct rsd_transition *report);

/**
 * rsd_move() - Relocate a value.
 * @m: the manager.
 * @h: the value.
 * @to: the destination.
 * @from: the explicit source, or NULL to move from the first
 *	materialization in canonical order (or a load).
 * @stream: the CUDA stream for the copy, or NULL.
 * @report: receives the report on success; may be NULL.
 *
 * Copies the value to @to, then removes the source materialization. A
 * no-op when the value is at @to and nowhere else (or @from equals @to).
 * With @from, only that materialization is used. The source must not be
 * protected by a lease, hold or pending event.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL; @h's type is NULL; @to's or @from's kind is
 *   not one of the three; @stream is not a stream of the driver.
 * * -RSD_EINVAL - @h's manager_id or id is 0; @to or @from is a CUDA
 *   location outside 0..127 or not available; a stream for a host @to or
 *   another device; a byte counter would overflow.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - @h is foreign, unknown or discarded.
 * * -RSD_EUNAVAILABLE - @from is not resident, or there is nothing to read
 *   the value from.
 * * -RSD_EINUSE - the source materialization is protected.
 * * -RSD_EOWNERSHIP - storage of a loaded or copied value aliases another
 *   value's.
 * * -RSD_EBUDGET - the temporary load or the new copy does not fit.
 * * -RSD_EMATERIAL - a loaded or copied value does not match the spec.
 * * -RSD_ESOURCE - the source's load failed with a non-RSD code.
 * * -RSD_ENOMEM - memory ran out.
 * * -RSD_EDEVICE - the driver failed to allocate or copy.
 */
int rsd_move(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to,
	     const struct rsd_location *from, void *stream, struct rsd_transition *report);

/**
 * DOC: rsd_async - Calls that do not wait for their copies
 *
 * rsd_ensure_async(), rsd_move_async(), rsd_execute_actions_async(),
 * rsd_scope_enter_async(), rsd_controller_scope_async() and
 * rsd_controller_use_async() do what their waiting counterparts do, with
 * the same checks, reports and errors, but return as soon as each device
 * copy is queued on its transfer stream with a completion event. The
 * destination is resident from then on (state_version steps as for a
 * completed copy; a snapshot shows it with arriving set) and protected
 * from removal while the copy writes it (-RSD_EINUSE); the copy's source
 * counts a pending event until the copy has read it. Completion is folded
 * in at the next reap point without a version step. Consumers are ordered
 * for you: rsd_acquire() at a CUDA location makes its consumer stream wait
 * for the copy on the device, and at a host location waits for it on the
 * host (or fails with RSD_ACQUIRE_NOWAIT). A copy that fails on the device
 * is undone at the reap point that sees it (the destination removed, a
 * moved source put back, state_version stepped, rsd:copy_complete names
 * the error), and the next call that needs the value or the next
 * rsd_manager_reap(), whichever comes first, returns the device's error
 * once. A failed event query or sync is no failure of the copy: its bytes
 * stay protected until the copy's stream has drained and the event
 * answers. Host-to-host copies and
 * source loads still complete before the call returns. An admission that
 * does not fit while queued copies still hold the room (a spill's source
 * bytes) waits on the host for those copies, oldest first. See
 * Documentation/reference.md §22.
 */

/**
 * rsd_ensure_async() - rsd_ensure() that returns once its copy is queued.
 * @m: the manager.
 * @h: the value.
 * @at: where it must be resident.
 * @stream: the CUDA stream for the copy (NULL: the driver's transfer
 *	stream); only for a CUDA @at.
 * @report: receives the transition report on success; its completed_at_ns
 *	is when the copy was queued, not done. NULL when not wanted.
 *
 * What rsd_ensure() does; a copy to or from a device is queued and the
 * call returns (see DOC: rsd_async). A copy whose source is itself still
 * being filled by a queued copy first waits for that one on the host.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_ensure() returns; -RSD_EDEVICE also when a
 * queued copy of the value failed on the device and no call that needed it
 * nor rsd_manager_reap() has reported it yet.
 */
int rsd_ensure_async(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
		     void *stream, struct rsd_transition *report);

/**
 * rsd_move_async() - rsd_move() that returns once its copy is queued.
 * @m: the manager.
 * @h: the value.
 * @to: the destination.
 * @from: the explicit source, or NULL.
 * @stream: the CUDA stream for the copy, or NULL.
 * @report: receives the report on success; may be NULL.
 *
 * What rsd_move() does; a copy to or from a device is queued and the call
 * returns (see DOC: rsd_async). The source leaves the value at once; its
 * bytes stay allocated, charged as a temporary charge of their location,
 * until the copy has read them.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_move() returns; -RSD_EDEVICE also when a
 * queued copy of the value failed on the device and no call that needed it
 * nor rsd_manager_reap() has reported it yet.
 */
int rsd_move_async(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to,
		   const struct rsd_location *from, void *stream, struct rsd_transition *report);

/**
 * rsd_drop() - Remove a value's materialization at a location.
 * @m: the manager.
 * @h: the value.
 * @at: the materialization to remove.
 * @report: receives the report on success; may be NULL.
 *
 * A no-op when the value is not at @at. Protection is checked before the
 * last-copy rule: the final materialization of a value without a source
 * cannot be dropped (discard it instead).
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL; @h's type is NULL; @at's kind is not one of
 *   the three.
 * * -RSD_EINVAL - @h's manager_id or id is 0; @at is a CUDA location
 *   outside 0..127 or not available.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - @h is foreign, unknown or discarded.
 * * -RSD_EINUSE - the materialization is protected.
 * * -RSD_EOWNERSHIP - it is the last copy of a value without a source.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_drop(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
	     struct rsd_transition *report);

/**
 * rsd_discard() - End a value.
 * @m: the manager.
 * @h: the value.
 * @report: receives the report on success; may be NULL.
 *
 * Every materialization is checked first, then all are removed, the
 * source is released and the handle becomes discarded (-RSD_EHANDLE from
 * then on). Snapshots keep listing the value as discarded.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m is NULL; @h's type is NULL.
 * * -RSD_EINVAL - @h's manager_id or id is 0.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - @h is foreign, unknown or already discarded.
 * * -RSD_EINUSE - a materialization is protected; nothing was removed.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_discard(struct rsd_manager *m, struct rsd_handle h, struct rsd_transition *report);

#ifdef __cplusplus
}
#endif
#endif
