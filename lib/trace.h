/* SPDX-License-Identifier: MIT */
/*
 * Trace hooks: the only way librsd fires the "rsd" LTTng-UST tracepoints
 * (tracepoints/rsd_tp.h; fields in Documentation/tracing.md).
 *
 * Built with RSD_TRACE=1 (make TRACE=1, the default) each hook is a static
 * inline function whose disabled cost is one load and one predicted-not-taken
 * branch: the location names and the other payload are formatted only after
 * lttng_ust_tracepoint_enabled() says a session records the event. Built with
 * RSD_TRACE 0 or undefined (make TRACE=0) the hooks are empty and this header
 * pulls in nothing from LTTng, so librsd builds where LTTng-UST is absent.
 *
 * Callers may assume the hooks never fail, never allocate, never take a lock
 * of librsd and never touch the thread's error record, so they can be called
 * under the manager's transition lock and on failure paths alike. They read
 * their arguments only during the call.
 *
 * Where the core calls them:
 *   rsd_trace_transition       after each completed action, no-ops and
 *                              discards included, inside plans and scopes too
 *   rsd_trace_adopt, rsd_trace_adopt_reserved, rsd_trace_register_source
 *                              after the value is committed
 *   rsd_trace_lease_*, rsd_trace_hold, rsd_trace_reservation
 *                              after the lifetime object is created/released
 *   rsd_trace_budget_reject    where the admission rule refuses a charge
 *   rsd_trace_budget_retry     where librsd answers that refusal itself by
 *                              waiting or flushing and trying again
 *   rsd_trace_manager_create   once a manager is built, before its first
 *                              publication
 *   rsd_trace_device_work      when the simulated device's engine ends a
 *                              copy or a kernel (lib/drivers/simdev*.c)
 *   rsd_trace_copy_start/end   when a driver's engine takes a queued copy
 *                              and when it is done (lib/drivers/simdev*.c;
 *                              the CUDA driver once a sync or query sees
 *                              the copy's end event complete)
 *   rsd_trace_device_lost      when a lost device's location is quarantined,
 *                              and at each later sweep that settles copies
 *                              there (lib/core/devloss.c)
 *   rsd_trace_plan_begin/end   around execute and scope entry/exit
 *   rsd_trace_decision         after the controller decides
 *   rsd_trace_decision_blocked after it, when a location could not admit
 *                              the request (rsd_last_blockers())
 *   rsd_trace_state            after a commit, once per location whose used
 *                              or reserved bytes changed, and once when a
 *                              location first appears (its starting point),
 *                              with its budget and arriving transfers
 */
#ifndef RSD_TRACE_H
#define RSD_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/rsd.h>

#include "internal.h"

/*
 * The engine a copy from src to dst runs on, as rsd:copy_start/end name it,
 * and in *device the device that owns it (a peer copy's source; device, the
 * caller's fallback, for a copy between host locations). Both builds.
 */
static inline const char *rsd__trace_copy_engine(struct rsd_location src, struct rsd_location dst,
						 int *device)
{
	if (src.kind == RSD_CUDA && dst.kind == RSD_CUDA) {
		*device = src.device;
		return src.device == dst.device ? "d2d" : "peer";
	}
	if (dst.kind == RSD_CUDA) {
		*device = dst.device;
		return "h2d";
	}
	if (src.kind == RSD_CUDA) {
		*device = src.device;
		return "d2h";
	}
	return "h2h";
}

#if defined(RSD_TRACE) && RSD_TRACE

#include "../tracepoints/rsd_tp.h"

static inline const char *rsd__trace_action_name(enum rsd_action_kind kind)
{
	return (unsigned)kind <= RSD_ACT_DISCARD ? rsd_action_kind_name(kind) : "<invalid>";
}

/*
 * Absent strings are written as "none", never "": babeltrace2 2.0.4 (Debian
 * 12) shows an empty string field with the value the same field had in an
 * earlier event, and rsd-trace reads through the same decoder.
 */
#define RSD_TRACE_NONE "none"

static inline const char *rsd__trace_str(const char *s)
{
	return s && *s ? s : RSD_TRACE_NONE;
}

/* Name of an optional location; "none" when absent. */
static inline const char *rsd__trace_opt_name(bool has, struct rsd_location loc, char *buf,
					      size_t len)
{
	return has ? rsd_location_name(loc, buf, len) : RSD_TRACE_NONE;
}

/* Whether a session records transitions: the executor then stamps reports
 * nobody asked for, so the event carries a duration. */
