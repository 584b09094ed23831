// SPDX-License-Identifier: MIT
/*
 * The manager: creation, ids, the guarded writer entry and exit (with
 * publication), location and stream checks, record lookup, admission and
 * version steps. Closing and destroying are in close.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "../trace.h"

static atomic_uint_fast64_t id_counter;

uint64_t rsd__next_id(void)
{
	return (uint64_t)atomic_fetch_add(&id_counter, 1) + 1;
}

/* A unique token per thread: the address of a thread-local byte. */
static _Thread_local char thread_token;

static uintptr_t self_token(void)
{
	return (uintptr_t)&thread_token;
}

uintptr_t rsd__thread_token(void)
{
	return self_token();
}

void rsd__warn(struct rsd_manager *m, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m && m->warn)
		m->warn(m->warn_ctx, msg);
	else
		fprintf(stderr, "librsd: warning: %s\n", msg);
}

int rsd__check_location(const struct rsd_manager *m, struct rsd_location at)
{
	char name[RSD_LOCATION_NAME_MAX];
	int err;

	err = rsd__location_check(at, "residency location");
	if (err)
		return err;
	if (at.kind != RSD_CUDA)
		return 0;
	if (!m->ndevices)
		return rsd__err(RSD_EINVAL, "CUDA residency locations require available CUDA");
	if (at.device >= m->ndevices)
		return rsd__err(RSD_EINVAL,
				"Residency location %s is not available in this process",
				rsd_location_name(at, name, sizeof(name)));
	return 0;
}

int rsd__check_driver_stream(const struct rsd_device_ops *ops, void *ctx, void *stream,
			     struct rsd_location at)
{
	char name[RSD_LOCATION_NAME_MAX];
	int dev = -1, rc = -RSD_ETYPE;

	if (stream && ops->stream_device)
		rc = ops->stream_device(ctx, stream, &dev);
	/* A stream of a device lost for good (devloss.c): the loss is the fact. */
	if (rc == -RSD_EDEVLOST)
		return rsd__err(RSD_EDEVLOST, "stream %p: %s", stream, rsd_last_error()->message);
	if (rc)
		return rsd__err(RSD_ETYPE, "%p is not a stream of the %s driver", stream,
				ops->name);
	if (at.kind != RSD_CUDA)
		return rsd__err(RSD_EINVAL, "streams require a CUDA location, not %s",
				rsd_location_name(at, name, sizeof(name)));
	if (dev != at.device)
		return rsd__err(RSD_EINVAL, "stream on cuda:%d does not match %s", dev,
				rsd_location_name(at, name, sizeof(name)));
	return 0;
}

/*
 * The location first: a stream cannot match a device this process lacks,
 * and "cuda:2 is not available" is the fact a caller must hear, not that
 * its cuda:0 stream does not match cuda:2.
 */
int rsd__check_stream(const struct rsd_manager *m, void *stream, struct rsd_location at)
{
	int err = rsd__check_location(m, at);

	return err ? err : rsd__check_driver_stream(m->ops, m->ops_ctx, stream, at);
}

