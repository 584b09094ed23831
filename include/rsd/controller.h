/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_policy - Policies: eviction candidates, fallback tiers, the tiered LRU
 *
 * A policy ranks eviction candidates and names the fallback locations a
 * sole copy may spill to; the controller asks nothing else of it. Two
 * policies are shipped: the deterministic tiered LRU, and the next-use
 * policy, which ranks by the job's declared schedule
 * (rsd_controller_set_schedule()). See Documentation/reference.md §12 and
 * Documentation/controller.md.
 */
#ifndef RSD_CONTROLLER_H
#define RSD_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/action.h>
#include <rsd/location.h>
#include <rsd/plan.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_manager;

/**
 * struct rsd_policy_metadata - What the controller knows of a value's priority.
 * @priority: lower is evicted first.
 * @stable_key: a tie-breaking key, NULL when unset.
 */
struct rsd_policy_metadata {
	int priority;
	const char *stable_key;
};

/**
 * struct rsd_eviction_candidate - A materialization a policy may evict.
 * @handle: the value.
 * @location: where the materialization is.
 * @charged_nbytes: the bytes its removal frees.
 * @registration_index: the value's position in registration order.
 * @has_last_access_epoch: @last_access_epoch is set.
 * @last_access_epoch: the controller epoch of its last use.
 * @metadata: its policy metadata.
 * @has_next_use: the declared schedule names the value at or after the
 *	step the decision is ranked from; false without a schedule, for a
 *	value it does not name, or one it never names again.
 * @next_use: steps from that step to the value's next use (0: the step
 *	being decided itself); 0 when !@has_next_use.
 */
struct rsd_eviction_candidate {
	struct rsd_handle handle;
	struct rsd_location location;
	uint64_t charged_nbytes;
	uint64_t registration_index;
	bool has_last_access_epoch;
	uint64_t last_access_epoch;
	struct rsd_policy_metadata metadata;
	bool has_next_use;
	uint64_t next_use;
};

/**
 * struct rsd_policy_config_entry - One (key, value) pair of a policy's configuration identity.
 * @key: a non-blank key.
 * @value: its value.
 */
struct rsd_policy_config_entry {
	const char *key;
	const char *value;
};

/**
 * struct rsd_policy_ops - What a policy provides.
 * @name: the policy's non-blank name.
 * @config_identity: its configuration as (key, value) pairs; *n receives
 *	their number. A decision made under one identity is refused by a
 *	controller with another.
 * @fallback_locations: the destinations a sole materialization at @loc
 *	may spill to, in order; returns how many (copies at most @cap).
 * @order_candidates: reorders @c in place into eviction order (first is
 *	evicted first); must return 0 and a permutation.
 * @spill_locations: optional (NULL: @fallback_locations of the
 *	candidate's location): the destinations the sole materialization
 *	described by @c may spill to, in order; returns how many (copies at
 *	most @cap).
 */
struct rsd_policy_ops {
	const char *(*name)(void *ctx);
	const struct rsd_policy_config_entry *(*config_identity)(void *ctx, size_t *n);
	size_t (*fallback_locations)(void *ctx, struct rsd_location loc, struct rsd_location *out,
				     size_t cap);
	int (*order_candidates)(void *ctx, struct rsd_eviction_candidate *c, size_t n);
	size_t (*spill_locations)(void *ctx, const struct rsd_eviction_candidate *c,
				  struct rsd_location *out, size_t cap);
};

/**
 * struct rsd_policy - A policy: its ops and their context.
 * @ops: the operations.
 * @ctx: passed to every op.
 */
struct rsd_policy {
	const struct rsd_policy_ops *ops;
	void *ctx;
};

/**
 * struct rsd_fallback_tier - Where values at one location may spill.
 * @from: the source location.
 * @to: the destinations, in preference order.
 * @nto: their number.
 */
struct rsd_fallback_tier {
	struct rsd_location from;
	const struct rsd_location *to;
	size_t nto;
};

/**
 * rsd_tiered_lru_create() - Create the deterministic tiered LRU policy.
 * @t: the fallback tiers (@n entries), copied; NULL when @n is 0.
 * @n: their number.
 * @out: receives the policy on success; free it with rsd_policy_free().
 *
 * Candidates are ordered by priority, then least recent access (never
 * accessed first), then stable key, then registration order.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @out is NULL; @t or a tier's @to is NULL with a nonzero
 *   count; a location's kind is not one of the three.
 * * -RSD_EINVAL - a location has a bad device index; a source location is
 *   listed twice; a tier lists its own source or a destination twice.
 * * -RSD_ENOMEM - the policy could not be allocated.
 */
