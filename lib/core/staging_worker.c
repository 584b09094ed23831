// SPDX-License-Identifier: MIT
/*
 * Staged copies beside the caller: the per-device staging worker, the
 * jobs handed to it (struct stage_job), its queue, and the waits for it
 * (rsd__staging_quiesce(), rsd__staging_settle_lost()). The caller queues
 * a copy whole under the pair's lock (st->lock) and hands it over; the
 * worker never takes st->lock, only st->qlock, which a holder of st->lock
 * takes under it to hand a job over (struct rsd_staging in staging.h has
 * the whole rule). The spare job memory (st->spare[]) is exchanged
 * atomically, without a lock.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "staging.h"
#include "../trace.h"

/*
 * A copy handed to the device's staging worker. The caller queued it whole
 * on the copy's stream at admission; the worker moves the bytes between
 * the pageable side and the pair and opens the gates that let the DMAs go.
 * Jobs are handed over under st->lock in the order their work was queued,
 * and the worker takes them in that order, so every event it waits for is
 * behind gates it opened before: it never waits for itself.
 *
 *  - Host to device: per chunk a gate, the chunk's DMAs from its buffer,
 *    an event (left in st->ev[] for the buffer's next user); then the
 *    completion event. The worker waits for the DMA that last read the
 *    buffer (the chunk's wait: what st->ev[] held), fills it and opens
 *    the gate. The source stays valid until the completion event, which
 *    comes after the worker's last read.
 *  - Device to host: per chunk a gate, the chunk's DMAs into its buffer,
 *    the chunk's event (done); then a last gate, an event per buffer for
 *    the buffers' next users, and the completion event. The worker opens
 *    the first two gates once their buffers' previous users are done;
 *    then for each chunk it waits for done, copies the buffer out and
 *    opens the gate of the chunk two on (which refills that buffer), and
 *    after the last copy-out the last gate. So the completion event, and
 *    the pair's events, complete only once every byte is in the
 *    destination.
 */
struct stage_piece {
	const char *src; /* where the bytes are (pageable: host to device) */
	char *dst;	 /* where they go (pageable: device to host) */
	uint64_t n;	 /* packed into the chunk's buffer in order */
};

struct stage_chunk {
	void *gate; /* queued before the chunk's DMAs */
	void *wait; /* the buffer's previous user (NULL: none); owned */
	void *done; /* device to host: after the chunk's DMAs; owned */
	char *buf;
	size_t first, npieces; /* in job->pieces */
};

struct stage_job {
	struct stage_job *next;
	int device;
	bool out;    /* device to host */
	bool failed; /* queueing failed part way: nothing is copied out */
	void *last;  /* device to host: the gate after the last chunk */
	size_t cap;  /* bytes allocated with the job (kept in st->spare[]) */
	size_t nchunks, npieces;
	struct stage_chunk *chunks;
	struct stage_piece *pieces;
};

/* The chunks' copy ids in rsd:copy_start/end: unique per process, with
 * bit 62 set, so they never equal a driver's (the simulated device's
 * tickets, the CUDA driver's ids with bit 63). */
#define STAGE_ID_BIT (1ull << 62)
static atomic_uint_fast64_t stage_ids;

/*
 * The worker's wait for an event. A failed sync says nothing of the copy
 * by itself (reference.md, "Errors"), and the worker cannot drain the
 * stream as a caller would: its own closed gates may be on it. A failed
 * event fails every sync, so the sync is tried again; one that keeps
 * failing is settled by a query (an injected failure fails one call). Returns 1 complete, the event's error
 * (< 0) when its work failed on the device, 0 without an answer (the
 * sync's error in *err). The event is given back.
 */
#define WAIT_TRIES 3

