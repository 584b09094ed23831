/* SPDX-License-Identifier: MIT */
/*
 * What the lib/ctrl sources share: the controller object and its per-handle
 * metadata and epochs (controller.c), request validation and image lookups
 * (controller.c), the eviction records and the search's entry point and
 * result (search.c; its steps are in search_steps.c, its planning states in
 * pstate.c). decision.c and use.c build on these; policy.c is the tiered
 * LRU and sees only the public policy interface.
 */
#ifndef RSD_CTRL_CTRL_H
#define RSD_CTRL_CTRL_H

#include <pthread.h>

#include "../internal.h"
#include "arena.h"

/*
 * Per-handle controller record: policy metadata and the last access epoch.
 * Records are never purged, not even for discarded handles (reference.md
 * §12.4): a discarded handle's stable key still blocks reuse.
 */
struct rsd__meta {
	uint64_t id; /* handle id; 0 marks an empty table slot */
	int priority;
	char *key; /* stable key, NULL when unset */
	bool has_epoch;
	uint64_t epoch;
	/* steps of the declared schedule naming this handle, ascending */
	uint32_t *uses;
	uint32_t nuses;
};

/*
 * The declared schedule (schedule.c): step i names the distinct handle ids
 * ids[off[i]..off[i + 1]), ascending. pos is the step expected next: in
 * [0, nsteps) for a cyclic schedule, [0, nsteps] for a finite one (nsteps:
 * past its end). nsteps 0: none declared.
 */
struct rsd__sched {
	uint32_t nsteps, pos;
	bool cyclic;
	uint32_t *off;
	uint64_t *ids;
};

struct rsd_controller {
	struct rsd_manager *m;
	uint64_t manager_id;
	const struct rsd_policy *policy;
	struct rsd_policy *owned_policy; /* the default policy, NULL when the caller's */
	size_t limit;
	/*
	 * Recursive: a policy callback may call back into the controller.
	 * Lock order: controller lock -> manager calls; the manager never calls
	 * back into the controller, so this cannot deadlock.
	 */
	pthread_mutex_t lock;
	/* protected by lock: open-addressing table keyed by handle id */
	struct rsd__meta *meta;
	size_t meta_cap, meta_n;
	uint64_t epoch;		 /* protected by lock; advanced by each successful use entry */
	unsigned flags;		 /* RSD_CTRL_*; protected by lock */
	struct rsd__sched sched; /* protected by lock */
	/*
	 * Protected by lock (held by every search): the large blocks of
	 * memory the last searches gave back, up to RSD__SEARCH_KEEP bytes,
	 * for the next one, which then touches no fresh pages for them
	 * (lib/ctrl/arena.h).
	 */
	struct rsd__mem_cache search_mem;
	/*
	 * Uses waiting for other threads' work (use.c): a FIFO of waiters,
	 * each keyed by the short location of its first failure; only the
	 * oldest waiter of a location tries again, the others sleep on
	 * wait_cond. Protected by wait_lock, never held across a manager call
	 * or with lock.
	 */
	pthread_mutex_t wait_lock;
	pthread_cond_t wait_cond;
	struct rsd__use_waiter *waiters, *waiters_tail;
	_Atomic uint64_t wait_limit_ns; /* rsd_controller_set_wait_limit() */
};

/* What a waiting use is doing, for rsd__controller_dump(). */
enum rsd__wait_phase {
	RSD__WP_QUEUED,	  /* behind an older waiter of its location */
	RSD__WP_PROGRESS, /* in rsd__progress_wait() */
	RSD__WP_ATTEMPT,  /* deciding and entering again */
};

/* One use waiting in c->waiters (use.c). */
struct rsd__use_waiter {
	bool has_at;
	struct rsd_location at;
	struct rsd__use_waiter *next;
	/* For the dump; written by the waiting thread under wait_lock. */
	const char *name; /* the request's */
	enum rsd__wait_phase phase;
	int err, cause;		/* the last attempt's failure */
	int why;		/* the last wait_turn() answer (-100: none yet) */
	unsigned long attempts; /* failed attempts since it joined */
	uint64_t since_ns;	/* when it joined (rsd__now_ns()) */
	char msg[160];		/* the last attempt's message */
};

#define RSD__SEARCH_KEEP (32u << 20)

/* Lookup, NULL when absent. Caller holds c->lock. */
struct rsd__meta *rsd__meta_find(struct rsd_controller *c, uint64_t id);
/* Lookup or insert a default record; NULL (ENOMEM recorded) on failure. */
struct rsd__meta *rsd__meta_get(struct rsd_controller *c, uint64_t id);

enum rsd__reason {
	RSD__R_OTHER_REPLICA,
	RSD__R_SOURCE,
	RSD__R_MOVED,
};

struct rsd__evict {
	uint64_t rank;
	struct rsd_location released;
	uint64_t nbytes;
	enum rsd__reason reason;
	struct rsd_location moved_to; /* RSD__R_MOVED only */
};

struct rsd__search_result {
	uint64_t explored;
	bool has_schedule, on_schedule;
	uint32_t schedule_position;
	size_t nreclaim;
	struct rsd_action *reclaim;
	struct rsd__evict *evict; /* parallel to reclaim */
	size_t nenter;
	struct rsd_action *enter;
};

/*
 * Static request validation (reference.md §12.1): name, requirements,
 * duplicates, reservations. Records the failure.
 */
int rsd__request_check(const struct rsd_request *r);

struct rsd_image;
struct rsd_view;