int rsd_tiered_lru_create(const struct rsd_fallback_tier *t, size_t n, struct rsd_policy **out);

/**
 * rsd_next_use_create() - Create the deterministic next-use policy.
 * @t: the fallback tiers (@n entries), copied; NULL when @n is 0.
 * @n: their number.
 * @near_steps: a sole copy whose next use is at most this many steps away
 *	spills to the fastest of its fallback destinations first, any other
 *	to the slowest first.
 * @out: receives the policy on success; free it with rsd_policy_free().
 *
 * Candidates are ordered by next use in the controller's declared
 * schedule, farthest first (values it does not name again first), then as
 * the tiered LRU orders them. Its name is "deterministic-next-use"; its
 * identity is "fallback_tiers" (as for the tiered LRU) and "near_steps".
 * Without a schedule it orders as the tiered LRU does.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE, -RSD_EINVAL - as for rsd_tiered_lru_create().
 * * -RSD_ENOMEM - the policy could not be allocated.
 */
int rsd_next_use_create(const struct rsd_fallback_tier *t, size_t n, uint64_t near_steps,
			struct rsd_policy **out);

/**
 * rsd_policy_free() - Free a policy made by rsd_tiered_lru_create() or rsd_next_use_create().
 * @p: the policy; NULL is ignored.
 *
 * Context: Any thread, once no controller uses it.
 */
void rsd_policy_free(struct rsd_policy *p);

/**
 * DOC: rsd_controller - The controller: requests, decisions and scopes
 *
 * A controller turns a request (which values must be resident where, and
 * which bytes to reserve) into a plan over one manager. rsd_controller_decide()
 * searches, on the last published image and without the transition lock,
 * for reclaim actions (evictions and spills, ranked by the policy) that make
 * the request fit every budget; the decision records the plan, the
 * evictions, the explanation, the state_version it was made against and the
 * number of planning states explored. A decision is evidence only:
 * rsd_controller_scope() enters it as a scope and a state change since then
 * is -RSD_ESTALE. rsd_controller_use() decides, enters and leases the
 * requirements in one call. The policy shipped is a deterministic tiered
 * LRU (rsd_tiered_lru_create()). See Documentation/reference.md §12 and §13.
 */

/**
 * struct rsd_requirement - One value that must be resident at one location.
 * @handle: the value.
 * @location: where.
 */
struct rsd_requirement {
	struct rsd_handle handle;
	struct rsd_location location;
};

/**
 * struct rsd_request - What a workload step needs.
 * @name: a non-blank name; it names the plan.
 * @requirements: the requirements (at least one).
 * @nrequirements: their number.
 * @reservations: reservations to make after reclaim.
 * @nreservations: their number.
 */
struct rsd_request {
	const char *name;
	const struct rsd_requirement *requirements;
	size_t nrequirements;
	const struct rsd_reservation_spec *reservations;
	size_t nreservations;
};

/**
 * struct rsd_eviction - One reclaim action the controller chose.
 * @action: the drop or move (a spill).
 * @rank: the candidate's position in the policy's order.
 * @released_location: where bytes are freed.
 * @released_nbytes: how many.
 * @reason: why it was chosen (a static string).
 */
struct rsd_eviction {
	struct rsd_action action;
	uint64_t rank;
	struct rsd_location released_location;
	uint64_t released_nbytes;
	const char *reason;
};

/**
 * struct rsd_decision - A controller's answer to a request.
 * @manager_id: the manager it was made for.
 * @expected_state_version: the state_version it was made against.
 * @explored_states: planning states the search explored.
 * @policy_name: the policy's name.
 * @npolicy_config: the number of configuration entries.
 * @policy_config: the policy's configuration identity.
 * @plan: the plan (reclaim, the request's reservations, enter actions).
 * @nevictions: the number of evictions.
 * @evictions: the reclaim actions with their ranks and reasons.
 * @explanation: the plan's explanation (feasible).
 * @has_schedule: a schedule was declared when it was made.
 * @on_schedule: the request matched the step @schedule_position.
 * @schedule_position: the step candidates were ranked from (next uses
 *	count from it); 0 without a schedule.
 */
struct rsd_decision {
	uint64_t manager_id, expected_state_version, explored_states;
	const char *policy_name;
	size_t npolicy_config;
	const struct rsd_policy_config_entry *policy_config;
	const struct rsd_plan *plan;
	size_t nevictions;
	const struct rsd_eviction *evictions;
	const struct rsd_explanation *explanation;
	bool has_schedule, on_schedule;
	uint64_t schedule_position;
};

struct rsd_controller;
struct rsd_use;