/* Records are sorted by id: registration order is issue order. */
static struct rsd_record *find_record(struct rsd_manager *m, uint64_t id)
{
	size_t lo = 0, hi = m->nrecs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->recs[mid]->handle.id == id)
			return m->recs[mid];
		if (m->recs[mid]->handle.id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int resolve(struct rsd_manager *m, struct rsd_handle h, bool lost_ok,
		   struct rsd_record **out)
{
	struct rsd_record *rec;

	if (h.manager_id != m->id)
		return rsd__err(RSD_EHANDLE, "Handle belongs to manager '%llu', not '%llu'",
				(unsigned long long)h.manager_id, (unsigned long long)m->id);
	rec = find_record(m, h.id);
	if (!rec || rec->handle.type != h.type)
		return rsd__err(RSD_EHANDLE, "Residency handle is unknown");
	if (rec->discarded)
		return rsd__err(RSD_EHANDLE, "Residency value '%llu' has been discarded",
				(unsigned long long)h.id);
	/* A queued copy of it failed on the device since (queued.c). */
	if (rsd__unlikely(rec->copy_err))
		return rsd__copy_error(m, rec);
	/* Its only copy went with a failed device (devloss.c). */
	if (rsd__unlikely(rec->lost) && !lost_ok)
		return rsd__err_lost(rec);
	*out = rec;
	return 0;
}

int rsd__resolve(struct rsd_manager *m, struct rsd_handle h, struct rsd_record **out)
{
	return resolve(m, h, false, out);
}

int rsd__resolve_lost(struct rsd_manager *m, struct rsd_handle h, struct rsd_record **out)
{
	return resolve(m, h, true, out);
}

int rsd__resolve_resident(struct rsd_manager *m, const struct rsd_handle *h, size_t n,
			  struct rsd_location at, struct rsd_record **recs)
{
	char name[RSD_LOCATION_NAME_MAX];
	bool leaving;
	int err;

	do {
		leaving = false;
		for (size_t i = 0; i < n; i++) {
			struct rsd_mat *mat;

			err = rsd__resolve(m, h[i], &recs[i]);
			if (err)
				return err;
			mat = rsd__rec_resident(recs[i], at);
			if (!mat)
				return rsd__err(RSD_EUNAVAILABLE,
						"value %llu is not resident at %s",
						(unsigned long long)h[i].id,
						rsd_location_name(at, name, sizeof(name)));
			if (rsd__unlikely(rsd__mat_failed(mat)))
				return rsd__failed_error(recs[i], mat);
			leaving |= mat->leaving;
		}
		/* A move in flight removes it at its commit: protecting it now
		 * would make that commit fail, so come after it. */
		if (leaving) {
			rsd__writer_wait(m);
			if (m->closed)
				return rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
						(unsigned long long)m->id);
		}
	} while (leaving);
	return 0;
}

static _Thread_local struct rsd_exec exec;

struct rsd_exec *rsd__exec(void)
{
	return &exec;
}

void rsd__exec_enter(struct rsd_exec_scope *s, enum rsd_exec_kind kind)
{
	s->saved = exec;
	if (kind == RSD_EXEC_FRESH)
		memset(&exec, 0, sizeof(exec));
	else
		exec.queue_mode = true;
}

void rsd__exec_leave(const struct rsd_exec_scope *s)
{
	exec = s->saved;
}

uint64_t rsd__plan_hold_own(unsigned slot)
{
	return exec.hold ? exec.hold->bytes[slot] : 0;
}

/* The location's ledger as an admission on this thread sums it. */
static struct rsd__ledger admit_ledger(const struct rsd_manager *m, struct rsd_location at)
{
	unsigned slot = rsd__loc_slot(at);

	return rsd__acct_ledger(&m->acct[slot], rsd__plan_hold_own(slot));
}

int rsd__admit(struct rsd_manager *m, struct rsd_location at, uint64_t n)
{
	unsigned slot = rsd__loc_slot(at);
	const struct rsd_acct *a = &m->acct[slot];
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd__ledger l;

	if (rsd__unlikely(a->failed))
		return rsd__err_failed(at, n);
	/* A location never recorded has nothing charged and no budget. */
	if (!a->known)
		return 0;
	/* Other threads' plans keep the headroom they predicted; this
	 * thread's own plan may use its own. */
	l = admit_ledger(m, at);
	if (n <= rsd__ledger_free(&l))
		return 0;
	/* A lost device not met yet: full of copies no call has touched
	 * since, it refuses for the loss, which this call then quarantines
	 * (devloss.c), not for budget. */
	if (at.kind == RSD_CUDA && m->ops->device_lost &&
	    m->ops->device_lost(m->ops_ctx, at.device)) {
		rsd__devlost_note();
		return rsd__err_failed(at, n);
	}
	if (l.has_budget) {
		rsd_trace_budget_reject(m->id, at, &l, n);
		return rsd__err_budget(at, &l, n);
	}
	/* Unbudgeted counters must stay exact sums: refuse what would wrap. */
	return rsd__err(
		RSD_EINVAL,
		"%llu more bytes at %s would overflow its byte counters (used %llu, reserved %llu, in flight %llu)",
		(unsigned long long)n, rsd_location_name(at, name, sizeof(name)),
		(unsigned long long)l.used, (unsigned long long)l.reserved,
		(unsigned long long)l.in_flight);
}

/* Set h's headroom at slot to rise - net within [0, rise], keeping the
 * location's plan_hold and plan_holders the sums over every plan. */
