// SPDX-License-Identifier: MIT
/*
 * Leases (§8.2-§8.5, §8.9): borrowed reads of materializations. A lease
 * on a CUDA location ends in two steps: release records one event per
 * consumer stream and turns the lease pending; the writer path reaps it once
 * every event completed. A pending lease record is immutable and published
 * (explain asks its events whether they completed), so it is freed only
 * after an RCU grace period.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "../trace.h"

int rsd__handle_set(const struct rsd_handle *h, size_t n, struct rsd_handle *buf, size_t cap,
		    struct rsd_handle **out, size_t *nout)
{
	struct rsd_handle *set = buf;
	size_t k = 0;
	int err;

	if (!n)
		return rsd__err(RSD_EINVAL, "at least one handle is required");
	if (!h)
		return rsd__err(RSD_ETYPE, "handle array is NULL");
	/* Every element, before the first one is resolved. */
	err = rsd__handles_check(h, n, "handle");
	if (err)
		return err;
	if (n > cap && (n > SIZE_MAX / sizeof(*set) || !(set = rsd__malloc(n * sizeof(*set)))))
		return rsd__err(RSD_ENOMEM, "out of memory copying %zu handles", n);
	for (size_t i = 0; i < n; i++) {
		size_t j;

		/* Leases cover a handful of values: a linear scan is cheapest. */
		for (j = 0; j < k && !rsd_handle_equal(set[j], h[i]); j++)
			;
		if (j == k)
			set[k++] = h[i];
	}
	*out = set;
	*nout = k;
	return 0;
}

void rsd__lease_rec_free(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	for (size_t i = 0; i < l->nevents; i++)
		m->ops->event_destroy(m->ops_ctx, l->events[i]);
	if (l->xf)
		rsd__xfer_free(m, l);
	else
		free(l->events);
	free(l); /* recs and ids live in the same block */
}

/*
 * One block for the record and its arrays, so the acquire path allocates at
 * most once; records with room for RSD_HANDLES_INLINE handles are recycled
 * through m->lease_rec_cache (m->lock) and allocate nothing.
 */
struct rsd_lease_rec *rsd__lease_rec_new(struct rsd_manager *m, size_t k)
{
	size_t cap = k > RSD_HANDLES_INLINE ? k : RSD_HANDLES_INLINE;
	struct rsd_lease_rec *l = NULL;

	if (cap == RSD_HANDLES_INLINE && m->lease_rec_cache) {
		l = m->lease_rec_cache;
		m->lease_rec_cache = l->free_next;
		m->nlease_rec_cache--;
	} else {
		/* Per handle: one record pointer and one id. */
		const size_t per = sizeof(struct rsd_record *) + sizeof(uint64_t);

		if (cap > (SIZE_MAX - sizeof(*l)) / per)
			return NULL;
		l = rsd__malloc(sizeof(*l) + cap * per);
		if (!l)
			return NULL;
	}
	memset(l, 0, sizeof(*l));
	l->cap = cap;
	l->ids = (uint64_t *)(l + 1);
	l->recs = (struct rsd_record **)(l->ids + cap);
	return l;
}

/* Writer path: a record no reader can see (never published as pending). */
void rsd__lease_rec_put(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	if (l->cap != RSD_HANDLES_INLINE || l->nevents ||
	    m->nlease_rec_cache >= RSD_LEASE_CACHE_MAX) {
		rsd__lease_rec_free(m, l);
		return;
	}
	l->free_next = m->lease_rec_cache;
	m->lease_rec_cache = l;
	m->nlease_rec_cache++;
}

/* A lease object linked into m->objs, recycled when one is cached. */
static struct rsd_lease *lease_obj_get(struct rsd_manager *m)
{
	struct rsd_lease *obj;

	pthread_mutex_lock(&m->objs_lock);
	obj = m->lease_obj_cache;
	if (obj) {
		m->lease_obj_cache = obj->free_next;
		m->nlease_obj_cache--;
		rsd__obj_link_locked(m, &obj->link);
	}
	pthread_mutex_unlock(&m->objs_lock);
	if (!obj) {
		obj = rsd__calloc(1, sizeof(*obj));
		if (!obj)
			return NULL;
		pthread_mutex_init(&obj->lock, NULL);
		rsd__obj_link(m, &obj->link);
	}
	/* A recycled object keeps its lock and its stream array. */
	obj->guard = RSD__LIVE;
	obj->rec = NULL;
	obj->active = false;
	obj->n = 0;
	obj->handles = obj->inline_handles;
	obj->nstreams = 0;
	rsd__ptrmap_clear(&obj->stream_set);
	obj->after_event = NULL;
	return obj;
}