/**
 * rsd_controller_create() - Create a controller over a manager.
 * @m: the manager; must outlive the controller.
 * @policy: the policy, not copied (it must outlive the controller); NULL
 *	means a tiered LRU without fallback tiers.
 * @search_state_limit: the most planning states one decision explores;
 *	0 selects the default 100000.
 * @out: receives the controller on success.
 *
 * Context: Any thread.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m or @out is NULL; @policy lacks an op, or its name or a
 *   configuration value is NULL.
 * * -RSD_EINVAL - the policy's name or a configuration key is blank.
 * * -RSD_ENOMEM - the controller could not be allocated.
 */
int rsd_controller_create(struct rsd_manager *m, const struct rsd_policy *policy,
			  size_t search_state_limit, struct rsd_controller **out);

/**
 * rsd_controller_free() - Free a controller.
 * @c: the controller; NULL is ignored.
 *
 * Context: Any thread, once no other thread uses @c.
 */
void rsd_controller_free(struct rsd_controller *c);

/**
 * rsd_controller_set_policy_metadata() - Set a value's priority and stable key.
 * @c: the controller.
 * @h: a live value of the controller's manager.
 * @priority: lower is evicted first.
 * @stable_key: a non-blank tie-breaking key, copied; NULL to unset.
 *
 * Context: Takes the controller's lock; reads the published image without
 * the transition lock.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c is NULL; @h's type is NULL.
 * * -RSD_EINVAL - @stable_key is blank; @h's manager_id or id is 0.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - @h is foreign, unknown or discarded.
 * * -RSD_ENOMEM - the metadata table could not grow.
 */
int rsd_controller_set_policy_metadata(struct rsd_controller *c, struct rsd_handle h, int priority,
				       const char *stable_key);

/**
 * rsd_controller_record_access() - Record an access to values, as a use does.
 * @c: the controller.
 * @h: live values of the controller's manager (@n entries; repeats allowed).
 * @n: their number, at least 1.
 *
 * Only a successful rsd_controller_use() entry records access epochs by
 * itself (reference.md §12.6); rsd_controller_decide() and
 * rsd_controller_scope() do not, so a caller that decides and enters scopes
 * itself calls this once per access, after its leases are taken: the epoch
 * advances by one and every handle of @h gets it, and a declared schedule
 * (rsd_controller_set_schedule()) moves past the step whose set @h is,
 * exactly as a use entry with @h as its requirements does, so the policies
 * age and look ahead the same way. On failure neither changes.
 *
 * Context: Takes the controller's lock; reads the published image without
 * the transition lock.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c is NULL, @h is NULL with @n > 0, or a handle's type is NULL.
 * * -RSD_EINVAL - @n is 0; a handle's manager_id or id is 0.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - a handle is foreign, unknown or discarded.
 * * -RSD_ENOMEM - the controller's table or a copy of @h could not be
 *   allocated.
 */
int rsd_controller_record_access(struct rsd_controller *c, const struct rsd_handle *h, size_t n);

/**
 * struct rsd_schedule_step - One step of a declared schedule.
 * @handles: the values the step uses (a set: a handle listed twice counts
 *	once), for example the handles of a request's requirements.
 * @nhandles: their number (at least one).
 */
struct rsd_schedule_step {
	const struct rsd_handle *handles;
	size_t nhandles;
};

/**
 * rsd_controller_set_schedule() - Declare the job's schedule.
 * @c: the controller.
 * @steps: the steps in order (@nsteps entries), copied; NULL when @nsteps
 *	is 0.
 * @nsteps: their number; 0 removes the schedule.
 * @cyclic: the steps repeat (after the last comes the first again).
 *
 * Replaces any schedule before and sets the position to step 0. Every
 * successful rsd_controller_use() whose distinct handles are the set of
 * the first step at or after the position (wrapping once when @cyclic)
 * moves the position past that step; a use that matches no step leaves it.
 * Candidates carry their next use from the step a decision is ranked from
 * (struct rsd_eviction_candidate); the next-use policy orders by it.
 *
 * Context: Takes the controller's lock; reads the published image without
 * the transition lock.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c is NULL; @steps or a step's @handles is NULL with a
 *   nonzero count; a handle's type is NULL.
 * * -RSD_EINVAL - a step is empty; more than UINT32_MAX - 1 steps; a
 *   handle's manager_id or id is 0.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - a handle is foreign, unknown or discarded (the message
 *   names it and its step).
 * * -RSD_ENOMEM - the schedule could not be copied.
 *
 * On failure the schedule and position before are kept.
 */
int rsd_controller_set_schedule(struct rsd_controller *c, const struct rsd_schedule_step *steps,
				size_t nsteps, bool cyclic);

