/* SPDX-License-Identifier: MIT */
/*
 * Linearizability against the model (reference.md §21): several threads
 * run random operations on one manager whose simulated device progresses in
 * the background, every call is logged with the writer sections it ran in
 * (rsd__lin_log_set), and the history is replayed in the order of those
 * sections against the sequential model (model.h), which must agree on
 * every result, report and state_version and on the final snapshot.
 */
#ifndef RSD_TEST_LINEARIZE_H
#define RSD_TEST_LINEARIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct lz_opts {
	uint64_t seed;
	unsigned nthreads;    /* 2..4 */
	unsigned ops;	      /* per thread */
	uint64_t delay_ns;    /* the simulated device's per-item delay */
	unsigned load_max_us; /* a source load sleeps up to this long */
	FILE *log;	      /* non-NULL: the replayed history is written here */
};

struct lz_stats {
	unsigned long runs, ops, events;
	/* Concurrent-only outcomes, each confirmed against the history:
	 * -RSD_EINUSE "a transfer is in flight", a budget or plan refused for
	 * charges in flight; calls that waited for another's transfer. */
	unsigned long inflight_inuse, inflight_budget, inflight_plan;
	/* Plans whose queued copy committed after a later action of theirs. */
	unsigned long plan_reordered;
	unsigned long codes[32]; /* [0] successes, [e] -e */
};

/* One run; 0, or -1 with a description (seed, event, the history around it). */
int lz_run(const struct lz_opts *o, struct lz_stats *st, char *why, size_t len);

#endif
