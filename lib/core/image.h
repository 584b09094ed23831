/* SPDX-License-Identifier: MIT */
/*
 * The read side of the manager core: the published image and what a
 * reader (snapshot, explain, state_version, the controller's decisions
 * and search) needs to read it.
 *
 * An image (struct rsd_image) is an immutable copy of the public state,
 * reachable from the manager through rcu_dereference() between
 * rsd__read_begin() and rsd__read_end(); core.h says how the writer builds
 * and retires it. Nothing here needs the writer's structures: struct
 * rsd_manager and struct rsd_lease_rec stay opaque, and a pending lease is
 * read through rsd__img_pending_next(). lib/ctrl includes no other header
 * of lib/core (tests/selftest/t_build.c checks it).
 */
#ifndef RSD_IMAGE_H
#define RSD_IMAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../internal.h"
#include "../list.h"

/*
 * Bytes that keep a group of fields off the cache lines of its neighbours,
 * whatever the structure's alignment (16 bytes from malloc): a line holding
 * a field of the group ends within the padding.
 */
#define RSD_CACHELINE 64

struct rsd_manager;

/*
 * The books of one location. The writer keeps the live ones (m->acct[],
 * indexed by rsd__loc_slot(), protected by m->lock); every image publishes
 * a copy (struct rsd_img_loc.acct) that readers read as they find it.
 */
struct rsd_acct {
	bool known; /* in the registry (m->order) */
	bool has_budget;
	uint64_t budget;
	uint64_t used, reserved;
	uint64_t peak_used, peak_charged;
	uint64_t value_count, reservation_count;
	uint64_t use_count, hold_count, pending_count;
	/* Arriving materializations here (transfers admitted, not committed). */
	uint32_t arriving;
	/* Bytes of work in flight outside used and reserved: temporary source
	 * charges of loads (§7.2) and the sources of queued moves still being
	 * read (queued.c). Admitted and counted in peak_charged like
	 * reservations; published as in_flight_bytes. */
	uint64_t temp;
	/* Headroom the plans executing now keep for their own actions (§21.2,
	 * struct rsd_plan_hold), and how many plans keep some; published as
	 * plan_held_bytes and plan_hold_count. */
	uint64_t plan_hold;
	uint32_t plan_holders;
	/* A CUDA location whose device the driver reports lost (devloss.c):
	 * set once, never cleared; nothing is admitted there. */
	bool failed;
};

/*
 * The ledger of a (live or published) location: every term admission sums.
 * own_bytes: the part of plan_hold kept by the calling thread's own plan,
 * which its own actions may use (0 for readers: they see every plan's).
 */
static inline struct rsd__ledger rsd__acct_ledger(const struct rsd_acct *a, uint64_t own_bytes)
{
	struct rsd__ledger l = {
		.has_budget = a->has_budget,
		.budget = a->has_budget ? a->budget : 0,
		.used = a->used,
		.reserved = a->reserved,
		.in_flight = a->temp,
		.held = a->plan_hold - own_bytes,
		.holders = a->plan_holders - (own_bytes != 0),
	};

	return l;
}

#define RSD_PV_BITS 5
#define RSD_PV_WIDTH (1u << RSD_PV_BITS)

struct rsd_pv_node {
	uint64_t gen; /* the publication that created it: mutable only during it */
	void *slot[RSD_PV_WIDTH];
};

struct rsd_pv {
	struct rsd_pv_node *root;
	unsigned shift; /* bits below the root level: 0 = root is a leaf */
	uint64_t count;
};

struct rsd_img_mat {
	struct rsd_location loc;
	uint64_t storage_nbytes;
	uint32_t use_count, hold_count, pending_count;
	bool arriving;
	bool returned; /* a failed copy's block given back: charges nothing */
};

/* Immutable image of one value. */
struct rsd_img_value {
	struct rsd_handle handle;
	uint64_t index; /* registration index: its slot in the value vector */
	struct rsd_value_spec spec;
	bool has_source;
	struct rsd_location source_loc;
	bool discarded;
	bool lost; /* lost with its device at lost_at (devloss.c) */
	bool durable;
	struct rsd_location lost_at;
	uint32_t nmats;
	uint64_t gen; /* the publication that built it (a failed one frees it) */
	struct rsd_img_mat mats[];
};

/* Immutable image of one known location (registry order). */
struct rsd_img_loc {
	struct rsd_location loc;
	struct rsd_acct acct;
	/* Registration indices of the values with a materialization here: a
	 * persistent sparse bitmap (word k covers indices 64k..64k+63), so a
	 * reader lists a location's values without scanning every value. */
	struct rsd_pv members;
};

struct rsd_reservation;
struct rsd_image;

/*
 * One reservation as the image publishes it: immutable for readers; the
 * fields after label are the writer's (m->lock). Built at the publication
 * after the reservation was made or changed (its label in the same block),
 * retired at the one after it was released or changed again.
 */