/**
 * rsd_controller_schedule_position() - The step the controller expects next.
 * @c: the controller.
 * @out: receives the position: a step index, or the number of steps once a
 *	finite schedule is complete.
 *
 * Context: Takes the controller's lock.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c or @out is NULL.
 * * -RSD_ENOTFOUND - no schedule is declared.
 */
int rsd_controller_schedule_position(struct rsd_controller *c, uint64_t *out);

/**
 * rsd_controller_decide() - Plan a request.
 * @c: the controller.
 * @r: the request.
 * @out: receives the decision on success; free it with rsd_decision_free().
 *
 * The search runs on one published image: required copies first, then
 * the cheapest reclaim options the policy's ranking allows, backtracking
 * until the request fits or the states are exhausted.
 *
 * Context: Takes the controller's lock; lock-free reader of the manager
 * (the transition lock is never taken).
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c, @r, @out, the name, a counted array or a label is
 *   NULL; a location's kind is not one of the three; a handle's type is
 *   NULL.
 * * -RSD_EINVAL - the name or a label is blank; there are no
 *   requirements; a location's device index is bad; a requirement is
 *   listed twice; a handle's manager_id or id is 0.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_EHANDLE - a handle is foreign, unknown or discarded.
 * * -RSD_EOWNERSHIP - an RSD_EXCLUSIVE value is required at several
 *   locations.
 * * -RSD_EUNAVAILABLE - a value has nothing to read it from.
 * * -RSD_ESTALE - the state changed while deciding.
 * * -RSD_EPLAN - no plan fits (the search was exhausted, or with
 *   RSD_CTRL_PRECHECK freeing every candidate could not make room).
 * * -RSD_ESEARCHLIMIT - the search reached @search_state_limit first.
 *
 * On -RSD_EPLAN and -RSD_ESEARCHLIMIT from the search, rsd_last_error()
 * has has_search set with explored_states, and has_blockers set when a
 * location could not admit the request: rsd_last_blockers() then names
 * what protects the bytes there.
 * * -RSD_EUSAGE - the policy did not return a permutation.
 * * -RSD_ENOMEM - memory for the search or the decision ran out.
 */
int rsd_controller_decide(struct rsd_controller *c, const struct rsd_request *r,
			  struct rsd_decision **out);

/**
 * DOC: rsd_blockers - Why a decision found no room: what protects the bytes
 *
 * When rsd_controller_decide() (or rsd_controller_use()) fails with
 * -RSD_EPLAN or -RSD_ESEARCHLIMIT because a location could not admit the
 * request, rsd_last_error() has has_blockers set and rsd_last_blockers()
 * names what kept the controller from freeing bytes there, taken from the
 * same published image the search read: materializations under active
 * leases, pending GPU leases with their events and consumer streams, holds,
 * and arriving materializations, with their bytes. The message text is the
 * one reference.md §13 fixes; this detail stands beside it. See
 * Documentation/controller.md, "Blocked decisions".
 */

/* Entries kept in struct rsd_blockers' arrays; the counts say how many exist. */
#define RSD_BLOCKERS_MAX 8
#define RSD_BLOCKER_STREAMS_MAX 4

/**
 * struct rsd_blocked_value - One materialization at the short location the controller cannot free.
 * @handle_id: the value's handle id.
 * @nbytes: the bytes it is charged there.
 * @leases: active leases on it there.
 * @holds: holds on it there.
 * @pending: pending GPU leases on it there (their events may still run).
 * @arriving: a transfer still writes it (an arriving materialization).
 */
struct rsd_blocked_value {
	uint64_t handle_id;
	uint64_t nbytes;
	uint32_t leases, holds, pending;
	bool arriving;
};

/**
 * struct rsd_blocked_lease - One pending GPU lease at the short location.
 * @lease_id: the lease's id (the lease_id of its rsd:lease_* trace events).
 * @nbytes: the charges of the values it covers.
 * @nvalues: the values it covers.
 * @nevents: its completion events, one per consumer stream.
 * @nstreams: consumer streams whose event a reap has not yet seen complete.
 * @streams: the first RSD_BLOCKER_STREAMS_MAX of them, in recording order.
 */
struct rsd_blocked_lease {
	uint64_t lease_id;
	uint64_t nbytes;
	uint32_t nvalues, nevents, nstreams;
	void *streams[RSD_BLOCKER_STREAMS_MAX];
};