static void lease_obj_destroy(struct rsd_lease *obj)
{
	if (obj->handles != obj->inline_handles)
		free(obj->handles);
	free(obj->streams);
	rsd__ptrmap_free(&obj->stream_set);
	pthread_mutex_destroy(&obj->lock);
	free(obj);
}

/* Unlink a lease object; keep it for the next acquire or free it. */
static void lease_obj_put(struct rsd_lease *obj)
{
	struct rsd_manager *m = obj->link.m;
	bool cached = false;

	if (m) {
		pthread_mutex_lock(&m->objs_lock);
		rsd__obj_unlink_locked(&obj->link);
		if (obj->handles == obj->inline_handles &&
		    m->nlease_obj_cache < RSD_LEASE_CACHE_MAX) {
			obj->free_next = m->lease_obj_cache;
			m->lease_obj_cache = obj;
			m->nlease_obj_cache++;
			cached = true;
		}
		pthread_mutex_unlock(&m->objs_lock);
	}
	if (!cached)
		lease_obj_destroy(obj);
}

void rsd__lease_caches_free(struct rsd_manager *m)
{
	while (m->lease_rec_cache) {
		struct rsd_lease_rec *l = m->lease_rec_cache;

		m->lease_rec_cache = l->free_next;
		free(l);
	}
	m->nlease_rec_cache = 0;
	while (m->lease_obj_cache) {
		struct rsd_lease *obj = m->lease_obj_cache;

		m->lease_obj_cache = obj->free_next;
		lease_obj_destroy(obj);
	}
	m->nlease_obj_cache = 0;
}

/* Delete an active lease outright (host release, fallbacks): +1. */
static void lease_delete(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	rsd__commit_prot(m, l->loc, l->recs, l->n, -1, 0, 0);
	rsd__list_del(&m->leases, &l->node);
	rsd__lease_rec_put(m, l);
}

/* Readers may be asking its events right now: free it after a grace
 * period, through the image it is published in (off m->leases, its link
 * is free for that image's chain of retired records). */
static void lease_rec_retire_free(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	l->free_next = m->img->retired_leases;
	m->img->retired_leases = l;
	m->img->reclaim_soon = true;
}

void rsd__lease_retire(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	rsd__list_del(&m->leases, &l->node);
	rsd__pending_removed(m, l);
	/* Threads still waiting on its events hold it: the last one frees it. */
	if (l->waiters)
		l->state = RSD_LEASE_DONE;
	else
		lease_rec_retire_free(m, l);
}

void rsd__lease_finalize(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	if (l->xf) {
		rsd__qcopy_finish(m, l);
		return;
	}
	rsd__commit_prot(m, l->loc, l->recs, l->n, 0, 0, -1);
	rsd__work_ended(m); /* a pending lease event is work in flight */
	rsd_trace_lease_reap(m->id, l->id, rsd__now_ns() - l->pending_since_ns);
	rsd__lease_retire(m, l);
}

/*
 * One of l's events was seen complete: the last one folds the record in
 * at once, whoever else waits on it (waiters only keep its memory).
 */
static void event_seen(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	if (!--l->nleft)
		rsd__lease_finalize(m, l);
}

/* A waiter is back under the lock: the last one frees a record that was
 * folded in meanwhile. */
static void lease_waiter_gone(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	if (!--l->waiters && l->state == RSD_LEASE_DONE)
		lease_rec_retire_free(m, l);
}

void rsd__lease_unpin(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	lease_waiter_gone(m, l);
}

/*
 * The device's definite answer for one of l's events was a failure (its
 * stream drained, and the event still reports an error): a queued copy's
 * failure is the copy's (queued.c undoes it when it is folded in); a
 * released lease's consumer stream failed, which its owner sees on that
 * stream: the lease is over all the same, nothing uses its bytes now.
 */
static void event_failed(struct rsd_manager *m, struct rsd_lease_rec *l, int code)
{
	if (l->xf) {
		/* Not a spill that a copy ordered after it proved complete
		 * (queued.c, rsd__qcopy_answer_after()). */
		if (l->xf->state == RSD_XFER_QUEUED && !l->xf->proven)
			rsd__xfer_set_state(l->xf, RSD_XFER_FAILED, code);
		return;
	}
	rsd__warn(m,
		  "lease %llu: its consumer stream failed on the device (%s); the lease ended "
		  "with it",
		  (unsigned long long)l->id, rsd_strerror(code));
}

/* The device l's events run on: a GPU lease's, or a queued copy's CUDA
 * end; -1 for none. */
