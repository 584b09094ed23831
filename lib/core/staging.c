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
 *
 * This file holds the pair (its allocation, growth and fence), the
 * configuration and the entry points; the copy staged on the calling
 * thread is in staging_direct.c, the one handed to the device's staging
 * worker (and the worker, its queue and quiesce) in staging_worker.c.
 * staging.h has struct rsd_staging, which says how the pair is locked,
 * and the walk of a copy's bytes in chunks.
 */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"
#include "staging.h"

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
int rsd__staging_buffer_wait(struct rsd_manager *m, struct rsd_staging *st, unsigned b)
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
		err = rsd__staging_buffer_wait(m, st, 0);
		if (!err)
			err = rsd__staging_buffer_wait(m, st, 1);
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

char *rsd__staging_buffer(struct rsd_staging *st, unsigned b)
{
	return st->base + (uint64_t)b * st->size;
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
		struct stage_job *j = rsd__stage_job_alloc(st, c, st->size);

		/* Without memory for the job, this copy is staged here. */
		if (j) {
			struct cursor cc = c; /* c stays whole for the fallback */

			err = rsd__stage_beside(m, st, j, &cc, dev, !in, stream, event);
			if (err != RSD__UNSTAGED)
				goto out;
			err = 0; /* a device that runs work at once: staged here */
		}
	}
	if (!err)
		err = in ? rsd__stage_in(m, st, &c, to, stream, event) :
			   rsd__stage_out(m, st, &c, from, stream, event);
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
		rsd__staging_worker_stop(st);
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