/**
 * struct rsd_blockers - What excluded the eviction candidates at the location a request did not fit.
 * @location: the location the search found short first (its shortfall).
 * @requested_bytes: the bytes the failing stage asked for there.
 * @short_bytes: by how many bytes it did not fit (used + reserved + in
 *	flight + plan-held + requested - budget, at that stage of the
 *	request).
 * @budget_bytes: the location's budget.
 * @used_bytes: its charged bytes in the image.
 * @reserved_bytes: its reserved bytes in the image.
 * @freeable_bytes: the charges of the materializations there that the
 *	controller may evict or spill (no protection, not arriving).
 * @blocked_bytes: the charges of those it may not (each counted once).
 * @lease_bytes: of @blocked_bytes, under at least one active lease.
 * @pending_bytes: of @blocked_bytes, under at least one pending GPU lease.
 * @hold_bytes: of @blocked_bytes, under at least one hold.
 * @arriving_bytes: of @blocked_bytes, arriving.
 * @nblocked: the materializations behind @blocked_bytes.
 * @nvalues: entries in @values: the first RSD_BLOCKERS_MAX of them in
 *	registration order.
 * @values: those materializations.
 * @npending: pending GPU leases at the location.
 * @nleases: entries in @leases: the first RSD_BLOCKERS_MAX, oldest first.
 * @leases: those leases.
 * @in_flight_bytes: the location's bytes of work in flight in the image
 *	(struct rsd_location_snapshot): no eviction frees them.
 * @plan_held_bytes: the headroom executing plans keep there in the image:
 *	no eviction frees it either.
 * @live_bytes: of @blocked_bytes, under at least one active lease or hold:
 *	only their owners' release or close frees these, never the end of
 *	work in flight. With @reserved_bytes it is what a waiting use
 *	(rsd_controller_use()) cannot wait for.
 *
 * A materialization under several protections counts toward each of
 * @lease_bytes, @pending_bytes, @hold_bytes and @arriving_bytes.
 */
struct rsd_blockers {
	struct rsd_location location;
	uint64_t requested_bytes, short_bytes;
	uint64_t budget_bytes, used_bytes, reserved_bytes;
	uint64_t freeable_bytes, blocked_bytes;
	uint64_t lease_bytes, pending_bytes, hold_bytes, arriving_bytes;
	uint64_t nblocked;
	uint32_t nvalues;
	struct rsd_blocked_value values[RSD_BLOCKERS_MAX];
	uint64_t npending;
	uint32_t nleases;
	struct rsd_blocked_lease leases[RSD_BLOCKERS_MAX];
	uint64_t in_flight_bytes, plan_held_bytes;
	uint64_t live_bytes;
};

/**
 * rsd_last_blockers() - What blocked the last failed decision on the calling thread.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the detail of the failure rsd_last_error() describes when its
 * has_blockers is set (valid until the next librsd call on this thread),
 * NULL otherwise.
 */
const struct rsd_blockers *rsd_last_blockers(void);

/**
 * rsd_blockers_describe() - The blockers as one line of text.
 * @b: the blockers.
 * @buf: receives the text, NUL-terminated (truncated to @len - 1 bytes).
 * @len: the size of @buf.
 *
 * For example "cuda:0 short 64 bytes, 0 freeable, 128 bytes blocked in 2
 * materializations (leased 0, pending 128, held 0, arriving 0): value 1 (64
 * bytes, pending 1), value 2 (64 bytes, pending 1); pending lease 3 (2 values,
 * 128 bytes, 1 event, streams 0x5581c0a0)". The rsd:decision_blocked trace
 * event carries the same text.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the length of the whole text (as snprintf), or -RSD_ETYPE when @b
 * is NULL or @buf is NULL with a nonzero @len.
 */
int rsd_blockers_describe(const struct rsd_blockers *b, char *buf, size_t len);

/**
 * RSD_CTRL_PRECHECK - rsd_controller_set_flags() flag: fail at once when no eviction can make room.
 *
 * Before searching, the controller simulates the request on the image and,
 * at the first location that does not fit, adds up the bytes of every
 * materialization there it may evict or spill. When those cannot cover the
 * shortfall no sequence of evictions can, and decide fails at once with
 * -RSD_EPLAN, explored_states 0 and the blockers named (rsd_last_blockers()).
 * This deviates from the reference's counting (reference.md §13.4), which
 * searches every subset first and reports -RSD_EPLAN after 2^k counted states
 * or -RSD_ESEARCHLIMIT when the limit comes first; decisions that the search
 * would accept are unchanged. Off by default.
 */
#define RSD_CTRL_PRECHECK (1u << 0)

/**
 * RSD_CTRL_NOWAIT - rsd_controller_set_flags() flag: a use never waits for other threads' work.
 *
 * Without it, rsd_controller_use() and rsd_controller_use_async() decide
 * again when their decision went stale, and wait (sleeping, without any
 * lock) for other threads' work in flight when it is all that stands in
 * their way; see DOC: rsd_controller_use_wait. With it they fail with the
 * first error, -RSD_ESTALE and -RSD_EEXEC included, as they did before
 * waits existed.
 */
