// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime double: how stream work makes progress (struct cs_lane
 * in cs.h).
 *
 * Background mode (the default) gives every stream an engine thread of its
 * own, started with the stream's first work: it waits until the stream has
 * had work runnable for delay_ns, then runs everything queued so far with
 * rsd_simdev_stream_complete(), as a GPU runs its streams concurrently.
 * One engine per stream, not per device, because on a GPU a stream held
 * up by a host function does not hold up the device's other streams.
 *
 * On-command mode parks the engines: only the test's
 * rsd_simdev_stream_complete() / rsd_simdev_complete_all() run work.
 * Immediate mode puts the simulated device itself in immediate mode.
 * Waiting calls block in the simulated device until whichever of these
 * runs the work.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cs.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct cs_lane *cs_lane_new(void *sim, int device)
{
	struct cs_lane *l = calloc(1, sizeof(*l));
	pthread_condattr_t ca;

	if (!l)
		return NULL;
	l->sim = sim;
	l->device = device;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&cs.lock);
	l->next = cs.lanes;
	cs.lanes = l;
	pthread_mutex_unlock(&cs.lock);
	return l;
}

/* With cs.lock held: unlink and free a lane nobody uses any more. */
static void lane_free(struct cs_lane *l)
{
	struct cs_lane **pp;

	for (pp = &cs.lanes; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	if (l->tail)
		cs.ops->event_destroy(cs.sd, l->tail);
	pthread_cond_destroy(&l->cond);
	free(l);
}

static void *engine(void *p)
{
	struct cs_lane *l = p;
	struct timespec ts;

	pthread_mutex_lock(&cs.lock);
	for (;;) {
		uint64_t target, due, now;

		if (l->done == l->queued && l->retired)
			break;
		if (l->done == l->queued || cs.mode != RSD_SIMDEV_BACKGROUND) {
			pthread_cond_wait(&l->cond, &cs.lock);
			continue;
		}
		due = l->ready_ns + cs.delay_ns;
		now = mono_ns();
		if (now < due) {
			ts.tv_sec = (time_t)(due / 1000000000ull);
			ts.tv_nsec = (long)(due % 1000000000ull);
			(void)pthread_cond_timedwait(&l->cond, &cs.lock, &ts);
			continue;
		}
		target = l->queued;
		pthread_mutex_unlock(&cs.lock);
		rsd_simdev_stream_complete(cs.sd, l->sim);
		pthread_mutex_lock(&cs.lock);
		if (l->done < target)
			l->done = target;
		if (l->done != l->queued)
			l->ready_ns = mono_ns();
	}
	lane_free(l);
	pthread_mutex_unlock(&cs.lock);
	return NULL;
}

/* With cs.lock held. */
static void engine_start(struct cs_lane *l)
{
	pthread_attr_t a;
	pthread_t t;

	if (l->engine)
		return;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, engine, l) == 0)
		l->engine = true;
	else
		fprintf(stderr, "cudasim: cannot start a stream engine; its work runs when it "
				"is waited for or completed\n");
	pthread_attr_destroy(&a);
}

void cs_lane_retire(struct cs_lane *l)
{
	pthread_mutex_lock(&cs.lock);
	l->retired = true;
	if (!l->engine)
		lane_free(l);
	else
		pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&cs.lock);
}

void cs_stream_mark(void *stream)
{
	struct cs_lane *l;
	void *ev = NULL;

	pthread_mutex_lock(&cs.lock);
	l = cs_lane_of(stream);
	if (l && cs.ops->event_record(cs.sd, stream, &ev) == 0) {
		if (l->tail)
			cs.ops->event_destroy(cs.sd, l->tail);
		l->tail = ev;
	}
	if (l) {
		if (l->queued++ == l->done)
			l->ready_ns = mono_ns();
		engine_start(l);
		pthread_cond_signal(&l->cond);
	}
	pthread_mutex_unlock(&cs.lock);
}

int cs_stream_idle(void *stream)
{
	struct cs_lane *l;
	int done = 1;

	pthread_mutex_lock(&cs.lock);
	l = cs_lane_of(stream);
	if (l && l->tail)
		done = cs.ops->event_query(cs.sd, l->tail);
	pthread_mutex_unlock(&cs.lock);
	return done;
}

cudaError_t rsd_cudasim_set_progress(enum rsd_simdev_progress mode, uint64_t delay_ns)
{
	if (mode != RSD_SIMDEV_ON_COMMAND && mode != RSD_SIMDEV_IMMEDIATE &&
	    mode != RSD_SIMDEV_BACKGROUND)
		return cudaErrorInvalidValue;
	if (!rsd_cudasim_simdev())
		return cudaErrorInitializationError;
	pthread_mutex_lock(&cs.lock);
	cs.mode = mode;
	cs.delay_ns = delay_ns;
	for (struct cs_lane *l = cs.lanes; l; l = l->next)
		pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&cs.lock);
	/* Immediate: the simulated device runs what is queued now, and the
	 * rest as it is queued. Otherwise it waits for the engines or the
	 * test. */
	rsd_simdev_set_progress(
		cs.sd, mode == RSD_SIMDEV_IMMEDIATE ? RSD_SIMDEV_IMMEDIATE : RSD_SIMDEV_ON_COMMAND,
		0);
	return cudaSuccess;
}
