/* SPDX-License-Identifier: MIT */
/*
 * The manager core: writer-side state and the images it publishes.
 *
 * Two worlds live in lib/core; this header is the writer's, image.h (which
 * it includes) the readers'. The types come first; the functions follow,
 * grouped by the file that defines them.
 *
 *  - The writer state (struct rsd_manager fields marked "protected by
 *    m->lock"): value records, materializations with their protection
 *    counts, per-location accounting, lifetimes. Only a thread holding the
 *    transition lock reads or writes it.
 *
 *  - The published image (struct rsd_image): an immutable copy of the public
 *    state, reachable from m->img through rcu_dereference(). Readers
 *    (snapshot, explain, state_version, decide) take rcu_read_lock() and
 *    never block the writer nor wait for it. The writer builds the next
 *    image at the end of each committed writer call and swaps it in with
 *    rcu_assign_pointer(); what the new image no longer shares is freed
 *    with call_rcu() once no reader can hold it.
 *
 * Publication copies only what changed: values live in a persistent
 * 32-way radix vector (pvec.c) indexed by registration order, so updating
 * one value copies its image and the nodes on one root-to-leaf path (four
 * nodes for a million values); the location table (at most 130 rows) is
 * rebuilt only when it changes; the reservation and pending-lease tables
 * are persistent vectors too (ptab.c), edited where they changed.
 *
 * Lock ordering, outermost first (Documentation/design.md, "Locking
 * rules", says what each lock protects):
 *
 *   lease->lock, scope->lock          one lifetime object's own state
 *     c->lock                         a controller (lib/ctrl, recursive)
 *       m->lock                       the transition lock: writer state
 *         m->objs_lock                m->objs, the lease object cache
 *         pool->lock                  a driver pool (lib/drivers/pool.c)
 *           sd->lock                  the simulated device (chunk calls)
 *         cuda.lock                   the CUDA driver's streams and events
 *         rq.lock                     the reclaimer's queue (reclaim.c)
 *         kept_lock, pc.lock          close.c's kept values, pcache.c
 *   staging->lock                     a device's staging pair (staging.h),
 *                                     never under m->lock; the drivers'
 *                                     locks are taken under it
 *   fault_lock                        innermost: the "alloc" fault point
 *                                     that bookkeeping allocations pass
 *                                     under m->lock, a pool's lock, ...
 *
 * A lock is taken only under locks above it; nothing is taken under
 * m->objs_lock, rq.lock, kept_lock, pc.lock or fault_lock. Nothing in the
 * manager takes a lease, scope or controller lock while holding m->lock,
 * and the manager never calls into the controller. The drivers' locks are
 * also taken without m->lock, by callers of the drivers
 * (rsd_resident_alloc()).
 *
 * What may be held across what:
 *  - m->lock is held across no copy, no source load and no wait for a
 *    lease's events: a transfer admits under it, drops it for the transfer
 *    (rsd__writer_pause) and takes it back to commit; rsd__lease_wait()
 *    drops it the same way. rsd__writer_wait() sleeps on m->xfer_cond,
 *    which releases m->lock for the sleep; the thread's outer locks
 *    (lease, scope, controller) stay held meanwhile, so no commit may need
 *    one of them. Under m->lock the device is only asked, never waited for
 *    (event_record, event_query, allocation); releasing a GPU lease that
 *    named no consumer stream and a forced close wait for the device
 *    without it (counted in m->inflight). One fallback holds it across a
 *    device wait: a GPU lease whose completion event could not be
 *    recorded synchronizes its streams (stream_sync) before it goes, a
 *    failure path that must not fail.
 *  - A writer may wait for an RCU grace period holding m->lock (when the
 *    reclaimer thread cannot start, rsd__gp_request() waits itself): no
 *    reader takes m->lock inside rcu_read_lock() (rsd__read_fresh() takes
 *    and drops it first).
 *  - rq.lock is held only to queue and count batches: the reclaimer drops
 *    it for the grace period and for freeing (which may call the driver).
 *  - m->objs_lock is held across no manager call; rsd_hold() and
 *    rsd_reserve() take it under m->lock to list their object.
 *  - Source callbacks run without m->lock (the writer guard refuses their
 *    own thread's re-entry, §9.1); the warning callback may run with it
 *    held, so its calls into the same manager are refused (RSD_EREENTRANT).
 */
#ifndef RSD_CORE_H
#define RSD_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Inline the read-side fast path (see liburcu README: _LGPL_SOURCE). */
#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <urcu/urcu-memb.h>

#include "../internal.h"
#include "../list.h"
#include "../base/slab.h"
#include "image.h"

/* ---- residents ---------------------------------------------------------- */

struct rsd_resident {
	const struct rsd_type *type;
	size_t nbuf;
	struct rsd_buffer_view *bufs; /* inside this allocation */
	void *meta;		      /* inside this allocation, meta_len bytes */
	size_t meta_len;
	/* Caller memory (wrap): called once at free. */
	void (*release)(void *ctx, struct rsd_resident *r);
	void *release_ctx;
	/* Library memory (alloc): one block holding every buffer. */
	const struct rsd_device_ops *ops;
	void *ops_ctx;
	struct rsd_location block_at;
	void *block;
	uint64_t block_nbytes;
	/* Owned by a manager: rsd_resident_free() refuses it. */
	bool managed;
};

/* ---- per-value records (writer side) -------------------------------------- */

/*
 * The state of one materialization (reference: Documentation/design.md,
 * "Materialization states"). rsd__mat_set_state() (xfer.c) is its only
 * writer and refuses an illegal transition:
 *
 *   (install) -> RESIDENT   a committed install: readable, complete.
 *   (install) -> ARRIVING   the admit phase of a waited transfer: charged
 *                           and indexed, not resident; nothing reads it.
 *   ARRIVING  -> RESIDENT   the transfer's commit (rsd__arrival_commit());
 *                           a failed transfer pops it instead.
 *   RESIDENT  -> FILLING    a queued copy committed into it (fill names
 *                           the copy's pending record): resident, its bytes
 *                           complete only once that record's event is.
 *   FILLING   -> RESIDENT   the copy's event answered (rsd__qcopy_finish());
 *                           on a failure it is removed, or goes FAILED.
 *   RESIDENT  -> FAILED     the copy into it failed (err: the device's code)
 *                           while something protects it, or its device was
 *                           lost with it protected (-RSD_EDEVLOST).
 *   FAILED    -> (removed)  the change that ends its last protection
 *                           (rsd__failed_settle()); never resident again.
 *
 * Who may free the storage: RESIDENT, when unprotected and not busy
 * (rsd__removable()); ARRIVING, only its transfer (abort or take); FILLING,
 * nobody until its copy is answered; FAILED, only rsd__failed_settle().
 * Snapshots show every state but RESIDENT as arriving.
 */
enum rsd_mat_state {
	RSD_MAT_RESIDENT,
	RSD_MAT_ARRIVING,
	RSD_MAT_FILLING,
	RSD_MAT_FAILED,
};

/* One materialization; protected by m->lock. */
struct rsd_mat {
	struct rsd_location loc;
	struct rsd_resident *value;
	uint64_t storage_nbytes; /* S(value) at install time */
	uint32_t use_count;	 /* active leases */
	uint32_t hold_count;	 /* holds */
	uint32_t pending_count;	 /* released GPU leases whose events may still run */
	/*
	 * Transfers beside the writer (transition.c). busy: transfers in flight
	 * that read this materialization; leaving: one of them is a move that
	 * removes it at its commit. Counters of readers, not states.
	 */
	uint32_t busy;
	bool leaving;
	/* FAILED only: its block went back to the queued spill it was lent by
	 * (queued.c): it owns no storage and no charge, only protections. */
	bool returned;
	enum rsd_mat_state state; /* written by rsd__mat_set_state() only */
	/* FILLING: the pending record of the copy a not-waiting call queued
	 * into it (queued.c, §22); NULL in every other state. */
	struct rsd_lease_rec *fill;
	/* FAILED: that copy's device error (or -RSD_EDEVLOST); 0 otherwise.
	 * Its storage stays, charged and shown arriving, so nothing frees it
	 * under a stream; nothing reads, copies from or replaces it. */
	int err;
};

static inline bool rsd__mat_protected(const struct rsd_mat *mat)
{
	return mat->use_count || mat->hold_count || mat->pending_count;
}

/* Resident: committed, readable by leases and transfers (FILLING and
 * FAILED are committed: their readers check the state themselves). */
static inline bool rsd__mat_resident(const struct rsd_mat *mat)
{
	return mat && mat->state != RSD_MAT_ARRIVING;
}