static inline bool rsd_trace_transition_enabled(void)
{
	return lttng_ust_tracepoint_enabled(rsd, transition);
}

static inline void rsd_trace_transition(uint64_t manager_id, const struct rsd_transition *t)
{
	char at[RSD_LOCATION_NAME_MAX], from[RSD_LOCATION_NAME_MAX];
	char src[RSD_LOCATION_NAME_MAX], dst[RSD_LOCATION_NAME_MAX];
	const char *at_name, *from_name, *src_name, *dst_name;

	if (!lttng_ust_tracepoint_enabled(rsd, transition) || !t)
		return;
	at_name = rsd__trace_opt_name(t->action.kind != RSD_ACT_DISCARD, t->action.location, at,
				      sizeof(at));
	from_name = rsd__trace_opt_name(t->action.has_from, t->action.from, from, sizeof(from));
	src_name = rsd__trace_opt_name(t->has_source, t->source, src, sizeof(src));
	dst_name = rsd__trace_opt_name(t->has_destination, t->destination, dst, sizeof(dst));
	lttng_ust_tracepoint(rsd, transition, manager_id, t, rsd__trace_action_name(t->action.kind),
			     at_name, from_name, src_name, dst_name, rsd__trace_str(t->reason));
}

static inline void rsd_trace_adopt(uint64_t manager_id, uint64_t handle_id, struct rsd_location at,
				   uint64_t charged_nbytes)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, adopt))
		return;
	lttng_ust_tracepoint(rsd, adopt, manager_id, handle_id, &at,
			     rsd_location_name(at, name, sizeof(name)), charged_nbytes);
}

static inline void rsd_trace_adopt_reserved(uint64_t manager_id, uint64_t handle_id,
					    struct rsd_location at, uint64_t charged_nbytes,
					    uint64_t reservation_id, const char *label,
					    uint64_t remaining_nbytes, bool filling)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, adopt_reserved))
		return;
	lttng_ust_tracepoint(rsd, adopt_reserved, manager_id, handle_id, &at,
			     rsd_location_name(at, name, sizeof(name)), charged_nbytes,
			     reservation_id, rsd__trace_str(label), remaining_nbytes,
			     (uint8_t)filling);
}

static inline void rsd_trace_register_source(uint64_t manager_id, uint64_t handle_id,
					     struct rsd_location source_location,
					     uint64_t charged_nbytes)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, register_source))
		return;
	lttng_ust_tracepoint(rsd, register_source, manager_id, handle_id, &source_location,
			     rsd_location_name(source_location, name, sizeof(name)),
			     charged_nbytes);
}

static inline void rsd_trace_lease_acquire(uint64_t manager_id, uint64_t lease_id,
					   struct rsd_location at, uint32_t nhandles)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, lease_acquire))
		return;
	lttng_ust_tracepoint(rsd, lease_acquire, manager_id, lease_id, &at,
			     rsd_location_name(at, name, sizeof(name)), nhandles);
}

static inline void rsd_trace_lease_release(uint64_t manager_id, uint64_t lease_id,
					   struct rsd_location at, uint32_t nstreams, bool wait,
					   bool pending)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, lease_release))
		return;
	lttng_ust_tracepoint(rsd, lease_release, manager_id, lease_id, &at,
			     rsd_location_name(at, name, sizeof(name)), nstreams, (uint8_t)wait,
			     (uint8_t)pending);
}

static inline void rsd_trace_lease_reap(uint64_t manager_id, uint64_t lease_id, uint64_t pending_ns)
{
	lttng_ust_tracepoint(rsd, lease_reap, manager_id, lease_id, pending_ns);
}

static inline void rsd_trace_copy_complete(uint64_t manager_id, uint64_t handle_id,
					   struct rsd_location at, uint64_t queued_ns, int error)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, copy_complete))
		return;
	lttng_ust_tracepoint(rsd, copy_complete, manager_id, handle_id, &at,
			     rsd_location_name(at, name, sizeof(name)), queued_ns, (int32_t)error);
}

static inline void rsd_trace_hold(uint64_t manager_id, uint64_t hold_id, struct rsd_location at,
				  uint32_t nhandles, bool acquire)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (acquire) {
		if (!lttng_ust_tracepoint_enabled(rsd, hold_acquire))
			return;
		lttng_ust_tracepoint(rsd, hold_acquire, manager_id, hold_id, &at,
				     rsd_location_name(at, name, sizeof(name)), nhandles);
	} else {
		if (!lttng_ust_tracepoint_enabled(rsd, hold_release))
			return;
		lttng_ust_tracepoint(rsd, hold_release, manager_id, hold_id, &at,
				     rsd_location_name(at, name, sizeof(name)), nhandles);
	}
}