static void hold_set(struct rsd_manager *m, struct rsd_plan_hold *h, unsigned slot)
{
	struct rsd_acct *a = &m->acct[slot];
	int64_t net = h->net[slot];
	uint64_t now = net <= 0			      ? h->rise[slot] :
		       (uint64_t)net >= h->rise[slot] ? 0 :
							h->rise[slot] - (uint64_t)net;

	if (now == h->bytes[slot])
		return;
	a->plan_holders += (now != 0) - (h->bytes[slot] != 0);
	a->plan_hold = a->plan_hold - h->bytes[slot] + now;
	h->bytes[slot] = now;
	m->locs_dirty = true;
}

/* Something may have given room back; m->lock held. The waiters are woken
 * when the lock is left (rsd__writer_exit), after the state is published. */
static void progress_step(struct rsd_manager *m)
{
	atomic_store_explicit(&m->progress,
			      atomic_load_explicit(&m->progress, memory_order_relaxed) + 1,
			      memory_order_release);
}

void rsd__work_ended(struct rsd_manager *m)
{
	atomic_store_explicit(&m->ends, atomic_load_explicit(&m->ends, memory_order_relaxed) + 1,
			      memory_order_release);
	progress_step(m);
}

void rsd__plan_hold_take(struct rsd_manager *m, struct rsd_plan_hold *h,
			 const struct rsd_location_bytes *peaks, size_t npeaks)
{
	memset(h, 0, sizeof(*h));
	for (size_t i = 0; i < npeaks; i++) {
		unsigned slot = rsd__loc_slot(peaks[i].location);
		const struct rsd_acct *a = &m->acct[slot];
		uint64_t now = a->used + a->reserved;

		/* The peaks are the simulation's used + reserved. */
		if (!a->has_budget || peaks[i].nbytes <= now)
			continue;
		h->rise[slot] = peaks[i].nbytes - now;
		hold_set(m, h, slot);
	}
	h->up = exec.hold;
	exec.hold = h;
}

void rsd__plan_hold_give(struct rsd_manager *m, struct rsd_plan_hold *h)
{
	for (unsigned slot = 0; slot < RSD_NSLOTS; slot++) {
		h->rise[slot] = 0;
		hold_set(m, h, slot);
	}
	exec.hold = h->up;
	rsd__work_ended(m);
}

void rsd__acct_change(struct rsd_manager *m, unsigned slot, uint64_t n, bool add)
{
	struct rsd_plan_hold *h = exec.hold;

	m->locs_dirty = true;
	if (!h || !h->rise[slot])
		return;
	/* net stays within +-2^62 (no wrap): by then the headroom is long
	 * at 0 or at rise, where more of the same no longer moves it. */
	if (n > INT64_MAX / 2)
		n = INT64_MAX / 2;
	if (add)
		h->net[slot] += h->net[slot] > INT64_MAX / 2 ? 0 : (int64_t)n;
	else
		h->net[slot] -= h->net[slot] < -(INT64_MAX / 2) ? 0 : (int64_t)n;
	hold_set(m, h, slot);
}

void rsd__bump(struct rsd_manager *m)
{
	m->version++;
	m->locs_dirty = true;
}

/* Every state_version step is progress, however it was made; m->lock held. */
static void progress_sync(struct rsd_manager *m)
{
	if (m->progress_version != m->version) {
		m->progress_version = m->version;
		progress_step(m);
	}
}

void rsd__record_location(struct rsd_manager *m, struct rsd_location at)
{
	unsigned slot = rsd__loc_slot(at);

	if (m->acct[slot].known)
		return;
	m->acct[slot].known = true;
	m->order[m->nknown++] = (uint8_t)slot;
	/* Values with a copy still arriving here have no member bit in the
	 * location's row yet (image.c keeps none for a provisional row):
	 * re-image every value so that they get theirs. */
	if (m->acct[slot].arriving)
		m->republish_all = true;
	rsd__bump(m);
}

void rsd__mark_dirty(struct rsd_manager *m, struct rsd_record *rec)
{
	if (rec->dirty)
		return;
	if (m->ndirty == m->capdirty) {
		size_t cap = m->capdirty ? m->capdirty * 2 : 64;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct rsd_record **d = rsd__realloc(m->dirty, cap * sizeof(*d));

		/* Publication must not miss a change for bookkeeping: fall
		 * back to re-imaging every record at the next publication. */
		if (!d) {
			m->republish_all = true;
			return;
		}
		m->dirty = d;
		m->capdirty = cap;
	}
	rec->dirty = true;
	m->dirty[m->ndirty++] = rec;
}

