/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_lease - Leases: borrowed reads of values, GPU-stream aware
 *
 * A lease borrows a set of values at one location for reading; at a CUDA
 * location it is GPU-stream aware: releasing it records an event on every
 * consumer stream, and the protection lasts (the lease is pending) until
 * those events complete and the manager reaps it. A hold pins a set of
 * materializations without giving access. A reservation is pure accounting:
 * it takes bytes from a location's remaining budget under a label. Each
 * protects what it names from drop, move and discard, and keeps a
 * non-forced close from succeeding.
 *
 * Release is idempotent; free is the only call that invalidates the
 * pointer. Freeing an unreleased lifetime abandons it: it is released for
 * you (a lease with RSD_RELEASE_WAIT), with a warning. If that release is
 * refused (a source load is running, or waiting for the consumer streams
 * failed), the object and the manager's storage are kept for the life of
 * the process instead: GPU work may still read the memory. See
 * Documentation/reference.md §7 and §8.
 */
#ifndef RSD_LEASE_H
#define RSD_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_lease;
struct rsd_hold;
struct rsd_reservation;

/**
 * rsd_acquire() - Borrow values at a location.
 * @m: the manager.
 * @h: the handles (@n entries); duplicates collapse, the first occurrence
 *	kept.
 * @n: the number of handles, at least 1.
 * @at: where every value must be resident.
 * @consumer_stream: the first stream that will read the values; required
 *	for a CUDA @at, refused for a host @at.
 * @out: receives the lease on success.
 *
 * All or nothing: every value must be resident at @at, or no lease is made.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @h or @out is NULL; a handle's type is NULL; @at's
 *   kind is not one of the three; @consumer_stream is not the driver's.
 * * -RSD_EINVAL - @n is 0; a handle's manager_id or id is 0; @at is a CUDA
 *   location outside 0..127 or not available; a CUDA @at without a stream,
 *   a host @at with one, or a stream of another device.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - a handle is foreign, unknown or discarded.
 * * -RSD_EUNAVAILABLE - a value is not resident at @at.
 * * -RSD_ENOMEM - bookkeeping memory ran out.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_acquire(struct rsd_manager *m, const struct rsd_handle *h, size_t n, struct rsd_location at,
		void *consumer_stream, struct rsd_lease **out);

/**
 * RSD_ACQUIRE_NOWAIT - rsd_acquire_flags() flag: never wait for a queued copy.
 *
 * At a host location a value a not-waiting call is still copying there
 * makes the acquire fail with -RSD_EUNAVAILABLE instead of waiting.
 */
#define RSD_ACQUIRE_NOWAIT 1u

/**
 * rsd_acquire_flags() - rsd_acquire() with flags.
 * @m: the manager.
 * @h: the handles (@n entries).
 * @n: the number of handles, at least 1.
 * @at: where every value must be resident.
 * @consumer_stream: as for rsd_acquire().
 * @flags: 0 or RSD_ACQUIRE_NOWAIT.
 * @out: receives the lease on success.
 *
 * A value that a not-waiting call (DOC: rsd_async) is still copying to @at
 * can be leased: at a CUDA location @consumer_stream, and every stream
 * added later with rsd_lease_add_consumer_stream(), waits for the copy on
 * the device and the call returns at once; at a host location the call
 * waits for the copy without the transition lock (other threads go on),
 * or with RSD_ACQUIRE_NOWAIT fails at once. rsd_acquire() is this with
 * @flags 0.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: what rsd_acquire() returns, and
 * * -RSD_EINVAL - @flags has an unknown bit.
 * * -RSD_EUNAVAILABLE - with RSD_ACQUIRE_NOWAIT, a value at the host
 *   location @at is still being written by a queued copy.
 * * -RSD_EDEVICE - a queued copy of a value failed on the device, or
 *   ordering the consumer stream after a queued copy failed.
 */
int rsd_acquire_flags(struct rsd_manager *m, const struct rsd_handle *h, size_t n,
		      struct rsd_location at, void *consumer_stream, unsigned flags,
		      struct rsd_lease **out);

