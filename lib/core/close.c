// SPDX-License-Identifier: MIT
/* Closing (§15) and destroying a manager. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/*
 * Values a forced close without waiting could not free: device work may
 * still read or write their storage (a CUDA lease's consumer stream that
 * has not finished, or may never finish). They stay allocated for the life
 * of the process, reachable from here so that leak checkers count them as
 * kept, not lost; nothing ever frees them.
 */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsd_resident **kept; /* under kept_lock */
static size_t nkept, capkept;	   /* under kept_lock */

void rsd__keep_forever(struct rsd_resident *r)
{
	pthread_mutex_lock(&kept_lock);
	if (nkept == capkept) {
		size_t cap = capkept ? 2 * capkept : 16;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct rsd_resident **k = realloc(kept, cap * sizeof(*k));

		if (k) {
			kept = k;
			capkept = cap;
		}
	}
	if (nkept < capkept)
		kept[nkept++] = r; /* else leaked unreachable: still never freed */
	pthread_mutex_unlock(&kept_lock);
}

/*
 * RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT: no device is synchronized, so every
 * materialization a GPU lease still protects (active, or released with
 * events not yet complete), and either end of a queued copy, may be in use
 * by a stream. Take its value out of the record, so rsd__close_drop() frees
 * the record but not the storage.
 */
static void keep_streamed(struct rsd_manager *m)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd_lease_rec *l;
	uint64_t nbytes = 0;
	size_t n = 0;

	for (size_t i = 0; i < m->nrecs; i++) {
		struct rsd_record *rec = m->recs[i];

		for (uint32_t j = 0; j < rec->nmats; j++) {
			struct rsd_mat *mat = &rec->mats[j];

			/* A stream may use a GPU lease's device bytes, and a
			 * queued copy (or a released lease's stream) the
			 * bytes at either end, host memory included. So may
			 * a copy another thread issued and was waiting for
			 * (busy: its source): the close stops that wait
			 * (evwait.c) before the copy has run. */
			if (!mat->value ||
			    !(mat->pending_count || mat->state == RSD_MAT_FILLING || mat->busy ||
			      (mat->loc.kind == RSD_CUDA && mat->use_count)))
				continue;
			rsd__keep_forever(mat->value);
			mat->value = NULL;
			nbytes += mat->storage_nbytes;
			n++;
			rsd_location_name(mat->loc, name, sizeof(name));
		}
	}
	/* What queued copies still read belongs to no value any more. */
	rsd__list_for_each_entry(l, &m->leases, node)
		rsd__qcopy_abandon(m, l, true);
	if (n)
		rsd__warn(
			m,
			"forced close of manager %llu without waiting: %zu value(s) of %llu bytes "
			"that GPU streams may still use (last at %s) are kept allocated for the life "
			"of the process, not freed",
			(unsigned long long)m->id, n, (unsigned long long)nbytes, name);
}

/*
 * Wait for every pending lease, each without the lock. An event the
 * device reports failed once its stream drained (a stream ordered after a
 * failed copy inherits its error, as CUDA's sticky errors do) is an answer:
 * rsd__lease_wait() folds it in. A wait that got no answer (its sync and
 * the stream sync after it failed) fails a close that may wait; a forced
 * close takes the device as failed and ends the lease all the same, with
 * a warning that keeps the error.
 */
static int wait_pending(struct rsd_manager *m, bool force)
{
	struct rsd_lease_rec *l;
	int err;

	for (;;) {
		rsd__list_for_each_entry(l, &m->leases, node)
			if (l->state == RSD_LEASE_PENDING)
				break;
		if (!l)
			return 0;
		err = rsd__lease_wait(m, l);
		/* Another thread closed it meanwhile (without waiting for this
		 * one): l may be gone; the caller sees the manager closed. */
		if (m->closed)
			return 0;
		if (err && !force)
			return err;
		if (err) {
			rsd__warn(m,
				  "forced close of manager %llu: lease %llu's event failed on the "
				  "device (%s); closing anyway",
				  (unsigned long long)m->id, (unsigned long long)l->id,
				  rsd_last_error()->message);
			rsd__lease_complete(m, l);
		}
	}
}