struct rsd_mat *rsd__rec_mat(struct rsd_record *rec, struct rsd_location at)
{
	for (uint32_t i = 0; i < rec->nmats; i++)
		if (rsd_location_equal(rec->mats[i].loc, at))
			return &rec->mats[i];
	return NULL;
}

static _Thread_local struct rsd_cb_frame *cb_top;

void rsd__callback_begin(struct rsd_cb_frame *f, const struct rsd_manager *m)
{
	f->m = m;
	f->up = cb_top;
	cb_top = f;
	rsd__exec_enter(&f->scope, RSD_EXEC_FRESH);
}

void rsd__callback_end(struct rsd_cb_frame *f)
{
	rsd__exec_leave(&f->scope);
	cb_top = f->up;
}

bool rsd__in_callback(const struct rsd_manager *m)
{
	for (const struct rsd_cb_frame *f = cb_top; f; f = f->up)
		if (f->m == m)
			return true;
	return false;
}

static void writer_lock_raw(struct rsd_manager *m)
{
	pthread_mutex_lock(&m->lock);
	/* Only this thread compares the token with its own: no ordering. */
	atomic_store_explicit(&m->owner, self_token(), memory_order_relaxed);
	rsd__lin_note(m, RSD_LIN_LOCK, 0);
}

static void writer_unlock(struct rsd_manager *m)
{
	rsd__lin_note(m, RSD_LIN_UNLOCK, 0);
	atomic_store_explicit(&m->owner, (uintptr_t)0, memory_order_relaxed);
	pthread_mutex_unlock(&m->lock);
}

/*
 * Writer entry (reference.md §9.1, §5.3). Only the thread running a source
 * callback of m is refused; every other thread waits for the lock, which
 * no transfer holds.
 */
int rsd__writer_enter(struct rsd_manager *m, unsigned flags)
{
	int err;

	if (!m)
		return rsd__err(RSD_ETYPE, "manager is NULL");
	if (rsd__unlikely(cb_top != NULL) && rsd__in_callback(m))
		return rsd__err(
			RSD_EREENTRANT,
			"residency manager %llu refused access: a source load is running on "
			"this thread",
			(unsigned long long)m->id);
	if (atomic_load_explicit(&m->owner, memory_order_relaxed) == self_token())
		return rsd__err(RSD_EREENTRANT,
				"residency manager %llu re-entered an active transition",
				(unsigned long long)m->id);
	writer_lock_raw(m);
	if ((flags & RSD_W_OPEN) && m->closed) {
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
		goto fail;
	}
	if (flags & RSD_W_REAP) {
		err = rsd__reap(m);
		if (err)
			goto fail;
	}
	return 0;
fail:
	rsd__writer_exit(m);
	return err;
}

void rsd__writer_lock(struct rsd_manager *m)
{
	writer_lock_raw(m);
}

bool rsd__unpublished(const struct rsd_manager *m)
{
	return m->ndirty || m->republish_all || m->locs_dirty || m->resv_dirty ||
	       m->pending_dirty || rsd__img_version(m->img) != m->version ||
	       m->img->closed != m->closed;
}

/* Under m->lock. A failure keeps the dirty marks and sets m->unpublished. */
static int publish_now(struct rsd_manager *m)
{
	int err = rsd__publish(m);

	if (!err)
		m->locs_dirty = false;
	/* Stored only on a change: readers load it on every call. */
	if (atomic_load_explicit(&m->unpublished, memory_order_relaxed) != (err != 0))
		atomic_store_explicit(&m->unpublished, err != 0, memory_order_release);
	return err;
}

/*
 * Before m->lock is dropped in the middle of a writer call: commits made so
 * far are published, so that readers see them while the call waits, and so
 * are the charges of an admission (state_version unchanged): every byte
 * admission counts is in the image while it counts (the ledger, §22.1).
 */
static void publish_before_unlock(struct rsd_manager *m)
{
	if (rsd__img_version(m->img) != m->version || m->img->closed != m->closed ||
	    m->locs_dirty) {
		struct rsd_error saved = *rsd_last_error();

		publish_now(m);
		*rsd__err_record() = saved;
	}
}