struct rsd_img_resv {
	struct rsd_location loc;
	uint64_t nbytes;
	const char *label;
	uint64_t gen;		       /* the publication that built it */
	uint64_t pos;		       /* its slot in the table */
	struct rsd_reservation *owner; /* NULL once released: then on m->resv_dead */
	struct rsd__list_node dead;
};

/*
 * A published table of objects in the order they joined it (ptab.c): a
 * persistent vector (pvec.c) of slots, NULL where an object left. A
 * publication clears or appends the slots of what changed, copying one
 * path each, and rebuilds the table without its holes once they would be
 * more than half of it, so that its size stays within twice its live
 * objects and every change costs O(1) amortized (plus the path).
 */
struct rsd_ptab {
	struct rsd_pv pv;
	uint64_t live; /* non-NULL slots */
};

struct rsd_lease_rec;

/* Something the next image no longer references, freed after a grace period. */
struct rsd_retired {
	void (*fn)(struct rsd_manager *m, void *p); /* NULL: an object of the manager's slab */
	void *p;
	size_t nbytes; /* with fn NULL: its size, for rsd__slab_free() */
};

/*
 * One protection-count change appended to an image after it was built
 * (prot.c): lease and hold calls publish only this.
 */
struct rsd_img_prot {
	uint64_t index;	  /* the value's registration index */
	uint64_t version; /* state_version after the call that made it */
	uint32_t slot;	  /* rsd__loc_slot() of the materialization */
	int32_t use, hold;
};

/* Log entries per image, and distinct materializations with a nonzero net
 * change in any published prefix of it (what a reader's view must hold). */
#define RSD_PROT_LOG_MAX 256
#define RSD_PROT_NET_MAX 32

struct rsd_image {
	struct rsd_manager *m;
	uint64_t state_version;
	bool closed;
	/*
	 * The protection log: entries [0, nlog) are published and immutable;
	 * the writer fills log[nlog] onwards and then advances nlog with
	 * release semantics. A reader reads nlog once (rsd__view_init) and
	 * adds those entries to the counts below. A full publication folds
	 * the log into new value images and starts the next image with none.
	 * The array (RSD_PROT_LOG_MAX entries) is allocated at the image's
	 * first protection change and freed with the image.
	 */
	atomic_uint nlog;
	_Atomic(struct rsd_img_prot *) log;
	struct rsd_pv values; /* struct rsd_img_value *, registration order */
	uint32_t nlocs;
	const struct rsd_img_loc *locs;
	struct rsd_ptab resv;	 /* struct rsd_img_resv *, creation order */
	struct rsd_ptab pending; /* struct rsd_lease_rec *, order they became pending */
	/* Only the writer and the reclaimer use what follows, while readers
	 * may still read the fields above: keep them off those lines. */
	char reader_pad[RSD_CACHELINE];
	/* Replaced images wait in a batch for one grace period (m->reclaim). */
	struct rsd_image *batch_next;
	/* On a batch head: the next batch in its queue (the reclaimer's or
	 * m->gpq) and, in m->gpq, the grace period it waits for. */
	struct rsd_image *gp_next;
	uint64_t gp_seq;
	bool reclaim_soon; /* it retired memory or events: do not batch */
	/* Lease records retired while it was published, linked through
	 * free_next: a reap of N leases appends N without growing an array. */
	struct rsd_lease_rec *retired_leases;
	struct rsd_retired *retired; /* inline_retired until it grows */
	size_t nretired, capretired;
	struct rsd_retired inline_retired[8];
};

/* Protection counts as an image publishes them: base plus log. */
struct rsd_prot_counts {
	uint64_t use, hold, pending;
};

/*
 * What one reader sees of an image: the log length read once, the version
 * it implies and the log's net changes per materialization. Every count
 * and the version a reader reports must come from the same view.
 */
struct rsd_view {
	const struct rsd_image *img;
	uint64_t version;
	uint32_t nnet;
	struct rsd_img_prot net[RSD_PROT_NET_MAX];
};

static inline bool rsd__prot_any(struct rsd_prot_counts c)
{
	return c.use || c.hold || c.pending;
}

/*
 * A pending lease as readers see it: what its record publishes, immutable
 * once it is pending. ids and streams point into the record, valid while
 * the image that lists it is held.
 */
struct rsd_img_lease {
	uint64_t id;
	struct rsd_location loc;
	size_t n;	     /* values it covers */
	const uint64_t *ids; /* their handle ids */
	size_t nevents;
	void *const *streams; /* the consumer stream of each event, or NULL */
};

/* in lib/core/image.c: */
/* The next registration index >= *i with a materialization at l; false
 * past the last one. */
bool rsd__img_loc_next(const struct rsd_img_loc *l, uint64_t *i);

/* Binary search of the image by handle id (ids grow with registration). */
const struct rsd_img_value *rsd__img_find(const struct rsd_image *img, uint64_t id);
const struct rsd_img_loc *rsd__img_loc(const struct rsd_image *img, struct rsd_location at);

