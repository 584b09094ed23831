// SPDX-License-Identifier: MIT
/*
 * Staged copies between pageable host memory and a CUDA device.
 *
 * A copy whose host side is pageable cannot use a copy engine directly:
 * the CUDA runtime stages it itself and holds the caller until it is done,
 * at about half the pinned rate. librsd stages it instead, through two
 * pinned host buffers per device (its staging pair), chunk by chunk, so
 * that the host's memcpy of one chunk overlaps the DMA of the other:
 *
 *  - host to device, beside the caller: with a driver that has gates
 *    (gate_queue, gate_open), the caller queues the whole copy at
 *    admission (per chunk a gate, the chunk's DMAs from buffer k % 2, an
 *    event; then the completion event) and hands it to the device's
 *    staging worker, which fills each buffer once the DMA that last read
 *    it is done and opens the chunk's gate (struct stage_job below). The
 *    not-waiting caller returns with its completion event recorded.
 *  - host to device, on the calling thread (a driver without gates, or
 *    one that runs work as it is queued: gate_queue answers 1): chunk k
 *    is copied into buffer k % 2, its DMA queued on the copy's stream and
 *    an event recorded on it; a buffer is refilled only once its previous
 *    event completed. The copy returns with its last DMA still queued: its
 *    completion event, recorded after the last chunk, is what the caller
 *    waits for.
 *  - device to host, beside the caller: the same hand-over; the worker
 *    waits for each chunk's DMA and copies it out, opening the gates that
 *    refill the buffers and, after the last copy-out, the gate before the
 *    completion event (struct stage_job below).
 *  - device to host, on the calling thread (the same drivers): the DMA of
 *    chunk k into buffer k % 2 is queued with its event, then the oldest
 *    chunk in flight is waited for and copied out while the next one's DMA
 *    runs. It returns once the last chunk is in the destination; its
 *    completion event is the last chunk's (done).
 *
 * A copy made of several buffers (a value that is not one block on both
 * sides) flows through the pair as one stream of bytes: chunks pack the
 * buffers' pieces, one DMA per piece and one event per chunk.
 *
 * The staging memory is librsd's own: allocated through the driver's
 * alloc op at pinned host on a device's first staged copy, freed when the
 * manager closes (or is destroyed), charged to no budget and shown in no
 * snapshot. A pair is as large as the copies so far needed: its buffers
 * start at STAGING_MIN (or the copy's size, rounded up to a power of two)
 * and double, up to m->staging_chunk, when a larger copy comes, so a
 * manager of small values never locks megabytes it does not use. When the
 * first allocation fails, that device's copies go direct (the driver's
 * own pageable copy); when growing fails, the pair keeps its size (larger
 * copies move in more chunks); either is said once.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core.h"
#include "../trace.h"

#define STAGING_DEFAULT (8ull << 20)
#define STAGING_MIN (64ull << 10)
#define STAGING_SPARES 4

/*
 * One device's staging pair.
 *
 * Locking: lock is held for the whole of a staged copy, from the first
 * chunk to the last one queued (host to device) or copied out (device to
 * host), and by release; whoever holds it owns every field below it.
 * It is taken without m->lock (copies run in a transfer's phase without
 * the transition lock, and never under it) and never with another
 * device's staging lock; the driver's locks are taken under it.
 * Staged copies to one device are serialized by it: they would share
 * that device's copy engine anyway. A copy returning with its DMA queued
 * leaves its event in ev[], and the next holder waits for it before it
 * touches that buffer (a copy handed to the worker leaves the events of
 * DMAs behind its gates: the next holder waits for the worker through
 * them; the worker never takes lock, so that cannot deadlock).
 */
struct rsd_staging {
	pthread_mutex_t lock;
	char *base;	  /* 2 x size bytes at pinned host; NULL until used */
	uint64_t size;	  /* of each buffer: the chunk a copy moves per step */
	bool failed;	  /* the first allocation failed: copies go direct */
	bool capped;	  /* growing failed: the pair keeps its size */
	void *ev[2];	  /* the last work queued on buffer 0 and 1; NULL: none */
	bool no_worker;	  /* the worker could not be started: said once */
	int worker_errno; /* why, until said (after lock is dropped) */