static inline void rsd_trace_reservation(uint64_t manager_id, uint64_t reservation_id,
					 struct rsd_location at, uint64_t nbytes, const char *label,
					 bool acquire)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (acquire) {
		if (!lttng_ust_tracepoint_enabled(rsd, reservation_acquire))
			return;
		lttng_ust_tracepoint(rsd, reservation_acquire, manager_id, reservation_id, &at,
				     rsd_location_name(at, name, sizeof(name)), nbytes,
				     rsd__trace_str(label));
	} else {
		if (!lttng_ust_tracepoint_enabled(rsd, reservation_release))
			return;
		lttng_ust_tracepoint(rsd, reservation_release, manager_id, reservation_id, &at,
				     rsd_location_name(at, name, sizeof(name)), nbytes,
				     rsd__trace_str(label));
	}
}

/* The refusing location's ledger, every term; available is its free bytes. */
static inline void rsd_trace_budget_reject(uint64_t manager_id, struct rsd_location at,
					   const struct rsd__ledger *l, uint64_t requested)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, budget_reject))
		return;
	lttng_ust_tracepoint(rsd, budget_reject, manager_id, &at,
			     rsd_location_name(at, name, sizeof(name)), l->budget, l->used,
			     l->reserved, l->in_flight, l->held, requested, rsd__ledger_free(l));
}

static inline void rsd_trace_budget_retry(uint64_t manager_id, struct rsd_location at,
					  const char *how)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, budget_retry))
		return;
	lttng_ust_tracepoint(rsd, budget_retry, manager_id, &at,
			     rsd_location_name(at, name, sizeof(name)), rsd__trace_str(how));
}

static inline void rsd_trace_manager_create(uint64_t manager_id, const char *label,
					    uint32_t nbudgets, int ndevices)
{
	lttng_ust_tracepoint(rsd, manager_create, manager_id, rsd__trace_str(label), nbudgets,
			     ndevices);
}

/* Whether a session records device work: the simulator then reads the
 * clock at each item's start. */
static inline bool rsd_trace_device_work_enabled(void)
{
	return lttng_ust_tracepoint_enabled(rsd, device_work);
}

/* A copy has its two locations; a kernel passes has_locations false. */
static inline void rsd_trace_device_work(int device, bool kernel, const char *engine,
					 uint64_t nbytes, bool has_locations,
					 struct rsd_location src, struct rsd_location dst,
					 uint64_t duration_ns)
{
	char sname[RSD_LOCATION_NAME_MAX], dname[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, device_work))
		return;
	lttng_ust_tracepoint(rsd, device_work, device, kernel ? "kernel" : "copy",
			     rsd__trace_str(engine), nbytes,
			     rsd__trace_opt_name(has_locations, src, sname, sizeof(sname)),
			     rsd__trace_opt_name(has_locations, dst, dname, sizeof(dname)),
			     duration_ns);
}

/* Whether a session records copies on their engines. */
static inline bool rsd_trace_copy_enabled(void)
{
	return lttng_ust_tracepoint_enabled(rsd, copy_start) ||
	       lttng_ust_tracepoint_enabled(rsd, copy_end);
}

static inline void rsd_trace_copy_start(int device, const char *engine, uint64_t copy_id,
					uint64_t nbytes, struct rsd_location src,
					struct rsd_location dst)
{
	char sname[RSD_LOCATION_NAME_MAX], dname[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, copy_start))
		return;
	lttng_ust_tracepoint(rsd, copy_start, device, rsd__trace_str(engine), copy_id, nbytes,
			     rsd_location_name(src, sname, sizeof(sname)),
			     rsd_location_name(dst, dname, sizeof(dname)));
}

/* gpu_clock: duration_ns is the GPU's (cudaEventElapsedTime), not the host's. */
static inline void rsd_trace_copy_end(int device, const char *engine, uint64_t copy_id,
				      uint64_t nbytes, uint64_t duration_ns, bool gpu_clock)
{
	if (!lttng_ust_tracepoint_enabled(rsd, copy_end))
		return;
	lttng_ust_tracepoint(rsd, copy_end, device, rsd__trace_str(engine), copy_id, nbytes,
			     duration_ns, gpu_clock ? "gpu" : "host");
}