#define RSD_CTRL_NOWAIT (1u << 1)

/**
 * RSD_CTRL_LOOKAHEAD - rsd_controller_set_flags() flag: prefetch as far ahead as the budget allows.
 *
 * With the next-use policy and a declared schedule, after each successful
 * rsd_controller_use_async() the controller queues copies to the use's
 * device (its first CUDA requirement's location) for the values of the
 * following schedule steps, nearest next use first, for as long as each
 * fits: in the budget's free room, or in room made by dropping device
 * replicas whose next use is farther than the incoming value's, farthest
 * first. A materialization that is leased, held, arriving or waiting for
 * a released lease's event (an earlier queued use's kernel still reads
 * it) is never dropped, nor anything needed no later than the incoming
 * value; the walk stops at the first value that does not fit. Such a
 * victim that is its value's only copy (replicable, no source) is written
 * back instead, to the first host location of the policy's fallbacks with
 * room, so that its eviction later is a drop; past it the walk queues no
 * more copies to the device, only further write-backs of the following
 * values' victims. It looks at most 256 steps ahead, is deterministic (a function
 * of the schedule position and the published state), and never fails the
 * use: a refused drop or copy ends it, and rsd_last_error() is left as the
 * use left it. Values that must be loaded from a source are not prefetched.
 * Off by default; without a schedule or under another policy it does
 * nothing.
 */
#define RSD_CTRL_LOOKAHEAD (1u << 2)

/**
 * rsd_controller_set_flags() - Set a controller's options.
 * @c: the controller.
 * @flags: RSD_CTRL_PRECHECK, RSD_CTRL_NOWAIT, RSD_CTRL_LOOKAHEAD, any of
 *	them together, or 0; replaces the flags set before.
 *
 * Context: Takes the controller's lock.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c is NULL.
 * * -RSD_EINVAL - @flags has a bit that is not a flag of this function.
 */
int rsd_controller_set_flags(struct rsd_controller *c, unsigned flags);

/**
 * rsd_decision_free() - Free a decision.
 * @d: the decision; NULL is ignored.
 *
 * Freeing it a second time aborts the process with "librsd:
 * rsd_decision_free(): double free of struct rsd_decision" on stderr, as glibc's
 * free() aborts on a double free, rather than corrupt the manager.
 *
 * Context: Any thread.
 */
void rsd_decision_free(struct rsd_decision *d);

/**
 * rsd_controller_scope() - Enter a decision's plan as a scope.
 * @c: the controller.
 * @d: the decision.
 * @ts: transfer streams (@nts entries), or NULL.
 * @nts: their number.
 * @out: receives the entered scope on success only.
 *
 * rsd_scope_enter() with the decision's plan and expected version.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c, @d or @out is NULL, or as for rsd_scope_enter().
 * * -RSD_EHANDLE - @d was made for another manager.
 * * -RSD_EPLAN - @d was made under another policy configuration, or the
 *   preflight found the plan infeasible.
 * * -RSD_EINVAL - as for rsd_scope_enter().
 * * -RSD_EREENTRANT - called on the thread of a running source load, or
 *   this thread is inside a transition of the manager.
 * * -RSD_ECLOSED - the manager is closed.
 * * -RSD_ESTALE - the state changed since the decision.
 * * -RSD_EEXEC - entry failed after preflight (partial report kept).
 * * -RSD_ENOMEM - the scope could not be allocated.
 * * -RSD_EDEVICE - reaping a pending lease's event failed.
 */
int rsd_controller_scope(struct rsd_controller *c, const struct rsd_decision *d,
			 const struct rsd_transfer_stream *ts, size_t nts, struct rsd_scope **out);

/**
 * rsd_controller_scope_async() - rsd_controller_scope() that does not wait for copies.
 * @c: the controller.
 * @d: the decision.
 * @ts: transfer streams (@nts entries), or NULL.
 * @nts: their number.
 * @out: receives the entered scope on success only.
 *
 * rsd_scope_enter_async() with the decision's plan and expected version:
 * the copies of its spills and ensures are queued (DOC: rsd_async in
 * <rsd/manager.h>). Decisions count values still arriving as resident, so
 * the next request can be decided and entered while this one's copies
 * and the previous one's kernels run.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_controller_scope() returns.
 */
int rsd_controller_scope_async(struct rsd_controller *c, const struct rsd_decision *d,
			       const struct rsd_transfer_stream *ts, size_t nts,
			       struct rsd_scope **out);

