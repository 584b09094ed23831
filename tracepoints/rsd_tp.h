/* SPDX-License-Identifier: MIT */
/* The LTTng-UST event macros below are laid out by hand: */
/* clang-format off */
/*
 * The LTTng-UST 2.13 tracepoint provider "rsd".
 *
 * One event per thing an operator wants to see on a timeline: each completed
 * transition (including no-ops and discards), adopt and register_source, the
 * lifetime objects (leases, holds, reservations), plans, controller decisions,
 * budget rejections, and the per-location accounting after each commit.
 * Documentation/tracing.md lists every field; keep it in step with this file.
 *
 * Nothing in librsd fires these directly: lib/trace.h wraps each event in a
 * static inline hook that formats location names only once the event is
 * enabled. This header is read several times by <lttng/tracepoint-event.h>
 * when tracepoints/rsd_tp.c creates the probes (hence the MULTI_READ guard).
 *
 * Locations appear as three fields, <name>_kind (enum rsd_location_kind as an
 * integer: 0 pageable, 1 pinned, 2 cuda), <name>_device (-1 for host kinds)
 * and <name> (the canonical name, "pageable-host", "cuda:0", ...). An absent
 * optional location has kind and device -1 and the name "none"; lib/trace.h
 * writes "none" for every absent string (babeltrace2 2.0.4 misreads "").
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER rsd

/*
 * <lttng/tracepoint-event.h> re-includes this file from its own directory, so
 * the name must resolve through the include path: the build compiles
 * tracepoints/ with -I<source root> (see Documentation/tracing.md).
 */
#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "tracepoints/rsd_tp.h"

#if !defined(RSD_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define RSD_TP_H

#include <stdint.h>

#include <lttng/tracepoint.h>

#include <rsd/action.h>
#include <rsd/controller.h>
#include <rsd/location.h>