/*
 * Run the lazy memoized search of reference.md §13.4 on the published
 * image img for request r, whose handles were validated against img. Caller
 * holds c->lock and the RCU read section img was read in (image.h). On
 * success fills *res (free with rsd__search_result_fini). On failure returns
 * -RSD_EPLAN / -RSD_ESEARCHLIMIT (message and search figures recorded;
 * -RSD_EPLAN "source X is protected", without figures, where a feasible
 * state moves an EXCLUSIVE required value from a protected replica),
 * -RSD_EUSAGE (policy misbehaved), -RSD_EUNAVAILABLE, -RSD_ENOMEM or a
 * policy's own code; res->explored is set either way.
 */
int rsd__search(struct rsd_controller *c, const struct rsd_view *view, const struct rsd_request *r,
		struct rsd__search_result *res);
void rsd__search_result_fini(struct rsd__search_result *res);

/* Registration index of handle h in img, or -1; O(log N). */
long rsd__img_index(const struct rsd_image *img, struct rsd_handle h);

/*
 * The schedule (schedule.c); callers hold c->lock. locate: the step a
 * request is ranked from (the first step at or after the position whose
 * handle set is the request's, wrapping once when cyclic; the position
 * itself when none is), true when one matched. advance: after a
 * successful use, the position moves past the step locate finds (no move
 * when none). next_use: steps from pos to the next step naming md's
 * handle, false when none does.
 */
bool rsd__sched_locate(struct rsd_controller *c, const struct rsd_request *r, uint32_t *pos);
void rsd__sched_advance(struct rsd_controller *c, const struct rsd_request *r);
bool rsd__sched_next_use(const struct rsd_controller *c, const struct rsd__meta *md, uint32_t pos,
			 uint64_t *d);
void rsd__sched_fini(struct rsd_controller *c);
/* §2.5 resolution of h against img (controller.c): foreign, unknown, discarded. */
int rsd__img_resolve(const struct rsd_image *img, uint64_t manager_id, struct rsd_handle h,
		     long *idx);

/*
 * Shared by the shipped policies (policy.c): fallback tiers checked and
 * copied, their identity text, the tiered LRU's comparison, and a stable
 * sort of candidates by a comparison.
 */
struct rsd__tier {
	struct rsd_location from;
	size_t nto;
	struct rsd_location *to;
};

/* A shipped policy's fallback tiers: copied in configuration order, with
 * their canonical text (the "fallback_tiers" config entry). */
struct rsd__tiers {
	size_t n;
	struct rsd__tier *tier;
	char *identity;
};

/* Check and copy t[0..n) into *out (written only on success); what names
 * the policy being created in an out-of-memory message. */
int rsd__tiers_make(const struct rsd_fallback_tier *t, size_t n, const char *what,
		    struct rsd__tiers *out);
void rsd__tiers_release(struct rsd__tiers *ts);
const struct rsd__tier *rsd__tiers_find(const struct rsd__tiers *ts, struct rsd_location loc);
int rsd__lru_cmp(const struct rsd_eviction_candidate *a, const struct rsd_eviction_candidate *b);
int rsd__cand_sort(struct rsd_eviction_candidate *c, size_t n,
		   int (*cmp)(const struct rsd_eviction_candidate *,
			      const struct rsd_eviction_candidate *));

/*
 * The comparison a shipped policy sorts candidates by (policy.c: the
 * tiered LRU's; nextuse.c: the next-use policy's), NULL for any other.
 */
int (*rsd__policy_cmp(const struct rsd_policy *p))(const struct rsd_eviction_candidate *,
						   const struct rsd_eviction_candidate *);
int (*rsd__next_use_cmp(const struct rsd_policy *p))(const struct rsd_eviction_candidate *,
						     const struct rsd_eviction_candidate *);

/*
 * RSD_CTRL_LOOKAHEAD (lookahead.c): after a successful not-waiting use r,
 * queue copies to r's device for the values of the next
 * RSD__LOOKAHEAD_STEPS schedule steps that fit. Takes c->lock; never
 * fails the use, leaves the thread's last error as it was.
 */
#define RSD__LOOKAHEAD_STEPS 256u
void rsd__lookahead(struct rsd_controller *c, const struct rsd_request *r);

/* Frees p when rsd_next_use_create made it (nextuse.c); otherwise nothing. */
void rsd__next_use_free(struct rsd_policy *p);

/*
 * Blocked decisions (blockers.c): collect adds what protects the
 * materializations at `at` in view's image to *b (location, freeable and
 * blocked bytes, values, pending leases); set records *b as the detail of
 * the failure just recorded on this thread (has_blockers).
 */
void rsd__blockers_collect(const struct rsd_view *view, struct rsd_location at,
			   struct rsd_blockers *b);
void rsd__blockers_set(const struct rsd_blockers *b);
/*
 * Whether the lifetimes alone of b (live_bytes, reserved_bytes) leave too
 * little of the budget for requested_bytes: no completion of work in
 * flight can then make room, only a release or close by whoever owns
 * them (DOC: rsd_controller_use_wait).
 */
bool rsd__blockers_for_good(const struct rsd_blockers *b);
/* The same test at `at` for n more bytes on the state published now
 * (an entry refused for budget); false where `at` has no budget. */
bool rsd__lifetimes_block(struct rsd_manager *m, struct rsd_location at, uint64_t n);

/* VALIDATE of §12.7 against an image of manager manager_id (controller.c). */
int rsd__validate(const struct rsd_image *img, uint64_t manager_id, const struct rsd_request *r);

#endif