	/*
	 * The device's host-to-device staging worker (struct stage_job):
	 * started on the first copy handed to it, stopped by release. Its
	 * queue is protected by qlock, which is taken under lock (to hand a
	 * job over in the order the jobs' work was queued) and alone by the
	 * worker, which never takes lock: a holder of lock may wait for the
	 * worker's gates.
	 */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;		/* a job came, or stop */
	struct stage_job *head, **tail; /* handed over, not yet taken */
	/*
	 * Jobs handed to the worker and jobs it has staged (qlock), and the
	 * condition it signals after each: a failed copy's memory is freed
	 * only once the worker is done with its job (rsd__staging_quiesce()
	 * after a drain, rsd__staging_settle_lost() after a lost device's
	 * answer), since a failed stream and a lost device report their
	 * failure before the gates queued on them are opened, and the worker
	 * still reads and writes both ends until it opened the job's last
	 * gate.
	 */
	uint64_t handed, staged;
	pthread_cond_t qidle;
	bool running; /* thread is started and not joined */
	bool stop;    /* release asks it to end */
	pthread_t thread;
	/*
	 * The memory of the last jobs staged, kept for the next ones so that
	 * a not-waiting copy calls no allocator (a prefetching thread hands
	 * over a few copies before the worker is done with the first): each
	 * slot exchanged whole (whoever takes a job owns it), by the worker
	 * after a job and by a holder of lock before one; freed by release.
	 */
	_Atomic(struct stage_job *) spare[STAGING_SPARES];
};

/*
 * The bytes a copy moves, piece by piece: the common span of two blocks,
 * else each nonempty buffer in order.
 */
struct cursor {
	const struct rsd_resident *src, *dst;
	uint64_t span;
	size_t i;     /* the buffer (0 for the span) */
	uint64_t off; /* bytes of it already handed out */
};

/* The next piece of at most max bytes (0 when none is left). */
static uint64_t cursor_next(struct cursor *c, uint64_t max, const char **src, char **dst)
{
	const char *s;
	char *d;
	uint64_t len, n;

	for (;; c->i++, c->off = 0) {
		if (c->span) {
			if (c->i)
				return 0;
			s = c->src->block;
			d = c->dst->block;
			len = c->span;
		} else {
			if (c->i >= c->src->nbuf)
				return 0;
			s = c->src->bufs[c->i].data;
			d = c->dst->bufs[c->i].data;
			len = c->src->bufs[c->i].nbytes;
		}
		if (c->off < len)
			break;
	}
	n = len - c->off < max ? len - c->off : max;
	*src = s + c->off;
	*dst = d + c->off;
	c->off += n;
	return n;
}

/* Whether the cursor has bytes left to hand out. */
static bool cursor_more(const struct cursor *c)
{
	struct cursor t = *c;
	const char *s;
	char *d;

	return cursor_next(&t, 1, &s, &d) != 0;
}

/*
 * The pieces a cursor hands out, packed into chunks of `chunk` bytes that
 * alternate between the pair's two buffers: the one walk every staged
 * copy makes (and job_alloc() counts).
 */
struct chunker {
	struct cursor *c;
	uint64_t chunk;
	uint64_t fill; /* bytes of the current chunk handed out */
	unsigned b;    /* the current chunk's buffer */
};

struct piece {
	const char *src;
	char *dst;
	uint64_t n, off; /* its bytes, and where they go in the chunk */
	unsigned b;	 /* the chunk's buffer */
	bool first;	 /* it starts a chunk */
	bool last;	 /* it ends one (full, or the copy's last piece) */
};

/* The next piece into *p; false when none is left. */
static bool chunk_next(struct chunker *k, struct piece *p)
{
	p->n = cursor_next(k->c, k->chunk - k->fill, &p->src, &p->dst);
	if (!p->n)
		return false;
	p->off = k->fill;
	p->b = k->b;
	p->first = !k->fill;
	k->fill += p->n;
	p->last = k->fill == k->chunk || !cursor_more(k->c);
	if (p->last) {
		k->fill = 0;
		k->b ^= 1;
	}
	return true;
}

/* ---- configuration -------------------------------------------------------- */