/* Transfers and device waits of other threads finish first: they hold
 * values and lease records that closing frees. */
static void wait_inflight(struct rsd_manager *m)
{
	while (m->inflight)
		rsd__writer_wait(m);
}

void rsd__close_drop(struct rsd_manager *m)
{
	struct rsd_lease_rec *l, *next;

	rsd__list_for_each_entry_safe(l, next, &m->leases, node) {
		if (l->obj)
			l->obj->rec = NULL;
		rsd__qcopy_abandon(m, l, false);
		rsd__lease_retire(m, l);
	}
	rsd__pend_clear(m);
	atomic_store_explicit(&m->nqueued, 0, memory_order_relaxed);
	rsd__lifetimes_drop(m);
	for (size_t i = 0; i < m->nrecs; i++) {
		struct rsd_record *rec = m->recs[i];

		for (uint32_t j = 0; j < rec->nmats; j++)
			rsd__resident_destroy(rec->mats[j].value);
		if (rec->has_source && rec->source.release)
			rec->source.release(rec->source.ctx);
		rsd__record_free(m, rec);
	}
	m->nrecs = 0;
	m->ndirty = 0;
	rsd__keymap_free(&m->owners);
	for (unsigned s = 0; s < RSD_NSLOTS; s++) {
		struct rsd_acct *a = &m->acct[s];

		a->used = a->reserved = a->temp = 0;
		a->value_count = a->reservation_count = 0;
		a->use_count = a->hold_count = a->pending_count = 0;
	}
	m->locs_dirty = true;
}

/* A forced close waits for every device it used, without the lock (other
 * threads' calls go on meanwhile; what they start is waited for after). */
static void sync_devices(struct rsd_manager *m)
{
	int dev[RSD_NSLOTS], n = 0;

	for (unsigned i = 0; i < m->nknown; i++)
		if (m->order[i] >= 2 && m->order[i] - 2u < (unsigned)m->ndevices)
			dev[n++] = (int)m->order[i] - 2;
	if (!n)
		return;
	rsd__device_wait_begin(m);
	for (int i = 0; i < n; i++)
		m->ops->device_sync(m->ops_ctx, dev[i]);
	rsd__device_wait_end(m);
	wait_inflight(m);
}