static int rec_device(const struct rsd_lease_rec *l)
{
	if (l->loc.kind == RSD_CUDA)
		return l->loc.device;
	if (l->xf && l->xf->to.kind == RSD_CUDA)
		return l->xf->to.device;
	return -1;
}

/* query(): a definite failure that waits for another copy's answer;
 * answer_first(): that copy folded in, the reap starts over. */
#define QUERY_AFTER 2
#define QUERY_AGAIN 3

/*
 * An event query's answer: 1 when it completed, 0 when it still runs, or
 * a query error. An error says nothing of the work until the event's
 * stream has drained (k->drained): only then is it the event's definite
 * failure, folded in as its completion (event_failed()), unless the copy
 * that took its block answers first (QUERY_AFTER, *first set; 0 while
 * that copy is still being queued: queued.c, rsd__qcopy_answer_after()).
 */
static int query(struct rsd_manager *m, struct rsd_pend_link *k, struct rsd_lease_rec **first)
{
	int q = m->ops->event_query(m->ops_ctx, k->l->events[k->k]), after;

	if (q >= 0 ||
	    !(k->drained || rsd__devloss_answer(m, k->l->streams[k->k], rec_device(k->l), q)))
		return q;
	after = rsd__qcopy_answer_after(k->l, first);
	if (after)
		return after > 0 ? QUERY_AFTER : 0;
	event_failed(m, k->l, q);
	return 1;
}

/* QUERY_AFTER: with drain_failed, wait for `first` without the lock and
 * fold it in (QUERY_AGAIN, or the wait's error); without, the event
 * counts as still running (0). */
static int answer_first(struct rsd_manager *m, struct rsd_lease_rec *first, bool drain_failed)
{
	int err;

	if (!drain_failed)
		return 0;
	err = rsd__lease_wait(m, first);
	return err ? err : QUERY_AGAIN;
}

/*
 * A query of k's event failed: synchronize its stream without the lock
 * (counted in m->inflight; l kept alive as a waiter), so that the next
 * query of the event is the device's answer. 0, the sync's error (still
 * no answer: nothing is folded in), or RSD_ECLOSED when a close came
 * meanwhile.
 */
static int drain(struct rsd_manager *m, struct rsd_pend_link *k)
{
	struct rsd_lease_rec *l = k->l;
	void *stream = l->streams[k->k];
	int err;

	l->waiters++;
	rsd__device_wait_begin(m);
	err = rsd__stream_drain(m, stream, rec_device(l));
	rsd__device_wait_end(m);
	if (!err)
		k->drained = true;
	else if (!m->closed) /* else interrupted by the close, or beside it */
		err = rsd__err(-err > 0 && -err < RSD_EMAX ? -err : RSD_EDEVICE,
			       "no answer from the device for %s %llu: its event_query failed, "
			       "and so did the sync of its stream: %s",
			       l->xf ? "the queued copy of value" : "lease",
			       (unsigned long long)(l->xf ? l->xf->rec->handle.id : l->id),
			       rsd_last_error()->message);
	lease_waiter_gone(m, l);
	if (m->closed)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
	return err;
}

/* The queue of a stream's released events (the unordered list when the
 * stream has none). */
static struct rsd_pend_stream *pend_queue(struct rsd_manager *m, void *stream)
{
	size_t i;

	return rsd__ptrmap_get(&m->pstream_idx, stream, &i) ? &m->pstreams[i] : &m->pend_unordered;
}

static void pend_unlink(struct rsd_pend_stream *ps, struct rsd_pend_link *k)
{
	rsd__list_del(&ps->q, &k->node);
	k->stream = NULL;
}

/* Queue a released event on its stream's queue (§21.5). */
void rsd__pend_push(struct rsd_manager *m, void *stream, struct rsd_pend_link *k)
{
	struct rsd_pend_stream *ps;
	size_t i;

	if (!rsd__ptrmap_get(&m->pstream_idx, stream, &i))
		i = m->npstreams;
	if (i == m->npstreams && m->npstreams == m->cappstreams) {
		size_t cap = m->cappstreams ? 2 * m->cappstreams : 8;
		struct rsd_pend_stream *a = rsd__realloc(m->pstreams, cap * sizeof(*a));

		if (a) {
			m->pstreams = a;
			m->cappstreams = cap;
		}
	}
	if (i == m->npstreams && i < m->cappstreams &&
	    !rsd__ptrmap_set(&m->pstream_idx, stream, i)) {
		memset(&m->pstreams[i], 0, sizeof(m->pstreams[i]));
		m->pstreams[i].stream = stream;
		m->npstreams++;
	}
	/* Without room for another queue the event goes on the unordered
	 * list, which every reap scans whole: slower, never lost. */
	ps = i < m->npstreams ? &m->pstreams[i] : &m->pend_unordered;
	k->stream = stream;
	k->unordered = ps == &m->pend_unordered;
	rsd__list_add_tail(&ps->q, &k->node);
}