static inline void rsd_trace_device_lost(uint64_t manager_id, struct rsd_location at, bool first,
					 uint64_t removed, uint64_t kept, uint64_t lost)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, device_lost))
		return;
	lttng_ust_tracepoint(rsd, device_lost, manager_id, &at,
			     rsd_location_name(at, name, sizeof(name)), (uint8_t)first, removed,
			     kept, lost);
}

static inline void rsd_trace_plan_begin(uint64_t manager_id, const char *name, const char *kind)
{
	lttng_ust_tracepoint(rsd, plan_begin, manager_id, rsd__trace_str(name),
			     rsd__trace_str(kind));
}

static inline void rsd_trace_plan_end(uint64_t manager_id, const char *name, const char *kind,
				      const char *phase, int outcome, uint32_t ntransitions)
{
	lttng_ust_tracepoint(rsd, plan_end, manager_id, rsd__trace_str(name), rsd__trace_str(kind),
			     rsd__trace_str(phase), outcome, ntransitions);
}

static inline void rsd_trace_decision(uint64_t manager_id, const char *request, uint32_t nevictions,
				      uint64_t explored_states, int outcome)
{
	lttng_ust_tracepoint(rsd, decision, manager_id, rsd__trace_str(request), nevictions,
			     explored_states, outcome);
}

static inline void rsd_trace_decision_blocked(uint64_t manager_id, const char *request, int outcome,
					      uint64_t explored_states,
					      const struct rsd_blockers *b)
{
	char name[RSD_LOCATION_NAME_MAX], detail[1024];

	if (!b || !lttng_ust_tracepoint_enabled(rsd, decision_blocked))
		return;
	rsd_blockers_describe(b, detail, sizeof(detail));
	lttng_ust_tracepoint(rsd, decision_blocked, manager_id, rsd__trace_str(request), outcome,
			     explored_states, b, rsd_location_name(b->location, name, sizeof(name)),
			     detail);
}

static inline void rsd_trace_state(uint64_t manager_id, uint64_t state_version,
				   struct rsd_location at, uint64_t used, uint64_t reserved,
				   bool has_budget, uint64_t budget, uint32_t arriving)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!lttng_ust_tracepoint_enabled(rsd, state))
		return;
	lttng_ust_tracepoint(rsd, state, manager_id, state_version, &at,
			     rsd_location_name(at, name, sizeof(name)), used, reserved,
			     (uint8_t)has_budget, budget, arriving);
}

#else /* !RSD_TRACE */

/*
 * Empty hooks: the compiler drops the calls and their argument computations
 * that have no side effects. Functions rather than macros, so arguments are
 * still type-checked and variables computed only for tracing stay "used".
 */
static inline bool rsd_trace_transition_enabled(void)
{
	return false;
}

static inline void rsd_trace_transition(uint64_t manager_id, const struct rsd_transition *t)
{
	(void)manager_id, (void)t;
}

static inline void rsd_trace_adopt(uint64_t manager_id, uint64_t handle_id, struct rsd_location at,
				   uint64_t charged_nbytes)
{
	(void)manager_id, (void)handle_id, (void)at, (void)charged_nbytes;
}

static inline void rsd_trace_adopt_reserved(uint64_t manager_id, uint64_t handle_id,
					    struct rsd_location at, uint64_t charged_nbytes,
					    uint64_t reservation_id, const char *label,
					    uint64_t remaining_nbytes, bool filling)
{
	(void)manager_id, (void)handle_id, (void)at, (void)charged_nbytes, (void)reservation_id,
		(void)label, (void)remaining_nbytes, (void)filling;
}

static inline void rsd_trace_register_source(uint64_t manager_id, uint64_t handle_id,
					     struct rsd_location source_location,
					     uint64_t charged_nbytes)
{
	(void)manager_id, (void)handle_id, (void)source_location, (void)charged_nbytes;
}

static inline void rsd_trace_lease_acquire(uint64_t manager_id, uint64_t lease_id,
					   struct rsd_location at, uint32_t nhandles)
{
	(void)manager_id, (void)lease_id, (void)at, (void)nhandles;
}

static inline void rsd_trace_lease_release(uint64_t manager_id, uint64_t lease_id,
					   struct rsd_location at, uint32_t nstreams, bool wait,
					   bool pending)
{
	(void)manager_id, (void)lease_id, (void)at, (void)nstreams, (void)wait, (void)pending;
}