/* The three fields of a location passed as a pointer plus its name. */
#define RSD_TP_LOC_FIELDS(_field, _loc, _name)					\
	lttng_ust_field_integer(int, _field##_kind, (int)(_loc)->kind)		\
	lttng_ust_field_integer(int, _field##_device, (_loc)->device)		\
	lttng_ust_field_string(_field, _name)

/* The same for an optional location of a transition report. */
#define RSD_TP_OPT_LOC_FIELDS(_field, _has, _loc, _name)			\
	lttng_ust_field_integer(int, _field##_kind, (_has) ? (int)(_loc).kind : -1) \
	lttng_ust_field_integer(int, _field##_device, (_has) ? (_loc).device : -1) \
	lttng_ust_field_string(_field, _name)

/*
 * A completed action (reference.md §4.10). "location" is the action's own
 * target (ensure/drop: at, move: to; discard: absent), "from" the explicit
 * source of a move; "source" and "destination" are what the executor chose.
 * duration_ns = completed_at_ns - started_at_ns. The allocator_* fields are
 * meaningful only when has_allocator is 1.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, transition,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const struct rsd_transition *, t,
			  const char *, action_name, const char *, location_name,
			  const char *, from_name, const char *, source_name,
			  const char *, destination_name, const char *, reason),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, handle_id, t->action.handle.id)
		lttng_ust_field_string(action, action_name)
		RSD_TP_OPT_LOC_FIELDS(location, t->action.kind != RSD_ACT_DISCARD,
				      t->action.location, location_name)
		RSD_TP_OPT_LOC_FIELDS(from, t->action.has_from, t->action.from, from_name)
		RSD_TP_OPT_LOC_FIELDS(source, t->has_source, t->source, source_name)
		RSD_TP_OPT_LOC_FIELDS(destination, t->has_destination, t->destination,
				      destination_name)
		lttng_ust_field_integer(uint8_t, no_op, t->no_op)
		lttng_ust_field_string(reason, reason)
		lttng_ust_field_integer(uint64_t, logical_nbytes, t->logical_nbytes)
		lttng_ust_field_integer(uint64_t, storage_nbytes, t->storage_nbytes)
		lttng_ust_field_integer(uint64_t, started_at_ns, t->started_at_ns)
		lttng_ust_field_integer(uint64_t, completed_at_ns, t->completed_at_ns)
		lttng_ust_field_integer(uint64_t, duration_ns,
					t->completed_at_ns >= t->started_at_ns ?
					t->completed_at_ns - t->started_at_ns : 0)
		lttng_ust_field_integer(uint8_t, has_allocator, t->has_allocator)
		lttng_ust_field_integer(int, allocator_device,
					t->has_allocator ? t->allocator_device : -1)
		lttng_ust_field_integer(uint64_t, allocator_allocated_bytes_before,
					t->allocator_allocated_bytes_before)
		lttng_ust_field_integer(uint64_t, allocator_reserved_bytes_before,
					t->allocator_reserved_bytes_before)
		lttng_ust_field_integer(uint64_t, allocator_allocated_bytes_after,
					t->allocator_allocated_bytes_after)
		lttng_ust_field_integer(uint64_t, allocator_reserved_bytes_after,
					t->allocator_reserved_bytes_after)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, transition, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* adopt: a caller-built value now owned by the manager, charged at "at". */
LTTNG_UST_TRACEPOINT_EVENT(rsd, adopt,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, handle_id,
			  const struct rsd_location *, at, const char *, at_name,
			  uint64_t, charged_nbytes),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, handle_id, handle_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint64_t, charged_nbytes, charged_nbytes)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, adopt, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * adopt_reserved: a produced value adopted into a reservation at "at": its
 * charged_nbytes moved out of the reservation, which keeps remaining_nbytes.
 * filling: 1 when a producer stream still writes it; a later
 * rsd:copy_complete of the same handle and location says it is complete.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, adopt_reserved,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, handle_id,
			  const struct rsd_location *, at, const char *, at_name,
			  uint64_t, charged_nbytes, uint64_t, reservation_id, const char *, label,
			  uint64_t, remaining_nbytes, uint8_t, filling),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, handle_id, handle_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint64_t, charged_nbytes, charged_nbytes)
		lttng_ust_field_integer(uint64_t, reservation_id, reservation_id)
		lttng_ust_field_string(label, label)
		lttng_ust_field_integer(uint64_t, remaining_nbytes, remaining_nbytes)
		lttng_ust_field_integer(uint8_t, filling, filling)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, adopt_reserved, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* register_source: a value whose bytes a source callback can produce. */
LTTNG_UST_TRACEPOINT_EVENT(rsd, register_source,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, handle_id,
			  const struct rsd_location *, source_location, const char *, source_name,
			  uint64_t, charged_nbytes),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, handle_id, handle_id)
		RSD_TP_LOC_FIELDS(source_location, source_location, source_name)
		lttng_ust_field_integer(uint64_t, charged_nbytes, charged_nbytes)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, register_source, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT(rsd, lease_acquire,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, lease_id,
			  const struct rsd_location *, at, const char *, at_name,
			  uint32_t, nhandles),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, lease_id, lease_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint32_t, nhandles, nhandles)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, lease_acquire, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * nstreams: streams the caller named at release; wait: the release waited
 * for them; pending: the lease stays pending until its events complete
 * (a later rsd:lease_reap closes it).
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, lease_release,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, lease_id,
			  const struct rsd_location *, at, const char *, at_name,
			  uint32_t, nstreams, uint8_t, waited, uint8_t, pending),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, lease_id, lease_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint32_t, nstreams, nstreams)
		lttng_ust_field_integer(uint8_t, wait, waited)
		lttng_ust_field_integer(uint8_t, pending, pending)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, lease_release, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* A pending lease whose events completed; pending_ns: release to reap. */
