/* SPDX-License-Identifier: MIT */
/*
 * Private helpers shared by every layer of librsd. Nothing here is exported:
 * the version script keeps only rsd_* symbols of include/rsd/ visible, and
 * these carry the rsd__ (double underscore) prefix, which it hides.
 *
 * Naming. Functions, variables and macros shared between files are rsd__*
 * (RSD__* for constants); those of one file are static and unprefixed.
 * Types:
 * - the public types of include/rsd/ are struct rsd_NAME; core.h (with
 *   image.h, its read side) completes the opaque ones (struct rsd_manager,
 *   rsd_lease, rsd_hold, ...) and names the core's own objects the same way (struct rsd_record,
 *   rsd_mat, rsd_image, rsd_acct): they are the library's state;
 * - a type private to another layer, shared between its files, is
 *   struct rsd__NAME (lib/ctrl: rsd__meta, rsd__pstate, rsd__ps_bytes);
 * - a type of one file, or of the files behind a header that only they
 *   include (lib/ctrl/search.h: search.c, search_steps.c), is unprefixed
 *   (struct group in use.c, struct search);
 * - one NAME is never two types: a layer's type says whose it is
 *   (rsd__ps_bytes, not a second "acct"), and so do functions that do
 *   alike in two layers (rsd__search_simulate, rsd__plan_simulate).
 * A file is named for what it holds (search.c: the search; search_steps.c:
 * its steps), and its top comment says so.
 */
#ifndef RSD_INTERNAL_H
#define RSD_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <rsd/rsd.h>

#define RSD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define rsd__printf(a, b) __attribute__((format(printf, a, b)))
#define rsd__likely(x) __builtin_expect(!!(x), 1)
#define rsd__fallthrough __attribute__((fallthrough))
#define rsd__unlikely(x) __builtin_expect(!!(x), 0)
#else
#define rsd__printf(a, b)
#define rsd__likely(x) (x)
#define rsd__fallthrough
#define rsd__unlikely(x) (x)
#endif

/*
 * Record a failure on this thread and return -code. Every public function
 * that fails calls one of these exactly once, at the point that knows the
 * facts; callers further up propagate the negative code untouched.
 */
int rsd__err(int code, const char *fmt, ...) rsd__printf(2, 3);
int rsd__verr(int code, const char *fmt, va_list ap);
/*
 * One location's byte ledger: every term an admission there sums, as the
 * location's published snapshot shows them (struct rsd_location_snapshot).
 * The core fills it from its live counters, the plan simulation and the
 * controller's search from a published image and their simulated used and
 * reserved bytes; rsd__ledger_free() is the one rule that turns it into
 * the bytes a location can still admit.
 */
struct rsd__ledger {
	bool has_budget;
	uint64_t budget;
	uint64_t used;	    /* materializations, arriving destinations included */
	uint64_t reserved;  /* named reservations */
	uint64_t in_flight; /* queued moves' sources still read, temporary loads */
	uint64_t held;	    /* headroom executing plans keep for their own actions */
	uint32_t holders;   /* the plans keeping @held (0 when @held is 0) */
};

/* used + reserved + in_flight + held, saturated at UINT64_MAX. */
static inline uint64_t rsd__ledger_taken(const struct rsd__ledger *l)
{
	uint64_t t = l->used;

	t = t > UINT64_MAX - l->reserved ? UINT64_MAX : t + l->reserved;
	t = t > UINT64_MAX - l->in_flight ? UINT64_MAX : t + l->in_flight;
	return t > UINT64_MAX - l->held ? UINT64_MAX : t + l->held;
}

/*
 * The bytes the location admits now: budget - taken (0 when taken is at or
 * over the budget); without a budget, what the counters can take before
 * they wrap (they stay exact sums). A request of n bytes is admitted
 * exactly when n <= rsd__ledger_free().
 */
static inline uint64_t rsd__ledger_free(const struct rsd__ledger *l)
{
	uint64_t taken = rsd__ledger_taken(l);

	if (!l->has_budget)
		return UINT64_MAX - taken;
	return taken < l->budget ? l->budget - taken : 0;
}

/* A budget rejection of requested bytes by ledger l at `at`, its message
 * and structured fields naming every term l sums. */