void rsd__writer_pause(struct rsd_manager *m)
{
	progress_sync(m);
	publish_before_unlock(m);
	writer_unlock(m);
}

void rsd__writer_resume(struct rsd_manager *m)
{
	writer_lock_raw(m);
}

void rsd__writer_wait(struct rsd_manager *m)
{
	/* A waiting plan or transfer may hold charges it admitted. */
	publish_before_unlock(m);
	rsd__lin_note(m, RSD_LIN_UNLOCK, 0);
	atomic_store_explicit(&m->owner, (uintptr_t)0, memory_order_relaxed);
	pthread_cond_wait(&m->xfer_cond, &m->lock);
	atomic_store_explicit(&m->owner, self_token(), memory_order_relaxed);
	rsd__lin_note(m, RSD_LIN_LOCK, 0);
}

void rsd__xfer_wake(struct rsd_manager *m)
{
	rsd__work_ended(m);
	pthread_cond_broadcast(&m->xfer_cond);
}

uint64_t rsd__progress(struct rsd_manager *m)
{
	return atomic_load_explicit(&m->progress, memory_order_acquire);
}

void rsd__progress_mark(struct rsd_manager *m, struct rsd__progress_mark *out)
{
	/* ends first: a step between the two reads counts as one to wait for */
	out->ends = atomic_load_explicit(&m->ends, memory_order_acquire);
	out->any = rsd__progress(m);
}

/*
 * What is in flight that could give room back; m->lock held. 2: a
 * transfer, load, executing plan or queued copy, which ends by itself;
 * 1: only lease events not yet reaped, which end when their consumer
 * streams reach them (work the caller may still have to let run); 0:
 * nothing.
 */
static int in_flight(struct rsd_manager *m)
{
	bool pending = false;

	if (m->inflight || atomic_load_explicit(&m->nqueued, memory_order_relaxed))
		return 2;
	for (unsigned i = 0; i < m->nknown; i++) {
		const struct rsd_acct *a = &m->acct[m->order[i]];

		if (a->plan_hold || a->temp || a->arriving)
			return 2;
		pending |= a->pending_count != 0;
	}
	return pending ? 1 : 0;
}

/* Longest sleep between two reaps: a lease event or a queued copy that
 * completes on the device steps nothing until it is reaped. */
#define PROGRESS_SLICE_NS 1000000ull
/* How long lease events alone are waited for without any progress: a
 * consumer stream the caller never lets run would otherwise be waited for
 * forever. */
#define PROGRESS_PENDING_NS 200000000ull

/*
 * Would rsd__admit() take n more bytes at slot for a thread outside any
 * plan, or did bytes there go since *was (charged, then hidden: temporary
 * charges and other plans' headroom) was noted? m->lock held.
 */
static bool room_for(const struct rsd_manager *m, unsigned slot, uint64_t n, const uint64_t *was)
{
	const struct rsd_acct *a = &m->acct[slot];
	struct rsd__ledger l;

	if (!a->known || !a->has_budget)
		return true;
	if (a->used + a->reserved < was[0] || a->temp + a->plan_hold < was[1])
		return true;
	l = rsd__acct_ledger(a, 0);
	return n <= rsd__ledger_free(&l);
}