/*
 * §8.5, §21.5: fold in completed lease events. Events of one stream
 * complete in recording order, so each stream's queue is visited from its
 * head and left at the first event still running: the cost is one query
 * per stream plus one per completed event, whatever the number of pending
 * leases. Emptied queues are dropped.
 */
int rsd__reap(struct rsd_manager *m)
{
	return rsd__reap_flags(m, true);
}

/*
 * A query error is no answer: with drain, the stream of the event is
 * synchronized without the lock and the reap starts over (the queues may
 * have changed meanwhile); without, the event counts as still running.
 */
int rsd__reap_flags(struct rsd_manager *m, bool drain_failed)
{
	struct rsd_lease_rec *first = NULL;
	struct rsd_pend_link *k, *next;
	size_t i;
	int q;

again:
	i = 0;
	while (i < m->npstreams) {
		struct rsd_pend_stream *ps = &m->pstreams[i];

		while ((k = rsd__list_first_entry(&ps->q, struct rsd_pend_link, node))) {
			q = query(m, k, &first);
			if (q == QUERY_AFTER && (q = answer_first(m, first, drain_failed)) < 0)
				return q;
			if (q == QUERY_AGAIN)
				goto again;
			if (q < 0 && drain_failed) {
				q = drain(m, k);
				if (q)
					return q;
				goto again;
			}
			if (q <= 0)
				break;
			pend_unlink(ps, k);
			event_seen(m, k->l);
		}
		if (!rsd__list_empty(&ps->q)) {
			i++;
			continue;
		}
		rsd__ptrmap_del(&m->pstream_idx, ps->stream);
		*ps = m->pstreams[--m->npstreams];
		/* The moved queue's stream is in the map: no allocation. */
		if (i < m->npstreams)
			rsd__ptrmap_set(&m->pstream_idx, ps->stream, i);
	}
	rsd__list_for_each_entry_safe(k, next, &m->pend_unordered.q, node) {
		q = query(m, k, &first);
		if (q == QUERY_AFTER && (q = answer_first(m, first, drain_failed)) < 0)
			return q;
		if (q == QUERY_AGAIN)
			goto again;
		if (q < 0 && drain_failed) {
			q = drain(m, k);
			if (q)
				return q;
			goto again;
		}
		if (q > 0) {
			pend_unlink(&m->pend_unordered, k);
			event_seen(m, k->l);
		}
	}
	return 0;
}

void rsd__pend_clear(struct rsd_manager *m)
{
	m->npstreams = 0;
	rsd__ptrmap_clear(&m->pstream_idx);
	rsd__list_init(&m->pend_unordered.q);
}

/*
 * The device answered that l's copy failed. A spill whose block a later
 * copy took takes that answer only after that copy's (queued.c,
 * rsd__qcopy_answer_after()): fold it in first, with l kept by the
 * caller's wait. 0 when l's answer can be folded in now, else no answer
 * yet (l stays pending).
 */
static int answer_after(struct rsd_manager *m, struct rsd_lease_rec *l, int failed)
{
	struct rsd_lease_rec *first = NULL;
	int after = rsd__qcopy_answer_after(l, &first), err;

	if (after > 0) {
		err = rsd__lease_wait(m, first);
		if (err || m->closed || l->state == RSD_LEASE_DONE)
			return err;
		after = rsd__qcopy_answer_after(l, &first);
	}
	if (!after)
		return 0;
	return rsd__err(-failed > 0 && -failed < RSD_EMAX ? -failed : RSD_EDEVICE,
			"no answer yet for the queued copy of value %llu: the device reported it "
			"failed (%s), and the copy queued into its block, whose answer comes "
			"first, is %s",
			(unsigned long long)l->xf->rec->handle.id, rsd_strerror(failed),
			after > 0 ? "not folded in" : "still being queued");
}

int rsd__lease_wait(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	int err = 0, failed = 0;
	bool done;

	/* Pending records are immutable: its events can be waited for
	 * without the lock; waiters keep its memory, not its effects (a
	 * reap or another waiter may fold it in meanwhile). */
	l->waiters++;
	rsd__device_wait_begin(m);
	for (size_t i = 0; i < l->nevents; i++) {
		int f = 0, e = rsd__event_answer(m, l->streams[i], rec_device(l), l->events[i], &f);

		if (e && !err)
			err = e;
		if (f && !failed)
			failed = f;
	}
	rsd__device_wait_end(m);
	if (!err && failed && !m->closed && l->state != RSD_LEASE_DONE)
		err = answer_after(m, l, failed);
	done = l->state == RSD_LEASE_DONE;
	lease_waiter_gone(m, l);
	if (m->closed)
		return rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
				(unsigned long long)m->id);
	if (done)
		return 0;
	/* No answer: the record stays pending, its bytes protected. */
	if (err)
		return err;
	if (failed)
		event_failed(m, l, failed);
	rsd__lease_complete(m, l);
	return 0;
}