static inline bool rsd__mat_failed(const struct rsd_mat *mat)
{
	return mat->state == RSD_MAT_FAILED;
}

/* One managed value; protected by m->lock. Never freed before close. */
struct rsd_record {
	struct rsd_handle handle;
	uint64_t index; /* registration order, discarded records included */
	struct rsd_value_spec spec;
	bool has_source;
	struct rsd_source source;
	struct rsd_location source_loc;
	bool discarded;
	bool dirty;	   /* on m->dirty: its image must be rebuilt at publish */
	bool loading;	   /* its source load runs (transfer phase, no lock) */
	uint32_t inflight; /* transfers of this value admitted, not committed */
	uint32_t nmats, capmats;
	struct rsd_mat *mats; /* insertion order; inline_mats until it grows */
	struct rsd_mat inline_mats[2];
	/* A queued copy of it that failed on the device (queued.c): the next
	 * call that needs the value returns it, once. 0: none. */
	int copy_err;
	struct rsd_location copy_err_at;
	/* Its only copy was on a device that failed for good and it has no
	 * source (devloss.c): every call on it but a discard fails. */
	bool lost;
	struct rsd_location lost_at;
	/* Adopted with RSD_DURABLE: a host copy is written back whenever its
	 * copies are all on devices (devloss.c). */
	bool durable;
};

/* ---- per-location accounting ---------------------------------------------- */

/* struct rsd_acct, the books of one location, is in image.h: each image
 * publishes a copy of them. m->acct[] holds the live ones. */

/* used + reserved + temp: what peak_charged follows. */
static inline uint64_t rsd__acct_charged(const struct rsd_acct *a)
{
	return a->used + a->reserved + a->temp;
}

/* Raise peak_charged to the charge now. */
static inline void rsd__acct_peak(struct rsd_acct *a)
{
	if (rsd__acct_charged(a) > a->peak_charged)
		a->peak_charged = rsd__acct_charged(a);
}

/* ---- storage-owner index (keymap.c) ---------------------------------------- */

/*
 * Key: (device, base address) of a non-empty backing allocation. 16 bytes:
 * the table holds two slots per installed allocation or more, and at a
 * million values a 32-byte slot made its growth a tenth of the page faults
 * of registering them.
 */
struct rsd_keymap_slot {
	uintptr_t base;	 /* 0: empty */
	uint32_t owner;	 /* the owning record's registration index */
	int8_t device;	 /* -1 host */
	uint8_t at_slot; /* rsd__loc_slot() of the owning materialization */
	uint16_t unused;
};

/* Owners are 32-bit registration indices. */
#define RSD_KEYMAP_MAX_OWNER UINT32_MAX

struct rsd_keymap {
	struct rsd_keymap_slot *slots;
	size_t cap, count; /* cap a power of two */
};

/* ---- lifetimes ------------------------------------------------------------- */

/*
 * DONE: folded in (off m->leases and every stream queue) while threads
 * still wait on its events without the lock (waiters); the last of them
 * frees it.
 */
enum rsd_lease_state {
	RSD_LEASE_ACTIVE,
	RSD_LEASE_PENDING,
	RSD_LEASE_DONE
};

/* A lease record and the published pending table (0: a fresh record). */
enum rsd_tab_state {
	RSD_TAB_OUT,  /* in no table, on no list */
	RSD_TAB_NEW,  /* pending, on m->pend_new: the next publication appends it */
	RSD_TAB_IN,   /* published at tab_pos */
	RSD_TAB_DEAD, /* published, retired, on m->pend_dead: its slot is cleared next */
};

/*
 * Manager side of a lease; protected by m->lock. Once PENDING it is
 * immutable and published (readers query its events), so it is freed only
 * through retirement.
 */
struct rsd_lease_rec {
	uint64_t id;
	struct rsd_location loc;
	enum rsd_lease_state state;
	size_t n, cap;		  /* cap: room for handles in the record's own block */
	struct rsd_record **recs; /* covered values, first-occurrence order */
	uint64_t *ids;		  /* their handle ids (for readers) */
	size_t nevents;
	void **events;
	/* The consumer stream of each event (immutable, for readers), and
	 * one queue link per event (the writer's: the consumer stream's queue
	 * of released events, recording order, §21.5); both in the events'
	 * block. */
	void **streams;
	struct rsd_pend_link *links;
	size_t nleft;	  /* events not yet seen complete by a reap */
	unsigned waiters; /* threads waiting for its events without m->lock */
	uint64_t pending_since_ns;
	struct rsd_lease *obj; /* the caller's object while active */
	struct rsd_xfer *xf;   /* the transfer it carries (xfer.c), else NULL */
	/* Its slot in the published pending table (m->lock): tab says where
	 * it is between publications (enum rsd_tab_state), tab_node links it
	 * on m->pend_new or m->pend_dead meanwhile. */
	uint64_t tab_pos;
	uint8_t tab;
	struct rsd__list_node tab_node;
	union {
		struct rsd__list_node node;	 /* on m->leases until deleted */
		struct rsd_lease_rec *free_next; /* then on m->lease_rec_cache */
	};
};

/*
 * One copy or load in flight (xfer.c). A synchronous one is on its
 * issuing thread's stack (transition.c); a plan batch's sits in the
 * batch's array until the flush (batch.c); one that outlives its issuer
 * (a not-waiting call's, queued.c §22; a waited copy the device gave no
 * answer for; the output a producer stream still writes) is in a slab
 * block with its pending record. A staged copy (staging.c) is any of
 * these: staging is how rsd__copy_issue() moves its bytes.
 *
 * One that outlives its issuer rides the pending lease record that owns
 * its event (l->xf): lease.c owns every
 * pending event (released GPU leases and transfers alike), queues it on
 * its stream, reaps it and counts its waiters (l->waiters: any number of
 * threads may wait, each returns; the last one frees a retired record).
 * The record protects the copy's source (recs[0] at loc, when n is 1) as
 * a released GPU lease would (pending_count); the destination is FILLING
 * and points back at the record (struct rsd_mat.fill). Writer path.
 *
 * States (rsd__xfer_set_state() is their only writer; design.md,
 * "The transfer object"):
 *
 *   IDLE    its source chosen (transfer_source()) or its record allocated
 *           before the transfer phase so that queueing cannot fail;
 *           nothing of it is visible. A pending one that is never queued
 *           is freed by rsd__xfer_discard().
 *   QUEUED  issued, its event on its stream; err may already hold a
 *           failure known at issue (told). A failed query or sync of its
 *           event leaves it here: only the device's definite answer moves
 *           it. A waited or batched copy the device did not answer stays
 *           QUEUED where it is and is carried on by a pending record's
 *           (rsd__xfer_unanswered()). Nothing frees its destination,
 *           source, leftover or garbage.
 *   DONE    its event completed without error (the issuer's wait, the
 *           batch's flush, or rsd__qcopy_finish()).
 *   FAILED  the device answered with an error (the issue, the wait, or
 *           lease.c event_failed()), or a pending one completed after a
 *           failure known at issue. A DONE copy behind a failed one in a
 *           batch stays DONE: it is rolled back at its settle.
 *   SETTLED committed or rolled back (rsd__xfer_settle()), or, for a
 *           pending one, folded in: the destination resident (DONE), or
 *           removed or FAILED (FAILED); the source's protection dropped,
 *           leftover and garbage freed, the error kept once for the value
 *           (rec->copy_err) unless told; the record is retired and freed,
 *           with this object, after a grace period (readers may still see
 *           it in the pending table).
 */
enum rsd_xfer_state {
	RSD_XFER_IDLE,
	RSD_XFER_QUEUED,
	RSD_XFER_DONE,
	RSD_XFER_FAILED,
	RSD_XFER_SETTLED,
};

/* Who holds the copy while it is in flight. */
enum rsd_xfer_kind {
	RSD_XFER_SYNC,	     /* its issuing thread waits for it */
	RSD_XFER_BATCH,	     /* a plan's batch, until its flush */
	RSD_XFER_ASYNC,	     /* a not-waiting call queued it (§22) */
	RSD_XFER_UNANSWERED, /* a waited copy the device did not answer */
	RSD_XFER_OUTPUT,     /* rsd_adopt_reserved(): a producer stream writes it */
};