int rsd__progress_wait(struct rsd_manager *m, const struct rsd__progress_mark *seen,
		       const struct rsd_location *at, uint64_t need, uint64_t until_ns)
{
	struct rsd_error saved = *rsd_last_error();
	uint64_t pending_since = 0;
	int ret;

	uint64_t was[2] = { 0, 0 };

	ret = rsd__writer_enter(m, RSD_W_OPEN);
	if (ret)
		goto out;
	if (at) {
		const struct rsd_acct *a = &m->acct[rsd__loc_slot(*at)];

		was[0] = a->used + a->reserved;
		was[1] = a->temp + a->plan_hold;
	}
	for (;;) {
		uint64_t now = rsd__now_ns(), to;
		struct timespec ts;
		bool moved;
		int what;

		/* Errors of the reap stay with the calls that need the values. */
		rsd__reap(m);
		progress_sync(m);
		what = in_flight(m);
		/* Work in flight ended, or the state moved while some is still
		 * in flight (its own steps, or calls it may wait on). */
		if (at)
			moved = room_for(m, rsd__loc_slot(*at), need, was);
		else
			moved = atomic_load_explicit(&m->ends, memory_order_relaxed) !=
					seen->ends ||
				(what == 2 && rsd__progress(m) != seen->any);
		if (moved) {
			ret = 1;
			break;
		}
		/* Only commits since the mark, and nothing in flight: waiting
		 * longer would wait for other threads' calls, which may never
		 * stop coming (a thread that reserves and releases in a loop
		 * would keep the waiter deciding for ever). Lease events still
		 * pending are waited for as below, commits or not. */
		if (!at && !what && rsd__progress(m) != seen->any) {
			ret = 3;
			break;
		}
		if (what == 1 && !pending_since)
			pending_since = now;
		else if (what != 1)
			pending_since = 0;
		if (!what || (what == 1 && now - pending_since >= PROGRESS_PENDING_NS)) {
			ret = 2;
			break;
		}
		if (now >= until_ns) {
			ret = 0;
			break;
		}
		to = until_ns - now < PROGRESS_SLICE_NS ? until_ns : now + PROGRESS_SLICE_NS;
		ts.tv_sec = (time_t)(to / 1000000000ull);
		ts.tv_nsec = (long)(to % 1000000000ull);
		m->progress_waiters++;
		rsd__lin_note(m, RSD_LIN_UNLOCK, 0);
		atomic_store_explicit(&m->owner, (uintptr_t)0, memory_order_relaxed);
		pthread_cond_timedwait(&m->xfer_cond, &m->lock, &ts);
		atomic_store_explicit(&m->owner, self_token(), memory_order_relaxed);
		rsd__lin_note(m, RSD_LIN_LOCK, 0);
		m->progress_waiters--;
		if (m->closed) {
			ret = -RSD_ECLOSED;
			break;
		}
	}
	rsd__writer_exit(m);
out:
	*rsd__err_record() = saved;
	return ret;
}