/**
 * rsd_lease_add_consumer_stream() - Add a stream that reads a CUDA lease.
 * @l: the lease.
 * @stream: the stream; release records an event on it too.
 *
 * Adding a stream the lease already has changes nothing. When the lease
 * covers values a not-waiting call is still copying (DOC: rsd_async), the
 * new stream is first ordered after those copies on the device, as the
 * first consumer stream was.
 *
 * Context: Any thread; takes the lease's lock, not the transition lock.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @l is NULL; @stream is NULL or not a stream of the
 *   manager's driver.
 * * -RSD_ELIFETIME - the lease has been released.
 * * -RSD_EINVAL - the lease is at a host location, or @stream is on
 *   another device.
 * * -RSD_ENOMEM - the stream list could not grow.
 * * -RSD_EDEVICE - ordering @stream after a queued copy failed on the
 *   device; the stream is not added.
 */
int rsd_lease_add_consumer_stream(struct rsd_lease *l, void *stream);

/**
 * rsd_lease_value() - The exact managed value behind a lease entry.
 * @l: the lease.
 * @h: one of the lease's handles.
 * @out: receives the resident on success; it stays the manager's.
 *
 * Validated on every call.
 *
 * Context: Writer path (a short lookup under the transition lock); not
 * callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @l or @out is NULL.
 * * -RSD_ELIFETIME - the lease has been released.
 * * -RSD_ENOTFOUND - @h is not one of the lease's handles.
 * * -RSD_EUNAVAILABLE - the manager no longer tracks the lease (a forced
 *   close ended it).
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 */
int rsd_lease_value(struct rsd_lease *l, struct rsd_handle h, const struct rsd_resident **out);

/**
 * rsd_lease_count() - The number of distinct handles of a lease.
 * @l: the lease.
 *
 * Context: Any thread; lock-free.
 * Return: the count (also after release); 0 for NULL.
 */
size_t rsd_lease_count(const struct rsd_lease *l);

/**
 * rsd_lease_handle_at() - One handle of a lease.
 * @l: the lease.
 * @i: the index, in first-occurrence order.
 * @out: receives the handle on success.
 *
 * Context: Any thread; lock-free.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @l or @out is NULL.
 * * -RSD_ELIFETIME - the lease has been released.
 * * -RSD_ENOTFOUND - @i is past the end.
 */
int rsd_lease_handle_at(const struct rsd_lease *l, size_t i, struct rsd_handle *out);

/**
 * rsd_lease_location() - Where a lease borrows.
 * @l: the lease.
 *
 * Context: Any thread; lock-free.
 * Return: the lease's location.
 */
struct rsd_location rsd_lease_location(const struct rsd_lease *l);

/**
 * rsd_lease_active() - Whether a lease is still unreleased.
 * @l: the lease.
 *
 * Context: Any thread; lock-free.
 * Return: true until the lease is released; false for NULL.
 */
bool rsd_lease_active(const struct rsd_lease *l);

/**
 * RSD_RELEASE_WAIT - rsd_lease_release() flag: block until the consumer streams' events complete.
 */
#define RSD_RELEASE_WAIT 1u

/**
 * rsd_lease_release() - End a lease.
 * @l: the lease.
 * @flags: 0, or RSD_RELEASE_WAIT.
 *
 * A host lease ends at once. A CUDA lease records an event on each
 * consumer stream; with RSD_RELEASE_WAIT it waits for them and ends, without
 * it the lease becomes pending and keeps protecting its values until a
 * later writer call (or rsd_manager_reap()) sees the events complete.
 * Releasing a released lease succeeds and does nothing. A refused release
 * leaves the lease active, so it can be retried.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @l is NULL, or a consumer stream, checked again at release,
 *   is no longer one of the driver's.
 * * -RSD_EINVAL - a consumer stream, checked again, is on another device.
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 * * -RSD_ENOMEM - the events could not be recorded.
 * * -RSD_EDEVICE - recording or waiting for an event failed.
 */
int rsd_lease_release(struct rsd_lease *l, unsigned flags);

/**
 * rsd_lease_free() - Free a lease object.
 * @l: the lease; NULL is ignored.
 *
 * An unreleased lease is abandoned: released with RSD_RELEASE_WAIT and a
 * warning, or kept for the life of the process when that is refused.
 *
 * Freeing it a second time aborts the process with "librsd:
 * rsd_lease_free(): double free of struct rsd_lease" on stderr, as glibc's
 * free() aborts on a double free, rather than corrupt the manager.
 *
 * Context: Any thread; not from a source callback.
 */
