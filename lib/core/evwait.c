// SPDX-License-Identifier: MIT
/*
 * Waiting for device work, and what the device says about it.
 *
 * Every wait of the manager for an event (a waited copy, a queued copy's
 * completion, a released GPU lease's consumer streams) goes through
 * rsd__event_answer(), the one place that turns what the driver returns
 * into an answer (reference.md §8.5):
 *
 *  - the event completed: the work is over;
 *  - the wait (or query) failed: that says nothing of the work. The
 *    event's stream is drained, and only an error the event still
 *    reports after that is the work's definite failure;
 *  - the drain failed too: there is no answer. The caller keeps every
 *    byte the work may still read or write protected;
 *  - RSD_EDEVLOST from a lost device's stream is final at once (devloss.c):
 *    nothing runs there any more.
 *
 * The waits run without m->lock and can be interrupted by
 * close(FORCE | NOWAIT), which waits for nothing, other threads' waits
 * included: the close sets m->stop_waits, and a waiter that sees it leaves
 * with RSD_ECLOSED, with no answer (what the work may still touch is kept
 * allocated for the life of the process: close.c, transition.c). A driver
 * with event_wait (stream_wait for drains) is told through its stop
 * callback; without event_wait an event is waited for by event_query, spinning a little, then sleeping a growing while
 * between queries, up to WAIT_SLEEP_MAX_NS: a wait for a long copy costs
 * a few thousand wake-ups a second at most, never a core, and notices a
 * completion (or a close) within that bound. Without stream_wait a drain
 * is the driver's stream_sync, which nothing interrupts.
 */
#include <sched.h>
#include <time.h>

#include "core.h"

#define WAIT_SPINS 64
#define WAIT_SLEEP_MIN_NS 1000L
#define WAIT_SLEEP_MAX_NS 100000L

static bool stop_waiting(void *arg)
{
	struct rsd_manager *m = arg;

	return atomic_load_explicit(&m->stop_waits, memory_order_acquire);
}

void rsd__waits_stop(struct rsd_manager *m)
{
	atomic_store_explicit(&m->stop_waits, true, memory_order_release);
}

static int closed_error(struct rsd_manager *m)
{
	return rsd__err(
		RSD_ECLOSED,
		"residency manager %llu was closed (RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT) while "
		"this thread waited for the device",
		(unsigned long long)m->id);
}

/* The driver has no interruptible wait: poll the event. */
static int query_loop(struct rsd_manager *m, void *event)
{
	long sleep_ns = WAIT_SLEEP_MIN_NS;

	for (unsigned i = 0;; i++) {
		int q = m->ops->event_query(m->ops_ctx, event);

		if (q)
			return q > 0 ? 0 : q;
		if (stop_waiting(m))
			return closed_error(m);
		if (i < WAIT_SPINS) {
			sched_yield();
		} else {
			struct timespec ts = { 0, sleep_ns };

			nanosleep(&ts, NULL);
			if (sleep_ns < WAIT_SLEEP_MAX_NS)
				sleep_ns = sleep_ns * 2 < WAIT_SLEEP_MAX_NS ? sleep_ns * 2 :
									      WAIT_SLEEP_MAX_NS;
		}
	}
}

int rsd__event_wait(struct rsd_manager *m, void *event)
{
	int r;

	if (stop_waiting(m))
		return closed_error(m);
	if (!m->ops->event_wait)
		return query_loop(m, event);
	r = m->ops->event_wait(m->ops_ctx, event, stop_waiting, m);
	return r > 0 ? closed_error(m) : r;
}

int rsd__stream_drain(struct rsd_manager *m, void *stream, int dev)
{
	int err;

	if (stop_waiting(m))
		return closed_error(m);
	if (m->ops->stream_wait) {
		err = m->ops->stream_wait(m->ops_ctx, stream, stop_waiting, m);
		if (err > 0)
			return closed_error(m);
	} else {
		err = m->ops->stream_sync(m->ops_ctx, stream);
	}

	/* A stream its owner destroyed meanwhile (the driver calls it no
	 * stream) cannot be synchronized: its device can, which drains it. */
	if (err == -RSD_ETYPE && dev >= 0 && dev < m->ndevices)
		err = m->ops->device_sync(m->ops_ctx, dev);
	/* A failed stream answers before the staging workers opened the
	 * gates queued on it: what the caller frees next, a worker may still
	 * read or write (staging_worker.c). */
	if (rsd__staging_quiesce(m) == -RSD_ECLOSED)
		return -RSD_ECLOSED;
	return err;
}

int rsd__event_answer(struct rsd_manager *m, void *stream, int dev, void *event, int *failed)
{
	struct rsd_error saved;
	int e = rsd__event_wait(m, event), d, q;

	if (!e) {
		*failed = 0;
		return 0;
	}
	if (e == -RSD_ECLOSED && stop_waiting(m))
		return e;
	/* Its device was lost: the event never completes (devloss.c). */
	if (rsd__devloss_answer(m, stream, dev, e)) {
		*failed = e;
		return 0;
	}
	saved = *rsd_last_error();
	d = rsd__stream_drain(m, stream, dev);
	if (d == -RSD_ECLOSED && stop_waiting(m))
		return d;
	if (d && rsd__devloss_answer(m, stream, dev, d)) {
		*failed = d; /* the drain's record names the loss */
		return 0;
	}
	q = d ? 0 : m->ops->event_query(m->ops_ctx, event);
	if (q < 0) {
		*failed = q; /* the work's own failure, recorded by the query */
		return 0;
	}
	*rsd__err_record() = saved;
	if (q > 0) {
		*failed = 0;
		return 0;
	}
	return e; /* no answer: the drain failed (or left the event pending) */
}