LTTNG_UST_TRACEPOINT_EVENT(rsd, lease_reap,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, lease_id, uint64_t, pending_ns),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, lease_id, lease_id)
		lttng_ust_field_integer(uint64_t, pending_ns, pending_ns)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, lease_reap, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * A copy a not-waiting call queued was seen complete at a reap point (or by
 * a wait); queued_ns: queued to seen; error: 0, or the device's negative
 * RSD_E* code when the copy failed (it was undone).
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, copy_complete,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, handle_id,
			  const struct rsd_location *, at, const char *, at_name,
			  uint64_t, queued_ns, int32_t, error),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, handle_id, handle_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint64_t, queued_ns, queued_ns)
		lttng_ust_field_integer(int32_t, error, error)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, copy_complete, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * Events with the same fields share a class (holds, reservations: one
 * class, two events each, so "rsd:hold_*" or either one can be enabled).
 * The class and each of its instances take the same argument list, named
 * once here.
 */
#undef RSD_TP_HOLD_ARGS
#define RSD_TP_HOLD_ARGS							\
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, hold_id,		\
			  const struct rsd_location *, at, const char *, at_name,	\
			  uint32_t, nhandles)
#undef RSD_TP_RESV_ARGS
#define RSD_TP_RESV_ARGS							\
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, reservation_id,	\
			  const struct rsd_location *, at, const char *, at_name,	\
			  uint64_t, nbytes, const char *, label)

LTTNG_UST_TRACEPOINT_EVENT_CLASS(rsd, hold_class,
	RSD_TP_HOLD_ARGS,
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, hold_id, hold_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint32_t, nhandles, nhandles)
	)
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(rsd, hold_class, rsd, hold_acquire,
	RSD_TP_HOLD_ARGS)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, hold_acquire, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(rsd, hold_class, rsd, hold_release,
	RSD_TP_HOLD_ARGS)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, hold_release, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT_CLASS(rsd, reservation_class,
	RSD_TP_RESV_ARGS,
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, reservation_id, reservation_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint64_t, nbytes, nbytes)
		lttng_ust_field_string(label, label)
	)
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(rsd, reservation_class, rsd, reservation_acquire,
	RSD_TP_RESV_ARGS)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, reservation_acquire, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(rsd, reservation_class, rsd, reservation_release,
	RSD_TP_RESV_ARGS)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, reservation_release, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * A charge refused by the admission rule (reference.md §7.1): requested >
 * budget - used - reserved at "at". available is that right-hand side
 * (0 when used + reserved already exceed the budget).
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, budget_reject,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const struct rsd_location *, at,
			  const char *, at_name, uint64_t, budget, uint64_t, used,
			  uint64_t, reserved, uint64_t, in_flight, uint64_t, held,
			  uint64_t, requested, uint64_t, available),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint64_t, budget, budget)
		lttng_ust_field_integer(uint64_t, used, used)
		lttng_ust_field_integer(uint64_t, reserved, reserved)
		lttng_ust_field_integer(uint64_t, in_flight, in_flight)
		lttng_ust_field_integer(uint64_t, held, held)
		lttng_ust_field_integer(uint64_t, requested, requested)
		lttng_ust_field_integer(uint64_t, available, available)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, budget_reject, LTTNG_UST_TRACEPOINT_LOGLEVEL_WARNING)