void rsd_lease_free(struct rsd_lease *l);

/**
 * DOC: rsd_hold - Holds: pinning materializations without access
 *
 * A hold protects a set of values' materializations at one location from
 * drop, move and discard until it is released. It gives no access to the
 * values and involves no streams. See Documentation/reference.md §8.6.
 */
/**
 * rsd_hold() - Pin materializations at a location.
 * @m: the manager.
 * @h: the handles (@n entries); duplicates collapse.
 * @n: the number of handles, at least 1.
 * @at: where every value must be resident.
 * @out: receives the hold on success.
 *
 * All or nothing, like rsd_acquire(), without streams or access.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @h or @out is NULL; a handle's type is NULL; @at's
 *   kind is not one of the three.
 * * -RSD_EINVAL - @n is 0; a handle's manager_id or id is 0; @at is a CUDA
 *   location outside 0..127 or not available.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - a handle is foreign, unknown or discarded.
 * * -RSD_EUNAVAILABLE - a value is not resident at @at.
 * * -RSD_ENOMEM - bookkeeping memory ran out.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_hold(struct rsd_manager *m, const struct rsd_handle *h, size_t n, struct rsd_location at,
	     struct rsd_hold **out);

/**
 * rsd_hold_release() - End a hold.
 * @hd: the hold.
 *
 * Releasing a released hold succeeds and does nothing.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @hd is NULL.
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 */
int rsd_hold_release(struct rsd_hold *hd);

/**
 * rsd_hold_active() - Whether a hold is still unreleased.
 * @hd: the hold.
 *
 * Context: Any thread; lock-free.
 * Return: true until released; false for NULL.
 */
bool rsd_hold_active(const struct rsd_hold *hd);

/**
 * rsd_hold_free() - Free a hold object.
 * @hd: the hold; NULL is ignored.
 *
 * An unreleased hold is abandoned: released with a warning.
 *
 * Freeing it a second time aborts the process with "librsd:
 * rsd_hold_free(): double free of struct rsd_hold" on stderr, as glibc's
 * free() aborts on a double free, rather than corrupt the manager.
 *
 * Context: Any thread; not from a source callback.
 */
void rsd_hold_free(struct rsd_hold *hd);

/**
 * DOC: rsd_reserve - Named reservations of budget bytes
 *
 * A reservation takes bytes from a location's remaining budget under a
 * label; the admission rule counts them as if they were charged, so later
 * charges there must fit beside them. No memory is allocated. Scopes make
 * and release reservations of their own. A value a kernel produces goes
 * into the reservation made for it with rsd_adopt_reserved(). See
 * Documentation/reference.md §8.7 and §8.10.
 */
/**
 * rsd_reserve() - Reserve bytes of a location's budget.
 * @m: the manager.
 * @at: the location.
 * @nbytes: the bytes to reserve.
 * @label: a non-blank name, copied.
 * @out: receives the reservation on success.
 *
 * Pure accounting: no memory is allocated, but the remaining budget of @at
 * shrinks by @nbytes, so the admission rule counts it.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @label or @out is NULL; @at's kind is not one of the
 *   three.
 * * -RSD_EINVAL - @label is blank; @at is a CUDA location outside 0..127
 *   or not available; an unbudgeted byte counter would overflow.
 * * -RSD_EREENTRANT - called on the thread of a running source load of @m,
 *   or from inside a transition of @m on its own thread.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EBUDGET - @nbytes does not fit the remaining budget.
 * * -RSD_ENOMEM - bookkeeping memory ran out.
 */
int rsd_reserve(struct rsd_manager *m, struct rsd_location at, uint64_t nbytes, const char *label,
		struct rsd_reservation **out);

/**
 * rsd_reservation_release() - Return a reservation's bytes.
 * @r: the reservation.
 *
 * Releasing a released reservation succeeds and does nothing.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @r is NULL.
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 */
int rsd_reservation_release(struct rsd_reservation *r);