int rsd_manager_close(struct rsd_manager *m, unsigned flags)
{
	size_t active = 0, pending = 0, queued = 0, holds = 0, resv = 0;
	struct rsd_lease_rec *l;
	struct rsd_reservation *r;
	struct rsd_hold *h;
	bool closing = false, nothing;
	int err;

	if (!m)
		return rsd__err(RSD_ETYPE, "rsd_manager_close: manager is NULL");
	err = rsd__writer_enter(m, 0);
	if (err)
		return err;
	if (m->closed)
		goto out;
	/* Forced without waiting: nothing is waited for, other threads'
	 * transfers and device waits included (below). */
	nothing = (flags & RSD_CLOSE_FORCE) && (flags & RSD_CLOSE_NOWAIT);
	if (!nothing)
		wait_inflight(m);
	err = (flags & RSD_CLOSE_NOWAIT) ? rsd__reap_flags(m, false) :
					   wait_pending(m, flags & RSD_CLOSE_FORCE);
	if (!err && !nothing)
		wait_inflight(m);
	if (err)
		goto out;
	rsd__list_for_each_entry(l, &m->leases, node) {
		active += l->state == RSD_LEASE_ACTIVE;
		pending += l->state == RSD_LEASE_PENDING && !l->xf;
		queued += !!l->xf;
	}
	rsd__list_for_each_entry(h, &m->holds, node)
		holds++;
	rsd__list_for_each_entry(r, &m->resv, node)
		resv++;
	if ((active || pending || queued || holds || resv) && !(flags & RSD_CLOSE_FORCE)) {
		char more[48] = "";

		if (queued)
			snprintf(more, sizeof(more), ", queued_copies=%zu", queued);
		err = rsd__err(
			RSD_EINUSE,
			"residency manager %llu is in use: active_leases=%zu, pending_leases=%zu, "
			"holds=%zu, reservations=%zu%s",
			(unsigned long long)m->id, active, pending, holds, resv, more);
		goto out;
	}
	/* Forced: wait for the devices, unless told not to wait at all (a
	 * stream that never completes would hang the close). */
	if (nothing)
		keep_streamed(m);
	else if (flags & RSD_CLOSE_FORCE)
		sync_devices(m);
	/* A failed or lost device's streams answer before the staging
	 * workers opened the gates queued on them: the values freed below
	 * may still be read or written by a worker until then. */
	if (!nothing)
		(void)rsd__staging_quiesce(m);
	if (m->closed)
		goto out; /* another thread closed it while this one waited */
	m->closed = true;
	/* Threads waiting for the device without the lock stop waiting: they
	 * return RSD_ECLOSED, and what their work may still use stays
	 * allocated (keep_streamed() above, transition.c). */
	if (nothing)
		rsd__waits_stop(m);
	rsd__bump(m);
	if (m->inflight) {
		/*
		 * Other threads still transfer or wait on the device (a stream
		 * that may never complete) holding records, values and lease
		 * records: the manager is closed now (they return RSD_ECLOSED
		 * when they are back), and the last of them frees what it
		 * held, at its writer exit (rsd__writer_exit()).
		 */
		m->drop_deferred = true;
		goto out;
	}
	rsd__close_drop(m);
	closing = true;
out:
	rsd__writer_exit(m);
	/* No copy runs now (none was in flight, none starts on a closed
	 * manager): the staging memory goes, waited for without the lock. */
	if (closing)
		rsd__staging_release(m);
	return err;
}

void rsd_manager_destroy(struct rsd_manager *m)
{
	struct rsd_objlink *o;

	if (!m)
		return;
	if (!m->closed && rsd_manager_close(m, RSD_CLOSE_FORCE))
		rsd__warn(m, "destroying manager %llu: forced close failed: %s",
			  (unsigned long long)m->id, rsd_last_error()->message);
	pthread_mutex_lock(&m->lock);
	if (m->drop_deferred && !m->inflight) {
		m->drop_deferred = false;
		rsd__close_drop(m);
	}
	if (m->inflight) {
		/* A thread still waits on the device after a close that did
		 * not wait for it: it will use the manager when it is back. */
		m->keep_alive = true;
		rsd__warn(m,
			  "destroying manager %llu: %llu thread(s) still wait on the device; the "
			  "manager is retained",
			  (unsigned long long)m->id, (unsigned long long)m->inflight);
	}
	pthread_mutex_unlock(&m->lock);
	/* Caller objects outliving the manager become inert. */
	pthread_mutex_lock(&m->objs_lock);
	rsd__list_for_each_entry(o, &m->objs, node)
		o->m = NULL;
	rsd__list_init(&m->objs);
	pthread_mutex_unlock(&m->objs_lock);
	if (m->keep_alive) {
		rsd__warn(
			m,
			"manager %llu is retained: an abandoned GPU lease could not be waited for",
			(unsigned long long)m->id);
		return;
	}
	rsd__rcu_register();
	rsd__reclaim_flush(m);
	/* Every grace period asked for has ended after this: free the rest. */
	rsd__reclaim_barrier();
	rsd__reclaim_poll(m, 0);
	rsd__image_destroy(m);
	rsd__slab_fini(&m->oc);
	rsd__slab_fini(&m->xfers);
	rsd__lease_caches_free(m);
	free(m->recs);
	free(m->dirty);
	free(m->pstreams);
	rsd__ptrmap_free(&m->pstream_idx);
	rsd__keymap_free(&m->owners);
	rsd__staging_destroy(m);
	pthread_mutex_destroy(&m->objs_lock);
	pthread_cond_destroy(&m->xfer_cond);
	pthread_mutex_destroy(&m->lock);
	free(m);
	rsd__reclaim_put(); /* the last manager ends librsd's thread */
}