struct rsd_xfer {
	enum rsd_xfer_state state;
	enum rsd_xfer_kind kind;
	struct rsd_record *rec;
	/* What it reads: the replica at src, or (temporary) value, what the
	 * source's load made, charged at src while charged. */
	struct rsd_location src;
	struct rsd_resident *value;
	bool temporary;		/* value is the load's: freed unless installed */
	bool charged;		/* the temporary charge is still held at src */
	bool leave;		/* a move: the replica at src goes at the commit */
	struct rsd_location to; /* the destination */
	/* Its stream and completion event while its issuer or a batch holds
	 * it (a pending record's streams[0] and events[0] once one does). */
	void *stream, *event;
	/* Bytes the copy reads that no materialization owns any more (a
	 * move's source, a loaded value), freed with their temporary charge
	 * at leftover_at once the copy completed. */
	struct rsd_resident *leftover;
	struct rsd_location leftover_at;
	bool leftover_charged;
	bool restore; /* leftover is a move's source: reinstated on failure */
	/*
	 * Stream-ordered room (queued.c, "handover"): a later copy writes
	 * into the leftover's block, ordered after this copy's event on its
	 * stream. lent: the block and its charge are that copy's
	 * destination's (leftover_charged is false); dropping the leftover
	 * frees its header only. lent_rec/lent_at: that destination while
	 * this copy is queued and it may still give the block back (NULL
	 * once either settled); lent_to: its queued copy's record, once
	 * queued. borrowed, on that copy's side: this record, likewise.
	 * proven: that copy completed, which the device runs only after
	 * this copy's event completed, so this copy did too whatever its own
	 * event's answer says (a failed query is no failure of the work).
	 */
	bool lent, proven;
	struct rsd_record *lent_rec;
	struct rsd_location lent_at;
	struct rsd_lease_rec *lent_to, *borrowed;
	int err; /* the one recorded error: the first the device reported */
	/* err was returned by the call that queued it (a copy known to have
	 * failed whose queued work may still run): not kept again. Nothing
	 * of it was installed: garbage is its destination's storage, freed
	 * with its temporary charge at `to` once the event completed. */
	bool told;
	struct rsd_resident *garbage;
	uint64_t queued_ns;
};

/* A released GPU lease's event on its consumer stream's queue. */
struct rsd_pend_link {
	struct rsd_lease_rec *l;
	size_t k;	/* l->events[k] */
	void *stream;	/* the queue it is on; NULL once seen complete */
	bool unordered; /* on m->pend_unordered instead */
	/* Its stream was synchronized after a query of it failed: an
	 * error it reports now is the device's answer (lease.c). */
	bool drained;
	struct rsd__list_node node;
};

/* One consumer stream's released events in recording order: an in-order
 * stream completes them in that order, so a reap stops at the first one
 * still running. Protected by m->lock. */
struct rsd_pend_stream {
	void *stream;
	struct rsd__list q; /* of struct rsd_pend_link */
};

/*
 * Every caller-owned lifetime object links itself into m->objs so that
 * destroying the manager can detach it (link.m = NULL): releasing or
 * freeing it afterwards is then a silent no-op instead of a use after free.
 * The list is protected by m->objs_lock, never held across a manager call.
 */
struct rsd_objlink {
	struct rsd_manager *m; /* NULL: on no list */
	struct rsd__list_node node;
};

/*
 * What a lifetime object's *_free() does when its caller never released it
 * (abandonment, §8.9): the same for leases, holds and reservations, told
 * apart by their kind.
 */
struct rsd_lifetime_kind {
	const char *noun;	   /* how warnings name it: "hold" */
	const char *retained;	   /* what a failed release keeps, for the warning */
	int (*release)(void *obj); /* its *_release() */
};

/* Handles kept without an allocation: in a lease object, a lease record,
 * and the handle set rsd_hold() validates. */
#define RSD_HANDLES_INLINE 4

/* Consumer streams of a lease searched linearly for a duplicate. */
#define RSD_STREAMS_SCAN 8

/* Recycled lease objects and records kept per manager. */
#define RSD_LEASE_CACHE_MAX 64

/* The caller's lease object. */
struct rsd_lease {
	struct rsd_objlink link;
	uint32_t guard;	      /* RSD__LIVE from lease_obj_get to rsd_lease_free */
	pthread_mutex_t lock; /* active flag and streams; taken before m->lock */
	const struct rsd_device_ops *ops;
	void *ops_ctx;
	struct rsd_lease_rec *rec; /* protected by m->lock; NULL once released or closed */
	bool active;
	struct rsd_location loc;
	size_t n;
	struct rsd_handle *handles; /* inline_handles when n <= RSD_HANDLES_INLINE */
	size_t nstreams, capstreams;
	void **streams;
	/* Past RSD_STREAMS_SCAN streams, every one of them (under lock):
	 * adding a stream finds a duplicate without reading the array. */
	struct rsd__ptrmap stream_set;
	struct rsd_handle inline_handles[RSD_HANDLES_INLINE];
	struct rsd_lease *free_next; /* m->lease_obj_cache; under objs_lock */
	/* Recorded on the first consumer stream after it was ordered behind
	 * queued copies of the leased bytes (queued.c): streams added later
	 * wait for it too. NULL: nothing to wait for. Under lock. */
	void *after_event;
};

struct rsd_hold {
	struct rsd_objlink link;
	uint32_t guard; /* RSD__LIVE until rsd_hold_free */
	uint64_t id;
	bool active;  /* caller's view */
	bool tracked; /* the manager still counts it; protected by m->lock */
	struct rsd_location loc;
	size_t n;
	struct rsd_record **recs;
	struct rsd__list_node node; /* on m->holds while tracked; m->lock */
};

struct rsd_reservation {
	struct rsd_objlink link;
	uint32_t guard; /* RSD__LIVE until rsd_reservation_free */
	uint64_t id;
	bool active;
	bool tracked;
	struct rsd_location loc;
	uint64_t nbytes;
	char *label;
	struct rsd__list_node node; /* on m->resv while tracked */
	/* Its published entry (NULL before the first publication that shows
	 * it), and while the next publication must build a new one (made, or
	 * nbytes changed): on m->resv_chg, next_pub the entry being built. */
	struct rsd_img_resv *pub, *next_pub;
	bool on_chg;
	struct rsd__list_node chg;
};

/* ---- the manager ----------------------------------------------------------- */

struct rsd_manager {
	/*
	 * What readers load on every call, on cache lines of their own:
	 * readers never write the manager, and a writer-hot field beside these
	 * (gen, the reclaim batch) cost the writer a coherence miss on each
	 * store while readers ran. The first six are fixed at create; img
	 * changes once per publication, unpublished only when a publication
	 * fails or recovers.
	 */
	uint64_t id;
	const struct rsd_device_ops *ops; /* never NULL: host driver at least */
	void *ops_ctx;
	int ndevices; /* visible CUDA devices, fixed at create */
	void (*warn)(void *ctx, const char *message);
	void *warn_ctx;
	/* The published image; written by the writer under m->lock. */
	struct rsd_image *img;
	/* A writer call could not publish (out of memory): img is behind the
	 * writer state until a later call publishes. Written under m->lock;
	 * readers test it first (rsd__read_fresh). */
	atomic_bool unpublished;
	/* Copies not-waiting calls queued that no reap has seen complete
	 * (queued.c); written under the lock, read by deciders without it. */
	atomic_uint nqueued;
	char reader_pad[RSD_CACHELINE];

	/*
	 * The transition lock serializes every change of writer state. It is
	 * taken through rsd__writer_enter(), which refuses a call made from a
	 * source callback of this manager on the callback's own thread and
	 * same-thread re-entry (owner). Copies, source loads and waits for a
	 * device run without it (transition.c): a transition admits under it,
	 * transfers, then takes it again to commit.
	 */
	pthread_mutex_t lock;
	atomic_uintptr_t owner; /* token of the thread holding m->lock, 0 */
	/* Broadcast (with m->lock) whenever a transfer commits or rolls back,
	 * a load ends or a waited-for lease is reaped: threads waiting for an
	 * arriving destination, a loading value or a leaving source sleep on
	 * it without the lock. */
	pthread_cond_t xfer_cond;
	/* Transfers and device waits running without the lock; protected by
	 * m->lock. Close waits for it to drop to zero. */
	uint64_t inflight;
	/* Steps (under m->lock) at every state change, transfer end, load end
	 * and plan end: whatever may give room back. Read without the lock by
	 * rsd__progress(); progress_waiters threads sleep on xfer_cond in
	 * rsd__progress_wait(), woken by the writer exit that steps it. */
	_Atomic uint64_t progress;
	/* Steps with progress when work in flight ends: a transfer, load or
	 * device wait (rsd__xfer_wake), a plan's held headroom given back, a
	 * lease event reaped. The other steps are commits of calls that ran
	 * under the lock, which a controller wait does not wait for
	 * (rsd__progress_wait). Same locking as progress. */
	_Atomic uint64_t ends;
	uint64_t progress_version; /* m->version at the last step */
	unsigned progress_waiters;
	pthread_mutex_t objs_lock; /* m->objs and lease_obj_cache only */
	struct rsd__list objs;	   /* caller lifetime objects (struct rsd_objlink) */
	/* Lease objects freed by their callers, ready for the next acquire. */
	struct rsd_lease *lease_obj_cache;
	unsigned nlease_obj_cache;
	/* Pinned staging of the copies between pageable memory and each
	 * device (staging.h, which says how it is locked): one per device, or
	 * NULL when staging is off or there is no device; staging_chunk is
	 * the most bytes each of a device's two buffers grows to. Both fixed
	 * at create. */
	struct rsd_staging *staging;
	uint64_t staging_chunk;

