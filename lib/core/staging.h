/* SPDX-License-Identifier: MIT */
/*
 * The staged copies' shared state: a device's staging pair (struct
 * rsd_staging, with its locking rules) and the walk of a copy's bytes in
 * chunks (struct cursor, struct chunker), for the three files that make
 * staged copies: staging.c (the pair, the entry points),
 * staging_direct.c (a copy staged on the calling thread) and
 * staging_worker.c (a copy handed to the device's staging worker, the
 * worker's job queue and its quiesce). Private to lib/core.
 */
#ifndef RSD_CORE_STAGING_H
#define RSD_CORE_STAGING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"

#define STAGING_DEFAULT (8ull << 20)
#define STAGING_MIN (64ull << 10)
#define STAGING_SPARES 4

struct stage_job; /* staging_worker.c */

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

/*
 * The pieces a cursor hands out, packed into chunks of `chunk` bytes that
 * alternate between the pair's two buffers: the one walk every staged
 * copy makes (and rsd__stage_job_alloc() counts).
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

/*
 * The walk itself is inline here, for staging_direct.c and
 * staging_worker.c, so that a caller's analysis sees what it relies on:
 * a walk's first piece starts a chunk.
 */

/* The next piece of at most max bytes (0 when none is left). */
static inline uint64_t rsd__cursor_next(struct cursor *c, uint64_t max, const char **src,
					char **dst)
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
static inline bool rsd__cursor_more(const struct cursor *c)
{
	struct cursor t = *c;
	const char *s;
	char *d;

	return rsd__cursor_next(&t, 1, &s, &d) != 0;
}

/* The next piece into *p; false when none is left. */
static inline bool rsd__chunk_next(struct chunker *k, struct piece *p)
{
	p->n = rsd__cursor_next(k->c, k->chunk - k->fill, &p->src, &p->dst);
	if (!p->n)
		return false;
	p->off = k->fill;
	p->b = k->b;
	p->first = !k->fill;
	k->fill += p->n;
	p->last = k->fill == k->chunk || !rsd__cursor_more(k->c);
	if (p->last) {
		k->fill = 0;
		k->b ^= 1;
	}
	return true;
}

/* ---- staging.c: the pair ------------------------------------------------- */

/* With st->lock held: wait for what the buffer's last user queued. */
int rsd__staging_buffer_wait(struct rsd_manager *m, struct rsd_staging *st, unsigned b);
/* Buffer b (0 or 1) of st's pair. */
char *rsd__staging_buffer(struct rsd_staging *st, unsigned b);

/* ---- staging_direct.c: on the calling thread, st->lock held --------------- */

int rsd__stage_in(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		  struct rsd_location to, void *stream, void **event);
int rsd__stage_out(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		   struct rsd_location from, void *stream, void **event);

/* ---- staging_worker.c: beside the caller, st->lock held ------------------- */

struct stage_job *rsd__stage_job_alloc(struct rsd_staging *st, struct cursor c, uint64_t chunk);
int rsd__stage_beside(struct rsd_manager *m, struct rsd_staging *st, struct stage_job *j,
		      struct cursor *c, struct rsd_location dev, bool out, void *stream,
		      void **event);
void rsd__staging_worker_stop(struct rsd_staging *st);

#endif /* RSD_CORE_STAGING_H */