/* RSD_STAGING: "off", or a byte count with an optional K, M or G suffix
 * (binary). 0 when unset or unreadable (then *bad). */
static uint64_t env_chunk(bool *bad)
{
	const char *s = getenv("RSD_STAGING");
	unsigned long long v;
	char *end;
	int shift = 0;

	*bad = false;
	if (!s || !*s)
		return 0;
	if (!strcasecmp(s, "off"))
		return RSD_STAGING_OFF;
	if (!isdigit((unsigned char)*s))
		goto bad;
	v = strtoull(s, &end, 10);
	switch (toupper((unsigned char)*end)) {
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	default:
		break;
	}
	if (shift)
		end++;
	if (*end || !v || v > (UINT64_MAX >> 1) >> shift)
		goto bad;
	return (uint64_t)v << shift;
bad:
	*bad = true;
	return 0;
}

static int staging_locks_init(struct rsd_staging *st)
{
	int err = pthread_mutex_init(&st->lock, NULL);

	if (err)
		return err;
	err = pthread_mutex_init(&st->qlock, NULL);
	if (err)
		goto lock;
	err = pthread_cond_init(&st->qcond, NULL);
	if (err)
		goto qlock;
	err = pthread_cond_init(&st->qidle, NULL);
	if (err)
		goto qcond;
	st->tail = &st->head;
	return 0;
qcond:
	pthread_cond_destroy(&st->qcond);
qlock:
	pthread_mutex_destroy(&st->qlock);
lock:
	pthread_mutex_destroy(&st->lock);
	return err;
}

static void staging_locks_destroy(struct rsd_staging *st)
{
	pthread_cond_destroy(&st->qidle);
	pthread_cond_destroy(&st->qcond);
	pthread_mutex_destroy(&st->qlock);
	pthread_mutex_destroy(&st->lock);
}

int rsd__staging_init(struct rsd_manager *m, uint64_t nbytes)
{
	bool bad = false;
	int i, err;

	if (!nbytes)
		nbytes = env_chunk(&bad);
	if (bad)
		rsd__warn(m,
			  "RSD_STAGING=%s is neither 'off' nor a byte count (K, M or G suffix); "
			  "staging buffers of %llu bytes are used",
			  getenv("RSD_STAGING"), STAGING_DEFAULT);
	if (!nbytes)
		nbytes = STAGING_DEFAULT;
	m->staging = NULL;
	m->staging_chunk = 0;
	if (nbytes == RSD_STAGING_OFF || !m->ndevices)
		return 0;
	m->staging = rsd__calloc((size_t)m->ndevices, sizeof(*m->staging));
	if (!m->staging)
		return rsd__err(RSD_ENOMEM, "out of memory for the staging of %d device(s)",
				m->ndevices);
	for (i = 0; i < m->ndevices; i++) {
		err = staging_locks_init(&m->staging[i]);
		if (err)
			break;
	}
	if (i < m->ndevices) {
		while (i--)
			staging_locks_destroy(&m->staging[i]);
		free(m->staging);
		m->staging = NULL;
		return rsd__err(RSD_ENOMEM, "cannot initialize a staging lock: %s", strerror(err));
	}
	m->staging_chunk = nbytes;
	return 0;
}

/* ---- the pair --------------------------------------------------------------- */

/* With st->lock held: wait for what the buffer's last user queued. */
static int buffer_wait(struct rsd_manager *m, struct rsd_staging *st, unsigned b)
{
	int err;

	if (!st->ev[b])
		return 0;
	err = m->ops->event_sync(m->ops_ctx, st->ev[b]);
	if (err)
		return err; /* kept: the next holder waits for it again */
	m->ops->event_destroy(m->ops_ctx, st->ev[b]);
	st->ev[b] = NULL;
	return 0;
}

/* The buffer size a copy of n bytes wants: a power of two from
 * STAGING_MIN, at least n, at most m->staging_chunk. */
static uint64_t pair_want(const struct rsd_manager *m, uint64_t n)
{
	uint64_t want = STAGING_MIN;

	while (want < n && want < m->staging_chunk && want <= UINT64_MAX / 4)
		want <<= 1;
	return want < m->staging_chunk ? want : m->staging_chunk;
}