void rsd__lease_complete(struct rsd_manager *m, struct rsd_lease_rec *l)
{
	/* Only this lease is folded in: a release is no reap point for
	 * the others, so its events leave their queues here. */
	for (size_t i = 0; i < l->nevents; i++)
		if (l->links[i].stream)
			pend_unlink(l->links[i].unordered ? &m->pend_unordered :
							    pend_queue(m, l->links[i].stream),
				    &l->links[i]);
	l->nleft = 0;
	if (l->state == RSD_LEASE_PENDING)
		rsd__lease_finalize(m, l);
}

/* The first queued copy still filling one of the leased materializations. */
static struct rsd_lease_rec *first_fill(struct rsd_record *const *recs, size_t k,
					struct rsd_location at)
{
	for (size_t i = 0; i < k; i++) {
		struct rsd_mat *mat = rsd__rec_mat(recs[i], at);

		if (mat && mat->fill)
			return mat->fill;
	}
	return NULL;
}

/*
 * §22: a consumer stream reads what queued copies are still writing only
 * after them: the stream waits for each copy's event on the device, and an
 * event recorded after those waits orders the streams added later.
 */
static int order_after_fills(struct rsd_manager *m, struct rsd_lease *obj,
			     struct rsd_record *const *recs, size_t k, struct rsd_location at,
			     void *stream)
{
	int err = 0;

	for (size_t i = 0; i < k && !err; i++) {
		struct rsd_mat *mat = rsd__rec_mat(recs[i], at);

		if (mat && mat->fill)
			err = m->ops->stream_wait_event(m->ops_ctx, stream, mat->fill->events[0]);
	}
	if (!err)
		err = m->ops->event_record(m->ops_ctx, stream, &obj->after_event);
	return err;
}

int rsd_acquire_flags(struct rsd_manager *m, const struct rsd_handle *h, size_t n,
		      struct rsd_location at, void *consumer_stream, unsigned flags,
		      struct rsd_lease **out)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd_lease_rec *l = NULL, *fill;
	struct rsd_lease *obj;
	size_t k = 0;
	int err;

	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_acquire: NULL argument");
	if (flags & ~RSD_ACQUIRE_NOWAIT)
		return rsd__err(RSD_EINVAL, "rsd_acquire: unknown flags %#x",
				flags & ~RSD_ACQUIRE_NOWAIT);
	obj = lease_obj_get(m);
	if (!obj)
		return rsd__err(RSD_ENOMEM, "out of memory creating a lease");
	err = rsd__handle_set(h, n, obj->inline_handles, RSD_HANDLES_INLINE, &obj->handles, &k);
	if (err)
		goto out_free;
	err = rsd__location_check(at, "rsd_acquire");
	if (err)
		goto out_free;
	err = rsd__writer_enter(m, RSD_W_OPEN);
	if (err)
		goto out_free;
	err = rsd__check_location(m, at);
	if (err)
		goto out;
	if (at.kind == RSD_CUDA && !consumer_stream) {
		err = rsd__err(RSD_EINVAL, "a lease at %s needs a consumer stream",
			       rsd_location_name(at, name, sizeof(name)));
		goto out;
	}