/*
 * A refusal of the admission rule that librsd answered itself by waiting
 * (how = "wait": for a queued copy to free room) or by committing the
 * plan's queued copies (how = "flush") and trying again; fired after the
 * rsd:budget_reject it answers, "at" being that event's location. A
 * rsd:budget_reject no rsd:budget_retry answers was refused to the caller.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, budget_retry,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const struct rsd_location *, at,
			  const char *, at_name, const char *, how),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_string(how, how)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, budget_retry, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
/*
 * A manager was created (fired before its first rsd:state events): label is
 * struct rsd_manager_config.label ("none" without one), nbudgets the
 * budgeted locations, ndevices the CUDA devices its driver sees.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, manager_create,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const char *, label, uint32_t, nbudgets,
			  int, ndevices),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_string(label, label)
		lttng_ust_field_integer(uint32_t, nbudgets, nbudgets)
		lttng_ust_field_integer(int, ndevices, ndevices)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, manager_create, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
/*
 * Work the simulated device ran (fired by its engine when the item ends;
 * no manager: a device serves any): what ("kernel" or "copy"), on which
 * engine ("compute", "copy-in": to the device, "copy-out": to host memory),
 * a copy's bytes and its source and destination names ("none" for a
 * kernel), and how long it ran on the host, duration_ns, ending at the
 * event. The copies and kernels the device executed, beside the
 * transitions that asked for them.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, device_work,
	LTTNG_UST_TP_ARGS(int, device, const char *, what, const char *, engine,
			  uint64_t, nbytes, const char *, source_name,
			  const char *, destination_name, uint64_t, duration_ns),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(int, device, device)
		lttng_ust_field_string(what, what)
		lttng_ust_field_string(engine, engine)
		lttng_ust_field_integer(uint64_t, nbytes, nbytes)
		lttng_ust_field_string(source, source_name)
		lttng_ust_field_string(destination, destination_name)
		lttng_ust_field_integer(uint64_t, duration_ns, duration_ns)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, device_work, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
/*
 * One queued copy on its engine, fired by the driver when the engine takes
 * it (copy_start, with its source and destination) and when it is done
 * (copy_end). engine: "h2d", "d2h",
 * "peer" (device to device; through host memory when the pair has no peer
 * access), "d2d" (within one device) or "h2h"; device: the
 * device whose engine runs it (a peer copy's source). copy_id pairs the two
 * events of a copy within a process and device. copy_end's duration_ns is
 * how long the engine ran it; clock says whose clock measured it: "host"
 * (the simulated device) or "gpu" (cudaEventElapsedTime). Unlike
 * rsd:copy_complete (an output a lease saw complete), these are the
 * driver's own copies, one per queued copy.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, copy_start,
	LTTNG_UST_TP_ARGS(int, device, const char *, engine, uint64_t, copy_id,
			  uint64_t, nbytes, const char *, source_name,
			  const char *, destination_name),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(int, device, device)
		lttng_ust_field_string(engine, engine)
		lttng_ust_field_integer(uint64_t, copy_id, copy_id)
		lttng_ust_field_integer(uint64_t, nbytes, nbytes)
		lttng_ust_field_string(source, source_name)
		lttng_ust_field_string(destination, destination_name)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, copy_start, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_EVENT(rsd, copy_end,
	LTTNG_UST_TP_ARGS(int, device, const char *, engine, uint64_t, copy_id,
			  uint64_t, nbytes, uint64_t, duration_ns, const char *, clock),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(int, device, device)
		lttng_ust_field_string(engine, engine)
		lttng_ust_field_integer(uint64_t, copy_id, copy_id)
		lttng_ust_field_integer(uint64_t, nbytes, nbytes)
		lttng_ust_field_integer(uint64_t, duration_ns, duration_ns)
		lttng_ust_field_string(clock, clock)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, copy_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
/*
 * A device that failed for good, as one manager settles it: first 1 when
 * its location was quarantined by this sweep; removed: copies there that
 * left the books (their storage never given back to the dead context);
 * kept: copies a lease, hold or pending event still protects, marked
 * failed until it ends; lost: values whose only copy was there.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, device_lost,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const struct rsd_location *, at,
			  const char *, at_name, uint8_t, first, uint64_t, removed,
			  uint64_t, kept, uint64_t, lost),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint8_t, first, first)
		lttng_ust_field_integer(uint64_t, removed, removed)
		lttng_ust_field_integer(uint64_t, kept, kept)
		lttng_ust_field_integer(uint64_t, lost, lost)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, device_lost, LTTNG_UST_TRACEPOINT_LOGLEVEL_WARNING)
/* kind: "execute", "scope-enter" or "scope-exit". */
LTTNG_UST_TRACEPOINT_EVENT(rsd, plan_begin,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const char *, name, const char *, kind),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_string(name, name)
		lttng_ust_field_string(kind, kind)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, plan_begin, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * phase: the last phase the plan reached ("validate", "reclaim", "reserve",
 * "enter", "exit", "done", ...); outcome: 0 or the negative RSD_E* code;
 * ntransitions: transitions the plan completed (and fired rsd:transition for).
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, plan_end,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const char *, name, const char *, kind,
			  const char *, phase, int, outcome, uint32_t, ntransitions),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_string(name, name)
		lttng_ust_field_string(kind, kind)
		lttng_ust_field_string(phase, phase)
		lttng_ust_field_integer(int, outcome, outcome)
		lttng_ust_field_integer(uint32_t, ntransitions, ntransitions)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, plan_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* A controller decision: request name, evictions chosen, search effort. */
