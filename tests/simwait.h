/* SPDX-License-Identifier: MIT */
/*
 * Proving that a call blocks until simulated stream work has run.
 *
 * The simulated device in on-command mode runs queued work only when
 * somebody calls rsd_simdev_stream_complete() or rsd_simdev_complete_all().
 * A test that calls something which waits for that work (a release with
 * RSD_RELEASE_WAIT, a waiting close, a forced close's device sync, an ensure
 * on a caller's stream) starts a completer first:
 *
 *	struct simwait w;
 *
 *	simwait_start(&w, sd, stream, 100);
 *	ATF_CHECK_EQ(rsd_lease_release(l, RSD_RELEASE_WAIT), 0);
 *	ATF_CHECK(simwait_blocked(&w));
 *
 * The completer sleeps delay_ms, notes whether the call had already returned
 * (it must not have), stamps the time and completes the stream (NULL: every
 * stream). simwait_blocked() stamps the return, joins the completer and is
 * true only when the call returned after the completion began and not
 * before it. Header-only so every test area can use it.
 */
#ifndef RSD_TESTS_SIMWAIT_H
#define RSD_TESTS_SIMWAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <rsd/rsd.h>

struct simwait {
	struct rsd_simdev *sd;
	void *stream; /* NULL: rsd_simdev_complete_all() */
	unsigned delay_ms;
	atomic_bool returned;  /* the blocking call has returned */
	bool early;	       /* it had returned before the completion */
	uint64_t completed_ns; /* CLOCK_MONOTONIC, just before completing */
	uint64_t returned_ns;  /* CLOCK_MONOTONIC, when simwait_blocked() ran */
	bool started;
	pthread_t th;
};

static inline uint64_t simwait_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void *simwait_thread(void *arg)
{
	struct simwait *w = arg;
	struct timespec ts = { .tv_sec = w->delay_ms / 1000,
			       .tv_nsec = (long)(w->delay_ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
	w->early = atomic_load(&w->returned);
	w->completed_ns = simwait_now_ns();
	if (w->stream)
		rsd_simdev_stream_complete(w->sd, w->stream);
	else
		rsd_simdev_complete_all(w->sd);
	return NULL;
}

/* Complete stream (NULL: every stream) of sd from a second thread after
 * delay_ms. Returns false when the thread cannot be started. */
static inline bool simwait_start(struct simwait *w, struct rsd_simdev *sd, void *stream,
				 unsigned delay_ms)
{
	w->sd = sd;
	w->stream = stream;
	w->delay_ms = delay_ms;
	atomic_init(&w->returned, false);
	w->early = false;
	w->completed_ns = w->returned_ns = 0;
	w->started = pthread_create(&w->th, NULL, simwait_thread, w) == 0;
	return w->started;
}

/* Call right after the blocking call: true when it returned only after the
 * completer completed the work (and not before the delay ran out). */
static inline bool simwait_blocked(struct simwait *w)
{
	w->returned_ns = simwait_now_ns();
	atomic_store(&w->returned, true);
	if (!w->started)
		return false;
	pthread_join(w->th, NULL);
	w->started = false;
	return !w->early && w->returned_ns >= w->completed_ns;
}

/* Call after a call that need not block: just joins the completer. */
static inline void simwait_join(struct simwait *w)
{
	atomic_store(&w->returned, true);
	if (w->started)
		pthread_join(w->th, NULL);
	w->started = false;
}

/*
 * A pump: a second thread that keeps completing some streams (and, with
 * transfers, every device's transfer stream; with all, every stream) every
 * 100 microseconds until stopped. For tests whose subject is not the waiting
 * itself: the work the waited-for streams hold runs while the call blocks,
 * and streams not named stay on command, so pending states elsewhere remain
 * the test's to control.
 */
#define SIMPUMP_MAX 8

struct simpump {
	struct rsd_simdev *sd;
	void *streams[SIMPUMP_MAX];
	int nstreams;
	bool transfers, all;
	atomic_bool stop;
	bool started;
	pthread_t th;
};

static inline void *simpump_thread(void *arg)
{
	struct simpump *p = arg;
	const struct timespec tick = { .tv_sec = 0, .tv_nsec = 100000 };

	while (!atomic_load(&p->stop)) {
		if (p->all)
			rsd_simdev_complete_all(p->sd);
		if (p->transfers)
			rsd_simdev_stream_complete(p->sd, NULL);
		for (int i = 0; i < p->nstreams; i++)
			rsd_simdev_stream_complete(p->sd, p->streams[i]);
		nanosleep(&tick, NULL);
	}
	return NULL;
}

static inline bool simpump_start(struct simpump *p, struct rsd_simdev *sd, void *const *streams,
				 int nstreams, bool transfers, bool all)
{
	p->sd = sd;
	p->nstreams = nstreams < SIMPUMP_MAX ? nstreams : SIMPUMP_MAX;
	for (int i = 0; i < p->nstreams; i++)
		p->streams[i] = streams[i];
	p->transfers = transfers;
	p->all = all;
	atomic_init(&p->stop, false);
	p->started = pthread_create(&p->th, NULL, simpump_thread, p) == 0;
	return p->started;
}

static inline void simpump_stop(struct simpump *p)
{
	atomic_store(&p->stop, true);
	if (p->started)
		pthread_join(p->th, NULL);
	p->started = false;
}

#endif