static int ev_settle(struct rsd_manager *m, void **ev, int *err)
{
	int q = 1;

	*err = 0;
	if (!*ev)
		return 1;
	for (int i = 0; i < WAIT_TRIES; i++) {
		*err = m->ops->event_sync(m->ops_ctx, *ev);
		if (!*err)
			break;
	}
	if (*err)
		q = m->ops->event_query(m->ops_ctx, *ev);
	m->ops->event_destroy(m->ops_ctx, *ev);
	*ev = NULL;
	return q;
}

/*
 * 0 once a buffer's previous user is done, else the error. An event that
 * failed is no answer either: its copy may not have run yet (a copy queued
 * behind a failed one is skipped only when its turn comes), so the buffer
 * is not touched and the chunk fails, as the calling thread's staging
 * fails a copy whose buffer wait fails.
 */
static int buffer_free(struct rsd_manager *m, void **ev)
{
	int err, q = ev_settle(m, ev, &err);

	return q == 1 ? 0 : q < 0 ? q : err;
}

/* Copy one chunk between the pair and the pageable side, traced as the
 * staging engine. */
static void chunk_move(const struct stage_job *j, const struct stage_chunk *c)
{
	struct rsd_location pageable = RSD_LOC_PAGEABLE_HOST, pinned = RSD_LOC_PINNED_HOST;
	const struct stage_piece *p = j->pieces + c->first;
	uint64_t off = 0, t0 = rsd__now_ns(), id = 0;
	bool traced = rsd_trace_copy_enabled();

	if (traced) {
		id = STAGE_ID_BIT | (atomic_fetch_add(&stage_ids, 1) + 1);
		for (size_t i = 0; i < c->npieces; i++)
			off += p[i].n;
		rsd_trace_copy_start(j->device, "staging", id, off, j->out ? pinned : pageable,
				     j->out ? pageable : pinned);
		off = 0;
	}
	for (size_t i = 0; i < c->npieces; i++) {
		if (j->out)
			memcpy(p[i].dst, c->buf + off, (size_t)p[i].n);
		else
			memcpy(c->buf + off, p[i].src, (size_t)p[i].n);
		off += p[i].n;
	}
	if (traced)
		rsd_trace_copy_end(j->device, "staging", id, off, rsd__now_ns() - t0, false);
}

/*
 * Host to device: fill each chunk's buffer, open its gate. A chunk that
 * cannot be staged opens its gate as failed, which fails the copy's stream
 * from there (its later events report the error): the copy fails with it
 * through the caller's ordinary path, and later chunks are not filled.
 */
static void job_in(struct rsd_manager *m, struct stage_job *j)
{
	int err = 0;

	for (size_t k = 0; k < j->nchunks; k++) {
		struct stage_chunk *c = &j->chunks[k];
		int werr = buffer_free(m, &c->wait);

		if (!err)
			err = werr;
		if (!err)
			chunk_move(j, c);
		m->ops->gate_open(m->ops_ctx, c->gate, err);
	}
}

/*
 * Device to host. A chunk whose DMA failed, or whose event gives no
 * answer, is not copied out, nor is any after it: the remaining gates
 * open with the error (the stream failed already, or fails there), and
 * the copy fails through the caller's ordinary path. Every gate is opened
 * after the worker's last write to the destination.
 */
static void job_out(struct rsd_manager *m, struct stage_job *j)
{
	int err = 0, q, serr;

	for (size_t k = 0; k < j->nchunks && k < 2; k++) {
		int werr = buffer_free(m, &j->chunks[k].wait);

		if (!err)
			err = werr;
		m->ops->gate_open(m->ops_ctx, j->chunks[k].gate, err);
	}
	for (size_t k = 0; k < j->nchunks; k++) {
		struct stage_chunk *c = &j->chunks[k];

		q = ev_settle(m, &c->done, &serr);
		if (!err && !j->failed)
			err = q == 1 ? 0 : q < 0 ? q : serr;
		if (!err && !j->failed)
			chunk_move(j, c);
		if (k + 2 < j->nchunks)
			m->ops->gate_open(m->ops_ctx, j->chunks[k + 2].gate, err);
	}
	if (j->last)
		m->ops->gate_open(m->ops_ctx, j->last, err);
}

