/* SPDX-License-Identifier: MIT */
/*
 * A staging worker held once, in the middle of a staged copy, to show what
 * a caller may free meanwhile. The driver's event_sync and gate_open are
 * wrapped (stall_wrap()); once armed, the first event_sync that succeeds
 * on a thread other than the test's (the staging worker's wait for a
 * buffer's previous DMA, just before it fills the buffer from the copy's
 * source) returns only after STALL_NS. stall.in says the worker may read
 * the source: from then until it opens that chunk's gate (only staging
 * workers open gates). stall_release() is a value's release that counts
 * the frees made while stall.in was set:
 *
 *	stall_wrap(&ops, base_ops); manager on &ops; value released by
 *	stall_release (ctx: its malloc'ed bytes)
 *	stall_arm(); start the not-waiting copy; stall_wait_held();
 *	lose the device, free or move the value ...
 *	check stall.freed_in_use == 0
 *
 * Header-only so every test area can use it.
 */
#ifndef RSD_TESTS_STALL_H
#define RSD_TESTS_STALL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include <rsd/rsd.h>

#define STALL_NS 200000000L

static struct {
	const struct rsd_device_ops *base;
	atomic_bool armed, in;
	atomic_int releases, freed_in_use;
	pthread_t caller; /* the test's thread: never held */
} stall;

static inline int stall_sync(void *ctx, void *event)
{
	int rc = stall.base->event_sync(ctx, event);
	bool armed = true;

	if (rc || pthread_equal(pthread_self(), stall.caller) ||
	    !atomic_compare_exchange_strong(&stall.armed, &armed, false))
		return rc;
	atomic_store(&stall.in, true);
	nanosleep(&(struct timespec){ 0, STALL_NS }, NULL);
	return rc;
}

static inline void stall_gate_open(void *ctx, void *gate, int err)
{
	atomic_store(&stall.in, false);
	stall.base->gate_open(ctx, gate, err);
}

/* ops (a copy of base, or of a wrapper of it) with the two ops wrapped. */
static inline void stall_wrap(struct rsd_device_ops *ops, const struct rsd_device_ops *base)
{
	stall.base = base;
	ops->event_sync = stall_sync;
	ops->gate_open = stall_gate_open;
}

/* Hold the next worker that gets past a buffer wait; counts reset. */
static inline void stall_arm(void)
{
	stall.caller = pthread_self();
	atomic_store(&stall.releases, 0);
	atomic_store(&stall.freed_in_use, 0);
	atomic_store(&stall.armed, true);
}

static inline void stall_wait_held(void)
{
	while (!atomic_load(&stall.in))
		nanosleep(&(struct timespec){ 0, 100000 }, NULL);
}

static inline void stall_release(void *ctx, struct rsd_resident *r)
{
	(void)r;
	if (atomic_load(&stall.in))
		atomic_fetch_add(&stall.freed_in_use, 1);
	atomic_fetch_add(&stall.releases, 1);
	free(ctx);
}

#endif