	uint64_t gen; /* current publication generation; protected by m->lock */
	/* Replaced images not yet handed to the reclaimer; protected by m->lock. */
	struct rsd_image *reclaim;
	unsigned nreclaim;
	bool reclaim_soon; /* the batch holds memory or events */
	/* Plain batches waiting for their grace period, oldest first; the
	 * writer frees them itself (reclaim.c). Protected by m->lock. */
	struct rsd_image *gpq_head, *gpq_tail;

	/* Everything below is protected by m->lock. */
	/* Net changes of the current image's log, as readers will sum them. */
	struct rsd_img_prot lognet[RSD_PROT_NET_MAX];
	unsigned nlognet;
	bool closed;
	/* Set once by close(FORCE | NOWAIT) under m->lock, read without it by
	 * threads waiting for the device: they stop waiting (evwait.c). */
	atomic_bool stop_waits;
	uint64_t version;
	struct rsd_record **recs; /* registration order == ascending handle id */
	size_t nrecs, caprecs;
	struct rsd_acct acct[RSD_NSLOTS];
	uint8_t order[RSD_NSLOTS]; /* registry order of known slots */
	unsigned nknown;
	struct rsd_keymap owners;
	/* Creation order, active and pending. */
	struct rsd__list leases;
	/* Released events per consumer stream (lease.c). */
	struct rsd_pend_stream *pstreams;
	size_t npstreams, cappstreams;
	struct rsd__ptrmap pstream_idx; /* stream -> its index in pstreams */
	/* Events whose stream found no queue (out of memory): scanned whole. */
	struct rsd_pend_stream pend_unordered;
	/* Deleted lease records for reuse (never pending ones: those are
	 * freed through retirement). */
	struct rsd_lease_rec *lease_rec_cache;
	unsigned nlease_rec_cache;
	/* The blocks of pending transfers (xfer.c): a slab of their own, so
	 * that taking back the ones the reclaimer freed walks only those. */
	struct rsd__slab xfers;
	struct rsd__list holds; /* tracked holds, newest first */
	struct rsd__list resv;	/* tracked reservations, creation order */
	uint64_t next_lifetime_id;
	/* The manager must never free its storage: an abandoned GPU lease
	 * could not be waited for (§8.9). */
	bool keep_alive;
	/* Closed by close(FORCE | NOWAIT) while other threads were in
	 * flight (m->inflight): the last one back frees the records,
	 * values and lease records at its writer exit (close.c). */
	bool drop_deferred;
	/* The last queued copy that failed on the device, for an explicit
	 * rsd_manager_reap() (queued.c); 0: none, or reported already (by
	 * the reap or by the value's next call: once). */
	int copy_err;
	struct rsd_record *copy_err_rec;
	struct rsd_location copy_err_at;
	/* Records whose copy_err is set: a reap with copy_err reported
	 * looks for the others (an upper bound: a freed record's is gone). */
	uint32_t copy_errs;
	/* Publication bookkeeping. */
	struct rsd__slab oc; /* freed publication objects for the next ones */
	struct rsd_record **dirty;
	size_t ndirty, capdirty;
	bool locs_dirty, resv_dirty, pending_dirty;
	/*
	 * What the next publication changes in the reservation and pending
	 * tables (image.c): reservations to (re)publish and entries of
	 * released ones; records that became pending and retired ones. n*:
	 * how many of them add a slot or clear one.
	 */
	struct rsd__list resv_chg, resv_dead, pend_new, pend_dead;
	uint64_t nresv_add, nresv_dead, npend_add, npend_dead;
	bool resv_rebuilt, pend_rebuilt; /* by the publication under way */
	bool republish_all;		 /* the dirty list could not grow: re-image every record */
	/* Values adopted with RSD_DURABLE (devloss.c): writer exits look for
	 * write-backs only while there are some. */
	uint64_t ndurable;
	/* struct rsd_manager_config.label, fixed at create; "" when none.
	 * Only traces read it. */
	char label[RSD_MANAGER_LABEL_MAX + 1];
};

/* See rsd__obj_link(): m->objs_lock held. */
static inline void rsd__obj_link_locked(struct rsd_manager *m, struct rsd_objlink *link)
{
	link->m = m;
	rsd__list_add_head(&m->objs, &link->node);
}

static inline void rsd__obj_unlink_locked(struct rsd_objlink *link)
{
	rsd__list_del(&link->m->objs, &link->node);
	link->m = NULL;
}

/* Append a batch head to a queue linked through gp_next. */
static inline void rsd__gp_queue_append(struct rsd_image **head, struct rsd_image **tail,
					struct rsd_image *b)
{
	b->gp_next = NULL;
	if (*tail)
		(*tail)->gp_next = b;
	else
		*head = b;
	*tail = b;
}

/* in lib/core/batch.c: */
/*
 * A plan's queued copies (batch.c): admitted and issued without waiting,
 * committed in action order by rsd__batch_flush(). One batch per thread,
 * on its stack, between begin and end; rsd__exec_action() uses it when
 * there is one.
 */
#define RSD_BATCH_MAX 16
struct rsd_batch_entry {
	struct rsd_xfer xf;	    /* RSD_XFER_BATCH */
	struct rsd_transition rep;  /* the action's report, completed at commit */
	struct rsd_transition *out; /* where the caller wants it, or NULL */
	bool stamp;
	size_t index; /* the action's index in the plan */
};
struct rsd_xfer_batch {
	struct rsd_manager *m;
	struct rsd_xfer_batch *up;
	size_t index; /* of the action the caller runs now */
	size_t n;
	struct rsd_batch_entry q[RSD_BATCH_MAX];
	/* The first queued copy that failed at a flush, and its action. */
	bool failed;
	size_t failed_index;
};
void rsd__batch_begin(struct rsd_manager *m, struct rsd_xfer_batch *b);
void rsd__batch_end(struct rsd_xfer_batch *b);
bool rsd__batch_room(void);
bool rsd__batch_pending(void);
/* Hold x, queued, until the flush (a copy of it: the caller's ends). */
void rsd__batch_add(const struct rsd_xfer *x);
void rsd__batch_report(const struct rsd_transition *rep, bool stamp, struct rsd_transition *out);

/* Wait for the queued copies without the lock, then commit them in order
 * (the first failure rolls back the rest; b->failed names its action). */
int rsd__batch_flush(struct rsd_manager *m);

/* in lib/core/close.c: */
/* Free every record, value and lease record of a closing manager
 * (close.c); m->lock held, nothing in flight. */
void rsd__close_drop(struct rsd_manager *m);

/* Keep a resident allocated for the life of the process (close.c). */
void rsd__keep_forever(struct rsd_resident *r);

/* in lib/core/copy.c: */
/*
 * Copying a value (§4.4), in two steps so that only the first runs under
 * the lock: allocate the destination with the source's layout, then copy
 * into it and wait for the bytes (no lock; the caller frees dst on a
 * definite error).
 */
int rsd__copy_alloc(struct rsd_manager *m, const struct rsd_resident *src, struct rsd_location to,
		    void *stream, struct rsd_resident **out);

/* Queue the copy and record its event (NULL for a host copy, done at
 * once; *stream is the stream used); drains the stream on failure, and
 * sets *stuck when even that drain failed (what it queued may still
 * write dst: dst must never be freed, rsd__arrival_abandon()). */
int rsd__copy_issue(struct rsd_manager *m, const struct rsd_resident *src, struct rsd_location from,
		    struct rsd_resident *dst, struct rsd_location to, void **stream, void **event,
		    bool *stuck);

/* Wait for *event and destroy it: 0, or the copy's definite failure
 * (rsd__event_answer()). Without an answer (the drain failed too, or a
 * forced close interrupted the wait: RSD_ECLOSED) the error is returned
 * with *event kept, and the copy may still run (rsd__xfer_unanswered()). */
