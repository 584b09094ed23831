/* SPDX-License-Identifier: MIT */
/* Automatic residency: policies, the deterministic tiered LRU, decide, use. */
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

struct rsd_policy_metadata {
	int priority;           /* lower is evicted first */
	const char *stable_key; /* NULL when unset */
};

struct rsd_eviction_candidate {
	struct rsd_handle handle;
	struct rsd_location location;
	uint64_t charged_nbytes;
	uint64_t registration_index;
	bool has_last_access_epoch;
	uint64_t last_access_epoch;
	struct rsd_policy_metadata metadata;
};

/* A (key, value) pair of a policy's configuration identity. */
struct rsd_policy_config_entry {
	const char *key;
	const char *value;
};

struct rsd_policy_ops {
	const char *(*name)(void *ctx);
	/* The configuration identity; *n receives its length. */
	const struct rsd_policy_config_entry *(*config_identity)(void *ctx, size_t *n);
	/* Destinations a sole materialization at loc may spill to, in order;
	 * returns how many (copies at most cap). */
	size_t (*fallback_locations)(void *ctx, struct rsd_location loc, struct rsd_location *out,
				     size_t cap);
	/* Reorder c in place into eviction order (first is evicted first). */
	int (*order_candidates)(void *ctx, struct rsd_eviction_candidate *c, size_t n);
};

struct rsd_policy {
	const struct rsd_policy_ops *ops;
	void *ctx;
};

struct rsd_fallback_tier {
	struct rsd_location from;
	const struct rsd_location *to;
	size_t nto;
};

int rsd_tiered_lru_create(const struct rsd_fallback_tier *t, size_t n, struct rsd_policy **out);
void rsd_policy_free(struct rsd_policy *p);

struct rsd_requirement {
	struct rsd_handle handle;
	struct rsd_location location;
};

struct rsd_request {
	const char *name;
	const struct rsd_requirement *requirements;
	size_t nrequirements;
	const struct rsd_reservation_spec *reservations;
	size_t nreservations;
};

struct rsd_eviction {
	struct rsd_action action;
	uint64_t rank;
	struct rsd_location released_location;
	uint64_t released_nbytes;
	const char *reason;
};

struct rsd_decision {
	uint64_t manager_id, expected_state_version, explored_states;
	const char *policy_name;
	size_t npolicy_config;
	const struct rsd_policy_config_entry *policy_config;
	const struct rsd_plan *plan;
	size_t nevictions;
	const struct rsd_eviction *evictions;
	const struct rsd_explanation *explanation;
};

struct rsd_controller;
struct rsd_use;

/* search_state_limit 0 selects the default 100000. policy NULL: a tiered LRU
 * without fallback tiers. The policy must outlive the controller. */
int rsd_controller_create(struct rsd_manager *m, const struct rsd_policy *policy,
			  size_t search_state_limit, struct rsd_controller **out);
void rsd_controller_free(struct rsd_controller *c);
int rsd_controller_set_policy_metadata(struct rsd_controller *c, struct rsd_handle h, int priority,
				       const char *stable_key);
int rsd_controller_decide(struct rsd_controller *c, const struct rsd_request *r,
			  struct rsd_decision **out);
void rsd_decision_free(struct rsd_decision *d);
/* Enters d's plan as rsd_scope_enter does: *out is written only on success. */
int rsd_controller_scope(struct rsd_controller *c, const struct rsd_decision *d,
			 const struct rsd_transfer_stream *ts, size_t nts, struct rsd_scope **out);
/*
 * consumer_streams[i] is the stream for the i-th distinct CUDA location of
 * the request in order of first appearance. Every consumer stream must be
 * the driver's and on its location's device, and every transfer stream
 * valid, or the call fails before deciding and changes nothing. *out is
 * written only on success: a failed entry is unwound (leases released, the
 * scope closed) and freed; what its scope committed is then the thread's
 * partial report (rsd_take_partial_report).
 */
int rsd_controller_use(struct rsd_controller *c, const struct rsd_request *r,
		       void *const *consumer_streams, size_t ncs, const struct rsd_transfer_stream *ts,
		       size_t nts, struct rsd_use **out);
/* -RSD_EUSAGE once the use is closed; -RSD_ENOTFOUND for a pair that is not
 * a requirement. */
int rsd_use_value(struct rsd_use *u, struct rsd_handle h, struct rsd_location at,
		  const struct rsd_resident **out);
const struct rsd_decision *rsd_use_decision(const struct rsd_use *u);
/* report may be NULL; *report is written only on success: the scope's
 * report, or NULL for a second close, which is a silent no-op. */
int rsd_use_close(struct rsd_use *u, struct rsd_plan_report **report);
void rsd_use_free(struct rsd_use *u);

#ifdef __cplusplus
}
#endif
#endif