again:
	err = rsd__reap(m);
	if (!err && consumer_stream)
		err = rsd__check_stream(m, consumer_stream, at);
	if (err)
		goto out;
	if (!l)
		l = rsd__lease_rec_new(m, k);
	if (!l || (consumer_stream && !obj->capstreams &&
		   !(obj->streams = rsd__malloc(4 * sizeof(void *))))) {
		err = rsd__err(RSD_ENOMEM, "out of memory creating a lease");
		goto out;
	}
	if (consumer_stream && !obj->capstreams)
		obj->capstreams = 4;
	err = rsd__resolve_resident(m, obj->handles, k, at, l->recs);
	if (err)
		goto out;
	fill = first_fill(l->recs, k, at);
	if (fill && at.kind != RSD_CUDA) {
		/* The host reads these bytes: wait for the queued copy
		 * without the lock (it is folded in then), and look again. */
		if (flags & RSD_ACQUIRE_NOWAIT) {
			err = rsd__err(RSD_EUNAVAILABLE,
				       "value %llu at %s is arriving: a queued copy is still "
				       "writing it (RSD_ACQUIRE_NOWAIT)",
				       (unsigned long long)fill->xf->rec->handle.id,
				       rsd_location_name(at, name, sizeof(name)));
			goto out;
		}
		err = rsd__lease_wait(m, fill);
		if (!err && m->closed)
			err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
				       (unsigned long long)m->id);
		if (err)
			goto out;
		goto again;
	}
	for (size_t i = 0; i < k; i++)
		l->ids[i] = obj->handles[i].id;
	/* Every handle passed: the "acquire" fault point, then commit atomically. */
	if (rsd__fault_on() &&
	    (err = rsd__fault_hit(RSD__FAULT_ACQUIRE, rsd_location_name(at, name, sizeof(name)))))
		goto out;
	if (fill) {
		err = order_after_fills(m, obj, l->recs, k, at, consumer_stream);
		if (err)
			goto out;
	}
	l->id = rsd__next_id();
	l->loc = at;
	l->n = k;
	l->state = RSD_LEASE_ACTIVE;
	l->obj = obj;
	rsd__list_add_tail(&m->leases, &l->node);
	rsd__commit_prot(m, at, l->recs, k, +1, 0, 0);
	obj->ops = m->ops;
	obj->ops_ctx = m->ops_ctx;
	obj->rec = l;
	obj->active = true;
	obj->loc = at;
	obj->n = k;
	if (consumer_stream)
		obj->streams[obj->nstreams++] = consumer_stream;
	rsd_trace_lease_acquire(m->id, l->id, at, (uint32_t)k);
	*out = obj;
	l = NULL;
	obj = NULL;
out:
	if (l)
		rsd__lease_rec_put(m, l);
	rsd__writer_exit(m);
out_free:
	if (obj)
		lease_obj_put(obj);
	return err;
}

int rsd_acquire(struct rsd_manager *m, const struct rsd_handle *h, size_t n, struct rsd_location at,
		void *consumer_stream, struct rsd_lease **out)
{
	return rsd_acquire_flags(m, h, n, at, consumer_stream, 0, out);
}

/* Whether stream is one of l's consumer streams already. */
static bool stream_listed(const struct rsd_lease *l, const void *stream)
{
	if (l->nstreams > RSD_STREAMS_SCAN)
		return rsd__ptrmap_get(&l->stream_set, stream, NULL);
	for (size_t i = 0; i < l->nstreams; i++)
		if (l->streams[i] == stream)
			return true;
	return false;
}

int rsd_lease_add_consumer_stream(struct rsd_lease *l, void *stream)
{
	char name[RSD_LOCATION_NAME_MAX];
	int err = 0;

	if (!l)
		return rsd__err(RSD_ETYPE, "lease is NULL");
	pthread_mutex_lock(&l->lock);
	if (!l->active) {
		err = rsd__err(RSD_ELIFETIME, "lease has been released");
		goto out;
	}
	if (l->loc.kind != RSD_CUDA) {
		err = rsd__err(RSD_EINVAL, "a lease at %s takes no consumer stream",
			       rsd_location_name(l->loc, name, sizeof(name)));
		goto out;
	}
	err = rsd__check_driver_stream(l->ops, l->ops_ctx, stream, l->loc);
	if (err)
		goto out;
	if (stream_listed(l, stream))
		goto out;
	if (l->nstreams == l->capstreams) {
		size_t cap = l->capstreams ? l->capstreams * 2 : 4;
		void **s = rsd__realloc(l->streams, cap * sizeof(*s));

		if (!s) {
			err = rsd__err(RSD_ENOMEM, "out of memory adding a consumer stream");
			goto out;
		}
		l->streams = s;
		l->capstreams = cap;
	}
	/* Past RSD_STREAMS_SCAN streams, the set holds each of them (the
	 * earlier ones join it when the list first grows past that). */
	for (size_t i = l->stream_set.n; l->nstreams >= RSD_STREAMS_SCAN && i <= l->nstreams; i++) {
		if (rsd__ptrmap_set(&l->stream_set, i < l->nstreams ? l->streams[i] : stream, i)) {
			err = rsd__err(RSD_ENOMEM, "out of memory adding a consumer stream");
			goto out;
		}
	}
	/* Behind the queued copies the first stream was ordered after. */
	if (l->after_event) {
		err = l->ops->stream_wait_event(l->ops_ctx, stream, l->after_event);
		if (err) {
			rsd__ptrmap_del(&l->stream_set, stream);
			goto out;
		}
	}
	l->streams[l->nstreams++] = stream;
out:
	pthread_mutex_unlock(&l->lock);
	return err;
}