/* j's memory is done with: kept in an empty slot of st's spares (the
 * job in the first freed when none is empty). */
static void job_put(struct rsd_staging *st, struct stage_job *j)
{
	for (unsigned i = 0; i < STAGING_SPARES; i++) {
		struct stage_job *none = NULL;

		if (atomic_compare_exchange_strong(&st->spare[i], &none, j))
			return;
	}
	j = atomic_exchange(&st->spare[0], j);
	free(j);
}

/* Stage one job; every gate is opened, whatever happens. */
static void job_run(struct rsd_manager *m, struct rsd_staging *st, struct stage_job *j)
{
	struct rsd_error saved = *rsd_last_error();

	if (j->out)
		job_out(m, j);
	else
		job_in(m, j);
	*rsd__err_record() = saved;
	job_put(st, j);
}

/* See worker_defer_to_host() in the simulated device: the worker must not
 * preempt the thread that hands it work on a machine of few cores. */
static void *stage_worker(void *arg)
{
	struct rsd_manager *m = ((void **)arg)[0];
	struct rsd_staging *st = ((void **)arg)[1];
	struct stage_job *j;

	free(arg);
#ifdef SCHED_BATCH
	{
		struct sched_param sp = { .sched_priority = 0 };

		(void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	}
#endif
	pthread_mutex_lock(&st->qlock);
	for (;;) {
		while (!st->head && !st->stop)
			pthread_cond_wait(&st->qcond, &st->qlock);
		j = st->head;
		if (!j)
			break; /* stopped, and every job staged */
		st->head = j->next;
		if (!st->head)
			st->tail = &st->head;
		pthread_mutex_unlock(&st->qlock);
		job_run(m, st, j);
		pthread_mutex_lock(&st->qlock);
		st->staged++;
		pthread_cond_broadcast(&st->qidle);
	}
	pthread_mutex_unlock(&st->qlock);
	return NULL;
}

/* With st->lock held: the worker runs (started now if needed); false when
 * it cannot be started (its jobs are staged on the calling thread; the
 * warning is made once the lock is dropped). */
static bool worker_get(struct rsd_manager *m, struct rsd_staging *st)
{
	void **arg;
	int err;

	if (st->running)
		return true;
	if (st->no_worker)
		return false;
	arg = malloc(2 * sizeof(*arg));
	err = arg ? 0 : ENOMEM;
	if (arg) {
		arg[0] = m;
		arg[1] = st;
		st->stop = false;
		err = pthread_create(&st->thread, NULL, stage_worker, arg);
		if (err)
			free(arg);
	}
	if (err) {
		st->no_worker = true;
		st->worker_errno = err;
		return false;
	}
	st->running = true;
	return true;
}

/* With st->lock held: end the worker once it staged every job handed to it
 * (it opens every gate it was given). */
void rsd__staging_worker_stop(struct rsd_staging *st)
{
	if (!st->running)
		return;
	pthread_mutex_lock(&st->qlock);
	st->stop = true;
	pthread_cond_signal(&st->qcond);
	pthread_mutex_unlock(&st->qlock);
	pthread_join(st->thread, NULL);
	st->running = false;
}

/* With st->lock held: the job for the pieces a cursor hands out in chunks
 * of `chunk` bytes: chunks and pieces counted, arrays allocated with it
 * (in one of st's spares when large enough); NULL without memory. */
struct stage_job *rsd__stage_job_alloc(struct rsd_staging *st, struct cursor c, uint64_t chunk)
{
	struct chunker k = { .c = &c, .chunk = chunk };
	size_t nchunks = 0, npieces = 0, need;
	struct stage_job *j;
	struct piece p;

	while (rsd__chunk_next(&k, &p)) {
		nchunks += p.first;
		npieces++;
	}
	if (npieces > (SIZE_MAX / 2) / (sizeof(*j->chunks) + sizeof(*j->pieces)))
		return NULL;
	need = sizeof(*j) + nchunks * sizeof(*j->chunks) + npieces * sizeof(*j->pieces);
	for (unsigned i = 0; i < STAGING_SPARES; i++) {
		j = atomic_exchange(&st->spare[i], NULL);
		if (j && j->cap >= need)
			break;
		if (j)
			job_put(st, j); /* back, for a smaller copy */
		j = NULL;
	}
	if (j) {
		size_t cap = j->cap;

		memset(j, 0, need);
		j->cap = cap;
	} else {
		j = rsd__calloc(1, need);
		if (!j)
			return NULL;
		j->cap = need;
	}
	j->chunks = (struct stage_chunk *)(j + 1);
	j->pieces = (struct stage_piece *)(j->chunks + nchunks);
	return j;
}

/*
 * Queue a chunk's gate. A driver that runs work as it is queued (the
 * simulated device in immediate mode) answers 1 and queues none: the
 * first chunk's answer makes the copy RSD__UNSTAGED here, staged on the
 * calling thread as every item of such a device runs on it; a later
 * chunk's (the mode changed in the middle) fails the copy.
 */
static int chunk_gate(struct rsd_manager *m, struct stage_job *j, void *stream, void **gate)
{
	int err = m->ops->gate_queue(m->ops_ctx, stream, gate);

	if (err <= 0)
		return err;
	if (!j->nchunks)
		return RSD__UNSTAGED;
	return rsd__err(RSD_EDEVICE,
			"%s stopped queueing gates in the middle of a staged copy of cuda:%d",
			m->ops->name, j->device);
}

/* With st->lock held: hand j over to the worker, started on the first
 * job (a job that queued nothing is freed). Without a worker the calling
 * thread runs the job itself, as the worker would: every event it waits
 * for is behind gates it opened before. Returns err. */
static int job_hand(struct rsd_manager *m, struct rsd_staging *st, struct stage_job *j, int err)
{
	if (!j->nchunks) {
		job_put(st, j);
		return err;
	}
	if (!worker_get(m, st)) {
		job_run(m, st, j);
		return err;
	}
	pthread_mutex_lock(&st->qlock);
	*st->tail = j;
	st->tail = &j->next;
	st->handed++;
	pthread_cond_signal(&st->qcond);
	pthread_mutex_unlock(&st->qlock);
	return err;
}

/*
 * Until st's worker staged every job handed to it so far: 0, or
 * -RSD_ECLOSED (recorded) when the wait is stoppable and close(FORCE |
 * NOWAIT) stops it. The wait is timed: a forced close sets stop_waits
 * without taking qlock.
 */
static int worker_idle(struct rsd_manager *m, struct rsd_staging *st, bool stoppable)
{
	uint64_t upto;
	int err = 0;

	pthread_mutex_lock(&st->qlock);
	upto = st->handed;
	while (st->staged < upto) {
		struct timespec ts = rsd__timespec_ns(rsd__now_ns() + 1000000);

		if (stoppable && atomic_load_explicit(&m->stop_waits, memory_order_acquire)) {
			err = -RSD_ECLOSED;
			break;
		}
		pthread_cond_timedwait(&st->qidle, &st->qlock, &ts);
	}
	pthread_mutex_unlock(&st->qlock);
	if (err)
		err = rsd__err(RSD_ECLOSED, "residency manager %llu is closed",
			       (unsigned long long)m->id);
	return err;
}

int rsd__staging_quiesce(struct rsd_manager *m)
{
	int err = 0;

	for (int d = 0; m->staging && d < m->ndevices && !err; d++)
		err = worker_idle(m, &m->staging[d], true);
	return err;
}

/*
 * The workers of lost devices only, and not stopped by a close: such a
 * worker ends its jobs at once (every wait of its answers RSD_EDEVLOST at
 * once, so it fills or copies out no more chunks and opens the remaining
 * gates as failed), but one may be in the middle of a chunk's memcpy
 * when the loss is answered. A driver without device_lost names no lost
 * device: every worker is waited for then, as by a drain.
 */
void rsd__staging_settle_lost(struct rsd_manager *m)
{
	struct rsd_error saved;

	if (!m->staging)
		return;
	saved = *rsd_last_error();
	if (!m->ops->device_lost)
		(void)rsd__staging_quiesce(m);
	for (int d = 0; m->ops->device_lost && d < m->ndevices; d++)
		if (m->ops->device_lost(m->ops_ctx, d))
			(void)worker_idle(m, &m->staging[d], false);
	*rsd__err_record() = saved;
}

/*
 * With st->lock held: queue j's chunks on the stream, each behind its
 * gate, with their DMAs between the pair and dev (the device side) and
 * their events: host to device left in st->ev[] for the buffer's next
 * user (and moved into the next chunk on that buffer as its wait), device
 * to host the chunk's done (the first two chunks wait for what st->ev[]
 * held; later ones for the worker's copy-out two chunks before).
 */
static int queue_chunks(struct rsd_manager *m, struct rsd_staging *st, struct stage_job *j,
			struct cursor *c, struct rsd_location dev, void *stream)
{
	struct chunker k = { .c = c, .chunk = st->size };
	struct stage_chunk *ch = NULL;
	struct piece p;
	int err;

	while (rsd__chunk_next(&k, &p)) {
		if (p.first) {
			ch = &j->chunks[j->nchunks];
			err = chunk_gate(m, j, stream, &ch->gate);
			if (err)
				return err;
			j->nchunks++;
			ch->buf = rsd__staging_buffer(st, p.b);
			ch->first = j->npieces;
			if (!j->out || j->nchunks <= 2) {
				ch->wait = st->ev[p.b];
				st->ev[p.b] = NULL;
			}
		}
		j->pieces[j->npieces++] =
			(struct stage_piece){ .src = p.src, .dst = p.dst, .n = p.n };
		ch->npieces++;
		if (j->out)
			err = m->ops->copy(m->ops_ctx, ch->buf + p.off, RSD_LOC_PINNED_HOST, p.src,
					   dev, p.n, stream);
		else
			err = m->ops->copy(m->ops_ctx, p.dst, dev, ch->buf + p.off,
					   RSD_LOC_PINNED_HOST, p.n, stream);
		if (err)
			return err;
		if (p.last) {
			err = m->ops->event_record(m->ops_ctx, stream,
						   j->out ? &ch->done : &st->ev[p.b]);
			if (err)
				return err;
		}
	}
	return 0;
}

/*
 * With st->lock held, the worker running: a copy between the pageable side
 * and dev, queued whole on the stream at once (device to host with its
 * last gate and the pair's events behind it), then handed to the worker.
 * On failure what was queued is still handed over (its gates must be
 * opened), marked failed: host to device its chunks still go where they
 * belong, device to host nothing is copied out (the caller frees the
 * destination once it drained the stream, as for any failed copy).
 */
int rsd__stage_beside(struct rsd_manager *m, struct rsd_staging *st, struct stage_job *j,
		      struct cursor *c, struct rsd_location dev, bool out, void *stream,
		      void **event)
{
	int err;

	j->device = dev.device;
	j->out = out;
	err = queue_chunks(m, st, j, c, dev, stream);
	if (!err && out)
		err = chunk_gate(m, j, stream, &j->last);
	/* The buffers' next users wait for the last copy-out. */
	for (unsigned b = 0; !err && out && b < 2 && b < j->nchunks; b++)
		err = m->ops->event_record(m->ops_ctx, stream, &st->ev[b]);
	if (!err)
		err = m->ops->event_record(m->ops_ctx, stream, event);
	j->failed = err != 0;
	return job_hand(m, st, j, err);
}