int rsd__copy_wait(struct rsd_manager *m, void *stream, void **event);

/* Best effort, the error record kept: 0, or the failed sync's code. */
int rsd__copy_drain(struct rsd_manager *m, void *stream);

/* Order a not-waiting copy from `from` to `to` after event (a queued copy
 * filling its source) on the device: *stream (picked when NULL) waits for
 * it there. false, the error record kept, when the host must wait instead. */
bool rsd__copy_order_after(struct rsd_manager *m, struct rsd_location from, struct rsd_location to,
			   void **stream, void *event);

/* in lib/core/evwait.c: */
/*
 * Without m->lock, counted as a device wait (rsd__device_wait_begin()):
 * wait for event, recorded on stream (of device dev, -1 when not known),
 * and get the device's answer: 0 with *failed 0 when it completed, or
 * with *failed set (recorded) when it failed for sure (it still fails
 * once its stream drained, or its device was lost). Otherwise no answer
 * (the work may still run, *failed untouched): the failed wait's error,
 * or RSD_ECLOSED when close(FORCE | NOWAIT) interrupted it.
 */
int rsd__event_answer(struct rsd_manager *m, void *stream, int dev, void *event, int *failed);

/* Wait for event, until close(FORCE | NOWAIT) says stop: 0, the driver's
 * error, or RSD_ECLOSED (recorded). No answer rule applied. */
int rsd__event_wait(struct rsd_manager *m, void *event);

/* Synchronize stream (its device dev when the stream is gone): 0, the
 * sync's error, or RSD_ECLOSED (recorded) when close(FORCE | NOWAIT)
 * interrupted it (drivers with stream_wait). */
int rsd__stream_drain(struct rsd_manager *m, void *stream, int dev);

/* With m->lock held, from close(FORCE | NOWAIT): every thread waiting in
 * rsd__event_wait() returns RSD_ECLOSED. */
void rsd__waits_stop(struct rsd_manager *m);

/* in lib/core/devloss.c: */
/* With the writer lock held, after a driver op failed with RSD_EDEVLOST:
 * mark the locations of the devices the driver reports lost as failed. */
void rsd__quarantine(struct rsd_manager *m);

/* -RSD_EDEVLOST, recorded, naming at and what was asked there. */
int rsd__err_failed(struct rsd_location at, uint64_t n);

/* -RSD_EDEVLOST, recorded: rec was lost with its device. */
int rsd__err_lost(const struct rsd_record *rec);

/* -RSD_EDEVLOST, recorded: mat, rec's copy on a lost device, is kept
 * (unreadable) while something protects it. */
int rsd__err_dead_copy(const struct rsd_record *rec, const struct rsd_mat *mat);

/* An event's error that is the device's final answer: the device of its
 * stream was lost, so the event never completes (noted for the
 * quarantine). A sound device's stream is drained first; dev is the
 * device of a stream the driver no longer knows. */
bool rsd__devloss_answer(struct rsd_manager *m, void *stream, int dev, int code);

/* Whether r's block is on a lost device: nothing is given back to the
 * driver, the bytes leave the books only. */
bool rsd__devloss_dead_block(const struct rsd_resident *r);

/* A value just adopted with mode: mark it durable when mode has
 * RSD_DURABLE. */
void rsd__durable_set(struct rsd_manager *m, struct rsd_record *rec, enum rsd_replica_mode mode);

/* A move of rec from `from` keeps that copy: rec is durable and it is its
 * last host copy (the move copies, as an ensure). */
bool rsd__durable_keep(const struct rsd_record *rec, struct rsd_location from);

/* At writer exit, m->ndurable nonzero: write back a host copy of every
 * durable value the call changed whose copies are all on devices. */
void rsd__durable_writeback(struct rsd_manager *m);

/* in lib/core/hold.c: */
/* Close-time teardown of every lifetime (forced close). */
void rsd__lifetimes_drop(struct rsd_manager *m);

/* Named reservations, shared with scopes. Writer path. */
int rsd__reserve_locked(struct rsd_manager *m, struct rsd_location at, uint64_t nbytes,
			const char *label, struct rsd_reservation **out);
void rsd__reservation_release_locked(struct rsd_manager *m, struct rsd_reservation *r);

/* in lib/core/image.c: */
int rsd__retire(struct rsd_image *img, void (*fn)(struct rsd_manager *m, void *p), void *p);

void rsd__retire_free(struct rsd_manager *m, void *p);

/* Retire an object of nbytes from m->oc: it goes back to the cache. */
int rsd__retire_obj(struct rsd_image *img, void *p, size_t nbytes);

/* Publish the writer state now (writer_exit does it). */
int rsd__publish(struct rsd_manager *m);

int rsd__publish_first(struct rsd_manager *m);

/* Hand the batch of replaced images to the reclaimer. */
void rsd__reclaim_flush(struct rsd_manager *m);

/* Run a batch's retirements and free its images (after a grace period);
 * writer: called by the writer (m->lock held), not the reclaimer thread. */
void rsd__image_reclaim(struct rsd_image *batch, bool writer);

/* Free the manager's plain batches whose grace period ended (at most max;
 * 0: all of them, at destroy). Writer path. */
void rsd__reclaim_poll(struct rsd_manager *m, unsigned max);

/* Free the last image; after rcu_barrier() at destroy. */
void rsd__image_destroy(struct rsd_manager *m);

/* The published tables follow these changes at the next publication
 * (image.c): l became pending; l was retired; r was made or its bytes
 * changed; r stopped counting. */
void rsd__pending_added(struct rsd_manager *m, struct rsd_lease_rec *l);
void rsd__pending_removed(struct rsd_manager *m, struct rsd_lease_rec *l);
void rsd__resv_changed(struct rsd_manager *m, struct rsd_reservation *r);
void rsd__resv_removed(struct rsd_manager *m, struct rsd_reservation *r);

/* in lib/core/install.c: */
/* Install / remove (§4.5). */
int rsd__install(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
		 struct rsd_resident *v, bool allow_exclusive);

/* Install bytes the caller moved out of a reservation at `at` under the
 * same hold of the lock: rsd__install without the admission (the
 * location's total does not change). */
int rsd__install_counted(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
			 struct rsd_resident *v);

/*
 * Put back a moved source whose copy failed (queued.c): its bytes never
 * left `at` (their charge stayed there, a temporary one the caller has
 * just refunded), so nothing is admitted and no other thread's headroom
 * can refuse it; an RSD_EXCLUSIVE value may still show its failed copy's
 * kept destination beside it.
 */
int rsd__install_back(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
		      struct rsd_resident *v);

/* §2.4 materialization validation. */
int rsd__mat_validate(const struct rsd_value_spec *spec, const struct rsd_resident *v,
		      struct rsd_location at);

/* The admit phase of a transfer: v becomes an arriving materialization,
 * charged and indexed, not resident and not yet counted in state_version. */
int rsd__install_arriving(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
			  struct rsd_resident *v, bool allow_exclusive);

/* Its commit (+1, and +1 for a location recorded now) or its abort (no
 * version step, the charge refunded, the value freed). */
void rsd__arrival_commit(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at);
void rsd__arrival_abort(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at);

/* The abort of a transfer whose destination the device may still write
 * (no answer from it): the same, but the storage is kept for the life of
 * the process, never freed. rsd__xfer_settle() then aborts nothing. */
void rsd__arrival_abandon(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at);

/* The same, the storage handed to the caller (its charge refunded). */
struct rsd_resident *rsd__arrival_take(struct rsd_manager *m, struct rsd_record *rec,
				       struct rsd_location at);

/* 0, or -RSD_EINUSE naming what protects mat (protections, a transfer). */
int rsd__removable(struct rsd_record *rec, struct rsd_mat *mat);
void rsd__remove(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at);

/* Take the materialization at `at` out of rec without freeing its value
 * (its charge refunded, +1); the caller owns the value. */
/* The destination at `at` of a failed copy gives its block back (queued.c):
 * its charge and owner entries go, it stays with its protections. */
void rsd__return_storage(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at);
struct rsd_resident *rsd__detach(struct rsd_manager *m, struct rsd_record *rec,
				 struct rsd_location at);

/* in lib/core/keymap.c: */
struct rsd_keymap_slot *rsd__keymap_find(struct rsd_keymap *km, int device, const void *base);
int rsd__keymap_insert(struct rsd_keymap *km, int device, const void *base, uint64_t owner,
		       struct rsd_location at);
void rsd__keymap_remove(struct rsd_keymap *km, int device, const void *base);
void rsd__keymap_free(struct rsd_keymap *km);