/*
 * A synchronization that ends a lease without an event: what the lease's
 * streams queued (a kernel reading its bytes) must be over before its
 * values lose the protection, so a failed sync is tried again, at most
 * SYNC_TRIES times; after that the device is taken as drained (a device
 * that fails every sync is lost, and its memory is never freed).
 */
#define SYNC_TRIES 3

static void device_sync_hard(struct rsd_manager *m, int device)
{
	struct rsd_error saved = *rsd_last_error();

	for (int i = 0; i < SYNC_TRIES && m->ops->device_sync(m->ops_ctx, device); i++)
		;
	*rsd__err_record() = saved;
}

/*
 * End a GPU lease by synchronizing its device: the lease protects its
 * values while the device drains, waiting without the lock (close waits
 * for it, as for a copy). why completes "lease N on cuda:D ...".
 */
static void release_device_synced(struct rsd_manager *m, struct rsd_lease_rec *l, const char *why)
{
	rsd__device_wait_begin(m);
	device_sync_hard(m, l->loc.device);
	rsd__device_wait_end(m);
	rsd__warn(m, "lease %llu on cuda:%d %s: synchronized the device", (unsigned long long)l->id,
		  l->loc.device, why);
	lease_delete(m, l);
}

/* The GPU half of §8.4, steps 3-7. */
static int release_gpu(struct rsd_manager *m, struct rsd_lease *obj, struct rsd_lease_rec *l,
		       unsigned flags)
{
	void **events;
	size_t i;

	if (!obj->nstreams) {
		release_device_synced(m, l, "had no consumer stream");
		return 0;
	}
	/*
	 * Every stream was the driver's and on the lease's device when it was
	 * added: one that no longer is was destroyed since. Its queued work
	 * still runs (as after cudaStreamDestroy()), but no event can be
	 * recorded behind it, so only a synchronization of the device covers
	 * it; refusing the release would keep the lease, and at its free the
	 * manager, for ever.
	 */
	for (i = 0; i < obj->nstreams; i++) {
		if (rsd__check_stream(m, obj->streams[i], l->loc)) {
			char why[sizeof(rsd_last_error()->message) + 64];

			snprintf(why, sizeof(why), "lost consumer stream %p (%s)", obj->streams[i],
				 rsd_last_error()->message);
			release_device_synced(m, l, why);
			return 0;
		}
	}
	/* Without memory for the events, release as if recording failed:
	 * by synchronizing the streams, so that a release never fails for
	 * want of memory (rsd_lease_free relies on it). One block holds the
	 * events and their queue links. */
	events = rsd__calloc(obj->nstreams, 2 * sizeof(*events) + sizeof(struct rsd_pend_link));
	if (!events)
		rsd__err(RSD_ENOMEM, "out of memory for %zu event(s)", obj->nstreams);
	for (i = 0; events && i < obj->nstreams; i++)
		if (m->ops->event_record(m->ops_ctx, obj->streams[i], &events[i]))
			break;
	if (i < obj->nstreams) {
		char why[sizeof(rsd_last_error()->message)];

		snprintf(why, sizeof(why), "%s", rsd_last_error()->message);
		while (i--)
			m->ops->event_destroy(m->ops_ctx, events[i]);
		free(events);
		for (i = 0; i < obj->nstreams; i++)
			if (m->ops->stream_sync(m->ops_ctx, obj->streams[i]))
				device_sync_hard(m, l->loc.device);
		rsd__warn(
			m,
			"lease %llu: recording a completion event failed (%s): synchronized its streams",
			(unsigned long long)l->id, why);
		lease_delete(m, l);
		return 0;
	}
	l->streams = events + obj->nstreams;
	l->links = (struct rsd_pend_link *)(events + 2 * obj->nstreams);
	memcpy(l->streams, obj->streams, obj->nstreams * sizeof(*l->streams));
	l->nleft = obj->nstreams;
	for (i = 0; i < obj->nstreams; i++) {
		l->links[i].l = l;
		l->links[i].k = i;
		rsd__pend_push(m, obj->streams[i], &l->links[i]);
	}
	l->events = events;
	l->nevents = obj->nstreams;
	l->state = RSD_LEASE_PENDING;
	l->pending_since_ns = rsd__now_ns();
	/* The caller's object no longer owns the record: reaping or close may
	 * free it even if waiting below fails. */
	l->obj = NULL;
	obj->rec = NULL;
	rsd__commit_prot(m, l->loc, l->recs, l->n, -1, 0, +1);
	rsd__pending_added(m, l);
	if (!(flags & RSD_RELEASE_WAIT))
		return 0;
	return rsd__lease_wait(m, l);
}