/* Take m->lock raw (no writer guard, no log, no owner change) within ~1 s. */
static bool dump_lock(struct rsd_manager *m)
{
	for (int i = 0; i < 1000; i++) {
		struct timespec ts = { 0, 1000000L };

		if (!pthread_mutex_trylock(&m->lock))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

/*
 * One lease record of the dump (m->lock held): what it covers, its state,
 * how many of its events a reap has yet to see, what the driver answers
 * for each now, and the transfer it carries. A record whose events all
 * answered but that stays pending is a reap that does not fold it in; one
 * whose events never answer is device work that never ends.
 */
static void dump_lease(struct rsd_manager *m, const struct rsd_lease_rec *l, FILE *f)
{
	static const char *const state[] = { "active", "pending", "done" };
	char at[RSD_LOCATION_NAME_MAX], to[RSD_LOCATION_NAME_MAX];
	const struct rsd_xfer *xf = l->xf;

	fprintf(f,
		"    lease record %llu: %s at %s, %zu values (first %llu), %zu events, %zu not seen "
		"complete, %u waiters; driver answers:",
		(unsigned long long)l->id, state[l->state],
		rsd_location_name(l->loc, at, sizeof(at)), l->n,
		l->n ? (unsigned long long)l->ids[0] : 0ull, l->nevents, l->nleft, l->waiters);
	for (size_t i = 0; i < l->nevents && i < 4; i++)
		fprintf(f, " %d", l->events[i] ? m->ops->event_query(m->ops_ctx, l->events[i]) : 9);
	fputc('\n', f);
	if (!xf)
		return;
	fprintf(f,
		"      transfer of value %llu to %s: state %d, kind %d, error %d, told %d, "
		"leftover at %s (%s), garbage %d, lent %d\n",
		xf->rec ? (unsigned long long)xf->rec->handle.id : 0ull,
		rsd_location_name(xf->to, to, sizeof(to)), (int)xf->state, (int)xf->kind, xf->err,
		(int)xf->told, rsd_location_name(xf->leftover_at, at, sizeof(at)),
		xf->leftover ? (xf->leftover_charged ? "charged" : "not charged") : "none",
		xf->garbage != NULL, (int)xf->lent);
}

void rsd__manager_dump(struct rsd_manager *m, FILE *f)
{
	static const char *const what[] = { "nothing", "only lease events not yet reaped",
					    "a transfer, load, executing plan or queued copy" };
	char n[RSD_LOCATION_NAME_MAX];
	unsigned long leases = 0;

	fprintf(f,
		"  manager %llu: progress %llu, %u queued copies not reaped, transition lock held "
		"by thread %#lx, waits stopped %d\n",
		(unsigned long long)m->id, (unsigned long long)rsd__progress(m),
		atomic_load(&m->nqueued), (unsigned long)atomic_load(&m->owner),
		(int)atomic_load(&m->stop_waits));
	if (!dump_lock(m)) {
		fprintf(f, "  manager %llu: its transition lock stayed held for 1 s\n",
			(unsigned long long)m->id);
		return;
	}
	for (const struct rsd__list_node *p = m->leases.first; p; p = p->next)
		leases++;
	fprintf(f,
		"  manager %llu: version %llu, %llu transfers and device waits without the lock, "
		"%u threads in progress waits, %lu leases (active and pending), closed %d; in "
		"flight: %s\n",
		(unsigned long long)m->id, (unsigned long long)m->version,
		(unsigned long long)m->inflight, m->progress_waiters, leases, (int)m->closed,
		what[in_flight(m)]);
	for (unsigned i = 0; i < m->nknown; i++) {
		const struct rsd_acct *a = &m->acct[m->order[i]];

		rsd_location_name(rsd__slot_loc(m->order[i]), n, sizeof(n));
		fprintf(f,
			"    %s: budget %llu%s, used %llu, reserved %llu, in flight %llu, plan "
			"held %llu by %u, %u arriving, %llu uses, %llu holds, %llu reservations, "
			"%llu lease events pending%s\n",
			n, (unsigned long long)a->budget, a->has_budget ? "" : " (none)",
			(unsigned long long)a->used, (unsigned long long)a->reserved,
			(unsigned long long)a->temp, (unsigned long long)a->plan_hold,
			a->plan_holders, a->arriving, (unsigned long long)a->use_count,
			(unsigned long long)a->hold_count, (unsigned long long)a->reservation_count,
			(unsigned long long)a->pending_count, a->failed ? ", device lost" : "");
	}
	for (const struct rsd__list_node *p = m->leases.first; p; p = p->next)
		dump_lease(m, rsd__container_of(p, struct rsd_lease_rec, node), f);
	pthread_mutex_unlock(&m->lock);
}

void rsd__device_wait_begin(struct rsd_manager *m)
{
	m->inflight++;
	rsd__writer_pause(m);
}

void rsd__device_wait_end(struct rsd_manager *m)
{
	rsd__writer_resume(m);
	m->inflight--;
	rsd__xfer_wake(m);
}

void rsd__writer_exit(struct rsd_manager *m)
{
	progress_sync(m);
	/* Controller waits (rsd__progress_wait) sleep on xfer_cond too. */
	if (m->progress_waiters)
		pthread_cond_broadcast(&m->xfer_cond);
	/* A driver op of this call met a lost device: quarantine it before
	 * the state is published. */
	if (rsd__unlikely(rsd__devlost_take()))
		rsd__quarantine(m);
	if (rsd__unlikely(m->ndurable))
		rsd__durable_writeback(m);

	/* The last thread back after a close that did not wait for it. */
	bool dropped = m->drop_deferred && !m->inflight;

	if (dropped) {
		m->drop_deferred = false;
		rsd__close_drop(m);
	}
	if (rsd__unpublished(m)) {
		/* A failed publication keeps its dirty marks for the next call
		 * (or reader, rsd__read_fresh); the error it recorded must not
		 * mask the call's own result. */
		struct rsd_error saved = *rsd_last_error();

		publish_now(m);
		*rsd__err_record() = saved;
	}
	writer_unlock(m);
	if (dropped)
		rsd__staging_release(m);
}

int rsd__read_fresh(struct rsd_manager *m)
{
	int err;

	if (rsd__likely(!atomic_load_explicit(&m->unpublished, memory_order_acquire)))
		return 0;
	err = rsd__writer_enter(m, 0);
	if (err)
		return err;
	if (rsd__unpublished(m))
		err = publish_now(m);
	writer_unlock(m);
	return err;
}

static const struct rsd_device_ops *pick_driver(const struct rsd_manager_config *cfg, void **ctx)
{
	const struct rsd_device_ops *cuda;

	*ctx = NULL;
	if (cfg->host_only)
		return rsd_host_driver();
	if (cfg->driver) {
		*ctx = cfg->driver_ctx;
		return cfg->driver;
	}
	cuda = rsd_cuda_driver();
	if (cuda && cuda->device_count(NULL) > 0)
		return cuda;
	return rsd_host_driver();
}

int rsd_manager_create(const struct rsd_manager_config *cfg, struct rsd_manager **out)
{
	static const struct rsd_manager_config defaults;
	struct rsd_manager *m;
	int err, n;

	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_manager_create: out is NULL");
	if (!cfg)
		cfg = &defaults;
	if (cfg->nbudgets && !cfg->budgets)
		return rsd__err(RSD_ETYPE, "rsd_manager_create: %zu budgets but no budget array",
				cfg->nbudgets);
	if (cfg->driver && (!cfg->driver->device_count || !cfg->driver->alloc ||
			    !cfg->driver->free || !cfg->driver->copy))
		return rsd__err(RSD_ETYPE, "device driver '%s' lacks a required operation",
				cfg->driver->name ? cfg->driver->name : "?");
	if (cfg->label && strnlen(cfg->label, RSD_MANAGER_LABEL_MAX + 1) > RSD_MANAGER_LABEL_MAX)
		return rsd__err(RSD_EINVAL,
				"rsd_manager_create: label '%.16s...' is longer than %d bytes",
				cfg->label, RSD_MANAGER_LABEL_MAX);
	m = rsd__calloc(1, sizeof(*m));
	if (!m)
		return rsd__err(RSD_ENOMEM, "out of memory creating a manager");
	m->ops = pick_driver(cfg, &m->ops_ctx);
	n = m->ops->device_count(m->ops_ctx);
	m->ndevices = n > 0 ? (n > RSD_CUDA_MAX_DEVICE + 1 ? RSD_CUDA_MAX_DEVICE + 1 : n) : 0;
	m->warn = cfg->warn;
	m->warn_ctx = cfg->warn_ctx;
	/* Length checked above; calloc wrote the terminating NUL. */
	if (cfg->label)
		memcpy(m->label, cfg->label, strnlen(cfg->label, RSD_MANAGER_LABEL_MAX));
	for (size_t i = 0; i < cfg->nbudgets; i++) {
		struct rsd_location at = cfg->budgets[i].location;
		struct rsd_acct *a;

		err = rsd__check_location(m, at);
		if (err)
			goto fail;
		a = &m->acct[rsd__loc_slot(at)];
		if (a->known) {
			char name[RSD_LOCATION_NAME_MAX];

			err = rsd__err(RSD_EINVAL, "budget for %s given twice",
				       rsd_location_name(at, name, sizeof(name)));
			goto fail;
		}
		a->known = true;
		a->has_budget = true;
		a->budget = cfg->budgets[i].nbytes;
		m->order[m->nknown++] = (uint8_t)rsd__loc_slot(at);
	}
	err = rsd__staging_init(m, cfg->staging_nbytes);
	if (err)
		goto fail;
	m->id = rsd__next_id();
	err = pthread_mutex_init(&m->lock, NULL);
	if (!err)
		err = pthread_mutex_init(&m->objs_lock, NULL);
	if (!err)
		err = pthread_cond_init(&m->xfer_cond, NULL);
	if (err) {
		err = rsd__err(RSD_ENOMEM, "cannot initialize the transition lock: %s",
			       strerror(err));
		goto fail;
	}
	rsd__rcu_register();
	/* Before the first publication's rsd:state events, so that a trace
	 * names the manager before its first series point. */
	rsd_trace_manager_create(m->id, m->label, (uint32_t)m->nknown, m->ndevices);
	err = rsd__publish_first(m);
	if (err) {
		pthread_mutex_destroy(&m->lock);
		goto fail;
	}
	rsd__reclaim_get(); /* rsd_manager_destroy puts it */
	*out = m;
	return 0;
fail:
	rsd__staging_destroy(m);
	free(m);
	return err;
}

uint64_t rsd_manager_id(const struct rsd_manager *m)
{
	return m ? m->id : 0;
}

int rsd_manager_reap(struct rsd_manager *m)
{
	int err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);

	if (err)
		return err;
	err = rsd__copy_error_reap(m);
	rsd__writer_exit(m);
	return err;
}