int rsd__err_budget(struct rsd_location at, const struct rsd__ledger *l, uint64_t requested);
/* The same terms as text ("budget=..., used=..., ..., held by 2 plans=..."),
 * for messages that add their own facts; returns buf. */
const char *rsd__ledger_text(const struct rsd__ledger *l, char *buf, size_t len);
#define RSD__LEDGER_TEXT_MAX 160
/* Whether an RSD_EDEVLOST was recorded on this thread since the last call
 * (a driver met a lost device); clears the mark. */
bool rsd__devlost_take(void);
/* Set that mark without recording an error: a device's event reported
 * the loss to a caller that keeps its own error (a reap). */
void rsd__devlost_note(void);
/* A stale-state rejection with its structured fields. */
int rsd__err_stale(uint64_t expected, uint64_t actual);
/* The thread's record, for callers that add structured fields after
 * rsd__err() (phase, indices, cause, search figures). */
struct rsd_error *rsd__err_record(void);
/* Clear the thread's record (code 0). */
void rsd__err_clear(void);

/*
 * The double-free guard of the objects callers free (leases, holds,
 * reservations, uses, snapshots, decisions): a word set to RSD__LIVE when the
 * object is handed out, which its *_free() turns into RSD__FREED through
 * rsd__guard_free() before touching anything else. Finding another value
 * there, it aborts with a message naming the object and the function, as
 * glibc's free() aborts on a double free, instead of unlinking the object
 * twice or caching it twice and corrupting the manager. The word sits past
 * an object's first 16 bytes, which glibc's free() overwrites with its own
 * free-list links; memory malloc has handed out again holds something else
 * there, which aborts as well. Objects a cache keeps (leases) are checked
 * exactly.
 */
#define RSD__LIVE 0x6c697665u  /* "live" */
#define RSD__FREED 0x66726565u /* "free" */
void rsd__guard_free(uint32_t *guard, const char *fn, const char *type, const void *obj);

/* Wall clock, Unix nanoseconds. */
uint64_t rsd__now_ns(void);

/* The timespec of ns nanoseconds since a clock's epoch: the deadline of a
 * timed condition wait on that clock. */
static inline struct timespec rsd__timespec_ns(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };
}

/* Quote a string the way the reference's repr does (reference.md §10.3),
 * into buf; returns buf (truncated to len). */
char *rsd__quote(const char *s, char *buf, size_t len);
/* Non-NULL and containing a non-whitespace character. */
bool rsd__nonblank(const char *s);

/*
 * Fault points (include/rsd/fault.h). rsd__fault() is the hot path: while
 * no point is armed it is one relaxed load of a flag that only
 * rsd_fault_inject() writes, and one not-taken branch. It returns 0, or the
 * negative code the armed hit fails with. For every point but "alloc" the
 * failure is recorded (rsd__err) before it returns; "alloc" returns only the
 * code, and the wrappers below turn it into the NULL a real allocator
 * returns, so the caller's own out-of-memory path runs and records the
 * error as it would for a real failure. A point whose subject costs
 * something to build tests rsd__fault_on() first, then calls
 * rsd__fault_hit().
 */
enum rsd__fault_id {
	RSD__FAULT_ALLOC,
	RSD__FAULT_ACQUIRE,
	RSD__FAULT_RESERVE,
	RSD__FAULT_RESIDENT,
	RSD__FAULT_N
};
/* Number of armed points; written under the framework's lock only. */
extern atomic_uint rsd__fault_armed;
int rsd__fault_hit(enum rsd__fault_id id, const char *subject);
static inline bool rsd__fault_on(void)
{
	return rsd__unlikely(atomic_load_explicit(&rsd__fault_armed, memory_order_relaxed) != 0);
}
static inline int rsd__fault(enum rsd__fault_id id, const char *subject)
{
	return rsd__fault_on() ? rsd__fault_hit(id, subject) : 0;
}
/* For tests: how many injected failures have fired in this process, and the
 * subject of the last one (copied into subject, truncated to len). */
uint64_t rsd__fault_fired(char *subject, size_t len);