LTTNG_UST_TRACEPOINT_EVENT(rsd, decision,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const char *, request, uint32_t, nevictions,
			  uint64_t, explored_states, int, outcome),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_string(request, request)
		lttng_ust_field_integer(uint32_t, nevictions, nevictions)
		lttng_ust_field_integer(uint64_t, explored_states, explored_states)
		lttng_ust_field_integer(int, outcome, outcome)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, decision, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/*
 * A decision that failed because a location could not admit its request
 * (fired after rsd:decision): what protects the bytes there, as
 * struct rsd_blockers has it; detail is rsd_blockers_describe()'s text.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, decision_blocked,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, const char *, request, int, outcome,
			  uint64_t, explored_states, const struct rsd_blockers *, b,
			  const char *, at_name, const char *, detail),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_string(request, request)
		lttng_ust_field_integer(int, outcome, outcome)
		lttng_ust_field_integer(uint64_t, explored_states, explored_states)
		RSD_TP_LOC_FIELDS(at, &b->location, at_name)
		lttng_ust_field_integer(uint64_t, requested, b->requested_bytes)
		lttng_ust_field_integer(uint64_t, short_bytes, b->short_bytes)
		lttng_ust_field_integer(uint64_t, budget, b->budget_bytes)
		lttng_ust_field_integer(uint64_t, used, b->used_bytes)
		lttng_ust_field_integer(uint64_t, reserved, b->reserved_bytes)
		lttng_ust_field_integer(uint64_t, freeable, b->freeable_bytes)
		lttng_ust_field_integer(uint64_t, blocked, b->blocked_bytes)
		lttng_ust_field_integer(uint64_t, leased, b->lease_bytes)
		lttng_ust_field_integer(uint64_t, pending, b->pending_bytes)
		lttng_ust_field_integer(uint64_t, held, b->hold_bytes)
		lttng_ust_field_integer(uint64_t, arriving, b->arriving_bytes)
		lttng_ust_field_integer(uint64_t, nblocked, b->nblocked)
		lttng_ust_field_integer(uint64_t, npending_leases, b->npending)
		lttng_ust_field_string(detail, detail)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, decision_blocked, LTTNG_UST_TRACEPOINT_LOGLEVEL_WARNING)

/*
 * Accounting at one location after the commit that produced state_version,
 * fired for locations whose used or reserved bytes changed and once when a
 * location first appears: the series rsd-trace plots as managed bytes over
 * time. budget: the location's budget when has_budget is 1 (else 0);
 * arriving: transfers admitted there and not yet committed.
 */
LTTNG_UST_TRACEPOINT_EVENT(rsd, state,
	LTTNG_UST_TP_ARGS(uint64_t, manager_id, uint64_t, state_version,
			  const struct rsd_location *, at, const char *, at_name,
			  uint64_t, used, uint64_t, reserved, uint8_t, has_budget,
			  uint64_t, budget, uint32_t, arriving),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, manager_id, manager_id)
		lttng_ust_field_integer(uint64_t, state_version, state_version)
		RSD_TP_LOC_FIELDS(at, at, at_name)
		lttng_ust_field_integer(uint64_t, used, used)
		lttng_ust_field_integer(uint64_t, reserved, reserved)
		lttng_ust_field_integer(uint8_t, has_budget, has_budget)
		lttng_ust_field_integer(uint64_t, budget, has_budget ? budget : 0)
		lttng_ust_field_integer(uint32_t, arriving, arriving)
	)
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(rsd, state, LTTNG_UST_TRACEPOINT_LOGLEVEL_DEBUG)

#endif /* RSD_TP_H */

#include <lttng/tracepoint-event.h>
/* clang-format on */