/* in lib/core/lease.c: */
/*
 * Reap completed pending leases (§8.5), stream by stream (§21.5). An
 * event whose query fails is no answer: its stream is synchronized
 * without the lock and the reap starts over (rsd__reap_flags() with
 * drain false leaves it pending instead, for a close that waits for
 * nothing). Returns 0, a sync's error or RSD_ECLOSED.
 */
int rsd__reap(struct rsd_manager *m);
int rsd__reap_flags(struct rsd_manager *m, bool drain);

/* Forget every queued event (close drops the leases themselves). */
void rsd__pend_clear(struct rsd_manager *m);

/* Wait for a pending lease's events without the lock, then fold them in
 * (the lease is finalized on success). */
int rsd__lease_wait(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Fold a pending lease in as complete: its events leave their queues and
 * it is finalized unless a waiter does that (a forced close uses it for
 * events the device reported failed). */
void rsd__lease_complete(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Finalize a pending lease (+1). */
void rsd__lease_finalize(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Unlink a lease record and free it after a grace period (no version). */
void rsd__lease_retire(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Free a lease record and its events (after its grace period). */
void rsd__lease_rec_free(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Validate and deduplicate a handle set (§8.1) into buf when n <= cap,
 * else into a new array (*out != buf: the caller frees it). */
int rsd__handle_set(const struct rsd_handle *h, size_t n, struct rsd_handle *buf, size_t cap,
		    struct rsd_handle **out, size_t *nout);

/* Free the recycled lease objects and records; at destroy. */
void rsd__lease_caches_free(struct rsd_manager *m);

/* Keep waiting on l's events possible without the lock: a pinned record
 * may be folded in meanwhile (its state DONE), and its last unpinner
 * frees it. */
static inline void rsd__lease_pin(struct rsd_lease_rec *l)
{
	l->waiters++;
}
void rsd__lease_unpin(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Lease records and event queues, shared with queued copies. */
struct rsd_lease_rec *rsd__lease_rec_new(struct rsd_manager *m, size_t k);
void rsd__lease_rec_put(struct rsd_manager *m, struct rsd_lease_rec *l);
void rsd__pend_push(struct rsd_manager *m, void *stream, struct rsd_pend_link *k);

/* in lib/core/lifetime.c: */
/* List and unlist an object (lifetime.c); the _locked forms (after struct
 * rsd_manager) with m->objs_lock held, unlink only while link->m is set. */
void rsd__obj_link(struct rsd_manager *m, struct rsd_objlink *link);
void rsd__obj_unlink(struct rsd_objlink *link);

/*
 * Called by *_free() after rsd__guard_free(). An object still active and
 * listed by a manager is released (kind->release) with a warning; the
 * warnings name it "<noun> '<label>'", or without a label "<noun>" and
 * "<noun> on <n> value(s)". True: the caller goes on to unlink and free it.
 * False: the release failed and the manager still lists the object, so
 * both are kept (m->keep_alive) and the caller returns without freeing.
 */
bool rsd__free_release(const struct rsd_lifetime_kind *kind, void *obj,
		       const struct rsd_objlink *link, bool active, const char *label, size_t n);

/* in lib/core/linlog.c: */
/* The test-only section log (internal.h, linlog.c); m->lock held. */
extern atomic_uint rsd__lin_on;
void rsd__lin_note_slow(const struct rsd_manager *m, enum rsd_lin_kind kind, uint64_t arg);

/* arg: the action index of RSD_LIN_SETTLE_*, else 0. */
static inline void rsd__lin_note(const struct rsd_manager *m, enum rsd_lin_kind kind, uint64_t arg)
{
	if (rsd__unlikely(atomic_load_explicit(&rsd__lin_on, memory_order_relaxed) != 0))
		rsd__lin_note_slow(m, kind, arg);
}

/* in lib/core/manager.c: */
struct rsd_mat *rsd__rec_mat(struct rsd_record *rec, struct rsd_location at);

/* The materialization at `at` when it is resident (not arriving). */
static inline struct rsd_mat *rsd__rec_resident(struct rsd_record *rec, struct rsd_location at)
{
	struct rsd_mat *mat = rsd__rec_mat(rec, at);

	return rsd__mat_resident(mat) ? mat : NULL;
}

/* Process-unique, never 0: manager, handle and lifetime ids. */
uint64_t rsd__next_id(void);

/*
 * Writer entry: guard (a source callback of m on this thread, same-thread
 * re-entry), transition lock, then the prologue named by flags. On success
 * the lock is held; leave with rsd__writer_exit(), which publishes what
 * changed and unlocks. Waiting for the lock is bounded by other calls'
 * admit and commit phases: no transfer runs under it.
 */
#define RSD_W_OPEN 1u /* refuse a closed manager */
#define RSD_W_REAP 2u /* reap completed leases */
int rsd__writer_enter(struct rsd_manager *m, unsigned flags);
void rsd__writer_exit(struct rsd_manager *m);

/*
 * The lock without any guard, for clean-up that must not fail (§21.4: a
 * call releasing what it built on its own failure path) and for commits.
 * Leave with rsd__writer_exit().
 */
void rsd__writer_lock(struct rsd_manager *m);

/*
 * Phases of a transfer (transition.c). pause leaves the lock for a transfer
 * phase: it publishes what earlier commits of the same call changed (only
 * when state_version moved: an admission alone is never published) and
 * unlocks; resume takes the lock back, unguarded, for the commit.
 */
void rsd__writer_pause(struct rsd_manager *m);
void rsd__writer_resume(struct rsd_manager *m);

/* Sleep without the lock until some transfer commits or rolls back, a
 * load ends or a waited-for lease is reaped; the lock is held again on
 * return. Callers re-check their condition. */
void rsd__writer_wait(struct rsd_manager *m);

/* Wake every thread in rsd__writer_wait(); m->lock held. Steps progress as
 * rsd__work_ended() does. */
void rsd__xfer_wake(struct rsd_manager *m);
/* Work in flight ended (m->ends): progress a controller wait waits for;
 * m->lock held. */
void rsd__work_ended(struct rsd_manager *m);

/* Leave the lock for a wait on the device, counted in m->inflight (close
 * waits for it, as for a transfer); end takes the lock back and wakes
 * the waiters. */
void rsd__device_wait_begin(struct rsd_manager *m);
void rsd__device_wait_end(struct rsd_manager *m);

/*
 * A source callback of m runs on this thread: the thread's own calls into
 * m are refused with RSD_EREENTRANT until it returns (§9.1); other
 * threads proceed. Frames live on the caller's stack.
 */
/* The calling thread's executor context (struct rsd_exec, internal.h;
 * never NULL). A plan's batch and headroom are pushed and popped on it
 * (batch.c, manager.c); whole scopes go through rsd__exec_enter(). */
struct rsd_exec *rsd__exec(void);

/* A source load's callback runs in a fresh, empty executor scope
 * (RSD_EXEC_FRESH): a call it makes on another manager neither queues its
 * copies nor joins the plan's batch, and its charges do not count against
 * the plan's headroom. */
struct rsd_cb_frame {
	const struct rsd_manager *m;
	struct rsd_cb_frame *up;
	struct rsd_exec_scope scope; /* the caller's context, back at the end */
};
void rsd__callback_begin(struct rsd_cb_frame *f, const struct rsd_manager *m);
void rsd__callback_end(struct rsd_cb_frame *f);
bool rsd__in_callback(const struct rsd_manager *m);

/* Whether the writer state differs from the published image. */
bool rsd__unpublished(const struct rsd_manager *m);

/* Validate a location against this manager's runtime (§1.3). */
int rsd__check_location(const struct rsd_manager *m, struct rsd_location at);

/* The same check with an explicit driver (a lease keeps its own). */
int rsd__check_driver_stream(const struct rsd_device_ops *ops, void *ctx, void *stream,
			     struct rsd_location at);

/* Resolve a handle (§2.5). */
int rsd__resolve(struct rsd_manager *m, struct rsd_handle h, struct rsd_record **out);

/* The same, but a value lost with its device resolves (a discard ends it). */
int rsd__resolve_lost(struct rsd_manager *m, struct rsd_handle h, struct rsd_record **out);

/* Resolve n handles that must be resident at `at` (acquire, hold): an
 * arriving copy is not resident (RSD_EUNAVAILABLE); a copy a move in
 * flight is taking away is waited for (lock released meanwhile). */
int rsd__resolve_resident(struct rsd_manager *m, const struct rsd_handle *h, size_t n,
			  struct rsd_location at, struct rsd_record **recs);

/* Admission rule (§7.1) for n more bytes at slot: n <= rsd__ledger_free()
 * of the location's ledger as this thread sees it (every term but its own
 * plan's headroom); records the error naming every term. */
int rsd__admit(struct rsd_manager *m, struct rsd_location at, uint64_t n);

/*
 * The headroom a plan's preflight predicted (its peaks above the location's
 * used + reserved then: rise), kept from other threads' admissions while
 * the plan executes and releases the lock for its transfers (§21.2). What
 * the plan's own actions charge comes out of it and what they give back
 * returns to it, never past rise: bytes[slot] = rise - net, kept within
 * [0, rise], so a byte the plan charged is never counted twice. Lives on
 * the executing thread's stack (the innermost is the thread's own); take
 * and give under m->lock.
 */
struct rsd_plan_hold {
	uint64_t bytes[RSD_NSLOTS]; /* kept now, in the location's plan_hold */
	uint64_t rise[RSD_NSLOTS];  /* predicted at the preflight */
	int64_t net[RSD_NSLOTS];    /* charged minus refunded by its own thread */
	struct rsd_plan_hold *up;   /* the thread's enclosing plan, if any */
};
struct rsd_location_bytes;
void rsd__plan_hold_take(struct rsd_manager *m, struct rsd_plan_hold *h,
			 const struct rsd_location_bytes *peaks, size_t npeaks);
void rsd__plan_hold_give(struct rsd_manager *m, struct rsd_plan_hold *h);

/*
 * Every change of a location's used, reserved or temp goes through here
 * (m->lock held): n bytes charged (add) or refunded at slot by this
 * thread, after the caller changed the counter: it adjusts the thread's
 * own plan's headroom (struct rsd_plan_hold) and marks the location table
 * for publication.
 */
void rsd__acct_change(struct rsd_manager *m, unsigned slot, uint64_t n, bool add);

/* Record a location lazily (+1) when not yet known. An arriving
 * destination's location is recorded at its commit; until then the
 * published table shows it in a row of its own (image.c). */
void rsd__record_location(struct rsd_manager *m, struct rsd_location at);
void rsd__mark_dirty(struct rsd_manager *m, struct rsd_record *rec);
void rsd__bump(struct rsd_manager *m);

void rsd__warn(struct rsd_manager *m, const char *fmt, ...) rsd__printf(2, 3);

/* in lib/core/output.c: */
/*
 * rsd_adopt_reserved() under the lock (output.c), for it, scopes and uses:
 * the value's charge moves out of r into the value in one step; with a
 * producer stream the new materialization is filling until an event
 * recorded on it completes (queued.c). Writer path, the manager open;
 * state unchanged on failure.
 */
int rsd__adopt_reserved_locked(struct rsd_manager *m, struct rsd_reservation *r,
			       struct rsd_resident *value, enum rsd_replica_mode mode,
			       void *producer_stream, struct rsd_handle *out);

/* in lib/core/prot.c: */
/*
 * Commit a lease or hold change of n values at `at` (use, hold and pending
 * are +1/-1 or 0): adjusts the writer's counts and the version (+1), then
 * appends a use/hold change to the published image's log when it can, or
 * leaves it for the full publication at writer exit.
 */
void rsd__commit_prot(struct rsd_manager *m, struct rsd_location at, struct rsd_record *const *recs,
		      size_t n, int use, int hold, int pending);

/* Mark the values of the image's log for re-imaging (full publication). */
void rsd__prot_fold(struct rsd_manager *m, const struct rsd_image *img);

/* in lib/core/ptab.c: */
/* Whether a table of count slots with live objects is rebuilt. */
bool rsd__ptab_sparse(uint64_t count, uint64_t live);

/* Retire every node of t into rt (t is being replaced whole). */
int rsd__ptab_retire_nodes(const struct rsd_ptab *t, struct rsd_image *rt);

/* A failed publication takes back rt's retirements from index from on:
 * free what rsd__ptab_retire_nodes() allocated for those. */
void rsd__ptab_retire_undo(struct rsd_image *rt, size_t from);

/* in lib/core/pvec.c: */
/* Set slot i (i <= count; i == count appends), copying frozen nodes on the
 * path and retiring them into rt. */
int rsd__pv_set(struct rsd_pv *pv, uint64_t i, void *val, uint64_t gen, struct rsd_image *rt);

/* Free every node reachable from pv, calling fn (when not NULL) on every
 * value; used at destroy. */
void rsd__pv_free_nodes(struct rsd_pv *pv, struct rsd__slab *oc,
			void (*fn)(struct rsd__slab *oc, void *val));

/* Undo a failed publication: free the nodes of generation gen reachable from
 * pv (nodes of earlier ones are shared with a published image) and clear
 * the slots appended in place at indices >= from (the published count),
 * calling fn (when not NULL) on every value in the slots freed or cleared. */
void rsd__pv_free_gen(struct rsd_pv *pv, struct rsd__slab *oc, uint64_t from, uint64_t gen,
		      void (*fn)(struct rsd__slab *oc, void *val, uint64_t gen));

/* in lib/core/queued.c: */
/* A writer section that only reaps (rsd_manager_reap() without reporting
 * a queued copy's failure): a use reaps before it decides, so that its own
 * entry's reap cannot make the decision stale. */
int rsd__reap_now(struct rsd_manager *m);

/*
 * Not-waiting calls (queued.c, reference.md §22). The public *_async entry
 * points run in queue mode, a flag of the calling thread: place() then
 * commits a device copy as soon as it is queued, with its event kept in a
 * pending lease record (its struct rsd_xfer), instead of waiting for it.
 */
/* rsd__queue_mode() and the executor scope that sets it are in
 * internal.h: the controller's not-waiting calls enter it too. */
/*
 * Commit x, a copy queued on x->stream with x->event, as l's transfer
 * (l->xf takes x's place): from x->src (a materialization, or the value a
 * source load made when x->temporary, charged temporarily while
 * x->charged) to x->to, removing the replica at x->src for a move: +1 as a
 * waited commit, x->to filling until l's event completes.
 */
void rsd__qcopy_commit(struct rsd_manager *m, struct rsd_lease_rec *l, const struct rsd_xfer *x);

/*
 * Make l the record of a write into rec's materialization at `to` that
 * event, recorded on stream, completes: `to` is filling until then, and
 * the record is queued on the stream as a pending lease. No version step
 * (the caller's commit makes it). rsd__qcopy_commit() uses it for a copy;
 * rsd_adopt_reserved() for the output a producer stream still writes.
 */
void rsd__qcopy_fill(struct rsd_manager *m, struct rsd_lease_rec *l, struct rsd_record *rec,
		     struct rsd_location to, void *stream, void *event, enum rsd_xfer_kind kind);

/* The record's event completed (or failed: l->xf->err): fold it in. */
void rsd__qcopy_finish(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Close without finishing it: free what it reads, or keep it for ever
 * (keep: the device may still read it). */
void rsd__qcopy_abandon(struct rsd_manager *m, struct rsd_lease_rec *l, bool keep);
/* In queue mode, a destination at `to` for rec laid out as `like` in the
 * block a queued spill still reads there, with that spill's charge:
 * *spill is its record (the new copy's stream must wait for its event).
 * 0 when there is none to take (nothing changed). */
int rsd__qcopy_handover(struct rsd_manager *m, struct rsd_record *rec,
			const struct rsd_resident *like, struct rsd_location to,
			struct rsd_resident **out, struct rsd_lease_rec **spill);
/* Back under the lock after issuing the copy into a handed-over block
 * (spill pinned by the caller, unpinned here): link the queued copy l to
 * the spill (or the record of a failed copy that may still run, which
 * keeps `copy` as its garbage), or, when the copy failed and nothing of
 * it runs (l NULL), give the block and its charge back to the spill;
 * `copy` then keeps its header only. Nothing when the spill settled
 * meanwhile (it settled the block then). */
/* The copy of rec that the queued copy filling mat reads: NULL when mat
 * is not filling, or its copy reads no materialization of rec (a move's
 * kept source, a loaded value). */
const struct rsd_mat *rsd__fill_source(const struct rsd_record *rec, const struct rsd_mat *mat);

void rsd__qcopy_handed(struct rsd_manager *m, struct rsd_lease_rec *spill, struct rsd_lease_rec *l,
		       struct rsd_resident *copy);
/* The device answered that l's copy failed: 0 when that answer can be
 * folded in now; 1 with *first, the copy that took l's block, which must
 * be folded in first (its answer decides what the block holds); -1 when
 * that copy is still being queued (no answer yet). */
int rsd__qcopy_answer_after(const struct rsd_lease_rec *l, struct rsd_lease_rec **first);

/*
 * A not-waiting call's admission at `at` failed: when a queued copy still
 * holds a temporary charge there (a move's source bytes, a loaded value),
 * wait for the oldest such copy without the lock and fold it in. Returns 1
 * when it waited (admit again), 0 outside queue mode or when no queued copy
 * holds room at `at`, or the error of waiting.
 */
int rsd__qcopy_wait_room(struct rsd_manager *m, struct rsd_location at);

/* x, a waited copy the device gave no answer for (rsd__copy_wait()
 * failed and kept its event, x->event), stays in flight as a queued copy
 * whose pending record's transfer carries it on (x keeps its state); err:
 * the error the caller returns. failed: the copy is known to have failed
 * (its issue did), and x->event only orders what it queued: it is undone
 * when that completes, its error not kept again. Returns that record (NULL
 * without memory for one: both ends are kept for ever). */
struct rsd_lease_rec *rsd__xfer_unanswered(struct rsd_manager *m, const struct rsd_xfer *x, int err,
					   bool failed);

/* The failure of the queued copy fill (fill->xf->err set), as the error
 * of a copy that read its destination. */
int rsd__fill_error(const struct rsd_lease_rec *fill);

/* The error of using mat, the kept destination of a failed queued copy
 * (mat FAILED, its code in mat->err). */
int rsd__failed_error(const struct rsd_record *rec, const struct rsd_mat *mat);

/* Remove rec's materialization at `at` when it is a failed copy's kept
 * destination whose last protection has ended (+1, true); else nothing. */
bool rsd__failed_settle(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at);

/* The recorded failure of a queued copy of rec (rec->copy_err set), as
 * the error of the call that needed the value; cleared, and no explicit
 * reap reports it after this. */
int rsd__copy_error(struct rsd_manager *m, struct rsd_record *rec);

/* A queued copy's failure no call has reported yet, for
 * rsd_manager_reap(): the last one, else any other; 0, or the error
 * (cleared: the value's next call does not report it again). */
int rsd__copy_error_reap(struct rsd_manager *m);

/* in lib/core/reclaim.c: */
/* Queue a batch for reclamation after a grace period (reclaim.c). */
void rsd__reclaim_submit(struct rsd_image *batch);

/* Wait until every grace period asked for so far has ended (and the
 * reclaimer freed what it was given). */
void rsd__reclaim_barrier(void);

/* Count a live manager (rsd_manager_create), and uncount it at destroy:
 * the last put ends the reclaimer thread. */
void rsd__reclaim_get(void);
void rsd__reclaim_put(void);

/* Ask for a grace period: its number for rsd__gp_done(). */
uint64_t rsd__gp_request(void);
bool rsd__gp_done(uint64_t seq);

/* in lib/core/register.c: */
/* Free a record (from m->oc) and its materialization array, not the
 * materializations' values. Writer path. */
void rsd__record_free(struct rsd_manager *m, struct rsd_record *rec);

int rsd__check_spec(const struct rsd_value_spec *spec);

/*
 * rsd_adopt's two steps (register.c). spec: the spec a resident adopted at
 * `at` gets, checked in rsd_adopt's order (conformance, replica mode, a
 * resident some manager owns). install: a new record with value as its
 * one materialization, committed in registration order; counted as for
 * rsd__install_counted. Writer path.
 */
int rsd__adopt_spec(const struct rsd_resident *value, struct rsd_location at,
		    enum rsd_replica_mode mode, struct rsd_value_spec *spec);
int rsd__adopt_install(struct rsd_manager *m, struct rsd_resident *value, struct rsd_location at,
		       const struct rsd_value_spec *spec, bool counted, struct rsd_record **out);

/* in lib/core/resident.c: */
/* Common location of every buffer; false when mixed (or no buffer). */
bool rsd__resident_location(const struct rsd_resident *r, struct rsd_location *at);

/* Allocate like rsd_resident_alloc() with an explicit driver. */
/* A header laid out as `like` over owner's block (which owner keeps
 * pointing at); false when it does not fit or is not a library block. */
bool rsd__resident_over(const struct rsd_resident *like, const struct rsd_resident *owner,
			struct rsd_resident **out);
int rsd__resident_alloc(const struct rsd_device_ops *ops, void *ops_ctx, int ndevices,
			const struct rsd_type *type, struct rsd_location at, size_t nbuf,
			const uint64_t *nbytes, const void *meta, size_t meta_len,
			struct rsd_resident **out);

/* Free a resident whatever its ownership. */
void rsd__resident_destroy(struct rsd_resident *r);
struct rsd_manager;

/* Retirement callback freeing a resident after a grace period. */
void rsd__retire_resident(struct rsd_manager *m, void *p);

/* in lib/core/staging.c and staging_worker.c: */
/*
 * Staged copies (staging.c): a copy between pageable host memory and a
 * device runs through the device's pinned staging pair. rsd__staging_copy
 * returns RSD__UNSTAGED, having done nothing, for any other copy, with
 * staging off, or when the pair cannot be allocated (the caller copies
 * directly); else 0 with the copy's completion event in *event, or a
 * negative code with the stream drained (*stuck set when the drain
 * failed). span is the copy's common span (0: buffer by buffer). Called
 * without m->lock.
 */
/* Without m->lock, never from a staging worker: until every device's
 * staging worker staged the jobs handed to it so far (their gates all
 * opened): 0, or -RSD_ECLOSED (recorded) when close(FORCE | NOWAIT) stops
 * the wait. */
int rsd__staging_quiesce(struct rsd_manager *m);

/* Never from a staging worker, with or without m->lock (a worker takes
 * neither it nor a staging lock): until the staging workers of every lost
 * device staged the jobs handed to them so far. Not stopped by a close,
 * and bounded: a lost device's worker gets every answer at once. What a
 * lost device's final answer (rsd__devloss_answer()) lets the caller free,
 * a worker may still read or write until then. rsd_last_error() is kept. */
void rsd__staging_settle_lost(struct rsd_manager *m);

#define RSD__UNSTAGED 1
int rsd__staging_copy(struct rsd_manager *m, const struct rsd_resident *src,
		      struct rsd_location from, struct rsd_resident *dst, struct rsd_location to,
		      uint64_t span, void *stream, void **event, bool *stuck);

/* At create: nbytes is the config's staging_nbytes (0: RSD_STAGING, else
 * the default). Allocates nothing but the per-device locks. */
int rsd__staging_init(struct rsd_manager *m, uint64_t nbytes);

/* Free the staging memory (at close, without m->lock); destroy frees the
 * rest. */
void rsd__staging_release(struct rsd_manager *m);
void rsd__staging_destroy(struct rsd_manager *m);

/* in lib/core/transition.c: */
/* Clear a transfer's marks and commit it (err 0) or roll it back. */
void rsd__xfer_settle(struct rsd_manager *m, struct rsd_record *rec,
		      const struct rsd_location *from, struct rsd_location to,
		      const struct rsd_location *leave, int err);

/* Run one action on the writer path (§4); report may be NULL. */
int rsd__exec_action(struct rsd_manager *m, const struct rsd_action *a, void *stream,
		     struct rsd_transition *report);

/* in lib/core/xfer.c: */
/*
 * Move mat to state `to` (the only writer of struct rsd_mat.state): fill
 * is the queued copy's record for FILLING, err the device's code for
 * FAILED; both are cleared in every other state. An illegal transition is
 * a bug of the library: it aborts with both states named.
 */
void rsd__mat_set_state(struct rsd_mat *mat, enum rsd_mat_state to, struct rsd_lease_rec *fill,
			int err);

/* A transfer's pending record (l->xf IDLE) with its event, stream and
 * queue link in one slab block, allocated before the transfer phase so
 * that queueing cannot fail (NULL: out of memory; the copy is then
 * waited for). m->lock held. */
struct rsd_lease_rec *rsd__xfer_new(struct rsd_manager *m);

/* Give back a record whose transfer was never queued (IDLE; NULL is
 * ignored). m->lock held. */
void rsd__xfer_discard(struct rsd_manager *m, struct rsd_lease_rec *l);

/* Free the block of a retired record's transfer (any thread). */
void rsd__xfer_free(struct rsd_manager *m, struct rsd_lease_rec *l);

/*
 * Move xf to state `to` (the only writer of struct rsd_xfer.state): QUEUED
 * from IDLE, DONE or FAILED from QUEUED, SETTLED from DONE or FAILED. err
 * is FAILED's error, recorded unless one is already (the first stays). An
 * illegal transition aborts, as rsd__mat_set_state() does.
 */
void rsd__xfer_set_state(struct rsd_xfer *xf, enum rsd_xfer_state to, int err);

#endif