/*
 * Test-only history of the calling thread's writer sections, for the
 * multi-threaded model test (tests/model/linearize.c). With a log set,
 * every take and release of a manager's transition lock by this thread, the
 * start and end of every action it executes and the commit of every copy a
 * plan queued append an entry holding
 * the manager's state_version at that instant; takes also get a number
 * from one process-wide sequence, so the sections of all logging threads
 * (of one manager) are totally ordered. A full log sets overflow and drops
 * further entries. Not exported; costs one relaxed load while no log is set.
 */
enum rsd_lin_kind {
	RSD_LIN_LOCK,
	RSD_LIN_UNLOCK,
	RSD_LIN_ACT_BEGIN,
	RSD_LIN_ACT_END,
	/* A plan's queued copy commits (or rolls back) at a flush. */
	RSD_LIN_SETTLE_BEGIN,
	RSD_LIN_SETTLE_END,
	/* A not-waiting call's queued copy is folded in (completed or
	 * failed), inside whichever writer section reaps it. */
	RSD_LIN_QDONE,
	/* A not-waiting copy took a queued spill's block (queued.c,
	 * rsd__qcopy_handover()): the sequential model does not know it. */
	RSD_LIN_HANDOVER
};
struct rsd_lin_ent {
	enum rsd_lin_kind kind;
	/* RSD_LIN_LOCK: 1, 2, ... in lock order; RSD_LIN_SETTLE_*: the
	 * plan's index of the action whose copy settles; RSD_LIN_QDONE:
	 * rsd__lin_qdone_arg() of the copy's value and destination; else 0 */
	uint64_t seq;
	uint64_t version;
};
struct rsd_lin_log {
	struct rsd_lin_ent *ent;
	size_t n, cap;
	bool overflow;
};
/* RSD_LIN_QDONE's argument: the value's id, then one byte for the
 * destination (0 pageable host, 1 pinned host, 2 + n cuda:n). */
static inline uint64_t rsd__lin_qdone_arg(uint64_t id, struct rsd_location to)
{
	return id << 8 | (uint64_t)(to.kind == RSD_CUDA	       ? 2 + to.device :
				    to.kind == RSD_PINNED_HOST ? 1 :
								 0);
}
/* Log this thread's sections into log (NULL: stop). */
void rsd__lin_log_set(struct rsd_lin_log *log);

/*
 * Diagnostics for a test's watchdog: what a hang waits for. The manager's
 * dump prints who holds its transition lock (a thread's rsd__thread_token())
 * and, when it can take the lock within a second, what is in flight and each
 * known location's ledger; the controller's prints every use waiting for
 * other threads' work, what it waits for and how often it tried. Neither
 * changes any state.
 */
uintptr_t rsd__thread_token(void);
void rsd__manager_dump(struct rsd_manager *m, FILE *f);
struct rsd_controller;
void rsd__controller_dump(struct rsd_controller *c, FILE *f);

/*
 * Bookkeeping allocations: every malloc, calloc, realloc and strdup librsd
 * makes for its own records goes through these, which are the "alloc" fault
 * point with the call site as subject. Value storage and device memory do
 * not (they are a source's or a driver's, and fail through those).
 */
#define RSD__STR2(x) #x
#define RSD__STR(x) RSD__STR2(x)
#define RSD__SITE __FILE__ ":" RSD__STR(__LINE__)
static inline void *rsd__malloc_at(const char *site, size_t n)
{
	return rsd__fault(RSD__FAULT_ALLOC, site) ? NULL : malloc(n);
}
static inline void *rsd__calloc_at(const char *site, size_t k, size_t n)
{
	return rsd__fault(RSD__FAULT_ALLOC, site) ? NULL : calloc(k, n);
}
/* Like realloc: on failure p is untouched and still owned by the caller. */
static inline void *rsd__realloc_at(const char *site, void *p, size_t n)
{
	return rsd__fault(RSD__FAULT_ALLOC, site) ? NULL : realloc(p, n);
}
#define rsd__malloc(n) rsd__malloc_at(RSD__SITE, (n))
#define rsd__calloc(k, n) rsd__calloc_at(RSD__SITE, (k), (n))
#define rsd__realloc(p, n) rsd__realloc_at(RSD__SITE, (p), (n))
/* strdup of s (NULL copies as ""), recording -RSD_ENOMEM on failure. */
char *rsd__strdup_at(const char *site, const char *s);
#define rsd__strdup(s) rsd__strdup_at(RSD__SITE, (s))

