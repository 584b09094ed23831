/* SPDX-License-Identifier: MIT */
/*
 * A gate: a host function queued on a stream that holds the stream (and
 * whatever thread runs it) until the test opens it, to show what still
 * progresses while one stream is held:
 *
 *	struct gate g = GATE_INIT;
 *
 *	queue gate_hold with &g on stream a (a host function)
 *	gate_wait_entered(&g);	(only where the test needs it running)
 *	... check that other streams complete, that a's later work does not ...
 *	gate_open(&g);
 *
 * Header-only so every test area can use it.
 */
#ifndef RSD_TESTS_GATE_H
#define RSD_TESTS_GATE_H

#include <pthread.h>
#include <stdbool.h>

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;    /* gate_open() was called */
	bool entered; /* gate_hold() started */
};

#define GATE_INIT                                                                 \
	{                                                                         \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false \
	}

/* The host function: notes that it started, then waits for the gate. */
static inline void gate_hold(void *arg)
{
	struct gate *g = arg;

	pthread_mutex_lock(&g->lock);
	g->entered = true;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static inline void gate_wait_entered(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->entered)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static inline void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

#endif /* RSD_TESTS_GATE_H */