/*
 * With st->lock held: make the pair fit a copy of n bytes, allocating it
 * on first use or growing it. An allocation failure is no error: the copy
 * goes direct (first use) or moves through the pair as it is (growing);
 * *said is set and the failure copied to *why, for the warning made once
 * the lock is dropped. Returns 0, or a device failure waiting for the old
 * pair's work before it is freed.
 */
static int pair_get(struct rsd_manager *m, struct rsd_staging *st, uint64_t n,
		    struct rsd_error *why, bool *said)
{
	uint64_t want = pair_want(m, n);
	struct rsd_error saved;
	void *p = NULL;
	int err;

	*said = false;
	if (st->failed || (st->base && (st->size >= want || st->capped)))
		return 0;
	saved = *rsd_last_error();
	if (want > UINT64_MAX / 2)
		err = rsd__err(RSD_ENOMEM, "2 x %" PRIu64 " bytes do not fit in memory", want);
	else
		err = m->ops->alloc(m->ops_ctx, RSD_LOC_PINNED_HOST, 2 * want, &p);
	if (err) {
		*why = *rsd_last_error();
		*rsd__err_record() = saved; /* the copy goes on without it */
		*said = true;
		if (st->base)
			st->capped = true;
		else
			st->failed = true;
		return 0;
	}
	if (st->base) {
		/* Grown: the old pair goes once nothing reads or writes it. */
		err = buffer_wait(m, st, 0);
		if (!err)
			err = buffer_wait(m, st, 1);
		if (err) {
			m->ops->free(m->ops_ctx, RSD_LOC_PINNED_HOST, p, 2 * want);
			return err;
		}
		m->ops->free(m->ops_ctx, RSD_LOC_PINNED_HOST, st->base, 2 * st->size);
	}
	st->base = p;
	st->size = want;
	return 0;
}

/*
 * With st->lock held: a failed copy left work queued on the pair that its
 * buffers' events may not cover (the one that failed was an event_record)
 * and its stream would not drain. Each buffer's event becomes one
 * recorded behind all of it; without one, the pair is used no more (its
 * copies go direct) and is freed at release only.
 */
static void pair_fence(struct rsd_manager *m, struct rsd_staging *st, void *stream)
{
	struct rsd_error saved = *rsd_last_error();

	for (unsigned b = 0; b < 2 && !st->failed; b++) {
		void *ev = NULL;

		if (m->ops->event_record(m->ops_ctx, stream, &ev)) {
			st->failed = true;
			break;
		}
		if (st->ev[b])
			m->ops->event_destroy(m->ops_ctx, st->ev[b]);
		st->ev[b] = ev;
	}
	*rsd__err_record() = saved;
}

static char *buffer(struct rsd_staging *st, unsigned b)
{
	return st->base + (uint64_t)b * st->size;
}

/* ---- the two directions ------------------------------------------------------ */

/* Host to device: fill a buffer, queue its DMA, alternate. */
static int stage_in(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		    struct rsd_location to, void *stream, void **event)
{
	struct chunker k = { .c = c, .chunk = st->size };
	struct piece p;
	int err;

	while (chunk_next(&k, &p)) {
		char *buf = buffer(st, p.b) + p.off;

		if (p.first) {
			err = buffer_wait(m, st, p.b);
			if (err)
				return err;
		}
		memcpy(buf, p.src, (size_t)p.n);
		err = m->ops->copy(m->ops_ctx, p.dst, to, buf, RSD_LOC_PINNED_HOST, p.n, stream);
		if (err)
			return err;
		if (p.last) {
			err = m->ops->event_record(m->ops_ctx, stream, &st->ev[p.b]);
			if (err)
				return err;
		}
	}
	return m->ops->event_record(m->ops_ctx, stream, event);
}

/* ---- staging beside the caller ----------------------------------------------- */

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
static void worker_stop(struct rsd_staging *st)
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
static struct stage_job *job_alloc(struct rsd_staging *st, struct cursor c, uint64_t chunk)
{
	struct chunker k = { .c = &c, .chunk = chunk };
	size_t nchunks = 0, npieces = 0, need;
	struct stage_job *j;
	struct piece p;