/* Canonical dense slot of a statically valid location: pageable 0,
 * pinned 1, cuda:N 2 + N. */
#define RSD_NSLOTS (2 + RSD_CUDA_MAX_DEVICE + 1)
static inline unsigned rsd__loc_slot(struct rsd_location loc)
{
	return loc.kind == RSD_CUDA ? 2u + (unsigned)loc.device : (unsigned)loc.kind;
}
struct rsd_location rsd__slot_loc(unsigned slot);

/*
 * Argument checks of the records every entry point takes, run before any
 * lock is taken or any handle resolved; each records the failure naming
 * `what` (the function or argument) and returns its negative code.
 *
 * A location record whose kind is none of the three, or a host kind whose
 * device is not -1, is not a location (-RSD_ETYPE); a CUDA record with a
 * device index outside 0..RSD_CUDA_MAX_DEVICE is -RSD_EINVAL. Whether the
 * device exists is the manager's check (rsd__check_location).
 */
int rsd__location_check(struct rsd_location loc, const char *what);
/* A malformed handle: manager_id or id 0 is -RSD_EINVAL; a type that is
 * NULL or does not derive from rsd_resident_type is -RSD_ETYPE. */
int rsd__handle_check(struct rsd_handle h, const char *what);
/* Every handle of h[0..n); the message names the index. */
int rsd__handles_check(const struct rsd_handle *h, size_t n, const char *what);
/* A value type: NULL or not derived from rsd_resident_type is -RSD_ETYPE. */
int rsd__type_check(const struct rsd_type *type, const char *what);

/* "ResidencyLocation(kind='...', device=device(type='...'))" of §10.3. */
const char *rsd__loc_repr(struct rsd_location loc, char *buf, size_t len);

/*
 * A map from pointers (never NULL) to indices (lib/base/ptrmap.c): O(1)
 * expected lookup, insertion and removal. A zeroed map is empty; set
 * fails only for memory (-RSD_ENOMEM, recorded by no one: the caller
 * names what it was doing), leaving the map as it was.
 */
struct rsd__ptrmap_slot {
	const void *key; /* NULL: empty */
	size_t val;
};
struct rsd__ptrmap {
	struct rsd__ptrmap_slot *slot;
	size_t cap, n; /* cap 0 or a power of two, n <= cap / 2 */
};
bool rsd__ptrmap_get(const struct rsd__ptrmap *pm, const void *key, size_t *val);
int rsd__ptrmap_set(struct rsd__ptrmap *pm, const void *key, size_t val);
void rsd__ptrmap_del(struct rsd__ptrmap *pm, const void *key);
/* Empty it, keeping its memory. */
void rsd__ptrmap_clear(struct rsd__ptrmap *pm);
void rsd__ptrmap_free(struct rsd__ptrmap *pm);

/*
 * What the calling thread is executing (lib/core/manager.c), one context
 * per thread: its queue mode (while set, device copies of transitions are
 * committed once queued instead of waited for: lib/core/queued.c), the
 * plan batch its copies join (lib/core/batch.c) and the innermost plan's
 * held headroom. Entry points change it only through a scope, which saves
 * the whole context and puts it back when left, nested:
 *
 *	struct rsd_exec_scope s;
 *
 *	rsd__exec_enter(&s, RSD_EXEC_QUEUE);
 *	... the waiting call, its copies queued ...
 *	rsd__exec_leave(&s);
 */
struct rsd_xfer_batch;
struct rsd_plan_hold;
struct rsd_exec {
	bool queue_mode;
	struct rsd_xfer_batch *batch;
	struct rsd_plan_hold *hold;
};

enum rsd_exec_kind {
	RSD_EXEC_QUEUE, /* queue mode on, batch and headroom kept */
	RSD_EXEC_FRESH, /* an empty context: queue mode off, no batch, no headroom */
};

struct rsd_exec_scope {
	struct rsd_exec saved; /* the context entered from */
};

void rsd__exec_enter(struct rsd_exec_scope *s, enum rsd_exec_kind kind);
void rsd__exec_leave(const struct rsd_exec_scope *s);

/* Whether the calling thread is in queue mode. */
bool rsd__queue_mode(void);

#endif