/**
 * rsd_reservation_active() - Whether a reservation is still unreleased.
 * @r: the reservation.
 *
 * Context: Any thread; lock-free.
 * Return: true until released; false for NULL.
 */
bool rsd_reservation_active(const struct rsd_reservation *r);

/**
 * rsd_reservation_nbytes() - The bytes a reservation still reserves.
 * @r: the reservation.
 *
 * Its size less what rsd_adopt_reserved() moved out of it.
 *
 * Context: Any thread; lock-free, so not while another thread adopts into
 * @r.
 * Return: the reserved bytes; 0 for NULL.
 */
uint64_t rsd_reservation_nbytes(const struct rsd_reservation *r);

/**
 * rsd_reservation_label() - A reservation's label.
 * @r: the reservation.
 *
 * Context: Any thread; lock-free.
 * Return: the label, owned by the reservation; NULL for NULL.
 */
const char *rsd_reservation_label(const struct rsd_reservation *r);

/**
 * rsd_adopt_reserved() - Adopt a produced value into a reservation made for it.
 * @r: an active reservation; it names the manager and the location.
 * @value: the output, a resident at @r's location (allocated uncharged with
 *	rsd_resident_alloc()); on success it is the manager's, on failure it
 *	stays the caller's.
 * @mode: RSD_EXCLUSIVE or RSD_REPLICABLE.
 * @producer_stream: for a CUDA reservation, the stream on which work still
 *	writing @value is queued (a kernel launched before this call), or NULL
 *	when @value is complete; NULL for a host reservation.
 * @out: receives the new handle on success.
 *
 * rsd_adopt() of @value at @r's location, charged out of @r: in one hold
 * of the transition lock @r shrinks by the value's charge (its storage
 * bytes, at least its logical bytes) and the value is installed with that
 * charge, so the location's used bytes grow by what its reserved bytes
 * lose, its total never changes and nothing is admitted. The charge must
 * fit what @r still reserves; a reservation brought to 0 bytes stays active
 * until released. state_version steps once, as for rsd_adopt().
 *
 * With @producer_stream an event is recorded on it, and until a reap sees
 * that event complete the new materialization is *filling*, as the
 * destination of a copy a not-waiting call queued (reference.md §22):
 * drop, move and discard of it are -RSD_EINUSE; a lease on another CUDA
 * stream orders that stream after the event on the device; a host lease,
 * and a copy of it to another location, wait for the event first; a
 * waiting close waits for it. Its completion does not step state_version.
 * If the event reports a device error, the output is removed as a failed
 * queued copy's destination is, and the error is returned once.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @r, @value or @out is NULL; @mode is unknown;
 *   @producer_stream is not a stream of the manager's driver.
 * * -RSD_ELIFETIME - @r has been released.
 * * -RSD_ECLOSED - the manager is closed or destroyed.
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 * * -RSD_EINVAL - @producer_stream is given for a host reservation, or is
 *   a stream of another device.
 * * -RSD_EMATERIAL - @value does not conform to @r's location (it lives
 *   elsewhere, or mixes pinned and pageable storage).
 * * -RSD_EOWNERSHIP - @value is already owned by a manager, or its storage
 *   aliases another value's.
 * * -RSD_EBUDGET - the value's charge exceeds what @r still reserves (the
 *   message names both).
 * * -RSD_ENOMEM - bookkeeping memory ran out.
 * * -RSD_EDEVICE - reaping a pending lease's event, or recording the
 *   producer's event, failed.
 */
int rsd_adopt_reserved(struct rsd_reservation *r, struct rsd_resident *value,
		       enum rsd_replica_mode mode, void *producer_stream, struct rsd_handle *out);

/**
 * rsd_reservation_free() - Free a reservation object.
 * @r: the reservation; NULL is ignored.
 *
 * An unreleased reservation is abandoned: released with a warning.
 *
 * Freeing it a second time aborts the process with "librsd:
 * rsd_reservation_free(): double free of struct rsd_reservation" on stderr, as glibc's
 * free() aborts on a double free, rather than corrupt the manager.
 *
 * Context: Any thread; not from a source callback.
 */
void rsd_reservation_free(struct rsd_reservation *r);

#ifdef __cplusplus
}
#endif
#endif