/**
 * DOC: rsd_controller_use - Use: decide, enter and lease a request in one call
 *
 * A use object is a decision entered as a scope with one lease per distinct
 * location of the request; rsd_use_value() gives the leased residents and
 * rsd_use_close() ends it all. See Documentation/reference.md §13.6.
 */
/**
 * rsd_controller_use() - Decide, enter and lease a request in one call.
 * @c: the controller.
 * @r: the request.
 * @consumer_streams: consumer_streams[i] is the stream for the i-th
 *	distinct CUDA location of the request, in order of first appearance.
 * @ncs: their number; must equal the number of distinct CUDA locations.
 * @ts: transfer streams (@nts entries, CUDA locations only), or NULL.
 * @nts: their number.
 * @out: receives the use on success only; close it with rsd_use_close()
 *	and free it with rsd_use_free().
 *
 * After entry, one lease per distinct location holds the requirements, and
 * the controller records an access epoch for each. Decide and entry are not
 * under one lock: a concurrent writer can make the entry stale.
 *
 * Every consumer stream must be the driver's and on its location's device,
 * and every transfer stream valid, or the call fails before deciding and
 * changes nothing. *@out is written only on success: a failed entry is
 * unwound (leases released, the scope closed) and freed; what its scope had
 * committed is then the thread's partial report (rsd_take_partial_report()).
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @c, @out, a stream array or a stream is NULL, or as for
 *   rsd_controller_decide().
 * * -RSD_EINVAL - @ncs does not match the CUDA locations; a transfer
 *   stream is for a host location; or as for rsd_controller_decide().
 * * -RSD_ECLOSED, -RSD_EHANDLE, -RSD_EOWNERSHIP, -RSD_EUNAVAILABLE,
 *   -RSD_ESTALE, -RSD_EPLAN, -RSD_ESEARCHLIMIT, -RSD_EUSAGE - from the
 *   decision, as for rsd_controller_decide().
 * * -RSD_EREENTRANT, -RSD_EEXEC, -RSD_EDEVICE - from the entry or the
 *   leases, as for rsd_controller_scope() and rsd_acquire().
 * * -RSD_ENOMEM - memory ran out.
 */
int rsd_controller_use(struct rsd_controller *c, const struct rsd_request *r,
		       void *const *consumer_streams, size_t ncs,
		       const struct rsd_transfer_stream *ts, size_t nts, struct rsd_use **out);

/**
 * DOC: rsd_controller_use_wait - What a use does about other threads' work
 *
 * Many threads may use one controller at once. A use's decision is made on
 * the published state without the transition lock; another thread's
 * commit can overtake it, and bytes other threads' work in flight holds
 * (the headroom of their executing plans, queued copies and spills, loads,
 * lease events not yet completed) can stand in its way at entry. Instead of
 * returning that to the caller, rsd_controller_use() and
 * rsd_controller_use_async():
 *
 * * decide again at once when the decision went stale (-RSD_ESTALE);
 * * when the decision or the entry found no room (-RSD_EPLAN,
 *   -RSD_ESEARCHLIMIT, or -RSD_EEXEC failing for budget, a value in use or
 *   a value not yet there) while such work is in flight, sleep until some
 *   of it commits, ends or settles, and decide again. Uses waiting for the
 *   same short location are served in the order they began to wait.
 *
 * They return the failure only when nothing in flight can change it (the
 * manager has no transfer, load, executing plan, queued copy or pending
 * lease event), when the wait limit set with rsd_controller_set_wait_limit()
 * runs out, or at once with RSD_CTRL_NOWAIT. Every decision is still a pure
 * function of the state it read: waits change which state a use decides
 * on, never the answer for a given state. Documentation/controller.md,
 * "Many threads, one controller".
 */

/**
 * rsd_controller_set_wait_limit() - Bound how long a use waits for other threads' work.
 * @c: the controller.
 * @max_ns: the most nanoseconds one use waits in all; UINT64_MAX (the
 *	default) waits as long as work in flight may make room; 0 is
 *	RSD_CTRL_NOWAIT's fail-fast.
 *
 * A use whose limit runs out returns the failure of its last attempt,
 * with its message and details (rsd_last_error(), rsd_last_blockers()).
 *
 * Context: Any thread; takes effect for uses that begin afterwards.
 * Return: 0 on success, or -RSD_ETYPE when @c is NULL.
 */
int rsd_controller_set_wait_limit(struct rsd_controller *c, uint64_t max_ns);