	while (chunk_next(&k, &p)) {
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

	while (chunk_next(&k, &p)) {
		if (p.first) {
			ch = &j->chunks[j->nchunks];
			err = chunk_gate(m, j, stream, &ch->gate);
			if (err)
				return err;
			j->nchunks++;
			ch->buf = buffer(st, p.b);
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
static int stage_beside(struct rsd_manager *m, struct rsd_staging *st, struct stage_job *j,
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

/* Device to host: queue up to a chunk of DMAs into buffer b and record its
 * event; *filled gets the bytes (0: nothing was left). */
static int fill_out(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		    struct rsd_location from, void *stream, unsigned b, uint64_t *filled)
{
	const uint64_t chunk = st->size;
	uint64_t fill = 0, n;
	const char *s;
	char *d;
	int err;

	*filled = 0;
	while ((n = cursor_next(c, chunk - fill, &s, &d))) {
		if (!fill) {
			err = buffer_wait(m, st, b);
			if (err)
				return err;
		}
		err = m->ops->copy(m->ops_ctx, buffer(st, b) + fill, RSD_LOC_PINNED_HOST, s, from,
				   n, stream);
		if (err)
			return err;
		fill += n;
	}
	if (!fill)
		return 0;
	err = m->ops->event_record(m->ops_ctx, stream, &st->ev[b]);
	if (!err)
		*filled = fill;
	return err;
}

/* Copy n bytes of buffer b out to the pieces the cursor hands out next. */
static void drain_out(struct rsd_staging *st, struct cursor *c, unsigned b, uint64_t n)
{
	const char *p = buffer(st, b), *s;
	uint64_t k;
	char *d;

	while (n && (k = cursor_next(c, n, &s, &d))) {
		/* s is where the piece came from on the device: only d counts. */
		memcpy(d, p, (size_t)k);
		p += k;
		n -= k;
	}
}

static int stage_out(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		     struct rsd_location from, void *stream, void **event)
{
	struct cursor out = *c; /* the pieces, again, as chunks come back */
	uint64_t filled[2] = { 0, 0 };
	unsigned next = 0, oldest = 0, pending = 0;
	int err;

	for (;;) {
		/* Keep both buffers' DMAs in flight. */
		while (pending < 2) {
			err = fill_out(m, st, c, from, stream, next, &filled[next]);
			if (err)
				return err;
			if (!filled[next])
				break;
			next ^= 1;
			pending++;
		}
		if (!pending)
			return 0;
		err = m->ops->event_sync(m->ops_ctx, st->ev[oldest]);
		if (err)
			return err;
		drain_out(st, &out, oldest, filled[oldest]);
		if (pending == 1) {
			/* The last chunk: its event is the copy's (complete). */
			*event = st->ev[oldest];
			st->ev[oldest] = NULL;
			return 0;
		}
		m->ops->event_destroy(m->ops_ctx, st->ev[oldest]);
		st->ev[oldest] = NULL;
		oldest ^= 1;
		pending--;
	}
}

/* ---- entry points ------------------------------------------------------------ */

/* The bytes a copy moves. */
static uint64_t copy_nbytes(const struct rsd_resident *src, uint64_t span)
{
	uint64_t n = span;

	for (size_t i = 0; !span && i < src->nbuf; i++)
		n += src->bufs[i].nbytes;
	return n;
}

/* After the pair's lock is dropped: what pair_get() could not allocate
 * (size: the pair's buffers then, 0 when there is none). */
static void pair_warn(struct rsd_manager *m, struct rsd_location dev, uint64_t size, uint64_t want,
		      const struct rsd_error *why)
{
	char name[RSD_LOCATION_NAME_MAX];

	rsd_location_name(dev, name, sizeof(name));
	if (!size)
		rsd__warn(m,
			  "copies between pageable memory and %s are not staged (the driver's "
			  "pageable copy runs instead): its 2 x %" PRIu64
			  " bytes of pinned staging could not be allocated: %s",
			  name, want, why->message);
	else
		rsd__warn(m,
			  "the pinned staging of %s stays at 2 x %" PRIu64
			  " bytes (larger copies move in more chunks): growing it to 2 x %" PRIu64
			  " bytes failed: %s",
			  name, size, want, why->message);
}

int rsd__staging_copy(struct rsd_manager *m, const struct rsd_resident *src,
		      struct rsd_location from, struct rsd_resident *dst, struct rsd_location to,
		      uint64_t span, void *stream, void **event, bool *stuck)
{
	struct cursor c = { .src = src, .dst = dst, .span = span };
	struct rsd_location dev;
	struct rsd_staging *st;
	struct rsd_error why;
	uint64_t n, size;
	bool in, said;
	int err, werr;

	in = from.kind == RSD_PAGEABLE_HOST && to.kind == RSD_CUDA;
	if (!m->staging || !(in || (from.kind == RSD_CUDA && to.kind == RSD_PAGEABLE_HOST)))
		return RSD__UNSTAGED;
	dev = in ? to : from;
	n = copy_nbytes(src, span);
	/* A device the manager does not see is the driver's to refuse; a
	 * copy of no bytes has nothing to stage. */
	if (dev.device < 0 || dev.device >= m->ndevices || !n)
		return RSD__UNSTAGED;
	st = &m->staging[dev.device];
	pthread_mutex_lock(&st->lock);
	err = pair_get(m, st, n, &why, &said);
	size = st->size;
	if (!err && (!st->base || st->failed)) {
		pthread_mutex_unlock(&st->lock);
		if (said)
			pair_warn(m, dev, 0, pair_want(m, n), &why);
		return RSD__UNSTAGED;
	}
	if (!err && m->ops->gate_queue && m->ops->gate_open) {
		struct stage_job *j = job_alloc(st, c, st->size);

		/* Without memory for the job, this copy is staged here. */
		if (j) {
			struct cursor cc = c; /* c stays whole for the fallback */

			err = stage_beside(m, st, j, &cc, dev, !in, stream, event);
			if (err != RSD__UNSTAGED)
				goto out;
			err = 0; /* a device that runs work at once: staged here */
		}
	}
	if (!err)
		err = in ? stage_in(m, st, &c, to, stream, event) :
			   stage_out(m, st, &c, from, stream, event);
out:
	if (err && rsd__copy_drain(m, stream)) {
		/* What it queued may still write the destination, and the
		 * pair: the next holder must wait for it. */
		*stuck = true;
		pair_fence(m, st, stream);
	}
	werr = st->worker_errno;
	st->worker_errno = 0;
	pthread_mutex_unlock(&st->lock);
	if (said)
		pair_warn(m, dev, size, pair_want(m, n), &why);
	if (werr)
		rsd__warn(
			m,
			"a staging worker for cuda:%d cannot be started (%s): its copies from and "
			"to pageable memory are staged by the calling thread",
			dev.device, strerror(werr));
	return err;
}

void rsd__staging_release(struct rsd_manager *m)
{
	for (int i = 0; m->staging && i < m->ndevices; i++) {
		struct rsd_staging *st = &m->staging[i];
		struct rsd_error saved = *rsd_last_error();

		pthread_mutex_lock(&st->lock);
		worker_stop(st);
		for (unsigned k = 0; k < STAGING_SPARES; k++)
			free(atomic_exchange(&st->spare[k], NULL));
		for (unsigned b = 0; b < 2; b++) {
			if (!st->ev[b])
				continue;
			/* Best effort: a failure was reported by the copy that
			 * queued the work. */
			m->ops->event_sync(m->ops_ctx, st->ev[b]);
			m->ops->event_destroy(m->ops_ctx, st->ev[b]);
			st->ev[b] = NULL;
		}
		if (st->base)
			m->ops->free(m->ops_ctx, RSD_LOC_PINNED_HOST, st->base, 2 * st->size);
		st->base = NULL;
		st->size = 0;
		pthread_mutex_unlock(&st->lock);
		*rsd__err_record() = saved;
	}
}

void rsd__staging_destroy(struct rsd_manager *m)
{
	rsd__staging_release(m);
	for (int i = 0; m->staging && i < m->ndevices; i++)
		staging_locks_destroy(&m->staging[i]);
	free(m->staging);
	m->staging = NULL;
}