/*
 * Reader side: registers the calling thread with liburcu on first use (and
 * unregisters it at thread exit), then rcu_read_lock(). Returns the image.
 */
const struct rsd_image *rsd__read_begin(struct rsd_manager *m);
void rsd__read_end(void);

/* Make sure the calling thread is a registered RCU thread. */
void rsd__rcu_register(void);

/* The first pending lease at a slot >= *i of img's pending table, with
 * *i moved past it; false at the end. */
bool rsd__img_pending_next(const struct rsd_image *img, uint64_t *i, struct rsd_img_lease *out);

/* in lib/core/manager.c: */
/*
 * Waits of the controller for other threads' work (lib/ctrl/use.c).
 * rsd__progress() reads a count that steps whenever something may have
 * given room back: a commit or rollback, a transfer's or load's end, a
 * plan's end (its held headroom), a reaped lease event. Taken before a
 * decision, it is what rsd__progress_wait() waits to move past, so no
 * wake-up between the two is lost.
 */
uint64_t rsd__progress(struct rsd_manager *m);

/* Both counts at once: all progress, and the part that is work in flight
 * ending (a transfer, load or device wait, a plan's end, a reaped lease
 * event; core.h, m->ends). */
struct rsd__progress_mark {
	uint64_t any, ends;
};
void rsd__progress_mark(struct rsd_manager *m, struct rsd__progress_mark *out);

/*
 * Sleep without the lock until the counts move past seen (with at: until
 * an admission outside any plan would take need more bytes at *at, or
 * bytes charged or held there go) or the
 * clock (rsd__now_ns()) reaches until_ns, reaping completed lease events
 * and queued copies as they finish (nobody else may reap them). Returns 1
 * when work in flight ended since seen, or the count moved while work that
 * ends by itself (a transfer, load, executing plan or queued copy) is in
 * flight (with at: when the room is there), 0 when until_ns came first,
 * 2 when no wait can change anything: the count has not moved and
 * nothing is in flight (no transfer, load, executing plan or queued copy,
 * and no lease event pending), or only lease events are, and stayed
 * pending for 200 ms without any work ending; 3
 * (without at) when it moved only by commits of calls that ran under the
 * lock and nothing is in flight: other threads' calls, which may keep
 * coming for ever, so the caller decides again at most once more; or
 * -RSD_ECLOSED. The thread's last error is kept.
 */
int rsd__progress_wait(struct rsd_manager *m, const struct rsd__progress_mark *seen,
		       const struct rsd_location *at, uint64_t need, uint64_t until_ns);

/*
 * For readers, before rsd__read_begin(): when a writer call committed but
 * could not publish (m->unpublished), publish now under the transition
 * lock, so that a reader sees every change a call reported done. 0, or
 * -RSD_ENOMEM when publication fails again (nothing is read then), or the
 * writer guard's refusal (a source load is running, same-thread re-entry).
 */
int rsd__read_fresh(struct rsd_manager *m);

/* Validate a stream for a destination (§4.1 step 5). */
int rsd__check_stream(const struct rsd_manager *m, void *stream, struct rsd_location at);

/* The calling thread's own plan's headroom at slot (0 outside a plan). */
uint64_t rsd__plan_hold_own(unsigned slot);

/* in lib/core/prot.c: */
void rsd__view_init(struct rsd_view *v, const struct rsd_image *img);
struct rsd_prot_counts rsd__view_mat_prot(const struct rsd_view *v, const struct rsd_img_value *iv,
					  uint32_t k);
struct rsd_prot_counts rsd__view_loc_prot(const struct rsd_view *v, const struct rsd_img_loc *l);

/* The state_version an image publishes now (its base or its last log entry). */
uint64_t rsd__img_version(const struct rsd_image *img);

/* in lib/core/ptab.c: */
/* The first object at a slot >= *i, with *i moved past it; NULL at the end. */
void *rsd__ptab_next(const struct rsd_ptab *t, uint64_t *i);

/* in lib/core/pvec.c: */
void *rsd__pv_get(const struct rsd_pv *pv, uint64_t i);

/* in lib/core/queued.c: */
/*
 * For a decision, before rsd__read_fresh(): while copies not-waiting calls
 * queued are outstanding, reap (a writer section), so that the copies that
 * completed count as complete and their destinations can be evicted. No
 * lock when none is queued. 0, or the reap's or the writer guard's error.
 */
int rsd__reap_queued(struct rsd_manager *m);

/*
 * A published location's ledger as the calling thread sees it: every
 * plan's kept headroom but its own plan's, which its own actions may use
 * (as admission counts it, and the plan simulation reads it).
 */
static inline struct rsd__ledger rsd__img_loc_ledger(const struct rsd_img_loc *l)
{
	return rsd__acct_ledger(&l->acct, rsd__plan_hold_own(rsd__loc_slot(l->loc)));
}

#endif