int rsd_lease_release(struct rsd_lease *obj, unsigned flags)
{
	struct rsd_manager *m;
	struct rsd_lease_rec *l;
	bool pending = false;
	int err = 0;

	if (!obj)
		return rsd__err(RSD_ETYPE, "lease is NULL");
	pthread_mutex_lock(&obj->lock);
	if (!obj->active)
		goto out;
	m = obj->link.m;
	if (!m) {
		obj->active = false;
		goto out;
	}
	err = rsd__writer_enter(m, 0);
	if (err)
		goto out;
	l = obj->rec;
	if (l && l->state == RSD_LEASE_ACTIVE) {
		uint64_t id = l->id; /* l may be freed below */

		if (l->loc.kind != RSD_CUDA) {
			lease_delete(m, l);
		} else {
			err = release_gpu(m, obj, l, flags);
			pending = !err && !(flags & RSD_RELEASE_WAIT);
		}
		if (!err)
			rsd_trace_lease_release(m->id, id, obj->loc, (uint32_t)obj->nstreams,
						flags & RSD_RELEASE_WAIT, pending);
	}
	if (!err) {
		obj->rec = NULL;
		obj->active = false;
		if (obj->after_event) {
			m->ops->event_destroy(m->ops_ctx, obj->after_event);
			obj->after_event = NULL;
		}
	}
	rsd__writer_exit(m);
out:
	pthread_mutex_unlock(&obj->lock);
	return err;
}

int rsd_lease_value(struct rsd_lease *obj, struct rsd_handle h, const struct rsd_resident **out)
{
	struct rsd_manager *m;
	struct rsd_mat *mat = NULL;
	size_t i;
	int err;

	if (!obj || !out)
		return rsd__err(RSD_ETYPE, "rsd_lease_value: NULL argument");
	err = rsd__handle_check(h, "rsd_lease_value");
	if (err)
		return err;
	pthread_mutex_lock(&obj->lock);
	if (!obj->active) {
		err = rsd__err(RSD_ELIFETIME, "lease has been released");
		goto out;
	}
	for (i = 0; i < obj->n && !rsd_handle_equal(obj->handles[i], h); i++)
		;
	if (i == obj->n) {
		err = rsd__err(RSD_ENOTFOUND, "value %llu is not part of this lease",
			       (unsigned long long)h.id);
		goto out;
	}
	m = obj->link.m;
	if (!m) {
		err = rsd__err(RSD_EUNAVAILABLE, "the lease's manager no longer exists");
		goto out;
	}
	err = rsd__writer_enter(m, 0);
	if (err)
		goto out;
	if (obj->rec && obj->rec->state == RSD_LEASE_ACTIVE)
		mat = rsd__rec_mat(obj->rec->recs[i], obj->rec->loc);
	if (mat)
		*out = mat->value;
	else
		err = rsd__err(RSD_EUNAVAILABLE,
			       "the manager no longer tracks this lease (closed?)");
	rsd__writer_exit(m);
out:
	pthread_mutex_unlock(&obj->lock);
	return err;
}

size_t rsd_lease_count(const struct rsd_lease *l)
{
	return l ? l->n : 0;
}

int rsd_lease_handle_at(const struct rsd_lease *l, size_t i, struct rsd_handle *out)
{
	if (!l || !out)
		return rsd__err(RSD_ETYPE, "rsd_lease_handle_at: NULL argument");
	if (!l->active)
		return rsd__err(RSD_ELIFETIME, "lease has been released");
	if (i >= l->n)
		return rsd__err(RSD_ENOTFOUND, "lease has %zu handles, not %zu", l->n, i + 1);
	*out = l->handles[i];
	return 0;
}

struct rsd_location rsd_lease_location(const struct rsd_lease *l)
{
	return l ? l->loc : RSD_LOC_PAGEABLE_HOST;
}

bool rsd_lease_active(const struct rsd_lease *l)
{
	return l && l->active;
}

/* Abandonment (§8.9) waits for the consumers. */
static int lease_release_wait(void *obj)
{
	return rsd_lease_release(obj, RSD_RELEASE_WAIT);
}

/* A failed release leaves the manager pointing at the object, and GPU work
 * may still read the memory: both are kept, for ever. */
static const struct rsd_lifetime_kind lease_kind = {
	.noun = "lease",
	.retained = "the manager and its storage are retained",
	.release = lease_release_wait,
};

void rsd_lease_free(struct rsd_lease *obj)
{
	if (!obj)
		return;
	rsd__guard_free(&obj->guard, __func__, "struct rsd_lease", obj);
	if (rsd__free_release(&lease_kind, obj, &obj->link, obj->active, NULL, obj->n))
		lease_obj_put(obj);
}