/**
 * rsd_controller_use_async() - rsd_controller_use() that does not wait for copies.
 * @c: the controller.
 * @r: the request.
 * @consumer_streams: as for rsd_controller_use().
 * @ncs: their number.
 * @ts: transfer streams (@nts entries, CUDA locations only), or NULL.
 * @nts: their number.
 * @out: receives the use on success only.
 *
 * Decides, enters with rsd_controller_scope_async() and leases: each CUDA
 * requirement's consumer stream waits on the device for the copies that
 * bring its values, so the call returns without waiting for them and work
 * queued on those streams afterwards reads complete bytes. A host
 * requirement whose copy is still queued is waited for (rsd_acquire_flags()
 * without RSD_ACQUIRE_NOWAIT). This is how a pipeline prefetches: use the
 * next request while the current one computes.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: exactly what rsd_controller_use() returns.
 */
int rsd_controller_use_async(struct rsd_controller *c, const struct rsd_request *r,
			     void *const *consumer_streams, size_t ncs,
			     const struct rsd_transfer_stream *ts, size_t nts,
			     struct rsd_use **out);

/**
 * rsd_use_value() - The resident a use leases for one requirement.
 * @u: the use.
 * @h: the requirement's handle.
 * @at: the requirement's location.
 * @out: receives the resident on success; it stays the manager's.
 *
 * Context: Writer path (through rsd_lease_value()); not callable from a
 * source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @u or @out is NULL.
 * * -RSD_ENOTFOUND - (@h, @at) is not a requirement of the use.
 * * -RSD_EUSAGE - the use is not active (closed, or its entry failed).
 * * -RSD_ELIFETIME, -RSD_EUNAVAILABLE, -RSD_EREENTRANT - as for
 *   rsd_lease_value().
 */
int rsd_use_value(struct rsd_use *u, struct rsd_handle h, struct rsd_location at,
		  const struct rsd_resident **out);

/**
 * rsd_use_adopt() - Adopt a produced value into one of a use's reservations.
 * @u: the use.
 * @label: the label of one of the request's reservations.
 * @value: the output, as for rsd_adopt_reserved().
 * @mode: RSD_EXCLUSIVE or RSD_REPLICABLE.
 * @producer_stream: the stream on which work still writing @value is queued
 *	(typically the use's consumer stream of that location), or NULL when
 *	@value is complete; as for rsd_adopt_reserved().
 * @out: receives the new handle on success.
 *
 * rsd_scope_adopt() on the use's scope. rsd_use_close() then releases what
 * the request's reservations still hold; the adopted value stays, and
 * later decisions see it as any other value.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @u, @label, @value or @out is NULL, or as for
 *   rsd_adopt_reserved().
 * * -RSD_EUSAGE - the use is not active (closed, or its entry failed).
 * * -RSD_ENOTFOUND - the request has no reservation labelled @label.
 * * -RSD_ECLOSED, -RSD_EREENTRANT, -RSD_EINVAL, -RSD_EMATERIAL,
 *   -RSD_EOWNERSHIP, -RSD_EBUDGET, -RSD_ENOMEM, -RSD_EDEVICE - as for
 *   rsd_scope_adopt().
 */
int rsd_use_adopt(struct rsd_use *u, const char *label, struct rsd_resident *value,
		  enum rsd_replica_mode mode, void *producer_stream, struct rsd_handle *out);

/**
 * rsd_use_decision() - The decision a use entered.
 * @u: the use.
 *
 * Context: Any thread.
 * Return: the decision, owned by the use; NULL for NULL.
 */
const struct rsd_decision *rsd_use_decision(const struct rsd_use *u);

/**
 * rsd_use_close() - Release a use's leases and close its scope.
 * @u: the use.
 * @report: written only on success: the scope's report, or NULL for a
 *	second close; may be NULL.
 *
 * Leases are released in reverse order, then the scope is closed. A second
 * close is a silent no-op. A close refused on a source callback's own
 * thread (-RSD_EREENTRANT) releases nothing and leaves the use open, so a
 * later close from elsewhere still releases everything.
 *
 * Context: Writer path; not callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @u is NULL.
 * * -RSD_EREENTRANT, -RSD_ENOMEM, -RSD_EDEVICE - as for
 *   rsd_lease_release().
 * * -RSD_EUSAGE, -RSD_ECLOSED, -RSD_EEXEC - as for rsd_scope_close().
 */
int rsd_use_close(struct rsd_use *u, struct rsd_plan_report **report);

/**
 * rsd_use_free() - Free a use.
 * @u: the use; NULL is ignored.
 *
 * An open use is closed first.
 *
 * Freeing it a second time aborts the process with "librsd:
 * rsd_use_free(): double free of struct rsd_use" on stderr, as glibc's
 * free() aborts on a double free, rather than corrupt the manager.
 *
 * Context: Any thread; not from a source callback.
 */
void rsd_use_free(struct rsd_use *u);

#ifdef __cplusplus
}
#endif
#endif