static inline void rsd_trace_lease_reap(uint64_t manager_id, uint64_t lease_id, uint64_t pending_ns)
{
	(void)manager_id, (void)lease_id, (void)pending_ns;
}

static inline void rsd_trace_copy_complete(uint64_t manager_id, uint64_t handle_id,
					   struct rsd_location at, uint64_t queued_ns, int error)
{
	(void)manager_id, (void)handle_id, (void)at, (void)queued_ns, (void)error;
}

static inline void rsd_trace_hold(uint64_t manager_id, uint64_t hold_id, struct rsd_location at,
				  uint32_t nhandles, bool acquire)
{
	(void)manager_id, (void)hold_id, (void)at, (void)nhandles, (void)acquire;
}

static inline void rsd_trace_reservation(uint64_t manager_id, uint64_t reservation_id,
					 struct rsd_location at, uint64_t nbytes, const char *label,
					 bool acquire)
{
	(void)manager_id, (void)reservation_id, (void)at, (void)nbytes, (void)label, (void)acquire;
}

static inline void rsd_trace_budget_reject(uint64_t manager_id, struct rsd_location at,
					   const struct rsd__ledger *l, uint64_t requested)
{
	(void)manager_id, (void)at, (void)l, (void)requested;
}

static inline void rsd_trace_budget_retry(uint64_t manager_id, struct rsd_location at,
					  const char *how)
{
	(void)manager_id, (void)at, (void)how;
}

static inline void rsd_trace_manager_create(uint64_t manager_id, const char *label,
					    uint32_t nbudgets, int ndevices)
{
	(void)manager_id, (void)label, (void)nbudgets, (void)ndevices;
}

static inline bool rsd_trace_device_work_enabled(void)
{
	return false;
}

static inline void rsd_trace_device_work(int device, bool kernel, const char *engine,
					 uint64_t nbytes, bool has_locations,
					 struct rsd_location src, struct rsd_location dst,
					 uint64_t duration_ns)
{
	(void)device, (void)kernel, (void)engine, (void)nbytes, (void)has_locations, (void)src,
		(void)dst, (void)duration_ns;
}

static inline bool rsd_trace_copy_enabled(void)
{
	return false;
}

static inline void rsd_trace_copy_start(int device, const char *engine, uint64_t copy_id,
					uint64_t nbytes, struct rsd_location src,
					struct rsd_location dst)
{
	(void)device, (void)engine, (void)copy_id, (void)nbytes, (void)src, (void)dst;
}

static inline void rsd_trace_copy_end(int device, const char *engine, uint64_t copy_id,
				      uint64_t nbytes, uint64_t duration_ns, bool gpu_clock)
{
	(void)device, (void)engine, (void)copy_id, (void)nbytes, (void)duration_ns, (void)gpu_clock;
}

static inline void rsd_trace_device_lost(uint64_t manager_id, struct rsd_location at, bool first,
					 uint64_t removed, uint64_t kept, uint64_t lost)
{
	(void)manager_id, (void)at, (void)first, (void)removed, (void)kept, (void)lost;
}

static inline void rsd_trace_plan_begin(uint64_t manager_id, const char *name, const char *kind)
{
	(void)manager_id, (void)name, (void)kind;
}

static inline void rsd_trace_plan_end(uint64_t manager_id, const char *name, const char *kind,
				      const char *phase, int outcome, uint32_t ntransitions)
{
	(void)manager_id, (void)name, (void)kind, (void)phase, (void)outcome, (void)ntransitions;
}

static inline void rsd_trace_decision(uint64_t manager_id, const char *request, uint32_t nevictions,
				      uint64_t explored_states, int outcome)
{
	(void)manager_id, (void)request, (void)nevictions, (void)explored_states, (void)outcome;
}

static inline void rsd_trace_decision_blocked(uint64_t manager_id, const char *request, int outcome,
					      uint64_t explored_states,
					      const struct rsd_blockers *b)
{
	(void)manager_id, (void)request, (void)outcome, (void)explored_states, (void)b;
}

static inline void rsd_trace_state(uint64_t manager_id, uint64_t state_version,
				   struct rsd_location at, uint64_t used, uint64_t reserved,
				   bool has_budget, uint64_t budget, uint32_t arriving)
{
	(void)manager_id, (void)state_version, (void)at, (void)used, (void)reserved,
		(void)has_budget, (void)budget, (void)arriving;
}

#endif /* RSD_TRACE */
#endif /* RSD_TRACE_H */
